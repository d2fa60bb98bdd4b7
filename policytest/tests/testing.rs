//! What `harness test` builds on: mocks in place of the network and programs, statement
//! coverage, and test functions told apart as passed, failed or broken.

use std::sync::Arc;

use harness_builtins::{
    Capabilities, Engine, ErrorKind, HostAllowList, Limits, Sandbox, Script, Surface, TestOutcome,
    Workspace,
};
use harness_policytest::{Coverage, Mocked, Mocks};
use serde_json::{Value, json};

fn sandbox(dir: &std::path::Path, capabilities: Capabilities) -> Sandbox {
    Sandbox::new(
        Surface::Verifier,
        Workspace::new(dir).expect("workspace"),
        capabilities,
        Limits::default(),
    )
}

fn granted() -> Capabilities {
    Capabilities {
        hosts: HostAllowList::new(&["api.example.com".to_owned()]).expect("hosts"),
        programs: vec!["no-such-program-anywhere".to_owned()],
        ..Capabilities::read_only()
    }
}

fn mocks() -> Mocks {
    Mocks::from_json(
        Some(&json!({
            "https://api.example.com/a": {"status": 201, "body": "made", "headers": {"X-Id": "7"}},
            "https://api.example.com/down": {"error": "connection refused"},
            "https://api.example.com/slow": {"error": "timed out", "error_kind": "timeout"},
        })),
        Some(&json!({"no-such-program-anywhere": {"exit_code": 3, "stdout": "out"}})),
    )
    .expect("valid mocks")
}

fn mocked(mocks: Mocks) -> Arc<Mocked> {
    Arc::new(Mocked {
        mocks,
        coverage: None,
    })
}

fn call(sandbox: &Sandbox, source: &str) -> Result<Value, harness_builtins::Error> {
    let script = Script::compile(&Engine::new(), sandbox, "s.star", source, &[])?;
    script.call(sandbox, "run", &[]).map(|out| out.value)
}

/// Mocked answers come back in the shapes the real builtins return, and nothing real happens:
/// the program does not exist and the host does not resolve.
#[test]
fn mocks_answer_in_the_real_shapes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let sandbox = sandbox(dir.path(), granted()).with_interceptor(mocked(mocks()));
    let out = call(
        &sandbox,
        r#"def run():
    a = http.get("https://api.example.com/a")
    d = http.post("https://api.example.com/down", json = {})
    s = http.get("https://api.example.com/slow")
    e = exec.run(["no-such-program-anywhere", "x"])
    return [a["status"], a["ok"], a["body"], a["headers"]["x-id"], a["error_kind"], d["status"], d["error"], d["error_kind"], s["error_kind"], e["exit_code"], e["stdout"]]
"#,
    )
    .expect("mocked");
    assert_eq!(
        out,
        json!([
            201,
            true,
            "made",
            "7",
            null,
            0,
            "connection refused",
            "connect",
            "timeout",
            3,
            "out"
        ])
    );
}

/// The sandbox still decides first: a mocked host or program the script may not reach is a
/// sandbox violation; a URL without a mock is an error naming it, never a real request.
#[test]
fn mocks_do_not_widen_the_sandbox_and_unmocked_is_an_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let narrow = sandbox(dir.path(), Capabilities::read_only()).with_interceptor(mocked(mocks()));
    let err = call(
        &narrow,
        "def run():\n    return http.get(\"https://api.example.com/a\")\n",
    )
    .expect_err("not allowed");
    assert_eq!(err.kind(), ErrorKind::Sandbox, "{err}");
    let err = call(
        &narrow,
        "def run():\n    return exec.run([\"no-such-program-anywhere\"])\n",
    )
    .expect_err("not allowed");
    assert_eq!(err.kind(), ErrorKind::Sandbox, "{err}");
    let open = sandbox(dir.path(), granted()).with_interceptor(mocked(mocks()));
    let err = call(
        &open,
        "def run():\n    return http.get(\"https://api.example.com/b\")\n",
    )
    .expect_err("unmocked");
    assert!(
        err.message()
            .contains("no mock for https://api.example.com/b in this test"),
        "{err}"
    );
}

