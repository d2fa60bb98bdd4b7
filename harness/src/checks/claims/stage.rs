//! The claims stage: reads the final answer's claims, judges each against the attempt, and
//! files an unsupported one as a `claim` finding and an evidence record.

use std::path::Path;

use harness_hooks::{Evidence, EvidenceResult};

use super::extract::claims;
use super::judge::unsupported_all;
use super::reading::MAX_ANSWER_BYTES;
use super::{Claim, Claimed, Ground};
use crate::checks::{Check, Subject};
use crate::delegate::BoxFuture;
use crate::error::Result;
use crate::events::RunEvent;
use crate::gates::claims::ClaimsMode;
use crate::verdict::{Finding, Source};

/// Unsupported claims reported per attempt, at most.
pub(super) const MAX_FINDINGS: usize = 20;

/// Claims judged per attempt, at most.
pub(super) const MAX_JUDGED: usize = 500;

/// The claims stage.
#[derive(Debug)]
pub(crate) struct ClaimsStage {
    mode: ClaimsMode,
    root: std::path::PathBuf,
    /// When the delegation began (the stage is made just before attempt 0).
    started: std::time::SystemTime,
}

impl ClaimsStage {
    /// The stage for `mode` in the workspace at `root`; `None` for `claims: off`.
    pub(crate) fn from_spec(mode: ClaimsMode, root: &Path) -> Option<Self> {
        (mode != ClaimsMode::Off).then(|| ClaimsStage {
            mode,
            root: root.to_path_buf(),
            started: std::time::SystemTime::now(),
        })
    }
}

/// Builds the claims stage for [`STAGES`](crate::pipeline::STAGES) (unless `claims: off`).
///
/// # Errors
/// Never; the signature is every stage's.
pub(crate) fn stage(
    m: &mut crate::checks::materials::Materials<'_>,
) -> Result<Option<Box<dyn Check>>> {
    Ok(
        ClaimsStage::from_spec(m.delegation.claims(), m.workspace.root())
            .map(|c| Box::new(c) as Box<dyn Check>),
    )
}

impl Check for ClaimsStage {
    fn name(&self) -> &'static str {
        "claims"
    }

    fn check<'a>(&'a self, subject: &'a mut Subject<'_>) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            let read = claims(&subject.result.response);
            let ground = Ground {
                calls: &subject.result.tool_calls,
                results: &subject.result.tool_results,
                changes: subject.result.changes.as_ref(),
                evidence: &subject.evidence,
                head_moved: subject.head_moved,
                root: &self.root,
                started: Some(self.started),
            };
            // A hostile answer can claim thousands of things; the first of them are judged.
            let mut judged = unsupported_all(&read[..read.len().min(MAX_JUDGED)], &ground);
            let unsupported_count = judged.len();
            if judged.len() > MAX_FINDINGS {
                // The retry prompt stays readable; the count says how many there were.
                let more = judged.len() - MAX_FINDINGS;
                judged.truncate(MAX_FINDINGS);
                if let Some((_, why)) = judged.last_mut() {
                    why.push_str(&format!(" (and {more} more unsupported claims)"));
                }
            }
            if subject.result.response.len() > MAX_ANSWER_BYTES {
                subject.logs.push(format!(
                    "claims: only the first {MAX_ANSWER_BYTES} bytes of the {}-byte answer were read",
                    subject.result.response.len()
                ));
            }
            subject.emit(RunEvent::ClaimsChecked {
                claims: read.len(),
                unsupported: unsupported_count,
            });
            let at = humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string();
            for (Claimed { claim, rule }, why) in judged {
                let mut finding = match self.mode {
                    ClaimsMode::Advisory => Finding::advisory(Source::Claim, claim.kind(), &why),
                    _ => Finding::blocking(Source::Claim, claim.kind(), &why),
                };
                if let Claim::Wrote { path, .. } | Claim::Deleted { path, .. } = claim {
                    finding.path = Some(path.clone());
                }
                finding.rule = Some(rule.id.to_owned());
                subject.findings.push(finding);
                let mut extra = serde_json::Map::new();
                extra.insert("rule".to_owned(), rule.id.into());
                subject.evidence.push(Evidence {
                    method: Some("claims".to_owned()),
                    extra,
                    target: Some(match claim {
                        Claim::Wrote { path, .. } | Claim::Deleted { path, .. } => path.clone(),
                        Claim::TestsPass { said } | Claim::Committed { said } => said.clone(),
                        Claim::Ran { command, .. } => command.clone(),
                    }),
                    required: self.mode == ClaimsMode::Blocking,
                    proof: Some(why),
                    at: Some(at.clone()),
                    ..Evidence::new(
                        format!("claim:{}", claim.kind()),
                        "claim",
                        EvidenceResult::Fail,
                    )
                });
            }
            Ok(())
        })
    }

    fn verifies(&self) -> bool {
        // It refutes an answer; an answer that claims nothing is not verified by it.
        false
    }
}
