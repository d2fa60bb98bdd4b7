//! `harness run`: one delegation, with progress on stderr.

use std::io::Write as _;

use harness::{Assembler, Delegation, Error, EventRecord, Outcome, Report, RunEvent, Runtime};

use crate::args::RunArgs;
use crate::exit;
use crate::settings;
use harness_telemetry as telemetry;

/// Runs the command and returns its exit code.
pub async fn run(args: RunArgs) -> u8 {
    let json_output = args.json;
    let prepared = prepare(&args).and_then(|(delegation, runtime)| {
        let events = EventStream::open(args.events.as_deref(), json_output)?;
        Ok((delegation, runtime, events))
    });
    let (delegation, runtime, events) = match prepared {
        Ok(prepared) => prepared,
        Err(e) => {
            if json_output {
                println!(
                    "{}",
                    serde_json::json!({"id": null, "outcome": "error", "verified": false, "attempts": 0,
                        "reasons": [], "result": null, "usage": null, "trace_id": null,
                        "error": {"kind": e.kind().as_str(), "message": e.message()}})
                );
            } else {
                eprintln!("error[{}]: {}", e.kind().as_str(), e.message());
            }
            return exit::for_error(e.kind());
        }
    };
    let observer = |event: &EventRecord| {
        if event.event.is_recorded() {
            events.write(event);
        }
        if !json_output {
            print_event(&delegation, event);
        }
    };
    if !json_output && delegation.offers_delegate() {
        let redact = delegation.redact().clone();
        runtime.observe_children(std::sync::Arc::new(move |child| {
            print_child(child, &redact)
        }));
    }
    // A tree's runs start and end together: one writer records the children's starts and
    // records, gathered, rather than a connection and a commit each.
    let writer = delegation
        .offers_delegate()
        .then(|| delegation.journal())
        .flatten()
        .and_then(|journal| harness_records::JournalWriter::start(journal).ok());
    let report = runtime
        .run_until(&delegation, &observer, settings::shutdown_signal())
        .await;
    if let Some(writer) = writer {
        let written = tokio::task::spawn_blocking(move || writer.finish()).await;
        for failure in written.map(|w| w.failures).unwrap_or_default() {
            eprintln!("warning: a child run was not recorded: {failure}");
        }
    }
    if let Some(e) = events.finish() {
        eprintln!("warning: {e}");
    }
    let journal = record_in_journal(&args, &delegation, &report).await;
    let code = match report.outcome {
        Outcome::Passed | Outcome::PassedWithDebt | Outcome::Skipped => exit::OK,
        Outcome::Failed(_) => exit::NOT_VERIFIED,
        Outcome::Error(kind) => exit::for_error(kind),
    };
    let (journal, unrecorded) = match journal {
        Ok(path) => (path, None),
        Err(e) => (None, Some(e)),
    };
    if json_output {
        let mut object = report.to_json();
        object["journal"] = serde_json::json!(journal.map(|p| p.display().to_string()));
        if let Some(e) = &unrecorded {
            object["journal_error"] =
                serde_json::json!({"kind": e.kind().as_str(), "message": e.message()});
        }
        println!("{object}");
    } else {
        // With `--events -` stdout carries JSON lines only: the answer stays on stderr.
        let stdout_is_events = args.events.as_deref() == Some(std::path::Path::new("-"));
        print_summary(&report, !stdout_is_events);
        if let Some(path) = journal {
            eprintln!(
                "recorded in {} (harness runs show {})",
                path.display(),
                report.id
            );
        }
        if let Some(e) = &unrecorded {
            eprintln!("error[{}]: {}", e.kind().as_str(), e.message());
        }
    }
    // A run that is not on record is not a clean run, whatever its outcome.
    match unrecorded {
        Some(e) if code == exit::OK => exit::Failed::exit_code(&e),
        _ => code,
    }
}

/// Where `--events` writes: JSON lines, flushed one by one so a reader sees them as they
/// happen. A write that fails stops the stream (the journal keeps every event) and is reported
/// once at the end.
struct EventStream {
    out: std::sync::Mutex<Option<(String, Box<dyn std::io::Write + Send>)>>,
    failed: std::sync::Mutex<Option<String>>,
}

