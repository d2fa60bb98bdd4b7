//! Batches: many delegations from one file, run concurrently on one runtime. Input is read as
//! delegations are dispatched, so memory follows the concurrency, not the size of the file.

use std::future::Future;
use std::io::{BufRead, Read as _};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value};
use tokio::sync::{Semaphore, mpsc};
use tokio::task::JoinSet;

use crate::assembly::{Assembler, base_of};
use crate::delegation::Delegation;
use crate::error::{Error, Result};
use crate::report::{Outcome, Report};
use crate::runtime::Runtime;

/// One delegation of a batch, or why its entry could not be read.
#[derive(Debug)]
pub struct BatchItem {
    /// The 1-based line of a JSONL file, or the 1-based index into a YAML file's `args` list.
    pub line: usize,
    /// The delegation, or the configuration error that entry has.
    pub delegation: Result<Delegation>,
    /// The entry as a delegation file's keys in JSON (a YAML entry merged into its template),
    /// when the reader keeps them ([`BatchReader::keep_entries`]): what a queue carries.
    pub entry: Option<Value>,
}

/// Reads a batch file entry by entry.
///
/// - `*.jsonl` / `*.ndjson`: one delegation per line, a JSON object with the keys of a delegation
///   file; blank lines are skipped.
/// - `*.yaml` / `*.yml`: `template:` (a delegation) and `args:` (a list of objects); each entry
///   becomes one delegation whose `args` are the template's merged with the entry's, and whose
///   `task` has `{key}` replaced by the entry's string and number values.
///
/// Relative paths are relative to the batch file's directory.
pub struct BatchReader {
    source: PathBuf,
    base: PathBuf,
    assembler: Arc<Assembler>,
    entries: Entries,
    keep: bool,
}

enum Entries {
    Lines {
        lines: std::io::Lines<std::io::BufReader<std::io::Take<std::fs::File>>>,
        line: usize,
    },
    Fanout(std::vec::IntoIter<BatchItem>),
}

impl std::fmt::Debug for BatchReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BatchReader")
            .field("source", &self.source)
            .finish_non_exhaustive()
    }
}

impl BatchReader {
    /// Opens a batch file whose entries `assembler` turns into delegations.
    ///
    /// # Errors
    /// [`ErrorKind::Config`](crate::ErrorKind::Config) when the file cannot be read, has an
    /// unknown extension, or (YAML) is not a template with an `args` list.
    pub fn open(path: &Path, assembler: Arc<Assembler>) -> Result<Self> {
        let base = base_of(path).to_path_buf();
        let name = path.display().to_string();
        let extension = path
            .extension()
            .and_then(|e| e.to_str())
            .unwrap_or_default();
        let entries = match extension {
            "jsonl" | "ndjson" => {
                let opened = harness_builtins::open_regular(path)
                    .and_then(|file| Ok((file.metadata()?.len(), file)));
                let (len, file) =
                    opened.map_err(|e| Error::config(format!("batch file {name}: {e}")))?;
                // Only what the file held when the batch began: lines a delegate appends later
                // are not run.
                Entries::Lines {
                    lines: std::io::BufReader::new(file.take(len)).lines(),
                    line: 0,
                }
            }
            "yaml" | "yml" => Entries::Fanout(fan_out(&assembler, path, &name, &base)?.into_iter()),
            _ => {
                return Err(Error::config(format!(
                    "batch file {name}: expected a .jsonl (one delegation per line) or .yaml (template + args) file"
                )));
            }
        };
        Ok(BatchReader {
            source: path.to_path_buf(),
            base,
            assembler,
            entries,
            keep: false,
        })
    }

    /// Makes every item carry its entry as JSON ([`BatchItem::entry`]), for a queue.
    #[must_use]
    pub fn keep_entries(mut self) -> Self {
        self.keep = true;
        self
    }

    /// The batch file.
    pub fn source(&self) -> &Path {
        &self.source
    }

    /// The directory relative paths in entries are resolved against.
    pub fn base(&self) -> &Path {
        &self.base
    }
}

impl Iterator for BatchReader {
    type Item = BatchItem;

