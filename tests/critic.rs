//! The critic (DESIGN §4.5, §4.9): an independent reviewer after the deterministic stages, ranked
//! below them. Every row of the decision table that involves it, end to end through `harness run`:
//! SOFT_FAIL and blocking findings retry with its feedback, HARD_FAIL ends the run as
//! `critic_rejected`, a spent budget with every check green is `passed_with_debt` or `failed` as
//! `on_exhausted` says, a failing check is never rescued by it, its word alone passes nothing
//! without a warning, and a reviewer that cannot be read is never a pass of its own.

use harness_testkit::model::{ModelServer, answer, messages, tool_call};
use serde_json::{Value, json};

use crate::util::{Output, TempDir, copy_tree, harness, repo_root};

/// Writes done.txt, then says so.
const BUILDER: &str = r#"def respond(request):
    if request["messages"][-1]["role"] == "tool":
        return "Done."
    return {"tool_calls": [{"name": "write_file", "arguments": {"path": "done.txt", "content": "attempt %d\n" % request["attempt"]}}]}
"#;

/// A reviewer that answers `answers[attempt]` (the last one for later attempts) without reading.
fn reviewer(answers: &[&str]) -> String {
    let list: Vec<String> = answers.iter().map(|a| format!("{a:?}")).collect();
    format!(
        "ANSWERS = [{}]\n\ndef respond(request):\n    return ANSWERS[min(request[\"attempt\"], len(ANSWERS) - 1)]\n",
        list.join(", ")
    )
}

const PASS: &str = r#"{"outcome": "PASS", "reasoning": "fine", "findings": []}"#;
const PASS_STYLE: &str = r#"{"outcome": "PASS", "reasoning": "fine", "findings": [{"severity": "style", "title": "naming"}]}"#;
const SOFT: &str = r#"{"outcome": "SOFT_FAIL", "reasoning": "incomplete", "feedback": "write the summary too", "findings": []}"#;
const MISSING: &str = r#"{"outcome": "SOFT_FAIL", "feedback": "add the tests", "findings": [{"severity": "missing_ac", "title": "no tests"}]}"#;
const HARD: &str = r#"{"outcome": "HARD_FAIL", "reasoning": "it deletes user data", "findings": [{"severity": "data_loss", "title": "rm -rf"}]}"#;

/// A delegation with the builder, a `done` check, and `critic` (YAML mapping body lines).
fn delegation(review: &str, critic: &str, rest: &str) -> TempDir {
    let dir = TempDir::new();
    dir.write("agent.star", BUILDER);
    dir.write("reviewer.star", review);
    std::fs::create_dir_all(dir.join("ws")).expect("mkdir");
    dir.write(
        "delegation.yaml",
        format!(
            "task: Write done.txt.\ndelegate: {{kind: scripted, script: agent.star}}\ntools: [write_file]\nworkdir: ws\ncritic:\n  delegate: {{kind: scripted, script: reviewer.star}}\n{critic}{rest}"
        ),
    );
    dir
}

const CHECKED: &str = "checks:\n  - {name: done, run: \"test -f done.txt\"}\n";

fn run(dir: &TempDir) -> (Output, Value) {
    let out = harness(["run", "--json", "--journal"])
        .args([dir.join("runs.db"), dir.join("delegation.yaml")])
        .run();
    let report = out.json();
    (out, report)
}

fn critic_of(report: &Value, attempt: usize) -> &Value {
    &report["history"][attempt]["critic"]
}

