//! Policy tests (DESIGN §7): `*_test.star` files whose `test_*` functions load real verifiers and
//! hooks with the loaders `harness run` uses, call them on payloads with mocked files, HTTP and
//! programs, and assert on the verdicts; with statement coverage of the policy files they load.
//!
//! ```text
//! check = verifier("check.star")
//!
//! def test_missing_file_fails():
//!     v = check({"response": "wrote out.txt"}, files = {})
//!     assert_eq(v["verified"], False)
//! ```
#![deny(unsafe_code)]
#![warn(missing_docs)]

mod coverage;
#[allow(unsafe_code)] // see the module's docs
mod globals;
mod mocks;

pub use coverage::{Coverage, ScriptCoverage};
use globals::TestFile;
pub use globals::{PolicyKind, register};
pub use mocks::{Mocked, Mocks};

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use harness::{Assembler, Error, Overrides, Result, Verifier};
use harness_builtins::{
    Capabilities, Engine, HostAllowList, Limits, Sandbox, Script, Surface, TestOutcome, Workspace,
};
use harness_hooks::{Action, DelegationResult, Event, HookSet};
use serde::Serialize;
use serde_json::{Map, Value, json};

/// What a test run is given besides the files.
#[derive(Debug, Clone, Default)]
pub struct TestOptions {
    /// Only tests whose name (or `FILE::NAME`) matches run.
    pub filter: Option<regex::Regex>,
    /// Count which statements of the loaded policy files run.
    pub coverage: bool,
    /// What every policy under test may reach (the `--allow-*` flags); each helper may add its
    /// own (`allow_hosts = [...]`), as a delegation file would.
    pub capabilities: Capabilities,
    /// The budgets of every evaluation: test functions and the policies they call.
    pub limits: Limits,
}

/// How one test ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Every assertion held.
    Passed,
    /// An assertion did not hold.
    Failed,
    /// The test could not run to a verdict: a broken test or policy, a limit, an unmocked URL,
    /// a file that does not load.
    Error,
}

/// One test (or one test file that could not be loaded, named `(load)`).
#[derive(Debug, Clone, Serialize)]
pub struct TestCase {
    /// The test file.
    pub file: String,
    /// The test function.
    pub name: String,
    /// How it ended.
    pub status: Status,
    /// Why it failed or broke; empty when it passed.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// The line in the test file where it failed or broke, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<usize>,
    /// How long it ran.
    pub duration_ms: f64,
    /// What it (and the policies it called) passed to `print` or `log`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub logs: Vec<String>,
}

impl TestCase {
    /// `FILE:LINE` where the test failed, or the file alone.
    pub fn place(&self) -> String {
        match self.line {
            Some(line) => format!("{}:{line}", self.file),
            None => self.file.clone(),
        }
    }
}

/// A run of lines with one coverage status, in the shape `opa test --coverage` prints.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Range {
    /// The first line.
    pub start: Row,
    /// The last line.
    pub end: Row,
}

/// A line number, as `{"row": N}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Row {
    /// The 1-based line.
    pub row: usize,
}

/// The coverage of one policy file.
#[derive(Debug, Clone, Serialize)]
pub struct FileCoverage {
    /// Statement lines that ran, as ranges.
    pub covered: Vec<Range>,
    /// Statement lines that never ran, as ranges.
    pub not_covered: Vec<Range>,
    /// How many statement lines ran.
    pub covered_lines: usize,
    /// How many never ran.
    pub not_covered_lines: usize,
    /// `covered_lines` as a percentage of all statement lines (100 when there are none).
    pub coverage: f64,
}

/// The coverage of every policy file the tests loaded.
#[derive(Debug, Clone, Serialize)]
pub struct CoverageReport {
    /// By file, as the tests named them.
    pub files: BTreeMap<String, FileCoverage>,
    /// Statement lines that ran, over all files.
    pub covered_lines: usize,
    /// Statement lines that never ran, over all files.
    pub not_covered_lines: usize,
    /// The overall percentage (100 when no policy file was loaded).
    pub coverage: f64,
}

/// What a test run found.
#[derive(Debug, Clone, Serialize)]
pub struct TestReport {
    /// Every test, file by file, in definition order.
    pub tests: Vec<TestCase>,
    /// How many passed.
    pub passed: usize,
    /// How many failed.
    pub failed: usize,
    /// How many broke.
    pub errors: usize,
    /// Statement coverage of the policy files loaded, with `--coverage`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub coverage: Option<CoverageReport>,
}

