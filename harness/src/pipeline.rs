//! The verification pipeline (DESIGN §3): the stages in authority order, run on every attempt.
//! Every deterministic stage runs, so the delegate hears every reason at once; the critic, an
//! opinion, runs last and only when nothing before it blocked. An attempt passes only when no
//! stage found a blocking problem. The list of stages is built in one place,
//! [`Pipeline::for_delegation`], each stage from its own section of the delegation.

use harness_hooks::DelegationResult;
use tracing::Instrument as _;

use crate::checks::materials::Materials;
use crate::checks::{Check, InlineVerifier, PostVerifyHooks, Subject};
use crate::conversation::Usage;
use crate::error::{Error, Result};
use crate::policy::Policy;
use crate::redact::Redactor;
use crate::verdict::{Decision, Finding, Verdict};
use crate::verifier::Verifier;

/// Everything that judges an attempt, in order.
#[derive(Debug, Default)]
pub struct Pipeline {
    stages: Vec<Box<dyn Check>>,
    /// The workspace's baseline as it is being taken, when the delegation observes it.
    baseline: Option<crate::checks::Baseline>,
    /// The base collection, when one runs (the delegate waits for it as for the baseline).
    collection: Option<crate::checks::runner::Collection>,
}

/// The stages in pipeline (authority) order. A new stage is one file under `checks/` with its
/// `stage` function, and one line here.
pub(crate) const STAGES: &[crate::checks::materials::BuildStage] = &[
    crate::checks::collect::collect,
    crate::checks::scope::stage,
    crate::checks::commands::stage,
    crate::checks::criteria::stage,
    crate::checks::scope::recheck,
    crate::checks::holdout::stage,
    crate::checks::claims::stage,
    crate::checks::gaming::stage,
    crate::checks::evidence_rules::plan,
    crate::checks::evidence_rules::citations,
    crate::checks::verifier::stage,
    crate::checks::hooks::stage,
    crate::checks::critic::stage,
];

impl Pipeline {
    /// Creates a pipeline: an optional inline verifier, then the `delegation.post_verify` hooks
    /// of `policy` that match `names` (the delegate's kind and model).
    pub fn new(verifier: Option<Verifier>, policy: Option<Policy>, names: Vec<String>) -> Self {
        let stages = [
            verifier.map(|v| Box::new(InlineVerifier(v, Redactor::default())) as Box<dyn Check>),
            policy
                .and_then(|p| PostVerifyHooks::from_policy(&p, &names))
                .map(|h| Box::new(h) as Box<dyn Check>),
        ];
        Pipeline {
            stages: stages.into_iter().flatten().collect(),
            baseline: None,
            collection: None,
        }
    }

    /// The pipeline of a delegation: every entry of [`STAGES`] that the delegation asks for,
    /// in authority order (observation and claims are on unless turned off), and the warnings
    /// building them gave.
    ///
    /// # Errors
    /// [`ErrorKind::Config`](crate::ErrorKind::Config) for a scope that does not compile;
    /// [`ErrorKind::Check`](crate::ErrorKind::Check) when the scope baseline or the checks'
    /// private HOME cannot be made.
    pub(crate) async fn for_delegation(mut made: Materials<'_>) -> Result<(Self, Vec<String>)> {
        let mut stages = Vec::with_capacity(STAGES.len());
        for build in STAGES {
            stages.extend(build(&mut made)?);
        }
        let pipeline = Pipeline {
            stages,
            baseline: made.baseline.clone(),
            collection: made.collection.clone(),
        };
        Ok((pipeline, made.warnings))
    }

    /// When the delegation's time ran out while its workspace's baseline was still being taken:
    /// the error that says so (the workspace is too large to snapshot in time), the walk stopped.
    pub(crate) fn baseline_unfinished(&self) -> Option<Error> {
        self.baseline
            .as_ref()
            .and_then(crate::checks::Baseline::unfinished)
    }

    /// Waits until the workspace's baseline is recorded (at once when it is not observed): the
    /// delegate may change nothing before.
    ///
    /// # Errors
    /// [`ErrorKind::Timeout`](crate::ErrorKind::Timeout) when the workspace is too large to
    /// snapshot within `limits.timeout_s`; [`ErrorKind::Check`](crate::ErrorKind::Check) when
    /// the walk failed.
    pub(crate) async fn baseline_ready(&self) -> Result<()> {
        if let Some(collection) = &self.collection {
            collection.wait().await;
        }
        match &self.baseline {
            Some(baseline) => baseline.ready().await,
            None => Ok(()),
        }
    }

