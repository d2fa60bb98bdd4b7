//! The operator's hooks as the runtime uses them: async dispatch on a blocking thread, broken
//! hooks as `hook` errors, blocks as decisions.

use harness_hooks::{Dispatch, Event, HookSet};
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

    /// Returns true when any hook for `event` matches `names`.
    pub fn applies(&self, event: Event, names: &[String]) -> bool {
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        self.hooks.applies(event, &names)
    }

    /// Runs the hooks for `event` on the calling thread (which it blocks while scripts run).
    ///
    /// # Errors
    /// [`ErrorKind::Hook`] when a hook is broken.
    pub fn dispatch_blocking(
        &self,
        event: Event,
        payload: Value,
        names: &[String],
    ) -> Result<Dispatch> {
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        let dispatch = self
            .hooks
            .dispatch(event, payload, &names)
            .map_err(|e| Error::new(ErrorKind::Hook, e.to_string()))?;
        for run in &dispatch.runs {
            crate::telemetry::record_hook_decision(event.as_str(), &run.hook, run.action);
        }
        Ok(dispatch)
    }

    /// Runs the hooks for `event` on a blocking thread, keeping the caller's span.
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
        let policy = self.clone();
        let names = names.to_vec();
        let span = tracing::Span::current();
        tokio::task::spawn_blocking(move || {
            span.in_scope(|| policy.dispatch_blocking(event, payload, &names))
        })
        .await
        .map_err(|e| {
            Error::new(
                ErrorKind::Hook,
                format!("hook dispatch for {event} failed: {e}"),
            )
        })?
    }
}
