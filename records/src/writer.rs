//! Recording from async workers: [`JournalWriter`] owns the journal on a thread of its own, so
//! SQLite never blocks a runtime worker, and writes what arrives together, one transaction per
//! gathering, which costs far less per record than a commit each. The starts of runs recorded in
//! a journal that has a writer in this process go through it too ([`JournalWriter::begin`]): one
//! connection writes, instead of one per start contending with it for the lock.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, mpsc};
use std::thread::JoinHandle;
use std::time::Duration;

use harness::Report;

use crate::error::{Error, Result};

use crate::journal::{Journal, RecordMeta, Started};

/// How long the writer gathers records before writing them together.
const GATHER: Duration = Duration::from_millis(10);
/// The most records written in one transaction.
const MAX_BATCH: usize = 256;
/// How many starts and records may wait for the writer. Whoever queues one more waits until the
/// writer takes some: however far it falls behind (a slow disk, the journal locked by another
/// process), no more than this and one transaction's worth are held in memory.
const QUEUE: usize = 256;

/// Adds to `items` what arrives within [`GATHER`], until a start arrives (its run is waiting)
/// or the batch is full.
fn gather(receiver: &mpsc::Receiver<Item>, items: &mut Vec<Item>) {
    let deadline = std::time::Instant::now() + GATHER;
    while items.len() < MAX_BATCH {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        match receiver.recv_timeout(left) {
            Ok(item) => {
                let start = matches!(item, Item::Start(..));
                items.push(item);
                if start {
                    return;
                }
            }
            Err(_) => return,
        }
    }
}

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

/// Told once a record is written (`Ok` with its seal) or refused (`Err` with why).
type Done = Box<dyn FnOnce(std::result::Result<String, String>) + Send>;

/// Told once a run's start is written (or was warned of as unwritable).
type Begun = tokio::sync::oneshot::Sender<()>;

/// What the writer is sent: a run's start, or a finished run to record. Records are most of what
/// it is sent, so they travel unboxed (a box each would be an allocation for nothing).
#[allow(clippy::large_enum_variant)]
enum Item {
    Start(Started, Begun),
    Record(Report, RecordMeta, Option<Done>),
}

/// The writers of this process, by their journal's path (as [`key`] makes it, and as given), each
/// with its number.
static WRITERS: Mutex<Option<Registry>> = Mutex::new(None);

/// Each writer's sender and number, by journal.
type Registry = HashMap<PathBuf, (u64, mpsc::SyncSender<Item>)>;

/// The number of the next writer started.
static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// One name for a journal however it was given: its real path.
fn key(path: &Path) -> PathBuf {
    path.canonicalize()
        .or_else(|_| std::path::absolute(path))
        .unwrap_or_else(|_| path.to_path_buf())
}

/// A journal on a writer thread of its own.
pub struct JournalWriter {
    path: PathBuf,
    /// Its number in [`WRITERS`].
    number: u64,
    sender: mpsc::SyncSender<Item>,
    thread: JoinHandle<Written>,
}

