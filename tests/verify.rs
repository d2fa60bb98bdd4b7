//! `harness verify`: the verifier contract (DESIGN §4.3), exit codes, `--json`, args, the sandbox
//! and the script limits, as a user of the binary sees them.

use serde_json::{Value, json};

use crate::util::{Output, TempDir, closed_port, harness, keys};
use harness_testkit::web::WebServer;

/// A result as a delegate's attempt would have produced it (DESIGN §4.1).
const RESULT: &str = r#"{
  "id": "d-test",
  "attempt": 1,
  "response": "Done, I created hello.txt",
  "tool_calls": [{"id": "call_1", "name": "write_file", "arguments": {"path": "hello.txt", "content": "hi"}}],
  "tool_results": [{"call_id": "call_1", "name": "write_file", "content": "wrote 2 bytes", "is_error": false}]
}"#;

/// A temporary directory holding `verify.star` (with `source`) and `result.json`.
fn setup(source: &str) -> TempDir {
    let dir = TempDir::new();
    dir.write("verify.star", source);
    dir.write("result.json", RESULT);
    dir
}

/// Runs `harness verify verify.star --result result.json --workdir DIR [extra...]` in `dir`.
fn verify(dir: &TempDir, extra: &[&str]) -> Output {
    harness([
        "verify",
        "verify.star",
        "--result",
        "result.json",
        "--workdir",
    ])
    .args([dir.path()])
    .args(extra)
    .current_dir(dir.path())
    .run()
}

/// The keys of the `harness verify --json` object: issue 2's `{verified, reason, error}`, plus
/// `reasons` and `result` added by the hooks issue.
const KEYS: [&str; 5] = ["error", "reason", "reasons", "result", "verified"];

/// Runs with `--json` and checks the object has exactly the contract's keys.
fn verify_json(dir: &TempDir, extra: &[&str]) -> (Output, Value) {
    let mut args = vec!["--json"];
    args.extend_from_slice(extra);
    let out = verify(dir, &args);
    let value = out.json();
    assert_eq!(keys(&value), KEYS, "{out:?}");
    (out, value)
}

/// Runs a verifier whose `run` must be a hard error, and returns the error message.
#[track_caller]
fn expect_broken(dir: &TempDir, extra: &[&str]) -> String {
    let (out, value) = verify_json(dir, extra);
    out.expect_code(3);
    assert_eq!(value["verified"], json!(false), "{out:?}");
    assert_eq!(value["error"]["kind"], json!("verifier"), "{out:?}");
    assert_eq!(keys(&value["error"]), ["kind", "message"], "{out:?}");
    value["error"]["message"]
        .as_str()
        .expect("the message is a string")
        .to_owned()
}

/// Runs a harness invocation that must fail as a usage/configuration error, and returns the
/// message.
#[track_caller]
fn expect_config(out: &Output) -> String {
    out.expect_code(2);
    let value = out.json();
    assert_eq!(keys(&value), KEYS, "{out:?}");
    assert_eq!(value["verified"], json!(false), "{out:?}");
    assert_eq!(value["error"]["kind"], json!("config"), "{out:?}");
    value["error"]["message"]
        .as_str()
        .expect("the message is a string")
        .to_owned()
}

fn script(body: &str) -> String {
    format!("def run(result):\n    {body}\n")
}

