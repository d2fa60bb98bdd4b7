//! Scale-out for `harness`: delegations queued as jobs, run by `harness worker` processes on one
//! machine or many, their reports sent back to whoever queued them, which records each once.
//!
//! - [`Queue`]: the one interface, with two implementations — [`SqliteQueue`] (`sqlite:PATH`,
//!   the embedded default: a lease table several processes on one machine share) and a NATS
//!   JetStream work queue (`nats://HOST:PORT`) for many machines.
//! - [`work`]: a worker's loop — lease, run, heartbeat, send the report back; a job that cannot
//!   be read is dead-lettered with the reason, a transient failure is retried later.
//! - [`follow`]: a submitter's loop — enqueue a batch, then hand each report back as it arrives,
//!   exactly once per delegation whatever was delivered twice.
//!
//! Delivery is at least once: a worker that dies mid-delegation loses its lease, and the job is
//! run again elsewhere. Recording is keyed by the delegation id assigned at enqueue time, so a
//! delegation delivered twice is recorded once.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use harness::{Error, Overrides, Report, Result};
use serde::{Deserialize, Serialize};
use serde_json::Value;

mod nats;
mod sqlite;
mod submit;
mod worker;

pub use nats::NatsQueue;
pub use sqlite::SqliteQueue;
pub use submit::{BatchId, Followed, Plan, Ran, Stored, Target, follow, job_id, run_batch, settle};
pub use worker::{Finished, WorkerSettings, WorkerSummary, work};

/// A boxed future, as the [`Queue`] methods return.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// The schema of a [`Job`]'s JSON.
pub const JOB_SCHEMA: &str = "harness.job/v1";

/// One queued delegation: everything a worker needs to assemble and run it as the submitter
/// would have.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Job {
    /// [`JOB_SCHEMA`].
    pub schema: String,
    /// The delegation id, assigned when it was queued (`d-` and 16 hex digits): the key its
    /// report is recorded under, however often it is delivered.
    pub id: String,
    /// The batch (or service) it belongs to: whose results subject its report goes to.
    pub batch: String,
    /// The 1-based line (or index) of its batch entry.
    pub line: usize,
    /// Where it was read from (for messages and the journal).
    pub source: PathBuf,
    /// The directory its relative paths are resolved against.
    pub base: PathBuf,
    /// The delegation file's keys, as JSON.
    pub delegation: Value,
    /// What the submitter set over the file.
    pub overrides: Overrides,
}

/// What a worker sends back for a job.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct JobResult {
    /// The delegation id.
    pub id: String,
    /// The batch it belongs to.
    pub batch: String,
    /// Its batch line.
    pub line: usize,
    /// How it went (with the trace id of its spans, when the worker exported them).
    pub report: Report,
    /// The worker that ran it.
    pub worker: String,
}

/// What became of a finished job's result ([`Queue::complete`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Completed {
    /// Sent back; the job is acknowledged.
    Sent,
    /// Too large for the queue to carry: the job is dead-lettered with this reason instead
    /// (running it again would only end the same way).
    DeadLettered(String),
}

/// A job that will never run: its message could not be read, or it failed on every delivery.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeadLetter {
    /// The delegation id, when the message had one.
    pub id: Option<String>,
    /// The batch it belongs to, when known.
    pub batch: Option<String>,
    /// Its batch line, when known.
    pub line: Option<usize>,
    /// Why.
    pub reason: String,
    /// How many times it was delivered.
    pub deliveries: u32,
}

impl DeadLetter {
    /// The error a dead letter stands for: kind `delegate`, naming why and how often it was
    /// delivered.
    pub fn error(&self) -> Error {
        Error::new(
            harness::ErrorKind::Delegate,
            format!(
                "dead-lettered after {} deliver{}: {}",
                self.deliveries,
                if self.deliveries == 1 { "y" } else { "ies" },
                self.reason
            ),
        )
    }
}

/// Why a job is dead-lettered once its deliveries ran out: the last failure given back, or —
/// when none was — that its workers kept dying under it.
pub(crate) fn exhausted(deliveries: u32, last: Option<&str>) -> String {
    match last {
        Some(last) => format!("failed on each of {deliveries} deliveries; the last: {last}"),
        None => format!(
            "delivered {deliveries} times without finishing (its workers died or lost their leases each time)"
        ),
    }
}

/// What came back for a batch.
#[derive(Debug, Clone)]
pub enum Outcome {
    /// A report.
    Done(Box<JobResult>),
    /// A dead letter.
    Dead(DeadLetter),
}

impl Outcome {
    /// The delegation id it is about (a dead letter of an unreadable message has none).
    pub fn id(&self) -> Option<&str> {
        match self {
            Outcome::Done(result) => Some(&result.id),
            Outcome::Dead(dead) => dead.id.as_deref(),
        }
    }
}

/// A job a worker holds, until it completes, releases or dead-letters it.
#[derive(Debug)]
pub struct Lease {
    /// The job, or why its message cannot be read (then it is dead-lettered).
    pub job: std::result::Result<Job, String>,
    /// How many times it has been delivered, this time included.
    pub deliveries: u32,
    /// The queue's own handle.
    pub(crate) handle: Handle,
}

