//! `harness serve`: the HTTP API, the review page and, with `--queue`, the collector of what
//! workers send back — the `harness-service` crate, started with the flags' settings.

use crate::args::ServeArgs;
use crate::exit;
use crate::settings;

/// Runs the command and returns its exit code.
pub async fn run(args: ServeArgs) -> u8 {
    match serve(args).await {
        Ok(()) => exit::OK,
        Err(e) => exit::fail(&e, false),
    }
}

async fn serve(args: ServeArgs) -> Result<(), exit::Failure> {
    let journal = harness_records::locate(args.journal.as_deref())?.path;
    let queue = match &args.queue {
        None => None,
        Some(url) => Some(harness_queue::open(url, harness_queue::QueueOptions::default()).await?),
    };
    let settings = harness_service::Settings {
        listen: args.listen.clone(),
        root: args.root.clone(),
        journal: journal.clone(),
        queue,
        token: std::env::var("HARNESS_API_TOKEN")
            .ok()
            .filter(|t| !t.trim().is_empty()),
        token_user: std::env::var("HARNESS_API_USER")
            .ok()
            .filter(|u| !u.trim().is_empty()),
        allowed_hosts: args.allow_hosts.clone(),
    };
    let runtime = settings::runtime()?;
    let server = harness_service::Server::bind(settings, runtime).await?;
    // A generated token is printed in the URL that signs a browser in (as Jupyter does); a
    // configured one is the operator's to know.
    let (url, token) = if server.token_generated() {
        (
            format!("http://{}/?token={}", server.local_addr(), server.token()),
            "token generated; the API takes it as `Authorization: Bearer TOKEN`",
        )
    } else {
        (
            format!("http://{}/", server.local_addr()),
            "token from HARNESS_API_TOKEN",
        )
    };
    eprintln!(
        "harness serve: listening on {url} (root {}, journal {}, {token})",
        server.root().display(),
        journal.display(),
    );
    if let (Some(batch), Some(url)) = (server.batch(), &args.queue) {
        eprintln!(
            "harness serve: queuing delegations on {url} (batch {batch}) for harness worker --queue {url}"
        );
    }
    let shutdown = async {
        let reason = settings::shutdown_signal().await;
        eprintln!("{reason}: cancelling running delegations and recording them");
        reason
    };
    let finished = server.run(shutdown).await?;
    if finished.still_queued > 0 {
        eprintln!(
            "{} delegation(s) still queued: their reports are recorded when the server starts again with the same --queue and --journal",
            finished.still_queued
        );
    }
    eprintln!(
        "recorded {} delegation(s) in {}",
        finished.recorded,
        journal.display()
    );
    Ok(())
}
