//! The one error type of the runtime, with the kinds of DESIGN §4.6.

use std::fmt;

/// How a delegation (or a verification) ended when it did not end in a verdict.
///
/// [`ErrorKind::as_str`] is the stable string that goes on spans as `error.type`, decides the
/// CLI's exit code and is what tests assert on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    /// Bad input: a malformed delegation file, result file, flag or missing script.
    Config,
    /// A verifier script is broken: it crashed, hit a limit, violated its sandbox or returned
    /// something outside the contract.
    Verifier,
    /// A hook script is broken in the same ways.
    Hook,
    /// A check command cannot run (program missing, bad configuration): never a pass.
    Check,
    /// A policy hook blocked the delegation.
    Blocked,
    /// The delegate failed: provider or model error after transport retries, a failing command.
    Delegate,
    /// A tool failed in a way the delegate cannot be told about.
    Tool,
    /// The delegation ran out of time or turns.
    Timeout,
    /// The delegation was cancelled.
    Cancelled,
    /// The process running the delegation died mid-run (killed, crashed, the machine went
    /// down): found and marked by the next reader of its journal row (DESIGN §5).
    Interrupted,
    /// Every attempt was verified and none passed.
    VerificationFailed,
    /// The delegate changed files outside its `scope` (DESIGN §4.8).
    ScopeViolation,
    /// The delegate changed what judges it (DESIGN §4.8): the harness's policy, a protected gate
    /// input (an existing test, a script a check runs), git's configuration or hooks.
    GateTampered,
    /// `require_checks` is set, and the delegation has no checks and no criteria.
    NoGate,
    /// The same blocking finding on `stuck_after` consecutive attempts: retrying is not helping.
    Stuck,
    /// A budget of the delegation (`limits.max_tokens`) was spent.
    Budget,
    /// The critic rejected the work (`HARD_FAIL`), or still objected when the retry budget was
    /// spent under `critic.on_exhausted: fail`.
    CriticRejected,
}

impl ErrorKind {
    /// Returns true for the kinds of a `failed` outcome (the delegate's work was judged and
    /// refused), false for those of an `error` outcome.
    pub fn is_failure(self) -> bool {
        matches!(
            self,
            ErrorKind::VerificationFailed
                | ErrorKind::ScopeViolation
                | ErrorKind::GateTampered
                | ErrorKind::NoGate
                | ErrorKind::Stuck
                | ErrorKind::CriticRejected
        )
    }

    /// Returns the stable string form, e.g. `"verification_failed"`.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::Config => "config",
            ErrorKind::Verifier => "verifier",
            ErrorKind::Hook => "hook",
            ErrorKind::Check => "check",
            ErrorKind::Blocked => "blocked",
            ErrorKind::Delegate => "delegate",
            ErrorKind::Tool => "tool",
            ErrorKind::Timeout => "timeout",
            ErrorKind::Cancelled => "cancelled",
            ErrorKind::Interrupted => "interrupted",
            ErrorKind::VerificationFailed => "verification_failed",
            ErrorKind::ScopeViolation => "scope_violation",
            ErrorKind::GateTampered => "gate_tampered",
            ErrorKind::NoGate => "no_gate",
            ErrorKind::Stuck => "stuck",
            ErrorKind::Budget => "budget",
            ErrorKind::CriticRejected => "critic_rejected",
        }
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A failed delegation or verification: its kind and a message that says what happened, to what,
/// and what to do.
#[derive(Debug, Clone, thiserror::Error, serde::Serialize, serde::Deserialize)]
#[error("{message}")]
pub struct Error {
    kind: ErrorKind,
    message: String,
}

impl Error {
    /// Creates an error of `kind`.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Error {
            kind,
            message: message.into(),
        }
    }

    /// Creates a configuration error.
    pub fn config(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Config, message)
    }

    /// Returns the kind.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// Returns the message.
    pub fn message(&self) -> &str {
        &self.message
    }
}

/// Shorthand for results of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;