    fn next(&mut self) -> Option<BatchItem> {
        match &mut self.entries {
            Entries::Fanout(items) => {
                let mut item = items.next()?;
                if !self.keep {
                    item.entry = None;
                }
                Some(item)
            }
            Entries::Lines { lines, line } => loop {
                *line += 1;
                let label = format!("{}:{line}", self.source.display());
                let text = match lines.next()? {
                    Ok(text) => text,
                    Err(e) => {
                        return Some(BatchItem {
                            line: *line,
                            delegation: Err(Error::config(format!("{label}: {e}"))),
                            entry: None,
                        });
                    }
                };
                if text.trim().is_empty() {
                    continue;
                }
                let delegation = self
                    .assembler
                    .json_text(&self.source, &label, &text, &self.base);
                let entry = if self.keep && delegation.is_ok() {
                    serde_json::from_str(&text).ok()
                } else {
                    None
                };
                return Some(BatchItem {
                    line: *line,
                    delegation,
                    entry,
                });
            },
        }
    }
}

/// The largest YAML batch file read, bytes.
const MAX_BATCH_YAML: u64 = 64 * 1024 * 1024;

/// Expands a YAML template batch into its delegations.
fn fan_out(assembler: &Assembler, path: &Path, name: &str, base: &Path) -> Result<Vec<BatchItem>> {
    // Read as the policy is: a FIFO, a device or a link out is refused at once, the size capped.
    let text = harness_builtins::read_regular(path, MAX_BATCH_YAML)
        .map_err(|e| Error::config(format!("batch file {name}: {e}")))?;
    let doc: Value = serde_norway::from_str(&text).map_err(|e| {
        Error::config(format!(
            "{name}: {}",
            crate::plain::plain_yaml(&e.to_string(), &text)
        ))
    })?;
    let Value::Object(mut doc) = doc else {
        return Err(Error::config(format!(
            "{name}: expected a mapping with `template` and `args`"
        )));
    };
    if let Some(key) = doc
        .keys()
        .find(|k| !matches!(k.as_str(), "template" | "args"))
    {
        return Err(Error::config(format!(
            "{name}: unknown key `{key}` (a batch YAML file has `template` and `args`)"
        )));
    }
    let Some(Value::Object(template)) = doc.remove("template") else {
        return Err(Error::config(format!(
            "{name}: `template` must be a delegation mapping"
        )));
    };
    let Some(Value::Array(entries)) = doc.remove("args") else {
        return Err(Error::config(format!(
            "{name}: `args` must be a list of mappings, one per delegation"
        )));
    };
    let mut items = Vec::with_capacity(entries.len());
    for (index, entry) in entries.into_iter().enumerate() {
        let label = format!("{name}: args[{index}]");
        let (delegation, entry) = match entry {
            Value::Object(entry) => {
                let value = instantiate(&template, &entry);
                (
                    assembler.json(path, &label, value.clone(), base),
                    Some(value),
                )
            }
            other => (
                Err(Error::config(format!(
                    "{label}: expected a mapping, got {other}"
                ))),
                None,
            ),
        };
        items.push(BatchItem {
            line: index + 1,
            delegation,
            entry,
        });
    }
    Ok(items)
}

/// Merges one `args` entry into the template and fills `{key}` placeholders in the task.
fn instantiate(template: &Map<String, Value>, entry: &Map<String, Value>) -> Value {
    let mut delegation = template.clone();
    let mut args = match delegation.remove("args") {
        Some(Value::Object(args)) => args,
        _ => Map::new(),
    };
    for (key, value) in entry {
        args.insert(key.clone(), value.clone());
    }
    if let Some(Value::String(task)) = delegation.get_mut("task") {
        for (key, value) in &args {
            let text = match value {
                Value::String(s) => s.clone(),
                Value::Number(n) => n.to_string(),
                Value::Bool(b) => b.to_string(),
                _ => continue,
            };
            *task = task.replace(&format!("{{{key}}}"), &text);
        }
    }
    delegation.insert("args".to_owned(), Value::Object(args));
    Value::Object(delegation)
}

/// How a batch runs.
#[derive(Debug, Clone)]
pub struct BatchSettings {
    /// Delegations in flight at once.
    pub concurrency: usize,
    /// After a stop, how long running delegations may take to finish before they are abandoned.
    pub grace: Duration,
}

/// One finished entry of a batch.
#[derive(Debug)]
pub struct BatchOutcome {
    /// The entry's line (or index).
    pub line: usize,
    /// The delegation's report, or the entry's configuration error.
    pub report: std::result::Result<Report, Error>,
}

