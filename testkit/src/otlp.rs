//! An OTLP receiver on 127.0.0.1 for tests: HTTP/protobuf (axum, `/v1/traces` and
//! `/v1/metrics`) or gRPC (tonic), decoding the real protobuf types of `opentelemetry-proto`,
//! and helpers to read what arrived — spans as a navigable [`Trace`], attributes, events,
//! status, counters and histograms.
//!
//! ```no_run
//! use harness_testkit::otlp::{Protocol, Receiver};
//!
//! let receiver = Receiver::start(Protocol::Http);
//! // run something with `--otlp-endpoint receiver.endpoint()`, then:
//! let collected = receiver.wait_until("a root span", |c| c.has_span("invoke_agent scripted"));
//! assert!(!collected.spans.is_empty());
//! ```
//!
//! Waiting is on a condition variable with a deadline ([`DEADLINE`]), never a fixed sleep.

use std::net::SocketAddr;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

pub use opentelemetry_proto::tonic as proto;
use prost::Message as _;
use proto::collector::metrics::v1::metrics_service_server::{MetricsService, MetricsServiceServer};
use proto::collector::metrics::v1::{ExportMetricsServiceRequest, ExportMetricsServiceResponse};
use proto::collector::trace::v1::trace_service_server::{TraceService, TraceServiceServer};
use proto::collector::trace::v1::{ExportTraceServiceRequest, ExportTraceServiceResponse};
use proto::common::v1::{KeyValue, any_value};
use proto::metrics::v1::{HistogramDataPoint, Metric, NumberDataPoint, metric, number_data_point};
use proto::trace::v1::{Span, span, status};

/// How long [`Receiver::wait_until`] waits for exported data (a deadline, not an expectation).
pub const DEADLINE: Duration = Duration::from_secs(60);

/// Everything a receiver got.
#[derive(Debug, Clone, Default)]
pub struct Collected {
    /// Every span, in arrival order.
    pub spans: Vec<Span>,
    /// The resource attributes of every span export.
    pub resources: Vec<Vec<KeyValue>>,
    /// Every metric, in arrival order (cumulative: the last one of a name is the total).
    pub metrics: Vec<Metric>,
    /// Bodies that did not decode.
    pub errors: Vec<String>,
}

impl Collected {
    /// Whether a span named `name` arrived.
    pub fn has_span(&self, name: &str) -> bool {
        self.span(name).is_some()
    }

    /// The first span named `name` that arrived.
    pub fn span(&self, name: &str) -> Option<&Span> {
        self.spans.iter().find(|s| s.name == name)
    }

    /// Whether every metric of `names` arrived.
    pub fn has_metrics(&self, names: &[&str]) -> bool {
        names
            .iter()
            .all(|name| self.metrics.iter().any(|m| m.name == *name))
    }

    /// The last export of the metric `name`.
    ///
    /// # Panics
    /// When none arrived.
    pub fn metric(&self, name: &str) -> &Metric {
        self.metrics
            .iter()
            .rev()
            .find(|m| m.name == name)
            .unwrap_or_else(|| panic!("no metric {name} was received"))
    }
}

/// What the receiver's handlers share with the test.
#[derive(Clone, Default)]
struct Store {
    inner: Arc<(Mutex<Collected>, Condvar)>,
}

impl Store {
    fn update(&self, f: impl FnOnce(&mut Collected)) {
        let (lock, arrived) = &*self.inner;
        f(&mut lock.lock().expect("the store lock"));
        arrived.notify_all();
    }

    fn traces(&self, request: ExportTraceServiceRequest) {
        self.update(|c| {
            for resource_spans in request.resource_spans {
                c.resources.push(
                    resource_spans
                        .resource
                        .map(|r| r.attributes)
                        .unwrap_or_default(),
                );
                for scope_spans in resource_spans.scope_spans {
                    c.spans.extend(scope_spans.spans);
                }
            }
        });
    }

    fn metrics(&self, request: ExportMetricsServiceRequest) {
        self.update(|c| {
            for resource_metrics in request.resource_metrics {
                for scope_metrics in resource_metrics.scope_metrics {
                    c.metrics.extend(scope_metrics.metrics);
                }
            }
        });
    }

