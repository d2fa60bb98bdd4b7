//! The one `tracing` layer installed when spans are exported: the stderr log and the span
//! exporter behind a single filter decision.
//!
//! With two layers each behind its own per-layer filter, `tracing-subscriber` looks the span up
//! again in the registry for every filter on every enter, exit, record and close, just to read
//! that filter's verdict. The harness enters its spans every time their futures are polled, so
//! those lookups were most of what the log layer cost a delegation while it logged nothing.
//! This layer decides once per callsite for both outputs (the union of what they want) and
//! routes each callback to the output that wants it, with no per-layer bookkeeping:
//! - the span exporter takes the harness crates' spans and events at `DEBUG` and above, never
//!   the HTTP or gRPC stack's own (which would also trace the exporter itself);
//! - the log takes what `HARNESS_LOG` enables, exactly as it does without export.
//!
//! The one visible difference: a log line from inside an exported span is prefixed with the
//! names of the spans it is in (without their fields, which the log did not record).

use std::sync::atomic::{AtomicBool, Ordering};

use tracing::span::{Attributes, Id, Record};
use tracing::subscriber::Interest;
use tracing::{Event, Level, Metadata, Subscriber};
use tracing_subscriber::EnvFilter;
use tracing_subscriber::Layer;
use tracing_subscriber::filter::LevelFilter;
use tracing_subscriber::layer::Context;
use tracing_subscriber::registry::LookupSpan;

/// The stderr log `log`, filtered by `filter`, and the span exporter `spans`, as one layer.
pub struct Outputs<L, T> {
    log: L,
    filter: EnvFilter,
    spans: T,
    /// Set once the log has taken a span; until then no span needs checking for the log.
    log_has_spans: AtomicBool,
}

/// Marks a span the log layer took.
struct Logged;

impl<L, T> Outputs<L, T> {
    /// `log` is a formatting layer configured without span events (it does nothing on enter,
    /// exit or close); `spans` exports what it is given.
    pub fn new(log: L, filter: EnvFilter, spans: T) -> Self {
        Outputs {
            log,
            filter,
            spans,
            log_has_spans: AtomicBool::new(false),
        }
    }
}

/// Whether the span exporter wants this span or event: the harness crates' own, `DEBUG` and up.
fn exported(metadata: &Metadata<'_>) -> bool {
    *metadata.level() <= Level::DEBUG && metadata.target().starts_with("harness")
}

