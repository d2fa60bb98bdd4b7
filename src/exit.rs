//! Exit codes (DESIGN §4.6).

use harness::{Error, ErrorKind};

/// Passed, or skipped because nothing was configured to verify.
pub const OK: u8 = 0;
/// Verification failed (or, for `harness verify`, the result was not verified).
pub const NOT_VERIFIED: u8 = 1;
/// Usage or configuration error.
pub const USAGE: u8 = 2;
/// A broken policy: a verifier or hook crashed, hit a limit or broke its contract.
pub const BROKEN_POLICY: u8 = 3;
/// The delegate, a tool, or the clock failed.
pub const DELEGATE: u8 = 4;
/// A policy hook blocked the delegation.
pub const BLOCKED: u8 = 5;
/// Stopped by SIGINT or SIGTERM (128 + SIGINT, as shells report Ctrl-C).
pub const CANCELLED: u8 = 130;

/// Returns the exit code for a delegation that ended in an error of `kind`.
pub fn for_error(kind: ErrorKind) -> u8 {
    match kind {
        ErrorKind::Config
        | ErrorKind::OverrideNotAllowed
        | ErrorKind::ReasonRequired
        | ErrorKind::IllegalTransition => USAGE,
        ErrorKind::Verifier | ErrorKind::Hook | ErrorKind::Check => BROKEN_POLICY,
        ErrorKind::Delegate | ErrorKind::Tool | ErrorKind::Timeout | ErrorKind::Budget => DELEGATE,
        ErrorKind::Cancelled => CANCELLED,
        ErrorKind::Blocked => BLOCKED,
        ErrorKind::VerificationFailed
        | ErrorKind::ScopeViolation
        | ErrorKind::NoGate
        | ErrorKind::Stuck
        | ErrorKind::CriticRejected => NOT_VERIFIED,
    }
}

/// Prints `error` — as `{"error": {"kind", "message"}}` on stdout with `json`, else as
/// `error[kind]: message` on stderr — and returns its exit code.
pub fn fail(error: &Error, json: bool) -> u8 {
    if json {
        println!(
            "{}",
            serde_json::json!({"error": {"kind": error.kind().as_str(), "message": error.message()}})
        );
    } else {
        eprintln!("error[{}]: {}", error.kind().as_str(), error.message());
    }
    for_error(error.kind())
}
