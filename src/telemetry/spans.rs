//! The `tracing` layer that turns the harness's spans into OpenTelemetry spans.
//!
//! It does what `tracing-opentelemetry` did for us, for the subset of its behaviour the harness
//! uses, and no more: each span's OpenTelemetry state lives in one small record in the span's
//! registry extensions, and when the span closes the record becomes the SDK's [`SpanData`] and
//! goes straight to the span processor. There is no span builder, no SDK span object and no
//! OpenTelemetry `Context` per span, which was most of the per-delegation cost of exporting.
//!
//! The mapping is the usual one:
//! - span name = the `tracing` span name, or the `otel.name` field; kind `internal`, or the
//!   `otel.kind` field (`client`, `server`, `producer`, `consumer`);
//! - every other field is an attribute (strings, integers, floats, booleans; an unsigned integer
//!   too large for `i64` and anything recorded with `?` or `%` become strings);
//! - `otel.status_code` (`OK` or `ERROR`) and `otel.status_description` set the status, and an
//!   `ERROR`-level event in a span whose status is unset marks it as an error;
//! - an event inside a span is a span event named by its message, with `level`, `target` and its
//!   fields as attributes; events outside any span are not exported.
//!
//! Sampling follows `OTEL_TRACES_SAMPLER` through the SDK's sampler: it decides for each root
//! span, and the spans below it inherit that decision (which is what every standard sampler
//! amounts to, since they either defer to the parent or decide by trace id). Span limits
//! (`OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT`, `OTEL_SPAN_EVENT_COUNT_LIMIT`, ...) are honoured, with the
//! dropped counts exported.

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;
use std::time::SystemTime;

use opentelemetry::trace::{
    Event as OtelEvent, SpanContext, SpanId, SpanKind, Status, TraceFlags, TraceId, TraceState,
};
use opentelemetry::{InstrumentationScope, Key, KeyValue, Value};
use opentelemetry_sdk::trace::{
    Config, IdGenerator, SamplingDecision, ShouldSample, SpanData, SpanEvents, SpanLimits,
    SpanLinks, SpanProcessor,
};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::Layer;
use tracing_subscriber::layer::Context;
use tracing_subscriber::registry::{LookupSpan, SpanRef};

/// Turns closed spans into [`SpanData`] for `processor`.
pub struct SpanLayer<P> {
    processor: Arc<P>,
    sampler: Box<dyn ShouldSample>,
    ids: Box<dyn IdGenerator>,
    limits: SpanLimits,
    scope: InstrumentationScope,
}

impl<P: SpanProcessor> SpanLayer<P> {
    /// A layer feeding `processor`, with the sampler, id generator and limits the standard
    /// `OTEL_*` environment configures.
    pub fn new(processor: Arc<P>) -> Self {
        Self::with_config(processor, Config::default())
    }

    /// A layer feeding `processor` with `config`'s sampler, id generator and limits.
    pub fn with_config(processor: Arc<P>, config: Config) -> Self {
        SpanLayer {
            processor,
            sampler: config.sampler,
            ids: config.id_generator,
            limits: config.span_limits,
            scope: InstrumentationScope::builder("harness")
                .with_version(env!("CARGO_PKG_VERSION"))
                .build(),
        }
    }
}

/// One open span's OpenTelemetry state, kept in the span's registry extensions.
struct Open {
    trace_id: TraceId,
    span_id: SpanId,
    parent: SpanId,
    /// False when the sampler dropped the trace: nothing is collected or exported.
    sampled: bool,
    name: Cow<'static, str>,
    kind: SpanKind,
    start: SystemTime,
    attributes: Vec<KeyValue>,
    dropped_attributes: u32,
    events: Vec<OtelEvent>,
    dropped_events: u32,
    status: Status,
    /// `otel.status_description`, applied when the status is an error.
    status_description: Option<String>,
}

impl Open {
    fn set(&mut self, limit: u32, key: &'static str, value: Value) {
        if let Some(existing) = self.attributes.iter_mut().find(|kv| kv.key.as_str() == key) {
            existing.value = value;
        } else if self.attributes.len() < limit as usize {
            self.attributes
                .push(KeyValue::new(Key::from_static_str(key), value));
        } else {
            self.dropped_attributes = self.dropped_attributes.saturating_add(1);
        }
    }

