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
use crate::integrity::{GateInputs, always_protected, scripts_differ};
use crate::scope::{OnViolation, Scope, ScopeSpec, Snapshot};
use crate::verdict::{Finding, Source};

/// The baseline and what judges a diff against it, as a pipeline stage.
#[derive(Debug)]
pub(crate) struct ObserveStage {
    scope: Arc<Scope>,
    /// False when the delegation has no `scope:` (everything may change).
    scoped: bool,
    gate: Arc<GateInputs>,
    /// The workspace before attempt 0.
    baseline: Arc<Snapshot>,
    /// git's HEAD before attempt 0 (`None`: no repository).
    head: Option<String>,
    root: PathBuf,
}

impl ObserveStage {
    /// Takes the baseline of `workspace`, before attempt 0: a walk, on a blocking thread,
    /// stopped when it takes longer than `limit` (the delegation's `limits.timeout_s`).
    /// `scope` is the delegation's, if any; `gate` its gate inputs; `file` names where they
    /// were written.
    ///
    /// # Errors
    /// [`ErrorKind::Config`] for a scope that does not compile; [`ErrorKind::Timeout`] when the
    /// walk outlasts `limit` (naming `observe: false`); [`ErrorKind::Check`] when it cannot run.
    pub(crate) async fn from_spec(
        scope: Option<&ScopeSpec>,
        gate: GateInputs,
        workspace: &harness_builtins::Workspace,
        file: &str,
        limit: Option<Duration>,
    ) -> Result<Self> {
        let spec = scope.cloned().unwrap_or_default();
        let compiled = Arc::new(Scope::compile(&spec, workspace.root(), file)?);
        let gate = Arc::new(gate);
        let (walker, protected) = (Arc::clone(&compiled), Arc::clone(&gate));
        let stop = Arc::new(AtomicBool::new(false));
        let stopper = Arc::clone(&stop);
        let walk = tokio::task::spawn_blocking(move || {
            walker.snapshot(
                &|path| {
                    always_protected(path).is_some()
                        || protected.matching(path).is_some()
                        || protected.guards_scripts(path)
                },
                &stopper,
            )
        });
        let taken = match limit {
            Some(limit) => match tokio::time::timeout(limit, walk).await {
                Ok(taken) => taken,
                Err(_) => {
                    stop.store(true, Ordering::Relaxed);
                    return Err(Error::new(
                        ErrorKind::Timeout,
                        format!(
                            "{file}: the workspace {} is too large to snapshot within limits.timeout_s = {}s; set `observe: false` for trees this large (the critic, claims and scope then see no changes), or leave build output out with `scope.ignore`",
                            workspace.root().display(),
                            limit.as_secs_f64()
                        ),
                    ));
                }
            },
            None => walk.await,
        };
        let baseline = taken.map_err(|e| {
            Error::new(
                ErrorKind::Check,
                format!("the workspace snapshot failed to run: {e}"),
            )
        })?;
        Ok(ObserveStage {
            scope: compiled,
            scoped: scope.is_some(),
            gate,
            baseline: Arc::new(baseline),
            head: git_head(workspace.root()),
            root: workspace.root().to_path_buf(),
        })
    }

    /// What the baseline's walk could not read, for the caller.
    pub(crate) fn warnings(&self) -> &[String] {
        &self.baseline.warnings
    }

