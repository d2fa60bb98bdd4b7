//! A tree running: a `delegate` call read, its child made from a profile and run as a task of
//! its own under the parent's budget and slots, its answer; the family that cancels them.

use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::Deserialize;
use serde_json::{Map, Value, json};
use tracing::Instrument as _;

use crate::config::ReadScript;
use crate::delegation::Delegation;
use crate::error::Error;
use crate::gates::{Gates, RawGates};
use crate::overrides::Overrides;
use crate::project::ProjectPolicy;
use crate::report::Report;
use crate::shared::Shared;
use crate::spec::DelegationFile;
use crate::tools::ToolOutput;
use crate::verifier::VerifySource;

use super::isolate::{Applied, Isolated};
use super::place::Tree;
use super::profile::DEFAULT_MAX_CHILDREN;
/// A `delegate` call's arguments.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct Call {
    task: String,
    #[serde(default)]
    profile: Option<String>,
    #[serde(default)]
    checks: Option<Vec<Value>>,
    #[serde(default)]
    criteria: Option<Vec<Value>>,
    #[serde(default)]
    verify: Option<String>,
    #[serde(default)]
    max_verify_retries: Option<u32>,
}

/// The argument names of a `delegate` call.
const ARGUMENTS: [&str; 6] = [
    "task",
    "profile",
    "checks",
    "criteria",
    "verify",
    "max_verify_retries",
];

/// What a run knows of the children it started: the slots they run in, what they spent, and
/// how to stop them. Lives as long as the run, beyond the attempts that started them.
pub(crate) struct Family {
    cancel: tokio::sync::watch::Sender<Option<String>>,
    tasks: Mutex<Vec<tokio::task::JoinHandle<()>>>,
    slots: Arc<tokio::sync::Semaphore>,
    /// When the parent's time runs out (`limits.timeout_s`), from when it started.
    deadline: Option<Instant>,
    /// The parent's token budget and the key that sets it (`limits.max_tokens`, or the root's
    /// `limits.max_tree_tokens` when smaller); what the parent's own turns and its critic spent
    /// so far, and its ended children with everything under them.
    max_tokens: Option<(u64, &'static str)>,
    own: AtomicU64,
    children: AtomicU64,
    /// What the whole tree may spend (`limits.max_tree_tokens`), and the counts this run's
    /// spending adds to: the whole tree's first, then each subtree it is in (its own last).
    tree_cap: Option<u64>,
    tallies: Vec<Arc<AtomicU64>>,
    /// Tokens set aside for the children still running, and the `delegate` calls of the
    /// current turn not yet made (what is left is shared among them).
    shares: Mutex<Shares>,
    /// Isolated children waiting to apply their changes, by call number: the first applies.
    pending: Mutex<std::collections::BTreeSet<u64>>,
    calls: AtomicU64,
    applied: tokio::sync::Notify,
    /// The ended runs of its subtree this process could not record, to be carried in its report
    /// (see [`Shared::finished`]).
    carried: Mutex<Vec<crate::report::CarriedRun>>,
}

/// What a parent's token budget has promised its running children.
#[derive(Debug, Default)]
struct Shares {
    reserved: u64,
    expected: u64,
}

/// Tokens a child may spend, set aside from its parent's budget until it ends.
struct Reserved {
    family: Arc<Family>,
    tokens: u64,
}

impl Drop for Reserved {
    fn drop(&mut self) {
        self.family.shares().reserved -= self.tokens;
    }
}

/// An isolated child's place in the order its parent called: it applies its changes after every
/// isolated child called before it.
struct Queued {
    family: Arc<Family>,
    number: u64,
}

impl Queued {
    /// Resolves when every isolated child called before this one has applied (or given up).
    async fn turn(&self) {
        loop {
            let next = self.family.applied.notified();
            tokio::pin!(next);
            next.as_mut().enable();
            if self.family.pending().first() == Some(&self.number) {
                return;
            }
            next.await;
        }
    }
}

impl Drop for Queued {
    fn drop(&mut self) {
        self.family.pending().remove(&self.number);
        self.family.applied.notify_waiters();
    }
}

impl Family {
    /// The family of a run of `delegation`, starting now.
    pub(crate) fn new(delegation: &Delegation) -> Arc<Family> {
        let tree = delegation.tree();
        let slots = tree.map_or(DEFAULT_MAX_CHILDREN, Tree::max_children);
        let tree_cap = tree.and_then(Tree::max_tree_tokens);
        // A child counts toward the tallies its parent gave it; a root starts the tree's.
        let tallies = match tree.map(Tree::tallies) {
            Some(tallies) if !tallies.is_empty() => tallies.to_vec(),
            _ => vec![Arc::new(AtomicU64::new(0))],
        };
        let own_budget = delegation
            .max_tokens()
            .map(|max| (max, "limits.max_tokens"));
        let tree_budget = tree_cap
            .filter(|_| tallies.len() == 1)
            .map(|max| (max, "limits.max_tree_tokens"));
        let max_tokens = match (own_budget, tree_budget) {
            (Some(own), Some(tree)) => Some(if tree.0 < own.0 { tree } else { own }),
            (own, tree) => own.or(tree),
        };
        Arc::new(Family {
            cancel: tokio::sync::watch::channel(None).0,
            tasks: Mutex::new(Vec::new()),
            slots: Arc::new(tokio::sync::Semaphore::new(slots as usize)),
            deadline: delegation.timeout().map(|t| Instant::now() + t),
            max_tokens,
            own: AtomicU64::new(0),
            children: AtomicU64::new(0),
            tree_cap,
            tallies,
            shares: Mutex::default(),
            pending: Mutex::default(),
            calls: AtomicU64::new(0),
            applied: tokio::sync::Notify::new(),
            carried: Mutex::default(),
        })
    }

