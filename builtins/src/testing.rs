//! What `harness test` needs from the engine: the globals of `*_test.star` files (`verifier`,
//! `hook`, `assert_*`), mocks for `http` and `exec`, statement coverage, and running one test
//! function with its outcome told apart: passed, failed (an assertion or `fail()`), or broken.
//!
//! The engine does not know how a verifier or a hook is loaded and judged — the runtime does. A
//! test file reaches the real loaders through a [`PolicyRunner`] the host puts in the sandbox
//! ([`Sandbox::with_policy_runner`]); `verifier(path)` and `hook(path)` return callables that
//! hand their payload and mocks to it.
//!
//! This module allows `unsafe_code` only for starlark's `#[derive(ProvidesStaticType)]`, which
//! expands to an `unsafe impl` of its type-id marker trait. No unsafe code is written by hand.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};

use allocative::Allocative;
use serde_json::{Map, Value as Json};
use starlark::environment::GlobalsBuilder;
use starlark::eval::{Arguments, Evaluator};
use starlark::starlark_module;
use starlark::starlark_simple_value;
use starlark::syntax::AstModule;
use starlark::values::{NoSerialize, ProvidesStaticType, StarlarkValue, Value, starlark_value};

use crate::engine::{Sandbox, Script, alloc_json, location};
use crate::error::{Error, Location};
use crate::host::Host;

/// Which kind of policy file a test loads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Allocative)]
pub enum PolicyKind {
    /// A verifier script (`run(result)` or `run(call, result)`), or a delegation file's inline
    /// `verify`.
    Verifier,
    /// A hook file (`handle(event, payload)`).
    Hook,
}

impl PolicyKind {
    /// The helper's name in test files: `"verifier"` or `"hook"`.
    pub fn as_str(self) -> &'static str {
        match self {
            PolicyKind::Verifier => "verifier",
            PolicyKind::Hook => "hook",
        }
    }
}

/// Loads and calls real policy files for a test file. The host implements it with the same
/// loaders `harness run` uses.
pub trait PolicyRunner: Send + Sync + std::fmt::Debug {
    /// Checks that the policy at `path` (as the test wrote it) loads; `options` are the helper's
    /// keyword arguments (`allow_hosts`, …). Called by `verifier(path)` and `hook(path)`, so a
    /// missing or broken file fails the test at that line.
    ///
    /// # Errors
    /// Why the policy cannot be loaded, naming its file and line.
    fn open(&self, kind: PolicyKind, path: &str, options: &Map<String, Json>)
    -> Result<(), String>;

    /// Runs the policy on `args` (the positional arguments of the call, as JSON) with `kwargs`
    /// (its mocks: `files`, `http`, `exec`, `args`, `evidence`, …) and returns what the test sees.
    ///
    /// # Errors
    /// Why the call could not give a verdict: the policy broke, a mock is malformed or not
    /// allowed, an unmocked URL or program was reached.
    fn call(
        &self,
        kind: PolicyKind,
        path: &str,
        options: &Map<String, Json>,
        args: Vec<Json>,
        kwargs: Map<String, Json>,
    ) -> Result<Json, String>;
}

/// A canned HTTP response (`http={url: {status, body, headers}}`), or a network failure
/// (`{error: "connection refused"}`: status 0, as a refused connection reads).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MockResponse {
    /// A network failure instead of a response.
    pub error: Option<String>,
    /// The status code (default 200).
    pub status: u16,
    /// The body text.
    pub body: String,
    /// Response headers (names lower-cased).
    pub headers: BTreeMap<String, String>,
}

/// A canned program run (`exec={program: {exit_code, stdout, stderr}}`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MockRun {
    /// The exit code (default 0).
    pub exit_code: i32,
    /// Standard output.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
}

/// What `http` and `exec` answer in a policy test instead of reaching the network or starting a
/// program. A sandbox with mocks never does either: a URL or program without a mock is an error.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Mocks {
    /// Responses by exact URL.
    pub http: BTreeMap<String, MockResponse>,
    /// Runs by program (`argv[0]`).
    pub exec: BTreeMap<String, MockRun>,
}