impl EventStream {
    /// Opens `path` (created or truncated; `-` is stdout, which `--json` needs for itself).
    fn open(path: Option<&std::path::Path>, json: bool) -> Result<Self, Error> {
        let out: Option<(String, Box<dyn std::io::Write + Send>)> = match path {
            None => None,
            Some(p) if p.as_os_str() == "-" => {
                if json {
                    return Err(Error::config(
                        "--events - writes events to stdout, where --json writes the report; give --events a file",
                    ));
                }
                Some(("stdout".to_owned(), Box::new(std::io::stdout())))
            }
            Some(p) => {
                let file = std::fs::File::create(p).map_err(|e| {
                    Error::config(format!("--events {}: cannot create it: {e}", p.display()))
                })?;
                Some((
                    p.display().to_string(),
                    Box::new(std::io::LineWriter::new(file)),
                ))
            }
        };
        Ok(EventStream {
            out: std::sync::Mutex::new(out),
            failed: std::sync::Mutex::new(None),
        })
    }

    fn write(&self, record: &harness::events::EventRecord) {
        let mut out = self
            .out
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let Some((name, writer)) = out.as_mut() else {
            return;
        };
        let line = serde_json::to_string(record).unwrap_or_default();
        if let Err(e) = writeln!(writer, "{line}").and_then(|()| writer.flush()) {
            *self
                .failed
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(format!(
                "--events {name}: writing failed ({e}); later events are only in the journal"
            ));
            *out = None;
        }
    }