impl TestReport {
    /// True when every test passed (and there was at least one).
    pub fn all_passed(&self) -> bool {
        self.failed == 0 && self.errors == 0
    }

    /// The closing line: `N passed, N failed, N errors`.
    pub fn summary(&self) -> String {
        format!(
            "{} passed, {} failed, {} errors",
            self.passed, self.failed, self.errors
        )
    }
}

/// Finds the test files under `paths`: every `*_test.star` in a directory (recursively, sorted),
/// and a file named directly whatever its name.
///
/// # Errors
/// A configuration error naming a path that does not exist or a directory that cannot be read.
pub fn discover(paths: &[PathBuf]) -> Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for path in paths {
        if path.is_file() {
            files.push(path.clone());
            continue;
        }
        if !path.is_dir() {
            return Err(Error::config(format!(
                "{}: no such test file or directory",
                path.display()
            )));
        }
        let mut found = Vec::new();
        for entry in walkdir::WalkDir::new(path).follow_links(false) {
            let entry = entry
                .map_err(|e| Error::config(format!("{}: cannot read: {e}", path.display())))?;
            let name = entry.file_name().to_string_lossy();
            if entry.file_type().is_file() && name.ends_with("_test.star") {
                found.push(entry.into_path());
            }
        }
        found.sort();
        files.extend(found);
    }
    let mut seen = BTreeSet::new();
    files.retain(|f| seen.insert(f.canonicalize().unwrap_or_else(|_| f.clone())));
    Ok(files)
}

/// Where a compiled script's lines are in the file a report names.
#[derive(Debug, Clone)]
struct Origin {
    file: String,
    /// Added to a script line to get the file line.
    offset: usize,
}

/// State shared by every test file of a run.
#[derive(Debug)]
struct Shared {
    options: TestOptions,
    verifier_engine: Engine,
    hook_engine: Engine,
    coverage: Option<Arc<Coverage>>,
    /// Script name → where its lines are, for every policy script loaded.
    origins: Mutex<BTreeMap<String, Origin>>,
}

/// Runs every `test_*` function of `files` (see [`discover`]), calling `progress` after each.
/// Test files run one after another; each test's policies run in a fresh temporary workspace.
pub fn run(
    files: &[PathBuf],
    options: TestOptions,
    mut progress: impl FnMut(&TestCase),
) -> TestReport {
    let shared = Arc::new(Shared {
        coverage: options.coverage.then(|| Arc::new(Coverage::new())),
        options,
        verifier_engine: Engine::new(),
        hook_engine: harness_hooks::engine(),
        origins: Mutex::new(BTreeMap::new()),
    });
    let test_engine = Engine::with_extension(register);
    let mut tests = Vec::new();
    for file in files {
        for case in run_file(&shared, &test_engine, file) {
            progress(&case);
            tests.push(case);
        }
    }
    let count = |status| tests.iter().filter(|t| t.status == status).count();
    TestReport {
        passed: count(Status::Passed),
        failed: count(Status::Failed),
        errors: count(Status::Error),
        coverage: shared
            .coverage
            .as_ref()
            .map(|c| coverage_report(&shared, c)),
        tests,
    }
}

fn millis(d: Duration) -> f64 {
    (d.as_secs_f64() * 1e6).round() / 1e3
}

