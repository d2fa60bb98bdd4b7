//! Stage 2: deterministic checks (DESIGN §4.7) — the user's own commands (tests, lint, build),
//! judged by exit code, each leaving an evidence record. A required check that fails fails the
//! attempt; an advisory one is said, never held against it. A check that cannot start is a
//! broken policy (kind `check`), never a pass. The `checks:` section is read in
//! [`crate::gates::checks`]; how a check runs and what its runs come to is [`super::launch`].

use std::sync::Arc;

use tracing::Instrument;

use super::launch::{Launcher, Ran, confirmed, record, runners};
use super::runner::{self};
use super::{Check, Subject};
use crate::delegate::BoxFuture;
use crate::error::{Error, ErrorKind, Result};
use crate::events::RunEvent;
use crate::gates::checks::CheckSpec;
use crate::redact::Redactor;

/// The delegation's checks as a pipeline stage.
#[derive(Debug)]
pub(crate) struct CommandChecks {
    checks: Vec<CheckSpec>,
    /// Each check's test runner, when it runs a known one.
    runners: Vec<Option<runner::Found>>,
    /// Where and how they run.
    launcher: Arc<Launcher>,
    /// Scrubs output before it is kept or quoted.
    redact: Redactor,
    /// The tests the untouched workspace holds, by each check's runner (collected before
    /// attempt 0).
    base: Option<runner::Collection>,
}

impl CommandChecks {
    /// The stage running `checks` in `workspace`; `None` when there are none. `base` is the
    /// collection of the untouched workspace's tests, when one was started.
    ///
    /// # Errors
    /// [`ErrorKind::Check`] when the checks' private HOME cannot be made;
    /// [`ErrorKind::Config`] for `min_tests` on a check whose runner is not known.
    pub(crate) fn from_spec(
        checks: &[CheckSpec],
        workspace: &harness_builtins::Workspace,
        redact: &Redactor,
        isolation: Option<&harness_builtins::Isolation>,
        base: Option<runner::Collection>,
    ) -> Result<Option<Self>> {
        if checks.is_empty() {
            return Ok(None);
        }
        let runners = runners(checks, workspace.root())?;
        let reports = runners.iter().any(Option::is_some);
        Ok(Some(CommandChecks {
            checks: checks.to_vec(),
            runners,
            launcher: Arc::new(Launcher::new(
                workspace.root(),
                isolation,
                Vec::new(),
                reports,
            )?),
            redact: redact.clone(),
            base,
        }))
    }
}

impl Check for CommandChecks {
    fn name(&self) -> &'static str {
        "checks"
    }

    fn check<'a>(&'a self, subject: &'a mut Subject<'_>) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            let base = match &self.base {
                Some(collection) => Some(collection.wait().await),
                None => None,
            };
            let base_of = |name: &str| {
                base.as_ref()
                    .and_then(|b| b.iter().find(|(n, _)| n == name).map(|(_, t)| t.clone()))
            };
            let indexed: Vec<usize> = (0..self.checks.len()).collect();
            let mut rest = indexed.as_slice();
            while let Some(&first) = rest.first() {
                // A run of consecutive `parallel: true` checks runs at once; the rest one by one.
                let together = if self.checks[first].parallel {
                    rest.iter()
                        .take_while(|&&i| self.checks[i].parallel)
                        .count()
                } else {
                    1
                };
                let (group, after) = rest.split_at(together);
                rest = after;
                for &i in group {
                    subject.emit(RunEvent::CheckStarted {
                        check_name: self.checks[i].name.clone(),
                        required: self.checks[i].required,
                    });
                }
                let runs = if group.len() == 1 {
                    let i = group[0];
                    let span =
                        tracing::info_span!("check", check.name = self.checks[i].name.as_str());
                    vec![
                        self.launcher
                            .run(&self.checks[i], self.runners[i].as_ref())
                            .instrument(span)
                            .await,
                    ]
                } else {
                    self.execute_together(group).await
                };
                for (&i, run) in group.iter().zip(runs) {
                    let check = &self.checks[i];
                    let base = base_of(&check.name);
                    let runs = confirmed(
                        &self.launcher,
                        check,
                        self.runners[i].as_ref(),
                        base.as_ref().and_then(|b| b.as_ref().ok()),
                        run?,
                    )
                    .await?;
                    let recorded =
                        record(check, &self.runners[i], base.as_ref(), runs, &self.redact);
                    recorded.apply(subject, check);
                }
            }
            Ok(())
        })
    }
}

/// Builds the checks stage for [`STAGES`](crate::pipeline::STAGES).
///
/// # Errors
/// As [`CommandChecks::from_spec`].
pub(crate) fn stage(
    m: &mut crate::checks::materials::Materials<'_>,
) -> Result<Option<Box<dyn Check>>> {
    Ok(CommandChecks::from_spec(
        m.delegation.checks(),
        m.workspace,
        m.delegation.redact(),
        m.isolation,
        m.collection.clone(),
    )?
    .map(|c| Box::new(c) as Box<dyn Check>))
}

impl CommandChecks {
    /// Runs the checks at `group` at once, each on its own task; results in the group's order.
    /// Dropping the future (a cancel, a timeout) aborts the tasks, which kills their process
    /// groups.
    async fn execute_together(&self, group: &[usize]) -> Vec<Result<Ran>> {
        let mut tasks = tokio::task::JoinSet::new();
        for (index, &i) in group.iter().enumerate() {
            let (check, found, launcher) = (
                self.checks[i].clone(),
                self.runners[i].clone(),
                Arc::clone(&self.launcher),
            );
            let span = tracing::info_span!("check", check.name = check.name.as_str());
            tasks.spawn(
                async move { (index, launcher.run(&check, found.as_ref()).await) }.instrument(span),
            );
        }
        let mut runs: Vec<Option<Result<Ran>>> = group.iter().map(|_| None).collect();
        while let Some(joined) = tasks.join_next().await {
            match joined {
                Ok((index, run)) => runs[index] = Some(run),
                Err(e) => {
                    return group
                        .iter()
                        .map(|&i| {
                            Err(Error::new(
                                ErrorKind::Check,
                                format!("check {}: its task failed: {e}", self.checks[i].name),
                            ))
                        })
                        .collect();
                }
            }
        }
        runs.into_iter()
            .map(|run| {
                run.unwrap_or_else(|| {
                    Err(Error::new(
                        ErrorKind::Check,
                        "a check did not report".to_owned(),
                    ))
                })
            })
            .collect()
    }
}
