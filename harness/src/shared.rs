//! What every delegation of a process shares ([`Shared`]): the Starlark globals, the HTTP
//! connection pool, compiled scripts and resolved workspaces, the recorders of runs and
//! children, and the loop a delegation tree's children run through.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use harness_builtins::{Engine, Script, Workspaces};

use crate::cache::Cache;
use crate::delegate::BoxFuture;
use crate::delegation::Delegation;
use crate::events::Observer;
use crate::guard::Probe;
use crate::policy::Policy;
use crate::report::{CarriedRun, Report};
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
    /// Reads the review state of a run journal ([`Runtime::watch_reviews`](crate::Runtime::watch_reviews)).
    pub(crate) review: std::sync::OnceLock<Probe>,
    /// Writes a run's row when it starts ([`Runtime::record_starts`](crate::Runtime::record_starts)).
    pub(crate) starts: std::sync::OnceLock<Starts>,
    /// Records a child run when it ends ([`Runtime::record_children`](crate::Runtime::record_children)).
    pub(crate) children: std::sync::OnceLock<Children>,
    /// Shows a child run's events as they happen ([`Runtime::observe_children`](crate::Runtime::observe_children)).
    pub(crate) child_events: std::sync::OnceLock<ChildEvents>,
    /// Relays an agent CLI's MCP client to the tools this process serves it
    /// ([`Runtime::bridge_mcp`](crate::Runtime::bridge_mcp)).
    pub(crate) mcp_bridge: std::sync::OnceLock<Vec<String>>,
    /// Runs a delegation through the Ralph loop: a delegation tree's children run through it
    /// (`tree/family.rs`), so that the loop that calls a child is not a module the child's
    /// runner depends on.
    pub(crate) run_loop: RunLoop,
}

/// How [`Shared::run_loop`] runs a delegation: the Ralph loop, boxed.
pub(crate) type RunLoop = for<'a> fn(
    &'a Arc<Shared>,
    String,
    &'a Delegation,
    &'a dyn Observer,
    BoxFuture<'a, String>,
) -> BoxFuture<'a, Report>;

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
/// see [`Runtime::observe_children`](crate::Runtime::observe_children)). Called from the children's tasks: it must be quick.
pub type ChildObserver = Arc<dyn Fn(&ChildEvent<'_>) + Send + Sync>;

/// What the runtime does with a child run that has ended.
pub(crate) enum Children {
    /// Records it where its parent is recorded ([`Runtime::record_children`](crate::Runtime::record_children)).
    Record(ChildRecorder),
    /// Seals it and carries it in its root's report ([`Runtime::carry_children`](crate::Runtime::carry_children)).
    Carry(ChildSealer),
}

impl std::fmt::Debug for Children {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Children::Record(_) => "ChildRecorder",
            Children::Carry(_) => "ChildSealer",
        })
    }
}

/// Records a child delegation (DESIGN §9) that has ended in the run journal at the path it is
/// given, and returns the seal of its record as it completed, or why it could not be recorded.
/// Called on a blocking thread.
pub type ChildRecorder =
    Arc<dyn Fn(&Path, &Delegation, &Report) -> std::result::Result<String, String> + Send + Sync>;

/// Returns the seal the record of a carried child run will have once whoever records its root
/// records it (see [`Runtime::carry_children`](crate::Runtime::carry_children)), or why it has
/// none. Called on a blocking thread.
pub type ChildSealer =
    Arc<dyn Fn(&CarriedRun) -> std::result::Result<String, String> + Send + Sync>;

/// A [`StartRecorder`] the runtime holds.
pub(crate) struct Starts(pub(crate) StartRecorder);

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
/// [`Runtime::record_starts`](crate::Runtime::record_starts)); the run's delegate starts once the future it returns resolves.
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

    /// True when child runs are recorded ([`Runtime::record_children`](crate::Runtime::record_children) was called).
    pub(crate) fn records_children(&self) -> bool {
        self.children.get().is_some()
    }

    /// Records the child run `report` of `delegation` with the [`ChildRecorder`], or seals it
    /// with the [`ChildSealer`] and hands it, after the runs of its own subtree, to `carry` (its
    /// parent's, which carries them on to the root). Returns the seal of its record, `None` when
    /// the run is not journalled, or why it could not be recorded.
    pub(crate) async fn finished(
        &self,
        delegation: &Delegation,
        report: &mut Report,
        carry: impl FnOnce(Vec<CarriedRun>),
    ) -> std::result::Result<Option<String>, String> {
        let (Some(children), Some(journal)) = (self.children.get(), delegation.journal()) else {
            return Ok(None);
        };
        match children {
            Children::Record(recorder) => {
                let (recorder, journal) = (Arc::clone(recorder), journal.to_path_buf());
                let (delegation, report) = (delegation.clone(), report.clone());
                tokio::task::spawn_blocking(move || recorder(&journal, &delegation, &report))
                    .await
                    .unwrap_or_else(|e| Err(format!("the journal writer failed: {e}")))
                    .map(Some)
            }
            Children::Carry(sealer) => {
                let mut runs = std::mem::take(&mut report.carried);
                let sealer = Arc::clone(sealer);
                let absolute =
                    |p: &Path| std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf());
                let run = CarriedRun {
                    source: absolute(delegation.source()),
                    workdir: absolute(delegation.recorded_workdir()),
                    report: report.clone(),
                };
                let sealed = tokio::task::spawn_blocking(move || {
                    // Sealed as its recorder will read it: after the trip through JSON.
                    let run = CarriedRun::as_sent(&run)?;
                    sealer(&run).map(|seal| (seal, run))
                })
                .await
                .unwrap_or_else(|e| Err(format!("sealing the child failed: {e}")));
                // A child that cannot be sealed is not carried (its parent is told why); the
                // runs under it, each sealed, still are.
                let sealed = sealed.map(|(seal, run)| {
                    runs.push(run);
                    Some(seal)
                });
                carry(runs);
                sealed
            }
        }
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

/// Returns a fresh delegation id, `d-` and 16 hex digits.
pub fn new_id() -> String {
    format!("d-{:016x}", fastrand::u64(..))
}
