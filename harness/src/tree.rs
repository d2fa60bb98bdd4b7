//! Delegation trees (DESIGN §9): the `delegate` tool. A model or scripted delegate offered
//! `delegate` hands a sub-task to a child delegation — its own Ralph loop, checks, verdict and
//! record, with `parent_id` naming the parent — and reads back the child's deliverable AND its
//! verdict as the tool result. A failed child is information for the parent, never the parent's
//! error.
//!
//! What bounds a tree: `limits.max_depth` (nesting), `limits.max_children` (children running at
//! once), and the parent's own budgets (a child gets at most the time and tokens the parent has
//! left). Children run in the parent's workspace under the parent's writer lock; those that can
//! change files take turns (each diff is its own), the others run side by side. Each child runs
//! as a task of its own, so a parent that is cancelled or times out cancels its children, and
//! every child is recorded however it ended.

use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::Deserialize;
use serde_json::{Map, Value, json};
use tracing::Instrument as _;

use crate::assembly::Overrides;
use crate::config::ReadScript;
use crate::delegate::DelegateConfig;
use crate::delegation::Delegation;
use crate::error::{Error, Result};
use crate::gates::{Gates, RawGates};
use crate::project::ProjectPolicy;
use crate::report::Report;
use crate::runtime::Shared;
use crate::spec::DelegationFile;
use crate::tools::{Tool, ToolOutput};
use crate::verifier::VerifySource;

/// Children of one run that may run at once (`limits.max_children`) unless the file says.
pub const DEFAULT_MAX_CHILDREN: u32 = 4;
/// How deep a tree may nest (`limits.max_depth`) unless the file says: the root is depth 0.
pub const DEFAULT_MAX_DEPTH: u32 = 2;
/// The most `limits.max_children` may be.
const MAX_CHILDREN_CAP: u32 = 64;
/// The most `limits.max_depth` may be.
const MAX_DEPTH_CAP: u32 = 8;
/// The task a profile holds until a call gives one.
const PROFILE_TASK: &str = "(given by each delegate call)";
/// Keys a profile may not have: a call gives the task, children share the parent's workspace,
/// the tree links them, and profiles are named in one place.
const NOT_IN_PROFILE: [(&str, &str); 4] = [
    ("task", "each delegate call gives the task"),
    (
        "workdir",
        "children work in the parent's workspace, under its policy",
    ),
    ("parent_id", "the tree sets it for every child"),
    (
        "delegates",
        "name every profile at the top level of the file",
    ),
];

/// Validates `limits.max_children` and `limits.max_depth` as written in `file`.
///
/// # Errors
/// [`ErrorKind::Config`](crate::ErrorKind::Config) for 0 or more than the cap.
pub(crate) fn check_limits(file: &str, children: Option<u32>, depth: Option<u32>) -> Result<()> {
    for (key, value, cap, what) in [
        (
            "max_children",
            children,
            MAX_CHILDREN_CAP,
            "children running at once",
        ),
        ("max_depth", depth, MAX_DEPTH_CAP, "levels of nesting"),
    ] {
        match value {
            Some(0) => {
                return Err(Error::config(format!(
                    "{file}: `limits.{key}` must be at least 1 (leave `delegate` out of `tools` to allow no children)"
                )));
            }
            Some(n) if n > cap => {
                return Err(Error::config(format!(
                    "{file}: `limits.{key}` is {n}; at most {cap} {what} are allowed"
                )));
            }
            _ => {}
        }
    }
    Ok(())
}

/// Checks that `delegate` is offered only where it can be called, and that profiles are
/// named only where it is offered.
///
/// # Errors
/// [`ErrorKind::Config`](crate::ErrorKind::Config) naming the fix.
pub(crate) fn check_offer(
    file: &str,
    offers: bool,
    delegate: &DelegateConfig,
    profiles: bool,
) -> Result<()> {
    if offers && delegate.runs_its_own_tools() {
        return Err(Error::config(format!(
            "{file}: `tools: [delegate]` is offered to model and scripted delegates, which call harness's tools; a `{}` delegate runs its own tools (give it harness as an MCP server instead: `harness mcp`)",
            delegate.kind()
        )));
    }
    if profiles && !offers {
        return Err(Error::config(format!(
            "{file}: `delegates` names child profiles but `tools` does not offer `delegate`; add `delegate` to `tools` or remove `delegates`"
        )));
    }
    Ok(())
}

