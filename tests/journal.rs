//! The run journal and the failure-mode report through the binary: known delegations recorded
//! by `harness run --journal`, then read back with `harness report` (JSON, table, HTML) and
//! `harness runs list|show`; `--no-journal`, the default location, and a journal that cannot be
//! written.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::util::{Output, TempDir, harness};

const TASK: &str = "Create hello.txt containing the word hi";

/// Checks the claimed file on disk; the reason names the attempt it judged.
const FILE_VERIFIER: &str = r#"verify: |
  def run(result):
      if fs.stat("hello.txt") == None:
          return {"verified": False, "reason": "hello.txt does not exist (attempt %d)" % result["attempt"]}
      return True
"#;

/// Does the work on its first attempt.
const HONEST: &str = r#"
def respond(request):
    if request["messages"][-1]["role"] == "tool":
        return {"content": "Wrote hello.txt"}
    return {"tool_calls": [{"name": "write_file", "arguments": {"path": "hello.txt", "content": "hi\n"}}]}
"#;

/// Lies on its first attempt, does the work once caught.
const LIES_ONCE: &str = r#"
def respond(request):
    if request["attempt"] == 0:
        return {"content": "Done, I created hello.txt"}
    if request["messages"][-1]["role"] == "tool":
        return {"content": "Now it is really there"}
    return {"tool_calls": [{"name": "write_file", "arguments": {"path": "hello.txt", "content": "hi\n"}}]}
"#;

/// Never does the work.
const ALWAYS_LIES: &str = r#"
def respond(request):
    return {"content": "Done, I created hello.txt"}
"#;

/// A hook file with front matter `event` and a `handle` returning `expr`.
fn hook(event: &str, expr: &str) -> String {
    format!(
        "---\nevent: {event}\nscript: |\n  def handle(event, payload):\n      return {expr}\n---\n# A test hook\n"
    )
}

/// One delegation to record: a directory with `delegation.yaml` (the task, `delegate`, `rest`),
/// `agent.star` and any extra files.
struct Case {
    dir: TempDir,
}

impl Case {
    fn new(delegate: &str, agent: &str, rest: &str) -> Case {
        let dir = TempDir::new();
        dir.write("agent.star", agent);
        dir.write(
            "delegation.yaml",
            format!("task: {TASK:?}\ndelegate: {delegate}\ntools: [write_file]\n{rest}"),
        );
        Case { dir }
    }

    fn scripted(agent: &str, rest: &str) -> Case {
        Case::new("{kind: scripted, script: agent.star}", agent, rest)
    }

    fn with_file(self, rel: &str, content: &str) -> Case {
        self.dir.write(rel, content);
        self
    }

    /// Runs `harness run delegation.yaml --json [extra...]`, checks the exit code, and returns
    /// the run's JSON.
    #[track_caller]
    fn run(&self, extra: &[&str], code: i32) -> Value {
        let out = harness(["run", "delegation.yaml", "--json"])
            .args(extra)
            .current_dir(self.dir.path())
            .journal_by_rule()
            .run();
        out.expect_code(code);
        out.json()
    }
}

/// Runs `harness ARGS...` in `dir`, finding the journal by the one rule.
fn cli(dir: &Path, args: &[&str]) -> Output {
    harness(args).current_dir(dir).journal_by_rule().run()
}

/// The ids of the delegations recorded by [`record_known_delegations`], by name.
pub(crate) struct Known {
    pub(crate) journal: PathBuf,
    pub(crate) ids: Vec<(&'static str, String)>,
    /// The run JSON of the exhausted delegation.
    exhausted: Value,
    exhausted_dir: PathBuf,
}

impl Known {
    fn id(&self, name: &str) -> &str {
        &self
            .ids
            .iter()
            .find(|(n, _)| *n == name)
            .expect("a known delegation")
            .1
    }
}

/// Runs ten delegations with known outcomes into the journal `home/runs.db`: eight scripted
/// (passed on the 1st attempt, passed on the 2nd, exhausted after 3, broken verifier, failed
/// by a post_verify hook twice, blocked, a hook configuration error, skipped) and two command
/// delegates (passed, failed command).
pub(crate) fn record_known_delegations(home: &TempDir) -> Known {
    let journal = home.join("runs.db");
    let j = journal.to_str().expect("a UTF-8 path").to_owned();
    let flags = ["--journal", j.as_str()];
    let mut ids = Vec::new();
    let mut record = |name: &'static str, case: &Case, extra: &[&str], code: i32| -> Value {
        let mut args = flags.to_vec();
        args.extend_from_slice(extra);
        let value = case.run(&args, code);
        ids.push((name, value["id"].as_str().expect("an id").to_owned()));
        value
    };

