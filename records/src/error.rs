//! The one error type of the run records, with kinds of its own: what went wrong with the
//! journal is not a configuration error of a delegation, and a refused override is neither.

use std::fmt;

/// What kind of failure an [`Error`] is. [`ErrorKind::as_str`] is the stable string the CLI
/// prints, the API returns and tests assert on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// The journal cannot be found, created, opened, read or written (a damaged or foreign
    /// file, a full disk, a newer schema).
    Journal,
    /// The caller asked for something that is not there or not well formed (an unknown run, a
    /// bad anchor).
    Config,
    /// A human override the project's `override_policy` does not allow.
    OverrideNotAllowed,
    /// A human override without the reason the policy requires.
    ReasonRequired,
    /// A human override that does not apply to the run: it passed, it was overridden already,
    /// or the override's type does not match what failed.
    IllegalTransition,
}

impl ErrorKind {
    /// Returns the stable string form, e.g. `"illegal_transition"`.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::Journal => "journal",
            ErrorKind::Config => "config",
            ErrorKind::OverrideNotAllowed => "override_not_allowed",
            ErrorKind::ReasonRequired => "reason_required",
            ErrorKind::IllegalTransition => "illegal_transition",
        }
    }

    /// Returns true for the refusals of a human override, which are audited.
    pub fn is_refusal(self) -> bool {
        matches!(
            self,
            ErrorKind::OverrideNotAllowed
                | ErrorKind::ReasonRequired
                | ErrorKind::IllegalTransition
        )
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A failed records operation: its kind and a message naming the journal and the fix.
#[derive(Debug, Clone, thiserror::Error)]
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

    /// Creates a journal error.
    pub fn journal(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Journal, message)
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

/// A project policy that cannot be read while an override is judged: the caller's to fix.
impl From<harness::Error> for Error {
    fn from(e: harness::Error) -> Self {
        Error::config(e.message())
    }
}

/// Shorthand for results of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;