    /// Why a change of `path` (`added`, `modified`, `deleted`) tampers with the gate, if it
    /// does.
    fn tampering(&self, path: &str, how: &str) -> Option<String> {
        if let Some(what) = always_protected(path) {
            return Some(format!("{how}: {what}, always out of a delegate's reach"));
        }
        if how == "added" {
            // New files under the gate's globs are allowed: a task may add tests.
            return None;
        }
        if let Some(glob) = self.gate.matching(path) {
            return Some(format!(
                "{how}: a gate input (matches protect glob `{glob}`); existing tests and the files checks run may not be changed — add new files instead"
            ));
        }
        if self.gate.guards_scripts(path) {
            let changed = match (how, self.baseline.kept(path)) {
                ("modified", Some(before)) => harness_builtins::open_regular(&self.root.join(path))
                    .ok()
                    .and_then(|mut f| {
                        let mut bytes = Vec::new();
                        std::io::Read::read_to_end(&mut f, &mut bytes)
                            .ok()
                            .map(|_| bytes)
                    })
                    .is_none_or(|after| scripts_differ(before, &after)),
                // Deleted, or too large to have been kept: not compared, so not assumed equal.
                _ => true,
            };
            if changed {
                return Some(format!(
                    "{how}: its `scripts` run the checks (`npm test`…) and may not be changed"
                ));
            }
        }
        None
    }
}

impl Check for ObserveStage {
    fn check<'a>(&'a self, subject: &'a mut Subject<'_>) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            let (scope, baseline) = (Arc::clone(&self.scope), Arc::clone(&self.baseline));
            let diff = tokio::task::spawn_blocking(move || scope.diff(&baseline))
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
            for warning in diff.warnings {
                subject.logs.push(warning);
            }
            let now = git_head(&self.root);
            subject.head_moved = Some(match (&self.head, &now) {
                (Some(before), Some(after)) => before != after,
                // `git init` and a commit during the attempt.
                (None, Some(after)) => !after.starts_with("unborn:"),
                (_, None) => false,
            });
            // Integrity first: it outranks the scope.
            let tampered: Vec<(String, String)> = diff
                .changes
                .iter()
                .filter_map(|(path, how)| {
                    self.tampering(path, how).map(|why| (path.to_owned(), why))
                })
                .collect();
            if !tampered.is_empty() {
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
                subject.fatal = Some(Error::new(
                    ErrorKind::GateTampered,
                    format!(
                        "the delegate changed what judges it: {}\n  {}",
                        tampered
                            .iter()
                            .map(|(path, _)| path.as_str())
                            .collect::<Vec<_>>()
                            .join(", "),
                        tampered
                            .iter()
                            .map(|(path, why)| format!("{path}: {why}"))
                            .collect::<Vec<_>>()
                            .join("\n  ")
                    ),
                ));
            }
            let violations = if self.scoped {
                diff.violations
            } else {
                Vec::new()
            };
            for (path, why) in &violations {
                let mut finding = Finding::blocking(Source::Scope, path, why);
                finding.path = Some(path.clone());
                subject.findings.push(finding);
            }
            let on_violation = self.scope.spec.on_violation;
            if !self.scoped {
            } else if violations.is_empty() {
                subject.emit(RunEvent::ScopeValidated {
                    added: diff.changes.added.len(),
                    modified: diff.changes.modified.len(),
                    deleted: diff.changes.deleted.len(),
                });
            } else {
                subject.emit(RunEvent::ScopeViolationDetected {
                    paths: violations.iter().map(|(p, _)| p.clone()).collect(),
                    on_violation: match on_violation {
                        OnViolation::Fail => "fail",
                        OnViolation::Retry => "retry",
                    }
                    .to_owned(),
                });
            }
            if subject.fatal.is_none()
                && !violations.is_empty()
                && on_violation == OnViolation::Fail
            {
                subject.fatal = Some(Error::new(
                    ErrorKind::ScopeViolation,
                    format!(
                        "the delegate changed files outside its scope:\n  {}",
                        violations
                            .iter()
                            .map(|(path, why)| format!("{path}: {why}"))
                            .collect::<Vec<_>>()
                            .join("\n  ")
                    ),
                ));
            }
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
    let dot_git = root.join(".git");
    let git = if dot_git.is_dir() {
        dot_git
    } else {
        // A worktree or submodule: `.git` is a file naming the directory.
        let pointer = read(&dot_git)?;
        let dir = pointer.trim().strip_prefix("gitdir:")?.trim();
        root.join(dir)
    };
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
