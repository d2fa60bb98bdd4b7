//! Reading what each runner reported: JUnit XML (pytest, node), JSON (jest, vitest), `go test
//! -json` events, and summary lines (`cargo test`, nextest, mocha, pytest's last line); and
//! each runner's list mode (the base). Shapes as the recorded fixtures under
//! `harness/tests/data/runners/` show them.

use std::sync::LazyLock;

use regex::Regex;
use serde_json::Value;

use super::{Plan, Runner, TestCounts};

/// The largest report read, bytes.
const MAX_REPORT: u64 = 64 * 1024 * 1024;

/// What a runner reported of one run.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Report {
    /// The counts.
    pub(crate) counts: TestCounts,
    /// The tests that passed, by name where the report names them.
    pub(crate) passed: Vec<String>,
    /// The tests that failed (or errored), by name.
    pub(crate) failed: Vec<String>,
    /// Where the counts come from: `junit`, `json`, `events` or `summary`.
    pub(crate) source: &'static str,
    /// Why the report shows the run ended early, when it does ("a test binary started 3 tests
    /// and never reported").
    pub(crate) incomplete: Option<String>,
    /// Test files run (jest and vitest), for a base counted in files.
    pub(crate) files: Option<u64>,
}

impl Report {
    fn new(source: &'static str) -> Self {
        Report {
            counts: TestCounts::default(),
            passed: Vec::new(),
            failed: Vec::new(),
            source,
            incomplete: None,
            files: None,
        }
    }
}

/// Reads the report of a run of `plan`; `None` when the runner never reported.
pub(crate) fn read(plan: &Plan, stdout: &str, stderr: &str) -> Option<Report> {
    let file = || {
        let path = plan.report.as_ref()?;
        harness_builtins::read_regular(path, MAX_REPORT).ok()
    };
    match plan.runner {
        Runner::Pytest => match &plan.report {
            Some(_) => junit(&file()?, false),
            None => pytest_summary(stdout),
        },
        Runner::Node => match &plan.report {
            Some(_) => junit(&file()?, true),
            None => node_summary(stdout),
        },
        Runner::Jest | Runner::Vitest => match &plan.report {
            Some(_) => jest_json(&file()?),
            None => None,
        },
        Runner::Go => go_events(stdout),
        Runner::Cargo => cargo(stdout),
        Runner::Nextest => nextest(&format!("{stdout}\n{stderr}")),
        Runner::Mocha => match &plan.report {
            Some(_) => mocha_json(&file()?),
            None => mocha(stdout),
        },
    }
}

/// mocha's JSON reporter's file: `stats` and the `passes`/`failures` lists.
fn mocha_json(text: &str) -> Option<Report> {
    let json: Value = serde_json::from_str(text).ok()?;
    let stats = json.get("stats")?;
    let number = |key: &str| stats.get(key).and_then(Value::as_u64).unwrap_or(0);
    let mut report = Report::new("json");
    report.counts.total = number("tests");
    report.counts.passed = number("passes");
    report.counts.failed = number("failures");
    report.counts.skipped = number("pending");
    let titles = |key: &str| -> Vec<String> {
        json.get(key)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|t| {
                t.get("fullTitle")
                    .and_then(Value::as_str)
                    .map(str::to_owned)
            })
            .collect()
    };
    report.passed = titles("passes");
    report.failed = titles("failures");
    Some(report)
}

