//! The rough edges a newcomer hits, each as they would see it: colour codes only on a terminal,
//! the reason after a refused tool call, the reason on a failed batch line.

use crate::util::{TempDir, harness};

/// A delegate that first calls `write_file` on a path outside the workspace (refused), then
/// claims the work done.
fn project(dir: &TempDir) {
    std::fs::create_dir_all(dir.join("ws")).expect("workspace");
    dir.write(
        "agent.star",
        r#"def respond(request):
    if request["messages"][-1]["role"] == "tool":
        return {"content": "Done, I created hello.txt"}
    return {"tool_calls": [{"name": "write_file", "arguments": {"path": "../outside.txt", "content": "x"}}]}
"#,
    );
    dir.write(
        "delegation.yaml",
        r#"task: "Create hello.txt"
delegate: {kind: scripted, script: agent.star}
tools: [write_file]
verify: |
  def run(result):
      return {"verified": fs.exists("hello.txt"), "reason": "hello.txt does not exist"}
max_verify_retries: 0
workdir: ws
"#,
    );
}

/// Log lines (`HARNESS_LOG`) and warnings carry no ANSI escapes when stderr is not a terminal,
/// `--json` or not; `CLICOLOR_FORCE` asks for them, `NO_COLOR` wins over a terminal.
#[test]
fn no_colour_codes_unless_stderr_is_a_terminal() {
    let dir = TempDir::new();
    project(&dir);
    for json in [true, false] {
        let mut args = vec!["run", "--no-journal"];
        if json {
            args.push("--json");
        }
        let out = harness(&args)
            .args([dir.join("delegation.yaml")])
            .env("HARNESS_LOG", "info")
            .env("NO_COLOR", "")
            .env("CLICOLOR_FORCE", "")
            .run();
        assert!(out.stderr.contains("AttemptStarted"), "{out:?}");
        assert!(!out.stderr.contains('\u{1b}'), "ANSI in stderr: {out:?}");
    }
    let forced = harness(["run", "--no-journal"])
        .args([dir.join("delegation.yaml")])
        .env("HARNESS_LOG", "info")
        .env("CLICOLOR_FORCE", "1")
        .run();
    assert!(forced.stderr.contains('\u{1b}'), "{forced:?}");
}

/// A refused tool call prints why after `-> error`, as the delegate was told.
#[test]
fn a_refused_tool_call_says_why() {
    let dir = TempDir::new();
    project(&dir);
    let out = harness(["run", "--no-journal"])
        .args([dir.join("delegation.yaml")])
        .run();
    let line = out
        .stderr
        .lines()
        .find(|l| l.contains("tool write_file"))
        .unwrap_or_else(|| panic!("no tool line: {out:?}"));
    assert!(line.contains("-> error: "), "{line}");
    assert!(line.contains("escapes the workspace root"), "{line}");
}

/// A failed line of a batch names its primary reason, not only "verification failed on all 1
/// attempts".
#[test]
fn a_failed_batch_line_names_its_reason() {
    let dir = TempDir::new();
    project(&dir);
    let entry = serde_json::json!({
        "task": "Create hello.txt",
        "delegate": {"kind": "scripted", "script": dir.join("agent.star")},
        "tools": ["write_file"],
        "verify": "def run(result):\n    return {\"verified\": False, \"reason\": \"hello.txt is missing\"}\n",
        "max_verify_retries": 0,
        "workdir": dir.join("ws"),
    });
    dir.write("batch.jsonl", format!("{entry}\n"));
    let out = harness(["batch", "--no-journal"])
        .args([dir.join("batch.jsonl")])
        .run();
    let line = out
        .stderr
        .lines()
        .chain(out.stdout.lines())
        .find(|l| l.starts_with("line 1:"))
        .unwrap_or_else(|| panic!("no line 1: {out:?}"));
    assert!(line.contains("failed after 1 attempt(s)"), "{line}");
    assert!(
        line.contains("claims to have created hello.txt") || line.contains("hello.txt is missing"),
        "the primary reason: {line}"
    );
    assert!(!line.contains("verification failed on all"), "{line}");
}
