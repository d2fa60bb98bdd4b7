//! Shared fixtures: running the binary, temporary workspaces, report helpers (the fake servers
//! are in `harness-testkit`).

use std::fmt;
use std::io::Write;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value;

/// The path of the `harness` binary under test.
pub fn harness_bin() -> &'static str {
    env!("CARGO_BIN_EXE_harness")
}

/// One invocation of the binary, built up like `std::process::Command`.
pub struct Harness {
    command: Command,
    stdin: Option<String>,
    /// The run journal of this invocation alone (see [`harness`]).
    _journal: Option<tempfile::TempDir>,
}

/// Starts an invocation of `harness` with `args`.
pub fn harness<I, S>(args: I) -> Harness
where
    I: IntoIterator<Item = S>,
    S: AsRef<std::ffi::OsStr>,
{
    let mut command = Command::new(harness_bin());
    command.args(args);
    // Telemetry and log settings from the developer's shell must not change what the tests see.
    for (name, _) in std::env::vars_os() {
        let name = name.to_string_lossy().into_owned();
        if name.starts_with("OTEL_") || name == "RUST_LOG" {
            command.env_remove(name);
        }
    }
    // A test never writes into the repository or a shared journal: each invocation gets a
    // journal of its own through HARNESS_JOURNAL (a `--journal` flag still wins), removed when
    // it ends. Tests of where the journal goes call `journal_by_rule`.
    let journal = tempfile::tempdir().expect("a temporary directory");
    command.env("HARNESS_JOURNAL", journal.path().join("runs.db"));
    Harness {
        command,
        stdin: None,
        _journal: Some(journal),
    }
}

impl Harness {
    /// Adds more arguments.
    pub fn args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<std::ffi::OsStr>,
    {
        self.command.args(args);
        self
    }

    /// Runs in `dir`.
    pub fn current_dir(mut self, dir: impl AsRef<Path>) -> Self {
        self.command.current_dir(dir);
        self
    }

    /// Finds the run journal by the one rule, as a user's shell would (no `HARNESS_JOURNAL`):
    /// the nearest `.harness/runs.db` upward from the current directory, else `./.harness/runs.db`.
    /// Only for tests that set a temporary current directory.
    pub fn journal_by_rule(mut self) -> Self {
        self.command.env_remove("HARNESS_JOURNAL");
        self._journal = None;
        self
    }

    /// Sets an environment variable for the child.
    pub fn env(mut self, name: &str, value: &str) -> Self {
        self.command.env(name, value);
        self
    }

    /// Feeds `text` on standard input (otherwise stdin is empty).
    pub fn stdin(mut self, text: impl Into<String>) -> Self {
        self.stdin = Some(text.into());
        self
    }

    /// Runs the binary to completion and captures what it did.
    pub fn run(mut self) -> Output {
        self.command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = self.command.spawn().expect("the harness binary starts");
        let mut stdin = child.stdin.take().expect("stdin is piped");
        let text = self.stdin.take().unwrap_or_default();
        // Write on a thread so a child that does not read stdin cannot deadlock the test.
        let writer = std::thread::spawn(move || {
            let _ = stdin.write_all(text.as_bytes());
        });
        let output = child.wait_with_output().expect("the harness binary runs");
        writer.join().expect("stdin writer");
        Output {
            code: output
                .status
                .code()
                .expect("harness exits with a code, not a signal"),
            stdout: String::from_utf8(output.stdout).expect("stdout is UTF-8"),
            stderr: String::from_utf8(output.stderr).expect("stderr is UTF-8"),
        }
    }
}

/// What one run of the binary did.
pub struct Output {
    /// The exit code.
    pub code: i32,
    /// Everything written to stdout.
    pub stdout: String,
    /// Everything written to stderr.
    pub stderr: String,
}

impl fmt::Debug for Output {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "exit code {}\n--- stdout ---\n{}\n--- stderr ---\n{}",
            self.code, self.stdout, self.stderr
        )
    }
}

