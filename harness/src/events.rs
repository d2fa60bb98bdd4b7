//! Run events (DESIGN §4.12): one enum for everything that happens during a delegation, each
//! numbered and timed. They are kept in the [`Report`](crate::Report) (so the journal stores
//! them), handed to the [`Observer`] as they happen (so `--events` can stream them as JSON
//! lines), and emitted as span events on the span current when they happen. A few variants are
//! progress only — what a display shows as it happens (the answer, a tool call with its
//! arguments) but the record already holds elsewhere: they reach observers, never the record.
//!
//! The [`Emitter`] is the only channel: the loop, the turns and the pipeline stages tell it what
//! happened, and it tells the observer.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use harness_hooks::ToolCall;
use serde::{Deserialize, Serialize};

/// What happened. Serialised with its name in `type`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type")]
pub enum RunEvent {
    /// The delegation began.
    DelegationStarted {
        /// The delegate's kind.
        delegate: String,
        /// Attempts allowed in all.
        max_attempts: u32,
        /// Every claim of the answer must cite its evidence (`citations: required`).
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        citations: bool,
        /// The steps every attempt must take (`plan.required_steps`).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        plan: Vec<serde_json::Value>,
    },
    /// An attempt began.
    AttemptStarted,
    /// The delegate reported the session it keeps on its side (an agent CLI's session or
    /// thread id): every retry resumes it.
    DelegateSession {
        /// The CLI's id for it.
        session_id: String,
    },
    /// The delegate called a tool.
    ToolCalled {
        /// The call's id.
        call_id: String,
        /// The tool.
        name: String,
        /// True when the delegate ran the tool itself (an agent CLI's own tools, read from its
        /// log), not through the harness.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        observed: bool,
    },
    /// A tool call returned.
    ToolReturned {
        /// The call's id.
        call_id: String,
        /// The tool.
        name: String,
        /// True when it failed or was refused.
        is_error: bool,
    },
    /// A per-tool verifier refused a call as it returned; the delegate read the reason as the
    /// call's error.
    ToolVerificationFailed {
        /// The call's id.
        call_id: String,
        /// The tool.
        name: String,
        /// Why.
        reason: String,
    },
    /// The scope diff found nothing outside the scope.
    ScopeValidated {
        /// Paths added, modified and deleted since the baseline.
        added: usize,
        /// Modified paths.
        modified: usize,
        /// Deleted paths.
        deleted: usize,
    },
    /// The scope diff found changes the scope refuses.
    ScopeViolationDetected {
        /// The refused paths.
        paths: Vec<String>,
        /// `fail` (the delegation ends) or `retry`.
        on_violation: String,
    },
    /// The delegate changed what judges it (DESIGN §4.8): the delegation ends `failed`, kind
    /// `gate_tampered`.
    GateTampered {
        /// Each file and how it changed (`tests/test_a.py (modified)`).
        paths: Vec<String>,
    },
    /// The gaming stage found added code that passes the tests without doing the work.
    GamingDetected {
        /// What matched, file by file.
        hits: Vec<GamingHit>,
        /// True when the findings fail the attempt (`gaming: blocking`).
        blocking: bool,
    },
    /// A holdout check (tests the delegate never sees) ran.
    HoldoutCompleted {
        /// Its name.
        check_name: String,
        /// True when it passed.
        passed: bool,
        /// Its runner's counts, when the runner reported them: `1 of 14 tests failed`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        counts: Option<String>,
        /// How long it took.
        duration_ms: u64,
        /// CPU time (user and system, milliseconds) of its command and every process that
        /// command waited for, over all its runs; absent where the kernel does not say (a
        /// timeout, an older kernel) and for criteria that run no command.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cpu_ms: Option<u64>,
    },
    /// The claims stage read the answer's side-effect claims and checked them.
    ClaimsChecked {
        /// Claims read.
        claims: usize,
        /// Claims the tool log, the changes and the checks do not support.
        unsupported: usize,
    },
    /// A check or criterion began.
    CheckStarted {
        /// Its name.
        check_name: String,
        /// False for an advisory check.
        required: bool,
    },
    /// A check or criterion finished.
    CheckCompleted {
        /// Its name.
        check_name: String,
        /// True when it passed.
        passed: bool,
        /// The exit code of a command; `None` for other criteria, timeouts and signals.
        exit_code: Option<i32>,
        /// How long it took.
        duration_ms: u64,
        /// False for an advisory check.
        required: bool,
        /// Exit codes of every run when a failing check was re-run (`confirm`); empty when it
        /// ran once.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        exit_codes: Vec<Option<i32>>,
        /// True when it failed and then passed on a re-run.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        flaky: bool,
        /// What its test runner reported (`pytest: 14 passed, 0 failed, 0 skipped (base 14)`),
        /// or why a run that exited 0 did not pass (`pytest exited 0 without its report …`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        runner: Option<String>,
        /// CPU time (user and system, milliseconds) of its command and every process that
        /// command waited for, over all its runs; absent where the kernel does not say (a
        /// timeout, an older kernel) and for criteria that run no command.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cpu_ms: Option<u64>,
    },
    /// The pipeline began judging an attempt.
    VerificationStarted,
    /// The pipeline judged an attempt.
    VerificationCompleted {
        /// `pass`, `retry`, `fail` or `error`.
        outcome: String,
        /// The blocking reasons, one per line; empty on a pass.
        reasoning: String,
    },
    /// The retry prompt was assembled for the next attempt.
    RetryContextAssembled {
        /// The template's version.
        template_version: String,
        /// Blocking reasons quoted.
        reasons: usize,
        /// True when the same failure repeated.
        repeated: bool,
    },
    /// The delegation ended.
    DelegationCompleted {
        /// Its outcome.
        outcome: String,
        /// The kind of a failure or error.
        kind: Option<String>,
    },
    /// The critic reviewed the attempt.
    CriticCompleted {
        /// `PASS`, `SOFT_FAIL` or `HARD_FAIL`.
        outcome: String,
        /// Its model, else its kind.
        reviewer: String,
        /// Findings it reported.
        findings: usize,
        /// How many of them block.
        blocking: usize,
    },
    /// A human approved or rejected the run after it ended (`harness override`); added to the
    /// run's record, never rewriting its outcome.
    HumanOverride {
        /// Who decided (`--user` or `HARNESS_USER`).
        user: String,
        /// `check`, `verifier` or `direct`.
        override_type: String,
        /// `approved` or `rejected`: the run's final state.
        decision: String,
        /// Why.
        reason: Option<String>,
        /// The state it was in: `failed` or `passed_with_debt`.
        previous_state: String,
    },
    /// Progress only, never recorded: the delegate gave its final answer for the attempt (the
    /// record keeps it in the attempt's Result).
    Responded {
        /// The answer, as the delegate gave it (not yet scrubbed).
        response: String,
        /// True when `delegation.post` hooks will see (and may redact) the answer before the
        /// caller gets it: a progress display should not echo it.
        redacted_later: bool,
    },
    /// Progress only, never recorded: a tool call finished (the record keeps the call in the
    /// attempt's `tool_calls` and the `ToolCalled`/`ToolReturned` pair in its events).
    ToolFinished {
        /// The call as it was made, with its arguments (not yet scrubbed).
        call: ToolCall,
        /// True when it failed or was refused.
        is_error: bool,
        /// What came back when it failed or was refused: the refusal's reason (not yet
        /// scrubbed).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
        /// For a `delegate` call that ran a child (DESIGN §9): the child's `{id, outcome,
        /// verified, attempts}`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        child: Option<serde_json::Value>,
    },
}