/// Reads `delegates:`: each entry a delegation without its task, validated now (its scripts
/// read now, so a delegate that rewrites them later changes nothing).
///
/// # Errors
/// [`ErrorKind::Config`](crate::ErrorKind::Config) naming the profile and the key.
pub(crate) fn parse_profiles(
    file: &str,
    source: &Path,
    named: Map<String, Value>,
    base: &Path,
    read: &ReadScript<'_>,
) -> Result<Vec<(String, DelegationFile)>> {
    let mut profiles = Vec::new();
    for (name, value) in named {
        let at = format!("{file}: `delegates.{name}`");
        if name.is_empty()
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        {
            return Err(Error::config(format!(
                "{at}: a profile name is letters, digits, `-` and `_`"
            )));
        }
        let Value::Object(mut map) = value else {
            return Err(Error::config(format!(
                "{at}: expected a mapping like a delegation file without `task` (at least `delegate:`), got {value}"
            )));
        };
        if let Some((key, why)) = NOT_IN_PROFILE.iter().find(|(k, _)| map.contains_key(*k)) {
            return Err(Error::config(format!(
                "{at}: `{key}` is not allowed in a profile: {why}"
            )));
        }
        map.insert("task".to_owned(), Value::String(PROFILE_TASK.to_owned()));
        // A script the profile names is read by the file's reader, which names the file only.
        let profile = DelegationFile::from_json(source, &at, Value::Object(map), base, read)
            .map_err(|e| match e.message().strip_prefix(&format!("{file}: ")) {
                Some(rest) if !rest.starts_with('`') || !rest.contains("delegates.") => {
                    Error::config(format!("{at}: {rest}"))
                }
                _ => e,
            })?;
        profiles.push((name, profile));
    }
    Ok(profiles)
}

/// The project policy's `delegates:` as written, read when a delegation uses them.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct PolicyProfiles {
    pub(crate) named: Map<String, Value>,
    /// The policy file (scripts are relative to its directory).
    pub(crate) source: PathBuf,
}

impl PolicyProfiles {
    /// Validates each profile, reading its scripts.
    ///
    /// # Errors
    /// [`ErrorKind::Config`](crate::ErrorKind::Config) naming the policy, the profile and the key.
    fn read(&self) -> Result<Vec<(String, DelegationFile)>> {
        if self.named.is_empty() {
            return Ok(Vec::new());
        }
        let base = self.source.parent().unwrap_or(Path::new("."));
        let at = format!("project policy {}", self.source.display());
        let read = crate::project::script_reader(base, &at);
        parse_profiles(&at, &self.source, self.named.clone(), base, &read)
    }
}

/// What every delegation of one tree shares: the profiles children are made from, and what they
/// are assembled with.
struct Profiles {
    /// The root's own delegate, tools and hooks (the default profile of its calls).
    root: DelegationFile,
    named: Vec<(String, DelegationFile)>,
    project: Arc<ProjectPolicy>,
    overrides: Overrides,
    workdir: PathBuf,
}

/// A delegation's place in a tree: the profiles its `delegate` calls may name, how deep it is,
/// and what bounds its children.
#[derive(Clone)]
pub(crate) struct Tree {
    profiles: Arc<Profiles>,
    /// The profile this delegation runs as (`None`: the root's own).
    own: Option<String>,
    depth: u32,
    max_depth: u32,
    max_children: u32,
    /// The lock children of one parent that can change files take turns on (the parent holds
    /// the workspace's); `None` for the root, which takes the workspace's.
    siblings: Option<Arc<tokio::sync::Mutex<()>>>,
}

impl std::fmt::Debug for Tree {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tree")
            .field("profiles", &self.names())
            .field("own", &self.own)
            .field("depth", &self.depth)
            .field("max_depth", &self.max_depth)
            .field("max_children", &self.max_children)
            .finish_non_exhaustive()
    }
}

impl PartialEq for Tree {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.profiles, &other.profiles)
            && self.own == other.own
            && self.depth == other.depth
            && self.max_depth == other.max_depth
            && self.max_children == other.max_children
    }
}

