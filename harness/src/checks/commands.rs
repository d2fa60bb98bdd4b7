//! Stage 2: deterministic checks (DESIGN §4.7) — the user's own commands (tests, lint, build),
//! judged by exit code, each leaving an evidence record. A required check that fails fails the
//! attempt; an advisory one is said, never held against it. A check that cannot start is a
//! broken policy (kind `check`), never a pass. The `checks:` section is parsed here too
//! ([`CheckSpec::parse_list`]).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use harness_hooks::{Evidence, EvidenceResult};
use serde::Deserialize;
use serde_json::{Map, Value};
use tracing::Instrument;

use super::runner::{self, TestCounts};
use super::{Check, Subject};
use crate::config::{seconds, string_only};
use crate::delegate::BoxFuture;
use crate::error::{Error, ErrorKind, Result};
use crate::events::RunEvent;
use crate::redact::Redactor;
use crate::verdict::{Finding, Source};

/// Output kept of each stream, bytes.
const MAX_OUTPUT: usize = 256 * 1024;
/// The tail of the output kept in the evidence record, characters.
const TAIL_CHARS: usize = 4_000;
/// The tail of the output quoted in the finding (and so in the retry prompt), lines.
const TAIL_LINES: usize = 50;

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
    pub runner: super::RunnerSetting,
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
    /// [`ErrorKind::Config`] for a value other than `fail` or `advisory`.
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
/// [`ErrorKind::Config`] for a value out of range.
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
            runner: super::RunnerSetting::Auto,
            min_tests: None,
        }
    }

    /// Validates `checks:` entries as written in `file` into runnable specs, naming the entry
    /// and the key at fault.
    ///
    /// # Errors
    /// [`ErrorKind::Config`]: an empty or repeated name, neither or both of `run` and `argv`, a
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
                .map(|r| super::RunnerSetting::parse(&format!("{at} ({name})"), &r))
                .transpose()?
                .unwrap_or_default();
            if check.min_tests == Some(0) {
                return Err(Error::config(format!(
                    "{at} ({name}): `min_tests` must be at least 1 (leave it out for no minimum)"
                )));
            }
            if check.min_tests.is_some() && runner == super::RunnerSetting::None {
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
    fn method(&self) -> String {
        match self.argv.as_slice() {
            [sh, c, script] if sh == "sh" && c == "-c" => {
                format!("sh -c '{}'", script.replace('\'', "'\\''"))
            }
            argv => argv.join(" "),
        }
    }
}

/// The delegation's checks as a pipeline stage.
#[derive(Debug)]
pub(crate) struct CommandChecks {
    checks: Vec<CheckSpec>,
    /// Each check's test runner, when it runs a known one.
    runners: Vec<Option<runner::Found>>,
    /// Where and how they run.
    launcher: Arc<Launcher>,
    /// Scrubs output before it is kept or quoted.
    redact: Redactor,
    /// The tests the untouched workspace holds, by each check's runner (collected before
    /// attempt 0).
    base: Option<runner::Collection>,
}

impl CommandChecks {
    /// The stage running `checks` in `workspace`; `None` when there are none. `base` is the
    /// collection of the untouched workspace's tests, when one was started.
    ///
    /// # Errors
    /// [`ErrorKind::Check`] when the checks' private HOME cannot be made;
    /// [`ErrorKind::Config`] for `min_tests` on a check whose runner is not known.
    pub(crate) fn from_spec(
        checks: &[CheckSpec],
        workspace: &harness_builtins::Workspace,
        redact: &Redactor,
        isolation: Option<&harness_builtins::Isolation>,
        base: Option<runner::Collection>,
    ) -> Result<Option<Self>> {
        if checks.is_empty() {
            return Ok(None);
        }
        let runners = runners(checks, workspace.root())?;
        let reports = runners.iter().any(Option::is_some);
        Ok(Some(CommandChecks {
            checks: checks.to_vec(),
            runners,
            launcher: Arc::new(Launcher::new(
                workspace.root(),
                isolation,
                Vec::new(),
                reports,
            )?),
            redact: redact.clone(),
            base,
        }))
    }
}

