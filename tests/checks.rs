//! `checks:` (DESIGN §4.7): the user's own commands judge every attempt by exit code before the
//! verifier, each leaving an evidence record in `--json` `history` and in the journal.

use serde_json::{Value, json};

use crate::util::{Output, TempDir, harness};

/// Claims the work on attempt 0; writes `feature.txt` when told it was not done.
const CLAIMS_THEN_FIXES: &str = r#"def respond(request):
    last = request["messages"][-1]
    if request["attempt"] == 0:
        return "All tests pass."
    if last["role"] == "tool":
        return "Fixed: tests pass now."
    return {"tool_calls": [{"name": "write_file", "arguments": {"path": "feature.txt", "content": "done\n"}}]}
"#;

/// Answers "done" and nothing else.
const DONE: &str = "def respond(request):\n    return \"done\"\n";

/// The test the delegate claims passes: it needs `feature.txt`.
const TESTS: &str = "{name: tests, run: \"test -f feature.txt && echo 3 passed || { echo 'FAIL: feature.txt missing'; exit 1; }\"}";

fn delegation(agent: &str, checks: &str) -> TempDir {
    let dir = TempDir::new();
    dir.write("agent.star", agent);
    std::fs::create_dir_all(dir.join("ws")).expect("mkdir ws");
    dir.write(
        "delegation.yaml",
        format!(
            "task: Make the tests pass.\ndelegate: {{kind: scripted, script: agent.star}}\ntools: [write_file]\nworkdir: ws\nchecks:\n{checks}"
        ),
    );
    dir
}

fn run(dir: &TempDir) -> (Output, Value) {
    let out = harness(["run", "--json", "--journal"])
        .args([dir.join("runs.db"), dir.join("delegation.yaml")])
        .run();
    let report = out.json();
    (out, report)
}

