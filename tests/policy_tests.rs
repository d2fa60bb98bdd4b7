//! `harness test`: policy tests run against real policy files, mocks in place of the network and
//! programs, passes told from failures and errors, coverage, output formats, bad input.

use serde_json::{Value, json};

use crate::util::{TempDir, harness, repo_root};

/// A verifier that reads a file, calls an endpoint and runs a program, with branches to cover.
const GATE: &str = r#"# A gate with a branch per outcome.
def run(result):
    if fs.stat("out.txt") == None:
        return {"verified": False, "reason": "out.txt is missing"}
    r = http.get(args["url"])
    if r["status"] != 200:
        return {"verified": False, "reason": "status %d" % r["status"]}
    lint = exec.run(["no-such-linter-anywhere", "out.txt"])
    if lint["exit_code"] != 0:
        return {"verified": False, "reason": "lint: " + lint["stdout"]}
    return True
"#;

/// The gate's delegation-like grants, for every test below.
const OPEN: &str = r#"gate = verifier("gate.star", allow_hosts = ["api.example.com"], allow_exec = ["no-such-linter-anywhere"])
URL = "https://api.example.com/ready"
FILES = {"out.txt": "x"}
UP = {URL: {"status": 200}}
"#;

/// The 1-based line of `gate_test.star` (as [`project`] writes it) holding `needle`.
fn line_of(tests: &str, needle: &str) -> u64 {
    let source = format!("{OPEN}\n{tests}");
    let index = source
        .lines()
        .position(|l| l.contains(needle))
        .unwrap_or_else(|| panic!("{needle:?} is not in the test file"));
    u64::try_from(index + 1).expect("a small line number")
}

fn project(tests: &str) -> TempDir {
    let dir = TempDir::new();
    dir.write("gate.star", GATE);
    dir.write("gate_test.star", format!("{OPEN}\n{tests}"));
    dir
}

fn run_json(dir: &TempDir, extra: &[&str]) -> (i32, Value) {
    let out = harness(["test", "--format", "json"])
        .args(extra)
        .args([dir.path()])
        .run();
    (out.code, out.json())
}

fn test_named<'a>(report: &'a Value, name: &str) -> &'a Value {
    report["tests"]
        .as_array()
        .and_then(|tests| tests.iter().find(|t| t["name"] == json!(name)))
        .unwrap_or_else(|| panic!("no test {name} in {report}"))
}

/// Every hook and verifier under `examples/` has tests, and they all pass with every statement
/// line covered; the text output ends with the summary and prints the coverage.
#[test]
fn the_examples_policies_are_tested_and_fully_covered() {
    let root = repo_root();
    let out = harness(["test", "examples", "--coverage", "--format", "json"])
        .current_dir(&root)
        .run();
    out.expect_code(0);
    let report = out.json();
    assert_eq!(report["failed"], json!(0), "{report}");
    assert_eq!(report["errors"], json!(0), "{report}");
    let files = report["coverage"]["files"].as_object().expect("coverage");
    let mut policies: Vec<String> = Vec::new();
    for dir in ["examples/hooks/hooks", "examples/verifiers"] {
        for entry in std::fs::read_dir(root.join(dir)).expect("example dir") {
            let name = entry
                .expect("entry")
                .file_name()
                .to_string_lossy()
                .into_owned();
            let policy = if dir.ends_with("hooks") {
                name.ends_with(".md")
            } else {
                name.ends_with(".star") && !name.ends_with("_test.star")
            };
            if policy {
                policies.push(format!("{dir}/{name}"));
            }
        }
    }
    policies.extend(
        [
            "examples/openai/verify.star",
            "examples/quickstart/delegation.yaml",
            "examples/command/delegation.yaml",
        ]
        .map(str::to_owned),
    );
    for policy in &policies {
        let file = &files[policy.as_str()];
        assert_eq!(file["coverage"], json!(100.0), "{policy}: {file}");
        assert_eq!(file["not_covered"], json!([]), "{policy}");
    }
    let text = harness(["test", "examples", "--coverage"])
        .current_dir(&root)
        .run();
    text.expect_code(0);
    assert!(text.stdout.contains("coverage:"), "{text:?}");
    assert!(
        text.stdout
            .contains("100.00%  examples/hooks/hooks/path-guard.md"),
        "{text:?}"
    );
    let last = text.stdout.lines().last().unwrap_or_default();
    assert!(last.ends_with(" passed, 0 failed, 0 errors"), "{last}");
}

