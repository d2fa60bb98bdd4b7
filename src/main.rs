//! `harness`: delegate work to AI sub-agents and refuse to believe them.
//!
//! The binary is a thin layer: it parses arguments into validated settings, runs one command on a
//! Tokio runtime, prints, and maps outcomes to exit codes (DESIGN §4.6).

mod args;
mod command;
mod exit;
mod settings;
mod telemetry;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = args::Cli::parse();
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
    // The gRPC exporter connects through the runtime, so telemetry starts inside it.
    let telemetry = {
        let _entered = runtime.enter();
        telemetry::init(cli.otlp_endpoint.as_deref())
    };
    let code = runtime.block_on(command::dispatch(cli));
    runtime.block_on(async {
        let _ = tokio::task::spawn_blocking(move || telemetry.shutdown()).await;
    });
    ExitCode::from(code)
}