    record("honest", &Case::scripted(HONEST, FILE_VERIFIER), &[], 0);
    record(
        "lies_once",
        &Case::scripted(LIES_ONCE, FILE_VERIFIER),
        &[],
        0,
    );
    let exhausted_case = Case::scripted(ALWAYS_LIES, FILE_VERIFIER);
    let exhausted = record("exhausted", &exhausted_case, &[], 1);
    record(
        "broken_verifier",
        &Case::scripted(
            HONEST,
            "verify: |\n  def run(result):\n      fail(\"verifier bug\")\n",
        ),
        &[],
        3,
    );
    record(
        "hook_failed",
        &Case::scripted(ALWAYS_LIES, "hooks: [hooks]\nmax_verify_retries: 1\n").with_file(
            "hooks/no-proof.md",
            &hook(
                "delegation.post_verify",
                "block('<script>alert(1)</script> claims hello.txt without a tool call')",
            ),
        ),
        &[],
        1,
    );
    record(
        "blocked",
        &Case::scripted(HONEST, "hooks: [hooks]\n").with_file(
            "hooks/closed.md",
            &hook("delegation.pre", "block('closed')"),
        ),
        &[],
        5,
    );
    record(
        "config",
        &Case::scripted(HONEST, "hooks: [hooks]\n")
            .with_file("hooks/typo.md", &hook("delegation.nope", "allow()")),
        &[],
        2,
    );
    record("skipped", &Case::scripted(HONEST, ""), &[], 0);
    record(
        "command_passed",
        &Case::new(
            "{kind: command, command: [sh, -c, 'echo hi > hello.txt; echo Done']}",
            "",
            FILE_VERIFIER,
        ),
        &[],
        0,
    );
    record(
        "command_failed",
        &Case::new("{kind: command, command: ['false']}", "", FILE_VERIFIER),
        &[],
        4,
    );
    Known {
        journal,
        ids,
        exhausted,
        exhausted_dir: exhausted_case.dir.path(),
    }
}

/// Runs `harness report --journal J --json [extra...]` and returns its JSON.
#[track_caller]
fn report_json(home: &TempDir, journal: &Path, extra: &[&str]) -> Value {
    let j = journal.to_str().expect("a UTF-8 path");
    let mut args = vec!["report", "--journal", j, "--json"];
    args.extend_from_slice(extra);
    let out = cli(&home.path(), &args);
    out.expect_code(0);
    out.json()
}

/// Returns the entry of `kind` in a report's `kinds`.
fn kind<'a>(report: &'a Value, name: &str) -> &'a Value {
    report["kinds"]
        .as_array()
        .expect("kinds is a list")
        .iter()
        .find(|k| k["kind"] == json!(name))
        .unwrap_or_else(|| panic!("no kind {name} in {report:#}"))
}

