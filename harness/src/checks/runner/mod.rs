//! The test runner's own report (DESIGN §10.1). The code under test runs inside the test
//! process and can end it with status 0 before a failure is reported (`os._exit(0)`), skip
//! every test from product code, or leave fewer tests than the repository holds. So when a
//! check runs a known test runner — pytest, `cargo test`, `cargo nextest`, `go test`, jest,
//! vitest, `node --test`, mocha — harness asks it for its machine report, written to a private
//! path outside the workspace where the runner has one (pytest's JUnit XML, `go test -json`,
//! jest's and vitest's JSON, node's JUnit reporter), else reads its summary line, and judges the
//! check by what the runner says it ran, not only by its exit status. Before attempt 0 the
//! runner's list mode counts the tests of the untouched workspace (the base), so an attempt
//! that passes fewer is caught.

mod base;
mod command;
mod reports;

pub(crate) use base::Collection;

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

pub(crate) use command::Command;
use command::{Edit, program};
pub(crate) use reports::Report;

use crate::gates::runner::{Runner, RunnerSetting};

/// What a runner said it ran.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TestCounts {
    /// Tests that passed.
    pub passed: u64,
    /// Tests that failed.
    pub failed: u64,
    /// Tests skipped (or pending, todo).
    pub skipped: u64,
    /// Errors outside tests: collection and import errors, crashed suites.
    pub errors: u64,
    /// Every test the runner reported.
    pub total: u64,
}

impl std::fmt::Display for TestCounts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} passed, {} failed, {} skipped",
            self.passed, self.failed, self.skipped
        )?;
        if self.errors > 0 {
            write!(f, ", {} errors", self.errors)?;
        }
        Ok(())
    }
}

/// Where the runner's result is read from, for a run of a check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Plan {
    /// The runner.
    pub(crate) runner: Runner,
    /// The argv to run (the check's, edited to ask for the report).
    pub(crate) argv: Vec<String>,
    /// Variables to set besides the check's own.
    pub(crate) env: Vec<(String, String)>,
    /// The report file the runner writes, when it writes one.
    pub(crate) report: Option<PathBuf>,
}

/// How a check's runner is found and asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Found {
    pub(crate) runner: Runner,
    /// The check's command.
    command: Command,
    /// Which simple command of it runs the runner, and the runner's word in it (`None` when the
    /// runner was named by `runner:` and is not visible in the command).
    at: Option<(usize, usize)>,
}

/// Finds the runner `setting` names, or the one the check's `argv` runs (`auto`); `root` is the
/// workspace (for `npm test`, whose `scripts.test` says what runs).
pub(crate) fn find(setting: RunnerSetting, argv: &[String], root: &Path) -> Option<Found> {
    let command = Command::of(argv);
    let detected = detect(&command, root);
    match setting {
        RunnerSetting::None => None,
        RunnerSetting::Auto => detected,
        RunnerSetting::Named(runner) => Some(match detected {
            Some(found) if found.runner == runner => found,
            _ => Found {
                runner,
                command,
                at: None,
            },
        }),
    }
}

