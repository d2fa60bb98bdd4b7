//! `harness run` with the scripted delegate: the Ralph loop with exact call counts, the tool jail,
//! limits, delegate failures, configuration errors, and what `--json` and the progress lines show.

use serde_json::{Value, json};

use crate::util::{Output, TempDir, expect_error_kind, harness, keys, response};
use harness_testkit::web::WebServer;

/// What the claims stage says of "Done, I created hello.txt" when nothing wrote it.
const CLAIM: &str = "claim file: claims to have created hello.txt; no tool call wrote it and the workspace has no hello.txt";

/// The task every delegation here gets.
const TASK: &str = "Create hello.txt containing the word hi";

/// Checks the real file system for the claimed file; the reason names the attempt it judged.
const FILE_VERIFIER: &str = r#"
  def run(result):
      path = args["path"]
      if fs.stat(path) == None:
          return {"verified": False, "reason": "%s does not exist (attempt %d)" % (path, result["attempt"])}
      return {"verified": True, "reason": ""}
"#;

/// Lies on its first attempt; once caught, writes the file (its content: the conversation it was
/// sent) and answers with the whole conversation as JSON.
const LIES_ONCE: &str = r#"
def respond(request):
    msgs = request["messages"]
    if request["attempt"] == 0:
        return {"content": "Done, I created hello.txt"}
    if msgs[-1]["role"] == "tool":
        return {"content": json.encode(msgs)}
    return {"tool_calls": [{"name": "write_file", "arguments": {"path": "hello.txt", "content": json.encode(msgs)}}]}
"#;

/// Never does the work; each answer says what it was sent.
const ALWAYS_LIES: &str = r#"
def respond(request):
    msgs = request["messages"]
    return {"content": json.encode({
        "claim": "Done, I created hello.txt",
        "attempt": request["attempt"],
        "turn": request["turn"],
        "tools": request["tools"],
        "messages": len(msgs),
        "last": msgs[-1]["content"],
    })}
"#;

/// Does the work on its first attempt: one tool turn, then the answer.
const HONEST: &str = r#"
def respond(request):
    if request["messages"][-1]["role"] == "tool":
        return {"content": "Wrote hello.txt"}
    return {"tool_calls": [{"name": "write_file", "arguments": {"path": "hello.txt", "content": "hi\n"}}]}
"#;

/// Writes `agent.star` and `delegation.yaml` (`task`, the scripted `delegate`, then `rest`) into
/// a fresh temporary directory.
fn delegation(agent: &str, rest: &str) -> TempDir {
    let dir = TempDir::new();
    dir.write("agent.star", agent);
    dir.write(
        "delegation.yaml",
        format!("task: {TASK:?}\ndelegate: {{kind: scripted, script: agent.star}}\n{rest}"),
    );
    dir
}

/// The file-verified delegation most tests use: `tools: [write_file]`, `args: {path: hello.txt}`,
/// [`FILE_VERIFIER`], and `extra` appended.
fn verified(agent: &str, extra: &str) -> TempDir {
    delegation(
        agent,
        &format!("tools: [write_file]\nargs: {{path: hello.txt}}\nverify: |{FILE_VERIFIER}{extra}"),
    )
}

/// Runs `harness run delegation.yaml --json [extra...]` in `dir` and checks the object's keys.
fn run_json(dir: &TempDir, extra: &[&str]) -> (Output, Value) {
    let out = harness(["run", "delegation.yaml", "--json"])
        .args(extra)
        .current_dir(dir.path())
        .run();
    let value = out.json();
    for key in [
        "id", "outcome", "verified", "attempts", "reasons", "result", "error", "usage",
    ] {
        assert!(value.get(key).is_some(), "missing key {key:?}:\n{out:?}");
    }
    (out, value)
}

/// Returns the model calls made per attempt.
fn requests_per_attempt(report: &Value) -> Vec<u64> {
    report["usage"]["per_attempt"]
        .as_array()
        .expect("usage.per_attempt is a list")
        .iter()
        .map(|a| a["requests"].as_u64().expect("requests is a number"))
        .collect()
}

// --- the Ralph loop ------------------------------------------------------------------------------

#[test]
fn passes_first_try() {
    let dir = verified(HONEST, "");
    let (out, report) = run_json(&dir, &[]);
    out.expect_code(0);
    assert_eq!(report["outcome"], json!("passed"));
    assert_eq!(report["verified"], json!(true));
    assert_eq!(report["attempts"], json!(1));
    // One tool turn and the final answer.
    assert_eq!(requests_per_attempt(&report), [2]);
    assert_eq!(report["usage"]["requests"], json!(2));
    assert_eq!(report["reasons"], json!([[]]));
    assert_eq!(report["error"], Value::Null);
    assert_eq!(report["result"]["attempt"], json!(0));
    assert_eq!(report["result"]["response"], json!("Wrote hello.txt"));
    assert_eq!(
        report["result"]["tool_calls"][0]["arguments"],
        json!({"path": "hello.txt", "content": "hi\n"})
    );
    assert_eq!(
        report["result"]["tool_results"][0]["is_error"],
        json!(false)
    );
    assert_eq!(dir.read("hello.txt").as_deref(), Some("hi\n"));
}

