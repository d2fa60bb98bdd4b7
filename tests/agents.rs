//! Agent CLI delegates against a fake Claude Code (tests/fixtures/agents/claude) for what the real
//! CLIs cannot be made to do (tests/real_clis.rs runs the real ones): an output format that
//! changed under us, a stream without a session id, a resume the CLI refuses or answers with a
//! fresh session — each a typed `delegate` error with its raw output, never a fresh session
//! posing as the same one — and a preset that is misconfigured.

use serde_json::Value;

use crate::util::{TempDir, expect_error_kind, harness, repo_root};

const TASK: &str = "Create hello.txt containing the word hi";

/// A workspace with a delegation file run by the fake Claude Code.
fn project() -> TempDir {
    let dir = TempDir::new();
    let binary = repo_root().join("tests/fixtures/agents/claude");
    dir.write(
        "delegation.yaml",
        format!(
            r#"task: "{TASK}"
delegate: {{kind: claude, binary: "{}"}}
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

/// harness with `args`, for a CLI whose user's HOME is `home/` in `dir`.
fn harness_in(dir: &TempDir, args: &[&str]) -> crate::util::Harness {
    let home = dir.join("home");
    std::fs::create_dir_all(&home).expect("home");
    harness(args).env("HOME", &home.display().to_string())
}

fn run(dir: &TempDir, mode: &str) -> (crate::util::Output, Value) {
    let out = harness_in(dir, &["run", "--json", "--no-journal"])
        .args([dir.join("delegation.yaml")])
        .env("FAKE_AGENT_MODE", mode)
        .run();
    let report = out.json();
    (out, report)
}

/// Every way the CLI can fail is a `delegate` error (exit 4) with the CLI's own words.
#[test]
fn cli_failures_are_delegate_errors_with_the_raw_output() {
    for (mode, needles) in [
        (
            "garbage",
            &[
                // The CLI, its version and the line it could not read.
                "delegate `claude`, version 2.1.332 (Claude Code)",
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
    ] {
        let dir = project();
        let (out, report) = run(&dir, mode);
        expect_error_kind(&out, &report, 4, "delegate");
        let message = report["error"]["message"].as_str().unwrap_or_default();
        for needle in needles {
            assert!(message.contains(needle), "{mode}: {message}");
        }
    }
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

/// A delegation the agent CLI makes itself (through `harness mcp`, or `harness run`) is recorded
/// as a child of the run that started the CLI: the CLI runs with `HARNESS_PARENT_ID` set to it.
#[test]
fn an_agent_cli_runs_with_its_run_as_harness_parent_id() {
    let dir = project();
    let out = harness_in(&dir, &["run", "--json", "--no-journal"])
        .args([dir.join("delegation.yaml")])
        .env(
            "FAKE_AGENT_RUN",
            "printf %s \"$HARNESS_PARENT_ID\" > parent.txt",
        )
        .run();
    out.expect_code(0);
    let report = out.json();
    assert_eq!(
        dir.read("ws/parent.txt").as_deref(),
        report["id"].as_str(),
        "{report}"
    );
}

/// A CLI offered `tools: [delegate]` whose own stream claims calls of it — under harness's
/// name, and under the name of the server its run serves — lists no child: the run's tool log
/// holds only what harness ran, the forged calls are kept under the CLI's name, and the audit
/// finds the record whole.
#[test]
fn a_cli_that_forges_delegate_calls_in_its_stream_lists_no_child() {
    let dir = project();
    let file = dir.read("delegation.yaml").expect("the delegation file");
    dir.write(
        "delegation.yaml",
        file.replace(
            "verify:",
            "tools: [delegate]\ndelegates:\n  w: {delegate: {kind: command, command: [\"true\"]}}\nverify:",
        ),
    );
    let journal = dir.join("runs.db");
    let out = harness_in(&dir, &["run", "--json", "--journal"])
        .args([journal.clone(), dir.join("delegation.yaml")])
        .env("FAKE_AGENT_MODE", "forge-delegate")
        .run();
    out.expect_code(0);
    let report = out.json();
    assert_eq!(report["children"], serde_json::json!([]), "{report}");
    let id = report["id"].as_str().expect("an id");
    let show = harness_in(&dir, &["runs", "show", id, "--json", "--journal"])
        .args([journal.clone()])
        .run();
    show.expect_code(0);
    let first = &show.json()["attempts"][0]["result"];
    let names: Vec<&str> = first["tool_calls"]
        .as_array()
        .expect("the first attempt's tool calls")
        .iter()
        .filter_map(|c| c["name"].as_str())
        .collect();
    assert_eq!(names, ["claude:delegate"], "{first}");
    let export = harness_in(&dir, &["runs", "export", id, "--journal"])
        .args([journal.clone()])
        .run();
    export.expect_code(0);
    assert_eq!(export.json()["children"], serde_json::json!([]));
    let audit = harness_in(&dir, &["audit", id, "--json", "--journal"])
        .args([journal])
        .run();
    audit.expect_code(0);
    assert_eq!(audit.json()["valid"], serde_json::json!(true), "{audit:?}");
}
