//! With `--queue`, the collector: the reports workers send back, into the journal.

use std::sync::Arc;
use std::time::Duration;

use harness_records::RecordMeta;
use tokio::sync::watch;

use super::api::read;
use super::app::{ApiError, Shared};

/// With `--queue`: takes the reports workers send back (and dead letters) into the journal,
/// ends each one's live stream with its events, and acknowledges each once it is stored — until
/// the server shuts down. What comes back while the server is down waits in the queue.
pub(crate) async fn collect(app: Shared, mut shutdown: watch::Receiver<bool>) {
    let Some(queued) = &app.queue else {
        return;
    };
    let mut backoff = Duration::from_millis(250);
    loop {
        let found = tokio::select! {
            _ = shutdown.wait_for(|s| *s) => return,
            found = queued.queue.results(&queued.batch, Duration::from_millis(500)) => found,
        };
        let deliveries = match found {
            Ok(deliveries) => {
                backoff = Duration::from_millis(250);
                deliveries
            }
            Err(e) => {
                tracing::warn!(
                    "harness serve: cannot read reports from {}: {e}; retrying in {backoff:?}",
                    queued.queue.describe()
                );
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(8));
                continue;
            }
        };
        // Delivered again after a restart, yet already in the journal: only acknowledged.
        let ids: Vec<String> = deliveries
            .iter()
            .filter_map(|d| d.outcome.id().map(str::to_owned))
            .collect();
        let recorded = read(&app, move |j| {
            ids.into_iter()
                .filter_map(|id| match j.contains(&id) {
                    Ok(true) => Some(Ok(id)),
                    Ok(false) => None,
                    Err(e) => Some(Err(e)),
                })
                .collect::<harness_records::Result<std::collections::HashSet<String>>>()
        })
        .await;
        let recorded = match recorded {
            Ok(recorded) => recorded,
            Err(ApiError(_, _, why)) => {
                tracing::warn!("harness serve: cannot read the journal: {why}; retrying");
                tokio::time::sleep(backoff).await;
                continue;
            }
        };
        let settled = harness_queue::settle(&*queued.queue, deliveries, |outcome| {
            let report = match outcome {
                harness_queue::Outcome::Done(result) => result.report.clone(),
                harness_queue::Outcome::Dead(dead) => {
                    let Some(id) = dead.id.clone() else {
                        tracing::warn!(
                            "harness serve: a dead letter naming no delegation: {}",
                            dead.reason
                        );
                        return None;
                    };
                    let kind = app
                        .queued_run(&id)
                        .map_or_else(|| "queued".to_owned(), |q| q.kind);
                    harness::Report::not_run(id, &kind, dead.error())
                }
            };
            if recorded.contains(&report.id) {
                return None;
            }
            let run = app.queued_run(&report.id);
            let meta = RecordMeta {
                source: run.as_ref().map(|r| r.source.clone()),
                workdir: run.map(|r| r.workdir),
            };
            app.count_finished(&report);
            let (id, events) = (report.id.clone(), report.events.clone());
            let stored = app.writer.stored(report, meta);
            let app = Arc::clone(&app);
            Some(Box::pin(async move {
                // Not stored: left in the queue, delivered again, recorded then.
                stored.await.map_err(|why| format!("{id}: {why}"))?;
                app.finish_live(&id, events);
                Ok(())
            }))
        })
        .await;
        for why in settled {
            tracing::error!("harness serve: not recorded: {why}");
        }
    }
}