/// A JUnit XML report (pytest's, node's): each `testcase` passed, failed (`failure`/`error`)
/// or skipped (`skipped`). `node`: node 20 reports a test file that ran no `test()` — it
/// exited first, or holds none — as one passing test named by the file's path; that is no test.
fn junit(text: &str, node: bool) -> Option<Report> {
    let options = roxmltree::ParsingOptions {
        allow_dtd: false,
        ..roxmltree::ParsingOptions::default()
    };
    let document = roxmltree::Document::parse_with_options(text, options).ok()?;
    let mut report = Report::new("junit");
    let mut files_without_tests = Vec::new();
    for case in document
        .descendants()
        .filter(|n| n.has_tag_name("testcase"))
    {
        let name = case.attribute("name").unwrap_or("");
        let class = case.attribute("classname").unwrap_or("");
        let full = if class.is_empty() || node {
            name.to_owned()
        } else {
            format!("{class}::{name}")
        };
        let child = |tag: &str| case.children().any(|c| c.has_tag_name(tag));
        report.counts.total += 1;
        if child("failure") {
            report.counts.failed += 1;
            report.failed.push(full);
        } else if child("error") {
            // pytest's collection errors (`classname=""`) and internal errors.
            report.counts.errors += 1;
            report.failed.push(full);
        } else if child("skipped") {
            report.counts.skipped += 1;
        } else if node && looks_like_a_file(name) {
            report.counts.total -= 1;
            files_without_tests.push(name.to_owned());
        } else {
            report.counts.passed += 1;
            report.passed.push(full);
        }
    }
    if !files_without_tests.is_empty() {
        report.counts.errors += files_without_tests.len() as u64;
        report.incomplete = Some(format!(
            "{} test file(s) ended without running a test of their own (an exit at load?): {}",
            files_without_tests.len(),
            files_without_tests.join(", ")
        ));
    }
    Some(report)
}

/// Whether a node test's name is a test file's path (node 20's stand-in for a file that ran no
/// test of its own).
fn looks_like_a_file(name: &str) -> bool {
    (name.starts_with('/') || name.contains('/'))
        && [".js", ".mjs", ".cjs", ".ts", ".mts", ".cts", ".jsx", ".tsx"]
            .iter()
            .any(|ext| name.ends_with(ext))
}

/// The counts of pytest's summary line, when it printed one.
pub(crate) fn pytest_summary_counts(stdout: &str) -> Option<TestCounts> {
    pytest_summary(stdout).map(|r| r.counts)
}

/// pytest's last line: `2 passed, 1 skipped in 0.03s`, `no tests ran in 0.01s`.
fn pytest_summary(stdout: &str) -> Option<Report> {
    static COUNT: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"(\d+) (passed|failed|skipped|errors?|xfailed|xpassed|deselected|warnings?)")
            .expect("the pytest summary pattern compiles")
    });
    let line = stdout.lines().rev().find(|l| {
        let l = l.trim_matches(|c| c == '=' || c == ' ');
        l.contains(" in ") && (COUNT.is_match(l) || l.starts_with("no tests ran"))
    })?;
    let mut report = Report::new("summary");
    for c in COUNT.captures_iter(line) {
        let n: u64 = c[1].parse().unwrap_or(0);
        match &c[2] {
            // As the JUnit report counts them: an xpass passes, an xfail is skipped.
            "passed" | "xpassed" => report.counts.passed += n,
            "failed" => report.counts.failed += n,
            "skipped" | "xfailed" => report.counts.skipped += n,
            "error" | "errors" => report.counts.errors += n,
            _ => continue,
        }
    }
    let c = report.counts;
    report.counts.total = c.passed + c.failed + c.skipped;
    Some(report)
}

/// node's spec summary (`ℹ tests 3`, `ℹ pass 3` …) when no JUnit file was asked for.
fn node_summary(stdout: &str) -> Option<Report> {
    let value = |key: &str| {
        stdout.lines().rev().find_map(|l| {
            let l = l.trim_start_matches(['ℹ', '#', ' ']);
            l.strip_prefix(key)
                .and_then(|rest| rest.trim().parse::<u64>().ok())
        })
    };
    let mut report = Report::new("summary");
    report.counts.total = value("tests ")?;
    report.counts.passed = value("pass ").unwrap_or(0);
    report.counts.failed = value("fail ").unwrap_or(0) + value("cancelled ").unwrap_or(0);
    report.counts.skipped = value("skipped ").unwrap_or(0) + value("todo ").unwrap_or(0);
    Some(report)
}

