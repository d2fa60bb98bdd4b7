//! The queue for many machines: NATS JetStream. Jobs go to a work-queue stream (`HARNESS_JOBS`,
//! subject `harness.jobs`) with `Nats-Msg-Id` = the delegation id (a job queued twice is stored
//! once) and the submitter's `traceparent`; workers share one durable pull consumer with explicit
//! acks: `Progress` while a delegation runs, an ack only after its result is stored, `Nak` with a
//! delay on a transient failure, `Term` plus a dead letter when deliveries run out. Results and
//! dead letters go to `harness.results.<batch>` in the `HARNESS_RESULTS` stream, where the
//! submitter reads them with a durable consumer of its own and acknowledges each once recorded.

use std::time::Duration;

use async_nats::HeaderMap;
use async_nats::jetstream::{self, AckKind, consumer, stream};
use futures_util::StreamExt;
use harness::{Error, Result};
use serde::{Deserialize, Serialize};

use crate::{
    BoxFuture, Completed, DeadLetter, Delivery, Handle, Job, JobResult, Lease, Outcome, Queue,
    QueueOptions, parse_job,
};

const JOBS_STREAM: &str = "HARNESS_JOBS";
const JOBS_SUBJECT: &str = "harness.jobs";
const WORKERS: &str = "harness-workers";
const RESULTS_STREAM: &str = "HARNESS_RESULTS";
/// Dead letters of messages that name no batch.
const DEAD_SUBJECT: &str = "harness.dead";
/// How long a submitter's results consumer outlives its last read.
const SUBMITTER_IDLE: Duration = Duration::from_secs(3600);

/// What travels on a results subject.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
enum Envelope {
    Done { result: Box<JobResult> },
    Dead { dead: DeadLetter },
}

/// A JetStream queue (`nats://HOST:PORT`).
#[derive(Debug)]
pub struct NatsQueue {
    url: String,
    js: jetstream::Context,
    options: QueueOptions,
    /// The workers' consumer, looked up once.
    workers: tokio::sync::OnceCell<consumer::PullConsumer>,
    /// Each batch's results consumer, looked up once.
    submitters: tokio::sync::Mutex<std::collections::HashMap<String, consumer::PullConsumer>>,
}

fn fail(url: &str, what: &str, e: impl std::fmt::Display) -> Error {
    Error::config(format!("queue {url}: {what}: {e}"))
}

impl NatsQueue {
    /// Connects to `url`, retrying with backoff for about half a minute, and makes sure the
    /// streams exist.
    ///
    /// # Errors
    /// [`harness::ErrorKind::Config`] when the server cannot be reached (saying so) or refuses
    /// the streams.
    pub async fn open(url: &str, options: QueueOptions) -> Result<Self> {
        let mut wait = Duration::from_millis(250);
        let mut tries = 0;
        let client = loop {
            let connected = async_nats::ConnectOptions::new()
                .connection_timeout(Duration::from_secs(5))
                .name("harness")
                .connect(url)
                .await;
            match connected {
                Ok(client) => break client,
                Err(e) if tries < 8 => {
                    tries += 1;
                    tracing::warn!("queue {url}: cannot reach NATS ({e}); retrying in {wait:?}");
                    tokio::time::sleep(wait).await;
                    wait = (wait * 2).min(Duration::from_secs(8));
                }
                Err(e) => {
                    return Err(fail(
                        url,
                        "cannot reach NATS (is nats-server running with -js, and the address right?)",
                        e,
                    ));
                }
            }
        };
        let js = jetstream::new(client);
        js.get_or_create_stream(stream::Config {
            name: JOBS_STREAM.to_owned(),
            subjects: vec![JOBS_SUBJECT.to_owned()],
            retention: stream::RetentionPolicy::WorkQueue,
            storage: stream::StorageType::File,
            duplicate_window: Duration::from_secs(600),
            ..Default::default()
        })
        .await
        .map_err(|e| fail(url, "cannot create the jobs stream", e))?;
        js.get_or_create_stream(stream::Config {
            name: RESULTS_STREAM.to_owned(),
            subjects: vec!["harness.results.>".to_owned(), DEAD_SUBJECT.to_owned()],
            storage: stream::StorageType::File,
            max_age: Duration::from_secs(7 * 24 * 3600),
            duplicate_window: Duration::from_secs(600),
            ..Default::default()
        })
        .await
        .map_err(|e| fail(url, "cannot create the results stream", e))?;
        Ok(NatsQueue {
            url: url.to_owned(),
            js,
            options,
            workers: tokio::sync::OnceCell::new(),
            submitters: tokio::sync::Mutex::new(std::collections::HashMap::new()),
        })
    }

    async fn workers(&self) -> Result<&consumer::PullConsumer> {
        self.workers.get_or_try_init(|| self.create_workers()).await
    }

