//! A worker's loop: lease a job, assemble its delegation as the submitter would have, run it
//! under the id it was queued with, heartbeat while it runs, send the report back.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use harness::{Assembler, Nobody, Runtime};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

use crate::{Completed, JobResult, Lease, Queue};

/// How a worker runs.
#[derive(Debug, Clone)]
pub struct WorkerSettings {
    /// Delegations run at once.
    pub concurrency: usize,
    /// How often a running delegation's lease is renewed.
    pub heartbeat: Duration,
    /// How long a job that failed for a reason another try may not have waits before it is
    /// delivered again.
    pub retry_delay: Duration,
    /// This worker's name (host and pid), in leases and results.
    pub name: String,
}

/// What a worker did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WorkerSummary {
    /// Delegations run to a report and sent back.
    pub completed: usize,
    /// Jobs given back to be delivered again (transient failures, the worker stopping).
    pub released: usize,
    /// Jobs dead-lettered (unreadable, or failing on their last delivery).
    pub dead: usize,
}

/// Counts kept while the loop runs.
/// Told of each job a worker finished, with its report, before the report is sent back.
pub type Finished = dyn Fn(&JobResult) + Send + Sync;

#[derive(Default)]
struct Tally {
    completed: std::sync::atomic::AtomicUsize,
    released: std::sync::atomic::AtomicUsize,
    dead: std::sync::atomic::AtomicUsize,
}

/// Runs jobs from `queue` until `stop` resolves: then no new job is leased, and running ones are
/// cancelled and given back to the queue (another worker runs them from the start). `finished`
/// is told of each job this worker finished (not of one it gave back). Problems (an unreachable queue, a report that cannot be sent)
/// are `tracing` warnings; each finished job is an `info` event.
pub async fn work(
    queue: Arc<dyn Queue>,
    runtime: Arc<Runtime>,
    settings: WorkerSettings,
    finished: Arc<Finished>,
    stop: impl Future<Output = ()>,
) -> WorkerSummary {
    let tally = Arc::new(Tally::default());
    let slots = Arc::new(Semaphore::new(settings.concurrency.max(1)));
    let (stopping, _) = tokio::sync::watch::channel(false);
    let mut running = JoinSet::new();
    tokio::pin!(stop);
    loop {
        let permit = tokio::select! {
            () = &mut stop => break,
            permit = Arc::clone(&slots).acquire_owned() => permit.expect("the semaphore stays open"),
        };
        let lease = tokio::select! {
            () = &mut stop => break,
            lease = queue.lease(&settings.name, Duration::from_millis(500)) => lease,
        };
        let lease = match lease {
            Ok(Some(lease)) => lease,
            Ok(None) => continue,
            Err(e) => {
                // The queue is unreachable or locked: say so, wait, try again.
                tracing::warn!(
                    "worker: cannot lease from {}: {e}; retrying",
                    queue.describe()
                );
                tokio::time::sleep(settings.retry_delay).await;
                continue;
            }
        };
        let queue = Arc::clone(&queue);
        let runtime = Arc::clone(&runtime);
        let finished = Arc::clone(&finished);
        let tally = Arc::clone(&tally);
        let settings = settings.clone();
        let mut stopped = stopping.subscribe();
        running.spawn(async move {
            let _permit = permit;
            run_one(
                &*queue,
                &runtime,
                &settings,
                &*finished,
                &tally,
                lease,
                async move {
                    let _ = stopped.wait_for(|s| *s).await;
                },
            )
            .await;
        });
        // Reap what finished, so the set does not grow with the jobs run.
        while running.try_join_next().is_some() {}
    }
    let _ = stopping.send(true);
    while running.join_next().await.is_some() {}
    WorkerSummary {
        completed: tally.completed.load(std::sync::atomic::Ordering::SeqCst),
        released: tally.released.load(std::sync::atomic::Ordering::SeqCst),
        dead: tally.dead.load(std::sync::atomic::Ordering::SeqCst),
    }
}

