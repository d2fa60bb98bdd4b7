//! A submitter's loop: queue a batch's delegations under fresh ids, then hand back each one's
//! report (or dead letter) as it arrives — once per delegation, however often it was delivered —
//! acknowledging it only after the caller has taken it.

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use harness::batch::{BatchItem, BatchOutcome, BatchReader, BatchSettings, BatchSummary};
use harness::{Error, Overrides, Runtime};

use crate::{BoxFuture, Delivery, JOB_SCHEMA, Job, Outcome, Queue};

/// Resolves once a sink has stored what it was handed: `Err` with why when it could not, and
/// then the result is not acknowledged (it stays in the queue, to be collected again).
pub type Stored = BoxFuture<'static, std::result::Result<(), String>>;

/// How long a submitter waits without any report before saying so.
const QUIET_HINT: Duration = Duration::from_secs(15);

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
    /// Results the sink could not store, left unacknowledged in the queue.
    pub unstored: usize,
    /// For each delegation that came back, the time from queuing it to its report arriving,
    /// shortest first.
    pub latencies: Vec<Duration>,
}

impl Followed {
    /// The `p`th percentile (0–100) of [`Followed::latencies`], nearest rank; `None` when
    /// nothing came back.
    pub fn percentile(&self, p: f64) -> Option<Duration> {
        if self.latencies.is_empty() {
            return None;
        }
        let rank = (p / 100.0 * self.latencies.len() as f64).ceil() as usize;
        Some(self.latencies[rank.clamp(1, self.latencies.len()) - 1])
    }
}

impl Followed {
    /// What the operator should know once following ended: reports that came back twice, runs
    /// still queued (with `follow_later`, the command that follows them), reports left in the
    /// queue, and how long reports took to come back.
    pub fn notes(&self, batch: &str, follow_later: &str) -> Vec<String> {
        let mut notes = Vec::new();
        if self.duplicates > 0 {
            notes.push(format!(
                "{} report(s) came back twice (a worker lost its lease and the delegation ran again); each delegation was recorded once",
                self.duplicates
            ));
        }
        if self.pending > 0 {
            notes.push(format!(
                "{} delegation(s) still queued; follow them later with: {follow_later}",
                self.pending
            ));
        }
        if self.unstored > 0 {
            notes.push(format!(
                "{} report(s) could not be recorded and stay in the queue (take them later with --resume {batch})",
                self.unstored
            ));
        }
        if let (Some(p50), Some(p99)) = (self.percentile(50.0), self.percentile(99.0)) {
            notes.push(format!(
                "queued to reported: p50 {:.1} ms, p99 {:.1} ms",
                p50.as_secs_f64() * 1e3,
                p99.as_secs_f64() * 1e3
            ));
        }
        notes
    }
}

/// A batch's id on a queue: `b-` and hex digits, safe in a NATS subject and a consumer name. A
/// resumed batch is named by the id its first submitter printed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchId(String);

impl BatchId {
    /// A fresh id.
    pub fn new() -> Self {
        BatchId(harness::new_id().replacen("d-", "b-", 1))
    }

    /// The id a batch was queued under, as the operator gives it to `--resume`.
    ///
    /// # Errors
    /// [`harness::ErrorKind::Config`] for text that is not a batch id.
    pub fn parse(text: &str) -> harness::Result<Self> {
        let hex = text.strip_prefix("b-").unwrap_or_default();
        if hex.is_empty() || !hex.chars().all(|c| c.is_ascii_hexdigit()) {
            return Err(Error::config(format!(
                "--resume {text:?}: not a batch id; give the `b-…` id `harness batch --queue` printed"
            )));
        }
        Ok(BatchId(text.to_owned()))
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl Default for BatchId {
    fn default() -> Self {
        BatchId::new()
    }
}

impl std::fmt::Display for BatchId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Where a batch's delegations run.
pub enum Target<'a> {
    /// In this process, on `runtime`.
    Here {
        /// The runtime the delegations run on.
        runtime: &'a Runtime,
        /// How many at once, and the grace after a stop.
        settings: BatchSettings,
    },
    /// On workers: queued on `queue` and followed as `plan` says.
    Queue {
        /// The queue the workers take jobs from.
        queue: Arc<dyn Queue>,
        /// The batch's id and how it is followed.
        plan: Plan<'a>,
    },
}

/// What a batch did, wherever it ran.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ran {
    /// The totals.
    pub summary: BatchSummary,
    /// With a queue: duplicates, what is still out, how long reports took.
    pub followed: Option<Followed>,
}

