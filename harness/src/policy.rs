//! The operator's hooks as the runtime uses them: async dispatch that never blocks a worker, broken
//! hooks as `hook` errors, blocks as decisions.

use std::path::PathBuf;
use std::sync::Arc;

use harness_builtins::{Engine, Sandbox};
use harness_hooks::{Dispatch, Event, HookSet, Step};
use serde_json::Value;

use crate::error::{Error, ErrorKind, Result};

/// A delegation's hooks.
#[derive(Debug, Clone)]
pub struct Policy {
    hooks: HookSet,
}

impl Policy {
    /// Wraps a loaded hook set.
    pub fn new(hooks: HookSet) -> Self {
        Policy { hooks }
    }

    /// Loads the hooks under `paths` (compiling them with `engine`, see `harness_hooks::engine`)
    /// on the calling thread, which it blocks while top-level script code runs.
    ///
    /// # Errors
    /// [`ErrorKind::Config`] listing every problem in every hook file, one per line.
    pub fn load(engine: &Engine, sandbox: Arc<Sandbox>, paths: &[PathBuf]) -> Result<Self> {
        HookSet::load(engine, sandbox, paths)
            .map(Policy::new)
            .map_err(|problems| Policy::refused(&problems))
    }

    /// The configuration error that lists `problems`, one per line: what [`Policy::load`]
    /// returns for them.
    pub fn refused(problems: &[harness_hooks::Problem]) -> Error {
        let list: Vec<String> = problems.iter().map(|p| format!("  {p}")).collect();
        Error::config(format!(
            "{} problem(s) in hooks:\n{}",
            problems.len(),
            list.join("\n")
        ))
    }

    /// Returns the hooks, in dispatch order.
    pub fn hooks(&self) -> &HookSet {
        &self.hooks
    }

    /// Returns true when any hook for `event` matches `names`.
    pub fn applies(&self, event: Event, names: &[String]) -> bool {
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        self.hooks.applies(event, &names)
    }

    /// Runs the hooks for `event`: inline on the caller's thread while they are small pure
    /// scripts, then on a blocking thread from the first one that is not, keeping the caller's
    /// span. No hook runs twice.
    ///
    /// # Errors
    /// [`ErrorKind::Hook`] when a hook is broken.
    pub async fn dispatch(
        &self,
        event: Event,
        payload: Value,
        names: &[String],
    ) -> Result<Dispatch> {
        if !self.applies(event, names) {
            return Ok(Dispatch {
                payload,
                blocked: None,
                runs: Vec::new(),
            });
        }
        let matched: Vec<&str> = names.iter().map(String::as_str).collect();
        let step = self
            .hooks
            .dispatch_inline(event, payload, &matched)
            .map_err(|e| Error::new(ErrorKind::Hook, e.to_string()))?;
        let dispatch = match step {
            Step::Done(dispatch) => dispatch,
            Step::Deferred(from) => {
                let hooks = self.hooks.clone();
                let names = names.to_vec();
                let span = tracing::Span::current();
                tokio::task::spawn_blocking(move || {
                    span.in_scope(|| {
                        let names: Vec<&str> = names.iter().map(String::as_str).collect();
                        hooks.resume(event, from, &names)
                    })
                })
                .await
                .map_err(|e| {
                    Error::new(
                        ErrorKind::Hook,
                        format!("hook dispatch for {event} failed: {e}"),
                    )
                })?
                .map_err(|e| Error::new(ErrorKind::Hook, e.to_string()))?
            }
        };
        for run in &dispatch.runs {
            crate::telemetry::record_hook_decision(event.as_str(), &run.hook, run.action.as_str());
        }
        Ok(dispatch)
    }
}