impl std::fmt::Debug for JournalWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JournalWriter")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl JournalWriter {
    /// Opens (creating and migrating as needed) the journal at `path` and starts its writer.
    ///
    /// # Errors
    /// As [`Journal::open`].
    pub fn start(path: &Path) -> Result<Self> {
        let mut journal = Journal::open(path)?;
        let (sender, receiver) = mpsc::sync_channel::<Item>(QUEUE);
        let thread = std::thread::Builder::new()
            .name("harness-journal".to_owned())
            .spawn(move || {
                let mut written = Written::default();
                // Gather records for a moment and write them in one transaction. A start ends
                // the gathering: its run waits for it to be written before its delegate acts.
                while let Ok(first) = receiver.recv() {
                    let mut items = vec![first];
                    if matches!(items[0], Item::Record(..)) {
                        gather(&receiver, &mut items);
                    }
                    items.extend(
                        receiver
                            .try_iter()
                            .take(MAX_BATCH.saturating_sub(items.len())),
                    );
                    let mut starts = Vec::new();
                    let mut begun = Vec::new();
                    let mut queued = Vec::new();
                    for item in items {
                        match item {
                            Item::Start(start, told) => {
                                starts.push(start);
                                begun.push(told);
                            }
                            Item::Record(report, meta, done) => queued.push((report, meta, done)),
                        }
                    }
                    // Before the records: a run's start is sent before its record, and a record
                    // replaces its start.
                    if let Err(e) = journal.begin(&starts) {
                        for start in &starts {
                            tracing::warn!(
                                "the start of {} was not written: {}",
                                start.id,
                                e.message()
                            );
                        }
                    }
                    for told in begun {
                        let _ = told.send(());
                    }
                    let outcomes: Vec<std::result::Result<String, String>> =
                        match journal.record_all(queued.iter().map(|(r, m, _)| (r, m))) {
                            Ok(outcomes) => outcomes
                                .into_iter()
                                .map(|o| o.map_err(|e| e.message().to_owned()))
                                .collect(),
                            Err(e) => queued.iter().map(|_| Err(e.message().to_owned())).collect(),
                        };
                    for ((report, _, done), outcome) in queued.into_iter().zip(outcomes) {
                        match &outcome {
                            // A root carried its tree's runs: each is a record too.
                            Ok(_) => written.recorded += 1 + report.carried.len(),
                            Err(why) => written.failures.push(format!("{}: {why}", report.id)),
                        }
                        if let Some(done) = done {
                            done(outcome);
                        }
                    }
                }
                written
            })
            .map_err(|e| {
                Error::journal(format!(
                    "journal {}: cannot start the writer thread: {e}",
                    path.display()
                ))
            })?;
        let number = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        {
            let mut writers = WRITERS
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let writers = writers.get_or_insert_with(HashMap::new);
            // Also as given: the runs recorded here name it so, and find it without resolving
            // it again (a system call per part of the path, twice per run).
            writers.insert(path.to_path_buf(), (number, sender.clone()));
            writers.insert(key(path), (number, sender.clone()));
        }
        Ok(JournalWriter {
            path: path.to_path_buf(),
            number,
            sender,
            thread,
        })
    }

    /// Returns where it records.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Queues the start of a run recorded in `journal` with that journal's writer in this
    /// process, when there is one (it is written at once, before any record sent after it); the
    /// future resolves once it is written, or was warned of as unwritable. `None` when there is
    /// no writer (or it has stopped), and the caller writes it itself.
    pub fn begin(journal: &Path, run: Started) -> Option<impl Future<Output = ()> + Send + use<>> {
        let (told, begun) = tokio::sync::oneshot::channel();
        Self::send(journal, Item::Start(run, told)).then_some(async move {
            // A writer that died before writing it has nothing more to say.
            let _ = begun.await;
        })
    }

    /// Sends `item` to the writer of `journal` in this process (waiting while [`QUEUE`] items
    /// wait for it); false when there is none (or it has stopped).
    fn send(journal: &Path, item: Item) -> bool {
        // Taken out of the registry first: a send that waits holds no one else up.
        let sender = WRITERS
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .as_ref()
            .and_then(|w| w.get(journal).or_else(|| w.get(&key(journal))))
            .map(|(_, sender)| sender.clone());
        sender.is_some_and(|sender| sender.send(item).is_ok())
    }

    /// Queues the finished delegation `report`, recorded in `journal`, with that journal's
    /// writer in this process when there is one, and calls `done` with its seal once it is
    /// stored (or why not). False when there is none (or it has stopped): the caller writes it.
    pub fn record_sealed(
        journal: &Path,
        report: Report,
        meta: RecordMeta,
        done: impl FnOnce(std::result::Result<String, String>) + Send + 'static,
    ) -> bool {
        Self::send(journal, Item::Record(report, meta, Some(Box::new(done))))
    }

    /// Queues one finished delegation; it is written within moments. While the writer is
    /// behind by a full queue, this waits for it to take some (memory stays flat).
    pub fn record(&self, report: Report, meta: RecordMeta) {
        // A send only fails when the writer thread died; `finish` reports that.
        let _ = self.sender.send(Item::Record(report, meta, None));
    }

    /// Queues one finished delegation as [`JournalWriter::record`] does, and calls `done` once
    /// it is written (`Ok`) or refused (`Err` with why) — for whoever may only acknowledge work
    /// (a queue's result, an HTTP client's stream) once its record is stored.
    pub fn record_then(
        &self,
        report: Report,
        meta: RecordMeta,
        done: impl FnOnce(std::result::Result<(), String>) + Send + 'static,
    ) {
        let done: Done = Box::new(move |r| done(r.map(|_| ())));
        if let Err(mpsc::SendError(Item::Record(_, _, Some(done)))) =
            self.sender.send(Item::Record(report, meta, Some(done)))
        {
            done(Err(format!(
                "the journal writer for {} has stopped",
                self.path.display()
            )));
        }
    }

    /// Queues one finished delegation as [`JournalWriter::record`] does; the future resolves
    /// once it is stored (`Ok`) or refused (`Err` with why).
    pub fn stored(
        &self,
        report: Report,
        meta: RecordMeta,
    ) -> impl Future<Output = std::result::Result<(), String>> + Send + 'static {
        let (told, stored) = tokio::sync::oneshot::channel();
        self.record_then(report, meta, move |r| {
            let _ = told.send(r);
        });
        async move {
            stored
                .await
                .unwrap_or_else(|_| Err("the journal writer stopped".to_owned()))
        }
    }

    /// Waits until everything queued is written and says what was.
    pub fn finish(self) -> Written {
        if let Some(writers) = WRITERS
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .as_mut()
        {
            // Another writer of the same journal may have taken the place since.
            for mine in [key(&self.path), self.path.clone()] {
                if writers.get(&mine).is_some_and(|(n, _)| *n == self.number) {
                    writers.remove(&mine);
                }
            }
        }
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
            delegate_version: None,
            attempts: Vec::new(),
            error: None,
            delivered: None,
            warnings: Vec::new(),
            events: Vec::new(),
            debt: Vec::new(),
            started_at: std::time::SystemTime::now(),
            duration: Duration::ZERO,
            trace_id: None,
            parent_id: None,
            carried: Vec::new(),
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

    /// A writer held up (here by another process's lock on the journal) holds back whoever
    /// records next, instead of queueing without end; once it goes on, everything is written.
    #[test]
    fn a_writer_held_up_holds_back_whoever_records_instead_of_queueing_without_end() {
        use std::sync::Arc;
        use std::sync::atomic::{AtomicUsize, Ordering};

        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("runs.db");
        let writer = Arc::new(JournalWriter::start(&path).expect("start"));
        let lock = rusqlite::Connection::open(&path).expect("open");
        lock.execute_batch("BEGIN EXCLUSIVE").expect("lock");
        let total = QUEUE + MAX_BATCH + 200;
        let queued = Arc::new(AtomicUsize::new(0));
        let recorder = {
            let (writer, queued) = (Arc::clone(&writer), Arc::clone(&queued));
            std::thread::spawn(move || {
                for i in 0..total {
                    writer.record(report(&format!("d-{i}")), RecordMeta::default());
                    queued.fetch_add(1, Ordering::SeqCst);
                }
            })
        };
        let deadline = std::time::Instant::now() + Duration::from_secs(3);
        while queued.load(Ordering::SeqCst) < QUEUE && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        // Queueing the rest would take microseconds; a bounded queue makes it wait.
        std::thread::sleep(Duration::from_millis(300));
        let held = queued.load(Ordering::SeqCst);
        assert!(
            (QUEUE..=QUEUE + MAX_BATCH + 1).contains(&held),
            "{held} of {total} queued while the writer was held up"
        );
        lock.execute_batch("COMMIT").expect("unlock");
        recorder.join().expect("the recorder");
        let writer = Arc::into_inner(writer).expect("the only owner");
        let written = writer.finish();
        assert_eq!((written.recorded, written.failures.len()), (total, 0));
    }

    #[test]
    fn record_then_says_when_the_record_is_stored_or_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("runs.db");
        let writer = JournalWriter::start(&path).expect("start");
        let (tx, rx) = mpsc::channel();
        let told = tx.clone();
        writer.record_then(report("d-1"), RecordMeta::default(), move |r| {
            told.send(("d-1", r)).expect("send");
        });
        let (id, stored) = rx.recv().expect("told");
        assert_eq!((id, stored), ("d-1", Ok(())));
        // Readable by then, from another connection.
        let journal = Journal::open_read_only(&path).expect("read");
        assert!(journal.get("d-1").expect("get").is_some());
        writer.record_then(report("d-1"), RecordMeta::default(), move |r| {
            tx.send(("again", r)).expect("send");
        });
        let (id, refused) = rx.recv().expect("told");
        assert_eq!(id, "again");
        assert!(refused.is_err(), "{refused:?}");
        assert_eq!(writer.finish().recorded, 1);
    }

    #[tokio::test]
    async fn a_start_is_in_the_journal_once_its_future_resolves() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("runs.db");
        let writer = JournalWriter::start(&path).expect("start");
        let start = |id: &str| Started {
            id: id.to_owned(),
            started_at: std::time::SystemTime::now(),
            delegate_kind: "scripted".to_owned(),
            source: dir.path().join("delegation.yaml"),
            workdir: dir.path().to_path_buf(),
            unconfined: false,
            parent_id: None,
        };
        JournalWriter::begin(&path, start("d-00000000000000aa"))
            .expect("the writer takes it")
            .await;
        let journal = Journal::open_read_only(&path).expect("read");
        assert!(journal.get("d-00000000000000aa").expect("get").is_some());
        assert!(
            JournalWriter::begin(&dir.path().join("other.db"), start("d-00000000000000bb"))
                .is_none(),
            "a journal without a writer is the caller's to write"
        );
        writer.finish();
    }
}