#[test]
fn lies_then_tells_the_truth() {
    let dir = verified(LIES_ONCE, "");
    let (out, report) = run_json(&dir, &[]);
    out.expect_code(0);
    assert_eq!(report["outcome"], json!("passed"));
    assert_eq!(report["attempts"], json!(2));
    // Attempt 1: the lie. Attempt 2: the write, then the answer.
    assert_eq!(requests_per_attempt(&report), [1, 2]);
    assert_eq!(
        report["reasons"],
        json!([[CLAIM, "verify: hello.txt does not exist (attempt 0)"], []])
    );
    assert_eq!(report["result"]["attempt"], json!(1));
    // The same, as structured verdicts: one per attempt, findings with their source.
    assert_eq!(report["kind"], json!(null));
    assert_eq!(report["review"], json!({"status": null}));
    assert_eq!(report["debt"], json!([]));
    // Passed on a verifier's word alone: said (DESIGN §4.7).
    let warnings = report["warnings"].as_array().expect("warnings");
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0]
            .as_str()
            .is_some_and(|w| w.starts_with("verified without evidence")),
        "{warnings:?}"
    );
    let history = report["history"].as_array().expect("history is a list");
    assert_eq!(history.len(), 2, "{history:?}");
    assert_eq!(history[0]["decision"], json!("retry"));
    // The claims stage and the verifier both caught the lie, in pipeline order.
    assert_eq!(history[0]["findings"][0]["source"], json!("claim"));
    assert_eq!(history[0]["findings"][0]["path"], json!("hello.txt"));
    assert_eq!(
        history[0]["findings"][1],
        json!({"source": "verify", "name": "", "severity": "blocking", "blocking": true,
                "message": "hello.txt does not exist (attempt 0)"})
    );
    let prompt = history[0]["retry_prompt"].as_str().expect("a retry prompt");
    assert!(prompt.contains("VERIFICATION FAILED"), "{prompt}");
    assert_eq!(history[1]["decision"], json!("pass"));
    assert_eq!(history[1]["findings"], json!([]));
    assert_eq!(history[1]["retry_prompt"], json!(null));

    // What the SAME delegate was sent on its first turn of attempt 2 (it wrote it into the file):
    // the whole first conversation, then the retry prompt quoting the reason.
    let sent: Value = serde_json::from_str(&dir.read("hello.txt").expect("hello.txt written"))
        .expect("the file holds the conversation");
    let sent = sent.as_array().expect("a list of messages");
    assert_eq!(sent.len(), 3, "{sent:?}");
    assert_eq!(sent[0], json!({"role": "user", "content": TASK}));
    assert_eq!(sent[1]["role"], json!("assistant"));
    assert_eq!(sent[1]["content"], json!("Done, I created hello.txt"));
    assert_eq!(sent[2]["role"], json!("user"));
    let retry = sent[2]["content"].as_str().expect("retry prompt text");
    assert!(retry.contains("VERIFICATION FAILED"), "{retry}");
    assert!(
        retry.contains("verify: hello.txt does not exist (attempt 0)"),
        "{retry}"
    );

    // And on its last turn: all of that, its own tool call and the tool's answer.
    let last = response(&report);
    let last = last.as_array().expect("a list of messages");
    assert_eq!(last.len(), 5, "{last:?}");
    assert_eq!(&last[..3], sent);
    assert_eq!(last[3]["role"], json!("assistant"));
    assert_eq!(last[3]["tool_calls"][0]["name"], json!("write_file"));
    assert_eq!(last[4]["role"], json!("tool"));
    assert_eq!(last[4]["tool_call_id"], last[3]["tool_calls"][0]["id"]);
}

