//! The API under `/v1/`: submit a delegation, follow its events as they happen, read its
//! record, list the runs awaiting review, override one, read the failure-mode dashboard.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::SystemTime;

use axum::extract::{Path as UrlPath, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use harness::{Assembler, EventRecord, Overrides, RunEvent};
use harness_records::{Journal, RecordMeta};
use serde_json::{Value, json};
use tokio::sync::broadcast;

use super::app::{ApiError, App, LIVE_BUFFER, Live, Queued, QueuedRun, Shared, bad, internal};
use super::auth::{ApiChange, ApiRead};

/// `POST /v1/delegations`: a delegation file as JSON (`workdir` relative to `--root`, and
/// inside it); runs it here, or queues it for a worker, and answers at once with its id.
pub(crate) async fn submit(
    _: ApiChange,
    State(app): State<Shared>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Result<Response, ApiError> {
    let submission = Submission::read(&app, &headers, &body)?;
    // Checked here whether it runs here or on a worker: a bad file is the caller's 400.
    let delegation = submission.check(&app).await?;
    let id = harness::new_id();
    let queued = app.queue.as_ref().map(|_| QueuedRun {
        source: submission.source.clone(),
        workdir: submission.inside.clone(),
        kind: delegation.delegate().kind().to_owned(),
    });
    let (sender, _) = broadcast::channel(LIVE_BUFFER);
    app.live
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .insert(
            id.clone(),
            Live {
                seen: Vec::new(),
                sender,
                queued,
            },
        );
    let status = match &app.queue {
        Some(queued) => enqueue(&app, queued, &id, submission).await?,
        None => start(&app, &id, delegation, submission),
    };
    app.metrics.submitted.fetch_add(1, Ordering::Relaxed);
    Ok(accepted(&id, status))
}

/// A submitted delegation, read but not yet checked.
struct Submission {
    /// The delegation file, without `workdir`.
    entry: serde_json::Map<String, Value>,
    /// The workdir, resolved inside `--root`.
    inside: PathBuf,
    overrides: Overrides,
    /// What its record names as its file.
    source: PathBuf,
}

impl Submission {
    /// Reads the body (a JSON object) and confines its `workdir` under the server's root.
    fn read(app: &App, headers: &HeaderMap, body: &[u8]) -> Result<Submission, ApiError> {
        let value: Value = serde_json::from_slice(body)
            .map_err(|e| bad("config", format!("the body is not JSON: {e}")))?;
        let Value::Object(mut entry) = value else {
            return Err(bad(
                "config",
                "the body must be a delegation: a JSON object with `task` and `delegate`",
            ));
        };
        let workdir = match entry.remove("workdir") {
            None => PathBuf::from("."),
            Some(Value::String(dir)) => PathBuf::from(dir),
            Some(_) => return Err(bad("config", "`workdir` must be a string")),
        };
        let inside = confine(&app.root, &workdir)?;
        let trace_parent = headers
            .get("traceparent")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let overrides = Overrides {
            workdir: Some(inside.clone()),
            trace_parent,
            journal: Some(app.journal.clone()),
            ..Overrides::default()
        };
        Ok(Submission {
            entry,
            inside,
            overrides,
            source: app.root.join("(submitted)"),
        })
    }

    /// Assembles the delegation as `harness run` would. On a blocking thread: it reads the
    /// workdir's policy, hooks and scripts, which a hostile workdir may have made slow to read;
    /// the server's async workers (and `/healthz`) never wait on them.
    async fn check(&self, app: &App) -> Result<harness::Delegation, ApiError> {
        let (overrides, source, entry, root) = (
            self.overrides.clone(),
            self.source.clone(),
            Value::Object(self.entry.clone()),
            app.root.clone(),
        );
        tokio::task::spawn_blocking(move || {
            Assembler::new(overrides).json(&source, "the request body", entry, &root)
        })
        .await
        .map_err(|e| internal(format!("checking the delegation failed: {e}")))?
        .map_err(ApiError::from)
    }
}

/// Hands a checked submission to the workers' queue; its report comes back through
/// [`collect`](super::collector::collect).
async fn enqueue(
    app: &App,
    queued: &Queued,
    id: &str,
    submission: Submission,
) -> Result<&'static str, ApiError> {
    let job = harness_queue::Job {
        schema: harness_queue::JOB_SCHEMA.to_owned(),
        id: id.to_owned(),
        batch: queued.batch.clone(),
        line: 0,
        source: submission.source,
        base: app.root.clone(),
        delegation: Value::Object(submission.entry),
        overrides: submission.overrides,
    };
    if let Err(e) = queued.queue.enqueue(&job).await {
        app.live
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(id);
        return Err(ApiError(
            StatusCode::SERVICE_UNAVAILABLE,
            "queue_unavailable".into(),
            format!("the delegation could not be queued: {}", e.message()),
        ));
    }
    Ok("queued")
}

/// Runs a checked submission in this server: its recorded events reach whoever follows it, and
/// its live stream ends once its record is readable, so that a client that saw the stream end
/// finds it in the journal. A server shutting down cancels it.
fn start(
    app: &Shared,
    id: &str,
    delegation: harness::Delegation,
    submission: Submission,
) -> &'static str {
    let (app_of_task, id) = (Arc::clone(app), id.to_owned());
    let mut shutdown = app.shutdown.clone();
    let run = async move {
        let app = app_of_task;
        let observer = |record: &EventRecord| {
            if record.event.is_recorded() {
                let mut live = app
                    .live
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                if let Some(live) = live.get_mut(&record.run_id) {
                    live.seen.push(record.clone());
                    let _ = live.sender.send(record.clone());
                }
            }
        };
        let cancel = async move {
            let _ = shutdown.wait_for(|s| *s).await;
            "the server is shutting down".to_owned()
        };
        let report = app
            .runtime
            .run_as(id.clone(), &delegation, &observer, cancel)
            .await;
        app.count_finished(&report);
        let meta = RecordMeta {
            source: Some(submission.source),
            workdir: Some(submission.inside),
        };
        if let Err(why) = app.writer.stored(report, meta).await {
            tracing::error!("harness serve: {id} was not recorded: {why}");
        }
        app.live
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(&id);
    };
    app.tasks
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .spawn(run);
    "running"
}

