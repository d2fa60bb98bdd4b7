//! The embedded queue: one SQLite file several processes on one machine share. A job is a row;
//! a worker leases it for a while (renewed by heartbeats); a lease that runs out — its worker
//! died — makes the row deliverable again. Results are written into the row, where the
//! submitter collects them.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use harness::{Error, Result};
use rusqlite::{Connection, OptionalExtension, params};

use crate::{
    BoxFuture, Completed, DeadLetter, Delivery, Handle, Job, JobResult, Lease, Outcome, Queue,
    parse_job,
};

/// How long a lease lasts without a heartbeat.
pub const DEFAULT_LEASE: Duration = Duration::from_secs(30);
/// Deliveries after which a job is dead-lettered.
pub const DEFAULT_MAX_DELIVER: u32 = 5;
/// How long a writer waits for another process holding the database lock.
const BUSY_TIMEOUT: Duration = Duration::from_secs(10);
/// How often an idle worker or submitter looks again: a read of an index, ~200 a second, which
/// keeps the latency the queue adds to a delegation to a few milliseconds (bench/queue.sh).
const POLL: Duration = Duration::from_millis(5);

/// A queue in a SQLite file (`sqlite:PATH`).
#[derive(Debug, Clone)]
pub struct SqliteQueue {
    path: PathBuf,
    conn: Arc<Mutex<Connection>>,
    lease: Duration,
    max_deliver: u32,
}

fn now() -> f64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

fn sql(path: &Path, what: &str, e: &rusqlite::Error) -> Error {
    Error::config(format!("queue sqlite:{}: {what}: {e}", path.display()))
}

impl SqliteQueue {
    /// Opens (creating when missing) the queue at `path`.
    ///
    /// # Errors
    /// [`harness::ErrorKind::Config`] when the file cannot be opened or set up.
    pub async fn open(path: &Path) -> Result<Self> {
        let path = path.to_path_buf();
        tokio::task::spawn_blocking(move || -> Result<SqliteQueue> {
            if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                std::fs::create_dir_all(dir)
                    .map_err(|e| Error::config(format!("queue sqlite:{}: {e}", path.display())))?;
            }
            let conn = Connection::open(&path).map_err(|e| sql(&path, "cannot open", &e))?;
            conn.busy_timeout(BUSY_TIMEOUT)
                .map_err(|e| sql(&path, "cannot set up", &e))?;
            // Several workers starting together race for the lock switching to WAL, which
            // SQLite does not wait for: try again for a while.
            let mut tries = 0;
            loop {
                match conn.execute_batch(
                    "PRAGMA journal_mode = WAL;
                     PRAGMA synchronous = NORMAL;
                     CREATE TABLE IF NOT EXISTS jobs (
                         id TEXT PRIMARY KEY,
                         batch TEXT NOT NULL,
                         body BLOB NOT NULL,
                         state TEXT NOT NULL CHECK (state IN ('queued', 'leased', 'done', 'dead')),
                         not_before REAL NOT NULL,
                         lease_token TEXT,
                         lease_until REAL,
                         deliveries INTEGER NOT NULL DEFAULT 0,
                         result TEXT,
                         reason TEXT,
                         enqueued_at REAL NOT NULL,
                         finished_at REAL,
                         collected INTEGER NOT NULL DEFAULT 0
                     );
                     CREATE INDEX IF NOT EXISTS jobs_ready ON jobs (state, not_before, enqueued_at);
                     CREATE INDEX IF NOT EXISTS jobs_batch ON jobs (batch, collected, state);",
                ) {
                    Ok(()) => break,
                    Err(e) if tries < 200 && e.to_string().contains("locked") => {
                        tries += 1;
                        std::thread::sleep(Duration::from_millis(25));
                    }
                    Err(e) => return Err(sql(&path, "cannot set up", &e)),
                }
            }
            Ok(SqliteQueue {
                path,
                conn: Arc::new(Mutex::new(conn)),
                lease: DEFAULT_LEASE,
                max_deliver: DEFAULT_MAX_DELIVER,
            })
        })
        .await
        .map_err(|e| Error::config(format!("queue: {e}")))?
    }

    /// Sets how long a lease lasts without a heartbeat.
    #[must_use]
    pub fn with_lease(mut self, lease: Duration) -> Self {
        self.lease = lease;
        self
    }

    /// Sets after how many deliveries a job is dead-lettered.
    #[must_use]
    pub fn with_max_deliver(mut self, max: u32) -> Self {
        self.max_deliver = max.max(1);
        self
    }

    /// Runs `work` on the connection on a blocking thread.
    async fn with<T: Send + 'static>(
        &self,
        work: impl FnOnce(&mut Connection, &Path) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        let conn = Arc::clone(&self.conn);
        let path = self.path.clone();
        tokio::task::spawn_blocking(move || {
            let mut conn = conn
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            work(&mut conn, &path)
        })
        .await
        .map_err(|e| Error::config(format!("queue: {e}")))?
    }

    fn try_lease(
        &self,
        worker: String,
    ) -> impl FnOnce(&mut Connection, &Path) -> Result<Option<Lease>> + Send + 'static {
        let lease_for = self.lease.as_secs_f64();
        let max_deliver = self.max_deliver;
        move |conn, path| loop {
            // Most polls find nothing: a plain read says so without taking the write lock that
            // every other worker and submitter would wait for.
            let ready: bool = conn
                .prepare_cached(
                    "SELECT EXISTS (SELECT 1 FROM jobs
                     WHERE (state = 'queued' AND not_before <= ?1)
                        OR (state = 'leased' AND lease_until < ?1))",
                )
                .and_then(|mut s| s.query_row(params![now()], |row| row.get(0)))
                .map_err(|e| sql(path, "cannot lease", &e))?;
            if !ready {
                return Ok(None);
            }
            let tx = conn
                .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
                .map_err(|e| sql(path, "cannot lease", &e))?;
            let at = now();
            let next: Option<(String, Vec<u8>, u32, Option<String>)> = tx
                .query_row(
                    "SELECT id, body, deliveries, reason FROM jobs
                     WHERE (state = 'queued' AND not_before <= ?1)
                        OR (state = 'leased' AND lease_until < ?1)
                     ORDER BY enqueued_at LIMIT 1",
                    params![at],
                    |row| Ok((row.get(0)?, bytes(row, 1)?, row.get(2)?, row.get(3)?)),
                )
                .optional()
                .map_err(|e| sql(path, "cannot lease", &e))?;
            let Some((id, body, deliveries, last)) = next else {
                return Ok(None);
            };
            if deliveries >= max_deliver {
                tx.execute(
                    "UPDATE jobs SET state = 'dead', finished_at = ?2, lease_token = NULL,
                         reason = ?3 WHERE id = ?1",
                    params![id, at, crate::exhausted(deliveries, last.as_deref())],
                )
                .map_err(|e| sql(path, "cannot dead-letter", &e))?;
                tx.commit()
                    .map_err(|e| sql(path, "cannot dead-letter", &e))?;
                continue;
            }
            let token = format!("{worker}#{:016x}", fastrand::u64(..));
            tx.execute(
                "UPDATE jobs SET state = 'leased', lease_token = ?2, lease_until = ?3,
                     deliveries = deliveries + 1 WHERE id = ?1",
                params![id, token, at + lease_for],
            )
            .map_err(|e| sql(path, "cannot lease", &e))?;
            tx.commit().map_err(|e| sql(path, "cannot lease", &e))?;
            return Ok(Some(Lease {
                job: parse_job(&body),
                deliveries: deliveries + 1,
                handle: Handle::Sqlite { id, token },
            }));
        }
    }
}

