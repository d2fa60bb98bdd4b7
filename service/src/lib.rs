//! `harness serve` as a library: the HTTP API (DESIGN §8) — submit delegations, follow their
//! events as they happen, list the runs awaiting review, override them under the project's
//! policy, read the dashboard — the review page, and with a queue the collector that records
//! what workers send back. On axum, with a bearer token, confined workdirs and capped bodies.
//! The CLI reads its flags into [`Settings`] and starts it; the library never prints (what goes
//! wrong while it serves is a `tracing` warning).
//!
//! ```no_run
//! # async fn doc() -> Result<(), Box<dyn std::error::Error>> {
//! let settings = harness_service::Settings {
//!     listen: "127.0.0.1:8080".to_owned(),
//!     root: "/srv/work".into(),
//!     journal: "/srv/work/.harness/runs.db".into(),
//!     queue: None,
//!     token: None,
//!     token_user: None,
//!     allowed_hosts: Vec::new(),
//! };
//! let server = harness_service::Server::bind(settings, harness::Runtime::new()?).await?;
//! println!("listening on http://{}", server.local_addr());
//! let finished = server.run(async { "stopped".to_owned() }).await?;
//! println!("recorded {} delegation(s)", finished.recorded);
//! # Ok(()) }
//! ```
#![forbid(unsafe_code)]
#![warn(missing_docs)]

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use axum::Router;
use axum::extract::{DefaultBodyLimit, Path as UrlPath, Query, Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use harness::{Assembler, Error, EventRecord, Overrides, RunEvent, Runtime};
use harness_records::{Journal, JournalWriter, OverrideRequest, OverrideType, RecordMeta};
use serde_json::{Value, json};
use tokio::sync::{broadcast, watch};

mod page;

/// Why a server could not start: a setting, or its journal.
#[derive(Debug)]
pub enum StartError {
    /// A setting (the address, the root) or the runtime.
    Run(Error),
    /// The run journal cannot be opened or written (kind `journal`).
    Records(harness_records::Error),
}

impl From<Error> for StartError {
    fn from(e: Error) -> Self {
        StartError::Run(e)
    }
}

impl From<harness_records::Error> for StartError {
    fn from(e: harness_records::Error) -> Self {
        StartError::Records(e)
    }
}

impl std::fmt::Display for StartError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StartError::Run(e) => e.fmt(f),
            StartError::Records(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for StartError {}

/// The largest request body accepted.
const MAX_BODY_BYTES: usize = 1024 * 1024;
/// Events kept per running delegation for subscribers that arrive late.
const LIVE_BUFFER: usize = 4096;

/// What a server is started with.
pub struct Settings {
    /// The address to listen on, `HOST:PORT`.
    pub listen: String,
    /// The directory every submitted delegation's workdir must lie under.
    pub root: PathBuf,
    /// The run journal it records in.
    pub journal: PathBuf,
    /// Hand delegations to workers on this queue instead of running them here.
    pub queue: Option<Arc<dyn harness_queue::Queue>>,
    /// The bearer token every request must carry; `None` generates one (see [`Server::token`]),
    /// which a non-loopback address refuses: a token anyone reaching it needs must be chosen.
    pub token: Option<String>,
    /// Host names (a `Host` header's name, without the port) the server answers besides
    /// `localhost` and IP addresses: the names it is reached by through a proxy or DNS. Every
    /// other name is refused, as a page on it may be one rebinding a name to this address.
    pub allowed_hosts: Vec<String>,
    /// Who the token's requests are attributed to when an override names nobody.
    pub token_user: Option<String>,
}

/// A delegation running in this server (or queued by it): its events so far and the channel of
/// those to come.
struct Live {
    seen: Vec<EventRecord>,
    sender: broadcast::Sender<EventRecord>,
    /// Queued for a worker; its events arrive with its report.
    queued: Option<QueuedRun>,
}

/// What the server keeps of a delegation it queued, to record its report.
#[derive(Clone)]
struct QueuedRun {
    source: PathBuf,
    workdir: PathBuf,
    kind: String,
}

/// The queue this server hands its delegations to (`--queue`).
struct Queued {
    queue: Arc<dyn harness_queue::Queue>,
    /// The server's batch: its reports come back under it, across restarts (it is named after
    /// the journal, so a restarted server collects what came back while it was down).
    batch: String,
}

/// Counters behind `GET /metrics`.
#[derive(Default)]
struct Metrics {
    submitted: AtomicU64,
    finished: Mutex<HashMap<String, u64>>,
    overrides: Mutex<HashMap<String, u64>>,
    requests: AtomicU64,
    unauthorized: AtomicU64,
    cross_site: AtomicU64,
}

struct App {
    root: PathBuf,
    journal: PathBuf,
    writer: JournalWriter,
    runtime: Runtime,
    token: String,
    /// The token was generated here (none was configured).
    token_generated: bool,
    token_user: Option<String>,
    allowed_hosts: Vec<String>,
    /// Signed-in browsers: session id → the CSRF token its forms must carry.
    sessions: Mutex<HashMap<String, String>>,
    live: Mutex<HashMap<String, Live>>,
    shutdown: watch::Receiver<bool>,
    tasks: Mutex<tokio::task::JoinSet<()>>,
    metrics: Metrics,
    queue: Option<Queued>,
}

type Shared = Arc<App>;

/// An API error: a status and `{"error": kind, "message": …}`.
struct ApiError(StatusCode, String, String);

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

fn bad(kind: &str, message: impl Into<String>) -> ApiError {
    ApiError(StatusCode::BAD_REQUEST, kind.to_owned(), message.into())
}

/// A server bound to its address, not yet serving.
pub struct Server {
    app: Shared,
    listener: tokio::net::TcpListener,
    addr: SocketAddr,
    stop: watch::Sender<bool>,
}

/// How a server ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finished {
    /// Why it stopped (what the shutdown future resolved to).
    pub reason: String,
    /// Delegations still queued for workers: their reports are recorded when a server starts
    /// again with the same queue and journal.
    pub still_queued: usize,
    /// Delegations it recorded.
    pub recorded: usize,
}

impl Server {
    /// Checks `settings`, starts the journal writer and binds the listening socket.
    ///
    /// # Errors
    /// [`StartError::Records`] (kind `journal`) for a journal that cannot be written;
    /// [`StartError::Run`] of kind [`Config`](harness::ErrorKind::Config) for an address that
    /// is not one, a non-loopback address without a token, a `root` that is not a directory, an
    /// address already in use.
    pub async fn bind(settings: Settings, runtime: Runtime) -> Result<Server, StartError> {
        let addr: SocketAddr = tokio::net::lookup_host(&settings.listen)
            .await
            .ok()
            .and_then(|mut found| found.next())
            .ok_or_else(|| {
                Error::config(format!(
                    "--listen {:?}: not an address; write HOST:PORT, e.g. 127.0.0.1:8080",
                    settings.listen
                ))
            })?;
        if settings.token.is_none() && !addr.ip().is_loopback() {
            return Err(StartError::Run(Error::config(format!(
                "--listen {addr} is reachable from other machines: set HARNESS_API_TOKEN (every request must then carry `Authorization: Bearer TOKEN`), or listen on 127.0.0.1"
            ))));
        }
        let root = settings
            .root
            .canonicalize()
            .map_err(|e| Error::config(format!("--root {}: {e}", settings.root.display())))?;
        let journal = settings.journal;
        let writer = JournalWriter::start(&journal).map_err(|e| {
            harness_records::Error::new(
                e.kind(),
                format!(
                    "the run journal {} cannot be written: {}",
                    journal.display(),
                    e.message()
                ),
            )
        })?;
        let queue = settings.queue.map(|queue| Queued {
            queue,
            batch: format!(
                "b-{}",
                &harness_builtins::sha256_hex(journal.to_string_lossy().as_bytes())[..16]
            ),
        });
        let (stop, shutdown) = watch::channel(false);
        let app = Arc::new(App {
            root,
            journal,
            writer,
            runtime,
            token_generated: settings.token.is_none(),
            token: match settings.token {
                Some(token) => token,
                None => random_hex(16).map_err(StartError::Run)?,
            },
            token_user: settings.token_user,
            allowed_hosts: settings
                .allowed_hosts
                .iter()
                .map(|h| h.trim().to_ascii_lowercase())
                .filter(|h| !h.is_empty())
                .collect(),
            sessions: Mutex::new(HashMap::new()),
            live: Mutex::new(HashMap::new()),
            shutdown,
            tasks: Mutex::new(tokio::task::JoinSet::new()),
            metrics: Metrics::default(),
            queue,
        });
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|e| Error::config(format!("--listen {addr}: {e}")))?;
        let addr = listener
            .local_addr()
            .map_err(|e| Error::config(format!("--listen {addr}: {e}")))?;
        Ok(Server {
            app,
            listener,
            addr,
            stop,
        })
    }

    /// The address it listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// The token every request must carry: the configured one, or one generated at start.
    pub fn token(&self) -> &str {
        &self.app.token
    }

    /// True when [`Server::token`] was generated here, so the operator learns it only from
    /// what the caller prints (the URL that signs a browser in, as Jupyter prints its own).
    pub fn token_generated(&self) -> bool {
        self.app.token_generated
    }

    /// The directory submitted workdirs must lie under, resolved.
    pub fn root(&self) -> &Path {
        &self.app.root
    }

    /// The batch its queued delegations' reports come back under, when it queues.
    pub fn batch(&self) -> Option<&str> {
        self.app.queue.as_ref().map(|q| q.batch.as_str())
    }

    /// Serves until `shutdown` resolves (to the reason), then cancels every running delegation
    /// and records it as such, and waits for the journal to have everything.
    ///
    /// # Errors
    /// [`ErrorKind::Config`](harness::ErrorKind::Config) when serving itself fails.
    pub async fn run(
        self,
        shutdown: impl Future<Output = String> + Send + 'static,
    ) -> Result<Finished, Error> {
        let Server {
            app,
            listener,
            stop,
            ..
        } = self;
        if app.queue.is_some() {
            let follower = Arc::clone(&app);
            let shutdown = app.shutdown.clone();
            app.tasks
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .spawn(collect(follower, shutdown));
        }
        let router = Router::new()
            .route(
                "/healthz",
                get(|| async { axum::Json(json!({"status": "ok"})) }),
            )
            .route("/metrics", get(metrics))
            .route("/v1/delegations", post(submit).get(list))
            .route("/v1/delegations/{id}", get(show))
            .route("/v1/delegations/{id}/events", get(events))
            .route("/v1/delegations/{id}/override", post(override_run))
            .route("/v1/report", get(report))
            .route("/", get(page::index))
            .route("/runs/{id}", get(page::run_page))
            .route("/report", get(page::report))
            .route("/runs/{id}/override", post(page::decide))
            .route("/login", get(page::login_form).post(page::login))
            .layer(middleware::from_fn_with_state(Arc::clone(&app), authorize))
            .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
            .with_state(Arc::clone(&app));
        let why = Arc::new(Mutex::new(String::new()));
        let said = Arc::clone(&why);
        axum::serve(listener, router)
            .with_graceful_shutdown(async move {
                let reason = shutdown.await;
                *said
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner) = reason;
                // Cancelled as soon as the server stops accepting: their last events end the
                // event streams still open, which the graceful shutdown waits for.
                let _ = stop.send(true);
            })
            .await
            .map_err(|e| Error::config(format!("serving failed: {e}")))?;
        // Every running delegation is cancelled and recorded as such before the process ends.
        let reason = why
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        let mut tasks = std::mem::take(
            &mut *app
                .tasks
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        );
        while tasks.join_next().await.is_some() {}
        let still_queued = app
            .live
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .values()
            .filter(|l| l.queued.is_some())
            .count();
        let Ok(app) = Arc::try_unwrap(app) else {
            return Err(Error::config(
                "internal error: the server's state is still shared at exit",
            ));
        };
        let written = app.writer.finish();
        Ok(Finished {
            reason,
            still_queued,
            recorded: written.recorded,
        })
    }
}

