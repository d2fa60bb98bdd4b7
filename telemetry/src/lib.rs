//! Telemetry for the `harness` binary: the `tracing` subscriber, OpenTelemetry traces and
//! metrics exported over OTLP, and W3C trace-context propagation.
//!
//! The stack is the standard one: `tracing` spans → `tracing-opentelemetry` → the
//! `opentelemetry_sdk` batch span processor → `opentelemetry-otlp` (HTTP/protobuf or gRPC); metrics
//! go through the SDK's periodic reader to the same collector. A stderr log layer is always
//! installed, filtered by `HARNESS_LOG` (default `warn`).
//!
//! Configuration is the standard `OTEL_*` environment (`OTEL_EXPORTER_OTLP_ENDPOINT`,
//! `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`, `OTEL_EXPORTER_OTLP_PROTOCOL` = `http/protobuf` (default)
//! or `grpc`, `OTEL_EXPORTER_OTLP_HEADERS`, `OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`,
//! `OTEL_TRACES_SAMPLER`, `OTEL_TRACES_SAMPLER_ARG`) plus `--otlp-endpoint URL`. Nothing set means
//! nothing exported. Exports happen on background threads and are never retried; a collector
//! that refuses the connection is reported once on stderr and not tried again by this process,
//! so one that is down costs a run well under a millisecond per export. A slow one: each export
//! gives up after [`EXPORT_TIMEOUT`], and flushing at exit waits at most [`SHUTDOWN_BUDGET`], so
//! it never fails a delegation and delays exit by at most that long.
//!
//! The W3C `traceparent` of a caller (the `TRACEPARENT` variable, see [`parent_from_env`]) is
//! handed to the runtime, which makes it the parent of each delegation's root span and passes the
//! current context on to model servers and agent CLIs through the global propagator installed
//! here.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod export;

use std::time::Duration;

use opentelemetry::propagation::TextMapPropagator as _;
use opentelemetry::trace::{TraceContextExt as _, TracerProvider as _};
use opentelemetry_sdk::metrics::SdkMeterProvider;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing::{Level, Metadata};
use tracing_opentelemetry::OpenTelemetrySpanExt as _;
use tracing_subscriber::filter::FilterFn;
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;
use tracing_subscriber::{EnvFilter, Layer as _};

/// How long one export may take before it is abandoned.
pub const EXPORT_TIMEOUT: Duration = Duration::from_secs(3);
/// How long the process waits at exit for the last spans and metrics to leave.
pub const SHUTDOWN_BUDGET: Duration = Duration::from_secs(5);

/// The variable a parent process sets to continue its trace (W3C `traceparent` format).
pub const TRACEPARENT: &str = "TRACEPARENT";

/// The installed exporters; [`Telemetry::shutdown`] flushes them.
#[derive(Default)]
pub struct Telemetry {
    traces: Option<SdkTracerProvider>,
    meter: Option<SdkMeterProvider>,
}

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

/// Whether a span or event is exported: the harness crates' own, `DEBUG` and up. Never the HTTP
/// or gRPC stack's own, which would also trace the exporter itself.
fn exported(metadata: &Metadata<'_>) -> bool {
    *metadata.level() <= Level::DEBUG && metadata.target().starts_with("harness")
}

/// Whether to colour what goes to a stream that `is_terminal` or not: `CLICOLOR_FORCE` (set,
/// not `0`) forces colour, `NO_COLOR` (set, not empty) turns it off, else only a terminal gets
/// it — never a file, a pipe or a log collector.
pub fn colour(is_terminal: bool) -> bool {
    let set = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
    if set("CLICOLOR_FORCE").is_some_and(|v| v != "0") {
        return true;
    }
    set("NO_COLOR").is_none() && is_terminal
}

/// Installs logging, the W3C trace-context propagator and, when an OTLP endpoint is configured,
/// the exporters. Must be called inside the Tokio runtime (the exporters send through it).
/// Problems with the telemetry configuration are warnings on stderr: they never stop a
/// delegation.
pub fn init(flag_endpoint: Option<&str>) -> Telemetry {
    opentelemetry::global::set_text_map_propagator(TraceContextPropagator::new());
    let log_filter =
        EnvFilter::try_from_env("HARNESS_LOG").unwrap_or_else(|_| EnvFilter::new("warn"));
    let log = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(colour(std::io::IsTerminal::is_terminal(&std::io::stderr())))
        .with_filter(log_filter);

    let exporters = export::Exporters::from_env(flag_endpoint);
    let mut telemetry = Telemetry::default();
    if let Some(exporter) = exporters.metrics {
        let provider = SdkMeterProvider::builder()
            .with_periodic_exporter(exporter)
            .with_resource(exporters.resource.clone())
            .build();
        opentelemetry::global::set_meter_provider(provider.clone());
        telemetry.meter = Some(provider);
    }
    let Some(exporter) = exporters.spans else {
        let _ = tracing_subscriber::registry().with(log).try_init();
        return telemetry;
    };
    let provider = SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(exporters.resource)
        .build();
    // Code locations, thread names and busy/idle times are noise on every span of an SRE's trace;
    // the target is always a harness crate.
    let spans = tracing_opentelemetry::layer()
        .with_tracer(provider.tracer("harness"))
        .with_location(false)
        .with_threads(false)
        .with_tracked_inactivity(false)
        .with_target(false)
        .with_filter(FilterFn::new(exported));
    telemetry.traces = Some(provider);
    let _ = tracing_subscriber::registry()
        .with(log)
        .with(spans)
        .try_init();
    telemetry
}

