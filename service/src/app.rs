//! The server's state ([`App`], shared by every handler as [`Shared`]), the delegations it runs
//! or queued ([`Live`]), its counters ([`Metrics`]), and the API's error ([`ApiError`]).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use harness::{Error, EventRecord, Runtime};
use harness_records::{JournalWriter, OverrideRequest, OverrideType};
use serde_json::json;
use tokio::sync::{broadcast, watch};

/// Events kept per running delegation for subscribers that arrive late.
pub(crate) const LIVE_BUFFER: usize = 4096;

/// A delegation running in this server (or queued by it): its events so far and the channel of
/// those to come.
pub(crate) struct Live {
    pub(crate) seen: Vec<EventRecord>,
    pub(crate) sender: broadcast::Sender<EventRecord>,
    /// Queued for a worker; its events arrive with its report.
    pub(crate) queued: Option<QueuedRun>,
}

/// What the server keeps of a delegation it queued, to record its report.
#[derive(Clone)]
pub(crate) struct QueuedRun {
    pub(crate) source: PathBuf,
    pub(crate) workdir: PathBuf,
    pub(crate) kind: String,
}

/// The queue this server hands its delegations to (`--queue`).
pub(crate) struct Queued {
    pub(crate) queue: Arc<dyn harness_queue::Queue>,
    /// The server's batch: its reports come back under it, across restarts (it is named after
    /// the journal, so a restarted server collects what came back while it was down).
    pub(crate) batch: String,
}

pub(crate) struct App {
    pub(crate) root: PathBuf,
    pub(crate) journal: PathBuf,
    pub(crate) writer: JournalWriter,
    pub(crate) runtime: Runtime,
    pub(crate) token: String,
    /// The token was generated here (none was configured).
    pub(crate) token_generated: bool,
    pub(crate) token_user: Option<String>,
    pub(crate) allowed_hosts: Vec<String>,
    /// Signed-in browsers: session id → the CSRF token its forms must carry.
    pub(crate) sessions: Mutex<HashMap<String, String>>,
    pub(crate) live: Mutex<HashMap<String, Live>>,
    pub(crate) shutdown: watch::Receiver<bool>,
    pub(crate) tasks: Mutex<tokio::task::JoinSet<()>>,
    pub(crate) metrics: Metrics,
    pub(crate) queue: Option<Queued>,
}

pub(crate) type Shared = Arc<App>;

/// An API error: a status and `{"error": kind, "message": …}`.
pub(crate) struct ApiError(pub(crate) StatusCode, pub(crate) String, pub(crate) String);

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (
            self.0,
            axum::Json(json!({"error": self.1, "message": self.2})),
        )
            .into_response()
    }
}

impl From<Error> for ApiError {
    fn from(e: Error) -> Self {
        let status = match e.kind() {
            harness::ErrorKind::Config => StatusCode::BAD_REQUEST,
            _ => StatusCode::INTERNAL_SERVER_ERROR,
        };
        ApiError(status, e.kind().as_str().to_owned(), e.message().to_owned())
    }
}

impl From<harness_records::Error> for ApiError {
    fn from(e: harness_records::Error) -> Self {
        let status = match e.kind() {
            kind if kind.is_refusal() => StatusCode::CONFLICT,
            harness_records::ErrorKind::Config => StatusCode::BAD_REQUEST,
            _ => StatusCode::INTERNAL_SERVER_ERROR,
        };
        ApiError(status, e.kind().as_str().to_owned(), e.message().to_owned())
    }
}

/// A 400 of `kind`.
pub(crate) fn bad(kind: &str, message: impl Into<String>) -> ApiError {
    ApiError(StatusCode::BAD_REQUEST, kind.to_owned(), message.into())
}

/// A 500: the server failed, not the request.
pub(crate) fn internal(message: String) -> ApiError {
    ApiError(
        StatusCode::INTERNAL_SERVER_ERROR,
        "internal".into(),
        message,
    )
}

/// Counters behind `GET /metrics`.
#[derive(Default)]
pub(crate) struct Metrics {
    pub(crate) submitted: AtomicU64,
    pub(crate) finished: Mutex<HashMap<String, u64>>,
    pub(crate) overrides: Mutex<HashMap<String, u64>>,
    pub(crate) requests: AtomicU64,
    pub(crate) unauthorized: AtomicU64,
    pub(crate) cross_site: AtomicU64,
}

impl App {
    /// Counts a finished delegation for `/metrics`.
    pub(crate) fn count_finished(&self, report: &harness::Report) {
        *self
            .metrics
            .finished
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .entry(report.outcome.as_str().to_owned())
            .or_default() += 1;
    }

    /// What the server kept of a delegation it queued, while it waits for its report.
    pub(crate) fn queued_run(&self, id: &str) -> Option<QueuedRun> {
        self.live
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(id)
            .and_then(|l| l.queued.clone())
    }

    /// Ends a queued delegation's live stream: its events, as the worker recorded them, reach
    /// whoever follows it, and then the stream closes.
    pub(crate) fn finish_live(&self, id: &str, events: Vec<EventRecord>) {
        let mut live = self
            .live
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        // Whoever still follows the run hears the rest; it is no longer live for anyone new.
        if let Some(run) = live.remove(id) {
            for event in events {
                let _ = run.sender.send(event);
            }
        }
    }

    /// Reads an override of run `id` as the API and the review page take it: `decision`
    /// (`approve` or `reject`), `type` (`check`, `verifier`, `direct`), a reason, and who decides
    /// — the caller named, else the token's owner, never guessed (`ask` says how to name one).
    pub(crate) fn override_request(
        &self,
        id: &str,
        decision: &str,
        override_type: &str,
        reason: Option<String>,
        user: Option<&str>,
        ask: &str,
    ) -> Result<OverrideRequest, ApiError> {
        let approve = match decision {
            "approve" => true,
            "reject" => false,
            other => {
                return Err(bad(
                    "config",
                    format!("`decision` is {other:?}; use approve or reject"),
                ));
            }
        };
        let override_type = OverrideType::from_name(override_type).ok_or_else(|| {
            bad(
                "config",
                format!("`type` is {override_type:?}; use check, verifier or direct"),
            )
        })?;
        let user = user
            .map(str::trim)
            .filter(|u| !u.is_empty())
            .map(str::to_owned)
            .or_else(|| self.token_user.clone())
            .ok_or_else(|| bad("user_required", format!("who decides? {ask}")))?;
        Ok(OverrideRequest {
            run_id: id.to_owned(),
            approve,
            override_type,
            reason: reason
                .map(|r| r.trim().to_owned())
                .filter(|r| !r.is_empty()),
            user,
        })
    }

    /// Applies an override (the API's and the review page's alike) and counts it for `/metrics`.
    pub(crate) async fn decide(
        &self,
        request: OverrideRequest,
    ) -> Result<harness_records::Override, ApiError> {
        let path = self.journal.clone();
        let done =
            tokio::task::spawn_blocking(move || harness_records::apply_override(&path, &request))
                .await
                .map_err(|e| {
                    ApiError(
                        StatusCode::INTERNAL_SERVER_ERROR,
                        "internal".into(),
                        format!("writing the journal failed: {e}"),
                    )
                })??;
        *self
            .metrics
            .overrides
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .entry(done.decision.clone())
            .or_default() += 1;
        Ok(done)
    }
}