impl App {
    /// Counts a finished delegation for `/metrics`.
    fn count_finished(&self, report: &harness::Report) {
        *self
            .metrics
            .finished
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .entry(report.outcome.as_str().to_owned())
            .or_default() += 1;
    }

    /// What the server kept of a delegation it queued, while it waits for its report.
    fn queued_run(&self, id: &str) -> Option<QueuedRun> {
        self.live
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(id)
            .and_then(|l| l.queued.clone())
    }

    /// Ends a queued delegation's live stream: its events, as the worker recorded them, reach
    /// whoever follows it, and then the stream closes.
    fn finish_live(&self, id: &str, events: Vec<EventRecord>) {
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
    fn override_request(
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
    async fn decide(
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

    /// True when `given` is the token (compared in constant time).
    fn token_matches(&self, given: &str) -> bool {
        same_secret(given, &self.token)
    }

    /// Opens a browser session: its id (the cookie's value) and the CSRF token its forms carry.
    fn open_session(&self) -> Result<(String, String), ApiError> {
        let internal = |e: Error| {
            ApiError(
                StatusCode::INTERNAL_SERVER_ERROR,
                "internal".into(),
                e.message().to_owned(),
            )
        };
        let id = random_hex(16).map_err(internal)?;
        let csrf = random_hex(16).map_err(internal)?;
        let mut sessions = self
            .sessions
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        // Sign-ins are rare; a flood of them (each needs the token) only signs the rest out.
        if sessions.len() >= MAX_SESSIONS {
            sessions.clear();
        }
        sessions.insert(id.clone(), csrf.clone());
        Ok((id, csrf))
    }

    /// The CSRF token of the session the request's `harness_session` cookie names, if it names
    /// one this server opened.
    fn session_csrf(&self, headers: &HeaderMap) -> Option<String> {
        let id = cookie(headers, SESSION_COOKIE)?;
        let sessions = self
            .sessions
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        sessions
            .iter()
            .find(|(known, _)| same_secret(id, known))
            .map(|(_, csrf)| csrf.clone())
    }
}

/// Browser sessions kept at most (each opened with the token).
const MAX_SESSIONS: usize = 1024;
/// The review page's session cookie.
const SESSION_COOKIE: &str = "harness_session";

/// `bytes` random bytes from the operating system, as hex.
fn random_hex(bytes: usize) -> Result<String, Error> {
    let mut buffer = vec![0u8; bytes];
    getrandom::fill(&mut buffer)
        .map_err(|e| Error::config(format!("the operating system gave no random bytes: {e}")))?;
    Ok(buffer.iter().map(|b| format!("{b:02x}")).collect())
}

/// `given == secret`, in time that depends only on their lengths.
fn same_secret(given: &str, secret: &str) -> bool {
    given.len() == secret.len()
        && given
            .bytes()
            .zip(secret.bytes())
            .fold(0u8, |acc, (a, b)| acc | (a ^ b))
            == 0
}

/// The value of cookie `name` in the request.
fn cookie<'h>(headers: &'h HeaderMap, name: &str) -> Option<&'h str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .find_map(|c| c.trim().strip_prefix(name)?.strip_prefix('='))
}

/// A 403 naming why, counted as a request a web page may have sent.
fn forbidden(app: &App, why: String) -> Response {
    app.metrics.cross_site.fetch_add(1, Ordering::Relaxed);
    tracing::warn!("refused a request: {why}");
    (
        StatusCode::FORBIDDEN,
        axum::Json(json!({"error": "forbidden", "message": why})),
    )
        .into_response()
}

/// Every request passes here (the model Jupyter uses; DESIGN §8: any page the operator has
/// open may be hostile).
///
/// - Its `Host` must be an IP address, `localhost` or a name given with `--allow-host`: a page
///   on a name rebound to this address is the same origin to the browser.
/// - `/healthz` answers anyone who gets that far; everything else needs the token: the bearer
///   header, or the session cookie a browser gets from `/login` or from the `?token=` URL the
///   server prints (`SameSite=Strict`, `HttpOnly`).
/// - A change (any method but GET, HEAD, OPTIONS) must not come from another origin (`Origin`,
///   `Sec-Fetch-Site`). To the API it must carry the bearer header — a cookie alone is refused,
///   as a browser adds it to requests other pages make — and be `application/json`, which no
///   form or `no-cors` fetch can send. To the page's forms it must carry the session cookie
///   and that session's CSRF token (checked by the form's handler, which reads the form).
async fn authorize(State(app): State<Shared>, request: Request, next: Next) -> Response {
    app.metrics.requests.fetch_add(1, Ordering::Relaxed);
    let headers = request.headers();
    if let Some(why) = foreign_host(&app.allowed_hosts, headers) {
        return forbidden(&app, why);
    }
    let path = request.uri().path().to_owned();
    if path == "/healthz" {
        return next.run(request).await;
    }
    let method = request.method().clone();
    if let Some(why) = cross_site(&method, headers) {
        return forbidden(&app, why);
    }
    let bearer = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    let bearer_ok = bearer.is_some_and(|given| app.token_matches(given));
    let session = app.session_csrf(headers).is_some();
    let api = path.starts_with("/v1/") || path == "/metrics";
    if path == "/login" {
        return next.run(request).await;
    }
    if method.is_safe() {
        if !api && let Some(token) = query_token(request.uri().query()) {
            return sign_in(&app, &token, &path);
        }
        if bearer_ok || session {
            return next.run(request).await;
        }
        return unauthorized(&app, api);
    }
    if api {
        if !bearer_ok {
            if bearer.is_none() && session {
                return forbidden(
                    &app,
                    format!(
                        "a {method} to {path} with only the session cookie is refused: a browser sends the cookie with requests other pages make; send `Authorization: Bearer TOKEN`"
                    ),
                );
            }
            return unauthorized(&app, api);
        }
        let json_body = headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.split(';').next())
            .is_some_and(|v| v.trim().eq_ignore_ascii_case("application/json"));
        if !json_body {
            return forbidden(
                &app,
                format!(
                    "a {method} to {path} must be `Content-Type: application/json` (a form or a `no-cors` fetch, which any page can send, is not)"
                ),
            );
        }
        return next.run(request).await;
    }
    if session {
        return next.run(request).await;
    }
    unauthorized(&app, api)
}

