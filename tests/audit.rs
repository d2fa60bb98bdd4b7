//! Exported runs and their integrity audit (DESIGN §4.13): honest runs audit clean, and every
//! failure code implemented so far is produced by a record forged to carry that defect.

use serde_json::{Value, json};

use crate::util::{Output, TempDir, copy_tree, harness, repo_root};

/// Runs `example/file` with a journal in `dir`; returns the run id.
fn record(dir: &TempDir, example: &str, file: &str) -> String {
    copy_tree(
        &repo_root().join("examples").join(example),
        &dir.join(example),
    );
    let out = harness(["run", "--json", "--journal"])
        .args([dir.join("runs.db"), dir.join(example).join(file)])
        .run();
    let report = out.json();
    report["id"]
        .as_str()
        .unwrap_or_else(|| panic!("{out:?}"))
        .to_owned()
}

fn export(dir: &TempDir, id: &str) -> Value {
    let out = harness(["runs", "export", id, "--journal"])
        .args([dir.join("runs.db")])
        .run();
    out.expect_code(0);
    out.json()
}

fn audit_file(dir: &TempDir, document: &Value) -> (Output, Value) {
    let path = dir.write("forged.json", document.to_string());
    let out = harness(["audit", "--json"]).args([path]).run();
    let report = out.json();
    (out, report)
}

/// `document` sealed again after an edit: what a forger who knows the format does, so that only
/// the check for the defect itself (or a seal kept elsewhere) can catch it.
fn resealed(mut document: Value) -> Value {
    document["seal"] = json!(harness_records::seal(&document));
    document
}

fn codes(report: &Value) -> Vec<String> {
    report["failures"]
        .as_array()
        .expect("failures")
        .iter()
        .map(|f| f["code"].as_str().unwrap_or_default().to_owned())
        .collect()
}

#[test]
fn honest_runs_audit_clean_by_id_and_from_their_export() {
    let dir = TempDir::new();
    let ids = [
        record(&dir, "checks", "delegation.yaml"),
        record(&dir, "critic", "delegation.yaml"),
        record(&dir, "critic", "exhausted.yaml"),
        record(&dir, "scope", "delegation.yaml"),
        record(&dir, "quickstart", "delegation.yaml"),
    ];
    for id in &ids {
        let out = harness(["audit", id, "--json", "--journal"])
            .args([dir.join("runs.db")])
            .run();
        let report = out.json();
        assert_eq!(report["valid"], json!(true), "{id}: {report:#}");
        out.expect_code(0);
        let document = export(&dir, id);
        assert_eq!(document["schema_version"], json!("harness.run/v1"));
        let (out, report) = audit_file(&dir, &document);
        out.expect_code(0);
        assert_eq!(report["failures"], json!([]), "{id}");
    }
    // The checks example: its tool calls, events and the evidence file it vouched for.
    let document = export(&dir, &ids[0]);
    let (_, report) = audit_file(&dir, &document);
    let metrics = &report["summary_metrics"];
    assert_eq!(metrics["tool_calls"], json!(2));
    assert_eq!(metrics["tool_results"], json!(2));
    assert_eq!(metrics["evidence_files"], json!(1));
    assert_eq!(document["evidence"][0]["path"], json!("calc.sh"));
    assert_eq!(document["events"][0]["prev_hash"], json!("0".repeat(64)));
    // The published schema names exactly the keys an export has, events included.
    let schema: Value = serde_json::from_str(
        &std::fs::read_to_string(repo_root().join("schemas/harness.run.v1.json")).expect("schema"),
    )
    .expect("the schema is JSON");
    let mut top: Vec<&str> = document
        .as_object()
        .expect("an object")
        .keys()
        .map(String::as_str)
        .collect();
    top.sort_unstable();
    fn named(at: &Value) -> Vec<&str> {
        let mut keys: Vec<&str> = at
            .as_object()
            .expect("properties")
            .keys()
            .map(String::as_str)
            .filter(|k| *k != "signature")
            .collect();
        keys.sort_unstable();
        keys
    }
    assert_eq!(top, named(&schema["properties"]));
    for key in schema["required"].as_array().expect("required") {
        assert!(top.contains(&key.as_str().expect("a key")), "{key}");
    }
    let event_keys: Vec<&str> = schema["$defs"]["Event"]["required"]
        .as_array()
        .expect("event keys")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    for event in document["events"].as_array().expect("events") {
        assert_eq!(event.as_object().map(|o| o.len()), Some(event_keys.len()));
        for key in &event_keys {
            assert!(event.get(*key).is_some(), "{key} missing in {event}");
        }
    }
    let text = harness(["audit", &ids[0], "--journal"])
        .args([dir.join("runs.db")])
        .run();
    assert!(
        text.stdout.starts_with("valid: harness.run/v1, "),
        "{text:?}"
    );
}

