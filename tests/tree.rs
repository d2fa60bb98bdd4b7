//! Delegation trees (DESIGN §9): the `delegate` tool runs whole child delegations, each recorded
//! with `parent_id`; the parent reads each child's answer and verdict; `runs show` prints the
//! tree; the export lists each child with its seal and `audit` checks the linkage; depth, bad
//! calls and bad files are refused with the fix; a parent that times out cancels and records
//! its children.

use serde_json::{Value, json};

use crate::util::{TempDir, copy_tree, harness, repo_root};

/// Runs the fan-out example in `dir` with a journal there; returns the `run --json` report.
fn fan_out(dir: &TempDir) -> Value {
    std::fs::create_dir_all(dir.join("fan-out")).expect("the example's directory");
    copy_tree(&repo_root().join("examples/fan-out"), &dir.join("fan-out"));
    let out = harness(["run", "--json", "--journal"])
        .args([dir.join("runs.db"), dir.join("fan-out/delegation.yaml")])
        .run();
    out.expect_code(0);
    out.json()
}

/// `examples/fan-out` copied into `dir`, its `agent-parent.yaml` (an agent CLI parent) as `edit`
/// makes it.
fn agent_parent_example(dir: &TempDir, edit: impl FnOnce(String) -> String) {
    std::fs::create_dir_all(dir.join("fan-out")).expect("the example's directory");
    copy_tree(&repo_root().join("examples/fan-out"), &dir.join("fan-out"));
    let file = dir.read("fan-out/agent-parent.yaml").expect("the example");
    dir.write("fan-out/agent-parent.yaml", edit(file));
}

/// Runs `fan-out/agent-parent.yaml` in `dir` as its header says — by a path relative to where
/// harness starts — with a journal there.
fn run_agent_parent(dir: &TempDir) -> crate::util::Output {
    harness([
        "run",
        "--json",
        "--journal",
        "runs.db",
        "fan-out/agent-parent.yaml",
    ])
    .current_dir(dir.path())
    .env("HOME", &dir.path().display().to_string())
    .run()
}

/// `harness audit RUN --journal DIR/runs.db` passes, `delegation_linkage` among its checks:
/// each child the run's `delegate` calls returned is recorded, from this run, with the seal the
/// call quoted.
pub(crate) fn assert_linkage_audited(dir: &TempDir, run: &str) {
    let audit = harness(["audit", "--json", run, "--journal"])
        .args([dir.join("runs.db")])
        .run();
    audit.expect_code(0);
    let checks = &audit.json()["checks"];
    assert!(
        checks
            .as_array()
            .expect("checks")
            .iter()
            .any(|c| c["name"] == "delegation_linkage" && c["passed"] == true),
        "{checks}"
    );
}

/// Every run of the journal in `dir`, as `runs list --json` gives them.
fn runs(dir: &TempDir) -> Vec<Value> {
    let out = harness(["runs", "list", "--json", "--journal"])
        .args([dir.join("runs.db")])
        .run();
    out.expect_code(0);
    out.json()["runs"].as_array().expect("runs").clone()
}

fn by_id<'a>(runs: &'a [Value], id: &Value) -> &'a Value {
    runs.iter()
        .find(|r| r["id"] == *id)
        .unwrap_or_else(|| panic!("no run {id} in {runs:?}"))
}

