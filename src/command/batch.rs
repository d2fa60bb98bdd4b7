//! `harness batch`: many delegations, concurrently, outcomes streamed as they complete.

use std::io::IsTerminal;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use harness::Assembler;
use harness::batch::{BatchEnd, BatchOutcome, BatchReader, BatchSettings, Tally};
use harness_queue::{BatchId, Plan, Ran, Stored, Target};
use harness_records::{Journal, JournalWriter, RecordMeta};
use indicatif::{ProgressBar, ProgressStyle};

use crate::args::BatchArgs;
use crate::exit;
use crate::settings;

/// Runs the command and returns its exit code.
pub async fn run(args: BatchArgs) -> u8 {
    batch(&args).await.unwrap_or_else(|code| code)
}

/// What the command runs with, read from its arguments.
struct Opened {
    overrides: harness::Overrides,
    reader: BatchReader,
    runtime: harness::Runtime,
    queue: Option<Arc<dyn harness_queue::Queue>>,
    batch_id: BatchId,
    /// Nothing runs that could not be recorded: with a journal, it is writable.
    journal: Option<JournalWriter>,
    /// A resumed batch skips what the journal already holds; a new one has nothing there.
    recorded_in: Option<Mutex<Journal>>,
}

/// Reads the settings; `Err` is the exit code of the one that kept the batch from starting, said
/// on stderr.
async fn open(args: &BatchArgs) -> Result<Opened, u8> {
    let fail = |e: &dyn exit::Failed| exit::fail(e, false);
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
    let reader = BatchReader::open(&args.file, Arc::new(Assembler::new(overrides.clone())))
        .map_err(|e| fail(&e))?;
    let runtime = settings::runtime().map_err(|e| fail(&e))?;
    let queue = match &args.queue {
        None => None,
        Some(url) => Some(
            harness_queue::open(url, harness_queue::QueueOptions::default())
                .await
                .map_err(|e| fail(&e))?,
        ),
    };
    let batch_id = match &args.resume {
        Some(id) => BatchId::parse(id).map_err(|e| fail(&e))?,
        None => BatchId::new(),
    };
    let journal = located
        .and_then(|l| l.map(|l| JournalWriter::start(&l.path)).transpose())
        .map_err(|e| {
            fail(&harness_records::Error::new(
                e.kind(),
                format!(
                    "the run journal cannot be written (pass --journal PATH to a writable file, or --no-journal): {}",
                    e.message()
                ),
            ))
        })?;
    let recorded_in = match (&args.resume, &journal) {
        (Some(_), Some(journal)) => Some(Mutex::new(
            Journal::open_read_only(journal.path()).map_err(|e| fail(&e))?,
        )),
        _ => None,
    };
    Ok(Opened {
        overrides,
        reader,
        runtime,
        queue,
        batch_id,
        journal,
        recorded_in,
    })
}

/// The command: its settings read, the batch run where `--queue` says, then the closing lines.
async fn batch(args: &BatchArgs) -> Result<u8, u8> {
    let Opened {
        overrides,
        reader,
        runtime,
        queue,
        batch_id,
        journal,
        recorded_in,
    } = open(args).await?;
    let recorded = |id: &str| {
        recorded_in.as_ref().is_some_and(|read| {
            read.lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .contains(id)
                .is_ok_and(|there| there)
        })
    };
    let grace = Duration::from_secs(args.grace);
    let target = match queue {
        None => Target::Here {
            runtime: &runtime,
            settings: BatchSettings {
                concurrency: usize::from(args.concurrency),
                grace,
            },
        },
        Some(queue) => {
            eprintln!(
                "{} on {} as batch {batch_id}; reports are recorded as workers send them (harness worker --queue {})",
                if args.resume.is_some() {
                    "resuming"
                } else {
                    "queued"
                },
                queue.describe(),
                args.queue.as_deref().unwrap_or_default()
            );
            Target::Queue {
                queue,
                plan: Plan {
                    batch: batch_id.as_str(),
                    overrides: &overrides,
                    resume: args.resume.is_some(),
                    recorded: &recorded,
                },
            }
        }
    };
    let stop = stopped(matches!(target, Target::Queue { .. }), grace);
    let source = std::path::absolute(&args.file).unwrap_or_else(|_| args.file.clone());
    let mut printer = Printer::new(args.json);
    let started = Instant::now();
    let sink = |outcome: BatchOutcome| printer.take(outcome, journal.as_ref(), &source);
    let ran = harness_queue::run_batch(reader, target, stop, sink)
        .await
        .map_err(|e| exit::fail(&e, false))?;
    let follow_later = format!(
        "harness batch {} --queue {} --resume {batch_id}",
        args.file.display(),
        args.queue.as_deref().unwrap_or_default()
    );
    Ok(finish(
        ran,
        printer,
        journal,
        batch_id.as_str(),
        &follow_later,
        started,
    ))
}