#[test]
fn the_report_counts_known_delegations_exactly() {
    let home = TempDir::new();
    let known = record_known_delegations(&home);
    let report = report_json(&home, &known.journal, &[]);
    assert_eq!(report["delegations"], json!(10), "{report:#}");

    let scripted = kind(&report, "scripted");
    assert_eq!(scripted["delegations"], json!(8), "{scripted:#}");
    assert_eq!(
        scripted["outcomes"],
        json!({"passed": 2, "passed_with_debt": 0, "skipped": 1, "failed": 2, "error": 3})
    );
    // Skipped delegations were not verified: 2 of the 7 verified ones passed.
    assert_eq!(scripted["pass_rate"], json!(2.0 / 7.0));
    assert_eq!(scripted["pass_at_attempt"], json!([1, 1, 0]));
    assert_eq!(scripted["exhausted"], json!(2));
    assert_eq!(scripted["broken_policy"], json!(1));
    assert_eq!(scripted["blocked"], json!(1));
    assert_eq!(scripted["other_errors"], json!(1));
    assert_eq!(
        scripted["errors"],
        json!({"blocked": 1, "config": 1, "verifier": 1})
    );
    // Attempts per delegation: 0 0 1 1 1 2 2 3.
    assert_eq!(scripted["attempts"], json!({"p50": 1, "p95": 3, "max": 3}));
    for key in ["p50", "p95", "max"] {
        assert!(scripted["duration_ms"][key].is_u64(), "{scripted:#}");
    }
    // "Done, I created hello.txt" with nothing written, caught by the claims stage in the
    // lie-then-truth, exhausted and hook-failed delegations; then the verifier's own reason.
    // Each reason names up to three runs that gave it; compared apart from the rest.
    let without_runs = |reason: &Value| {
        let mut reason = reason.clone();
        let runs = reason
            .as_object_mut()
            .and_then(|r| r.remove("runs"))
            .unwrap_or_default();
        let runs = runs.as_array().cloned().unwrap_or_default();
        assert!(
            (1..=3).contains(&runs.len())
                && runs
                    .iter()
                    .all(|id| id.as_str().is_some_and(|id| id.starts_with("d-"))),
            "{runs:?}"
        );
        reason
    };
    assert_eq!(
        scripted["top_reasons"][0]["runs"].as_array().map(Vec::len),
        Some(3)
    );
    assert_eq!(
        without_runs(&scripted["top_reasons"][0]),
        json!({
            "source": "claim file",
            "reason": "claims to have created <path>; no tool call wrote it and the workspace has no <path>",
            "count": 6,
            "example": "claims to have created hello.txt; no tool call wrote it and the workspace has no hello.txt",
            // Four of the six were followed by a retry; scripted delegates spend no tokens.
            "retries": 4,
            "tokens": 0,
        })
    );
    assert_eq!(
        without_runs(&scripted["top_reasons"][1]),
        json!({
            "source": "verify",
            "reason": "<path> does not exist (attempt <n>)",
            "count": 4,
            "example": "hello.txt does not exist (attempt 0)",
            "retries": 3,
            "tokens": 0,
        })
    );
    assert_eq!(scripted["top_reasons"][2]["source"], json!("hook no-proof"));
    assert_eq!(scripted["top_reasons"][2]["count"], json!(2));
    assert_eq!(
        scripted["top_hooks"],
        json!([{"hook": "no-proof", "count": 2}])
    );

    let command = kind(&report, "command");
    assert_eq!(command["delegations"], json!(2));
    assert_eq!(
        command["outcomes"],
        json!({"passed": 1, "passed_with_debt": 0, "skipped": 0, "failed": 0, "error": 1})
    );
    assert_eq!(command["pass_rate"], json!(0.5));
    assert_eq!(command["pass_at_attempt"], json!([1]));
    assert_eq!(command["other_errors"], json!(1));
    assert_eq!(command["errors"], json!({"delegate": 1}));
    assert_eq!(command["top_reasons"], json!([]));

    let total = &report["total"];
    assert_eq!(total["kind"], json!("all"));
    assert_eq!(
        total["outcomes"],
        json!({"passed": 3, "passed_with_debt": 0, "skipped": 1, "failed": 2, "error": 4})
    );
    assert_eq!(total["pass_rate"], json!(3.0 / 9.0));
    assert_eq!(total["pass_at_attempt"], json!([2, 1, 0]));

    // --kind narrows the report to matching kinds.
    let commands = report_json(&home, &known.journal, &["--kind", "comm*"]);
    assert_eq!(commands["delegations"], json!(2));
    assert_eq!(commands["kinds"].as_array().map(Vec::len), Some(1));
    assert_eq!(commands["filter"], json!({"since": null, "kind": "comm*"}));
    // --since: everything was recorded before "now", and within the last week.
    let week = report_json(&home, &known.journal, &["--since", "7d"]);
    assert_eq!(week["delegations"], json!(10));
    let none = report_json(&home, &known.journal, &["--since", "0s"]);
    assert_eq!(none["delegations"], json!(0));
    assert_eq!(none["kinds"], json!([]));

    // The table names every kind and the normalised top reason.
    let j = known.journal.to_str().expect("a UTF-8 path");
    let table = cli(&home.path(), &["report", "--journal", j]);
    table.expect_code(0);
    assert!(table.stdout.contains("10 delegations"), "{table:?}");
    for needle in [
        "command",
        "scripted",
        "all",
        "28.6%",
        "[verify] <path> does not exist (attempt <n>)",
        "no-proof",
    ] {
        assert!(
            table.stdout.contains(needle),
            "{needle:?} missing:\n{table:?}"
        );
    }
}

