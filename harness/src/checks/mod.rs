//! The stages of the verification pipeline (DESIGN §3), one file per kind, each a [`Check`]: a
//! small thing that looks at one attempt and adds findings. The [`Pipeline`](crate::Pipeline)
//! orders them by authority and turns what they found into a verdict.

pub(crate) mod claims;
pub(crate) mod collect;
pub(crate) mod commands;
pub(crate) mod criteria;
pub(crate) mod critic;
pub(crate) mod evidence_rules;
pub(crate) mod gaming;
pub(crate) mod holdout;
pub(crate) mod hooks;
pub(crate) mod launch;
pub(crate) mod materials;
pub(crate) mod runner;
pub(crate) mod scope;
pub(crate) mod verifier;

pub use claims::Claim;
pub use claims::describe as claims_rule;
pub use critic::{REVIEW_TEMPLATE, REVIEW_TEMPLATE_VERSION, review_template_sha256};
pub use gaming::describe as gaming_rule;
pub use holdout::shareable_evidence;
pub(crate) use hooks::PostVerifyHooks;
pub use runner::{BaseTests, TestCounts};
pub(crate) use scope::Baseline;
pub(crate) use verifier::InlineVerifier;

use harness_hooks::{CriticReview, DelegationResult, Evidence};
use serde_json::Value;

use crate::conversation::Usage;
use crate::delegate::BoxFuture;
use crate::error::Result;
use crate::events::{Emitter, RunEvent};
use crate::verdict::{Finding, Verdict};

/// One attempt under judgement, handed from stage to stage.
#[derive(Debug)]
pub(crate) struct Subject<'e> {
    /// The Result; a `delegation.post_verify` modify rewrites it for later stages and the caller.
    pub(crate) result: DelegationResult,
    /// The Result as scripts see it, converted once and kept in step with `result`.
    pub(crate) value: Value,
    /// What the stages found so far, in pipeline order.
    pub(crate) findings: Vec<Finding>,
    /// Evidence records (DESIGN §4.7).
    pub(crate) evidence: Vec<Evidence>,
    /// Lines scripts logged.
    pub(crate) logs: Vec<String>,
    /// Unified diffs of what the delegation changed (when a scope baseline was taken).
    pub(crate) diff: Vec<String>,
    /// Whether git's HEAD moved since the baseline (set by observation; `None`: not observed).
    pub(crate) head_moved: Option<bool>,
    /// The gate inputs as observation stamped them after the attempt, for the re-check after
    /// the checks.
    pub(crate) gate_stamps: Vec<(std::path::PathBuf, Option<crate::scope::Stamp>)>,
    /// The workspace root (set by observation), for messages.
    pub(crate) workspace_root: std::path::PathBuf,
    /// Set by a stage that ends the delegation at once (a scope violation under
    /// `on_violation: fail`): the stages after it do not run.
    pub(crate) fatal: Option<crate::error::Error>,
    /// The critic's review, when it reviewed the attempt.
    pub(crate) critic: Option<CriticReview>,
    /// Tokens the stages spent (the critic's model calls).
    pub(crate) usage: Usage,
    /// The verdicts of the attempts before this one, oldest first.
    pub(crate) earlier: &'e [&'e Verdict],
    /// Where stages say what they are doing (`CheckStarted`, `ScopeValidated`, …).
    pub(crate) events: &'e Emitter<'e>,
}

impl<'e> Subject<'e> {
    /// Starts judging `result`, after the attempts judged in `earlier`, telling `events` what
    /// happens.
    pub(crate) fn new(
        result: DelegationResult,
        earlier: &'e [&'e Verdict],
        events: &'e Emitter<'e>,
    ) -> Self {
        Subject {
            value: result.to_value(),
            result,
            findings: Vec::new(),
            evidence: Vec::new(),
            logs: Vec::new(),
            diff: Vec::new(),
            head_moved: None,
            gate_stamps: Vec::new(),
            workspace_root: std::path::PathBuf::new(),
            fatal: None,
            critic: None,
            usage: Usage::default(),
            earlier,
            events,
        }
    }

    /// Records an event of this attempt.
    pub(crate) fn emit(&self, event: RunEvent) {
        self.events.emit(event);
    }

    /// Shows the evidence gathered so far in the Result later stages read (`result["evidence"]`):
    /// what was added since the last call is appended to both the Result and its JSON.
    pub(crate) fn share_evidence(&mut self) {
        let shared = self.result.evidence.len();
        if shared == self.evidence.len() {
            return;
        }
        // Scripts (a caller's verifier among them) never read a holdout's output.
        fn json(records: &[Evidence]) -> impl Iterator<Item = Value> + '_ {
            records.iter().map(|e| {
                let mut value = serde_json::to_value(e).expect("evidence always serialises");
                if e.source == crate::verdict::Source::Holdout.as_str()
                    && let Some(object) = value.as_object_mut()
                {
                    object.insert("output_tail".to_owned(), Value::Null);
                }
                value
            })
        }
        let Some(object) = self.value.as_object_mut() else {
            return;
        };
        match (self.evidence.get(shared..), object.get_mut("evidence")) {
            (Some(added), Some(Value::Array(items))) if items.len() == shared => {
                self.result.evidence.extend_from_slice(added);
                items.extend(json(added));
            }
            // Not a prefix of what is shared (a hook rewrote the Result): shown anew, whole.
            _ => {
                self.result.evidence = self.evidence.clone();
                object.insert(
                    "evidence".to_owned(),
                    Value::Array(json(&self.evidence).collect()),
                );
            }
        }
    }
}

/// One stage of the pipeline.
pub(crate) trait Check: Send + Sync + std::fmt::Debug {
    /// The stage's name: its `harness.stage` span's, and its key in a verdict's `stage_us`
    /// and the report's time per stage.
    fn name(&self) -> &'static str;

    /// Judges the attempt in `subject`, adding findings (and evidence) to it.
    ///
    /// # Errors
    /// The stage's broken-policy kind (`verifier`, `hook`, …): the delegation stops without a
    /// retry, because nothing a broken judge says counts.
    fn check<'a>(&'a self, subject: &'a mut Subject<'_>) -> BoxFuture<'a, Result<()>>;

    /// Returns true for a stage that gives an opinion rather than a fact (the critic): it runs
    /// after every deterministic stage, and what those stages carried (per-tool findings) is in
    /// the subject before it.
    fn is_opinion(&self) -> bool {
        false
    }

    /// Returns false for a stage that can refute an attempt but never verifies one (the claims
    /// stage, observation without a scope or gate inputs): a pipeline of only those leaves a
    /// delegation `skipped` when they find nothing.
    fn verifies(&self) -> bool {
        true
    }
}
