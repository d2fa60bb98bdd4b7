//! Runs every example under `examples/` so none of them can rot.

use std::path::Path;

use serde_json::json;

use crate::util::{TempDir, closed_port, copy_tree, harness, repo_root};
use harness_testkit::web::WebServer;

#[test]
fn quickstart_lies_is_caught_and_passes_on_attempt_2() {
    // Run a copy: the delegate writes workspace/hello.txt, which must not dirty the repository.
    let dir = TempDir::new();
    copy_tree(&repo_root().join("examples/quickstart"), &dir.path());
    let _ = std::fs::remove_file(dir.join("workspace/hello.txt"));
    let out = harness(["run", "--json"])
        .args([dir.join("delegation.yaml")])
        .current_dir(dir.path())
        .run();
    out.expect_code(0);
    let report = out.json();
    assert_eq!(report["outcome"], json!("passed"));
    assert_eq!(report["attempts"], json!(2));
    assert_eq!(
        report["reasons"],
        json!([
            [
                "claim file: claims to have created hello.txt; no tool call wrote it and the workspace has no hello.txt",
                "verify: expected file hello.txt does not exist"
            ],
            []
        ])
    );
    assert_eq!(
        report["result"]["tool_calls"][0]["name"],
        json!("write_file")
    );
    assert_eq!(dir.read("workspace/hello.txt").as_deref(), Some("hi\n"));

    // The same run as the README shows it: progress on stderr, the answer on stdout.
    std::fs::remove_file(dir.join("workspace/hello.txt")).expect("remove hello.txt");
    let out = harness(["run", "delegation.yaml"])
        .current_dir(dir.path())
        .run();
    out.expect_code(0);
    assert!(out.stderr.contains("NOT VERIFIED"), "{out:?}");
    assert!(out.stderr.contains("passed"), "{out:?}");
    assert!(!out.stdout.trim().is_empty(), "{out:?}");
}

/// The flags each verifier example needs for its `pass` and `fail` result, as
/// `examples/verifiers/README.md` shows them. Every `*.star` must have an entry.
fn verifier_flags(name: &str, case: &str, server: &WebServer) -> Vec<String> {
    let strings = |flags: &[&str]| flags.iter().map(|f| (*f).to_owned()).collect::<Vec<_>>();
    match (name, case) {
        ("exists", "pass") => strings(&[
            "--workdir",
            "examples/verifiers/workspace",
            "--arg",
            "path=hello.txt",
        ]),
        ("exists", "fail") => strings(&[
            "--workdir",
            "examples/verifiers/workspace",
            "--arg",
            "path=report.md",
        ]),
        ("reachable", "pass") => vec![
            "--arg".to_owned(),
            format!("url={}", server.url("/health")),
            "--allow-host".to_owned(),
            "127.0.0.1".to_owned(),
        ],
        ("reachable", "fail") => vec![
            "--arg".to_owned(),
            format!("url=http://127.0.0.1:{}/health", closed_port()),
            "--allow-host".to_owned(),
            "127.0.0.1".to_owned(),
        ],
        ("shape", _) => Vec::new(),
        _ => panic!(
            "examples/verifiers/{name}.star has no entry in tests/examples.rs verifier_flags; add one"
        ),
    }
}

