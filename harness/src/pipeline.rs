//! The verification pipeline (DESIGN §4.5): the inline verifier, then the post-verify hooks.
//! An attempt passes only if every stage passes; every stage runs so all reasons are known.

use tracing::Instrument;

use crate::error::Result;
use crate::result::DelegationResult;
use crate::telemetry;
use crate::verifier::Verifier;

/// The verdict on one attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    /// True when every stage passed.
    pub passed: bool,
    /// Why not, one per failing stage, prefixed by the source (`verify: …`, `hook NAME: …`).
    pub reasons: Vec<String>,
}

/// Everything that judges an attempt.
#[derive(Debug, Clone, Default)]
pub struct Pipeline {
    verifier: Option<Verifier>,
}

impl Pipeline {
    /// Creates a pipeline with an optional inline verifier.
    pub fn new(verifier: Option<Verifier>) -> Self {
        Pipeline { verifier }
    }

    /// Returns true when anything verifies; otherwise delegations are `skipped`.
    pub fn is_active(&self) -> bool {
        self.verifier.is_some()
    }

    /// Judges one attempt. Returns `None` when nothing is configured to verify.
    ///
    /// # Errors
    /// [`ErrorKind::Verifier`](crate::ErrorKind::Verifier) when a verifier is broken: the
    /// delegation must stop without a retry.
    pub async fn check(&self, result: &mut DelegationResult) -> Result<Option<Verdict>> {
        if !self.is_active() {
            return Ok(None);
        }
        let mut reasons = Vec::new();
        if let Some(verifier) = &self.verifier {
            let span = tracing::info_span!(
                telemetry::SPAN_VERIFY,
                verifier = verifier.name(),
                verify.outcome = tracing::field::Empty,
                verify.reason = tracing::field::Empty,
            );
            let (outcome, _logs) = verifier.verify(result).instrument(span.clone()).await?;
            span.record(
                "verify.outcome",
                if outcome.verified { "passed" } else { "failed" },
            );
            if !outcome.verified {
                span.record("verify.reason", outcome.reason.as_str());
                reasons.push(format!("verify: {}", outcome.reason));
            }
        }
        Ok(Some(Verdict {
            passed: reasons.is_empty(),
            reasons,
        }))
    }
}