/// The runner `command` runs, if it is a known one.
fn detect(command: &Command, root: &Path) -> Option<Found> {
    let simples = command.simples()?;
    for (index, simple) in simples.iter().enumerate() {
        let Some(p) = program(&simple.words) else {
            continue;
        };
        let words: Vec<&str> = simple.words.iter().map(|w| w.text.as_str()).collect();
        let base = |i: usize| words.get(i).map(|w| w.rsplit('/').next().unwrap_or(w));
        let found = |runner: Runner, at: usize| Found {
            runner,
            command: command.clone(),
            at: Some((index, at)),
        };
        match base(p) {
            Some("pytest" | "py.test") => return Some(found(Runner::Pytest, p)),
            Some(py) if py.starts_with("python") => {
                if let Some(m) = words.iter().position(|w| *w == "-m")
                    && words.get(m + 1) == Some(&"pytest")
                {
                    return Some(found(Runner::Pytest, m + 1));
                }
            }
            Some("cargo") => {
                let sub = words[p + 1..]
                    .iter()
                    .position(|w| !w.starts_with('-') && !w.starts_with('+'))
                    .map(|i| p + 1 + i);
                match sub.map(|s| (s, words[s])) {
                    Some((s, "test")) => return Some(found(Runner::Cargo, s)),
                    Some((s, "nextest")) if words.get(s + 1) == Some(&"run") => {
                        return Some(found(Runner::Nextest, s + 1));
                    }
                    _ => {}
                }
            }
            Some("go") if words.get(p + 1) == Some(&"test") => {
                return Some(found(Runner::Go, p + 1));
            }
            Some("jest") => return Some(found(Runner::Jest, p)),
            Some("vitest") => return Some(found(Runner::Vitest, p)),
            Some("mocha" | "_mocha") => return Some(found(Runner::Mocha, p)),
            Some("node")
                if words
                    .get(p + 1..)
                    .is_some_and(|rest| rest.contains(&"--test")) =>
            {
                let at = words.iter().position(|w| *w == "--test").unwrap_or(p);
                return Some(found(Runner::Node, at));
            }
            Some("npm" | "yarn" | "pnpm" | "bun")
                if matches!(
                    words.get(p + 1..),
                    Some(["test" | "t", ..]) | Some(["run", "test", ..])
                ) =>
            {
                // What `scripts.test` runs, judged as if written here (it cannot be edited
                // from here: its report comes through its summary or the environment).
                let script = package_test_script(root)?;
                let inner = detect(&Command::Shell(script), root)?;
                return Some(Found {
                    runner: inner.runner,
                    command: command.clone(),
                    at: None,
                });
            }
            _ => {}
        }
    }
    None
}

/// `scripts.test` of the workspace's `package.json`.
fn package_test_script(root: &Path) -> Option<String> {
    let text = crate::scope::read_text(root, "package.json")?;
    let json: serde_json::Value = serde_json::from_str(&text).ok()?;
    json.get("scripts")?
        .get("test")?
        .as_str()
        .map(str::to_owned)
}

impl Found {
    /// How to run the check so that the runner writes its report into `dir` (private, outside
    /// the workspace) as `name`; `env` is the check's own environment.
    pub(crate) fn plan(&self, dir: &Path, name: &str, env: &[(String, String)]) -> Plan {
        let report = dir.join(name);
        let report_arg = report.display().to_string();
        let edit = |edit: Edit| -> Option<Vec<String>> {
            let (index, _) = self.at?;
            self.command.edited(index, &edit).map(|c| c.argv())
        };
        let word = self.at.map(|(_, w)| w);
        let (argv, extra, report) = match self.runner {
            Runner::Pytest => {
                // Through the environment: it reaches pytest however it is started (`make
                // test`, `tox`), and the command stays as written.
                let existing = env
                    .iter()
                    .find(|(k, _)| k == "PYTEST_ADDOPTS")
                    .map(|(_, v)| format!("{v} "))
                    .unwrap_or_default();
                let named_own = self.command.argv().iter().any(|w| w.contains("--junitxml"));
                if named_own {
                    (self.command.argv(), Vec::new(), None)
                } else {
                    (
                        self.command.argv(),
                        vec![(
                            "PYTEST_ADDOPTS".to_owned(),
                            format!("{existing}--junitxml={report_arg}"),
                        )],
                        Some(report),
                    )
                }
            }
            Runner::Go => match edit(Edit::After(word.unwrap_or(0), vec!["-json".into()])) {
                Some(argv) if !self.command.argv().iter().any(|w| w == "-json") => {
                    (argv, Vec::new(), None)
                }
                _ => (self.command.argv(), Vec::new(), None),
            },
            Runner::Jest => match edit(Edit::Append(vec![
                "--json".into(),
                format!("--outputFile={report_arg}"),
            ])) {
                Some(argv) => (argv, Vec::new(), Some(report)),
                None => (self.command.argv(), Vec::new(), None),
            },
            Runner::Vitest => match edit(Edit::Append(vec![
                "--reporter=default".into(),
                "--reporter=json".into(),
                format!("--outputFile.json={report_arg}"),
            ])) {
                Some(argv) => (argv, Vec::new(), Some(report)),
                None => (self.command.argv(), Vec::new(), None),
            },
            Runner::Node => match edit(Edit::After(
                word.unwrap_or(0),
                vec![
                    "--test-reporter=junit".into(),
                    format!("--test-reporter-destination={report_arg}"),
                    "--test-reporter=spec".into(),
                    "--test-reporter-destination=stdout".into(),
                ],
            )) {
                Some(argv) => (argv, Vec::new(), Some(report)),
                None => (self.command.argv(), Vec::new(), None),
            },
            Runner::Mocha => {
                let own = self
                    .command
                    .argv()
                    .iter()
                    .any(|w| w.contains("--reporter") || w == "-R");
                match edit(Edit::Append(vec![
                    "--reporter".into(),
                    "json".into(),
                    "--reporter-option".into(),
                    format!("output={report_arg}"),
                ]))
                .filter(|_| !own)
                {
                    Some(argv) => (argv, Vec::new(), Some(report)),
                    None => (self.command.argv(), Vec::new(), None),
                }
            }
            Runner::Cargo | Runner::Nextest => (self.command.argv(), Vec::new(), None),
        };
        Plan {
            runner: self.runner,
            argv,
            env: extra,
            report,
        }
    }