fn run_file(shared: &Arc<Shared>, engine: &Engine, file: &Path) -> Vec<TestCase> {
    let name = file.display().to_string();
    let started = Instant::now();
    let broken = |message: String, line: Option<usize>| TestCase {
        file: name.clone(),
        name: "(load)".to_owned(),
        status: Status::Error,
        message,
        line,
        duration_ms: millis(started.elapsed()),
        logs: Vec::new(),
    };
    let source = match harness_builtins::read_regular(file, harness_builtins::MAX_SCRIPT_BYTES) {
        Ok(source) => source,
        Err(e) => return vec![broken(format!("cannot read: {e}"), None)],
    };
    let dir = file
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let workspace = match Workspace::new(dir) {
        Ok(workspace) => workspace,
        Err(e) => return vec![broken(format!("cannot open its directory: {e}"), None)],
    };
    let runner = Arc::new(FileRunner {
        shared: Arc::clone(shared),
        dir: dir.to_path_buf(),
    });
    let sandbox = Sandbox::new(
        Surface::Test,
        workspace,
        Capabilities::default(),
        shared.options.limits.clone(),
    )
    .with_interceptor(Arc::new(TestFile { runner }));
    let script = match Script::compile(engine, &sandbox, &name, &source, &[]) {
        Ok(script) => script,
        Err(e) => {
            return vec![broken(described(&e), e.location().map(|l| l.line))];
        }
    };
    let tests: Vec<String> = script
        .functions()
        .into_iter()
        .filter(|f| f.starts_with("test_"))
        .filter(|f| {
            shared
                .options
                .filter
                .as_ref()
                .is_none_or(|re| re.is_match(f) || re.is_match(&format!("{name}::{f}")))
        })
        .collect();
    tests
        .into_iter()
        .map(|test| {
            let started = Instant::now();
            let (outcome, logs) = script.run_test(&sandbox, &test);
            let duration_ms = millis(started.elapsed());
            let (status, message, line) = match outcome {
                TestOutcome::Passed => (Status::Passed, String::new(), None),
                TestOutcome::Failed { message, location } => {
                    (Status::Failed, message, location.map(|l| l.line))
                }
                TestOutcome::Broken(e) => {
                    (Status::Error, described(&e), e.location().map(|l| l.line))
                }
            };
            // A limit stops a test between statements, with no place of its own: name the
            // test's `def` line.
            let line = match status {
                Status::Passed => None,
                _ => line.or_else(|| def_line(&source, &test)),
            };
            TestCase {
                file: name.clone(),
                name: test,
                status,
                message,
                line,
                duration_ms,
                logs,
            }
        })
        .collect()
}

/// The line on which `def NAME(` starts, at the top level of `source`.
fn def_line(source: &str, name: &str) -> Option<usize> {
    let head = format!("def {name}(");
    source
        .lines()
        .position(|line| line.starts_with(&head))
        .map(|i| i + 1)
}

/// An engine error's message, with its kind unless it is a plain runtime error (whose message,
/// from a policy under test, already names its own).
fn described(e: &harness_builtins::Error) -> String {
    match e.kind() {
        harness_builtins::ErrorKind::Runtime => e.message().to_owned(),
        kind => format!("{} [{}]", e.message(), kind.as_str()),
    }
}

/// Serves `verifier(path)` and `hook(path)` for one test file: paths are relative to its
/// directory.
#[derive(Debug)]
pub(crate) struct FileRunner {
    shared: Arc<Shared>,
    dir: PathBuf,
}

/// A verifier as a test loaded it.
struct LoadedVerifier {
    name: String,
    source: String,
    args: Value,
    /// Hosts the delegation file's `network.allow` grants.
    hosts: Vec<String>,
    origin: Origin,
}

impl FileRunner {
    fn path(&self, path: &str) -> std::result::Result<PathBuf, String> {
        let full = self.dir.join(path);
        if full.is_file() {
            Ok(full)
        } else if full.exists() {
            Err(format!("{} is not a regular file", full.display()))
        } else {
            Err(format!(
                "no such file: {} (paths are relative to the test file)",
                full.display()
            ))
        }
    }

    fn shown(&self, path: &Path) -> String {
        path.display().to_string()
    }

    fn load_verifier(&self, path: &str) -> std::result::Result<LoadedVerifier, String> {
        let full = self.path(path)?;
        let name = self.shown(&full);
        let yaml = matches!(
            full.extension().and_then(|e| e.to_str()),
            Some("yaml" | "yml")
        );
        if !yaml {
            let source = harness_builtins::read_regular(&full, harness_builtins::MAX_SCRIPT_BYTES)
                .map_err(|e| format!("cannot read {name}: {e}"))?;
            return Ok(LoadedVerifier {
                origin: Origin {
                    file: name.clone(),
                    offset: 0,
                },
                name,
                source,
                args: Value::Object(Map::new()),
                hosts: Vec::new(),
            });
        }
        // A delegation file: its inline `verify` (or `verify_file`), read by the loader `run` uses.
        let delegation = Assembler::new(Overrides::default())
            .file(&full)
            .map_err(|e| e.to_string())?;
        let verify = delegation.verify().cloned().ok_or_else(|| {
            format!("{name} has no `verify` or `verify_file`: there is no verifier to test")
        })?;
        let origin = match &verify.path {
            Some(file) => Origin {
                file: self.shown(file),
                offset: 0,
            },
            None => Origin {
                file: name.clone(),
                offset: inline_offset(
                    &harness_builtins::read_regular(&full, harness_builtins::MAX_SCRIPT_BYTES)
                        .unwrap_or_default(),
                ),
            },
        };
        Ok(LoadedVerifier {
            name: verify.name,
            source: verify.source,
            args: delegation.args().clone(),
            hosts: delegation.allow_hosts().to_vec(),
            origin,
        })
    }

