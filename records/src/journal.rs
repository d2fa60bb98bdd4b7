//! The run journal: every finished delegation, whatever its outcome, in an embedded SQLite
//! database (`.harness/runs.db` by default).
//!
//! Each delegation is written in one transaction, the database runs in WAL mode, and the schema
//! is versioned with `PRAGMA user_version` and migrated forward when opened, so a crash mid-run
//! never damages earlier records and an old journal keeps working after an upgrade.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use harness::{ErrorKind, Evidence, RETRY_TEMPLATE_VERSION, Usage, Verdict};

use crate::error::{Error, Result};
use rusqlite::{
    Connection, OpenFlags, OptionalExtension as _, TransactionBehavior, params, params_from_iter,
};
use serde_json::{Map, Value, json};

/// The schema, one migration per version, applied in order: `MIGRATIONS[n]` takes a journal
/// from version `n` to `n + 1`. Append new versions; never edit a released one.
const MIGRATIONS: &[&str] = &[
    // Version 1: delegations and their attempts. Reasons are a JSON array of strings.
    "CREATE TABLE delegations (
        id TEXT PRIMARY KEY NOT NULL,
        started_at_ms INTEGER NOT NULL,
        duration_ms INTEGER NOT NULL,
        delegate_kind TEXT NOT NULL,
        model TEXT,
        outcome TEXT NOT NULL,
        error_kind TEXT,
        error_message TEXT,
        attempts INTEGER NOT NULL,
        input_tokens INTEGER NOT NULL,
        output_tokens INTEGER NOT NULL,
        requests INTEGER NOT NULL,
        trace_id TEXT,
        retry_template_version TEXT NOT NULL,
        source TEXT,
        workdir TEXT,
        recorded_at_ms INTEGER NOT NULL
    );
    CREATE INDEX delegations_started_at ON delegations (started_at_ms);
    CREATE INDEX delegations_kind ON delegations (delegate_kind, started_at_ms);
    CREATE TABLE attempts (
        delegation_id TEXT NOT NULL REFERENCES delegations (id) ON DELETE CASCADE,
        attempt INTEGER NOT NULL,
        passed INTEGER,
        reasons TEXT NOT NULL,
        duration_ms INTEGER NOT NULL,
        input_tokens INTEGER NOT NULL,
        output_tokens INTEGER NOT NULL,
        requests INTEGER NOT NULL,
        PRIMARY KEY (delegation_id, attempt)
    );",
    // Version 2: the whole run. The request as it ran and each attempt's result, verdict and
    // retry prompt, as JSON (secrets scrubbed before they get here); the run's warnings.
    "ALTER TABLE delegations ADD COLUMN request TEXT;
    ALTER TABLE delegations ADD COLUMN warnings TEXT;
    ALTER TABLE attempts ADD COLUMN result TEXT;
    ALTER TABLE attempts ADD COLUMN verdict TEXT;
    ALTER TABLE attempts ADD COLUMN retry_prompt TEXT;",
    // Version 3: the run's events (DESIGN §4.12), a JSON array in order of `seq`.
    "ALTER TABLE delegations ADD COLUMN events TEXT;",
    // Version 4: human authority (DESIGN §4.11). The audit log is append-only and hash-chained:
    // `hash = sha256(prev_hash ‖ entry)`, `entry` the canonical JSON of the row. An override
    // adds a final state to a run (at most one per run) and points at its audit row.
    "CREATE TABLE audit_log (
        seq INTEGER PRIMARY KEY NOT NULL,
        entry TEXT NOT NULL,
        prev_hash TEXT NOT NULL,
        hash TEXT NOT NULL
    );
    CREATE TABLE overrides (
        delegation_id TEXT PRIMARY KEY NOT NULL REFERENCES delegations (id),
        user TEXT NOT NULL,
        override_type TEXT NOT NULL,
        decision TEXT NOT NULL,
        reason TEXT,
        at_ms INTEGER NOT NULL,
        previous_state TEXT NOT NULL,
        audit_seq INTEGER NOT NULL REFERENCES audit_log (seq)
    );",
    // Version 5: the run's seal (DESIGN §4.13): sha256 of its export's canonical JSON, stored
    // when the run is recorded and again when an override adds its decision.
    "ALTER TABLE delegations ADD COLUMN seal TEXT;",
    // Version 6: each attempt's unified diffs of what the delegation had changed, as a JSON
    // list, for the review page.
    "ALTER TABLE attempts ADD COLUMN diff TEXT;",
    // Version 7: delegation trees (DESIGN §9): the run each was delegated from, indexed, so a
    // tree is read without looking into every attempt.
    "ALTER TABLE delegations ADD COLUMN parent_id TEXT;
    CREATE INDEX delegations_parent ON delegations (parent_id);
    UPDATE delegations SET parent_id = (
        SELECT json_extract(a.result, '$.parent_id') FROM attempts a
        WHERE a.delegation_id = delegations.id AND a.result IS NOT NULL
        ORDER BY a.attempt DESC LIMIT 1);",
    // Version 8: of the input tokens, those the provider read from its prompt cache.
    "ALTER TABLE delegations ADD COLUMN cached_input_tokens INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE attempts ADD COLUMN cached_input_tokens INTEGER NOT NULL DEFAULT 0;",
];

/// The CPU milliseconds of a `delegations` row's checks and holdouts, summed from its recorded
/// events (`CheckCompleted`/`HoldoutCompleted` `cpu_ms`), as an SQL expression.
macro_rules! check_cpu_sql {
    () => {
        "(SELECT COALESCE(SUM(json_extract(e.value, '$.cpu_ms')), 0) FROM json_each(
            CASE WHEN json_valid(delegations.events) THEN delegations.events ELSE '[]' END) e
            WHERE json_extract(e.value, '$.type') IN ('CheckCompleted', 'HoldoutCompleted'))"
    };
}

/// The schema version this build writes.
pub const SCHEMA_VERSION: u32 = MIGRATIONS.len() as u32;

/// How long a writer waits for another process holding the database lock.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// A run that has started, as [`Journal::begin`] writes it (paths made absolute).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Started {
    /// Its id.
    pub id: String,
    /// When it started.
    pub started_at: SystemTime,
    /// Its delegate kind.
    pub delegate_kind: String,
    /// The delegation file it was read from.
    pub source: PathBuf,
    /// The workspace it runs in.
    pub workdir: PathBuf,
    /// Its delegate's programs run unconfined: an override recorded meanwhile is suspect.
    pub unconfined: bool,
    /// The run it was delegated from.
    pub parent_id: Option<String>,
}

impl From<&harness::RunStarted<'_>> for Started {
    fn from(run: &harness::RunStarted<'_>) -> Self {
        let absolute = |p: &Path| std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf());
        Started {
            id: run.id.to_owned(),
            started_at: run.started_at,
            delegate_kind: run.delegate_kind.to_owned(),
            source: absolute(run.source),
            workdir: absolute(run.workdir),
            unconfined: run.unconfined,
            parent_id: run.parent_id.map(str::to_owned),
        }
    }
}

/// What the [`Report`] does not know about its delegation and the journal records beside it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecordMeta {
    /// The delegation file it was read from.
    pub source: Option<PathBuf>,
    /// The workspace root it ran in.
    pub workdir: Option<PathBuf>,
}

impl From<&harness::CarriedRun> for RecordMeta {
    fn from(run: &harness::CarriedRun) -> Self {
        RecordMeta {
            source: Some(run.source.clone()),
            workdir: Some(run.workdir.clone()),
        }
    }
}

/// What a running row's `error_message` holds: which process runs it (its pid and start time,
/// so a reused pid is not taken for it).
const RUNNING_IN: &str = "running in process ";

fn running_mark(unconfined: bool) -> String {
    // This process's pid and start never change: read once, not once a run.
    static OURS: std::sync::OnceLock<(u32, u64)> = std::sync::OnceLock::new();
    let (pid, start) = *OURS.get_or_init(|| {
        let pid = std::process::id();
        (pid, process_start(pid).unwrap_or(0))
    });
    format!(
        "{RUNNING_IN}{pid} started at {start}{}",
        if unconfined { UNCONFINED } else { "" }
    )
}

/// Appended to a running row's mark when its delegate runs programs unconfined.
const UNCONFINED: &str = ", commands unconfined";

/// The runs in the journal still running with unconfined commands (their process alive):
/// what could have written the journal, so an override recorded now is suspect.
pub(crate) fn unconfined_running(conn: &Connection) -> rusqlite::Result<Vec<String>> {
    let mut statement =
        conn.prepare_cached("SELECT id, error_message FROM delegations WHERE outcome = 'running'")?;
    let rows = statement.query_map([], |row| {
        Ok((row.get::<_, String>(0)?, row.get::<_, Option<String>>(1)?))
    })?;
    let mut running = Vec::new();
    for row in rows {
        let (id, mark) = row?;
        if mark
            .as_deref()
            .is_some_and(|m| m.ends_with(UNCONFINED) && still_running(m))
        {
            running.push(id);
        }
    }
    Ok(running)
}