    /// Waits (on a condition variable, up to [`DEADLINE`]) until `ready` holds for what arrived,
    /// and returns a copy of it.
    fn wait_until(&self, what: &str, ready: impl Fn(&Collected) -> bool) -> Collected {
        let deadline = Instant::now() + DEADLINE;
        let (lock, arrived) = &*self.inner;
        let mut collected = lock.lock().expect("the store lock");
        loop {
            assert!(
                collected.errors.is_empty(),
                "the receiver got bodies it could not decode: {:?}",
                collected.errors
            );
            if ready(&collected) {
                return collected.clone();
            }
            let left = deadline.saturating_duration_since(Instant::now());
            assert!(
                !left.is_zero(),
                "gave up waiting for {what}; received spans {:?} and metrics {:?}",
                collected.spans.iter().map(|s| &s.name).collect::<Vec<_>>(),
                collected
                    .metrics
                    .iter()
                    .map(|m| &m.name)
                    .collect::<Vec<_>>(),
            );
            collected = arrived
                .wait_timeout(collected, left)
                .expect("the store lock")
                .0;
        }
    }
}

/// How a [`Receiver`] listens.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    /// OTLP/HTTP with protobuf bodies.
    Http,
    /// OTLP/gRPC.
    Grpc,
}

/// An OTLP receiver on 127.0.0.1. It lives until the test process exits.
pub struct Receiver {
    store: Store,
    addr: SocketAddr,
    protocol: Protocol,
}

impl Receiver {
    /// Binds a free port and starts serving `protocol` on a thread of its own.
    pub fn start(protocol: Protocol) -> Self {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1");
        listener
            .set_nonblocking(true)
            .expect("a non-blocking listener");
        let addr = listener.local_addr().expect("local address");
        let store = Store::default();
        let served = store.clone();
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a runtime for the receiver");
            runtime.block_on(async move {
                let listener =
                    tokio::net::TcpListener::from_std(listener).expect("a tokio listener");
                match protocol {
                    Protocol::Http => serve_http(listener, served).await,
                    Protocol::Grpc => serve_grpc(listener, served).await,
                }
            });
        });
        Receiver {
            store,
            addr,
            protocol,
        }
    }

    /// The base URL to give `--otlp-endpoint`.
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// How it listens.
    pub fn protocol(&self) -> Protocol {
        self.protocol
    }

    /// Waits (up to [`DEADLINE`]) until `ready` holds for what arrived, and returns a copy of it.
    ///
    /// # Panics
    /// At the deadline, naming `what` and what did arrive; or when a body did not decode.
    pub fn wait_until(&self, what: &str, ready: impl Fn(&Collected) -> bool) -> Collected {
        self.store.wait_until(what, ready)
    }
}

async fn serve_http(listener: tokio::net::TcpListener, store: Store) {
    use axum::body::Bytes;
    use axum::extract::State;
    use axum::http::{StatusCode, header};
    use axum::response::{IntoResponse, Response};
    use axum::routing::post;

    fn protobuf(message: &impl prost::Message) -> Response {
        (
            [(header::CONTENT_TYPE, "application/x-protobuf")],
            message.encode_to_vec(),
        )
            .into_response()
    }
    fn undecodable(store: &Store, what: &str, e: &prost::DecodeError) -> Response {
        let message = format!("{what}: {e}");
        store.update(|c| c.errors.push(message.clone()));
        (StatusCode::BAD_REQUEST, message).into_response()
    }
    async fn traces(State(store): State<Store>, body: Bytes) -> Response {
        match ExportTraceServiceRequest::decode(body) {
            Ok(request) => {
                store.traces(request);
                protobuf(&ExportTraceServiceResponse::default())
            }
            Err(e) => undecodable(&store, "/v1/traces", &e),
        }
    }
    async fn metrics(State(store): State<Store>, body: Bytes) -> Response {
        match ExportMetricsServiceRequest::decode(body) {
            Ok(request) => {
                store.metrics(request);
                protobuf(&ExportMetricsServiceResponse::default())
            }
            Err(e) => undecodable(&store, "/v1/metrics", &e),
        }
    }

    let app = axum::Router::new()
        .route("/v1/traces", post(traces))
        .route("/v1/metrics", post(metrics))
        .with_state(store);
    axum::serve(listener, app)
        .await
        .expect("the OTLP/HTTP receiver runs");
}

struct GrpcTraces(Store);
struct GrpcMetrics(Store);

#[tonic::async_trait]
impl TraceService for GrpcTraces {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        self.0.traces(request.into_inner());
        Ok(tonic::Response::new(ExportTraceServiceResponse::default()))
    }
}