/// Each queue's handle on a lease.
#[derive(Debug)]
pub(crate) enum Handle {
    /// A row of the SQLite queue, leased under a token.
    Sqlite { id: String, token: String },
    /// A JetStream message.
    Nats(Box<async_nats::jetstream::Message>),
}

/// A result (or dead letter) delivered to its submitter, to acknowledge once recorded.
#[derive(Debug)]
pub struct Delivery {
    /// What came back.
    pub outcome: Outcome,
    pub(crate) handle: Handle,
}

/// A queue of delegations.
pub trait Queue: Send + Sync {
    /// Where it is, for messages (`sqlite:/path`, `nats://host:port`).
    fn describe(&self) -> String;

    /// Queues `job`; queuing the same id again changes nothing.
    fn enqueue<'a>(&'a self, job: &'a Job) -> BoxFuture<'a, Result<()>>;

    /// Leases the next job for `worker`, waiting up to `wait` for one; `None` when none came.
    fn lease<'a>(&'a self, worker: &'a str, wait: Duration)
    -> BoxFuture<'a, Result<Option<Lease>>>;

    /// Says the job is still being worked on: extends the lease.
    fn heartbeat<'a>(&'a self, lease: &'a Lease) -> BoxFuture<'a, Result<()>>;

    /// Sends the job's result back and acknowledges the job (after the result is stored); a
    /// result the queue cannot carry dead-letters the job instead, saying why.
    fn complete<'a>(
        &'a self,
        lease: &'a Lease,
        result: &'a JobResult,
    ) -> BoxFuture<'a, Result<Completed>>;

    /// Gives the job back to be delivered again after `delay` (a transient failure, a worker
    /// stopping); `why` is kept, and becomes the dead letter's reason when deliveries run out.
    fn release<'a>(
        &'a self,
        lease: &'a Lease,
        delay: Duration,
        why: &'a str,
    ) -> BoxFuture<'a, Result<()>>;

    /// Gives up on the job for good, recording why.
    fn dead_letter<'a>(&'a self, lease: &'a Lease, reason: &'a str) -> BoxFuture<'a, Result<()>>;

    /// Returns what came back for `batch` and has not been acknowledged, waiting up to `wait`
    /// for something.
    fn results<'a>(
        &'a self,
        batch: &'a str,
        wait: Duration,
    ) -> BoxFuture<'a, Result<Vec<Delivery>>>;

    /// Acknowledges a result once it is recorded: it is not delivered again.
    fn acknowledge<'a>(&'a self, delivery: &'a Delivery) -> BoxFuture<'a, Result<()>>;
}

/// How a queue treats its jobs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueOptions {
    /// How long a job stays with a worker that stopped sending heartbeats.
    pub lease: Duration,
    /// Deliveries after which a job is dead-lettered.
    pub max_deliver: u32,
}

impl Default for QueueOptions {
    fn default() -> Self {
        QueueOptions {
            lease: sqlite::DEFAULT_LEASE,
            max_deliver: sqlite::DEFAULT_MAX_DELIVER,
        }
    }
}

/// Opens the queue at `url`: `sqlite:PATH` (created when missing) or `nats://HOST:PORT` (a
/// NATS server with JetStream; the streams are created when missing).
///
/// # Errors
/// [`harness::ErrorKind::Config`] for an unknown scheme or a queue that cannot be opened.
pub async fn open(url: &str, options: QueueOptions) -> Result<Arc<dyn Queue>> {
    if let Some(path) = url.strip_prefix("sqlite:") {
        let path = path.strip_prefix("//").unwrap_or(path);
        if path.is_empty() {
            return Err(Error::config(format!(
                "--queue {url}: give a database path, e.g. sqlite:.harness/queue.db"
            )));
        }
        let queue = SqliteQueue::open(std::path::Path::new(path))
            .await?
            .with_lease(options.lease)
            .with_max_deliver(options.max_deliver);
        return Ok(Arc::new(queue));
    }
    if url.starts_with("nats://") || url.starts_with("tls://") {
        return Ok(Arc::new(NatsQueue::open(url, options).await?));
    }
    Err(Error::config(format!(
        "--queue {url}: unknown queue; use sqlite:PATH (one machine) or nats://HOST:PORT (many)"
    )))
}

/// The name of this worker process: host and pid, for leases and messages.
pub fn worker_name() -> String {
    let host = std::env::var("HOSTNAME")
        .ok()
        .or_else(|| std::fs::read_to_string("/etc/hostname").ok())
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".to_owned());
    format!("{host}:{}", std::process::id())
}

/// Reads a job from a message body: its schema, then its fields.
///
/// # Errors
/// Why the body is not a job, for the dead letter.
pub fn parse_job(body: &[u8]) -> std::result::Result<Job, String> {
    let value: Value = serde_json::from_slice(body).map_err(|e| {
        format!(
            "the message is not JSON ({e}): {}",
            String::from_utf8_lossy(&body[..body.len().min(200)])
        )
    })?;
    match value.get("schema").and_then(Value::as_str) {
        Some(JOB_SCHEMA) => {}
        Some(other) => {
            return Err(format!(
                "the message is a {other:?} job; this worker reads {JOB_SCHEMA}"
            ));
        }
        None => {
            return Err(format!(
                "the message has no `schema` (expected {JOB_SCHEMA})"
            ));
        }
    }
    serde_json::from_value(value).map_err(|e| format!("the message is not a {JOB_SCHEMA} job: {e}"))
}
