//! `harness batch`: many delegations, concurrently, outcomes streamed as they complete.

use std::io::IsTerminal;
use std::sync::Arc;
use std::time::{Duration, Instant};

use harness::batch::{BatchOutcome, BatchReader, BatchSettings, run_batch};
use harness::{Assembler, Outcome};
use harness_records::{JournalWriter, RecordMeta};
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::json;

use crate::args::BatchArgs;
use crate::exit;
use crate::settings;

#[derive(Default)]
struct Counts {
    passed: usize,
    skipped: usize,
    failed: usize,
    errors: usize,
    malformed: usize,
}

/// Runs the command and returns its exit code.
pub async fn run(args: BatchArgs) -> u8 {
    let located = (!args.no_journal)
        .then(|| harness_records::locate(args.journal.as_deref()))
        .transpose();
    let overrides = settings::overrides(
        &args.sandbox,
        &args.hooks,
        None,
        located
            .as_ref()
            .ok()
            .and_then(Option::as_ref)
            .map(|l| l.path.as_path()),
    );
    let assembler = Arc::new(Assembler::new(overrides.clone()));
    let reader = match BatchReader::open(&args.file, assembler) {
        Ok(reader) => reader,
        Err(e) => return exit::fail(&e, false),
    };
    let queue = match &args.queue {
        None => None,
        Some(url) => match harness_queue::open(url, harness_queue::QueueOptions::default()).await {
            Ok(queue) => Some(queue),
            Err(e) => return exit::fail(&e, false),
        },
    };
    let runtime = match crate::settings::runtime() {
        Ok(runtime) => runtime,
        Err(e) => return exit::fail(&e, false),
    };
    let settings = BatchSettings {
        concurrency: usize::from(args.concurrency),
        grace: Duration::from_secs(args.grace),
    };
    let bar = std::io::stderr().is_terminal().then(|| {
        let bar = ProgressBar::new_spinner();
        bar.set_style(
            ProgressStyle::with_template(
                "{spinner} {elapsed_precise} {pos} done  {msg}  {per_sec}",
            )
            .unwrap_or_else(|_| ProgressStyle::default_spinner()),
        );
        bar.enable_steady_tick(Duration::from_millis(120));
        bar
    });
    // Nothing runs that could not be recorded.
    let journal = match located.and_then(|l| l.map(|l| JournalWriter::start(&l.path)).transpose()) {
        Ok(writer) => writer,
        Err(e) => {
            let e = harness_records::Error::new(
                e.kind(),
                format!(
                    "the run journal cannot be written (pass --journal PATH to a writable file, or --no-journal): {}",
                    e.message()
                ),
            );
            return exit::fail(&e, false);
        }
    };
    let source = std::path::absolute(&args.file).unwrap_or_else(|_| args.file.clone());
    let mut counts = Counts::default();
    let mut stdout_closed = false;
    let started = Instant::now();
    let json_output = args.json;
    let sink = |outcome: BatchOutcome| {
        let line = outcome.line;
        let text = match &outcome.report {
            Ok(report) => {
                match report.outcome {
                    Outcome::Passed | Outcome::PassedWithDebt => counts.passed += 1,
                    Outcome::Skipped => counts.skipped += 1,
                    Outcome::Failed(_) => counts.failed += 1,
                    Outcome::Error(_) => counts.errors += 1,
                }
                if json_output {
                    // The `harness run --json` object plus `line`, written straight from the
                    // report.
                    let mut text = Vec::with_capacity(4096);
                    serde_json::to_writer(&mut text, &report.json().with_line(line))
                        .expect("a report always serialises");
                    String::from_utf8(text).expect("JSON is UTF-8")
                } else {
                    // The primary reason (the last attempt's first blocking finding), else the
                    // error's first line: "verification failed on all 3 attempts" says nothing.
                    let primary = report
                        .attempts
                        .last()
                        .and_then(|a| a.reasons().into_iter().next());
                    let detail = report.error.as_ref().map_or(String::new(), |e| {
                        let why = primary.clone().unwrap_or_else(|| {
                            e.message().lines().next().unwrap_or_default().to_owned()
                        });
                        format!("  {}: {why}", e.kind().as_str())
                    });
                    format!(
                        "line {line}: {} after {} attempt(s) ({}){detail}",
                        report.outcome.as_str(),
                        report.attempts.len(),
                        report.id
                    )
                }
            }
            Err(e) => {
                counts.malformed += 1;
                if json_output {
                    json!({"line": line, "id": null, "outcome": "error", "verified": false,
                           "attempts": 0, "reasons": [], "result": null, "usage": null, "trace_id": null,
                           "error": {"kind": e.kind().as_str(), "message": e.message()}})
                    .to_string()
                } else {
                    format!("line {line}: skipped, malformed: {}", e.message())
                }
            }
        };
        // A reader that went away (`| head`) stops the printing, not the batch: every outcome
        // is still recorded.
        let mut say = |text: &str| {
            if !stdout_closed {
                use std::io::Write;
                stdout_closed = writeln!(std::io::stdout().lock(), "{text}").is_err();
            }
        };
        match &bar {
            Some(bar) => {
                bar.suspend(|| say(&text));
                bar.inc(1);
                bar.set_message(format!(
                    "passed {}  failed {}  errors {}  malformed {}",
                    counts.passed + counts.skipped,
                    counts.failed,
                    counts.errors,
                    counts.malformed
                ));
            }
            None => say(&text),
        }
        if let (Some(journal), Ok(report)) = (&journal, outcome.report) {
            let meta = RecordMeta {
                source: Some(format!("{}:{line}", source.display()).into()),
                workdir: None,
            };
            Box::pin(journal.stored(report, meta)) as harness_queue::Stored
        } else {
            Box::pin(async { Ok(()) }) as harness_queue::Stored
        }
    };
    let stop = async {
        let why = settings::shutdown_signal().await;
        eprintln!(
            "\n{why}: no new delegations; waiting up to {}s for running ones, then cancelling them",
            settings.grace.as_secs()
        );
    };
    let summary = match queue {
        None => {
            let mut sink = sink;
            let sink = |outcome| drop(sink(outcome));
            run_batch(&runtime, reader, &settings, stop, sink).await
        }
        Some(queue) => {
            let absolute =
                |p: &std::path::Path| std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf());
            let (file, base) = (absolute(reader.source()), absolute(reader.base()));
            let batch = match &args.resume {
                Some(batch) => batch.clone(),
                None => harness::new_id().replacen("d-", "b-", 1),
            };
            if !valid_batch(&batch) {
                let e = harness::Error::config(format!(
                    "--resume {batch:?}: not a batch id; give the `b-…` id `harness batch --queue` printed"
                ));
                return exit::fail(&e, false);
            }
            eprintln!(
                "{} on {} as batch {batch}; reports are recorded as workers send them (harness worker --queue {})",
                if args.resume.is_some() {
                    "resuming"
                } else {
                    "queued"
                },
                queue.describe(),
                args.queue.as_deref().unwrap_or_default()
            );
            // A resumed batch skips what the journal already holds; a new one has nothing there.
            let recorded_in = match (&args.resume, &journal) {
                (Some(_), Some(journal)) => {
                    match harness_records::Journal::open_read_only(journal.path()) {
                        Ok(read) => Some(std::sync::Mutex::new(read)),
                        Err(e) => return exit::fail(&e, false),
                    }
                }
                _ => None,
            };
            let recorded = |id: &str| {
                recorded_in.as_ref().is_some_and(|read| {
                    read.lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .contains(id)
                        .is_ok_and(|there| there)
                })
            };
            let plan = harness_queue::Plan {
                batch: &batch,
                overrides: &overrides,
                resume: args.resume.is_some(),
                recorded: &recorded,
            };
            let items = reader
                .keep_entries()
                .map(|item| (item, file.clone(), base.clone()));
            let stop = async {
                let why = settings::shutdown_signal().await;
                eprintln!("\n{why}: no longer waiting; what is still out stays queued");
            };
            match harness_queue::follow(queue, items, &plan, stop, sink).await {
                Ok(followed) => {
                    if followed.duplicates > 0 {
                        eprintln!(
                            "{} report(s) came back twice (a worker lost its lease and the delegation ran again); each delegation was recorded once",
                            followed.duplicates
                        );
                    }
                    if followed.pending > 0 {
                        eprintln!(
                            "{} delegation(s) still queued; follow them later with: harness batch {} --queue {} --resume {batch}",
                            followed.pending,
                            args.file.display(),
                            args.queue.as_deref().unwrap_or_default()
                        );
                    }
                    if followed.unstored > 0 {
                        eprintln!(
                            "{} report(s) could not be recorded and stay in the queue (take them later with --resume {batch})",
                            followed.unstored
                        );
                    }
                    if let (Some(p50), Some(p99)) =
                        (followed.percentile(50.0), followed.percentile(99.0))
                    {
                        eprintln!(
                            "queued to reported: p50 {:.1} ms, p99 {:.1} ms",
                            p50.as_secs_f64() * 1e3,
                            p99.as_secs_f64() * 1e3
                        );
                    }
                    followed.summary
                }
                Err(e) => return exit::fail(&e, false),
            }
        }
    };
    if let Some(bar) = &bar {
        bar.finish_and_clear();
    }
    let mut unrecorded = false;
    if let Some(journal) = journal {
        let path = journal.path().to_path_buf();
        let written = journal.finish();
        if written.recorded > 0 {
            eprintln!(
                "recorded {} delegation(s) in {} (harness runs list)",
                written.recorded,
                path.display()
            );
        }
        unrecorded = !written.failures.is_empty() || written.crashed;
        if !written.failures.is_empty() {
            eprintln!(
                "error[journal]: {} delegation(s) not recorded in the run journal {}:",
                written.failures.len(),
                path.display()
            );
            for failure in written.failures.iter().take(5) {
                eprintln!("  {failure}");
            }
        }
        if written.crashed {
            eprintln!(
                "error[journal]: the run journal writer for {} failed; some delegations were not recorded",
                path.display()
            );
        }
    }
    if stdout_closed {
        eprintln!("stdout was closed early; outcomes after that went to the journal only");
    }
    let elapsed = started.elapsed().as_secs_f64();
    let done = summary.finished;
    eprintln!(
        "{} delegation(s): {} passed, {} skipped, {} failed, {} errors; {} malformed entr{}{} in {:.1}s ({:.1}/s)",
        done,
        counts.passed,
        counts.skipped,
        counts.failed,
        counts.errors,
        counts.malformed,
        if counts.malformed == 1 { "y" } else { "ies" },
        if summary.abandoned > 0 {
            format!("; {} abandoned after the interrupt", summary.abandoned)
        } else {
            String::new()
        },
        elapsed,
        if elapsed > 0.0 {
            done as f64 / elapsed
        } else {
            0.0
        },
    );
    if summary.stopped {
        exit::CANCELLED
    } else if counts.malformed > 0 || unrecorded {
        exit::USAGE
    } else if counts.failed + counts.errors > 0 {
        exit::NOT_VERIFIED
    } else {
        exit::OK
    }
}

/// True for a batch id as `harness batch --queue` makes them (`b-` and hex digits): safe in a
/// NATS subject and a consumer name.
fn valid_batch(batch: &str) -> bool {
    batch
        .strip_prefix("b-")
        .is_some_and(|hex| !hex.is_empty() && hex.chars().all(|c| c.is_ascii_hexdigit()))
}