#[tonic::async_trait]
impl MetricsService for GrpcMetrics {
    async fn export(
        &self,
        request: tonic::Request<ExportMetricsServiceRequest>,
    ) -> Result<tonic::Response<ExportMetricsServiceResponse>, tonic::Status> {
        self.0.metrics(request.into_inner());
        Ok(tonic::Response::new(ExportMetricsServiceResponse::default()))
    }
}

async fn serve_grpc(listener: tokio::net::TcpListener, store: Store) {
    tonic::transport::Server::builder()
        .add_service(TraceServiceServer::new(GrpcTraces(store.clone())))
        .add_service(MetricsServiceServer::new(GrpcMetrics(store)))
        .serve_with_incoming(tonic::transport::server::TcpIncoming::from(listener))
        .await
        .expect("the OTLP/gRPC receiver runs");
}

// Reading spans and metrics.

/// The value of attribute `key`.
pub fn attr<'a>(attributes: &'a [KeyValue], key: &str) -> Option<&'a any_value::Value> {
    attributes
        .iter()
        .find(|kv| kv.key == key)
        .and_then(|kv| kv.value.as_ref())
        .and_then(|v| v.value.as_ref())
}

/// Shows attributes compactly in assertion messages.
pub fn show(attributes: &[KeyValue]) -> String {
    let pairs: Vec<String> = attributes
        .iter()
        .map(|kv| {
            let value = kv.value.as_ref().and_then(|v| v.value.as_ref());
            format!("{}={value:?}", kv.key)
        })
        .collect();
    format!("{{{}}}", pairs.join(", "))
}

/// Attribute `key` as the type `pick` takes.
#[track_caller]
fn typed<'a, T>(
    attributes: &'a [KeyValue],
    key: &str,
    kind: &str,
    pick: impl FnOnce(&'a any_value::Value) -> Option<T>,
) -> T {
    let value = attr(attributes, key);
    value.and_then(pick).unwrap_or_else(|| {
        panic!(
            "attribute {key} is not {kind} ({value:?}) in {}",
            show(attributes)
        )
    })
}

/// The string attribute `key`.
///
/// # Panics
/// When it is missing or not a string.
#[track_caller]
pub fn text<'a>(attributes: &'a [KeyValue], key: &str) -> &'a str {
    typed(attributes, key, "a string", |v| match v {
        any_value::Value::StringValue(s) => Some(s.as_str()),
        _ => None,
    })
}

/// The integer attribute `key`.
///
/// # Panics
/// When it is missing or not an integer.
#[track_caller]
pub fn int(attributes: &[KeyValue], key: &str) -> i64 {
    typed(attributes, key, "an integer", |v| match v {
        any_value::Value::IntValue(i) => Some(*i),
        _ => None,
    })
}

/// The boolean attribute `key`.
///
/// # Panics
/// When it is missing or not a boolean.
#[track_caller]
pub fn boolean(attributes: &[KeyValue], key: &str) -> bool {
    typed(attributes, key, "a boolean", |v| match v {
        any_value::Value::BoolValue(b) => Some(*b),
        _ => None,
    })
}

/// Bytes (a trace or span id) as lowercase hex.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Spans, navigable by parent.
pub struct Trace {
    /// Every span of the trace.
    pub spans: Vec<Span>,
}

impl Trace {
    /// Spans named `name`, by start time.
    pub fn named(&self, name: &str) -> Vec<&Span> {
        let mut found: Vec<&Span> = self.spans.iter().filter(|s| s.name == name).collect();
        found.sort_by_key(|s| s.start_time_unix_nano);
        found
    }

    /// The direct children of `parent` named `name`, by start time.
    pub fn children(&self, parent: &Span, name: &str) -> Vec<&Span> {
        let mut found: Vec<&Span> = self
            .spans
            .iter()
            .filter(|s| s.name == name && s.parent_span_id == parent.span_id)
            .collect();
        found.sort_by_key(|s| s.start_time_unix_nano);
        found
    }