/// Each check's runner; a config error for `min_tests` where no runner is known.
///
/// # Errors
/// [`ErrorKind::Config`] naming the check.
pub(crate) fn runners(
    checks: &[CheckSpec],
    root: &std::path::Path,
) -> Result<Vec<Option<runner::Found>>> {
    checks
        .iter()
        .map(|check| {
            let found = runner::find(check.runner, &check.argv, root);
            if check.min_tests.is_some() && found.is_none() {
                return Err(Error::config(format!(
                    "check {}: `min_tests` needs the runner's count, and `{}` runs no test runner harness recognises; name it with `runner:` (one of pytest, cargo, nextest, go, jest, vitest, node, mocha)",
                    check.name,
                    check.method()
                )));
            }
            Ok(found)
        })
        .collect()
}

impl Check for CommandChecks {
    fn name(&self) -> &'static str {
        "checks"
    }

    fn check<'a>(&'a self, subject: &'a mut Subject<'_>) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            let base = match &self.base {
                Some(collection) => Some(collection.wait().await),
                None => None,
            };
            let base_of = |name: &str| {
                base.as_ref()
                    .and_then(|b| b.iter().find(|(n, _)| n == name).map(|(_, t)| t.clone()))
            };
            let indexed: Vec<usize> = (0..self.checks.len()).collect();
            let mut rest = indexed.as_slice();
            while let Some(&first) = rest.first() {
                // A run of consecutive `parallel: true` checks runs at once; the rest one by one.
                let together = if self.checks[first].parallel {
                    rest.iter()
                        .take_while(|&&i| self.checks[i].parallel)
                        .count()
                } else {
                    1
                };
                let (group, after) = rest.split_at(together);
                rest = after;
                for &i in group {
                    subject.emit(RunEvent::CheckStarted {
                        check_name: self.checks[i].name.clone(),
                        required: self.checks[i].required,
                    });
                }
                let runs = if group.len() == 1 {
                    let i = group[0];
                    let span =
                        tracing::info_span!("check", check.name = self.checks[i].name.as_str());
                    vec![
                        self.launcher
                            .run(&self.checks[i], self.runners[i].as_ref())
                            .instrument(span)
                            .await,
                    ]
                } else {
                    self.execute_together(group).await
                };
                for (&i, run) in group.iter().zip(runs) {
                    let check = &self.checks[i];
                    let base = base_of(&check.name);
                    let runs = confirmed(
                        &self.launcher,
                        check,
                        self.runners[i].as_ref(),
                        base.as_ref().and_then(|b| b.as_ref().ok()),
                        run?,
                    )
                    .await?;
                    let recorded =
                        record(check, &self.runners[i], base.as_ref(), runs, &self.redact);
                    recorded.apply(subject, check);
                }
            }
            Ok(())
        })
    }
}

/// Builds the checks stage for [`STAGES`](crate::pipeline::STAGES).
///
/// # Errors
/// As [`CommandChecks::from_spec`].
pub(crate) fn stage(m: &mut crate::pipeline::Materials<'_>) -> Result<Option<Box<dyn Check>>> {
    Ok(CommandChecks::from_spec(
        m.delegation.checks(),
        m.workspace,
        m.delegation.redact(),
        m.isolation,
        m.collection.clone(),
    )?
    .map(|c| Box::new(c) as Box<dyn Check>))
}

impl CommandChecks {
    /// Runs the checks at `group` at once, each on its own task; results in the group's order.
    /// Dropping the future (a cancel, a timeout) aborts the tasks, which kills their process
    /// groups.
    async fn execute_together(&self, group: &[usize]) -> Vec<Result<Ran>> {
        let mut tasks = tokio::task::JoinSet::new();
        for (index, &i) in group.iter().enumerate() {
            let (check, found, launcher) = (
                self.checks[i].clone(),
                self.runners[i].clone(),
                Arc::clone(&self.launcher),
            );
            let span = tracing::info_span!("check", check.name = check.name.as_str());
            tasks.spawn(
                async move { (index, launcher.run(&check, found.as_ref()).await) }.instrument(span),
            );
        }
        let mut runs: Vec<Option<Result<Ran>>> = group.iter().map(|_| None).collect();
        while let Some(joined) = tasks.join_next().await {
            match joined {
                Ok((index, run)) => runs[index] = Some(run),
                Err(e) => {
                    return group
                        .iter()
                        .map(|&i| {
                            Err(Error::new(
                                ErrorKind::Check,
                                format!("check {}: its task failed: {e}", self.checks[i].name),
                            ))
                        })
                        .collect();
                }
            }
        }
        runs.into_iter()
            .map(|run| {
                run.unwrap_or_else(|| {
                    Err(Error::new(
                        ErrorKind::Check,
                        "a check did not report".to_owned(),
                    ))
                })
            })
            .collect()
    }
}