#[test]
fn the_fan_out_example_runs_three_verified_children_and_reports_them_honestly() {
    let dir = TempDir::new();
    let report = fan_out(&dir);
    assert_eq!(report["outcome"], json!("passed"), "{report}");
    let parent = report["id"].clone();
    let children = report["children"].as_array().expect("children");
    let outcomes: Vec<&Value> = children.iter().map(|c| &c["outcome"]).collect();
    assert_eq!(
        outcomes,
        [&json!("passed"), &json!("passed"), &json!("failed")],
        "worker, liar, quitter: {report}"
    );
    // The parent's answer reports what the verdicts say, not what the children claimed.
    let answer = report["result"]["response"].as_str().expect("answer");
    assert!(answer.contains(&format!(
        "FAILED: {}",
        children[2]["id"].as_str().unwrap_or("?")
    )));
    assert!(!answer.contains(&format!(
        "done: {}",
        children[2]["id"].as_str().unwrap_or("?")
    )));

    // Each child is a delegation of its own, recorded with the parent's id.
    let all = runs(&dir);
    assert_eq!(all.len(), 4, "{all:?}");
    for child in children {
        let record = by_id(&all, &child["id"]);
        assert_eq!(record["parent_id"], parent, "{record}");
        assert!(
            child["seal"].as_str().is_some_and(|s| s.len() == 64),
            "{child}"
        );
    }
    // The liar was caught and retried by its own loop; the quitter failed for good.
    assert_eq!(
        by_id(&all, &children[1]["id"])["attempts"]
            .as_array()
            .map(Vec::len),
        Some(2)
    );
    let quitter = by_id(&all, &children[2]["id"]);
    assert_eq!(
        quitter["error"]["kind"],
        json!("verification_failed"),
        "{quitter}"
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("fan-out/workspace/beta.txt"))
            .ok()
            .as_deref(),
        Some("beta\n")
    );
    assert!(!dir.join("fan-out/workspace/gamma.txt").exists());

    // `runs show` draws the tree from the root, whichever run of it is shown.
    let shown = harness(["runs", "show"])
        .args([children[2]["id"].as_str().expect("id"), "--journal"])
        .args([dir.join("runs.db")])
        .run();
    shown.expect_code(0);
    let stdout = &shown.stdout;
    assert!(
        stdout.contains(&format!(
            "tree:      {} passed, 1 attempt",
            parent.as_str().unwrap_or("?")
        )),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!(
            "─ {} failed (verification_failed), 2 attempts: Write gamma.txt containing the word gamma  <- this run",
            children[2]["id"].as_str().unwrap_or("?")
        )),
        "{stdout}"
    );
    // Children in the order they started (at once here), the last drawn with `└─`.
    assert_eq!(stdout.matches("├─ ").count(), 2, "{stdout}");
    assert_eq!(stdout.matches("└─ ").count(), 1, "{stdout}");
    let json = harness(["runs", "show", "--json"])
        .args([parent.as_str().expect("id"), "--journal"])
        .args([dir.join("runs.db")])
        .run()
        .json();
    assert_eq!(
        json["tree"]["children"].as_array().map(Vec::len),
        Some(3),
        "{json}"
    );
    assert_eq!(json["children"].as_array().map(Vec::len), Some(3), "{json}");
    // What the root spent: its attempt judged stage by stage, and a row for each child.
    let spend = &json["spend"];
    let stages = spend["attempts"][0]["stage_us"]
        .as_object()
        .unwrap_or_else(|| panic!("no stage times in {spend}"));
    for stage in ["criteria", "claims", "verify"] {
        assert!(stages.contains_key(stage), "{stage} in {spend}");
    }
    assert_eq!(
        spend["children"].as_array().map(Vec::len),
        Some(3),
        "{spend}"
    );
    assert_eq!(spend["tree"]["runs"], json!(4), "{spend}");

    // The export lists each child with its seal, and the audit checks them against the journal.
    let export = harness(["runs", "export"])
        .args([parent.as_str().expect("id"), "--journal"])
        .args([dir.join("runs.db")])
        .run()
        .json();
    assert_eq!(
        export["children"].as_array().map(Vec::len),
        Some(3),
        "{export}"
    );
    assert_linkage_audited(&dir, parent.as_str().expect("id"));

    // The report grouped by root: the tree is one line, its failed child counted.
    let report = harness(["report", "--by-root", "--json", "--journal"])
        .args([dir.join("runs.db")])
        .run();
    report.expect_code(0);
    let roots = report.json()["roots"].clone();
    assert_eq!(roots.as_array().map(Vec::len), Some(1), "{roots}");
    assert_eq!(roots[0]["id"], parent, "{roots}");
    assert_eq!(roots[0]["runs"], json!(4));
    assert_eq!(roots[0]["children_failed"], json!(1));
    assert_eq!(roots[0]["attempts"], json!(1 + 1 + 2 + 2));
    let table = harness(["report", "--by-root", "--journal"])
        .args([dir.join("runs.db")])
        .run();
    assert!(table.stdout.contains("CHILDREN FAILED"), "{}", table.stdout);

    // The report says what each stage cost per attempt it judged, slowest in all first.
    let dashboard = harness(["report", "--json", "--journal"])
        .args([dir.join("runs.db")])
        .run()
        .json();
    let stages = dashboard["total"]["stages"].as_array().expect("stages");
    let verify = stages
        .iter()
        .find(|s| s["stage"] == "verify")
        .unwrap_or_else(|| panic!("no verify stage in {stages:?}"));
    assert!(
        verify["attempts"].as_u64().is_some_and(|n| n >= 1),
        "{verify}"
    );
    let totals: Vec<u64> = stages
        .iter()
        .filter_map(|s| s["total_us"].as_u64())
        .collect();
    assert!(totals.windows(2).all(|w| w[0] >= w[1]), "{stages:?}");
    let text = harness(["report", "--journal"])
        .args([dir.join("runs.db")])
        .run()
        .stdout;
    assert!(
        text.contains("time per stage (per attempt judged p50 / p95 / max, and in all):"),
        "{text}"
    );
    let page = dir.join("report.html");
    harness(["report", "--journal"])
        .args([
            dir.join("runs.db"),
            std::path::PathBuf::from("--html"),
            page.clone(),
        ])
        .run()
        .expect_code(0);
    let html = std::fs::read_to_string(&page).expect("the page");
    assert!(
        html.contains("<h2>Time per stage</h2>") && html.contains("<td><code>verify</code></td>"),
        "{html}"
    );
}

/// The `harness audit --json` failure codes of run `id` in the journal of `dir`.
fn audit_codes(dir: &TempDir, id: &str) -> (i32, String) {
    let out = harness(["audit", "--json", id, "--journal"])
        .args([dir.join("runs.db")])
        .run();
    (out.code, out.stdout.clone())
}