    async fn create_workers(&self) -> Result<consumer::PullConsumer> {
        let stream = self
            .js
            .get_stream(JOBS_STREAM)
            .await
            .map_err(|e| fail(&self.url, "cannot open the jobs stream", e))?;
        stream
            .get_or_create_consumer(
                WORKERS,
                consumer::pull::Config {
                    durable_name: Some(WORKERS.to_owned()),
                    ack_policy: consumer::AckPolicy::Explicit,
                    ack_wait: self.options.lease,
                    // One delivery more than allowed: the worker receiving it dead-letters it
                    // (its predecessors died), rather than JetStream dropping it silently.
                    max_deliver: i64::from(self.options.max_deliver) + 1,
                    ..Default::default()
                },
            )
            .await
            .map_err(|e| fail(&self.url, "cannot open the workers' consumer", e))
    }

    async fn publish(&self, subject: String, headers: HeaderMap, body: Vec<u8>) -> Result<()> {
        // Stored means acknowledged by the stream; retried while the server is away.
        let mut wait = Duration::from_millis(200);
        for attempt in 0..10 {
            let sent = async {
                self.js
                    .publish_with_headers(subject.clone(), headers.clone(), body.clone().into())
                    .await?
                    .await
                    .map(drop)
                    .map_err(async_nats::Error::from)
            };
            match sent.await {
                Ok(()) => return Ok(()),
                Err(e) if attempt < 9 => {
                    tracing::warn!(
                        "queue {}: publishing to {subject} failed ({e}); retrying",
                        self.url
                    );
                    tokio::time::sleep(wait).await;
                    wait = (wait * 2).min(Duration::from_secs(5));
                }
                Err(e) => return Err(fail(&self.url, &format!("cannot publish to {subject}"), e)),
            }
        }
        unreachable!("the loop returns")
    }

    async fn send_back(&self, batch: Option<&str>, id: Option<&str>, body: Vec<u8>) -> Result<()> {
        let subject = match batch {
            Some(batch) => format!("harness.results.{batch}"),
            None => DEAD_SUBJECT.to_owned(),
        };
        let mut headers = HeaderMap::new();
        if let Some(id) = id {
            // A second worker finishing the same delegation is stored once.
            headers.insert("Nats-Msg-Id", format!("result-{id}").as_str());
        }
        self.publish(subject, headers, body).await
    }

    /// Why `body` is too large for one message of this server, if it is.
    fn too_large(&self, body: &[u8]) -> Option<String> {
        let limit = self.js.client().server_info().max_payload;
        let size = body.len();
        (limit > 0 && size > limit).then(|| {
            format!(
                "its report is {size} bytes, more than this NATS server takes in one message (max_payload {limit}): raise `max_payload` in the server's configuration (a tree's children and long agent logs add up)"
            )
        })
    }
}

/// The body of a message sending `envelope` back.
fn envelope(envelope: &Envelope) -> Vec<u8> {
    serde_json::to_vec(envelope).expect("an envelope always serialises")
}

fn message(lease: &Lease) -> &jetstream::Message {
    match &lease.handle {
        Handle::Nats(message) => message,
        Handle::Sqlite { .. } => unreachable!("a NATS queue only hands out NATS leases"),
    }
}

impl Queue for NatsQueue {
    fn describe(&self) -> String {
        self.url.clone()
    }

