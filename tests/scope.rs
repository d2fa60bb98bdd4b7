//! `scope:` (DESIGN §4.8): a baseline before attempt 0, the changes after each attempt in
//! `result["changes"]`, `allow`/`deny` judged, `on_violation: fail | retry`, and a workspace with
//! odd files that never hangs or crashes the snapshot.

use serde_json::{Value, json};

use crate::util::{Output, TempDir, harness};

/// Writes `src/a.txt` and `notes.txt` on attempt 0; only `src/a.txt` afterwards.
const STRAYS_THEN_STAYS: &str = r#"def respond(request):
    last = request["messages"][-1]
    if last["role"] == "tool":
        return "done"
    calls = [{"name": "write_file", "arguments": {"path": "src/a.txt", "content": "v%d\n" % request["attempt"]}}]
    if request["attempt"] == 0:
        calls.append({"name": "write_file", "arguments": {"path": "notes.txt", "content": "x\n"}})
    return {"tool_calls": calls}
"#;

fn delegation(agent: &str, rest: &str) -> TempDir {
    let dir = TempDir::new();
    dir.write("agent.star", agent);
    dir.write("ws/src/old.txt", "line 1\nline 2\n");
    dir.write("ws/README.md", "readme\n");
    dir.write(
        "delegation.yaml",
        format!(
            "task: Work in src.\ndelegate: {{kind: scripted, script: agent.star}}\ntools: [write_file]\nworkdir: ws\n{rest}"
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

#[test]
fn a_change_outside_allow_fails_at_once_and_the_changes_are_reported() {
    let dir = delegation(
        STRAYS_THEN_STAYS,
        "scope: {allow: [\"src/**\"]}\ncriteria: [\"file_exists:src/a.txt\"]\n",
    );
    let (out, report) = run(&dir);
    out.expect_code(1);
    assert_eq!(report["outcome"], json!("failed"), "{out:?}");
    assert_eq!(report["kind"], json!("scope_violation"));
    assert_eq!(report["attempts"], json!(1), "no retry after a violation");
    assert_eq!(
        report["result"]["changes"],
        json!({"added": ["notes.txt", "src/a.txt"], "modified": [], "deleted": []})
    );
    let finding = &report["history"][0]["findings"][0];
    assert_eq!(finding["source"], json!("scope"), "{finding}");
    assert_eq!(finding["name"], json!("notes.txt"));
    assert_eq!(finding["message"], json!("added, outside `scope.allow`"));
    // The later stages did not run: no evidence from the criterion.
    assert_eq!(report["history"][0]["evidence"], json!([]));
    // The journal keeps the changes with the attempt.
    let show = harness(["runs", "show", "--json", "--journal"])
        .args([
            dir.join("runs.db").display().to_string(),
            report["id"].as_str().unwrap_or_default().to_owned(),
        ])
        .run();
    show.expect_code(0);
    assert!(show.stdout.contains("notes.txt"), "{show:?}");
}

#[test]
fn on_violation_retry_tells_the_delegate_with_the_diff_and_judges_again() {
    let dir = delegation(
        STRAYS_THEN_STAYS,
        "scope: {allow: [\"src/**\"], on_violation: retry}\nmax_verify_retries: 1\n",
    );
    let (out, report) = run(&dir);
    // notes.txt is still there on attempt 1: the cumulative diff keeps the violation.
    out.expect_code(1);
    assert_eq!(report["kind"], json!("verification_failed"), "{out:?}");
    assert_eq!(report["attempts"], json!(2));
    assert_eq!(
        report["reasons"],
        json!([
            ["scope notes.txt: added, outside `scope.allow`"],
            ["scope notes.txt: added, outside `scope.allow`"]
        ])
    );
}

#[test]
fn the_retry_prompt_quotes_the_diff_of_the_changes_so_far() {
    let agent = r#"def respond(request):
    last = request["messages"][-1]
    if last["role"] == "tool":
        return "done"
    if request["attempt"] == 0:
        return {"tool_calls": [{"name": "write_file", "arguments": {"path": "src/old.txt", "content": "line 1\nline two\n"}}]}
    return "still done"
"#;
    let dir = delegation(
        agent,
        "scope: {allow: [\"src/**\"]}\nmax_verify_retries: 1\ncriteria: [\"file_exists:src/new.txt\"]\n",
    );
    let (out, report) = run(&dir);
    out.expect_code(1);
    assert_eq!(
        report["result"]["changes"]["modified"],
        json!(["src/old.txt"]),
        "{out:?}"
    );
    let show = harness(["runs", "show", "--json", "--journal"])
        .args([
            dir.join("runs.db").display().to_string(),
            report["id"].as_str().unwrap_or_default().to_owned(),
        ])
        .run();
    let text = show.stdout;
    for needle in [
        "Your changes to the workspace so far",
        "--- a/src/old.txt",
        "+++ b/src/old.txt",
        "-line 2",
        "+line two",
    ] {
        assert!(text.contains(needle), "{needle}: {text}");
    }
}

#[test]
fn deny_wins_over_allow_and_ignored_paths_are_not_seen() {
    let agent = r#"def respond(request):
    last = request["messages"][-1]
    if last["role"] == "tool":
        return "done"
    return {"tool_calls": [
        {"name": "write_file", "arguments": {"path": "build/out.log", "content": "noise"}},
        {"name": "write_file", "arguments": {"path": "src/Cargo.lock", "content": "x"}},
    ]}
"#;
    let dir = delegation(
        agent,
        "scope: {allow: [\"src/**\"], deny: [\"**/*.lock\"], ignore: [\"build/\"]}\n",
    );
    let (out, report) = run(&dir);
    out.expect_code(1);
    assert_eq!(
        report["result"]["changes"]["added"],
        json!(["src/Cargo.lock"]),
        "{out:?}"
    );
    assert_eq!(
        report["history"][0]["findings"][0]["message"],
        json!("added, inside `scope.deny`")
    );
}

#[test]
fn an_empty_scope_records_changes_for_the_verifier_without_restricting_them() {
    let dir = delegation(
        STRAYS_THEN_STAYS,
        "scope: {}\nverify: |\n  def run(result):\n      c = result[\"changes\"]\n      return {\"verified\": c[\"added\"] == [\"notes.txt\", \"src/a.txt\"], \"reason\": \"changes: %r\" % c}\n",
    );
    let (out, report) = run(&dir);
    out.expect_code(0);
    assert_eq!(report["outcome"], json!("passed"), "{out:?}");
}

#[test]
fn odd_files_in_the_workspace_never_hang_or_crash_the_snapshot() {
    let dir = delegation(
        STRAYS_THEN_STAYS,
        "scope: {allow: [\"src/**\"], on_violation: retry}\nmax_verify_retries: 0\n",
    );
    let ws = dir.join("ws");
    // A FIFO nobody writes to, a symlink loop, a dangling link and an unreadable directory.
    let made = std::process::Command::new("mkfifo")
        .arg(ws.join("pipe"))
        .status()
        .expect("mkfifo runs");
    assert!(made.success());
    std::os::unix::fs::symlink("loop", ws.join("loop")).expect("symlink");
    std::os::unix::fs::symlink("nowhere", ws.join("dangling")).expect("symlink");
    std::fs::create_dir_all(ws.join("locked/inner")).expect("mkdir");
    std::fs::write(ws.join("locked/inner/f"), "x").expect("write");
    std::fs::set_permissions(
        ws.join("locked"),
        std::os::unix::fs::PermissionsExt::from_mode(0o000),
    )
    .expect("chmod");
    // Root reads it anyway; anyone else cannot, and the snapshot must say so and go on.
    let unreadable = std::fs::read_dir(ws.join("locked")).is_err();
    let (out, report) = run(&dir);
    std::fs::set_permissions(
        ws.join("locked"),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .expect("chmod back");
    out.expect_code(1);
    // The odd files are unchanged, so only the stray note is a violation.
    let names: Vec<&str> = report["history"][0]["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .filter_map(|f| f["name"].as_str())
        .collect();
    assert_eq!(names, ["notes.txt"], "{out:?}");
    if unreadable {
        let warnings = report["warnings"].to_string();
        assert!(warnings.contains("locked"), "{warnings}");
    }
}

#[test]
fn bad_scopes_are_configuration_errors_naming_the_key() {
    for (scope, says) in [
        ("scope: {allow: [\"src/[\"]}\n", "`scope.allow[0]`"),
        ("scope: {deny: [\"{a\"]}\n", "`scope.deny[0]`"),
        ("scope: {on_violation: warn}\n", "`scope.on_violation`"),
        ("scope: {alow: [x]}\n", "alow"),
        ("scope: [src]\n", "scope"),
    ] {
        let dir = delegation(STRAYS_THEN_STAYS, scope);
        let out = harness(["run", "--json", "--no-journal"])
            .args([dir.join("delegation.yaml")])
            .run();
        out.expect_code(2);
        let report = out.json();
        assert_eq!(report["error"]["kind"], json!("config"), "{scope}: {out:?}");
        let message = report["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        assert!(message.contains(says), "{scope}: {message}");
        assert!(message.contains("delegation.yaml"), "{scope}: {message}");
    }
}