/// When process `pid` started, in clock ticks since boot (`/proc/PID/stat`, field 22).
fn process_start(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// True when the process a running row names is still running it.
fn still_running(mark: &str) -> bool {
    running_in(mark).is_some_and(|(pid, start)| process_start(pid) == Some(start))
}

/// The process (pid, start time) a running row's mark names.
fn running_in(mark: &str) -> Option<(u32, u64)> {
    let (pid, start) = mark
        .strip_prefix(RUNNING_IN)?
        .trim_end_matches(UNCONFINED)
        .split_once(" started at ")?;
    Some((pid.parse().ok()?, start.parse().ok()?))
}

/// Which records [`Journal::list`] returns.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Filter {
    /// Only delegations that started at or after this time.
    pub since: Option<SystemTime>,
    /// Only delegate kinds matching this glob (`*`, `?`, `[...]`; case-sensitive).
    pub kind_glob: Option<String>,
    /// At most this many records, newest first.
    pub limit: Option<usize>,
}

/// One attempt as the journal holds it.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordedAttempt {
    /// The attempt index, from 0.
    pub attempt: u32,
    /// Whether it passed verification; `None` when it was not verified (nothing configured, or it
    /// ended in an error first).
    pub passed: Option<bool>,
    /// Why it failed verification, each prefixed by its source (`verify: …`, `hook NAME: …`).
    pub reasons: Vec<String>,
    /// How long it took.
    pub duration: Duration,
    /// Tokens it cost.
    pub usage: Usage,
    /// What it produced (the `harness run --json` `result` shape); for the last attempt, the
    /// result as `delegation.post` hooks delivered it. `None` when it produced nothing, or in
    /// records from before schema version 2.
    pub result: Option<Value>,
    /// The pipeline's verdict on it (DESIGN §4.3: attempt, decision, findings, evidence,
    /// critic, logs).
    pub verdict: Option<Verdict>,
    /// A verdict this build cannot read (written by another build: a finding source it does
    /// not know, say), kept as stored and shown as it is; readers that need a typed verdict
    /// fall back to `reasons`. A journal outlives the build that wrote it.
    pub unread_verdict: Option<Value>,
    /// The retry prompt sent after it.
    pub retry_prompt: Option<String>,
    /// Unified diffs of the text files the delegation had changed by its end (empty in records
    /// from before schema version 6).
    pub diff: Vec<String>,
}

/// One delegation as the journal holds it.
///
/// Outcome and error kind are kept as their strings (`passed`, `verification_failed`, …) rather
/// than enums: a journal outlives the build that wrote it and may hold kinds this build does not
/// know.
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    /// The delegation id.
    pub id: String,
    /// When it started.
    pub started_at: SystemTime,
    /// How long it took.
    pub duration: Duration,
    /// The delegate kind (`scripted`, `openai`, `command`, …).
    pub delegate_kind: String,
    /// The model, when the delegate has one.
    pub model: Option<String>,
    /// `passed`, `skipped`, `failed` or `error`.
    pub outcome: String,
    /// The error kind for `failed` and `error` outcomes (`verification_failed`, `verifier`, …).
    pub error_kind: Option<String>,
    /// The error message.
    pub error_message: Option<String>,
    /// Every attempt, in order.
    pub attempts: Vec<RecordedAttempt>,
    /// Tokens the whole delegation cost.
    pub usage: Usage,
    /// The trace id, when traces were exported.
    pub trace_id: Option<String>,
    /// The retry template version in force.
    pub retry_template_version: String,
    /// The delegation file.
    pub source: Option<String>,
    /// The workspace root.
    pub workdir: Option<String>,
    /// The request as it ran (the `delegation.pre` payload: task, delegate, tools, args,
    /// max_verify_retries). `None` in records from before schema version 2.
    pub request: Option<Value>,
    /// What the run wanted a human to know.
    pub warnings: Vec<String>,
    /// What happened, in order (DESIGN §4.12); empty in records from before schema version 3.
    pub events: Vec<Value>,
    /// A human's decision on the run (`approved` or `rejected`, by `harness override`).
    pub decision: Option<String>,
    /// The seal of its export as stored when it was recorded (DESIGN §4.13); `None` in records
    /// from before schema version 5.
    pub seal: Option<String>,
    /// The run it was delegated from, as recorded (schema 7); `None` for a root.
    pub parent: Option<String>,
}

/// One run of a delegation tree, as [`Journal::tree`] reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TreeNode {
    /// The run's id.
    pub id: String,
    /// Its outcome as recorded (`running` while it runs).
    pub outcome: String,
    /// Its error kind, for `failed` and `error`.
    pub error_kind: Option<String>,
    /// Attempts it made.
    pub attempts: u64,
    /// Its task.
    pub task: Option<String>,
    /// Tokens its own turns and critic spent, as its record counts them.
    pub usage: Usage,
    /// How long it ran.
    pub duration: Duration,
    /// CPU time of its own checks and holdouts (their `cpu_ms`), in milliseconds.
    pub check_cpu_ms: u64,
    /// The runs it delegated to, oldest first.
    pub children: Vec<TreeNode>,
}

impl TreeNode {
    /// As JSON: `{id, outcome, kind, attempts, task, usage, duration_ms, check_cpu_ms,
    /// children}`, `usage` and `check_cpu_ms` its own.
    pub fn to_json(&self) -> Value {
        json!({
            "id": self.id,
            "outcome": self.outcome,
            "kind": self.error_kind,
            "attempts": self.attempts,
            "task": self.task,
            "usage": {
                "input_tokens": self.usage.input_tokens,
                "cached_input_tokens": self.usage.cached_input_tokens,
                "output_tokens": self.usage.output_tokens,
            },
            "duration_ms": millis(self.duration),
            "check_cpu_ms": self.check_cpu_ms,
            "children": self.children.iter().map(TreeNode::to_json).collect::<Vec<_>>(),
        })
    }

    /// The run `id` and everything under it, when it is in this tree.
    pub fn find(&self, id: &str) -> Option<&TreeNode> {
        if self.id == id {
            return Some(self);
        }
        self.children.iter().find_map(|child| child.find(id))
    }

    /// Tokens and check CPU milliseconds this run and every run under it spent, and how many
    /// runs that is.
    pub fn subtree(&self) -> (Usage, u64, u64) {
        let mut usage = self.usage;
        let mut cpu = self.check_cpu_ms;
        let mut runs = 1;
        for child in &self.children {
            let (theirs, their_cpu, count) = child.subtree();
            usage.add(theirs);
            cpu = cpu.saturating_add(their_cpu);
            runs += count;
        }
        (usage, cpu, runs)
    }

    /// The tree as lines, one per run, drawn with `├─`/`└─`; the run `marked` says so.
    pub fn lines(&self, marked: &str) -> Vec<String> {
        let mut lines = Vec::new();
        self.draw("", "", marked, &mut lines);
        lines
    }

    fn draw(&self, lead: &str, rest: &str, marked: &str, lines: &mut Vec<String>) {
        let outcome = match &self.error_kind {
            Some(kind) => format!("{} ({kind})", self.outcome),
            None => self.outcome.clone(),
        };
        let plural = if self.attempts == 1 { "" } else { "s" };
        let task: String = self
            .task
            .as_deref()
            .unwrap_or_default()
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        let task = if task.chars().count() > 60 {
            format!("{}...", task.chars().take(60).collect::<String>())
        } else {
            task
        };
        let here = if self.id == marked {
            "  <- this run"
        } else {
            ""
        };
        lines.push(format!(
            "{lead}{} {outcome}, {} attempt{plural}: {task}{here}",
            self.id, self.attempts
        ));
        for (i, child) in self.children.iter().enumerate() {
            let last = i + 1 == self.children.len();
            let (branch, next) = if last {
                ("└─ ", "   ")
            } else {
                ("├─ ", "│  ")
            };
            child.draw(
                &format!("{rest}{branch}"),
                &format!("{rest}{next}"),
                marked,
                lines,
            );
        }
    }
}

impl RecordedAttempt {
    /// The evidence records of its verdict (DESIGN §4.7); empty when it has none.
    pub fn evidence(&self) -> &[Evidence] {
        self.verdict
            .as_ref()
            .map(|v| v.evidence.as_slice())
            .unwrap_or_default()
    }
}

impl Record {
    /// The run this one was delegated from (`parent_id`, DESIGN §4.9), as its Results say.
    pub fn parent_id(&self) -> Option<&str> {
        self.parent.as_deref().or_else(|| {
            self.attempts
                .iter()
                .rev()
                .find_map(|a| a.result.as_ref()?.get("parent_id")?.as_str())
        })
    }

    /// Returns the 1-based attempt that passed, for `passed` outcomes.
    pub fn passed_on(&self) -> Option<usize> {
        if self.outcome != "passed" {
            return None;
        }
        self.attempts
            .iter()
            .position(|a| a.passed == Some(true))
            .map(|i| i + 1)
            .or(Some(self.attempts.len()))
            .filter(|&n| n > 0)
    }

    /// Returns the record as JSON (`harness runs show --json`).
    pub fn to_json(&self) -> Value {
        self.clone().into_json()
    }