impl<S, L, T> Layer<S> for Outputs<L, T>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    L: Layer<S>,
    T: Layer<S>,
{
    fn on_layer(&mut self, subscriber: &mut S) {
        self.log.on_layer(subscriber);
        Layer::<S>::on_layer(&mut self.filter, subscriber);
        self.spans.on_layer(subscriber);
    }

    fn register_callsite(&self, metadata: &'static Metadata<'static>) -> Interest {
        if exported(metadata) {
            // Always wanted, whatever the log thinks; the log still checks for itself.
            let _ = Layer::<S>::register_callsite(&self.filter, metadata);
            return Interest::always();
        }
        Layer::<S>::register_callsite(&self.filter, metadata)
    }

    fn enabled(&self, metadata: &Metadata<'_>, ctx: Context<'_, S>) -> bool {
        exported(metadata) || Layer::<S>::enabled(&self.filter, metadata, ctx)
    }

    fn max_level_hint(&self) -> Option<LevelFilter> {
        Layer::<S>::max_level_hint(&self.filter).map(|log| log.max(LevelFilter::DEBUG))
    }

    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        self.filter.on_new_span(attrs, id, ctx.clone());
        let metadata = attrs.metadata();
        if Layer::<S>::enabled(&self.filter, metadata, ctx.clone()) {
            self.log_has_spans.store(true, Ordering::Relaxed);
            if let Some(span) = ctx.span(id) {
                span.extensions_mut().insert(Logged);
            }
            self.log.on_new_span(attrs, id, ctx.clone());
        }
        if exported(metadata) {
            self.spans.on_new_span(attrs, id, ctx);
        }
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        self.filter.on_record(id, values, ctx.clone());
        if self.log_has_spans.load(Ordering::Relaxed)
            && ctx
                .span(id)
                .is_some_and(|span| span.extensions().get::<Logged>().is_some())
        {
            self.log.on_record(id, values, ctx.clone());
        }
        // The exporter skips spans it did not take.
        self.spans.on_record(id, values, ctx);
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        let metadata = event.metadata();
        if Layer::<S>::enabled(&self.filter, metadata, ctx.clone()) {
            self.log.on_event(event, ctx.clone());
        }
        if exported(metadata) {
            self.spans.on_event(event, ctx);
        }
    }

    fn on_enter(&self, id: &Id, ctx: Context<'_, S>) {
        // Only the filter follows entered spans (for `HARNESS_LOG` directives on spans); the log
        // and the exporter do nothing on enter or exit.
        self.filter.on_enter(id, ctx);
    }

    fn on_exit(&self, id: &Id, ctx: Context<'_, S>) {
        self.filter.on_exit(id, ctx);
    }

    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        self.filter.on_close(id.clone(), ctx.clone());
        self.spans.on_close(id, ctx);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use tracing_subscriber::layer::SubscriberExt as _;

    use super::*;

    /// Writes down what reaches it.
    #[derive(Clone, Default)]
    struct Seen(Arc<Mutex<Vec<String>>>);

    impl Seen {
        fn take(&self) -> Vec<String> {
            std::mem::take(&mut *self.0.lock().expect("not poisoned"))
        }

        fn push(&self, what: String) {
            self.0.lock().expect("not poisoned").push(what);
        }
    }

    impl<S> Layer<S> for Seen
    where
        S: Subscriber + for<'a> LookupSpan<'a>,
    {
        fn on_new_span(&self, attrs: &Attributes<'_>, _id: &Id, _ctx: Context<'_, S>) {
            self.push(format!("span {}", attrs.metadata().name()));
        }

        fn on_record(&self, id: &Id, _values: &Record<'_>, ctx: Context<'_, S>) {
            let name = ctx.span(id).map_or("?", |s| s.name());
            self.push(format!("record {name}"));
        }

        fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
            let metadata = event.metadata();
            self.push(format!("event {} {}", metadata.target(), metadata.level()));
        }

        fn on_close(&self, id: Id, ctx: Context<'_, S>) {
            let name = ctx.span(&id).map_or("?", |s| s.name());
            self.push(format!("close {name}"));
        }
    }

    /// Emits the same mix each time: a harness span with a late field and events at three
    /// levels, and a span and event of another crate.
    fn emit() {
        let span = tracing::info_span!(target: "harness::x", "ours", late = tracing::field::Empty);
        {
            let _entered = span.enter();
            span.record("late", 1);
            tracing::debug!(target: "harness::x", "detail");
            tracing::trace!(target: "harness::x", "noise");
            tracing::warn!(target: "harness::x", "careful");
            let other = tracing::info_span!(target: "hyper::proto", "theirs");
            let _inner = other.enter();
            tracing::warn!(target: "hyper::proto", "their warning");
        }
        drop(span);
    }

    /// Runs [`emit`] with the log filtered by `filter`; returns what the log and the exporter
    /// received.
    fn outputs_with(filter: &str) -> (Vec<String>, Vec<String>) {
        let (log, spans) = (Seen::default(), Seen::default());
        let subscriber = tracing_subscriber::registry().with(Outputs::new(
            log.clone(),
            EnvFilter::new(filter),
            spans.clone(),
        ));
        tracing::subscriber::with_default(subscriber, emit);
        (log.take(), spans.take())
    }

    #[test]
    fn each_output_gets_what_it_asked_for_and_nothing_else() {
        let (log, spans) = outputs_with("warn");
        // The log: warnings from anyone, and no spans (at `warn` it takes none).
        assert_eq!(log, ["event harness::x WARN", "event hyper::proto WARN"]);
        // The exporter: the harness span, its record, its events down to DEBUG, and its close.
        // Nobody wanted the `hyper` span, so it was never created.
        assert_eq!(
            spans,
            [
                "span ours",
                "record ours",
                "event harness::x DEBUG",
                "event harness::x WARN",
                "close ours",
            ]
        );
    }

    #[test]
    fn a_log_filter_that_takes_spans_sees_their_records() {
        let (log, spans) = outputs_with("harness=info,hyper=trace");
        assert_eq!(
            log,
            [
                "span ours",
                "record ours",
                "event harness::x WARN",
                "span theirs",
                "event hyper::proto WARN",
            ]
        );
        // The exporter takes the same as before; the `hyper` span exists now (the log wanted it),
        // and its close passes through: the exporter skips spans it never took.
        assert_eq!(
            spans,
            [
                "span ours",
                "record ours",
                "event harness::x DEBUG",
                "event harness::x WARN",
                "close theirs",
                "close ours",
            ]
        );
    }
}
