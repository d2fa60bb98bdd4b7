//! One inline verification of a shape-check script, parsed once, called many times.
//!
//! `cargo bench -p harness --bench verify` prints p50/p90/p99 per call. Speed is measured here,
//! never asserted in tests.

use std::sync::Arc;
use std::time::{Duration, Instant};

use harness::{DelegationResult, Verifier};
use harness_builtins::{Capabilities, Engine, Limits, Sandbox, Surface, Workspace};

const SHAPE_CHECK: &str = r#"
def run(result):
    doc = json.decode(result["response"], default = None)
    if type(doc) != "dict":
        return {"verified": False, "reason": "response is not a JSON object"}
    if type(doc.get("name")) != "string" or type(doc.get("id")) != "int":
        return {"verified": False, "reason": "expected string `name` and int `id`"}
    return {"verified": True, "reason": ""}
"#;

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index]
}

fn main() {
    let dir = std::env::temp_dir();
    let sandbox = Arc::new(Sandbox::new(
        Surface::Verifier,
        Workspace::new(&dir).expect("temp dir is a workspace"),
        Capabilities::read_only(),
        Limits::default(),
    ));
    let engine = Engine::new();
    let verifier = Verifier::compile(
        &engine,
        sandbox,
        "shape.star",
        SHAPE_CHECK,
        &serde_json::json!({}),
    )
    .expect("the benchmark script compiles");
    let result = DelegationResult::from_json(
        "bench",
        r#"{"id": "d-bench", "attempt": 1, "response": "{\"name\": \"widget\", \"id\": 42}",
            "tool_calls": [{"id": "call_1", "name": "write_file", "arguments": {"path": "a.txt", "content": "hi"}}],
            "tool_results": [{"call_id": "call_1", "name": "write_file", "content": "wrote 2 bytes", "is_error": false}]}"#,
    )
    .expect("valid result");

    for _ in 0..1_000 {
        let (outcome, _) = verifier.verify_blocking(&result).expect("verifies");
        assert!(outcome.verified);
    }
    let iterations = 20_000;
    let mut samples = Vec::with_capacity(iterations);
    let started = Instant::now();
    for _ in 0..iterations {
        let t = Instant::now();
        let (outcome, _) = verifier.verify_blocking(&result).expect("verifies");
        samples.push(t.elapsed());
        std::hint::black_box(outcome);
    }
    let total = started.elapsed();
    samples.sort();
    println!("inline verification (shape check, parsed once), {iterations} calls:");
    println!(
        "  p50 {:>8.2} µs",
        percentile(&samples, 0.50).as_secs_f64() * 1e6
    );
    println!(
        "  p90 {:>8.2} µs",
        percentile(&samples, 0.90).as_secs_f64() * 1e6
    );
    println!(
        "  p99 {:>8.2} µs",
        percentile(&samples, 0.99).as_secs_f64() * 1e6
    );
    println!(
        "  mean {:>7.2} µs",
        total.as_secs_f64() * 1e6 / iterations as f64
    );

    let t = Instant::now();
    let compiles = 200;
    for _ in 0..compiles {
        let sandbox = Arc::new(Sandbox::new(
            Surface::Verifier,
            Workspace::new(&dir).expect("workspace"),
            Capabilities::read_only(),
            Limits::default(),
        ));
        std::hint::black_box(
            Verifier::compile(
                &engine,
                sandbox,
                "shape.star",
                SHAPE_CHECK,
                &serde_json::json!({}),
            )
            .expect("compiles"),
        );
    }
    println!(
        "  parse + freeze once: {:.1} µs (for comparison)",
        t.elapsed().as_secs_f64() * 1e6 / f64::from(compiles)
    );
}