/// Where checks run and how: the working directory (the workspace), a private HOME, a private
/// directory for the runners' reports (outside the workspace, writable in the sandbox), the
/// sandbox, and variables every run gets (a holdout's `HARNESS_HOLDOUT`).
#[derive(Debug)]
pub(crate) struct Launcher {
    root: PathBuf,
    /// Not the HOME `run_command` children get: a delegate could plant configuration there
    /// (`.gitconfig`, `.cargo/config.toml`, `.npmrc`) that changes what its judges do.
    home: tempfile::TempDir,
    /// Where runners write their reports (made only when a check has a known runner).
    reports: Option<tempfile::TempDir>,
    isolation: Option<harness_builtins::Isolation>,
    env: Vec<(String, String)>,
    runs: std::sync::atomic::AtomicU64,
}

impl Launcher {
    /// A launcher running in `root`, confined by `isolation`, with `env` set for every run; with
    /// a reports directory (writable in the sandbox) when `reports`.
    ///
    /// # Errors
    /// [`ErrorKind::Check`] when the private directories cannot be made.
    pub(crate) fn new(
        root: &std::path::Path,
        isolation: Option<&harness_builtins::Isolation>,
        env: Vec<(String, String)>,
        reports: bool,
    ) -> Result<Self> {
        let private = |prefix: &str| {
            tempfile::Builder::new()
                .prefix(prefix)
                .tempdir()
                .map_err(|e| {
                    Error::new(
                        ErrorKind::Check,
                        format!("cannot make the checks' private directory: {e}"),
                    )
                })
        };
        let reports = if reports {
            Some(private("harness-check-reports-")?)
        } else {
            None
        };
        Ok(Launcher {
            root: root.to_path_buf(),
            home: private("harness-check-home-")?,
            isolation: isolation.map(|i| match &reports {
                Some(dir) => i.clone().writable(dir.path()),
                None => i.clone(),
            }),
            reports,
            env,
            runs: std::sync::atomic::AtomicU64::new(0),
        })
    }

    /// Runs `check` (asking `found`, its runner, for its report).
    ///
    /// # Errors
    /// [`ErrorKind::Check`] when it cannot start.
    pub(crate) async fn run(
        &self,
        check: &CheckSpec,
        found: Option<&runner::Found>,
    ) -> Result<Ran> {
        let n = self.runs.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let plan = match (found, &self.reports) {
            (Some(found), Some(dir)) => {
                Some(found.plan(dir.path(), &format!("run-{n}"), &check.env))
            }
            _ => None,
        };
        let argv = plan
            .as_ref()
            .map_or(check.argv.as_slice(), |p| p.argv.as_slice());
        let mut env = check.env.clone();
        env.extend(self.env.iter().cloned());
        if let Some(plan) = &plan {
            env.retain(|(k, _)| !plan.env.iter().any(|(p, _)| p == k));
            env.extend(plan.env.iter().cloned());
        }
        let run = execute(
            &check.name,
            argv,
            &env,
            check.timeout,
            &self.root,
            self.home.path(),
            self.isolation.as_ref(),
        )
        .await?;
        Ok(Ran {
            at: run.0,
            run: run.1,
            plan,
            verdict: None,
        })
    }

