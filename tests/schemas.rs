//! The JSON Schemas of the delegation file and the project policy (`schemas/`): generated from
//! the types harness reads the files with (`harness schema`), committed, and checked with
//! `schemas/validate.py` (Python `jsonschema`) against every example delegation file and what
//! `harness init` writes — and refusing what harness refuses, each for the key harness names.
//! The reference's key tables are checked against the same schemas.
//!
//! Without `jsonschema` and `pyyaml` for the Python in `HARNESS_TEST_PYTHON` the validator's
//! tests say so and skip, unless `HARNESS_REQUIRE_JSONSCHEMA` is set (`.ci/run` installs them
//! and sets it).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::util::{TempDir, harness, python_with, repo_root};

pub(crate) fn python() -> Option<String> {
    python_with("jsonschema, yaml", "HARNESS_REQUIRE_JSONSCHEMA")
}

/// Runs the validator on `files` against `schema`; its output and whether every file passed.
pub(crate) fn validate(python: &str, schema: &str, files: &[PathBuf]) -> (String, bool) {
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
}

/// What the types generate is what is committed: `harness schema` prints it, and
/// `HARNESS_BLESS=1` rewrites the files.
#[test]
fn the_committed_schemas_are_what_the_types_generate() {
    for (file, name) in [
        ("delegation.schema.json", "delegation"),
        ("policy.schema.json", "policy"),
        ("harness.run.v1.json", "run"),
    ] {
        let out = harness(["schema", name]).run();
        out.expect_code(0);
        let schema: Value = serde_json::from_str(&out.stdout).expect("the schema is JSON");
        assert_eq!(
            schema["$id"],
            format!("https://harness.dev/schemas/{file}"),
            "{name}"
        );
        harness_testkit::golden::assert_golden(
            &repo_root().join("schemas").join(file),
            &out.stdout,
            "HARNESS_BLESS=1 cargo test --test tests -- schemas::the_committed",
        );
    }
    let dir = TempDir::new();
    harness(["schema", "policy", "-o"])
        .args([dir.join("policy.json")])
        .run()
        .expect_code(0);
    assert!(
        dir.read("policy.json")
            .is_some_and(|t| t.contains("verification_defaults"))
    );
    harness(["schema", "neither"]).run().expect_code(2);
}

/// A valid delegation file, then one key made wrong: the schema refuses each, and so does
/// harness (exit 2), naming the key.
const BASE: &str = "task: t\ndelegate: {kind: scripted, script: a.star}\n";

/// `(case, text after BASE or a whole file, a word harness's message must hold)`.
const REFUSED: &[(&str, &str, &str)] = &[
    ("misspelt key", "checs: []\n", "checs"),
    (
        "wrong type",
        "max_verify_retries: many\n",
        "max_verify_retries",
    ),
    (
        "retries over 100",
        "max_verify_retries: 101\n",
        "max_verify_retries",
    ),
    (
        "a tree budget of nothing",
        "limits: {max_tree_tokens: 0}\n",
        "limits.max_tree_tokens` must be at least 1",
    ),
    (
        "unknown check key",
        "checks: [{name: t, run: x, retries: 2}]\n",
        "retries",
    ),
    (
        "check with run and argv",
        "checks: [{name: t, run: x, argv: [y]}]\n",
        "argv",
    ),
    ("check without a command", "checks: [{name: t}]\n", "run"),
    (
        "check confirm over 5",
        "checks: [{name: t, run: x, confirm: 9}]\n",
        "confirm",
    ),
    (
        "unknown runner",
        "checks: [{name: t, run: x, runner: rspec}]\n",
        "runner",
    ),
    (
        "unknown criterion kind",
        "criteria: [\"file_exist:a\"]\n",
        "file_exist",
    ),
    (
        "endpoint status",
        "criteria: [{endpoint: \"http://localhost/\", status: 700}]\n",
        "status",
    ),
    (
        "holdout without files",
        "holdout: [{name: h, run: x}]\n",
        "files",
    ),
    ("claims value", "claims: sometimes\n", "claims"),
    ("gaming value", "gaming: loud\n", "gaming"),
    (
        "scope on_violation",
        "scope: {on_violation: ignore}\n",
        "on_violation",
    ),
    ("critic when", "critic: {when: sometimes}\n", "when"),
    ("unknown tool", "tools: [read_files]\n", "read_files"),
    (
        "plan step key",
        "plan: {required_steps: [{tool: read_file, when: x}]}\n",
        "when",
    ),
    (
        "max_children",
        "limits: {max_children: 100}\n",
        "max_children",
    ),
    ("citations value", "citations: some\n", "citations"),
    (
        "profile with a task",
        "tools: [delegate]\ndelegates: {p: {task: x, delegate: {kind: scripted, script: a.star}}}\n",
        "task",
    ),
    (
        "unknown delegate kind",
        "task: t\ndelegate: {kind: gpt}\n",
        "gpt",
    ),
    (
        "delegate key",
        "task: t\ndelegate: {kind: scripted, script: a.star, model: m}\n",
        "model",
    ),
    (
        "anthropic temperature",
        "task: t\ndelegate: {kind: anthropic, model: m, api_key_env: none, temperature: 1.5}\n",
        "temperature",
    ),
];