impl RunEvent {
    /// The event's name, e.g. `CheckCompleted`.
    pub fn name(&self) -> &'static str {
        match self {
            RunEvent::DelegationStarted { .. } => "DelegationStarted",
            RunEvent::AttemptStarted => "AttemptStarted",
            RunEvent::DelegateSession { .. } => "DelegateSession",
            RunEvent::ToolCalled { .. } => "ToolCalled",
            RunEvent::ToolReturned { .. } => "ToolReturned",
            RunEvent::ToolVerificationFailed { .. } => "ToolVerificationFailed",
            RunEvent::ScopeValidated { .. } => "ScopeValidated",
            RunEvent::ScopeViolationDetected { .. } => "ScopeViolationDetected",
            RunEvent::GateTampered { .. } => "GateTampered",
            RunEvent::GamingDetected { .. } => "GamingDetected",
            RunEvent::HoldoutCompleted { .. } => "HoldoutCompleted",
            RunEvent::ClaimsChecked { .. } => "ClaimsChecked",
            RunEvent::CheckStarted { .. } => "CheckStarted",
            RunEvent::CheckCompleted { .. } => "CheckCompleted",
            RunEvent::VerificationStarted => "VerificationStarted",
            RunEvent::VerificationCompleted { .. } => "VerificationCompleted",
            RunEvent::RetryContextAssembled { .. } => "RetryContextAssembled",
            RunEvent::DelegationCompleted { .. } => "DelegationCompleted",
            RunEvent::CriticCompleted { .. } => "CriticCompleted",
            RunEvent::HumanOverride { .. } => "HumanOverride",
            RunEvent::Responded { .. } => "Responded",
            RunEvent::ToolFinished { .. } => "ToolFinished",
        }
    }

    /// Returns false for the progress-only variants ([`RunEvent::Responded`],
    /// [`RunEvent::ToolFinished`]): observers see them, the record never holds them.
    pub fn is_recorded(&self) -> bool {
        !matches!(
            self,
            RunEvent::Responded { .. } | RunEvent::ToolFinished { .. }
        )
    }
}

