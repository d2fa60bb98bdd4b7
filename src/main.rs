//! `harness`: delegate work to AI sub-agents and refuse to believe them.
//!
//! The binary is a thin layer: it parses arguments into validated settings, runs one command on a
//! Tokio runtime, prints, and maps outcomes to exit codes (DESIGN §4.6).

mod args;
mod command;
mod exit;
mod settings;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    quiet_on_closed_stdout();
    let cli = match args::Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return usage_error(&e),
    };
    // What a command leaves running after detaching itself comes back to harness, to be killed
    // when the command ends (harness_builtins::run_program).
    harness_builtins::become_subreaper();
    // Scripts run on these threads (inline on workers, or on blocking threads) with a known stack:
    // 16 MiB holds the deepest call stack `limits.call_depth` allows and every value walk the
    // nesting limit lets through.
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_stack_size(16 * 1024 * 1024)
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(exit::USAGE);
        }
    };
    // The gRPC exporter connects through the runtime, so telemetry starts inside it.
    let telemetry = {
        let _entered = runtime.enter();
        harness_telemetry::init(cli.otlp_endpoint.as_deref())
    };
    // The command runs as a task on the workers rather than on this thread: a batch driver woken
    // on this thread for every finished delegation would cost a cross-thread wake-up each time.
    let code = runtime.block_on(async {
        match tokio::spawn(command::dispatch(cli)).await {
            Ok(code) => code,
            // Nothing cancels the task, so a join error is its panic: pass it on.
            Err(e) => std::panic::resume_unwind(e.into_panic()),
        }
    });
    runtime.block_on(async {
        let _ = tokio::task::spawn_blocking(move || telemetry.shutdown()).await;
    });
    // Everything is recorded and flushed by now. A script still running on a blocking thread
    // (its delegation cancelled) would hold the exit until its own time budget ran out.
    runtime.shutdown_timeout(std::time::Duration::from_millis(200));
    ExitCode::from(code)
}

/// Ends on arguments clap refused, as clap would (its message on stderr, exit 2; `--help` and
/// `--version` on stdout, exit 0) — and, for a command line asking for `--json`, the error
/// also as JSON on stdout, `{"error": {"kind": "config", "message": …}}`, so that a script that
/// reads stdout reads why.
fn usage_error(error: &clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    let _ = error.print();
    if matches!(
        error.kind(),
        ErrorKind::DisplayHelp
            | ErrorKind::DisplayVersion
            | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
    ) {
        return ExitCode::from(if error.use_stderr() {
            exit::USAGE
        } else {
            exit::OK
        });
    }
    if std::env::args_os().any(|a| a == "--json") {
        let rendered = error.render().to_string();
        let message = rendered
            .lines()
            .find(|l| !l.trim().is_empty())
            .unwrap_or_default()
            .trim_start_matches("error: ")
            .to_owned();
        println!(
            "{}",
            serde_json::json!({"error": {"kind": "config", "message": message}})
        );
    }
    ExitCode::from(exit::USAGE)
}

/// `harness runs list | head`: a reader that closes stdout early ends harness quietly, with the
/// status a shell gives a program SIGPIPE ended (141), as it ends `git log | head` — not with a
/// panic and a backtrace. (Rust ignores SIGPIPE, so `println!` meets the closed pipe as an error
/// and panics; SIGPIPE itself stays ignored, as a child that exits before reading its input must
/// not end harness.)
fn quiet_on_closed_stdout() {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let payload = info.payload();
        let message = payload
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| payload.downcast_ref::<&str>().copied())
            .unwrap_or_default();
        if message.starts_with("failed printing to stdout") && message.contains("Broken pipe") {
            std::process::exit(141);
        }
        previous(info);
    }));
}
