//! A loaded set of hooks and ordered dispatch: priority order, first block wins, modify patches
//! chain, anything broken fails closed.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use harness_builtins::{Engine, Sandbox};
use serde_json::Value;
use tracing::field::Empty;

use crate::decision::{Action, Decision, merge};
use crate::event::Event;
use crate::hook::{self, Hook, Problem};

/// The span recorded for each hook that runs.
pub const SPAN_HOOK: &str = "hook.run";

/// A hook that is broken at run time: it crashed, hit a limit, violated its sandbox, returned
/// something that is not a decision, or produced a payload without the event's shape.
#[derive(Debug, Clone, thiserror::Error)]
#[error("hook {name} ({}): {message}", path.display())]
pub struct HookError {
    /// The hook's name.
    pub name: String,
    /// Its file.
    pub path: PathBuf,
    /// What went wrong.
    pub message: String,
}

/// One hook that ran, and what it decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HookRun {
    /// The hook's name.
    pub hook: String,
    /// What it decided.
    pub action: Action,
    /// The reason it gave (blocks always have one).
    pub reason: String,
}

/// The result of dispatching one event.
#[derive(Debug, Clone, PartialEq)]
pub struct Dispatch {
    /// The payload after every modify.
    pub payload: Value,
    /// The hook that blocked, and why.
    pub blocked: Option<HookRun>,
    /// Every hook that ran, in order.
    pub runs: Vec<HookRun>,
}

/// The hooks of one delegation (or one `harness hooks` command), sorted for dispatch.
#[derive(Debug, Clone)]
pub struct HookSet {
    hooks: Arc<Vec<Hook>>,
    sandbox: Arc<Sandbox>,
}

/// Returns the Starlark globals for hook scripts: the builtins plus `allow()`, `block(reason)`
/// and `modify(patch)`.
pub fn engine() -> Engine {
    Engine::with_extension(crate::decision::decisions)
}

/// Lists the `*.md` files of `paths` (directories are walked, files taken as they are). Whatever
/// under a hook directory looks like a hook but cannot be one — a dangling link, an unreadable
/// directory, `gate.MD`, a FIFO named `gate.md` — is a problem, never silently skipped: a policy
/// file that does not load must not leave a gap nobody sees.
fn hook_files(paths: &[PathBuf], problems: &mut Vec<Problem>) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let problem = |path: &Path, message: String| Problem {
        path: path.to_path_buf(),
        line: None,
        message,
    };
    for path in paths {
        if path.is_dir() {
            // A hook directory's hooks are its own: one that is a link leading out of it (to a
            // file anyone else controls) is named, not loaded.
            let root = path.canonicalize().unwrap_or_else(|_| path.clone());
            let mut found = Vec::new();
            for entry in walkdir::WalkDir::new(path).follow_links(true) {
                let entry = match entry {
                    Ok(entry) => entry,
                    Err(e) => {
                        let at = e.path().unwrap_or(path).to_path_buf();
                        problems.push(problem(&at, format!("cannot read: {e}")));
                        continue;
                    }
                };
                let Some(extension) = entry.path().extension().and_then(|x| x.to_str()) else {
                    continue;
                };
                if !extension.eq_ignore_ascii_case("md") {
                    continue;
                }
                if extension != "md" {
                    problems.push(problem(
                        entry.path(),
                        format!(
                            "hook files end in `.md`, lower case; rename it to {}",
                            entry.path().with_extension("md").display()
                        ),
                    ));
                } else if entry.file_type().is_file() {
                    match entry.path().canonicalize() {
                        Ok(real) if !real.starts_with(&root) => problems.push(problem(
                            entry.path(),
                            format!(
                                "leads out of the hook directory {} through a link (to {}); copy the hook in, or name its directory too",
                                path.display(),
                                real.display()
                            ),
                        )),
                        _ => found.push(entry.into_path()),
                    }
                } else if !entry.file_type().is_dir() {
                    problems.push(problem(
                        entry.path(),
                        "is not a regular file (a FIFO, socket or device cannot be a hook)"
                            .to_owned(),
                    ));
                }
            }
            found.sort();
            files.extend(found);
        } else if path.is_file() {
            files.push(path.clone());
        } else {
            problems.push(problem(
                path,
                if path.symlink_metadata().is_ok() {
                    "is a dangling link or not a regular file".to_owned()
                } else {
                    "no such hook file or directory".to_owned()
                },
            ));
        }
    }
    // A file named twice (a directory and a file in it, or the delegation's `hooks:` and
    // `--hooks` naming the same directory) is one hook and runs once.
    let mut seen = std::collections::HashSet::new();
    files.retain(|f| seen.insert(f.canonicalize().unwrap_or_else(|_| f.clone())));
    files
}

