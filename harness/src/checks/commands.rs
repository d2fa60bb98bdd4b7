//! Stage 2: deterministic checks (DESIGN §4.7) — the user's own commands (tests, lint, build),
//! judged by exit code, each leaving an evidence record. A required check that fails fails the
//! attempt; an advisory one is said, never held against it. A check that cannot start is a
//! broken policy (kind `check`), never a pass.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use tracing::Instrument;

use super::{Check, Subject};
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
}

impl CheckSpec {
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
    pub(crate) checks: Vec<CheckSpec>,
    /// The workspace root: the checks' working directory.
    pub(crate) root: PathBuf,
    /// The checks' private HOME, removed with the delegation.
    pub(crate) home: Arc<tempfile::TempDir>,
    /// Scrubs output before it is kept or quoted.
    pub(crate) redact: Redactor,
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
                    self.record(check, run?, subject);
                }
            }
            Ok(())
        })
    }
}

/// What running one check left.
struct Ran {
    at: String,
    run: harness_builtins::ProgramRun,
}

impl CommandChecks {
    /// Runs `check` in the workspace, scrubbed, in its own process group.
    async fn execute(&self, check: &CheckSpec) -> Result<Ran> {
        execute(check, &self.root, self.home.path()).await
    }

    /// Runs `group` at once, each on its own task; results in the group's order. Dropping the
    /// future (a cancel, a timeout) aborts the tasks, which kills their process groups.
    async fn execute_together(&self, group: &[CheckSpec]) -> Vec<Result<Ran>> {
        let mut tasks = tokio::task::JoinSet::new();
        for (index, check) in group.iter().enumerate() {
            let (check, root, home) = (check.clone(), self.root.clone(), Arc::clone(&self.home));
            let span = tracing::info_span!("check", check.name = check.name.as_str());
            tasks.spawn(
                async move { (index, execute(&check, &root, home.path()).await) }.instrument(span),
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

    /// Turns what `check` did into its evidence record, its event, and a finding unless it
    /// passed.
    fn record(&self, check: &CheckSpec, ran: Ran, subject: &mut Subject<'_>) {
        let Ran { at, run } = ran;
        let seconds = run.duration.as_secs_f64();
        let (result, proof) = match (run.timed_out, run.exit_code) {
            (true, _) => (
                "timeout",
                format!(
                    "killed after its timeout of {} s",
                    check.timeout.as_secs_f64()
                ),
            ),
            (false, Some(0)) => ("pass", format!("exit 0 in {seconds:.1} s")),
            (false, Some(code)) => ("fail", format!("exit {code} in {seconds:.1} s")),
            (false, None) => ("fail", format!("killed by a signal after {seconds:.1} s")),
        };
        let mut output = run.stdout;
        if !run.stderr.is_empty() {
            if !output.is_empty() && !output.ends_with('\n') {
                output.push('\n');
            }
            output.push_str(&run.stderr);
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
        subject.evidence.push(json!({
            "criterion": check.name,
            "source": source.as_str(),
            "method": check.method(),
            "target": null,
            "required": check.required,
            "result": result,
            "proof": proof,
            "exit_code": run.exit_code,
            "duration_ms": u64::try_from(run.duration.as_millis()).unwrap_or(u64::MAX),
            "output_tail": &output[tail_start..],
            "subject_sha256": null,
            "at": at,
        }));
        subject.emit(RunEvent::CheckCompleted {
            check_name: check.name.clone(),
            passed: result == "pass",
            exit_code: run.exit_code,
            duration_ms: u64::try_from(run.duration.as_millis()).unwrap_or(u64::MAX),
            required: check.required,
        });
        if result == "pass" {
            return;
        }
        let lines: Vec<&str> = output.lines().collect();
        let tail = lines[lines.len().saturating_sub(TAIL_LINES)..].join("\n");
        let mut message = format!("`{}` failed: {proof}", check.method());
        if !tail.trim().is_empty() {
            message.push_str(&format!(
                "; the last {} line(s) of its output:\n{tail}",
                lines.len().min(TAIL_LINES)
            ));
        }
        subject.findings.push(if check.required {
            Finding::blocking(source, &check.name, message)
        } else {
            Finding::advisory(source, &check.name, message)
        });
    }
}

/// Runs `check` with `root` as its working directory and `home` as its HOME.
async fn execute(check: &CheckSpec, root: &std::path::Path, home: &std::path::Path) -> Result<Ran> {
    let at = humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string();
    let launch = harness_builtins::Launch {
        cwd: root,
        env: &check.env,
        home: Some(home),
        hidden: Some(root),
        timeout: check.timeout,
        cap: MAX_OUTPUT,
        isolation: None,
        inherit_env: false,
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
