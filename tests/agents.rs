//! Agent CLI delegates against fake CLIs (tests/fixtures/agents) that print the documented
//! output formats: a retry resumes the same session with the retry prompt, the CLI's own tool
//! use lands in the Result, the session id in the events, and every way the CLI can go wrong is a
//! typed `delegate` error with its raw output — never a fresh session posing as the same one.

use serde_json::{Value, json};

use crate::util::{TempDir, expect_error_kind, harness, repo_root};

const TASK: &str = "Create hello.txt containing the word hi";

/// A workspace with a delegation file for `kind`, run by the fake CLI.
fn project(kind: &str) -> TempDir {
    let dir = TempDir::new();
    let binary = repo_root().join("tests/fixtures/agents").join(kind);
    dir.write(
        "delegation.yaml",
        format!(
            r#"task: "{TASK}"
delegate: {{kind: {kind}, binary: "{}"}}
verify: |
  def run(result):
      if fs.stat("hello.txt") == None:
          return {{"verified": False, "reason": "expected file hello.txt does not exist"}}
      return "hi" in fs.read("hello.txt")
workdir: ws
"#,
            binary.display()
        ),
    );
    std::fs::create_dir_all(dir.join("ws")).expect("workspace");
    dir
}

/// harness with `args`, for a CLI whose user's HOME is `home/` in `dir`: confined, the CLI sees
/// nothing of that HOME but its own configuration directory (`.claude`, `.codex`, `.gemini`,
/// `.aider`), where the fake keeps its log.
fn harness_in(dir: &TempDir, args: &[&str]) -> crate::util::Harness {
    let home = dir.join("home");
    std::fs::create_dir_all(&home).expect("home");
    harness(args).env("HOME", &home.display().to_string())
}

/// Where the fake for `kind` logs: its own configuration directory.
fn log_of(dir: &TempDir, kind: &str) -> std::path::PathBuf {
    dir.join("home").join(format!(".{kind}")).join("agent.log")
}

/// The invocations the fake recorded: each a list of arguments.
fn invocations(dir: &TempDir, kind: &str) -> Vec<Vec<String>> {
    let log = std::fs::read(log_of(dir, kind)).unwrap_or_default();
    String::from_utf8_lossy(&log)
        .split("\0\0")
        .filter(|i| !i.is_empty())
        .map(|i| i.split('\0').map(str::to_owned).collect())
        .collect()
}

fn run(dir: &TempDir, kind: &str, mode: Option<&str>) -> (crate::util::Output, Value) {
    let mut h = harness_in(dir, &["run", "--json", "--no-journal", "--events"])
        .args([dir.join("events.jsonl"), dir.join("delegation.yaml")])
        .env("FAKE_AGENT_LOG", &log_of(dir, kind).display().to_string());
    if let Some(mode) = mode {
        h = h.env("FAKE_AGENT_MODE", mode);
    }
    let out = h.run();
    let report = out.json();
    (out, report)
}

fn events(dir: &TempDir) -> Vec<Value> {
    dir.read("events.jsonl")
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).expect("an event line"))
        .collect()
}