/// Passing, failing (an assertion, `fail()`, returning False) and broken tests are counted apart,
/// each failure with the test file's line; exit 1 unless all pass.
#[test]
fn passes_failures_and_errors_are_told_apart_with_their_lines() {
    let tests = r#"
def test_all_good():
    assert_eq(gate({}, files = FILES, http = UP, exec = {"no-such-linter-anywhere": {}}, args = {"url": URL})["verified"], True)

def test_missing_file():
    v = gate({}, args = {"url": URL})
    assert_eq(v["reason"], "out.txt is missing")

def test_wrong_expectation():
    v = gate({}, args = {"url": URL})
    assert_eq(v["verified"], True, msg = "the file should be there")

def test_explicit_fail():
    fail("not written yet")

def test_returns_false():
    return False

def test_lint_output_reaches_the_reason():
    v = gate({}, files = FILES, http = UP, args = {"url": URL},
             exec = {"no-such-linter-anywhere": {"exit_code": 1, "stdout": "line 1: tab"}})
    assert_eq(v["reason"], "lint: line 1: tab")

def test_policy_breaks():
    gate({}, files = FILES, args = {})

def helper_not_a_test():
    fail("never runs")
"#;
    let dir = project(tests);
    let wrong_line = line_of(tests, "msg = \"the file should be there\"");
    let broke_line = line_of(tests, "gate({}, files = FILES, args = {})");
    let (code, report) = run_json(&dir, &[]);
    assert_eq!(code, 1, "{report}");
    assert_eq!(
        (&report["passed"], &report["failed"], &report["errors"]),
        (&json!(3), &json!(3), &json!(1)),
        "{report}"
    );
    let wrong = test_named(&report, "test_wrong_expectation");
    assert_eq!(wrong["status"], json!("failed"));
    assert_eq!(wrong["line"], json!(wrong_line), "{wrong}");
    assert_eq!(
        wrong["message"],
        json!("the file should be there: assert_eq: False != True")
    );
    assert_eq!(
        test_named(&report, "test_explicit_fail")["line"],
        json!(line_of(tests, "fail(\"not written yet\")"))
    );
    assert_eq!(
        test_named(&report, "test_returns_false")["message"],
        json!("test_returns_false returned False")
    );
    // A broken policy is an error naming the policy's file and line, at the test's line.
    let broke = test_named(&report, "test_policy_breaks");
    assert_eq!(broke["status"], json!("error"));
    assert_eq!(broke["line"], json!(broke_line), "{broke}");
    let message = broke["message"].as_str().unwrap_or_default();
    assert!(message.contains("gate.star:5"), "{message}");
    assert!(message.contains("url"), "{message}");
    // The text form: one line per failure with place and reason, then the summary.
    let text = harness(["test"]).args([dir.path()]).run();
    text.expect_code(1);
    let gate_test = dir.join("gate_test.star").display().to_string();
    assert!(
        text.stdout.contains(&format!(
            "FAIL {gate_test}:{wrong_line}: test_wrong_expectation: the file should be there"
        )),
        "{text:?}"
    );
    assert!(
        text.stdout.contains(&format!(
            "ERROR {gate_test}:{broke_line}: test_policy_breaks"
        )),
        "{text:?}"
    );
    assert_eq!(
        text.stdout.lines().last(),
        Some("3 passed, 3 failed, 1 errors")
    );
    // --run picks tests by name; only passing ones: exit 0.
    let (code, picked) = run_json(&dir, &["--run", "all_good|lint_output"]);
    assert_eq!(code, 0, "{picked}");
    assert_eq!(picked["passed"], json!(2));
    assert_eq!(picked["tests"].as_array().map(Vec::len), Some(2));
}