    /// The capabilities of a policy under test: the run's flags, plus the helper's and the
    /// delegation file's grants.
    fn capabilities(
        &self,
        options: &Map<String, Value>,
        hosts: &[String],
    ) -> std::result::Result<Capabilities, String> {
        let base = &self.shared.options.capabilities;
        let list = |key: &str| -> Vec<String> {
            options
                .get(key)
                .and_then(Value::as_array)
                .map(|items| {
                    items
                        .iter()
                        .filter_map(Value::as_str)
                        .map(str::to_owned)
                        .collect()
                })
                .unwrap_or_default()
        };
        let mut patterns: Vec<String> = base.hosts.patterns().map(str::to_owned).collect();
        patterns.extend(hosts.iter().cloned());
        patterns.extend(list("allow_hosts"));
        let hosts = HostAllowList::new(&patterns).map_err(|e| format!("`allow_hosts`: {e}"))?;
        let mut programs = base.programs.clone();
        programs.extend(list("allow_exec"));
        let mut env = base.env.clone();
        env.extend(list("allow_env"));
        Ok(Capabilities {
            fs_read: true,
            hosts,
            programs,
            env,
        })
    }

    /// Builds the sandbox of one call: a fresh workspace holding `files`, the mocks (each of
    /// which the policy must be allowed to reach), coverage.
    fn sandbox(
        &self,
        surface: Surface,
        capabilities: Capabilities,
        kwargs: &Map<String, Value>,
    ) -> std::result::Result<(Sandbox, tempfile::TempDir), String> {
        let mocks = Mocks::from_json(kwargs.get("http"), kwargs.get("exec"))?;
        for url in mocks.http.keys() {
            let parsed = reqwest::Url::parse(url)
                .map_err(|e| format!("http mock {url:?} is not a URL: {e}"))?;
            let host = parsed.host_str().unwrap_or_default();
            if !capabilities.hosts.allows(host) {
                return Err(format!(
                    "http mock for {url}: host {host:?} is not on the allow-list for {} scripts, so the policy could never reach it; allow it as the delegation would (`allow_hosts = [\"{host}\"]` in the helper, `network.allow`, or --allow-host)",
                    surface.as_str()
                ));
            }
        }
        for program in mocks.exec.keys() {
            if !capabilities.programs.iter().any(|p| p == program) {
                return Err(format!(
                    "exec mock for {program:?}: the program is not allowed for {} scripts, so the policy could never run it; allow it with `allow_exec = [\"{program}\"]` in the helper or --allow-exec",
                    surface.as_str()
                ));
            }
        }
        let dir = tempfile::Builder::new()
            .prefix("harness-test-")
            .tempdir()
            .map_err(|e| format!("cannot create a temporary workspace: {e}"))?;
        write_files(dir.path(), kwargs.get("files"))?;
        let workspace = Workspace::new(dir.path()).map_err(|e| e.to_string())?;
        let sandbox = Sandbox::new(
            surface,
            workspace,
            capabilities,
            self.shared.options.limits.clone(),
        )
        .with_interceptor(Arc::new(Mocked {
            mocks,
            coverage: self.shared.coverage.clone(),
        }));
        Ok((sandbox, dir))
    }

    fn remember(&self, script: &str, origin: Origin) {
        self.shared
            .origins
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(script.to_owned(), origin);
    }