    /// Lists the tests of the workspace as it is with `found`'s list mode (the base), for
    /// `check`: what the runner listed, or why it could not.
    pub(crate) async fn list(
        &self,
        check: &CheckSpec,
        found: &runner::Found,
    ) -> std::result::Result<runner::BaseTests, String> {
        let Some((argv, list_env)) = found.list() else {
            return Err(format!(
                "{} has no list mode harness can ask for here",
                found.runner.as_str()
            ));
        };
        let mut env = check.env.clone();
        env.extend(self.env.iter().cloned());
        let mut list_env = list_env;
        // pytest names every test it collected through a plugin of harness's (whatever
        // verbosity the command or its configuration asks for).
        let collected = match (found.runner, &self.reports) {
            (runner::Runner::Pytest, Some(dir)) => {
                let plugin = dir.path().join("harness_collect.py");
                let listed = dir.path().join("collected.txt");
                std::fs::write(&plugin, runner::PYTEST_COLLECT_PLUGIN)
                    .map_err(|e| format!("cannot write the collection plugin: {e}"))?;
                let pythonpath = match env.iter().find(|(k, _)| k == "PYTHONPATH") {
                    Some((_, existing)) => format!("{}:{existing}", dir.path().display()),
                    None => dir.path().display().to_string(),
                };
                for (key, value) in &mut list_env {
                    if key == "PYTEST_ADDOPTS" {
                        value.push_str(" -p harness_collect");
                    }
                }
                list_env.push(("PYTHONPATH".to_owned(), pythonpath));
                list_env.push(("HARNESS_COLLECTED".to_owned(), listed.display().to_string()));
                Some(listed)
            }
            _ => None,
        };
        env.retain(|(k, _)| !list_env.iter().any(|(p, _)| p == k));
        env.extend(list_env);
        let started = std::time::Instant::now();
        let (_, run) = execute(
            &check.name,
            &argv,
            &env,
            check.timeout,
            &self.root,
            self.home.path(),
            self.isolation.as_ref(),
        )
        .await
        .map_err(|e| e.message().to_owned())?;
        if run.timed_out {
            return Err(format!(
                "listing the tests took longer than the check's timeout of {} s",
                check.timeout.as_secs_f64()
            ));
        }
        let duration_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        // A listing that failed (a test module that does not import yet) counts nothing it can
        // stand by: no base rather than a base of what happened to load.
        if found.runner == runner::Runner::Pytest && !matches!(run.exit_code, Some(0 | 5)) {
            return Err(format!(
                "pytest could not collect the tests (exit {}): the base is unknown",
                run.exit_code
                    .map_or_else(|| "by a signal".to_owned(), |c| c.to_string())
            ));
        }
        if let Some(names) =
            collected.and_then(|file| harness_builtins::read_regular(&file, 64 * 1024 * 1024).ok())
        {
            let names: Vec<String> = names.lines().map(str::to_owned).collect();
            return Ok(runner::BaseTests {
                count: names.len() as u64,
                names,
                unit: "tests".to_owned(),
                duration_ms,
            });
        }
        match runner::parse_list(found.runner, &run.stdout) {
            Some((count, names, unit)) => Ok(runner::BaseTests {
                count,
                names,
                unit: unit.to_owned(),
                duration_ms,
            }),
            None => Err(format!(
                "its list mode printed nothing harness could read (exit {})",
                run.exit_code
                    .map_or_else(|| "by a signal".to_owned(), |c| c.to_string())
            )),
        }
    }
}

/// What running one check left.
#[derive(Debug)]
pub(crate) struct Ran {
    at: String,
    run: harness_builtins::ProgramRun,
    /// How its runner's report was asked for.
    plan: Option<runner::Plan>,
    /// What its runner reported, judged (set once the run is judged).
    verdict: Option<runner::Verdict>,
}

impl Ran {
    /// Judges the run by its runner's report against `base` and `min_tests`.
    pub(crate) fn judged(
        mut self,
        base: Option<&runner::BaseTests>,
        min_tests: Option<u64>,
    ) -> Self {
        if let Some(plan) = &self.plan {
            self.verdict = Some(runner::judge(
                plan,
                &self.run.stdout,
                &self.run.stderr,
                self.run.exit_code,
                base,
                min_tests,
            ));
        }
        self
    }

    /// Whether it passed: exit 0, in time, and its runner (when known) reported every test it
    /// should have run passing.
    fn passed(&self) -> bool {
        !self.run.timed_out
            && self.run.exit_code == Some(0)
            && self.verdict.as_ref().is_none_or(|v| v.failure.is_none())
    }
}