#[test]
fn always_lies_until_the_retries_run_out() {
    let dir = verified(ALWAYS_LIES, "max_verify_retries: 2\n");
    let (out, report) = run_json(&dir, &[]);
    out.expect_code(1);
    assert_eq!(report["outcome"], json!("failed"));
    assert_eq!(report["verified"], json!(false));
    assert_eq!(report["attempts"], json!(3));
    assert_eq!(requests_per_attempt(&report), [1, 1, 1]);
    assert_eq!(report["error"]["kind"], json!("verification_failed"));
    assert_eq!(
        report["reasons"],
        json!([
            [CLAIM, "verify: hello.txt does not exist (attempt 0)"],
            [CLAIM, "verify: hello.txt does not exist (attempt 1)"],
            [CLAIM, "verify: hello.txt does not exist (attempt 2)"],
        ])
    );
    // The error message carries every attempt's reasons too.
    let message = report["error"]["message"].as_str().expect("a message");
    for attempt in 0..3 {
        assert!(
            message.contains(&format!("(attempt {attempt})")),
            "{message}"
        );
    }
    // Without --json the last line names the kind as an error's does: failed[KIND].
    let text = harness(["run", "delegation.yaml"])
        .current_dir(dir.path())
        .run();
    text.expect_code(1)
        .expect_stderr_kind("verification_failed");
    assert!(
        text.stderr.contains("]: not verified after 3 attempts ("),
        "{text:?}"
    );
    // The third request: task, lie, retry, lie, retry.
    let seen = response(&report);
    assert_eq!(seen["attempt"], json!(2));
    assert_eq!(seen["turn"], json!(0));
    assert_eq!(seen["tools"], json!(["write_file"]));
    assert_eq!(seen["messages"], json!(5));
    let last = seen["last"].as_str().expect("the last message");
    assert!(last.contains("VERIFICATION FAILED"), "{last}");
    assert!(last.contains("(attempt 1)"), "{last}");
    assert_eq!(dir.read("hello.txt"), None);
}

#[test]
fn zero_retries_means_one_attempt() {
    let dir = verified(LIES_ONCE, "max_verify_retries: 0\n");
    let (out, report) = run_json(&dir, &[]);
    out.expect_code(1);
    assert_eq!(report["outcome"], json!("failed"));
    assert_eq!(report["attempts"], json!(1));
    assert_eq!(report["usage"]["requests"], json!(1));
    assert_eq!(report["error"]["kind"], json!("verification_failed"));
    assert_eq!(
        report["reasons"],
        json!([[CLAIM, "verify: hello.txt does not exist (attempt 0)"]])
    );
}

#[test]
fn max_verify_retries_defaults_to_two() {
    let dir = verified(ALWAYS_LIES, "");
    let (out, report) = run_json(&dir, &[]);
    out.expect_code(1);
    assert_eq!(report["attempts"], json!(3));
}

#[test]
fn the_flag_overrides_the_files_retries() {
    let dir = verified(ALWAYS_LIES, "max_verify_retries: 2\n");
    let (out, report) = run_json(&dir, &["--max-verify-retries", "0"]);
    out.expect_code(1);
    assert_eq!(report["attempts"], json!(1));

    let (out, report) = run_json(&dir, &["--max-verify-retries", "1"]);
    out.expect_code(1);
    assert_eq!(report["attempts"], json!(2));
    assert_eq!(report["usage"]["requests"], json!(2));

    // A liar that is caught once passes when it gets its retry, and fails without.
    let dir = verified(LIES_ONCE, "max_verify_retries: 0\n");
    let (out, report) = run_json(&dir, &["--max-verify-retries", "3"]);
    out.expect_code(0);
    assert_eq!(report["attempts"], json!(2));
}

#[test]
fn the_project_policy_sets_the_default_retries_and_the_file_overrides_it() {
    let dir = verified(ALWAYS_LIES, "");
    dir.write(
        ".harness/policy.yaml",
        "verification_defaults: {max_verify_retries: 0}\n",
    );
    let (out, report) = run_json(&dir, &[]);
    out.expect_code(1);
    assert_eq!(report["attempts"], json!(1));
    assert_eq!(report["kind"], json!("verification_failed"));
    assert_eq!(report["review"]["status"], json!("pending"));

    let dir = verified(ALWAYS_LIES, "max_verify_retries: 1\n");
    dir.write(
        ".harness/policy.yaml",
        "verification_defaults: {max_verify_retries: 0}\n",
    );
    let (out, report) = run_json(&dir, &[]);
    out.expect_code(1);
    assert_eq!(report["attempts"], json!(2));
}

#[test]
fn a_bad_project_policy_stops_the_run_before_the_delegate_runs() {
    let dir = verified(ALWAYS_LIES, "");
    dir.write(
        ".harness/policy.yaml",
        "verification_defaults: {retries: 1}\n",
    );
    let (out, report) = run_json(&dir, &[]);
    expect_error_kind(&out, &report, 2, "config");
    let message = report["error"]["message"].as_str().expect("a message");
    assert!(message.contains(".harness/policy.yaml"), "{message}");
    assert!(message.contains("retries"), "{message}");
    assert_eq!(report["attempts"], json!(0));
}

