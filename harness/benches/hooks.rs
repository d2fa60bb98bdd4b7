//! A chain of 10 `delegation.post_verify` hooks, loaded once, dispatched many times.
//!
//! `cargo bench -p harness --bench hooks` prints p50/p90/p99 per dispatch of the whole chain (and
//! of a single hook, for comparison). Each dispatch converts the Result to its JSON payload, as
//! the pipeline does per attempt, then runs every hook in priority order (every one allows, so
//! the whole chain runs). Speed is measured here, never asserted in tests.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use harness::DelegationResult;
use harness_builtins::{Capabilities, Limits, Sandbox, Surface, Workspace};
use harness_hooks::{Event, HookSet};

/// Three kinds of realistic post-verify policies; the chain cycles through them.
const SCRIPTS: [&str; 3] = [
    // Shape check of the answer.
    r#"def handle(event, payload):
      doc = json.decode(payload["response"], default = None)
      if type(doc) != "dict" or type(doc.get("name")) != "string":
          return block("the response is not a JSON object with a string `name`")
      return allow()"#,
    // Claim check: a claimed write needs a successful write_file result.
    r#"CLAIMS = ["i created", "i wrote", "i saved", "i added"]

  def handle(event, payload):
      said = payload["response"].lower()
      if not [c for c in CLAIMS if c in said]:
          return allow()
      if [r for r in payload["tool_results"] if r["name"] == "write_file" and not r["is_error"]]:
          return allow()
      return block("claims a write that no write_file call made")"#,
    // A size and error budget over the attempt.
    r#"def handle(event, payload):
      if len(payload["response"]) > 100000:
          return block("the response is too long")
      failed = [r for r in payload["tool_results"] if r["is_error"]]
      if len(failed) > 3:
          return block("too many failed tool calls")
      return allow()"#,
];

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index]
}

fn write_hooks(dir: &std::path::Path, count: usize) -> Vec<PathBuf> {
    (0..count)
        .map(|i| {
            let path = dir.join(format!("hook-{i:02}.md"));
            let text = format!(
                "---\nevent: delegation.post_verify\npriority: {}\ndelegates: [openai]\nscript: |\n  {}\n---\n# Hook {i}\n",
                10 * (i + 1),
                SCRIPTS[i % SCRIPTS.len()]
            );
            std::fs::write(&path, text).expect("the temp dir is writable");
            path
        })
        .collect()
}

fn load(dir: &std::path::Path, files: &[PathBuf]) -> HookSet {
    let sandbox = Arc::new(Sandbox::new(
        Surface::Hook,
        Workspace::new(dir).expect("temp dir is a workspace"),
        Capabilities::read_only(),
        Limits::default(),
    ));
    HookSet::load(&harness_hooks::engine(), sandbox, files).unwrap_or_else(|problems| {
        panic!(
            "the benchmark hooks load: {}",
            problems
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("; ")
        )
    })
}

fn measure(label: &str, hooks: &HookSet, result: &DelegationResult, expected_runs: usize) {
    let names = ["openai", "bench-model"];
    let dispatch = || {
        let dispatch = hooks
            .dispatch(Event::DelegationPostVerify, result.to_value(), &names)
            .expect("the hooks run");
        assert!(dispatch.blocked.is_none(), "every benchmark hook allows");
        assert_eq!(dispatch.runs.len(), expected_runs);
        dispatch
    };
    for _ in 0..500 {
        std::hint::black_box(dispatch());
    }
    let iterations = 10_000;
    let mut samples = Vec::with_capacity(iterations);
    let started = Instant::now();
    for _ in 0..iterations {
        let t = Instant::now();
        let out = dispatch();
        samples.push(t.elapsed());
        std::hint::black_box(out);
    }
    let total = started.elapsed();
    samples.sort();
    println!("{label}, {iterations} dispatches:");
    for (name, p) in [("p50", 0.50), ("p90", 0.90), ("p99", 0.99)] {
        println!(
            "  {name} {:>8.2} µs",
            percentile(&samples, p).as_secs_f64() * 1e6
        );
    }
    println!(
        "  mean {:>7.2} µs",
        total.as_secs_f64() * 1e6 / iterations as f64
    );
}

fn main() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let files = write_hooks(dir.path(), 10);
    let result = DelegationResult::from_json(
        "bench",
        r#"{"id": "d-bench", "attempt": 1, "response": "{\"name\": \"widget\", \"id\": 42}",
            "tool_calls": [{"id": "call_1", "name": "write_file", "arguments": {"path": "a.txt", "content": "hi"}}],
            "tool_results": [{"call_id": "call_1", "name": "write_file", "content": "wrote 2 bytes", "is_error": false}]}"#,
    )
    .expect("valid result");

    let chain = load(dir.path(), &files);
    measure(
        "chain of 10 delegation.post_verify hooks (loaded once)",
        &chain,
        &result,
        10,
    );
    let single = load(dir.path(), &files[..1]);
    measure("one delegation.post_verify hook", &single, &result, 1);

    let t = Instant::now();
    let loads = 50;
    for _ in 0..loads {
        std::hint::black_box(load(dir.path(), &files));
    }
    println!(
        "  load + compile the 10 hooks: {:.1} µs (for comparison)",
        t.elapsed().as_secs_f64() * 1e6 / f64::from(loads)
    );
}