    fn shares(&self) -> std::sync::MutexGuard<'_, Shares> {
        self.shares
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn pending(&self) -> std::sync::MutexGuard<'_, std::collections::BTreeSet<u64>> {
        self.pending
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Says that the delegate's turn makes `calls` `delegate` calls at once: what the parent's
    /// budget has left is shared among them.
    pub(crate) fn expect_calls(&self, calls: usize) {
        self.shares().expected = calls as u64;
    }

    /// Takes a place in the order isolated children apply their changes (call order: made before
    /// the call first waits).
    fn queue(self: &Arc<Self>) -> Queued {
        let number = self.calls.fetch_add(1, Ordering::Relaxed);
        self.pending().insert(number);
        Queued {
            family: Arc::clone(self),
            number,
        }
    }

    /// Counts tokens the run's own turns or its critic spent against its budget, and toward
    /// every tally it is in (the tree's, each subtree's), as they are spent.
    pub(crate) fn spend(&self, tokens: u64) {
        self.own.fetch_add(tokens, Ordering::Relaxed);
        for tally in &self.tallies {
            tally.fetch_add(tokens, Ordering::Relaxed);
        }
    }

    /// Tokens its ended children spent, with everything under them (their own records count
    /// only their own; the parent's budget counts them all).
    pub(crate) fn children_spent(&self) -> u64 {
        self.children.load(Ordering::Relaxed)
    }

    /// What the whole tree spent so far and `limits.max_tree_tokens`, when the tree has one.
    pub(crate) fn tree_spent(&self) -> Option<(u64, u64)> {
        self.tree_cap
            .map(|cap| (self.tallies[0].load(Ordering::Relaxed), cap))
    }

    /// Why no member of the tree may spend more, when the tree's tokens are spent.
    pub(crate) fn tree_exhausted(&self) -> Option<String> {
        let (spent, cap) = self.tree_spent().filter(|(spent, cap)| spent >= cap)?;
        Some(format!(
            "the delegation tree spent {spent} tokens of limits.max_tree_tokens = {cap} (this run, its children and theirs together)"
        ))
    }

