//! Recording from async workers: [`JournalWriter`] owns the journal on a thread of its own, so
//! SQLite never blocks a runtime worker, and writes what arrives together, one transaction per
//! gathering, which costs far less per record than a commit each.

use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::Duration;

use harness::{Report, Result};

use crate::journal::{Journal, RecordMeta};

/// How long the writer gathers records before writing them together.
const GATHER: Duration = Duration::from_millis(10);
/// The most records written in one transaction.
const MAX_BATCH: usize = 1024;

/// What a [`JournalWriter`] did, once it finished.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Written {
    /// Records written.
    pub recorded: usize,
    /// Records not written, as `ID: why`.
    pub failures: Vec<String>,
    /// True when the writer thread died: records queued after that were lost.
    pub crashed: bool,
}

/// A journal on a writer thread of its own.
#[derive(Debug)]
pub struct JournalWriter {
    path: PathBuf,
    sender: mpsc::Sender<(Report, RecordMeta)>,
    thread: JoinHandle<Written>,
}

impl JournalWriter {
    /// Opens (creating and migrating as needed) the journal at `path` and starts its writer.
    ///
    /// # Errors
    /// As [`Journal::open`].
    pub fn start(path: &Path) -> Result<Self> {
        let mut journal = Journal::open(path)?;
        let (sender, receiver) = mpsc::channel::<(Report, RecordMeta)>();
        let thread = std::thread::Builder::new()
            .name("harness-journal".to_owned())
            .spawn(move || {
                let mut written = Written::default();
                // Gather records for a moment and write them in one transaction. The writer
                // sleeps while they gather rather than waiting on the channel, which would wake
                // it for each one.
                while let Ok(first) = receiver.recv() {
                    std::thread::sleep(GATHER);
                    let mut queued = vec![first];
                    queued.extend(receiver.try_iter().take(MAX_BATCH - 1));
                    match journal.record_all(queued.iter().map(|(r, m)| (r, m))) {
                        Ok(failed) => {
                            written.recorded += queued.len() - failed.len();
                            written.failures.extend(
                                failed
                                    .into_iter()
                                    .map(|(id, e)| format!("{id}: {}", e.message())),
                            );
                        }
                        Err(e) => written.failures.extend(
                            queued
                                .iter()
                                .map(|(r, _)| format!("{}: {}", r.id, e.message())),
                        ),
                    }
                }
                written
            })
            .map_err(|e| {
                harness::Error::config(format!(
                    "journal {}: cannot start the writer thread: {e}",
                    path.display()
                ))
            })?;
        Ok(JournalWriter {
            path: path.to_path_buf(),
            sender,
            thread,
        })
    }

    /// Returns where it records.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Queues one finished delegation; it is written within moments.
    pub fn record(&self, report: Report, meta: RecordMeta) {
        // A send only fails when the writer thread died; `finish` reports that.
        let _ = self.sender.send((report, meta));
    }

    /// Waits until everything queued is written and says what was.
    pub fn finish(self) -> Written {
        drop(self.sender);
        self.thread.join().unwrap_or_else(|_| Written {
            crashed: true,
            ..Written::default()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::journal::Filter;
    use harness::Outcome;

    fn report(id: &str) -> Report {
        Report {
            id: id.to_owned(),
            request: None,
            outcome: Outcome::Skipped,
            delegate_kind: "scripted".to_owned(),
            model: None,
            attempts: Vec::new(),
            error: None,
            delivered: None,
            warnings: Vec::new(),
            events: Vec::new(),
            debt: Vec::new(),
            started_at: std::time::SystemTime::now(),
            duration: Duration::ZERO,
        }
    }

    #[test]
    fn everything_queued_is_written_and_failures_are_named() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("runs.db");
        let writer = JournalWriter::start(&path).expect("start");
        for i in 0..50 {
            writer.record(report(&format!("d-{i}")), RecordMeta::default());
        }
        writer.record(report("d-7"), RecordMeta::default());
        let written = writer.finish();
        assert_eq!(written.recorded, 50);
        assert_eq!(written.failures.len(), 1, "{:?}", written.failures);
        assert!(
            written.failures[0].starts_with("d-7: "),
            "{:?}",
            written.failures
        );
        let journal = Journal::open_read_only(&path).expect("read");
        assert_eq!(journal.list(&Filter::default()).expect("list").len(), 50);
    }
}