/// `harness runs show ID | head -1`: a reader that closes the pipe early ends harness quietly with
/// 141 (as SIGPIPE ends `git log | head`), not with a panic and a Rust backtrace on stderr.
#[test]
fn a_reader_that_closes_stdout_early_ends_harness_quietly() {
    let home = TempDir::new();
    let known = record_known_delegations(&home);
    for args in [
        vec!["runs", "show", known.id("command_failed")],
        vec!["runs", "list"],
        vec!["report"],
    ] {
        let (reader, writer) = std::io::pipe().expect("a pipe");
        drop(reader);
        let out = std::process::Command::new(crate::util::harness_bin())
            .args(&args)
            .arg("--journal")
            .arg(&known.journal)
            .stdout(writer)
            .stderr(std::process::Stdio::piped())
            .output()
            .expect("harness runs");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(141), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    }
}

#[test]
fn runs_list_and_show_read_single_records() {
    let home = TempDir::new();
    let known = record_known_delegations(&home);
    let j = known.journal.to_str().expect("a UTF-8 path");

    let out = cli(&home.path(), &["runs", "list", "--journal", j, "--json"]);
    out.expect_code(0);
    let runs = out.json()["runs"]
        .as_array()
        .expect("runs is a list")
        .clone();
    assert_eq!(runs.len(), 10);
    // Newest first: the last delegation run comes first.
    assert_eq!(runs[0]["id"], json!(known.id("command_failed")));
    let mut outcomes: Vec<&str> = runs
        .iter()
        .map(|r| r["outcome"].as_str().unwrap_or("?"))
        .collect();
    outcomes.sort_unstable();
    outcomes.dedup();
    assert_eq!(outcomes, ["error", "failed", "passed", "skipped"]);
    let ids: Vec<&str> = runs
        .iter()
        .map(|r| r["id"].as_str().unwrap_or("?"))
        .collect();
    for (name, id) in &known.ids {
        assert!(ids.contains(&id.as_str()), "{name} ({id}) was not recorded");
    }

    let limited = cli(
        &home.path(),
        &[
            "runs",
            "list",
            "--journal",
            j,
            "--kind",
            "command",
            "--limit",
            "1",
            "--json",
        ],
    );
    limited.expect_code(0);
    let limited = limited.json();
    assert_eq!(limited["runs"].as_array().map(Vec::len), Some(1));
    assert_eq!(limited["runs"][0]["delegate"]["kind"], json!("command"));

    let table = cli(&home.path(), &["runs", "list", "--journal", j]);
    table.expect_code(0);
    assert!(table.stdout.starts_with("ID "), "{table:?}");
    assert_eq!(table.stdout.lines().count(), 11, "{table:?}");
    assert!(table.stdout.contains(known.id("blocked")), "{table:?}");
    assert!(table.stdout.contains("error (blocked)"), "{table:?}");

    // The exhausted delegation, field by field.
    let id = known.id("exhausted");
    let out = cli(
        &home.path(),
        &["runs", "show", id, "--journal", j, "--json"],
    );
    out.expect_code(0);
    let record = out.json();
    assert_eq!(record["id"], json!(id));
    assert_eq!(record["outcome"], json!("failed"));
    assert_eq!(
        record["delegate"],
        json!({"kind": "scripted", "model": null})
    );
    assert_eq!(record["error"]["kind"], json!("verification_failed"));
    assert_eq!(
        record["error"]["message"],
        known.exhausted["error"]["message"]
    );
    assert_eq!(record["retry_template_version"], json!("retry-v3"));
    assert_eq!(record["trace_id"], known.exhausted["trace_id"]);
    assert_eq!(
        record["source"],
        json!(
            known
                .exhausted_dir
                .join("delegation.yaml")
                .display()
                .to_string()
        )
    );
    assert_eq!(
        record["workdir"],
        json!(known.exhausted_dir.display().to_string())
    );
    assert_eq!(
        record["duration_ms"], known.exhausted["duration_ms"],
        "the journal keeps the run's own duration"
    );
    let attempts = record["attempts"].as_array().expect("attempts is a list");
    assert_eq!(attempts.len(), 3);
    for (i, attempt) in attempts.iter().enumerate() {
        assert_eq!(attempt["attempt"], json!(i));
        assert_eq!(attempt["passed"], json!(false));
        assert_eq!(
            attempt["reasons"],
            json!([
                "claim file: claims to have created hello.txt; no tool call wrote it and the workspace has no hello.txt".to_owned(),
                format!("verify: hello.txt does not exist (attempt {i})")
            ])
        );
        assert_eq!(attempt["usage"]["requests"], json!(1));
        // The whole run: what each attempt claimed, the verdict on it, the prompt it led to.
        assert_eq!(
            attempt["result"]["response"],
            json!("Done, I created hello.txt")
        );
        assert_eq!(
            attempt["verdict"]["decision"],
            json!(if i < 2 { "retry" } else { "fail" })
        );
        assert_eq!(
            attempt["verdict"]["findings"][1]["message"],
            json!(format!("hello.txt does not exist (attempt {i})"))
        );
        assert_eq!(
            attempt["verdict"]["findings"], known.exhausted["history"][i]["findings"],
            "the journal keeps the verdict the run reported"
        );
        match i {
            2 => assert_eq!(attempt["retry_prompt"], Value::Null),
            _ => assert_eq!(
                attempt["retry_prompt"], known.exhausted["history"][i]["retry_prompt"],
                "attempt {i} keeps the retry prompt the delegate was sent"
            ),
        }
    }
    assert_eq!(record["usage"]["requests"], json!(3));
    assert_eq!(record["request"]["task"], json!(TASK));
    assert_eq!(
        record["request"]["delegate"],
        json!({"kind": "scripted", "model": null})
    );
    assert_eq!(record["request"]["tools"], json!(["write_file"]));
    assert_eq!(record["request"]["max_verify_retries"], json!(2));

    let text = cli(&home.path(), &["runs", "show", id, "--journal", j]);
    text.expect_code(0);
    for needle in [
        id,
        "failed (verification_failed)",
        "verify: hello.txt does not exist (attempt 2)",
        "retry-v3",
    ] {
        assert!(
            text.stdout.contains(needle),
            "{needle:?} missing:\n{text:?}"
        );
    }

    let missing = cli(&home.path(), &["runs", "show", "d-nope", "--journal", j]);
    missing.expect_code(2).expect_stderr_kind("config");
    assert!(
        missing.stderr.contains("no delegation d-nope"),
        "{missing:?}"
    );
}