    /// The tallies a new child counts toward: this run's, then the child's own (returned too).
    fn child_tallies(&self) -> (Vec<Arc<AtomicU64>>, Arc<AtomicU64>) {
        let own = Arc::new(AtomicU64::new(0));
        let mut tallies = self.tallies.clone();
        tallies.push(Arc::clone(&own));
        (tallies, own)
    }

    /// Stops every child still running, saying `why`; each ends `cancelled` and is recorded.
    pub(crate) fn cancel(&self, why: &str) {
        self.cancel.send_replace(Some(why.to_owned()));
    }

    /// Waits until every child has ended and been recorded.
    pub(crate) async fn settle(&self) {
        loop {
            let tasks = std::mem::take(
                &mut *self
                    .tasks
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner),
            );
            if tasks.is_empty() {
                return;
            }
            for task in tasks {
                let _ = task.await;
            }
        }
    }

    /// What a child may spend: the time the parent has left, and its share of the tokens the
    /// parent has left that no running child holds (shared among this turn's calls), set aside
    /// until the child ends.
    fn reserve(
        self: &Arc<Self>,
    ) -> std::result::Result<(Option<Duration>, Option<u64>, Reserved), String> {
        let time = match self.deadline {
            None => None,
            Some(deadline) => match deadline.checked_duration_since(Instant::now()) {
                Some(left) if !left.is_zero() => Some(left),
                _ => return Err("the parent's time (limits.timeout_s) is spent".to_owned()),
            },
        };
        if let Some(why) = self.tree_exhausted() {
            return Err(why);
        }
        let mut shares = self.shares();
        let calls = shares.expected.max(1);
        shares.expected = shares.expected.saturating_sub(1);
        let Some((max, key)) = self.max_tokens else {
            let none = Reserved {
                family: Arc::clone(self),
                tokens: 0,
            };
            return Ok((time, None, none));
        };
        let left = max
            .saturating_sub(self.own.load(Ordering::Relaxed))
            .saturating_sub(self.children_spent());
        if left == 0 {
            return Err(format!(
                "the parent's token budget ({key} = {max}) is spent"
            ));
        }
        let share = left.saturating_sub(shares.reserved) / calls;
        if share == 0 {
            return Err(format!(
                "the parent's token budget ({key} = {max}) is held by the children still running ({} tokens); call again when one has ended",
                shares.reserved
            ));
        }
        shares.reserved += share;
        let reserved = Reserved {
            family: Arc::clone(self),
            tokens: share,
        };
        Ok((time, Some(share), reserved))
    }

    /// The ended runs of its subtree to carry in its report, children's children first; taken
    /// once every child has ended ([`Family::settle`]).
    pub(crate) fn take_carried(&self) -> Vec<crate::report::CarriedRun> {
        std::mem::take(
            &mut *self
                .carried
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        )
    }

    /// Resolves when the family is cancelled, to why.
    fn cancelled(&self) -> impl Future<Output = String> + Send + 'static {
        let mut watch = self.cancel.subscribe();
        async move {
            match watch.wait_for(Option::is_some).await {
                Ok(why) => why.clone().unwrap_or_default(),
                // The parent's run is gone without a word: nothing will wait for this child.
                Err(_) => "the parent run ended".to_owned(),
            }
        }
    }
}

/// How a child ended, as its task hands it back.
struct Ended {
    report: Report,
    /// The seal of its record as it completed, or why it could not be recorded; `None` when
    /// the run is not journalled.
    seal: std::result::Result<Option<String>, String>,
    /// The workspace of its own it worked in, when it could change files.
    isolated: Option<Isolated>,
}

/// What became of an isolated child's changes, for the parent to read.
#[derive(Debug)]
struct Landing {
    /// Applied (the paths), in conflict, not applied (why), or failed.
    applied: std::result::Result<Applied, String>,
    /// Where its workspace was left, with `--keep-workspaces`.
    kept: Option<PathBuf>,
}

