//! Span, attribute and metric names, in one place (DESIGN §4.14), the metric instruments, and the
//! W3C trace context carried across process boundaries. OpenTelemetry GenAI semantic-convention
//! names are used where one exists: each span's exported name is `otel.name`, e.g.
//! `invoke_agent claude`, `chat gpt-4o`, `execute_tool read_file`.

/// One delegation, from request to outcome (GenAI `invoke_agent {gen_ai.agent.name}`).
pub const SPAN_DELEGATION: &str = "invoke_agent";
/// One attempt of the Ralph loop.
pub const SPAN_ATTEMPT: &str = "delegation.attempt";
/// One model call (GenAI `chat {gen_ai.request.model}`).
pub const SPAN_MODEL_CALL: &str = "chat";
/// One tool call (GenAI `execute_tool {gen_ai.tool.name}`).
pub const SPAN_TOOL: &str = "execute_tool";
/// The event recorded on an attempt's span for each verdict (GenAI evaluation event).
pub const EVENT_EVALUATION: &str = "gen_ai.evaluation.result";
/// The inline verifier.
pub const SPAN_VERIFY: &str = "verify.inline";
/// One stage of the pipeline judging an attempt (its name in `harness.stage.name`): the
/// attempt's verification time, stage by stage.
pub const SPAN_STAGE: &str = "harness.stage";

/// Attribute names.
pub mod attr {
    /// The pipeline stage a `harness.stage` span is (`checks`, `verify`, `critic`, …).
    pub const STAGE_NAME: &str = "harness.stage.name";
    /// The delegation id.
    pub const DELEGATION_ID: &str = "delegation.id";
    /// The delegate kind.
    pub const DELEGATION_KIND: &str = "delegation.kind";
    /// Attempts made.
    pub const VERIFY_ATTEMPTS: &str = "delegation.verify_attempts";
    /// Whether verification passed.
    pub const VERIFY_PASSED: &str = "delegation.verify_passed";
    /// `passed|failed|skipped`.
    pub const VERIFY_OUTCOME: &str = "delegation.verify_outcome";
    /// `passed|skipped|failed|error`.
    pub const OUTCOME: &str = "delegation.outcome";
    /// The retry template's version.
    pub const RETRY_TEMPLATE_VERSION: &str = "delegation.retry_template.version";
    /// The SHA-256 of the retry template's words (on every attempt's span).
    pub const RETRY_TEMPLATE_SHA256: &str = "delegation.retry_template.sha256";
    /// The error kind on failure.
    pub const ERROR_TYPE: &str = "error.type";
}

/// The span of each hook run (emitted by `harness-hooks`).
pub const SPAN_HOOK: &str = harness_hooks::SPAN_HOOK;

/// Metric names.
pub mod metric {
    /// Counter of finished delegations, by `delegation.kind` and `delegation.outcome`.
    pub const DELEGATIONS: &str = "harness.delegations";
    /// Histogram of attempts per delegation, by kind and outcome.
    pub const VERIFY_ATTEMPTS: &str = "harness.delegation.verify_attempts";
    /// Histogram of verification time in seconds, by `surface` (`inline` or `hook`).
    pub const VERIFY_DURATION: &str = "harness.verify.duration";
    /// Counter of hook decisions, by `hook.event`, `hook.name` and `hook.action`.
    pub const HOOK_DECISIONS: &str = "harness.hook.decisions";
    /// Counter of model tokens, by `delegation.kind` and `direction` (`input` or `output`).
    pub const TOKENS: &str = "harness.gen_ai.tokens";
    /// Counter of critic reviews, by `critic.outcome` (`PASS`, `SOFT_FAIL`, `HARD_FAIL`).
    pub const CRITIC_REVIEWS: &str = "harness.critic.reviews";
    /// Counter of human overrides, by `override.type` and `override.decision` (`approved`,
    /// `rejected`, or the refusal: `override_not_allowed`, `reason_required`,
    /// `illegal_transition`).
    pub const OVERRIDES: &str = "harness.overrides";
}

use std::collections::HashMap;
use std::sync::LazyLock;

use opentelemetry::KeyValue;
use opentelemetry::metrics::{Counter, Histogram};

/// The instruments, created on first use from the global meter provider (a no-op unless the
/// binary installed one).
pub(crate) struct Instruments {
    delegations: Counter<u64>,
    verify_attempts: Histogram<u64>,
    verify_duration: Histogram<f64>,
    hook_decisions: Counter<u64>,
    tokens: Counter<u64>,
    critic_reviews: Counter<u64>,
    overrides: Counter<u64>,
}

