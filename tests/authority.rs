//! Human authority (DESIGN §4.11): the review queue, attributed overrides under the project's
//! `override_policy`, and the hash-chained audit log that records every override and every
//! refusal — checked by `audit-log verify` after the tests tamper with it as an attacker with
//! write access to the journal would.

use serde_json::{Value, json};

use crate::util::{Output, TempDir, harness};

/// Fails its `tests` check every time.
const FAILS_CHECK: &str = "task: Make the tests pass.\ndelegate: {kind: scripted, script: agent.star}\nmax_verify_retries: 0\nworkdir: ws\nchecks:\n  - {name: tests, run: \"echo 'FAIL: 1 test'; exit 1\"}\n";
/// Writes outside its scope.
const LEAVES_SCOPE: &str = "task: Write src/a.txt only.\ndelegate: {kind: scripted, script: writes.star}\ntools: [write_file]\nmax_verify_retries: 0\nworkdir: ws\nscope: {allow: [\"src/**\"]}\n";
/// Passes.
const PASSES: &str = "task: Say done.\ndelegate: {kind: scripted, script: agent.star}\nmax_verify_retries: 0\nworkdir: ws\ncriteria: [\"file_exists:present.txt\"]\n";

const AGENT: &str = "def respond(request):\n    return \"done\"\n";
const WRITES: &str = r#"def respond(request):
    if request["messages"][-1]["role"] == "tool":
        return "done"
    return {"tool_calls": [{"name": "write_file", "arguments": {"path": "notes.txt", "content": "x"}}]}
"#;

/// A workspace with the three delegation files.
fn project() -> TempDir {
    let dir = TempDir::new();
    dir.write("agent.star", AGENT);
    dir.write("writes.star", WRITES);
    dir.write("ws/present.txt", "here\n");
    dir.write("fails.yaml", FAILS_CHECK);
    dir.write("leaves.yaml", LEAVES_SCOPE);
    dir.write("passes.yaml", PASSES);
    dir
}

/// Runs `file` into the project's journal; returns its id.
fn run(dir: &TempDir, file: &str, code: i32) -> String {
    let out = harness(["run", "--json", "--journal"])
        .args([dir.join("runs.db"), dir.join(file)])
        .run();
    out.expect_code(code);
    out.json()["id"].as_str().expect("an id").to_owned()
}

/// `harness override ID ARGS… --json` as `user` (through HARNESS_USER).
fn decide(dir: &TempDir, id: &str, user: Option<&str>, args: &[&str]) -> Output {
    let mut command = harness(["override", id, "--json", "--journal"])
        .args([dir.join("runs.db")])
        .args(args);
    if let Some(user) = user {
        command = command.env("HARNESS_USER", user);
    }
    command.run()
}

