//! The base: the tests the untouched workspace holds, listed once per delegation with each
//! check's runner's list mode (`pytest --collect-only -q`, `cargo test -- --list`, `go test
//! -list .`, `jest --listTests`, `vitest list`, `mocha --dry-run`) before the delegate may act.
//! An attempt whose runner reports fewer passing tests fails, naming those that no longer pass.
//! The workspace's baseline waits for it, so what the listing writes (a build, caches) is part
//! of the baseline, never a change of the delegate's.

use std::sync::Arc;

use super::{BaseTests, Found};
use crate::checks::launch::Launcher;
use crate::gates::checks::CheckSpec;

/// Each listed check's base: what its runner listed, or why it could not be listed.
pub(crate) type Listed = Arc<Vec<(String, std::result::Result<BaseTests, String>)>>;

/// The base collection of one delegation, running or done.
#[derive(Debug, Clone)]
pub(crate) struct Collection {
    done: tokio::sync::watch::Receiver<Option<Listed>>,
}

impl Collection {
    /// Starts listing the tests of `jobs` (each a check, its runner and where it runs), one
    /// after another.
    pub(crate) fn start(jobs: Vec<(CheckSpec, Found, Arc<Launcher>)>) -> Self {
        let (send, done) = tokio::sync::watch::channel(None);
        tokio::spawn(async move {
            let mut listed = Vec::with_capacity(jobs.len());
            for (check, found, launcher) in jobs {
                let span = tracing::info_span!("check.base", check.name = check.name.as_str());
                let base =
                    tracing::Instrument::instrument(launcher.list(&check, &found), span).await;
                listed.push((check.name.clone(), base));
            }
            let _ = send.send(Some(Arc::new(listed)));
        });
        Collection { done }
    }

    /// Waits for the listing to end: each check's base, or why it has none (a listing whose task
    /// died has none, said so).
    pub(crate) async fn wait(&self) -> Listed {
        let mut done = self.done.clone();
        match done.wait_for(Option::is_some).await {
            Ok(listed) => listed.clone().unwrap_or_default(),
            Err(_) => Arc::new(Vec::new()),
        }
    }
}
