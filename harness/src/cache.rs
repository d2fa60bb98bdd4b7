//! Compiled scripts and hook sets shared by every delegation of one runtime, so a batch parses
//! each script once per process, not once per delegation or attempt.

use std::collections::HashMap;
use std::sync::Mutex;

use crate::error::{Error, ErrorKind, Result};

/// Entries kept before the cache starts over; bounds memory when a batch fans out over many
/// distinct `args`.
const CAPACITY: usize = 512;

/// A map from everything that shapes a compiled value (workspace, capabilities, name, source,
/// `args`) to the value. Failures are not cached, so every delegation reports its own error.
#[derive(Debug)]
pub(crate) struct Cache<T> {
    entries: Mutex<HashMap<String, T>>,
}

impl<T: Clone + Send + 'static> Cache<T> {
    pub(crate) fn new() -> Self {
        Cache {
            entries: Mutex::new(HashMap::new()),
        }
    }

    /// Returns the value for `key`, compiling it on a blocking thread when absent (top-level
    /// script code may run up to its time budget).
    pub(crate) async fn get_or_compile(
        &self,
        key: String,
        compile: impl FnOnce() -> Result<T> + Send + 'static,
    ) -> Result<T> {
        if let Some(found) = self.lock().get(&key) {
            return Ok(found.clone());
        }
        let value = tokio::task::spawn_blocking(compile).await.map_err(|e| {
            Error::new(ErrorKind::Config, format!("script compilation failed: {e}"))
        })??;
        let mut entries = self.lock();
        if entries.len() >= CAPACITY {
            entries.clear();
        }
        entries.insert(key, value.clone());
        Ok(value)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, T>> {
        self.entries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}