/// The answer to a submission: its id, status and links.
fn accepted(id: &str, status: &str) -> Response {
    (
        StatusCode::ACCEPTED,
        axum::Json(json!({
            "id": id,
            "status": status,
            "links": {
                "self": format!("/v1/delegations/{id}"),
                "events": format!("/v1/delegations/{id}/events"),
            },
        })),
    )
        .into_response()
}

/// Resolves `workdir` against `root` and refuses anything that leads out of it (`..`, an
/// absolute path elsewhere, a link).
fn confine(root: &Path, workdir: &Path) -> Result<PathBuf, ApiError> {
    let joined = root.join(workdir);
    let real = joined.canonicalize().map_err(|e| {
        bad(
            "workdir_outside_root",
            format!(
                "workdir {}: {e}; it must be an existing directory under --root",
                workdir.display()
            ),
        )
    })?;
    if !real.starts_with(root) || !real.is_dir() {
        return Err(bad(
            "workdir_outside_root",
            format!(
                "workdir {} resolves to {}, which is not a directory under --root {}",
                workdir.display(),
                real.display(),
                root.display()
            ),
        ));
    }
    Ok(real)
}

/// Reads the journal on a blocking thread.
pub(crate) async fn read<T: Send + 'static>(
    app: &Shared,
    work: impl FnOnce(&Journal) -> harness_records::Result<T> + Send + 'static,
) -> Result<T, ApiError> {
    let path = app.journal.clone();
    tokio::task::spawn_blocking(move || work(&Journal::open_read_only(&path)?))
        .await
        .map_err(|e| internal(e.to_string()))?
        .map_err(ApiError::from)
}

/// `GET /v1/delegations/{id}`: a running delegation's status, or its record as `harness runs
/// show --json` prints it (its override and review status included).
pub(crate) async fn show(
    _: ApiRead,
    State(app): State<Shared>,
    UrlPath(id): UrlPath<String>,
) -> Result<Response, ApiError> {
    let running = app
        .live
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .get(&id)
        .map(|live| {
            let status = if live.queued.is_some() {
                "queued"
            } else {
                "running"
            };
            (status, live.seen.len())
        });
    let lookup = id.clone();
    // A run of this server's has a row from its start; while it runs, its events say more.
    let (record, decided, tree) = read(&app, move |j| {
        let tree = j.tree(&lookup)?.filter(|t| !t.children.is_empty());
        Ok((j.get(&lookup)?, j.override_of(&lookup)?, tree))
    })
    .await?;
    let record = record.filter(|r| !(r.outcome == "running" && running.is_some()));
    match (record, running) {
        // The same record as `harness runs show --json`, its review and override included.
        (Some(record), _) => {
            let object = harness_records::reviewed_json(&record, decided.as_ref(), tree.as_ref());
            Ok(axum::Json(object).into_response())
        }
        (None, Some((status, events))) => {
            Ok(axum::Json(json!({"id": id, "status": status, "events": events})).into_response())
        }
        (None, None) => Err(not_found(&id)),
    }
}

#[derive(serde::Deserialize)]
pub(crate) struct ListQuery {
    review: Option<String>,
}

/// `GET /v1/delegations?review=pending`: the runs awaiting a human, as `harness review --json`.
pub(crate) async fn list(
    _: ApiRead,
    State(app): State<Shared>,
    Query(query): Query<ListQuery>,
) -> Result<Response, ApiError> {
    match query.review.as_deref() {
        Some("pending") => {
            let queue = read(&app, Journal::review_queue).await?;
            let now = SystemTime::now();
            let pending: Vec<Value> = queue.iter().map(|p| p.to_json(now)).collect();
            Ok(axum::Json(json!({"pending": pending})).into_response())
        }
        _ => {
            let records = read(&app, |j| j.list(&harness_records::Filter::default())).await?;
            let runs: Vec<Value> = records.iter().take(100).map(|r| r.to_json()).collect();
            Ok(axum::Json(json!({"runs": runs})).into_response())
        }
    }
}

