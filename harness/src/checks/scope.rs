//! Stage 1: scope (DESIGN §4.8) — what the attempt changed since the baseline, judged against
//! `scope.allow` and `scope.deny`. The changes go into the Result (`result["changes"]`) for the
//! stages after; a violation is a blocking `scope` finding, and with `on_violation: fail` (the
//! default) it ends the delegation without running the other stages.

use std::sync::Arc;

use super::{Check, Subject};
use crate::delegate::BoxFuture;
use crate::error::{Error, ErrorKind, Result};
use crate::events::RunEvent;
use crate::scope::{OnViolation, Scope, ScopeSpec, Snapshot};
use crate::verdict::{Finding, Source};

/// The scope and its baseline as a pipeline stage.
#[derive(Debug)]
pub(crate) struct ScopeStage {
    scope: Arc<Scope>,
    /// The workspace before attempt 0.
    baseline: Arc<Snapshot>,
}

impl ScopeStage {
    /// Compiles `spec` for `workspace` and takes the baseline, before attempt 0: a walk of the
    /// workspace, on a blocking thread. `file` names where the scope was written.
    ///
    /// # Errors
    /// [`ErrorKind::Config`] for a glob that does not compile; [`ErrorKind::Check`] when the
    /// walk cannot run.
    pub(crate) async fn from_spec(
        spec: &ScopeSpec,
        workspace: &harness_builtins::Workspace,
        file: &str,
    ) -> Result<Self> {
        let scope = Arc::new(Scope::compile(spec, workspace.root(), file)?);
        let walker = Arc::clone(&scope);
        let baseline = tokio::task::spawn_blocking(move || walker.snapshot())
            .await
            .map_err(|e| {
                Error::new(
                    ErrorKind::Check,
                    format!("the scope snapshot failed to run: {e}"),
                )
            })?;
        Ok(ScopeStage {
            scope,
            baseline: Arc::new(baseline),
        })
    }

    /// What the baseline's walk could not read, for the caller.
    pub(crate) fn warnings(&self) -> &[String] {
        &self.baseline.warnings
    }
}

impl Check for ScopeStage {
    fn check<'a>(&'a self, subject: &'a mut Subject<'_>) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            let (scope, baseline) = (Arc::clone(&self.scope), Arc::clone(&self.baseline));
            let diff = tokio::task::spawn_blocking(move || scope.diff(&baseline))
                .await
                .map_err(|e| {
                    Error::new(
                        ErrorKind::Check,
                        format!("the scope diff failed to run: {e}"),
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
            for (path, why) in &diff.violations {
                subject
                    .findings
                    .push(Finding::blocking(Source::Scope, path, why));
            }
            let on_violation = self.scope.spec.on_violation;
            if diff.violations.is_empty() {
                subject.emit(RunEvent::ScopeValidated {
                    added: diff.changes.added.len(),
                    modified: diff.changes.modified.len(),
                    deleted: diff.changes.deleted.len(),
                });
            } else {
                subject.emit(RunEvent::ScopeViolationDetected {
                    paths: diff.violations.iter().map(|(p, _)| p.clone()).collect(),
                    on_violation: match on_violation {
                        OnViolation::Fail => "fail",
                        OnViolation::Retry => "retry",
                    }
                    .to_owned(),
                });
            }
            if !diff.violations.is_empty() && on_violation == OnViolation::Fail {
                subject.fatal = Some(Error::new(
                    ErrorKind::ScopeViolation,
                    format!(
                        "the delegate changed files outside its scope:\n  {}",
                        diff.violations
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
}