#[test]
fn no_verifier_means_skipped() {
    let dir = delegation(ALWAYS_LIES, "tools: [write_file]\nclaims: off\n");
    let (out, report) = run_json(&dir, &[]);
    out.expect_code(0);
    assert_eq!(report["outcome"], json!("skipped"));
    assert_eq!(report["verified"], json!(false));
    assert_eq!(report["attempts"], json!(1));
    assert_eq!(report["usage"]["requests"], json!(1));
    assert_eq!(report["reasons"], json!([]));
    assert_eq!(report["error"], Value::Null);
    assert_eq!(
        response(&report)["claim"],
        json!("Done, I created hello.txt")
    );
}

#[test]
fn without_a_verifier_the_claims_stage_still_catches_a_claimed_file() {
    let dir = delegation(ALWAYS_LIES, "tools: [write_file]\nmax_verify_retries: 1\n");
    let (out, report) = run_json(&dir, &[]);
    out.expect_code(1);
    assert_eq!(report["outcome"], json!("failed"), "{out:?}");
    assert_eq!(report["kind"], json!("verification_failed"));
    assert_eq!(report["reasons"], json!([[CLAIM], [CLAIM]]));
    let evidence = &report["history"][0]["evidence"][0];
    assert_eq!(evidence["source"], json!("claim"), "{evidence}");
    assert_eq!(evidence["result"], json!("fail"));
    assert_eq!(evidence["target"], json!("hello.txt"));
    // `claims: advisory` says it and lets the run end as nothing verified it.
    let dir = delegation(ALWAYS_LIES, "tools: [write_file]\nclaims: advisory\n");
    let (out, report) = run_json(&dir, &[]);
    out.expect_code(0);
    assert_eq!(report["outcome"], json!("skipped"), "{out:?}");
}

#[test]
fn a_broken_verifier_stops_at_once() {
    let cases = [
        // A runtime error in run.
        "\n  def run(result):\n      return 1 // 0\n",
        // A return outside the contract.
        "\n  def run(result):\n      return None\n",
        "\n  def run(result):\n      return {\"verified\": \"yes\"}\n",
        // A limit.
        "\n  def run(result):\n      n = 0\n      for i in range(100000):\n          for j in range(100000):\n              n += 1\n      return True\n",
    ];
    for verify in cases {
        // LIES_ONCE would pass on a retry: there must be none.
        let dir = delegation(
            LIES_ONCE,
            &format!("tools: [write_file]\nverify: |{verify}"),
        );
        let (out, report) = run_json(&dir, &[]);
        expect_error_kind(&out, &report, 3, "verifier");
        assert_eq!(report["attempts"], json!(1), "{verify}");
        assert_eq!(report["usage"]["requests"], json!(1), "{verify}");
        assert_eq!(dir.read("hello.txt"), None, "{verify}");
        let message = report["error"]["message"].as_str().expect("a message");
        assert!(message.contains("delegation.yaml"), "{verify}: {message}");
    }
}

#[test]
fn a_verifier_that_does_not_compile_stops_before_the_delegate_runs() {
    for verify in [
        "\n  def run(result):\n      return (\n",
        "\n  def check(result):\n      return True\n",
    ] {
        let dir = delegation(LIES_ONCE, &format!("verify: |{verify}"));
        let (out, report) = run_json(&dir, &[]);
        expect_error_kind(&out, &report, 3, "verifier");
        assert_eq!(report["attempts"], json!(0), "{verify}");
    }
}

#[test]
fn verify_file_is_relative_to_the_delegation_file() {
    let dir = delegation(
        LIES_ONCE,
        "tools: [write_file]\nargs: {path: hello.txt}\nverify_file: checks/exists.star\nworkdir: ws\n",
    );
    dir.write("checks/exists.star", FILE_VERIFIER.replace("\n  ", "\n"));
    std::fs::create_dir_all(dir.join("ws")).expect("mkdir ws");
    // Run from elsewhere: every path in the file is relative to the file, not the current dir.
    let elsewhere = TempDir::new();
    let out = harness(["run", "--json"])
        .args([dir.join("delegation.yaml")])
        .current_dir(elsewhere.path())
        .run();
    out.expect_code(0);
    let report = out.json();
    assert_eq!(report["attempts"], json!(2));
    assert!(dir.join("ws/hello.txt").is_file());
    assert!(!elsewhere.join("hello.txt").exists());
}

#[test]
fn the_workdir_flag_overrides_the_file() {
    let dir = verified(HONEST, "workdir: ws\n");
    std::fs::create_dir_all(dir.join("ws")).expect("mkdir ws");
    std::fs::create_dir_all(dir.join("other")).expect("mkdir other");
    let (out, _) = run_json(&dir, &["--workdir", "other"]);
    out.expect_code(0);
    assert!(dir.join("other/hello.txt").is_file());
    assert!(!dir.join("ws/hello.txt").exists());
}