impl Mocks {
    /// Reads the `http=` and `exec=` arguments of a policy call (either may be `null`).
    ///
    /// # Errors
    /// What is malformed, naming the URL or program and the key.
    pub fn from_json(http: Option<&Json>, exec: Option<&Json>) -> Result<Mocks, String> {
        let mut mocks = Mocks::default();
        for (url, spec) in entries("http", http)? {
            let spec = fields(
                &format!("http mock {url:?}"),
                spec,
                &["status", "body", "headers", "error"],
            )?;
            let error = match spec.get("error") {
                None | Some(Json::Null) => None,
                Some(Json::String(e)) if spec.keys().all(|k| k == "error") => Some(e.clone()),
                Some(Json::String(_)) => {
                    return Err(format!(
                        "http mock {url:?}: `error` is a network failure; it has no status, body or headers"
                    ));
                }
                Some(other) => {
                    return Err(format!(
                        "http mock {url:?}: `error` must be a string, got {other}"
                    ));
                }
            };
            let status = match spec.get("status") {
                None | Some(Json::Null) => 200,
                Some(v) => v
                    .as_u64()
                    .and_then(|n| u16::try_from(n).ok())
                    .filter(|n| (100..=599).contains(n))
                    .ok_or_else(|| {
                        format!("http mock {url:?}: `status` must be an HTTP status code (100-599), got {v}")
                    })?,
            };
            let body = text_field(&format!("http mock {url:?}"), spec, "body")?;
            let mut headers = BTreeMap::new();
            match spec.get("headers") {
                None | Some(Json::Null) => {}
                Some(Json::Object(map)) => {
                    for (name, value) in map {
                        let Json::String(value) = value else {
                            return Err(format!(
                                "http mock {url:?}: header {name:?} must be a string"
                            ));
                        };
                        headers.insert(name.to_ascii_lowercase(), value.clone());
                    }
                }
                Some(_) => {
                    return Err(format!(
                        "http mock {url:?}: `headers` must be a dict of strings"
                    ));
                }
            }
            mocks.http.insert(
                url.clone(),
                MockResponse {
                    error,
                    status,
                    body,
                    headers,
                },
            );
        }
        for (program, spec) in entries("exec", exec)? {
            let what = format!("exec mock {program:?}");
            let spec = fields(&what, spec, &["exit_code", "stdout", "stderr"])?;
            let exit_code = match spec.get("exit_code") {
                None | Some(Json::Null) => 0,
                Some(v) => v
                    .as_i64()
                    .and_then(|n| i32::try_from(n).ok())
                    .ok_or_else(|| format!("{what}: `exit_code` must be an int, got {v}"))?,
            };
            mocks.exec.insert(
                program.clone(),
                MockRun {
                    exit_code,
                    stdout: text_field(&what, spec, "stdout")?,
                    stderr: text_field(&what, spec, "stderr")?,
                },
            );
        }
        Ok(mocks)
    }
}

impl Mocks {
    /// The response mocked for `url` (as the script wrote it, or as parsed: `http://h` and
    /// `http://h/` are one URL).
    pub(crate) fn response(&self, written: &str, parsed: &str) -> Result<&MockResponse, String> {
        self.http
            .get(written)
            .or_else(|| self.http.get(parsed))
            .ok_or_else(|| {
                let known: Vec<&str> = self.http.keys().map(String::as_str).collect();
                format!(
                    "no mock for {written} in this test; add it to `http = {{...}}` (mocked: {})",
                    if known.is_empty() {
                        "none".to_owned()
                    } else {
                        known.join(", ")
                    }
                )
            })
    }

    /// The run mocked for `program`.
    pub(crate) fn run(&self, program: &str) -> Result<&MockRun, String> {
        self.exec.get(program).ok_or_else(|| {
            let known: Vec<&str> = self.exec.keys().map(String::as_str).collect();
            format!(
                "no mock for program {program:?} in this test; add it to `exec = {{...}}` (mocked: {})",
                if known.is_empty() { "none".to_owned() } else { known.join(", ") }
            )
        })
    }
}

fn entries<'a>(name: &str, value: Option<&'a Json>) -> Result<Vec<(&'a String, &'a Json)>, String> {
    match value {
        None | Some(Json::Null) => Ok(Vec::new()),
        Some(Json::Object(map)) => Ok(map.iter().collect()),
        Some(other) => Err(format!(
            "`{name}=` must be a dict keyed by {}, got {other}",
            if name == "http" { "URL" } else { "program" }
        )),
    }
}

fn fields<'a>(what: &str, spec: &'a Json, known: &[&str]) -> Result<&'a Map<String, Json>, String> {
    let Json::Object(map) = spec else {
        return Err(format!("{what} must be a dict with {}", known.join(", ")));
    };
    if let Some(key) = map.keys().find(|k| !known.contains(&k.as_str())) {
        return Err(format!(
            "{what}: unknown key {key:?} (known: {})",
            known.join(", ")
        ));
    }
    Ok(map)
}