/// `(case, policy text, a word harness's message must hold)`.
const REFUSED_POLICIES: &[(&str, &str, &str)] = &[
    (
        "misspelt key",
        "verification_default: {}\n",
        "verification_default",
    ),
    (
        "a delegation key in the defaults",
        "verification_defaults: {tools: [read_file]}\n",
        "tools",
    ),
    ("steps under range", "limits: {steps: 10}\n", "steps"),
    (
        "isolation value",
        "commands: {isolation: docker}\n",
        "isolation",
    ),
    (
        "override key",
        "override_policy: {allow_all: true}\n",
        "allow_all",
    ),
    (
        "a gate's value in the defaults",
        "verification_defaults: {flaky: sometimes}\n",
        "flaky",
    ),
];

#[test]
fn the_schemas_refuse_what_harness_refuses_for_the_key_harness_names() {
    let Some(python) = python() else { return };
    let dir = TempDir::new();
    dir.write("a.star", "def respond(request):\n    return \"done\"\n");
    let base = dir.write("base.yaml", BASE);
    let (out, ok) = validate(&python, "delegation.schema.json", &[base]);
    assert!(ok, "{out}");
    for (i, (case, text, word)) in REFUSED.iter().enumerate() {
        let text = if text.starts_with("task:") {
            (*text).to_owned()
        } else {
            format!("{BASE}{text}")
        };
        let file = dir.write(format!("case{i}.yaml"), &text);
        let (out, ok) = validate(
            &python,
            "delegation.schema.json",
            std::slice::from_ref(&file),
        );
        assert!(!ok, "{case}: the schema accepted it: {out}");
        let refused = harness(["run", "--no-journal", "--json"])
            .args([&file])
            .run();
        refused.expect_code(2);
        let message = refused.error_message();
        assert!(message.contains(word), "{case}: {message}");
    }
    for (i, (case, text, word)) in REFUSED_POLICIES.iter().enumerate() {
        let workspace = dir.join(format!("policy{i}"));
        std::fs::create_dir_all(workspace.join(".harness")).expect("mkdir");
        let policy = workspace.join(".harness/policy.yaml");
        std::fs::write(&policy, text).expect("write the policy");
        std::fs::write(
            workspace.join("a.star"),
            "def respond(request):\n    return \"done\"\n",
        )
        .expect("write the script");
        let file = workspace.join("delegation.yaml");
        std::fs::write(&file, BASE).expect("write the delegation");
        let (out, ok) = validate(&python, "policy.schema.json", std::slice::from_ref(&policy));
        assert!(!ok, "policy, {case}: the schema accepted it: {out}");
        let refused = harness(["run", "--no-journal", "--json"])
            .args([&file])
            .run();
        refused.expect_code(2);
        let message = refused.error_message();
        assert!(message.contains(word), "policy, {case}: {message}");
    }
}

/// The keys of the rows of the first table after `heading` in `doc`: each backquoted word in
/// the first column.
fn table_keys(doc: &str, heading: &str) -> BTreeSet<String> {
    let start = doc
        .lines()
        .position(|l| l == heading)
        .unwrap_or_else(|| panic!("docs/reference.md has no heading {heading:?}"));
    let rows = doc
        .lines()
        .skip(start + 1)
        .skip_while(|l| !l.starts_with('|'))
        .take_while(|l| l.starts_with('|'))
        .skip(2);
    let mut keys = BTreeSet::new();
    for row in rows {
        let first = row.split('|').nth(1).unwrap_or_default();
        keys.extend(first.split('`').skip(1).step_by(2).map(str::to_owned));
    }
    keys
}

/// The properties of `schema` at a `$defs` name, or of the root for `None`.
fn properties(schema: &Value, def: Option<&str>) -> BTreeSet<String> {
    let node = match def {
        Some(name) => &schema["$defs"][name],
        None => schema,
    };
    node["properties"]
        .as_object()
        .unwrap_or_else(|| panic!("no properties at {def:?}"))
        .keys()
        .cloned()
        .collect()
}

/// Every key of the delegation file and the project policy is documented in
/// docs/reference.md, and every key its tables name is one harness reads.
#[test]
fn the_reference_documents_every_key_and_no_other() {
    let doc =
        std::fs::read_to_string(repo_root().join("docs/reference.md")).expect("the reference");
    let delegation = harness::schema::delegation();
    let policy = harness::schema::policy();
    for (heading, schema, def) in [
        ("### Top-level keys", &delegation, None),
        ("### `checks`", &delegation, Some("check")),
        ("### `scope`", &delegation, Some("scope")),
        ("### `critic` and `risk`", &delegation, Some("critic")),
        ("### `network`", &delegation, Some("network")),
        ("### `limits`", &delegation, Some("limits")),
        (
            "### `verification_defaults`",
            &policy,
            Some("verification_defaults"),
        ),
        ("### Policy `limits`", &policy, Some("script_limits")),
        ("### `redact`", &policy, Some("redact")),
        ("### `commands`", &policy, Some("commands")),
        ("### `override_policy`", &policy, Some("override_policy")),
    ] {
        assert_eq!(
            table_keys(&doc, heading),
            properties(schema, def),
            "the table under {heading:?} (left) against the keys harness reads (right)"
        );
    }
    // The policy's own keys each have a section.
    for key in properties(&policy, None) {
        assert!(
            doc.contains(&format!("### `{key}`\n"))
                || doc.contains(&format!("### Policy `{key}`\n")),
            "docs/reference.md has no section for the policy's `{key}`"
        );
    }
}