#[test]
fn verifier_hosts_come_from_the_file_and_the_flag() {
    let server = WebServer::start();
    let verify = format!(
        "\n  def run(result):\n      r = http.get({:?})\n      return {{\"verified\": r[\"status\"] == 200, \"reason\": \"status %d\" % r[\"status\"]}}\n",
        server.url("/health")
    );
    // Not allowed: the verifier breaks the sandbox, which is a broken verifier.
    let dir = delegation(HONEST, &format!("tools: [write_file]\nverify: |{verify}"));
    let (out, report) = run_json(&dir, &[]);
    expect_error_kind(&out, &report, 3, "verifier");
    // Allowed by the flag.
    let (out, report) = run_json(&dir, &["--allow-host", "127.0.0.1"]);
    out.expect_code(0);
    assert_eq!(report["outcome"], json!("passed"));
    // Allowed by the file.
    let dir = delegation(
        HONEST,
        &format!("tools: [write_file]\nnetwork: {{allow: [127.0.0.1]}}\nverify: |{verify}"),
    );
    let (out, _) = run_json(&dir, &[]);
    out.expect_code(0);
}

// --- tools ---------------------------------------------------------------------------------------

/// An agent that makes `calls` (a Starlark list literal) on its first turn and then answers.
fn calls_once(calls: &str) -> String {
    format!(
        "def respond(request):\n    if request[\"messages\"][-1][\"role\"] == \"tool\":\n        return {{\"content\": \"done\"}}\n    return {{\"tool_calls\": {calls}}}\n"
    )
}

/// Returns `result.tool_results` of a report.
fn tool_results(report: &Value) -> &Vec<Value> {
    report["result"]["tool_results"]
        .as_array()
        .expect("tool_results is a list")
}

#[test]
fn the_tool_jail_refuses_paths_outside_the_workspace() {
    let outside = TempDir::new();
    let abs = outside.join("abs.txt");
    let secret = outside.write("secret.txt", "top secret");
    let calls = format!(
        r#"[
        {{"name": "write_file", "arguments": {{"path": "../escaped.txt", "content": "x"}}}},
        {{"name": "write_file", "arguments": {{"path": {abs:?}, "content": "x"}}}},
        {{"name": "read_file", "arguments": {{"path": {secret:?}}}}},
        {{"name": "list_files", "arguments": {{"path": ".."}}}},
        {{"name": "write_file", "arguments": {{"path": "sub/", "content": "x"}}}},
        {{"name": "write_file", "arguments": {{"path": "inside.txt", "content": "x"}}}},
    ]"#
    );
    let dir = delegation(
        &calls_once(&calls),
        "tools: [write_file, read_file, list_files]\nworkdir: ws\n",
    );
    std::fs::create_dir_all(dir.join("ws")).expect("mkdir ws");
    let (out, report) = run_json(&dir, &[]);
    // Refusals are results the delegate reads, not failures of the delegation.
    out.expect_code(0);
    assert_eq!(report["outcome"], json!("skipped"));
    let results = tool_results(&report);
    assert_eq!(results.len(), 6, "{results:?}");
    for result in &results[..5] {
        assert_eq!(result["is_error"], json!(true), "{result}");
    }
    assert_eq!(results[5]["is_error"], json!(false), "{:?}", results[5]);
    // A path with a trailing `/` names a directory: no file `sub` is made of it.
    assert!(
        results[4]["content"]
            .as_str()
            .is_some_and(|c| c.contains("names a directory")),
        "{:?}",
        results[4]
    );
    assert!(!dir.join("ws/sub").exists());
    assert!(
        !results[2]["content"]
            .as_str()
            .expect("content")
            .contains("top secret")
    );
    assert!(!dir.join("escaped.txt").exists());
    assert!(!abs.exists());
    assert!(dir.join("ws/inside.txt").is_file());
    // The delegate saw the refusals as tool messages on its next turn.
    assert_eq!(report["usage"]["requests"], json!(2));
}

#[cfg(unix)]
#[test]
fn the_tool_jail_refuses_symlink_escapes() {
    let outside = TempDir::new();
    let dir = delegation(
        &calls_once(
            r#"[{"name": "write_file", "arguments": {"path": "link/planted.txt", "content": "x"}}]"#,
        ),
        "tools: [write_file]\nworkdir: ws\n",
    );
    std::fs::create_dir_all(dir.join("ws")).expect("mkdir ws");
    std::os::unix::fs::symlink(outside.path(), dir.join("ws/link")).expect("symlink");
    let (out, report) = run_json(&dir, &[]);
    out.expect_code(0);
    assert_eq!(tool_results(&report)[0]["is_error"], json!(true));
    assert!(!outside.join("planted.txt").exists());
}