    fn call_verifier(
        &self,
        path: &str,
        options: &Map<String, Value>,
        args: Vec<Value>,
        kwargs: &Map<String, Value>,
    ) -> std::result::Result<Value, String> {
        known_kwargs(kwargs, &["files", "http", "exec", "args", "evidence"])?;
        let loaded = self.load_verifier(path)?;
        self.remember(&loaded.name, loaded.origin.clone());
        let capabilities = self.capabilities(options, &loaded.hosts)?;
        let (sandbox, _dir) = self.sandbox(Surface::Verifier, capabilities, kwargs)?;
        let script_args = match kwargs.get("args") {
            None | Some(Value::Null) => loaded.args.clone(),
            Some(Value::Object(map)) => Value::Object(map.clone()),
            Some(_) => return Err("`args=` must be a dict".to_owned()),
        };
        let verifier = Verifier::compile(
            &self.shared.verifier_engine,
            Arc::new(sandbox),
            &loaded.name,
            &loaded.source,
            &script_args,
        )
        .map_err(|e| e.to_string())?;
        let values = match args.as_slice() {
            [result] => vec![result_payload(result, kwargs.get("evidence"))?],
            [call, result] => {
                if kwargs.contains_key("evidence") {
                    return Err(
                        "`evidence=` is for `run(result)`; a per-tool verifier gets (call, result)"
                            .to_owned(),
                    );
                }
                vec![call.clone(), result.clone()]
            }
            _ => {
                return Err(format!(
                    "takes the result (or a tool call and its result), got {} positional arguments",
                    args.len()
                ));
            }
        };
        let refs: Vec<&Value> = values.iter().collect();
        let (outcome, logs) = verifier.run_blocking(&refs).map_err(|e| e.to_string())?;
        Ok(json!({
            "verified": outcome.verified,
            "reason": outcome.reason,
            "evidence": outcome.evidence,
            "logs": logs,
        }))
    }

    fn load_hook(&self, path: &str, sandbox: Arc<Sandbox>) -> std::result::Result<HookSet, String> {
        let full = self.path(path)?;
        let hooks =
            HookSet::load(&self.shared.hook_engine, sandbox, &[full]).map_err(|problems| {
                problems
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join("; ")
            })?;
        for hook in hooks.hooks() {
            self.remember(
                &hook.script_path.display().to_string(),
                Origin {
                    file: self.shown(&hook.script_path),
                    offset: hook.script_line.saturating_sub(1),
                },
            );
        }
        Ok(hooks)
    }

    fn call_hook(
        &self,
        path: &str,
        options: &Map<String, Value>,
        args: Vec<Value>,
        kwargs: &Map<String, Value>,
    ) -> std::result::Result<Value, String> {
        known_kwargs(kwargs, &["files", "http", "exec", "delegate"])?;
        let [payload] = args.as_slice() else {
            return Err(format!(
                "takes the event's payload, got {} positional arguments",
                args.len()
            ));
        };
        let capabilities = self.capabilities(options, &[])?;
        let (sandbox, _dir) = self.sandbox(Surface::Hook, capabilities, kwargs)?;
        let hooks = self.load_hook(path, Arc::new(sandbox))?;
        let Some(hook) = hooks.hooks().first() else {
            return Err("the file holds no hook".to_owned());
        };
        let event = hook.event;
        let payload = hook_payload(event, payload)?;
        let names = match kwargs.get("delegate") {
            None | Some(Value::Null) => derived_names(event, &payload),
            Some(Value::String(name)) => vec![name.clone()],
            Some(Value::Array(items)) if items.iter().all(Value::is_string) => items
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect(),
            Some(_) => return Err("`delegate=` must be a string or a list of strings".to_owned()),
        };
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        let dispatch = hooks
            .dispatch(event, payload, &names)
            .map_err(|e| e.to_string())?;
        let (action, reason) = match (&dispatch.blocked, dispatch.runs.last()) {
            (Some(block), _) => ("block", block.reason.clone()),
            (None, None) => ("skip", String::new()),
            (None, Some(run)) => (
                match run.action {
                    Action::Modify => "modify",
                    _ => "allow",
                },
                run.reason.clone(),
            ),
        };
        Ok(json!({
            "action": action,
            "reason": reason,
            "payload": dispatch.payload,
        }))
    }
}