static INSTRUMENTS: LazyLock<Instruments> = LazyLock::new(|| {
    let meter = opentelemetry::global::meter("harness");
    Instruments {
        delegations: meter
            .u64_counter(metric::DELEGATIONS)
            .with_description("Finished delegations")
            .build(),
        verify_attempts: meter
            .u64_histogram(metric::VERIFY_ATTEMPTS)
            .with_description("Attempts per delegation")
            .with_boundaries(vec![1.0, 2.0, 3.0, 4.0, 5.0, 8.0])
            .build(),
        verify_duration: meter
            .f64_histogram(metric::VERIFY_DURATION)
            .with_description("Time spent verifying one attempt")
            .with_unit("s")
            .build(),
        hook_decisions: meter
            .u64_counter(metric::HOOK_DECISIONS)
            .with_description("Hook decisions")
            .build(),
        tokens: meter
            .u64_counter(metric::TOKENS)
            .with_description("Model tokens used")
            .with_unit("{token}")
            .build(),
        critic_reviews: meter
            .u64_counter(metric::CRITIC_REVIEWS)
            .with_description("Critic reviews")
            .build(),
        overrides: meter
            .u64_counter(metric::OVERRIDES)
            .with_description("Human overrides, and refused attempts")
            .build(),
    }
});

/// Records one human override (`harness override`): its type and decision, or the refusal.
pub fn record_override(override_type: &str, decision: &str) {
    INSTRUMENTS.overrides.add(
        1,
        &[
            KeyValue::new("override.type", override_type.to_owned()),
            KeyValue::new("override.decision", decision.to_owned()),
        ],
    );
}

/// Records one critic review.
pub(crate) fn record_critic(outcome: &str) {
    INSTRUMENTS
        .critic_reviews
        .add(1, &[KeyValue::new("critic.outcome", outcome.to_owned())]);
}

/// Records a finished delegation.
pub(crate) fn record_delegation(
    kind: &'static str,
    outcome: &'static str,
    attempts: u64,
    usage: crate::Usage,
) {
    let labels = [
        KeyValue::new(attr::DELEGATION_KIND, kind),
        KeyValue::new(attr::OUTCOME, outcome),
    ];
    let m = &*INSTRUMENTS;
    m.delegations.add(1, &labels);
    m.verify_attempts.record(attempts, &labels);
    for (direction, count) in [
        ("input", usage.input_tokens),
        ("output", usage.output_tokens),
    ] {
        if count > 0 {
            m.tokens.add(
                count,
                &[
                    KeyValue::new(attr::DELEGATION_KIND, kind),
                    KeyValue::new("direction", direction),
                ],
            );
        }
    }
}

/// Records how long one verification surface took.
pub(crate) fn record_verify_duration(surface: &'static str, seconds: f64) {
    INSTRUMENTS
        .verify_duration
        .record(seconds, &[KeyValue::new("surface", surface)]);
}

/// Records one hook decision.
pub(crate) fn record_hook_decision(event: &'static str, hook: &str, action: &'static str) {
    INSTRUMENTS.hook_decisions.add(
        1,
        &[
            KeyValue::new("hook.event", event),
            KeyValue::new("hook.name", hook.to_owned()),
            KeyValue::new("hook.action", action),
        ],
    );
}

/// The context a delegation's trace continues: the caller's `traceparent`, read through the
/// global propagator (a no-op unless the binary installed one, so embedders decide).
pub(crate) fn parent_context(traceparent: Option<&str>) -> Option<opentelemetry::Context> {
    let traceparent = traceparent?;
    let carrier = HashMap::from([("traceparent".to_owned(), traceparent.to_owned())]);
    Some(opentelemetry::global::get_text_map_propagator(|p| {
        p.extract(&carrier)
    }))
}

/// The current trace context as propagation fields (`traceparent`, and `tracestate` when there is
/// one), for a model request's headers or a child process's environment. Empty outside a trace.
pub(crate) fn propagation_fields() -> HashMap<String, String> {
    let mut fields = HashMap::new();
    opentelemetry::global::get_text_map_propagator(|p| {
        p.inject_context(&opentelemetry::Context::current(), &mut fields);
    });
    fields
}
