//! Per-evaluation host state that builtins reach through `Evaluator::extra`.
//!
//! This module is the one place the crate allows `unsafe_code`: starlark's
//! `#[derive(ProvidesStaticType)]` expands to an `unsafe impl` of its type-id marker trait. No
//! unsafe code is written by hand.

use std::cell::{Cell, RefCell};
use std::time::Instant;

use starlark::PrintHandler;
use starlark::any::ProvidesStaticType;
use starlark::eval::Evaluator;

use crate::error::{Error, ErrorKind, Limit, first_line, location};
use crate::intercept::Interceptor;
use crate::sandbox::Sandbox;

/// Per-evaluation state builtins reach through `Evaluator::extra`.
#[derive(ProvidesStaticType)]
pub(crate) struct Host<'s> {
    pub(crate) sandbox: &'s Sandbox,
    pub(crate) deadline: Instant,
    /// For an inline call: when to give up and let the caller move to a blocking thread.
    inline_until: Option<Instant>,
    deferred: Cell<bool>,
    timed_out: Cell<bool>,
    violation: RefCell<Option<String>>,
    /// A limit a builtin enforced itself (nesting, the size of an encoding).
    exceeded: RefCell<Option<(Limit, String)>>,
    pub(crate) logs: RefCell<Vec<String>>,
}

impl<'s> Host<'s> {
    pub(crate) fn new(sandbox: &'s Sandbox) -> Self {
        Host {
            sandbox,
            deadline: Instant::now() + sandbox.limits.timeout,
            inline_until: None,
            deferred: Cell::new(false),
            timed_out: Cell::new(false),
            violation: RefCell::new(None),
            exceeded: RefCell::new(None),
            logs: RefCell::new(Vec::new()),
        }
    }

    /// A host for an inline call, which gives up after `budget`.
    pub(crate) fn inline(sandbox: &'s Sandbox, budget: std::time::Duration) -> Self {
        Host {
            inline_until: Some(Instant::now() + budget),
            ..Host::new(sandbox)
        }
    }

    /// Refuses to run `func` inline: builtins that wait on the outside world (files, network,
    /// processes) only run on blocking threads.
    pub(crate) fn needs_thread(&self, func: &str) -> anyhow::Result<()> {
        if self.inline_until.is_some() {
            self.deferred.set(true);
            anyhow::bail!("{func} needs a blocking thread");
        }
        Ok(())
    }

    /// Returns the host of the evaluation running `eval`.
    pub(crate) fn of<'a, 'e>(eval: &Evaluator<'_, 'a, 'e>) -> anyhow::Result<&'a Host<'e>> {
        eval.extra
            .and_then(|extra| extra.downcast_ref::<Host<'e>>())
            .ok_or_else(|| anyhow::anyhow!("internal error: builtin called outside a sandbox"))
    }

    pub(crate) fn configure<'a>(
        &'a self,
        eval: &mut Evaluator<'_, 'a, 's>,
        name: &str,
    ) -> Result<(), Error> {
        let limits = &self.sandbox.limits;
        let setup = |r: anyhow::Result<()>| {
            r.map_err(|e| Error::new(ErrorKind::Runtime, name, format!("invalid limit: {e}")))
        };
        setup(eval.set_max_tick_count(limits.max_steps.max(1)))?;
        setup(eval.set_max_callstack_size(limits.max_call_depth.max(1)))?;
        setup(eval.set_max_heap_size(limits.max_heap_bytes.max(1)))?;
        // Starlark's collector traces values by recursion (a million-deep list would overflow
        // the stack); it only runs between top-level statements, and the heap limit holds
        // without it.
        eval.disable_gc();
        eval.set_check_cancelled(Box::new(move || {
            let now = Instant::now();
            if self.inline_until.is_some_and(|until| now >= until) {
                self.deferred.set(true);
                return true;
            }
            let late = now >= self.deadline;
            if late {
                self.timed_out.set(true);
            }
            late
        }));
        eval.set_print_handler(self);
        eval.extra = Some(self);
        if self
            .sandbox
            .interceptor
            .as_ref()
            .is_some_and(|i| i.watches())
        {
            eval.enable_profile(&starlark::eval::ProfileMode::Coverage)
                .map_err(|e| Error::new(ErrorKind::Runtime, name, format!("coverage: {e}")))?;
        }
        Ok(())
    }

    /// Tells the sandbox's interceptor, when it watches, that `eval` ended.
    pub(crate) fn evaluated(&self, eval: &Evaluator) {
        if let Some(interceptor) = self.sandbox.interceptor.as_ref().filter(|i| i.watches()) {
            interceptor.evaluated(eval);
        }
    }

    /// Records a sandbox refusal so the failed evaluation is reported as a violation, and returns
    /// the error the builtin raises.
    pub(crate) fn refuse(&self, message: String) -> anyhow::Error {
        self.violation
            .borrow_mut()
            .get_or_insert_with(|| message.clone());
        anyhow::anyhow!(message)
    }