#[test]
fn a_soft_fail_sends_the_attempt_back_with_the_feedback_and_a_pass_keeps_style_as_debt() {
    let dir = delegation(
        &reviewer(&[MISSING, PASS_STYLE]),
        "  when: always\n",
        &format!("{CHECKED}max_verify_retries: 2\n"),
    );
    let (out, report) = run(&dir);
    out.expect_code(0);
    assert_eq!(report["outcome"], json!("passed"), "{out:?}");
    assert_eq!(report["attempts"], json!(2));
    assert_eq!(report["reasons"][0], json!(["critic missing_ac: no tests"]));
    let prompt = report["history"][0]["retry_prompt"]
        .as_str()
        .expect("a retry prompt");
    assert!(prompt.contains("critic missing_ac: no tests"), "{prompt}");
    assert!(
        prompt.contains("The reviewer's feedback:\n  > add the tests"),
        "{prompt}"
    );
    let first = critic_of(&report, 0);
    assert_eq!(first["outcome"], json!("SOFT_FAIL"));
    assert_eq!(first["reviewer"], json!("scripted"));
    assert_eq!(first["prompt_version"], json!("review-v2"));
    assert_eq!(first["prompt_sha256"].as_str().map(str::len), Some(64));
    assert_eq!(critic_of(&report, 1)["outcome"], json!("PASS"));
    assert_eq!(report["debt"].as_array().map(Vec::len), Some(1), "{report}");
    assert_eq!(report["debt"][0]["severity"], json!("style"));
    assert_eq!(report["debt"][0]["blocking"], json!(false));
    assert_eq!(report["review"]["status"], Value::Null);
    // The progress lines and the debt on the terminal.
    let text = harness(["run", "--no-journal"])
        .args([dir.join("delegation.yaml")])
        .run();
    text.expect_code(0);
    assert!(
        text.stderr.contains("critic scripted: SOFT_FAIL"),
        "{text:?}"
    );
    assert!(
        text.stderr
            .contains("critic scripted: PASS (1 non-blocking finding(s), kept as debt)"),
        "{text:?}"
    );
    assert!(text.stderr.contains("debt: critic style"), "{text:?}");
}

#[test]
fn a_soft_fail_without_findings_still_retries_on_its_feedback() {
    let dir = delegation(
        &reviewer(&[SOFT, PASS]),
        "  when: always\n",
        &format!("{CHECKED}max_verify_retries: 1\n"),
    );
    let (out, report) = run(&dir);
    out.expect_code(0);
    assert_eq!(report["attempts"], json!(2), "{out:?}");
    assert_eq!(
        report["reasons"][0],
        json!(["critic review: write the summary too"])
    );
}

#[test]
fn a_hard_fail_ends_the_run_at_once_as_critic_rejected() {
    let dir = delegation(
        &reviewer(&[HARD]),
        "  when: always\n",
        &format!("{CHECKED}max_verify_retries: 2\n"),
    );
    let (out, report) = run(&dir);
    out.expect_code(1);
    assert_eq!(report["outcome"], json!("failed"), "{out:?}");
    assert_eq!(report["kind"], json!("critic_rejected"));
    assert_eq!(report["attempts"], json!(1));
    let message = report["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("HARD_FAIL") && message.contains("deletes user data"),
        "{message}"
    );
    assert_eq!(report["review"]["status"], json!("pending"));
}