/// Runs one `delegate` call of the run `parent_id` of `parent`: builds the child, runs it in a
/// task of its own, and returns what the parent reads (what the child spent counts against the
/// parent's budget). A call that cannot run (unknown argument or profile, too deep, no budget
/// left, nowhere to record the child) is an error result the parent reads; a child that ran is
/// never one, however it ended.
pub(crate) async fn call(
    shared: &Arc<Shared>,
    parent: &Delegation,
    parent_id: &str,
    family: &Arc<Family>,
    arguments: &Map<String, Value>,
) -> ToolOutput {
    let refused = |message: String| ToolOutput::error(format!("delegate: {message}"));
    let Some(tree) = parent.tree() else {
        return refused("this delegation does not offer `delegate`".to_owned());
    };
    // A child that could not be recorded where its parent is would be lost: refuse it.
    if parent.journal().is_some() && !shared.records_children() {
        return refused(
            "this process cannot record child delegations where this run is recorded (its runtime neither records nor carries child runs: `Runtime::record_children`, `Runtime::carry_children`)".to_owned(),
        );
    }
    let (time, tokens, reserved) = match family.reserve() {
        Ok(budget) => budget,
        Err(message) => return refused(message),
    };
    let (tallies, spent) = family.child_tallies();
    let budget = (time, tokens, tallies);
    let (child, isolated) = match build(parent, tree, parent_id, arguments, budget) {
        Ok(built) => built,
        Err(message) => return refused(message),
    };
    // Its place in the order changes are applied: taken before the call first waits.
    let queued = isolated.as_ref().map(|_| family.queue());
    let Ok(slot) = Arc::clone(&family.slots).acquire_owned().await else {
        return refused("the parent run is ending".to_owned());
    };
    let id = crate::shared::new_id();
    let (tell, told) = tokio::sync::oneshot::channel();
    let task = run_child(
        Arc::clone(shared),
        id.clone(),
        (child, isolated),
        Arc::clone(family),
        tell,
        slot,
    );
    // The child's `invoke_agent` span is a child of this call's `execute_tool` span.
    let handle = tokio::spawn(task.instrument(tracing::Span::current()));
    family
        .tasks
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .push(handle);
    let Ok(mut ended) = told.await else {
        return refused(format!("the child {id} stopped without a report"));
    };
    // The child's turns, its critic and its whole subtree, as they were spent.
    family
        .children
        .fetch_add(spent.load(Ordering::Relaxed), Ordering::Relaxed);
    drop(reserved);
    let landing = match (ended.isolated.take(), queued) {
        (Some(copy), Some(queued)) => {
            let keep = tree.profiles.overrides.keep_workspaces;
            Some(land(copy, &queued, &ended.report, parent.workdir(), keep).await)
        }
        _ => None,
    };
    answer(&ended, landing.as_ref())
}

/// Applies an isolated child's changes to its parent's workspace at `target` when the child was
/// verified, after the children called before it; then removes its workspace (or keeps it).
async fn land(
    mut copy: Isolated,
    queued: &Queued,
    report: &Report,
    target: &Path,
    keep: bool,
) -> Landing {
    queued.turn().await;
    let verified = report.verified();
    let target = target.to_path_buf();
    // Walking, comparing and copying files: off the async workers.
    let landed = tokio::task::spawn_blocking(move || {
        let applied = if verified {
            copy.apply(&target)
        } else {
            Err("the child was not verified: its changes stay in its own workspace".to_owned())
        };
        let kept = keep.then(|| copy.keep());
        drop(copy);
        Landing { applied, kept }
    })
    .await;
    landed.unwrap_or_else(|e| Landing {
        applied: Err(format!("applying the child's changes failed: {e}")),
        kept: None,
    })
}