    /// How to list the tests of the workspace without running them (the base count), when the
    /// runner has a list mode and the command can be edited for it: the argv and the variables.
    pub(crate) fn list(&self) -> Option<(Vec<String>, Env)> {
        let edit = |edit: Edit| -> Option<Vec<String>> {
            let (index, _) = self.at?;
            self.command.edited(index, &edit).map(|c| c.argv())
        };
        let word = self.at.map(|(_, w)| w);
        match self.runner {
            Runner::Pytest => Some((
                self.command.argv(),
                vec![
                    (
                        "PYTEST_ADDOPTS".to_owned(),
                        "--collect-only -q -p no:cacheprovider".to_owned(),
                    ),
                    ("PYTHONDONTWRITEBYTECODE".to_owned(), "1".to_owned()),
                ],
            )),
            Runner::Cargo => {
                let has_separator = self.command.argv().iter().any(|w| w == "--")
                    || self
                        .command
                        .simples()
                        .and_then(|s| s.get(self.at?.0).cloned())
                        .is_some_and(|s| s.words.iter().any(|w| w.text == "--"));
                let args = if has_separator {
                    vec!["--list".to_owned()]
                } else {
                    vec!["--".to_owned(), "--list".to_owned()]
                };
                edit(Edit::Append(args)).map(|argv| (argv, Vec::new()))
            }
            Runner::Go => edit(Edit::After(word?, vec!["-list".to_owned(), ".".to_owned()]))
                .map(|argv| (argv, Vec::new())),
            Runner::Jest => {
                edit(Edit::Append(vec!["--listTests".to_owned()])).map(|argv| (argv, Vec::new()))
            }
            Runner::Vitest => {
                let (index, at) = self.at?;
                let simple = self.command.simples()?.get(index)?.clone();
                let next = simple.words.get(at + 1).map(|w| w.text.as_str());
                let argv = if next == Some("run") {
                    self.command
                        .edited(index, &Edit::Replace(at + 1, "list".into()))?
                        .argv()
                } else {
                    self.command
                        .edited(index, &Edit::After(at, vec!["list".into()]))?
                        .argv()
                };
                Some((argv, Vec::new()))
            }
            Runner::Mocha => {
                edit(Edit::Append(vec!["--dry-run".to_owned()])).map(|argv| (argv, Vec::new()))
            }
            Runner::Nextest | Runner::Node => None,
        }
    }
}

/// A pytest plugin writing the node id of every collected test to `$HARNESS_COLLECTED`: the
/// base's names, however verbose the command's own output is.
pub(crate) const PYTEST_COLLECT_PLUGIN: &str = "import os\n\n\ndef pytest_collection_finish(session):\n    with open(os.environ[\"HARNESS_COLLECTED\"], \"w\") as listed:\n        for item in session.items:\n            listed.write(item.nodeid + \"\\n\")\n";