impl HookSet {
    /// Loads every hook under `paths`, compiling with `engine` (see [`engine()`]) and running
    /// in `sandbox`.
    ///
    /// # Errors
    /// Every problem found in every file, not just the first.
    pub fn load(
        engine: &Engine,
        sandbox: Arc<Sandbox>,
        paths: &[PathBuf],
    ) -> Result<HookSet, Vec<Problem>> {
        let mut problems = Vec::new();
        let mut hooks = Vec::new();
        for file in hook_files(paths, &mut problems) {
            match hook::load(engine, &sandbox, &file) {
                Ok(hook) => hooks.push(hook),
                Err(found) => problems.extend(found),
            }
        }
        if !problems.is_empty() {
            return Err(problems);
        }
        hooks.sort_by(|a, b| {
            (a.event, a.priority, &a.name, &a.path).cmp(&(b.event, b.priority, &b.name, &b.path))
        });
        Ok(HookSet {
            hooks: Arc::new(hooks),
            sandbox,
        })
    }

    /// Returns an empty set.
    pub fn empty(sandbox: Arc<Sandbox>) -> HookSet {
        HookSet {
            hooks: Arc::new(Vec::new()),
            sandbox,
        }
    }

    /// Returns every hook, in dispatch order (by event, then priority, then name).
    pub fn hooks(&self) -> &[Hook] {
        &self.hooks
    }

    fn matching<'a>(
        &'a self,
        event: Event,
        names: &'a [&'a str],
    ) -> impl Iterator<Item = &'a Hook> + 'a {
        self.hooks.iter().filter(move |h| {
            h.event == event
                && h.tools.as_ref().is_none_or(|m| m.matches_any(names))
                && h.delegates.as_ref().is_none_or(|m| m.matches_any(names))
        })
    }

    /// Returns true when some hook for `event` matches `names` (tool name, or delegate kind and
    /// model), before any `when` is evaluated.
    pub fn applies(&self, event: Event, names: &[&str]) -> bool {
        self.matching(event, names).next().is_some()
    }

    /// Runs the hooks for `event` that match `names`, in order, on `payload`. Blocks on the
    /// calling thread while scripts run: call it from a blocking thread.
    ///
    /// # Errors
    /// [`HookError`] when any hook is broken; no later hook runs and nothing counts as allowed.
    pub fn dispatch(
        &self,
        event: Event,
        payload: Value,
        names: &[&str],
    ) -> Result<Dispatch, HookError> {
        self.resume(event, Resume::start(payload), names)
    }

    /// Runs on the caller's thread the hooks that can run inline (pure scripts that finish
    /// within the inline budget, see `Script::call_inline`), in order, and stops before the
    /// first one that needs a blocking thread. Nothing is run twice: finish a
    /// [`Step::Deferred`] with [`HookSet::resume`] on a blocking thread.
    ///
    /// # Errors
    /// As [`HookSet::dispatch`].
    pub fn dispatch_inline(
        &self,
        event: Event,
        payload: Value,
        names: &[&str],
    ) -> Result<Step, HookError> {
        self.run(event, Resume::start(payload), names, true)
    }

    /// Finishes a dispatch from where [`HookSet::dispatch_inline`] stopped, blocking the calling
    /// thread while scripts run.
    ///
    /// # Errors
    /// As [`HookSet::dispatch`].
    pub fn resume(
        &self,
        event: Event,
        from: Resume,
        names: &[&str],
    ) -> Result<Dispatch, HookError> {
        match self.run(event, from, names, false)? {
            Step::Done(dispatch) => Ok(dispatch),
            // Only inline runs defer; fail closed all the same.
            Step::Deferred(at) => Err(HookError {
                name: self
                    .hooks
                    .get(at.next)
                    .map_or_else(String::new, |h| h.name.clone()),
                path: PathBuf::new(),
                message: "internal error: a blocking dispatch deferred".to_owned(),
            }),
        }
    }

    fn run(
        &self,
        event: Event,
        from: Resume,
        names: &[&str],
        inline: bool,
    ) -> Result<Step, HookError> {
        let Resume {
            next,
            mut payload,
            mut runs,
            span: mut begun,
        } = from;
        for (index, hook) in self.matching(event, names).enumerate().skip(next) {
            if inline && hook.needs_thread() {
                return Ok(Step::Deferred(Resume {
                    next: index,
                    payload,
                    runs,
                    span: None,
                }));
            }
            let span = begun.take().unwrap_or_else(|| {
                tracing::info_span!(
                    SPAN_HOOK,
                    hook.name = hook.name.as_str(),
                    hook.event = event.as_str(),
                    hook.action = Empty,
                    hook.reason = Empty,
                    otel.status_code = Empty,
                )
            });
            let _entered = span.enter();
            let fail = |message: String| {
                span.record("hook.action", "error");
                span.record("otel.status_code", "ERROR");
                HookError {
                    name: hook.name.clone(),
                    path: hook.path.clone(),
                    message,
                }
            };
            let decision = match self.ask(hook, event, &payload, inline) {
                Err(message) => return Err(fail(message)),
                Ok(Answer::Skipped) => {
                    span.record("hook.action", "skipped");
                    continue;
                }
                Ok(Answer::Deferred) => return Ok(defer(&span, index, payload, runs)),
                Ok(Answer::Decided(decision)) => decision,
            };
            span.record("hook.action", decision.action().as_str());
            match decision {
                Decision::Allow => runs.push(HookRun {
                    hook: hook.name.clone(),
                    action: Action::Allow,
                    reason: String::new(),
                }),
                Decision::Block { reason } => {
                    let reason = if reason.trim().is_empty() {
                        format!("blocked by hook {}", hook.name)
                    } else {
                        reason
                    };
                    span.record("hook.reason", reason.as_str());
                    let run = HookRun {
                        hook: hook.name.clone(),
                        action: Action::Block,
                        reason,
                    };
                    runs.push(run.clone());
                    return Ok(Step::Done(Dispatch {
                        payload,
                        blocked: Some(run),
                        runs,
                    }));
                }
                Decision::Modify(patch) => {
                    merge(&mut payload, &patch);
                    event
                        .check_shape(&payload)
                        .map_err(|e| fail(format!("its modify broke the payload: {e}")))?;
                    runs.push(HookRun {
                        hook: hook.name.clone(),
                        action: Action::Modify,
                        reason: String::new(),
                    });
                }
            }
        }
        Ok(Step::Done(Dispatch {
            payload,
            blocked: None,
            runs,
        }))
    }
}

