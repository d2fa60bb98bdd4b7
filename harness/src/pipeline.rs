//! The verification pipeline (DESIGN §4.5): the inline verifier, then the post-verify hooks.
//! An attempt passes only if every stage passes; every stage runs so all reasons are known.

use harness_hooks::Event;
use tracing::Instrument;

use crate::error::{Error, ErrorKind, Result};
use crate::policy::Policy;
use crate::result::DelegationResult;
use crate::telemetry;
use crate::verifier::{Verifier, VerifyOutcome};

/// The verdict on one attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    /// True when every stage passed.
    pub passed: bool,
    /// Why not, one per failing stage, prefixed by the source (`verify: …`, `hook NAME: …`).
    pub reasons: Vec<String>,
    /// The inline verifier's own verdict, when there is an inline verifier.
    pub inline: Option<VerifyOutcome>,
    /// Lines the inline verifier logged.
    pub logs: Vec<String>,
}

/// Everything that judges an attempt.
#[derive(Debug, Clone, Default)]
pub struct Pipeline {
    verifier: Option<Verifier>,
    policy: Option<Policy>,
    names: Vec<String>,
}

impl Pipeline {
    /// Creates a pipeline: an optional inline verifier, then the `delegation.post_verify` hooks
    /// of `policy` that match `names` (the delegate's kind and model).
    pub fn new(verifier: Option<Verifier>, policy: Option<Policy>, names: Vec<String>) -> Self {
        Pipeline {
            verifier,
            policy,
            names,
        }
    }

    /// Returns true when anything verifies; otherwise delegations are `skipped`.
    pub fn is_active(&self) -> bool {
        self.verifier.is_some()
            || self
                .policy
                .as_ref()
                .is_some_and(|p| p.applies(Event::DelegationPostVerify, &self.names))
    }

    /// Judges one attempt. Returns `None` when nothing is configured to verify. A post-verify
    /// `modify` rewrites `result` for later hooks and for the caller.
    ///
    /// # Errors
    /// [`ErrorKind::Verifier`] or [`ErrorKind::Hook`] when a verifier or hook is broken: the
    /// delegation must stop without a retry.
    pub async fn check(&self, result: &mut DelegationResult) -> Result<Option<Verdict>> {
        if !self.is_active() {
            return Ok(None);
        }
        let mut reasons = Vec::new();
        let mut inline = None;
        let mut logs = Vec::new();
        // Converted once: the verifier and the hooks see the same Result.
        let mut value = result.to_value();
        let policy = self
            .policy
            .as_ref()
            .filter(|p| p.applies(Event::DelegationPostVerify, &self.names));
        if let Some(verifier) = &self.verifier {
            let span = tracing::info_span!(
                telemetry::SPAN_VERIFY,
                verifier = verifier.name(),
                verify.outcome = tracing::field::Empty,
                verify.reason = tracing::field::Empty,
            );
            let clock = std::time::Instant::now();
            let (outcome, lines) = verifier
                .verify_value(if policy.is_some() {
                    value.clone()
                } else {
                    std::mem::take(&mut value)
                })
                .instrument(span.clone())
                .await?;
            telemetry::record_verify_duration("inline", clock.elapsed().as_secs_f64());
            logs = lines;
            span.record(
                "verify.outcome",
                if outcome.verified { "passed" } else { "failed" },
            );
            if !outcome.verified {
                span.record("verify.reason", outcome.reason.as_str());
                reasons.push(format!("verify: {}", outcome.reason));
            }
            inline = Some(outcome);
        }
        if let Some(policy) = policy {
            let clock = std::time::Instant::now();
            let dispatch = policy
                .dispatch(Event::DelegationPostVerify, value, &self.names)
                .await?;
            telemetry::record_verify_duration("hook", clock.elapsed().as_secs_f64());
            if dispatch.runs.iter().any(|r| r.action == "modify") {
                *result = serde_json::from_value(dispatch.payload).map_err(|e| {
                    Error::new(
                        ErrorKind::Hook,
                        format!("a delegation.post_verify modify produced an invalid Result: {e}"),
                    )
                })?;
            }
            if let Some(block) = dispatch.blocked {
                reasons.push(format!("hook {}: {}", block.hook, block.reason));
            }
        }
        Ok(Some(Verdict {
            passed: reasons.is_empty(),
            reasons,
            inline,
            logs,
        }))
    }
}