/// Variables set for a run, name and value.
pub(crate) type Env = Vec<(String, String)>;

/// The tests the untouched workspace holds, by the runner's list mode.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BaseTests {
    /// How many (for jest: test files).
    pub count: u64,
    /// Their names where the runner lists them (`tests/test_calc.py::test_add`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub names: Vec<String>,
    /// What is counted: `tests`, or `test files` for jest.
    pub unit: String,
    /// How long listing took.
    pub duration_ms: u64,
}

/// Reads the list mode's output of `runner`; `None` when it lists nothing readable.
pub(crate) fn parse_list(runner: Runner, stdout: &str) -> Option<(u64, Vec<String>, &'static str)> {
    reports::parse_list(runner, stdout)
}

/// What the runner's report says of a check run that exited `exit` (`None`: killed), judged:
/// the counts when the runner reported them, and why the run is not a pass when it is not
/// one although it exited 0.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Verdict {
    /// What the runner reported; `None` when it never did.
    pub(crate) report: Option<Report>,
    /// Why an exit-0 run does not pass (no report, no test ran, all skipped, fewer than the
    /// base, fewer than `min_tests`, failures reported); `None` when it passes or exited
    /// non-zero (its exit code says enough).
    pub(crate) failure: Option<String>,
}

/// Judges a finished run of `plan`: its report, and whether a run that exited 0 may pass.
pub(crate) fn judge(
    plan: &Plan,
    stdout: &str,
    stderr: &str,
    exit: Option<i32>,
    base: Option<&BaseTests>,
    min_tests: Option<u64>,
) -> Verdict {
    let report = reports::read(plan, stdout, stderr);
    let name = plan.runner.as_str();
    if exit != Some(0) {
        return Verdict {
            report,
            failure: None,
        };
    }
    let Some(found) = &report else {
        return Verdict {
            report,
            failure: Some(format!(
                "{name} exited 0 without its report: something ended the process before the tests finished (an exit from the code under test?)"
            )),
        };
    };
    let counts = found.counts;
    // pytest's report against its own summary line: code that rewrote one of them (the report
    // file is on the command line it can read) left the other.
    let disagreement = (plan.runner == Runner::Pytest && found.source == "junit")
        .then(|| reports::pytest_summary_counts(stdout))
        .flatten()
        .filter(|said| {
            said.passed + said.skipped != counts.passed + counts.skipped
                || (said.failed + said.errors > 0) != (counts.failed + counts.errors > 0)
        });
    let failure = if let Some(said) = disagreement {
        Some(format!(
            "pytest's report says {counts} and its summary line {said}: something rewrote one of them"
        ))
    } else if let Some(why) = &found.incomplete {
        Some(format!("{name} exited 0, but {why}"))
    } else if counts.failed > 0 || counts.errors > 0 {
        Some(format!(
            "{name} exited 0, but its report says {counts}: something changed the process's exit status"
        ))
    } else if counts.total == 0 || counts.passed + counts.skipped == 0 {
        Some(format!("{name} exited 0, but no test ran"))
    } else if counts.passed == 0 && counts.skipped > 0 {
        Some(format!(
            "{name} exited 0, but every test was skipped ({} skipped)",
            counts.skipped
        ))
    } else if let Some(base) = base.filter(|b| counts.passed < b.count && b.unit == "tests") {
        let missing = missing(&base.names, &found.passed);
        let named = if missing.is_empty() {
            String::new()
        } else {
            let shown: Vec<&str> = missing.iter().take(10).map(String::as_str).collect();
            let more = missing.len().saturating_sub(shown.len());
            format!(
                "; not passing: {}{}",
                shown.join(", "),
                if more > 0 {
                    format!(" and {more} more")
                } else {
                    String::new()
                }
            )
        };
        Some(format!(
            "{name} passed {} tests, fewer than the {} the workspace held before the delegate ran{named}",
            counts.passed, base.count
        ))
    } else if let Some(base) =
        base.filter(|b| b.unit != "tests" && found.files.is_some_and(|f| f < b.count))
    {
        Some(format!(
            "{name} ran {} test files, fewer than the {} the workspace held before the delegate ran",
            found.files.unwrap_or(0),
            base.count
        ))
    } else {
        min_tests.filter(|m| counts.passed < *m).map(|min| {
            format!(
                "{name} passed {} tests, fewer than min_tests = {min}",
                counts.passed
            )
        })
    };
    Verdict { report, failure }
}