/// Malformed mocks are refused with the URL or program and the key.
#[test]
fn malformed_mocks_are_named() {
    for (http, exec, needle) in [
        (
            json!({"u": {"status": 42}}),
            json!(null),
            "`status` must be an HTTP status code",
        ),
        (
            json!({"u": {"staus": 200}}),
            json!(null),
            "unknown key \"staus\"",
        ),
        (
            json!({"u": {"error": "x", "status": 500}}),
            json!(null),
            "`error` is a network failure",
        ),
        (
            json!({"u": {"error": "x", "error_kind": "dns"}}),
            json!(null),
            "`error_kind` is \"dns\"; use one of timeout, connect, body, redirects, request",
        ),
        (
            json!({"u": {"status": 200, "error_kind": "timeout"}}),
            json!(null),
            "`error_kind` \"timeout\" without `error`",
        ),
        (
            json!([]),
            json!(null),
            "`http=` must be a dict keyed by URL",
        ),
        (
            json!(null),
            json!({"p": {"exit_code": "0"}}),
            "`exit_code` must be an int",
        ),
    ] {
        let err = Mocks::from_json(Some(&http), Some(&exec)).expect_err(needle);
        assert!(err.contains(needle), "{err}");
    }
}

/// Coverage counts the statement lines that ran, across compile and calls; comments, `pass`
/// and docstrings are not statements.
#[test]
fn coverage_counts_statement_lines() {
    let dir = tempfile::tempdir().expect("tempdir");
    let coverage = Arc::new(Coverage::new());
    let sandbox =
        sandbox(dir.path(), Capabilities::read_only()).with_interceptor(Arc::new(Mocked {
            mocks: Mocks::default(),
            coverage: Some(Arc::clone(&coverage)),
        }));
    let source = r#"LIMIT = 3
# a comment
def run(n):
    """What it does."""
    if n > LIMIT:
        return "big"
    pass
    return "small"
"#;
    let script =
        Script::compile(&Engine::new(), &sandbox, "c.star", source, &[]).expect("compiles");
    script.call(&sandbox, "run", &[&json!(1)]).expect("runs");
    let scripts = coverage.scripts();
    let c = &scripts["c.star"];
    assert_eq!(
        c.statements.iter().copied().collect::<Vec<_>>(),
        [1, 3, 5, 6, 8]
    );
    assert_eq!(c.covered.iter().copied().collect::<Vec<_>>(), [1, 3, 5, 8]);
    script.call(&sandbox, "run", &[&json!(5)]).expect("runs");
    assert!(coverage.scripts()["c.star"].covered.contains(&6));
}

/// A test function passes, fails (an assertion, `fail`, returning False: with the line) or
/// breaks (anything else).
#[test]
fn test_functions_pass_fail_or_break() {
    let dir = tempfile::tempdir().expect("tempdir");
    let engine = Engine::with_extension(harness_policytest::register);
    let sandbox = Sandbox::new(
        Surface::Test,
        Workspace::new(dir.path()).expect("workspace"),
        Capabilities::default(),
        Limits::default(),
    );
    let source = r#"def test_ok():
    assert_eq([1, 2], [1, 2])
    assert_ne(1, 2)
    assert_true("x")
    assert_contains({"a": 1}, "a")

def test_eq():
    assert_eq({"a": 1}, {"a": 2}, msg = "dicts")

def test_contains():
    assert_contains("abc", "z")

def test_false():
    return False

def test_broken():
    return 1 + "a"

def test_helper_outside_harness_test():
    verifier("x.star")
"#;
    let script = Script::compile(&engine, &sandbox, "t_test.star", source, &[]).expect("compiles");
    assert_eq!(
        script.functions(),
        [
            "test_ok",
            "test_eq",
            "test_contains",
            "test_false",
            "test_broken",
            "test_helper_outside_harness_test"
        ]
    );
    let outcome = |name| script.run_test(&sandbox, name).0;
    assert!(matches!(outcome("test_ok"), TestOutcome::Passed));
    match outcome("test_eq") {
        TestOutcome::Failed { message, location } => {
            assert_eq!(message, r#"dicts: assert_eq: {"a": 1} != {"a": 2}"#);
            assert_eq!(location.map(|l| l.line), Some(8));
        }
        other => panic!("{other:?}"),
    }
    match outcome("test_contains") {
        TestOutcome::Failed { message, .. } => {
            assert_eq!(message, r#"assert_contains: "z" not in "abc""#);
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(outcome("test_false"), TestOutcome::Failed { .. }));
    match outcome("test_broken") {
        TestOutcome::Broken(e) => {
            assert_eq!(e.kind(), ErrorKind::Runtime);
            assert_eq!(e.location().map(|l| l.line), Some(17));
        }
        other => panic!("{other:?}"),
    }
    match outcome("test_helper_outside_harness_test") {
        TestOutcome::Broken(e) => assert!(e.message().contains("harness test"), "{e}"),
        other => panic!("{other:?}"),
    }
}
