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
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawCheck {
    #[serde(deserialize_with = "string_only")]
    name: String,
    #[serde(default)]
    run: Option<String>,
    #[serde(default)]
    argv: Option<Vec<String>>,
    #[serde(default)]
    required: Option<bool>,
    #[serde(default)]
    timeout_s: Option<f64>,
    #[serde(default)]
    env: Option<Map<String, Value>>,
    #[serde(default)]
    parallel: Option<bool>,
    #[serde(default)]
    confirm: Option<u64>,
    #[serde(default)]
    flaky: Option<String>,
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
        }
    }

    /// Validates `checks:` entries as written in `file` into runnable specs, naming the entry
    /// and the key at fault.
    ///
    /// # Errors
    /// [`ErrorKind::Config`]: an empty or repeated name, neither or both of `run` and `argv`, a
    /// bad timeout or environment variable.
    pub(crate) fn parse_list(file: &str, raw: Vec<RawCheck>) -> Result<Vec<CheckSpec>> {
        let mut specs: Vec<CheckSpec> = Vec::new();
        for (i, check) in raw.into_iter().enumerate() {
            let at = format!("{file}: `checks[{i}]`");
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
    /// The workspace root: the checks' working directory.
    root: PathBuf,
    /// The checks' private HOME, removed with the delegation.
    home: Arc<tempfile::TempDir>,
    /// Scrubs output before it is kept or quoted.
    redact: Redactor,
    /// The sandbox the checks run in; `None`: unconfined.
    isolation: Option<harness_builtins::Isolation>,
}

impl CommandChecks {
    /// The stage running `checks` in `workspace`; `None` when there are none.
    ///
    /// # Errors
    /// [`ErrorKind::Check`] when the checks' private HOME cannot be made.
    pub(crate) fn from_spec(
        checks: &[CheckSpec],
        workspace: &harness_builtins::Workspace,
        redact: &Redactor,
        isolation: Option<&harness_builtins::Isolation>,
    ) -> Result<Option<Self>> {
        if checks.is_empty() {
            return Ok(None);
        }
        // Not the HOME `run_command` children get: a delegate could plant configuration there
        // (`.gitconfig`, `.cargo/config.toml`, `.npmrc`) that changes what its judges do.
        let home = tempfile::Builder::new()
            .prefix("harness-check-home-")
            .tempdir()
            .map_err(|e| {
                Error::new(
                    ErrorKind::Check,
                    format!("cannot make the private HOME for checks: {e}"),
                )
            })?;
        Ok(Some(CommandChecks {
            checks: checks.to_vec(),
            root: workspace.root().to_path_buf(),
            home: Arc::new(home),
            redact: redact.clone(),
            isolation: isolation.cloned(),
        }))
    }
}

impl Check for CommandChecks {
    fn check<'a>(&'a self, subject: &'a mut Subject<'_>) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            let mut rest = self.checks.as_slice();
            while let Some(first) = rest.first() {
                // A run of consecutive `parallel: true` checks runs at once; the rest one by one.
                let together = if first.parallel {
                    rest.iter().take_while(|c| c.parallel).count()
                } else {
                    1
                };
                let (group, after) = rest.split_at(together);
                rest = after;
                for check in group {
                    subject.emit(RunEvent::CheckStarted {
                        check_name: check.name.clone(),
                        required: check.required,
                    });
                }
                let runs = if group.len() == 1 {
                    let span = tracing::info_span!("check", check.name = group[0].name.as_str());
                    vec![self.execute(&group[0]).instrument(span).await]
                } else {
                    self.execute_together(group).await
                };
                for (check, run) in group.iter().zip(runs) {
                    let runs = self.confirmed(check, run?).await?;
                    self.record(check, runs, subject);
                }
            }
            Ok(())
        })
    }
}

/// Builds the checks stage for [`STAGES`](crate::pipeline::STAGES).
///
/// # Errors
/// [`ErrorKind::Check`] when the checks' private HOME cannot be made.
pub(crate) fn stage(m: &mut crate::pipeline::Materials<'_>) -> Result<Option<Box<dyn Check>>> {
    Ok(CommandChecks::from_spec(
        m.delegation.checks(),
        m.workspace,
        m.delegation.redact(),
        m.isolation,
    )?
    .map(|c| Box::new(c) as Box<dyn Check>))
}

/// What running one check left.
struct Ran {
    at: String,
    run: harness_builtins::ProgramRun,
}

impl CommandChecks {
    /// Runs `check` in the workspace, scrubbed, in its own process group.
    async fn execute(&self, check: &CheckSpec) -> Result<Ran> {
        execute(check, &self.root, self.home.path(), self.isolation.as_ref()).await
    }

