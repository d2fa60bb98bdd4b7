//! The OTLP exporters the environment and `--otlp-endpoint` configure.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use opentelemetry_otlp::{
    MetricExporter, RetryPolicy, SpanExporter, WithExportConfig, WithHttpConfig as _,
    WithTonicConfig as _,
};
use opentelemetry_sdk::Resource;

use crate::{EXPORT_TIMEOUT, env};

/// What [`Exporters::from_env`] built; `None` where that signal is not exported.
pub(crate) struct Exporters {
    pub spans: Option<SpanExporter>,
    pub metrics: Option<MetricExporter>,
    pub resource: Resource,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Protocol {
    Grpc,
    HttpProtobuf,
}

impl Exporters {
    /// Builds the exporters, or none when no endpoint is configured. A configuration the
    /// exporters reject is a warning and that signal is not exported.
    pub fn from_env(flag_endpoint: Option<&str>) -> Self {
        let mut exporters = Exporters {
            spans: None,
            metrics: None,
            resource: resource(),
        };
        let endpoint = flag_endpoint
            .map(str::to_owned)
            .or_else(|| env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"))
            .or_else(|| env("OTEL_EXPORTER_OTLP_ENDPOINT"));
        let Some(endpoint) = endpoint else {
            return exporters;
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
        // An endpoint from the flag is a base URL, like OTEL_EXPORTER_OTLP_ENDPOINT; the exporters
        // append the signal's path themselves only to the environment variable.
        let from_flag = flag_endpoint.is_some();
        let signal_url = |path: &str| -> Option<String> {
            from_flag.then(|| match protocol {
                Protocol::Grpc => endpoint.clone(),
                Protocol::HttpProtobuf => format!("{}/{path}", endpoint.trim_end_matches('/')),
            })
        };
        // One client for both signals; gRPC has tonic's own channel.
        let http = match protocol {
            Protocol::Grpc => None,
            Protocol::HttpProtobuf => match RuntimeHttp::new() {
                Ok(http) => Some(http),
                Err(e) => {
                    eprintln!("warning: OTLP export disabled: {e}");
                    return exporters;
                }
            },
        };
        // No retries: a collector that is down or refuses must cost a run nothing (the
        // exporters' own policy backs off for about 1.6 s before giving up on each export).
        let spans = match &http {
            None => configured(
                SpanExporter::builder()
                    .with_tonic()
                    .with_retry_policy(RetryPolicy::disabled()),
                signal_url("v1/traces"),
            )
            .build(),
            Some(http) => configured(
                SpanExporter::builder()
                    .with_http()
                    .with_http_client(http.clone())
                    .with_retry_policy(RetryPolicy::disabled()),
                signal_url("v1/traces"),
            )
            .build(),
        };
        let metrics = match &http {
            None => configured(
                MetricExporter::builder()
                    .with_tonic()
                    .with_retry_policy(RetryPolicy::disabled()),
                signal_url("v1/metrics"),
            )
            .build(),
            Some(http) => configured(
                MetricExporter::builder()
                    .with_http()
                    .with_http_client(http.clone())
                    .with_retry_policy(RetryPolicy::disabled()),
                signal_url("v1/metrics"),
            )
            .build(),
        };
        match spans {
            Ok(spans) => exporters.spans = Some(spans),
            Err(e) => eprintln!("warning: OTLP trace export disabled: {e}"),
        }
        match metrics {
            Ok(metrics) => exporters.metrics = Some(metrics),
            Err(e) => eprintln!("warning: OTLP metric export disabled: {e}"),
        }
        exporters
    }
}

/// An exporter builder with the export timeout and, when the flag gave one, the signal's URL
/// (otherwise the exporter reads the `OTEL_EXPORTER_OTLP_*` variables itself).
fn configured<B: WithExportConfig>(builder: B, url: Option<String>) -> B {
    let builder = builder.with_timeout(EXPORT_TIMEOUT);
    match url {
        Some(url) => builder.with_endpoint(url),
        None => builder,
    }
}

/// The resource: what `OTEL_SERVICE_NAME` and `OTEL_RESOURCE_ATTRIBUTES` say, with the service
/// named `harness` unless they name it.
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

/// The OTLP/HTTP exporters' client: one async `reqwest` client (with the process's TLS provider)
/// whose requests run on the process's Tokio runtime. The exporters call it from their own
/// background threads (the batch span processor and the periodic metric reader block on each
/// export), so each request is spawned onto the runtime and its result awaited from there; the
/// runtime outlives [`crate::Telemetry::shutdown`], which `main` runs inside it. This replaces
/// the blocking client the exporter would otherwise build per signal, each with its own client,
/// its own single-threaded runtime and thread, and its own copy of the TLS roots.
///
/// A collector that refuses the connection is taken as down for the rest of the process: it is
/// reported once on stderr and later exports fail at once, without touching the network. Any
/// other failure (an error status, a timeout) is reported once too.
#[derive(Debug, Clone)]
struct RuntimeHttp {
    client: reqwest::Client,
    runtime: tokio::runtime::Handle,
    /// The collector refused a connection.
    down: Arc<AtomicBool>,
    /// A failure has been reported on stderr.
    reported: Arc<AtomicBool>,
}

impl RuntimeHttp {
    /// Must be called inside the runtime.
    fn new() -> Result<Self, String> {
        let runtime = tokio::runtime::Handle::try_current()
            .map_err(|e| format!("cannot build its HTTP client: {e}"))?;
        let client = harness_builtins::http_client_builder()
            .timeout(EXPORT_TIMEOUT)
            .build()
            .map_err(|e| format!("cannot build its HTTP client: {e}"))?;
        Ok(RuntimeHttp {
            client,
            runtime,
            down: Arc::new(AtomicBool::new(false)),
            reported: Arc::new(AtomicBool::new(false)),
        })
    }

    /// Says once on stderr that telemetry is being lost, and why.
    fn report(&self, why: &str) {
        if !self.reported.swap(true, Ordering::Relaxed) {
            eprintln!(
                "warning: OTLP export failed: {why}; spans and metrics are dropped, the run goes on"
            );
        }
    }
}

#[async_trait::async_trait]
impl opentelemetry_http::HttpClient for RuntimeHttp {
    async fn send_bytes(
        &self,
        request: http::Request<bytes::Bytes>,
    ) -> Result<http::Response<bytes::Bytes>, opentelemetry_http::HttpError> {
        if self.down.load(Ordering::Relaxed) {
            return Err("the OTLP collector refused an earlier connection".into());
        }
        let url = request.uri().to_string();
        let client = self.client.clone();
        let sent = self
            .runtime
            .spawn(async move { client.send_bytes(request).await });
        let answer = sent.await?;
        match &answer {
            Err(e) => {
                let refused = e
                    .downcast_ref::<reqwest::Error>()
                    .is_some_and(reqwest::Error::is_connect);
                if refused {
                    self.down.store(true, Ordering::Relaxed);
                    self.report(&format!("the collector at {url} refused the connection"));
                } else {
                    self.report(&format!("{url}: {e}"));
                }
            }
            Ok(response) if !response.status().is_success() => {
                self.report(&format!(
                    "the collector at {url} answered {}",
                    response.status()
                ));
            }
            Ok(_) => {}
        }
        answer
    }
}