/// Runs the delegation, expecting a configuration error; returns its message.
fn config_error(dir: &TempDir) -> String {
    let out = harness(["run", "--json", "--no-journal"])
        .args([dir.join("delegation.yaml")])
        .run();
    out.expect_code(2);
    let report = out.json();
    assert_eq!(report["error"]["kind"], json!("config"), "{out:?}");
    report["error"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

#[test]
fn a_failing_check_fails_the_attempt_and_its_evidence_is_kept() {
    let dir = delegation(CLAIMS_THEN_FIXES, &format!("  - {TESTS}\n"));
    let (out, report) = run(&dir);
    out.expect_code(0);
    assert_eq!(report["outcome"], json!("passed"), "{out:?}");
    assert_eq!(report["attempts"], json!(2));
    let first = &report["history"][0];
    assert_eq!(first["findings"][0]["source"], json!("check"), "{first}");
    assert_eq!(first["findings"][0]["name"], json!("tests"));
    assert!(
        first["findings"][0]["message"]
            .as_str()
            .is_some_and(|m| m.contains("exit 1") && m.contains("FAIL: feature.txt missing")),
        "{first}"
    );
    let evidence = &first["evidence"][0];
    assert_eq!(evidence["criterion"], json!("tests"));
    assert_eq!(evidence["source"], json!("check"));
    assert_eq!(evidence["result"], json!("fail"));
    assert_eq!(evidence["exit_code"], json!(1));
    assert_eq!(evidence["required"], json!(true));
    assert_eq!(
        evidence["output_tail"],
        json!("FAIL: feature.txt missing\n")
    );
    assert!(
        evidence["method"]
            .as_str()
            .is_some_and(|m| m.starts_with("sh -c 'test -f feature.txt")),
        "{evidence}"
    );
    let passed = &report["history"][1]["evidence"][0];
    assert_eq!(passed["result"], json!("pass"), "{passed}");
    assert_eq!(passed["output_tail"], json!("3 passed\n"));
    // The retry prompt carried the failing check to the delegate.
    assert!(
        report["history"][0]["retry_prompt"]
            .as_str()
            .or_else(|| report["reasons"][0][0].as_str())
            .is_some_and(|p| p.contains("check tests")),
        "{report}"
    );
    // And the journal keeps the evidence.
    let shown = harness(["runs", "show", "--json", "--journal"])
        .args([
            dir.join("runs.db").into_os_string(),
            report["id"].as_str().expect("id").into(),
        ])
        .run();
    shown.expect_code(0);
    assert!(
        shown.stdout.contains("FAIL: feature.txt missing"),
        "{shown:?}"
    );
}

#[test]
fn an_advisory_check_is_said_but_never_fails_the_attempt() {
    let dir = delegation(
        DONE,
        "  - {name: lint, argv: [sh, -c, \"echo style nit >&2; exit 1\"], required: false}\n",
    );
    let (out, report) = run(&dir);
    out.expect_code(0);
    assert_eq!(report["outcome"], json!("passed"), "{out:?}");
    let finding = &report["history"][0]["findings"][0];
    assert_eq!(finding["blocking"], json!(false), "{finding}");
    assert_eq!(finding["severity"], json!("advisory"));
    assert_eq!(
        report["history"][0]["evidence"][0]["output_tail"],
        json!("style nit\n")
    );
}

#[test]
fn a_check_that_cannot_start_is_a_broken_policy_never_a_pass() {
    let dir = delegation(
        DONE,
        "  - {name: tests, argv: [harness-test-no-such-program, --all]}\n",
    );
    let (out, report) = run(&dir);
    out.expect_code(3);
    assert_eq!(report["outcome"], json!("error"), "{out:?}");
    assert_eq!(report["error"]["kind"], json!("check"));
    assert!(
        report["error"]["message"].as_str().is_some_and(
            |m| m.contains("check tests") && m.contains("harness-test-no-such-program")
        ),
        "{report}"
    );
}

#[cfg(unix)]
#[test]
fn a_check_past_its_timeout_fails_as_timeout_and_takes_its_children_with_it() {
    let dir = delegation(
        DONE,
        "  - {name: slow, run: \"(sleep 2.04; touch late.txt) & sleep 30\", timeout_s: 0.5}\n",
    );
    let text = dir.read("delegation.yaml").expect("file") + "max_verify_retries: 0\n";
    dir.write("delegation.yaml", text);
    let (out, report) = run(&dir);
    out.expect_code(1);
    let evidence = &report["history"][0]["evidence"][0];
    assert_eq!(evidence["result"], json!("timeout"), "{evidence}");
    assert_eq!(evidence["exit_code"], Value::Null);
    assert!(
        crate::util::gone("sleep 2.04; touch late.txt"),
        "a check's child outlived it"
    );
    assert!(!dir.join("ws/late.txt").exists());
}

#[test]
fn checks_run_scrubbed_and_their_output_is_redacted() {
    let dir = delegation(
        DONE,
        "  - {name: env, run: \"echo token=$HARNESS_TEST_SECRET given=$GIVEN; echo OPENAI_API_KEY=sk-abcdefghijklmnop1234; exit 1\", env: {GIVEN: yes}}\n",
    );
    let out = harness(["run", "--json", "--no-journal"])
        .args([dir.join("delegation.yaml")])
        .env("HARNESS_TEST_SECRET", "s3cr3t-value")
        .run();
    let report = out.json();
    let tail = report["history"][0]["evidence"][0]["output_tail"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(tail.contains("token= given=yes"), "{tail}");
    assert!(tail.contains("OPENAI_API_KEY=[REDACTED]"), "{tail}");
    assert!(!out.stdout.contains("sk-abcdefghijklmnop1234"), "{out:?}");
    assert!(!out.stdout.contains("s3cr3t-value"), "{out:?}");
}

#[test]
fn bad_checks_are_configuration_errors_naming_the_entry_and_key() {
    for (checks, says) in [
        (
            "  - {name: t, run: \"true\", argv: [\"true\"]}\n",
            "not both",
        ),
        ("  - {name: t}\n", "give `run`"),
        ("  - {name: t, argv: []}\n", "give `run`"),
        ("  - {name: \"\", run: \"true\"}\n", "`name` is empty"),
        (
            "  - {name: t, run: a}\n  - {name: t, run: b}\n",
            "already defined",
        ),
        ("  - {name: t, run: a, timeout_s: -1}\n", "timeout_s"),
        (
            "  - {name: t, run: a, env: {\"1X\": y}}\n",
            "not a valid variable name",
        ),
        ("  - {name: t, run: a, env: {X: 1}}\n", "must be a string"),
        ("  - {name: t, run: a, retries: 2}\n", "retries"),
    ] {
        let message = config_error(&delegation(DONE, checks));
        assert!(message.contains("delegation.yaml"), "{checks}: {message}");
        assert!(message.contains(says), "{checks}: {message}");
    }
}

// --- criteria -----------------------------------------------------------------------------------

/// Writes a stub on attempt 0 and the real thing when told.
const STUB_THEN_REAL: &str = r#"def respond(request):
    last = request["messages"][-1]
    if last["role"] == "tool":
        return "Done."
    content = "pub fn f() {\n    todo!()\n}\n// TODO: the rest\n" if request["attempt"] == 0 else "pub fn f() {}\n"
    return {"tool_calls": [{"name": "write_file", "arguments": {"path": "src/lib.rs", "content": content}}]}
"#;

fn with_criteria(agent: &str, criteria: &str) -> TempDir {
    let dir = delegation(agent, "  []\n");
    let text = dir
        .read("delegation.yaml")
        .expect("file")
        .replace("checks:\n  []\n", &format!("criteria:\n{criteria}"));
    dir.write("delegation.yaml", text);
    dir
}

#[test]
fn criteria_fail_an_attempt_with_placeholders_and_pass_the_real_work() {
    let dir = with_criteria(
        STUB_THEN_REAL,
        "  - \"file_exists:src/lib.rs\"\n  - {no_placeholders: \"src/**/*.rs\"}\n",
    );
    let (out, report) = run(&dir);
    out.expect_code(0);
    assert_eq!(report["attempts"], json!(2), "{out:?}");
    let first = &report["history"][0];
    let finding = &first["findings"][0];
    assert_eq!(finding["source"], json!("criterion"), "{first}");
    assert_eq!(finding["name"], json!("no_placeholders:src/**/*.rs"));
    let message = finding["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("src/lib.rs:2 todo!(") && message.contains("src/lib.rs:4 TODO"),
        "{message}"
    );
    let exists = &report["history"][1]["evidence"][0];
    assert_eq!(
        exists["criterion"],
        json!("file_exists:src/lib.rs"),
        "{exists}"
    );
    assert_eq!(exists["result"], json!("pass"));
    assert_eq!(
        exists["subject_sha256"].as_str().map(str::len),
        Some(64),
        "{exists}"
    );
    assert_eq!(report["history"][1]["evidence"][1]["result"], json!("pass"));
}

#[test]
fn a_missing_file_and_a_failing_command_criterion_are_findings_of_kind_criterion() {
    let dir = with_criteria(
        DONE,
        "  - \"file_exists:report.md\"\n  - {command: \"echo broken >&2; exit 2\", name: compiles}\n",
    );
    let text = dir.read("delegation.yaml").expect("file") + "max_verify_retries: 0\n";
    dir.write("delegation.yaml", text);
    let (out, report) = run(&dir);
    out.expect_code(1);
    let findings = report["history"][0]["findings"]
        .as_array()
        .expect("findings");
    let names: Vec<&str> = findings.iter().filter_map(|f| f["name"].as_str()).collect();
    assert_eq!(names, ["compiles", "file_exists:report.md"], "{out:?}");
    for finding in findings {
        assert_eq!(finding["source"], json!("criterion"), "{finding}");
    }
    assert!(
        findings[1]["message"]
            .as_str()
            .is_some_and(|m| m.contains("report.md does not exist"))
    );
}

#[test]
fn bad_criteria_are_configuration_errors_naming_the_entry() {
    for (criteria, says) in [
        ("  - \"nokind\"\n", "no `kind:target` form"),
        ("  - \"bogus:x\"\n", "unknown criterion kind \"bogus\""),
        ("  - {file_exists: \"\"}\n", "needs a path or glob"),
        ("  - \"no_placeholders:src/[\"\n", "does not compile"),
        ("  - {command: \"cargo check\"}\n", "needs `command`"),
        (
            "  - {command: x, name: n, retries: 1}\n",
            "unknown key `retries`",
        ),
        ("  - 42\n", "is not a criterion"),
        (
            "  - {command: x, name: n, timeout_s: soon}\n",
            "`timeout_s` is \"soon\"",
        ),
        (
            "  - {command: x, name: n, timeout_s: 0}\n",
            "`timeout_s` is 0",
        ),
    ] {
        let message = config_error(&with_criteria(DONE, criteria));
        assert_eq!(
            message.matches("`criteria[0]`").count(),
            1,
            "{criteria}: {message}"
        );
        assert!(message.contains(says), "{criteria}: {message}");
    }
}

#[test]
fn require_checks_without_a_gate_fails_as_no_gate_before_the_delegate_runs() {
    let dir = TempDir::new();
    dir.write(
        "agent.star",
        "def respond(request):\n    fail(\"the delegate must not run\")\n",
    );
    dir.write(
        "delegation.yaml",
        "task: t\ndelegate: {kind: scripted, script: agent.star}\nrequire_checks: true\nverify: |\n  def run(result):\n      return True\n",
    );
    let (out, report) = run(&dir);
    out.expect_code(1);
    assert_eq!(report["outcome"], json!("failed"), "{out:?}");
    assert_eq!(report["kind"], json!("no_gate"));
    assert!(
        report["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("`require_checks`") && m.contains("delegation.yaml")),
        "{report}"
    );
    assert_eq!(report["attempts"], json!(0));
}

#[test]
fn a_pass_with_evidence_carries_no_warning() {
    let dir = delegation(DONE, "  - {name: ok, run: \"true\"}\n");
    let (out, report) = run(&dir);
    out.expect_code(0);
    assert_eq!(report["warnings"], json!([]), "{out:?}");
}

#[test]
fn verifiers_read_the_evidence_and_may_return_their_own() {
    let dir = delegation(DONE, &format!("  - {TESTS}\n"));
    dir.write("ws/feature.txt", "done\n");
    let text = dir.read("delegation.yaml").expect("file")
        + "verify: |\n  def run(result):\n      tests = [e for e in result[\"evidence\"] if e[\"criterion\"] == \"tests\"]\n      if len(tests) != 1 or tests[0][\"result\"] != \"pass\":\n          return {\"verified\": False, \"reason\": \"no passing tests evidence: %r\" % result[\"evidence\"]}\n      return {\"verified\": True, \"evidence\": [{\"criterion\": \"answer\", \"result\": \"pass\", \"proof\": \"said done\"}]}\n";
    dir.write("delegation.yaml", text);
    let (out, report) = run(&dir);
    out.expect_code(0);
    assert_eq!(report["outcome"], json!("passed"), "{out:?}");
    let evidence = report["history"][0]["evidence"]
        .as_array()
        .expect("evidence");
    assert_eq!(evidence.len(), 2, "{evidence:?}");
    assert_eq!(evidence[1]["criterion"], json!("answer"));
    assert_eq!(evidence[1]["source"], json!("verify"));
    assert_eq!(evidence[1]["proof"], json!("said done"));
    assert!(evidence[1]["at"].is_string());
    // The Result the caller gets carries the evidence too.
    assert_eq!(report["result"]["evidence"][0]["criterion"], json!("tests"));
}

/// A `delegation.post_verify` hook judges by the same evidence and changes: it turns down the
/// attempt the checks passed, quoting what it saw.
#[test]
fn hooks_read_the_evidence_and_the_changes() {
    let dir = delegation(CLAIMS_THEN_FIXES, &format!("  - {TESTS}\n"));
    dir.write(
        "hooks/gate.md",
        "---\nevent: delegation.post_verify\nscript: |\n  def handle(event, payload):\n      seen = [\"%s=%s\" % (e[\"criterion\"], e[\"result\"]) for e in payload[\"evidence\"]]\n      if payload[\"attempt\"] == 1:\n          return block(\"saw \" + \", \".join(seen) + \"; added \" + \", \".join(payload[\"changes\"][\"added\"]))\n      return allow()\n---\n# Gate\n",
    );
    let text = dir.read("delegation.yaml").expect("file") + "scope: {}\nhooks: [hooks]\n";
    dir.write("delegation.yaml", text);
    let (out, report) = run(&dir);
    out.expect_code(0);
    assert_eq!(report["attempts"], json!(3), "{out:?}");
    let reasons = report["reasons"][1].as_array().expect("reasons");
    assert_eq!(
        reasons,
        &[json!("hook gate: saw tests=pass; added feature.txt")],
        "{report}"
    );
}

/// Evidence is a typed record that keeps what its type does not name: a verifier's own keys reach
/// the report and the journal as the verifier gave them, never refused.
#[test]
fn a_verifiers_own_evidence_keys_are_kept_to_the_record() {
    let dir = delegation(DONE, "  []\n");
    let text = dir
        .read("delegation.yaml")
        .expect("file")
        .replace("checks:\n  []\n", "")
        + "verify: |\n  def run(result):\n      return {\"verified\": True, \"evidence\": [{\"criterion\": \"answer\", \"result\": \"pass\", \"flake_rate\": 0.25, \"runner\": {\"host\": \"ci-3\"}}]}\n";
    dir.write("delegation.yaml", text);
    let journal = dir.join("runs.db");
    let out = crate::util::harness(["run", "--json", "delegation.yaml", "--journal"])
        .args([&journal])
        .current_dir(dir.path())
        .run();
    out.expect_code(0);
    let report = out.json();
    let record = &report["history"][0]["evidence"][0];
    assert_eq!(record["flake_rate"], json!(0.25), "{report}");
    assert_eq!(record["runner"], json!({"host": "ci-3"}), "{report}");
    let id = report["id"].as_str().expect("id");
    let shown = crate::util::harness(["runs", "show", id, "--json", "--journal"])
        .args([&journal])
        .current_dir(dir.path())
        .run();
    shown.expect_code(0);
    let kept = &shown.json()["attempts"][0]["verdict"]["evidence"][0];
    assert_eq!(kept["runner"], json!({"host": "ci-3"}), "{shown:?}");
}

/// A verifier writes every field of its evidence, so a secret in any of them (its `criterion`,
/// `at`, `subject_sha256`, a key of its own) is scrubbed from what the caller and the journal get.
#[test]
fn secrets_in_any_field_of_a_verifiers_evidence_are_scrubbed() {
    const SECRET: &str = "ghp_0123456789abcdefghijABCDEF";
    let dir = delegation(DONE, "  []\n");
    let text = dir
        .read("delegation.yaml")
        .expect("file")
        .replace("checks:\n  []\n", "")
        + &format!(
            "verify: |\n  def run(result):\n      return {{\"verified\": True, \"evidence\": [{{\"criterion\": \"token {SECRET}\", \"result\": \"pass\", \"at\": \"{SECRET}\", \"subject_sha256\": \"{SECRET}\", \"runner\": {{\"token\": \"{SECRET}\"}}}}]}}\n"
        );
    dir.write("delegation.yaml", text);
    let journal = dir.join("runs.db");
    let out = crate::util::harness(["run", "--json", "delegation.yaml", "--journal"])
        .args([&journal])
        .current_dir(dir.path())
        .run();
    out.expect_code(0);
    let report = out.json();
    assert_eq!(
        report["history"][0]["evidence"][0]["criterion"],
        json!("token [REDACTED]"),
        "{report}"
    );
    assert!(!out.stdout.contains(SECRET), "{}", out.stdout);
    let id = report["id"].as_str().expect("id");
    let shown = crate::util::harness(["runs", "show", id, "--json", "--journal"])
        .args([&journal])
        .current_dir(dir.path())
        .run();
    shown.expect_code(0);
    assert!(!shown.stdout.contains(SECRET), "{}", shown.stdout);
    assert!(shown.stdout.contains("[REDACTED]"), "{}", shown.stdout);
}

#[test]
fn malformed_verifier_evidence_is_a_broken_verifier() {
    let dir = delegation(DONE, "  []\n");
    let text = dir
        .read("delegation.yaml")
        .expect("file")
        .replace("checks:\n  []\n", "")
        + "verify: |\n  def run(result):\n      return {\"verified\": True, \"evidence\": [{\"criterion\": \"x\", \"result\": \"great\"}]}\n";
    dir.write("delegation.yaml", text);
    let (out, report) = run(&dir);
    crate::util::expect_error_kind(&out, &report, 3, "verifier");
    let message = report["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("`evidence[0]`") && message.contains("`result`"),
        "{message}"
    );
}

#[test]
fn endpoint_criteria_judge_status_and_body_and_time_out() {
    let server = harness_testkit::web::WebServer::start();
    let (url, closed) = (server.url("/health"), crate::util::closed_port());
    let dir = with_criteria(
        DONE,
        &format!(
            "  - {{endpoint: \"{url}\", status: 200, body_contains: \"nope\", timeout_s: 5}}\n  - \"endpoint:http://127.0.0.1:{closed}/health\"\n"
        ),
    );
    let text = dir.read("delegation.yaml").expect("file") + "max_verify_retries: 0\n";
    dir.write("delegation.yaml", text);
    let (out, report) = run(&dir);
    out.expect_code(1);
    let evidence = report["history"][0]["evidence"]
        .as_array()
        .expect("evidence");
    assert_eq!(evidence[0]["method"], json!("endpoint"), "{evidence:?}");
    assert_eq!(evidence[0]["result"], json!("fail"));
    let proof = evidence[0]["proof"].as_str().unwrap_or_default();
    assert!(proof.contains("does not contain \"nope\""), "{proof}");
    assert_eq!(evidence[1]["result"], json!("fail"));
    assert!(
        evidence[1]["proof"]
            .as_str()
            .is_some_and(|p| p.contains("failed")),
        "{evidence:?}"
    );
    let dir = with_criteria(DONE, &format!("  - {{endpoint: \"{url}\"}}\n"));
    let (out, report) = run(&dir);
    out.expect_code(0);
    assert_eq!(
        report["history"][0]["evidence"][0]["result"],
        json!("pass"),
        "{out:?}"
    );
    for (criteria, says) in [
        ("  - \"endpoint:ftp://x/\"\n", "not an http(s) URL"),
        ("  - {endpoint: \"http://x/\", status: 42}\n", "`status`"),
        (
            "  - {endpoint: \"http://x/\", timeout_s: -1}\n",
            "`timeout_s`",
        ),
        (
            "  - {endpoint: \"http://x/\", method: POST}\n",
            "unknown key `method`",
        ),
    ] {
        let message = config_error(&with_criteria(DONE, criteria));
        assert!(message.contains(says), "{criteria}: {message}");
    }
}

#[test]
fn the_project_policy_supplies_gates_a_request_overrides_key_by_key() {
    let dir = delegation(DONE, "  []\n");
    let text = dir
        .read("delegation.yaml")
        .expect("file")
        .replace("checks:\n  []\n", "");
    dir.write("delegation.yaml", text + "max_verify_retries: 0\n");
    dir.write(
        "ws/.harness/policy.yaml",
        "verification_defaults:\n  checks: [{name: lint, run: \"exit 1\"}]\n  criteria: [\"file_exists:out.txt\"]\n  require_checks: true\n",
    );
    let (out, report) = run(&dir);
    out.expect_code(1);
    let names: Vec<&str> = report["history"][0]["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .filter_map(|f| f["name"].as_str())
        .collect();
    assert_eq!(names, ["lint", "file_exists:out.txt"], "{out:?}");
    // The request's own `checks:` replaces the default checks; the default criteria stay.
    let text =
        dir.read("delegation.yaml").expect("file") + "checks: [{name: own, run: \"true\"}]\n";
    dir.write("delegation.yaml", text);
    dir.write("ws/out.txt", "x");
    let (out, report) = run(&dir);
    out.expect_code(0);
    let names: Vec<&str> = report["history"][0]["evidence"]
        .as_array()
        .expect("evidence")
        .iter()
        .filter_map(|e| e["criterion"].as_str())
        .collect();
    assert_eq!(names, ["own", "file_exists:out.txt"], "{out:?}");
    // Bad defaults name the project policy and the key.
    dir.write(
        "ws/.harness/policy.yaml",
        "verification_defaults:\n  criteria: [\"bogus:x\"]\n",
    );
    let message = config_error(&dir);
    assert!(
        message.contains(".harness/policy.yaml") && message.contains("`criteria[0]`"),
        "{message}"
    );
}

#[test]
fn the_same_failure_on_stuck_after_attempts_ends_the_loop_early_as_stuck() {
    let dir = delegation(DONE, &format!("  - {TESTS}\n"));
    let text =
        dir.read("delegation.yaml").expect("file") + "max_verify_retries: 6\nstuck_after: 2\n";
    dir.write("delegation.yaml", text);
    let (out, report) = run(&dir);
    out.expect_code(1);
    assert_eq!(report["outcome"], json!("failed"), "{out:?}");
    assert_eq!(report["kind"], json!("stuck"));
    assert_eq!(report["attempts"], json!(2));
    let message = report["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("attempts 1 to 2 failed on the same finding"),
        "{message}"
    );
    assert!(message.contains("check tests"), "{message}");
}

#[test]
fn parallel_checks_run_at_once_and_keep_their_order_in_the_evidence() {
    // Each check waits for the other's marker: run one after the other, both would time out.
    let a = "{name: a, run: \"touch a.mark; for i in 1 2 3 4 5 6 7 8 9 10; do [ -f b.mark ] && exit 0; sleep 0.2; done; exit 1\", parallel: true, timeout_s: 10}";
    let b = "{name: b, run: \"touch b.mark; for i in 1 2 3 4 5 6 7 8 9 10; do [ -f a.mark ] && exit 0; sleep 0.2; done; exit 1\", parallel: true, timeout_s: 10}";
    let dir = delegation(
        DONE,
        &format!("  - {a}\n  - {b}\n  - {{name: c, run: \"true\"}}\n"),
    );
    let (out, report) = run(&dir);
    out.expect_code(0);
    let names: Vec<(&str, &str)> = report["history"][0]["evidence"]
        .as_array()
        .expect("evidence")
        .iter()
        .map(|e| {
            (
                e["criterion"].as_str().unwrap_or_default(),
                e["result"].as_str().unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(
        names,
        [("a", "pass"), ("b", "pass"), ("c", "pass")],
        "{out:?}"
    );
}

#[test]
fn events_stream_as_json_lines_and_are_kept_in_the_journal() {
    let dir = delegation(CLAIMS_THEN_FIXES, &format!("  - {TESTS}\n"));
    let out = harness(["run", "--json", "--journal"])
        .args([dir.join("runs.db"), dir.join("delegation.yaml")])
        .args(["--events".as_ref(), dir.join("events.jsonl").as_os_str()])
        .run();
    out.expect_code(0);
    let report = out.json();
    let lines: Vec<Value> = dir
        .read("events.jsonl")
        .expect("the events file")
        .lines()
        .map(|l| serde_json::from_str(l).expect("each line is JSON"))
        .collect();
    let types: Vec<&str> = lines.iter().filter_map(|e| e["type"].as_str()).collect();
    assert_eq!(
        types,
        [
            "DelegationStarted",
            "AttemptStarted",
            "VerificationStarted",
            "CheckStarted",
            "CheckCompleted",
            // "All tests pass." with the check failing: an unsupported claim.
            "ClaimsChecked",
            "VerificationCompleted",
            "RetryContextAssembled",
            "AttemptStarted",
            "ToolCalled",
            "ToolReturned",
            "VerificationStarted",
            "CheckStarted",
            "CheckCompleted",
            "ClaimsChecked",
            "VerificationCompleted",
            "DelegationCompleted",
        ],
        "{lines:?}"
    );
    for (seq, event) in lines.iter().enumerate() {
        assert_eq!(event["seq"], json!(seq));
        assert_eq!(event["run_id"], report["id"]);
        assert!(event["at"].is_string());
    }
    assert_eq!(lines[4]["check_name"], json!("tests"));
    assert_eq!(lines[4]["passed"], json!(false));
    assert_eq!(lines[4]["exit_code"], json!(1));
    assert_eq!(lines[4]["required"], json!(true));
    assert_eq!(lines[4]["attempt"], json!(0));
    assert_eq!(lines[5]["claims"], json!(1));
    assert_eq!(lines[5]["unsupported"], json!(1));
    assert_eq!(lines[13]["attempt"], json!(1));
    assert_eq!(lines[6]["outcome"], json!("retry"));
    assert_eq!(
        lines[16],
        json!({"run_id": report["id"], "attempt": 1, "seq": 16, "at": lines[16]["at"],
               "type": "DelegationCompleted", "outcome": "passed", "kind": null})
    );
    // The journal keeps the same events; `runs show` prints the evidence table.
    let id = report["id"].as_str().unwrap_or_default().to_owned();
    let show = harness(["runs", "show", "--json", "--journal"])
        .args([dir.join("runs.db").display().to_string(), id.clone()])
        .run();
    show.expect_code(0);
    assert_eq!(show.json()["events"], json!(lines));
    let table = harness(["runs", "show", "--journal"])
        .args([dir.join("runs.db").display().to_string(), id])
        .run();
    table.expect_code(0);
    assert!(
        table.stdout.contains("CRITERION  RESULT   PROOF"),
        "{table:?}"
    );
    let row = |cells: &[&str]| {
        table.stdout.lines().any(|l| {
            l.split_whitespace()
                .take(cells.len())
                .eq(cells.iter().copied())
        })
    };
    assert!(row(&["tests", "fail", "exit", "1"]), "{table:?}");
    assert!(row(&["tests", "pass", "exit", "0"]), "{table:?}");
    // The unsupported "All tests pass." of attempt 1 has its own row.
    assert!(
        row(&["claim:tests", "fail", "claims", "the", "tests", "pass"]),
        "{table:?}"
    );
    // `--events -`: stdout is the events, one JSON object per line, and nothing else (the
    // answer a passed run prints there otherwise stays out).
    let _ = std::fs::remove_file(dir.join("ws/feature.txt"));
    let streamed = harness(["run", "--no-journal", "--events", "-"])
        .args([dir.join("delegation.yaml")])
        .run();
    streamed.expect_code(0);
    let streamed: Vec<Value> = streamed
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    assert_eq!(streamed.len(), lines.len());
    assert_eq!(
        streamed.last().expect("events")["type"],
        json!("DelegationCompleted")
    );
    // `--events -` and `--json` would share stdout.
    let clash = harness(["run", "--json", "--no-journal", "--events", "-"])
        .args([dir.join("delegation.yaml")])
        .run();
    clash.expect_code(2);
    assert_eq!(clash.json()["error"]["kind"], json!("config"), "{clash:?}");
}

#[test]
fn the_report_ranks_the_checks_that_fail_attempts() {
    let dir = delegation(CLAIMS_THEN_FIXES, &format!("  - {TESTS}\n"));
    for _ in 0..2 {
        let _ = std::fs::remove_file(dir.join("ws/feature.txt"));
        run(&dir).0.expect_code(0);
    }
    let journal = dir.join("runs.db").display().to_string();
    let out = harness(["report", "--json", "--html"])
        .args([dir.join("report.html").display().to_string()])
        .args(["--journal", journal.as_str()])
        .run();
    out.expect_code(0);
    let report = out.json();
    assert_eq!(
        report["kinds"][0]["top_checks"],
        json!([{"check": "tests", "count": 2}]),
        "{report}"
    );
    let page = dir.read("report.html").expect("the page");
    assert!(page.contains("Top failing checks"), "{page}");
    let table = harness(["report", "--journal", journal.as_str()]).run();
    assert!(
        table.stdout.contains("top failing checks:\n      2  tests"),
        "{table:?}"
    );
}

/// Writes a placeholder first; told by the tool's verifier, writes the real thing in the same
/// attempt.
const CORRECTS_ITSELF: &str = r#"def respond(request):
    last = request["messages"][-1]
    if last["role"] == "tool" and last["content"].startswith("verify:"):
        return {"tool_calls": [{"name": "write_file", "arguments": {"path": "feature.txt", "content": "done\n"}}]}
    if last["role"] == "tool":
        return "Wrote feature.txt."
    return {"tool_calls": [{"name": "write_file", "arguments": {"path": "feature.txt", "content": "TODO\n"}}]}
"#;

/// A per-tool verifier judges each call as it returns: a refusal is the call's error, read by the
/// delegate in the same turn, an event and an advisory finding — not a failed attempt.
#[test]
fn a_tool_verifier_refuses_a_call_and_the_delegate_corrects_it_in_the_same_attempt() {
    let dir = delegation(CORRECTS_ITSELF, &format!("  - {TESTS}\n"));
    let text = dir.read("delegation.yaml").expect("file").replace(
        "tools: [write_file]\n",
        "tools:\n  - name: write_file\n    verify: |\n      def run(call, result):\n          content = call[\"arguments\"].get(\"content\", \"\")\n          return {\"verified\": \"TODO\" not in content, \"reason\": \"no placeholders in written files\"}\n",
    );
    assert!(text.contains("verify: |"), "{text}");
    dir.write("delegation.yaml", text);
    let (out, report) = run(&dir);
    out.expect_code(0);
    assert_eq!(report["outcome"], json!("passed"), "{out:?}");
    assert_eq!(report["attempts"], json!(1));
    let results = &report["result"]["tool_results"];
    assert_eq!(results[0]["is_error"], json!(true));
    assert!(
        results[0]["content"]
            .as_str()
            .unwrap_or_default()
            .starts_with("verify: no placeholders in written files"),
        "{results}"
    );
    assert_eq!(results[1]["is_error"], json!(false));
    let findings = &report["history"][0]["findings"];
    assert_eq!(findings[0]["source"], json!("verify"));
    assert_eq!(findings[0]["name"], json!("tool write_file"));
    assert_eq!(findings[0]["blocking"], json!(false));
    let id = report["id"].as_str().expect("id").to_owned();
    let show = harness(["runs", "show", "--json", "--journal"])
        .args([dir.join("runs.db").display().to_string(), id])
        .run();
    let refused: Vec<Value> = show.json()["events"]
        .as_array()
        .expect("events")
        .iter()
        .filter(|e| e["type"] == json!("ToolVerificationFailed"))
        .cloned()
        .collect();
    assert_eq!(refused.len(), 1);
    assert_eq!(
        refused[0]["reason"],
        json!("no placeholders in written files")
    );
}

#[test]
fn bad_tool_entries_are_usage_errors_and_a_broken_tool_verifier_stops_the_run() {
    for (tools, expect) in [
        ("tools: [{name: write_file}]\n", "give `verify`"),
        (
            "tools: [{name: write_file, verify: \"x\", verify_file: v.star}]\n",
            "give one of",
        ),
        (
            "tools: [{name: teleport, verify: \"def run(c, r): return True\"}]\n",
            "unknown tool",
        ),
        (
            "tools: [{name: write_file, check: true}]\n",
            "unknown key `check`",
        ),
        ("tools: [42]\n", "expected a tool name"),
        (
            "tools: [{name: write_file, verify: \"def run(c, r): return False\"}, {name: write_file, verify: \"def run(c, r): return True\"}]\n",
            "`tools[1]`: \"write_file\" is listed twice",
        ),
        ("tools: [write_file, write_file]\n", "listed twice"),
    ] {
        let dir = delegation(DONE, "  []\n");
        let text = dir
            .read("delegation.yaml")
            .expect("file")
            .replace("tools: [write_file]\n", tools);
        dir.write("delegation.yaml", text);
        let message = config_error(&dir);
        assert!(message.contains(expect), "{tools}: {message}");
    }
    let dir = delegation(CORRECTS_ITSELF, "  []\n");
    let text = dir.read("delegation.yaml").expect("file").replace(
        "tools: [write_file]\n",
        "tools:\n  - name: write_file\n    verify: |\n      def run(call, result):\n          return 42\n",
    );
    dir.write("delegation.yaml", text);
    let (out, report) = run(&dir);
    out.expect_code(3);
    assert_eq!(report["error"]["kind"], json!("verifier"), "{out:?}");
}

/// What a check cost the machine (issue 48, spend per verification loop): the CPU time of its
/// command and of every process that command waited for — not its wall time — is recorded with
/// it, shown on its progress line, summed per attempt and per run in `runs show`, and sealed in
/// the export's events. A busy check is charged for the work its child did; a check that only
/// waits is charged next to nothing however long it takes.
#[test]
fn each_check_is_charged_the_cpu_its_processes_used_not_its_wall_time() {
    // The loop runs in a child shell the check's own shell waits for.
    let busy = "sh -c 'i=0; while [ $i -lt 400000 ]; do i=$((i+1)); done'";
    let dir = delegation(
        DONE,
        &format!("  - {{name: busy, run: \"{busy}\"}}\n  - {{name: idle, run: \"sleep 1\"}}\n"),
    );
    let (out, report) = run(&dir);
    out.expect_code(0);
    let id = report["id"].as_str().expect("id").to_owned();

    let export = harness(["runs", "export", &id, "--journal"])
        .args([dir.join("runs.db")])
        .run();
    export.expect_code(0);
    let events = export.json()["events"].clone();
    let completed = |name: &str| {
        events
            .as_array()
            .into_iter()
            .flatten()
            .find(|e| e["type"] == "CheckCompleted" && e["data"]["check_name"] == name)
            .map(|e| e["data"].clone())
            .unwrap_or_else(|| panic!("no CheckCompleted for {name} in {events}"))
    };
    let (busy, idle) = (completed("busy"), completed("idle"));
    let figure =
        |e: &Value, key: &str| e[key].as_u64().unwrap_or_else(|| panic!("no {key} in {e}"));
    assert!(
        figure(&busy, "cpu_ms") >= 100,
        "the child's loop is counted: {busy}"
    );
    assert!(
        figure(&busy, "cpu_ms") <= figure(&busy, "duration_ms") + 50,
        "one shell at a time cannot use more CPU than wall time: {busy}"
    );
    assert!(figure(&idle, "duration_ms") >= 900, "{idle}");
    assert!(figure(&idle, "cpu_ms") < 200, "sleeping is not CPU: {idle}");

    // The export with the figures still audits: they are sealed with the events.
    let path = dir.join("export.json");
    std::fs::write(&path, &export.stdout).expect("write export");
    harness(["audit"]).args([&path]).run().expect_code(0);

    let shown = harness(["runs", "show", "--json", "--journal"])
        .args([dir.join("runs.db").display().to_string(), id.clone()])
        .run();
    shown.expect_code(0);
    let spend = &shown.json()["spend"];
    let total = figure(&busy, "cpu_ms") + figure(&idle, "cpu_ms");
    assert_eq!(
        spend["attempts"][0]["check_cpu_ms"],
        json!(total),
        "{spend}"
    );
    assert_eq!(spend["run"]["check_cpu_ms"], json!(total), "{spend}");
    let table = harness(["runs", "show", "--journal"])
        .args([dir.join("runs.db").display().to_string(), id])
        .run();
    table.expect_code(0);
    assert!(table.stdout.contains("CHECK CPU"), "{table:?}");
    // The progress line says it beside the wall time.
    let progress = harness(["run", "--no-journal"])
        .args([dir.join("delegation.yaml")])
        .run();
    progress.expect_code(0);
    assert!(
        progress
            .stderr
            .lines()
            .any(|l| l.contains("check busy: passed in") && l.contains("s (CPU ")),
        "{progress:?}"
    );
}