    /// [`Record::to_json`] of a record no longer needed: its stored JSON values are moved in,
    /// not copied. Built member by member: `json!` would copy each stored JSON value by
    /// serialising it again.
    pub fn into_json(self) -> Value {
        let parent_id = self.parent_id().map(str::to_owned);
        let mut object = Map::new();
        let mut put = |key: &str, value: Value| {
            object.insert(key.to_owned(), value);
        };
        let text = |s: Option<String>| s.map_or(Value::Null, Value::String);
        put("id", Value::String(self.id));
        put(
            "started_at",
            Value::String(humantime::format_rfc3339_millis(self.started_at).to_string()),
        );
        put("duration_ms", json!(millis(self.duration)));
        put(
            "delegate",
            json!({"kind": self.delegate_kind, "model": self.model}),
        );
        put("outcome", Value::String(self.outcome));
        put("parent_id", json!(parent_id));
        put(
            "error",
            self.error_kind.map_or(
                Value::Null,
                |kind| json!({"kind": kind, "message": self.error_message}),
            ),
        );
        put("request", self.request.unwrap_or(Value::Null));
        let attempts = Value::Array(
            self.attempts
                .into_iter()
                .map(RecordedAttempt::into_json)
                .collect(),
        );
        put(
            "children",
            Value::Array(crate::export::children_of(&attempts)),
        );
        put("attempts", attempts);
        put("usage", usage_json(self.usage));
        put("trace_id", text(self.trace_id));
        put(
            "retry_template_version",
            Value::String(self.retry_template_version),
        );
        put("source", text(self.source));
        put("workdir", text(self.workdir));
        put("warnings", json!(self.warnings));
        put("events", Value::Array(self.events));
        put("seal", text(self.seal));
        Value::Object(object)
    }
}

impl RecordedAttempt {
    /// One attempt as [`Record::to_json`] shows it, its values moved in.
    fn into_json(self) -> Value {
        let mut object = Map::new();
        object.insert("attempt".to_owned(), json!(self.attempt));
        object.insert("passed".to_owned(), json!(self.passed));
        object.insert("reasons".to_owned(), json!(self.reasons));
        object.insert("duration_ms".to_owned(), json!(millis(self.duration)));
        object.insert("usage".to_owned(), usage_json(self.usage));
        object.insert("result".to_owned(), self.result.unwrap_or(Value::Null));
        object.insert(
            "verdict".to_owned(),
            match &self.verdict {
                Some(verdict) => serde_json::to_value(verdict).unwrap_or(Value::Null),
                None => self.unread_verdict.unwrap_or(Value::Null),
            },
        );
        object.insert(
            "retry_prompt".to_owned(),
            self.retry_prompt.map_or(Value::Null, Value::String),
        );
        if !self.diff.is_empty() {
            object.insert("diff".to_owned(), Value::from(self.diff));
        }
        Value::Object(object)
    }
}

/// Tokens as an export has them (the cached share only when there is one).
fn usage_json(usage: Usage) -> Value {
    serde_json::to_value(crate::export::Tokens::of(usage)).unwrap_or(Value::Null)
}

/// Returns whole milliseconds, saturating.
pub(crate) fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// Returns milliseconds since the Unix epoch (negative before it).
pub(crate) fn unix_millis(t: SystemTime) -> i64 {
    match t.duration_since(UNIX_EPOCH) {
        Ok(after) => millis(after),
        Err(before) => millis(before.duration()).saturating_neg(),
    }
}

pub(crate) fn from_unix_millis(ms: i64) -> SystemTime {
    let magnitude = Duration::from_millis(ms.unsigned_abs());
    if ms >= 0 {
        UNIX_EPOCH + magnitude
    } else {
        UNIX_EPOCH - magnitude
    }
}

