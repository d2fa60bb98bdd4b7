//! Holdout checks (DESIGN §10.1): tests the delegate never sees. A `holdout:` entry is a check
//! with `files: DIR`, a directory outside the workspace. DIR is masked by an empty mount in every
//! confinement the delegate's programs run in (its commands, its agent CLI, the visible checks
//! that import its code), and the tools cannot reach outside the workspace; so the only program
//! that ever sees DIR is the holdout itself, run after every visible check and criterion passed,
//! with DIR read-only at `$HARNESS_HOLDOUT` and the workspace read-only (the code under test
//! cannot copy DIR into it for a later attempt to read). A holdout that fails is a blocking
//! finding of source `holdout` that names the holdout and its counts — never its files, test
//! names, asserts or output, which the record keeps for the operator.

use std::path::Path;
use std::sync::Arc;

use super::launch::{Launcher, record, runners};
use super::runner::{self, BaseTests};
use super::{Check, Subject};
use crate::delegate::BoxFuture;
use crate::error::{Error, Result};
use crate::events::RunEvent;
use crate::gates::checks::CheckSpec;
use crate::gates::holdout::HoldoutSpec;
use crate::redact::Redactor;
use crate::verdict::{Finding, Source};

/// `evidence` as a delegate or a script may read it: a holdout's output (its test names, its
/// asserts) left out; the record keeps it for the operator.
pub fn shareable_evidence(evidence: &[harness_hooks::Evidence]) -> Vec<harness_hooks::Evidence> {
    evidence
        .iter()
        .map(|e| {
            let mut e = e.clone();
            if e.source == Source::Holdout.as_str() {
                e.output_tail = None;
            }
            e
        })
        .collect()
}

/// The holdouts as a pipeline stage.
#[derive(Debug)]
pub(crate) struct HoldoutStage {
    holdouts: Vec<Prepared>,
    redact: Redactor,
    base: Option<runner::Collection>,
}

/// One holdout, ready to run: its check, its runner, where it runs.
#[derive(Debug)]
pub(crate) struct Prepared {
    pub(crate) spec: HoldoutSpec,
    pub(crate) runner: Option<runner::Found>,
    pub(crate) launcher: Arc<Launcher>,
}

/// Prepares `holdouts` to run in the workspace at `root`, confined as `isolation` says but with
/// the workspace read-only and their directory visible (and not masked) at `$HARNESS_HOLDOUT`.
///
/// # Errors
/// [`ErrorKind::Check`](crate::ErrorKind::Check) when the private directories cannot be made;
/// [`ErrorKind::Config`](crate::ErrorKind::Config) for `min_tests` without a known runner, and
/// for holdouts a delegation runs unconfined (their files could not be hidden).
pub(crate) fn prepare(
    holdouts: &[HoldoutSpec],
    root: &Path,
    isolation: Option<&harness_builtins::Isolation>,
) -> Result<Vec<Prepared>> {
    let Some(isolation) = isolation else {
        return Err(Error::config(
            "`holdout:` needs the programs a delegation runs confined (bubblewrap): unconfined, the code under test could read the holdout's files during a visible check and leave them for the delegate; install bubblewrap, or leave `holdout:` out".to_owned(),
        ));
    };
    let checks: Vec<CheckSpec> = holdouts.iter().map(|h| h.check.clone()).collect();
    let runners = runners(&checks, root)?;
    holdouts
        .iter()
        .zip(runners)
        .map(|(spec, runner)| {
            let mut confined = isolation.clone();
            confined.writable.retain(|w| w != root);
            confined.masked.retain(|m| *m != spec.files);
            let confined = confined.visible(root).visible(&spec.files);
            let env = vec![(
                "HARNESS_HOLDOUT".to_owned(),
                spec.files.display().to_string(),
            )];
            Ok(Prepared {
                spec: spec.clone(),
                runner,
                launcher: Arc::new(Launcher::new(root, Some(&confined), env, true)?),
            })
        })
        .collect()
}