/// Runs every entry `reader` reads where `target` says: here ([`harness::batch::run_batch`]) or
/// on workers ([`follow`]), handing each outcome to `sink` as it completes — the same outcomes,
/// in the same shape, either way. When `stop` resolves, a batch here gives its running
/// delegations the grace period and then cancels them; a queued one stops waiting.
///
/// # Errors
/// [`harness::ErrorKind::Config`] when the queue refuses a job or cannot be read.
pub async fn run_batch<F>(
    reader: BatchReader,
    target: Target<'_>,
    stop: impl Future<Output = ()>,
    mut sink: F,
) -> harness::Result<Ran>
where
    F: FnMut(BatchOutcome) -> Stored,
{
    match target {
        Target::Here { runtime, settings } => {
            // The sink queues what it stores before it returns; here nothing waits on it.
            let sink = |outcome| drop(sink(outcome));
            let summary = harness::batch::run_batch(runtime, reader, &settings, stop, sink).await;
            Ok(Ran {
                summary,
                followed: None,
            })
        }
        Target::Queue { queue, plan } => {
            let absolute =
                |p: &std::path::Path| std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf());
            let (file, base) = (absolute(reader.source()), absolute(reader.base()));
            let items = reader
                .keep_entries()
                .map(move |item| (item, file.clone(), base.clone()));
            let followed = follow(queue, items, &plan, stop, sink).await?;
            Ok(Ran {
                summary: followed.summary,
                followed: Some(followed),
            })
        }
    }
}

/// What [`follow`] queues and how.
pub struct Plan<'a> {
    /// The batch id (a [`BatchId`]): whose results subject the reports come back on.
    pub batch: &'a str,
    /// What the submitter set over each file.
    pub overrides: &'a Overrides,
    /// True to continue a batch queued before (by a submitter that stopped or died): first the
    /// reports that came back while no one was following are taken, then the entries not yet
    /// reported are queued again — under the same ids, so a job still queued is not queued
    /// twice — and followed.
    pub resume: bool,
    /// True for a delegation id already recorded: not handed to the sink, queued or waited
    /// for again.
    pub recorded: &'a (dyn Fn(&str) -> bool + Send + Sync),
}

/// The id of the delegation on line `line` of batch `batch`: the same every time, so that a
/// batch resumed queues and records each delegation under the id it was first queued with.
pub fn job_id(batch: &str, line: usize) -> String {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(format!("{batch}:{line}").as_bytes());
    let mut id = String::with_capacity(18);
    id.push_str("d-");
    for byte in &digest[..8] {
        id.push_str(&format!("{byte:02x}"));
    }
    id
}

