//! A submitter's loop: queue a batch's delegations under fresh ids, then hand back each one's
//! report (or dead letter) as it arrives — once per delegation, however often it was delivered —
//! acknowledging it only after the caller has taken it.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use harness::batch::{BatchItem, BatchOutcome, BatchSummary};
use harness::{Error, ErrorKind, Overrides};

use crate::{JOB_SCHEMA, Job, Outcome, Queue};

/// What [`follow`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Followed {
    /// The totals, as a local batch counts them.
    pub summary: BatchSummary,
    /// Results that came back twice (a delegation run again after its worker lost the lease)
    /// and were dropped.
    pub duplicates: usize,
    /// Delegations still out when the wait was stopped (they stay queued).
    pub pending: usize,
}

/// Queues every readable item of `items` on `queue` as batch `batch` (malformed ones go straight
/// to `sink`, as a local batch reports them), then waits for their results and hands each to
/// `sink` as a [`BatchOutcome`] — a dead letter as an error of kind `delegate` naming why — and
/// acknowledges it. When `stop` resolves, it stops waiting; what is still out stays queued.
///
/// # Errors
/// [`ErrorKind::Config`] when the queue refuses a job or cannot be read.
pub async fn follow<I, F>(
    queue: Arc<dyn Queue>,
    items: I,
    batch: &str,
    overrides: &Overrides,
    stop: impl Future<Output = ()>,
    mut sink: F,
) -> harness::Result<Followed>
where
    I: IntoIterator<Item = (BatchItem, std::path::PathBuf, std::path::PathBuf)>,
    F: FnMut(BatchOutcome),
{
    let mut followed = Followed::default();
    let mut pending: HashMap<String, usize> = HashMap::new();
    for (item, source, base) in items {
        followed.summary.read += 1;
        let entry = match (item.delegation, item.entry) {
            (Err(e), _) => {
                followed.summary.malformed += 1;
                sink(BatchOutcome {
                    line: item.line,
                    report: Err(e),
                    trace_id: None,
                });
                continue;
            }
            (Ok(_), Some(entry)) => entry,
            (Ok(_), None) => {
                return Err(Error::config(
                    "internal error: a queued batch must keep its entries (BatchReader::keep_entries)",
                ));
            }
        };
        let job = Job {
            schema: JOB_SCHEMA.to_owned(),
            id: harness::new_id(),
            batch: batch.to_owned(),
            line: item.line,
            source,
            base,
            delegation: entry,
            overrides: overrides.clone(),
        };
        queue.enqueue(&job).await?;
        pending.insert(job.id, item.line);
    }
    tokio::pin!(stop);
    while !pending.is_empty() {
        let deliveries = tokio::select! {
            () = &mut stop => break,
            found = queue.results(batch, Duration::from_millis(500)) => found?,
        };
        for delivery in deliveries {
            let (id, outcome) = match &delivery.outcome {
                Outcome::Done(result) => (result.id.clone(), {
                    let result = result.as_ref().clone();
                    BatchOutcome {
                        line: result.line,
                        trace_id: result.trace_id,
                        report: Ok(result.report),
                    }
                }),
                Outcome::Dead(dead) => (
                    dead.id.clone().unwrap_or_default(),
                    BatchOutcome {
                        line: dead.line.unwrap_or(0),
                        trace_id: None,
                        report: Err(Error::new(
                            ErrorKind::Delegate,
                            format!(
                                "dead-lettered after {} deliver{}: {}",
                                dead.deliveries,
                                if dead.deliveries == 1 { "y" } else { "ies" },
                                dead.reason
                            ),
                        )),
                    },
                ),
            };
            if pending.remove(&id).is_some() {
                match &outcome.report {
                    Ok(_) => followed.summary.finished += 1,
                    Err(_) => followed.summary.malformed += 1,
                }
                sink(outcome);
            } else {
                followed.duplicates += 1;
            }
            queue.acknowledge(&delivery).await?;
        }
    }
    followed.pending = pending.len();
    followed.summary.stopped = followed.pending > 0;
    Ok(followed)
}
