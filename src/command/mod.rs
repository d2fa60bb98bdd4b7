//! One module per subcommand; `dispatch` runs the chosen one and returns its exit code.

mod hooks;
mod run;
mod verify;

use crate::args::{Cli, Command};

/// Runs the command and returns the process exit code.
pub async fn dispatch(cli: Cli) -> u8 {
    match cli.command {
        Command::Verify(args) => verify::run(args).await,
        Command::Run(args) => run::run(args).await,
        Command::Hooks(command) => hooks::run(command).await,
    }
}