impl Output {
    /// Parses stdout as exactly one JSON object (nothing before or after it but whitespace).
    pub fn json(&self) -> Value {
        let value: Value = serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("stdout is not one JSON value ({e}):\n{self:?}"));
        assert!(value.is_object(), "stdout is not a JSON object:\n{self:?}");
        value
    }

    /// The `error.message` of the JSON object on stdout (empty when there is none).
    pub fn error_message(&self) -> String {
        self.json()["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }

    /// Asserts the exit code, showing everything the binary printed when it differs.
    #[track_caller]
    pub fn expect_code(&self, code: i32) -> &Self {
        assert_eq!(self.code, code, "unexpected exit code:\n{self:?}");
        self
    }

    /// The kind of the error (or failure) the binary ended with when it printed it as text: the
    /// `KIND` of the last `error[KIND]: message` or `failed[KIND]: …` line on stderr (the form
    /// of every error and failed run without `--json`), or `None` when stderr has no such line.
    pub fn stderr_kind(&self) -> Option<&str> {
        self.stderr.lines().rev().find_map(|line| {
            let rest = line
                .strip_prefix("error[")
                .or_else(|| line.strip_prefix("failed["))?;
            let (kind, _) = rest.split_once("]:")?;
            Some(kind)
        })
    }

    /// Asserts that stderr names the error's `kind` (see [`Output::stderr_kind`]), showing
    /// everything the binary printed when it does not.
    #[track_caller]
    pub fn expect_stderr_kind(&self, kind: &str) -> &Self {
        assert_eq!(
            self.stderr_kind(),
            Some(kind),
            "unexpected error kind on stderr:\n{self:?}"
        );
        self
    }
}

/// Returns the sorted keys of a JSON object.
pub fn keys(value: &Value) -> Vec<&str> {
    let mut keys: Vec<&str> = value
        .as_object()
        .expect("a JSON object")
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort_unstable();
    keys
}

/// A temporary directory that is deleted when dropped.
pub struct TempDir {
    dir: tempfile::TempDir,
}

impl TempDir {
    /// Creates an empty temporary directory.
    pub fn new() -> Self {
        TempDir {
            dir: tempfile::tempdir().expect("create a temporary directory"),
        }
    }

    /// Returns its (canonical) path.
    pub fn path(&self) -> PathBuf {
        self.dir
            .path()
            .canonicalize()
            .expect("the temporary directory exists")
    }

    /// Returns `rel` inside it.
    pub fn join(&self, rel: impl AsRef<Path>) -> PathBuf {
        self.path().join(rel)
    }

    /// Writes `content` to `rel` (creating parent directories) and returns the full path.
    pub fn write(&self, rel: impl AsRef<Path>, content: impl AsRef<[u8]>) -> PathBuf {
        let path = self.join(rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).expect("create parent directories");
        }
        std::fs::write(&path, content).expect("write a fixture file");
        path
    }

    /// Reads `rel` as text, or `None` when it does not exist.
    pub fn read(&self, rel: impl AsRef<Path>) -> Option<String> {
        std::fs::read_to_string(self.join(rel)).ok()
    }
}

/// Copies the directory tree `from` into `to` (made when missing).
pub fn copy_tree(from: &Path, to: &Path) {
    // What an earlier run left behind (files a directory's `.gitignore` lists, run journals) is
    // not part of an example: copying it would let a lying delegate find the work already done.
    let ignored: Vec<String> = std::fs::read_to_string(from.join(".gitignore"))
        .unwrap_or_default()
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(str::to_owned)
        .collect();
    let is_ignored = |name: &str| {
        ignored
            .iter()
            .any(|pattern| match pattern.strip_prefix('*') {
                Some(suffix) => name.ends_with(suffix),
                None => name == pattern,
            })
    };
    std::fs::create_dir_all(to).expect("create the target directory");
    for entry in std::fs::read_dir(from).expect("read the source directory") {
        let entry = entry.expect("a directory entry");
        let name = entry.file_name().to_string_lossy().into_owned();
        if name == ".harness" || is_ignored(&name) {
            continue;
        }
        let target = to.join(&name);
        if entry.file_type().expect("a file type").is_dir() {
            std::fs::create_dir_all(&target).expect("create a directory");
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).expect("copy a file");
        }
    }
}

/// True when bubblewrap is installed and may make namespaces here, so the confinement tests can
/// run; otherwise says on stderr that the calling test is skipped — and fails it instead when
/// `HARNESS_REQUIRE_BWRAP` is set (`.ci/run` sets it where namespaces work).
#[cfg(unix)]
pub fn confinement_works() -> bool {
    let works = Command::new("bwrap")
        .args(["--unshare-all", "--ro-bind", "/", "/", "true"])
        .status()
        .is_ok_and(|s| s.success());
    if !works {
        assert!(
            std::env::var_os("HARNESS_REQUIRE_BWRAP").is_none(),
            "HARNESS_REQUIRE_BWRAP is set but bubblewrap cannot make namespaces here"
        );
        eprintln!("skipped: bubblewrap is not installed or cannot make namespaces here");
    }
    works
}

