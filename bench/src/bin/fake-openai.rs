//! An OpenAI-compatible chat-completions server for benchmarks, on 127.0.0.1.
//!
//! ```text
//! fake-openai PORT [--lifetime SECONDS]
//! ```
//!
//! Prints its base URL (`http://127.0.0.1:PORT`, the port chosen by the system for `0`) on the
//! first line of stdout. Stateless apart from counters: a request with exactly one `user` message
//! (a first attempt) gets `{"name": "widget"}`; more than one (a retry) gets
//! `{"name": "widget", "id": 42}`. Every answer carries a `usage` object.
//!
//! - `POST /v1/chat/completions` (also `/chat/completions`): the completion.
//! - `POST /v1/traces`, `POST /v1/metrics`: an OTLP/HTTP sink that accepts bodies and counts
//!   them, their bytes, the spans (by name) and metric data points they carry.
//! - `GET /stats`: the counters as JSON.
//! - `GET /samples`: the first first-attempt and the first retry request body seen, so the
//!   bare-reqwest floor can send exactly what harness sent.
//!
//! The process exits by itself after `--lifetime` seconds (default 3600).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::metrics::v1::metric::Data;
use prost::Message;
use serde_json::{Value, json};

const FIRST_ANSWER: &str = r#"{"name": "widget"}"#;
const RETRY_ANSWER: &str = r#"{"name": "widget", "id": 42}"#;
/// OTLP batches can be large; chat requests are small but should never be refused.
const BODY_LIMIT: usize = 64 * 1024 * 1024;

#[derive(Default)]
struct Counters {
    requests: AtomicU64,
    first_attempts: AtomicU64,
    retries: AtomicU64,
    bad_requests: AtomicU64,
    in_flight: AtomicU64,
    max_in_flight: AtomicU64,
    otlp_traces: AtomicU64,
    otlp_metrics: AtomicU64,
    otlp_bytes: AtomicU64,
    otlp_undecodable: AtomicU64,
    spans: AtomicU64,
    metric_points: AtomicU64,
    span_names: Mutex<BTreeMap<String, u64>>,
    first_sample: OnceLock<Value>,
    retry_sample: OnceLock<Value>,
}

type Shared = Arc<Counters>;

/// Decrements the in-flight gauge however the handler ends.
struct InFlight<'a>(&'a AtomicU64);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

async fn completions(State(counters): State<Shared>, body: Bytes) -> Response {
    counters.requests.fetch_add(1, Ordering::Relaxed);
    let now = counters.in_flight.fetch_add(1, Ordering::Relaxed) + 1;
    counters.max_in_flight.fetch_max(now, Ordering::Relaxed);
    let _in_flight = InFlight(&counters.in_flight);

    let Ok(request) = serde_json::from_slice::<Value>(&body) else {
        counters.bad_requests.fetch_add(1, Ordering::Relaxed);
        return (StatusCode::BAD_REQUEST, "request body is not JSON").into_response();
    };
    let Some(messages) = request.get("messages").and_then(Value::as_array) else {
        counters.bad_requests.fetch_add(1, Ordering::Relaxed);
        return (StatusCode::BAD_REQUEST, "request has no `messages` array").into_response();
    };
    let users = messages
        .iter()
        .filter(|m| m.get("role").and_then(Value::as_str) == Some("user"))
        .count();
    let prompt_chars: usize = messages
        .iter()
        .filter_map(|m| m.get("content").and_then(Value::as_str))
        .map(str::len)
        .sum();
    let answer = if users > 1 {
        counters.retries.fetch_add(1, Ordering::Relaxed);
        let _ = counters.retry_sample.set(request.clone());
        RETRY_ANSWER
    } else {
        counters.first_attempts.fetch_add(1, Ordering::Relaxed);
        let _ = counters.first_sample.set(request.clone());
        FIRST_ANSWER
    };
    let model = request.get("model").cloned().unwrap_or(Value::Null);
    let prompt_tokens = prompt_chars / 4 + 1;
    let completion_tokens = answer.len() / 4 + 1;
    axum::Json(json!({
        "id": "chatcmpl-bench",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [{
            "index": 0,
            "message": {"role": "assistant", "content": answer},
            "finish_reason": "stop"
        }],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens
        }
    }))
    .into_response()
}

/// An empty protobuf message is a valid `Export*ServiceResponse`.
fn otlp_ok() -> Response {
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/x-protobuf")],
        Bytes::new(),
    )
        .into_response()
}