/// Bad input is a test error naming the file and line — never a crash, never a pass: a syntax
/// error, a loop past the limits, a helper pointed at a missing file, mocks of hosts and
/// programs the policy may not reach, an unmocked URL, a path out of the workspace.
#[test]
fn bad_input_is_a_test_error_naming_file_and_line() {
    let tests = r#"
def test_forever():
    n = 0
    for i in range(2147483647):
        n += 1

def test_missing_policy():
    verifier("nowhere.star")

def test_mock_of_a_host_not_allowed():
    gate({}, files = FILES, args = {"url": "https://evil.example/x"}, http = {"https://evil.example/x": {"status": 200}})

def test_mock_of_a_program_not_allowed():
    gate({}, exec = {"curl": {"exit_code": 0}}, args = {"url": URL})

def test_unmocked_url():
    gate({}, files = FILES, args = {"url": URL})

def test_unmocked_program():
    gate({}, files = FILES, http = UP, args = {"url": URL})

def test_files_escaping_the_workspace():
    gate({}, files = {"../out.txt": "x"}, args = {"url": URL})

def test_unknown_argument():
    gate({}, fils = FILES)
"#;
    let dir = project(tests);
    dir.write("broken_test.star", "def test_x(:\n    pass\n");
    // Small budgets make the endless loop quick to stop.
    dir.write(
        ".harness/policy.yaml",
        "limits:\n  steps: 100000\n  wall_ms: 5000\n",
    );
    let (code, report) = run_json(&dir, &["--workdir", &dir.path().display().to_string()]);
    assert_eq!(code, 1, "{report}");
    assert_eq!(report["passed"], json!(0), "{report}");
    let expect = |name: &str, line_with: &str, needle: &str| {
        let test = test_named(&report, name);
        assert_eq!(test["status"], json!("error"), "{test}");
        assert_eq!(test["line"], json!(line_of(tests, line_with)), "{test}");
        let message = test["message"].as_str().unwrap_or_default();
        assert!(message.contains(needle), "{name}: {message}");
    };
    expect("test_forever", "def test_forever():", "limit max_steps hit");
    expect(
        "test_missing_policy",
        "verifier(\"nowhere.star\")",
        "no such file",
    );
    expect(
        "test_mock_of_a_host_not_allowed",
        "https://evil.example/x",
        "\"evil.example\" is not on the allow-list",
    );
    expect(
        "test_mock_of_a_program_not_allowed",
        "\"curl\"",
        "\"curl\": the program is not allowed",
    );
    expect(
        "test_unmocked_url",
        "gate({}, files = FILES, args = {\"url\": URL})",
        "no mock for https://api.example.com/ready",
    );
    expect(
        "test_unmocked_program",
        "gate({}, files = FILES, http = UP, args",
        "no mock for program \"no-such-linter-anywhere\"",
    );
    expect(
        "test_files_escaping_the_workspace",
        "../out.txt",
        "must be relative and stay inside",
    );
    expect(
        "test_unknown_argument",
        "fils = FILES",
        "unknown argument `fils=`",
    );
    let load = report["tests"]
        .as_array()
        .and_then(|t| {
            t.iter().find(|t| {
                t["file"]
                    .as_str()
                    .is_some_and(|f| f.ends_with("broken_test.star"))
            })
        })
        .expect("the broken file is reported");
    assert_eq!(load["name"], json!("(load)"));
    assert_eq!(load["line"], json!(1));
    assert!(
        load["message"]
            .as_str()
            .unwrap_or_default()
            .contains("[syntax]"),
        "{load}"
    );
}

/// Hooks are loaded and dispatched as in a run: allow, block, modify (with the patched payload),
/// and skip when `tools`, `delegates` or `when` leave the event alone.
#[test]
fn hook_tests_see_every_decision() {
    let dir = TempDir::new();
    dir.write(
        "guard.md",
        r#"---
event: tool.pre
tools: [write_file]
when: not payload["arguments"].get("force", False)
script: |
  def handle(event, payload):
      path = payload["arguments"]["path"]
      if path.startswith("/"):
          return block("absolute path %s" % path)
      if path.startswith("./"):
          return modify({"arguments": {"path": path[2:]}})
      return allow()
---
"#,
    );
    dir.write(
        "only-openai.md",
        "---\nevent: delegation.post_verify\ndelegates: [openai]\nscript: |\n  def handle(event, payload):\n      return block(\"no\")\n---\n",
    );
    dir.write(
        "hooks_test.star",
        r#"guard = hook("guard.md")
only_openai = hook("only-openai.md")

def write(path, **extra):
    arguments = dict({"path": path}, **extra)
    return guard({"name": "write_file", "arguments": arguments})

def test_decisions():
    assert_eq(write("a.txt")["action"], "allow")
    h = write("/etc/passwd")
    assert_eq((h["action"], h["reason"]), ("block", "absolute path /etc/passwd"))
    h = write("./a.txt")
    assert_eq(h["action"], "modify")
    assert_eq(h["payload"]["arguments"]["path"], "a.txt")

def test_skips():
    assert_eq(guard({"name": "read_file", "arguments": {"path": "/x"}})["action"], "skip")
    assert_eq(write("/x", force = True)["action"], "skip")
    assert_eq(only_openai({"response": "hi"})["action"], "skip")
    assert_eq(only_openai({"response": "hi"}, delegate = "openai")["action"], "block")

def test_a_payload_of_the_wrong_shape_is_an_error():
    guard({"name": "write_file", "arguments": "not a dict"})
"#,
    );
    let (code, report) = run_json(&dir, &["--coverage"]);
    assert_eq!(code, 1, "{report}");
    assert_eq!(
        test_named(&report, "test_decisions")["status"],
        json!("passed"),
        "{report}"
    );
    assert_eq!(
        test_named(&report, "test_skips")["status"],
        json!("passed"),
        "{report}"
    );
    let shape = test_named(&report, "test_a_payload_of_the_wrong_shape_is_an_error");
    assert_eq!(shape["status"], json!("error"));
    assert!(
        shape["message"]
            .as_str()
            .unwrap_or_default()
            .contains("`arguments` must be"),
        "{shape}"
    );
    // The inline script's lines are reported as lines of the hook file.
    let guard = dir.join("guard.md").display().to_string();
    let coverage = &report["coverage"]["files"][guard.as_str()];
    assert_eq!(coverage["not_covered"], json!([]), "{coverage}");
    assert_eq!(
        coverage["covered"],
        json!([{"start": {"row": 6}, "end": {"row": 12}}])
    );
}