#[test]
fn a_spent_budget_with_green_checks_is_debt_or_a_failure_as_on_exhausted_says() {
    let dir = delegation(
        &reviewer(&[MISSING]),
        "  when: always\n  on_exhausted: debt\n",
        &format!("{CHECKED}max_verify_retries: 1\n"),
    );
    let (out, report) = run(&dir);
    out.expect_code(0);
    assert_eq!(report["outcome"], json!("passed_with_debt"), "{out:?}");
    assert_eq!(report["kind"], Value::Null);
    assert_eq!(report["attempts"], json!(2));
    assert_eq!(report["debt"][0]["severity"], json!("missing_ac"));
    assert_eq!(report["debt"][0]["blocking"], json!(true));
    assert_eq!(report["review"]["status"], json!("pending"));
    let id = report["id"].as_str().expect("id");
    let show = harness(["runs", "show", "--json", "--journal"])
        .args([dir.join("runs.db").display().to_string(), id.to_owned()])
        .run();
    let critic_events: Vec<Value> = show.json()["events"]
        .as_array()
        .expect("events")
        .iter()
        .filter(|e| e["type"] == json!("CriticCompleted"))
        .cloned()
        .collect();
    assert_eq!(critic_events.len(), 2, "one review per attempt");
    assert_eq!(critic_events[0]["outcome"], json!("SOFT_FAIL"));
    assert_eq!(critic_events[0]["blocking"], json!(1));
    // It waits for a human; a `verifier` override covers a critic's objection, `check` does not.
    let queue = harness(["review", "--json", "--journal"])
        .args([dir.join("runs.db")])
        .run();
    assert_eq!(
        queue.json()["pending"][0]["outcome"],
        json!("passed_with_debt")
    );
    let id = report["id"].as_str().expect("id");
    let wrong = harness([
        "override",
        id,
        "--approve",
        "--type",
        "check",
        "--reason",
        "r",
        "--user",
        "ann",
        "--json",
        "--journal",
    ])
    .args([dir.join("runs.db")])
    .run();
    wrong.expect_code(2);
    assert_eq!(wrong.json()["error"]["kind"], json!("illegal_transition"));
    harness([
        "override",
        id,
        "--approve",
        "--type",
        "verifier",
        "--reason",
        "tests come in the next PR",
        "--user",
        "ann",
        "--journal",
    ])
    .args([dir.join("runs.db")])
    .run()
    .expect_code(0);

    // The report counts the reviews, the debt and the human decision.
    let dashboard = harness(["report", "--json", "--journal"])
        .args([dir.join("runs.db")])
        .run();
    dashboard.expect_code(0);
    let total = &dashboard.json()["total"];
    assert_eq!(total["outcomes"]["passed_with_debt"], json!(1), "{total}");
    assert_eq!(total["critic"], json!({"SOFT_FAIL": 2}));
    assert_eq!(total["debt"], json!(1));
    assert_eq!(
        total["review"],
        json!({"approved": 1, "rejected": 0, "pending": 0})
    );
    let table = harness(["report", "--journal"])
        .args([dir.join("runs.db")])
        .run();
    assert!(
        table.stdout.contains("critic reviews: SOFT_FAIL 2 · passed with debt: 1 · debt findings: 1 · review: 1 approved, 0 rejected, 0 pending"),
        "{table:?}"
    );

    let strict = delegation(
        &reviewer(&[MISSING]),
        "  when: always\n  on_exhausted: fail\n",
        &format!("{CHECKED}max_verify_retries: 1\n"),
    );
    let (out, report) = run(&strict);
    out.expect_code(1);
    assert_eq!(report["outcome"], json!("failed"), "{out:?}");
    assert_eq!(report["kind"], json!("critic_rejected"));
    assert_eq!(report["attempts"], json!(2));
}

#[test]
fn a_failing_check_is_never_rescued_by_the_critic_which_does_not_even_run() {
    let dir = delegation(
        &reviewer(&[PASS]),
        "  when: always\n",
        "checks:\n  - {name: never, run: \"exit 1\"}\nmax_verify_retries: 1\n",
    );
    let (out, report) = run(&dir);
    out.expect_code(1);
    assert_eq!(report["kind"], json!("verification_failed"), "{out:?}");
    for attempt in 0..2 {
        assert_eq!(critic_of(&report, attempt), &Value::Null);
    }
}

#[test]
fn the_critic_alone_passes_nothing_without_saying_so() {
    let dir = delegation(&reviewer(&[PASS]), "  when: always\n", "");
    let (out, report) = run(&dir);
    out.expect_code(0);
    assert_eq!(report["outcome"], json!("passed"), "{out:?}");
    let warnings = report["warnings"].to_string();
    assert!(
        warnings.contains("no checks ran; human review recommended"),
        "{warnings}"
    );
}

