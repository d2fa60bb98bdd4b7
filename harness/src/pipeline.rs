//! The verification pipeline (DESIGN §3): the stages in authority order, run on every attempt.
//! Every stage runs, so the delegate hears every reason at once; an attempt passes only when no
//! stage found a blocking problem.

use harness_hooks::Event;

use crate::checks::{
    Check, CitationStage, CommandChecks, CriteriaStage, InlineVerifier, PlanStage, PostVerifyHooks,
    ScopeStage, Subject,
};
use crate::error::Error;
use crate::error::Result;
use crate::policy::Policy;
use crate::verdict::{Decision, Verdict};
use crate::verifier::Verifier;
use harness_hooks::DelegationResult;

/// Everything that judges an attempt, in order.
#[derive(Debug, Default)]
pub struct Pipeline {
    stages: Vec<Box<dyn Check>>,
}

impl Pipeline {
    /// Creates a pipeline: an optional inline verifier, then the `delegation.post_verify` hooks
    /// of `policy` that match `names` (the delegate's kind and model).
    pub fn new(verifier: Option<Verifier>, policy: Option<Policy>, names: Vec<String>) -> Self {
        Self::with_checks(
            Stages {
                verifier,
                ..Stages::default()
            },
            policy,
            names,
        )
    }

    /// As [`Pipeline::new`], led by the delegation's scope, command checks and criteria: the
    /// strongest, deterministic signal first.
    pub(crate) fn with_checks(given: Stages, policy: Option<Policy>, names: Vec<String>) -> Self {
        let Stages {
            scope,
            checks,
            criteria,
            plan,
            citations,
            verifier,
        } = given;
        let mut stages: Vec<Box<dyn Check>> = Vec::new();
        if let Some(scope) = scope {
            stages.push(Box::new(scope));
        }
        if let Some(checks) = checks.filter(|c| !c.checks.is_empty()) {
            stages.push(Box::new(checks));
        }
        if let Some(criteria) = criteria.filter(|c| !c.criteria.is_empty()) {
            stages.push(Box::new(criteria));
        }
        if let Some(plan) = plan.filter(|p| !p.steps.is_empty()) {
            stages.push(Box::new(plan));
        }
        if let Some(citations) = citations {
            stages.push(Box::new(citations));
        }
        if let Some(verifier) = verifier {
            stages.push(Box::new(InlineVerifier(verifier)));
        }
        if let Some(policy) = policy.filter(|p| p.applies(Event::DelegationPostVerify, &names)) {
            stages.push(Box::new(PostVerifyHooks { policy, names }));
        }
        Pipeline { stages }
    }

    /// Returns true when anything verifies; otherwise delegations are `skipped`.
    pub fn is_active(&self) -> bool {
        !self.stages.is_empty()
    }

    /// Judges one attempt. Returns the Result as the stages left it (a post-verify `modify`
    /// rewrites it for the caller), and the verdict: `pass` or `retry` (the loop decides when
    /// the budget makes a retry a `fail`), `None` when nothing is configured to verify.
    ///
    /// # Errors
    /// [`ErrorKind::Verifier`](crate::ErrorKind::Verifier) or
    /// [`ErrorKind::Hook`](crate::ErrorKind::Hook) when a verifier or hook is broken: the
    /// delegation must stop without a retry.
    pub async fn judge(
        &self,
        result: DelegationResult,
    ) -> (DelegationResult, Result<Option<Verdict>>) {
        let events = crate::events::Emitter::detached();
        let judged = self.judge_attempt(result, &events).await;
        (judged.result, judged.verdict)
    }

    /// Judges one attempt as [`Pipeline::judge`] does, keeping what the loop needs besides;
    /// the stages tell `events` what they do.
    pub(crate) async fn judge_attempt(
        &self,
        result: DelegationResult,
        events: &crate::events::Emitter<'_>,
    ) -> Judgement {
        if !self.is_active() {
            return Judgement {
                result,
                verdict: Ok(None),
                diff: Vec::new(),
                fatal: None,
            };
        }
        let attempt = result.attempt;
        let mut subject = Subject::new(result, events);
        for stage in &self.stages {
            subject.share_evidence();
            if let Err(e) = stage.check(&mut subject).await {
                return Judgement {
                    result: subject.result,
                    verdict: Err(e),
                    diff: subject.diff,
                    fatal: None,
                };
            }
            if subject.fatal.is_some() {
                break;
            }
        }
        subject.share_evidence();
        let decision = if subject.fatal.is_some() {
            Decision::Fail
        } else if subject.findings.iter().any(|f| f.blocking) {
            Decision::Retry
        } else {
            Decision::Pass
        };
        let verdict = Verdict {
            attempt,
            decision,
            findings: subject.findings,
            evidence: subject.evidence,
            critic: None,
            logs: subject.logs,
        };
        Judgement {
            result: subject.result,
            verdict: Ok(Some(verdict)),
            diff: subject.diff,
            fatal: subject.fatal,
        }
    }
}

/// The deterministic stages and the verifier a pipeline is built from, each optional.
#[derive(Debug, Default)]
pub(crate) struct Stages {
    pub(crate) scope: Option<ScopeStage>,
    pub(crate) checks: Option<CommandChecks>,
    pub(crate) criteria: Option<CriteriaStage>,
    pub(crate) plan: Option<PlanStage>,
    pub(crate) citations: Option<CitationStage>,
    pub(crate) verifier: Option<Verifier>,
}

/// What judging one attempt left.
#[derive(Debug)]
pub(crate) struct Judgement {
    /// The Result as the stages left it.
    pub(crate) result: DelegationResult,
    /// The verdict; `None` when nothing verifies; an error when a judge is broken.
    pub(crate) verdict: Result<Option<Verdict>>,
    /// Unified diffs of what the delegation changed so far (with a scope).
    pub(crate) diff: Vec<String>,
    /// The error that ends the delegation now (a scope violation under `on_violation: fail`);
    /// the verdict's decision is then `fail`.
    pub(crate) fatal: Option<Error>,
}