/// Coverage in the `opa test --coverage` shape; `--threshold` decides the exit code.
#[test]
fn coverage_ranges_and_the_threshold() {
    let dir = project(
        r#"
def test_only_the_missing_file():
    assert_eq(gate({}, args = {"url": URL})["verified"], False)
"#,
    );
    let (code, report) = run_json(&dir, &["--coverage"]);
    assert_eq!(code, 0, "{report}");
    let gate = dir.join("gate.star").display().to_string();
    let file = &report["coverage"]["files"][gate.as_str()];
    // Lines 2-4 ran (def, the stat, the early return); 5-11 never did.
    assert_eq!(
        file["covered"],
        json!([{"start": {"row": 2}, "end": {"row": 4}}]),
        "{file}"
    );
    assert_eq!(
        file["not_covered"],
        json!([{"start": {"row": 5}, "end": {"row": 11}}])
    );
    assert_eq!(
        (&file["covered_lines"], &file["not_covered_lines"]),
        (&json!(3), &json!(7))
    );
    assert_eq!(file["coverage"], json!(30.0));
    assert_eq!(report["coverage"]["coverage"], json!(30.0));
    let below = harness(["test", "--threshold", "80"])
        .args([dir.path()])
        .run();
    below.expect_code(1);
    assert!(
        below
            .stderr
            .contains("coverage 30.00% is below the threshold 80%"),
        "{below:?}"
    );
    assert!(below.stdout.contains("not covered: 5-11"), "{below:?}");
    harness(["test", "--threshold", "25"])
        .args([dir.path()])
        .run()
        .expect_code(0);
}

