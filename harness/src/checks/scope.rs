//! Stage 1: observation, integrity and scope (DESIGN §4.8). Before attempt 0 the workspace is
//! snapshotted; after each attempt the diff says what changed since (`result["changes"]`,
//! always, and the unified diff the critic, the claims stage and the retry context read).
//! Then, in authority order: a change to what judges the delegate — any `.harness/`, git's
//! config, hooks and info, an existing gate input (`protect`) — ends the delegation `failed`,
//! kind `gate_tampered`, naming each file; a change outside `scope.allow` or inside
//! `scope.deny` is a blocking `scope` finding, and with `on_violation: fail` (the default) it
//! ends the delegation without running the other stages.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use super::{Check, Subject};
use crate::delegate::BoxFuture;
use crate::error::{Error, ErrorKind, Result};
use crate::events::RunEvent;
use crate::integrity::{GateInputs, always_protected};
use crate::scope::{OnViolation, Scope, Snapshot, Stamp};
use crate::verdict::{Finding, Source};

/// The baseline and what judges a diff against it, as a pipeline stage.
#[derive(Debug)]
pub(crate) struct ObserveStage {
    scope: Arc<Scope>,
    /// False when the delegation has no `scope:` (everything may change).
    scoped: bool,
    gate: Arc<GateInputs>,
    /// The workspace before attempt 0, as it is being taken; `None` when the delegate has no
    /// way to change it (no writing tool, no command, no agent process): its changes are then
    /// none by construction, and no walk is paid for.
    baseline: Option<Baseline>,
    /// git's HEAD before attempt 0 (`None`: no repository).
    head: Option<String>,
    root: PathBuf,
    /// When the stage was made, just before attempt 0.
    started: std::time::SystemTime,
    /// The protected files of the baseline, worked out once.
    guarded: std::sync::OnceLock<Vec<String>>,
}

/// Stage 2 ends with this: the gate inputs stamped after the attempt are stamped again once
/// the checks have run. A process the delegate left behind (a `setsid` child) could rewrite a
/// test while its check runs and put it back after; any write moves the status-change time, so
/// a gate input that changed in between ends the delegation `gate_tampered`.
#[derive(Debug)]
pub(crate) struct GateRecheck;

impl Check for GateRecheck {
    fn name(&self) -> &'static str {
        "gate_recheck"
    }

    fn check<'a>(&'a self, subject: &'a mut Subject<'_>) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            let stamped = std::mem::take(&mut subject.gate_stamps);
            let changed: Vec<String> = tokio::task::spawn_blocking(move || {
                stamped
                    .into_iter()
                    .filter(|(path, before)| Stamp::now(path) != *before)
                    .map(|(path, _)| path.display().to_string())
                    .collect()
            })
            .await
            .map_err(|e| {
                Error::new(
                    ErrorKind::Check,
                    format!("the gate re-check failed to run: {e}"),
                )
            })?;
            if changed.is_empty() || subject.fatal.is_some() {
                return Ok(());
            }
            let root = subject.workspace_root.clone();
            let shown: Vec<String> = changed
                .iter()
                .map(|p| {
                    p.strip_prefix(&format!("{}/", root.display()))
                        .unwrap_or(p)
                        .to_owned()
                })
                .collect();
            for path in &shown {
                let mut finding = Finding::blocking(
                    Source::Integrity,
                    path,
                    "changed while the checks ran: something the delegate left running rewrote what judges it",
                );
                finding.path = Some(path.clone());
                subject.findings.push(finding);
            }
            subject.emit(RunEvent::GateTampered {
                paths: shown
                    .iter()
                    .map(|p| format!("{p} (changed while the checks ran)"))
                    .collect(),
            });
            subject.fatal = Some(Error::new(
                ErrorKind::GateTampered,
                format!(
                    "the delegate changed what judges it: {} changed while the checks ran (a process it left running?); the checks' results do not count",
                    shown.join(", ")
                ),
            ));
            Ok(())
        })
    }

    fn verifies(&self) -> bool {
        false
    }
}

