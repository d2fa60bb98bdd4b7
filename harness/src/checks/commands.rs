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
    fn check<'a>(&'a self, subject: &'a mut Subject) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            for check in &self.checks {
                let span = tracing::info_span!("check", check.name = check.name.as_str());
                self.run_one(check, subject).instrument(span).await?;
            }
            Ok(())
        })
    }
}

impl CommandChecks {
    async fn run_one(&self, check: &CheckSpec, subject: &mut Subject) -> Result<()> {
        let at = humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string();
        let launch = harness_builtins::Launch {
            cwd: &self.root,
            env: &check.env,
            home: Some(self.home.path()),
            hidden: Some(&self.root),
            timeout: check.timeout,
            cap: MAX_OUTPUT,
            isolation: None,
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
        if result == "pass" {
            return Ok(());
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
        Ok(())
    }
}