fn text_field(what: &str, spec: &Map<String, Json>, key: &str) -> Result<String, String> {
    match spec.get(key) {
        None | Some(Json::Null) => Ok(String::new()),
        Some(Json::String(s)) => Ok(s.clone()),
        Some(other) => Err(format!("{what}: `{key}` must be a string, got {other}")),
    }
}

/// Which statements of which scripts ran, across every evaluation of every sandbox that shares
/// it ([`Sandbox::with_coverage`]). Lines are 1-based and counted in the script's own source.
#[derive(Debug, Default)]
pub struct Coverage {
    scripts: Mutex<HashMap<String, ScriptCoverage>>,
}

/// The statement lines of one script: those that can run and those that did. A line counts as
/// covered when a statement beginning on it ran.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ScriptCoverage {
    /// Lines on which a statement begins (comments, blank lines, `pass` and docstrings are not
    /// statements that run).
    pub statements: BTreeSet<usize>,
    /// The statement lines that ran.
    pub covered: BTreeSet<usize>,
}

impl Coverage {
    /// An empty collector.
    pub fn new() -> Self {
        Coverage::default()
    }

    /// Returns what is known about each script, by script name.
    pub fn scripts(&self) -> HashMap<String, ScriptCoverage> {
        self.lock().clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, ScriptCoverage>> {
        self.scripts
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Records the statements of a script about to be evaluated.
    pub(crate) fn register(&self, name: &str, ast: &AstModule) {
        let mut lines = BTreeSet::new();
        statement_lines(ast, ast.statement(), &mut lines);
        self.lock()
            .entry(name.to_owned())
            .or_default()
            .statements
            .extend(lines);
    }

    /// Records the statements an evaluation ran (`eval` had coverage enabled).
    pub(crate) fn collect(&self, eval: &Evaluator) {
        let Ok(spans) = eval.coverage() else { return };
        let mut scripts = self.lock();
        for span in spans {
            if let Some(script) = scripts.get_mut(&span.file) {
                let line = span.span.begin.line + 1;
                if script.statements.contains(&line) {
                    script.covered.insert(line);
                }
            }
        }
    }
}

/// Collects the 1-based first lines of the statements that run: not `pass`, not a bare string
/// (a docstring), not a block of statements itself.
fn statement_lines(
    ast: &AstModule,
    stmt: &starlark::syntax::ast::AstStmt,
    lines: &mut BTreeSet<usize>,
) {
    use starlark::syntax::ast::{AstLiteral, Expr, Stmt};
    let skipped = match &stmt.node {
        Stmt::Statements(_) | Stmt::Pass => true,
        Stmt::Expression(expr) => matches!(&expr.node, Expr::Literal(AstLiteral::String(_))),
        _ => false,
    };
    if !skipped {
        lines.insert(ast.file_span(stmt.span).resolve_span().begin.line + 1);
    }
    stmt.visit_stmt(|child| statement_lines(ast, child, lines));
}

/// The globals of `*_test.star` files, on top of the standard builtins.
pub fn register(builder: &mut GlobalsBuilder) {
    test_globals(builder);
}

/// A policy a test loaded: calling it runs the real file through the host's [`PolicyRunner`].
#[derive(Debug, ProvidesStaticType, NoSerialize, Allocative)]
struct PolicyHandle {
    kind: PolicyKind,
    path: String,
    #[allocative(skip)]
    options: Map<String, Json>,
}

starlark_simple_value!(PolicyHandle);

impl std::fmt::Display for PolicyHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}({:?})", self.kind.as_str(), self.path)
    }
}

fn runner<'a>(host: &'a Host<'_>) -> anyhow::Result<&'a Arc<dyn PolicyRunner>> {
    host.sandbox.runner.as_ref().ok_or_else(|| {
        anyhow::anyhow!("verifier() and hook() only work in test files run by `harness test`")
    })
}

fn to_json(what: &str, value: Value) -> anyhow::Result<Json> {
    value
        .to_json_value()
        .map_err(|e| anyhow::anyhow!("{what}: a {} has no JSON form: {e}", value.get_type()))
}