    /// Runs `group` at once, each on its own task; results in the group's order. Dropping the
    /// future (a cancel, a timeout) aborts the tasks, which kills their process groups.
    async fn execute_together(&self, group: &[CheckSpec]) -> Vec<Result<Ran>> {
        let mut tasks = tokio::task::JoinSet::new();
        for (index, check) in group.iter().enumerate() {
            let (check, root, home, isolation) = (
                check.clone(),
                self.root.clone(),
                Arc::clone(&self.home),
                self.isolation.clone(),
            );
            let span = tracing::info_span!("check", check.name = check.name.as_str());
            tasks.spawn(
                async move {
                    (
                        index,
                        execute(&check, &root, home.path(), isolation.as_ref()).await,
                    )
                }
                .instrument(span),
            );
        }
        let mut runs: Vec<Option<Result<Ran>>> = group.iter().map(|_| None).collect();
        while let Some(joined) = tasks.join_next().await {
            match joined {
                Ok((index, run)) => runs[index] = Some(run),
                Err(e) => {
                    return group
                        .iter()
                        .map(|c| {
                            Err(Error::new(
                                ErrorKind::Check,
                                format!("check {}: its task failed: {e}", c.name),
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

    /// Re-runs `check` when its first run failed and it asks for `confirm` re-runs, on the same
    /// workspace state, until one passes: every run, the first one first.
    async fn confirmed(&self, check: &CheckSpec, first: Ran) -> Result<Vec<Ran>> {
        let mut runs = vec![first];
        let reruns = check.confirm.unwrap_or(0);
        for _ in 0..reruns {
            if runs.last().is_some_and(|r| passed(&r.run)) {
                break;
            }
            let span = tracing::info_span!(
                "check",
                check.name = check.name.as_str(),
                check.rerun = true
            );
            runs.push(self.execute(check).instrument(span).await?);
        }
        Ok(runs)
    }

    /// Turns what `check` did into its evidence record, its event, and a finding unless it
    /// passed. `runs` are its runs: one, or the first failing one and its re-runs (`confirm`).
    fn record(&self, check: &CheckSpec, mut runs: Vec<Ran>, subject: &mut Subject<'_>) {
        let exit_codes: Vec<Option<i32>> = if runs.len() > 1 {
            runs.iter().map(|r| r.run.exit_code).collect()
        } else {
            Vec::new()
        };
        let failures = runs.iter().filter(|r| !passed(&r.run)).count();
        let total = runs.len();
        // The evidence shows the last run (the one that passed, for a flaky check), and the
        // first failure's output is what the delegate reads.
        let flaky = total > 1 && passed(&runs[total - 1].run);
        let first_failure = (flaky && !runs.is_empty()).then(|| runs.remove(0));
        let Ran { at, run } = runs.pop().expect("a check ran at least once");
        let seconds = run.duration.as_secs_f64();
        let (result, proof) = match (run.timed_out, run.exit_code) {
            (true, _) => (
                EvidenceResult::Timeout,
                format!(
                    "killed after its timeout of {} s",
                    check.timeout.as_secs_f64()
                ),
            ),
            (false, Some(0)) => (EvidenceResult::Pass, format!("exit 0 in {seconds:.1} s")),
            (false, Some(code)) => (
                EvidenceResult::Fail,
                format!("exit {code} in {seconds:.1} s"),
            ),
            (false, None) => (
                EvidenceResult::Fail,
                format!("killed by a signal after {seconds:.1} s"),
            ),
        };
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
        let mut output = shown.stdout.clone();
        if !shown.stderr.is_empty() {
            if !output.is_empty() && !output.ends_with('\n') {
                output.push('\n');
            }
            output.push_str(&shown.stderr);
        }
        self.redact.scrub_string(&mut output);
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
        subject.evidence.push(evidence);
        subject.emit(RunEvent::CheckCompleted {
            check_name: check.name.clone(),
            passed: result == EvidenceResult::Pass,
            exit_code: run.exit_code,
            duration_ms,
            required: check.required,
            exit_codes,
            flaky,
        });
        if result == EvidenceResult::Pass {
            return;
        }
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
        let blocking = check.required && !(flaky && check.flaky == Some(Flaky::Advisory));
        subject.findings.push(if blocking {
            Finding::blocking(source, &check.name, message)
        } else {
            Finding::advisory(source, &check.name, message)
        });
    }
}

/// Whether a run passed: exit 0, in time.
fn passed(run: &harness_builtins::ProgramRun) -> bool {
    !run.timed_out && run.exit_code == Some(0)
}

/// Exit codes as a list: `[1, 0]` (`signal` for a run a signal ended).
fn codes(codes: &[Option<i32>]) -> String {
    let shown: Vec<String> = codes
        .iter()
        .map(|c| c.map_or_else(|| "signal".to_owned(), |c| c.to_string()))
        .collect();
    format!("[{}]", shown.join(", "))
}

/// Runs `check` with `root` as its working directory and `home` as its HOME, in `isolation`
/// when given.
async fn execute(
    check: &CheckSpec,
    root: &std::path::Path,
    home: &std::path::Path,
    isolation: Option<&harness_builtins::Isolation>,
) -> Result<Ran> {
    let at = humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string();
    let launch = harness_builtins::Launch {
        cwd: root,
        env: &check.env,
        home: Some(home),
        hidden: Some(root),
        timeout: check.timeout,
        cap: MAX_OUTPUT,
        isolation,
        inherit_env: false,
        stdin: None,
        stop_on: None,
    };
    let run = harness_builtins::run_program(&check.argv, &launch)
        .await
        .map_err(|e| {
            Error::new(
                ErrorKind::Check,
                format!(
                    "check {}: cannot start {:?}: {e} (a check that cannot run never passes)",
                    check.name, check.argv[0]
                ),
            )
        })?;
    Ok(Ran { at, run })
}
