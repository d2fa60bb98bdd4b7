//! How checks run (DESIGN §4.7): where (the workspace, a private HOME, a private directory for
//! the runners' reports, the sandbox), each run's output and exit, its re-runs (`confirm`), and
//! what its runs come to — the evidence record, the event and the finding. The checks stage, the
//! holdouts and the base collection all run through it.

use std::path::PathBuf;
use std::time::Duration;

use harness_hooks::{Evidence, EvidenceResult};
use serde_json::Value;
use tracing::Instrument;

use super::Subject;
use super::runner::{self, TestCounts};
use crate::error::{Error, ErrorKind, Result};
use crate::events::RunEvent;
use crate::gates::checks::{CheckSpec, Flaky};
use crate::gates::runner::{Runner, RunnerSetting};
use crate::redact::Redactor;
use crate::verdict::{Finding, Source};

/// Output kept of each stream, bytes.
const MAX_OUTPUT: usize = 256 * 1024;
/// The tail of the output kept in the evidence record, characters.
const TAIL_CHARS: usize = 4_000;
/// The tail of the output quoted in the finding (and so in the retry prompt), lines.
const TAIL_LINES: usize = 50;
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
            (Runner::Pytest, Some(dir)) => {
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
        if found.runner == Runner::Pytest && !matches!(run.exit_code, Some(0 | 5)) {
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
pub(crate) async fn confirmed(
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
    /// CPU time of all its runs, when the kernel said it for each.
    pub(crate) cpu_ms: Option<u64>,
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
    pub(crate) fn apply(self, subject: &mut Subject<'_>, check: &CheckSpec) {
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
            cpu_ms: self.cpu_ms,
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
    let cpu_ms = runs
        .iter()
        .map(|r| r.run.cpu)
        .sum::<Option<Duration>>()
        .map(|cpu| u64::try_from(cpu.as_millis()).unwrap_or(u64::MAX));
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
        cpu_ms,
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
        if check.runner == RunnerSetting::Auto {
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
    if !found.as_ref().is_some_and(|f| f.runner == Runner::Go) {
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