/// Checks that every element opened is closed in order (void elements written as `<x ... />`).
fn assert_balanced(page: &str) {
    let mut stack: Vec<String> = Vec::new();
    let mut rest = page;
    while let Some(start) = rest.find('<') {
        let end = rest[start..].find('>').expect("every tag is closed") + start;
        let tag = &rest[start + 1..end];
        rest = &rest[end + 1..];
        if tag.starts_with('!') || tag.ends_with('/') {
            continue;
        }
        if let Some(name) = tag.strip_prefix('/') {
            assert_eq!(stack.pop().as_deref(), Some(name), "unbalanced </{name}>");
        } else {
            let name = tag.split_whitespace().next().expect("a tag name");
            stack.push(name.to_owned());
        }
    }
    assert!(stack.is_empty(), "unclosed elements: {stack:?}");
}

#[test]
fn the_html_report_is_one_self_contained_page() {
    let home = TempDir::new();
    let known = record_known_delegations(&home);
    let j = known.journal.to_str().expect("a UTF-8 path");
    let out = cli(
        &home.path(),
        &["report", "--journal", j, "--html", "report.html", "--json"],
    );
    out.expect_code(0);
    assert_eq!(out.json()["delegations"], json!(10));
    let page = home.read("report.html").expect("the page was written");
    assert!(page.starts_with("<!DOCTYPE html>"), "{page}");
    assert!(page.trim_end().ends_with("</html>"));
    assert!(page.contains("<style>"));
    assert!(
        page.matches("<svg").count() >= 3,
        "charts: outcomes, pass@attempt, reasons"
    );
    // Nothing from the network, no scripts: the hook's `<script>` reason is text.
    assert!(!page.contains("http://") && !page.contains("https://"));
    assert!(!page.contains("src=") && !page.contains("<link"));
    assert!(!page.to_lowercase().contains("<script"), "unescaped script");
    assert!(
        page.contains("&lt;script&gt;alert"),
        "the reason is shown escaped"
    );
    assert!(page.contains("no-proof"));
    assert_balanced(&page);
}