#[test]
fn every_verifier_example_passes_and_fails_as_documented() {
    let root = repo_root();
    let examples = root.join("examples/verifiers");
    let server = WebServer::start();
    let readme =
        std::fs::read_to_string(examples.join("README.md")).expect("examples/verifiers/README.md");
    let mut names: Vec<String> = std::fs::read_dir(&examples)
        .expect("examples/verifiers exists")
        .map(|e| e.expect("a directory entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "star"))
        .map(|p| {
            p.file_stem()
                .expect("a file name")
                .to_string_lossy()
                .into_owned()
        })
        // Their tests run in tests/policy_tests.rs.
        .filter(|name| !name.ends_with("_test"))
        .collect();
    names.sort();
    for expected in ["exists", "reachable", "shape"] {
        assert!(
            names.iter().any(|n| n == expected),
            "missing {expected}.star"
        );
    }
    for name in &names {
        let script = format!("examples/verifiers/{name}.star");
        assert!(
            readme.contains(&script),
            "examples/verifiers/README.md does not show {script}"
        );
        for (case, code) in [("pass", 0), ("fail", 1)] {
            let result = format!("examples/verifiers/{name}.{case}.json");
            assert!(Path::new(&root).join(&result).is_file(), "missing {result}");
            let out = harness(["verify", &script, "--result", &result, "--json"])
                .args(verifier_flags(name, case, &server))
                .current_dir(&root)
                .run();
            assert_eq!(out.code, code, "{script} on {result}:\n{out:?}");
            let verdict = out.json();
            assert_eq!(verdict["error"], serde_json::Value::Null, "{result}");
            if case == "fail" {
                let reason = verdict["reason"].as_str().expect("a reason");
                assert!(!reason.trim().is_empty(), "{result}: empty reason");
            }
        }
    }
}

#[test]
fn the_reachability_example_says_the_endpoint_is_down() {
    let out = harness([
        "verify",
        "examples/verifiers/reachable.star",
        "--result",
        "examples/verifiers/reachable.fail.json",
        "--allow-host",
        "127.0.0.1",
        "--json",
        "--arg",
    ])
    .args([format!("url=http://127.0.0.1:{}/health", closed_port())])
    .current_dir(repo_root())
    .run();
    out.expect_code(1);
    let reason = out.json()["reason"].as_str().expect("a reason").to_owned();
    assert!(reason.starts_with("endpoint is down: "), "{reason}");

    // A live endpoint that answers an error status is not reachable-and-healthy either.
    let server = WebServer::start();
    let out = harness([
        "verify",
        "examples/verifiers/reachable.star",
        "--result",
        "examples/verifiers/reachable.pass.json",
        "--allow-host",
        "127.0.0.1",
        "--json",
        "--arg",
    ])
    .args([format!("url={}", server.url("/status/500"))])
    .current_dir(repo_root())
    .run();
    out.expect_code(1);
    let reason = out.json()["reason"].as_str().expect("a reason").to_owned();
    assert!(reason.contains("500"), "{reason}");
}

#[test]
fn the_checks_example_fails_a_false_claim_on_its_test_output_and_passes_the_fix() {
    let dir = TempDir::new();
    copy_tree(&repo_root().join("examples/checks"), &dir.path());
    let _ = std::fs::remove_file(dir.join("workspace/calc.sh"));
    let out = harness(["run", "--json", "--no-journal"])
        .args([dir.join("delegation.yaml")])
        .run();
    out.expect_code(0);
    let report = out.json();
    assert_eq!(report["outcome"], json!("passed"), "{out:?}");
    assert_eq!(report["attempts"], json!(2));
    let first = &report["history"][0];
    let names: Vec<&str> = first["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .filter_map(|f| f["name"].as_str())
        .collect();
    // The failing test, the placeholder, and "tests pass" said over a failing check.
    assert_eq!(names, ["tests", "no_placeholders:*.sh", "tests"], "{first}");
    assert_eq!(first["findings"][2]["source"], json!("claim"), "{first}");
    assert!(
        first["findings"][0]["message"]
            .as_str()
            .is_some_and(|m| m.contains("FAIL calc add 2 3: expected 5, got -1")),
        "{first}"
    );
    // Every check and criterion of the passing attempt left its evidence.
    let evidence: Vec<(&str, &str)> = report["history"][1]["evidence"]
        .as_array()
        .expect("evidence")
        .iter()
        .map(|e| {
            (
                e["criterion"].as_str().unwrap_or_default(),
                e["result"].as_str().unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(
        evidence,
        [
            ("tests", "pass"),
            ("shellcheck-lite", "pass"),
            ("file_exists:calc.sh", "pass"),
            ("no_placeholders:*.sh", "pass")
        ]
    );
    assert_eq!(report["warnings"], json!([]));
}

#[test]
fn the_scope_example_fails_a_write_outside_allow_without_a_retry() {
    let dir = TempDir::new();
    copy_tree(&repo_root().join("examples/scope"), &dir.path());
    for stale in ["workspace/notes.txt", "workspace/src/greeting.txt"] {
        let _ = std::fs::remove_file(dir.join(stale));
    }
    let out = harness(["run", "--json", "--no-journal"])
        .args([dir.join("delegation.yaml")])
        .run();
    out.expect_code(1);
    let report = out.json();
    assert_eq!(report["outcome"], json!("failed"), "{out:?}");
    assert_eq!(report["kind"], json!("scope_violation"));
    assert_eq!(report["attempts"], json!(1));
    assert_eq!(
        report["result"]["changes"]["added"],
        json!(["notes.txt", "src/greeting.txt"])
    );
    assert_eq!(
        report["reasons"],
        json!([["scope notes.txt: added, outside `scope.allow`"]])
    );
}