/// A missing or wrong token: 401 for the API, the sign-in page for a browser.
fn unauthorized(app: &App, api: bool) -> Response {
    app.metrics.unauthorized.fetch_add(1, Ordering::Relaxed);
    if !api {
        return axum::response::Redirect::to("/login").into_response();
    }
    (
        StatusCode::UNAUTHORIZED,
        [(header::WWW_AUTHENTICATE, "Bearer")],
        axum::Json(json!({"error": "unauthorized"})),
    )
        .into_response()
}

/// The `token` parameter of a query string.
fn query_token(query: Option<&str>) -> Option<String> {
    query?
        .split('&')
        .find_map(|pair| pair.strip_prefix("token="))
        .map(str::to_owned)
}

/// `GET PAGE?token=…` (the URL the server prints): with the right token a session cookie and a
/// redirect to the page without the token, so it stays out of the history and the `Referer`.
fn sign_in(app: &App, token: &str, path: &str) -> Response {
    if !app.token_matches(token) {
        return unauthorized(app, false);
    }
    match app.open_session() {
        Ok((id, _)) => (
            StatusCode::SEE_OTHER,
            [
                (header::SET_COOKIE, session_cookie(&id)),
                (header::LOCATION, path.to_owned()),
            ],
        )
            .into_response(),
        Err(e) => e.into_response(),
    }
}