/// What one hook answered.
enum Answer {
    /// Its `when` was false.
    Skipped,
    /// It ran past the inline budget: the blocking pass runs it again.
    Deferred,
    /// Its `handle` decided.
    Decided(Decision),
}

impl HookSet {
    /// Asks `hook` about `payload`: its `when` (True or False), then its `handle`; `Err` says why
    /// it broke.
    fn ask(
        &self,
        hook: &Hook,
        event: Event,
        payload: &Value,
        inline: bool,
    ) -> Result<Answer, String> {
        let call = |script: &harness_builtins::Script, function: &str| {
            let event_value = Value::String(event.as_str().to_owned());
            if inline {
                script.call_inline(&self.sandbox, function, &[&event_value, payload])
            } else {
                script.call(&self.sandbox, function, &[&event_value, payload])
            }
        };
        let deferred =
            |e: &harness_builtins::Error| e.kind() == harness_builtins::ErrorKind::WouldBlock;
        if let Some(when) = &hook.when {
            let out = match call(when, "when") {
                Ok(out) => out,
                Err(e) if deferred(&e) => return Ok(Answer::Deferred),
                Err(e) => return Err(format!("`when` failed: {} [{}]", e, e.kind().as_str())),
            };
            match out.value {
                Value::Bool(true) => {}
                Value::Bool(false) => return Ok(Answer::Skipped),
                other => return Err(format!("`when` must be True or False, got {other}")),
            }
        }
        match call(&hook.script, "handle") {
            Ok(out) => Decision::from_value(out.value).map(Answer::Decided),
            Err(e) if deferred(&e) => Ok(Answer::Deferred),
            Err(e) => Err(format!("{} [{}]", e, e.kind().as_str())),
        }
    }
}

/// Gives up the inline pass at the hook `index`, which ran past the inline budget: the blocking
/// pass runs it again, in the same span.
fn defer(span: &tracing::Span, index: usize, payload: Value, runs: Vec<HookRun>) -> Step {
    Step::Deferred(Resume {
        next: index,
        payload,
        runs,
        span: Some(span.clone()),
    })
}

/// Where an inline dispatch stopped.
#[derive(Debug, Clone, PartialEq)]
pub struct Resume {
    next: usize,
    payload: Value,
    runs: Vec<HookRun>,
    /// The span of hook `next` when the inline pass began it: the blocking pass goes on in it,
    /// so a hook that outran the inline budget is still one `hook.run` in the trace.
    span: Option<tracing::Span>,
}

impl Resume {
    /// The beginning of a dispatch of `payload`.
    fn start(payload: Value) -> Self {
        Resume {
            next: 0,
            payload,
            runs: Vec::new(),
            span: None,
        }
    }
}

/// The outcome of [`HookSet::dispatch_inline`].
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// Every hook ran.
    Done(Dispatch),
    /// A hook needs a blocking thread; finish with [`HookSet::resume`].
    Deferred(Resume),
}
