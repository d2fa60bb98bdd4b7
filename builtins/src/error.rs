//! The one error type of the engine: what went wrong, in which script, and where.

use std::fmt;

/// What kind of failure a script evaluation ended in.
///
/// The string form ([`ErrorKind::as_str`]) is stable: it goes on spans as `error.type` and is what
/// tests assert on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// The script does not parse.
    Syntax,
    /// The script raised an error while running (a failed builtin, a type error, `fail(...)`).
    Runtime,
    /// The script hit one of the configured [`Limit`]s.
    Limit(Limit),
    /// The script tried to reach outside its sandbox (a path, host, program, variable or
    /// capability it is not allowed).
    Sandbox,
    /// A value could not be converted between JSON and Starlark.
    Conversion,
    /// The script does not define the function the host calls (`run`, `handle`, `respond`).
    MissingFunction,
    /// An inline call ([`Script::call_inline`](crate::Script::call_inline)) gave up because the
    /// script needs a blocking thread (it uses `fs`, `http` or `exec`, or ran past the inline
    /// budget). Not a failure of the script: call [`Script::call`](crate::Script::call) on a
    /// blocking thread instead.
    WouldBlock,
}

impl ErrorKind {
    /// Returns the stable string form of this kind, e.g. `"limit"` or `"sandbox"`.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::Syntax => "syntax",
            ErrorKind::Runtime => "runtime",
            ErrorKind::Limit(_) => "limit",
            ErrorKind::Sandbox => "sandbox",
            ErrorKind::Conversion => "conversion",
            ErrorKind::MissingFunction => "missing_function",
            ErrorKind::WouldBlock => "would_block",
        }
    }
}

/// A resource budget a script can exhaust.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Limit {
    /// The step (tick) budget: function calls plus loop iterations.
    Steps,
    /// The wall-clock budget.
    Time,
    /// The call-stack depth.
    CallStack,
    /// The Starlark heap size (also what one value may grow to when it is encoded or printed).
    Heap,
    /// How deeply containers may nest in a value that is converted, encoded or printed.
    Nesting,
}

impl Limit {
    /// Returns the limit's name as used in messages and configuration, e.g. `"max_steps"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Limit::Steps => "max_steps",
            Limit::Time => "timeout",
            Limit::CallStack => "max_call_depth",
            Limit::Heap => "max_heap_bytes",
            Limit::Nesting => "max_nesting_depth",
        }
    }
}

/// A 1-based line and column in a script.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Location {
    /// Line, counting from 1.
    pub line: usize,
    /// Column, counting from 1.
    pub column: usize,
}

/// A failed parse, evaluation or call of a script.
///
/// Its `Display` names the script and, where known, the line and column:
/// `verify.star:3:12: fs.read: "../x" escapes the workspace root /w (paths must stay inside it)`.
/// The lines the script logged before it failed are kept apart ([`Error::logs`]), not in the
/// message.
#[derive(Debug, Clone)]
pub struct Error {
    kind: ErrorKind,
    script: String,
    location: Option<Location>,
    message: String,
    logs: Vec<String>,
}

impl Error {
    /// Creates an error of `kind` in `script`.
    pub fn new(kind: ErrorKind, script: impl Into<String>, message: impl Into<String>) -> Self {
        Error {
            kind,
            script: script.into(),
            location: None,
            message: message.into(),
            logs: Vec::new(),
        }
    }

    /// Attaches a source location.
    #[must_use]
    pub fn at(mut self, location: Option<Location>) -> Self {
        self.location = location;
        self
    }

    /// Attaches the lines the script passed to `log()` or `print()` before it failed.
    #[must_use]
    pub fn with_logs(mut self, logs: Vec<String>) -> Self {
        self.logs = logs;
        self
    }

    /// Returns what kind of failure this is.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// Returns the name of the script that failed (usually its file name).
    pub fn script(&self) -> &str {
        &self.script
    }

    /// Returns the line and column where the failure happened, when known.
    pub fn location(&self) -> Option<Location> {
        self.location
    }

    /// Returns the message without the script name and location prefix.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// Returns the lines the script passed to `log()` or `print()` before it failed, in order
    /// (empty when it logged nothing or failed before running).
    pub fn logs(&self) -> &[String] {
        &self.logs
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.location {
            Some(Location { line, column }) => {
                write!(f, "{}:{line}:{column}: {}", self.script, self.message)
            }
            None => write!(f, "{}: {}", self.script, self.message),
        }
    }
}

impl std::error::Error for Error {}

/// The 1-based position of a Starlark error, when it has one.
pub(crate) fn location(e: &starlark::Error) -> Option<Location> {
    e.span().map(|span| {
        let begin = span.resolve_span().begin;
        Location {
            line: begin.line + 1,
            column: begin.column + 1,
        }
    })
}

/// The error message without Starlark's source excerpt and traceback.
pub(crate) fn first_line(e: &starlark::Error) -> String {
    e.without_diagnostic().to_string().trim().to_owned()
}