impl BatchOutcome {
    /// The line `harness batch` prints for it. With `json`, the `harness run --json` object plus
    /// `line` (a malformed entry: outcome `error` with its configuration error); else one line of
    /// text naming the outcome and, for one that did not pass, its primary reason — the last
    /// attempt's first blocking finding, else the error's first line ("verification failed on
    /// all 3 attempts" says nothing).
    pub fn to_line(&self, json: bool) -> String {
        let line = self.line;
        match (&self.report, json) {
            (Ok(report), true) => {
                let mut text = Vec::with_capacity(4096);
                serde_json::to_writer(&mut text, &report.json().with_line(line))
                    .expect("a report always serialises");
                String::from_utf8(text).expect("JSON is UTF-8")
            }
            (Ok(report), false) => {
                let primary = report
                    .attempts
                    .last()
                    .and_then(|a| a.reasons().into_iter().next());
                let detail = report.error.as_ref().map_or(String::new(), |e| {
                    let why = primary.unwrap_or_else(|| {
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
            (Err(e), true) => serde_json::json!({
                "line": line, "id": null, "outcome": "error", "verified": false,
                "attempts": 0, "reasons": [], "result": null, "usage": null, "trace_id": null,
                "error": {"kind": e.kind().as_str(), "message": e.message()},
            })
            .to_string(),
            (Err(e), false) => format!("line {line}: skipped, malformed: {}", e.message()),
        }
    }
}

/// A batch's outcomes counted as they come.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tally {
    /// Passed, with or without debt.
    pub passed: usize,
    /// Skipped: nothing was configured to verify.
    pub skipped: usize,
    /// Failed verification.
    pub failed: usize,
    /// Ended in an error.
    pub errors: usize,
    /// Entries that could not be read or validated.
    pub malformed: usize,
}

/// How a batch ended, most serious first; the command's exit code follows from it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BatchEnd {
    /// Stopped (a signal) before every entry was run.
    Stopped,
    /// An entry was malformed, or a report could not be recorded: the operator's to fix.
    Unsound,
    /// Some delegation failed verification or ended in an error.
    NotVerified,
    /// Every delegation passed or was skipped.
    Verified,
}

impl Tally {
    /// Counts one outcome.
    pub fn add(&mut self, outcome: &BatchOutcome) {
        match &outcome.report {
            Err(_) => self.malformed += 1,
            Ok(report) => match report.outcome {
                Outcome::Passed | Outcome::PassedWithDebt => self.passed += 1,
                Outcome::Skipped => self.skipped += 1,
                Outcome::Failed(_) => self.failed += 1,
                Outcome::Error(_) => self.errors += 1,
            },
        }
    }

    /// The counts so far, for a progress line.
    pub fn progress(&self) -> String {
        format!(
            "passed {}  failed {}  errors {}  malformed {}",
            self.passed + self.skipped,
            self.failed,
            self.errors,
            self.malformed
        )
    }

    /// The closing line: every outcome counted, what a stop abandoned, and the rate over
    /// `elapsed`.
    pub fn summary(&self, summary: &BatchSummary, elapsed: Duration) -> String {
        let seconds = elapsed.as_secs_f64();
        let done = summary.finished;
        let abandoned = if summary.abandoned > 0 {
            format!("; {} abandoned after the interrupt", summary.abandoned)
        } else {
            String::new()
        };
        format!(
            "{done} delegation(s): {} passed, {} skipped, {} failed, {} errors; {} malformed entr{}{abandoned} in {seconds:.1}s ({:.1}/s)",
            self.passed,
            self.skipped,
            self.failed,
            self.errors,
            self.malformed,
            if self.malformed == 1 { "y" } else { "ies" },
            if seconds > 0.0 {
                done as f64 / seconds
            } else {
                0.0
            },
        )
    }

    /// How the batch ended, given whether it was stopped and whether every report was recorded.
    pub fn end(&self, stopped: bool, all_recorded: bool) -> BatchEnd {
        if stopped {
            BatchEnd::Stopped
        } else if self.malformed > 0 || !all_recorded {
            BatchEnd::Unsound
        } else if self.failed + self.errors > 0 {
            BatchEnd::NotVerified
        } else {
            BatchEnd::Verified
        }
    }
}

/// Totals of a batch.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BatchSummary {
    /// Entries read.
    pub read: usize,
    /// Entries that could not be read or validated.
    pub malformed: usize,
    /// Delegations that finished.
    pub finished: usize,
    /// Delegations abandoned after a stop.
    pub abandoned: usize,
    /// True when the batch was stopped before reading every entry.
    pub stopped: bool,
}

/// How long cancelled delegations get to hand in their reports.
const CANCEL_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// Runs every entry of `items` with at most `settings.concurrency` in flight, handing each
/// outcome to `sink` as it completes. When `stop` resolves, no new entry is dispatched and
/// running ones get `settings.grace` to finish; then they are cancelled, and their reports (kind
/// `cancelled`) handed to `sink` too. One delegation's error never stops the others.
pub async fn run_batch<I, S, F>(
    runtime: &Runtime,
    items: I,
    settings: &BatchSettings,
    stop: S,
    mut sink: F,
) -> BatchSummary
where
    I: Iterator<Item = BatchItem>,
    S: Future<Output = ()>,
    F: FnMut(BatchOutcome),
{
    let semaphore = Arc::new(Semaphore::new(settings.concurrency.max(1)));
    // Set when the grace period after a stop has run out: what still runs is cancelled, and
    // recorded as such.
    let (cancel_tx, cancel_rx) = tokio::sync::watch::channel(false);
    let (tx, mut rx) = mpsc::unbounded_channel::<BatchOutcome>();
    let mut tasks = JoinSet::new();
    let mut summary = BatchSummary::default();
    tokio::pin!(stop);
    let mut items = items;
    'dispatch: loop {
        let permit = loop {
            tokio::select! {
                biased;
                () = &mut stop => {
                    summary.stopped = true;
                    break 'dispatch;
                }
                Some(outcome) = rx.recv() => {
                    summary.finished += 1;
                    sink(outcome);
                }
                permit = Arc::clone(&semaphore).acquire_owned() => {
                    match permit {
                        Ok(permit) => break permit,
                        Err(_) => break 'dispatch,
                    }
                }
            }
        };
        // Read the next entry only now, so input is consumed at the pace of the work.
        let Some(item) = items.next() else {
            break;
        };
        summary.read += 1;
        match item.delegation {
            Err(e) => {
                summary.malformed += 1;
                sink(BatchOutcome {
                    line: item.line,
                    report: Err(e),
                });
            }
            Ok(delegation) => {
                let runtime = runtime.clone();
                let tx = tx.clone();
                let line = item.line;
                let mut cancel = cancel_rx.clone();
                tasks.spawn(async move {
                    let cancelled = async move {
                        let _ = cancel.wait_for(|cancelled| *cancelled).await;
                        "cancelled: the batch was stopped and its grace period ran out".to_owned()
                    };
                    let report = runtime
                        .run_until(&delegation, &crate::Nobody, cancelled)
                        .await;
                    let _ = tx.send(BatchOutcome {
                        line,
                        report: Ok(report),
                    });
                    drop(permit);
                });
            }
        }
        while tasks.try_join_next().is_some() {}
    }
    drop(tx);
    let mut drained = 0;
    if !summary.stopped {
        tokio::select! {
            () = drain(&mut rx, &mut sink, &mut drained) => {}
            () = &mut stop => summary.stopped = true,
        }
    }
    if summary.stopped {
        // Running delegations get the grace period; then whatever still runs is cancelled, and
        // each hands in its report promptly.
        let _ = tokio::time::timeout(settings.grace, drain(&mut rx, &mut sink, &mut drained)).await;
        let _ = cancel_tx.send(true);
        let _ = tokio::time::timeout(CANCEL_WAIT, drain(&mut rx, &mut sink, &mut drained)).await;
    }
    tasks.abort_all();
    summary.finished += drained;
    summary.abandoned = summary.read - summary.malformed - summary.finished;
    summary
}

/// Hands every outcome still to come to `sink`, counting them in `drained`.
async fn drain<F: FnMut(BatchOutcome)>(
    rx: &mut mpsc::UnboundedReceiver<BatchOutcome>,
    sink: &mut F,
    drained: &mut usize,
) {
    while let Some(outcome) = rx.recv().await {
        *drained += 1;
        sink(outcome);
    }
}