#[test]
fn one_rule_finds_the_journal_for_every_command() {
    // A new user at the top of a project runs a delegation that lives in a subdirectory, then
    // asks for the report: both find `./.harness/runs.db`.
    let top = TempDir::new();
    top.write("proj/agent.star", HONEST);
    top.write(
        "proj/delegation.yaml",
        format!("task: {TASK:?}\ndelegate: {{kind: scripted, script: agent.star}}\ntools: [write_file]\n{FILE_VERIFIER}"),
    );
    top.write("proj/src/keep", "");
    let out = cli(&top.path(), &["run", "proj/delegation.yaml"]);
    out.expect_code(0);
    assert!(top.join(".harness/runs.db").is_file(), "{out:?}");
    assert!(!top.join("proj/.harness/runs.db").exists(), "{out:?}");
    assert!(
        out.stderr
            .contains("recorded in .harness/runs.db (harness runs show d-"),
        "run says where it recorded: {out:?}"
    );
    let report = cli(&top.path(), &["report", "--json"]);
    report.expect_code(0);
    assert_eq!(report.json()["delegations"], json!(1), "{report:?}");
    assert_eq!(report.json()["journal"], json!(".harness/runs.db"));

    // From a directory below, the nearest journal upward is the one; a run there adds to it.
    let below = top.join("proj/src");
    let run = harness(["run", "../delegation.yaml", "--json"])
        .current_dir(&below)
        .journal_by_rule()
        .run();
    run.expect_code(0);
    let upward = top.join(".harness/runs.db").display().to_string();
    assert_eq!(run.json()["journal"], json!(upward), "{run:?}");
    let listed = cli(&below, &["runs", "list", "--json"]);
    listed.expect_code(0);
    assert_eq!(listed.json()["runs"].as_array().map(Vec::len), Some(2));

    // HARNESS_JOURNAL beats the search; --journal beats both.
    let elsewhere = TempDir::new();
    let env_journal = elsewhere.join("env.db").display().to_string();
    let with_env = |args: &[&str]| {
        harness(args)
            .current_dir(top.path())
            .journal_by_rule()
            .env("HARNESS_JOURNAL", &env_journal)
            .run()
    };
    let run = with_env(&["run", "proj/delegation.yaml", "--json"]);
    run.expect_code(0);
    assert_eq!(run.json()["journal"], json!(env_journal));
    let listed = with_env(&["runs", "list", "--json"]);
    assert_eq!(listed.json()["runs"].as_array().map(Vec::len), Some(1));
    assert_eq!(listed.json()["runs"][0]["id"], run.json()["id"]);
    let flag = with_env(&["runs", "list", "--json", "--journal", ".harness/runs.db"]);
    assert_eq!(flag.json()["runs"].as_array().map(Vec::len), Some(2));

    // --no-journal records nothing and says nothing about a journal.
    let unrecorded = Case::scripted(LIES_ONCE, FILE_VERIFIER);
    let run = unrecorded.run(&["--no-journal"], 0);
    assert_eq!(run["journal"], Value::Null);
    assert!(!unrecorded.dir.join(".harness").exists());
    let out = cli(&unrecorded.dir.path(), &["report"]);
    out.expect_code(2).expect_stderr_kind("journal");
    assert!(
        out.stderr.contains("no run journal at .harness/runs.db"),
        "{out:?}"
    );
    // A journal named by the variable that is not there is an error naming it, never an empty
    // report.
    let out = harness(["report"])
        .current_dir(unrecorded.dir.path())
        .journal_by_rule()
        .env("HARNESS_JOURNAL", "missing.db")
        .run();
    out.expect_code(2).expect_stderr_kind("journal");
    assert!(
        out.stderr
            .contains("no run journal at missing.db (from HARNESS_JOURNAL)"),
        "{out:?}"
    );
}