    fn set_status_code(&mut self, code: &str) {
        self.status = if code.eq_ignore_ascii_case("error") {
            Status::Error {
                description: self.status_description.clone().unwrap_or_default().into(),
            }
        } else if code.eq_ignore_ascii_case("ok") {
            Status::Ok
        } else {
            Status::Unset
        };
    }

    fn set_status_description(&mut self, description: &str) {
        self.status_description = Some(description.to_owned());
        if let Status::Error { description: d } = &mut self.status {
            *d = description.to_owned().into();
        }
    }
}

fn kind(name: &str) -> SpanKind {
    match name.to_ascii_lowercase().as_str() {
        "client" => SpanKind::Client,
        "server" => SpanKind::Server,
        "producer" => SpanKind::Producer,
        "consumer" => SpanKind::Consumer,
        _ => SpanKind::Internal,
    }
}

/// Converts an unsigned field: an `i64` when it fits, else its decimal text (OTLP has no
/// unsigned integers).
fn unsigned(value: u64) -> Value {
    i64::try_from(value).map_or_else(|_| Value::from(value.to_string()), Value::I64)
}

/// Records a span's fields into its [`Open`] record.
struct SpanFields<'a> {
    open: &'a mut Open,
    limit: u32,
}

/// Records an event's message and fields into a span event.
struct EventFields<'a> {
    event: &'a mut OtelEvent,
    limit: u32,
}

/// Where [`Fields`] puts what it visits: typed values, and text (which a span may read as one of
/// the `otel.*` controls).
trait Sink {
    fn value(&mut self, field: &Field, value: Value);

    fn text(&mut self, field: &Field, text: &str) {
        self.value(field, Value::from(text.to_owned()));
    }
}

impl Sink for SpanFields<'_> {
    fn value(&mut self, field: &Field, value: Value) {
        self.open.set(self.limit, field.name(), value);
    }

    fn text(&mut self, field: &Field, text: &str) {
        match field.name() {
            "otel.name" => self.open.name = Cow::Owned(text.to_owned()),
            "otel.kind" => self.open.kind = kind(text),
            "otel.status_code" => self.open.set_status_code(text),
            "otel.status_description" => self.open.set_status_description(text),
            _ => self.value(field, Value::from(text.to_owned())),
        }
    }
}

impl Sink for EventFields<'_> {
    fn value(&mut self, field: &Field, value: Value) {
        if field.name() == "message" {
            self.event.name = Cow::Owned(value.as_str().into_owned());
        } else if self.event.attributes.len() < self.limit as usize {
            self.event
                .attributes
                .push(KeyValue::new(Key::from_static_str(field.name()), value));
        } else {
            self.event.dropped_attributes_count =
                self.event.dropped_attributes_count.saturating_add(1);
        }
    }

    fn text(&mut self, field: &Field, text: &str) {
        if field.name() == "message" {
            self.event.name = Cow::Owned(text.to_owned());
        } else {
            self.value(field, Value::from(text.to_owned()));
        }
    }
}

/// Visits `tracing` fields as OpenTelemetry values: integers, floats and booleans as they are,
/// an unsigned integer beyond `i64` and anything formatted (`?`, `%`, errors) as text.
struct Fields<'a, T>(&'a mut T);

impl<T: Sink> Visit for Fields<'_, T> {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.text(field, value);
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.0.value(field, Value::I64(value));
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.0.value(field, unsigned(value));
    }

    fn record_f64(&mut self, field: &Field, value: f64) {
        self.0.value(field, Value::F64(value));
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.0.value(field, Value::Bool(value));
    }

    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        self.0.text(field, &value.to_string());
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.0.text(field, &format!("{value:?}"));
    }
}

/// Whether this layer took `span`. Spans it did not take (ones only the log wanted) are skipped
/// when looking for a parent: a span's parent here is the nearest enclosing span it took.
fn took<S: for<'a> LookupSpan<'a>>(span: &SpanRef<'_, S>) -> bool {
    span.extensions().get::<Open>().is_some()
}