#[test]
fn a_reviewer_that_cannot_be_read_is_unavailable_never_a_pass_of_its_own() {
    for (answer, expect) in [
        ("Looks great, ship it!", "not one JSON object"),
        (
            r#"{"outcome": "PASS"} {"outcome": "PASS"}"#,
            "more than one JSON value",
        ),
        (
            r#"{"outcome": "PASS", "findings": [{"severity": "cosmic", "title": "x"}]}"#,
            "unknown severity",
        ),
        ("", "answered nothing"),
    ] {
        let dir = delegation(
            &reviewer(&[answer]),
            "  when: always\n",
            &format!("{CHECKED}max_verify_retries: 0\n"),
        );
        let (out, report) = run(&dir);
        out.expect_code(0);
        // The checks passed; the critic's failure is recorded and kept as debt, never a plain
        // pass: the run waits for a human.
        assert_eq!(
            report["outcome"],
            json!("passed_with_debt"),
            "{answer}: {out:?}"
        );
        assert_eq!(report["review"]["status"], json!("pending"), "{answer}");
        let critic = critic_of(&report, 0);
        assert_eq!(critic["outcome"], json!("SOFT_FAIL"), "{answer}");
        assert_eq!(critic["available"], json!(false));
        assert!(
            critic["error"]
                .as_str()
                .unwrap_or_default()
                .contains(expect),
            "{answer}: {critic}"
        );
        let debt = report["debt"][0]["message"].as_str().unwrap_or_default();
        assert!(debt.starts_with("critic unavailable:"), "{debt}");
        assert_eq!(report["debt"][0]["blocking"], json!(false));
    }
}

#[test]
fn an_unavailable_critic_with_nothing_deterministic_is_no_gate_and_retry_re_prompts() {
    // No checks: the critic was the only judge, and it could not be read.
    let dir = delegation(
        &reviewer(&["not json"]),
        "  when: always
",
        "max_verify_retries: 0
",
    );
    let (out, report) = run(&dir);
    out.expect_code(1);
    assert_eq!(report["outcome"], json!("failed"), "{out:?}");
    assert_eq!(report["kind"], json!("no_gate"), "{out:?}");
    let message = report["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("critic was unavailable") && message.contains("on_unavailable: retry"),
        "{message}"
    );

    // `on_unavailable: retry`: the builder hears it and the next attempt is reviewed again.
    let dir = delegation(
        &reviewer(&[
            "not json",
            r#"{"outcome": "PASS", "reasoning": "fine", "findings": []}"#,
        ]),
        "  when: always\n  on_unavailable: retry\n",
        &format!("{CHECKED}max_verify_retries: 1\n"),
    );
    let (out, report) = run(&dir);
    out.expect_code(0);
    assert_eq!(report["outcome"], json!("passed"), "{out:?}");
    assert_eq!(report["attempts"], json!(2));
    let prompt = report["history"][0]["retry_prompt"]
        .as_str()
        .unwrap_or_default();
    assert!(prompt.contains("the reviewer was unavailable"), "{prompt}");
    assert_eq!(critic_of(&report, 1)["outcome"], json!("PASS"));
}