pub(crate) fn tokens(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

pub(crate) fn count(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}

/// An open run journal.
#[derive(Debug)]
pub struct Journal {
    pub(crate) conn: Connection,
    pub(crate) path: PathBuf,
}

impl Journal {
    /// Opens the journal at `path`, creating it and its parent directories when missing, and
    /// migrates its schema forward to [`SCHEMA_VERSION`].
    ///
    /// # Errors
    /// [`ErrorKind::Journal`](crate::ErrorKind::Journal) when the directory or database cannot be
    /// created or opened, when it is not a SQLite database, or when it was written by a newer
    /// harness (schema version above [`SCHEMA_VERSION`]).
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).map_err(|e| {
                Error::journal(format!(
                    "journal {}: cannot create the directory {}: {e}",
                    path.display(),
                    parent.display()
                ))
            })?;
        }
        let conn = Connection::open(path).map_err(|e| sql_error(path, "cannot open", &e))?;
        let mut journal = Journal {
            conn,
            path: path.to_path_buf(),
        };
        journal.configure()?;
        journal.migrate()?;
        Ok(journal)
    }

    /// Opens the journal at `path` for reading only: nothing is created, migrated or written
    /// (`harness report`, `harness runs`). A journal from an older harness is read as it is.
    ///
    /// # Errors
    /// [`ErrorKind::Journal`](crate::ErrorKind::Journal) when there is no file at `path`, when
    /// it is not a SQLite database (or a damaged one), or when a newer harness wrote it.
    pub fn open_read_only(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        if !path.is_file() {
            return Err(Error::journal(format!(
                "no run journal at {} (`harness run` and `harness batch` record one; pass --journal PATH or set HARNESS_JOURNAL to read another)",
                path.display()
            )));
        }
        let conn = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(|e| sql_error(path, "cannot open", &e))?;
        let journal = Journal {
            conn,
            path: path.to_path_buf(),
        };
        journal
            .conn
            .busy_timeout(BUSY_TIMEOUT)
            .map_err(|e| journal.error("cannot set the busy timeout of", &e))?;
        // Reading the version is the first read: a file that is not a database fails here.
        let version = journal.schema_version()?;
        if version > SCHEMA_VERSION {
            return Err(newer_error(path, version));
        }
        if version == 0 {
            return Err(Error::journal(format!(
                "journal {}: the file is an empty database, not a run journal; pass --journal with the journal's path",
                path.display()
            )));
        }
        Ok(journal)
    }

    /// Returns where the journal lives.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Returns the schema version of the open database.
    ///
    /// # Errors
    /// [`ErrorKind::Journal`](crate::ErrorKind::Journal) when it cannot be read.
    pub fn schema_version(&self) -> Result<u32> {
        user_version(&self.conn).map_err(|e| self.error("cannot read the schema version of", &e))
    }

    fn error(&self, what: &str, e: &rusqlite::Error) -> Error {
        sql_error(&self.path, what, e)
    }

    fn configure(&mut self) -> Result<()> {
        self.conn
            .busy_timeout(BUSY_TIMEOUT)
            .map_err(|e| self.error("cannot set the busy timeout of", &e))?;
        // WAL: readers never block the writer, and a crash mid-write leaves committed records
        // intact. The pragma answers with the mode now in force.
        let mode: String = self
            .conn
            .pragma_update_and_check(None, "journal_mode", "WAL", |row| row.get(0))
            .map_err(|e| self.error("cannot switch to WAL mode", &e))?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(Error::journal(format!(
                "journal {}: SQLite refused WAL mode (it is in {mode} mode); put the journal on a local file system",
                self.path.display()
            )));
        }
        // In WAL mode NORMAL never corrupts the database; a power loss may only drop the last
        // commits. It saves an fsync per record, which matters for batches.
        self.conn
            .pragma_update(None, "synchronous", "NORMAL")
            .map_err(|e| self.error("cannot set the sync mode of", &e))?;
        // The journal is written far more than read: a 256 KiB page cache (SQLite's default is
        // 2 MiB) is plenty and keeps the memory of long batches down.
        self.conn
            .pragma_update(None, "cache_size", -256)
            .map_err(|e| self.error("cannot set the cache size of", &e))?;
        self.conn
            .pragma_update(None, "foreign_keys", true)
            .map_err(|e| self.error("cannot enable foreign keys in", &e))?;
        Ok(())
    }

    fn migrate(&mut self) -> Result<()> {
        let current = self.schema_version()?;
        if current > SCHEMA_VERSION {
            return Err(newer_error(&self.path, current));
        }
        if current == SCHEMA_VERSION {
            return Ok(());
        }
        // IMMEDIATE takes the write lock first, so two processes opening an old journal at once
        // migrate it once: the second re-reads the version under the lock.
        let path = self.path.clone();
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(|e| sql_error(&path, "cannot lock for migration", &e))?;
        let current = user_version(&tx).map_err(|e| sql_error(&path, "cannot read", &e))?;
        if current > SCHEMA_VERSION {
            return Err(newer_error(&path, current));
        }
        for (index, migration) in MIGRATIONS.iter().enumerate().skip(current as usize) {
            let version = index + 1;
            tx.execute_batch(migration).map_err(|e| {
                sql_error(
                    &path,
                    &format!("cannot migrate to schema version {version}"),
                    &e,
                )
            })?;
        }
        tx.pragma_update(None, "user_version", SCHEMA_VERSION)
            .map_err(|e| sql_error(&path, "cannot set the schema version of", &e))?;
        tx.commit()
            .map_err(|e| sql_error(&path, "cannot commit the migration of", &e))?;
        Ok(())
    }

    /// Writes the rows of runs that have started (outcome `running`, naming this process), in
    /// one transaction, so that a run whose process dies before [`Journal::record`] is found:
    /// readers show it as `error`, kind `interrupted`, once that process is gone (DESIGN §5).
    /// [`Journal::record`] replaces it. A row already there (the run recorded) is left alone.
    ///
    /// # Errors
    /// [`ErrorKind::Journal`](crate::ErrorKind::Journal) when the write fails; then none is
    /// written.
    pub fn begin(&mut self, runs: &[Started]) -> Result<()> {
        let path = self.path.clone();
        let write = |e: rusqlite::Error| sql_error(&path, "cannot write the start of a run to", &e);
        let tx = self
            .conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .map_err(write)?;
        {
            let mut insert = tx
                .prepare_cached(
                    "INSERT OR IGNORE INTO delegations (id, started_at_ms, duration_ms, delegate_kind,
                        outcome, error_message, attempts, input_tokens, output_tokens, requests,
                        retry_template_version, source, workdir, recorded_at_ms, parent_id)
                     VALUES (?1, ?2, 0, ?3, 'running', ?4, 0, 0, 0, 0, ?5, ?6, ?7, ?8, ?9)",
                )
                .map_err(write)?;
            for run in runs {
                insert
                    .execute(params![
                        run.id,
                        unix_millis(run.started_at),
                        run.delegate_kind,
                        running_mark(run.unconfined),
                        RETRY_TEMPLATE_VERSION,
                        run.source.display().to_string(),
                        run.workdir.display().to_string(),
                        unix_millis(SystemTime::now()),
                        run.parent_id,
                    ])
                    .map_err(write)?;
            }
        }
        tx.commit().map_err(write)
    }

    /// Returns the records matching `filter`, newest first.
    ///
    /// # Errors
    /// [`ErrorKind::Journal`](crate::ErrorKind::Journal) when the journal cannot be read.
    pub fn list(&self, filter: &Filter) -> Result<Vec<Record>> {
        let mut clauses = Vec::new();
        let mut values: Vec<rusqlite::types::Value> = Vec::new();
        if let Some(since) = filter.since {
            values.push(unix_millis(since).into());
            clauses.push(format!("started_at_ms >= ?{}", values.len()));
        }
        if let Some(glob) = &filter.kind_glob {
            values.push(glob.clone().into());
            clauses.push(format!("delegate_kind GLOB ?{}", values.len()));
        }
        let mut sql = String::from("SELECT * FROM delegations");
        if !clauses.is_empty() {
            sql.push_str(" WHERE ");
            sql.push_str(&clauses.join(" AND "));
        }
        sql.push_str(" ORDER BY started_at_ms DESC, id DESC");
        if let Some(limit) = filter.limit {
            sql.push_str(&format!(
                " LIMIT {}",
                i64::try_from(limit).unwrap_or(i64::MAX)
            ));
        }
        self.query(&sql, params_from_iter(values))
    }

    /// Returns the record with this id, or `None` when there is none.
    ///
    /// # Errors
    /// [`ErrorKind::Journal`](crate::ErrorKind::Journal) when the journal cannot be read.
    pub fn get(&self, id: &str) -> Result<Option<Record>> {
        Ok(self
            .query("SELECT * FROM delegations WHERE id = ?1", params![id])?
            .into_iter()
            .next())
    }

    /// Returns true when the journal holds the record of the run with this id (reading nothing
    /// else of it); a run that has only started is not recorded yet.
    ///
    /// # Errors
    /// [`ErrorKind::Journal`](crate::ErrorKind::Journal) when the journal cannot be read.
    pub fn contains(&self, id: &str) -> Result<bool> {
        // A row written when the run started is not its record (the run replaces it).
        self.conn
            .prepare_cached("SELECT 1 FROM delegations WHERE id = ?1 AND outcome != 'running'")
            .and_then(|mut statement| statement.exists(params![id]))
            .map_err(|e| self.error("cannot read", &e))
    }

    /// The seal stored for run `id`, when it is recorded and sealed.
    ///
    /// # Errors
    /// [`ErrorKind::Journal`](crate::ErrorKind::Journal) when the journal cannot be read.
    pub fn seal_of(&self, id: &str) -> Result<Option<String>> {
        self.conn
            .prepare_cached("SELECT seal FROM delegations WHERE id = ?1")
            .and_then(|mut statement| {
                statement
                    .query_row(params![id], |row| row.get(0))
                    .optional()
            })
            .map(Option::flatten)
            .map_err(|e| self.error("cannot read", &e))
    }

    /// The runs whose Result names `id` as their parent (`parent_id`), oldest first: their ids
    /// and outcomes.
    ///
    /// # Errors
    /// [`ErrorKind::Journal`](crate::ErrorKind::Journal) when the journal cannot be read.
    pub fn children(&self, id: &str) -> Result<Vec<(String, String)>> {
        self.children_rows(id)
            .map_err(|e| self.error("cannot read", &e))
    }

    fn children_rows(&self, id: &str) -> rusqlite::Result<Vec<(String, String)>> {
        // An older journal opened read-only has no `parent_id` column: its Results say.
        let mut statement = self
            .conn
            .prepare_cached(if user_version(&self.conn)? >= 7 {
                "SELECT id, outcome FROM delegations WHERE parent_id = ?1
             ORDER BY started_at_ms, id"
            } else {
                "SELECT d.id, d.outcome FROM delegations d
             WHERE EXISTS (SELECT 1 FROM attempts a WHERE a.delegation_id = d.id
                           AND json_extract(a.result, '$.parent_id') = ?1)
             ORDER BY d.started_at_ms, d.id"
            })?;
        let rows = statement.query_map(params![id], |row| Ok((row.get(0)?, row.get(1)?)))?;
        rows.collect()
    }

    /// The delegation tree run `id` belongs to (DESIGN §9), from its root down: each node's
    /// id, outcome, attempts and task, children oldest first. `None` when the journal holds no
    /// such run. A tree deeper or wider than a harness makes is cut, never followed forever.
    ///
    /// # Errors
    /// [`ErrorKind::Journal`](crate::ErrorKind::Journal) when the journal cannot be read.
    pub fn tree(&self, id: &str) -> Result<Option<TreeNode>> {
        const MAX_LEVELS: usize = 16;
        const MAX_NODES: usize = 10_000;
        let read = || -> rusqlite::Result<Option<TreeNode>> {
            let node = |id: &str| self.tree_node(id);
            let Some((mut root, mut parent)) = node(id)? else {
                return Ok(None);
            };
            let mut seen = vec![root.id.clone()];
            while let Some(up) = parent.filter(|_| seen.len() < MAX_LEVELS) {
                match node(&up)? {
                    Some((found, next)) if !seen.contains(&found.id) => {
                        seen.push(found.id.clone());
                        root = found;
                        parent = next;
                    }
                    _ => break,
                }
            }
            let mut budget = MAX_NODES;
            self.grow(&mut root, 0, &mut budget)?;
            Ok(Some(root))
        };
        read().map_err(|e| self.error("cannot read", &e))
    }

    /// One run of a tree, with the run it was delegated from.
    ///
    /// Its check CPU is summed from the recorded events (`check_cpu_sql!`), so a journal of any
    /// version has it (0 for runs recorded before checks' CPU was measured).
    fn tree_node(&self, id: &str) -> rusqlite::Result<Option<(TreeNode, Option<String>)>> {
        let mut statement = self.conn.prepare_cached(match user_version(&self.conn)? {
            8.. => {
                concat!(
                    "SELECT id, outcome, error_kind, attempts, json_extract(request, '$.task'),
                    parent_id, input_tokens, output_tokens, requests, duration_ms,
                    cached_input_tokens, ",
                    check_cpu_sql!(),
                    " FROM delegations WHERE id = ?1"
                )
            }
            7 => {
                concat!(
                    "SELECT id, outcome, error_kind, attempts, json_extract(request, '$.task'),
                    parent_id, input_tokens, output_tokens, requests, duration_ms, 0, ",
                    check_cpu_sql!(),
                    " FROM delegations WHERE id = ?1"
                )
            }
            _ => {
                concat!(
                    "SELECT id, outcome, error_kind, attempts, json_extract(request, '$.task'),
                    NULL, input_tokens, output_tokens, requests, duration_ms, 0, ",
                    check_cpu_sql!(),
                    " FROM delegations WHERE id = ?1"
                )
            }
        })?;
        statement
            .query_row(params![id], |row| {
                Ok((
                    TreeNode {
                        id: row.get(0)?,
                        outcome: row.get(1)?,
                        error_kind: row.get(2)?,
                        attempts: count(row.get(3)?),
                        task: row.get(4)?,
                        usage: Usage {
                            input_tokens: count(row.get(6)?),
                            output_tokens: count(row.get(7)?),
                            requests: count(row.get(8)?),
                            cached_input_tokens: count(row.get(10)?),
                        },
                        duration: Duration::from_millis(count(row.get(9)?)),
                        check_cpu_ms: count(row.get(11)?),
                        children: Vec::new(),
                    },
                    row.get(5)?,
                ))
            })
            .optional()
    }

    /// Adds the children of `node` (and theirs) as the journal records them.
    fn grow(&self, node: &mut TreeNode, level: usize, budget: &mut usize) -> rusqlite::Result<()> {
        if level >= 16 {
            return Ok(());
        }
        for (id, _) in self.children_rows(&node.id)? {
            if *budget == 0 {
                return Ok(());
            }
            *budget -= 1;
            if let Some((mut child, _)) = self.tree_node(&id)? {
                self.grow(&mut child, level + 1, budget)?;
                node.children.push(child);
            }
        }
        Ok(())
    }

    fn query(&self, sql: &str, params: impl rusqlite::Params) -> Result<Vec<Record>> {
        read_records(&self.conn, sql, params).map_err(|e| self.error("cannot read", &e))
    }
}

