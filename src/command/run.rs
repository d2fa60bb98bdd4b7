//! `harness run`: one delegation, with progress on stderr.

use harness::{Delegation, Error, Event, Outcome, Report, RunOptions, Runtime};

use crate::args::RunArgs;
use crate::exit;

/// Runs the command and returns its exit code.
pub async fn run(args: RunArgs) -> u8 {
    let json_output = args.json;
    let report = match prepare(&args) {
        Ok((delegation, options, runtime)) => {
            let progress = |event: &Event<'_>| print_event(&delegation, event);
            let quiet = |_: &Event<'_>| {};
            if json_output {
                runtime.run(&delegation, &options, &quiet).await
            } else {
                runtime.run(&delegation, &options, &progress).await
            }
        }
        Err(e) => {
            if json_output {
                println!(
                    "{}",
                    serde_json::json!({"id": null, "outcome": "error", "verified": false, "attempts": 0,
                        "reasons": [], "result": null, "usage": null,
                        "error": {"kind": e.kind().as_str(), "message": e.message()}})
                );
            } else {
                eprintln!("error[{}]: {}", e.kind().as_str(), e.message());
            }
            return exit::for_error(e.kind());
        }
    };
    if json_output {
        println!("{}", report.to_json());
    } else {
        print_summary(&report);
    }
    match report.outcome {
        Outcome::Passed | Outcome::Skipped => exit::OK,
        Outcome::Failed => exit::NOT_VERIFIED,
        Outcome::Error(kind) => exit::for_error(kind),
    }
}

fn prepare(args: &RunArgs) -> Result<(Delegation, RunOptions, Runtime), Error> {
    let mut delegation = Delegation::from_file(&args.file)?;
    if let Some(retries) = args.max_verify_retries {
        delegation.max_verify_retries = retries;
    }
    if let Some(dir) = &args.sandbox.workdir {
        delegation.workdir.clone_from(dir);
    }
    let options = RunOptions {
        allow_hosts: args.sandbox.allow_host.clone(),
        allow_exec: args.sandbox.allow_exec.clone(),
        allow_env: args.sandbox.allow_env.clone(),
        hooks: args.hooks.clone(),
    };
    Ok((delegation, options, Runtime::new()?))
}

fn print_event(delegation: &Delegation, event: &Event<'_>) {
    let total = delegation.max_verify_retries + 1;
    match event {
        Event::Started { .. } => {}
        Event::AttemptStarted { attempt } => {
            eprintln!(
                "attempt {}/{total}: delegating to {}",
                attempt + 1,
                delegation.delegate.kind()
            );
        }
        Event::ToolCalled { call, is_error, .. } => {
            let status = if *is_error { "error" } else { "ok" };
            eprintln!(
                "  tool {} {} -> {status}",
                call.name,
                serde_json::Value::Object(call.arguments.clone())
            );
        }
        Event::Responded { response, .. } => eprintln!("  response: {}", one_line(response, 160)),
        Event::Judged { verdict, .. } => {
            if verdict.passed {
                eprintln!("  verified");
            } else {
                eprintln!("  NOT VERIFIED:");
                for reason in &verdict.reasons {
                    eprintln!("    {reason}");
                }
            }
        }
        Event::Retrying { next_attempt, .. } => eprintln!(
            "  retrying: sending the verification reasons back to the same delegate ({} of {} retries)",
            next_attempt,
            total - 1
        ),
    }
}

fn print_summary(report: &Report) {
    let attempts = report.attempts.len();
    let plural = if attempts == 1 { "" } else { "s" };
    match report.outcome {
        Outcome::Passed => eprintln!("passed: verified on attempt {attempts} ({})", report.id),
        Outcome::Skipped => eprintln!(
            "skipped: nothing configured to verify; the result was not checked ({})",
            report.id
        ),
        Outcome::Failed => eprintln!(
            "failed: not verified after {attempts} attempt{plural} ({})",
            report.id
        ),
        Outcome::Error(kind) => eprintln!(
            "error[{}]: {} ({})",
            kind.as_str(),
            report.error.as_ref().map_or("", Error::message),
            report.id
        ),
    }
    if let Some(result) = report.result() {
        if matches!(report.outcome, Outcome::Passed | Outcome::Skipped) {
            println!("{}", result.response);
        }
    }
}

fn one_line(text: &str, max: usize) -> String {
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() > max {
        format!("{}...", flat.chars().take(max).collect::<String>())
    } else {
        flat
    }
}