/// The child's task: runs it (in its own workspace, when it has one), records it (or hands it
/// to its parent's `family` to carry), and hands back how it ended.
fn run_child(
    shared: Arc<Shared>,
    id: String,
    (child, isolated): (Delegation, Option<Isolated>),
    family: Arc<Family>,
    tell: tokio::sync::oneshot::Sender<Ended>,
    slot: tokio::sync::OwnedSemaphorePermit,
) -> Pin<Box<dyn Future<Output = ()> + Send>> {
    let cancel = family.cancelled();
    Box::pin(async move {
        shared.started(&id, &child).await;
        let shown = shared.child_events.get().map(|events| Shown {
            observer: Arc::clone(&events.0),
            depth: child.depth(),
            parent_id: child.parent_id().unwrap_or_default().to_owned(),
            task: child.task().to_owned(),
            max_attempts: child.max_attempts(),
        });
        let observer: &dyn crate::events::Observer = match &shown {
            Some(shown) => shown,
            None => &crate::events::Nobody,
        };
        let mut report = (shared.run_loop)(&shared, id, &child, observer, Box::pin(cancel)).await;
        drop(slot);
        let carry = |runs: Vec<_>| {
            family
                .carried
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .extend(runs);
        };
        let seal = shared.finished(&child, &mut report, carry).await;
        let _ = tell.send(Ended {
            report,
            seal,
            isolated,
        });
    })
}

/// A child's events, handed to the runtime's [`ChildObserver`](crate::ChildObserver) with where
/// the child is.
struct Shown {
    observer: crate::ChildObserver,
    depth: u32,
    parent_id: String,
    task: String,
    max_attempts: u32,
}

impl crate::events::Observer for Shown {
    fn on_event(&self, record: &crate::events::EventRecord) {
        (self.observer)(&crate::ChildEvent {
            depth: self.depth,
            parent_id: &self.parent_id,
            task: &self.task,
            max_attempts: self.max_attempts,
            record,
        });
    }

    /// A child's answers and tool calls stay in its record: a tree's progress shows attempts,
    /// checks and verdicts.
    fn wants_progress(&self) -> bool {
        false
    }
}

/// Reads a call's arguments: only the known ones, a task that says something.
fn read_call(arguments: &Map<String, Value>) -> std::result::Result<Call, String> {
    if let Some(key) = arguments.keys().find(|k| !ARGUMENTS.contains(&k.as_str())) {
        return Err(format!(
            "unknown argument `{key}`{}; the arguments are {}",
            crate::plain::did_you_mean_of(key, &ARGUMENTS),
            ARGUMENTS.join(", ")
        ));
    }
    let call: Call = serde_json::from_value(Value::Object(arguments.clone()))
        .map_err(|e| format!("bad arguments: {e}"))?;
    if call.task.trim().is_empty() {
        return Err("`task` is empty; say what the child should do".to_owned());
    }
    Ok(call)
}

/// Finds the profile `name` among `named`, or says which there are.
fn profile<'a>(
    named: &'a [(String, DelegationFile)],
    name: &str,
) -> std::result::Result<&'a DelegationFile, String> {
    if let Some((_, profile)) = named.iter().find(|(n, _)| n == name) {
        return Ok(profile);
    }
    let names: Vec<&str> = named.iter().map(|(n, _)| n.as_str()).collect();
    Err(format!(
        "no profile {name:?}{}; {}",
        crate::plain::did_you_mean_of(name, &names),
        if names.is_empty() {
            "none is named (`delegates:` in the delegation file or .harness/policy.yaml)".to_owned()
        } else {
            format!("the profiles are {}", names.join(", "))
        }
    ))
}

/// What a child is assembled from besides its profile and the call.
struct Making<'a> {
    project: &'a Arc<ProjectPolicy>,
    overrides: Overrides,
    workdir: PathBuf,
    /// How messages name the call.
    label: String,
    /// Where the call's inline verifier is said to come from.
    verify_name: String,
    /// The time and tokens it may spend.
    budget: (Option<Duration>, Option<u64>),
    /// The caller may run programs itself (`run_command`, or a caller outside the tree): only
    /// then may its call give `checks` or command criteria, which run programs.
    programs: bool,
}

