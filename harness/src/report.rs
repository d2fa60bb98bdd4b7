//! How a delegation ended, as the caller and `harness run --json` see it.

use serde_json::{Value, json};

use crate::conversation::Usage;
use crate::error::{Error, ErrorKind};
use crate::prompt::{RETRY_TEMPLATE_VERSION, retry_template_sha256};
use crate::result::DelegationResult;

/// The outcome of one delegation (DESIGN §4.6).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// An attempt was verified.
    Passed,
    /// Nothing was configured to verify; the result passed through.
    Skipped,
    /// Every attempt failed verification (`verification_failed`).
    Failed,
    /// The delegation stopped with an error of this kind.
    Error(ErrorKind),
}

impl Outcome {
    /// Returns `passed`, `skipped`, `failed` or `error`.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Passed => "passed",
            Outcome::Skipped => "skipped",
            Outcome::Failed => "failed",
            Outcome::Error(_) => "error",
        }
    }

    /// Returns `passed`, `failed` or `skipped`: how verification went, whatever else happened.
    pub fn verify_outcome(self) -> &'static str {
        match self {
            Outcome::Passed => "passed",
            Outcome::Skipped => "skipped",
            Outcome::Failed | Outcome::Error(_) => "failed",
        }
    }
}

/// One attempt as recorded.
#[derive(Debug, Clone, PartialEq)]
pub struct AttemptRecord {
    /// The attempt index, from 0.
    pub attempt: u32,
    /// What the attempt produced (absent when it ended in an error before producing a result).
    pub result: Option<DelegationResult>,
    /// Whether it passed verification (None when not verified).
    pub passed: Option<bool>,
    /// Why it failed verification.
    pub reasons: Vec<String>,
    /// Tokens it cost.
    pub usage: Usage,
    /// How long it took, delegate and verification together.
    pub duration: std::time::Duration,
}

/// Everything known about a finished delegation.
#[derive(Debug, Clone)]
pub struct Report {
    /// The delegation id.
    pub id: String,
    /// How it ended.
    pub outcome: Outcome,
    /// The delegate kind.
    pub delegate_kind: String,
    /// The model, when the delegate has one.
    pub model: Option<String>,
    /// Every attempt made, in order.
    pub attempts: Vec<AttemptRecord>,
    /// The error, for `failed` and `error` outcomes.
    pub error: Option<Error>,
    /// The Result after `delegation.post` hooks rewrote it, when they did.
    pub delivered: Option<DelegationResult>,
    /// When the delegation started.
    pub started_at: std::time::SystemTime,
    /// How long it took.
    pub duration: std::time::Duration,
}

impl Report {
    /// Returns true when the outcome is `passed`.
    pub fn verified(&self) -> bool {
        self.outcome == Outcome::Passed
    }

    /// Returns what the caller gets: the last attempt's result, as `delegation.post` hooks
    /// delivered it.
    pub fn result(&self) -> Option<&DelegationResult> {
        self.delivered
            .as_ref()
            .or_else(|| self.attempts.iter().rev().find_map(|a| a.result.as_ref()))
    }

    /// Returns the tokens the whole delegation cost.
    pub fn usage(&self) -> Usage {
        let mut total = Usage::default();
        for attempt in &self.attempts {
            total.add(attempt.usage);
        }
        total
    }

    /// Returns the reasons of every verified attempt, one list per attempt.
    pub fn reasons(&self) -> Vec<Vec<String>> {
        self.attempts
            .iter()
            .filter(|a| a.passed.is_some())
            .map(|a| a.reasons.clone())
            .collect()
    }

    /// Returns the `harness run --json` object.
    pub fn to_json(&self) -> Value {
        let usage = self.usage();
        json!({
            "id": self.id,
            "outcome": self.outcome.as_str(),
            "verified": self.verified(),
            "attempts": self.attempts.len(),
            "reasons": self.reasons(),
            "result": self.result().map(DelegationResult::to_value),
            "error": self.error.as_ref().map(|e| json!({"kind": e.kind().as_str(), "message": e.message()})),
            "usage": {
                "input_tokens": usage.input_tokens,
                "output_tokens": usage.output_tokens,
                "requests": usage.requests,
                "per_attempt": self.attempts.iter().map(|a| json!({
                    "duration_ms": u64::try_from(a.duration.as_millis()).unwrap_or(u64::MAX),
                    "input_tokens": a.usage.input_tokens,
                    "output_tokens": a.usage.output_tokens,
                    "requests": a.usage.requests,
                })).collect::<Vec<_>>(),
            },
            "delegate": {"kind": self.delegate_kind, "model": self.model},
            "duration_ms": u64::try_from(self.duration.as_millis()).unwrap_or(u64::MAX),
            "retry_template": {"version": RETRY_TEMPLATE_VERSION, "sha256": retry_template_sha256()},
        })
    }
}
