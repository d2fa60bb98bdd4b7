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
    let cli = args::Cli::parse();
    install_logging();
    // Starlark recursion runs on blocking threads; give them room for deep (limited) call stacks.
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
    let code = runtime.block_on(command::dispatch(cli));
    ExitCode::from(code)
}

/// Sends library diagnostics to stderr; `HARNESS_LOG` (an `EnvFilter` directive) sets the level.
fn install_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("HARNESS_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}