/// The delegation `call` asks of `template`.
fn make(
    template: &DelegationFile,
    call: Call,
    making: Making<'_>,
) -> std::result::Result<Delegation, String> {
    let Making {
        project,
        overrides,
        workdir,
        label,
        verify_name,
        budget: (time, tokens),
        programs,
    } = making;
    let mut overrides = overrides;
    let mut file = template.clone();
    file.task = call.task;
    file.parent_id.clone_from(&overrides.parent_id);
    if let Some(retries) = call.max_verify_retries {
        file.max_verify_retries = Some(retries);
    }
    add_gates(
        &mut file,
        &project.defaults,
        &label,
        (call.checks, call.criteria),
        programs,
    )?;
    if let Some(text) = call.verify {
        // A verifier the caller wrote reads the workspace and nothing else: no programs, no
        // environment, no network the operator allowed for the scripts it wrote.
        overrides.allow_exec.clear();
        overrides.allow_env.clear();
        overrides.allow_hosts.clear();
        file.allow_hosts.clear();
        if file.verify.is_some() {
            return Err(
                "the profile has its own verifier; add `checks` or `criteria` instead of `verify`"
                    .to_owned(),
            );
        }
        let refuse: &ReadScript<'_> = &|key: &str, _: &Path| {
            Err(Error::config(format!(
                "`{key}`: a delegate call gives its verifier inline"
            )))
        };
        file.verify = VerifySource::from_keys(
            &label,
            verify_name,
            "def run(result):",
            Some(Some(text)),
            ("verify_file", None),
            refuse,
        )
        .map_err(|e| e.message().to_owned())?;
    }
    file.timeout = min(file.timeout, time);
    file.max_tokens = min(file.max_tokens, tokens);
    Delegation::assemble(file, project, &overrides, workdir).map_err(|e| e.message().to_owned())
}

/// Builds the child a call asks for, as its profile and arguments say, within `budget` (its
/// time, its tokens, and the tallies its spending counts toward); a child that can change files
/// gets a copy of its parent's workspace to work in.
fn build(
    parent: &Delegation,
    tree: &Tree,
    parent_id: &str,
    arguments: &Map<String, Value>,
    (time, tokens, tallies): (Option<Duration>, Option<u64>, Vec<Arc<AtomicU64>>),
) -> std::result::Result<(Delegation, Option<Isolated>), String> {
    let budget = (time, tokens);
    let call = read_call(arguments)?;
    if tree.depth + 1 > tree.max_depth {
        return Err(format!(
            "this delegation is at depth {} and limits.max_depth is {}: a child here would be too deep; do the work yourself, or raise limits.max_depth in the root's delegation file",
            tree.depth, tree.max_depth
        ));
    }
    let profiles = &tree.profiles;
    let own = call.profile.clone().or_else(|| tree.own.clone());
    let template = match &own {
        None => &profiles.root,
        Some(name) => profile(&profiles.named, name)
            .map_err(|e| format!("{e} (or leave `profile` out to delegate to your own kind)"))?,
    };
    let mut overrides = profiles.overrides.clone();
    overrides.parent_id = Some(parent_id.to_owned());
    // The child's span is the parent's tool call's child, never the caller's context again.
    overrides.trace_parent = None;
    let source = parent.source().display();
    let making = |workdir: &Path| Making {
        project: &profiles.project,
        overrides: overrides.clone(),
        workdir: workdir.to_path_buf(),
        label: format!(
            "{source}: delegate call{}",
            own.as_deref()
                .map(|p| format!(" (profile {p})"))
                .unwrap_or_default()
        ),
        verify_name: format!("{source}#delegate.verify"),
        budget,
        programs: parent.tools().iter().any(|t| t == "run_command"),
    };
    // A child works where its parent does: the root's workspace, or a parent's own copy.
    let mut child = make(template, call.clone(), making(parent.workdir()))?;
    let mut isolated = None;
    if child.changes_files() && child.observe() {
        let copy = Isolated::copy(parent.workdir(), tree.isolation_mb, &journals(parent))
            .map_err(|e| format!("cannot give the child a workspace of its own: {e}"))?;
        child = make(template, call, making(copy.root()))?;
        child.set_home(parent.recorded_workdir().to_path_buf());
        isolated = Some(copy);
    }
    child.set_tree(Tree {
        profiles: Arc::clone(profiles),
        own,
        depth: tree.depth + 1,
        max_depth: tree.max_depth,
        max_children: tree.max_children,
        isolation_mb: tree.isolation_mb,
        max_tree_tokens: tree.max_tree_tokens,
        tallies,
    });
    Ok((child, isolated))
}

