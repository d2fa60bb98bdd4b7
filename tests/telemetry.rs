//! OTLP export end to end (DESIGN §4.8): a real OTLP receiver on 127.0.0.1 — HTTP/protobuf
//! (axum) and gRPC (tonic), decoding the real protobuf types of `opentelemetry-proto` — receives
//! what `harness run` exports, and the tests read the story back from it: one trace per
//! delegation, its parent/child structure, every attribute, events and status, and the metrics.
//!
//! The binary flushes before it exits; the tests still wait for the data with a deadline (never a
//! fixed sleep) and assert nothing about time.

use std::net::SocketAddr;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use opentelemetry_proto::tonic::collector::metrics::v1::metrics_service_server::{
    MetricsService, MetricsServiceServer,
};
use opentelemetry_proto::tonic::collector::metrics::v1::{
    ExportMetricsServiceRequest, ExportMetricsServiceResponse,
};
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::{KeyValue, any_value};
use opentelemetry_proto::tonic::metrics::v1::{
    HistogramDataPoint, Metric, NumberDataPoint, metric, number_data_point,
};
use opentelemetry_proto::tonic::trace::v1::{Span, span, status};
use prost::Message as _;
use serde_json::{Value, json};

use crate::util::{Output, TempDir, closed_port, copy_tree, harness, repo_root};

/// How long to wait for exported data to arrive (a deadline, not an expectation).
const DEADLINE: Duration = Duration::from_secs(60);

/// The retry template version every delegation span carries.
const TEMPLATE_VERSION: &str = "retry-v1";

/// The metrics every delegation with hooks produces.
const METRICS: [&str; 4] = [
    "harness.delegations",
    "harness.delegation.verify_attempts",
    "harness.verify.duration",
    "harness.hook.decisions",
];

// ---------------------------------------------------------------------------------------------
// The receiver.

/// Everything a receiver got.
#[derive(Debug, Clone, Default)]
struct Collected {
    /// Every span, in arrival order.
    spans: Vec<Span>,
    /// The resource attributes of every span export.
    resources: Vec<Vec<KeyValue>>,
    /// Every metric, in arrival order (cumulative: the last one of a name is the total).
    metrics: Vec<Metric>,
    /// Bodies that did not decode.
    errors: Vec<String>,
}

impl Collected {
    fn has_span(&self, name: &str) -> bool {
        self.spans.iter().any(|s| s.name == name)
    }

    fn has_metrics(&self, names: &[&str]) -> bool {
        names
            .iter()
            .all(|name| self.metrics.iter().any(|m| m.name == *name))
    }

    /// The last export of the metric `name`.
    fn metric(&self, name: &str) -> &Metric {
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

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Protocol {
    Http,
    Grpc,
}

/// An OTLP receiver on 127.0.0.1. It lives until the test process exits.
struct Receiver {
    store: Store,
    addr: SocketAddr,
    protocol: Protocol,
}

impl Receiver {
    /// Binds a free port and starts serving `protocol` on a thread of its own.
    fn start(protocol: Protocol) -> Self {
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
    fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
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

// ---------------------------------------------------------------------------------------------
// Reading spans and metrics.

fn attr<'a>(attributes: &'a [KeyValue], key: &str) -> Option<&'a any_value::Value> {
    attributes
        .iter()
        .find(|kv| kv.key == key)
        .and_then(|kv| kv.value.as_ref())
        .and_then(|v| v.value.as_ref())
}

/// Shows attributes compactly in assertion messages.
fn show(attributes: &[KeyValue]) -> String {
    let pairs: Vec<String> = attributes
        .iter()
        .map(|kv| {
            let value = kv.value.as_ref().and_then(|v| v.value.as_ref());
            format!("{}={value:?}", kv.key)
        })
        .collect();
    format!("{{{}}}", pairs.join(", "))
}

#[track_caller]
fn text<'a>(attributes: &'a [KeyValue], key: &str) -> &'a str {
    match attr(attributes, key) {
        Some(any_value::Value::StringValue(s)) => s,
        other => panic!(
            "attribute {key} is not a string ({other:?}) in {}",
            show(attributes)
        ),
    }
}

