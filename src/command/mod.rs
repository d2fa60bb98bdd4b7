//! One module per subcommand; `dispatch` runs the chosen one and returns its exit code.

mod authority;
mod batch;
mod hooks;
mod init;
mod report;
mod run;
mod runs;
mod serve;
mod table;
mod test;
mod verify;
mod worker;

use crate::args::{Cli, Command};

/// Queues `report` for `journal`'s writer; the future resolves once it is stored (or refused,
/// with why) — for whoever may only acknowledge work (a queue's result, a client's stream) once
/// its record is written.
pub(crate) fn store(
    journal: &harness_records::JournalWriter,
    report: harness::Report,
    meta: harness_records::RecordMeta,
) -> harness_queue::Stored {
    let (told, stored) = tokio::sync::oneshot::channel();
    journal.record_then(report, meta, move |r| {
        let _ = told.send(r);
    });
    Box::pin(async move {
        stored
            .await
            .unwrap_or_else(|_| Err("the journal writer stopped".to_owned()))
    })
}

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
        Command::Init(args) => init::run(&args),
        Command::Test(args) => test::run(args).await,
        Command::Worker(args) => worker::run(args).await,
        Command::Serve(args) => serve::run(args).await,
    }
}
