//! `checks:` entries (DESIGN §4.7): the user's own commands, as written and as run.

use std::time::Duration;

use serde::Deserialize;
use serde_json::{Map, Value};

use super::runner::RunnerSetting;
use crate::config::{seconds, string_only};
use crate::error::{Error, Result};

/// One configured check: a delegation file's `checks:` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckSpec {
    /// The name findings and evidence carry.
    pub name: String,
    /// The program and its arguments (`run:` becomes `sh -c RUN`).
    pub argv: Vec<String>,
    /// False for an advisory check.
    pub required: bool,
    /// Killed, with its process group, after this long.
    pub timeout: Duration,
    /// Variables set besides the scrubbed environment.
    pub env: Vec<(String, String)>,
    /// True for a command criterion (`criteria: [{command: …, name: …}]`): its findings and
    /// evidence say `criterion`, not `check`.
    pub criterion: bool,
    /// Runs at the same time as the `parallel` checks next to it (`parallel: true`).
    pub parallel: bool,
    /// Re-runs of a failing check on the same workspace state (`confirm: N`, 0 to 5); `None`
    /// when the entry does not say (the project default, else 0).
    pub confirm: Option<u8>,
    /// What a check that failed and then passed on a re-run counts as; `None` when the entry
    /// does not say (the project default, else `fail`).
    pub flaky: Option<Flaky>,
    /// The test runner whose own report judges it (`runner: auto`, the default, recognises
    /// pytest, `cargo test`, nextest, `go test`, jest, vitest, `node --test` and mocha).
    pub runner: RunnerSetting,
    /// Fewer passing tests than this fail it (`min_tests: N`).
    pub min_tests: Option<u64>,
}

/// What a flaky check — failed, then passed when re-run (`confirm`) — counts as.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Flaky {
    /// A failure whose message says "flaky: failed 1 of 2 runs" (the default: a test that
    /// fails sometimes is not passing).
    #[default]
    Fail,
    /// An advisory finding: said, never held against the attempt.
    Advisory,
}

/// Re-runs `confirm` may ask for, at most.
pub const MAX_CONFIRM: u8 = 5;

impl Flaky {
    /// Reads `flaky:` as written at `at`.
    ///
    /// # Errors
    /// [`ErrorKind::Config`](crate::ErrorKind::Config) for a value other than `fail` or `advisory`.
    pub(crate) fn parse(at: &str, value: &str) -> Result<Self> {
        match value {
            "fail" => Ok(Flaky::Fail),
            "advisory" => Ok(Flaky::Advisory),
            other => Err(Error::config(format!(
                "{at}: `flaky` is {other:?}; use `fail` (the default: a check that fails and then passes counts as failing) or `advisory` (said, not held against the attempt)"
            ))),
        }
    }
}

/// Reads `confirm:` as written at `at`: 0 to [`MAX_CONFIRM`].
///
/// # Errors
/// [`ErrorKind::Config`](crate::ErrorKind::Config) for a value out of range.
pub(crate) fn confirm(at: &str, value: u64) -> Result<u8> {
    u8::try_from(value)
        .ok()
        .filter(|n| *n <= MAX_CONFIRM)
        .ok_or_else(|| {
            Error::config(format!(
                "{at}: `confirm` is {value}; give 0 (a failing check is not re-run, the default) to {MAX_CONFIRM} re-runs of a failing check"
            ))
        })
}

/// One `checks:` entry as written.
///
/// A command judged by its exit code on every attempt, before the verifier.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "check")]
#[schemars(extend("oneOf" = [
    {"required": ["run"], "properties": {"run": {"type": "string"}, "argv": {"type": "null"}}},
    {"required": ["argv"], "properties": {"argv": {"type": "array"}, "run": {"type": "null"}}},
]))]
pub(crate) struct RawCheck {
    /// The check's name, unique among checks and command criteria; it labels findings and
    /// evidence.
    #[serde(deserialize_with = "string_only")]
    #[schemars(regex(pattern = r"\S"))]
    name: String,
    /// A shell command, run as `sh -c RUN` in the workspace (give `run` or `argv`).
    #[serde(default)]
    #[schemars(regex(pattern = r"\S"))]
    run: Option<String>,
    /// A program found on PATH (never in the workspace) and its arguments (give `run` or
    /// `argv`).
    #[serde(default)]
    #[schemars(length(min = 1))]
    #[schemars(extend("prefixItems" = [{"type": "string", "pattern": "\\S"}]))]
    argv: Option<Vec<String>>,
    /// False makes the check advisory: a failure is reported, never held against the attempt
    /// (default true).
    #[serde(default)]
    required: Option<bool>,
    /// Seconds before the check and its process group are killed, more than 0, at most 86400
    /// (default 300).
    #[serde(default)]
    #[schemars(extend("exclusiveMinimum" = 0, "maximum" = 86400))]
    timeout_s: Option<f64>,
    /// Variables added to the check's scrubbed environment (PATH, LANG, TERM, a private HOME).
    #[serde(default)]
    #[schemars(with = "Option<std::collections::BTreeMap<String, String>>")]
    #[schemars(extend("propertyNames" = {"pattern": "^[A-Za-z_][A-Za-z0-9_]*$"}))]
    env: Option<Map<String, Value>>,
    /// Runs together with the `parallel` checks next to it in the list (default false).
    #[serde(default)]
    parallel: Option<bool>,
    /// Re-runs of a failing check on the same workspace, 0 to 5 (default: the file's
    /// `confirm`, else 0).
    #[serde(default)]
    #[schemars(range(min = 0, max = 5))]
    confirm: Option<u64>,
    /// What a check that fails and then passes on a re-run counts as (default: the file's
    /// `flaky`, else fail).
    #[serde(default)]
    #[schemars(extend("enum" = ["fail", "advisory", null]))]
    flaky: Option<String>,
    /// The test runner whose own report judges the check: `auto` (the default: pytest, cargo
    /// test, cargo nextest, go test, jest, vitest, node --test and mocha are recognised in the
    /// command), `none` (exit code alone) or a runner's name.
    #[serde(default)]
    #[schemars(schema_with = "super::runner::setting_schema")]
    runner: Option<String>,
    /// Fewer passing tests than this (by the runner's report) fail the check.
    #[serde(default)]
    #[schemars(range(min = 1))]
    min_tests: Option<u64>,
}

