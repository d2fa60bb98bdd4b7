//! Stage 2b: what the answer and the attempt must contain, beyond what the checks ran (DESIGN
//! §4.13): citations for every claim under `citations: required`, and the plan's required
//! steps. The same rules judge a recorded run in `harness audit`. The `plan:` section is read
//! in [`crate::gates::plan`].

use super::{Check, Subject};
use crate::delegate::BoxFuture;
use crate::error::Result;
use crate::gates::plan::PlanStep;
use crate::verdict::{Finding, Source};

/// `citations: required`: every claim line of the answer cites its evidence.
#[derive(Debug)]
pub(crate) struct CitationStage {
    workspace: harness_builtins::Workspace,
}

impl CitationStage {
    /// The stage for `citations: required` in `workspace`; `None` when citations are off.
    pub(crate) fn from_spec(
        required: bool,
        workspace: &harness_builtins::Workspace,
    ) -> Option<Self> {
        required.then(|| CitationStage {
            workspace: workspace.clone(),
        })
    }
}

impl Check for CitationStage {
    fn name(&self) -> &'static str {
        "citations"
    }

    fn check<'a>(&'a self, subject: &'a mut Subject<'_>) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            let response = subject.result.response.clone();
            let workspace = self.workspace.clone();
            // File reads: off the async workers.
            let report = tokio::task::spawn_blocking(move || {
                harness_builtins::citation::check_response(&response, &workspace)
            })
            .await
            .map_err(|e| {
                crate::error::Error::new(
                    crate::error::ErrorKind::Check,
                    format!("the citation check failed to run: {e}"),
                )
            })?;
            for failure in report.failures {
                subject.findings.push(Finding::blocking(
                    Source::Citation,
                    failure.code,
                    format!("answer line {}: {}", failure.line, failure.message),
                ));
            }
            Ok(())
        })
    }
}

/// `plan.required_steps`: each must be taken in the attempt.
#[derive(Debug)]
pub(crate) struct PlanStage {
    steps: Vec<PlanStep>,
}

impl PlanStage {
    /// The stage requiring `steps`; `None` when there are none.
    pub(crate) fn from_spec(steps: &[PlanStep]) -> Option<Self> {
        (!steps.is_empty()).then(|| PlanStage {
            steps: steps.to_vec(),
        })
    }
}

/// Builds the plan stage for [`STAGES`](crate::pipeline::STAGES).
///
/// # Errors
/// Never; the signature is every stage's.
pub(crate) fn plan(
    m: &mut crate::checks::materials::Materials<'_>,
) -> Result<Option<Box<dyn Check>>> {
    Ok(PlanStage::from_spec(m.delegation.plan()).map(|c| Box::new(c) as Box<dyn Check>))
}

/// Builds the citation stage for [`STAGES`](crate::pipeline::STAGES).
///
/// # Errors
/// Never; the signature is every stage's.
pub(crate) fn citations(
    m: &mut crate::checks::materials::Materials<'_>,
) -> Result<Option<Box<dyn Check>>> {
    Ok(
        CitationStage::from_spec(m.delegation.citations_required(), m.workspace)
            .map(|c| Box::new(c) as Box<dyn Check>),
    )
}

impl Check for PlanStage {
    fn name(&self) -> &'static str {
        "plan"
    }

    fn check<'a>(&'a self, subject: &'a mut Subject<'_>) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            let Subject {
                value,
                evidence,
                findings,
                ..
            } = subject;
            let calls: &[serde_json::Value] =
                value["tool_calls"].as_array().map_or(&[], Vec::as_slice);
            let ran: Vec<&str> = evidence.iter().map(|e| e.criterion.as_str()).collect();
            for step in &self.steps {
                if !step.taken(calls, &ran) {
                    findings.push(Finding::blocking(
                        Source::Plan,
                        "required_step",
                        format!(
                            "a required step of the plan was not taken in this attempt: {}",
                            step.describe()
                        ),
                    ));
                }
            }
            Ok(())
        })
    }
}