    /// The spans named `name` under `attempt`'s pipeline stage `stage` (its one
    /// `harness.stage {stage}` span, which says its stage in `harness.stage.name`), by start
    /// time.
    ///
    /// # Panics
    /// When the attempt has no such stage span, or more than one.
    pub fn in_stage(&self, attempt: &Span, stage: &str, name: &str) -> Vec<&Span> {
        let spans = self.children(attempt, &format!("harness.stage {stage}"));
        let [span] = spans.as_slice() else {
            panic!(
                "{} `harness.stage {stage}` spans under the attempt; its children are {:?}",
                spans.len(),
                self.spans
                    .iter()
                    .filter(|s| s.parent_span_id == attempt.span_id)
                    .map(|s| s.name.as_str())
                    .collect::<Vec<_>>()
            );
        };
        assert!(
            matches!(attr(&span.attributes, "harness.stage.name"), Some(any_value::Value::StringValue(s)) if s == stage),
            "the span does not say its stage: {span:?}"
        );
        self.children(span, name)
    }

    /// The parent of `span`, when it is in the trace.
    pub fn parent(&self, span: &Span) -> Option<&Span> {
        self.spans.iter().find(|p| p.span_id == span.parent_span_id)
    }

    /// True when `ancestor` is above `span`.
    pub fn descends_from(&self, span: &Span, ancestor: &Span) -> bool {
        let mut at = span;
        while let Some(parent) = self.parent(at) {
            if parent.span_id == ancestor.span_id {
                return true;
            }
            at = parent;
        }
        false
    }

    /// The spans named `name` anywhere below `ancestor`, by start time.
    pub fn below(&self, ancestor: &Span, name: &str) -> Vec<&Span> {
        self.named(name)
            .into_iter()
            .filter(|s| self.descends_from(s, ancestor))
            .collect()
    }

    /// The names of all its spans.
    pub fn names(&self) -> Vec<&str> {
        self.spans.iter().map(|s| s.name.as_str()).collect()
    }
}

/// The events of `span` named `name`.
pub fn events<'a>(span: &'a Span, name: &str) -> Vec<&'a span::Event> {
    span.events.iter().filter(|e| e.name == name).collect()
}

/// Whether the span's status is an error.
pub fn is_error(span: &Span) -> bool {
    span.status
        .as_ref()
        .is_some_and(|s| s.code == status::StatusCode::Error as i32)
}

/// The number data points of a counter.
///
/// # Panics
/// When the metric is not a sum.
pub fn sum_points(metric: &Metric) -> &[NumberDataPoint] {
    match &metric.data {
        Some(metric::Data::Sum(sum)) => &sum.data_points,
        other => panic!("{} is not a sum: {other:?}", metric.name),
    }
}

/// The data points of a histogram.
///
/// # Panics
/// When the metric is not a histogram.
pub fn histogram_points(metric: &Metric) -> &[HistogramDataPoint] {
    match &metric.data {
        Some(metric::Data::Histogram(h)) => &h.data_points,
        other => panic!("{} is not a histogram: {other:?}", metric.name),
    }
}

/// True when `attributes` holds every `(key, string value)` of `want`.
pub fn matches(attributes: &[KeyValue], want: &[(&str, &str)]) -> bool {
    want.iter().all(|(key, value)| {
        matches!(attr(attributes, key), Some(any_value::Value::StringValue(s)) if s == value)
    })
}

/// The value of the counter data point with attributes `want`.
///
/// # Panics
/// When there is no such point or it is not an integer.
#[track_caller]
pub fn counter(collected: &Collected, name: &str, want: &[(&str, &str)]) -> i64 {
    let metric = collected.metric(name);
    let points = sum_points(metric);
    let point = points
        .iter()
        .find(|p| matches(&p.attributes, want))
        .unwrap_or_else(|| {
            let seen: Vec<String> = points.iter().map(|p| show(&p.attributes)).collect();
            panic!("{name} has no data point with {want:?}; it has {seen:?}")
        });
    match point.value {
        Some(number_data_point::Value::AsInt(n)) => n,
        other => panic!("{name}: not an integer count: {other:?}"),
    }
}

/// The histogram data point of `name` with attributes `want`.
///
/// # Panics
/// When there is no such point.
#[track_caller]
pub fn histogram<'a>(
    collected: &'a Collected,
    name: &str,
    want: &[(&str, &str)],
) -> &'a HistogramDataPoint {
    let points = histogram_points(collected.metric(name));
    points
        .iter()
        .find(|p| matches(&p.attributes, want))
        .unwrap_or_else(|| {
            let seen: Vec<String> = points.iter().map(|p| show(&p.attributes)).collect();
            panic!("{name} has no data point with {want:?}; it has {seen:?}")
        })
}