impl FileRunner {
    /// Checks that the policy at `path` (as the test wrote it) loads; `options` are the helper's
    /// keyword arguments (`allow_hosts`, …). Called by `verifier(path)` and `hook(path)`, so a
    /// missing or broken file fails the test at that line.
    pub(crate) fn open(
        &self,
        kind: PolicyKind,
        path: &str,
        options: &Map<String, Value>,
    ) -> std::result::Result<(), String> {
        match kind {
            PolicyKind::Verifier => {
                let loaded = self.load_verifier(path)?;
                self.remember(&loaded.name, loaded.origin.clone());
                let capabilities = self.capabilities(options, &loaded.hosts)?;
                let (sandbox, _dir) = self.sandbox(Surface::Verifier, capabilities, &Map::new())?;
                Verifier::compile(
                    &self.shared.verifier_engine,
                    Arc::new(sandbox),
                    &loaded.name,
                    &loaded.source,
                    &loaded.args,
                )
                .map(drop)
                .map_err(|e| e.to_string())
            }
            PolicyKind::Hook => {
                let capabilities = self.capabilities(options, &[])?;
                let (sandbox, _dir) = self.sandbox(Surface::Hook, capabilities, &Map::new())?;
                let hooks = self.load_hook(path, Arc::new(sandbox))?;
                match hooks.hooks().len() {
                    1 => Ok(()),
                    0 => Err("the path holds no hook file".to_owned()),
                    n => Err(format!("the path holds {n} hooks; name one hook file")),
                }
            }
        }
    }

    /// Runs the policy on `args` (the positional arguments of the call, as JSON) with `kwargs`
    /// (its mocks: `files`, `http`, `exec`, `args`, `evidence`, …) and returns what the test
    /// sees; an error says why the call gave no verdict.
    pub(crate) fn call(
        &self,
        kind: PolicyKind,
        path: &str,
        options: &Map<String, Value>,
        args: Vec<Value>,
        kwargs: Map<String, Value>,
    ) -> std::result::Result<Value, String> {
        match kind {
            PolicyKind::Verifier => self.call_verifier(path, options, args, &kwargs),
            PolicyKind::Hook => self.call_hook(path, options, args, &kwargs),
        }
    }
}

fn known_kwargs(kwargs: &Map<String, Value>, known: &[&str]) -> std::result::Result<(), String> {
    match kwargs.keys().find(|k| !known.contains(&k.as_str())) {
        Some(key) => Err(format!(
            "unknown argument `{key}=` (known: {})",
            known.join(", ")
        )),
        None => Ok(()),
    }
}

/// Writes `files = {path: text}` into the temporary workspace; paths must stay inside it.
fn write_files(root: &Path, files: Option<&Value>) -> std::result::Result<(), String> {
    let files = match files {
        None | Some(Value::Null) => return Ok(()),
        Some(Value::Object(files)) => files,
        Some(_) => return Err("`files=` must be a dict of path to text".to_owned()),
    };
    for (path, content) in files {
        let Value::String(content) = content else {
            return Err(format!("`files[{path:?}]` must be text"));
        };
        let relative = Path::new(path);
        let inside = !path.is_empty()
            && relative
                .components()
                .all(|c| matches!(c, Component::Normal(_) | Component::CurDir));
        if !inside {
            return Err(format!(
                "`files` path {path:?} must be relative and stay inside the workspace"
            ));
        }
        let full = root.join(relative);
        if let Some(parent) = full.parent() {
            std::fs::create_dir_all(parent).map_err(|e| format!("`files[{path:?}]`: {e}"))?;
        }
        std::fs::write(&full, content).map_err(|e| format!("`files[{path:?}]`: {e}"))?;
    }
    Ok(())
}

/// A delegation Result from what the test gave, with what it left out filled in (`id`,
/// `response`) and `evidence=` put in place; anything that is not a Result field is an error.
fn result_payload(given: &Value, evidence: Option<&Value>) -> std::result::Result<Value, String> {
    let Value::Object(given) = given else {
        return Err(format!("the result must be a dict, got {given}"));
    };
    let mut result = Map::new();
    result.insert("id".to_owned(), json!("d-test"));
    result.insert("response".to_owned(), json!(""));
    result.extend(given.clone());
    if let Some(evidence) = evidence.filter(|e| !e.is_null()) {
        result.insert("evidence".to_owned(), evidence.clone());
    }
    let text = Value::Object(result).to_string();
    DelegationResult::from_json("the result", &text).map(|r| r.to_value())
}