/// An export meets the published schema (`schemas/harness.run.v1.json`, generated from the type
/// the audit reads it into) by the reckoning of Python's `jsonschema`; a member missing or of the
/// wrong type fails both that validator and the audit's `fields`, which names where.
#[test]
fn exports_meet_the_published_schema_and_what_it_refuses_the_audit_refuses() {
    let dir = TempDir::new();
    let id = record(&dir, "checks", "delegation.yaml");
    let honest = export(&dir, &id);
    let python = crate::schemas::python();
    let check = |name: &str, document: &Value| {
        let path = dir.write(name, document.to_string());
        python
            .as_ref()
            .map(|python| crate::schemas::validate(python, "harness.run.v1.json", &[path]))
    };
    if let Some((out, ok)) = check("honest.json", &honest) {
        assert!(ok, "{out}");
    }
    type Forgery = fn(&mut Value);
    // The last: an event member outside what its hash covers (`note`), a forger's words the
    // chain would carry unnoticed; no member but the chained ones is read.
    let forgeries: [(&str, Forgery); 5] = [
        ("run", |d| {
            d["run"].as_object_mut().expect("run").remove("outcome");
        }),
        ("events[3].type", |d| d["events"][3]["type"] = json!(7)),
        ("evidence[0].sha256", |d| {
            d["evidence"][0]["sha256"] = json!(null)
        }),
        ("attempts[0].attempt", |d| {
            d["attempts"][0]["attempt"] = json!("first")
        }),
        ("events[2].note", |d| {
            d["events"][2]["note"] = json!("approved by the operator")
        }),
    ];
    for (at, forge) in forgeries {
        let mut document = honest.clone();
        forge(&mut document);
        let document = resealed(document);
        if let Some((out, ok)) = check("forged-schema.json", &document) {
            assert!(!ok, "{at}: the schema accepted it: {out}");
        }
        let (out, report) = audit_file(&dir, &document);
        out.expect_code(1);
        assert_eq!(codes(&report), ["missing_field"], "{at}: {report:#}");
        assert_eq!(report["failures"][0]["at"], json!(at), "{report:#}");
        let failed: Vec<&str> = report["checks"]
            .as_array()
            .expect("checks")
            .iter()
            .filter(|c| c["passed"] == json!(false))
            .filter_map(|c| c["name"].as_str())
            .collect();
        assert_eq!(failed[0], "fields", "{report:#}");
        assert!(failed.contains(&"event_chain"), "{failed:?}");
    }
}

#[test]
fn each_forged_defect_is_caught_with_its_code() {
    let dir = TempDir::new();
    let id = record(&dir, "checks", "delegation.yaml");
    let honest = export(&dir, &id);
    let forged = |change: &dyn Fn(&mut Value)| {
        let mut document = honest.clone();
        change(&mut document);
        let (out, report) = audit_file(&dir, &resealed(document));
        out.expect_code(1);
        assert_eq!(report["valid"], json!(false));
        codes(&report)
    };
    let has = |codes: Vec<String>, code: &str| {
        assert!(codes.iter().any(|c| c == code), "{code} not in {codes:?}");
    };
    has(
        forged(&|d| d["schema_version"] = json!("harness.run/v9")),
        "schema_version",
    );
    has(
        forged(&|d| {
            d["run"].as_object_mut().expect("run").remove("outcome");
        }),
        "missing_field",
    );
    has(
        forged(&|d| d["events"][3]["type"] = json!(7)),
        "missing_field",
    );
    // An event's content edited: its hash no longer covers it.
    has(
        forged(&|d| d["events"][5]["data"]["passed"] = json!(true)),
        "chain_broken",
    );
    // Two events swapped (and their hashes with them): out of order, and the chain breaks.
    let swapped = forged(&|d| {
        let events = d["events"].as_array_mut().expect("events");
        events.swap(2, 3);
    });
    has(swapped.clone(), "event_order");
    has(swapped, "chain_broken");
    // A tool result dropped, and one answering no call.
    has(
        forged(&|d| {
            d["attempts"][0]["result"]["tool_results"] = json!([]);
        }),
        "tool_linkage",
    );
    has(
        forged(&|d| {
            let results = d["attempts"][1]["result"]["tool_results"]
                .as_array_mut()
                .expect("results");
            let mut orphan = results[0].clone();
            orphan["call_id"] = json!("call_99");
            results.push(orphan);
        }),
        "tool_linkage",
    );
    // The evidence file changed, or is gone.
    let workspace = dir.join("checks/workspace");
    std::fs::write(workspace.join("calc.sh"), "echo changed\n").expect("write");
    let (out, report) = audit_file(&dir, &honest);
    out.expect_code(1);
    assert_eq!(codes(&report), ["evidence_hash_mismatch"]);
    std::fs::remove_file(workspace.join("calc.sh")).expect("rm");
    let (out, report) = audit_file(&dir, &honest);
    out.expect_code(1);
    assert_eq!(codes(&report), ["evidence_missing"]);
    // A path that leads out of the workspace is never read.
    let (out, report) = audit_file(&dir, &{
        let mut d = honest.clone();
        d["evidence"][0]["path"] = json!("../../etc/passwd");
        resealed(d)
    });
    out.expect_code(1);
    assert_eq!(codes(&report), ["evidence_missing"]);
}

