//! What a check costs over the process it runs (DESIGN §4.4): spawn, scrubbed environment,
//! own process group, captured and capped output, evidence — against a bare `sh -c true`.
//!
//! `cargo bench -p harness --bench checks` measures, interleaved so that the machine's noise
//! falls on all of them alike:
//!
//! - **bare**: `sh -c true` spawned and awaited with `tokio::process::Command::output()`;
//! - **launch**: the same argv through `harness_builtins::run_program`, as a check launches it
//!   (scrubbed environment, private `HOME`, `PATH` without the workspace, own process group,
//!   output captured to the cap, the group killed at the end);
//! - **confined launch**: the same under bubblewrap as a check runs by default
//!   (`commands.isolation: auto` where bubblewrap works; skipped where it does not);
//! - **per check in a delegation**: a scripted delegation with `BENCH_CHECKS_K` (default 20)
//!   checks `run: "true"` minus the same delegation with none, divided by K — everything a check
//!   adds to an attempt: its events, its evidence record, its finding — confined (the default)
//!   and with `commands.isolation: none`.
//!
//! Medians of `BENCH_CHECKS_N` (default 400) spawns and `BENCH_CHECKS_R` (default 15)
//! delegations. Speed is measured here, never asserted in tests.

use std::path::Path;
use std::time::{Duration, Instant};

use harness::{Assembler, EventRecord, Outcome, Overrides, Runtime};
use harness_builtins::{Launch, run_program};

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
    format!("{:.0} µs", d.as_secs_f64() * 1e6)
}

const AGENT: &str = r#"
def respond(request):
    return {"content": "done"}
"#;

/// A delegation file with `k` checks that run `true`.
fn delegation(k: usize) -> String {
    let mut text = String::from(
        "task: bench\ndelegate: {kind: scripted, script: agent.star}\nmax_verify_retries: 0\n",
    );
    if k > 0 {
        text.push_str("checks:\n");
        for i in 0..k {
            text.push_str(&format!("  - {{name: c{i}, run: \"true\"}}\n"));
        }
    }
    text
}

async fn run_delegation(runtime: &Runtime, dir: &Path, k: usize, want: Outcome) -> Duration {
    let assembler = Assembler::new(Overrides::default());
    let file = dir.join(format!("d{k}.yaml"));
    let delegation = assembler
        .yaml(&file, &delegation(k), dir)
        .expect("the delegation assembles");
    let t = Instant::now();
    let report = runtime.run(&delegation, &|_: &EventRecord| {}).await;
    let elapsed = t.elapsed();
    assert_eq!(report.outcome, want, "{:?}", report.error);
    elapsed
}

fn main() {
    let spawns = env("BENCH_CHECKS_N", 400).max(1);
    let k = env("BENCH_CHECKS_K", 20).max(1);
    let rounds = env("BENCH_CHECKS_R", 15).max(1);
    let dir = tempfile::tempdir().expect("temp dir");
    let home = tempfile::tempdir().expect("temp home");
    std::fs::write(dir.path().join("agent.star"), AGENT).expect("agent.star");
    let tokio = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio");
    tokio.block_on(async {
        let argv: Vec<String> = ["sh", "-c", "true"].map(String::from).to_vec();
        let launch = Launch {
            cwd: dir.path(),
            env: &[],
            home: Some(home.path()),
            hidden: Some(dir.path()),
            timeout: Duration::from_secs(30),
            cap: 64 * 1024,
            isolation: None,
            inherit_env: false,
            stdin: None,
            stop_on: None,
        };
        let sandbox = harness_builtins::Isolation::new(dir.path(), &[]);
        let confined = Launch {
            isolation: Some(&sandbox),
            ..launch.clone()
        };
        let confines = harness_builtins::bubblewrap_works();
        let (mut bare, mut launched, mut boxed) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..20 {
            run_program(&argv, &launch).await.expect("warm-up");
        }
        for _ in 0..spawns {
            let t = Instant::now();
            let out = tokio::process::Command::new("sh")
                .args(["-c", "true"])
                .current_dir(dir.path())
                .output()
                .await
                .expect("sh runs");
            bare.push(t.elapsed());
            assert!(out.status.success());
            let t = Instant::now();
            let run = run_program(&argv, &launch).await.expect("sh runs");
            launched.push(t.elapsed());
            assert_eq!(run.exit_code, Some(0));
            if confines {
                let t = Instant::now();
                let run = run_program(&argv, &confined).await.expect("bwrap runs");
                boxed.push(t.elapsed());
                assert_eq!(run.exit_code, Some(0), "{}", run.stderr);
            }
        }
        let bare = median(bare);
        let launched = median(launched);

        // The same project unconfined, by its policy.
        let open = tempfile::tempdir().expect("temp dir");
        std::fs::write(open.path().join("agent.star"), AGENT).expect("agent.star");
        std::fs::create_dir_all(open.path().join(".harness")).expect(".harness");
        std::fs::write(
            open.path().join(".harness/policy.yaml"),
            "commands: {isolation: none}\n",
        )
        .expect("policy");
        let runtime = Runtime::new().expect("runtime");
        let (mut none, mut some, mut unconfined) = (Vec::new(), Vec::new(), Vec::new());
        run_delegation(&runtime, dir.path(), k, Outcome::Passed).await;
        run_delegation(&runtime, open.path(), k, Outcome::Passed).await;
        for _ in 0..rounds {
            none.push(run_delegation(&runtime, dir.path(), 0, Outcome::Skipped).await);
            some.push(run_delegation(&runtime, dir.path(), k, Outcome::Passed).await);
            unconfined.push(run_delegation(&runtime, open.path(), k, Outcome::Passed).await);
        }
        let none = median(none);
        let some = median(some);
        let unconfined = median(unconfined);
        let per_check = some.saturating_sub(none) / k as u32;
        let per_open_check = unconfined.saturating_sub(none) / k as u32;

        println!("bare `sh -c true` (tokio output()):        {}", us(bare));
        println!(
            "the same through run_program (as a check): {} = {:.2}x bare",
            us(launched),
            launched.as_secs_f64() / bare.as_secs_f64()
        );
        if confines {
            let boxed = median(boxed);
            println!(
                "the same under bubblewrap (confined):      {} = {:.2}x bare",
                us(boxed),
                boxed.as_secs_f64() / bare.as_secs_f64()
            );
        } else {
            println!("bubblewrap does not work here: the confined launch is not measured");
        }
        println!(
            "per check in a delegation, {} ({k} checks {} − none {}) / {k}: {} = {:.2}x bare",
            if confines { "confined" } else { "auto, unconfined here" },
            us(some),
            us(none),
            us(per_check),
            per_check.as_secs_f64() / bare.as_secs_f64()
        );
        println!(
            "per check in a delegation, isolation: none ({k} checks {} − none {}) / {k}: {} = {:.2}x bare",
            us(unconfined),
            us(none),
            us(per_open_check),
            per_open_check.as_secs_f64() / bare.as_secs_f64()
        );
    });
}