/// An event's payload from what the test gave, with the keys it left out filled in.
fn hook_payload(event: Event, given: &Value) -> std::result::Result<Value, String> {
    let Value::Object(given) = given else {
        return Err(format!("the payload must be a dict, got {given}"));
    };
    let defaults = match event {
        Event::DelegationPre => json!({
            "id": "d-test", "task": "", "delegate": {"kind": "scripted", "model": null},
            "tools": [], "args": {}, "max_verify_retries": 2,
        }),
        Event::DelegationPostVerify | Event::DelegationPost => json!({
            "id": "d-test", "parent_id": null, "attempt": 0, "response": "",
            "tool_calls": [], "tool_results": [], "changes": null, "evidence": [],
        }),
        Event::ToolPre => json!({"id": "call_test", "arguments": {}}),
        Event::ToolPost => json!({"call_id": "call_test", "content": "", "is_error": false}),
    };
    let Value::Object(mut payload) = defaults else {
        unreachable!("the defaults are objects")
    };
    payload.extend(given.clone());
    let payload = Value::Object(payload);
    event.check_shape(&payload)?;
    Ok(payload)
}

/// The names hooks' `tools` and `delegates` globs match, as the runtime would pass them.
fn derived_names(event: Event, payload: &Value) -> Vec<String> {
    let strings = |values: &[&Value]| -> Vec<String> {
        values
            .iter()
            .filter_map(|v| v.as_str())
            .map(str::to_owned)
            .collect()
    };
    match event {
        Event::ToolPre | Event::ToolPost => strings(&[&payload["name"]]),
        Event::DelegationPre => {
            strings(&[&payload["delegate"]["kind"], &payload["delegate"]["model"]])
        }
        Event::DelegationPostVerify | Event::DelegationPost => Vec::new(),
    }
}

/// The line of a delegation file on which an inline `verify: |` script's line 1 sits, less one
/// (0 when it cannot be found: lines are then the script's own).
fn inline_offset(yaml: &str) -> usize {
    yaml.lines()
        .position(|line| {
            let line = line.trim_end();
            line.starts_with("verify:")
                && (line.ends_with('|') || line.ends_with("|-") || line.ends_with('>'))
        })
        .map_or(0, |i| i + 1)
}

fn percent(covered: usize, total: usize) -> f64 {
    if total == 0 {
        100.0
    } else {
        (covered as f64 * 10_000.0 / total as f64).round() / 100.0
    }
}

fn coverage_report(shared: &Shared, coverage: &Coverage) -> CoverageReport {
    let origins = shared
        .origins
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clone();
    // File → line → covered (a line is covered when it ran in any script mapped onto it).
    let mut by_file: BTreeMap<String, BTreeMap<usize, bool>> = BTreeMap::new();
    for (script, lines) in coverage.scripts() {
        let Some(origin) = origins.get(&script) else {
            continue;
        };
        let file = by_file.entry(origin.file.clone()).or_default();
        for line in &lines.statements {
            let ran = lines.covered.contains(line);
            *file.entry(line + origin.offset).or_default() |= ran;
        }
    }
    let mut files = BTreeMap::new();
    let (mut covered_total, mut missed_total) = (0, 0);
    for (file, lines) in by_file {
        let covered: Vec<usize> = lines.iter().filter(|(_, c)| **c).map(|(l, _)| *l).collect();
        let missed: Vec<usize> = lines
            .iter()
            .filter(|(_, c)| !**c)
            .map(|(l, _)| *l)
            .collect();
        covered_total += covered.len();
        missed_total += missed.len();
        files.insert(
            file,
            FileCoverage {
                covered: ranges_over(&lines, true),
                not_covered: ranges_over(&lines, false),
                covered_lines: covered.len(),
                not_covered_lines: missed.len(),
                coverage: percent(covered.len(), covered.len() + missed.len()),
            },
        );
    }
    CoverageReport {
        files,
        covered_lines: covered_total,
        not_covered_lines: missed_total,
        coverage: percent(covered_total, covered_total + missed_total),
    }
}

/// Ranges of statement lines with status `covered`; lines without statements between two of
/// them do not break a range.
fn ranges_over(lines: &BTreeMap<usize, bool>, covered: bool) -> Vec<Range> {
    let mut out: Vec<Range> = Vec::new();
    let mut open = false;
    for (&line, &ran) in lines {
        if ran == covered {
            match out.last_mut() {
                Some(range) if open => range.end.row = line,
                _ => out.push(Range {
                    start: Row { row: line },
                    end: Row { row: line },
                }),
            }
            open = true;
        } else {
            open = false;
        }
    }
    out
}

