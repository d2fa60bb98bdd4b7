//! Stage 3: the inline verifier, `run(result)` (DESIGN §4.2).

use tracing::Instrument;
use tracing::field::Empty;

use super::{Check, Subject};
use crate::delegate::BoxFuture;
use crate::error::Result;
use crate::redact::Redactor;
use crate::telemetry;
use crate::verdict::{Finding, Source};
use crate::verifier::Verifier;

/// The delegation's inline verifier as a pipeline stage; its reason reaches the trace scrubbed
/// by the delegation's redactor.
#[derive(Debug)]
pub(crate) struct InlineVerifier(pub(crate) Verifier, pub(crate) Redactor);

/// Builds the inline verifier's stage for [`STAGES`](crate::pipeline::STAGES).
///
/// # Errors
/// Never; the signature is every stage's.
pub(crate) fn stage(
    m: &mut crate::checks::materials::Materials<'_>,
) -> crate::error::Result<Option<Box<dyn Check>>> {
    Ok(m.verifier
        .take()
        .map(|v| Box::new(InlineVerifier(v, m.delegation.redact().clone())) as Box<dyn Check>))
}

impl Check for InlineVerifier {
    fn name(&self) -> &'static str {
        "verify"
    }

    fn check<'a>(&'a self, subject: &'a mut Subject<'_>) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            let verifier = &self.0;
            let span = tracing::info_span!(
                telemetry::SPAN_VERIFY,
                verifier = verifier.name(),
                verify.outcome = Empty,
                verify.reason = Empty,
            );
            let clock = std::time::Instant::now();
            let (outcome, logs) = verifier
                .verify_value(&subject.value)
                .instrument(span.clone())
                .await?;
            telemetry::record_verify_duration("inline", clock.elapsed().as_secs_f64());
            subject.logs.extend(logs);
            subject.evidence.extend(outcome.evidence.iter().cloned());
            span.record(
                "verify.outcome",
                if outcome.verified { "passed" } else { "failed" },
            );
            if !outcome.verified {
                span.record("verify.reason", self.1.scrub(&outcome.reason).as_ref());
                subject
                    .findings
                    .push(Finding::blocking(Source::Verify, "", outcome.reason));
            } else if !outcome.reason.is_empty() {
                // A pass with a note: said, never held against the attempt.
                subject
                    .findings
                    .push(Finding::advisory(Source::Verify, "", outcome.reason));
            }
            Ok(())
        })
    }
}