/// The workspace's baseline, taken on a blocking thread while the delegation starts: the walk
/// (what `lstat` says), then the text of small files (gate inputs first), checked against the
/// walk ([`Scope::keep_contents`]). It must be complete before the delegate can change
/// anything — [`Baseline::ready`], awaited before the first tool call runs or an agent or
/// command process starts — but a remote model's first request goes out meanwhile, and its
/// answer usually takes longer than the baseline, so such a delegation seldom waits on it.
#[derive(Debug, Clone)]
pub(crate) struct Baseline {
    /// `None` while the walk and the reads run; the baseline once complete.
    phase: tokio::sync::watch::Receiver<Option<Arc<Snapshot>>>,
    /// When the walk must have ended (`limits.timeout_s` after it began).
    deadline: Option<tokio::time::Instant>,
    stop: Arc<AtomicBool>,
    /// What names the delegation and the workspace in a timeout's message.
    label: Arc<str>,
}

/// How long the delegate is held after the walk: longer than the coarsest status-change-time
/// tick (a jiffy), so its first write never carries a time the baseline recorded.
const SETTLE: Duration = Duration::from_millis(10);

impl Baseline {
    /// Starts taking the baseline of `scope`'s workspace; `first` names the files whose text is
    /// kept first.
    fn start(
        scope: Arc<Scope>,
        first: impl Fn(&str) -> bool + Send + 'static,
        limit: Option<Duration>,
        label: String,
        after: Option<crate::checks::runner::Collection>,
    ) -> Self {
        let (send, phase) = tokio::sync::watch::channel(None);
        let stop = Arc::new(AtomicBool::new(false));
        let stopper = Arc::clone(&stop);
        // A walk that panics drops the sender: the waiters then see the channel closed, a failed
        // baseline, never a silent empty one.
        let walk = move || {
            let mut snapshot = scope.walk_baseline(&stopper);
            if stopper.load(Ordering::Relaxed) {
                return;
            }
            // Gate inputs first, so the budget never leaves them out.
            scope.keep_contents(&mut snapshot, &first);
            std::thread::sleep(SETTLE);
            let _ = send.send(Some(Arc::new(snapshot)));
        };
        match after {
            // The base collection first: what listing the tests writes is the baseline's.
            Some(collection) => drop(tokio::spawn(async move {
                collection.wait().await;
                let _ = tokio::task::spawn_blocking(walk).await;
            })),
            None => drop(tokio::task::spawn_blocking(walk)),
        }
        Baseline {
            phase,
            deadline: limit.map(|l| tokio::time::Instant::now() + l),
            stop,
            label: label.into(),
        }
    }

    /// Waits for the complete baseline, at most until the deadline.
    async fn complete(&self) -> Result<Arc<Snapshot>> {
        let mut phase = self.phase.clone();
        let waited = async { phase.wait_for(Option::is_some).await.map(|p| p.clone()) };
        let got = match self.deadline {
            Some(deadline) => match tokio::time::timeout_at(deadline, waited).await {
                Ok(got) => got,
                Err(_) => {
                    self.stop.store(true, Ordering::Relaxed);
                    return Err(too_large(&self.label));
                }
            },
            None => waited.await,
        };
        match got {
            Ok(Some(snapshot)) => Ok(snapshot),
            // The walk panicked and dropped its sender: a failed baseline, never an empty one.
            Ok(None) | Err(_) => Err(Error::new(
                ErrorKind::Check,
                format!("{}: the workspace snapshot failed to run", self.label),
            )),
        }
    }

    /// When the delegation's time ran out before the walk was done: the walk is stopped, and
    /// this is what the delegation ended on (the delegate never got to act).
    pub(crate) fn unfinished(&self) -> Option<Error> {
        let taken = self.phase.borrow().is_some() || self.phase.has_changed().is_err();
        if taken {
            return None;
        }
        self.stop.store(true, Ordering::Relaxed);
        Some(too_large(&self.label))
    }