#[test]
fn a_damaged_journal_is_an_error_naming_it_and_reading_never_writes() {
    let case = Case::scripted(HONEST, FILE_VERIFIER);
    case.run(&[], 0);
    let journal = case.dir.join(".harness/runs.db");
    let before = std::fs::read(&journal).expect("the journal");
    for args in [
        vec!["report", "--json"],
        vec!["runs", "list"],
        vec!["report", "--html", "r.html"],
    ] {
        cli(&case.dir.path(), &args).expect_code(0);
    }
    assert_eq!(
        std::fs::read(&journal).expect("the journal"),
        before,
        "reading changed the journal"
    );
    case.dir.write(
        ".harness/runs.db",
        "this is not a SQLite database, only text",
    );
    for args in [
        vec!["report"],
        vec!["runs", "list"],
        vec!["runs", "show", "d-1"],
    ] {
        let out = cli(&case.dir.path(), &args);
        out.expect_code(2).expect_stderr_kind("journal");
        assert!(
            out.stderr.contains("journal .harness/runs.db"),
            "{args:?} names the journal: {out:?}"
        );
    }
}

#[test]
fn a_journal_that_cannot_be_written_is_an_error_with_a_non_zero_exit() {
    // A regular file where the journal's directory should be: no user can create it. The run's
    // own outcome is kept; a run that would have exited 0 exits 2, since it is not on record.
    for (agent, code, outcome) in [(HONEST, 2, "passed"), (ALWAYS_LIES, 1, "failed")] {
        let case = Case::scripted(agent, FILE_VERIFIER).with_file("blocker", "a file");
        let out = harness([
            "run",
            "delegation.yaml",
            "--json",
            "--journal",
            "blocker/runs.db",
        ])
        .current_dir(case.dir.path())
        .run();
        out.expect_code(code);
        let report = out.json();
        assert_eq!(report["outcome"], json!(outcome), "{out:?}");
        assert_eq!(report["journal"], Value::Null, "{out:?}");
        // Its own kind: a journal that cannot be written is not a configuration error.
        assert_eq!(report["journal_error"]["kind"], json!("journal"), "{out:?}");
        assert!(
            report["journal_error"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("not recorded in the run journal blocker/runs.db")),
            "{out:?}"
        );
        assert!(!case.dir.join(".harness").exists());
        // Without --json the same error is on stderr.
        let out = harness(["run", "delegation.yaml", "--journal", "blocker/runs.db"])
            .current_dir(case.dir.path())
            .run();
        out.expect_code(code);
        assert!(
            out.stderr
                .contains("error[journal]: not recorded in the run journal blocker/runs.db"),
            "{out:?}"
        );
    }
}

/// `batch` and `serve` say the same of a journal they cannot write: kind `journal`, before
/// anything runs.
#[test]
fn batch_and_serve_refuse_a_journal_they_cannot_write_as_kind_journal() {
    let case = Case::scripted(HONEST, FILE_VERIFIER).with_file("blocker", "a file");
    case.dir.write(
        "batch.jsonl",
        "{\"task\": \"t\", \"delegate\": {\"kind\": \"scripted\", \"script\": \"agent.star\"}}\n",
    );
    for args in [
        vec!["batch", "batch.jsonl", "--journal", "blocker/runs.db"],
        vec![
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--root",
            ".",
            "--journal",
            "blocker/runs.db",
        ],
    ] {
        let out = harness(args.clone()).current_dir(case.dir.path()).run();
        out.expect_code(2).expect_stderr_kind("journal");
        assert!(out.stderr.contains("blocker/runs.db"), "{args:?}: {out:?}");
    }
}