    fn enqueue<'a>(&'a self, job: &'a Job) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            let mut headers = HeaderMap::new();
            headers.insert("Nats-Msg-Id", job.id.as_str());
            if let Some(parent) = &job.overrides.trace_parent {
                headers.insert("traceparent", parent.as_str());
            }
            let body = serde_json::to_vec(job).expect("a job always serialises");
            self.publish(JOBS_SUBJECT.to_owned(), headers, body).await
        })
    }

    fn lease<'a>(
        &'a self,
        _worker: &'a str,
        wait: Duration,
    ) -> BoxFuture<'a, Result<Option<Lease>>> {
        Box::pin(async move {
            let consumer = self.workers().await?;
            let mut batch = consumer
                .fetch()
                .max_messages(1)
                .expires(wait.max(Duration::from_millis(100)))
                .messages()
                .await
                .map_err(|e| fail(&self.url, "cannot fetch a job", e))?;
            let Some(message) = batch.next().await else {
                return Ok(None);
            };
            let message = message.map_err(|e| fail(&self.url, "cannot fetch a job", e))?;
            let deliveries = message
                .info()
                .map(|i| u32::try_from(i.delivered).unwrap_or(u32::MAX))
                .unwrap_or(1);
            let mut job = parse_job(&message.payload);
            if let (Ok(job), Some(headers)) = (&mut job, &message.headers) {
                // The submitter's trace context travels in the headers as well.
                if job.overrides.trace_parent.is_none() {
                    job.overrides.trace_parent = headers.get("traceparent").map(|v| v.to_string());
                }
            }
            if deliveries > self.options.max_deliver {
                let lease = Lease {
                    job,
                    deliveries,
                    handle: Handle::Nats(Box::new(message)),
                };
                let reason = crate::exhausted(deliveries - 1, None);
                self.dead_letter(&lease, &reason).await?;
                return Ok(None);
            }
            Ok(Some(Lease {
                job,
                deliveries,
                handle: Handle::Nats(Box::new(message)),
            }))
        })
    }

    fn heartbeat<'a>(&'a self, lease: &'a Lease) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            message(lease)
                .ack_with(AckKind::Progress)
                .await
                .map_err(|e| fail(&self.url, "cannot renew a lease", e))
        })
    }

    fn complete<'a>(
        &'a self,
        lease: &'a Lease,
        result: &'a JobResult,
    ) -> BoxFuture<'a, Result<Completed>> {
        Box::pin(async move {
            let body = envelope(&Envelope::Done {
                result: Box::new(result.clone()),
            });
            // A report no message can carry would fail on every delivery: said once, for good.
            if let Some(why) = self.too_large(&body) {
                self.dead_letter(lease, &why).await?;
                return Ok(Completed::DeadLettered(why));
            }
            // The result first, stored; then the job is acknowledged.
            self.send_back(Some(&result.batch), Some(&result.id), body)
                .await?;
            // The report is stored: a job whose acknowledgement is lost (the server restarted
            // since it was delivered) is delivered again and runs again, and its second report
            // is recognised as recorded. Retrying the acknowledgement would only hold this
            // worker's slot while the server has forgotten the delivery.
            if let Err(e) = message(lease).double_ack().await {
                tracing::warn!(
                    "queue {}: the report of {} is stored but its job could not be acknowledged ({e}); it may run again and is recorded once",
                    self.url,
                    result.id
                );
            }
            Ok(Completed::Sent)
        })
    }

    fn release<'a>(
        &'a self,
        lease: &'a Lease,
        delay: Duration,
        why: &'a str,
    ) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            tracing::info!(queue = %self.url, "releasing a job: {why}");
            if lease.deliveries >= self.options.max_deliver {
                return self
                    .dead_letter(lease, &crate::exhausted(lease.deliveries, Some(why)))
                    .await;
            }
            message(lease)
                .ack_with(AckKind::Nak(Some(delay)))
                .await
                .map_err(|e| fail(&self.url, "cannot give a job back", e))
        })
    }

    fn dead_letter<'a>(&'a self, lease: &'a Lease, reason: &'a str) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            let job = lease.job.as_ref().ok();
            let dead = DeadLetter {
                id: job.map(|j| j.id.clone()),
                batch: job.map(|j| j.batch.clone()),
                line: job.map(|j| j.line),
                reason: reason.to_owned(),
                deliveries: lease.deliveries,
            };
            self.send_back(
                dead.batch.clone().as_deref(),
                dead.id.clone().as_deref(),
                envelope(&Envelope::Dead { dead }),
            )
            .await?;
            message(lease)
                .ack_with(AckKind::Term)
                .await
                .map_err(|e| fail(&self.url, "cannot end a job", e))
        })
    }

    fn results<'a>(
        &'a self,
        batch: &'a str,
        wait: Duration,
    ) -> BoxFuture<'a, Result<Vec<Delivery>>> {
        Box::pin(async move {
            let consumer = {
                let mut known = self.submitters.lock().await;
                match known.get(batch) {
                    Some(consumer) => consumer.clone(),
                    None => {
                        let stream =
                            self.js.get_stream(RESULTS_STREAM).await.map_err(|e| {
                                fail(&self.url, "cannot open the results stream", e)
                            })?;
                        let name = format!("submitter-{batch}");
                        let consumer: consumer::PullConsumer = stream
                            .get_or_create_consumer(
                                &name,
                                consumer::pull::Config {
                                    durable_name: Some(name.clone()),
                                    filter_subject: format!("harness.results.{batch}"),
                                    ack_policy: consumer::AckPolicy::Explicit,
                                    inactive_threshold: SUBMITTER_IDLE,
                                    ..Default::default()
                                },
                            )
                            .await
                            .map_err(|e| fail(&self.url, "cannot open the results consumer", e))?;
                        known.insert(batch.to_owned(), consumer.clone());
                        consumer
                    }
                }
            };
            let mut messages = consumer
                .fetch()
                .max_messages(256)
                .expires(wait.max(Duration::from_millis(100)))
                .messages()
                .await
                .map_err(|e| fail(&self.url, "cannot fetch results", e))?;
            let mut found = Vec::new();
            while let Some(message) = messages.next().await {
                let message = message.map_err(|e| fail(&self.url, "cannot fetch results", e))?;
                let outcome = match serde_json::from_slice::<Envelope>(&message.payload) {
                    Ok(Envelope::Done { result }) => Outcome::Done(result),
                    Ok(Envelope::Dead { dead }) => Outcome::Dead(dead),
                    Err(e) => Outcome::Dead(DeadLetter {
                        id: None,
                        batch: Some(batch.to_owned()),
                        line: None,
                        reason: format!("a result that cannot be read: {e}"),
                        deliveries: 0,
                    }),
                };
                found.push(Delivery {
                    outcome,
                    handle: Handle::Nats(Box::new(message)),
                });
            }
            Ok(found)
        })
    }

    fn acknowledge<'a>(&'a self, delivery: &'a Delivery) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            match &delivery.handle {
                Handle::Nats(message) => message
                    .double_ack()
                    .await
                    .map_err(|e| fail(&self.url, "cannot acknowledge a result", e)),
                Handle::Sqlite { .. } => unreachable!("a NATS queue only delivers NATS results"),
            }
        })
    }
}
