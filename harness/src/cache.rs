//! Compiled scripts and hook sets shared by every delegation of one runtime, so a batch parses
//! each script once per process, not once per delegation or attempt.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::OnceCell;

use crate::error::{Error, ErrorKind, Result};

/// Entries kept before the cache starts over; bounds memory when a batch fans out over many
/// distinct `args`.
const CAPACITY: usize = 512;

/// A map from everything that shapes a compiled value (workspace, capabilities, name, source,
/// `args`) to the value. Concurrent callers with the same key share one compilation: when a batch
/// starts, its first N delegations all ask for the same hooks and verifier at once, and without
/// this each would compile its own copy on its own blocking thread (N threads, N Starlark
/// evaluators, N heaps at the same moment). Failures are not cached: the next caller compiles
/// again, so every delegation reports its own error.
#[derive(Debug)]
pub(crate) struct Cache<T> {
    entries: Mutex<HashMap<String, Arc<OnceCell<T>>>>,
}

impl<T: Clone + Send + Sync + 'static> Cache<T> {
    pub(crate) fn new() -> Self {
        Cache {
            entries: Mutex::new(HashMap::new()),
        }
    }

    /// Returns the value for `key`, compiling it on a blocking thread when absent (top-level
    /// script code may run up to its time budget), or waiting for the compilation another caller
    /// has already started.
    pub(crate) async fn get_or_compile(
        &self,
        key: String,
        compile: impl FnOnce() -> Result<T> + Send + 'static,
    ) -> Result<T> {
        let cell = {
            let mut entries = self.lock();
            if entries.len() >= CAPACITY && !entries.contains_key(&key) {
                // Callers already waiting hold their cell; only the map starts over.
                entries.clear();
            }
            entries.entry(key).or_default().clone()
        };
        cell.get_or_try_init(|| async {
            tokio::task::spawn_blocking(compile).await.map_err(|e| {
                Error::new(ErrorKind::Config, format!("script compilation failed: {e}"))
            })?
        })
        .await
        .cloned()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<OnceCell<T>>>> {
        self.entries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_callers_share_one_compilation() {
        let cache = Arc::new(Cache::<u32>::new());
        let compiled = Arc::new(AtomicUsize::new(0));
        let callers = (0..32).map(|_| {
            let cache = cache.clone();
            let compiled = compiled.clone();
            tokio::spawn(async move {
                cache
                    .get_or_compile("key".to_owned(), move || {
                        compiled.fetch_add(1, Ordering::SeqCst);
                        // Long enough that every caller arrives while this one is compiling.
                        std::thread::sleep(std::time::Duration::from_millis(50));
                        Ok(7)
                    })
                    .await
            })
        });
        for caller in callers.collect::<Vec<_>>() {
            let value = caller.await.expect("the caller task ran");
            assert_eq!(value.expect("compiled"), 7);
        }
        assert_eq!(compiled.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn failures_are_not_cached() {
        let cache = Cache::<u32>::new();
        let first = cache
            .get_or_compile("key".to_owned(), || Err(Error::config("broken")))
            .await;
        assert_eq!(first.expect_err("compile failed").kind(), ErrorKind::Config);
        let second = cache.get_or_compile("key".to_owned(), || Ok(3)).await;
        assert_eq!(second.expect("compiled on the second call"), 3);
    }
}