    /// The complete baseline (waiting for it as [`Baseline::ready`] does).
    ///
    /// # Errors
    /// As [`Baseline::ready`].
    pub(crate) async fn snapshot(&self) -> Result<Arc<Snapshot>> {
        self.complete().await
    }

    /// Waits until the baseline is complete: from then on the delegate may change the
    /// workspace.
    ///
    /// # Errors
    /// [`ErrorKind::Timeout`] past `limits.timeout_s`, naming `observe: false`;
    /// [`ErrorKind::Check`] when the walk failed.
    pub(crate) async fn ready(&self) -> Result<()> {
        self.complete().await.map(|_| ())
    }
}

/// The delegation (`label`) ran out of `limits.timeout_s` while its workspace's baseline was
/// still being taken: the delegate never got to act.
fn too_large(label: &str) -> Error {
    Error::new(
        ErrorKind::Timeout,
        format!(
            "{label}: the workspace is too large to snapshot within limits.timeout_s; set `observe: false` for trees this large (the critic, claims and scope then see no changes), or leave build output out with `scope.ignore`"
        ),
    )
}

impl ObserveStage {
    /// Starts taking the baseline of `workspace` for `delegation`, before attempt 0 (see
    /// [`Baseline`]), stopped when it takes longer than the delegation's `limits.timeout_s`,
    /// its kept text taken from and left in the delegation's observation cache; `gate` are its
    /// gate inputs.
    ///
    /// A delegate that can change nothing leaves no changes to find: no walk is taken.
    ///
    /// # Errors
    /// [`ErrorKind::Config`] for a scope that does not compile.
    pub(crate) fn from_spec(
        delegation: &crate::delegation::Delegation,
        gate: GateInputs,
        workspace: &harness_builtins::Workspace,
        after: Option<crate::checks::runner::Collection>,
    ) -> Result<Self> {
        let scope = delegation.scope();
        let file = delegation.source().display().to_string();
        let (limit, can_write) = (delegation.timeout(), delegation.changes_files());
        let spec = scope.cloned().unwrap_or_default();
        // Only a baseline reads or writes the cache (resolving its place costs system calls).
        let cache = can_write
            .then(|| delegation.observe_cache(workspace.root()))
            .flatten();
        let compiled = Scope::compile(&spec, workspace.root(), &file)?.with_cache(cache);
        let compiled = Arc::new(compiled);
        let gate = Arc::new(gate);
        let protected = Arc::clone(&gate);
        let baseline = can_write.then(|| {
            Baseline::start(
                Arc::clone(&compiled),
                move |path| {
                    always_protected(path).is_some()
                        || protected.matching(path).is_some()
                        || protected.guards_scripts(path)
                },
                limit,
                format!("{file} (workspace {})", workspace.root().display()),
                after,
            )
        });
        Ok(ObserveStage {
            scope: compiled,
            scoped: scope.is_some(),
            gate,
            baseline,
            head: git_head(workspace.root()),
            root: workspace.root().to_path_buf(),
            started: std::time::SystemTime::now(),
            guarded: std::sync::OnceLock::new(),
        })
    }

    /// The baseline, for the delegation to wait on before the delegate acts.
    pub(crate) fn baseline(&self) -> Option<&Baseline> {
        self.baseline.as_ref()
    }