#[test]
fn every_accepted_return_form() {
    // (what `run` returns, exit code, verified, reason)
    let cases: &[(&str, i32, bool, Option<&str>)] = &[
        (
            r#"json.encode({"verified": True, "reason": "looks fine"})"#,
            0,
            true,
            Some("looks fine"),
        ),
        (
            r#"json.encode({"verified": False, "reason": "no file"})"#,
            1,
            false,
            Some("no file"),
        ),
        (r#"{"verified": True, "reason": ""}"#, 0, true, Some("")),
        (r#"{"verified": True}"#, 0, true, Some("")),
        (
            r#"{"verified": False, "reason": "hello.txt is missing"}"#,
            1,
            false,
            Some("hello.txt is missing"),
        ),
        ("True", 0, true, Some("")),
        ("False", 1, false, Some("verifier returned False")),
        // An empty reason on failure gets a generic one (checked below: non-empty).
        (r#"{"verified": False, "reason": ""}"#, 1, false, None),
        (r#"{"verified": False}"#, 1, false, None),
        (r#"json.encode({"verified": False})"#, 1, false, None),
    ];
    for (returned, code, verified, reason) in cases {
        let dir = setup(&script(&format!("return {returned}")));
        let (out, value) = verify_json(&dir, &[]);
        assert_eq!(out.code, *code, "returning {returned}:\n{out:?}");
        assert_eq!(value["verified"], json!(verified), "{returned}");
        assert_eq!(value["error"], Value::Null, "{returned}");
        let got = value["reason"].as_str().expect("reason is a string");
        match reason {
            Some(reason) => assert_eq!(got, *reason, "{returned}"),
            None => assert!(
                !got.trim().is_empty(),
                "{returned}: a failure must carry a reason"
            ),
        }
        // `reasons` lists the failure's reason with its source; `result` is the result judged.
        let expected_reasons = if *verified {
            json!([])
        } else {
            json!([format!("verify: {got}")])
        };
        assert_eq!(value["reasons"], expected_reasons, "{returned}");
        let recorded: Value = serde_json::from_str(RESULT).expect("RESULT is JSON");
        assert_eq!(
            value["result"]["response"], recorded["response"],
            "{returned}"
        );
        assert_eq!(
            value["result"]["tool_calls"], recorded["tool_calls"],
            "{returned}"
        );
    }
}

#[test]
fn human_output_says_verified_or_not_and_why() {
    let dir = setup(&script("return True"));
    let out = verify(&dir, &[]);
    out.expect_code(0);
    assert_eq!(out.stdout.trim(), "verified", "{out:?}");

    let dir = setup(&script(
        r#"return {"verified": False, "reason": "hello.txt is missing"}"#,
    ));
    let out = verify(&dir, &[]);
    out.expect_code(1);
    assert_eq!(
        out.stdout.trim(),
        "not verified: hello.txt is missing",
        "{out:?}"
    );

    let dir = setup(&script("return None"));
    let out = verify(&dir, &[]);
    out.expect_code(3).expect_stderr_kind("verifier");
    assert!(out.stdout.is_empty(), "{out:?}");
}

#[test]
fn every_rejected_return_form_is_a_broken_verifier() {
    let cases = [
        "None",
        "3",
        "1.5",
        "[True]",
        r#"{"reason": "no verified key"}"#,
        r#"{"verified": "yes"}"#,
        r#"{"verified": 1}"#,
        r#"{"verified": True, "reason": 3}"#,
        r#"{"verified": True, "extra": 1}"#,
        r#""this is not json""#,
        r#""[true]""#,
        r#"json.encode({"reason": "x"})"#,
    ];
    for returned in cases {
        let dir = setup(&script(&format!("return {returned}")));
        let message = expect_broken(&dir, &[]);
        assert!(
            message.contains("verify.star"),
            "{returned}: the message names the script: {message}"
        );
    }
}

#[test]
fn a_script_without_run_is_a_broken_verifier() {
    let dir = setup("def check(result):\n    return True\n");
    let message = expect_broken(&dir, &[]);
    assert!(message.contains("verify.star"), "{message}");
    assert!(message.contains("run"), "{message}");
}

#[test]
fn a_syntax_error_names_script_line_and_column() {
    let dir = setup("def run(result):\n    return True\n\nx = (1 +\n");
    let message = expect_broken(&dir, &[]);
    assert!(
        has_location(&message, "verify.star"),
        "expected verify.star:LINE:COL in {message}"
    );
}

#[test]
fn a_runtime_error_names_script_line_and_column() {
    let dir = setup("def run(result):\n    n = 1\n    return n + \"a\"\n");
    let message = expect_broken(&dir, &[]);
    assert!(message.contains("verify.star:3:"), "{message}");
    assert!(has_location(&message, "verify.star"), "{message}");

    // `fail()` is a runtime error too, and its message reaches the user.
    let dir = setup("def run(result):\n    fail(\"the check itself broke\")\n");
    let message = expect_broken(&dir, &[]);
    assert!(message.contains("verify.star:2:"), "{message}");
    assert!(message.contains("the check itself broke"), "{message}");
}

/// Returns true when `message` contains `name:LINE:COL` with numeric line and column.
fn has_location(message: &str, name: &str) -> bool {
    message.match_indices(name).any(|(i, _)| {
        let rest = &message[i + name.len()..];
        let mut parts = rest.splitn(4, ':');
        parts.next() == Some("")
            && parts
                .next()
                .is_some_and(|l| !l.is_empty() && l.chars().all(|c| c.is_ascii_digit()))
            && parts.next().is_some_and(|c| {
                let digits: String = c.chars().take_while(char::is_ascii_digit).collect();
                !digits.is_empty()
            })
    })
}

#[test]
fn the_verifier_sees_the_result_as_recorded() {
    let dir = setup(&script(
        r#"return {"verified": result["attempt"] == 1
            and result["response"] == "Done, I created hello.txt"
            and result["tool_calls"][0]["arguments"]["path"] == "hello.txt"
            and result["tool_results"][0]["is_error"] == False
            and result["parent_id"] == None, "reason": json.encode(result)}"#,
    ));
    let out = verify(&dir, &[]);
    out.expect_code(0);
}

#[test]
fn optional_result_fields_default_to_empty() {
    let dir = setup(&script(
        r#"return {"verified": result["attempt"] == 0 and result["tool_calls"] == [] and result["tool_results"] == [], "reason": "defaults"}"#,
    ));
    dir.write("result.json", r#"{"id": "d-1", "response": "hi"}"#);
    verify(&dir, &[]).expect_code(0);
}

#[test]
fn result_from_stdin() {
    let dir = setup(&script(
        r#"return {"verified": result["response"] == "from stdin", "reason": "got " + result["response"]}"#,
    ));
    let out = harness(["verify", "verify.star", "--result", "-", "--json"])
        .current_dir(dir.path())
        .stdin(r#"{"id": "d-1", "response": "from stdin"}"#)
        .run();
    out.expect_code(0);
    assert_eq!(out.json()["verified"], json!(true));
}

#[test]
fn arg_values_are_json_when_they_parse_else_strings() {
    let dir = setup(&script(
        r#"return {"verified": args["k"] == 3 and args["s"] == "abc" and args["b"] == True and args["o"] == {"a": [1]}, "reason": json.encode(args)}"#,
    ));
    let out = verify(
        &dir,
        &[
            "--arg",
            "k=3",
            "--arg",
            "s=abc",
            "--arg",
            "b=true",
            "--arg",
            r#"o={"a": [1]}"#,
        ],
    );
    out.expect_code(0);

    // A value that is not JSON stays a string, even if it looks almost numeric.
    let dir = setup(&script(
        r#"return {"verified": args["k"] == "3x", "reason": json.encode(args)}"#,
    ));
    verify(&dir, &["--arg", "k=3x"]).expect_code(0);
}

#[test]
fn args_default_to_an_empty_dict() {
    let dir = setup(&script(
        r#"return {"verified": args == {}, "reason": json.encode(args)}"#,
    ));
    verify(&dir, &[]).expect_code(0);
}

#[test]
fn args_file_and_arg_overrides() {
    let dir = setup(&script(
        r#"return {"verified": args["path"] == "hello.txt" and args["n"] == 5, "reason": json.encode(args)}"#,
    ));
    dir.write("args.json", r#"{"path": "hello.txt", "n": 1}"#);
    let out = verify(&dir, &["--args-file", "args.json", "--arg", "n=5"]);
    out.expect_code(0);
}

#[test]
fn bad_inputs_are_configuration_errors() {
    let dir = setup(&script("return True"));
    dir.write("bad.json", "{not json");
    dir.write("array.json", "[1, 2]");
    dir.write("no_response.json", r#"{"id": "d-1"}"#);
    let cases: &[(&[&str], &str)] = &[
        // (arguments after `verify`, text the message must contain)
        (&["missing.star", "--result", "result.json"], "missing.star"),
        (&["verify.star", "--result", "missing.json"], "missing.json"),
        (&["verify.star", "--result", "bad.json"], "bad.json"),
        (&["verify.star", "--result", "array.json"], "array.json"),
        (&["verify.star", "--result", "no_response.json"], "response"),
        (
            &["verify.star", "--result", "result.json", "--arg", "novalue"],
            "--arg",
        ),
        (
            &["verify.star", "--result", "result.json", "--arg", "=3"],
            "--arg",
        ),
        (
            &[
                "verify.star",
                "--result",
                "result.json",
                "--args-file",
                "missing-args.json",
            ],
            "missing-args.json",
        ),
        (
            &[
                "verify.star",
                "--result",
                "result.json",
                "--args-file",
                "array.json",
            ],
            "array.json",
        ),
        (
            &[
                "verify.star",
                "--result",
                "result.json",
                "--args-file",
                "bad.json",
            ],
            "bad.json",
        ),
        (
            &[
                "verify.star",
                "--result",
                "result.json",
                "--workdir",
                "no-such-dir",
            ],
            "no-such-dir",
        ),
        (
            &[
                "verify.star",
                "--result",
                "result.json",
                "--allow-host",
                "http://x.example/path",
            ],
            "--allow-host",
        ),
    ];
    for (args, needle) in cases {
        let out = harness(["verify"])
            .args(*args)
            .args(["--json"])
            .current_dir(dir.path())
            .run();
        let message = expect_config(&out);
        assert!(
            message.contains(needle),
            "{args:?}: expected {needle:?} in {message}"
        );
    }
}

#[test]
fn a_mistyped_result_field_is_a_configuration_error() {
    let dir = setup(&script("return True"));
    dir.write(
        "typo.json",
        r#"{"id": "d-1", "response": "hi", "attempt": "x"}"#,
    );
    let out = harness(["verify", "verify.star", "--result", "typo.json", "--json"])
        .current_dir(dir.path())
        .run();
    expect_config(&out);
}

#[test]
fn a_mistyped_result_field_is_named() {
    let dir = setup(&script("return True"));
    let cases = [
        (
            r#"{"id": "d-1", "response": "hi", "attempt": "x"}"#,
            "attempt",
        ),
        (r#"{"id": "d-1", "response": 5}"#, "response"),
        (
            r#"{"id": "d-1", "response": "hi", "tool_calls": [{"id": "c", "name": "w", "arguments": "{}"}]}"#,
            "arguments",
        ),
    ];
    for (text, field) in cases {
        dir.write("typo.json", text);
        let out = harness(["verify", "verify.star", "--result", "typo.json", "--json"])
            .current_dir(dir.path())
            .run();
        let message = expect_config(&out);
        assert!(
            message.contains(field),
            "{text}: expected the field {field:?} in {message}"
        );
    }
}

#[test]
fn usage_errors_exit_2() {
    // Missing --result, and an unknown flag: clap's own usage errors.
    let dir = setup(&script("return True"));
    let out = harness(["verify", "verify.star"])
        .current_dir(dir.path())
        .run();
    out.expect_code(2);
    let out = harness([
        "verify",
        "verify.star",
        "--result",
        "result.json",
        "--frobnicate",
    ])
    .current_dir(dir.path())
    .run();
    out.expect_code(2);
}

// --- the sandbox ---------------------------------------------------------------------------------

/// A verifier that stats `args["p"]`.
const STAT: &str = "def run(result):\n    return {\"verified\": fs.stat(args[\"p\"]) != None, \"reason\": \"missing \" + args[\"p\"]}\n";

#[test]
fn fs_paths_inside_the_workdir_are_readable() {
    let dir = setup(STAT);
    dir.write("ws/hello.txt", "hi\n");
    let ws = dir.join("ws");
    let abs = ws.join("hello.txt");
    let inside = abs.to_str().expect("UTF-8 path");
    for path in ["hello.txt", "./hello.txt", "sub/../hello.txt", inside] {
        let out = harness(["verify", "verify.star", "--result", "result.json", "--json"])
            .args(["--workdir", ws.to_str().expect("UTF-8 path")])
            .args(["--arg", &format!("p={path}")])
            .current_dir(dir.path())
            .run();
        out.expect_code(0);
    }
    // A missing file is an answer (not verified), not an error.
    let (out, value) = verify_json(&dir, &["--arg", "p=nothing-here.txt"]);
    out.expect_code(1);
    assert_eq!(value["reason"], json!("missing nothing-here.txt"));
}

#[test]
fn fs_escapes_are_refused() {
    let dir = setup(STAT);
    let ws = dir.join("ws");
    std::fs::create_dir_all(&ws).expect("mkdir");
    dir.write("secret.txt", "outside the workspace");
    let outside = dir.join("secret.txt");
    let cases = [
        "../secret.txt".to_owned(),
        "a/../../secret.txt".to_owned(),
        outside.to_str().expect("UTF-8 path").to_owned(),
    ];
    for path in cases {
        let out = harness(["verify", "verify.star", "--result", "result.json", "--json"])
            .args(["--workdir", ws.to_str().expect("UTF-8 path")])
            .args(["--arg", &format!("p={path}")])
            .current_dir(dir.path())
            .run();
        out.expect_code(3);
        let value = out.json();
        assert_eq!(value["error"]["kind"], json!("verifier"), "{path}: {out:?}");
        let message = value["error"]["message"].as_str().expect("a message");
        assert!(message.contains(&path), "{path}: {message}");
    }
}

#[cfg(unix)]
#[test]
fn a_symlink_escape_is_refused() {
    let dir = setup(STAT);
    let ws = dir.join("ws");
    std::fs::create_dir_all(&ws).expect("mkdir");
    dir.write("outside/secret.txt", "outside the workspace");
    std::os::unix::fs::symlink(dir.join("outside"), ws.join("link")).expect("symlink");
    std::os::unix::fs::symlink(dir.join("outside/secret.txt"), ws.join("file-link"))
        .expect("symlink");
    for path in ["link/secret.txt", "file-link", "link"] {
        let out = harness(["verify", "verify.star", "--result", "result.json", "--json"])
            .args(["--workdir", ws.to_str().expect("UTF-8 path")])
            .args(["--arg", &format!("p={path}")])
            .current_dir(dir.path())
            .run();
        out.expect_code(3);
        assert_eq!(out.json()["error"]["kind"], json!("verifier"), "{path}");
    }
    // A link that stays inside the workspace is fine.
    dir.write("ws/real.txt", "hi");
    std::os::unix::fs::symlink(ws.join("real.txt"), ws.join("inner-link")).expect("symlink");
    let out = harness(["verify", "verify.star", "--result", "result.json", "--json"])
        .args(["--workdir", ws.to_str().expect("UTF-8 path")])
        .args(["--arg", "p=inner-link"])
        .current_dir(dir.path())
        .run();
    out.expect_code(0);
}

/// A reachability verifier: status 0 means the endpoint is down.
const REACH: &str = r#"def run(result):
    r = http.get(args["url"], timeout=5)
    if r["status"] == 0:
        return {"verified": False, "reason": "endpoint is down: " + r["error"]}
    if not r["ok"]:
        return {"verified": False, "reason": "endpoint answered %d" % r["status"]}
    return {"verified": r["body"] == "ok", "reason": "unexpected body " + r["body"]}
"#;

#[test]
fn http_to_an_allowed_loopback_server() {
    let server = WebServer::start();
    let dir = setup(REACH);
    let url = format!("url={}", server.url("/health"));
    let (out, value) = verify_json(&dir, &["--arg", &url, "--allow-host", "127.0.0.1"]);
    out.expect_code(0);
    assert_eq!(value["verified"], json!(true));

    let url = format!("url={}", server.url("/status/503"));
    let (out, value) = verify_json(&dir, &["--arg", &url, "--allow-host", "127.0.0.1"]);
    out.expect_code(1);
    assert_eq!(value["reason"], json!("endpoint answered 503"));
}

#[test]
fn a_down_endpoint_is_a_verdict_not_an_error() {
    let dir = setup(REACH);
    let url = format!("url=http://127.0.0.1:{}/health", closed_port());
    let (out, value) = verify_json(&dir, &["--arg", &url, "--allow-host", "127.0.0.1"]);
    out.expect_code(1);
    assert_eq!(value["error"], Value::Null);
    let reason = value["reason"].as_str().expect("a reason");
    assert!(reason.starts_with("endpoint is down: "), "{reason}");
}

#[test]
fn a_host_not_on_the_allow_list_is_refused() {
    let server = WebServer::start();
    let dir = setup(REACH);
    // No hosts at all.
    let url = format!("url={}", server.url("/health"));
    let message = expect_broken(&dir, &["--arg", &url]);
    assert!(message.contains("127.0.0.1"), "{message}");
    // Another host listed. (Refused before any connection is made, so no network is touched.)
    let message = expect_broken(
        &dir,
        &[
            "--arg",
            "url=http://blocked.example/health",
            "--allow-host",
            "allowed.example",
        ],
    );
    assert!(message.contains("blocked.example"), "{message}");
}

#[test]
fn a_redirect_to_a_disallowed_host_is_refused() {
    let server = WebServer::start();
    let dir = setup(REACH);
    let url = format!(
        "url={}",
        server.url("/redirect?to=http://blocked.example/health")
    );
    let message = expect_broken(&dir, &["--arg", &url, "--allow-host", "127.0.0.1"]);
    assert!(message.contains("blocked.example"), "{message}");

    // A redirect that stays on the allowed host is followed.
    let url = format!(
        "url={}",
        server.url(&format!("/redirect?to={}", server.url("/health")))
    );
    let (out, value) = verify_json(&dir, &["--arg", &url, "--allow-host", "127.0.0.1"]);
    out.expect_code(0);
    assert_eq!(value["verified"], json!(true));
}

#[test]
fn private_addresses_need_an_exact_entry() {
    let server = WebServer::start();
    let dir = setup(REACH);
    let url = format!("url={}", server.url("/health"));
    for pattern in ["*", "127.0.0.*"] {
        let message = expect_broken(&dir, &["--arg", &url, "--allow-host", pattern]);
        assert!(message.contains("127.0.0.1"), "{pattern}: {message}");
    }
    // `localhost` resolves to a loopback address; naming it exactly would open it, a wildcard
    // does not.
    let url = format!(
        "url={}",
        server.url("/health").replace("127.0.0.1", "localhost")
    );
    expect_broken(&dir, &["--arg", &url, "--allow-host", "*"]);
}

// --- limits --------------------------------------------------------------------------------------

#[test]
fn a_runaway_loop_hits_a_limit() {
    let dir = setup(
        "def run(result):\n    n = 0\n    for i in range(100000):\n        for j in range(100000):\n            n += 1\n    return n > 0\n",
    );
    let message = expect_broken(&dir, &[]);
    assert!(
        message.contains("max_steps") || message.contains("timeout"),
        "the message names the limit: {message}"
    );
}

#[test]
fn an_ever_growing_list_hits_a_limit() {
    let dir = setup(
        "def run(result):\n    xs = []\n    for i in range(100000):\n        for j in range(100000):\n            xs.append(\"abcdefghij\" * 10)\n    return len(xs) > 0\n",
    );
    let message = expect_broken(&dir, &[]);
    assert!(
        message.contains("max_heap_bytes") || message.contains("max_steps"),
        "the message names the limit: {message}"
    );
}

#[test]
fn unbounded_recursion_hits_a_limit() {
    let dir = setup("def f(n):\n    return f(n + 1)\n\ndef run(result):\n    return f(0)\n");
    let message = expect_broken(&dir, &[]);
    assert!(message.contains("verify.star"), "{message}");
}

// --- exec and env --------------------------------------------------------------------------------

const ECHO: &str = r#"def run(result):
    r = exec.run(["echo", "hello"])
    return {"verified": r["exit_code"] == 0 and r["stdout"] == "hello\n", "reason": json.encode(r)}
"#;

#[test]
fn exec_is_refused_without_allow_exec() {
    let dir = setup(ECHO);
    let message = expect_broken(&dir, &[]);
    assert!(message.contains("echo"), "{message}");
    assert!(message.contains("--allow-exec"), "{message}");
    // Allowing another program does not allow this one.
    expect_broken(&dir, &["--allow-exec", "true"]);
}

#[test]
fn exec_runs_an_allowed_program() {
    let dir = setup(ECHO);
    let (out, value) = verify_json(&dir, &["--allow-exec", "echo"]);
    out.expect_code(0);
    assert_eq!(value["verified"], json!(true));
}

/// `harness verify` starts an allowed program as `harness run` would: confined where bubblewrap
/// works (the workspace writable, nothing outside it), not as the user.
#[cfg(unix)]
#[test]
fn an_allowed_program_runs_confined() {
    if !crate::util::confinement_works() {
        return;
    }
    let outside = crate::util::outside_tmp("verify-outside-");
    let marker = outside.path().join("escaped.txt");
    let dir = setup(&format!(
        "def run(result):\n    r = exec.run([\"sh\", \"-c\", \"echo x > {}; echo x > inside.txt\"])\n    return {{\"verified\": True, \"reason\": r[\"stderr\"]}}\n",
        marker.display()
    ));
    let (out, value) = verify_json(&dir, &["--allow-exec", "sh"]);
    out.expect_code(0);
    assert_eq!(value["verified"], json!(true), "{out:?}");
    assert!(
        dir.join("inside.txt").exists(),
        "the program did not run: {out:?}"
    );
    assert!(
        !marker.exists(),
        "an allowed program wrote outside the workspace"
    );
}

#[test]
fn env_is_refused_unless_allowed() {
    let dir = setup(
        "def run(result):\n    return {\"verified\": env.get(\"HARNESS_TEST_VAR\") == \"set\", \"reason\": \"not set\"}\n",
    );
    let out = harness(["verify", "verify.star", "--result", "result.json", "--json"])
        .env("HARNESS_TEST_VAR", "set")
        .current_dir(dir.path())
        .run();
    out.expect_code(3);
    assert_eq!(out.json()["error"]["kind"], json!("verifier"));

    let out = harness(["verify", "verify.star", "--result", "result.json", "--json"])
        .args(["--allow-env", "HARNESS_TEST_VAR"])
        .env("HARNESS_TEST_VAR", "set")
        .current_dir(dir.path())
        .run();
    out.expect_code(0);
}

/// A verifier that loops 200,000 times: within the default step budget, over 50,000.
const BUSY: &str =
    "def run(result):\n    n = 0\n    for i in range(200000):\n        n += 1\n    return n > 0\n";

#[test]
fn the_project_policy_sets_the_limits_scripts_run_under() {
    let dir = setup(BUSY);
    let (out, value) = verify_json(&dir, &[]);
    out.expect_code(0);
    assert_eq!(value["verified"], json!(true), "{out:?}");
    dir.write(".harness/policy.yaml", "limits: {steps: 50000}\n");
    let message = expect_broken(&dir, &[]);
    assert!(message.contains("max_steps"), "{message}");
}

#[test]
fn a_bad_project_policy_is_a_config_error_naming_file_and_key() {
    let dir = setup(BUSY);
    dir.write(".harness/policy.yaml", "limits: {stepz: 50000}\n");
    let message = expect_config(&verify(&dir, &["--json"]));
    assert!(message.contains(".harness/policy.yaml"), "{message}");
    assert!(message.contains("stepz"), "{message}");
}
