//! Telemetry for the binary: a stderr log layer always, and, when configured, OpenTelemetry
//! traces and metrics exported over OTLP.
//!
//! Configuration is the standard `OTEL_*` environment (`OTEL_EXPORTER_OTLP_ENDPOINT`,
//! `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`, `OTEL_EXPORTER_OTLP_PROTOCOL` = `http/protobuf` (default)
//! or `grpc`, `OTEL_EXPORTER_OTLP_HEADERS`, `OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`,
//! `OTEL_TRACES_SAMPLER`, `OTEL_TRACES_SAMPLER_ARG`) plus `--otlp-endpoint URL`. Nothing set means
//! nothing exported. Exports happen on background threads; each export gives up after
//! [`EXPORT_TIMEOUT`], and flushing at exit waits at most [`SHUTDOWN_BUDGET`], so a collector that
//! is down or slow never fails a delegation and delays exit by at most that long.

mod layer;
mod otlp;
mod spans;

use std::sync::Arc;
use std::time::Duration;

use opentelemetry_otlp::{MetricExporter, SpanExporter, WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::metrics::SdkMeterProvider;
use opentelemetry_sdk::trace::{BatchSpanProcessor, SpanProcessor as _};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};

/// How long one export may take before it is abandoned.
pub const EXPORT_TIMEOUT: Duration = Duration::from_secs(3);
/// How long the process waits at exit for the last spans and metrics to leave.
pub const SHUTDOWN_BUDGET: Duration = Duration::from_secs(5);