#[track_caller]
fn int(attributes: &[KeyValue], key: &str) -> i64 {
    match attr(attributes, key) {
        Some(any_value::Value::IntValue(i)) => *i,
        other => panic!(
            "attribute {key} is not an integer ({other:?}) in {}",
            show(attributes)
        ),
    }
}

#[track_caller]
fn boolean(attributes: &[KeyValue], key: &str) -> bool {
    match attr(attributes, key) {
        Some(any_value::Value::BoolValue(b)) => *b,
        other => panic!(
            "attribute {key} is not a boolean ({other:?}) in {}",
            show(attributes)
        ),
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The spans of one delegation, navigable by parent.
struct Trace {
    spans: Vec<Span>,
}

impl Trace {
    /// Spans named `name`, by start time.
    fn named(&self, name: &str) -> Vec<&Span> {
        let mut found: Vec<&Span> = self.spans.iter().filter(|s| s.name == name).collect();
        found.sort_by_key(|s| s.start_time_unix_nano);
        found
    }

    /// The direct children of `parent` named `name`, by start time.
    fn children(&self, parent: &Span, name: &str) -> Vec<&Span> {
        let mut found: Vec<&Span> = self
            .spans
            .iter()
            .filter(|s| s.name == name && s.parent_span_id == parent.span_id)
            .collect();
        found.sort_by_key(|s| s.start_time_unix_nano);
        found
    }

    /// The parent of `span`, when it is in the trace.
    fn parent(&self, span: &Span) -> Option<&Span> {
        self.spans.iter().find(|p| p.span_id == span.parent_span_id)
    }

    /// True when `ancestor` is above `span`.
    fn descends_from(&self, span: &Span, ancestor: &Span) -> bool {
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
    fn below(&self, ancestor: &Span, name: &str) -> Vec<&Span> {
        self.named(name)
            .into_iter()
            .filter(|s| self.descends_from(s, ancestor))
            .collect()
    }

    fn names(&self) -> Vec<&str> {
        self.spans.iter().map(|s| s.name.as_str()).collect()
    }
}

fn events<'a>(span: &'a Span, name: &str) -> Vec<&'a span::Event> {
    span.events.iter().filter(|e| e.name == name).collect()
}

fn is_error(span: &Span) -> bool {
    span.status
        .as_ref()
        .is_some_and(|s| s.code == status::StatusCode::Error as i32)
}

/// The number data points of a counter.
fn sum_points(metric: &Metric) -> &[NumberDataPoint] {
    match &metric.data {
        Some(metric::Data::Sum(sum)) => &sum.data_points,
        other => panic!("{} is not a sum: {other:?}", metric.name),
    }
}

/// The data points of a histogram.
fn histogram_points(metric: &Metric) -> &[HistogramDataPoint] {
    match &metric.data {
        Some(metric::Data::Histogram(h)) => &h.data_points,
        other => panic!("{} is not a histogram: {other:?}", metric.name),
    }
}

/// True when `attributes` holds every `(key, string value)` of `want`.
fn matches(attributes: &[KeyValue], want: &[(&str, &str)]) -> bool {
    want.iter().all(|(key, value)| {
        matches!(attr(attributes, key), Some(any_value::Value::StringValue(s)) if s == value)
    })
}

/// The value of the counter data point with attributes `want`.
#[track_caller]
fn counter(collected: &Collected, name: &str, want: &[(&str, &str)]) -> i64 {
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
#[track_caller]
fn histogram<'a>(
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

// ---------------------------------------------------------------------------------------------
// Running delegations.

/// Always lies: claims the file without writing it.
const ALWAYS_LIES: &str = r#"
def respond(request):
    return {"content": "Done, I created hello.txt"}
"#;

/// A copy of `examples/quickstart` (lies once, then writes hello.txt) in a temporary directory.
fn quickstart() -> TempDir {
    let dir = TempDir::new();
    copy_tree(&repo_root().join("examples/quickstart"), &dir.path());
    dir
}

/// The quickstart with a delegate that always lies and one retry.
fn exhausted() -> TempDir {
    let dir = quickstart();
    dir.write("agent.star", ALWAYS_LIES);
    let file = dir.read("delegation.yaml").expect("delegation.yaml");
    let file = file.replace("max_verify_retries: 2", "max_verify_retries: 1");
    assert!(file.contains("max_verify_retries: 1"), "{file}");
    dir.write("delegation.yaml", file);
    dir
}

/// Runs `harness --otlp-endpoint URL run delegation.yaml --json` in `dir` against `receiver`
/// (gRPC through `OTEL_EXPORTER_OTLP_PROTOCOL`), with `env` besides.
fn run_exported(dir: &TempDir, receiver: &Receiver, env: &[(&str, &str)]) -> (Output, Value) {
    let endpoint = receiver.endpoint();
    let mut command = harness([
        "--otlp-endpoint",
        endpoint.as_str(),
        "run",
        "delegation.yaml",
        "--json",
    ])
    .current_dir(dir.path());
    if receiver.protocol == Protocol::Grpc {
        command = command.env("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc");
    }
    for (name, value) in env {
        command = command.env(name, value);
    }
    let out = command.run();
    let report = out.json();
    (out, report)
}

/// Waits until the delegation's root span and `metrics` arrived, then checks that every span
/// belongs to one trace whose id `--json` printed, and returns the trace.
fn collect(receiver: &Receiver, report: &Value, metrics: &[&str]) -> (Trace, Collected) {
    let collected = receiver
        .store
        .wait_until("the delegation's spans and metrics", |c| {
            c.has_span("delegation.execute") && c.has_metrics(metrics)
        });
    let trace_id = report["trace_id"]
        .as_str()
        .unwrap_or_else(|| panic!("--json has no trace_id: {report}"));
    assert_eq!(trace_id.len(), 32, "{trace_id}");
    assert!(
        trace_id.chars().all(|c| c.is_ascii_hexdigit()),
        "{trace_id}"
    );
    for span in &collected.spans {
        assert_eq!(
            hex(&span.trace_id),
            trace_id,
            "span {} is not in the delegation's trace",
            span.name
        );
    }
    let trace = Trace {
        spans: collected.spans.clone(),
    };
    (trace, collected)
}

/// Checks the root span against the `--json` report and returns it.
#[track_caller]
fn root<'a>(trace: &'a Trace, report: &Value) -> &'a Span {
    let roots = trace.named("delegation.execute");
    assert_eq!(roots.len(), 1, "spans: {:?}", trace.names());
    let root = roots[0];
    assert!(
        root.parent_span_id.is_empty(),
        "delegation.execute has a parent"
    );
    let a = &root.attributes;
    assert_eq!(text(a, "delegation.id"), report["id"].as_str().expect("id"));
    assert_eq!(text(a, "delegation.kind"), "scripted");
    assert_eq!(
        int(a, "delegation.verify_attempts"),
        report["attempts"].as_i64().expect("attempts")
    );
    assert_eq!(
        boolean(a, "delegation.verify_passed"),
        report["verified"].as_bool().expect("verified")
    );
    assert_eq!(
        text(a, "delegation.outcome"),
        report["outcome"].as_str().expect("outcome")
    );
    assert_eq!(
        text(a, "delegation.retry_template.version"),
        TEMPLATE_VERSION
    );
    // Every other span hangs under it.
    for span in &trace.spans {
        if span.span_id != root.span_id {
            assert!(
                trace.descends_from(span, root),
                "{} is not under delegation.execute",
                span.name
            );
        }
    }
    root
}