#[test]
fn a_tool_not_offered_is_an_error_result() {
    let dir = delegation(
        &calls_once(
            r#"[{"name": "write_file", "arguments": {"path": "hello.txt", "content": "hi"}},
                {"name": "teleport", "arguments": {}}]"#,
        ),
        "tools: [read_file]\n",
    );
    let (out, report) = run_json(&dir, &[]);
    out.expect_code(0);
    let results = tool_results(&report);
    assert_eq!(results.len(), 2);
    for result in results {
        assert_eq!(result["is_error"], json!(true), "{result}");
    }
    assert!(
        results[0]["content"]
            .as_str()
            .expect("content")
            .contains("write_file")
    );
    assert_eq!(dir.read("hello.txt"), None);
}

#[test]
fn run_command_runs_in_the_workspace() {
    let dir = delegation(
        &calls_once(
            r#"[{"name": "run_command", "arguments": {"argv": ["echo", "hello from echo"]}},
                {"name": "run_command", "arguments": {"argv": ["ls"]}},
                {"name": "run_command", "arguments": {"argv": ["false"]}}]"#,
        ),
        "tools: [run_command]\nworkdir: ws\n",
    );
    dir.write("ws/marker.txt", "");
    let (out, report) = run_json(&dir, &[]);
    out.expect_code(0);
    let results = tool_results(&report);
    assert_eq!(results.len(), 3);
    let content = |i: usize| results[i]["content"].as_str().expect("content");
    assert_eq!(results[0]["is_error"], json!(false));
    assert!(content(0).contains("hello from echo"), "{}", content(0));
    assert_eq!(results[1]["is_error"], json!(false));
    assert!(content(1).contains("marker.txt"), "{}", content(1));
    // A failing command is an error result with its exit code, not a failed delegation.
    assert_eq!(results[2]["is_error"], json!(true));
}

// --- limits --------------------------------------------------------------------------------------

#[test]
fn the_turn_limit_stops_a_delegate_that_never_answers() {
    let dir = delegation(
        "def respond(request):\n    return {\"tool_calls\": [{\"name\": \"list_files\", \"arguments\": {}}]}\n",
        "tools: [list_files]\nlimits: {max_turns: 3}\n",
    );
    let (out, report) = run_json(&dir, &[]);
    expect_error_kind(&out, &report, 4, "timeout");
    assert_eq!(report["attempts"], json!(1));
    assert_eq!(report["usage"]["requests"], json!(3));
    let message = report["error"]["message"].as_str().expect("a message");
    assert!(message.contains("max_turns"), "{message}");
}