/// Resolves on SIGINT or SIGTERM, once it has said what stopping means: a queued batch stops
/// waiting, one run here gives its delegations `grace` and then cancels them.
async fn stopped(queued: bool, grace: Duration) {
    let why = settings::shutdown_signal().await;
    if queued {
        eprintln!("\n{why}: no longer waiting; what is still out stays queued");
    } else {
        eprintln!(
            "\n{why}: no new delegations; waiting up to {}s for running ones, then cancelling them",
            grace.as_secs()
        );
    }
}

/// Prints each outcome as it comes (text or `--json` lines on stdout, a progress line on a
/// terminal's stderr) and counts it.
struct Printer {
    json: bool,
    tally: Tally,
    bar: Option<ProgressBar>,
    /// The reader went away (`| head`): the printing stops, not the batch.
    stdout_closed: bool,
}

impl Printer {
    fn new(json: bool) -> Self {
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
        Printer {
            json,
            tally: Tally::default(),
            bar,
            stdout_closed: false,
        }
    }

    /// Counts and prints one outcome, and records its report in `journal` (when there is one):
    /// every outcome is recorded, whether or not it could be printed.
    fn take(
        &mut self,
        outcome: BatchOutcome,
        journal: Option<&JournalWriter>,
        source: &Path,
    ) -> Stored {
        self.tally.add(&outcome);
        let text = outcome.to_line(self.json);
        match &self.bar {
            Some(bar) => {
                bar.suspend(|| say(&mut self.stdout_closed, &text));
                bar.inc(1);
                bar.set_message(self.tally.progress());
            }
            None => say(&mut self.stdout_closed, &text),
        }
        match (journal, outcome.report) {
            (Some(journal), Ok(report)) => {
                let meta = RecordMeta {
                    source: Some(format!("{}:{}", source.display(), outcome.line).into()),
                    workdir: None,
                };
                Box::pin(journal.stored(report, meta))
            }
            _ => Box::pin(async { Ok(()) }),
        }
    }
}

/// Prints one line on stdout, unless it was closed before (then `closed` stays true).
fn say(closed: &mut bool, text: &str) {
    use std::io::Write;
    if !*closed {
        *closed = writeln!(std::io::stdout().lock(), "{text}").is_err();
    }
}

/// The closing lines — what following a queue left behind, what the journal holds, the totals —
/// and the exit code.
fn finish(
    ran: Ran,
    printer: Printer,
    journal: Option<JournalWriter>,
    batch: &str,
    follow_later: &str,
    started: Instant,
) -> u8 {
    if let Some(bar) = &printer.bar {
        bar.finish_and_clear();
    }
    for note in ran
        .followed
        .iter()
        .flat_map(|f| f.notes(batch, follow_later))
    {
        eprintln!("{note}");
    }
    let all_recorded = journal.is_none_or(finish_journal);
    if printer.stdout_closed {
        eprintln!("stdout was closed early; outcomes after that went to the journal only");
    }
    let tally = printer.tally;
    eprintln!("{}", tally.summary(&ran.summary, started.elapsed()));
    match tally.end(ran.summary.stopped, all_recorded) {
        BatchEnd::Stopped => exit::CANCELLED,
        BatchEnd::Unsound => exit::USAGE,
        BatchEnd::NotVerified => exit::NOT_VERIFIED,
        BatchEnd::Verified => exit::OK,
    }
}

/// Waits for the journal to have every record and says what it holds; false when a record was
/// lost.
fn finish_journal(journal: JournalWriter) -> bool {
    let path = journal.path().to_path_buf();
    let written = journal.finish();
    if written.recorded > 0 {
        eprintln!(
            "recorded {} delegation(s) in {} (harness runs list)",
            written.recorded,
            path.display()
        );
    }
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
    written.failures.is_empty() && !written.crashed
}