#[starlark_value(type = "policy")]
impl<'v> StarlarkValue<'v> for PolicyHandle {
    fn invoke(
        &self,
        _me: Value<'v>,
        args: &Arguments<'v, '_>,
        eval: &mut Evaluator<'v, '_, '_>,
    ) -> starlark::Result<Value<'v>> {
        let heap = eval.heap();
        let positional: Vec<Json> = args
            .positions(heap)?
            .enumerate()
            .map(|(i, v)| to_json(&format!("argument {}", i + 1), v))
            .collect::<anyhow::Result<_>>()?;
        let mut kwargs = Map::new();
        for (name, value) in args.names_map()? {
            let name = name.as_str().to_owned();
            let json = to_json(&format!("`{name}=`"), value)?;
            kwargs.insert(name, json);
        }
        let host = Host::of(eval)?;
        let out = runner(host)?
            .call(self.kind, &self.path, &self.options, positional, kwargs)
            .map_err(|message| anyhow::anyhow!("{self}: {message}"))?;
        Ok(alloc_json(eval.heap(), &out))
    }
}

/// An assertion that did not hold: the test failed (rather than broke).
fn failed(message: String) -> starlark::Error {
    starlark::Error::new_kind(starlark::ErrorKind::Fail(anyhow::anyhow!(message)))
}

fn with_note(message: String, msg: Option<&str>) -> String {
    match msg {
        Some(note) if !note.is_empty() => format!("{note}: {message}"),
        _ => message,
    }
}

fn open_policy<'v>(
    kind: PolicyKind,
    path: &str,
    options: Map<String, Json>,
    eval: &mut Evaluator<'v, '_, '_>,
) -> anyhow::Result<PolicyHandle> {
    let host = Host::of(eval)?;
    runner(host)?
        .open(kind, path, &options)
        .map_err(|message| anyhow::anyhow!("{}({path:?}): {message}", kind.as_str()))?;
    Ok(PolicyHandle {
        kind,
        path: path.to_owned(),
        options,
    })
}

fn helper_options<'v>(
    allow_hosts: Option<Value<'v>>,
    allow_exec: Option<Value<'v>>,
    allow_env: Option<Value<'v>>,
) -> anyhow::Result<Map<String, Json>> {
    let mut options = Map::new();
    for (key, value) in [
        ("allow_hosts", allow_hosts),
        ("allow_exec", allow_exec),
        ("allow_env", allow_env),
    ] {
        if let Some(value) = value {
            let json = to_json(&format!("`{key}=`"), value)?;
            let ok = json
                .as_array()
                .is_some_and(|items| items.iter().all(Json::is_string));
            if !ok {
                anyhow::bail!("`{key}=` must be a list of strings");
            }
            options.insert(key.to_owned(), json);
        }
    }
    Ok(options)
}