    /// Why a change of `path` (`added`, `modified`, `deleted`) tampers with the gate, if it
    /// does.
    fn tampering(&self, baseline: &Snapshot, path: &str, how: &str) -> Option<String> {
        if let Some(what) = always_protected(path) {
            return Some(format!("{how}: {what}, always out of a delegate's reach"));
        }
        if how == "added" {
            if self.gate.refuses_new(path) {
                return Some(
                    "added: test configuration (a new conftest.py, jest.config…) changes how the existing tests run; it may not be added by the delegate".to_owned(),
                );
            }
            // New files under the gate's globs are allowed: a task may add tests.
            return None;
        }
        if let Some(glob) = self.gate.matching(path) {
            return Some(format!(
                "{how}: a gate input (matches protect glob `{glob}`); existing tests and the files checks run may not be changed — add new files instead"
            ));
        }
        if self.gate.guards_scripts(path) {
            let changed = match (how, baseline.kept(path)) {
                ("modified", Some(before)) => harness_builtins::open_regular(&self.root.join(path))
                    .ok()
                    .and_then(|mut f| {
                        let mut bytes = Vec::new();
                        std::io::Read::read_to_end(&mut f, &mut bytes)
                            .ok()
                            .map(|_| bytes)
                    })
                    .is_none_or(|after| self.gate.guarded_differ(path, before, &after)),
                // Deleted, or too large to have been kept: not compared, so not assumed equal.
                _ => true,
            };
            if changed {
                return Some(format!(
                    "{how}: what runs the checks (its `scripts`, or the test runner's configuration) may not be changed"
                ));
            }
        }
        None
    }
}

impl Check for ObserveStage {
    fn name(&self) -> &'static str {
        "observe"
    }

    fn check<'a>(&'a self, subject: &'a mut Subject<'_>) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            let Some(baseline) = &self.baseline else {
                self.nothing_changed(subject);
                return Ok(());
            };
            let baseline = baseline.complete().await?;
            if subject.result.attempt == 0 {
                // What the baseline's walk could not read, said once.
                subject.logs.extend(baseline.warnings.iter().cloned());
            }
            let (scope, before) = (Arc::clone(&self.scope), Arc::clone(&baseline));
            let diff = tokio::task::spawn_blocking(move || scope.diff(&before))
                .await
                .map_err(|e| {
                    Error::new(
                        ErrorKind::Check,
                        format!("the workspace diff failed to run: {e}"),
                    )
                })?;
            if let Some(object) = subject.value.as_object_mut() {
                object.insert(
                    "changes".to_owned(),
                    serde_json::to_value(&diff.changes).unwrap_or_default(),
                );
            }
            subject.logs.extend(diff.warnings.iter().cloned());
            subject.head_moved = Some(self.head_moved());
            // Integrity first: it outranks the scope.
            self.judge_tampering(subject, &baseline, &diff.changes);
            if self.scoped {
                self.judge_scope(subject, &diff);
            }
            subject.gate_stamps = self.stamp_gate(&baseline).await;
            subject.workspace_root = self.root.clone();
            subject.diff = diff.diff;
            subject.result.changes = Some(diff.changes);
            Ok(())
        })
    }

    fn verifies(&self) -> bool {
        // A scope or protected gate inputs are judges; observation alone is not.
        self.scoped || !self.gate.is_empty()
    }
}

impl ObserveStage {
    /// Nothing the delegate can do changes the workspace: no changes, no HEAD moved.
    fn nothing_changed(&self, subject: &mut Subject<'_>) {
        subject.result.changes = Some(harness_hooks::Changes::default());
        if let Some(object) = subject.value.as_object_mut() {
            object.insert(
                "changes".to_owned(),
                serde_json::to_value(harness_hooks::Changes::default()).unwrap_or_default(),
            );
        }
        subject.head_moved = Some(false);
        if self.scoped {
            subject.emit(RunEvent::ScopeValidated {
                added: 0,
                modified: 0,
                deleted: 0,
            });
        }
    }

    /// True when HEAD moved to a commit that exists during the attempt (writing an id into
    /// `.git/HEAD` is no commit; `git init` and a commit is).
    fn head_moved(&self) -> bool {
        let now = git_head(&self.root);
        let exists = |id: &str| commit_exists(&self.root, id, self.started);
        match (&self.head, &now) {
            (Some(before), Some(after)) => before != after && exists(after),
            (None, Some(after)) => exists(after),
            (_, None) => false,
        }
    }