/// `GET /v1/delegations/{id}/events`: server-sent events — what happened so far, then each event
/// as it happens, until the delegation ends; a finished delegation's events from the journal.
pub(crate) async fn events(
    _: ApiRead,
    State(app): State<Shared>,
    UrlPath(id): UrlPath<String>,
) -> Result<Response, ApiError> {
    let subscribed = {
        let live = app
            .live
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        live.get(&id)
            .map(|l| (l.seen.clone(), l.sender.subscribe(), l.queued.is_some()))
    };
    // A queued run's events come back with its report, which a stopping server no longer
    // waits for: its stream ends with the server. A run here ends with its own last event.
    let stopping = app.shutdown.clone();
    let (past, receiver, queued) = match subscribed {
        Some((past, receiver, queued)) => (past, Some(receiver), queued),
        None => {
            let lookup = id.clone();
            let record = read(&app, move |j| j.get(&lookup)).await?;
            let Some(record) = record else {
                return Err(not_found(&id));
            };
            let past: Vec<EventRecord> = record
                .events
                .into_iter()
                .filter_map(|e| serde_json::from_value(e).ok())
                .collect();
            (past, None, false)
        }
    };
    let to_sse = |record: &EventRecord| {
        let data = serde_json::to_string(record).expect("an event always serialises");
        Ok::<_, std::convert::Infallible>(
            SseEvent::default()
                .event(record.event.name())
                .id(record.seq.to_string())
                .data(data),
        )
    };
    let last_seq = past.last().map(|r| r.seq);
    let past: Vec<_> = past.iter().map(to_sse).collect();
    let live = futures_util::stream::unfold(
        (receiver, last_seq, stopping),
        move |(receiver, last, mut stopping)| async move {
            let mut receiver = receiver?;
            loop {
                let received = tokio::select! {
                    received = receiver.recv() => received,
                    _ = stopping.wait_for(|s| *s), if queued => return None,
                };
                match received {
                    Ok(record) if last.is_some_and(|l| record.seq <= l) => {}
                    Ok(record) => {
                        let done = matches!(record.event, RunEvent::DelegationCompleted { .. });
                        let event = to_sse(&record);
                        let next = if done { None } else { Some(receiver) };
                        return Some((event, (next, Some(record.seq), stopping)));
                    }
                    Err(broadcast::error::RecvError::Lagged(_)) => {}
                    Err(broadcast::error::RecvError::Closed) => return None,
                }
            }
        },
    );
    let stream = futures_util::StreamExt::chain(futures_util::stream::iter(past), live);
    Ok(Sse::new(stream)
        .keep_alive(KeepAlive::default())
        .into_response())
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct OverrideBody {
    decision: String,
    #[serde(rename = "type")]
    override_type: String,
    #[serde(default)]
    reason: Option<String>,
    #[serde(default)]
    user: Option<String>,
}

/// `POST /v1/delegations/{id}/override`: `{"decision": "approve"|"reject", "type":
/// "check"|"verifier"|"direct", "reason": …, "user": …}`; refusals are 409 with their kind.
pub(crate) async fn override_run(
    _: ApiChange,
    State(app): State<Shared>,
    UrlPath(id): UrlPath<String>,
    body: axum::body::Bytes,
) -> Result<Response, ApiError> {
    let body: OverrideBody = serde_json::from_slice(&body)
        .map_err(|e| bad("config", format!("the body is not an override: {e}")))?;
    let request = app.override_request(
        &id,
        &body.decision,
        &body.override_type,
        body.reason,
        body.user.as_deref(),
        "give `user` in the body, or start the server with HARNESS_API_USER naming the token's owner",
    )?;
    let lookup = id.clone();
    if !read(&app, move |j| j.contains(&lookup)).await? {
        return Err(not_found(&id));
    }
    let done = app.decide(request).await?;
    Ok(axum::Json(json!({"override": done.to_json()})).into_response())
}

/// `GET /v1/report`: the failure-mode dashboard, as `harness report --json`.
pub(crate) async fn report(_: ApiRead, State(app): State<Shared>) -> Result<Response, ApiError> {
    let records = read(&app, |j| j.list(&harness_records::Filter::default())).await?;
    let dashboard = harness_records::Dashboard::build(&records);
    Ok(axum::Json(dashboard.to_json()).into_response())
}

/// A 404 for a delegation this server neither runs nor recorded.
fn not_found(id: &str) -> ApiError {
    ApiError(
        StatusCode::NOT_FOUND,
        "not_found".into(),
        format!("no delegation {id}"),
    )
}