/// The attempt spans under `root`, checked against the report's reasons.
#[track_caller]
fn attempts<'a>(trace: &'a Trace, root: &Span, report: &Value) -> Vec<&'a Span> {
    let mut attempts = trace.children(root, "delegation.attempt");
    // By their index, not their timestamps.
    attempts.sort_by_key(|s| match attr(&s.attributes, "attempt") {
        Some(any_value::Value::IntValue(i)) => *i,
        _ => i64::MAX,
    });
    let reasons = report["reasons"].as_array().expect("reasons");
    assert_eq!(attempts.len(), reasons.len(), "spans: {:?}", trace.names());
    for (index, (span, reasons)) in attempts.iter().zip(reasons).enumerate() {
        let a = &span.attributes;
        assert_eq!(int(a, "attempt"), index as i64);
        let reasons: Vec<&str> = reasons
            .as_array()
            .expect("a list of reasons")
            .iter()
            .map(|r| r.as_str().expect("a reason"))
            .collect();
        assert_eq!(boolean(a, "verify.passed"), reasons.is_empty());
        if reasons.is_empty() {
            assert!(attr(a, "verify.reasons").is_none(), "{}", show(a));
        } else {
            assert_eq!(text(a, "verify.reasons"), reasons.join("\n"));
        }
    }
    attempts
}

