//! What a host can put between a sandbox's scripts and the outside world: an [`Interceptor`]
//! answers `http` and `exec` calls instead of the network and real programs, and watches each
//! evaluation. Production sandboxes have none; `harness test` (the `harness-policytest` crate)
//! uses one for its mocks and its statement coverage, and reaches its own state from its test
//! globals through [`interceptor`]. A script whose call is intercepted still passes every
//! capability check first: an interceptor can only narrow what a script reaches.

use std::any::Any;
use std::collections::BTreeMap;

use starlark::eval::Evaluator;
use starlark::syntax::AstModule;

/// A canned HTTP response, or a network failure (`error`: status 0, as a refused connection
/// reads).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpReply {
    /// A network failure instead of a response.
    pub error: Option<String>,
    /// Its kind, as `http.get` gives it (`timeout`, `connect`, `body`, `redirects`, `request`);
    /// `connect` when not said.
    pub error_kind: Option<String>,
    /// The status code.
    pub status: u16,
    /// The body text.
    pub body: String,
    /// Response headers (names lower-cased).
    pub headers: BTreeMap<String, String>,
}

/// A canned run of a program.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProgramReply {
    /// The exit code.
    pub exit_code: i32,
    /// Standard output.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
}

/// Stands between a sandbox's scripts and the outside world ([`Sandbox::with_interceptor`]).
/// What reaches the network or starts a program is each interceptor's explicit choice (no
/// default lets it through); watching evaluations is off unless asked for.
///
/// [`Sandbox::with_interceptor`]: crate::Sandbox::with_interceptor
pub trait Interceptor: Send + Sync + std::fmt::Debug {
    /// The answer to a request for `url` (as the script wrote it, and as parsed), after the
    /// capability checks passed: `None` lets it reach the network; `Some(Err(why))` is the
    /// script's error (no answer for this URL).
    fn http(&self, written: &str, parsed: &str) -> Option<Result<HttpReply, String>>;

    /// The run of `program`, after the capability checks passed: `None` starts the program;
    /// `Some(Err(why))` is the script's error.
    fn exec(&self, program: &str) -> Option<Result<ProgramReply, String>>;

    /// Returns true to have every evaluation profiled for statement coverage: then
    /// [`Interceptor::parsed`] sees each script and [`Interceptor::evaluated`] each evaluation.
    fn watches(&self) -> bool {
        false
    }

    /// A script named `name` was parsed, before its top level runs.
    fn parsed(&self, name: &str, ast: &AstModule) {
        let _ = (name, ast);
    }

    /// An evaluation ended (its coverage is in `eval` when [`Interceptor::watches`]).
    fn evaluated(&self, eval: &Evaluator<'_, '_, '_>) {
        let _ = eval;
    }

    /// The interceptor as [`Any`], so the host's own globals can find their state in it.
    fn as_any(&self) -> &dyn Any;
}
