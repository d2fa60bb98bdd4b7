//! One module per subcommand; `dispatch` runs the chosen one and returns its exit code.

mod authority;
mod batch;
mod hooks;
mod init;
mod mcp;
mod report;
mod run;
mod runs;
mod schema;
mod serve;
mod table;
mod test;
mod verify;
mod worker;

use crate::args::{Cli, Command};

/// Runs the command and returns the process exit code.
pub async fn dispatch(cli: Cli) -> u8 {
    match cli.command {
        Command::Verify(args) => verify::run(args).await,
        Command::Run(args) => run::run(args).await,
        Command::Batch(args) => batch::run(args).await,
        Command::Hooks(command) => hooks::run(command).await,
        Command::Report(args) => report::run(args).await,
        Command::Runs(command) => runs::run(command).await,
        Command::Review(args) => authority::review(args).await,
        Command::Override(args) => authority::override_run(args).await,
        Command::AuditLog(command) => authority::audit_log(command).await,
        Command::Audit(args) => runs::audit(args).await,
        Command::Keys(command) => runs::keys(command),
        Command::Schema(args) => schema::run(&args),
        Command::Init(args) => init::run(&args),
        Command::Test(args) => test::run(args).await,
        Command::Worker(args) => worker::run(args).await,
        Command::Serve(args) => serve::run(args).await,
        Command::Mcp(args) => mcp::run(args).await,
    }
}