/// The `Set-Cookie` value of session `id`.
fn session_cookie(id: &str) -> String {
    format!("{SESSION_COOKIE}={id}; HttpOnly; SameSite=Strict; Path=/")
}

/// Why the request's `Host` may be a page rebinding a name to this address, if it may: only IP
/// addresses, `localhost` and the `allowed` names are answered.
fn foreign_host(allowed: &[String], headers: &HeaderMap) -> Option<String> {
    let host = headers.get(header::HOST)?;
    let Ok(host) = host.to_str() else {
        return Some("the Host header is not text".to_owned());
    };
    let name = match host.strip_prefix('[') {
        Some(bracketed) => bracketed.split(']').next().unwrap_or(""),
        None => host.rsplit_once(':').map_or(host, |(name, _)| name),
    };
    let name = name.trim_end_matches('.').to_ascii_lowercase();
    if name == "localhost" || name.parse::<std::net::IpAddr>().is_ok() || allowed.contains(&name) {
        return None;
    }
    Some(format!(
        "Host {host:?} is not this server's: it answers IP addresses, localhost and the names given with --allow-host (a page on another name may be rebinding it to this address); use http://127.0.0.1:PORT, or start the server with --allow-host {name}"
    ))
}

/// Why a change may be another origin's doing, if it may: a form or a `no-cors` fetch needs no
/// preflight, but the browser says where it comes from (`Origin`, `Sec-Fetch-Site`). Clients
/// that are not browsers send neither.
fn cross_site(method: &axum::http::Method, headers: &HeaderMap) -> Option<String> {
    if method.is_safe() {
        return None;
    }
    let text = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let host = text(header::HOST.as_str());
    if let Some(origin) = text(header::ORIGIN.as_str()) {
        let authority = origin
            .split_once("://")
            .map_or(origin, |(_, rest)| rest)
            .trim_end_matches('/');
        if host.is_none_or(|host| !authority.eq_ignore_ascii_case(host)) {
            return Some(format!(
                "a {method} from origin {origin:?} is refused: changes are accepted only from this server's own pages or from clients that are not browsers"
            ));
        }
    }
    match text("sec-fetch-site") {
        Some(site @ ("cross-site" | "same-site")) => Some(format!(
            "a {site} {method} is refused: changes are accepted only from this server's own pages or from clients that are not browsers"
        )),
        _ => None,
    }
}