/// The journals inside `parent`'s workspace (relative to it, with SQLite's companion files):
/// never copied into a child's, never applied back.
fn journals(parent: &Delegation) -> Vec<PathBuf> {
    let absolute = |p: &Path| std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf());
    let root = absolute(parent.workdir());
    parent
        .journals(&root)
        .iter()
        .filter_map(|journal| {
            absolute(journal)
                .strip_prefix(&root)
                .ok()
                .map(Path::to_path_buf)
        })
        .flat_map(|rel| {
            ["", "-wal", "-shm", "-journal", crate::scope::cache::SUFFIX].map(|suffix| {
                let mut name = rel.as_os_str().to_owned();
                name.push(suffix);
                PathBuf::from(name)
            })
        })
        .collect()
}

/// The delegation a caller outside any tree asks for with `delegate`'s arguments (an MCP
/// client, `harness mcp`): a profile of the project policy of `workdir` (`profile`, or the one
/// named `default`, or the only one), held to the call's checks, criteria and verifier and the
/// project's gates, with `overrides` (the journal, the caller's `parent_id`).
///
/// # Errors
/// A message naming the argument and the fix: an unknown argument or profile, no profiles.
pub fn delegation_for(
    workdir: &Path,
    arguments: &Map<String, Value>,
    overrides: &Overrides,
) -> std::result::Result<Delegation, String> {
    let project = Arc::new(ProjectPolicy::load(workdir).map_err(|e| e.message().to_owned())?);
    let call = read_call(arguments)?;
    let named = &project
        .profiles
        .read()
        .map_err(|e| e.message().to_owned())?;
    let name = match (&call.profile, named.as_slice()) {
        (Some(name), _) => name.clone(),
        (None, [(only, _)]) => only.clone(),
        (None, _) if named.iter().any(|(n, _)| n == "default") => "default".to_owned(),
        (None, []) => {
            return Err(format!(
                "{} names no delegate profiles: add `delegates: {{default: {{delegate: {{kind: …}}}}}}` to it, or give `file` (a delegation file)",
                workdir.join(crate::project::PROJECT_POLICY).display()
            ));
        }
        (None, _) => {
            let names: Vec<&str> = named.iter().map(|(n, _)| n.as_str()).collect();
            return Err(format!(
                "give `profile` (one of {}), or name one `default`",
                names.join(", ")
            ));
        }
    };
    let template = profile(named, &name)?;
    let policy = workdir.join(crate::project::PROJECT_POLICY);
    let making = Making {
        project: &project,
        overrides: overrides.clone(),
        workdir: workdir.to_path_buf(),
        label: format!("delegate call (profile {name})"),
        verify_name: format!("{}#delegate.verify", policy.display()),
        budget: (None, None),
        programs: true,
    };
    make(template, call, making)
}