/// A column as bytes, whether it holds a blob or text: whatever was put in the queue is read,
/// and a message that is not a job is dead-lettered rather than stalling the queue.
fn bytes(row: &rusqlite::Row<'_>, index: usize) -> rusqlite::Result<Vec<u8>> {
    Ok(row
        .get_ref(index)?
        .as_bytes_or_null()?
        .unwrap_or_default()
        .to_vec())
}

fn handle(lease: &Lease) -> (String, String) {
    match &lease.handle {
        Handle::Sqlite { id, token } => (id.clone(), token.clone()),
        Handle::Nats(_) => unreachable!("a SQLite queue only hands out SQLite leases"),
    }
}

impl Queue for SqliteQueue {
    fn describe(&self) -> String {
        format!("sqlite:{}", self.path.display())
    }

    fn enqueue<'a>(&'a self, job: &'a Job) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            let body = serde_json::to_vec(job).expect("a job always serialises");
            let (id, batch) = (job.id.clone(), job.batch.clone());
            self.with(move |conn, path| {
                let at = now();
                conn.execute(
                    "INSERT OR IGNORE INTO jobs (id, batch, body, state, not_before, enqueued_at)
                     VALUES (?1, ?2, ?3, 'queued', ?4, ?4)",
                    params![id, batch, body, at],
                )
                .map_err(|e| sql(path, "cannot enqueue", &e))?;
                Ok(())
            })
            .await
        })
    }

    fn lease<'a>(
        &'a self,
        worker: &'a str,
        wait: Duration,
    ) -> BoxFuture<'a, Result<Option<Lease>>> {
        Box::pin(async move {
            let until = tokio::time::Instant::now() + wait;
            loop {
                if let Some(lease) = self.with(self.try_lease(worker.to_owned())).await? {
                    return Ok(Some(lease));
                }
                if tokio::time::Instant::now() >= until {
                    return Ok(None);
                }
                tokio::time::sleep(POLL).await;
            }
        })
    }

    fn heartbeat<'a>(&'a self, lease: &'a Lease) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            let (id, token) = handle(lease);
            let until = now() + self.lease.as_secs_f64();
            self.with(move |conn, path| {
                conn.execute(
                    "UPDATE jobs SET lease_until = ?3 WHERE id = ?1 AND lease_token = ?2 AND state = 'leased'",
                    params![id, token, until],
                )
                .map_err(|e| sql(path, "cannot renew a lease", &e))?;
                Ok(())
            })
            .await
        })
    }

    fn complete<'a>(
        &'a self,
        lease: &'a Lease,
        result: &'a JobResult,
    ) -> BoxFuture<'a, Result<Completed>> {
        Box::pin(async move {
            let (id, _) = handle(lease);
            let text = serde_json::to_string(result).expect("a result always serialises");
            self.with(move |conn, path| {
                // The first completion wins; a worker that lost its lease and finished anyway
                // changes nothing.
                conn.execute(
                    "UPDATE jobs SET state = 'done', result = ?2, finished_at = ?3, lease_token = NULL
                     WHERE id = ?1 AND state != 'done'",
                    params![id, text, now()],
                )
                .map_err(|e| sql(path, "cannot store a result", &e))?;
                Ok(Completed::Sent)
            })
            .await
        })
    }

    fn release<'a>(
        &'a self,
        lease: &'a Lease,
        delay: Duration,
        why: &'a str,
    ) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            let (id, token) = handle(lease);
            let not_before = now() + delay.as_secs_f64();
            let why = why.to_owned();
            self.with(move |conn, path| {
                conn.execute(
                    "UPDATE jobs SET state = 'queued', not_before = ?3, lease_token = NULL, lease_until = NULL,
                         reason = ?4
                     WHERE id = ?1 AND lease_token = ?2 AND state = 'leased'",
                    params![id, token, not_before, why],
                )
                .map_err(|e| sql(path, "cannot release a lease", &e))?;
                Ok(())
            })
            .await
        })
    }

    fn dead_letter<'a>(&'a self, lease: &'a Lease, reason: &'a str) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            let (id, _) = handle(lease);
            let reason = reason.to_owned();
            self.with(move |conn, path| {
                conn.execute(
                    "UPDATE jobs SET state = 'dead', reason = ?2, finished_at = ?3, lease_token = NULL
                     WHERE id = ?1 AND state != 'done'",
                    params![id, reason, now()],
                )
                .map_err(|e| sql(path, "cannot dead-letter", &e))?;
                Ok(())
            })
            .await
        })
    }

    fn results<'a>(
        &'a self,
        batch: &'a str,
        wait: Duration,
    ) -> BoxFuture<'a, Result<Vec<Delivery>>> {
        Box::pin(async move {
            let until = tokio::time::Instant::now() + wait;
            loop {
                let batch = batch.to_owned();
                let found = self
                    .with(move |conn, path| {
                        let mut statement = conn
                            .prepare_cached(
                                "SELECT id, state, result, reason, deliveries, body FROM jobs
                                 WHERE batch = ?1 AND collected = 0 AND state IN ('done', 'dead')
                                 LIMIT 1024",
                            )
                            .map_err(|e| sql(path, "cannot read results", &e))?;
                        let rows = statement
                            .query_map(params![batch], |row| {
                                Ok((
                                    row.get::<_, String>(0)?,
                                    row.get::<_, String>(1)?,
                                    row.get::<_, Option<String>>(2)?,
                                    row.get::<_, Option<String>>(3)?,
                                    row.get::<_, u32>(4)?,
                                    bytes(row, 5)?,
                                ))
                            })
                            .map_err(|e| sql(path, "cannot read results", &e))?;
                        let mut found = Vec::new();
                        for row in rows {
                            let (id, state, result, reason, deliveries, body) =
                                row.map_err(|e| sql(path, "cannot read results", &e))?;
                            let line = parse_job(&body).ok().map(|j| j.line);
                            let parsed = match (state.as_str(), result) {
                                ("done", Some(text)) => serde_json::from_str::<JobResult>(&text)
                                    .map(|r| Outcome::Done(Box::new(r)))
                                    .unwrap_or_else(|e| {
                                        Outcome::Dead(DeadLetter {
                                            id: Some(id.clone()),
                                            batch: Some(batch.clone()),
                                            line,
                                            reason: format!("its result cannot be read: {e}"),
                                            deliveries,
                                        })
                                    }),
                                _ => Outcome::Dead(DeadLetter {
                                    id: Some(id.clone()),
                                    batch: Some(batch.clone()),
                                    line,
                                    reason: reason.unwrap_or_else(|| "dead-lettered".to_owned()),
                                    deliveries,
                                }),
                            };
                            found.push(Delivery {
                                outcome: parsed,
                                handle: Handle::Sqlite {
                                    id,
                                    token: String::new(),
                                },
                            });
                        }
                        Ok(found)
                    })
                    .await?;
                if !found.is_empty() || tokio::time::Instant::now() >= until {
                    return Ok(found);
                }
                tokio::time::sleep(POLL).await;
            }
        })
    }

    fn acknowledge<'a>(&'a self, delivery: &'a Delivery) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            let Handle::Sqlite { id, .. } = &delivery.handle else {
                unreachable!("a SQLite queue only delivers SQLite results")
            };
            let id = id.clone();
            self.with(move |conn, path| {
                conn.execute("UPDATE jobs SET collected = 1 WHERE id = ?1", params![id])
                    .map_err(|e| sql(path, "cannot acknowledge a result", &e))?;
                Ok(())
            })
            .await
        })
    }
}