/// The installed exporters; [`Telemetry::shutdown`] flushes them.
#[derive(Default)]
pub struct Telemetry {
    spans: Option<Arc<BatchSpanProcessor>>,
    meter: Option<SdkMeterProvider>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Protocol {
    Grpc,
    HttpProtobuf,
}

/// How the exporters send: tonic's own gRPC channel, or [`RuntimeHttp`].
enum Transport {
    Grpc,
    Http(RuntimeHttp),
}

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

fn resource() -> Resource {
    let named = env("OTEL_SERVICE_NAME").is_some()
        || env("OTEL_RESOURCE_ATTRIBUTES").is_some_and(|a| a.contains("service.name="));
    let builder = Resource::builder();
    if named {
        builder.build()
    } else {
        builder.with_service_name("harness").build()
    }
}

/// Installs logging and, when an OTLP endpoint is configured, the exporters. Problems with the
/// telemetry configuration are warnings: they never stop a delegation.
pub fn init(flag_endpoint: Option<&str>) -> Telemetry {
    let log_filter =
        EnvFilter::try_from_env("HARNESS_LOG").unwrap_or_else(|_| EnvFilter::new("warn"));
    // Without span events: `layer::Outputs` relies on the log doing nothing on enter, exit and
    // close.
    let log = || tracing_subscriber::fmt::layer().with_writer(std::io::stderr);
    let only_log = |log_filter: EnvFilter| {
        let _ = tracing_subscriber::registry()
            .with(log().with_filter(log_filter))
            .try_init();
    };

    let endpoint = flag_endpoint
        .map(str::to_owned)
        .or_else(|| env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"))
        .or_else(|| env("OTEL_EXPORTER_OTLP_ENDPOINT"));
    let Some(endpoint) = endpoint else {
        only_log(log_filter);
        return Telemetry::default();
    };
    let protocol = match env("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
        .or_else(|| env("OTEL_EXPORTER_OTLP_PROTOCOL"))
        .as_deref()
    {
        None | Some("http/protobuf") => Protocol::HttpProtobuf,
        Some("grpc") => Protocol::Grpc,
        Some(other) => {
            eprintln!(
                "warning: OTEL_EXPORTER_OTLP_PROTOCOL={other} is not supported (use grpc or http/protobuf); using http/protobuf"
            );
            Protocol::HttpProtobuf
        }
    };
    let transport = match protocol {
        Protocol::Grpc => Transport::Grpc,
        Protocol::HttpProtobuf => match RuntimeHttp::new() {
            Ok(http) => Transport::Http(http),
            Err(e) => {
                eprintln!("warning: OTLP export disabled: cannot build its HTTP client: {e}");
                only_log(log_filter);
                return Telemetry::default();
            }
        },
    };
    let from_flag = flag_endpoint.is_some();
    let signal_url = |path: &str| -> Option<String> {
        // An endpoint from the flag is a base URL, like OTEL_EXPORTER_OTLP_ENDPOINT; the
        // exporter appends the signal path itself only for the environment variable.
        from_flag.then(|| match protocol {
            Protocol::Grpc => endpoint.clone(),
            Protocol::HttpProtobuf => format!("{}/{path}", endpoint.trim_end_matches('/')),
        })
    };

    let spans: Result<BatchSpanProcessor, String> = match &transport {
        Transport::Grpc => {
            let mut b = SpanExporter::builder()
                .with_tonic()
                .with_timeout(EXPORT_TIMEOUT);
            if let Some(url) = signal_url("v1/traces") {
                b = b.with_endpoint(url);
            }
            b.build()
                .map(|exporter| BatchSpanProcessor::builder(exporter).build())
                .map_err(|e| e.to_string())
        }
        Transport::Http(http) => otlp::traces_url(flag_endpoint)
            .ok_or_else(|| "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is empty".to_owned())
            .and_then(|url| otlp::HttpSpanExporter::new(http.clone(), &url))
            .map(|exporter| BatchSpanProcessor::builder(exporter).build()),
    };
    let metrics = match &transport {
        Transport::Grpc => {
            let mut b = MetricExporter::builder()
                .with_tonic()
                .with_timeout(EXPORT_TIMEOUT);
            if let Some(url) = signal_url("v1/metrics") {
                b = b.with_endpoint(url);
            }
            b.build()
        }
        Transport::Http(http) => {
            let mut b = MetricExporter::builder()
                .with_http()
                .with_http_client(http.clone())
                .with_timeout(EXPORT_TIMEOUT);
            if let Some(url) = signal_url("v1/metrics") {
                b = b.with_endpoint(url);
            }
            b.build()
        }
    };
    let resource = resource();
    let mut telemetry = Telemetry::default();
    let spans = match spans {
        Ok(mut processor) => {
            processor.set_resource(&resource);
            let processor = Arc::new(processor);
            telemetry.spans = Some(Arc::clone(&processor));
            Some(spans::SpanLayer::new(processor))
        }
        Err(e) => {
            eprintln!("warning: OTLP trace export disabled: {e}");
            None
        }
    };
    match metrics {
        Ok(exporter) => {
            let provider = SdkMeterProvider::builder()
                .with_periodic_exporter(exporter)
                .with_resource(resource)
                .build();
            opentelemetry::global::set_meter_provider(provider.clone());
            telemetry.meter = Some(provider);
        }
        Err(e) => eprintln!("warning: OTLP metric export disabled: {e}"),
    }
    match spans {
        Some(spans) => {
            let _ = tracing_subscriber::registry()
                .with(layer::Outputs::new(log(), log_filter, spans))
                .try_init();
        }
        None => only_log(log_filter),
    }
    telemetry
}

impl Telemetry {
    /// Flushes and stops the exporters, waiting at most [`SHUTDOWN_BUDGET`].
    pub fn shutdown(self) {
        if self.spans.is_none() && self.meter.is_none() {
            return;
        }
        let (done, wait) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            if let Some(spans) = self.spans {
                let _ = spans.shutdown();
            }
            if let Some(meter) = self.meter {
                let _ = meter.shutdown();
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

/// The OTLP/HTTP exporters' client: one async `reqwest` client (with the process's TLS provider)
/// whose requests run on the process's Tokio runtime. The exporters call it from their own
/// background threads (the batch span processor and the periodic metric reader block on each
/// export), so each request is spawned onto the runtime and its result awaited from there; the
/// runtime outlives [`Telemetry::shutdown`], which `main` runs inside it. This replaces the
/// blocking client the exporter would otherwise build per signal, each with its own client, its
/// own single-threaded runtime and thread, and its own copy of the TLS roots.
#[derive(Debug, Clone)]
struct RuntimeHttp {
    client: reqwest::Client,
    runtime: tokio::runtime::Handle,
}

impl RuntimeHttp {
    /// Must be called inside the runtime.
    fn new() -> Result<Self, String> {
        let runtime = tokio::runtime::Handle::try_current().map_err(|e| e.to_string())?;
        let client = harness_builtins::http_client_builder()
            .timeout(EXPORT_TIMEOUT)
            .build()
            .map_err(|e| e.to_string())?;
        Ok(RuntimeHttp { client, runtime })
    }
}

#[async_trait::async_trait]
impl opentelemetry_http::HttpClient for RuntimeHttp {
    async fn send_bytes(
        &self,
        request: http::Request<bytes::Bytes>,
    ) -> Result<http::Response<bytes::Bytes>, opentelemetry_http::HttpError> {
        let client = self.client.clone();
        let sent = self
            .runtime
            .spawn(async move { client.send_bytes(request).await });
        sent.await?
    }
}

pub use spans::trace_id;

/// Returns the trace link from `HARNESS_TRACE_URL` (e.g.
/// `http://localhost:16686/trace/{trace_id}`), when set.
pub fn trace_url(trace_id: &str) -> Option<String> {
    env("HARNESS_TRACE_URL").map(|template| template.replace("{trace_id}", trace_id))
}