#[test]
fn reading_commands_refuse_missing_journals_and_bad_flags() {
    let home = TempDir::new();
    for args in [
        vec!["report"],
        vec!["report", "--json"],
        vec!["runs", "list"],
        vec!["runs", "show", "d-1"],
    ] {
        let out = cli(&home.path(), &args);
        out.expect_code(2);
        if args.contains(&"--json") {
            assert_eq!(
                out.json()["error"]["kind"],
                json!("journal"),
                "{args:?}: {out:?}"
            );
        } else {
            out.expect_stderr_kind("journal");
        }
        let text = if args.contains(&"--json") {
            out.json()["error"]["message"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        } else {
            out.stderr.clone()
        };
        assert!(
            text.contains("no run journal at .harness/runs.db"),
            "{args:?}: {out:?}"
        );
        assert!(
            !home.join(".harness").exists(),
            "reading created the journal"
        );
    }
    let case = Case::scripted(HONEST, FILE_VERIFIER);
    case.run(&[], 0);
    let out = cli(&case.dir.path(), &["report", "--since", "yesterday"]);
    out.expect_code(2).expect_stderr_kind("config");
    assert!(out.stderr.contains("--since \"yesterday\""), "{out:?}");
    let out = cli(
        &case.dir.path(),
        &[
            "run",
            "delegation.yaml",
            "--journal",
            "j.db",
            "--no-journal",
        ],
    );
    out.expect_code(2);
}

#[test]
fn secrets_are_scrubbed_from_what_is_printed_and_recorded() {
    // The delegate echoes a key it found, and a project-specific token; the verifier's reason
    // quotes the response back.
    // It also writes the key into a file: the diff the review page shows is scrubbed too.
    let leaky = r#"
def respond(request):
    if request["messages"][-1]["role"] != "tool":
        return {"tool_calls": [{"name": "write_file", "arguments": {"path": "notes.txt", "content": "key=sk-abcdefghijklmnop1234\n"}}]}
    return {"content": "Done. OPENAI_API_KEY=sk-abcdefghijklmnop1234 and internal-token-abc123"}
"#;
    let case = Case::scripted(
        leaky,
        "verify: |\n  def run(result):\n      return {\"verified\": False, \"reason\": \"no file, only: \" + result[\"response\"]}\nmax_verify_retries: 1\n",
    )
    .with_file(
        ".harness/policy.yaml",
        "redact: {patterns: [\"internal-token-[a-z0-9]+\"]}\n",
    );
    let run = case.run(&[], 1);
    let id = run["id"].as_str().expect("an id").to_owned();
    let progress = harness(["run", "delegation.yaml", "--no-journal"])
        .current_dir(case.dir.path())
        .run();
    progress.expect_code(1);
    assert!(
        progress
            .stderr
            .contains("response: Done. OPENAI_API_KEY=[REDACTED]"),
        "{progress:?}"
    );
    let shown = cli(&case.dir.path(), &["runs", "show", &id, "--json"]);
    shown.expect_code(0);
    let text = cli(&case.dir.path(), &["runs", "show", &id]);
    for (what, printed) in [
        ("run --json", run.to_string()),
        ("runs show --json", shown.stdout.clone()),
        ("runs show", text.stdout.clone()),
        ("run progress", progress.stderr.clone()),
    ] {
        assert!(
            !printed.contains("sk-abcdefghijklmnop1234")
                && !printed.contains("internal-token-abc123"),
            "{what} leaks a secret:\n{printed}"
        );
    }
    assert_eq!(
        run["history"][0]["findings"][0]["message"],
        json!("no file, only: Done. OPENAI_API_KEY=[REDACTED] and [REDACTED]")
    );
    let record = shown.json();
    assert_eq!(
        record["attempts"][1]["result"]["response"],
        json!("Done. OPENAI_API_KEY=[REDACTED] and [REDACTED]")
    );
    assert!(
        record["attempts"][0]["retry_prompt"]
            .as_str()
            .is_some_and(|p| p.contains("[REDACTED]")),
        "{record}"
    );
    assert!(
        record["attempts"][0]["diff"][0]
            .as_str()
            .is_some_and(|d| d.contains("+key=[REDACTED]")),
        "{record}"
    );
    // A pattern that does not compile is a configuration error naming the file and key.
    let bad = Case::scripted(HONEST, FILE_VERIFIER)
        .with_file(".harness/policy.yaml", "redact: {patterns: [\"(\"]}\n");
    let out = bad.run(&[], 2);
    assert_eq!(out["error"]["kind"], json!("config"), "{out}");
    let message = out["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("policy.yaml") && message.contains("redact.patterns"),
        "{out}"
    );
}