/// The records `sql` selects from `delegations`, with their attempts and decisions.
fn read_records(
    conn: &Connection,
    sql: &str,
    params: impl rusqlite::Params,
) -> rusqlite::Result<Vec<Record>> {
    let mut statement = conn.prepare(sql)?;
    let rows = statement.query_map(params, record_from_row)?;
    let mut records = rows.collect::<rusqlite::Result<Vec<_>>>()?;
    let mut attempts =
        conn.prepare_cached("SELECT * FROM attempts WHERE delegation_id = ?1 ORDER BY attempt")?;
    for record in &mut records {
        record.attempts = attempts
            .query_map(params![record.id], attempt_from_row)?
            .collect::<rusqlite::Result<Vec<_>>>()?;
    }
    if user_version(conn)? >= 4 {
        let mut decisions =
            conn.prepare_cached("SELECT decision FROM overrides WHERE delegation_id = ?1")?;
        for record in &mut records {
            record.decision = decisions
                .query_row(params![record.id], |row| row.get(0))
                .optional()?;
        }
    }
    Ok(records)
}

/// Stores the seal of run `id`'s export as it now reads: when it is recorded, and when an
/// override adds its decision. Inside the caller's transaction.
pub(crate) fn reseal(conn: &Connection, id: &str) -> rusqlite::Result<()> {
    let Some(record) =
        read_records(conn, "SELECT * FROM delegations WHERE id = ?1", params![id])?.pop()
    else {
        return Ok(());
    };
    // The export carries its seal.
    let export = crate::export::export(&record);
    let seal = export["seal"].as_str().unwrap_or_default();
    conn.prepare_cached("UPDATE delegations SET seal = ?2 WHERE id = ?1")?
        .execute(params![id, seal])?;
    Ok(())
}

fn record_from_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<Record> {
    Ok(interrupted(Record {
        id: row.get("id")?,
        started_at: from_unix_millis(row.get("started_at_ms")?),
        duration: Duration::from_millis(count(row.get("duration_ms")?)),
        delegate_kind: row.get("delegate_kind")?,
        model: row.get("model")?,
        outcome: row.get("outcome")?,
        error_kind: row.get("error_kind")?,
        error_message: row.get("error_message")?,
        attempts: Vec::new(),
        usage: Usage {
            input_tokens: count(row.get("input_tokens")?),
            output_tokens: count(row.get("output_tokens")?),
            requests: count(row.get("requests")?),
            cached_input_tokens: count_column(row, "cached_input_tokens")?,
        },
        trace_id: row.get("trace_id")?,
        retry_template_version: row.get("retry_template_version")?,
        source: row.get("source")?,
        workdir: row.get("workdir")?,
        request: json_column(row, "request")?,
        warnings: json_column(row, "warnings")?.unwrap_or_default(),
        events: json_column(row, "events")?.unwrap_or_default(),
        decision: None,
        seal: text_column(row, "seal")?,
        parent: text_column(row, "parent_id")?,
    }))
}

/// A run whose row says it is running in a process that is gone: it was interrupted (killed,
/// crashed, the machine went down) and is shown as `error`, kind `interrupted`.
fn interrupted(mut record: Record) -> Record {
    if record.outcome == "running" && !record.error_message.as_deref().is_some_and(still_running) {
        let process = record
            .error_message
            .as_deref()
            .and_then(running_in)
            .map_or_else(|| "?".to_owned(), |(pid, _)| pid.to_string());
        record.outcome = "error".to_owned();
        record.error_kind = Some(ErrorKind::Interrupted.as_str().to_owned());
        record.error_message = Some(format!(
            "interrupted: the harness process {process} that ran it ended before it completed (killed, crashed, or the machine went down); nothing after its start was recorded"
        ));
    }
    record
}

/// Reads an optional JSON text column; a column this journal's schema does not have yet (an
/// older journal opened read-only) reads as `None`.
fn json_column<T: serde::de::DeserializeOwned>(
    row: &rusqlite::Row<'_>,
    name: &str,
) -> rusqlite::Result<Option<T>> {
    let Some(text) = text_column(row, name)? else {
        return Ok(None);
    };
    serde_json::from_str(&text).map(Some).map_err(|e| {
        let index = row.as_ref().column_index(name).unwrap_or(0);
        rusqlite::Error::FromSqlConversionFailure(index, rusqlite::types::Type::Text, Box::new(e))
    })
}

/// Reads an optional text column, `None` when the journal's schema does not have it.
/// A count column a journal of an older schema may not have yet (read as 0).
fn count_column(row: &rusqlite::Row<'_>, name: &str) -> rusqlite::Result<u64> {
    match row.get(name) {
        Err(rusqlite::Error::InvalidColumnName(_)) => Ok(0),
        other => other.map(count),
    }
}

fn text_column(row: &rusqlite::Row<'_>, name: &str) -> rusqlite::Result<Option<String>> {
    match row.get(name) {
        Err(rusqlite::Error::InvalidColumnName(_)) => Ok(None),
        other => other,
    }
}

fn attempt_from_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<RecordedAttempt> {
    // Never fails the row: one verdict this build cannot read must not hide every run.
    let (verdict, unread_verdict) = match text_column(row, "verdict")? {
        None => (None, None),
        Some(text) => match serde_json::from_str::<Verdict>(&text) {
            Ok(verdict) => (Some(verdict), None),
            Err(_) => (
                None,
                Some(serde_json::from_str(&text).unwrap_or(Value::String(text))),
            ),
        },
    };
    Ok(RecordedAttempt {
        attempt: row.get("attempt")?,
        passed: row.get("passed")?,
        reasons: json_column(row, "reasons")?.unwrap_or_default(),
        duration: Duration::from_millis(count(row.get("duration_ms")?)),
        usage: Usage {
            input_tokens: count(row.get("input_tokens")?),
            output_tokens: count(row.get("output_tokens")?),
            requests: count(row.get("requests")?),
            cached_input_tokens: count_column(row, "cached_input_tokens")?,
        },
        result: json_column(row, "result")?,
        verdict,
        unread_verdict,
        retry_prompt: text_column(row, "retry_prompt")?,
        diff: json_column(row, "diff")?.unwrap_or_default(),
    })
}

fn user_version(conn: &Connection) -> rusqlite::Result<u32> {
    conn.pragma_query_value(None, "user_version", |row| row.get(0))
}

fn newer_error(path: &Path, version: u32) -> Error {
    Error::journal(format!(
        "journal {}: schema version {version} was written by a newer harness (this one reads up to version {SCHEMA_VERSION}); upgrade harness or pass --journal with another path",
        path.display()
    ))
}