#[test]
fn an_unreadable_record_exits_2() {
    let dir = TempDir::new();
    let truncated = dir.write("truncated.json", "{\"schema_version\": \"harness.ru");
    let out = harness(["audit", "--json"]).args([truncated]).run();
    out.expect_code(2);
    let message = out.json()["error"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(message.contains("unreadable"), "{message}");
    let out = harness(["audit", "d-0000000000000000", "--journal"])
        .args([dir.join("runs.db")])
        .run();
    out.expect_code(2);
}

/// `examples/citations`: a stale citation is caught live and retried; the recorded run audits
/// clean, and forging its answer or its plan evidence produces each citation and plan code.
#[test]
fn citations_and_required_steps_are_checked_live_and_in_the_audit() {
    let dir = TempDir::new();
    let id = record(&dir, "citations", "delegation.yaml");
    let show = harness(["runs", "show", "--json", "--journal"])
        .args([dir.join("runs.db").display().to_string(), id.clone()])
        .run();
    let record_json = show.json();
    assert_eq!(record_json["outcome"], json!("passed"));
    let first = &record_json["attempts"][0]["reasons"];
    assert!(
        first[0]
            .as_str()
            .unwrap_or_default()
            .starts_with("citation citation_hash_mismatch: answer line 2: service.md:L3-L3"),
        "{first}"
    );
    let honest = export(&dir, &id);
    assert_eq!(honest["run"]["citations"], json!("required"));
    assert_eq!(
        honest["plan"],
        json!({"required_steps": [{"check": "notes"}]})
    );
    let (out, report) = audit_file(&dir, &honest);
    out.expect_code(0);
    let metrics = &report["summary_metrics"];
    assert_eq!(metrics["citations"], json!(2));
    assert_eq!(metrics["claims"], json!(3));
    assert_eq!(metrics["insufficient"], json!(1));

    let answer = honest["attempts"][1]["result"]["response"]
        .as_str()
        .expect("an answer")
        .to_owned();
    let with_answer = |text: String| {
        let mut document = honest.clone();
        document["attempts"][1]["result"]["response"] = json!(text);
        let (out, report) = audit_file(&dir, &resealed(document));
        out.expect_code(1);
        codes(&report)
    };
    assert_eq!(
        with_answer(answer.replace("#bd710b63", "#00000000")),
        ["citation_hash_mismatch"]
    );
    assert_eq!(
        with_answer(answer.replace("service.md:L4-L4", "service.md:L4-L99")),
        ["citation_out_of_bounds"]
    );
    assert_eq!(
        with_answer(answer.replace("[[cite:service.md:L3", "[[cite:../service.md:L3")),
        ["citation_malformed"]
    );
    assert_eq!(
        with_answer(format!("{answer}\nAnd it never goes down.")),
        ["citation_missing"]
    );
    let mut unplanned = honest.clone();
    unplanned["attempts"][1]["verdict"]["evidence"] = json!([]);
    let (out, report) = audit_file(&dir, &resealed(unplanned));
    out.expect_code(1);
    assert_eq!(codes(&report), ["required_step_absent"]);
}

fn delegation_with(dir: &TempDir, answer: &str, rest: &str) {
    dir.write(
        "agent.star",
        format!("def respond(request):\n    return {answer:?}\n"),
    );
    dir.write("ws/notes.txt", "alpha\nbeta\n");
    dir.write(
        "delegation.yaml",
        format!(
            "task: Answer.\ndelegate: {{kind: scripted, script: agent.star}}\nworkdir: ws\nmax_verify_retries: 0\n{rest}"
        ),
    );
}

#[test]
fn a_required_step_not_taken_fails_the_attempt_and_bad_plans_are_usage_errors() {
    let dir = TempDir::new();
    delegation_with(
        &dir,
        "done",
        "plan:\n  required_steps:\n    - {tool: run_command, args: {argv: \"cargo test.*\"}}\n",
    );
    let out = harness(["run", "--json", "--no-journal"])
        .args([dir.join("delegation.yaml")])
        .run();
    out.expect_code(1);
    let report = out.json();
    assert_eq!(
        report["reasons"][0],
        json!([
            "plan required_step: a required step of the plan was not taken in this attempt: tool run_command with argv ~ \"cargo test.*\""
        ])
    );
    for (rest, expect) in [
        (
            "plan:\n  required_steps:\n    - {tool: teleport}\n",
            "unknown tool \"teleport\"",
        ),
        (
            "plan:\n  required_steps:\n    - {check: tests, tool: run_command}\n",
            "give `tool`",
        ),
        (
            "plan:\n  required_steps:\n    - {tool: run_command, args: {argv: \"(\"}}\n",
            "does not compile",
        ),
        ("citations: always\n", "`citations` is \"always\""),
    ] {
        delegation_with(&dir, "done", rest);
        let out = harness(["run", "--json", "--no-journal"])
            .args([dir.join("delegation.yaml")])
            .run();
        out.expect_code(2);
        let message = out.json()["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        assert!(message.contains(expect), "{rest}: {message}");
    }
}

#[test]
fn verifiers_make_citations_with_fs_cite() {
    let dir = TempDir::new();
    dir.write("ws/notes.txt", "alpha\nbeta\n");
    dir.write(
        "verify.star",
        "def run(result):\n    marker = fs.cite(\"notes.txt\", 2, 2)\n    return {\"verified\": marker in result[\"response\"], \"reason\": marker}\n",
    );
    // sha256("beta\n") = f2c82dec…; the marker carries its first 16 hex digits.
    dir.write(
        "result.json",
        json!({"id": "r", "attempt": 0, "response": "beta [[cite:notes.txt:L2-L2#f2c82decdd7181cf]]", "tool_calls": [], "tool_results": []}).to_string(),
    );
    let out = harness([
        "verify",
        "verify.star",
        "--result",
        "result.json",
        "--json",
        "--workdir",
    ])
    .args([dir.join("ws")])
    .current_dir(dir.path())
    .run();
    let report = out.json();
    assert_eq!(report["verified"], json!(true), "{report}");
}

/// Every run the journal tests record — passed, skipped, failed, broken verifiers and hooks,
/// blocked, delegate errors, a cancelled one — audits clean right after it ran: no honest record
/// carries a failure code.
#[test]
fn every_kind_of_recorded_run_audits_clean() {
    let home = TempDir::new();
    let known = crate::journal::record_known_delegations(&home);
    assert!(known.ids.len() >= 8, "{:?}", known.ids);
    for (name, id) in &known.ids {
        let out = harness(["audit", id.as_str(), "--json", "--journal"])
            .args([&known.journal])
            .run();
        let report = out.json();
        assert_eq!(report["failures"], json!([]), "{name} ({id}): {report:#}");
        out.expect_code(0);
    }
}

/// The sealed record (DESIGN §4.13): an export edited and sealed again passes on its own — the
/// chain proves nothing against a forger who recomputes it — but not against the seal the
/// journal stored, a seal kept elsewhere or a signature; one cut short or renumbered fails; an
/// evidence file that became a link is never read; and a journal edited behind harness's back
/// no longer matches its own seal.
#[test]
fn a_sealed_record_cannot_be_rewritten_cut_short_or_read_through_a_link() {
    let dir = TempDir::new();
    delegation_with(
        &dir,
        "Done: I created hello.txt.",
        "criteria: [\"file_exists:hello.txt\"]\nclaims: off\n",
    );
    let out = harness(["run", "--json", "--journal"])
        .args([dir.join("runs.db"), dir.join("delegation.yaml")])
        .run();
    out.expect_code(1);
    let id = out.json()["id"].as_str().expect("an id").to_owned();
    let honest = export(&dir, &id);
    assert_eq!(honest["run"]["outcome"], json!("failed"));
    let seal = honest["seal"].as_str().expect("a seal").to_owned();
    assert_eq!(seal.len(), 64);
    let show = harness(["runs", "show", "--json", &id, "--journal"])
        .args([dir.join("runs.db")])
        .run();
    assert_eq!(show.json()["seal"], json!(seal), "the journal stored it");

    // Edited, not sealed again: the seal no longer covers it.
    let mut passed = honest.clone();
    passed["run"]["outcome"] = json!("passed");
    let (out, report) = audit_file(&dir, &passed);
    out.expect_code(1);
    assert_eq!(codes(&report), ["seal_mismatch"]);
    // Sealed again by the forger: valid on its own, but not against the journal's seal or one
    // kept elsewhere.
    let forged = resealed(passed);
    let (out, _) = audit_file(&dir, &forged);
    out.expect_code(0);
    let path = dir.write("forged.json", forged.to_string());
    let out = harness(["audit", "--json", "--journal"])
        .args([dir.join("runs.db"), path.clone()])
        .run();
    out.expect_code(1);
    let report = out.json();
    assert_eq!(codes(&report), ["seal_mismatch"]);
    assert!(
        report["failures"][0]["message"]
            .as_str()
            .is_some_and(|m| m.contains("the journal") && m.contains(&seal)),
        "{report}"
    );
    let out = harness(["audit", "--json", "--expect-seal", &seal])
        .args([&path])
        .run();
    out.expect_code(1);
    assert_eq!(codes(&out.json()), ["seal_mismatch"]);
    let honest_path = dir.write("honest.json", honest.to_string());
    let out = harness(["audit", "--expect-seal", &seal])
        .args([&honest_path])
        .run();
    out.expect_code(0);

    // Cut short before its last event, or an event renumbered: caught even when sealed again.
    let mut cut = honest.clone();
    cut["events"].as_array_mut().expect("events").pop();
    let (out, report) = audit_file(&dir, &resealed(cut));
    out.expect_code(1);
    assert_eq!(codes(&report), ["truncated"]);
    let mut renumbered = honest.clone();
    renumbered["events"][2]["seq"] = json!(1);
    let (_, report) = audit_file(&dir, &resealed(renumbered));
    assert!(
        codes(&report).contains(&"event_order".to_owned()),
        "{report}"
    );

    // Signed with the operator's key (kept outside the workspace): verified; edited, resealed
    // and so unsigned by the key, or checked against another key: signature_invalid.
    let key = dir.join("operator.pem");
    let other = dir.join("other.pem");
    for path in [&key, &other] {
        let made = std::process::Command::new("openssl")
            .args(["genpkey", "-algorithm", "ed25519", "-out"])
            .arg(path)
            .output()
            .expect("openssl runs");
        assert!(made.status.success(), "{made:?}");
        let public = std::process::Command::new("openssl")
            .args(["pkey", "-pubout", "-in"])
            .arg(path)
            .arg("-out")
            .arg(path.with_extension("pub.pem"))
            .output()
            .expect("openssl runs");
        assert!(public.status.success(), "{public:?}");
    }
    let signed_path = dir.join("signed.json");
    harness(["runs", "export", &id, "--sign"])
        .args([&key])
        .args(["-o".as_ref(), signed_path.as_os_str(), "--journal".as_ref()])
        .args([dir.join("runs.db")])
        .run()
        .expect_code(0);
    let out = harness(["audit", "--pubkey"])
        .args([key.with_extension("pub.pem"), signed_path.clone()])
        .run();
    out.expect_code(0);
    assert!(out.stdout.contains("signature verified"), "{out:?}");
    let out = harness(["audit", "--json", "--pubkey"])
        .args([other.with_extension("pub.pem"), signed_path.clone()])
        .run();
    out.expect_code(1);
    assert_eq!(codes(&out.json()), ["signature_invalid"]);
    let signed: Value =
        serde_json::from_str(&std::fs::read_to_string(&signed_path).expect("read")).expect("JSON");
    let mut edited = signed.clone();
    edited["run"]["outcome"] = json!("passed");
    let edited = dir.write("edited.json", resealed(edited).to_string());
    let out = harness(["audit", "--json", "--pubkey"])
        .args([key.with_extension("pub.pem"), edited])
        .run();
    out.expect_code(1);
    assert_eq!(codes(&out.json()), ["signature_invalid"]);
    let out = harness(["audit", "--json", "--pubkey"])
        .args([key.with_extension("pub.pem"), honest_path])
        .run();
    assert_eq!(codes(&out.json()), ["signature_invalid"], "unsigned");
    // A key the delegate could have written is refused.
    std::fs::copy(&key, dir.join("ws/key.pem")).expect("copy");
    let out = harness(["runs", "export", &id, "--sign"])
        .args([dir.join("ws/key.pem")])
        .args(["--journal".as_ref(), dir.join("runs.db").as_os_str()])
        .run();
    out.expect_code(2);
    assert!(out.stderr.contains("inside the run's workspace"), "{out:?}");

    // The journal edited behind harness's back (the outcome flipped in SQLite): its record no
    // longer matches the seal it stored.
    let db = rusqlite::Connection::open(dir.join("runs.db")).expect("open");
    db.execute(
        "UPDATE delegations SET outcome = 'passed' WHERE id = ?1",
        [&id],
    )
    .expect("update");
    drop(db);
    let out = harness(["audit", "--json", &id, "--journal"])
        .args([dir.join("runs.db")])
        .run();
    out.expect_code(1);
    assert_eq!(codes(&out.json()), ["seal_mismatch"]);
    // Nor is it exported under a seal of its own.
    let out = harness(["runs", "export", &id, "--journal"])
        .args([dir.join("runs.db")])
        .run();
    out.expect_code(2);
    assert!(out.stdout.is_empty(), "{out:?}");
    assert!(
        out.stderr.contains("changed since it was recorded")
            && out.stderr.contains("nothing was exported"),
        "{out:?}"
    );
}

/// An evidence file replaced by a link (here to an identical copy outside the workspace) is
/// `evidence_link`: the audit never reads through one.
#[test]
fn the_audit_never_reads_evidence_through_a_link() {
    let dir = TempDir::new();
    let id = record(&dir, "checks", "delegation.yaml");
    let honest = export(&dir, &id);
    let workspace = dir.join("checks/workspace");
    std::fs::copy(workspace.join("calc.sh"), dir.join("outside.sh")).expect("copy");
    std::fs::remove_file(workspace.join("calc.sh")).expect("rm");
    std::os::unix::fs::symlink(dir.join("outside.sh"), workspace.join("calc.sh")).expect("link");
    let (out, report) = audit_file(&dir, &honest);
    out.expect_code(1);
    assert_eq!(codes(&report), ["evidence_link"], "{report}");
}

/// Records sealed by an earlier build (`tests/fixtures/journal-192b377.db`: the fan-out and
/// checks examples run by 192b377, journal schema 7, which sealed a record by reading it back)
/// still export under the seal they were stored with, and audit's seal check agrees: what a
/// reader makes of a stored record has not changed.
#[test]
fn records_sealed_by_an_earlier_build_export_under_their_stored_seal() {
    let dir = TempDir::new();
    let journal = dir.join("runs.db");
    std::fs::copy(
        repo_root().join("tests/fixtures/journal-192b377.db"),
        &journal,
    )
    .expect("copy the fixture");
    let listed = harness(["runs", "list", "--json", "--journal"])
        .args([&journal])
        .run();
    listed.expect_code(0);
    let runs = listed.json()["runs"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(runs.len(), 5, "{}", listed.stdout);
    for run in &runs {
        let id = run["id"].as_str().expect("an id");
        let stored = run["seal"].as_str().expect("a stored seal");
        let out = harness(["runs", "export", id, "--journal"])
            .args([&journal])
            .run();
        out.expect_code(0);
        let document: Value = serde_json::from_str(&out.stdout).expect("an export");
        assert_eq!(document["seal"].as_str(), Some(stored), "{id}");
    }
    // The parent's children are linked as the earlier build recorded them.
    let parent = runs
        .iter()
        .find(|r| r["children"].as_array().is_some_and(|c| c.len() == 3))
        .expect("the fan-out parent");
    let id = parent["id"].as_str().expect("an id");
    let out = harness(["audit", "--json", id, "--journal"])
        .args([&journal])
        .run();
    let report = out.json();
    assert!(
        !codes(&report)
            .iter()
            .any(|c| c == "seal_mismatch" || c == "delegation_linkage"),
        "{report}"
    );
}