/// Re-runs `check` when its first run failed and it asks for `confirm` re-runs, on the same
/// workspace state, until one passes: every run, the first one first, each judged.
async fn confirmed(
    launcher: &Launcher,
    check: &CheckSpec,
    found: Option<&runner::Found>,
    base: Option<&runner::BaseTests>,
    first: Ran,
) -> Result<Vec<Ran>> {
    let mut runs = vec![first.judged(base, check.min_tests)];
    let reruns = check.confirm.unwrap_or(0);
    for _ in 0..reruns {
        if runs.last().is_some_and(Ran::passed) {
            break;
        }
        let span = tracing::info_span!(
            "check",
            check.name = check.name.as_str(),
            check.rerun = true
        );
        let run = launcher.run(check, found).instrument(span).await?;
        runs.push(run.judged(base, check.min_tests));
    }
    Ok(runs)
}

/// What a check's runs come to: its evidence, its event, and its finding unless it passed.
pub(crate) struct Recorded {
    pub(crate) evidence: Evidence,
    pub(crate) passed: bool,
    pub(crate) flaky: bool,
    pub(crate) exit_code: Option<i32>,
    pub(crate) exit_codes: Vec<Option<i32>>,
    pub(crate) duration_ms: u64,
    /// The finding's message (the failure and the output's tail), when it did not pass.
    pub(crate) message: Option<String>,
    /// Whether that finding blocks.
    pub(crate) blocking: bool,
    /// The runner's counts, when it reported.
    pub(crate) counts: Option<TestCounts>,
    /// What the runner said, in a line: its counts, or why an exit 0 did not pass.
    pub(crate) runner_line: Option<String>,
}

impl Recorded {
    /// Adds the evidence, the `CheckCompleted` event and the finding to `subject`.
    fn apply(self, subject: &mut Subject<'_>, check: &CheckSpec) {
        let source = if check.criterion {
            Source::Criterion
        } else {
            Source::Check
        };
        subject.evidence.push(self.evidence);
        subject.emit(RunEvent::CheckCompleted {
            check_name: check.name.clone(),
            passed: self.passed,
            exit_code: self.exit_code,
            duration_ms: self.duration_ms,
            required: check.required,
            exit_codes: self.exit_codes,
            flaky: self.flaky,
            runner: self.runner_line,
        });
        if let Some(message) = self.message {
            subject.findings.push(if self.blocking {
                Finding::blocking(source, &check.name, message)
            } else {
                Finding::advisory(source, &check.name, message)
            });
        }
    }
}

