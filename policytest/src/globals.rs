//! The globals of `*_test.star` files: `verifier(path)` and `hook(path)`, which load real policy
//! files and return callables, and `assert_eq`, `assert_ne`, `assert_true`, `assert_contains`.
//!
//! A test file reaches the loaders through the runner its sandbox's [`TestFile`] interceptor
//! carries; `verifier(path)` and `hook(path)` return callables that hand their
//! payload and mocks to it.
//!
//! This module allows `unsafe_code` only for starlark's `#[derive(ProvidesStaticType)]`, which
//! expands to an `unsafe impl` of its type-id marker trait. No unsafe code is written by hand.

use std::sync::Arc;

use harness_builtins::{HttpReply, ProgramReply};

use allocative::Allocative;
use serde_json::{Map, Value as Json};
use starlark::environment::GlobalsBuilder;
use starlark::eval::{Arguments, Evaluator};
use starlark::starlark_module;
use starlark::starlark_simple_value;
use starlark::values::none::NoneType;
use starlark::values::{NoSerialize, ProvidesStaticType, StarlarkValue, Value, starlark_value};

use crate::FileRunner;

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

/// The interceptor of a test file's sandbox: it carries the file's runner (the loaders
/// `harness run` uses) to the test globals, and lets the file itself reach no network and run
/// no program (its sandbox grants neither; this refuses them again).
#[derive(Debug)]
pub(crate) struct TestFile {
    /// Loads and calls the policies the file's tests name.
    pub(crate) runner: Arc<FileRunner>,
}

impl harness_builtins::Interceptor for TestFile {
    fn http(&self, written: &str, _: &str) -> Option<Result<HttpReply, String>> {
        Some(Err(format!(
            "a test file reaches no network ({written}); mock it in the policy's call: http = {{...}}"
        )))
    }

    fn exec(&self, program: &str) -> Option<Result<ProgramReply, String>> {
        Some(Err(format!(
            "a test file runs no program ({program}); mock it in the policy's call: exec = {{...}}"
        )))
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

/// The globals of `*_test.star` files, on top of the standard builtins.
pub fn register(builder: &mut GlobalsBuilder) {
    test_globals(builder);
}

/// A policy a test loaded: calling it runs the real file through the test file's runner.
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

/// The policy runner of the test file `eval` runs.
fn runner<'e>(eval: &Evaluator<'_, '_, 'e>) -> anyhow::Result<&'e FileRunner> {
    harness_builtins::interceptor(eval)
        .and_then(|i| i.as_any().downcast_ref::<TestFile>())
        .map(|file| &*file.runner)
        .ok_or_else(|| {
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
        let out = runner(eval)?
            .call(self.kind, &self.path, &self.options, positional, kwargs)
            .map_err(|message| anyhow::anyhow!("{self}: {message}"))?;
        Ok(eval.heap().alloc(&out))
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
    runner(eval)?
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
    ) -> starlark::Result<NoneType> {
        held(actual.equals(expected)?, msg, || {
            format!("assert_eq: {} != {}", actual.to_repr(), expected.to_repr())
        })
    }

    /// Fails the test when `actual == unexpected`.
    fn assert_ne<'v>(
        #[starlark(require = pos)] actual: Value<'v>,
        #[starlark(require = pos)] unexpected: Value<'v>,
        #[starlark(require = named)] msg: Option<&str>,
    ) -> starlark::Result<NoneType> {
        held(!actual.equals(unexpected)?, msg, || {
            format!("assert_ne: both are {}", actual.to_repr())
        })
    }

    /// Fails the test unless `condition` is true.
    fn assert_true<'v>(
        #[starlark(require = pos)] condition: Value<'v>,
        #[starlark(require = named)] msg: Option<&str>,
    ) -> starlark::Result<NoneType> {
        held(condition.to_bool(), msg, || {
            format!("assert_true: {} is not true", condition.to_repr())
        })
    }

    /// Fails the test unless `needle` is in `haystack` (a substring of a string, an item of a
    /// list, a key of a dict).
    fn assert_contains<'v>(
        #[starlark(require = pos)] haystack: Value<'v>,
        #[starlark(require = pos)] needle: Value<'v>,
        #[starlark(require = named)] msg: Option<&str>,
    ) -> starlark::Result<NoneType> {
        held(haystack.is_in(needle)?, msg, || {
            format!(
                "assert_contains: {} not in {}",
                needle.to_repr(),
                haystack.to_repr()
            )
        })
    }
}

/// `None` when an assertion `holds`; else the test's failure, saying what did not hold (after
/// the test's own `msg`).
fn held(
    holds: bool,
    msg: Option<&str>,
    what: impl FnOnce() -> String,
) -> starlark::Result<NoneType> {
    if holds {
        Ok(NoneType)
    } else {
        Err(failed(with_note(what(), msg)))
    }
}
