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
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::middleware;
use axum::routing::{get, post};
use harness::{Error, Runtime};
use harness_records::JournalWriter;
use serde_json::json;
use tokio::sync::watch;

mod api;
mod app;
mod auth;
mod collector;
mod metrics;
mod pages;

use app::{App, Queued, Shared};

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

/// Every endpoint. Who may call each is in its handler's signature ([`auth`]); [`auth::screen`]
/// comes before all of them.
fn routes(app: &Shared) -> Router {
    Router::new()
        .route(
            "/healthz",
            get(|| async { axum::Json(json!({"status": "ok"})) }),
        )
        .route("/login", get(pages::login_form).post(pages::login))
        .route("/metrics", get(metrics::serve))
        .route("/v1/delegations", post(api::submit).get(api::list))
        .route("/v1/delegations/{id}", get(api::show))
        .route("/v1/delegations/{id}/events", get(api::events))
        .route("/v1/delegations/{id}/override", post(api::override_run))
        .route("/v1/report", get(api::report))
        .route("/", get(pages::index))
        .route("/runs/{id}", get(pages::run_page))
        .route("/report", get(pages::report))
        .route("/runs/{id}/override", post(pages::decide))
        .layer(middleware::from_fn_with_state(
            Arc::clone(app),
            auth::screen,
        ))
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .with_state(Arc::clone(app))
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
                None => auth::random_hex(16).map_err(StartError::Run)?,
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
            metrics: app::Metrics::default(),
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
                .spawn(collector::collect(follower, shutdown));
        }
        let router = routes(&app);
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