    /// Returns true when anything verifies; otherwise delegations are `skipped` (unless a
    /// stage that only refutes, the claims stage or integrity, finds something).
    pub fn is_active(&self) -> bool {
        self.stages.iter().any(|s| s.verifies())
    }

    /// Returns true when a deterministic stage verifies (anything but the critic): a critic
    /// that is unavailable then leaves the run `passed_with_debt`, not `no_gate`.
    pub(crate) fn is_deterministic(&self) -> bool {
        self.stages.iter().any(|s| s.verifies() && !s.is_opinion())
    }

    /// Judges one attempt. Returns the Result as the stages left it (a post-verify `modify`
    /// rewrites it for the caller), and the verdict: `pass` or `retry` (the decision step says
    /// when the budget makes a retry a `fail`), `None` when nothing is configured to verify.
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
        let judged = self.judge_attempt(result, &[], Vec::new(), &events).await;
        (judged.result, judged.verdict)
    }

    /// Judges one attempt as [`Pipeline::judge`] does, keeping what the loop needs besides.
    /// `earlier` are the verdicts of the attempts before it; `carried` are findings made during
    /// the attempt (per-tool verifiers), added after the deterministic stages; the stages tell
    /// `events` what they do.
    pub(crate) async fn judge_attempt(
        &self,
        result: DelegationResult,
        earlier: &[&Verdict],
        mut carried: Vec<Finding>,
        events: &crate::events::Emitter<'_>,
    ) -> Judgement {
        if self.stages.is_empty() {
            return Judgement {
                result,
                verdict: Ok(None),
                diff: Vec::new(),
                fatal: None,
                usage: Usage::default(),
            };
        }
        let attempt = result.attempt;
        let mut subject = Subject::new(result, earlier, events);
        let mut stage_us = std::collections::BTreeMap::new();
        for stage in &self.stages {
            if stage.is_opinion() {
                subject.findings.append(&mut carried);
            }
            subject.share_evidence();
            let span = tracing::info_span!(
                crate::telemetry::SPAN_STAGE,
                otel.name = format!("{} {}", crate::telemetry::SPAN_STAGE, stage.name()),
                { crate::telemetry::attr::STAGE_NAME } = stage.name(),
            );
            let clock = std::time::Instant::now();
            let checked = stage.check(&mut subject).instrument(span).await;
            stage_us.insert(
                stage.name().to_owned(),
                u64::try_from(clock.elapsed().as_micros()).unwrap_or(u64::MAX),
            );
            if let Err(e) = checked {
                return Judgement {
                    result: subject.result,
                    verdict: Err(e),
                    diff: subject.diff,
                    fatal: None,
                    usage: subject.usage,
                };
            }
            if subject.fatal.is_some() {
                break;
            }
        }
        if subject.fatal.is_none() {
            subject.findings.append(&mut carried);
        }
        subject.share_evidence();
        let decision = if subject.fatal.is_some() {
            Decision::Fail
        } else if subject.findings.iter().any(|f| f.blocking) {
            Decision::Retry
        } else if !self.is_active() {
            // Only stages that refute ran, and found nothing: nothing verified the attempt.
            return Judgement {
                result: subject.result,
                verdict: Ok(None),
                diff: subject.diff,
                fatal: None,
                usage: subject.usage,
            };
        } else {
            Decision::Pass
        };
        let verdict = Verdict {
            attempt,
            decision,
            findings: subject.findings,
            evidence: subject.evidence,
            critic: subject.critic,
            logs: subject.logs,
            stage_us,
        };
        Judgement {
            result: subject.result,
            verdict: Ok(Some(verdict)),
            diff: subject.diff,
            fatal: subject.fatal,
            usage: subject.usage,
        }
    }
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
    /// Tokens the stages spent (the critic's).
    pub(crate) usage: Usage,
}

impl std::fmt::Debug for Materials<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Materials").finish_non_exhaustive()
    }
}
