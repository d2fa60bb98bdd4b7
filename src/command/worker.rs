//! `harness worker`: run delegations from a queue.

use std::sync::Arc;
use std::time::Duration;

use harness_queue::{QueueOptions, WorkerSettings};

use crate::args::WorkerArgs;
use crate::exit;
use crate::settings;

/// Runs the command and returns its exit code.
pub async fn run(args: WorkerArgs) -> u8 {
    let lease = Duration::from_secs(args.lease);
    let options = QueueOptions {
        lease,
        max_deliver: args.max_deliver,
    };
    let queue = match harness_queue::open(&args.queue, options).await {
        Ok(queue) => queue,
        Err(e) => return exit::fail(&e, false),
    };
    // Not `settings::runtime()`: the submitter records, in a journal this machine may not have,
    // so a worker writes no run's start and records no child.
    let runtime = match harness::Runtime::with_trace_ids(Some(harness_telemetry::trace_id)) {
        Ok(runtime) => Arc::new(runtime),
        Err(e) => return exit::fail(&e, false),
    };
    runtime.watch_reviews(Arc::new(harness_records::review_state));
    // A tree's children run here too; their records travel back in their root's report.
    runtime.carry_children(Arc::new(|run: &harness::CarriedRun| {
        harness_records::seal_of(&run.report, &harness_records::RecordMeta::from(run))
            .map_err(|e| e.message().to_owned())
    }));
    crate::settings::bridge_mcp(&runtime);
    let name = harness_queue::worker_name();
    eprintln!(
        "worker {name}: running up to {} delegation(s) at once from {} (Ctrl-C to stop)",
        args.concurrency,
        queue.describe()
    );
    let settings = WorkerSettings {
        concurrency: usize::from(args.concurrency),
        heartbeat: (lease / 3).max(Duration::from_millis(200)),
        retry_delay: Duration::from_secs(1),
        name,
    };
    let stop = async {
        let why = settings::shutdown_signal().await;
        eprintln!("\n{why}: no new jobs; giving running ones back to the queue");
    };
    let summary =
        harness_queue::work(queue, runtime, settings, Arc::new(print_finished), stop).await;
    eprintln!(
        "worker stopped: {} completed, {} given back, {} dead-lettered",
        summary.completed, summary.released, summary.dead
    );
    exit::OK
}

/// Prints each delegation this worker finishes.
fn print_finished(done: &harness_queue::JobResult) {
    let kind = done
        .report
        .error
        .as_ref()
        .map_or(String::new(), |e| format!(" ({})", e.kind().as_str()));
    let children = match done.report.carried.len() {
        0 => String::new(),
        1 => ", with 1 child run".to_owned(),
        n => format!(", with {n} child runs"),
    };
    eprintln!(
        "worker: {} line {}: {}{kind} after {} attempt(s){children}",
        done.id,
        done.line,
        done.report.outcome.as_str(),
        done.report.attempts.len()
    );
}