/// `--format junit` is JUnit XML that validates against the schema CI systems read
/// (tests/fixtures/junit.xsd, checked with Python's `xmlschema`, which `.ci/run` installs).
#[test]
fn junit_output_validates_against_the_junit_schema() {
    let dir = project(
        r#"
def test_passes():
    assert_eq(gate({}, args = {"url": URL})["reason"], "out.txt is missing")

def test_fails():
    print("looking at <out.txt> & friends")
    assert_eq(1, 2)

def test_breaks():
    verifier("missing.star")
"#,
    );
    let out = harness(["test", "--format", "junit"])
        .args([dir.path()])
        .run();
    out.expect_code(1);
    let xml = out.stdout.clone();
    assert!(
        xml.contains(r#"<testsuites name="harness test" tests="3" failures="1" errors="1""#),
        "{xml}"
    );
    assert!(
        xml.contains(r#"<failure message="assert_eq: 1 != 2" type="assertion">"#),
        "{xml}"
    );
    assert!(
        xml.contains("<system-out>looking at &lt;out.txt&gt; &amp; friends</system-out>"),
        "{xml}"
    );
    assert!(
        xml.contains(r#"<error message="verifier(&quot;missing.star&quot;)"#),
        "{xml}"
    );
    let report = dir.write("report.xml", &xml);
    let schema = repo_root().join("tests/fixtures/junit.xsd");
    let python = std::env::var("HARNESS_TEST_PYTHON").unwrap_or_else(|_| "python3".to_owned());
    let has_xmlschema = std::process::Command::new(&python)
        .args(["-c", "import xmlschema"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !has_xmlschema {
        assert!(
            std::env::var_os("HARNESS_REQUIRE_XMLSCHEMA").is_none(),
            "HARNESS_REQUIRE_XMLSCHEMA is set but {python} cannot import xmlschema"
        );
        eprintln!("skipped the schema check: {python} has no xmlschema (pip install xmlschema)");
        return;
    }
    let check = |file: &std::path::Path| {
        std::process::Command::new(&python)
            .args([
                "-c",
                "import sys, xmlschema; xmlschema.XMLSchema(sys.argv[1]).validate(sys.argv[2])",
            ])
            .arg(&schema)
            .arg(file)
            .output()
            .expect("python runs")
    };
    let valid = check(&report);
    assert!(
        valid.status.success(),
        "{}",
        String::from_utf8_lossy(&valid.stderr)
    );
    // The check can fail: a report without the required counts does not validate.
    let broken = dir.write(
        "broken.xml",
        xml.replacen(" tests=\"3\"", "", 1)
            .replacen(" failures=\"1\"", "", 2),
    );
    assert!(!check(&broken).status.success());
}

/// No test files, a bad --run or --threshold: usage errors (exit 2); tests that all filter away:
/// exit 1, never a silent pass.
#[test]
fn nothing_to_run_is_never_a_pass() {
    let dir = TempDir::new();
    dir.write("policy.star", "def run(result):\n    return True\n");
    let none = harness(["test"]).args([dir.path()]).run();
    none.expect_code(2).expect_stderr_kind("config");
    assert!(
        none.stderr.contains("no test files (*_test.star)"),
        "{none:?}"
    );
    harness(["test", "/no/such/dir"])
        .run()
        .expect_code(2)
        .expect_stderr_kind("config");
    dir.write(
        "p_test.star",
        "p = verifier(\"policy.star\")\n\ndef test_p():\n    assert_true(p({})[\"verified\"])\n",
    );
    harness(["test", "--run", "("])
        .args([dir.path()])
        .run()
        .expect_code(2)
        .expect_stderr_kind("config");
    harness(["test", "--threshold", "120"])
        .args([dir.path()])
        .run()
        .expect_code(2)
        .expect_stderr_kind("config");
    let filtered = harness(["test", "--run", "nothing_matches"])
        .args([dir.path()])
        .run();
    filtered.expect_code(1);
    assert!(filtered.stderr.contains("no tests ran"), "{filtered:?}");
    harness(["test"]).args([dir.path()]).run().expect_code(0);
}

/// A per-tool verifier is tested with the call and its result; a delegation file's inline
/// `verify` is loaded with the file's `args` and `network.allow`.
#[test]
fn per_tool_and_inline_verifiers_load_as_in_a_run() {
    let dir = TempDir::new();
    dir.write(
        "delegation.yaml",
        r#"task: t
delegate: {kind: scripted, script: agent.star}
tools:
  - name: write_file
    verify_file: small.star
args: {limit: 5}
network: {allow: [status.example.com]}
verify: |
  def run(result):
      r = http.get("https://status.example.com/")
      return {"verified": r["body"] == "up", "reason": "status: " + r["body"]}
"#,
    );
    dir.write(
        "agent.star",
        "def respond(request):\n    return {\"content\": \"ok\"}\n",
    );
    dir.write(
        "small.star",
        "def run(call, result):\n    if len(call[\"arguments\"][\"content\"]) > 10:\n        return {\"verified\": False, \"reason\": \"too big\"}\n    return True\n",
    );
    dir.write(
        "seen.star",
        "def run(result):\n    e = result[\"evidence\"][0]\n    return {\"verified\": True, \"reason\": e[\"criterion\"] + \": \" + e[\"result\"]}\n",
    );
    dir.write(
        "d_test.star",
        r#"inline = verifier("delegation.yaml")
small = verifier("small.star")

def test_inline_uses_the_files_network_allow():
    v = inline({}, http = {"https://status.example.com/": {"body": "up"}})
    assert_eq(v["verified"], True)
    assert_eq(inline({}, http = {"https://status.example.com/": {"body": "down"}})["reason"], "status: down")

def test_evidence_reaches_the_result():
    seen = verifier("seen.star")
    ev = [{"criterion": "cargo test", "source": "check", "result": "pass"}]
    assert_eq(seen({}, evidence = ev)["reason"], "cargo test: pass")

def test_per_tool():
    call = {"id": "c1", "name": "write_file", "arguments": {"path": "a", "content": "x" * 20}}
    result = {"call_id": "c1", "name": "write_file", "content": "wrote", "is_error": False}
    assert_eq(small(call, result)["reason"], "too big")
"#,
    );
    let (code, report) = run_json(&dir, &["--coverage"]);
    assert_eq!(code, 0, "{report}");
    assert_eq!(report["passed"], json!(3));
    let yaml = dir.join("delegation.yaml").display().to_string();
    let inline = &report["coverage"]["files"][yaml.as_str()];
    assert_eq!(
        inline["covered"],
        json!([{"start": {"row": 9}, "end": {"row": 11}}]),
        "{report}"
    );
}