/// One match of the gaming stage, as its event carries it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GamingHit {
    /// The rule: `special-cased-input`, `reads-caller`, `ends-the-process`, `test-framework`.
    pub rule: String,
    /// The rule's pattern that matched (`py-os-exit`).
    pub pattern: String,
    /// The file, relative to the workspace.
    pub path: String,
    /// The line, 1-based.
    pub line: usize,
    /// The added line.
    pub code: String,
}

/// Receives a delegation's events as they happen, recorded and progress-only alike, in order and
/// synchronously; any `Fn(&EventRecord)` is an observer.
pub trait Observer: Sync {
    /// Called once per event.
    fn on_event(&self, event: &EventRecord);

    /// False when the progress-only events ([`RunEvent::Responded`], [`RunEvent::ToolFinished`])
    /// would be ignored: they are then not built at all (each copies an answer or a call).
    fn wants_progress(&self) -> bool {
        true
    }
}

impl<F: Fn(&EventRecord) + Sync> Observer for F {
    fn on_event(&self, event: &EventRecord) {
        self(event);
    }
}

/// One event as it is stored and streamed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EventRecord {
    /// The delegation's id.
    pub run_id: String,
    /// The attempt it happened in, from 0 (0 before the first attempt).
    pub attempt: u32,
    /// Its place in the run, from 0, without gaps. A progress-only event is not numbered: it
    /// carries the place of the recorded event that follows it.
    pub seq: u64,
    /// When it happened, RFC 3339.
    pub at: String,
    /// What happened.
    #[serde(flatten)]
    pub event: RunEvent,
}

/// Numbers, times, keeps and hands on the events of one delegation.
pub(crate) struct Emitter<'a> {
    run_id: String,
    observer: &'a dyn Observer,
    seq: AtomicU64,
    attempt: AtomicU32,
    records: Mutex<Vec<EventRecord>>,
}

impl std::fmt::Debug for Emitter<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Emitter")
            .field("run_id", &self.run_id)
            .finish_non_exhaustive()
    }
}

/// An observer that ignores everything (a batch's delegations, a worker's, judging outside a
/// run): progress-only events are not even built for it.
#[derive(Debug, Clone, Copy)]
pub struct Nobody;

impl Observer for Nobody {
    fn on_event(&self, _: &EventRecord) {}

    fn wants_progress(&self) -> bool {
        false
    }
}

impl<'a> Emitter<'a> {
    /// Events of the delegation `run_id`, handed to `observer` as they happen.
    pub(crate) fn new(run_id: &str, observer: &'a dyn Observer) -> Self {
        Emitter {
            run_id: run_id.to_owned(),
            observer,
            seq: AtomicU64::new(0),
            attempt: AtomicU32::new(0),
            // A two-attempt delegation records about a dozen.
            records: Mutex::new(Vec::with_capacity(16)),
        }
    }

    /// Sets the attempt later events belong to.
    pub(crate) fn set_attempt(&self, attempt: u32) {
        self.attempt.store(attempt, Ordering::Relaxed);
    }

    /// Records `event`: numbered, timed, kept, handed to the observer and emitted as a span
    /// event of the current span.
    pub(crate) fn emit(&self, event: RunEvent) {
        let mut records = self
            .records
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let record = EventRecord {
            run_id: self.run_id.clone(),
            attempt: self.attempt.load(Ordering::Relaxed),
            seq: self.seq.fetch_add(1, Ordering::Relaxed),
            at: humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string(),
            event,
        };
        if tracing::enabled!(tracing::Level::INFO) {
            let body = serde_json::to_string(&record.event).unwrap_or_default();
            tracing::info!(
                harness.event.seq = i64::try_from(record.seq).unwrap_or(i64::MAX),
                harness.event.body = body.as_str(),
                "{}",
                record.event.name()
            );
        }
        self.observer.on_event(&record);
        records.push(record);
    }

    /// Hands a progress-only event to the observer, built by `event` only when it wants one: not
    /// numbered, kept or traced.
    pub(crate) fn progress(&self, event: impl FnOnce() -> RunEvent) {
        if !self.observer.wants_progress() {
            return;
        }
        let event = event();
        debug_assert!(!event.is_recorded(), "{} is a recorded event", event.name());
        self.observer.on_event(&EventRecord {
            run_id: self.run_id.clone(),
            attempt: self.attempt.load(Ordering::Relaxed),
            seq: self.seq.load(Ordering::Relaxed),
            at: humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string(),
            event,
        });
    }

    /// Returns the delegation's id.
    pub(crate) fn run_id(&self) -> &str {
        &self.run_id
    }

    /// The events so far, in order.
    pub(crate) fn take(&self) -> Vec<EventRecord> {
        std::mem::take(
            &mut *self
                .records
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        )
    }
}

impl Emitter<'static> {
    /// An emitter that keeps events for nobody.
    pub(crate) fn detached() -> Self {
        Emitter::new("", &Nobody)
    }

    /// An emitter of `run_id`'s events that keeps them for nobody.
    pub(crate) fn quiet(run_id: &str) -> Self {
        Emitter::new(run_id, &Nobody)
    }
}