impl<S, P> Layer<S> for SpanLayer<P>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    P: SpanProcessor + 'static,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else { return };
        let ids = |span: &SpanRef<'_, S>| {
            let extensions = span.extensions();
            extensions
                .get::<Open>()
                .map(|p| (p.trace_id, p.span_id, p.sampled))
        };
        let parent = span.parent().and_then(|parent| {
            ids(&parent).or_else(|| parent.scope().skip(1).find_map(|above| ids(&above)))
        });
        let metadata = attrs.metadata();
        let mut open = Open {
            trace_id: TraceId::INVALID,
            span_id: self.ids.new_span_id(),
            parent: SpanId::INVALID,
            sampled: true,
            name: Cow::Borrowed(metadata.name()),
            kind: SpanKind::Internal,
            start: SystemTime::now(),
            attributes: Vec::with_capacity(metadata.fields().len()),
            dropped_attributes: 0,
            events: Vec::new(),
            dropped_events: 0,
            status: Status::Unset,
            status_description: None,
        };
        match parent {
            Some((trace_id, span_id, sampled)) => {
                open.trace_id = trace_id;
                open.parent = span_id;
                open.sampled = sampled;
                if sampled {
                    attrs.record(&mut Fields(&mut SpanFields {
                        open: &mut open,
                        limit: self.limits.max_attributes_per_span,
                    }));
                }
            }
            None => {
                open.trace_id = self.ids.new_trace_id();
                attrs.record(&mut Fields(&mut SpanFields {
                    open: &mut open,
                    limit: self.limits.max_attributes_per_span,
                }));
                let decision = self.sampler.should_sample(
                    None,
                    open.trace_id,
                    &open.name,
                    &open.kind,
                    &open.attributes,
                    &[],
                );
                if decision.decision != SamplingDecision::RecordAndSample {
                    open.sampled = false;
                    open.attributes = Vec::new();
                }
            }
        }
        span.extensions_mut().insert(open);
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else { return };
        let mut extensions = span.extensions_mut();
        if let Some(open) = extensions.get_mut::<Open>().filter(|o| o.sampled) {
            values.record(&mut Fields(&mut SpanFields {
                open,
                limit: self.limits.max_attributes_per_span,
            }));
        }
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        let Some(span) = ctx.event_span(event).and_then(|span| {
            if took(&span) {
                Some(span)
            } else {
                span.scope().skip(1).find(took)
            }
        }) else {
            return;
        };
        if !span.extensions().get::<Open>().is_some_and(|o| o.sampled) {
            return;
        }
        // The fields are formatted with no lock on the span held: formatting a value may itself
        // log into this span.
        let metadata = event.metadata();
        let mut otel_event = OtelEvent::new(
            metadata.name(),
            SystemTime::now(),
            vec![
                KeyValue::new("level", metadata.level().as_str()),
                KeyValue::new("target", metadata.target()),
            ],
            0,
        );
        event.record(&mut Fields(&mut EventFields {
            event: &mut otel_event,
            limit: self.limits.max_attributes_per_event,
        }));
        let mut extensions = span.extensions_mut();
        let Some(open) = extensions.get_mut::<Open>() else {
            return;
        };
        if *metadata.level() == Level::ERROR && open.status == Status::Unset {
            open.status = Status::error("");
        }
        if open.events.len() >= self.limits.max_events_per_span as usize {
            open.dropped_events = open.dropped_events.saturating_add(1);
        } else {
            open.events.push(otel_event);
        }
    }

    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(&id) else { return };
        let Some(open) = span.extensions_mut().remove::<Open>() else {
            return;
        };
        if !open.sampled {
            return;
        }
        let mut events = SpanEvents::default();
        events.events = open.events;
        events.dropped_count = open.dropped_events;
        self.processor.on_end(SpanData {
            span_context: SpanContext::new(
                open.trace_id,
                open.span_id,
                TraceFlags::SAMPLED,
                false,
                TraceState::NONE,
            ),
            parent_span_id: open.parent,
            parent_span_is_remote: false,
            span_kind: open.kind,
            name: open.name,
            start_time: open.start,
            end_time: SystemTime::now(),
            attributes: open.attributes,
            dropped_attributes_count: open.dropped_attributes,
            events,
            links: SpanLinks::default(),
            status: open.status,
            instrumentation_scope: self.scope.clone(),
        });
    }
}