    /// Checks `value` before a builtin converts, encodes or prints it (`func` names the
    /// builtin): too deep or too large is recorded as that limit and returned as the error to
    /// raise.
    pub(crate) fn check_value(
        &self,
        func: &str,
        value: starlark::values::Value,
    ) -> anyhow::Result<()> {
        self.bound(value)
            .map_err(|too| self.over_limit(too.limit, func, &format!("the value {}", too.what)))
    }

    /// As [`Host::check_value`], for a value leaving the evaluation (`what` it is, of script
    /// `name`): the script's typed limit error.
    pub(crate) fn check_leaving(
        &self,
        name: &str,
        what: &str,
        value: starlark::values::Value,
    ) -> Result<(), Error> {
        self.bound(value).map_err(|too| {
            let message = format!(
                "limit {} hit: {what}: the value {}",
                too.limit.as_str(),
                too.what
            );
            Error::new(ErrorKind::Limit(too.limit), name, message)
        })
    }

    fn bound(&self, value: starlark::values::Value) -> Result<(), crate::nesting::TooBig> {
        let limits = &self.sandbox.limits;
        crate::nesting::check(value, limits.max_nesting_depth, limits.max_heap_bytes)
    }

    /// Records that builtin `func` would break `limit` (it checks before it allocates) and returns
    /// the error it raises: `limit NAME hit: func: what`.
    pub(crate) fn over_limit(&self, limit: Limit, func: &str, what: &str) -> anyhow::Error {
        let message = format!("limit {} hit: {func}: {what}", limit.as_str());
        self.exceeded
            .borrow_mut()
            .get_or_insert_with(|| (limit, message.clone()));
        anyhow::anyhow!(message)
    }

    /// Records one line of script output; the caller emits it once the call has ended.
    pub(crate) fn log(&self, line: String) {
        self.logs.borrow_mut().push(line);
    }

    /// Runs a future to completion from the blocking thread the script runs on: on the ambient
    /// Tokio runtime when there is one, else on a small runtime of its own.
    pub(crate) fn block_on<F: std::future::Future>(&self, future: F) -> anyhow::Result<F::Output> {
        match tokio::runtime::Handle::try_current() {
            Ok(handle) => Ok(handle.block_on(future)),
            Err(_) => {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .map_err(|e| anyhow::anyhow!("cannot start an I/O runtime: {e}"))?;
                Ok(runtime.block_on(future))
            }
        }
    }

    /// Returns how long a builtin may still wait before the evaluation's time budget is spent.
    pub(crate) fn remaining(&self) -> std::time::Duration {
        self.deadline.saturating_duration_since(Instant::now())
    }

    pub(crate) fn classify(&self, e: starlark::Error, eval: &Evaluator, name: &str) -> Error {
        let at = location(&e);
        if self.deferred.get() {
            return Error::new(
                ErrorKind::WouldBlock,
                name,
                "the call needs a blocking thread",
            );
        }
        if let Some(message) = self.violation.borrow().clone() {
            return Error::new(ErrorKind::Sandbox, name, message).at(at);
        }
        if let Some((limit, message)) = self.exceeded.borrow().clone() {
            return Error::new(ErrorKind::Limit(limit), name, message).at(at);
        }
        let limits = &self.sandbox.limits;
        let limit = if matches!(e.kind(), starlark::ErrorKind::StackOverflow(_)) {
            Some((
                Limit::CallStack,
                format!("call stack deeper than {} frames", limits.max_call_depth),
            ))
        } else if self.timed_out.get() {
            Some((Limit::Time, format!("ran longer than {:?}", limits.timeout)))
        } else if heap_bytes(eval) > limits.max_heap_bytes {
            Some((
                Limit::Heap,
                format!("heap grew past {} bytes", limits.max_heap_bytes),
            ))
        } else if eval.get_total_tick_count() >= limits.max_steps {
            Some((
                Limit::Steps,
                format!("took more than {} steps", limits.max_steps),
            ))
        } else {
            None
        };
        match limit {
            Some((limit, what)) => Error::new(
                ErrorKind::Limit(limit),
                name,
                format!("limit {} hit: the script {what}", limit.as_str()),
            )
            .at(at),
            None => Error::new(ErrorKind::Runtime, name, first_line(&e)).at(at),
        }
    }
}

/// The heap size starlark holds against the heap limit (`Evaluator::check_heap_size_limit`): the
/// peak of the evaluation's heap plus what its module's frozen heap holds.
fn heap_bytes(eval: &Evaluator) -> usize {
    eval.heap().peak_allocated_bytes() + eval.frozen_heap().allocated_bytes()
}

impl PrintHandler for Host<'_> {
    fn println(&self, text: &str) -> starlark::Result<()> {
        self.log(text.to_owned());
        Ok(())
    }
}

/// The interceptor of the sandbox `eval` runs in, for a host's own globals (registered with
/// [`Engine::with_extension`](crate::Engine::with_extension)).
pub fn interceptor<'e>(eval: &Evaluator<'_, '_, 'e>) -> Option<&'e dyn Interceptor> {
    let sandbox: &'e Sandbox = Host::of(eval).ok()?.sandbox;
    sandbox.interceptor.as_deref()
}
