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

/// Configuration errors in plain words, with the file, the place and a document that exists.
#[test]
fn config_errors_say_what_to_fix_in_plain_words() {
    let dir = TempDir::new();
    for (text, needles) in [
        (
            "task: t\ndelegate: {kind: scripted, script: a.star}\nchecs: []\n",
            &[
                "unknown key `checs` (did you mean `checks`?)",
                "line 3 column 1",
            ][..],
        ),
        (
            "task: t\n\tdelegate: {kind: scripted, script: a.star}\n",
            &[
                "a tab at line 2, column 1",
                "YAML indents with spaces only — replace it with spaces",
            ][..],
        ),
        (
            "task: @me\ndelegate: {kind: scripted, script: a.star}\n",
            &["'@' at line 1, column 7", "put the value in quotes"][..],
        ),
        (
            "task: t\ndelegate: {kind: scripted, script: a.star}\nmax_verify_retries: many\n",
            &["max_verify_retries", "expected a whole number", "line 3"][..],
        ),
    ] {
        let file = dir.write("delegation.yaml", text);
        let out = harness(["run", "--no-journal", "--json"])
            .args([&file])
            .run();
        out.expect_code(2);
        let report = out.json();
        assert_eq!(report["error"]["kind"], "config", "{out:?}");
        let message = report["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        assert!(message.contains("delegation.yaml"), "{message}");
        for needle in needles {
            assert!(message.contains(needle), "{needle} in {message}");
        }
        assert!(!message.contains("expected u32"), "{message}");
        // The document the message points at is in the repository, with that section.
        let (doc, anchor) = message
            .split("docs/reference.md#")
            .nth(1)
            .map(|rest| ("docs/reference.md", rest.trim_end_matches(')')))
            .unwrap_or_else(|| panic!("no reference in {message}"));
        let reference =
            std::fs::read_to_string(crate::util::repo_root().join(doc)).expect("docs/reference.md");
        let heading = anchor.replace('-', " ");
        assert!(
            reference
                .lines()
                .any(|l| l.starts_with('#') && l.to_lowercase().contains(&heading)),
            "no section {anchor} in {doc}"
        );
    }
}

/// An entry point declared with the wrong arguments is found before any delegate runs: by
/// `hooks check`, by `verify`, and by `run` before the first attempt.
#[test]
fn entry_points_with_the_wrong_arguments_are_named_before_anything_runs() {
    let dir = TempDir::new();
    dir.write(
        ".harness/hooks/guard.md",
        "---\nevent: tool.pre\nscript: |\n  def handle(payload):\n      return None\n---\nA guard.\n",
    );
    let out = harness(["hooks", "check"]).current_dir(dir.path()).run();
    out.expect_code(2).expect_stderr_kind("config");
    assert!(
        out.stderr.contains("guard.md:4")
            && out
                .stderr
                .contains("`def handle(payload)` takes the wrong arguments")
            && out.stderr.contains("def handle(event, payload):"),
        "{out:?}"
    );

    dir.write("v.star", "def run():\n    return True\n");
    dir.write("result.json", r#"{"id": "d-1", "response": "done"}"#);
    let out = harness(["verify"])
        .args([dir.join("v.star")])
        .args(["--result"])
        .args([dir.join("result.json")])
        .run();
    out.expect_code(3).expect_stderr_kind("verifier");
    assert!(
        out.stderr
            .contains("`def run()` takes the wrong arguments: it is called as `run(result)`"),
        "{out:?}"
    );

    // In a delegation: refused before the delegate is asked anything.
    std::fs::create_dir_all(dir.join("ws")).expect("workspace");
    dir.write(
        "agent.star",
        "def respond(request):\n    fail(\"the delegate must not run\")\n",
    );
    dir.write(
        "delegation.yaml",
        "task: t\ndelegate: {kind: scripted, script: agent.star}\nverify: |\n  def run():\n      return True\nworkdir: ws\n",
    );
    let out = harness(["run", "--no-journal", "--json"])
        .args([dir.join("delegation.yaml")])
        .run();
    let report = out.json();
    assert_eq!(report["error"]["kind"], "verifier", "{out:?}");
    assert_eq!(report["attempts"], 0, "{report}");
    assert!(
        report["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("write `def run(result):`")),
        "{report}"
    );
}

/// What a user reads points inside the repository: the README and every command's `--help`
/// name no design document a clone does not have; the reference they point at says how attempts
/// are counted and how serve resolves a submission's paths.
#[test]
fn the_readme_and_help_point_only_inside_the_repository() {
    let root = crate::util::repo_root();
    let readme = std::fs::read_to_string(root.join("README.md")).expect("README.md");
    let mut texts = vec![("README.md".to_owned(), readme)];
    let top = harness(["--help"]).run();
    let commands: Vec<String> = top
        .stdout
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next().map(str::to_owned))
        .filter(|c| c != "help")
        .collect();
    assert!(commands.len() > 10, "{top:?}");
    texts.push(("harness --help".to_owned(), top.stdout));
    for command in &commands {
        let help = harness([command.as_str(), "--help"]).run();
        texts.push((format!("harness {command} --help"), help.stdout));
    }
    for (what, text) in &texts {
        for outside in ["DESIGN", "../shared"] {
            assert!(!text.contains(outside), "{what} mentions {outside}");
        }
    }
    let reference = std::fs::read_to_string(root.join("docs/reference.md")).expect("reference");
    for section in [
        "## Attempt numbering",
        "## `harness serve`: paths in a submission",
    ] {
        assert!(
            reference.contains(section),
            "docs/reference.md has no {section}"
        );
    }
}
