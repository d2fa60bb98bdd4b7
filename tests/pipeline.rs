//! harness in the pipeline, each output checked by the real third-party tool that reads it:
//! DSSE/in-toto attestations by securesystemslib, SARIF by python-jsonschema with the official
//! OASIS SARIF 2.1.0 schema (`tests/fixtures/sarif-schema-2.1.0.json`), the GitHub Action's
//! steps run as GitHub runs a composite action, and the pre-commit hooks by the real
//! `pre-commit try-repo`. `tests/pipeline_tools.py` drives the Python tools.
//!
//! The tools come from the Python in `HARNESS_TEST_PYTHON`. Without one a test says so and skips,
//! unless `HARNESS_REQUIRE_SECURESYSTEMSLIB`, `HARNESS_REQUIRE_JSONSCHEMA` or
//! `HARNESS_REQUIRE_PRECOMMIT` is set (`.ci/run` installs them and sets all three).

use std::path::{Path, PathBuf};
use std::process::Command;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Value, json};

use crate::util::{TempDir, copy_tree, harness, harness_bin, pytest_path, python_with, repo_root};

/// `tests/pipeline_tools.py ARGS` with `python`: its exit code and the JSON it printed.
fn tool(python: &str, args: &[&std::ffi::OsStr], dir: &Path) -> (i32, Value) {
    let out = Command::new(python)
        .arg(repo_root().join("tests/pipeline_tools.py"))
        .args(args)
        .current_dir(dir)
        .output()
        .expect("python runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let value = serde_json::from_str(&stdout).unwrap_or_else(|e| {
        panic!(
            "pipeline_tools.py printed no JSON ({e}):\n{stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code().unwrap_or(-1), value)
}

/// An ed25519 key pair made by openssl: `NAME.pem` and `NAME.pub.pem` in `dir`.
fn key_pair(dir: &TempDir, name: &str) -> (PathBuf, PathBuf) {
    let private = dir.join(format!("{name}.pem"));
    let public = dir.join(format!("{name}.pub.pem"));
    for args in [
        vec!["genpkey", "-algorithm", "ed25519", "-out"],
        vec!["pkey", "-pubout", "-in"],
    ] {
        let mut command = Command::new("openssl");
        command.args(args).arg(&private);
        if command.get_args().any(|a| a == "-pubout") {
            command.arg("-out").arg(&public);
        }
        let made = command.output().expect("openssl runs");
        assert!(made.status.success(), "{made:?}");
    }
    (private, public)
}

/// Runs the quickstart copied into `dir` (`file` its delegation, after `edit`) with the journal
/// `dir/runs.db`; returns the run id.
fn quickstart(dir: &TempDir, file: &str, edit: impl Fn(String) -> String) -> String {
    if !dir.join("quickstart").exists() {
        copy_tree(
            &repo_root().join("examples/quickstart"),
            &dir.join("quickstart"),
        );
    }
    let original = dir
        .read("quickstart/delegation.yaml")
        .expect("the quickstart");
    dir.write(format!("quickstart/{file}"), edit(original));
    let out = harness(["run", "--json", "--journal"])
        .args([dir.join("runs.db"), dir.join("quickstart").join(file)])
        .run();
    out.json()["id"]
        .as_str()
        .unwrap_or_else(|| panic!("{out:?}"))
        .to_owned()
}

/// The quickstart's delegation allowed one attempt: its lie is the final answer.
fn one_attempt(yaml: String) -> String {
    yaml.lines()
        .map(|line| {
            if line.starts_with("max_verify_retries:") {
                "max_verify_retries: 0"
            } else {
                line
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Runs git `args` in `dir` (as a committer of its own); returns what it printed, trimmed.
fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(["-c", "user.email=ci@example.invalid", "-c", "user.name=ci"])
        .args(args)
        .current_dir(dir)
        .output()
        .expect("git runs");
    assert!(out.status.success(), "{out:?}");
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// Writes `value` to `dir/name` as JSON; returns its path.
fn write_json(dir: &TempDir, name: &str, value: &Value) -> PathBuf {
    dir.write(name, value.to_string())
}

#[test]
fn a_dsse_attestation_verifies_with_securesystemslib_and_the_audit_and_any_change_fails_both() {
    let Some(python) = python_with(
        "securesystemslib, cryptography",
        "HARNESS_REQUIRE_SECURESYSTEMSLIB",
    ) else {
        return;
    };
    let dir = TempDir::new();
    copy_tree(&repo_root().join("examples/checks"), &dir.join("checks"));
    let out = harness(["run", "--json", "--journal"])
        .args([dir.join("runs.db"), dir.join("checks/delegation.yaml")])
        .run();
    let id = out.json()["id"].as_str().expect("an id").to_owned();
    let (key, public) = key_pair(&dir, "operator");
    let (_, other) = key_pair(&dir, "other");
    let journal = dir.join("runs.db");
    let document = dir.join("run.json");
    harness(["runs", "export", &id, "-o"])
        .args([&document])
        .args(["--journal".as_ref(), journal.as_os_str()])
        .run()
        .expect_code(0);
    let envelope_path = dir.join("run.intoto.jsonl");
    let out = harness(["runs", "export", &id, "--format", "dsse", "--sign"])
        .args([&key])
        .args(["-o".as_ref(), envelope_path.as_os_str()])
        .args(["--journal".as_ref(), journal.as_os_str()])
        .run();
    out.expect_code(0);
    let text = std::fs::read_to_string(&envelope_path).expect("the envelope");
    assert_eq!(text.lines().count(), 1, "one envelope a line: {text}");
    let envelope: Value = serde_json::from_str(&text).expect("JSON");

    // The keyid is the one `harness keys id` prints, for the public and the private key alike.
    let keyid = harness(["keys", "id"]).args([&public]).run();
    keyid.expect_code(0);
    assert_eq!(
        envelope["signatures"][0]["keyid"].as_str(),
        Some(keyid.stdout.trim())
    );
    assert_eq!(
        harness(["keys", "id"]).args([&key]).run().stdout,
        keyid.stdout
    );

    // securesystemslib verifies it, and finds the document its subject.
    let (code, verified) = tool(
        &python,
        &[
            "dsse".as_ref(),
            envelope_path.as_os_str(),
            public.as_os_str(),
            document.as_os_str(),
        ],
        &dir.path(),
    );
    assert_eq!(code, 0, "{verified}");
    assert_eq!(verified["keyid"].as_str(), Some(keyid.stdout.trim()));
    let statement = &verified["statement"];
    assert_eq!(statement["subject"][0]["name"], format!("harness-run/{id}"));
    let predicate = &statement["predicate"];
    assert_eq!(predicate["result"], "PASSED", "{statement}");
    let passed = predicate["passedTests"].to_string();
    assert!(passed.contains("check tests"), "{statement}");
    assert!(passed.contains("criterion"), "{statement}");
    assert_eq!(predicate["failedTests"], json!([]), "{statement}");
    // So does `harness audit`, and it audits the document too.
    let out = harness(["audit", "--pubkey"])
        .args([&public, &envelope_path])
        .args(["--document".as_ref(), document.as_os_str()])
        .run();
    out.expect_code(0);
    assert!(
        out.stdout.contains("signature verified") && out.stdout.contains("subject"),
        "{out:?}"
    );

    // A payload that says the run failed, under the old signature: neither verifier accepts it.
    let mut changed = statement.clone();
    changed["predicate"]["result"] = json!("FAILED");
    let mut forged = envelope.clone();
    forged["payload"] = json!(STANDARD.encode(changed.to_string()));
    // A signature with one byte changed.
    let mut flipped = envelope.clone();
    let mut signature = STANDARD
        .decode(envelope["signatures"][0]["sig"].as_str().expect("sig"))
        .expect("base64");
    signature[0] ^= 1;
    flipped["signatures"][0]["sig"] = json!(STANDARD.encode(&signature));
    for (name, bad) in [("forged", &forged), ("flipped", &flipped)] {
        let path = write_json(&dir, &format!("{name}.json"), bad);
        let (code, said) = tool(
            &python,
            &["dsse".as_ref(), path.as_os_str(), public.as_os_str()],
            &dir.path(),
        );
        assert_eq!(
            code, 1,
            "securesystemslib accepted the {name} envelope: {said}"
        );
        let out = harness(["audit", "--json", "--pubkey"])
            .args([&public, &path])
            .run();
        out.expect_code(1);
        assert_eq!(
            out.json()["failures"][0]["code"],
            "signature_invalid",
            "{name}: {out:?}"
        );
    }
    // Another key: refused by both.
    let (code, _) = tool(
        &python,
        &[
            "dsse".as_ref(),
            envelope_path.as_os_str(),
            other.as_os_str(),
        ],
        &dir.path(),
    );
    assert_eq!(code, 1);
    harness(["audit", "--pubkey"])
        .args([&other, &envelope_path])
        .run()
        .expect_code(1);
    // The run document changed after it was attested: not the subject (nor its seal).
    let mut edited: Value =
        serde_json::from_str(&std::fs::read_to_string(&document).expect("read")).expect("JSON");
    edited["run"]["outcome"] = json!("passed_with_debt");
    let edited = dir.write(
        "edited.json",
        serde_json::to_string_pretty(&edited).expect("JSON") + "\n",
    );
    let out = harness(["audit", "--json", "--pubkey"])
        .args([&public, &envelope_path])
        .args(["--document".as_ref(), edited.as_os_str()])
        .run();
    out.expect_code(1);
    let codes = out.json()["failures"].to_string();
    assert!(
        codes.contains("subject_mismatch") && codes.contains("seal_mismatch"),
        "{codes}"
    );
    let (code, _) = tool(
        &python,
        &[
            "dsse".as_ref(),
            envelope_path.as_os_str(),
            public.as_os_str(),
            edited.as_os_str(),
        ],
        &dir.path(),
    );
    assert_eq!(code, 1);

    // In a git workspace the statement names its commit too.
    let workspace = dir.join("checks/workspace");
    let git = |args: &[&str]| git(&workspace, args);
    git(&["init", "-q"]);
    git(&["add", "-A"]);
    git(&["commit", "-qm", "verified"]);
    let head = git(&["rev-parse", "HEAD"]);
    let out = harness(["runs", "export", &id, "--format", "dsse", "--sign"])
        .args([&key])
        .args(["--journal".as_ref(), journal.as_os_str()])
        .run();
    out.expect_code(0);
    let payload = STANDARD
        .decode(out.json()["payload"].as_str().expect("payload"))
        .expect("base64");
    let statement: Value = serde_json::from_slice(&payload).expect("a statement");
    assert_eq!(
        statement["subject"][1],
        json!({"name": "workspace", "digest": {"gitCommit": head}}),
        "{statement}"
    );

    // Misuse is a usage error that says what to add.
    let out = harness(["audit"]).args([&envelope_path]).run();
    out.expect_code(2).expect_stderr_kind("config");
    assert!(out.stderr.contains("--pubkey"), "{out:?}");
    let out = harness(["runs", "export", &id, "--format", "dsse", "--journal"])
        .args([&journal])
        .run();
    out.expect_code(2).expect_stderr_kind("config");
    assert!(out.stderr.contains("--sign"), "{out:?}");
    let out = harness(["runs", "export", &id, "--sign"])
        .args([&key])
        .args(["--url", "http://127.0.0.1:7070/runs/x", "--journal"])
        .args([&journal])
        .run();
    out.expect_code(2).expect_stderr_kind("config");
    assert!(out.stderr.contains("--format dsse"), "{out:?}");
}

#[test]
fn sarif_of_a_gamed_run_and_of_the_report_validates_against_the_official_schema() {
    let Some(python) = python_with("jsonschema", "HARNESS_REQUIRE_JSONSCHEMA") else {
        return;
    };
    let Some(path) = pytest_path() else {
        return;
    };
    let dir = TempDir::new();
    copy_tree(&repo_root().join("examples/gaming"), &dir.join("gaming"));
    let cheat =
        dir.read("gaming/special-case.yaml").expect("the example") + "max_verify_retries: 0\n";
    dir.write("gaming/cheat.yaml", cheat);
    let out = harness(["run", "--json", "--journal"])
        .args([dir.join("runs.db"), dir.join("gaming/cheat.yaml")])
        .env("PATH", &path)
        .run();
    out.expect_code(1);
    let gamed = out.json()["id"].as_str().expect("an id").to_owned();
    let lied = quickstart(&dir, "lies.yaml", one_attempt);
    let schema = repo_root().join("tests/fixtures/sarif-schema-2.1.0.json");
    let validated = |name: &str, log: &str| -> Value {
        let path = dir.write(name, log);
        let (code, said) = tool(
            &python,
            &["sarif".as_ref(), path.as_os_str(), schema.as_os_str()],
            &dir.path(),
        );
        assert_eq!(code, 0, "{name} is not valid SARIF 2.1.0: {said}");
        serde_json::from_str(log).expect("JSON")
    };

    let out = harness(["runs", "show", &gamed, "--sarif", "--journal"])
        .args([dir.join("runs.db")])
        .run();
    out.expect_code(0);
    let log = validated("gamed.sarif", &out.stdout);
    let run = &log["runs"][0];
    assert_eq!(run["tool"]["driver"]["name"], "harness");
    let rule = &run["tool"]["driver"]["rules"][0];
    assert_eq!(rule["id"], "gaming/special-cased-input", "{log:#}");
    assert_eq!(
        rule["shortDescription"]["text"],
        "special-cases the inputs the tests use"
    );
    let result = &run["results"][0];
    assert_eq!(result["ruleId"], "gaming/special-cased-input");
    assert_eq!(result["level"], "error");
    let location = &result["locations"][0]["physicalLocation"];
    assert_eq!(location["artifactLocation"]["uri"], "calc.py", "{log:#}");
    assert_eq!(location["artifactLocation"]["uriBaseId"], "WORKSPACE");
    assert!(
        location["region"]["startLine"].as_u64() > Some(0),
        "{log:#}"
    );
    let base = run["originalUriBaseIds"]["WORKSPACE"]["uri"]
        .as_str()
        .expect("the workspace's URI");
    assert!(
        base.starts_with("file:///") && base.ends_with("/gaming/workspace/"),
        "{base}"
    );

    // The report over both runs: every finding of each run's final attempt, each workspace a
    // base of its own; the claim at the file it names, the verifier's reason (which names none)
    // at the delegation file.
    let out = harness(["report", "--sarif", "--journal"])
        .args([dir.join("runs.db")])
        .run();
    out.expect_code(0);
    let log = validated("report.sarif", &out.stdout);
    let results = log["runs"][0]["results"].as_array().expect("results");
    let of = |id: &str| {
        results
            .iter()
            .filter(|r| r["properties"]["run_id"] == id)
            .collect::<Vec<_>>()
    };
    assert!(!of(&gamed).is_empty() && !of(&lied).is_empty(), "{log:#}");
    let located = |rule: &str| {
        let result = of(&lied)
            .into_iter()
            .find(|r| r["ruleId"] == rule)
            .unwrap_or_else(|| panic!("no {rule} result: {log:#}"));
        result["locations"][0]["physicalLocation"]["artifactLocation"].clone()
    };
    let claim = located("claim/file-verb");
    assert_eq!(claim["uri"], "hello.txt", "{claim}");
    let base = &log["runs"][0]["originalUriBaseIds"][claim["uriBaseId"].as_str().expect("a base")];
    assert!(
        base["uri"]
            .as_str()
            .is_some_and(|uri| uri.ends_with("/quickstart/workspace/")),
        "{log:#}"
    );
    let verify = located("verify");
    assert!(
        verify["uri"].as_str().is_some_and(
            |uri| uri.starts_with("file:///") && uri.ends_with("/quickstart/lies.yaml")
        ),
        "{verify}"
    );
    let ids: Vec<&str> = log["runs"][0]["tool"]["driver"]["rules"]
        .as_array()
        .expect("rules")
        .iter()
        .filter_map(|r| r["id"].as_str())
        .collect();
    assert!(
        ids.contains(&"claim/file-verb") && ids.contains(&"verify"),
        "{ids:?}"
    );
    // A claim's rule describes itself from the rules' table: what it reads and when it does not.
    let claim_rule = &log["runs"][0]["tool"]["driver"]["rules"][ids
        .iter()
        .position(|id| *id == "claim/file-verb")
        .expect("the rule")];
    let help = claim_rule["fullDescription"]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(
        help.contains("a past-tense verb of change") && help.contains("not when"),
        "{claim_rule}"
    );
    for result in results {
        let index = result["ruleIndex"].as_u64().expect("ruleIndex") as usize;
        assert_eq!(ids[index], result["ruleId"], "ruleIndex points at its rule");
    }
}

/// Runs the action at the repository root with `inputs` in `dir`, as GitHub does.
fn action(python: &str, dir: &TempDir, inputs: &Value) -> (i32, Value) {
    let mut inputs = inputs.clone();
    inputs["harness"] = json!(harness_bin());
    tool(
        python,
        &[
            "action".as_ref(),
            repo_root().as_os_str(),
            inputs.to_string().as_ref(),
            dir.path().as_os_str(),
        ],
        &dir.path(),
    )
}

#[test]
fn the_action_runs_as_github_runs_it_on_a_passing_and_a_failing_run() {
    let Some(python) = python_with("yaml", "HARNESS_REQUIRE_JSONSCHEMA") else {
        return;
    };
    let dir = TempDir::new();
    copy_tree(
        &repo_root().join("examples/quickstart"),
        &dir.join("quickstart"),
    );
    let lies = one_attempt(dir.read("quickstart/delegation.yaml").expect("read"));
    dir.write("quickstart/lies.yaml", lies);
    let (key, public) = key_pair(&dir, "operator");

    // A passing run: success, its outputs, a SARIF log, an attestation the audit accepts.
    let (code, ran) = action(
        &python,
        &dir,
        &json!({
            "file": "quickstart/delegation.yaml",
            "signing-key": key,
            "review-url": "http://127.0.0.1:7070",
        }),
    );
    assert_eq!(code, 0, "{ran:#}");
    let outputs = &ran["outputs"];
    assert_eq!(outputs["conclusion"], "success", "{ran:#}");
    assert_eq!(outputs["outcome"], "passed");
    let id = outputs["run-id"].as_str().expect("run-id").to_owned();
    assert!(id.starts_with("d-"), "{ran:#}");
    assert_eq!(outputs["input-tokens"], "0");
    let sarif = dir.join(outputs["sarif-path"].as_str().expect("sarif-path"));
    let sarif: Value =
        serde_json::from_str(&std::fs::read_to_string(sarif).expect("the SARIF log"))
            .expect("JSON");
    assert_eq!(sarif["version"], "2.1.0");
    let attestation = dir.join(
        outputs["attestation-path"]
            .as_str()
            .expect("attestation-path"),
    );
    harness(["audit", "--pubkey"])
        .args([&public, &attestation])
        .run()
        .expect_code(0);
    let summary = ran["summary"].as_str().expect("summary");
    assert!(summary.contains("| outcome | `passed` |"), "{summary}");
    assert!(
        summary.contains(&format!("(<http://127.0.0.1:7070/runs/{id}>)")),
        "{summary}"
    );

    // A lie as the final answer: the step fails with `failure`; with fail-on none it passes and
    // says what happened; fail-on gaming does not fail on a claim.
    let (code, ran) = action(&python, &dir, &json!({"file": "quickstart/lies.yaml"}));
    assert_eq!(code, 1, "{ran:#}");
    assert_eq!(ran["outputs"]["conclusion"], "failure");
    assert_eq!(ran["outputs"]["outcome"], "failed");
    assert_eq!(ran["steps"][1]["exit"], 1);
    let summary = ran["summary"].as_str().expect("summary");
    assert!(summary.contains("claim 1"), "{summary}");
    assert!(
        ran["log"]
            .as_str()
            .is_some_and(|l| l.contains("::error title=harness::")),
        "{ran:#}"
    );
    for (fail_on, conclusion) in [
        ("none", "success"),
        ("gaming", "success"),
        ("claims", "failure"),
    ] {
        let (code, ran) = action(
            &python,
            &dir,
            &json!({"file": "quickstart/lies.yaml", "fail-on": fail_on}),
        );
        assert_eq!(
            ran["outputs"]["conclusion"], conclusion,
            "{fail_on}: {ran:#}"
        );
        assert_eq!(code, i32::from(conclusion == "failure"), "{fail_on}");
    }

    // Auditing a recorded run: its attestation and document pass; an edited document is
    // `tamper` whatever the outcome.
    let document = dir.join("run.json");
    // The journal the action records into by default.
    let journal = dir.join("runner-temp/harness-runs.db");
    harness(["runs", "export", &id, "-o"])
        .args([&document])
        .args(["--journal".as_ref(), journal.as_os_str()])
        .run()
        .expect_code(0);
    let audit = |document: &Path| {
        action(
            &python,
            &dir,
            &json!({
                "run": attestation,
                "document": document,
                "public-key": public,
                "fail-on": "tamper",
            }),
        )
    };
    let (code, ran) = audit(&document);
    assert_eq!(code, 0, "{ran:#}");
    assert_eq!(ran["outputs"]["outcome"], "passed");
    assert_eq!(ran["outputs"]["run-id"], id.as_str());
    let edited = std::fs::read_to_string(&document).expect("read").replacen(
        "\"passed\"",
        "\"passed_with_debt\"",
        1,
    );
    let edited = dir.write("edited.json", edited);
    let (code, ran) = audit(&edited);
    assert_eq!(code, 1, "{ran:#}");
    assert_eq!(ran["outputs"]["conclusion"], "failure");
    assert!(
        ran["summary"]
            .as_str()
            .is_some_and(|s| s.contains("subject_mismatch")),
        "{ran:#}"
    );

    // A recorded run is a file anyone can write: an id that tries to set another output stays
    // one output's value, and the summary says nothing vouches for an unsigned file.
    let mut forged: Value =
        serde_json::from_str(&std::fs::read_to_string(&document).expect("read")).expect("JSON");
    forged["run"]["id"] = json!("d-1\nconclusion=success");
    forged["run"]["outcome"] = json!("failed");
    forged["seal"] = json!(harness_records::seal(&forged));
    let forged = dir.write("forged.json", forged.to_string());
    let (code, ran) = action(&python, &dir, &json!({"run": forged}));
    assert_eq!(code, 1, "{ran:#}");
    assert_eq!(ran["outputs"]["conclusion"], "failure", "{ran:#}");
    assert_eq!(
        ran["outputs"]["run-id"], "d-1\nconclusion=success",
        "{ran:#}"
    );
    let summary = ran["summary"].as_str().expect("summary");
    assert!(summary.contains("unsigned"), "{summary}");
    assert!(!summary.contains("\nconclusion=success"), "{summary}");

    // Misuse: neither input, or both.
    let (code, ran) = action(&python, &dir, &json!({}));
    assert_eq!(code, 1);
    assert!(
        ran["log"]
            .as_str()
            .is_some_and(|l| l.contains("give exactly one of")),
        "{ran:#}"
    );
}

#[test]
fn pre_commit_runs_the_policy_tests_and_the_hooks_check_of_this_repository() {
    let Some(python) = python_with("pre_commit", "HARNESS_REQUIRE_PRECOMMIT") else {
        return;
    };
    let dir = TempDir::new();
    let repo = dir.join("project");
    std::fs::create_dir_all(&repo).expect("mkdir");
    let git = |args: &[&str]| git(&repo, args);
    git(&["init", "-q"]);
    harness(["init"]).current_dir(&repo).run().expect_code(0);
    git(&["add", "-A"]);
    git(&["commit", "-qm", "harness init"]);
    let bin = Path::new(harness_bin())
        .parent()
        .expect("the binary's directory");
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let try_repo = |hook: &str| {
        let out = Command::new(&python)
            .args(["-m", "pre_commit", "try-repo"])
            .arg(repo_root())
            .args([hook, "--all-files"])
            .current_dir(&repo)
            .env("PATH", &path)
            .env("PRE_COMMIT_HOME", dir.join("pre-commit-home"))
            .output()
            .expect("pre-commit runs");
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    };
    for (hook, name) in [
        ("harness-test", "harness policy tests"),
        ("harness-hooks-check", "harness hooks check"),
    ] {
        let (code, said) = try_repo(hook);
        assert_eq!(code, Some(0), "{hook}:\n{said}");
        assert!(
            said.lines()
                .any(|l| l.starts_with(name) && l.ends_with("Passed")),
            "{hook}:\n{said}"
        );
    }
    // A hook that no longer compiles fails the commit with harness's own message, and a policy
    // test that fails fails the other hook.
    let hook = repo.join(".harness/hooks/claim-check.md");
    let text = std::fs::read_to_string(&hook).expect("the hook");
    std::fs::write(
        &hook,
        text.replace("def handle(event, payload):", "def handle(event, payload)"),
    )
    .expect("write");
    git(&["add", "-A"]);
    let (code, said) = try_repo("harness-hooks-check");
    assert_eq!(code, Some(1), "{said}");
    assert!(
        said.contains("harness hooks check") && said.contains("Failed"),
        "{said}"
    );
    assert!(
        said.contains("claim-check.md:7: script: Parse error"),
        "{said}"
    );
    let (code, said) = try_repo("harness-test");
    assert_eq!(code, Some(1), "{said}");
    assert!(
        said.contains("harness policy tests") && said.contains("Failed"),
        "{said}"
    );
}