#[starlark_module]
fn test_globals(builder: &mut GlobalsBuilder) {
    /// Loads a verifier — a `.star` file defining `run(result)` (or `run(call, result)` for a
    /// per-tool verifier), or a delegation file with an inline `verify` — with the loader
    /// `harness run` uses, and returns a callable: `v(result, files = {...}, http = {...},
    /// exec = {...}, args = {...}, evidence = [...])` returns `{"verified", "reason",
    /// "evidence", "logs"}`. The path is relative to the test file. `allow_hosts`,
    /// `allow_exec` and `allow_env` grant what the delegation file (or `--allow-*`) would.
    fn verifier<'v>(
        #[starlark(require = pos)] path: &str,
        #[starlark(require = named)] allow_hosts: Option<Value<'v>>,
        #[starlark(require = named)] allow_exec: Option<Value<'v>>,
        #[starlark(require = named)] allow_env: Option<Value<'v>>,
        eval: &mut Evaluator<'v, '_, '_>,
    ) -> anyhow::Result<PolicyHandle> {
        let options = helper_options(allow_hosts, allow_exec, allow_env)?;
        open_policy(PolicyKind::Verifier, path, options, eval)
    }

    /// Loads a hook file with the loader `harness run` uses and returns a callable:
    /// `h(payload, files = {...}, http = {...}, exec = {...}, delegate = "openai")` returns
    /// `{"action": "allow"|"block"|"modify"|"skip", "reason", "payload"}` (`skip` when its
    /// `tools`, `delegates` or `when` leave the event alone). The path is relative to the test
    /// file.
    fn hook<'v>(
        #[starlark(require = pos)] path: &str,
        #[starlark(require = named)] allow_hosts: Option<Value<'v>>,
        #[starlark(require = named)] allow_exec: Option<Value<'v>>,
        #[starlark(require = named)] allow_env: Option<Value<'v>>,
        eval: &mut Evaluator<'v, '_, '_>,
    ) -> anyhow::Result<PolicyHandle> {
        let options = helper_options(allow_hosts, allow_exec, allow_env)?;
        open_policy(PolicyKind::Hook, path, options, eval)
    }

    /// Fails the test unless `actual == expected`.
    fn assert_eq<'v>(
        #[starlark(require = pos)] actual: Value<'v>,
        #[starlark(require = pos)] expected: Value<'v>,
        #[starlark(require = named)] msg: Option<&str>,
    ) -> starlark::Result<starlark::values::none::NoneType> {
        if actual.equals(expected)? {
            return Ok(starlark::values::none::NoneType);
        }
        Err(failed(with_note(
            format!("assert_eq: {} != {}", actual.to_repr(), expected.to_repr()),
            msg,
        )))
    }

    /// Fails the test when `actual == unexpected`.
    fn assert_ne<'v>(
        #[starlark(require = pos)] actual: Value<'v>,
        #[starlark(require = pos)] unexpected: Value<'v>,
        #[starlark(require = named)] msg: Option<&str>,
    ) -> starlark::Result<starlark::values::none::NoneType> {
        if !actual.equals(unexpected)? {
            return Ok(starlark::values::none::NoneType);
        }
        Err(failed(with_note(
            format!("assert_ne: both are {}", actual.to_repr()),
            msg,
        )))
    }

    /// Fails the test unless `condition` is true.
    fn assert_true<'v>(
        #[starlark(require = pos)] condition: Value<'v>,
        #[starlark(require = named)] msg: Option<&str>,
    ) -> starlark::Result<starlark::values::none::NoneType> {
        if condition.to_bool() {
            return Ok(starlark::values::none::NoneType);
        }
        Err(failed(with_note(
            format!("assert_true: {} is not true", condition.to_repr()),
            msg,
        )))
    }

    /// Fails the test unless `needle` is in `haystack` (a substring of a string, an item of a
    /// list, a key of a dict).
    fn assert_contains<'v>(
        #[starlark(require = pos)] haystack: Value<'v>,
        #[starlark(require = pos)] needle: Value<'v>,
        #[starlark(require = named)] msg: Option<&str>,
    ) -> starlark::Result<starlark::values::none::NoneType> {
        if haystack.is_in(needle)? {
            return Ok(starlark::values::none::NoneType);
        }
        Err(failed(with_note(
            format!(
                "assert_contains: {} not in {}",
                needle.to_repr(),
                haystack.to_repr()
            ),
            msg,
        )))
    }
}

/// How one test function ended.
#[derive(Debug, Clone)]
pub enum TestOutcome {
    /// It returned (anything but `False`).
    Passed,
    /// An assertion did not hold, `fail(...)` was called, or it returned `False`.
    Failed {
        /// What did not hold.
        message: String,
        /// Where in the test file.
        location: Option<Location>,
    },
    /// Something broke: the test or the policy under test raised an error, hit a limit, reached
    /// an unmocked URL, or a helper could not load its file.
    Broken(Error),
}

impl Script {
    /// Runs the test function `function` (no arguments) and tells how it ended; the lines it
    /// logged come back with it.
    pub fn run_test(&self, sandbox: &Sandbox, function: &str) -> (TestOutcome, Vec<String>) {
        let host = Host::new(sandbox);
        let outcome = match self.invoke_raw(&host, function) {
            Ok(Json::Bool(false)) => TestOutcome::Failed {
                message: format!("{function} returned False"),
                location: None,
            },
            Ok(_) => TestOutcome::Passed,
            Err(Raw::Failed(message, location)) => TestOutcome::Failed { message, location },
            Err(Raw::Broken(e)) => TestOutcome::Broken(e),
        };
        (outcome, host.logs.into_inner())
    }
}

/// How a raw call of a test function ended, before it is told apart.
pub(crate) enum Raw {
    Failed(String, Option<Location>),
    Broken(Error),
}

/// Tells an assertion failure (`fail()` and the `assert_*` globals raise
/// `starlark::ErrorKind::Fail`) from everything else, which `classify` names.
pub(crate) fn triage(e: starlark::Error, classify: impl FnOnce(starlark::Error) -> Error) -> Raw {
    if let starlark::ErrorKind::Fail(message) = e.kind() {
        let message = message.to_string().trim().to_owned();
        return Raw::Failed(message, location(&e));
    }
    Raw::Broken(classify(e))
}

impl From<Error> for Raw {
    fn from(e: Error) -> Self {
        Raw::Broken(e)
    }
}