async fn run_one(
    queue: &dyn Queue,
    runtime: &Runtime,
    settings: &WorkerSettings,
    finished: &Finished,
    tally: &Tally,
    lease: Lease,
    stopped: impl Future<Output = ()>,
) {
    use std::sync::atomic::Ordering::SeqCst;
    let job = match &lease.job {
        Ok(job) => job.clone(),
        Err(why) => {
            tracing::warn!("worker: dead-lettering an unreadable job: {why}");
            if let Err(e) = queue.dead_letter(&lease, why).await {
                tracing::warn!("worker: cannot dead-letter it: {e}");
            }
            tally.dead.fetch_add(1, SeqCst);
            return;
        }
    };
    let assembler = Assembler::new(job.overrides.clone());
    let label = format!("{}:{}", job.source.display(), job.line);
    let delegation = match assembler.json(&job.source, &label, job.delegation.clone(), &job.base) {
        Ok(delegation) => delegation,
        Err(e) => {
            // The submitter checked it; failing here is this machine's (a file missing, a
            // policy it cannot read): another delivery, perhaps elsewhere, may do better.
            give_back(
                queue,
                settings,
                tally,
                &lease,
                &format!("{label}: {}", e.message()),
            )
            .await;
            return;
        }
    };
    let heartbeat = async {
        loop {
            tokio::time::sleep(settings.heartbeat).await;
            if let Err(e) = queue.heartbeat(&lease).await {
                tracing::warn!("worker: cannot renew the lease of {}: {e}", job.id);
            }
        }
    };
    let cancelled = std::sync::atomic::AtomicBool::new(false);
    let stop = async {
        stopped.await;
        cancelled.store(true, SeqCst);
        "the worker is stopping".to_owned()
    };
    let run = runtime.run_as(job.id.clone(), &delegation, &Nobody, stop);
    let report = tokio::select! {
        report = run => report,
        () = heartbeat => unreachable!("the heartbeat never ends"),
    };
    if cancelled.load(SeqCst) {
        // Not this delegation's outcome: the worker stopped under it. Someone runs it again.
        if let Err(e) = queue
            .release(
                &lease,
                Duration::ZERO,
                "the worker stopped while running it",
            )
            .await
        {
            tracing::warn!("worker: cannot give {} back: {e}", job.id);
        }
        tally.released.fetch_add(1, SeqCst);
        return;
    }
    let result = JobResult {
        id: job.id.clone(),
        batch: job.batch.clone(),
        line: job.line,
        report,
        worker: settings.name.clone(),
    };
    tracing::info!(
        job.id = %job.id,
        job.line = job.line,
        outcome = result.report.outcome.as_str(),
        attempts = result.report.attempts.len(),
        "worker: job finished"
    );
    finished(&result);
    // The report must reach the queue: a few tries, then the lease runs out and the job is
    // delivered again (at least once).
    for attempt in 0..5u32 {
        match queue.complete(&lease, &result).await {
            Ok(Completed::Sent) => {
                tally.completed.fetch_add(1, SeqCst);
                return;
            }
            Ok(Completed::DeadLettered(why)) => {
                tracing::warn!("worker: {} is dead-lettered: {why}", job.id);
                tally.dead.fetch_add(1, SeqCst);
                return;
            }
            Err(e) => {
                tracing::warn!("worker: cannot send the report of {} back: {e}", job.id);
                tokio::time::sleep(settings.retry_delay * (attempt + 1)).await;
            }
        }
    }
}

/// Gives a job back for another try, or dead-letters it on its last delivery.
async fn give_back(
    queue: &dyn Queue,
    settings: &WorkerSettings,
    tally: &Tally,
    lease: &Lease,
    why: &str,
) {
    use std::sync::atomic::Ordering::SeqCst;
    tracing::warn!("worker: job failed (delivery {}): {why}", lease.deliveries);
    if let Err(e) = queue.release(lease, settings.retry_delay, why).await {
        tracing::warn!("worker: cannot give it back: {e}");
    }
    tally.released.fetch_add(1, SeqCst);
}