/// jest's `--json` file and vitest's JSON reporter's (the same shape).
fn jest_json(text: &str) -> Option<Report> {
    let json: Value = serde_json::from_str(text).ok()?;
    let number = |key: &str| json.get(key).and_then(Value::as_u64).unwrap_or(0);
    let mut report = Report::new("json");
    report.counts.total = number("numTotalTests");
    report.counts.passed = number("numPassedTests");
    report.counts.failed = number("numFailedTests");
    report.counts.skipped = number("numPendingTests") + number("numTodoTests");
    report.counts.errors = number("numRuntimeErrorTestSuites");
    let suites = json.get("testResults").and_then(Value::as_array);
    report.files = suites.map(|s| s.len() as u64);
    for suite in suites.into_iter().flatten() {
        // A suite that failed to run at all, with no test of its own: an error.
        let tests = suite.get("assertionResults").and_then(Value::as_array);
        if suite.get("status").and_then(Value::as_str) == Some("failed")
            && tests.is_none_or(Vec::is_empty)
            && report.counts.errors == 0
        {
            report.counts.errors += 1;
        }
        for test in tests.into_iter().flatten() {
            let name = test
                .get("fullName")
                .or_else(|| test.get("title"))
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned();
            match test.get("status").and_then(Value::as_str) {
                Some("passed") => report.passed.push(name),
                Some("failed") => report.failed.push(name),
                _ => {}
            }
        }
    }
    Some(report)
}

/// `go test -json` events: the last action of each test (`pass`, `fail`, `skip`); a test that
/// started and never ended, or a package that printed none, is said.
fn go_events(stdout: &str) -> Option<Report> {
    let mut report = Report::new("events");
    let mut any = false;
    let mut last: std::collections::BTreeMap<(String, String), String> = Default::default();
    let mut package_results = 0;
    for line in stdout.lines() {
        let Ok(event) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        any = true;
        let action = event.get("Action").and_then(Value::as_str).unwrap_or("");
        let package = event
            .get("Package")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned();
        match event.get("Test").and_then(Value::as_str) {
            Some(test) if action != "output" => {
                last.insert((package, test.to_owned()), action.to_owned());
            }
            None if matches!(action, "pass" | "fail" | "skip") => package_results += 1,
            _ => {}
        }
    }
    if !any {
        return None;
    }
    let mut unfinished = Vec::new();
    for ((_, test), action) in &last {
        // Subtests (`TestX/case`) are counted with their parent's result.
        if test.contains('/') {
            continue;
        }
        report.counts.total += 1;
        match action.as_str() {
            "pass" => {
                report.counts.passed += 1;
                report.passed.push(test.clone());
            }
            "fail" => {
                report.counts.failed += 1;
                report.failed.push(test.clone());
            }
            "skip" => report.counts.skipped += 1,
            _ => {
                report.counts.errors += 1;
                unfinished.push(test.clone());
            }
        }
    }
    if !unfinished.is_empty() {
        report.incomplete = Some(format!(
            "tests started and never finished: {}",
            unfinished.join(", ")
        ));
    } else if package_results == 0 {
        report.incomplete = Some("no package reported its result".to_owned());
    }
    Some(report)
}

