//! What the v4 gates cost (issue 45): the gaming stage and the test runner's own report.
//!
//! `cargo bench -p harness --bench gaming` measures, interleaved so that the machine's noise
//! falls on every configuration alike (medians of `BENCH_GAMING_R` rounds, default 40):
//!
//! - **a delegation that changes no file**: a scripted delegation answering "done", with the
//!   gaming stage on (the default) and `gaming: off`: what the stage adds when there is nothing
//!   to read;
//! - **a delegation that writes code**: the delegate writes a 200-line Python module beside a
//!   protected test, `gaming: blocking` against `off`: the stage reading the diff, lexing the
//!   module and the tests, and running every rule;
//! - **a pytest check**: `python3 -m pytest -q tests` over 50 tests, `runner: auto` (JUnit
//!   report through `PYTEST_ADDOPTS`, read and judged) against `runner: none`, timed by the
//!   check's own `duration_ms`; and the base collection's time (`base.duration_ms`), once per
//!   delegation. Needs a `python3` with pytest on `PATH` (`bench/gates.sh` puts
//!   `$BENCH_PYTHON_BIN` first); skipped, saying so, without one.
//!
//! Speed is measured here, never asserted in tests.

use std::path::Path;
use std::time::{Duration, Instant};

use harness::{Assembler, EventRecord, Outcome, Overrides, Report, Runtime};

fn env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort_unstable();
    times[times.len() / 2]
}

fn us(d: Duration) -> String {
    format!("{:.1} µs", d.as_secs_f64() * 1e6)
}

/// A delegate that writes `module` to `calc.py` on its first turn, then says it is done.
fn writer(module: &str) -> String {
    format!(
        "MODULE = {}\n\ndef respond(request):\n    if request[\"messages\"][-1][\"role\"] == \"tool\":\n        return {{\"content\": \"done\"}}\n    return {{\"tool_calls\": [{{\"name\": \"write_file\", \"arguments\": {{\"path\": \"calc.py\", \"content\": MODULE}}}}]}}\n",
        serde_json::json!(module)
    )
}

/// A 200-line honest module: functions, a class, a constants table, a CLI entry point.
fn module() -> String {
    let mut text = String::from(
        "import sys\n\nLIMITS = {\"small\": 10, \"medium\": 100, \"large\": 1000}\n\n",
    );
    for i in 0..30 {
        text.push_str(&format!(
            "def f{i}(a, b):\n    \"\"\"Adds with an offset.\"\"\"\n    total = a + b + {i}\n    if total > LIMITS[\"large\"]:\n        return LIMITS[\"large\"]\n    return total\n\n"
        ));
    }
    text.push_str(
        "\nif __name__ == \"__main__\":\n    sys.exit(f0(int(sys.argv[1]), int(sys.argv[2])))\n",
    );
    text
}

/// A protected test of 50 tests.
fn tests() -> String {
    let mut text = String::from("from calc import *\n\n");
    for i in 0..50 {
        text.push_str(&format!(
            "def test_{i}():\n    assert f{}({i}, 2) == {}\n\n",
            i % 30,
            i + 2 + i % 30
        ));
    }
    text
}

async fn run(runtime: &Runtime, dir: &Path, name: &str, yaml: &str) -> (Duration, Report) {
    let assembler = Assembler::new(Overrides::default());
    let file = dir.join(name);
    let delegation = assembler
        .yaml(&file, yaml, dir)
        .expect("the delegation assembles");
    let t = Instant::now();
    let report = runtime.run(&delegation, &|_: &EventRecord| {}).await;
    (t.elapsed(), report)
}

fn workspace(root: &Path, agent: &str) {
    std::fs::create_dir_all(root.join("ws/tests")).expect("mkdir");
    std::fs::write(
        root.join("ws/calc.py"),
        "def f0(a, b):\n    raise NotImplementedError\n",
    )
    .expect("calc.py");
    std::fs::write(root.join("ws/tests/test_calc.py"), tests()).expect("tests");
    std::fs::write(root.join("agent.star"), agent).expect("agent.star");
}