/// Checks the retry prompt events: on every attempt but the last of `attempts`, when it failed.
#[track_caller]
fn retry_events(attempts: &[&Span], reasons: &[&str]) {
    for (index, attempt) in attempts.iter().enumerate() {
        let sent = events(attempt, "retry prompt sent");
        let text_events = events(attempt, "retry prompt text");
        if index + 1 == attempts.len() {
            assert!(
                sent.is_empty() && text_events.is_empty(),
                "no retry follows the last attempt"
            );
            continue;
        }
        assert_eq!(sent.len(), 1, "attempt {index}: {:?}", attempt.events);
        assert_eq!(
            text(&sent[0].attributes, "template.version"),
            TEMPLATE_VERSION
        );
        assert_eq!(
            text_events.len(),
            1,
            "attempt {index}: {:?}",
            attempt.events
        );
        let a = &text_events[0].attributes;
        assert_eq!(text(a, "template.version"), TEMPLATE_VERSION);
        let prompt = text(a, "prompt");
        assert!(prompt.contains("VERIFICATION FAILED"), "{prompt}");
        assert!(prompt.contains(reasons[index]), "{prompt}");
    }
}

/// Checks a `gen_ai.chat` span.
#[track_caller]
fn chat(span: &Span) {
    let a = &span.attributes;
    assert_eq!(text(a, "gen_ai.operation.name"), "chat");
    assert_eq!(text(a, "gen_ai.provider.name"), "scripted");
    assert!(!is_error(span));
}

/// Checks a `gen_ai.execute_tool` span.
#[track_caller]
fn tool(span: &Span, name: &str, call_id: &str, failed: bool) {
    let a = &span.attributes;
    assert_eq!(text(a, "gen_ai.operation.name"), "execute_tool");
    assert_eq!(text(a, "gen_ai.tool.name"), name);
    assert_eq!(text(a, "gen_ai.tool.call.id"), call_id);
    assert_eq!(boolean(a, "tool.is_error"), failed);
}

