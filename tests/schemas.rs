//! The JSON Schemas of the delegation file and the project policy (`schemas/`), checked with
//! `schemas/validate.py` (Python `jsonschema`) against every example delegation file and what
//! `harness init` writes — and refusing what harness refuses: a misspelt key, a wrong type.
//!
//! Without `jsonschema` and `pyyaml` for the Python in `HARNESS_TEST_PYTHON` the test says so and
//! skips, unless `HARNESS_REQUIRE_JSONSCHEMA` is set (`.ci/run` installs them and sets it).

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::util::{TempDir, harness, repo_root};

fn python() -> Option<String> {
    let python = std::env::var("HARNESS_TEST_PYTHON").unwrap_or_else(|_| "python3".to_owned());
    let ready = Command::new(&python)
        .args(["-c", "import jsonschema, yaml"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !ready {
        assert!(
            std::env::var_os("HARNESS_REQUIRE_JSONSCHEMA").is_none(),
            "HARNESS_REQUIRE_JSONSCHEMA is set but {python} cannot import jsonschema and yaml"
        );
        eprintln!("skipped: {python} has no jsonschema and pyyaml (pip install jsonschema pyyaml)");
        return None;
    }
    Some(python)
}

/// Runs the validator on `files` against `schema`; its output and whether every file passed.
fn validate(python: &str, schema: &str, files: &[PathBuf]) -> (String, bool) {
    let out = Command::new(python)
        .arg(repo_root().join("schemas/validate.py"))
        .arg(repo_root().join("schemas").join(schema))
        .args(files)
        .output()
        .expect("python runs");
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (text, out.status.success())
}

/// Every YAML file under `dir` that is a delegation file (it has a top-level `task:`).
fn delegation_files(dir: &Path, found: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("a directory").flatten() {
        let path = entry.path();
        if path.is_dir() {
            delegation_files(&path, found);
        } else if path.extension().is_some_and(|e| e == "yaml")
            && std::fs::read_to_string(&path)
                .is_ok_and(|t| t.lines().any(|l| l.starts_with("task:")))
        {
            found.push(path);
        }
    }
}

#[test]
fn the_schemas_accept_every_example_and_refuse_what_harness_refuses() {
    let Some(python) = python() else { return };
    let mut examples = Vec::new();
    delegation_files(&repo_root().join("examples"), &mut examples);
    assert!(examples.len() >= 10, "{examples:?}");
    let (out, ok) = validate(&python, "delegation.schema.json", &examples);
    assert!(ok, "{out}");

    // What `harness init` writes.
    let dir = TempDir::new();
    harness(["init"])
        .current_dir(dir.path())
        .run()
        .expect_code(0);
    let (out, ok) = validate(
        &python,
        "delegation.schema.json",
        &[dir.join("delegation.yaml")],
    );
    assert!(ok, "{out}");
    let (out, ok) = validate(
        &python,
        "policy.schema.json",
        &[dir.join(".harness/policy.yaml")],
    );
    assert!(ok, "{out}");

    // A misspelt key and a wrong type: refused by harness, and by the schema.
    for (name, text) in [
        (
            "misspelt.yaml",
            "task: t\ndelegate: {kind: scripted, script: a.star}\nchecs: []\n",
        ),
        (
            "type.yaml",
            "task: t\ndelegate: {kind: scripted, script: a.star}\nmax_verify_retries: many\n",
        ),
    ] {
        let file = dir.write(name, text);
        let (out, ok) = validate(
            &python,
            "delegation.schema.json",
            std::slice::from_ref(&file),
        );
        assert!(!ok, "{name}: {out}");
        let refused = harness(["run", "--no-journal", "--json"])
            .args([&file])
            .run();
        refused.expect_code(2);
    }
}