/// Queues every readable item of `items` on `queue` as batch `plan.batch` (malformed ones go
/// straight to `sink`, as a local batch reports them), then waits for their results and hands
/// each to `sink` as a [`BatchOutcome`] — a dead letter as the report of a run that ended in an
/// error of kind `delegate` naming why — and acknowledges it once the future `sink` returned says it is stored. When `stop`
/// resolves, it stops waiting; what is still out stays queued.
///
/// # Errors
/// [`harness::ErrorKind::Config`] when the queue refuses a job or cannot be read.
pub async fn follow<I, F>(
    queue: Arc<dyn Queue>,
    items: I,
    plan: &Plan<'_>,
    stop: impl Future<Output = ()>,
    mut sink: F,
) -> harness::Result<Followed>
where
    I: IntoIterator<Item = (BatchItem, std::path::PathBuf, std::path::PathBuf)>,
    F: FnMut(BatchOutcome) -> Stored,
{
    let mut state = State {
        followed: Followed::default(),
        pending: HashMap::new(),
        seen: HashSet::new(),
    };
    let mut outage = Outage::default();
    tokio::pin!(stop);
    if plan.resume {
        // What came back while no one was following: taken first, so that it is not run again.
        loop {
            let deliveries = tokio::select! {
                () = &mut stop => break,
                found = outage.read(&*queue, plan.batch, Duration::from_millis(250)) => found?,
            };
            if deliveries.is_empty() {
                break;
            }
            state.take(&*queue, plan, deliveries, &mut sink).await?;
        }
    }
    for (item, source, base) in items {
        let entry = match (item.delegation, item.entry) {
            (Err(e), _) => {
                state.followed.summary.read += 1;
                state.followed.summary.malformed += 1;
                // Nothing to store for an entry that never ran.
                drop(sink(BatchOutcome {
                    line: item.line,
                    report: Err(e),
                }));
                continue;
            }
            (Ok(_), Some(entry)) => entry,
            (Ok(_), None) => {
                return Err(Error::config(
                    "internal error: a queued batch must keep its entries (BatchReader::keep_entries)",
                ));
            }
        };
        let id = job_id(plan.batch, item.line);
        if state.seen.contains(&id) || (plan.recorded)(&id) {
            continue;
        }
        state.followed.summary.read += 1;
        let job = Job {
            schema: JOB_SCHEMA.to_owned(),
            id,
            batch: plan.batch.to_owned(),
            line: item.line,
            source,
            base,
            delegation: entry,
            overrides: plan.overrides.clone(),
        };
        let kind = job.delegation["delegate"]["kind"]
            .as_str()
            .unwrap_or("unknown")
            .to_owned();
        let queued = Instant::now();
        queue.enqueue(&job).await?;
        state.pending.insert(job.id, (queued, kind));
    }
    let mut heard = Instant::now();
    let mut hinted = false;
    while !state.pending.is_empty() {
        let deliveries = tokio::select! {
            () = &mut stop => break,
            found = outage.read(&*queue, plan.batch, Duration::from_millis(500)) => found?,
        };
        if !deliveries.is_empty() {
            heard = Instant::now();
        } else if !hinted && heard.elapsed() >= QUIET_HINT {
            hinted = true;
            tracing::warn!(
                "no reports for {}s with {} delegation(s) out: is a worker running? (harness worker --queue {}); Ctrl-C stops waiting, and --resume {} takes it up again",
                QUIET_HINT.as_secs(),
                state.pending.len(),
                queue.describe(),
                plan.batch
            );
        }
        state.take(&*queue, plan, deliveries, &mut sink).await?;
    }
    let mut followed = state.followed;
    followed.latencies.sort_unstable();
    followed.pending = state.pending.len();
    followed.summary.stopped = followed.pending > 0;
    Ok(followed)
}

/// What [`follow`] keeps while it waits.
struct State {
    followed: Followed,
    /// Queued by this call and not reported yet, with when and its delegate kind.
    pending: HashMap<String, (Instant, String)>,
    /// Handed to the sink by this call.
    seen: HashSet<String>,
}

impl State {
    /// Hands what came back to `sink` — once per delegation — and acknowledges each delivery
    /// once the sink has stored it.
    async fn take<F>(
        &mut self,
        queue: &dyn Queue,
        plan: &Plan<'_>,
        deliveries: Vec<Delivery>,
        sink: &mut F,
    ) -> harness::Result<()>
    where
        F: FnMut(BatchOutcome) -> Stored,
    {
        let unstored = settle(queue, deliveries, |outcome| {
            let id = outcome.id().unwrap_or_default().to_owned();
            if self.seen.contains(&id) || (plan.recorded)(&id) {
                self.followed.duplicates += 1;
                return None;
            }
            let kind = match self.pending.remove(&id) {
                Some((queued, kind)) => {
                    self.followed.latencies.push(queued.elapsed());
                    kind
                }
                None => {
                    // Queued by an earlier submitter of this batch.
                    self.followed.summary.read += 1;
                    "unknown".to_owned()
                }
            };
            let outcome = batch_outcome(outcome, &kind);
            match &outcome.report {
                Ok(_) => self.followed.summary.finished += 1,
                Err(_) => self.followed.summary.malformed += 1,
            }
            self.seen.insert(id);
            Some(sink(outcome))
        })
        .await;
        self.followed.unstored += unstored.len();
        Ok(())
    }
}