    /// Says why the stream stopped early, if it did.
    fn finish(self) -> Option<String> {
        self.failed
            .into_inner()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

fn prepare(args: &RunArgs) -> Result<(Delegation, Runtime), Error> {
    let journal = (!args.no_journal)
        .then(|| harness_records::locate(args.journal.as_deref()).ok())
        .flatten();
    let mut overrides = settings::overrides(
        &args.sandbox,
        &args.hooks,
        args.max_verify_retries,
        journal.as_ref().map(|located| located.path.as_path()),
    );
    overrides.keep_workspaces = args.keep_workspaces;
    let delegation = Assembler::new(overrides).file(&args.file)?;
    Ok((delegation, crate::settings::runtime()?))
}

/// Prints one step of a child run on stderr, nested under the call that started it (two spaces
/// a level) and named by its id, since children that run at once interleave.
fn print_child(child: &harness::ChildEvent<'_>, redact: &harness::Redactor) {
    let record = child.record;
    let id = &record.run_id;
    let attempt = record.attempt + 1;
    let line = match &record.event {
        RunEvent::DelegationStarted { delegate, .. } => format!(
            "child {id} ({delegate}, of {}): {}",
            child.parent_id,
            one_line(&redact.scrub(child.task), 80)
        ),
        RunEvent::AttemptStarted => format!("{id} attempt {attempt}/{}", child.max_attempts),
        RunEvent::CheckCompleted { .. } => {
            format!("{id} {}", check_line(&record.event).trim_start())
        }
        RunEvent::VerificationCompleted { outcome, .. } if outcome == "pass" => {
            format!("{id} attempt {attempt}: verified")
        }
        RunEvent::VerificationCompleted { reasoning, .. } => format!(
            "{id} attempt {attempt}: NOT VERIFIED: {}",
            one_line(reasoning.lines().next().unwrap_or_default(), 120)
        ),
        RunEvent::DelegationCompleted { outcome, kind } => format!(
            "{id} {outcome}{}",
            kind.as_deref()
                .map(|k| format!(" ({k})"))
                .unwrap_or_default()
        ),
        _ => return,
    };
    let indent = "  ".repeat(usize::try_from(child.depth).unwrap_or(1));
    eprintln!("{indent}└ {line}");
}

/// Prints one step of the run on stderr, secrets scrubbed as in the final report.
fn print_event(delegation: &Delegation, record: &EventRecord) {
    let total = delegation.max_attempts();
    let redact = delegation.redact();
    match &record.event {
        RunEvent::AttemptStarted => {
            eprintln!(
                "attempt {}/{total}: delegating to {}",
                record.attempt + 1,
                delegation.delegate().kind()
            );
        }
        RunEvent::ToolFinished {
            call, child, error, ..
        } => {
            eprintln!(
                "{}",
                tool_line(call, child.as_ref(), error.as_deref(), redact)
            );
        }
        RunEvent::Responded {
            response,
            redacted_later: false,
        } => eprintln!("  response: {}", one_line(&redact.scrub(response), 160)),
        // delegation.post hooks may redact it: never echo it before they have run.
        RunEvent::Responded { response, .. } => eprintln!(
            "  response: ({} characters, shown after the delegation.post hooks)",
            response.chars().count()
        ),
        RunEvent::CriticCompleted {
            outcome,
            reviewer,
            findings,
            blocking,
        } => {
            let noted = findings - blocking;
            eprintln!(
                "  critic {reviewer}: {outcome}{}",
                if noted > 0 {
                    format!(" ({noted} non-blocking finding(s), kept as debt)")
                } else {
                    String::new()
                }
            );
        }
        // The reasons are scrubbed already.
        RunEvent::VerificationCompleted { outcome, .. } if outcome == "pass" => {
            eprintln!("  verified");
        }
        RunEvent::VerificationCompleted { reasoning, .. } => {
            eprintln!("  NOT VERIFIED:");
            for reason in reasoning.lines() {
                eprintln!("    {reason}");
            }
        }
        RunEvent::CheckCompleted { .. } => eprintln!("{}", check_line(&record.event)),
        RunEvent::GateTampered { paths } => {
            eprintln!("  GATE TAMPERED: the delegate changed what judges it:");
            for path in paths {
                eprintln!("    {path}");
            }
        }
        RunEvent::GamingDetected { hits, blocking } => {
            let label = if *blocking {
                "GAMING"
            } else {
                "gaming [advisory]"
            };
            eprintln!("  {label}: the code games the tests:");
            for hit in hits {
                eprintln!("    {} {}:{}: {}", hit.rule, hit.path, hit.line, hit.code);
            }
        }
        RunEvent::HoldoutCompleted {
            check_name,
            passed,
            counts,
            duration_ms,
            cpu_ms,
        } => {
            let how = if *passed { "passed" } else { "FAILED" };
            let counts = counts
                .as_deref()
                .map(|c| format!(" ({c})"))
                .unwrap_or_default();
            eprintln!(
                "  holdout {check_name}: {how}{counts} in {:.1} s{}",
                *duration_ms as f64 / 1000.0,
                cpu(*cpu_ms)
            );
        }
        RunEvent::ClaimsChecked {
            claims,
            unsupported,
        } if *unsupported > 0 => {
            eprintln!("  claims: {unsupported} of {claims} not supported by the tool log");
        }
        RunEvent::RetryContextAssembled { .. } => eprintln!(
            "  retrying: sending the verification reasons back to the same delegate ({} of {} retries)",
            record.attempt + 1,
            total - 1
        ),
        _ => {}
    }
}

/// A tool call's line: a `delegate` call's child and how it ended, else the call and its status
/// (why it failed or was refused: a hook's reason, a path outside the workspace), scrubbed.
fn tool_line(
    call: &harness::ToolCall,
    child: Option<&serde_json::Value>,
    error: Option<&str>,
    redact: &harness::Redactor,
) -> String {
    if let Some(child) = child {
        let task = call.arguments.get("task").and_then(|t| t.as_str());
        let profile = call.arguments.get("profile").and_then(|p| p.as_str());
        let attempts = child["attempts"].as_u64().unwrap_or(0);
        return format!(
            "  delegate{} {:?} -> child {} {} after {attempts} attempt{}",
            profile.map(|p| format!(" [{p}]")).unwrap_or_default(),
            one_line(&redact.scrub(task.unwrap_or_default()), 80),
            child["id"].as_str().unwrap_or("?"),
            child["outcome"].as_str().unwrap_or("?"),
            if attempts == 1 { "" } else { "s" }
        );
    }
    let status = match error {
        None => "ok".to_owned(),
        Some(error) => format!("error: {}", one_line(&redact.scrub(error), 200)),
    };
    let arguments = serde_json::Value::Object(call.arguments.clone()).to_string();
    format!(
        "  tool {} {} -> {status}",
        call.name,
        redact.scrub(&arguments)
    )
}

/// A check's line: how it ended (a flaky or repeated run's exit codes), how long it took (and
/// its CPU time, where the kernel said it), whether it was advisory, and what its runner reported.
fn check_line(event: &RunEvent) -> String {
    let RunEvent::CheckCompleted {
        check_name,
        passed,
        exit_code,
        duration_ms,
        required,
        exit_codes,
        flaky,
        runner,
        cpu_ms,
    } = event
    else {
        return String::new();
    };
    let runs = exit_codes
        .iter()
        .map(|c| c.map_or_else(|| "signal".to_owned(), |c| c.to_string()))
        .collect::<Vec<_>>()
        .join(", ");
    let how = match (passed, exit_code) {
        _ if *flaky => format!("FLAKY (exit codes {runs})"),
        (true, _) => "passed".to_owned(),
        (false, _) if exit_codes.len() > 1 => {
            format!("failed {} runs (exit codes {runs})", exit_codes.len())
        }
        (false, Some(code)) => format!("failed (exit {code})"),
        (false, None) => "failed".to_owned(),
    };
    let advisory = if *required { "" } else { " [advisory]" };
    let said = runner
        .as_deref()
        .map(|r| format!(" — {r}"))
        .unwrap_or_default();
    format!(
        "  check {check_name}: {how} in {:.1} s{}{advisory}{said}",
        *duration_ms as f64 / 1000.0,
        cpu(*cpu_ms)
    )
}

/// A check's or holdout's CPU time as its progress line says it: ` (CPU 1.2 s)`, or nothing
/// where the kernel did not say.
fn cpu(cpu_ms: Option<u64>) -> String {
    cpu_ms
        .map(|ms| format!(" (CPU {:.1} s)", ms as f64 / 1000.0))
        .unwrap_or_default()
}

/// The outcome line, warnings and trace on stderr; the passed answer on stdout when `answer`.
fn print_summary(report: &Report, answer: bool) {
    let attempts = report.attempts.len();
    let plural = if attempts == 1 { "" } else { "s" };
    match report.outcome {
        Outcome::Passed => eprintln!("passed: verified on attempt {attempts} ({})", report.id),
        Outcome::PassedWithDebt
            if report
                .debt
                .iter()
                .any(|f| f.source == harness::Source::Gaming) =>
        {
            eprintln!(
                "passed_with_debt: every check passed but the code may game the tests (gaming: advisory); a human should review it (harness review) ({})",
                report.id
            )
        }
        Outcome::PassedWithDebt => eprintln!(
            "passed_with_debt: every check passed but the critic still objects after {attempts} attempt{plural}; a human should review it (harness review) ({})",
            report.id
        ),
        Outcome::Skipped => eprintln!(
            "skipped: nothing configured to verify; the result was not checked ({})",
            report.id
        ),
        // The kind in brackets, as an error's: a script reading stderr tells a refuted answer
        // from a scope violation or a tampered gate without `--json`.
        Outcome::Failed(kind) => eprintln!(
            "failed[{}]: not verified after {attempts} attempt{plural} ({})",
            kind.as_str(),
            report.id
        ),
        Outcome::Error(kind) => eprintln!(
            "error[{}]: {} ({})",
            kind.as_str(),
            report.error.as_ref().map_or("", Error::message),
            report.id
        ),
    }
    for debt in &report.debt {
        eprintln!("debt: {}", redact_line(debt));
    }
    if matches!(report.outcome, Outcome::Passed | Outcome::PassedWithDebt) {
        for warning in &report.warnings {
            eprintln!("warning: {warning}");
        }
    }
    if let Some(id) = &report.trace_id {
        match telemetry::trace_url(id) {
            Some(url) => eprintln!("trace: {id} {url}"),
            None => eprintln!("trace: {id}"),
        }
    }
    if let Some(result) = report.result().filter(|_| answer)
        && matches!(
            report.outcome,
            Outcome::Passed | Outcome::PassedWithDebt | Outcome::Skipped
        )
    {
        println!("{}", result.response);
    }
}

/// A debt finding on one line (the report is already scrubbed).
fn redact_line(finding: &harness::Finding) -> String {
    one_line(&finding.to_string(), 200)
}

fn one_line(text: &str, max: usize) -> String {
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() > max {
        format!("{}...", flat.chars().take(max).collect::<String>())
    } else {
        flat
    }
}

/// Records the delegation in the run journal found by the one rule (`--journal`,
/// `HARNESS_JOURNAL`, the nearest `.harness/runs.db` upward, `./.harness/runs.db`) unless
/// `--no-journal`, and returns where (`None` with `--no-journal`).
///
/// # Errors
/// The journal cannot be found, opened or written: a configuration error naming it.
async fn record_in_journal(
    args: &RunArgs,
    delegation: &Delegation,
    report: &Report,
) -> harness_records::Result<Option<std::path::PathBuf>> {
    if args.no_journal {
        return Ok(None);
    }
    let path = harness_records::locate(args.journal.as_deref())
        .map_err(|e| {
            harness_records::Error::new(
                e.kind(),
                format!("not recorded in the run journal: {}", e.message()),
            )
        })?
        .path;
    let (delegation, report) = (delegation.clone(), report.clone());
    let journal = path.clone();
    tokio::task::spawn_blocking(move || settings::record_run(&journal, &delegation, &report))
    .await
    .unwrap_or_else(|e| {
        Err(harness_records::Error::journal(format!(
            "the journal writer failed: {e}"
        )))
    })
    .map_err(|e| {
        harness_records::Error::new(
            e.kind(),
            format!(
                "not recorded in the run journal {} (pass --journal PATH to a writable file, or --no-journal): {}",
                path.display(),
                e.message()
            ),
        )
    })?;
    Ok(Some(path))
}
