//! The runtime: what every delegation of a process shares — the Starlark globals, the HTTP
//! connection pool, compiled scripts and resolved workspaces — and the calls that run one
//! delegation through the [Ralph loop](crate::ralph).

use std::sync::Arc;

use harness_builtins::{Engine, Workspaces};

use crate::cache::Cache;
use crate::delegate::BoxFuture;
use crate::delegation::Delegation;
use crate::error::{Error, Result};
use crate::events::Observer;
use crate::guard::{Probe, ReviewProbe};
use crate::report::Report;
use crate::shared::{
    ChildEvents, ChildObserver, ChildRecorder, ChildSealer, Children, Shared, StartRecorder,
    Starts, TraceIdReader, new_id,
};

/// Runs delegations. Holds what is shared between them: the Starlark globals, the HTTP
/// connection pool and compiled scripts.
#[derive(Debug, Clone)]
pub struct Runtime {
    shared: Arc<Shared>,
}

impl Runtime {
    /// Creates a runtime.
    ///
    /// # Errors
    /// [`ErrorKind::Config`](crate::ErrorKind::Config) when the HTTP client cannot be built.
    pub fn new() -> Result<Self> {
        Self::with_trace_ids(None)
    }

    /// Creates a runtime whose reports carry the trace id `reader` reads off each delegation's
    /// root span ([`Report::trace_id`]).
    ///
    /// # Errors
    /// As [`Runtime::new`].
    pub fn with_trace_ids(reader: Option<TraceIdReader>) -> Result<Self> {
        let http = harness_builtins::http_client_builder()
            .build()
            .map_err(|e| Error::config(format!("cannot build the HTTP client: {e}")))?;
        Ok(Runtime {
            shared: Arc::new(Shared {
                engine: Arc::new(Engine::new()),
                hook_engine: Arc::new(harness_hooks::engine()),
                http,
                hooks: Cache::new(),
                verifiers: Cache::new(),
                scripts: Cache::new(),
                workspaces: Workspaces::new(),
                trace_ids: reader,
                writers: std::sync::Mutex::default(),
                review: std::sync::OnceLock::new(),
                starts: std::sync::OnceLock::new(),
                children: std::sync::OnceLock::new(),
                child_events: std::sync::OnceLock::new(),
                mcp_bridge: std::sync::OnceLock::new(),
                run_loop,
            }),
        })
    }

    /// Watches the review decisions of the run journals while delegates that can change files
    /// run (DESIGN §4.11): `probe` reads how many overrides and audit-log rows a journal holds
    /// that this process did not record, before the first attempt and after each; a change ends
    /// the delegation `gate_tampered` (a delegate running `harness override` on its own runs).
    /// Set once; later calls are ignored.
    pub fn watch_reviews(&self, probe: ReviewProbe) {
        let _ = self.shared.review.set(Probe(probe));
    }

    /// Has each delegation's start written to the run journal it will be recorded in (its
    /// `journal`, as the command set it) by `recorder`, so that a run whose process dies is
    /// found (DESIGN §5: shown as `error`/`interrupted`, never lost). Set once; later calls are
    /// ignored.
    pub fn record_starts(&self, recorder: StartRecorder) {
        let _ = self.shared.starts.set(Starts(recorder));
    }

    /// Has each child delegation (a `delegate` call, DESIGN §9) recorded by `recorder` in the run
    /// journal its parent is recorded in, when it ends: the parent's tool result carries the
    /// seal it returns. Set once; later calls are ignored.
    pub fn record_children(&self, recorder: ChildRecorder) {
        let _ = self.shared.children.set(Children::Record(recorder));
    }

    /// Has each child delegation carried in its root's report (`Report::carried`), children's
    /// children first, to be recorded with the root wherever the root is recorded — for a process
    /// that cannot write its runs' journal (a queue worker: the journal is its submitter's).
    /// `sealer` gives the seal each child's record will have, which its parent's tool result
    /// carries and `harness audit` checks. Set once, and instead of
    /// [`Runtime::record_children`]: whichever is called first holds.
    pub fn carry_children(&self, sealer: ChildSealer) {
        let _ = self.shared.children.set(Children::Carry(sealer));
    }

    /// Shows the progress of delegation trees: `observer` sees each recorded event of each child
    /// run as it happens, with the child's depth and parent (`harness run` nests them under the
    /// call that started them). Without it, a child's events are only in its record.
    pub fn observe_children(&self, observer: ChildObserver) {
        let _ = self.shared.child_events.set(ChildEvents(observer));
    }