/// `cargo test`: every test binary's `test result:` line, summed; a binary that said `running N
/// tests` and printed no result ended early.
fn cargo(stdout: &str) -> Option<Report> {
    static RESULT: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"test result: \w+\. (\d+) passed; (\d+) failed; (\d+) ignored; (\d+) measured; (\d+) filtered out")
            .expect("the cargo result pattern compiles")
    });
    static TEST: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"^test (.+?) \.\.\. (ok|FAILED|ignored)")
            .expect("the cargo test pattern compiles")
    });
    let mut report = Report::new("summary");
    let mut results = 0;
    let mut running = 0;
    for line in stdout.lines() {
        if line.starts_with("running ") && line.ends_with(" tests") || line == "running 1 test" {
            running += 1;
        }
        if let Some(c) = RESULT.captures(line) {
            results += 1;
            let n = |i: usize| c[i].parse::<u64>().unwrap_or(0);
            report.counts.passed += n(1);
            report.counts.failed += n(2);
            report.counts.skipped += n(3);
        }
        if let Some(c) = TEST.captures(line) {
            match &c[2] {
                "ok" => report.passed.push(c[1].to_owned()),
                "FAILED" => report.failed.push(c[1].to_owned()),
                _ => {}
            }
        }
    }
    if results == 0 && running == 0 {
        return None;
    }
    let c = report.counts;
    report.counts.total = c.passed + c.failed + c.skipped;
    if running > results {
        report.incomplete = Some(format!(
            "{} test binar{} started and never printed a result (an exit from the code under test?)",
            running - results,
            if running - results == 1 { "y" } else { "ies" }
        ));
    }
    Some(report)
}

/// nextest's summary: `Summary [ 0.010s] 3 tests run: 2 passed, 1 failed, 1 skipped`.
fn nextest(output: &str) -> Option<Report> {
    static SUMMARY: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"Summary \[[^\]]*\]\s+(\d+) tests? run: (.*)")
            .expect("the nextest pattern compiles")
    });
    static PART: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"(\d+) (passed|failed|skipped|timed out|leaky)")
            .expect("the nextest part pattern compiles")
    });
    let c = output.lines().rev().find_map(|l| SUMMARY.captures(l))?;
    let mut report = Report::new("summary");
    report.counts.total = c[1].parse().unwrap_or(0);
    for p in PART.captures_iter(&c[2]) {
        let n: u64 = p[1].parse().unwrap_or(0);
        match &p[2] {
            "passed" => report.counts.passed += n,
            "failed" | "timed out" => report.counts.failed += n,
            "skipped" => report.counts.skipped += n,
            _ => {}
        }
    }
    report.counts.total += report.counts.skipped;
    Some(report)
}

/// mocha's spec summary: `3 passing`, `1 failing`, `1 pending`.
fn mocha(stdout: &str) -> Option<Report> {
    static LINE: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"^\s*(\d+) (passing|failing|pending)\b").expect("the mocha pattern compiles")
    });
    let mut report = Report::new("summary");
    let mut any = false;
    for line in stdout.lines() {
        if let Some(c) = LINE.captures(line) {
            any = true;
            let n: u64 = c[1].parse().unwrap_or(0);
            match &c[2] {
                "passing" => report.counts.passed = n,
                "failing" => report.counts.failed = n,
                _ => report.counts.skipped = n,
            }
        }
    }
    let c = report.counts;
    report.counts.total = c.passed + c.failed + c.skipped;
    any.then_some(report)
}