/// `POST /v1/delegations`: a delegation file as JSON (`workdir` relative to `--root`, and
/// inside it); runs it here and answers at once with its id.
async fn submit(
    State(app): State<Shared>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Result<Response, ApiError> {
    let value: Value = serde_json::from_slice(&body)
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
    let source = app.root.join("(submitted)");
    // Checked here whether it runs here or on a worker: a bad file is the caller's 400. On a
    // blocking thread: it reads the workdir's policy, hooks and scripts, which a hostile workdir
    // may have made slow to read; the server's async workers (and /healthz) never wait on them.
    let delegation = {
        let (overrides, source, entry, root) = (
            overrides.clone(),
            source.clone(),
            Value::Object(entry.clone()),
            app.root.clone(),
        );
        tokio::task::spawn_blocking(move || {
            Assembler::new(overrides).json(&source, "the request body", entry, &root)
        })
        .await
        .map_err(|e| {
            ApiError(
                StatusCode::INTERNAL_SERVER_ERROR,
                "internal".into(),
                format!("checking the delegation failed: {e}"),
            )
        })?
        .map_err(ApiError::from)?
    };
    let id = harness::new_id();
    let queued = app.queue.as_ref().map(|_| QueuedRun {
        source: source.clone(),
        workdir: inside.clone(),
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
    if let Some(queued) = &app.queue {
        let job = harness_queue::Job {
            schema: harness_queue::JOB_SCHEMA.to_owned(),
            id: id.clone(),
            batch: queued.batch.clone(),
            line: 0,
            source,
            base: app.root.clone(),
            delegation: Value::Object(entry),
            overrides,
        };
        if let Err(e) = queued.queue.enqueue(&job).await {
            app.live
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .remove(&id);
            return Err(ApiError(
                StatusCode::SERVICE_UNAVAILABLE,
                "queue_unavailable".into(),
                format!("the delegation could not be queued: {}", e.message()),
            ));
        }
        app.metrics.submitted.fetch_add(1, Ordering::Relaxed);
        return Ok(accepted(&id, "queued"));
    }
    app.metrics.submitted.fetch_add(1, Ordering::Relaxed);
    let task_app = Arc::clone(&app);
    let task_id = id.clone();
    let mut shutdown = app.shutdown.clone();
    app.tasks
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .spawn(async move {
            let app = task_app;
            let observer = |record: &harness::EventRecord| {
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
                .run_as(task_id.clone(), &delegation, &observer, cancel)
                .await;
            app.count_finished(&report);
            // The live stream ends once the record is readable, so that a client that saw the
            // stream end finds the delegation in the journal.
            let stored = app.writer.stored(
                report,
                RecordMeta {
                    source: Some(source),
                    workdir: Some(inside),
                },
            );
            if let Err(why) = stored.await {
                tracing::error!("harness serve: {task_id} was not recorded: {why}");
            }
            app.live
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .remove(&task_id);
        });
    Ok(accepted(&id, "running"))
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

/// With `--queue`: takes the reports workers send back (and dead letters) into the journal,
/// ends each one's live stream with its events, and acknowledges each once it is stored — until
/// the server shuts down. What comes back while the server is down waits in the queue.
async fn collect(app: Shared, mut shutdown: watch::Receiver<bool>) {
    let Some(queued) = &app.queue else {
        return;
    };
    let mut backoff = Duration::from_millis(250);
    loop {
        let found = tokio::select! {
            _ = shutdown.wait_for(|s| *s) => return,
            found = queued.queue.results(&queued.batch, Duration::from_millis(500)) => found,
        };
        let deliveries = match found {
            Ok(deliveries) => {
                backoff = Duration::from_millis(250);
                deliveries
            }
            Err(e) => {
                tracing::warn!(
                    "harness serve: cannot read reports from {}: {e}; retrying in {backoff:?}",
                    queued.queue.describe()
                );
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(8));
                continue;
            }
        };
        // Delivered again after a restart, yet already in the journal: only acknowledged.
        let ids: Vec<String> = deliveries
            .iter()
            .filter_map(|d| d.outcome.id().map(str::to_owned))
            .collect();
        let recorded = read(&app, move |j| {
            ids.into_iter()
                .filter_map(|id| match j.contains(&id) {
                    Ok(true) => Some(Ok(id)),
                    Ok(false) => None,
                    Err(e) => Some(Err(e)),
                })
                .collect::<harness_records::Result<std::collections::HashSet<String>>>()
        })
        .await;
        let recorded = match recorded {
            Ok(recorded) => recorded,
            Err(ApiError(_, _, why)) => {
                tracing::warn!("harness serve: cannot read the journal: {why}; retrying");
                tokio::time::sleep(backoff).await;
                continue;
            }
        };
        let settled = harness_queue::settle(&*queued.queue, deliveries, |outcome| {
            let report = match outcome {
                harness_queue::Outcome::Done(result) => result.report.clone(),
                harness_queue::Outcome::Dead(dead) => {
                    let Some(id) = dead.id.clone() else {
                        tracing::warn!(
                            "harness serve: a dead letter naming no delegation: {}",
                            dead.reason
                        );
                        return None;
                    };
                    let kind = app
                        .queued_run(&id)
                        .map_or_else(|| "queued".to_owned(), |q| q.kind);
                    harness::Report::not_run(id, &kind, dead.error())
                }
            };
            if recorded.contains(&report.id) {
                return None;
            }
            let run = app.queued_run(&report.id);
            let meta = RecordMeta {
                source: run.as_ref().map(|r| r.source.clone()),
                workdir: run.map(|r| r.workdir),
            };
            app.count_finished(&report);
            let (id, events) = (report.id.clone(), report.events.clone());
            let stored = app.writer.stored(report, meta);
            let app = Arc::clone(&app);
            Some(Box::pin(async move {
                // Not stored: left in the queue, delivered again, recorded then.
                stored.await.map_err(|why| format!("{id}: {why}"))?;
                app.finish_live(&id, events);
                Ok(())
            }))
        })
        .await;
        for why in settled {
            tracing::error!("harness serve: not recorded: {why}");
        }
    }
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

async fn read<T: Send + 'static>(
    app: &Shared,
    work: impl FnOnce(&Journal) -> harness_records::Result<T> + Send + 'static,
) -> Result<T, ApiError> {
    let path = app.journal.clone();
    tokio::task::spawn_blocking(move || work(&Journal::open_read_only(&path)?))
        .await
        .map_err(|e| {
            ApiError(
                StatusCode::INTERNAL_SERVER_ERROR,
                "internal".into(),
                e.to_string(),
            )
        })?
        .map_err(ApiError::from)
}

/// `GET /v1/delegations/{id}`: a running delegation's status, or its record as `harness runs
/// show --json` prints it (its override and review status included).
async fn show(
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
        (None, None) => Err(ApiError(
            StatusCode::NOT_FOUND,
            "not_found".into(),
            format!("no delegation {id}"),
        )),
    }
}

#[derive(serde::Deserialize)]
struct ListQuery {
    review: Option<String>,
}

/// `GET /v1/delegations?review=pending`: the runs awaiting a human, as `harness review --json`.
async fn list(
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
async fn events(
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
                return Err(ApiError(
                    StatusCode::NOT_FOUND,
                    "not_found".into(),
                    format!("no delegation {id}"),
                ));
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
struct OverrideBody {
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
async fn override_run(
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
        return Err(ApiError(
            StatusCode::NOT_FOUND,
            "not_found".into(),
            format!("no delegation {id}"),
        ));
    }
    let done = app.decide(request).await?;
    Ok(axum::Json(json!({"override": done.to_json()})).into_response())
}

/// `GET /v1/report`: the failure-mode dashboard, as `harness report --json`.
async fn report(State(app): State<Shared>) -> Result<Response, ApiError> {
    let records = read(&app, |j| j.list(&harness_records::Filter::default())).await?;
    let dashboard = harness_records::Dashboard::build(&records);
    Ok(axum::Json(dashboard.to_json()).into_response())
}

/// Appends one metric family: its help, type and samples (`labels` as `key="value"`, or empty).
fn family(text: &mut String, name: &str, kind: &str, help: &str, samples: &[(String, u64)]) {
    text.push_str(&format!("# HELP {name} {help}\n# TYPE {name} {kind}\n"));
    for (labels, value) in samples {
        if labels.is_empty() {
            text.push_str(&format!("{name} {value}\n"));
        } else {
            text.push_str(&format!("{name}{{{labels}}} {value}\n"));
        }
    }
}

/// A labelled count per key, as samples.
fn by_label(label: &str, counts: &Mutex<HashMap<String, u64>>) -> Vec<(String, u64)> {
    counts
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .iter()
        .map(|(key, n)| (format!("{label}=\"{key}\""), *n))
        .collect()
}

/// `GET /metrics`: Prometheus text exposition.
async fn metrics(State(app): State<Shared>) -> Response {
    let m = &app.metrics;
    let plain = |n: u64| vec![(String::new(), n)];
    let (running, queued) = {
        let live = app
            .live
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let queued = live.values().filter(|l| l.queued.is_some()).count();
        (live.len() - queued, queued)
    };
    let mut text = String::new();
    for (name, kind, help, samples) in [
        (
            "harness_delegations_submitted_total",
            "counter",
            "Delegations submitted to this server.",
            plain(m.submitted.load(Ordering::Relaxed)),
        ),
        (
            "harness_delegations_finished_total",
            "counter",
            "Delegations finished, by outcome.",
            by_label("outcome", &m.finished),
        ),
        (
            "harness_delegations_running",
            "gauge",
            "Delegations running in this server now.",
            plain(u64::try_from(running).unwrap_or(u64::MAX)),
        ),
        (
            "harness_delegations_queued",
            "gauge",
            "Delegations this server queued for workers, not reported yet.",
            plain(u64::try_from(queued).unwrap_or(u64::MAX)),
        ),
        (
            "harness_overrides_total",
            "counter",
            "Overrides decided through the API or the review page, by decision.",
            by_label("decision", &m.overrides),
        ),
        (
            "harness_http_requests_total",
            "counter",
            "Requests received.",
            plain(m.requests.load(Ordering::Relaxed)),
        ),
        (
            "harness_http_unauthorized_total",
            "counter",
            "Requests refused for a missing or wrong token.",
            plain(m.unauthorized.load(Ordering::Relaxed)),
        ),
        (
            "harness_http_cross_site_total",
            "counter",
            "Requests refused as a web page's doing: another origin changing something, or a Host that is not loopback on a server without a token.",
            plain(m.cross_site.load(Ordering::Relaxed)),
        ),
    ] {
        family(&mut text, name, kind, help, &samples);
    }
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], text).into_response()
}