impl CheckSpec {
    /// A shell command run as a check named `name` (`run:`, and command criteria).
    pub(crate) fn shell(name: &str, command: &str, timeout: Duration, criterion: bool) -> Self {
        CheckSpec {
            name: name.to_owned(),
            argv: vec!["sh".to_owned(), "-c".to_owned(), command.to_owned()],
            required: true,
            timeout,
            env: Vec::new(),
            criterion,
            parallel: false,
            confirm: None,
            flaky: None,
            runner: RunnerSetting::Auto,
            min_tests: None,
        }
    }

    /// Validates `checks:` entries as written in `file` into runnable specs, naming the entry
    /// and the key at fault.
    ///
    /// # Errors
    /// [`ErrorKind::Config`](crate::ErrorKind::Config): an empty or repeated name, neither or both of `run` and `argv`, a
    /// bad timeout or environment variable.
    pub(crate) fn parse_list(file: &str, raw: Vec<RawCheck>) -> Result<Vec<CheckSpec>> {
        Self::parse_entries(file, "checks", raw)
    }

    /// [`CheckSpec::parse_list`] for the entries of `key` (`checks`, `holdout`).
    ///
    /// # Errors
    /// As [`CheckSpec::parse_list`].
    pub(crate) fn parse_entries(
        file: &str,
        key: &str,
        raw: Vec<RawCheck>,
    ) -> Result<Vec<CheckSpec>> {
        let mut specs: Vec<CheckSpec> = Vec::new();
        for (i, check) in raw.into_iter().enumerate() {
            let at = format!("{file}: `{key}[{i}]`");
            let name = check.name.trim().to_owned();
            if name.is_empty() {
                return Err(Error::config(format!(
                    "{at}: `name` is empty; name the check (it labels findings and evidence)"
                )));
            }
            if specs.iter().any(|s| s.name == name) {
                return Err(Error::config(format!(
                    "{at}: a check named {name:?} is already defined; names must be unique"
                )));
            }
            let argv = match (check.run, check.argv) {
                (Some(run), None) if !run.trim().is_empty() => {
                    vec!["sh".to_owned(), "-c".to_owned(), run]
                }
                (None, Some(argv)) if argv.first().is_some_and(|p| !p.trim().is_empty()) => argv,
                (Some(_), Some(_)) => {
                    return Err(Error::config(format!(
                        "{at} ({name}): give `run` (a shell command) or `argv` (a program and its arguments), not both"
                    )));
                }
                _ => {
                    return Err(Error::config(format!(
                        "{at} ({name}): give `run` (a shell command) or `argv` (a non-empty list: program, arguments)"
                    )));
                }
            };
            let timeout = seconds(&at, "timeout_s", check.timeout_s, 300.0)?;
            let mut env = Vec::new();
            for (key, value) in check.env.unwrap_or_default() {
                let valid = !key.is_empty()
                    && !key.starts_with(|c: char| c.is_ascii_digit())
                    && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
                let Value::String(value) = value else {
                    return Err(Error::config(format!(
                        "{at} ({name}): `env.{key}` must be a string"
                    )));
                };
                if !valid {
                    return Err(Error::config(format!(
                        "{at} ({name}): `env` name {key:?} is not a valid variable name"
                    )));
                }
                env.push((key, value));
            }
            let flaky = check
                .flaky
                .map(|f| Flaky::parse(&format!("{at} ({name})"), &f))
                .transpose()?;
            let runner = check
                .runner
                .map(|r| RunnerSetting::parse(&format!("{at} ({name})"), &r))
                .transpose()?
                .unwrap_or_default();
            if check.min_tests == Some(0) {
                return Err(Error::config(format!(
                    "{at} ({name}): `min_tests` must be at least 1 (leave it out for no minimum)"
                )));
            }
            if check.min_tests.is_some() && runner == RunnerSetting::None {
                return Err(Error::config(format!(
                    "{at} ({name}): `min_tests` needs the runner's report; it cannot be used with `runner: none`"
                )));
            }
            specs.push(CheckSpec {
                name,
                argv,
                required: check.required.unwrap_or(true),
                timeout,
                env,
                criterion: false,
                parallel: check.parallel.unwrap_or(false),
                confirm: check.confirm.map(|n| confirm(&at, n)).transpose()?,
                flaky,
                runner,
                min_tests: check.min_tests,
            });
        }
        Ok(specs)
    }

    /// How it runs, for evidence: `sh -c 'cargo test'` or the argv joined.
    pub(crate) fn method(&self) -> String {
        match self.argv.as_slice() {
            [sh, c, script] if sh == "sh" && c == "-c" => {
                format!("sh -c '{}'", script.replace('\'', "'\\''"))
            }
            argv => argv.join(" "),
        }
    }
}