#[test]
fn the_critic_sees_the_diff_without_a_scope_and_many_files_make_work_risky() {
    // Six files, no `scope:`: observation is always on, so the risky trigger fires.
    let dir = TempDir::new();
    let writes: Vec<String> = (0..6)
        .map(|i| format!(r#"{{"name": "write_file", "arguments": {{"path": "f{i}.txt", "content": "line {i}\n"}}}}"#))
        .collect();
    dir.write(
        "agent.star",
        format!(
            "def respond(request):\n    if request[\"turn\"] == 0:\n        return {{\"tool_calls\": [{}]}}\n    return \"Wrote six files.\"\n",
            writes.join(", ")
        ),
    );
    dir.write(
        "reviewer.star",
        "def respond(request):\n    prompt = request[\"messages\"][0][\"content\"]\n    ok = \"+line 5\" in prompt\n    return '{\"outcome\": \"%s\", \"reasoning\": \"saw the diff: %s\", \"findings\": []}' % (\"PASS\" if ok else \"HARD_FAIL\", ok)\n",
    );
    std::fs::create_dir_all(dir.join("ws")).expect("mkdir");
    dir.write(
        "delegation.yaml",
        "task: Write six files.\ndelegate: {kind: scripted, script: agent.star}\ntools: [write_file]\nworkdir: ws\ncritic:\n  delegate: {kind: scripted, script: reviewer.star}\nchecks:\n  - {name: six, run: \"test -f f5.txt\"}\nmax_verify_retries: 0\n",
    );
    let (out, report) = run(&dir);
    out.expect_code(0);
    let critic = critic_of(&report, 0);
    assert_eq!(critic["outcome"], json!("PASS"), "{out:?}");
    assert_eq!(critic["reasoning"], json!("saw the diff: True"));
}

#[test]
fn delegated_work_is_risky_and_its_parent_is_recorded() {
    let dir = delegation(
        &reviewer(&[r#"{"outcome": "PASS", "reasoning": "fine", "findings": []}"#]),
        "",
        &format!("{CHECKED}max_verify_retries: 0\nparent_id: d-parent\n"),
    );
    let (out, report) = run(&dir);
    out.expect_code(0);
    assert_eq!(report["result"]["parent_id"], json!("d-parent"), "{out:?}");
    // The risky critic reviewed one file because the work was delegated.
    assert_eq!(critic_of(&report, 0)["outcome"], json!("PASS"), "{out:?}");
    // The journal links the run to its parent.
    let id = report["id"].as_str().unwrap_or_default().to_owned();
    let journal = dir.join("runs.db").display().to_string();
    let show = harness(["runs", "show", "--journal", journal.as_str(), id.as_str()]).run();
    show.expect_code(0);
    assert!(
        show.stdout
            .lines()
            .any(|l| l.split_whitespace().eq(["parent:", "d-parent"])),
        "{show:?}"
    );
    let listed = harness(["runs", "list", "--json", "--journal", journal.as_str()]).run();
    assert_eq!(listed.json()["runs"][0]["parent_id"], json!("d-parent"));
    // The same from the environment.
    let dir = delegation(
        &reviewer(&[r#"{"outcome": "PASS", "reasoning": "fine", "findings": []}"#]),
        "",
        &format!("{CHECKED}max_verify_retries: 0\n"),
    );
    let out = harness(["run", "--json", "--journal"])
        .args([dir.join("runs.db"), dir.join("delegation.yaml")])
        .env("HARNESS_PARENT_ID", "d-env-parent")
        .run();
    out.expect_code(0);
    let report = out.json();
    assert_eq!(
        report["result"]["parent_id"],
        json!("d-env-parent"),
        "{out:?}"
    );
    assert_eq!(critic_of(&report, 0)["outcome"], json!("PASS"), "{out:?}");
}

#[test]
fn a_risky_critic_reviews_only_risky_work() {
    // Not risky: one file, no risk flag.
    let dir = delegation(
        &reviewer(&[HARD]),
        "",
        &format!("{CHECKED}max_verify_retries: 0\n"),
    );
    let (out, report) = run(&dir);
    out.expect_code(0);
    assert_eq!(critic_of(&report, 0), &Value::Null, "{out:?}");
    // `risk: true` on the request.
    let risky = delegation(
        &reviewer(&[HARD]),
        "",
        &format!("{CHECKED}max_verify_retries: 0\nrisk: true\n"),
    );
    let (out, report) = run(&risky);
    out.expect_code(1);
    assert_eq!(report["kind"], json!("critic_rejected"), "{out:?}");
}

/// `when: never` switches the critic off: its reviewer is not even built, so one that could not
/// be (a script whose top level fails) costs nothing and breaks nothing.
#[test]
fn a_critic_that_never_reviews_is_never_built() {
    let broken = "fail(\"this reviewer is never loaded\")\n";
    let dir = delegation(broken, "  when: never\n", CHECKED);
    let (out, report) = run(&dir);
    out.expect_code(0);
    assert_eq!(report["outcome"], json!("passed"), "{out:?}");
    assert_eq!(critic_of(&report, 0), &Value::Null, "{out:?}");
    // The same reviewer, switched on, is a configuration error naming it.
    let on = delegation(broken, "  when: always\n", CHECKED);
    let (out, report) = run(&on);
    out.expect_code(2);
    assert_eq!(report["error"]["kind"], json!("config"), "{out:?}");
}

#[test]
fn bad_critic_configuration_is_a_usage_error_naming_the_key() {
    for (critic, expect) in [
        ("  when: sometimes\n", "`critic.when` is \"sometimes\""),
        (
            "  on_exhausted: shrug\n",
            "`critic.on_exhausted` is \"shrug\"",
        ),
        ("  max_turns: 0\n", "`critic.max_turns` must be at least 1"),
        ("  mood: grumpy\n", "mood"),
    ] {
        let dir = delegation(&reviewer(&[PASS]), critic, CHECKED);
        let out = harness(["run", "--json", "--no-journal"])
            .args([dir.join("delegation.yaml")])
            .run();
        out.expect_code(2);
        let report = out.json();
        assert_eq!(
            report["error"]["kind"],
            json!("config"),
            "{critic}: {out:?}"
        );
        let message = report["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        assert!(message.contains(expect), "{critic}: {message}");
    }
}

/// An OpenAI-compatible reviewer on the fake server: it reads a file with its read-only tool,
/// then answers; the request it got is the fixed review prompt, in a fresh conversation.
#[test]
fn an_openai_reviewer_reads_the_workspace_and_answers_one_object() {
    let server = ModelServer::start(|_, body| {
        let last = messages(body).last().cloned().unwrap_or_default();
        if last["role"] == "tool" {
            let verdict = if last["content"]
                .as_str()
                .unwrap_or_default()
                .contains("attempt 0")
            {
                r#"{"outcome": "PASS", "reasoning": "done.txt is there", "findings": [{"severity": "perf", "title": "could be faster"}]}"#
            } else {
                r#"{"outcome": "HARD_FAIL", "reasoning": "unexpected"}"#
            };
            answer(body, verdict)
        } else {
            tool_call(body, "r1", "read_file", &json!({"path": "done.txt"}))
        }
    });
    let dir = delegation(&reviewer(&[PASS]), "", "");
    let text = dir.read("delegation.yaml").expect("file").replace(
        "  delegate: {kind: scripted, script: reviewer.star}\n",
        &format!(
            "  delegate: {{kind: openai, model: review-model, base_url: \"{}\", api_key_env: none, max_retries: 0}}\n  when: always\n  criteria: \"- done.txt exists\"\n",
            server.base_url()
        ),
    );
    dir.write(
        "delegation.yaml",
        format!("{text}{CHECKED}max_verify_retries: 0\n"),
    );
    let (out, report) = run(&dir);
    out.expect_code(0);
    assert_eq!(report["outcome"], json!("passed"), "{out:?}");
    let critic = critic_of(&report, 0);
    assert_eq!(critic["reviewer"], json!("review-model"));
    assert_eq!(critic["outcome"], json!("PASS"));
    assert_eq!(report["debt"][0]["severity"], json!("perf"));
    let bodies = server.bodies();
    assert_eq!(bodies.len(), 2);
    let first = messages(&bodies[0]);
    assert_eq!(
        first.len(),
        1,
        "a fresh conversation: only the review prompt"
    );
    let prompt = first[0]["content"].as_str().unwrap_or_default();
    assert!(
        prompt.starts_with("You are an independent reviewer."),
        "{prompt}"
    );
    assert!(prompt.contains("Write done.txt."), "{prompt}");
    assert!(prompt.contains("- done.txt exists"), "{prompt}");
    assert!(prompt.contains("- done [pass]"), "{prompt}");
    let tools: Vec<&str> = bodies[0]["tools"]
        .as_array()
        .map(|t| {
            t.iter()
                .filter_map(|t| t["function"]["name"].as_str())
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(tools, ["read_file", "list_files"], "read-only tools only");
}

#[test]
fn the_example_runs_a_review_a_retry_and_debt() {
    let dir = TempDir::new();
    copy_tree(&repo_root().join("examples/critic"), &dir.path());
    let out = harness(["run", "--json", "--no-journal"])
        .args([dir.join("delegation.yaml")])
        .run();
    out.expect_code(0);
    let report = out.json();
    assert_eq!(report["outcome"], json!("passed"), "{out:?}");
    assert_eq!(report["attempts"], json!(2));
    assert_eq!(
        report["reasons"][0],
        json!(["critic missing_ac: no tests for slug.sh: the task asks for test_slug.sh"])
    );
    assert_eq!(report["debt"][0]["severity"], json!("style"));
    let out = harness(["run", "--json", "--no-journal"])
        .args([dir.join("exhausted.yaml")])
        .run();
    out.expect_code(0);
    assert_eq!(out.json()["outcome"], json!("passed_with_debt"), "{out:?}");
}

/// `verification_defaults.critic` in the project policy reviews delegations that name no critic;
/// its script is read relative to `.harness/`, and a bad key there names the policy file.
#[test]
fn the_project_policy_supplies_a_critic() {
    let dir = delegation(&reviewer(&[PASS]), "  when: always\n", CHECKED);
    // The same delegation without its own critic.
    let text = dir.read("delegation.yaml").expect("file");
    let text = text.replace(
        "critic:\n  delegate: {kind: scripted, script: reviewer.star}\n  when: always\n",
        "",
    );
    assert!(!text.contains("critic"), "{text}");
    dir.write("delegation.yaml", text);
    dir.write("ws/.harness/strict-reviewer.star", reviewer(&[HARD]));
    dir.write(
        "ws/.harness/policy.yaml",
        "verification_defaults:\n  critic: {delegate: {kind: scripted, script: strict-reviewer.star}, when: always}\n",
    );
    let (out, report) = run(&dir);
    out.expect_code(1);
    assert_eq!(report["kind"], json!("critic_rejected"), "{out:?}");
    dir.write(
        "ws/.harness/policy.yaml",
        "verification_defaults:\n  critic: {when: often}\n",
    );
    let out = harness(["run", "--json", "--no-journal"])
        .args([dir.join("delegation.yaml")])
        .run();
    out.expect_code(2);
    let report = out.json();
    assert_eq!(report["error"]["kind"], json!("config"), "{out:?}");
    let message = report["error"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(
        message.contains("policy.yaml: `verification_defaults`: `critic.when` is \"often\""),
        "{message}"
    );
}

/// Secrets in what the reviewer is shown (the answer, the diff, the evidence) are scrubbed before
/// they reach it, and a reviewer that quotes one does not put it in the run's debt.
#[test]
fn secrets_never_reach_the_reviewer_or_the_debt() {
    const SECRET: &str = "sk-abcdefghijklmnopqrstuvwx";
    let server = ModelServer::start(|_, body| {
        answer(
            body,
            r#"{"outcome": "PASS", "findings": [{"severity": "style", "title": "the key sk-abcdefghijklmnopqrstuvwx is in the answer"}]}"#,
        )
    });
    let dir = delegation(&reviewer(&[PASS]), "", CHECKED);
    dir.write(
        "agent.star",
        format!(
            "def respond(request):\n    if request[\"messages\"][-1][\"role\"] == \"tool\":\n        return \"Done with key {SECRET}\"\n    return {{\"tool_calls\": [{{\"name\": \"write_file\", \"arguments\": {{\"path\": \"done.txt\", \"content\": \"x\"}}}}]}}\n"
        ),
    );
    let text = dir.read("delegation.yaml").expect("file").replace(
        "  delegate: {kind: scripted, script: reviewer.star}\n",
        &format!(
            "  delegate: {{kind: openai, model: review-model, base_url: \"{}\", api_key_env: none, max_retries: 0}}\n  when: always\n",
            server.base_url()
        ),
    );
    dir.write("delegation.yaml", format!("{text}max_verify_retries: 0\n"));
    let (out, report) = run(&dir);
    out.expect_code(0);
    let sent = server.bodies()[0].to_string();
    assert!(
        !sent.contains(SECRET),
        "the reviewer saw the secret: {sent}"
    );
    assert!(sent.contains("[REDACTED]"), "{sent}");
    assert!(
        !report["debt"].to_string().contains(SECRET),
        "{}",
        report["debt"]
    );
    assert!(!out.stdout.contains(SECRET));
}
