//! The runtime: what every delegation of a process shares — the Starlark globals, the HTTP
//! connection pool, compiled scripts and resolved workspaces — and the calls that run one
//! delegation through the [Ralph loop](crate::ralph).

use std::sync::Arc;

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use harness_builtins::{Engine, Script, Workspaces};

use crate::cache::Cache;
use crate::delegation::Delegation;
use crate::error::{Error, Result};
use crate::events::Observer;
use crate::guard::{Probe, ReviewProbe};
use crate::policy::Policy;
use crate::report::Report;
use crate::verifier::Verifier;

/// Reads the trace id of a delegation's root span, when the process exports traces (the binary
/// knows how; the runtime does not install a subscriber).
pub type TraceIdReader = fn(&tracing::Span) -> Option<String>;

/// What the runtime shares between delegations: the Starlark globals, the HTTP connection pool,
/// compiled scripts and resolved workspaces.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) engine: Arc<Engine>,
    pub(crate) hook_engine: Arc<Engine>,
    pub(crate) http: reqwest::Client,
    pub(crate) hooks: Cache<Policy>,
    pub(crate) verifiers: Cache<Verifier>,
    pub(crate) scripts: Cache<(Arc<Script>, Arc<harness_builtins::Sandbox>)>,
    pub(crate) workspaces: Workspaces,
    pub(crate) trace_ids: Option<TraceIdReader>,
    /// One lock per workspace for the delegations that can change files (DESIGN §4.8): a diff
    /// could not tell whose change it saw, so they observe a workspace one at a time.
    pub(crate) writers: std::sync::Mutex<HashMap<PathBuf, Arc<tokio::sync::Mutex<()>>>>,
    /// Reads the review state of a run journal ([`Runtime::watch_reviews`]).
    pub(crate) review: std::sync::OnceLock<Probe>,
    /// Writes a run's row when it starts ([`Runtime::record_starts`]).
    pub(crate) starts: std::sync::OnceLock<Starts>,
    /// Records a child run when it ends ([`Runtime::record_children`]).
    pub(crate) children: std::sync::OnceLock<Children>,
    /// Shows a child run's events as they happen ([`Runtime::observe_children`]).
    pub(crate) child_events: std::sync::OnceLock<ChildEvents>,
}

/// A [`ChildObserver`] the runtime holds.
pub(crate) struct ChildEvents(pub(crate) ChildObserver);

impl std::fmt::Debug for ChildEvents {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ChildObserver")
    }
}

/// One event of a child delegation (DESIGN §9), with where the child is in its tree.
#[derive(Debug, Clone, Copy)]
pub struct ChildEvent<'a> {
    /// How deep the child is: 1 for a root's child.
    pub depth: u32,
    /// The run whose `delegate` call started it.
    pub parent_id: &'a str,
    /// Its task.
    pub task: &'a str,
    /// The attempts it may make.
    pub max_attempts: u32,
    /// What happened (its `run_id` is the child's id).
    pub record: &'a crate::events::EventRecord,
}

/// Sees every recorded event of every child delegation as it happens (the progress of a tree;
/// see [`Runtime::observe_children`]). Called from the children's tasks: it must be quick.
pub type ChildObserver = Arc<dyn Fn(&ChildEvent<'_>) + Send + Sync>;

/// A [`ChildRecorder`] the runtime holds.
pub(crate) struct Children(ChildRecorder);

impl std::fmt::Debug for Children {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ChildRecorder")
    }
}

/// Records a child delegation (DESIGN §9) that has ended in the run journal at the path it is
/// given, and returns the seal of its record as it completed, or why it could not be recorded.
/// Called on a blocking thread.
pub type ChildRecorder =
    Arc<dyn Fn(&Path, &Delegation, &Report) -> std::result::Result<String, String> + Send + Sync>;

/// A [`StartRecorder`] the runtime holds.
pub(crate) struct Starts(StartRecorder);

impl std::fmt::Debug for Starts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StartRecorder")
    }
}

