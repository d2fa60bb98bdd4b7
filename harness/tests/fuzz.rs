//! Property tests of what reads untrusted text or values (issue 14): the delegation-file and
//! project-policy loaders, hook front matter, and the JSON ⇄ Starlark conversions. Whatever
//! the input, each returns a value or an error that names the file — it never panics, hangs or
//! overflows the stack. A bounded number of cases runs with the ordinary test suite.

use std::sync::Arc;

use harness_builtins::{
    Capabilities, Engine, ErrorKind, Limit, Limits, Sandbox, Script, Surface, Workspace,
};
use proptest::prelude::*;
use serde_json::Value;

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: 200,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// Text that looks like a delegation file often enough to go deep: known keys and YAML syntax
/// mixed with arbitrary characters.
fn yamlish() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        Just("task: ".to_owned()),
        Just("delegate: {kind: scripted, script: agent.star}\n".to_owned()),
        Just("delegate: {kind: openai, model: m, api_key_env: none}\n".to_owned()),
        Just("verify: ".to_owned()),
        Just("max_verify_retries: ".to_owned()),
        Just("limits: {max_turns: ".to_owned()),
        Just("tools: [".to_owned()),
        Just("args: {".to_owned()),
        Just("\n".to_owned()),
        Just("- ".to_owned()),
        Just("[[[[[[[[".to_owned()),
        Just("&a [*a]".to_owned()),
        Just("!!binary ".to_owned()),
        "[ -~]{0,12}",
        any::<u32>().prop_map(|n| n.to_string()),
    ];
    proptest::collection::vec(piece, 0..24).prop_map(|pieces| pieces.concat())
}

/// JSON values nested up to `depth`.
fn json(depth: u32) -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        (-1e12f64..1e12).prop_map(Value::from),
        ".{0,16}".prop_map(Value::String),
    ];
    leaf.prop_recursive(depth, 256, 6, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            proptest::collection::btree_map(".{0,8}", inner, 0..6)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn sandbox(dir: &std::path::Path) -> Sandbox {
    Sandbox::new(
        Surface::Verifier,
        Workspace::new(dir).expect("workspace"),
        Capabilities::read_only(),
        Limits::default(),
    )
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn a_delegation_file_loads_or_names_itself(text in yamlish()) {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("agent.star"), "def respond(r):\n    return 'x'\n")
            .expect("agent");
        let file = dir.path().join("delegation.yaml");
        let assembler = harness::Assembler::default();
        if let Err(e) = assembler.yaml(&file, &text, dir.path()) {
            prop_assert_eq!(e.kind(), harness::ErrorKind::Config);
            prop_assert!(e.message().contains("delegation.yaml"), "{}", e.message());
        }
    }

    #[test]
    fn a_project_policy_loads_or_names_itself(text in yamlish()) {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir(dir.path().join(".harness")).expect("mkdir");
        std::fs::write(dir.path().join(".harness/policy.yaml"), &text).expect("policy");
        std::fs::write(dir.path().join("agent.star"), "def respond(r):\n    return 'x'\n")
            .expect("agent");
        let minimal = "task: t\ndelegate: {kind: scripted, script: agent.star}\n";
        let file = dir.path().join("delegation.yaml");
        if let Err(e) = harness::Assembler::default().yaml(&file, minimal, dir.path()) {
            prop_assert_eq!(e.kind(), harness::ErrorKind::Config);
            prop_assert!(e.message().contains("policy.yaml"), "{}", e.message());
        }
    }

    #[test]
    fn hook_front_matter_loads_or_names_the_file(front in yamlish(), body in ".{0,40}") {
        let dir = tempfile::tempdir().expect("tempdir");
        let hook = dir.path().join("gate.md");
        std::fs::write(&hook, format!("---\n{front}\n---\n{body}")).expect("hook");
        let sandbox = Arc::new(sandbox(dir.path()));
        if let Err(problems) =
            harness_hooks::HookSet::load(&harness_hooks::engine(), sandbox, std::slice::from_ref(&hook))
        {
            prop_assert!(!problems.is_empty());
            for problem in problems {
                prop_assert_eq!(&problem.path, &hook);
            }
        }
    }

    #[test]
    fn values_cross_into_starlark_and_back_unchanged(value in json(8)) {
        let dir = tempfile::tempdir().expect("tempdir");
        let sandbox = sandbox(dir.path());
        let engine = Engine::new();
        let script = Script::compile(&engine, &sandbox, "echo.star", "def run(x):\n    return x\n", &[])
            .expect("compiles");
        let back = script.call(&sandbox, "run", &[&value]).expect("round trip").value;
        prop_assert_eq!(back, value);
    }

    #[test]
    fn values_too_deep_for_the_limit_are_a_typed_error(depth in prop_oneof![1usize..400, 99usize..102]) {
        let dir = tempfile::tempdir().expect("tempdir");
        let sandbox = sandbox(dir.path());
        let engine = Engine::new();
        let source = "def run(n):\n    v = []\n    for i in range(n):\n        v = [v]\n    return [json.encode(v), str(v)]\n";
        let script = Script::compile(&engine, &sandbox, "deep.star", source, &[]).expect("compiles");
        let called = script.call(&sandbox, "run", &[&Value::from(depth)]);
        let limit = Limits::default().max_nesting_depth;
        match called {
            Ok(_) => prop_assert!(depth <= limit, "depth {} passed", depth),
            Err(e) => {
                prop_assert!(depth > limit, "depth {}: {}", depth, e);
                prop_assert_eq!(e.kind(), ErrorKind::Limit(Limit::Nesting));
            }
        }
    }
}