/// The `code` of every failure in the `harness audit --json` report `out`.
fn failure_codes(out: &str) -> Vec<String> {
    let report: Value =
        serde_json::from_str(out).unwrap_or_else(|e| panic!("not one JSON report ({e}): {out}"));
    report["failures"]
        .as_array()
        .map(|failures| {
            failures
                .iter()
                .filter_map(|f| f["code"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn a_forged_or_missing_child_fails_the_parents_audit() {
    let dir = TempDir::new();
    let report = fan_out(&dir);
    let parent = report["id"].as_str().expect("id").to_owned();
    let liar = report["children"][1]["id"].as_str().expect("id").to_owned();
    let quitter = report["children"][2]["id"].as_str().expect("id").to_owned();
    // A human's decision on a child is not a forgery: the parent's audit stays clean.
    let decided = harness(["override", &quitter, "--json", "--journal"])
        .args([dir.join("runs.db")])
        .args([
            "--reject",
            "--type",
            "check",
            "--reason",
            "gamma is not needed",
        ])
        .env("HARNESS_USER", "reviewer")
        .run();
    decided.expect_code(0);
    let (code, out) = audit_codes(&dir, &parent);
    assert_eq!(code, 0, "{out}");

    let db = rusqlite::Connection::open(dir.join("runs.db")).expect("journal");

    // Forged: the failed child rewritten to pass, its own seal recomputed as a forger with the
    // journal would — the seal its parent's record holds no longer matches.
    db.execute(
        "UPDATE delegations SET outcome = 'passed', error_kind = NULL WHERE id = ?1",
        [&quitter],
    )
    .expect("forge");
    let record = {
        let journal = harness_records::Journal::open(dir.join("runs.db")).expect("journal");
        journal.get(&quitter).expect("read").expect("the child")
    };
    let forged_seal = harness_records::seal(&harness_records::export(&record));
    db.execute(
        "UPDATE delegations SET seal = ?2 WHERE id = ?1",
        [&quitter, &forged_seal],
    )
    .expect("reseal");
    let (code, out) = audit_codes(&dir, &parent);
    assert_eq!(code, 1, "{out}");
    assert!(
        failure_codes(&out)
            .iter()
            .any(|c| c == "delegation_linkage"),
        "{out}"
    );
    assert!(
        out.contains(&format!(
            "the child {quitter} is not the run its delegate call returned"
        )),
        "{out}"
    );

    // Missing: the retried child's record deleted.
    db.execute("DELETE FROM attempts WHERE delegation_id = ?1", [&liar])
        .expect("delete");
    db.execute("DELETE FROM delegations WHERE id = ?1", [&liar])
        .expect("delete");
    let (code, out) = audit_codes(&dir, &parent);
    assert_eq!(code, 1, "{out}");
    assert!(
        failure_codes(&out)
            .iter()
            .any(|c| c == "delegation_linkage"),
        "{out}"
    );
    assert!(
        out.contains(&format!(
            "a delegate call returned the child {liar}, but the journal holds 0 records of it"
        )),
        "{out}"
    );

    // Without the journal the children cannot be checked: the audit says so and fails.
    let export = harness(["runs", "export", &parent, "--journal"])
        .args([dir.join("runs.db")])
        .run();
    let file = dir.write("parent.json", &export.stdout);
    let out = harness(["audit", "--json"]).args([file]).run();
    assert_eq!(out.code, 1, "{out:?}");
    assert!(
        failure_codes(&out.stdout)
            .iter()
            .any(|c| c == "delegation_linkage"),
        "{out:?}"
    );
    assert!(
        out.stdout.contains("audit it with --journal"),
        "{}",
        out.stdout
    );
}

/// A project in `dir`: `delegation.yaml` with `body` after the task, scripts beside it.
fn project(dir: &TempDir, body: &str, scripts: &[(&str, &str)]) {
    for (name, text) in scripts {
        dir.write(name, text);
    }
    dir.write(
        "delegation.yaml",
        format!("task: \"Do the work through children\"\nworkdir: ws\n{body}"),
    );
    std::fs::create_dir_all(dir.join("ws")).expect("workspace");
}

fn run_project(dir: &TempDir) -> crate::util::Output {
    harness(["run", "--json", "--journal"])
        .args([dir.join("runs.db"), dir.join("delegation.yaml")])
        .run()
}

/// The tool results of the parent's last attempt.
fn tool_results(report: &Value) -> Vec<Value> {
    report["result"]["tool_results"]
        .as_array()
        .expect("tool results")
        .clone()
}

/// A parent that makes the calls of `CALLS` (one per turn), then answers with what it read.
const CALLER: &str = r#"
def respond(request):
    made = [m for m in request["messages"] if m["role"] == "tool"]
    if len(made) < len(CALLS):
        return {"tool_calls": [{"name": "delegate", "arguments": CALLS[len(made)]}]}
    return "\n".join([m["content"] for m in made])
"#;

#[test]
fn bad_delegate_calls_are_refused_with_the_fix_and_record_no_child() {
    let dir = TempDir::new();
    let calls = r#"CALLS = [
    {"taks": "write it"},
    {"task": "write it", "profile": "wroker"},
    {"task": "  "},
    {"task": "write it", "profile": "worker", "verify": "def run(result):\n    return True"},
    {"task": "write it", "checks": [{"name": "t", "run": "true", "colour": "red"}]},
]
"#;
    project(
        &dir,
        "delegate: {kind: scripted, script: parent.star}\ntools: [delegate]\ndelegates:\n  worker:\n    delegate: {kind: scripted, script: worker.star}\n    verify: |\n      def run(result):\n          return True\n",
        &[
            ("parent.star", &format!("{calls}{CALLER}")),
            (
                "worker.star",
                "def respond(request):\n    return \"done\"\n",
            ),
        ],
    );
    let out = run_project(&dir);
    let report = out.json();
    let results = tool_results(&report);
    assert_eq!(results.len(), 5, "{report}");
    let texts: Vec<&str> = results
        .iter()
        .map(|r| r["content"].as_str().unwrap_or(""))
        .collect();
    for (result, expected) in results.iter().zip([
        "delegate: unknown argument `taks` (did you mean `task`?); the arguments are task, profile, checks, criteria, verify, max_verify_retries",
        "delegate: no profile \"wroker\" (did you mean `worker`?); the profiles are worker",
        "delegate: `task` is empty; say what the child should do",
        "delegate: the profile has its own verifier; add `checks` or `criteria` instead of `verify`",
        "delegate: `checks` run programs, and this delegation may not run programs itself (it has no `run_command`)",
    ]) {
        assert_eq!(result["is_error"], json!(true), "{result}");
        assert!(
            result["content"].as_str().is_some_and(|c| c.contains(expected)),
            "expected {expected:?} in {texts:?}"
        );
    }
    // Nothing half-recorded: the parent alone.
    assert_eq!(runs(&dir).len(), 1);
}

#[test]
fn depth_is_bounded_by_max_depth_and_children_default_to_the_parents_own_kind() {
    let dir = TempDir::new();
    // Every delegation of the tree runs this script: delegate once, then report what came back.
    let script = r#"
def respond(request):
    made = [m for m in request["messages"] if m["role"] == "tool"]
    if not made:
        return {"tool_calls": [{"name": "delegate", "arguments": {"task": "Go one level deeper"}}]}
    return made[0]["content"]
"#;
    project(
        &dir,
        "delegate: {kind: scripted, script: nest.star}\ntools: [delegate]\nverify: |\n  def run(result):\n      return True\n",
        &[("nest.star", script)],
    );
    let out = run_project(&dir);
    let report = out.json();
    assert_eq!(report["outcome"], json!("passed"), "{report}");
    // Depth 0 → 1 → 2; the call at depth 2 is refused (the default max_depth is 2).
    let all = runs(&dir);
    assert_eq!(all.len(), 3, "{all:?}");
    let child = by_id(&all, &report["children"][0]["id"]);
    let grandchild_id = child["children"][0]["id"].clone();
    let grandchild = by_id(&all, &grandchild_id);
    assert_eq!(grandchild["parent_id"], child["id"]);
    let refused = &grandchild["attempts"][0]["result"]["tool_results"][0];
    assert_eq!(refused["is_error"], json!(true), "{refused}");
    assert!(
        refused["content"]
            .as_str()
            .is_some_and(|c| c.contains("this delegation is at depth 2 and limits.max_depth is 2")),
        "{refused}"
    );
    let shown = harness(["runs", "show"])
        .args([report["id"].as_str().expect("id"), "--journal"])
        .args([dir.join("runs.db")])
        .run();
    assert!(
        shown.stdout.contains("   └─ "),
        "a grandchild is drawn: {}",
        shown.stdout
    );
}

#[test]
fn bad_tree_files_are_config_errors_naming_the_key_and_the_fix() {
    let cases = [
        (
            "delegate: {kind: aider}\ntools: [delegate]\n",
            "a `aider` delegate runs its own tools and has no way to call it",
        ),
        (
            "delegate: {kind: command, command: [\"true\"]}\ntools: [delegate]\n",
            "a `command` delegate runs its own tools and has no way to call it",
        ),
        (
            "delegate: {kind: scripted, script: p.star}\ndelegates:\n  w: {delegate: {kind: scripted, script: p.star}}\n",
            "`delegates` names child profiles but `tools` does not offer `delegate`",
        ),
        (
            "delegate: {kind: scripted, script: p.star}\ntools: [delegate]\nlimits: {max_children: 100}\n",
            "`limits.max_children` is 100; at most 64",
        ),
        (
            "delegate: {kind: scripted, script: p.star}\ntools: [delegate]\nlimits: {max_depth: 0}\n",
            "`limits.max_depth` must be at least 1",
        ),
        (
            "delegate: {kind: scripted, script: p.star}\ntools: [delegate]\ndelegates:\n  w: {task: x, delegate: {kind: scripted, script: p.star}}\n",
            "`delegates.w`: `task` is not allowed in a profile: each delegate call gives the task",
        ),
        (
            "delegate: {kind: scripted, script: p.star}\ntools: [delegate]\ndelegates:\n  w: {delegate: {kind: scripted, script: missing.star}}\n",
            "`delegates.w`: `delegate.script`: cannot read",
        ),
        (
            "delegate: {kind: scripted, script: p.star}\ntools: [delegate]\ndelegates:\n  w: {delegate: {kind: scripted, script: p.star}, tols: []}\n",
            "unknown key `tols` (did you mean `tools`?)",
        ),
    ];
    for (body, expected) in cases {
        let dir = TempDir::new();
        project(
            &dir,
            body,
            &[("p.star", "def respond(request):\n    return \"x\"\n")],
        );
        let out = run_project(&dir);
        assert_eq!(out.code, 2, "{body}: {out:?}");
        let report = out.json();
        let message = report["error"]["message"].as_str().unwrap_or_default();
        assert!(
            message.contains(expected),
            "{body}: expected {expected:?} in {message}"
        );
        assert_eq!(report["error"]["kind"], json!("config"), "{report}");
    }
}

#[test]
fn a_parent_that_times_out_cancels_its_children_and_records_them() {
    let dir = TempDir::new();
    project(
        &dir,
        "delegate: {kind: scripted, script: parent.star}\ntools: [delegate]\nlimits: {timeout_s: 3}\ndelegates:\n  sleeper:\n    delegate: {kind: scripted, script: sleeper.star}\n    tools: [run_command]\n",
        &[
            (
                "parent.star",
                &format!("CALLS = [{{\"task\": \"sleep\", \"profile\": \"sleeper\"}}]\n{CALLER}"),
            ),
            (
                "sleeper.star",
                "def respond(request):\n    return {\"tool_calls\": [{\"name\": \"run_command\", \"arguments\": {\"argv\": [\"sleep\", \"41.5\"], \"timeout_s\": 120}}]}\n",
            ),
        ],
    );
    let out = run_project(&dir);
    let report = out.json();
    assert_eq!(report["error"]["kind"], json!("timeout"), "{report}");
    let all = runs(&dir);
    assert_eq!(all.len(), 2, "the child is recorded too: {all:?}");
    let child = all
        .iter()
        .find(|r| r["parent_id"] == report["id"])
        .expect("the child");
    // The child's time was the parent's: it ends with it, never left running.
    assert_eq!(child["outcome"], json!("error"), "{child}");
    assert!(
        ["timeout", "cancelled"].contains(&child["error"]["kind"].as_str().unwrap_or("")),
        "{child}"
    );
    let sleeping = crate::util::processes()
        .iter()
        .any(|(_, command)| command == "sleep 41.5");
    assert!(!sleeping, "the child's command outlived the parent");
}

#[test]
fn a_child_gets_no_more_tokens_than_its_parent_has_left() {
    use harness_testkit::model::{ModelServer, answer, completion, tool_call};
    // The parent delegates twice, one call a turn, then answers; a child's answer costs 200
    // tokens and its verifier refuses it.
    let server = ModelServer::start(|_, body| {
        let messages = body["messages"].as_array().cloned().unwrap_or_default();
        let task = messages[0]["content"].as_str().unwrap_or_default();
        let results = messages.iter().filter(|m| m["role"] == "tool").count();
        if task.starts_with("Child") {
            completion(
                body,
                json!({"role": "assistant", "content": "done"}),
                "stop",
                200,
            )
        } else if results < 2 {
            let id = format!("call_{results}");
            tool_call(
                body,
                &id,
                "delegate",
                &json!({"task": "Child: say done",
                "verify": "def run(result):\n    return {\"verified\": False, \"reason\": \"not done\"}"}),
            )
        } else {
            answer(body, "the children reported")
        }
    });
    let dir = TempDir::new();
    let model = format!(
        "{{kind: openai, base_url: {:?}, model: fake, api_key_env: none, timeout_s: 30}}",
        server.base_url()
    );
    dir.write(
        "delegation.yaml",
        format!(
            "task: \"Parent: delegate the work\"\ndelegate: {model}\ntools: [delegate]\nlimits: {{max_tokens: 100}}\nmax_verify_retries: 0\nverify: |\n  def run(result):\n      return True\nworkdir: ws\n"
        ),
    );
    std::fs::create_dir_all(dir.join("ws")).expect("workspace");
    let report = run_project(&dir).json();
    // The parent's first turn cost 10 + 7 tokens: its child was given the 83 left, spent 210 on
    // its first attempt, and was stopped (`budget`) instead of retried.
    let children = report["children"].as_array().expect("children");
    assert_eq!(children.len(), 1, "{report}");
    let all = runs(&dir);
    let recorded = by_id(&all, &children[0]["id"]);
    assert_eq!(recorded["error"]["kind"], json!("budget"), "{recorded}");
    assert!(
        recorded["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("more than limits.max_tokens = 83")),
        "{recorded}"
    );
    // Its tokens count against the parent: nothing is left for a second child.
    let second = &tool_results(&report)[1];
    assert_eq!(second["is_error"], json!(true), "{second}");
    assert!(
        second["content"].as_str().is_some_and(
            |c| c.contains("the parent's token budget (limits.max_tokens = 100) is spent")
        ),
        "{second}"
    );
    assert_eq!(all.len(), 2, "{all:?}");
}

#[test]
fn a_parent_cannot_rewrite_a_childs_profile_nor_lend_its_verifier_the_operators_grants() {
    let dir = TempDir::new();
    // The parent tries to rewrite its child's script, then hands the child a verifier that reads
    // the environment the operator allowed for their own scripts.
    let calls = r#"CALLS = [
    {"task": "report the secret", "profile": "worker",
     "verify": "def run(result):\n    return {\"verified\": False, \"reason\": \"saw \" + str(env.get(\"HARNESS_TREE_SECRET\"))}",
     "max_verify_retries": 0},
]
"#;
    let parent = format!(
        r#"{calls}
def respond(request):
    made = [m for m in request["messages"] if m["role"] == "tool"]
    if not made:
        return {{"tool_calls": [{{"name": "write_file", "arguments": {{"path": "../worker.star", "content": "def respond(request):\n    return 'owned'\n"}}}},
                               {{"name": "write_file", "arguments": {{"path": "worker.star", "content": "x"}}}}]}}
    if len(made) == 2:
        return {{"tool_calls": [{{"name": "delegate", "arguments": CALLS[0]}}]}}
    return "\n".join([m["content"] for m in made])
"#
    );
    project(
        &dir,
        "delegate: {kind: scripted, script: parent.star}\ntools: [delegate, write_file]\ndelegates:\n  worker:\n    delegate: {kind: scripted, script: worker.star}\n",
        &[
            ("parent.star", &parent),
            (
                "worker.star",
                "def respond(request):\n    return \"done\"\n",
            ),
        ],
    );
    let out = harness([
        "run",
        "--json",
        "--allow-env",
        "HARNESS_TREE_SECRET",
        "--journal",
    ])
    .args([dir.join("runs.db"), dir.join("delegation.yaml")])
    .env("HARNESS_TREE_SECRET", "hunter2")
    .run();
    let report = out.json();
    let results = tool_results(&report);
    // The profile's script lies outside the workspace: the write is refused as an escape.
    assert_eq!(results[0]["is_error"], json!(true), "{results:?}");
    assert_eq!(
        std::fs::read_to_string(dir.join("worker.star"))
            .ok()
            .as_deref(),
        Some("def respond(request):\n    return \"done\"\n")
    );
    // The child's verifier, written by the parent, does not get the operator's environment.
    let child = report["children"][0]["id"].clone();
    let all = runs(&dir);
    let recorded = by_id(&all, &child);
    assert_eq!(recorded["error"]["kind"], json!("verifier"), "{recorded}");
    assert!(
        recorded["error"]["message"].as_str().is_some_and(
            |m| m.contains("env.get: \"HARNESS_TREE_SECRET\" is not an allowed variable")
        ),
        "{recorded}"
    );
    assert!(!report.to_string().contains("hunter2"), "{report}");
}

/// A child profile that writes the file its task names (`Write PATH with TEXT`), held to a check
/// that takes a second and finds the file.
const WRITER: &str = r#"
def respond(request):
    last = request["messages"][-1]
    if last["role"] == "tool":
        return "wrote it"
    words = request["messages"][0]["content"].split(" ")
    return {"tool_calls": [{"name": "write_file", "arguments": {"path": words[1], "content": words[3] + "\n"}}]}
"#;

/// A parent that makes every call of `CALLS` in its first turn, then answers with what it read.
const FAN: &str = r#"
def respond(request):
    made = [m for m in request["messages"] if m["role"] == "tool"]
    if not made:
        return {"tool_calls": [{"name": "delegate", "arguments": c} for c in CALLS]}
    return "\n".join([m["content"] for m in made])
"#;

/// A project whose parent fans `calls` (Starlark) out to the `writer` profile at once.
fn fan_project(dir: &TempDir, calls: &str, check: &str) {
    project(
        dir,
        &format!(
            "delegate: {{kind: scripted, script: parent.star}}\ntools: [delegate]\nlimits: {{max_children: 4}}\ndelegates:\n  writer:\n    delegate: {{kind: scripted, script: writer.star}}\n    tools: [write_file]\n    checks: [{{name: slow, run: {check:?}}}]\n"
        ),
        &[
            ("parent.star", &format!("CALLS = {calls}\n{FAN}")),
            ("writer.star", WRITER),
        ],
    );
}

/// What run `id`'s record says of check `name`: when it started and ended (RFC 3339,
/// milliseconds), and the CPU milliseconds its `CheckCompleted` event recorded.
fn check_record(dir: &TempDir, id: &str, name: &str) -> ((String, String), Value) {
    let export = harness(["runs", "export", id, "--journal"])
        .args([dir.join("runs.db")])
        .run()
        .json();
    let event = |kind: &str| {
        export["events"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|e| e["type"] == kind && e["data"]["check_name"] == name)
            .unwrap_or_else(|| panic!("no {kind} of {name} in {id}: {export}"))
    };
    let at = |kind: &str| event(kind)["at"].as_str().expect("at").to_owned();
    let cpu = event("CheckCompleted")["data"]["cpu_ms"].clone();
    assert!(cpu.is_u64(), "no cpu_ms of {name} in {id}: {export}");
    ((at("CheckStarted"), at("CheckCompleted")), cpu)
}

#[test]
fn children_that_change_files_run_side_by_side_each_in_a_workspace_of_its_own() {
    let dir = TempDir::new();
    fan_project(
        &dir,
        r#"[{"task": "Write a.txt with alpha", "profile": "writer"},
            {"task": "Write b.txt with beta", "profile": "writer"},
            {"task": "Write c.txt with gamma", "profile": "writer"}]"#,
        "sleep 1 && ls *.txt",
    );
    std::fs::create_dir_all(dir.join("tmp")).expect("tmp");
    let out = harness(["run", "--json", "--journal"])
        .args([dir.join("runs.db"), dir.join("delegation.yaml")])
        .env("TMPDIR", dir.join("tmp").to_str().expect("utf-8"))
        .run();
    out.expect_code(0);
    let report = out.json();
    let results = tool_results(&report);
    assert_eq!(results.len(), 3, "{report}");
    let mut windows = Vec::new();
    let mut cpu = Vec::new();
    for (result, (file, word)) in
        results
            .iter()
            .zip([("a.txt", "alpha"), ("b.txt", "beta"), ("c.txt", "gamma")])
    {
        let child: Value = serde_json::from_str(result["content"].as_str().expect("content"))
            .expect("the child's JSON");
        assert_eq!(child["verified"], json!(true), "{child}");
        assert_eq!(child["workspace"]["isolated"], json!(true), "{child}");
        assert_eq!(child["workspace"]["applied"], json!([file]), "{child}");
        // Its work is in the parent's workspace; the other children's files were not in its
        // copy when it ran (each copy was made when its call was).
        assert_eq!(
            std::fs::read_to_string(dir.join("ws").join(file)).ok(),
            Some(format!("{word}\n"))
        );
        let (window, used) = check_record(&dir, child["id"].as_str().expect("id"), "slow");
        windows.push(window);
        cpu.push((child["id"].clone(), used));
        // Its record names the workspace its changes landed in.
        let recorded = by_id(&runs(&dir), &child["id"]).clone();
        assert_eq!(
            recorded["workdir"].as_str().map(std::path::Path::new),
            Some(
                std::path::absolute(dir.join("ws"))
                    .expect("absolute")
                    .as_path()
            ),
            "{recorded}"
        );
    }
    // The three one-second checks overlapped: every one started before any ended.
    let last_start = windows.iter().map(|(s, _)| s).max().expect("windows");
    let first_end = windows.iter().map(|(_, e)| e).min().expect("windows");
    assert!(
        last_start < first_end,
        "the children took turns: {windows:?}"
    );
    // The parent's spend charges each child the CPU its check used, as the child recorded it.
    let shown = harness(["runs", "show", "--json"])
        .args([report["id"].as_str().expect("id"), "--journal"])
        .args([dir.join("runs.db")])
        .run()
        .json();
    let mut charged: Vec<(Value, Value)> = shown["spend"]["children"]
        .as_array()
        .expect("children")
        .iter()
        .map(|c| (c["id"].clone(), c["check_cpu_ms"].clone()))
        .collect();
    charged.sort_by_key(|(id, _)| id.to_string());
    cpu.sort_by_key(|(id, _)| id.to_string());
    assert_eq!(charged, cpu, "{shown}");
    let sum: u64 = cpu.iter().filter_map(|(_, ms)| ms.as_u64()).sum();
    assert_eq!(
        shown["spend"]["tree"]["check_cpu_ms"],
        json!(sum),
        "{shown}"
    );
    // Every copy was removed with its child.
    let left: Vec<_> = std::fs::read_dir(dir.join("tmp"))
        .expect("tmp")
        .flatten()
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn a_child_whose_change_conflicts_with_an_earlier_childs_applies_nothing_and_says_which_files() {
    let dir = TempDir::new();
    // Both write shared.txt: changes apply in call order, so the first call's change lands
    // and the second's is a conflict, whichever child finishes first.
    fan_project(
        &dir,
        r#"[{"task": "Write shared.txt with first", "profile": "writer"},
            {"task": "Write shared.txt with second", "profile": "writer"}]"#,
        "sleep 0.5",
    );
    std::fs::write(dir.join("ws/shared.txt"), "base\n").expect("write");
    std::fs::create_dir_all(dir.join("tmp")).expect("tmp");
    let out = harness(["run", "--json", "--keep-workspaces", "--journal"])
        .args([dir.join("runs.db"), dir.join("delegation.yaml")])
        .env("TMPDIR", dir.join("tmp").to_str().expect("utf-8"))
        .run();
    let report = out.json();
    let results = tool_results(&report);
    let children: Vec<Value> = results
        .iter()
        .map(|r| serde_json::from_str(r["content"].as_str().expect("content")).expect("JSON"))
        .collect();
    assert_eq!(
        children[0]["workspace"]["applied"],
        json!(["shared.txt"]),
        "{report}"
    );
    let second = &children[1];
    assert_eq!(second["verified"], json!(false), "{second}");
    assert_eq!(
        second["outcome"],
        json!("passed"),
        "its own record passed: {second}"
    );
    assert_eq!(
        second["conflict"]["files"],
        json!(["shared.txt"]),
        "{second}"
    );
    let diff = second["conflict"]["diff"].as_str().expect("diff");
    assert!(
        diff.contains("-first") && diff.contains("+second"),
        "{diff}"
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("ws/shared.txt"))
            .ok()
            .as_deref(),
        Some("first\n")
    );
    // --keep-workspaces left both copies, named in the results.
    for child in &children {
        let kept = child["workspace"]["kept"].as_str().expect("kept");
        assert!(
            std::path::Path::new(kept).join("shared.txt").is_file(),
            "{child}"
        );
    }
}

#[test]
fn concurrent_children_share_the_parents_token_budget_and_never_exceed_it() {
    use harness_testkit::model::{ModelServer, completion};
    // Every answer of a child costs 600 tokens; the parent has 1,000 and makes two calls at once.
    let server = ModelServer::start(|_, body| {
        completion(
            body,
            json!({"role": "assistant", "content": "done"}),
            "stop",
            600,
        )
    });
    let dir = TempDir::new();
    let model = format!(
        "{{kind: openai, base_url: {:?}, model: fake, api_key_env: none, timeout_s: 30}}",
        server.base_url()
    );
    project(
        &dir,
        &format!(
            "delegate: {{kind: scripted, script: parent.star}}\ntools: [delegate]\nlimits: {{max_tokens: 1000}}\ndelegates:\n  model:\n    delegate: {model}\n"
        ),
        &[(
            "parent.star",
            &format!(
                r#"REFUSE = "def run(result):\n    return {{\"verified\": False, \"reason\": \"not done\"}}"
CALLS = [{{"task": "Child: say done", "profile": "model", "verify": REFUSE}},
         {{"task": "Child: say done too", "profile": "model", "verify": REFUSE}}]
{FAN}"#
            ),
        )],
    );
    let report = run_project(&dir).json();
    let children = report["children"].as_array().expect("children");
    assert_eq!(children.len(), 2, "{report}");
    let all = runs(&dir);
    for child in children {
        let recorded = by_id(&all, &child["id"]);
        // Each was given half of what was left, not all of it: 600 tokens is over its share.
        assert_eq!(recorded["error"]["kind"], json!("budget"), "{recorded}");
        assert!(
            recorded["error"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("more than limits.max_tokens = 500")),
            "{recorded}"
        );
    }
}

#[test]
fn harness_run_shows_each_childs_attempts_and_verdicts_under_the_call_that_started_it() {
    let dir = TempDir::new();
    std::fs::create_dir_all(dir.join("fan-out")).expect("the example's directory");
    copy_tree(&repo_root().join("examples/fan-out"), &dir.join("fan-out"));
    let out = harness(["run", "--no-journal"])
        .args([dir.join("fan-out/delegation.yaml")])
        .run();
    out.expect_code(0);
    let progress = &out.stderr;
    // Each child, named by its id, one level in: started, its attempts, its verdicts, its end.
    let started: Vec<&str> = progress
        .lines()
        .filter(|l| l.starts_with("  └ child d-"))
        .collect();
    assert_eq!(started.len(), 3, "{progress}");
    let quitter = started
        .iter()
        .find(|l| l.ends_with("Write gamma.txt containing the word gamma"))
        .and_then(|l| l.split_whitespace().nth(2))
        .unwrap_or_else(|| panic!("no quitter in {progress}"));
    for line in [
        format!("  └ {quitter} attempt 1/2"),
        format!(
            "  └ {quitter} attempt 1: NOT VERIFIED: criterion file_exists:gamma.txt: gamma.txt does not exist"
        ),
        format!("  └ {quitter} attempt 2/2"),
        format!("  └ {quitter} failed (verification_failed)"),
    ] {
        assert!(
            progress.lines().any(|l| l == line),
            "{line:?} in {progress}"
        );
    }
    assert_eq!(
        progress
            .lines()
            .filter(|l| l.ends_with(" passed") && l.starts_with("  └ d-"))
            .count(),
        2,
        "{progress}"
    );
}

#[test]
fn a_tree_budget_counts_grandchildren_and_stops_every_member_once_spent() {
    use harness_testkit::model::{ModelServer, completion};
    // The grandchild's model asks to read a file every turn, 300 tokens an answer, and never
    // finishes: only the tree's budget stops it before its 20 turns.
    let server = ModelServer::start(|_, body| {
        let call = json!({"id": "call_read", "type": "function",
            "function": {"name": "read_file", "arguments": "{\"path\": \"notes.txt\"}"}});
        completion(
            body,
            json!({"role": "assistant", "content": null, "tool_calls": [call]}),
            "tool_calls",
            300,
        )
    });
    let dir = TempDir::new();
    let model = format!(
        "{{kind: openai, base_url: {:?}, model: fake, api_key_env: none, timeout_s: 30}}",
        server.base_url()
    );
    let one_call = |profile: &str, task: &str| {
        format!(
            r#"def respond(request):
    made = [m for m in request["messages"] if m["role"] == "tool"]
    if not made:
        return {{"tool_calls": [{{"name": "delegate", "arguments": {{"task": "{task}", "profile": "{profile}"}}}}]}}
    return made[0]["content"]
"#
        )
    };
    project(
        &dir,
        &format!(
            "delegate: {{kind: scripted, script: parent.star}}\ntools: [delegate]\nlimits: {{max_tree_tokens: 1000}}\ndelegates:\n  middle:\n    delegate: {{kind: scripted, script: middle.star}}\n    tools: [delegate]\n  reader:\n    delegate: {model}\n    tools: [read_file]\n    limits: {{max_turns: 20}}\n"
        ),
        &[
            ("parent.star", &one_call("middle", "Child: have it read")),
            ("middle.star", &one_call("reader", "Grandchild: read notes")),
        ],
    );
    dir.write("ws/notes.txt", "notes\n");
    let report = run_project(&dir).json();
    let all = runs(&dir);
    assert_eq!(all.len(), 3, "{all:?}");
    let depth = |task: &str| {
        all.iter()
            .find(|r| r["request"]["task"] == json!(task))
            .unwrap_or_else(|| panic!("no run of {task:?} in {all:?}"))
    };
    let grandchild = depth("Grandchild: read notes");
    let spent = grandchild["usage"]["input_tokens"].as_u64().unwrap_or(0)
        + grandchild["usage"]["output_tokens"].as_u64().unwrap_or(0);
    // Stopped at the first turn after the tree reached 1,000, not after 20 turns.
    assert!((1_000..1_400).contains(&spent), "{grandchild}");
    assert!(server.seen().len() <= 4, "{} requests", server.seen().len());
    assert_eq!(grandchild["error"]["kind"], json!("budget"), "{grandchild}");
    // Every member above it, though none of them spent a token itself, counts the grandchild's
    // tokens and stops at its next turn.
    for run in [grandchild, depth("Child: have it read"), &report] {
        assert_eq!(run["error"]["kind"], json!("budget"), "{run}");
        let message = run["error"]["message"].as_str().unwrap_or_default();
        assert!(
            message.contains(&format!(
                "the delegation tree spent {spent} tokens of limits.max_tree_tokens = 1000"
            )) && message.contains("stopped before turn"),
            "{run}"
        );
    }
    assert_eq!(report["error"]["kind"], json!("budget"), "{report}");
    // `runs show` says who spent it: the child's row counts its grandchild's tokens.
    let id = report["id"].as_str().expect("id");
    let show = |json: bool| {
        let journal = dir.join("runs.db");
        let journal = journal.to_str().expect("utf-8");
        let args = ["runs", "show", id, "--journal", journal, "--json"];
        harness(&args[..if json { 6 } else { 5 }]).run()
    };
    let spend = show(true).json()["spend"].clone();
    let child = depth("Child: have it read");
    assert_eq!(
        spend["children"],
        json!([{"id": child["id"], "outcome": "error", "kind": "budget",
            "input_tokens": grandchild["usage"]["input_tokens"], "cached_input_tokens": 0,
            "output_tokens": grandchild["usage"]["output_tokens"],
            "duration_ms": child["duration_ms"], "check_cpu_ms": 0, "descendants": 1}]),
        "{spend}"
    );
    assert_eq!(spend["run"]["input_tokens"], json!(0), "{spend}");
    assert_eq!(
        spend["tree"]["input_tokens"].as_u64().unwrap_or(0)
            + spend["tree"]["output_tokens"].as_u64().unwrap_or(0),
        spent,
        "{spend}"
    );
    assert_eq!(spend["tree"]["runs"], json!(3), "{spend}");
    let text = show(false).stdout;
    let row = |start: &str| {
        text.lines()
            .find(|l| {
                l.trim_start_matches("spend:")
                    .trim_start()
                    .starts_with(start)
            })
            .unwrap_or_else(|| panic!("no {start:?} row in {text}"))
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
    };
    assert!(
        row(&format!("child {}", child["id"].as_str().expect("id")))
            .contains("error (budget) and the run under it"),
        "{text}"
    );
    assert!(
        row("with everything under it (3 runs)").ends_with(&format!(
            "{} {}",
            spend["tree"]["input_tokens"], spend["tree"]["output_tokens"]
        )),
        "{text}"
    );
}

/// `examples/fan-out/agent-parent.yaml`, as its header says: an agent CLI parent (a stand-in for
/// Claude Code) calls `delegate` through the MCP server its run serves; the child runs here,
/// its file lands in the parent's workspace, the parent's log holds the call as harness ran it,
/// and the audit's linkage holds. Run as the header says, by a path relative to where harness
/// starts: the CLI, named by a path relative to the delegation file, is found from the
/// workspace it runs in.
#[test]
fn the_agent_parent_example_delegates_over_the_server_its_run_serves() {
    let dir = TempDir::new();
    agent_parent_example(&dir, |file| file);
    let out = run_agent_parent(&dir);
    out.expect_code(0);
    let report = out.json();
    assert_eq!(report["outcome"], json!("passed"), "{report}");
    assert_eq!(
        dir.read("fan-out/workspace/north.txt").as_deref(),
        Some("cold\n")
    );
    let children = report["children"].as_array().expect("children");
    assert_eq!(children.len(), 1, "{report}");
    let names: Vec<&str> = report["result"]["tool_calls"]
        .as_array()
        .expect("tool calls")
        .iter()
        .filter_map(|c| c["name"].as_str())
        .collect();
    assert_eq!(names, ["delegate"], "{report}");
    let child = by_id(&runs(&dir), &children[0]["id"]).clone();
    assert_eq!(child["parent_id"], report["id"], "{child}");
    assert_eq!(child["outcome"], json!("passed"), "{child}");
    assert_linkage_audited(&dir, report["id"].as_str().expect("an id"));
}

/// The run's `tool.pre` hooks judge an agent CLI's served `delegate` calls as they judge a
/// model's: a hook that refuses a profile blocks the call before any child runs, and the CLI is
/// told why.
#[test]
fn a_tool_pre_hook_blocks_an_agent_clis_served_delegate_call() {
    let dir = TempDir::new();
    agent_parent_example(&dir, |file| {
        file.replace(
            "tools: [delegate]\n",
            "tools: [delegate]\nhooks: [hooks]\nmax_verify_retries: 0\n",
        )
    });
    dir.write(
        "fan-out/hooks/no-writers.md",
        "---\nevent: tool.pre\ntools: [delegate]\nscript: |\n  def handle(event, payload):\n      if payload[\"arguments\"].get(\"profile\") == \"writer\":\n          return block(\"writers are not to be delegated to\")\n      return allow()\n---\n# No writers\n",
    );
    let out = run_agent_parent(&dir);
    out.expect_code(1);
    let report = out.json();
    assert_eq!(report["children"], json!([]), "{report}");
    let result = &report["result"]["tool_results"][0];
    assert_eq!(result["name"], json!("delegate"), "{report}");
    assert_eq!(result["is_error"], json!(true), "{result}");
    assert!(
        result["content"].as_str().is_some_and(
            |c| c.contains("blocked by hook no-writers: writers are not to be delegated to")
        ),
        "{result}"
    );
    assert!(
        report["result"]["response"]
            .as_str()
            .is_some_and(|r| r.starts_with("FAILED: ")),
        "the CLI was told: {report}"
    );
    assert_eq!(runs(&dir).len(), 1, "no child ran");
}

/// A CLI whose run fails after a served call — it prints what is not its stream and exits 3 —
/// ends the attempt in a `delegate` error, and that error (what the record keeps of the attempt)
/// names the child the run served it, which is recorded with the run as its parent.
#[test]
fn a_cli_run_that_fails_after_a_served_call_names_the_child_in_its_error() {
    let dir = TempDir::new();
    agent_parent_example(&dir, |file| {
        file.replace("agent/claude.py", "agent/failing.sh").replace(
            "tools: [delegate]\n",
            "tools: [delegate]\nmax_verify_retries: 0\n",
        )
    });
    let failing = dir.write(
        "fan-out/agent/failing.sh",
        "#!/bin/sh\npython3 \"$(dirname \"$0\")/claude.py\" \"$@\"\n[ \"$1\" = --version ] && exit 0\necho garbage\nexit 3\n",
    );
    let mut mode = std::fs::metadata(&failing)
        .expect("the script")
        .permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut mode, 0o755);
    std::fs::set_permissions(&failing, mode).expect("executable");
    let out = run_agent_parent(&dir);
    out.expect_code(4);
    let report = out.json();
    assert_eq!(report["kind"], json!("delegate"), "{report}");
    let message = report["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("exited with code 3"), "{message}");
    let all = runs(&dir);
    let child = all
        .iter()
        .find(|r| r["parent_id"] == report["id"])
        .unwrap_or_else(|| panic!("the served child is recorded: {all:?}"));
    let id = child["id"].as_str().expect("an id");
    assert!(
        message.contains(&format!(
            "it had harness run 1 child delegation(s) of this run: {id} (passed)"
        )),
        "{message}"
    );
}