fn refused(out: &Output, kind: &str) -> String {
    out.expect_code(2);
    let report = out.json();
    assert_eq!(report["error"]["kind"], json!(kind), "{out:?}");
    report["error"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

fn pending(dir: &TempDir) -> Vec<Value> {
    let out = harness(["review", "--json", "--journal"])
        .args([dir.join("runs.db")])
        .run();
    out.expect_code(0);
    out.json()["pending"].as_array().expect("pending").clone()
}

fn verify(dir: &TempDir, extra: &[&str]) -> (Output, Value) {
    let out = harness(["audit-log", "verify", "--json", "--journal"])
        .args([dir.join("runs.db")])
        .args(extra)
        .run();
    let report = out.json();
    (out, report)
}

fn sql(dir: &TempDir, statement: &str) {
    let conn = rusqlite::Connection::open(dir.join("runs.db")).expect("open the journal");
    // Someone with write access turns the foreign keys off first.
    conn.execute_batch(&format!("PRAGMA foreign_keys = OFF; {statement}"))
        .expect("tamper");
}

#[test]
fn failed_runs_await_review_and_an_approval_is_attributed_and_kept_apart_from_the_outcome() {
    let dir = project();
    let failed = run(&dir, "fails.yaml", 1);
    let _passed = run(&dir, "passes.yaml", 0);
    let queue = pending(&dir);
    assert_eq!(queue.len(), 1, "{queue:?}");
    assert_eq!(queue[0]["id"], json!(failed));
    assert_eq!(queue[0]["outcome"], json!("failed"));
    assert_eq!(queue[0]["kind"], json!("verification_failed"));
    let primary = queue[0]["primary"].as_str().expect("primary");
    assert!(primary.starts_with("check tests:"), "{primary}");

    // Nobody named: a usage error, nothing recorded.
    let anonymous = decide(
        &dir,
        &failed,
        None,
        &["--approve", "--type", "check", "--reason", "r"],
    );
    let message = refused(&anonymous, "config");
    assert!(message.contains("HARNESS_USER"), "{message}");
    // The default policy wants a reason for a check override.
    let bare = decide(
        &dir,
        &failed,
        Some("alice"),
        &["--approve", "--type", "check"],
    );
    refused(&bare, "reason_required");

    let approved = decide(
        &dir,
        &failed,
        Some("alice"),
        &[
            "--approve",
            "--type",
            "check",
            "--reason",
            "the test is flaky; ran it by hand",
        ],
    );
    approved.expect_code(0);
    let done = &approved.json()["override"];
    assert_eq!(done["user"], json!("alice"));
    assert_eq!(done["decision"], json!("approved"));
    assert_eq!(done["previous_state"], json!("failed"));
    assert!(pending(&dir).is_empty());

    // The outcome stays; the run gains the override and a HumanOverride event.
    let show = harness(["runs", "show", "--json", "--journal"])
        .args([dir.join("runs.db").display().to_string(), failed.clone()])
        .run();
    show.expect_code(0);
    let record = show.json();
    assert_eq!(record["outcome"], json!("failed"));
    assert_eq!(record["override"]["decision"], json!("approved"));
    assert_eq!(record["review"]["status"], json!("approved"));
    let last = record["events"].as_array().and_then(|e| e.last()).cloned();
    let last = last.expect("events");
    assert_eq!(last["type"], json!("HumanOverride"));
    assert_eq!(last["user"], json!("alice"));
    assert_eq!(last["override_type"], json!("check"));
    assert_eq!(last["reason"], json!("the test is flaky; ran it by hand"));
    let text = harness(["runs", "show", "--journal"])
        .args([dir.join("runs.db").display().to_string(), failed.clone()])
        .run();
    assert!(
        text.stdout.contains("approved by alice (check override)"),
        "{text:?}"
    );

    // Once only.
    let again = decide(
        &dir,
        &failed,
        Some("bob"),
        &["--reject", "--type", "check", "--reason", "no"],
    );
    let message = refused(&again, "illegal_transition");
    assert!(message.contains("already approved by alice"), "{message}");

    // Every decision and refusal is in the chain: the reason-less try, the approval, the repeat.
    let (out, report) = verify(&dir, &[]);
    out.expect_code(0);
    assert_eq!(report["intact"], json!(true));
    assert_eq!(report["rows"], json!(3));
}

#[test]
fn overrides_must_fit_what_failed_and_the_policy_decides_what_is_allowed() {
    let dir = project();
    let passed = run(&dir, "passes.yaml", 0);
    let scope = run(&dir, "leaves.yaml", 1);
    let message = refused(
        &decide(
            &dir,
            &passed,
            Some("alice"),
            &["--approve", "--type", "direct", "--reason", "r"],
        ),
        "illegal_transition",
    );
    assert!(message.contains("is passed"), "{message}");
    // A scope violation is not a failed check.
    let message = refused(
        &decide(
            &dir,
            &scope,
            Some("alice"),
            &["--approve", "--type", "check", "--reason", "r"],
        ),
        "illegal_transition",
    );
    assert!(message.contains("use --type `direct`"), "{message}");
    // Direct approval is off by default…
    let message = refused(
        &decide(
            &dir,
            &scope,
            Some("alice"),
            &["--approve", "--type", "direct", "--reason", "r"],
        ),
        "override_not_allowed",
    );
    assert!(message.contains("direct_approval_allowed"), "{message}");
    // …but rejecting needs no approval right: any type rejects any run awaiting review.
    let out = decide(
        &dir,
        &scope,
        Some("alice"),
        &[
            "--reject",
            "--type",
            "check",
            "--reason",
            "notes.txt must not exist",
        ],
    );
    out.expect_code(0);
    assert_eq!(
        out.json()["override"]["decision"],
        json!("rejected"),
        "{out:?}"
    );
    // The run's project policy can turn direct approval on.
    let again = run(&dir, "leaves.yaml", 1);
    dir.write(
        "ws/.harness/policy.yaml",
        "override_policy: {direct_approval_allowed: true}\n",
    );
    decide(
        &dir,
        &again,
        Some("alice"),
        &[
            "--approve",
            "--type",
            "direct",
            "--reason",
            "checked by hand",
        ],
    )
    .expect_code(0);
    let message = refused(
        &decide(
            &dir,
            "d-0000000000000000",
            Some("alice"),
            &["--approve", "--type", "direct", "--reason", "r"],
        ),
        "config",
    );
    assert!(message.contains("no run d-0000000000000000"), "{message}");
    let (out, report) = verify(&dir, &[]);
    out.expect_code(0);
    assert_eq!(report["rows"], json!(5), "{report}");
}

#[test]
fn an_edited_deleted_or_rebuilt_audit_log_is_detected() {
    let dir = project();
    for _ in 0..3 {
        let id = run(&dir, "fails.yaml", 1);
        decide(
            &dir,
            &id,
            Some("alice"),
            &["--approve", "--type", "check", "--reason", "ok"],
        )
        .expect_code(0);
    }
    let (out, report) = verify(&dir, &[]);
    out.expect_code(0);
    let head = report["head"]["hash"].as_str().expect("head").to_owned();
    let anchor = harness(["audit-log", "verify", "--anchor", "--journal"])
        .args([dir.join("runs.db")])
        .run();
    anchor.expect_code(0);
    assert_eq!(anchor.stdout.trim(), format!("3 {head}"));
    let copy = |name: &str| {
        std::fs::copy(dir.join("runs.db"), dir.join(name)).expect("copy");
    };
    copy("pristine.db");
    let restore = || {
        std::fs::copy(dir.join("pristine.db"), dir.join("runs.db")).expect("restore");
        let _ = std::fs::remove_file(dir.join("runs.db-wal"));
        let _ = std::fs::remove_file(dir.join("runs.db-shm"));
    };
    let broken = |expect_seq: Value, kind: &str, expect: &str| {
        let (out, report) = verify(&dir, &[]);
        out.expect_code(1);
        assert_eq!(report["intact"], json!(false));
        assert_eq!(report["broken"]["seq"], expect_seq, "{report}");
        assert_eq!(report["broken"]["kind"], json!(kind), "{report}");
        let why = report["broken"]["why"].as_str().unwrap_or_default();
        assert!(why.contains(expect), "{why}");
    };

    // An edited entry.
    sql(
        &dir,
        "UPDATE audit_log SET entry = replace(entry, 'alice', 'mallory') WHERE seq = 2",
    );
    broken(json!(2), "row_edited", "row 2 was edited");
    restore();
    // An edited entry whose hash was recomputed to match: the next row no longer follows it.
    {
        use sha2::Digest as _;
        let conn = rusqlite::Connection::open(dir.join("runs.db")).expect("open the journal");
        let (entry, prev): (String, String) = conn
            .query_row(
                "SELECT entry, prev_hash FROM audit_log WHERE seq = 1",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .expect("row 1");
        let entry = entry.replace("alice", "mallory");
        let hash: String = sha2::Sha256::digest(format!("{prev}{entry}"))
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        conn.execute(
            "UPDATE audit_log SET entry = ?1, hash = ?2 WHERE seq = 1",
            [entry, hash],
        )
        .expect("tamper");
    }
    broken(json!(2), "chain_broken", "row 2 does not follow row 1");
    restore();
    // A deleted row.
    sql(&dir, "DELETE FROM audit_log WHERE seq = 2");
    broken(json!(2), "row_missing", "row 2 is missing");
    restore();
    // The overrides table edited behind the log's back.
    sql(&dir, "UPDATE overrides SET user = 'mallory'");
    broken(json!(1), "override_edited", "does not match audit row 1");
    restore();
    // The last row deleted: the chain still holds, but the anchor taken earlier is gone.
    sql(
        &dir,
        "DELETE FROM audit_log WHERE seq = 3; DELETE FROM overrides WHERE audit_seq = 3",
    );
    let (out, _) = verify(&dir, &[]);
    out.expect_code(0);
    let (out, report) = verify(&dir, &["--check-anchor", &head]);
    out.expect_code(1);
    assert_eq!(
        report["broken"]["kind"],
        json!("anchor_missing"),
        "{report}"
    );
    let why = report["broken"]["why"].as_str().unwrap_or_default();
    assert!(why.contains("rebuilt or cut back"), "{why}");
    restore();
    let (out, _) = verify(&dir, &["--check-anchor", &head]);
    out.expect_code(0);
}