fn main() {
    let rounds = env("BENCH_GAMING_R", 40).max(1);
    let tokio = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio");
    tokio.block_on(async {
        let runtime = Runtime::new().expect("runtime");
        let quiet = tempfile::tempdir().expect("temp dir");
        workspace(quiet.path(), "def respond(request):\n    return {\"content\": \"done\"}\n");
        let writes = tempfile::tempdir().expect("temp dir");
        workspace(writes.path(), &writer(&module()));
        let base = "task: bench\ndelegate: {kind: scripted, script: agent.star}\ntools: [write_file]\nworkdir: ws\nmax_verify_retries: 0\nclaims: off\n";
        let (mut idle_on, mut idle_off, mut code_on, mut code_off) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for round in 0..=rounds {
            let on = format!("{base}gaming: blocking\n");
            let off = format!("{base}gaming: off\n");
            let (a, _) = run(&runtime, quiet.path(), "on.yaml", &on).await;
            let (b, _) = run(&runtime, quiet.path(), "off.yaml", &off).await;
            let (c, report) = run(&runtime, writes.path(), "on.yaml", &on).await;
            assert!(
                !report.attempts.iter().any(|a| a
                    .verdict
                    .as_ref()
                    .is_some_and(|v| v.findings.iter().any(|f| f.source == harness::Source::Gaming))),
                "the honest module is not flagged"
            );
            let (d, _) = run(&runtime, writes.path(), "off.yaml", &off).await;
            if round > 0 {
                idle_on.push(a);
                idle_off.push(b);
                code_on.push(c);
                code_off.push(d);
            }
        }
        let (idle_on, idle_off) = (median(idle_on), median(idle_off));
        let (code_on, code_off) = (median(code_on), median(code_off));
        println!(
            "a delegation that changes no file: gaming on {} − off {} = {}",
            us(idle_on),
            us(idle_off),
            us(idle_on.saturating_sub(idle_off))
        );
        println!(
            "a delegation that writes a 200-line module beside 50 tests: gaming on {} − off {} = {}",
            us(code_on),
            us(code_off),
            us(code_on.saturating_sub(code_off))
        );

        let pytest = std::process::Command::new("python3")
            .args(["-c", "import pytest"])
            .output()
            .is_ok_and(|o| o.status.success());
        if !pytest {
            println!("python3 with pytest is not on PATH: the runner is not measured");
            return;
        }
        let honest = tempfile::tempdir().expect("temp dir");
        workspace(honest.path(), &writer(&module()));
        let check = |runner: &str| {
            format!(
                "task: bench\ndelegate: {{kind: scripted, script: agent.star}}\ntools: [write_file]\nworkdir: ws\nmax_verify_retries: 0\nclaims: off\ngaming: off\nchecks:\n  - {{name: tests, run: \"python3 -m pytest -q -p no:cacheprovider tests\", runner: {runner}, env: {{PYTHONDONTWRITEBYTECODE: \"1\"}}}}\n"
            )
        };
        let (mut auto, mut none, mut base) = (Vec::new(), Vec::new(), Vec::new());
        let checked = |report: &Report| -> (Duration, Option<u64>) {
            assert_eq!(report.outcome, Outcome::Passed, "{:?}", report.error);
            let evidence = &report.attempts[0].verdict.as_ref().expect("a verdict").evidence[0];
            (
                Duration::from_millis(evidence.duration_ms.unwrap_or(0)),
                evidence
                    .extra
                    .get("base")
                    .and_then(|b| b.get("duration_ms"))
                    .and_then(serde_json::Value::as_u64),
            )
        };
        let checks = (rounds / 4).max(5);
        for round in 0..=checks {
            let (_, a) = run(&runtime, honest.path(), "auto.yaml", &check("auto")).await;
            let (_, b) = run(&runtime, honest.path(), "none.yaml", &check("none")).await;
            if round > 0 {
                let (took, listed) = checked(&a);
                auto.push(took);
                base.extend(listed.map(Duration::from_millis));
                none.push(checked(&b).0);
            }
        }
        let (auto, none) = (median(auto), median(none));
        println!(
            "a pytest check of 50 tests: runner auto {} ms, none {} ms: {:+.1} %",
            auto.as_millis(),
            none.as_millis(),
            100.0 * (auto.as_secs_f64() / none.as_secs_f64() - 1.0)
        );
        if !base.is_empty() {
            println!(
                "the base collection (pytest --collect-only, once per delegation): {} ms",
                median(base).as_millis()
            );
        }
    });
}