    /// Each change to what judges the delegate: a blocking integrity finding, a `GateTampered`
    /// event, and the attempt's fatal error naming every file.
    fn judge_tampering(
        &self,
        subject: &mut Subject<'_>,
        baseline: &Snapshot,
        changes: &harness_hooks::Changes,
    ) {
        let tampered: Vec<(String, String)> = changes
            .iter()
            .filter_map(|(path, how)| {
                self.tampering(baseline, path, how)
                    .map(|why| (path.to_owned(), why))
            })
            .collect();
        if tampered.is_empty() {
            return;
        }
        for (path, why) in &tampered {
            let mut finding = Finding::blocking(Source::Integrity, path, why);
            finding.path = Some(path.clone());
            subject.findings.push(finding);
        }
        subject.emit(RunEvent::GateTampered {
            paths: tampered
                .iter()
                .map(|(path, why)| format!("{path} ({why})"))
                .collect(),
        });
        // The first line names every file (reports show first lines); the rest says why.
        let paths: Vec<&str> = tampered.iter().map(|(path, _)| path.as_str()).collect();
        subject.fatal = Some(Error::new(
            ErrorKind::GateTampered,
            format!(
                "the delegate changed what judges it: {}\n  {}",
                paths.join(", "),
                why_each(&tampered)
            ),
        ));
    }

    /// Each change the scope refuses: a blocking scope finding and its event; with
    /// `on_violation: fail` (and no tampering before it), the attempt's fatal error.
    fn judge_scope(&self, subject: &mut Subject<'_>, diff: &crate::scope::Diff) {
        let violations = &diff.violations;
        for (path, why) in violations {
            let mut finding = Finding::blocking(Source::Scope, path, why);
            finding.path = Some(path.clone());
            subject.findings.push(finding);
        }
        let on_violation = self.scope.spec.on_violation;
        if violations.is_empty() {
            subject.emit(RunEvent::ScopeValidated {
                added: diff.changes.added.len(),
                modified: diff.changes.modified.len(),
                deleted: diff.changes.deleted.len(),
            });
            return;
        }
        subject.emit(RunEvent::ScopeViolationDetected {
            paths: violations.iter().map(|(p, _)| p.clone()).collect(),
            on_violation: match on_violation {
                OnViolation::Fail => "fail",
                OnViolation::Retry => "retry",
            }
            .to_owned(),
        });
        if subject.fatal.is_none() && on_violation == OnViolation::Fail {
            subject.fatal = Some(Error::new(
                ErrorKind::ScopeViolation,
                format!(
                    "the delegate changed files outside its scope:\n  {}",
                    why_each(violations)
                ),
            ));
        }
    }

    /// The gate inputs stamped as the checks are about to see them.
    async fn stamp_gate(&self, baseline: &Snapshot) -> Vec<(PathBuf, Option<Stamp>)> {
        let guarded = self
            .guarded
            .get_or_init(|| {
                baseline
                    .paths()
                    .filter(|p| {
                        always_protected(p).is_some()
                            || self.gate.matching(p).is_some()
                            || self.gate.guards_scripts(p)
                    })
                    .map(str::to_owned)
                    .collect()
            })
            .clone();
        let root = self.root.clone();
        tokio::task::spawn_blocking(move || {
            guarded
                .iter()
                .map(|p| {
                    let full = root.join(p);
                    let now = Stamp::now(&full);
                    (full, now)
                })
                .collect()
        })
        .await
        .unwrap_or_default()
    }
}

/// `path: why` for each, one to a line.
fn why_each(items: &[(String, String)]) -> String {
    items
        .iter()
        .map(|(path, why)| format!("{path}: {why}"))
        .collect::<Vec<_>>()
        .join("\n  ")
}

/// Builds observation (integrity and scope) for [`STAGES`](crate::pipeline::STAGES): always,
/// unless `observe: false` (which is said in a warning); it leaves its baseline in `m`.
///
/// # Errors
/// [`ErrorKind::Config`] for a scope that does not compile.
pub(crate) fn stage(
    m: &mut crate::checks::materials::Materials<'_>,
) -> Result<Option<Box<dyn Check>>> {
    let delegation = m.delegation;
    if !delegation.observe() {
        m.warnings.push(format!(
            "{}: `observe: false`: the workspace is not snapshotted, so the critic, the claims stage, the gaming stage and the retry prompt see no changes, and gate inputs are protected only from the harness's own tools",
            delegation.source().display()
        ));
        return Ok(None);
    }
    let stage = ObserveStage::from_spec(
        delegation,
        (*m.gate).clone(),
        m.workspace,
        m.collection.clone(),
    )?;
    m.observed = true;
    m.baseline = stage.baseline().cloned();
    Ok(Some(Box::new(stage)))
}