/// The smaller of two optional bounds.
fn min<T: Ord>(a: Option<T>, b: Option<T>) -> Option<T> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// Adds a call's `checks` and `criteria` to what the child is held to anyway: its profile's, or
/// the project's defaults. A call adds gates; it never removes one.
fn add_gates(
    file: &mut DelegationFile,
    defaults: &Gates,
    label: &str,
    (checks, criteria): (Option<Vec<Value>>, Option<Vec<Value>>),
    programs: bool,
) -> std::result::Result<(), String> {
    if checks.is_none() && criteria.is_none() {
        return Ok(());
    }
    let refused = |what: &str| {
        format!(
            "{what} run programs, and this delegation may not run programs itself (it has no `run_command`): name checks in the profile (`delegates:`) instead, or give `criteria` such as \"file_exists:PATH\" and a `verify`"
        )
    };
    if checks.is_some() && !programs {
        return Err(refused("`checks`"));
    }
    let raw_checks = checks
        .map(|list| {
            list.into_iter()
                .enumerate()
                .map(|(i, check)| {
                    serde_json::from_value(check).map_err(|e| {
                        format!("`checks[{i}]`: {}", crate::plain::plain(&e.to_string()))
                    })
                })
                .collect::<std::result::Result<Vec<_>, _>>()
        })
        .transpose()?;
    let added = Gates::parse(
        label,
        std::path::Path::new("."),
        RawGates {
            checks: raw_checks,
            criteria,
            ..RawGates::default()
        },
    )
    .map_err(|e| e.message().to_owned())?;
    if !programs && added.criteria.as_ref().is_some_and(|(c, _)| !c.is_empty()) {
        return Err(refused("command criteria (`{command: …}`)"));
    }
    if let Some(added) = added.checks {
        let mut checks = file
            .gates
            .checks
            .take()
            .or_else(|| defaults.checks.clone())
            .unwrap_or_default();
        checks.extend(added);
        file.gates.checks = Some(checks);
    }
    if let Some((commands, others)) = added.criteria {
        let (mut all_commands, mut all_others) = file
            .gates
            .criteria
            .take()
            .or_else(|| defaults.criteria.clone())
            .unwrap_or_default();
        all_commands.extend(commands);
        all_others.extend(others);
        file.gates.criteria = Some((all_commands, all_others));
    }
    Ok(())
}

/// What the parent reads of a child: its id, outcome, whether it was verified, its answer (the
/// deliverable, verified or not), the findings and evidence of its last verdict, the seal of its
/// record, and, for a child that worked in a workspace of its own, what became of its changes.
/// A child whose changes could not be applied (a conflict) is not `verified` for the parent: the
/// work it was verified on is not in the parent's workspace.
fn answer(ended: &Ended, landing: Option<&Landing>) -> ToolOutput {
    let report = &ended.report;
    let verdict = report
        .attempts
        .iter()
        .rev()
        .find_map(|a| a.verdict.as_ref());
    let mut object = json!({
        "id": report.id,
        "outcome": report.outcome.as_str(),
        "verified": report.verified(),
        "attempts": report.attempts.len(),
        "answer": report.result().map(|r| r.response.as_str()),
        "findings": verdict.map(|v| v.findings.iter().filter(|f| f.blocking).collect::<Vec<_>>()),
        "evidence": verdict.map(|v| crate::checks::shareable_evidence(&v.evidence)),
    });
    if let Some(error) = &report.error {
        object["error"] = json!({"kind": error.kind().as_str(), "message": error.message()});
    }
    match &ended.seal {
        Ok(seal) => object["seal"] = json!(seal),
        Err(why) => {
            // Not on record: the parent must not build on it as if it were.
            return ToolOutput::error(format!(
                "delegate: the child {} ran ({}) but could not be recorded: {why}",
                report.id,
                report.outcome.as_str()
            ));
        }
    }
    if let Some(landing) = landing {
        let mut workspace = match &landing.applied {
            Ok(Applied::Clean(files)) => json!({"isolated": true, "applied": files}),
            Ok(Applied::Conflict { files, diff }) => {
                object["verified"] = json!(false);
                object["conflict"] = json!({
                    "files": files,
                    "why": "these files changed in your workspace since the child's copy was made (an earlier child's work): none of the child's changes were applied",
                    "diff": diff,
                });
                json!({"isolated": true, "applied": []})
            }
            Err(why) => {
                if report.verified() {
                    object["verified"] = json!(false);
                }
                json!({"isolated": true, "applied": [], "why": why})
            }
        };
        if let Some(kept) = &landing.kept {
            workspace["kept"] = json!(kept.display().to_string());
        }
        object["workspace"] = workspace;
    }
    ToolOutput::ok(object.to_string())
}