/// A delegation that has started, as [`StartRecorder`]s are told of it.
#[derive(Debug, Clone)]
pub struct RunStarted<'a> {
    /// Its id.
    pub id: &'a str,
    /// When it started.
    pub started_at: std::time::SystemTime,
    /// Its delegate kind.
    pub delegate_kind: &'a str,
    /// The delegation file it was read from.
    pub source: &'a Path,
    /// The workspace it runs in.
    pub workdir: &'a Path,
    /// The run it was delegated from.
    pub parent_id: Option<&'a str>,
    /// Its delegate can run programs unconfined (`run_command`, an agent CLI or a `command`
    /// delegate, without bubblewrap): what it runs could write the journal, so an override
    /// recorded meanwhile is suspect.
    pub unconfined: bool,
}

/// Writes the row of a run that has started into the run journal at the path it is given (see
/// [`Runtime::record_starts`]); the run's delegate starts once the future it returns resolves.
pub type StartRecorder = Arc<
    dyn Fn(&Path, &RunStarted<'_>) -> std::pin::Pin<Box<dyn Future<Output = ()> + Send>>
        + Send
        + Sync,
>;

impl Shared {
    /// Tells the [`StartRecorder`] that run `id` of `delegation` has started, and waits until
    /// its row is written: a harness killed once the delegate acts leaves a run that is found.
    pub(crate) async fn started(&self, id: &str, delegation: &Delegation) {
        if let (Some(Starts(recorder)), Some(journal)) = (self.starts.get(), delegation.journal()) {
            let written = recorder(
                journal,
                &RunStarted {
                    id,
                    started_at: std::time::SystemTime::now(),
                    delegate_kind: delegation.delegate().kind(),
                    source: delegation.source(),
                    workdir: delegation.recorded_workdir(),
                    parent_id: delegation.parent_id(),
                    unconfined: delegation.runs_unconfined(),
                },
            );
            written.await;
        }
    }

    /// True when child runs are recorded ([`Runtime::record_children`] was called).
    pub(crate) fn records_children(&self) -> bool {
        self.children.get().is_some()
    }

    /// Records the child run `report` of `delegation` with the [`ChildRecorder`]: the seal of its
    /// record, `None` when the run is not journalled, or why it could not be recorded.
    pub(crate) async fn finished(
        &self,
        delegation: &Delegation,
        report: &Report,
    ) -> std::result::Result<Option<String>, String> {
        let (Some(Children(recorder)), Some(journal)) = (self.children.get(), delegation.journal())
        else {
            return Ok(None);
        };
        let (recorder, journal) = (Arc::clone(recorder), journal.to_path_buf());
        let (delegation, report) = (delegation.clone(), report.clone());
        tokio::task::spawn_blocking(move || recorder(&journal, &delegation, &report))
            .await
            .unwrap_or_else(|e| Err(format!("the journal writer failed: {e}")))
            .map(Some)
    }

    /// The lock of the workspace at `root` (its canonical path, when it has one).
    pub(crate) fn writer_lock(&self, root: &Path) -> Arc<tokio::sync::Mutex<()>> {
        let key = root.canonicalize().unwrap_or_else(|_| root.to_path_buf());
        let mut locks = self
            .writers
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        Arc::clone(locks.entry(key).or_default())
    }
}

/// Runs delegations. Holds what is shared between them: the Starlark globals, the HTTP
/// connection pool and compiled scripts.
#[derive(Debug, Clone)]
pub struct Runtime {
    shared: Arc<Shared>,
}

/// Returns a fresh delegation id, `d-` and 16 hex digits.
pub fn new_id() -> String {
    format!("d-{:016x}", fastrand::u64(..))
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
        let _ = self.shared.children.set(Children(recorder));
    }

    /// Shows the progress of delegation trees: `observer` sees each recorded event of each child
    /// run as it happens, with the child's depth and parent (`harness run` nests them under the
    /// call that started them). Without it, a child's events are only in its record.
    pub fn observe_children(&self, observer: ChildObserver) {
        let _ = self.shared.child_events.set(ChildEvents(observer));
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