/// Builds the gate re-check for [`STAGES`](crate::pipeline::STAGES): only when something runs
/// after observation that the delegate's leftovers could race (checks).
///
/// # Errors
/// Never; the signature is every stage's.
pub(crate) fn recheck(
    m: &mut crate::checks::materials::Materials<'_>,
) -> Result<Option<Box<dyn Check>>> {
    Ok((m.observed && !m.delegation.checks().is_empty())
        .then(|| Box::new(GateRecheck) as Box<dyn Check>))
}

/// Whether `id` names an object of the repository at `root`: a loose object, or — packed — a
/// pack written since `since` (a commit made during the delegation and packed at once).
fn commit_exists(root: &Path, id: &str, since: std::time::SystemTime) -> bool {
    if !(id.len() == 40 || id.len() == 64) || !id.chars().all(|c| c.is_ascii_hexdigit()) {
        return false;
    }
    let Some(git) = git_dir(root) else {
        return false;
    };
    let objects = git.join("objects");
    if objects
        .join(&id[..2])
        .join(&id[2..])
        .symlink_metadata()
        .is_ok_and(|m| m.is_file())
    {
        return true;
    }
    std::fs::read_dir(objects.join("pack"))
        .into_iter()
        .flatten()
        .filter_map(std::result::Result::ok)
        .filter(|e| e.file_name().to_string_lossy().ends_with(".pack"))
        .any(|e| {
            e.metadata()
                .and_then(|m| m.modified())
                .is_ok_and(|t| t >= since)
        })
}

/// The git directory of the repository at `root`: `.git`, or where a `.git` file points.
fn git_dir(root: &Path) -> Option<PathBuf> {
    let dot_git = root.join(".git");
    if dot_git.is_dir() {
        return Some(dot_git);
    }
    let mut file = harness_builtins::open_regular(&dot_git).ok()?;
    let mut text = String::new();
    std::io::Read::read_to_string(&mut std::io::Read::take(&mut file, 4096), &mut text).ok()?;
    let dir = text.trim().strip_prefix("gitdir:")?.trim();
    Some(root.join(dir))
}

/// What git's HEAD points at in the repository at `root`: the commit id, `unborn:REF` for a
/// branch without commits, `None` when `root` is no repository. Read from the files, without
/// running git (whose configuration the delegate may have planted).
pub(crate) fn git_head(root: &Path) -> Option<String> {
    let read = |path: &Path| -> Option<String> {
        let mut file = harness_builtins::open_regular(path).ok()?;
        let mut text = String::new();
        std::io::Read::read_to_string(&mut std::io::Read::take(&mut file, 64 * 1024), &mut text)
            .ok()?;
        Some(text)
    };
    let git = git_dir(root)?;
    let head = read(&git.join("HEAD"))?;
    let head = head.trim();
    let Some(reference) = head.strip_prefix("ref:").map(str::trim) else {
        return Some(head.to_owned());
    };
    if reference.split('/').any(|p| p == "..") {
        return None;
    }
    if let Some(id) = read(&git.join(reference)) {
        return Some(id.trim().to_owned());
    }
    // A packed ref (after `git gc`), or a branch with no commit yet.
    let packed = read(&git.join("packed-refs")).unwrap_or_default();
    Some(
        packed
            .lines()
            .find_map(|line| {
                let (id, name) = line.split_once(' ')?;
                (name.trim() == reference).then(|| id.to_owned())
            })
            .unwrap_or_else(|| format!("unborn:{reference}")),
    )
}
