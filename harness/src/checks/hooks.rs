//! Stage 4: the `delegation.post_verify` hooks, in priority order (DESIGN §4.2).

use harness_hooks::{Action, DelegationResult, Event};
use serde::Deserialize as _;

use super::{Check, Subject};
use crate::delegate::BoxFuture;
use crate::error::{Error, ErrorKind, Result};
use crate::policy::Policy;
use crate::telemetry;
use crate::verdict::{Finding, Source};

/// The post-verify hooks that match the delegate, as a pipeline stage.
#[derive(Debug)]
pub(crate) struct PostVerifyHooks {
    policy: Policy,
    /// The delegate's kind and model, matched by hooks' `delegates:` globs.
    names: Vec<String>,
}

impl PostVerifyHooks {
    /// The `delegation.post_verify` hooks of `policy` that match `names` (the delegate's kind
    /// and model); `None` when there are none.
    pub(crate) fn from_policy(policy: &Policy, names: &[String]) -> Option<Self> {
        policy
            .applies(Event::DelegationPostVerify, names)
            .then(|| PostVerifyHooks {
                policy: policy.clone(),
                names: names.to_vec(),
            })
    }
}

/// Builds the `delegation.post_verify` hooks' stage for [`STAGES`](crate::pipeline::STAGES).
///
/// # Errors
/// Never; the signature is every stage's.
pub(crate) fn stage(
    m: &mut crate::checks::materials::Materials<'_>,
) -> crate::error::Result<Option<Box<dyn Check>>> {
    Ok(m.policy
        .and_then(|p| PostVerifyHooks::from_policy(p, m.names))
        .map(|h| Box::new(h) as Box<dyn Check>))
}

impl Check for PostVerifyHooks {
    fn name(&self) -> &'static str {
        "hooks"
    }

    fn check<'a>(&'a self, subject: &'a mut Subject<'_>) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            let clock = std::time::Instant::now();
            // The hooks get the Result itself and hand it back, modified or not: no copy.
            let payload = std::mem::take(&mut subject.value);
            let dispatch = self
                .policy
                .dispatch(Event::DelegationPostVerify, payload, &self.names)
                .await?;
            telemetry::record_verify_duration("hook", clock.elapsed().as_secs_f64());
            if dispatch.runs.iter().any(|r| r.action == Action::Modify) {
                subject.result = DelegationResult::deserialize(&dispatch.payload).map_err(|e| {
                    Error::new(
                        ErrorKind::Hook,
                        format!("a delegation.post_verify modify produced an invalid Result: {e}"),
                    )
                })?;
            }
            subject.value = dispatch.payload;
            if let Some(block) = dispatch.blocked {
                subject
                    .findings
                    .push(Finding::blocking(Source::Hook, block.hook, block.reason));
            }
            Ok(())
        })
    }
}