/// Renders `report` as JUnit XML (the Jenkins/Surefire shape CI systems read): one
/// `<testsuite>` per test file, a `<failure>` or `<error>` per test that did not pass.
pub fn junit(report: &TestReport) -> String {
    let mut suites: BTreeMap<&str, Vec<&TestCase>> = BTreeMap::new();
    for case in &report.tests {
        suites.entry(case.file.as_str()).or_default().push(case);
    }
    let seconds = |ms: f64| format!("{:.3}", ms / 1000.0);
    let total_ms: f64 = report.tests.iter().map(|t| t.duration_ms).sum();
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    out.push_str(&format!(
        "<testsuites name=\"harness test\" tests=\"{}\" failures=\"{}\" errors=\"{}\" time=\"{}\">\n",
        report.tests.len(),
        report.failed,
        report.errors,
        seconds(total_ms)
    ));
    for (file, cases) in suites {
        let count = |status| cases.iter().filter(|c| c.status == status).count();
        let time: f64 = cases.iter().map(|c| c.duration_ms).sum();
        out.push_str(&format!(
            "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{}\" errors=\"{}\" skipped=\"0\" time=\"{}\" file=\"{}\">\n",
            xml(file),
            cases.len(),
            count(Status::Failed),
            count(Status::Error),
            seconds(time),
            xml(file)
        ));
        for case in cases {
            out.push_str(&format!(
                "    <testcase name=\"{}\" classname=\"{}\" time=\"{}\"",
                xml(&case.name),
                xml(&classname(file)),
                seconds(case.duration_ms)
            ));
            let element = match case.status {
                Status::Passed => None,
                Status::Failed => Some(("failure", "assertion")),
                Status::Error => Some(("error", "error")),
            };
            if element.is_none() && case.logs.is_empty() {
                out.push_str("/>\n");
                continue;
            }
            out.push_str(">\n");
            if let Some((tag, kind)) = element {
                out.push_str(&format!(
                    "      <{tag} message=\"{}\" type=\"{kind}\">{}: {}</{tag}>\n",
                    xml(&case.message),
                    xml(&case.place()),
                    xml(&case.message)
                ));
            }
            if !case.logs.is_empty() {
                out.push_str(&format!(
                    "      <system-out>{}</system-out>\n",
                    xml(&case.logs.join("\n"))
                ));
            }
            out.push_str("    </testcase>\n");
        }
        out.push_str("  </testsuite>\n");
    }
    out.push_str("</testsuites>\n");
    out
}

/// A dotted class name for a test file: its path without `.star`, `/` as `.`.
fn classname(file: &str) -> String {
    file.trim_end_matches(".star")
        .trim_start_matches("./")
        .trim_start_matches('/')
        .replace(['/', '\\'], ".")
}

/// Escapes text for an XML attribute or element; drops characters XML 1.0 cannot hold.
fn xml(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\n' => out.push_str("&#10;"),
            '\t' | '\r' => out.push(c),
            c if (c as u32) < 0x20 || c == '\u{FFFE}' || c == '\u{FFFF}' => {}
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_join_statement_lines_across_gaps() {
        let lines: BTreeMap<usize, bool> = [
            (1, true),
            (2, true),
            (5, true),
            (7, false),
            (8, false),
            (9, true),
        ]
        .into_iter()
        .collect();
        let covered = ranges_over(&lines, true);
        assert_eq!(covered.len(), 2);
        assert_eq!((covered[0].start.row, covered[0].end.row), (1, 5));
        assert_eq!((covered[1].start.row, covered[1].end.row), (9, 9));
        let missed = ranges_over(&lines, false);
        assert_eq!((missed[0].start.row, missed[0].end.row), (7, 8));
        assert!((percent(4, 6) - 66.67).abs() < 1e-9);
        assert!((percent(0, 0) - 100.0).abs() < 1e-9);
    }

    #[test]
    fn xml_escapes_and_drops_what_xml_cannot_hold() {
        assert_eq!(xml("a<b & \"c\"\u{1}\n"), "a&lt;b &amp; &quot;c&quot;&#10;");
        assert_eq!(
            classname("./examples/x/gate_test.star"),
            "examples.x.gate_test"
        );
    }
}
