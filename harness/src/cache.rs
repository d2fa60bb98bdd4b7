//! Compiled scripts and hook sets shared by every delegation of one runtime, so a batch parses
//! each script once per process, not once per delegation or attempt.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::OnceCell;

use crate::error::{Error, ErrorKind, Result};

/// Entries kept before the cache starts over; bounds memory when a batch fans out over many
/// distinct `args`.
const CAPACITY: usize = 512;

/// A cache key: parts one after another, each written after its length, so that no two different
/// lists of parts make one key whatever bytes a part holds (a newline in a file name, a separator
/// in a variable's name). Every key of one cache lists the same kinds of part in the same order.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub(crate) struct Key(Vec<u8>);

impl Key {
    /// Appends one part.
    pub(crate) fn with(mut self, part: impl AsRef<[u8]>) -> Self {
        let part = part.as_ref();
        self.0.extend_from_slice(part.len().to_string().as_bytes());
        self.0.push(b':');
        self.0.extend_from_slice(part);
        self
    }

    /// Appends a list: how many, then each.
    pub(crate) fn with_all<S: AsRef<[u8]>>(self, parts: &[S]) -> Self {
        parts
            .iter()
            .fold(self.with(parts.len().to_string()), |key, part| {
                key.with(part)
            })
    }

    /// Appends a path, byte for byte.
    pub(crate) fn with_path(self, path: &std::path::Path) -> Self {
        self.with(path.as_os_str().as_encoded_bytes())
    }
}

/// A map from everything that shapes a compiled value (workspace, capabilities, name, source,
/// `args`) to the value. Concurrent callers with the same key share one compilation: when a batch
/// starts, its first N delegations all ask for the same hooks and verifier at once, and without
/// this each would compile its own copy on its own blocking thread (N threads, N Starlark
/// evaluators, N heaps at the same moment). Failures are not cached: the next caller compiles
/// again, so every delegation reports its own error.
#[derive(Debug)]
pub(crate) struct Cache<T> {
    entries: Mutex<HashMap<Key, Arc<OnceCell<T>>>>,
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
        key: Key,
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

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Key, Arc<OnceCell<T>>>> {
        self.entries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// Two delegations whose lists differ only in where a separator-like character falls (one
    /// allows the program `a\nb`, the other `a` and the variable `b`) must not share a compiled
    /// script: it carries the sandbox of the delegation that compiled it.
    #[test]
    fn keys_tell_apart_every_different_list_of_parts() {
        let key = |exec: &[&str], env: &[&str]| Key::default().with_all(exec).with_all(env);
        let keys = [
            key(&["a\nb"], &[]),
            key(&["a"], &["b"]),
            key(&["a", "b"], &[]),
            key(&["a\u{1f}b"], &[]),
            key(&[], &["a", "b"]),
            key(&["1:a"], &[]),
            key(&["a"], &[]),
        ];
        for (i, a) in keys.iter().enumerate() {
            for b in &keys[i + 1..] {
                assert_ne!(a, b);
            }
        }
        assert_eq!(key(&["a"], &["b"]), key(&["a"], &["b"]));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_callers_share_one_compilation() {
        let cache = Arc::new(Cache::<u32>::new());
        let compiled = Arc::new(AtomicUsize::new(0));
        let callers = (0..32).map(|_| {
            let cache = cache.clone();
            let compiled = compiled.clone();
            tokio::spawn(async move {
                cache
                    .get_or_compile(Key::default().with("key"), move || {
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
            .get_or_compile(Key::default().with("key"), || Err(Error::config("broken")))
            .await;
        assert_eq!(first.expect_err("compile failed").kind(), ErrorKind::Config);
        let second = cache
            .get_or_compile(Key::default().with("key"), || Ok(3))
            .await;
        assert_eq!(second.expect("compiled on the second call"), 3);
    }
}