/// Returns the trace id of `span` as 32 hex digits, when it is being exported.
pub fn trace_id(span: &tracing::Span) -> Option<String> {
    span.with_subscriber(|(id, dispatch)| {
        let registry = dispatch.downcast_ref::<tracing_subscriber::Registry>()?;
        let data = registry.span(id)?;
        let extensions = data.extensions();
        let open = extensions.get::<Open>()?;
        open.sampled.then(|| open.trace_id.to_string())
    })
    .flatten()
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;
    use std::time::Duration;

    use opentelemetry::Context as OtelContext;
    use opentelemetry_sdk::error::OTelSdkResult;
    use opentelemetry_sdk::trace::{Sampler, Span as SdkSpan};
    use tracing_subscriber::layer::SubscriberExt as _;

    use super::*;

    /// Collects the spans the layer ends.
    #[derive(Debug, Default)]
    struct Collect(Mutex<Vec<SpanData>>);

    impl SpanProcessor for Collect {
        fn on_start(&self, _span: &mut SdkSpan, _cx: &OtelContext) {}

        fn on_end(&self, span: SpanData) {
            self.0.lock().expect("not poisoned").push(span);
        }

        fn force_flush(&self) -> OTelSdkResult {
            Ok(())
        }

        fn shutdown_with_timeout(&self, _timeout: Duration) -> OTelSdkResult {
            Ok(())
        }
    }

    /// Runs `body` under a subscriber with the layer configured by `config`; returns the
    /// exported spans in the order they ended, and what `body` returned.
    fn traced<T>(config: Config, body: impl FnOnce() -> T) -> (Vec<SpanData>, T) {
        let collect = Arc::new(Collect::default());
        let subscriber = tracing_subscriber::registry()
            .with(SpanLayer::with_config(Arc::clone(&collect), config));
        let out = tracing::subscriber::with_default(subscriber, body);
        let spans = std::mem::take(&mut *collect.0.lock().expect("not poisoned"));
        (spans, out)
    }

    fn attr<'a>(span: &'a SpanData, key: &str) -> Option<&'a Value> {
        span.attributes
            .iter()
            .find(|kv| kv.key.as_str() == key)
            .map(|kv| &kv.value)
    }

    #[derive(Debug)]
    struct Oops;

    impl fmt::Display for Oops {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("oops")
        }
    }

    impl std::error::Error for Oops {}

    #[test]
    fn spans_only_the_log_took_are_skipped_when_finding_a_parent() {
        let collect = Arc::new(Collect::default());
        let subscriber =
            tracing_subscriber::registry().with(crate::telemetry::layer::Outputs::new(
                tracing_subscriber::layer::Identity::new(),
                tracing_subscriber::EnvFilter::new("warn,hyper=info"),
                SpanLayer::with_config(Arc::clone(&collect), Config::default()),
            ));
        tracing::subscriber::with_default(subscriber, || {
            let root = tracing::info_span!("delegation.execute");
            let _root = root.enter();
            // A span of another crate that only the log wanted, between ours.
            let theirs = tracing::info_span!(target: "hyper::client", "theirs");
            let _theirs = theirs.enter();
            tracing::info!("between");
            let _child = tracing::info_span!("gen_ai.chat").entered();
        });
        let spans = std::mem::take(&mut *collect.0.lock().expect("not poisoned"));
        let names: Vec<&str> = spans.iter().map(|s| s.name.as_ref()).collect();
        assert_eq!(names, ["gen_ai.chat", "delegation.execute"]);
        let (child, root) = (&spans[0], &spans[1]);
        assert_eq!(child.parent_span_id, root.span_context.span_id());
        assert_eq!(child.span_context.trace_id(), root.span_context.trace_id());
        let events: Vec<&str> = root.events.iter().map(|e| e.name.as_ref()).collect();
        assert_eq!(
            events,
            ["between"],
            "the event lands on the nearest span of ours"
        );
    }

    #[test]
    fn spans_carry_their_fields_structure_events_and_status() {
        let (spans, trace) = traced(Config::default(), || {
            let root = tracing::info_span!(
                "delegation.execute",
                delegation.id = "d-1",
                attempts = tracing::field::Empty,
                otel.status_code = tracing::field::Empty,
            );
            let trace = trace_id(&root);
            root.in_scope(|| {
                let child = tracing::info_span!(
                    "gen_ai.chat",
                    tokens = 12_u64,
                    huge = u64::MAX,
                    ratio = 0.5,
                    ok = true,
                    debug = ?vec![1, 2],
                    otel.kind = "client",
                );
                child.in_scope(|| {
                    tracing::info!(template.version = "v1", "retry prompt sent");
                    tracing::error!(
                        error = &Oops as &(dyn std::error::Error + 'static),
                        "model call failed"
                    );
                });
                root.record("attempts", 1_i64);
                root.record("attempts", 2_i64);
                root.record("otel.status_code", "ERROR");
            });
            // Outside every span: not exported anywhere.
            tracing::info!("after");
            trace
        });
        assert_eq!(spans.len(), 2, "{spans:?}");
        let (child, root) = (&spans[0], &spans[1]);
        assert_eq!(root.name, "delegation.execute");
        assert_eq!(child.name, "gen_ai.chat");
        assert_eq!(trace, Some(root.span_context.trace_id().to_string()));
        assert_eq!(child.span_context.trace_id(), root.span_context.trace_id());
        assert_eq!(child.parent_span_id, root.span_context.span_id());
        assert_eq!(root.parent_span_id, SpanId::INVALID);
        assert!(root.span_context.is_sampled());
        assert!(root.start_time <= child.start_time && child.end_time <= root.end_time);

        assert_eq!(attr(root, "delegation.id"), Some(&Value::from("d-1")));
        // Recorded twice: one attribute, the last value.
        assert_eq!(attr(root, "attempts"), Some(&Value::I64(2)));
        assert_eq!(
            root.attributes
                .iter()
                .filter(|kv| kv.key.as_str() == "attempts")
                .count(),
            1
        );
        assert!(attr(root, "otel.status_code").is_none());
        assert_eq!(root.status, Status::error(""));

        assert_eq!(child.span_kind, SpanKind::Client);
        assert_eq!(attr(child, "tokens"), Some(&Value::I64(12)));
        assert_eq!(
            attr(child, "huge"),
            Some(&Value::from(u64::MAX.to_string()))
        );
        assert_eq!(attr(child, "ratio"), Some(&Value::F64(0.5)));
        assert_eq!(attr(child, "ok"), Some(&Value::Bool(true)));
        assert_eq!(attr(child, "debug"), Some(&Value::from("[1, 2]")));
        // The error event marked the span as failed.
        assert_eq!(child.status, Status::error(""));
        let names: Vec<&str> = child.events.iter().map(|e| e.name.as_ref()).collect();
        assert_eq!(names, ["retry prompt sent", "model call failed"]);
        let sent = &child.events.events[0];
        let value = |key: &str| {
            sent.attributes
                .iter()
                .find(|kv| kv.key.as_str() == key)
                .map(|kv| kv.value.clone())
        };
        assert_eq!(value("level"), Some(Value::from("INFO")));
        assert_eq!(value("target"), Some(Value::from(module_path!())));
        assert_eq!(value("template.version"), Some(Value::from("v1")));
        let failed = &child.events.events[1];
        assert!(
            failed
                .attributes
                .iter()
                .any(|kv| kv.key.as_str() == "error" && kv.value == Value::from("oops")),
            "{failed:?}"
        );
        assert!(root.events.is_empty(), "{:?}", root.events);
    }

    #[test]
    fn a_status_description_goes_with_an_error_status() {
        let (spans, ()) = traced(Config::default(), || {
            let span = tracing::info_span!(
                "hook.run",
                otel.status_code = tracing::field::Empty,
                otel.status_description = tracing::field::Empty,
                otel.name = "hook.run gate",
            );
            span.record("otel.status_code", "ERROR");
            span.record("otel.status_description", "the hook script failed");
        });
        assert_eq!(spans.len(), 1);
        assert_eq!(spans[0].name, "hook.run gate");
        assert_eq!(spans[0].status, Status::error("the hook script failed"));
    }

    #[test]
    fn a_dropped_trace_exports_nothing_and_has_no_trace_id() {
        let mut config = Config::default();
        config.sampler = Box::new(Sampler::AlwaysOff);
        let (spans, trace) = traced(config, || {
            let root = tracing::info_span!("delegation.execute", delegation.id = "d-2");
            let _entered = root.enter();
            let child = tracing::info_span!("delegation.attempt");
            child.in_scope(|| tracing::info!("retry prompt sent"));
            trace_id(&root)
        });
        assert!(spans.is_empty(), "{spans:?}");
        assert_eq!(trace, None);
    }

    #[test]
    fn the_sampler_decides_once_per_trace() {
        // Half of the traces by id: each trace is exported whole or not at all.
        let mut config = Config::default();
        config.sampler = Box::new(Sampler::TraceIdRatioBased(0.5));
        let (spans, ()) = traced(config, || {
            for _ in 0..200 {
                let root = tracing::info_span!("root");
                root.in_scope(|| {
                    let _a = tracing::info_span!("a").entered();
                    let _b = tracing::info_span!("b").entered();
                });
            }
        });
        let mut per_trace = std::collections::HashMap::new();
        for span in &spans {
            *per_trace.entry(span.span_context.trace_id()).or_insert(0) += 1;
        }
        assert!(per_trace.values().all(|&n| n == 3), "{per_trace:?}");
        assert!(
            (20..=180).contains(&per_trace.len()),
            "{} of 200 traces sampled",
            per_trace.len()
        );
    }

    #[test]
    fn span_limits_drop_and_count_what_does_not_fit() {
        let mut config = Config::default();
        config.span_limits.max_attributes_per_span = 2;
        config.span_limits.max_events_per_span = 1;
        config.span_limits.max_attributes_per_event = 3;
        let (spans, ()) = traced(config, || {
            let span = tracing::info_span!("verify.inline", a = 1, b = 2, c = 3, d = 4);
            span.in_scope(|| {
                tracing::info!(x = 1, y = 2, "first line");
                tracing::info!("second line");
                tracing::info!("third line");
            });
        });
        let span = &spans[0];
        assert_eq!(span.attributes.len(), 2);
        assert_eq!(span.dropped_attributes_count, 2);
        assert_eq!(span.events.len(), 1);
        assert_eq!(span.events.dropped_count, 2);
        // level and target count too: one of x and y is dropped.
        assert_eq!(span.events.events[0].attributes.len(), 3);
        assert_eq!(span.events.events[0].dropped_attributes_count, 1);
    }

    /// A value whose formatting logs into the same span (a `Display` that calls `tracing`).
    struct Chatty;

    impl fmt::Display for Chatty {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            tracing::info!("formatting a field");
            f.write_str("chatty")
        }
    }

    #[test]
    fn fields_whose_formatting_logs_do_not_deadlock() {
        let (spans, ()) = traced(Config::default(), || {
            let span = tracing::info_span!("verify.inline", late = tracing::field::Empty);
            span.in_scope(|| {
                tracing::info!(value = %Chatty, "outer line");
                span.record("late", tracing::field::display(Chatty));
            });
        });
        assert_eq!(spans.len(), 1);
        assert_eq!(attr(&spans[0], "late"), Some(&Value::from("chatty")));
        // tracing drops an event logged while another is being dispatched; the outer one stays.
        let names: Vec<&str> = spans[0].events.iter().map(|e| e.name.as_ref()).collect();
        assert!(names.contains(&"outer line"), "{names:?}");
    }
}