/// Turns what `check` did into its evidence record and, unless it passed, its finding's
/// message. `runs` are its runs: one, or the first failing one and its re-runs (`confirm`);
/// `found` its runner and `listed` the tests the untouched workspace held.
pub(crate) fn record(
    check: &CheckSpec,
    found: &Option<runner::Found>,
    listed: Option<&std::result::Result<runner::BaseTests, String>>,
    mut runs: Vec<Ran>,
    redact: &Redactor,
) -> Recorded {
    let base = listed.and_then(|b| b.as_ref().ok());
    let exit_codes: Vec<Option<i32>> = if runs.len() > 1 {
        runs.iter().map(|r| r.run.exit_code).collect()
    } else {
        Vec::new()
    };
    let failures = runs.iter().filter(|r| !r.passed()).count();
    let total = runs.len();
    // The evidence shows the last run (the one that passed, for a flaky check), and the first
    // failure's output is what the delegate reads.
    let flaky = total > 1 && runs[total - 1].passed();
    let first_failure = (flaky && !runs.is_empty()).then(|| runs.remove(0));
    let Ran {
        at, run, verdict, ..
    } = runs.pop().expect("a check ran at least once");
    let report = verdict.as_ref().and_then(|v| v.report.as_ref());
    let counted = counted(found, report, base);
    let (result, proof) = outcome(check, &run, &verdict, counted.as_deref());
    let (result, proof) = if flaky {
        (
            EvidenceResult::Flaky,
            format!(
                "flaky: failed {failures} of {total} runs on the same workspace (exit codes {}), then {proof}",
                codes(&exit_codes)
            ),
        )
    } else if total > 1 {
        (
            result,
            format!(
                "{proof}; failed all {total} runs (confirm: {}, exit codes {})",
                total - 1,
                codes(&exit_codes)
            ),
        )
    } else {
        (result, proof)
    };
    // A flaky check's output worth reading is its failing run's.
    let shown = first_failure.as_ref().map_or(&run, |f| &f.run);
    let mut output = runner_output(found, &shown.stdout);
    if !shown.stderr.is_empty() {
        if !output.is_empty() && !output.ends_with('\n') {
            output.push('\n');
        }
        output.push_str(&shown.stderr);
    }
    redact.scrub_string(&mut output);
    let tail_start = output
        .char_indices()
        .rev()
        .nth(TAIL_CHARS.saturating_sub(1))
        .map_or(0, |(i, _)| i);
    let source = if check.criterion {
        Source::Criterion
    } else {
        Source::Check
    };
    let duration_ms = u64::try_from(run.duration.as_millis()).unwrap_or(u64::MAX);
    let mut evidence = Evidence {
        method: Some(check.method()),
        required: check.required,
        proof: Some(proof.clone()),
        exit_code: run.exit_code.map(i64::from),
        duration_ms: Some(duration_ms),
        output_tail: Some(output[tail_start..].to_owned()),
        at: Some(at),
        ..Evidence::new(check.name.clone(), source.as_str(), result)
    };
    if !exit_codes.is_empty() {
        evidence.extra.insert(
            "exit_codes".to_owned(),
            Value::Array(
                exit_codes
                    .iter()
                    .map(|c| c.map_or(Value::Null, Value::from))
                    .collect(),
            ),
        );
    }
    runner_evidence(&mut evidence, check, found, report, listed);
    let passed = result == EvidenceResult::Pass;
    let message = (!passed).then(|| failure_message(check, &proof, &output, flaky));
    let runner_line = runner_failure_of(&verdict).or_else(|| {
        counted
            .as_deref()
            .map(|c| c.trim_start_matches("; ").to_owned())
    });
    Recorded {
        runner_line,
        blocking: check.required && !(flaky && check.flaky == Some(Flaky::Advisory)),
        counts: report.map(|r| r.counts),
        evidence,
        passed,
        flaky,
        exit_code: run.exit_code,
        exit_codes,
        duration_ms,
        message,
    }
}

/// The runner's own count, said after the exit status: `; pytest: 14 passed, 0 failed, 0
/// skipped (base 14)`.
fn counted(
    found: &Option<runner::Found>,
    report: Option<&runner::Report>,
    base: Option<&runner::BaseTests>,
) -> Option<String> {
    let (found, report) = (found.as_ref()?, report?);
    Some(format!(
        "; {}: {}{}",
        found.runner.as_str(),
        report.counts,
        base.filter(|b| b.unit == "tests")
            .map(|b| format!(" (base {})", b.count))
            .unwrap_or_default()
    ))
}

/// How a run came out, and what shows it: its exit status (or timeout), why its runner says an
/// exit 0 is no pass, and the runner's count.
fn outcome(
    check: &CheckSpec,
    run: &harness_builtins::ProgramRun,
    verdict: &Option<runner::Verdict>,
    counted: Option<&str>,
) -> (EvidenceResult, String) {
    let seconds = run.duration.as_secs_f64();
    let (result, proof) = match (run.timed_out, run.exit_code, runner_failure_of(verdict)) {
        (true, _, _) => (
            EvidenceResult::Timeout,
            format!(
                "killed after its timeout of {} s",
                check.timeout.as_secs_f64()
            ),
        ),
        (false, Some(0), Some(why)) => (
            EvidenceResult::Fail,
            format!("exit 0 in {seconds:.1} s, but {why}"),
        ),
        (false, Some(0), None) => (EvidenceResult::Pass, format!("exit 0 in {seconds:.1} s")),
        (false, Some(code), _) => (
            EvidenceResult::Fail,
            format!("exit {code} in {seconds:.1} s"),
        ),
        (false, None, _) => (
            EvidenceResult::Fail,
            format!("killed by a signal after {seconds:.1} s"),
        ),
    };
    (result, format!("{proof}{}", counted.unwrap_or_default()))
}