/// For each preset: attempt 1 lies in a new session, the verifier catches it, attempt 2 resumes
/// that session with the retry prompt (not the task again) and does the work.
fn lie_then_resume(kind: &str, resume: &[&str], tools: &[&str]) {
    let dir = project(kind);
    let (out, report) = run(&dir, kind, None);
    out.expect_code(0);
    assert_eq!(report["outcome"], json!("passed"), "{out:?}");
    assert_eq!(report["attempts"], json!(2));
    assert_eq!(report["delegate"]["kind"], json!(kind));
    let calls: Vec<&str> = report["result"]["tool_calls"]
        .as_array()
        .expect("tool calls")
        .iter()
        .map(|c| c["name"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(calls, tools, "{report}");
    let results = report["result"]["tool_results"]
        .as_array()
        .expect("results");
    assert_eq!(results.len(), tools.len());
    assert!(
        results.iter().all(|r| r["is_error"] == json!(false)),
        "{results:?}"
    );

    let runs = invocations(&dir, kind);
    assert_eq!(runs.len(), 2, "{runs:?}");
    assert_eq!(
        runs[0].last().map(String::as_str),
        Some(TASK),
        "{:?}",
        runs[0]
    );
    for flag in resume {
        assert!(!runs[0].iter().any(|a| a == flag), "{:?}", runs[0]);
    }
    let second = &runs[1];
    let prompt = second.last().expect("a prompt");
    assert!(prompt.starts_with("VERIFICATION FAILED"), "{prompt}");
    assert!(
        prompt.contains("expected file hello.txt does not exist"),
        "{prompt}"
    );
    assert!(
        !prompt.contains(TASK),
        "the resumed session already has the task: {prompt}"
    );
    // The resume flag, followed by the session id the first run reported.
    let at = second
        .iter()
        .position(|a| a == resume[0])
        .unwrap_or_else(|| panic!("{} not in {second:?}", resume[0]));
    let events = events(&dir);
    let sessions: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == json!("DelegateSession"))
        .collect();
    assert_eq!(sessions.len(), 1, "{events:?}");
    if let Some(id) = resume.get(1) {
        assert_eq!(
            second.get(at + 1).map(String::as_str),
            Some(*id),
            "{second:?}"
        );
        assert_eq!(sessions[0]["session_id"], json!(id));
    }
    let observed = events
        .iter()
        .filter(|e| e["type"] == json!("ToolCalled") && e["observed"] == json!(true))
        .count();
    assert_eq!(observed, tools.len(), "{events:?}");
}

#[test]
fn claude_resumes_its_session_and_its_tool_use_is_recorded() {
    lie_then_resume(
        "claude",
        &["--resume", "5f0c1a2e-0d5b-4b8e-9c57-1f3e0a9b7c21"],
        &["Write"],
    );
}

#[test]
fn codex_resumes_its_thread_and_its_items_are_recorded() {
    lie_then_resume(
        "codex",
        &["resume", "0199a213-81c0-7800-8aa1-bbab2a035a53"],
        &["command_execution", "file_change"],
    );
}

#[test]
fn gemini_resumes_its_session_and_its_tool_use_is_recorded() {
    lie_then_resume(
        "gemini",
        &["--resume", "c7a21d9e-5b3f-4e8a-b6d2-0f1e2d3c4b5a"],
        &["write_file"],
    );
}

#[test]
fn aider_restores_its_chat_history_and_reports_no_tools() {
    lie_then_resume("aider", &["--restore-chat-history"], &[]);
    // Both runs name the same history file, outside the workspace.
    let dir = project("aider");
    run(&dir, "aider", None).0.expect_code(0);
    let runs = invocations(&dir, "aider");
    let history = |args: &Vec<String>| {
        let at = args
            .iter()
            .position(|a| a == "--chat-history-file")
            .expect("--chat-history-file");
        args[at + 1].clone()
    };
    assert_eq!(history(&runs[0]), history(&runs[1]));
    assert!(!history(&runs[0]).starts_with(&dir.path().display().to_string()));
}

/// What a CLI's run leaves is auditable: the export of a resumed run with observed tool calls
/// audits clean (every call has its one result).
#[test]
fn a_resumed_run_audits_clean() {
    let dir = project("claude");
    let out = harness_in(&dir, &["run", "--json", "--journal"])
        .args([dir.join("runs.db"), dir.join("delegation.yaml")])
        .run();
    out.expect_code(0);
    let id = out.json()["id"].as_str().expect("an id").to_owned();
    let audit = harness(["audit", &id, "--json", "--journal"])
        .args([dir.join("runs.db")])
        .run();
    audit.expect_code(0);
    assert_eq!(audit.json()["valid"], json!(true));
}

/// Every way the CLI can fail is a `delegate` error (exit 4) with the CLI's own words.
#[test]
fn cli_failures_are_delegate_errors_with_the_raw_output() {
    for (mode, needles) in [
        (
            "garbage",
            &[
                "line 1 of its output is not stream-json",
                "Welcome to Claude Code!",
            ][..],
        ),
        ("no-session", &["names no session id"][..]),
        (
            "refuse-resume",
            &[
                "exited with code 1",
                "No conversation found with session ID: 5f0c1a2e-0d5b-4b8e-9c57-1f3e0a9b7c21",
            ][..],
        ),
        (
            "fresh-session",
            &[
                "asked to resume session 5f0c1a2e",
                "did not continue the same session",
            ][..],
        ),
        ("auth", &["Invalid API key · Please run /login"][..]),
    ] {
        let dir = project("claude");
        let (out, report) = run(&dir, "claude", Some(mode));
        expect_error_kind(&out, &report, 4, "delegate");
        let message = report["error"]["message"].as_str().unwrap_or_default();
        for needle in needles {
            assert!(message.contains(needle), "{mode}: {message}");
        }
    }
}

/// A CLI that runs past its timeout is killed (with its process group) and the delegation ends
/// in a `delegate` error saying so.
#[test]
fn a_hanging_cli_is_killed_at_its_timeout() {
    let dir = project("claude");
    let file = dir.read("delegation.yaml").expect("delegation");
    dir.write(
        "delegation.yaml",
        file.replace("binary:", "timeout_s: 1, binary:"),
    );
    let (out, report) = run(&dir, "claude", Some("hang"));
    expect_error_kind(&out, &report, 4, "delegate");
    let message = report["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("timed out after 1s"), "{message}");
    assert!(
        message.contains("killed with its process group"),
        "{message}"
    );
}

/// A CLI that is not installed is a configuration error naming how to install it; unknown keys
/// in the preset are named too.
#[test]
fn a_missing_cli_or_a_bad_preset_is_a_configuration_error() {
    let dir = TempDir::new();
    dir.write(
        "delegation.yaml",
        "task: t\ndelegate: {kind: claude, binary: ./no-such-claude}\n",
    );
    let out = harness(["run", "--json", "--no-journal"])
        .args([dir.join("delegation.yaml")])
        .run();
    let report = out.json();
    expect_error_kind(&out, &report, 2, "config");
    let message = report["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("npm install -g @anthropic-ai/claude-code"),
        "{message}"
    );
    dir.write(
        "delegation.yaml",
        "task: t\ndelegate: {kind: codex, modle: o4}\n",
    );
    let out = harness(["run", "--json", "--no-journal"])
        .args([dir.join("delegation.yaml")])
        .run();
    let report = out.json();
    expect_error_kind(&out, &report, 2, "config");
    assert!(
        report["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("modle")),
        "{report}"
    );
}
