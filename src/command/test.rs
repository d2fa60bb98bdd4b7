//! `harness test`: policy tests with coverage.

use std::io::IsTerminal as _;
use std::path::PathBuf;

use harness::Error;
use harness_policytest::{self as policy_test, Status, TestCase, TestOptions, TestReport};

use crate::args::{TestArgs, TestFormat};
use crate::exit;
use crate::settings;

/// Runs the command and returns its exit code.
pub async fn run(args: TestArgs) -> u8 {
    let json = args.format == TestFormat::Json;
    match prepare(&args) {
        Ok((files, options)) => {
            let verbose = args.verbose && args.format == TestFormat::Text;
            let color = harness_telemetry::colour(std::io::stdout().is_terminal());
            // Test files evaluate Starlark, which blocks: keep it off the async workers, on a
            // thread with room for nested evaluations (a test calling a policy).
            let ran = tokio::task::spawn_blocking(move || {
                policy_test::run(&files, options, |case| {
                    if verbose {
                        print_case(case, color, true);
                    }
                })
            })
            .await;
            match ran {
                Ok(report) => finish(&args, &report),
                Err(e) => exit::fail(&Error::config(format!("the test run failed: {e}")), json),
            }
        }
        Err(e) => exit::fail(&e, json),
    }
}

fn prepare(args: &TestArgs) -> Result<(Vec<PathBuf>, TestOptions), Error> {
    if let Some(pct) = args.threshold
        && !(0.0..=100.0).contains(&pct)
    {
        return Err(Error::config(format!(
            "--threshold {pct}: give a percentage from 0 to 100"
        )));
    }
    let filter = args
        .run
        .as_deref()
        .map(regex::Regex::new)
        .transpose()
        .map_err(|e| Error::config(format!("--run: not a regular expression: {e}")))?;
    let paths = if args.paths.is_empty() {
        vec![PathBuf::from(".")]
    } else {
        args.paths.clone()
    };
    let files = policy_test::discover(&paths)?;
    if files.is_empty() {
        return Err(Error::config(format!(
            "no test files (*_test.star) under {}",
            paths
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        )));
    }
    let workspace = settings::workspace(args.sandbox.workdir.as_deref())?;
    let limits = harness::ProjectPolicy::load(workspace.root())?.limits;
    Ok((
        files,
        TestOptions {
            filter,
            coverage: args.coverage || args.threshold.is_some(),
            capabilities: settings::capabilities(&args.sandbox)?,
            limits,
        },
    ))
}

fn finish(args: &TestArgs, report: &TestReport) -> u8 {
    let total = report.passed + report.failed + report.errors;
    let below = match (&report.coverage, args.threshold) {
        (Some(coverage), Some(threshold)) if coverage.coverage < threshold => {
            Some((coverage.coverage, threshold))
        }
        _ => None,
    };
    match args.format {
        TestFormat::Json => {
            let mut value = serde_json::to_value(report).unwrap_or_default();
            if let (Some(threshold), Some(object)) = (args.threshold, value.as_object_mut()) {
                object.insert("threshold".to_owned(), threshold.into());
            }
            println!("{value}");
        }
        TestFormat::Junit => print!("{}", policy_test::junit(report)),
        TestFormat::Text => {
            let color = harness_telemetry::colour(std::io::stdout().is_terminal());
            if !args.verbose {
                for case in report.tests.iter().filter(|c| c.status != Status::Passed) {
                    print_case(case, color, false);
                }
            }
            if let Some(coverage) = &report.coverage {
                println!("coverage:");
                for (file, c) in &coverage.files {
                    let missed: Vec<String> = c
                        .not_covered
                        .iter()
                        .map(|r| {
                            if r.start.row == r.end.row {
                                r.start.row.to_string()
                            } else {
                                format!("{}-{}", r.start.row, r.end.row)
                            }
                        })
                        .collect();
                    let missed = if missed.is_empty() {
                        String::new()
                    } else {
                        format!("  not covered: {}", missed.join(", "))
                    };
                    println!("  {:>6.2}%  {file}{missed}", c.coverage);
                }
                println!(
                    "  {:>6.2}%  total ({} of {} statement lines)",
                    coverage.coverage,
                    coverage.covered_lines,
                    coverage.covered_lines + coverage.not_covered_lines
                );
            }
            println!("{}", report.summary());
        }
    }
    if let Some((coverage, threshold)) = below {
        eprintln!("coverage {coverage:.2}% is below the threshold {threshold}%");
    }
    if total == 0 {
        eprintln!("no tests ran (no test_* function matched)");
        return exit::NOT_VERIFIED;
    }
    if report.all_passed() && below.is_none() {
        exit::OK
    } else {
        exit::NOT_VERIFIED
    }
}

fn print_case(case: &TestCase, color: bool, verbose: bool) {
    let paint = |code: &str, text: &str| {
        if color {
            format!("\x1b[{code}m{text}\x1b[0m")
        } else {
            text.to_owned()
        }
    };
    let label = match case.status {
        Status::Passed => paint("32", "PASS"),
        Status::Failed => paint("31", "FAIL"),
        Status::Error => paint("31;1", "ERROR"),
    };
    if case.status == Status::Passed {
        println!(
            "{label} {}::{} ({} ms)",
            case.file, case.name, case.duration_ms
        );
    } else {
        println!("{label} {}: {}: {}", case.place(), case.name, case.message);
    }
    if verbose {
        for line in &case.logs {
            println!("    | {line}");
        }
    }
}