    /// Lets an agent CLI delegate (Claude Code, Codex, Gemini CLI) offered `tools: [delegate]`
    /// call it: for each run of the CLI this process serves `delegate` as an MCP server on a
    /// Unix socket of that run, and configures the CLI with `argv` plus the socket's path as
    /// the server's command — a program that relays its standard input and output to the socket
    /// (`harness mcp --via SOCKET`). Each call then runs here as a child of the run, like a
    /// model's. Without it such a delegation is a configuration error when it runs. Set once;
    /// later calls are ignored.
    pub fn bridge_mcp(&self, argv: Vec<String>) {
        let _ = self.shared.mcp_bridge.set(argv);
    }

    /// Runs one delegation to its outcome. Never panics on bad input: every failure is in the
    /// report.
    pub async fn run(&self, delegation: &Delegation, observer: &dyn Observer) -> Report {
        self.run_until(delegation, observer, std::future::pending())
            .await
    }

    /// Runs one delegation as [`Runtime::run`] does, unless `cancel` resolves first: then the
    /// delegation is stopped where it is (its commands and their process groups are killed) and
    /// the report, with the attempts made so far, ends in an error of kind `cancelled` whose
    /// message is what `cancel` resolved to (e.g. "interrupted by SIGINT").
    pub async fn run_until(
        &self,
        delegation: &Delegation,
        observer: &dyn Observer,
        cancel: impl Future<Output = String>,
    ) -> Report {
        self.run_as(new_id(), delegation, observer, cancel).await
    }

    /// Runs one delegation as [`Runtime::run_until`] does, under the id `id` given to it when it
    /// was queued (`d-` and 16 hex digits), so that a delegation delivered twice is recorded
    /// once.
    pub async fn run_as(
        &self,
        id: String,
        delegation: &Delegation,
        observer: &dyn Observer,
        cancel: impl Future<Output = String>,
    ) -> Report {
        self.shared.started(&id, delegation).await;
        crate::ralph::run(&self.shared, id, delegation, observer, cancel).await
    }
}

/// The Ralph loop as [`Shared::run_loop`] holds it: how a delegation tree's children run.
fn run_loop<'a>(
    shared: &'a Arc<Shared>,
    id: String,
    delegation: &'a Delegation,
    observer: &'a dyn Observer,
    cancel: BoxFuture<'a, String>,
) -> BoxFuture<'a, Report> {
    Box::pin(crate::ralph::run(shared, id, delegation, observer, cancel))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};

    /// A run's delegate acts only once its start is written: a harness killed after that leaves
    /// a run that is found (the start used to be written beside the run, and a run killed early
    /// was lost from the journal).
    #[tokio::test]
    async fn the_delegate_waits_for_its_start_to_be_written() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(
            dir.path().join("agent.star"),
            "def respond(m):\n    return 'done'\n",
        )
        .expect("agent");
        std::fs::write(
            dir.path().join("delegation.yaml"),
            "task: t\ndelegate: {kind: scripted, script: agent.star}\n",
        )
        .expect("file");
        let delegation = crate::Assembler::new(crate::Overrides {
            journal: Some(dir.path().join("runs.db")),
            ..crate::Overrides::default()
        })
        .file(&dir.path().join("delegation.yaml"))
        .expect("assembles");
        let written = Arc::new(AtomicBool::new(false));
        let runtime = Runtime::new().expect("runtime");
        let marker = Arc::clone(&written);
        runtime.record_starts(Arc::new(move |_, _| {
            let marker = Arc::clone(&marker);
            Box::pin(async move {
                tokio::time::sleep(std::time::Duration::from_millis(200)).await;
                marker.store(true, Ordering::SeqCst);
            })
        }));
        let early = AtomicBool::new(false);
        let observer = |_: &crate::events::EventRecord| {
            if !written.load(Ordering::SeqCst) {
                early.store(true, Ordering::SeqCst);
            }
        };
        let report = runtime.run(&delegation, &observer).await;
        assert!(report.error.is_none(), "{:?}", report.error);
        assert!(written.load(Ordering::SeqCst), "the start was written");
        assert!(
            !early.load(Ordering::SeqCst),
            "an event came before the start was written"
        );
    }
}