/// Builds the holdout stage for [`STAGES`](crate::pipeline::STAGES).
///
/// # Errors
/// As [`prepare`].
pub(crate) fn stage(
    m: &mut crate::checks::materials::Materials<'_>,
) -> Result<Option<Box<dyn Check>>> {
    let holdouts = m.delegation.holdouts();
    if holdouts.is_empty() {
        return Ok(None);
    }
    let holdouts = match m.holdouts.take() {
        Some(prepared) => prepared,
        None => prepare(holdouts, m.workspace.root(), m.isolation)?,
    };
    Ok(Some(Box::new(HoldoutStage {
        holdouts,
        redact: m.delegation.redact().clone(),
        base: m.collection.clone(),
    })))
}

impl Check for HoldoutStage {
    fn name(&self) -> &'static str {
        "holdout"
    }

    fn check<'a>(&'a self, subject: &'a mut Subject<'_>) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            if subject.fatal.is_some() || subject.findings.iter().any(|f| f.blocking) {
                subject.logs.push(
                    "holdout checks not run: the visible checks and criteria must pass first"
                        .to_owned(),
                );
                return Ok(());
            }
            let base = match &self.base {
                Some(collection) => Some(collection.wait().await),
                None => None,
            };
            for holdout in &self.holdouts {
                let check = &holdout.spec.check;
                // The base without names: a finding must not name the holdout's tests.
                let listed: Option<std::result::Result<BaseTests, String>> = base
                    .as_ref()
                    .and_then(|b| {
                        b.iter()
                            .find(|(n, _)| n == &check.name)
                            .map(|(_, t)| t.clone())
                    })
                    .map(|b| {
                        b.map(|mut b| {
                            b.names.clear();
                            b
                        })
                    });
                let span = tracing::info_span!("holdout", check.name = check.name.as_str());
                let ran = tracing::Instrument::instrument(
                    holdout.launcher.run(check, holdout.runner.as_ref()),
                    span,
                )
                .await?;
                let ran = ran.judged(
                    listed.as_ref().and_then(|b| b.as_ref().ok()),
                    check.min_tests,
                );
                let recorded = record(
                    check,
                    &holdout.runner,
                    listed.as_ref(),
                    vec![ran],
                    &self.redact,
                );
                let counts = recorded.counts.map(|c| {
                    let total = c.total.max(c.failed + c.errors);
                    if c.failed + c.errors > 0 {
                        format!("{} of {total} tests failed", c.failed + c.errors)
                    } else {
                        format!("{} of {total} tests passed", c.passed)
                    }
                });
                let mut evidence = recorded.evidence;
                evidence.source = Source::Holdout.as_str().to_owned();
                subject.emit(RunEvent::HoldoutCompleted {
                    check_name: check.name.clone(),
                    passed: recorded.passed,
                    counts: counts.clone(),
                    duration_ms: recorded.duration_ms,
                    cpu_ms: recorded.cpu_ms,
                });
                if !recorded.passed {
                    // Counts only: the holdout's files, names, asserts and output stay the
                    // operator's (in the evidence record).
                    // No exit code, no timing, no reason in the code's own words: the code under
                    // test runs in the holdout and could choose them to signal what it read.
                    let how = match &counts {
                        Some(counts)
                            if recorded.counts.is_some_and(|c| c.failed + c.errors > 0) =>
                        {
                            format!(": {counts}")
                        }
                        _ => String::new(),
                    };
                    let message = format!("holdout check `{}` failed{how}", check.name);
                    subject.findings.push(if check.required {
                        Finding::blocking(Source::Holdout, &check.name, message)
                    } else {
                        Finding::advisory(Source::Holdout, &check.name, message)
                    });
                }
                subject.evidence.push(evidence);
            }
            Ok(())
        })
    }
}