/// A temporary directory outside `/tmp` (under `target/`), as a user's HOME or a place beside
/// the workspace is: inside a sandbox `/tmp` is private, so a test that a write or read outside
/// the workspace is refused must use a directory that is not.
pub fn outside_tmp(prefix: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(prefix)
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .expect("a directory under target/")
}

/// The repository root (where `Cargo.toml` of the binary is).
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Returns a port on 127.0.0.1 that nothing listens on (bound, then released).
pub fn closed_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1");
    listener.local_addr().expect("local address").port()
}

/// Returns a `--json` report's `result.response` decoded as JSON (for agents that answer in JSON).
pub fn response(report: &Value) -> Value {
    let text = report["result"]["response"]
        .as_str()
        .expect("result.response is a string");
    serde_json::from_str(text).unwrap_or_else(|e| panic!("response is not JSON ({e}): {text}"))
}

/// Asserts that a `--json` report ended in an error of `kind` with exit `code`.
#[track_caller]
pub fn expect_error_kind(out: &Output, report: &Value, code: i32, kind: &str) {
    out.expect_code(code);
    assert_eq!(report["outcome"], serde_json::json!("error"), "{out:?}");
    assert_eq!(report["verified"], serde_json::json!(false), "{out:?}");
    assert_eq!(report["error"]["kind"], serde_json::json!(kind), "{out:?}");
}

/// Waits, up to 20 s, until no process's command line contains `marker`; false if one still
/// does then. What a test asserts was killed with its process group is gone at once, so this
/// returns as soon as it is. The marker must be unique to the test: tests run side by side.
#[cfg(unix)]
pub fn gone(marker: &str) -> bool {
    eventually(|| {
        Command::new("pgrep")
            .args(["-f", marker])
            .output()
            // No pgrep: the caller's file check is what is left to judge by.
            .map(|o| o.stdout.is_empty())
            .unwrap_or(true)
    })
}

/// Waits, up to 20 s, until `ready` holds (a file a command writes as it starts); false if it
/// never does.
pub fn eventually(mut ready: impl FnMut() -> bool) -> bool {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !ready() {
        if std::time::Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    true
}

/// The test Python (`HARNESS_TEST_PYTHON`, else `python3`) when it can import `modules`; `None`
/// (the calling test says it is skipped) when it cannot — and the test fails instead when the
/// environment variable `require` is set (`.ci/run` sets it where it installs them).
pub fn python_with(modules: &str, require: &str) -> Option<String> {
    let python = std::env::var("HARNESS_TEST_PYTHON").unwrap_or_else(|_| "python3".to_owned());
    let works = Command::new(&python)
        .args(["-c", &format!("import {modules}")])
        .output()
        .is_ok_and(|o| o.status.success());
    if !works {
        assert!(
            std::env::var_os(require).is_none(),
            "{require} is set but {python} cannot import {modules}"
        );
        eprintln!("skipped: {python} cannot import {modules} (set HARNESS_TEST_PYTHON)");
        return None;
    }
    Some(python)
}

/// `PATH` with a Python that has pytest first, or `None` (skipped, said) when there is none.
pub fn pytest_path() -> Option<String> {
    let python = python_with("pytest", "HARNESS_REQUIRE_PYTEST")?;
    let bin = which(&python)?.parent()?.to_path_buf();
    Some(format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    ))
}

/// Where `program` is: itself when it is a path, else found on `PATH`.
pub fn which(program: &str) -> Option<PathBuf> {
    if program.contains('/') {
        return Some(PathBuf::from(program));
    }
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|dir| dir.join(program))
        .find(|p| p.is_file())
}

/// The processes running now: each one's `/proc` directory and its command line, its arguments
/// joined by spaces (a process that is gone, or a zombie, has an empty one).
pub fn processes() -> Vec<(PathBuf, String)> {
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let cmdline = std::fs::read(entry.path().join("cmdline")).ok()?;
            let words: Vec<String> = cmdline
                .split(|b| *b == 0)
                .filter(|w| !w.is_empty())
                .map(|w| String::from_utf8_lossy(w).into_owned())
                .collect();
            Some((entry.path(), words.join(" ")))
        })
        .collect()
}