/// How long a submitter waits out a queue it cannot read from (a server restarting, a network
/// partition) before it gives up; the batch can be taken up again with `--resume`.
const MAX_OUTAGE: Duration = Duration::from_secs(300);

/// A queue that is away: how long, and how long to wait before asking again.
#[derive(Default)]
struct Outage {
    since: Option<Instant>,
    wait: Duration,
}

impl Outage {
    /// The reports of `batch` that came back (waiting up to `wait`), asking again while the
    /// queue is away — after 200 ms, doubling up to 5 s — and giving its error back once it has
    /// been away for [`MAX_OUTAGE`].
    async fn read(
        &mut self,
        queue: &dyn Queue,
        batch: &str,
        wait: Duration,
    ) -> harness::Result<Vec<Delivery>> {
        loop {
            match queue.results(batch, wait).await {
                Ok(deliveries) => {
                    self.since = None;
                    self.wait = Duration::ZERO;
                    return Ok(deliveries);
                }
                Err(error) => {
                    let since = *self.since.get_or_insert_with(Instant::now);
                    if since.elapsed() >= MAX_OUTAGE {
                        return Err(error);
                    }
                    self.wait =
                        (self.wait * 2).clamp(Duration::from_millis(200), Duration::from_secs(5));
                    tracing::warn!(
                        "cannot read reports from {} ({}); trying again in {} ms",
                        queue.describe(),
                        error.message(),
                        self.wait.as_millis()
                    );
                    tokio::time::sleep(self.wait).await;
                }
            }
        }
    }
}

/// Acknowledges each of `deliveries` once `store` has stored what it brought: `store` returns the
/// future of that storing, or `None` for one already stored (then it is acknowledged at once).
/// All are stored together (the journal writes what arrives together in one transaction), then
/// each is acknowledged — a result is never dropped from the queue before it is recorded. One
/// that could not be stored is left in the queue, to be delivered again; returns why, for each.
/// An acknowledgement the queue does not take (a server restarting) is a warning: the result is
/// delivered again and recognised as recorded.
pub async fn settle(
    queue: &dyn Queue,
    deliveries: Vec<Delivery>,
    mut store: impl FnMut(&Outcome) -> Option<Stored>,
) -> Vec<String> {
    let storing: Vec<Stored> = deliveries
        .iter()
        .map(|d| store(&d.outcome).unwrap_or_else(|| Box::pin(async { Ok(()) })))
        .collect();
    let stored = futures_util::future::join_all(storing).await;
    let mut left = Vec::new();
    for (delivery, stored) in deliveries.iter().zip(stored) {
        match stored {
            Ok(()) => {
                if let Err(e) = queue.acknowledge(delivery).await {
                    tracing::warn!(
                        "a recorded report was not acknowledged ({}); it will come again and be recognised",
                        e.message()
                    );
                }
            }
            Err(why) => left.push(why),
        }
    }
    left
}

/// A delivery as a local batch reports it: a dead letter of a delegation of `kind` is its run,
/// recorded like any other (outcome `error`, kind `delegate`, naming why); one naming no
/// delegation is a malformed entry.
fn batch_outcome(outcome: &Outcome, kind: &str) -> BatchOutcome {
    match outcome {
        Outcome::Done(result) => {
            let result = result.as_ref().clone();
            BatchOutcome {
                line: result.line,
                report: Ok(result.report),
            }
        }
        Outcome::Dead(dead) => BatchOutcome {
            line: dead.line.unwrap_or(0),
            report: match &dead.id {
                Some(id) => Ok(harness::Report::not_run(id.clone(), kind, dead.error())),
                None => Err(dead.error()),
            },
        },
    }
}