/// The base's tests that are not among those that passed, where both are named (matched on
/// the test's own name and its file or module, however the runner spells them).
fn missing(base: &[String], passed: &[String]) -> Vec<String> {
    if base.is_empty() || passed.is_empty() {
        return Vec::new();
    }
    let passed: std::collections::HashSet<String> =
        passed.iter().map(|p| reports::key(p)).collect();
    base.iter()
        .filter(|b| !passed.contains(&reports::key(b)))
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(script: &str) -> Vec<String> {
        vec!["sh".into(), "-c".into(), script.into()]
    }

    #[test]
    fn runners_are_recognised_in_the_commands_people_write() {
        let root = Path::new("/nonexistent");
        let cases = [
            ("python3 -m pytest -q tests", Some(Runner::Pytest)),
            ("pytest", Some(Runner::Pytest)),
            ("uv run pytest -x", Some(Runner::Pytest)),
            ("cd app && cargo test --quiet", Some(Runner::Cargo)),
            ("cargo +nightly nextest run", Some(Runner::Nextest)),
            ("go test ./...", Some(Runner::Go)),
            ("npx jest --ci", Some(Runner::Jest)),
            ("npx vitest run", Some(Runner::Vitest)),
            ("node --test test/", Some(Runner::Node)),
            ("npx mocha", Some(Runner::Mocha)),
            ("timeout 60 env CI=1 pytest", Some(Runner::Pytest)),
            ("cargo clippy -- -D warnings", None),
            ("make test", None),
            ("grep -q x src/app.py", None),
        ];
        for (script, expected) in cases {
            let found = find(RunnerSetting::Auto, &argv(script), root).map(|f| f.runner);
            assert_eq!(found, expected, "{script}");
        }
        assert_eq!(
            find(
                RunnerSetting::Named(Runner::Pytest),
                &argv("make test"),
                root
            )
            .map(|f| f.runner),
            Some(Runner::Pytest)
        );
        assert!(find(RunnerSetting::None, &argv("pytest"), root).is_none());
    }

    #[test]
    fn the_report_is_asked_for_where_each_runner_takes_it() {
        let root = Path::new("/nonexistent");
        let dir = Path::new("/tmp/r");
        let plan = |script: &str| {
            find(RunnerSetting::Auto, &argv(script), root)
                .expect("a runner")
                .plan(dir, "report", &[])
        };
        let pytest = plan("python3 -m pytest -q tests");
        assert_eq!(
            pytest.env,
            [(
                "PYTEST_ADDOPTS".to_owned(),
                "--junitxml=/tmp/r/report".to_owned()
            )]
        );
        assert_eq!(pytest.argv, argv("python3 -m pytest -q tests"));
        assert_eq!(plan("go test ./...").argv, argv("go test -json ./..."));
        assert_eq!(
            plan("npx jest").argv,
            argv("npx jest --json --outputFile=/tmp/r/report")
        );
        assert_eq!(
            plan("node --test test/").argv,
            argv(
                "node --test --test-reporter=junit --test-reporter-destination=/tmp/r/report --test-reporter=spec --test-reporter-destination=stdout test/"
            )
        );
        let list = find(RunnerSetting::Auto, &argv("cargo test --quiet"), root)
            .expect("cargo")
            .list()
            .expect("a list mode");
        assert_eq!(list.0, argv("cargo test --quiet -- --list"));
    }

    #[test]
    fn unknown_runners_and_bad_names_are_said() {
        let error = RunnerSetting::parse("d.yaml: `checks[0]`", "pytets").expect_err("unknown");
        assert!(
            error.message().contains("pytest, cargo"),
            "{}",
            error.message()
        );
        assert_eq!(
            RunnerSetting::parse("x", "go").ok(),
            Some(RunnerSetting::Named(Runner::Go))
        );
    }
}