/// Reads a runner's list mode: the count, the names where it gives them, and the unit.
pub(crate) fn parse_list(runner: Runner, stdout: &str) -> Option<(u64, Vec<String>, &'static str)> {
    let lines = || {
        stdout
            .lines()
            .map(str::trim_end)
            .filter(|l| !l.trim().is_empty())
    };
    match runner {
        Runner::Pytest => {
            let names: Vec<String> = lines()
                .filter(|l| l.contains("::") && !l.starts_with(' ') && !l.starts_with("ERROR"))
                .map(str::to_owned)
                .collect();
            if !names.is_empty() {
                return Some((names.len() as u64, names, "tests"));
            }
            // `-qq`: `tests/test_calc.py: 3`.
            let per_file: u64 = lines()
                .filter_map(|l| {
                    l.rsplit_once(": ").and_then(|(f, n)| {
                        f.ends_with(".py")
                            .then(|| n.trim().parse::<u64>().ok())
                            .flatten()
                    })
                })
                .sum();
            if per_file > 0 {
                return Some((per_file, Vec::new(), "tests"));
            }
            // The tree (`-v`): `<Function test_add>`.
            let tree = lines()
                .filter(|l| {
                    let l = l.trim_start();
                    l.starts_with("<Function ") || l.starts_with("<TestCaseFunction ")
                })
                .count() as u64;
            if tree > 0 {
                return Some((tree, Vec::new(), "tests"));
            }
            lines()
                .any(|l| l.contains("no tests collected") || l.contains("0 tests collected"))
                .then(|| (0, Vec::new(), "tests"))
        }
        Runner::Cargo => {
            let names: Vec<String> = lines()
                .filter_map(|l| l.strip_suffix(": test").map(str::to_owned))
                .collect();
            let counted =
                lines().any(|l| l.ends_with(" tests, 0 benchmarks") || l.contains(" tests, "));
            (!names.is_empty() || counted).then_some((names.len() as u64, names, "tests"))
        }
        Runner::Go => {
            static NAME: LazyLock<Regex> = LazyLock::new(|| {
                Regex::new(r"^(Test|Example|Fuzz)\w*$").expect("the go test name pattern compiles")
            });
            let names: Vec<String> = lines()
                .filter(|l| NAME.is_match(l))
                .map(str::to_owned)
                .collect();
            let ok = lines().any(|l| l.starts_with("ok ") || l.starts_with("?"));
            (ok || !names.is_empty()).then_some((names.len() as u64, names, "tests"))
        }
        Runner::Jest => {
            let files = lines()
                .filter(|l| l.starts_with('/') || l.contains(".test.") || l.contains(".spec."))
                .count() as u64;
            Some((files, Vec::new(), "test files"))
        }
        Runner::Vitest => {
            let tests = lines()
                .filter(|l| l.contains(" > ") || l.contains(".test.") || l.contains(".spec."))
                .count() as u64;
            Some((tests, Vec::new(), "tests"))
        }
        Runner::Mocha => {
            mocha(stdout).map(|r| (r.counts.passed + r.counts.failed, Vec::new(), "tests"))
        }
        Runner::Nextest | Runner::Node => None,
    }
}