async fn traces(State(counters): State<Shared>, body: Bytes) -> Response {
    counters.otlp_traces.fetch_add(1, Ordering::Relaxed);
    counters
        .otlp_bytes
        .fetch_add(body.len() as u64, Ordering::Relaxed);
    match ExportTraceServiceRequest::decode(body) {
        Ok(request) => {
            let mut names = counters
                .span_names
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            for span in request
                .resource_spans
                .iter()
                .flat_map(|r| &r.scope_spans)
                .flat_map(|s| &s.spans)
            {
                counters.spans.fetch_add(1, Ordering::Relaxed);
                *names.entry(span.name.clone()).or_default() += 1;
            }
        }
        Err(_) => {
            counters.otlp_undecodable.fetch_add(1, Ordering::Relaxed);
        }
    }
    otlp_ok()
}

async fn metrics(State(counters): State<Shared>, body: Bytes) -> Response {
    counters.otlp_metrics.fetch_add(1, Ordering::Relaxed);
    counters
        .otlp_bytes
        .fetch_add(body.len() as u64, Ordering::Relaxed);
    match ExportMetricsServiceRequest::decode(body) {
        Ok(request) => {
            let points: usize = request
                .resource_metrics
                .iter()
                .flat_map(|r| &r.scope_metrics)
                .flat_map(|s| &s.metrics)
                .map(|m| match &m.data {
                    Some(Data::Gauge(g)) => g.data_points.len(),
                    Some(Data::Sum(s)) => s.data_points.len(),
                    Some(Data::Histogram(h)) => h.data_points.len(),
                    Some(Data::ExponentialHistogram(h)) => h.data_points.len(),
                    Some(Data::Summary(s)) => s.data_points.len(),
                    None => 0,
                })
                .sum();
            counters
                .metric_points
                .fetch_add(points as u64, Ordering::Relaxed);
        }
        Err(_) => {
            counters.otlp_undecodable.fetch_add(1, Ordering::Relaxed);
        }
    }
    otlp_ok()
}

async fn stats(State(counters): State<Shared>) -> axum::Json<Value> {
    let read = |c: &AtomicU64| c.load(Ordering::Relaxed);
    let span_names = counters
        .span_names
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clone();
    axum::Json(json!({
        "requests": read(&counters.requests),
        "first_attempts": read(&counters.first_attempts),
        "retries": read(&counters.retries),
        "bad_requests": read(&counters.bad_requests),
        "max_in_flight": read(&counters.max_in_flight),
        "otlp_traces": read(&counters.otlp_traces),
        "otlp_metrics": read(&counters.otlp_metrics),
        "otlp_bytes": read(&counters.otlp_bytes),
        "otlp_undecodable": read(&counters.otlp_undecodable),
        "spans": read(&counters.spans),
        "metric_points": read(&counters.metric_points),
        "span_names": span_names,
    }))
}

async fn samples(State(counters): State<Shared>) -> axum::Json<Value> {
    axum::Json(json!({
        "first": counters.first_sample.get(),
        "retry": counters.retry_sample.get(),
    }))
}

fn usage() -> ! {
    eprintln!("usage: fake-openai PORT [--lifetime SECONDS]   (PORT 0 picks a free port)");
    std::process::exit(2);
}

fn main() {
    let mut args = std::env::args().skip(1);
    let Some(port) = args.next().and_then(|p| p.parse::<u16>().ok()) else {
        usage();
    };
    let mut lifetime = Duration::from_secs(3600);
    while let Some(arg) = args.next() {
        match (
            arg.as_str(),
            args.next().and_then(|s| s.parse::<u64>().ok()),
        ) {
            ("--lifetime", Some(seconds)) => lifetime = Duration::from_secs(seconds),
            _ => usage(),
        }
    }
    // One thread: the server should take as little as possible of the machine the client runs
    // on, and it is far from being the bottleneck.
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("fake-openai: cannot start the runtime: {e}");
            std::process::exit(1);
        }
    };
    runtime.block_on(async move {
        let listener = match tokio::net::TcpListener::bind(("127.0.0.1", port)).await {
            Ok(listener) => listener,
            Err(e) => {
                eprintln!("fake-openai: cannot bind 127.0.0.1:{port}: {e}");
                std::process::exit(1);
            }
        };
        let address = match listener.local_addr() {
            Ok(address) => address,
            Err(e) => {
                eprintln!("fake-openai: no local address: {e}");
                std::process::exit(1);
            }
        };
        println!("http://{address}");
        let counters: Shared = Arc::new(Counters::default());
        let app = Router::new()
            .route("/v1/chat/completions", post(completions))
            .route("/chat/completions", post(completions))
            .route("/v1/traces", post(traces))
            .route("/v1/metrics", post(metrics))
            .route("/stats", get(stats))
            .route("/samples", get(samples))
            .layer(DefaultBodyLimit::max(BODY_LIMIT))
            .with_state(counters);
        tokio::select! {
            served = axum::serve(listener, app) => {
                if let Err(e) = served {
                    eprintln!("fake-openai: {e}");
                    std::process::exit(1);
                }
            }
            () = tokio::time::sleep(lifetime) => {
                eprintln!("fake-openai: lifetime of {}s reached, exiting", lifetime.as_secs());
            }
        }
    });
}