impl Telemetry {
    /// Flushes and stops the exporters, waiting at most [`SHUTDOWN_BUDGET`]. Blocks: call it from
    /// `spawn_blocking` when inside the runtime.
    pub fn shutdown(self) {
        if self.traces.is_none() && self.meter.is_none() {
            return;
        }
        let (done, wait) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            if let Some(traces) = self.traces {
                let _ = traces.shutdown_with_timeout(SHUTDOWN_BUDGET);
            }
            if let Some(meter) = self.meter {
                let _ = meter.shutdown_with_timeout(SHUTDOWN_BUDGET);
            }
            let _ = done.send(());
        });
        if wait.recv_timeout(SHUTDOWN_BUDGET).is_err() {
            eprintln!(
                "warning: telemetry was not flushed within {}s; some spans may be lost",
                SHUTDOWN_BUDGET.as_secs()
            );
        }
    }
}

/// Checks an `--otlp-endpoint` value: an `http://` or `https://` base URL with a host, such as
/// `http://localhost:4318` (OTLP/HTTP) or `http://localhost:4317` (gRPC). Returns it unchanged.
///
/// # Errors
/// What is wrong and an example of a valid value.
pub fn check_endpoint(value: &str) -> Result<String, String> {
    const EXAMPLE: &str =
        "give a base URL such as http://localhost:4318 (OTLP/HTTP) or http://localhost:4317 (gRPC)";
    let uri: http::Uri = value
        .parse()
        .map_err(|e| format!("{value:?} is not a URL ({e}); {EXAMPLE}"))?;
    match uri.scheme_str() {
        Some("http" | "https") => {}
        Some(other) => {
            return Err(format!(
                "{value:?}: OTLP is sent over http or https, not {other}; {EXAMPLE}"
            ));
        }
        None => return Err(format!("{value:?} has no http:// or https://; {EXAMPLE}")),
    }
    if uri.host().is_none_or(str::is_empty) {
        return Err(format!("{value:?} has no host; {EXAMPLE}"));
    }
    if uri.query().is_some() {
        return Err(format!(
            "{value:?}: a base URL takes no query (the signal path, e.g. /v1/traces, is appended); {EXAMPLE}"
        ));
    }
    Ok(value.to_owned())
}

/// The trace id of `span` as 32 hex digits, when its trace is exported (recorded and sampled).
pub fn trace_id(span: &tracing::Span) -> Option<String> {
    if span.is_disabled() {
        return None;
    }
    let context = span.context();
    let span = context.span();
    let span = span.span_context();
    (span.is_valid() && span.is_sampled()).then(|| span.trace_id().to_string())
}

/// The trace link from `HARNESS_TRACE_URL` (e.g. `http://localhost:16686/trace/{trace_id}`),
/// when set.
pub fn trace_url(trace_id: &str) -> Option<String> {
    env("HARNESS_TRACE_URL").map(|template| template.replace("{trace_id}", trace_id))
}

/// The caller's trace context from [`TRACEPARENT`] (and `TRACESTATE`), checked: a value that is
/// not a valid W3C `traceparent` is reported on stderr and ignored, so the run starts a new trace.
pub fn parent_from_env() -> Option<String> {
    let value = env(TRACEPARENT)?;
    match parse_traceparent(&value) {
        Ok(()) => Some(value.trim().to_owned()),
        Err(why) => {
            eprintln!(
                "warning: {TRACEPARENT}={value:?} is not a W3C traceparent ({why}); starting a new trace"
            );
            None
        }
    }
}

/// Checks a `traceparent` value: the W3C shape (the propagator alone would accept short ids),
/// then as the propagator reads it.
fn parse_traceparent(value: &str) -> Result<(), &'static str> {
    const SHAPE: &str =
        "expected 00-<32 hex trace id>-<16 hex span id>-<2 hex flags>, ids not all zero";
    let hex = |part: &str, len: usize| {
        part.len() == len && part.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
    };
    let parts: Vec<&str> = value.trim().split('-').collect();
    let shaped = match parts.as_slice() {
        [version, trace, span, flags, ..] => {
            hex(version, 2)
                && *version != "ff"
                && (parts.len() == 4 || *version != "00")
                && hex(trace, 32)
                && hex(span, 16)
                && hex(flags, 2)
        }
        _ => false,
    };
    if !shaped {
        return Err(SHAPE);
    }
    let carrier = std::collections::HashMap::from([("traceparent".to_owned(), value.to_owned())]);
    let context = TraceContextPropagator::new().extract(&carrier);
    if context.span().span_context().is_valid() {
        Ok(())
    } else {
        Err(SHAPE)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_are_http_base_urls_with_a_host() {
        for good in [
            "http://localhost:4318",
            "https://collector.example.com/otlp",
            "http://[::1]:4317",
        ] {
            assert_eq!(check_endpoint(good).as_deref(), Ok(good));
        }
        for (bad, says) in [
            ("localhost:4318", "no http:// or https://"),
            ("ftp://host", "not ftp"),
            ("http://", "not a URL"),
            ("http://host:4318/?a=b", "no query"),
            ("not a url", "not a URL"),
        ] {
            let error = check_endpoint(bad).expect_err(bad);
            assert!(error.contains(says), "{bad}: {error}");
            assert!(error.contains("http://localhost:4318"), "{error}");
        }
    }

    #[test]
    fn only_valid_traceparents_are_accepted() {
        assert!(
            parse_traceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01").is_ok()
        );
        for bad in [
            "",
            "garbage",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        ] {
            assert!(parse_traceparent(bad).is_err(), "{bad:?} accepted");
        }
    }
}