/// A test's name as both a list and a report spell it: pytest's `tests/test_calc.py::test_add`
/// and `tests.test_calc::test_add` are the same test.
pub(crate) fn key(name: &str) -> String {
    name.replace(".py::", "::")
        .replace("::", ".")
        .replace('/', ".")
        .trim_start_matches('.')
        .to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::{Path, PathBuf};

    fn fixture(runner: &str, state: &str, file: &str) -> Option<String> {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/data/runners")
            .join(runner)
            .join(state)
            .join(file);
        std::fs::read_to_string(path).ok()
    }

    /// Reads a recorded run the way `read` reads a live one.
    fn recorded(runner: Runner, dir: &str, state: &str) -> Option<Report> {
        let stdout = fixture(dir, state, "stdout.txt").unwrap_or_default();
        let stderr = fixture(dir, state, "stderr.txt").unwrap_or_default();
        let report_name = ["report.xml", "report.json"]
            .into_iter()
            .find(|f| fixture(dir, state, f).is_some());
        let plan = Plan {
            runner,
            argv: Vec::new(),
            env: Vec::new(),
            report: match runner {
                Runner::Pytest | Runner::Node | Runner::Jest | Runner::Vitest | Runner::Mocha => {
                    Some(report_name.map_or_else(
                        || PathBuf::from("/nonexistent/report"),
                        |name| {
                            Path::new(env!("CARGO_MANIFEST_DIR"))
                                .join("tests/data/runners")
                                .join(dir)
                                .join(state)
                                .join(name)
                        },
                    ))
                }
                _ => None,
            },
        };
        read(&plan, &stdout, &stderr)
    }

    #[test]
    fn every_recorded_runner_is_read_as_it_reported() {
        // (runner, fixture dir, state, expected (passed, failed, skipped) or None: no report)
        type Case<'a> = (Runner, &'a str, &'a str, Option<(u64, u64, u64)>);
        let cases: &[Case<'_>] = &[
            (Runner::Pytest, "pytest", "a_all_pass", Some((3, 0, 0))),
            (Runner::Pytest, "pytest", "b_one_fails", Some((2, 1, 0))),
            (Runner::Pytest, "pytest", "c_one_skipped", Some((2, 0, 1))),
            (Runner::Pytest, "pytest", "d_all_skipped", Some((0, 0, 3))),
            (Runner::Pytest, "pytest", "f_exit0_at_import", None),
            (Runner::Pytest, "pytest", "g_exit0_in_test", None),
            (Runner::Node, "node_test", "a_all_pass", Some((3, 0, 0))),
            (Runner::Node, "node_test", "b_one_fails", Some((2, 1, 0))),
            (Runner::Node, "node_test", "c_one_skipped", Some((2, 0, 1))),
            (
                Runner::Node,
                "node_test",
                "f_exit0_at_import",
                Some((0, 0, 0)),
            ),
            (Runner::Jest, "jest", "a_all_pass", Some((3, 0, 0))),
            (Runner::Jest, "jest", "b_one_fails", Some((2, 1, 0))),
            (Runner::Jest, "jest", "f_exit0_at_import", None),
            (Runner::Vitest, "vitest", "a_all_pass", Some((3, 0, 0))),
            (Runner::Vitest, "vitest", "c_one_skipped", Some((2, 0, 1))),
            (Runner::Go, "go", "a_all_pass", Some((3, 0, 0))),
            (Runner::Go, "go", "b_one_fails", Some((2, 1, 0))),
            (Runner::Go, "go", "f_exit0_at_import", Some((0, 0, 0))),
            (Runner::Mocha, "mocha", "a_all_pass", Some((3, 0, 0))),
            (Runner::Mocha, "mocha", "b_one_fails", Some((2, 1, 0))),
            (Runner::Mocha, "mocha", "f_exit0_at_import", None),
        ];
        for (runner, dir, state, expected) in cases {
            let report = recorded(*runner, dir, state);
            let got = report
                .as_ref()
                .map(|r| (r.counts.passed, r.counts.failed, r.counts.skipped));
            assert_eq!(got, *expected, "{dir}/{state}: {report:?}");
        }
        // node 20 names a file that ran no test of its own as a passing test: not one here.
        let node = recorded(Runner::Node, "node_test", "f_exit0_at_import").expect("a report");
        assert!(
            node.incomplete
                .is_some_and(|why| why.contains("calc.test.js"))
        );
    }

    #[test]
    fn list_modes_are_counted() {
        let pytest = fixture("pytest", "a_all_pass", "list.stdout.txt").expect("recorded");
        let (count, names, _) = parse_list(Runner::Pytest, &pytest).expect("listed");
        assert_eq!(
            (count, names[0].as_str()),
            (3, "tests/test_calc.py::test_add")
        );
        let qq = fixture("pytest", "a_all_pass", "list_qq.stdout.txt").expect("recorded");
        assert_eq!(parse_list(Runner::Pytest, &qq).map(|l| l.0), Some(3));
        let go = fixture("go", "a_all_pass", "list.stdout.txt").expect("recorded");
        assert_eq!(parse_list(Runner::Go, &go).map(|l| l.0), Some(3));
        assert_eq!(
            key("tests/test_calc.py::test_add"),
            key("tests.test_calc::test_add")
        );
    }

    #[test]
    fn cargo_binaries_that_end_early_are_incomplete() {
        let stdout = "running 2 tests\ntest a ... ok\ntest b ... ok\n\ntest result: ok. 2 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s\n\nrunning 3 tests\ntest c ... ok\n";
        let report = cargo(stdout).expect("a report");
        assert_eq!(report.counts.passed, 2);
        assert!(report.incomplete.is_some());
    }
}