impl Tree {
    /// The tree a delegation file roots, when it offers `delegate`; `None` otherwise.
    ///
    /// # Errors
    /// [`ErrorKind::Config`](crate::ErrorKind::Config) for a bad profile of the project policy.
    pub(crate) fn root(
        file: &DelegationFile,
        project: &Arc<ProjectPolicy>,
        overrides: &Overrides,
        workdir: &Path,
    ) -> Result<Option<Tree>> {
        if !file.tools.iter().any(|t| t == Tool::Delegate.name()) {
            return Ok(None);
        }
        // The file's profiles, then the project's it does not name.
        let mut named = file.profiles.clone();
        for (name, profile) in project.profiles.read()? {
            if !named.iter().any(|(n, _)| *n == name) {
                named.push((name, profile));
            }
        }
        Ok(Some(Tree {
            profiles: Arc::new(Profiles {
                root: file.as_profile(),
                named,
                project: Arc::clone(project),
                overrides: overrides.clone(),
                workdir: workdir.to_path_buf(),
            }),
            own: None,
            depth: 0,
            max_depth: file.max_depth.unwrap_or(DEFAULT_MAX_DEPTH),
            max_children: file.max_children.unwrap_or(DEFAULT_MAX_CHILDREN),
            siblings: None,
        }))
    }

    /// The profile names a call may give.
    pub(crate) fn names(&self) -> Vec<&str> {
        self.profiles
            .named
            .iter()
            .map(|(name, _)| name.as_str())
            .collect()
    }

    /// How deep this delegation is (the root is 0).
    pub(crate) fn depth(&self) -> u32 {
        self.depth
    }

    /// The children of one parent that can change files take turns on this lock.
    pub(crate) fn siblings(&self) -> Option<&Arc<tokio::sync::Mutex<()>>> {
        self.siblings.as_ref()
    }

    /// Children that may run at once.
    pub(crate) fn max_children(&self) -> u32 {
        self.max_children
    }

    /// True when a child may run programs itself: a profile of an agent CLI or `command`
    /// delegate, or one offering `run_command`.
    pub(crate) fn children_run_programs(&self) -> bool {
        std::iter::once(&self.profiles.root)
            .chain(self.profiles.named.iter().map(|(_, p)| p))
            .any(|p| p.delegate.runs_its_own_tools() || p.tools.iter().any(|t| t == "run_command"))
    }

    /// Scripts of every profile, which no delegate of the tree may change.
    pub(crate) fn scripts(&self) -> Vec<PathBuf> {
        self.profiles
            .named
            .iter()
            .flat_map(|(_, p)| {
                crate::delegation::script_paths(
                    p.verify.as_ref(),
                    &p.tool_verifiers,
                    &p.delegate,
                    p.critic.as_ref(),
                )
            })
            .collect()
    }

    /// The `delegate` tool as this delegation offers it: its profiles named in the schema.
    pub(crate) fn spec(&self) -> crate::conversation::ToolSpec {
        let mut spec = Tool::Delegate.spec();
        let names = self.names();
        if !names.is_empty() {
            spec.parameters["properties"]["profile"]["enum"] = json!(names);
        }
        spec.description = format!(
            "{} Up to {} children run at once; this delegation is at depth {} of at most {}.",
            spec.description, self.max_children, self.depth, self.max_depth
        );
        spec
    }
}

/// A `delegate` call's arguments.
#[derive(Debug, Deserialize)]
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
    /// The parent's token budget; what the parent's own turns spent so far, and its children.
    max_tokens: Option<u64>,
    own: AtomicU64,
    children: AtomicU64,
    /// The lock the children that can change files take turns on.
    siblings: Arc<tokio::sync::Mutex<()>>,
}

impl Family {
    /// The family of a run of `delegation`, starting now.
    pub(crate) fn new(delegation: &Delegation) -> Arc<Family> {
        let slots = delegation
            .tree()
            .map_or(DEFAULT_MAX_CHILDREN, Tree::max_children);
        Arc::new(Family {
            cancel: tokio::sync::watch::channel(None).0,
            tasks: Mutex::new(Vec::new()),
            slots: Arc::new(tokio::sync::Semaphore::new(slots as usize)),
            deadline: delegation.timeout().map(|t| Instant::now() + t),
            max_tokens: delegation.max_tokens(),
            own: AtomicU64::new(0),
            children: AtomicU64::new(0),
            siblings: Arc::default(),
        })
    }