/// The runner's keys of an evidence record: `runner`, `tests`, `report`, `base` — or `runner:
/// "unknown"` when `runner: auto` found none (judged by its exit code, and said so).
fn runner_evidence(
    evidence: &mut Evidence,
    check: &CheckSpec,
    found: &Option<runner::Found>,
    report: Option<&runner::Report>,
    listed: Option<&std::result::Result<runner::BaseTests, String>>,
) {
    let extra = &mut evidence.extra;
    let Some(found) = found else {
        if check.runner == runner::RunnerSetting::Auto {
            extra.insert("runner".to_owned(), Value::from("unknown"));
        }
        return;
    };
    extra.insert("runner".to_owned(), Value::from(found.runner.as_str()));
    if let Some(report) = report {
        extra.insert(
            "tests".to_owned(),
            serde_json::to_value(report.counts).unwrap_or_default(),
        );
        extra.insert("report".to_owned(), Value::from(report.source));
    }
    match listed {
        Some(Ok(base)) => {
            extra.insert(
                "base".to_owned(),
                serde_json::json!({"tests": base.count, "unit": base.unit, "duration_ms": base.duration_ms}),
            );
        }
        Some(Err(why)) => {
            extra.insert("base".to_owned(), serde_json::json!({"unavailable": why}));
        }
        None => {}
    }
}

/// The finding's message of a check that did not pass: its command, the proof, and the last
/// lines of its output.
fn failure_message(check: &CheckSpec, proof: &str, output: &str, flaky: bool) -> String {
    let lines: Vec<&str> = output.lines().collect();
    let tail = lines[lines.len().saturating_sub(TAIL_LINES)..].join("\n");
    let mut message = if flaky {
        format!(
            "`{}` is {proof}; a check that fails sometimes is not passing",
            check.method()
        )
    } else {
        format!("`{}` failed: {proof}", check.method())
    };
    if !tail.trim().is_empty() {
        message.push_str(&format!(
            "; the last {} line(s) of {}output:\n{tail}",
            lines.len().min(TAIL_LINES),
            if flaky { "the failing run's " } else { "its " }
        ));
    }
    message
}

/// Why the run's runner says an exit 0 did not pass, if it does.
fn runner_failure_of(verdict: &Option<runner::Verdict>) -> Option<String> {
    verdict.as_ref().and_then(|v| v.failure.clone())
}

/// A run's output as a person reads it: `go test -json`'s events turned back into the text
/// they carry.
fn runner_output(found: &Option<runner::Found>, stdout: &str) -> String {
    if !found
        .as_ref()
        .is_some_and(|f| f.runner == runner::Runner::Go)
    {
        return stdout.to_owned();
    }
    let mut text = String::new();
    for line in stdout.lines() {
        match serde_json::from_str::<Value>(line) {
            Ok(event) => {
                if let Some(output) = event.get("Output").and_then(Value::as_str) {
                    text.push_str(output);
                }
            }
            Err(_) => {
                text.push_str(line);
                text.push('\n');
            }
        }
    }
    text
}

/// Exit codes as a list: `[1, 0]` (`signal` for a run a signal ended).
fn codes(codes: &[Option<i32>]) -> String {
    let shown: Vec<String> = codes
        .iter()
        .map(|c| c.map_or_else(|| "signal".to_owned(), |c| c.to_string()))
        .collect();
    format!("[{}]", shown.join(", "))
}

/// Runs `argv` (check `name`'s) with `root` as its working directory and `home` as its HOME, in
/// `isolation` when given: when it started, and how it ran.
async fn execute(
    name: &str,
    argv: &[String],
    env: &[(String, String)],
    timeout: Duration,
    root: &std::path::Path,
    home: &std::path::Path,
    isolation: Option<&harness_builtins::Isolation>,
) -> Result<(String, harness_builtins::ProgramRun)> {
    let at = humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string();
    let launch = harness_builtins::Launch {
        cwd: root,
        env,
        home: Some(home),
        hidden: Some(root),
        timeout,
        cap: MAX_OUTPUT,
        isolation,
        inherit_env: false,
        stdin: None,
        stop_on: None,
    };
    let run = harness_builtins::run_program(argv, &launch)
        .await
        .map_err(|e| {
            Error::new(
                ErrorKind::Check,
                format!(
                    "check {name}: cannot start {:?}: {e} (a check that cannot run never passes)",
                    argv[0]
                ),
            )
        })?;
    Ok((at, run))
}