/// Checks a `verify.inline` span.
#[track_caller]
fn inline(span: &Span, reason: Option<&str>) {
    let a = &span.attributes;
    match reason {
        None => {
            assert_eq!(text(a, "verify.outcome"), "passed");
            assert!(attr(a, "verify.reason").is_none(), "{}", show(a));
        }
        Some(reason) => {
            assert_eq!(text(a, "verify.outcome"), "failed");
            assert_eq!(text(a, "verify.reason"), reason);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The tests.

const NO_FILE: &str = "expected file hello.txt does not exist";

/// The quickstart: the lie, the verdict, the retry prompt, the corrective tool call and the
/// acceptance, as one connected trace.
fn lies_then_tells_the_truth(protocol: Protocol) {
    let receiver = Receiver::start(protocol);
    let dir = quickstart();
    let (out, report) = run_exported(&dir, &receiver, &[]);
    out.expect_code(0);
    assert_eq!(report["outcome"], json!("passed"));
    assert_eq!(report["attempts"], json!(2));
    let (trace, collected) = collect(&receiver, &report, &METRICS[..3]);

    let root = root(&trace, &report);
    let a = &root.attributes;
    assert_eq!(text(a, "delegation.verify_outcome"), "passed");
    assert!(attr(a, "error.type").is_none(), "{}", show(a));
    assert!(!is_error(root));

    let attempts = attempts(&trace, root, &report);
    assert_eq!(attempts.len(), 2);
    retry_events(&attempts, &[NO_FILE]);

    // Attempt 1: one model call (the lie), no tool call, the verifier says no.
    let (first, second) = (attempts[0], attempts[1]);
    let calls = trace.children(first, "gen_ai.chat");
    assert_eq!(calls.len(), 1);
    chat(calls[0]);
    assert!(trace.below(first, "gen_ai.execute_tool").is_empty());
    let verify = trace.children(first, "verify.inline");
    assert_eq!(verify.len(), 1);
    inline(verify[0], Some(NO_FILE));

    // Attempt 2: the model asks for write_file, the tool runs, the model answers, the verifier
    // accepts.
    let calls = trace.children(second, "gen_ai.chat");
    assert_eq!(calls.len(), 2);
    calls.iter().for_each(|c| chat(c));
    let tools = trace.children(second, "gen_ai.execute_tool");
    assert_eq!(tools.len(), 1);
    let call_id = report["result"]["tool_calls"][0]["id"]
        .as_str()
        .expect("a tool call id");
    tool(tools[0], "write_file", call_id, false);
    let verify = trace.children(second, "verify.inline");
    assert_eq!(verify.len(), 1);
    inline(verify[0], None);
    assert!(trace.named("hook.run").is_empty());

    // The resource names the service.
    assert!(
        collected
            .resources
            .iter()
            .all(|r| text(r, "service.name") == "harness"),
        "{:?}",
        collected
            .resources
            .iter()
            .map(|r| show(r))
            .collect::<Vec<_>>()
    );

    // Metrics.
    let labels = [
        ("delegation.kind", "scripted"),
        ("delegation.outcome", "passed"),
    ];
    assert_eq!(counter(&collected, "harness.delegations", &labels), 1);
    let attempts = histogram(&collected, "harness.delegation.verify_attempts", &labels);
    assert_eq!(attempts.count, 1);
    assert_eq!(attempts.sum, Some(2.0));
    let verify = histogram(
        &collected,
        "harness.verify.duration",
        &[("surface", "inline")],
    );
    assert_eq!(verify.count, 2);
}

#[test]
fn lies_then_tells_the_truth_over_http() {
    lies_then_tells_the_truth(Protocol::Http);
}

#[test]
fn lies_then_tells_the_truth_over_grpc() {
    lies_then_tells_the_truth(Protocol::Grpc);
}

/// Always lies, one retry: `failed`, `error.type` and an error status on the root span.
fn exhausts_its_retries(protocol: Protocol) {
    let receiver = Receiver::start(protocol);
    let dir = exhausted();
    let (out, report) = run_exported(&dir, &receiver, &[("OTEL_SERVICE_NAME", "telemetry-test")]);
    out.expect_code(1);
    assert_eq!(report["outcome"], json!("failed"));
    assert_eq!(report["error"]["kind"], json!("verification_failed"));
    let (trace, collected) = collect(&receiver, &report, &METRICS[..3]);

    let root = root(&trace, &report);
    let a = &root.attributes;
    assert_eq!(text(a, "delegation.verify_outcome"), "failed");
    assert!(!boolean(a, "delegation.verify_passed"));
    assert_eq!(int(a, "delegation.verify_attempts"), 2);
    assert_eq!(text(a, "error.type"), "verification_failed");
    assert!(is_error(root), "status: {:?}", root.status);

    let attempts = attempts(&trace, root, &report);
    assert_eq!(attempts.len(), 2);
    retry_events(&attempts, &[NO_FILE]);
    for attempt in &attempts {
        assert!(!boolean(&attempt.attributes, "verify.passed"));
        let calls = trace.children(attempt, "gen_ai.chat");
        assert_eq!(calls.len(), 1);
        chat(calls[0]);
        let verify = trace.children(attempt, "verify.inline");
        assert_eq!(verify.len(), 1);
        inline(verify[0], Some(NO_FILE));
        // Failed verification is the delegate's failure, not the attempt span's error.
        assert!(!is_error(attempt));
    }

    // OTEL_SERVICE_NAME names the service.
    assert!(
        collected
            .resources
            .iter()
            .all(|r| text(r, "service.name") == "telemetry-test")
    );

    let labels = [
        ("delegation.kind", "scripted"),
        ("delegation.outcome", "failed"),
    ];
    assert_eq!(counter(&collected, "harness.delegations", &labels), 1);
    let attempts = histogram(&collected, "harness.delegation.verify_attempts", &labels);
    assert_eq!((attempts.count, attempts.sum), (1, Some(2.0)));
}

#[test]
fn an_exhausted_delegation_over_http() {
    exhausts_its_retries(Protocol::Http);
}

#[test]
fn an_exhausted_delegation_over_grpc() {
    exhausts_its_retries(Protocol::Grpc);
}

/// Writes out.txt in every attempt, then answers.
const WRITES: &str = r#"
def respond(request):
    last = request["messages"][-1]
    if last["role"] == "tool":
        return {"content": "Wrote out.txt"}
    return {"tool_calls": [{"name": "write_file", "arguments": {"path": "out.txt", "content": "data"}}]}
"#;

/// A post-verify hook that turns the first attempt down, and a tool.pre hook that allows; the
/// verifier logs a line. Exported over HTTP to `OTEL_EXPORTER_OTLP_ENDPOINT` (not the flag).
#[test]
fn hook_runs_and_verifier_logs_are_in_the_trace() {
    let receiver = Receiver::start(Protocol::Http);
    let dir = TempDir::new();
    dir.write("agent.star", WRITES);
    dir.write(
        "hooks/gate.md",
        "---\nevent: delegation.post_verify\nscript: |\n  def handle(event, payload):\n      if payload[\"attempt\"] == 0:\n          return block(\"first attempts are never accepted\")\n      return allow()\n---\n# Gate\n",
    );
    dir.write(
        "hooks/tool-guard.md",
        "---\nevent: tool.pre\ntools: [write_file]\nscript: |\n  def handle(event, payload):\n      return allow()\n---\n# Tool guard\n",
    );
    dir.write(
        "delegation.yaml",
        "task: \"Create out.txt\"\ndelegate: {kind: scripted, script: agent.star}\ntools: [write_file]\nhooks: [hooks]\nmax_verify_retries: 2\nverify: |\n  def run(result):\n      log(\"checking out.txt\")\n      return fs.stat(\"out.txt\") != None\n",
    );
    let out = harness(["run", "delegation.yaml", "--json"])
        .current_dir(dir.path())
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", &receiver.endpoint())
        .run();
    out.expect_code(0);
    let report = out.json();
    assert_eq!(report["outcome"], json!("passed"));
    assert_eq!(report["attempts"], json!(2));
    let (trace, collected) = collect(&receiver, &report, &METRICS);

    let root = root(&trace, &report);
    assert_eq!(
        text(&root.attributes, "delegation.verify_outcome"),
        "passed"
    );
    let attempts = attempts(&trace, root, &report);
    assert_eq!(attempts.len(), 2);
    let gate_reason = "hook gate: first attempts are never accepted";
    assert_eq!(text(&attempts[0].attributes, "verify.reasons"), gate_reason);
    retry_events(&attempts, &[gate_reason]);

    for (index, attempt) in attempts.iter().enumerate() {
        // The tool call, with its tool.pre hook run under it.
        let tools = trace.children(attempt, "gen_ai.execute_tool");
        assert_eq!(tools.len(), 1);
        let call_id = format!("call_{}", index + 1);
        tool(tools[0], "write_file", &call_id, false);
        let guard = trace.children(tools[0], "hook.run");
        assert_eq!(guard.len(), 1);
        let a = &guard[0].attributes;
        assert_eq!(text(a, "hook.name"), "tool-guard");
        assert_eq!(text(a, "hook.event"), "tool.pre");
        assert_eq!(text(a, "hook.action"), "allow");

        // The inline verifier passes both times and its log line is an event on its span.
        let verify = trace.children(attempt, "verify.inline");
        assert_eq!(verify.len(), 1);
        inline(verify[0], None);
        let logged = events(verify[0], "checking out.txt");
        assert_eq!(logged.len(), 1, "{:?}", verify[0].events);
        assert_eq!(text(&logged[0].attributes, "surface"), "verifier");

        // The post-verify hook: block on the first attempt, allow on the second.
        let gate = trace.children(attempt, "hook.run");
        assert_eq!(gate.len(), 1, "attempt {index}");
        let a = &gate[0].attributes;
        assert_eq!(text(a, "hook.name"), "gate");
        assert_eq!(text(a, "hook.event"), "delegation.post_verify");
        if index == 0 {
            assert_eq!(text(a, "hook.action"), "block");
            assert_eq!(text(a, "hook.reason"), "first attempts are never accepted");
        } else {
            assert_eq!(text(a, "hook.action"), "allow");
            assert!(attr(a, "hook.reason").is_none(), "{}", show(a));
        }
    }
    assert_eq!(trace.named("hook.run").len(), 4);

    // Metrics: hook decisions by event, hook and action; verification time by surface.
    let decisions = |event: &str, hook: &str, action: &str| {
        counter(
            &collected,
            "harness.hook.decisions",
            &[
                ("hook.event", event),
                ("hook.name", hook),
                ("hook.action", action),
            ],
        )
    };
    assert_eq!(decisions("tool.pre", "tool-guard", "allow"), 2);
    assert_eq!(decisions("delegation.post_verify", "gate", "block"), 1);
    assert_eq!(decisions("delegation.post_verify", "gate", "allow"), 1);
    for surface in ["inline", "hook"] {
        let point = histogram(
            &collected,
            "harness.verify.duration",
            &[("surface", surface)],
        );
        assert_eq!(point.count, 2, "surface {surface}");
    }
}

/// A collector that is down never fails a delegation (and the trace id is still printed).
#[test]
fn a_receiver_that_is_down_does_not_fail_the_delegation() {
    for protocol in [None, Some("grpc")] {
        let dir = quickstart();
        let endpoint = format!("http://127.0.0.1:{}", closed_port());
        let mut command = harness([
            "--otlp-endpoint",
            endpoint.as_str(),
            "run",
            "delegation.yaml",
            "--json",
        ])
        .current_dir(dir.path());
        if let Some(protocol) = protocol {
            command = command.env("OTEL_EXPORTER_OTLP_PROTOCOL", protocol);
        }
        let out = command.run();
        out.expect_code(0);
        let report = out.json();
        assert_eq!(report["outcome"], json!("passed"), "{protocol:?}");
        assert!(report["trace_id"].is_string(), "{protocol:?}: {report}");
        assert_eq!(dir.read("workspace/hello.txt").as_deref(), Some("hi\n"));
    }
}

/// Without `--json`, the trace id is on stderr with the `HARNESS_TRACE_URL` link; without any
/// OTLP configuration there is no trace id at all.
#[test]
fn the_trace_id_and_link_are_printed() {
    let receiver = Receiver::start(Protocol::Http);
    let dir = quickstart();
    let endpoint = receiver.endpoint();
    let out = harness([
        "run",
        "delegation.yaml",
        "--otlp-endpoint",
        endpoint.as_str(),
    ])
    .current_dir(dir.path())
    .env(
        "HARNESS_TRACE_URL",
        "http://localhost:16686/trace/{trace_id}",
    )
    .run();
    out.expect_code(0);
    let line = out
        .stderr
        .lines()
        .find_map(|l| l.strip_prefix("trace: "))
        .unwrap_or_else(|| panic!("no trace line:\n{out:?}"));
    let (id, url) = line
        .split_once(' ')
        .unwrap_or_else(|| panic!("no link: {line}"));
    assert_eq!(url, format!("http://localhost:16686/trace/{id}"));
    let collected = receiver
        .store
        .wait_until("the delegation span", |c| c.has_span("delegation.execute"));
    let root = collected
        .spans
        .iter()
        .find(|s| s.name == "delegation.execute")
        .expect("the root span");
    assert_eq!(hex(&root.trace_id), id);

    let dir = quickstart();
    let out = harness(["run", "delegation.yaml", "--json"])
        .current_dir(dir.path())
        .run();
    out.expect_code(0);
    assert_eq!(out.json()["trace_id"], Value::Null);
    let out = harness(["run", "delegation.yaml"])
        .current_dir(dir.path())
        .env(
            "HARNESS_TRACE_URL",
            "http://localhost:16686/trace/{trace_id}",
        )
        .run();
    out.expect_code(0);
    assert!(!out.stderr.contains("trace:"), "{out:?}");
}