    /// Counts tokens the run's own turns spent against its budget.
    pub(crate) fn spend(&self, tokens: u64) {
        self.own.fetch_add(tokens, Ordering::Relaxed);
    }

    /// Tokens its children spent so far (their own records count them; the parent's budget
    /// counts them too).
    pub(crate) fn children_spent(&self) -> u64 {
        self.children.load(Ordering::Relaxed)
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

    /// What a child may spend: the time and tokens the parent has left.
    fn budget(&self) -> std::result::Result<(Option<Duration>, Option<u64>), String> {
        let time = match self.deadline {
            None => None,
            Some(deadline) => match deadline.checked_duration_since(Instant::now()) {
                Some(left) if !left.is_zero() => Some(left),
                _ => return Err("the parent's time (limits.timeout_s) is spent".to_owned()),
            },
        };
        let tokens = match self.max_tokens {
            None => None,
            Some(max) => match max
                .checked_sub(self.own.load(Ordering::Relaxed))
                .and_then(|left| left.checked_sub(self.children_spent()))
            {
                Some(left) if left > 0 => Some(left),
                _ => {
                    return Err(format!(
                        "the parent's token budget (limits.max_tokens = {max}) is spent"
                    ));
                }
            },
        };
        Ok((time, tokens))
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
            "this process cannot record child delegations where this run is recorded (a queue worker sends back its own report only): run delegation trees with `harness run`, `harness batch` or `harness serve`".to_owned(),
        );
    }
    let child = match family
        .budget()
        .and_then(|budget| build(parent, tree, parent_id, arguments, budget, &family.siblings))
    {
        Ok(child) => child,
        Err(message) => return refused(message),
    };
    let Ok(slot) = Arc::clone(&family.slots).acquire_owned().await else {
        return refused("the parent run is ending".to_owned());
    };
    let id = crate::runtime::new_id();
    let (tell, told) = tokio::sync::oneshot::channel();
    let task = run_child(
        Arc::clone(shared),
        id.clone(),
        child,
        family.cancelled(),
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
    let Ok(ended) = told.await else {
        return refused(format!("the child {id} stopped without a report"));
    };
    let usage = ended.report.usage();
    family
        .children
        .fetch_add(usage.input_tokens + usage.output_tokens, Ordering::Relaxed);
    answer(&ended)
}

/// The child's task: runs it, records it, and hands back how it ended.
fn run_child(
    shared: Arc<Shared>,
    id: String,
    child: Delegation,
    cancel: impl Future<Output = String> + Send + 'static,
    tell: tokio::sync::oneshot::Sender<Ended>,
    slot: tokio::sync::OwnedSemaphorePermit,
) -> Pin<Box<dyn Future<Output = ()> + Send>> {
    Box::pin(async move {
        shared.started(&id, &child).await;
        let report = crate::ralph::run(&shared, id, &child, &crate::events::Nobody, cancel).await;
        drop(slot);
        let seal = shared.finished(&child, &report).await;
        let _ = tell.send(Ended { report, seal });
    })
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

/// Builds the child a call asks for, as its profile and arguments say, within `budget`.
fn build(
    parent: &Delegation,
    tree: &Tree,
    parent_id: &str,
    arguments: &Map<String, Value>,
    budget: (Option<Duration>, Option<u64>),
    siblings: &Arc<tokio::sync::Mutex<()>>,
) -> std::result::Result<Delegation, String> {
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
    let making = Making {
        project: &profiles.project,
        overrides,
        workdir: profiles.workdir.clone(),
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
    let mut child = make(template, call, making)?;
    child.set_tree(Tree {
        profiles: Arc::clone(profiles),
        own,
        depth: tree.depth + 1,
        max_depth: tree.max_depth,
        max_children: tree.max_children,
        siblings: Some(Arc::clone(siblings)),
    });
    Ok(child)
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
/// deliverable, verified or not), the findings and evidence of its last verdict, and the seal
/// of its record.
fn answer(ended: &Ended) -> ToolOutput {
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
    ToolOutput::ok(object.to_string())
}
