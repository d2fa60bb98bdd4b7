//! Exit codes (DESIGN §4.6).

use harness::ErrorKind;

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
        ErrorKind::Config => USAGE,
        ErrorKind::Verifier | ErrorKind::Hook | ErrorKind::Check => BROKEN_POLICY,
        ErrorKind::Delegate | ErrorKind::Tool | ErrorKind::Timeout | ErrorKind::Budget => DELEGATE,
        ErrorKind::Cancelled | ErrorKind::Interrupted => CANCELLED,
        ErrorKind::Blocked => BLOCKED,
        ErrorKind::VerificationFailed
        | ErrorKind::ScopeViolation
        | ErrorKind::GateTampered
        | ErrorKind::NoGate
        | ErrorKind::Stuck
        | ErrorKind::CriticRejected => NOT_VERIFIED,
    }
}

/// An error a command can end with: its kind's stable name, its message, its exit code.
pub trait Failed {
    /// The kind, e.g. `config`, `journal`, `illegal_transition`.
    fn kind_name(&self) -> &'static str;
    /// What happened, to what, and what to do.
    fn message(&self) -> &str;
    /// The process exit code (DESIGN §4.5).
    fn exit_code(&self) -> u8;
}

impl Failed for harness::Error {
    fn kind_name(&self) -> &'static str {
        self.kind().as_str()
    }
    fn message(&self) -> &str {
        harness::Error::message(self)
    }
    fn exit_code(&self) -> u8 {
        for_error(self.kind())
    }
}

/// Every records failure — a journal that cannot be read or written, an unknown run, a refused
/// override — is the caller's to fix: a usage error.
impl Failed for harness_records::Error {
    fn kind_name(&self) -> &'static str {
        self.kind().as_str()
    }
    fn message(&self) -> &str {
        harness_records::Error::message(self)
    }
    fn exit_code(&self) -> u8 {
        USAGE
    }
}

/// What a command that reads or writes both delegations and records failed on.
#[derive(Debug)]
pub enum Failure {
    /// A delegation's, a policy's or a flag's error.
    Run(harness::Error),
    /// The run records'.
    Records(harness_records::Error),
}

impl From<harness::Error> for Failure {
    fn from(e: harness::Error) -> Self {
        Failure::Run(e)
    }
}

impl From<harness_records::Error> for Failure {
    fn from(e: harness_records::Error) -> Self {
        Failure::Records(e)
    }
}

impl From<harness_service::StartError> for Failure {
    fn from(e: harness_service::StartError) -> Self {
        match e {
            harness_service::StartError::Run(e) => Failure::Run(e),
            harness_service::StartError::Records(e) => Failure::Records(e),
        }
    }
}

impl Failed for Failure {
    fn kind_name(&self) -> &'static str {
        match self {
            Failure::Run(e) => e.kind_name(),
            Failure::Records(e) => e.kind_name(),
        }
    }
    fn message(&self) -> &str {
        match self {
            Failure::Run(e) => Failed::message(e),
            Failure::Records(e) => Failed::message(e),
        }
    }
    fn exit_code(&self) -> u8 {
        match self {
            Failure::Run(e) => e.exit_code(),
            Failure::Records(e) => e.exit_code(),
        }
    }
}

/// Prints `error` — as `{"error": {"kind", "message"}}` on stdout with `json`, else as
/// `error[kind]: message` on stderr — and returns its exit code.
pub fn fail(error: &dyn Failed, json: bool) -> u8 {
    if json {
        println!(
            "{}",
            serde_json::json!({"error": {"kind": error.kind_name(), "message": error.message()}})
        );
    } else {
        eprintln!("error[{}]: {}", error.kind_name(), error.message());
    }
    error.exit_code()
}