pub(crate) fn sql_error(path: &Path, what: &str, e: &rusqlite::Error) -> Error {
    Error::journal(format!(
        "journal {}: {what} the database: {e}",
        path.display()
    ))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use harness::{
        AttemptRecord, Decision, DelegationResult, ErrorKind, Finding, Outcome, Report, Request,
        Source, Verdict,
    };

    /// A verdict from v1 reason lines (`verify: …`, `hook NAME: …`), for tests of what reads
    /// verdicts.
    pub(crate) fn verdict(attempt: u32, passed: Option<bool>, lines: &[&str]) -> Option<Verdict> {
        let passed = passed?;
        let findings = lines
            .iter()
            .map(|line| {
                let (label, message) = line.split_once(": ").unwrap_or(("verify", line));
                match label.split_once(' ') {
                    Some((_, name)) => Finding::blocking(Source::Hook, name, message),
                    None => Finding::blocking(Source::Verify, "", message),
                }
            })
            .collect();
        Some(Verdict {
            attempt,
            decision: if passed {
                Decision::Pass
            } else {
                Decision::Retry
            },
            findings,
            evidence: Vec::new(),
            critic: None,
            logs: Vec::new(),
            stage_us: std::collections::BTreeMap::new(),
        })
    }

    /// The ids of every record, newest first.
    fn all_ids(journal: &Journal) -> Vec<String> {
        journal
            .list(&Filter::default())
            .expect("list")
            .into_iter()
            .map(|r| r.id)
            .collect()
    }

    fn report(id: &str, outcome: Outcome, attempts: &[(Option<bool>, &[&str])]) -> Report {
        Report {
            id: id.to_owned(),
            request: None,
            outcome,
            delegate_kind: "scripted".to_owned(),
            model: None,
            delegate_version: None,
            attempts: attempts
                .iter()
                .enumerate()
                .map(|(i, (passed, reasons))| AttemptRecord {
                    attempt: i as u32,
                    result: None,
                    verdict: verdict(i as u32, *passed, reasons),
                    retry_prompt: None,
                    diff: Vec::new(),
                    usage: Usage {
                        input_tokens: 10,
                        output_tokens: 5,
                        requests: 1,
                        ..Usage::default()
                    },
                    duration: Duration::from_millis(20),
                })
                .collect(),
            error: match outcome {
                Outcome::Failed(_) => Some(harness::Error::new(
                    ErrorKind::VerificationFailed,
                    "verification failed on all 2 attempts",
                )),
                Outcome::Error(kind) => Some(harness::Error::new(kind, "it broke")),
                _ => None,
            },
            delivered: None,
            warnings: Vec::new(),
            events: Vec::new(),
            debt: Vec::new(),
            started_at: UNIX_EPOCH + Duration::from_secs(1_700_000_000),
            duration: Duration::from_millis(1234),
            trace_id: None,
            parent_id: None,
            carried: Vec::new(),
        }
    }

    /// A run of a tree carried in its root's report (by a queue worker).
    fn carried(id: &str, parent: &str) -> harness::CarriedRun {
        let mut child = report(id, Outcome::Passed, &[(Some(true), &[])]);
        child.parent_id = Some(parent.to_owned());
        harness::CarriedRun {
            source: PathBuf::from("/p/batch.jsonl"),
            workdir: PathBuf::from("/p/ws"),
            report: child,
        }
    }

    #[test]
    fn a_root_is_recorded_with_the_runs_it_carries_each_sealed_as_foretold_or_not_at_all() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut journal = Journal::open(dir.path().join("runs.db")).expect("open");
        let mut root = report("d-root", Outcome::Passed, &[(Some(true), &[])]);
        root.carried = vec![
            carried("d-grandchild", "d-child"),
            carried("d-child", "d-root"),
        ];
        let foretold: Vec<String> = root
            .carried
            .iter()
            .map(|run| crate::seal_of(&run.report, &RecordMeta::from(run)).expect("sealed"))
            .collect();
        let meta = RecordMeta::default();
        journal.record(&root, &meta).expect("record");
        for (run, seal) in root.carried.iter().zip(&foretold) {
            let stored = journal.get(&run.report.id).expect("get").expect("recorded");
            assert_eq!(stored.seal.as_deref(), Some(seal.as_str()));
            assert_eq!(stored.parent, run.report.parent_id);
            assert_eq!(stored.workdir.as_deref(), Some("/p/ws"));
        }

        // A tree one of whose runs cannot be written (its id is taken) is written not at all,
        // while the batch's other records are.
        let mut clash = report("d-root-2", Outcome::Passed, &[(Some(true), &[])]);
        clash.carried = vec![
            carried("d-new-child", "d-root-2"),
            carried("d-child", "d-root-2"),
        ];
        let other = report("d-other", Outcome::Passed, &[(Some(true), &[])]);
        let outcomes = journal
            .record_all([(&clash, &meta), (&other, &meta)])
            .expect("the batch is written");
        assert!(outcomes[0].is_err() && outcomes[1].is_ok(), "{outcomes:?}");
        for id in ["d-root-2", "d-new-child"] {
            assert!(journal.get(id).expect("get").is_none(), "{id} was written");
        }
        assert!(journal.get("d-other").expect("get").is_some());
    }

    #[test]
    fn an_empty_database_migrates_to_the_latest_version() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("nested").join("dir").join("runs.db");
        let journal = Journal::open(&path).expect("open");
        assert_eq!(journal.schema_version().expect("version"), SCHEMA_VERSION);
        assert!(path.is_file());
        let mode: String = journal
            .conn
            .pragma_query_value(None, "journal_mode", |row| row.get(0))
            .expect("journal_mode");
        assert_eq!(mode, "wal");
        assert!(journal.list(&Filter::default()).expect("list").is_empty());
    }

    #[test]
    fn records_round_trip_and_survive_reopening() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("runs.db");
        let meta = RecordMeta {
            source: Some(PathBuf::from("delegation.yaml")),
            workdir: Some(PathBuf::from("/w")),
        };
        let trace_id = "0af7651916cd43dd8448eb211c80319c";
        {
            let mut journal = Journal::open(&path).expect("open");
            let mut first = report(
                "d-1",
                Outcome::Passed,
                &[
                    (Some(false), &["verify: a.txt does not exist"]),
                    (Some(true), &[]),
                ],
            );
            first.trace_id = Some(trace_id.to_owned());
            journal.record(&first, &meta).expect("record");
            journal
                .record(
                    &report("d-2", Outcome::Error(ErrorKind::Verifier), &[(None, &[])]),
                    &RecordMeta::default(),
                )
                .expect("record");
        }
        let journal = Journal::open(&path).expect("reopen");
        assert_eq!(journal.schema_version().expect("version"), SCHEMA_VERSION);
        let one = journal.get("d-1").expect("get").expect("d-1 is there");
        assert_eq!(one.outcome, "passed");
        assert_eq!(one.passed_on(), Some(2));
        assert_eq!(one.error_kind, None);
        assert_eq!(one.attempts.len(), 2);
        assert_eq!(one.attempts[0].passed, Some(false));
        assert_eq!(
            one.attempts[0].reasons,
            vec!["verify: a.txt does not exist"]
        );
        assert_eq!(one.attempts[1].duration, Duration::from_millis(20));
        assert_eq!(one.usage.input_tokens, 20);
        assert_eq!(one.usage.requests, 2);
        assert_eq!(one.duration, Duration::from_millis(1234));
        assert_eq!(
            one.started_at,
            UNIX_EPOCH + Duration::from_secs(1_700_000_000)
        );
        assert_eq!(one.trace_id.as_deref(), Some(trace_id));
        assert_eq!(one.retry_template_version, RETRY_TEMPLATE_VERSION);
        assert_eq!(one.source.as_deref(), Some("delegation.yaml"));
        assert_eq!(one.workdir.as_deref(), Some("/w"));
        let two = journal.get("d-2").expect("get").expect("d-2 is there");
        assert_eq!(two.outcome, "error");
        assert_eq!(two.error_kind.as_deref(), Some("verifier"));
        assert_eq!(two.error_message.as_deref(), Some("it broke"));
        assert_eq!(two.attempts[0].passed, None);
        assert!(journal.get("d-3").expect("get").is_none());
    }

    #[test]
    fn the_seal_written_with_a_record_is_the_seal_of_the_record_read_back() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut journal = Journal::open(dir.path().join("runs.db")).expect("open");
        let mut run = report(
            "d-seal",
            Outcome::Passed,
            &[
                (Some(false), &["verify: a.txt does not exist", "hook h: no"]),
                (Some(true), &[]),
            ],
        );
        // Floats whose shortest text parses back to a neighbour without exact parsing, times
        // and durations finer than the journal keeps, and a delivered result unlike the
        // attempt's own.
        let answer = |response: &str| {
            let mut result = DelegationResult::from_json(
                "result.json",
                &serde_json::json!({
                    "id": "d-seal",
                    "response": response,
                    "tool_calls": [{"id": "call_1", "name": "write", "arguments": {
                        "ratios": [0.1, 0.30000000000000004, 2.2250738585072014e-308,
                                   1.7976931348623157e308, 5e-324, 123456.789e-3,
                                   9007199254740993.0, -0.0, 161739.68473952299,
                                   -1.81996730402717e-179, 1.5860846119992697e-265],
                        "text": "tab\there, nul \u{0}, snowman \u{2603}"
                    }}]
                })
                .to_string(),
            )
            .expect("a result");
            // As a delegate's own numbers reach the record: never parsed from text.
            let exact = [
                161739.684_739_522_99,
                -1.819_967_304_027_17e-179,
                1.5e-265 / 3.0,
            ];
            result.tool_calls[0]
                .arguments
                .insert("exact".to_owned(), serde_json::json!(exact));
            // What a delegate may write: a key twice, numbers no float holds, a key with a NUL
            // and a quote, a character outside the BMP, deep nesting.
            let odd: Value = serde_json::from_str(
                r#"{"dup": 1, "dup": 2, "big": 1e400, "huge": 123456789012345678901234567890,
                    "neg": -0, "key\u0000\"q": "\ud83d\ude00", "\u007f":
                    [[[[[[[[[[{"deep": true, "also": [1.5e-400]}]]]]]]]]]]}"#,
            )
            .expect("JSON");
            result.tool_calls[0].arguments.insert("odd".to_owned(), odd);
            result
        };
        run.attempts[0].result = Some(answer("first"));
        run.attempts[1].result = Some(answer("second"));
        run.attempts[1].retry_prompt = Some("try again".to_owned());
        run.delivered = Some(answer("second, redacted"));
        run.started_at = UNIX_EPOCH + Duration::from_nanos(1_700_000_000_123_456_789);
        run.duration = Duration::from_nanos(1_234_567_891);
        run.attempts[0].duration = Duration::from_micros(20_999);
        run.warnings = vec!["isolation: none".to_owned()];
        run.trace_id = Some("0af7651916cd43dd8448eb211c80319c".to_owned());
        let meta = RecordMeta {
            source: Some(PathBuf::from("examples/delegation.yaml")),
            workdir: Some(PathBuf::from("/w")),
        };
        journal.record(&run, &meta).expect("record");
        let read = journal
            .get("d-seal")
            .expect("get")
            .expect("d-seal is there");
        let export = crate::export::export(&read);
        assert_eq!(read.seal.as_deref(), export["seal"].as_str());
        assert!(read.seal.as_deref().is_some_and(|seal| !seal.is_empty()));
    }

    /// Every part of an export the writer assembles apart from the reader (the plan and
    /// citations its first event holds, the children its `delegate` calls ran, the files its
    /// evidence vouched for, a parent named only by its results, an error, a diff) seals the
    /// same written as read back, and is there to be sealed.
    #[test]
    fn a_record_with_every_part_seals_the_same_written_as_read_back() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut journal = Journal::open(dir.path().join("runs.db")).expect("open");
        let mut run = report(
            "d-all",
            Outcome::Error(ErrorKind::Budget),
            &[
                (Some(false), &["verify: no a.txt"]),
                (Some(false), &["verify: no a.txt"]),
            ],
        );
        run.model = Some("m-1".to_owned());
        run.request = Some(Request {
            id: "d-all".to_owned(),
            task: "write a.txt".to_owned(),
            delegate: harness::DelegateInfo {
                kind: "scripted".to_owned(),
                model: Some("m-1".to_owned()),
            },
            tools: vec!["write_file".to_owned(), "delegate".to_owned()],
            args: serde_json::Map::from_iter([
                ("z".to_owned(), json!(1.5)),
                ("a".to_owned(), json!([])),
            ]),
            max_verify_retries: 1,
        });
        let child = |id: &str, is_error: bool| harness::ToolResult {
            call_id: format!("call_{id}"),
            name: "delegate".to_owned(),
            content: json!({"id": id, "outcome": "passed", "seal": format!("{id}-seal")})
                .to_string(),
            is_error,
        };
        let result = |attempt: u32| DelegationResult {
            id: "d-all".to_owned(),
            parent_id: Some("d-parent".to_owned()),
            attempt,
            response: "done".to_owned(),
            tool_calls: Vec::new(),
            tool_results: vec![
                child(&format!("d-c{attempt}"), false),
                child("d-refused", true),
            ],
            changes: None,
            evidence: Vec::new(),
        };
        run.attempts[0].result = Some(result(0));
        run.attempts[1].result = Some(result(1));
        run.attempts[1].diff = vec!["--- a.txt".to_owned(), "+++ a.txt".to_owned()];
        run.attempts[1].usage.cached_input_tokens = 4;
        let mut file = Evidence::new("wrote a.txt", "criterion", harness::EvidenceResult::Pass);
        file.method = Some("file_exists".to_owned());
        file.target = Some("a.txt".to_owned());
        file.subject_sha256 = Some("ab".repeat(32));
        file.subject_bytes = Some(3);
        let unhashed = Evidence::new("tests", "check", harness::EvidenceResult::Pass);
        if let Some(verdict) = run.attempts[1].verdict.as_mut() {
            verdict.evidence = vec![file, unhashed];
        }
        let event = |seq: u64, event: harness::RunEvent| harness::EventRecord {
            run_id: "d-all".to_owned(),
            attempt: 0,
            seq,
            at: "2026-11-29T00:00:00.000Z".to_owned(),
            event,
        };
        run.events = vec![
            event(
                0,
                harness::RunEvent::DelegationStarted {
                    delegate: "scripted".to_owned(),
                    max_attempts: 2,
                    citations: true,
                    plan: vec![json!({"tool": "write_file"}), json!("read")],
                },
            ),
            event(1, harness::RunEvent::AttemptStarted),
        ];
        journal
            .record(&run, &RecordMeta::default())
            .expect("record");
        let read = journal.get("d-all").expect("get").expect("d-all is there");
        let export = crate::export::export(&read);
        assert_eq!(read.seal.as_deref(), export["seal"].as_str());
        assert_eq!(export["run"]["citations"], "required");
        assert_eq!(export["run"]["parent_id"], "d-parent");
        assert_eq!(export["run"]["error"]["kind"], "budget");
        assert_eq!(export["plan"]["required_steps"][1], "read");
        assert_eq!(
            export["children"],
            json!([{"id": "d-c0", "seal": "d-c0-seal"}, {"id": "d-c1", "seal": "d-c1-seal"}])
        );
        assert_eq!(
            export["evidence"],
            json!([{"id": "wrote a.txt", "path": "a.txt", "sha256": "ab".repeat(32), "bytes": 3}])
        );
        assert_eq!(export["attempts"][1]["diff"][1], "+++ a.txt");
        // The cached share where there is one (and only there: older records seal as before).
        assert_eq!(export["attempts"][1]["usage"]["cached_input_tokens"], 4);
        assert_eq!(export["run"]["usage"]["cached_input_tokens"], 4);
        assert!(
            export["attempts"][0]["usage"]
                .get("cached_input_tokens")
                .is_none()
        );
        assert_eq!(
            export["events"][1]["prev_hash"],
            export["events"][0]["hash"]
        );
    }

    #[test]
    fn contains_says_whether_a_record_is_there() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut journal = Journal::open(dir.path().join("runs.db")).expect("open");
        assert!(!journal.contains("d-1").expect("read"));
        let run = report("d-1", Outcome::Skipped, &[]);
        journal
            .record(&run, &RecordMeta::default())
            .expect("record");
        assert!(journal.contains("d-1").expect("read"));
        assert!(!journal.contains("d-2").expect("read"));
    }

    #[test]
    fn a_duplicate_id_writes_nothing() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut journal = Journal::open(dir.path().join("runs.db")).expect("open");
        let first = report("d-1", Outcome::Passed, &[(Some(true), &[])]);
        journal
            .record(&first, &RecordMeta::default())
            .expect("record");
        let again = report(
            "d-1",
            Outcome::Failed(ErrorKind::VerificationFailed),
            &[(Some(false), &["verify: x"]), (Some(false), &["verify: y"])],
        );
        let err = journal
            .record(&again, &RecordMeta::default())
            .expect_err("the id is taken");
        assert_eq!(err.kind(), crate::ErrorKind::Journal);
        let kept = journal.get("d-1").expect("get").expect("there");
        assert_eq!(kept.outcome, "passed");
        assert_eq!(kept.attempts.len(), 1);
    }

    #[test]
    fn in_a_batch_only_the_failing_record_is_lost() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut journal = Journal::open(dir.path().join("runs.db")).expect("open");
        let meta = RecordMeta::default();
        journal
            .record(&report("d-1", Outcome::Passed, &[(Some(true), &[])]), &meta)
            .expect("record");
        let batch = [
            report("d-2", Outcome::Passed, &[(Some(true), &[])]),
            // Taken already: fails after its delegation row would have gone in.
            report(
                "d-1",
                Outcome::Failed(ErrorKind::VerificationFailed),
                &[(Some(false), &["verify: x"]), (Some(false), &["verify: y"])],
            ),
            report(
                "d-3",
                Outcome::Failed(ErrorKind::VerificationFailed),
                &[(Some(false), &["verify: z"])],
            ),
        ];
        let outcomes = journal
            .record_all(batch.iter().map(|r| (r, &meta)))
            .expect("the batch is written");
        let failed: Vec<&str> = batch
            .iter()
            .zip(&outcomes)
            .filter(|(_, outcome)| outcome.is_err())
            .map(|(report, _)| report.id.as_str())
            .collect();
        assert_eq!(failed, ["d-1"]);
        // Each written one with the seal it is stored with.
        for (report, outcome) in batch.iter().zip(&outcomes) {
            if let Ok(seal) = outcome {
                let stored = journal.seal_of(&report.id).expect("read");
                assert_eq!(stored.as_deref(), Some(seal.as_str()));
            }
        }
        let ids = all_ids(&journal);
        assert_eq!(ids.len(), 3, "{ids:?}");
        for id in ["d-1", "d-2", "d-3"] {
            assert!(ids.iter().any(|i| i == id), "{id} missing from {ids:?}");
        }
        let kept = journal.get("d-1").expect("get").expect("there");
        assert_eq!((kept.outcome.as_str(), kept.attempts.len()), ("passed", 1));
        let third = journal.get("d-3").expect("get").expect("there");
        assert_eq!(third.attempts[0].reasons, ["verify: z"]);
    }

    #[test]
    fn list_filters_by_time_and_kind_newest_first() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut journal = Journal::open(dir.path().join("runs.db")).expect("open");
        for (i, kind) in ["scripted", "command", "scripted"].iter().enumerate() {
            let mut r = report(&format!("d-{i}"), Outcome::Skipped, &[(None, &[])]);
            r.delegate_kind = (*kind).to_owned();
            r.started_at = UNIX_EPOCH + Duration::from_secs(1000 + i as u64);
            journal.record(&r, &RecordMeta::default()).expect("record");
        }
        let ids = |filter: Filter| -> Vec<String> {
            journal
                .list(&filter)
                .expect("list")
                .into_iter()
                .map(|r| r.id)
                .collect()
        };
        assert_eq!(ids(Filter::default()), ["d-2", "d-1", "d-0"]);
        let kind = |glob: &str| Filter {
            kind_glob: Some(glob.to_owned()),
            ..Filter::default()
        };
        assert_eq!(ids(kind("script*")), ["d-2", "d-0"]);
        assert_eq!(ids(kind("command")), ["d-1"]);
        assert_eq!(ids(kind("open*")), Vec::<String>::new());
        let since = Filter {
            since: Some(UNIX_EPOCH + Duration::from_secs(1001)),
            ..Filter::default()
        };
        assert_eq!(ids(since), ["d-2", "d-1"]);
        let limit = Filter {
            limit: Some(1),
            ..Filter::default()
        };
        assert_eq!(ids(limit), ["d-2"]);
    }

    #[test]
    fn a_database_from_a_newer_harness_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("runs.db");
        {
            let conn = Connection::open(&path).expect("open");
            conn.pragma_update(None, "user_version", SCHEMA_VERSION + 1)
                .expect("set the version");
        }
        let err = Journal::open(&path).expect_err("newer schema");
        assert_eq!(err.kind(), crate::ErrorKind::Journal);
        assert!(err.message().contains("newer harness"), "{}", err.message());
    }

    #[test]
    fn a_file_that_is_not_a_database_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("runs.db");
        std::fs::write(
            &path,
            "not a database, just text that is long enough to have a header",
        )
        .expect("write");
        let err = Journal::open(&path).expect_err("not SQLite");
        assert_eq!(err.kind(), crate::ErrorKind::Journal);
    }

    #[test]
    fn reading_creates_and_writes_nothing() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("runs.db");
        let err = Journal::open_read_only(&path).expect_err("missing");
        assert_eq!(err.kind(), crate::ErrorKind::Journal, "{err}");
        assert!(
            err.message().contains("no run journal at"),
            "{}",
            err.message()
        );
        assert!(!path.exists());
        Journal::open(&path)
            .expect("open")
            .record(
                &report("d-1", Outcome::Passed, &[(Some(true), &[])]),
                &RecordMeta::default(),
            )
            .expect("record");
        let reader = Journal::open_read_only(&path).expect("open to read");
        assert_eq!(all_ids(&reader), ["d-1"]);
        let err = reader
            .conn
            .execute_batch("DELETE FROM delegations")
            .expect_err("a reader cannot write");
        assert_eq!(
            err.sqlite_error_code(),
            Some(rusqlite::ErrorCode::ReadOnly),
            "{err}"
        );
        // A file that is not a journal is named, never read as an empty one.
        let bad = dir.path().join("bad.db");
        std::fs::write(
            &bad,
            "not a database, just text long enough to have a header",
        )
        .expect("write");
        let err = Journal::open_read_only(&bad).expect_err("not SQLite");
        assert_eq!(err.kind(), crate::ErrorKind::Journal, "{err}");
        assert!(err.message().contains("bad.db"), "{}", err.message());
    }

    #[test]
    fn the_whole_run_is_kept() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut journal = Journal::open(dir.path().join("runs.db")).expect("open");
        let mut run = report(
            "d-1",
            Outcome::Passed,
            &[(Some(false), &["verify: no a.txt"]), (Some(true), &[])],
        );
        run.request = Some(Request {
            id: "d-1".to_owned(),
            task: "write a.txt".to_owned(),
            delegate: harness::DelegateInfo {
                kind: "scripted".to_owned(),
                model: None,
            },
            tools: vec!["write_file".to_owned()],
            args: serde_json::Map::new(),
            max_verify_retries: 2,
        });
        let result = |attempt: u32, response: &str| DelegationResult {
            id: "d-1".to_owned(),
            parent_id: None,
            attempt,
            response: response.to_owned(),
            tool_calls: Vec::new(),
            tool_results: Vec::new(),
            changes: None,
            evidence: Vec::new(),
        };
        run.attempts[0].result = Some(result(0, "done"));
        run.attempts[0].retry_prompt = Some("Verification failed: no a.txt".to_owned());
        run.attempts[1].result = Some(result(1, "secret in here"));
        run.delivered = Some(result(1, "[redacted by hook]"));
        run.warnings = vec!["look at this".to_owned()];
        journal
            .record(&run, &RecordMeta::default())
            .expect("record");
        let kept = journal.get("d-1").expect("get").expect("there");
        let request = kept.request.as_ref().expect("the request is kept");
        assert_eq!(request["task"], "write a.txt");
        assert_eq!(request["tools"], json!(["write_file"]));
        assert_eq!(kept.warnings, ["look at this"]);
        let first = &kept.attempts[0];
        assert_eq!(first.result.as_ref().expect("a result")["response"], "done");
        assert_eq!(
            first.retry_prompt.as_deref(),
            Some("Verification failed: no a.txt")
        );
        let verdict = first.verdict.as_ref().expect("a verdict");
        assert_eq!(verdict.decision, harness::Decision::Retry);
        assert_eq!(verdict.findings[0].message, "no a.txt");
        // The last attempt keeps what the caller was given, not what the delegate said.
        let last = kept.attempts[1].result.as_ref().expect("a result");
        assert_eq!(last["response"], "[redacted by hook]");
        let shown = kept.to_json();
        assert_eq!(shown["request"]["task"], "write a.txt");
        assert_eq!(shown["attempts"][1]["verdict"]["decision"], "pass");
        assert_eq!(
            shown["attempts"][0]["retry_prompt"],
            "Verification failed: no a.txt"
        );
    }

    /// A verdict written by another build (here a finding source this one does not know) is
    /// shown as stored; it never makes the journal's runs unreadable.
    #[test]
    fn a_verdict_this_build_cannot_read_is_kept_as_stored() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut journal = Journal::open(dir.path().join("runs.db")).expect("open");
        for id in ["d-1", "d-2"] {
            let run = report(
                id,
                Outcome::Failed(ErrorKind::VerificationFailed),
                &[(Some(false), &["verify: no a.txt"])],
            );
            journal
                .record(&run, &RecordMeta::default())
                .expect("record");
        }
        let foreign = json!({"attempt": 0, "decision": "retry", "findings": [{"source": "telepathy", "name": "", "message": "felt wrong", "blocking": true}]});
        journal
            .conn
            .execute(
                "UPDATE attempts SET verdict = ?1 WHERE delegation_id = 'd-1'",
                [foreign.to_string()],
            )
            .expect("update");
        let all = journal.list(&Filter::default()).expect("list");
        assert_eq!(all.len(), 2);
        let kept = journal.get("d-1").expect("get").expect("there");
        assert!(kept.attempts[0].verdict.is_none());
        assert_eq!(kept.attempts[0].reasons, ["verify: no a.txt"]);
        assert_eq!(kept.to_json()["attempts"][0]["verdict"], foreign);
        let other = journal.get("d-2").expect("get").expect("there");
        assert!(other.attempts[0].verdict.is_some());
    }

    #[test]
    fn a_version_1_journal_is_read_as_it_is_and_migrated_by_a_writer() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("runs.db");
        {
            let conn = Connection::open(&path).expect("open");
            conn.execute_batch(MIGRATIONS[0]).expect("version 1 schema");
            conn.execute_batch(
                "INSERT INTO delegations (id, started_at_ms, duration_ms, delegate_kind, outcome,
                    attempts, input_tokens, output_tokens, requests, retry_template_version,
                    recorded_at_ms)
                 VALUES ('d-old', 0, 5, 'scripted', 'failed', 1, 0, 0, 0, 'retry-v1', 0);
                 INSERT INTO attempts (delegation_id, attempt, passed, reasons, duration_ms,
                    input_tokens, output_tokens, requests)
                 VALUES ('d-old', 0, 0, '[\"verify: nope\"]', 5, 0, 0, 0);
                 PRAGMA user_version = 1;",
            )
            .expect("a version 1 record");
        }
        let reader = Journal::open_read_only(&path).expect("read");
        assert_eq!(reader.schema_version().expect("version"), 1, "not migrated");
        let old = reader.get("d-old").expect("get").expect("there");
        assert_eq!(old.attempts[0].reasons, ["verify: nope"]);
        assert_eq!((old.request, old.attempts[0].result.clone()), (None, None));
        drop(reader);
        let writer = Journal::open(&path).expect("migrate");
        assert_eq!(writer.schema_version().expect("version"), SCHEMA_VERSION);
        let old = writer.get("d-old").expect("get").expect("still there");
        assert_eq!(old.outcome, "failed");
    }

    #[test]
    fn an_interrupted_write_leaves_earlier_records_intact() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("runs.db");
        let mut journal = Journal::open(&path).expect("open");
        journal
            .record(
                &report("d-1", Outcome::Passed, &[(Some(true), &[])]),
                &RecordMeta::default(),
            )
            .expect("record");
        // A writer that dies mid-transaction: its uncommitted rows must vanish, the earlier
        // record must stay.
        {
            let other = Connection::open(&path).expect("second connection");
            other
                .execute_batch(
                    "BEGIN IMMEDIATE;
                     INSERT INTO delegations (id, started_at_ms, duration_ms, delegate_kind, outcome,
                        attempts, input_tokens, output_tokens, requests, retry_template_version,
                        recorded_at_ms)
                     VALUES ('d-half', 0, 0, 'scripted', 'passed', 1, 0, 0, 0, 'retry-v1', 0);",
                )
                .expect("half a write");
            // Dropped without COMMIT.
        }
        let reopened = Journal::open(&path).expect("reopen");
        let ids = all_ids(&reopened);
        assert_eq!(ids, ["d-1"]);
    }
}