#[test]
fn the_delegation_timeout_stops_a_hanging_tool() {
    let dir = delegation(
        &calls_once(r#"[{"name": "run_command", "arguments": {"argv": ["sleep", "30"]}}]"#),
        "tools: [run_command]\nlimits: {timeout_s: 1}\n",
    );
    let (out, report) = run_json(&dir, &[]);
    expect_error_kind(&out, &report, 4, "timeout");
    let message = report["error"]["message"].as_str().expect("a message");
    assert!(message.contains("timeout_s"), "{message}");
}

// --- broken delegates ----------------------------------------------------------------------------

#[test]
fn a_delegate_script_that_does_not_compile_is_a_configuration_error() {
    for agent in [
        "def respond(request):\n    return (\n",
        "def reply(request):\n    return \"hi\"\n",
    ] {
        let dir = delegation(agent, "");
        let (out, report) = run_json(&dir, &[]);
        expect_error_kind(&out, &report, 2, "config");
        let message = report["error"]["message"].as_str().expect("a message");
        assert!(message.contains("agent.star"), "{agent}: {message}");
    }
}

#[test]
fn a_delegate_script_that_fails_is_a_delegate_error() {
    for agent in [
        "def respond(request):\n    return 1 // 0\n",
        "def respond(request):\n    fail(\"model unavailable\")\n",
        "def respond(request):\n    return 3\n",
        "def respond(request):\n    return {\"contents\": \"typo\"}\n",
    ] {
        let dir = verified(agent, "");
        let (out, report) = run_json(&dir, &[]);
        expect_error_kind(&out, &report, 4, "delegate");
        assert_eq!(report["attempts"], json!(1), "{agent}");
        let message = report["error"]["message"].as_str().expect("a message");
        assert!(message.contains("agent.star"), "{agent}: {message}");
    }
}

// --- configuration errors ------------------------------------------------------------------------

#[test]
fn malformed_delegation_files_are_configuration_errors() {
    const DELEGATE: &str = "delegate: {kind: scripted, script: agent.star}\n";
    let cases: Vec<(String, &[&str])> = vec![
        (format!("task: x\n{DELEGATE}bogus: 1\n"), &["bogus"]),
        (
            "task: x\ndelegate: {kind: scripted, script: agent.star, extra: 1}\n".to_owned(),
            &["extra"],
        ),
        (
            "task: x\ndelegate: {kind: wizard}\n".to_owned(),
            &["wizard"],
        ),
        (DELEGATE.to_owned(), &["task"]),
        ("task: x\n".to_owned(), &["delegate"]),
        (format!("task: ''\n{DELEGATE}"), &["task"]),
        (
            format!("task: x\n{DELEGATE}verify: 'def run(r): return True'\nverify_file: v.star\n"),
            &["verify", "verify_file"],
        ),
        (
            format!("task: x\n{DELEGATE}verify_file: nope.star\n"),
            &["verify_file", "nope.star"],
        ),
        (
            "task: x\ndelegate: {kind: scripted, script: missing.star}\n".to_owned(),
            &["delegate.script", "missing.star"],
        ),
        (
            format!("task: x\n{DELEGATE}max_verify_retries: \"two\"\n"),
            &["max_verify_retries"],
        ),
        (
            format!("task: x\n{DELEGATE}max_verify_retries: -1\n"),
            &["max_verify_retries"],
        ),
        (
            format!("task: x\n{DELEGATE}tools: [write_file, teleport]\n"),
            &["tools", "teleport"],
        ),
        (
            format!("task: x\n{DELEGATE}limits: {{max_turns: 0}}\n"),
            &["max_turns"],
        ),
        (
            format!("task: x\n{DELEGATE}limits: {{timeout_s: -5}}\n"),
            &["timeout_s"],
        ),
        (
            format!("task: x\n{DELEGATE}limits: {{max_turns: 3, forever: true}}\n"),
            &["forever"],
        ),
        (
            format!("task: x\n{DELEGATE}workdir: no-such-dir\n"),
            &["workdir"],
        ),
        (format!("task: [x\n{DELEGATE}"), &[]),
    ];
    for (text, needles) in cases {
        let dir = TempDir::new();
        dir.write("agent.star", HONEST);
        dir.write("delegation.yaml", &text);
        let (out, report) = run_json(&dir, &[]);
        expect_error_kind(&out, &report, 2, "config");
        let message = report["error"]["message"].as_str().expect("a message");
        assert!(
            message.contains("delegation.yaml"),
            "{text}: the message names the file: {message}"
        );
        for needle in needles {
            assert!(
                message.contains(needle),
                "{text}: expected {needle:?} in {message}"
            );
        }
        // Without --json the same error is one line on stderr.
        let out = harness(["run", "delegation.yaml"])
            .current_dir(dir.path())
            .run();
        out.expect_code(2).expect_stderr_kind("config");
        assert!(out.stderr.contains("delegation.yaml"), "{out:?}");
    }
}

#[test]
fn a_missing_delegation_file_is_a_configuration_error() {
    let dir = TempDir::new();
    let (out, report) = run_json(&dir, &[]);
    expect_error_kind(&out, &report, 2, "config");
    let message = report["error"]["message"].as_str().expect("a message");
    assert!(message.contains("delegation.yaml"), "{message}");
}

// --- output --------------------------------------------------------------------------------------

#[test]
fn the_json_object() {
    let dir = verified(LIES_ONCE, "");
    let (out, report) = run_json(&dir, &[]);
    out.expect_code(0);
    let id = report["id"].as_str().expect("id is a string");
    assert!(id.starts_with("d-"), "{id}");
    assert_eq!(report["result"]["id"], json!(id));
    assert_eq!(report["retry_template"]["version"], json!("retry-v3"));
    let sha = report["retry_template"]["sha256"]
        .as_str()
        .expect("the template's hash");
    assert_eq!(sha.len(), 64);
    assert!(sha.chars().all(|c| c.is_ascii_hexdigit()), "{sha}");
    assert_eq!(report["delegate"]["kind"], json!("scripted"));
    assert_eq!(
        keys(&report["result"]),
        [
            "attempt",
            "changes",
            "evidence",
            "id",
            "parent_id",
            "response",
            "tool_calls",
            "tool_results"
        ]
    );
    for key in ["input_tokens", "output_tokens", "requests", "per_attempt"] {
        assert!(report["usage"].get(key).is_some(), "usage.{key}: {report}");
    }
    // Quiet: no progress lines with --json.
    assert!(!out.stderr.contains("attempt 1/"), "{out:?}");
    // Every run gets its own id.
    let (_, again) = run_json(&dir, &[]);
    assert_ne!(again["id"], report["id"]);
}

#[test]
fn progress_goes_to_stderr_and_the_answer_to_stdout() {
    let dir = verified(LIES_ONCE, "");
    let out = harness(["run", "delegation.yaml"])
        .current_dir(dir.path())
        .run();
    out.expect_code(0);
    for line in [
        "attempt 1/3",
        "NOT VERIFIED",
        "verify: hello.txt does not exist (attempt 0)",
        "retrying",
        "attempt 2/3",
        "tool write_file",
        "verified",
        "passed",
    ] {
        assert!(
            out.stderr.contains(line),
            "expected {line:?} on stderr:\n{out:?}"
        );
    }
    // The stdout is the verified answer, nothing else.
    let answer: Value = serde_json::from_str(out.stdout.trim()).expect("the agent's JSON answer");
    assert!(answer.is_array(), "{out:?}");

    // A failed run says so.
    let dir = verified(ALWAYS_LIES, "max_verify_retries: 1\n");
    let out = harness(["run", "delegation.yaml"])
        .current_dir(dir.path())
        .run();
    out.expect_code(1);
    assert!(out.stderr.contains("attempt 2/2"), "{out:?}");
    assert!(out.stderr.contains("failed"), "{out:?}");
    assert!(
        out.stdout.is_empty(),
        "an unverified answer is not printed:\n{out:?}"
    );
}

/// A tool that cannot be set up (`run_command` needs a private HOME, and the temporary directory
/// is gone) is an error of kind `tool`, exit 4: the delegate never runs without it.
#[test]
fn a_tool_that_cannot_be_set_up_is_a_tool_error() {
    let dir = delegation(HONEST, "tools: [run_command]\nmax_verify_retries: 0\n");
    let out = harness(["run", "delegation.yaml", "--json", "--no-journal"])
        .current_dir(dir.path())
        .env("TMPDIR", &dir.join("no-such-dir").display().to_string())
        .run();
    let report = out.json();
    expect_error_kind(&out, &report, 4, "tool");
    let message = report["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("private HOME for run_command"),
        "{message}"
    );
}

/// `harness init` writes a `.harness/` that `hooks check` and `harness test` accept and a
/// delegation `run` passes offline; it never overwrites without `--force`, and writes nothing
/// when it would.
#[test]
fn init_writes_a_working_project_and_never_overwrites_unasked() {
    let dir = TempDir::new();
    let out = harness(["init"]).args([dir.path()]).run();
    out.expect_code(0);
    for file in [
        ".harness/policy.yaml",
        ".harness/hooks/claim-check.md",
        ".harness/verifiers/file-exists.star",
        ".harness/verifiers/file-exists_test.star",
        ".harness/hooks/claim-check_test.star",
        ".harness/agents/example.star",
        "delegation.yaml",
    ] {
        assert!(dir.join(file).is_file(), "{file} missing: {out:?}");
    }
    harness(["hooks", "check"])
        .args([dir.join(".harness/hooks")])
        .run()
        .expect_code(0);
    // Its policy tests pass, covering every statement of the hook and the verifier.
    let tested = harness(["test", "--coverage"])
        .args([dir.join(".harness")])
        .run();
    tested.expect_code(0);
    assert!(
        tested.stdout.contains("100.00%  total")
            && tested.stdout.ends_with("6 passed, 0 failed, 0 errors\n"),
        "{tested:?}"
    );
    let run = harness(["run", "delegation.yaml", "--json", "--no-journal"])
        .current_dir(dir.path())
        .run();
    run.expect_code(0);
    let report = run.json();
    assert_eq!(report["outcome"], json!("passed"), "{run:?}");
    assert_eq!(report["attempts"], json!(2));
    // A second init refuses, naming what exists, and leaves an edited file alone.
    dir.write("delegation.yaml", "task: mine\n");
    let again = harness(["init"]).args([dir.path()]).run();
    again.expect_code(2).expect_stderr_kind("config");
    assert!(again.stderr.contains("--force"), "{again:?}");
    assert_eq!(dir.read("delegation.yaml").as_deref(), Some("task: mine\n"));
    harness(["init", "--force"])
        .args([dir.path()])
        .run()
        .expect_code(0);
    assert_ne!(dir.read("delegation.yaml").as_deref(), Some("task: mine\n"));
}

/// Arguments harness refuses exit 2 with clap's reason and usage on stderr; asked for `--json`,
/// stdout carries the reason as JSON too. `--help` is still help, on stdout, exit 0.
#[test]
fn a_refused_argument_with_json_is_a_json_error_on_stdout() {
    let out = harness(["runs", "list", "--json", "--limt", "5"]).run();
    out.expect_code(2);
    let error = &out.json()["error"];
    assert_eq!(error["kind"], json!("config"), "{out:?}");
    assert_eq!(
        error["message"],
        json!("unexpected argument '--limt' found"),
        "{out:?}"
    );
    assert!(out.stderr.contains("Usage: harness runs list"), "{out:?}");

    let out = harness(["runs", "list", "--limt", "5"]).run();
    out.expect_code(2);
    assert!(out.stdout.is_empty(), "{out:?}");
    assert!(
        out.stderr.contains("unexpected argument '--limt'"),
        "{out:?}"
    );

    let out = harness(["run", "--help"]).run();
    out.expect_code(0);
    assert!(out.stdout.contains("Usage: harness run"), "{out:?}");
}
