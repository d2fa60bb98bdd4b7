//! The one fake model server: real HTTP on 127.0.0.1 speaking two real protocols — OpenAI
//! chat completions (`POST /v1/chat/completions`) and Anthropic's Messages API (`POST
//! /v1/messages`, validated as strictly as the real one: headers, `max_tokens`, alternating roles,
//! every `tool_use` answered by a `tool_result` first in the next user turn) — every request
//! recorded with its headers. What it answers is decided by a *model*: a function of the
//! request's index and its body in chat-completions terms (a Messages request is translated), so
//! one scripted model — a delegate that lies, then tells the truth when the retry prompt
//! arrives — serves both protocols, and its chat-completion replies are translated back.
//!
//! ```no_run
//! use harness_testkit::model::{ModelServer, answer};
//!
//! let server = ModelServer::start(|_, body| answer(body, "Done, I created hello.txt"));
//! println!("point the openai delegate at {}", server.base_url());
//! ```

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};

use crate::serve::Served;

mod anthropic;
mod gemini;
mod responses;

pub use gemini::gemini_invalid_api_key;
pub use responses::{add_file_patch, apply_patch, codex_model_catalog, invalid_api_key};

/// What the server sends back for one request.
#[derive(Debug, Clone)]
pub enum Reply {
    /// A status, extra headers and a JSON body.
    Json(u16, Vec<(&'static str, &'static str)>, Value),
    /// Never answers (for timeouts).
    Hang,
    /// The reply, after a delay (simulated model latency, so concurrent requests overlap).
    After(Duration, Box<Reply>),
}

/// One request the server received.
#[derive(Debug, Clone)]
pub struct Seen {
    /// The body in chat-completions terms (a Messages API request translated), as the model
    /// saw it.
    pub body: Value,
    /// The body as it came over the wire.
    pub wire: Value,
    /// Every header, names lower-case, in arrival order.
    pub headers: Vec<(String, String)>,
}

impl Seen {
    /// Returns the value of header `name` (lower-case), if it was sent.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// Returns the `Authorization` header, if one was sent.
    pub fn authorization(&self) -> Option<&str> {
        self.header("authorization")
    }
}

/// Decides the reply from the request's index (from 0, in arrival order) and JSON body.
type Model = dyn Fn(usize, &Value) -> Reply + Send + Sync;

#[derive(Clone)]
struct ServerState {
    model: Arc<Model>,
    seen: Arc<Mutex<Vec<Seen>>>,
    in_flight: Arc<InFlight>,
}

/// Requests being answered now, and the most there ever were at once.
#[derive(Default)]
struct InFlight {
    now: AtomicUsize,
    peak: AtomicUsize,
}

/// A fake OpenAI-compatible server serving `POST /v1/chat/completions` on 127.0.0.1 on a
/// runtime of its own, so sync and async tests use it alike; it stops when dropped.
pub struct ModelServer {
    base_url: String,
    seen: Arc<Mutex<Vec<Seen>>>,
    in_flight: Arc<InFlight>,
    _served: Served,
}

impl std::fmt::Debug for ModelServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelServer")
            .field("base_url", &self.base_url)
            .finish_non_exhaustive()
    }
}

impl ModelServer {
    /// Starts a server whose answers `model` decides.
    ///
    /// # Panics
    /// When no loopback port can be bound (the test cannot run).
    pub fn start(model: impl Fn(usize, &Value) -> Reply + Send + Sync + 'static) -> Self {
        let state = ServerState {
            model: Arc::new(model),
            seen: Arc::new(Mutex::new(Vec::new())),
            in_flight: Arc::default(),
        };
        let seen = Arc::clone(&state.seen);
        let in_flight = Arc::clone(&state.in_flight);
        let app = Router::new()
            .route("/v1/chat/completions", post(chat_completions))
            .route("/v1/messages", post(anthropic::anthropic_messages))
            .route("/v1/responses", post(responses::responses))
            .route("/v1beta/models/{target}", post(gemini::gemini_models))
            .with_state(state);
        let served = Served::start(app);
        ModelServer {
            base_url: format!("http://{}/v1", served.addr()),
            seen,
            in_flight,
            _served: served,
        }
    }

    /// Starts a server that sends `replies` in order and repeats the last one.
    ///
    /// # Panics
    /// When `replies` is empty.
    pub fn replies(replies: Vec<Reply>) -> Self {
        assert!(!replies.is_empty(), "give the server at least one reply");
        let queue = Mutex::new(VecDeque::from(replies));
        Self::start(move |_, _| {
            let mut queue = queue.lock().expect("the reply queue");
            if queue.len() > 1 {
                queue.pop_front().expect("not empty")
            } else {
                queue.front().cloned().expect("not empty")
            }
        })
    }

    /// Returns the base URL to give the `openai` delegate, `http://127.0.0.1:PORT/v1`.
    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    /// Returns the base URL to give the `anthropic` delegate, `http://127.0.0.1:PORT`.
    pub fn anthropic_base_url(&self) -> &str {
        self.base_url.trim_end_matches("/v1")
    }

    /// Returns the base URL to give Gemini CLI (`GOOGLE_GEMINI_BASE_URL`),
    /// `http://127.0.0.1:PORT`: it adds `/v1beta` itself.
    pub fn gemini_base_url(&self) -> &str {
        self.anthropic_base_url()
    }

    /// Returns every request received so far, in order.
    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().expect("the request log").clone()
    }

    /// Returns the most requests the server was answering at once (a concurrency bound seen
    /// from the server's side; give replies a [`Reply::After`] delay so they overlap).
    pub fn peak_in_flight(&self) -> usize {
        self.in_flight.peak.load(Ordering::SeqCst)
    }

    /// Returns the request bodies received so far, in order.
    pub fn bodies(&self) -> Vec<Value> {
        self.seen().into_iter().map(|s| s.body).collect()
    }
}

fn header_list(headers: &HeaderMap) -> Vec<(String, String)> {
    headers
        .iter()
        .map(|(name, value)| {
            (
                name.as_str().to_owned(),
                String::from_utf8_lossy(value.as_bytes()).into_owned(),
            )
        })
        .collect()
}

/// Records the request and asks the model; returns the reply and how many requests were in
/// flight.
async fn ask(state: &ServerState, seen: Seen) -> Reply {
    let body = seen.body.clone();
    let index = {
        let mut log = state.seen.lock().expect("the request log");
        log.push(seen);
        log.len() - 1
    };
    (state.model)(index, &body)
}

async fn answered(state: &ServerState, reply: Reply) -> Response {
    let in_flight = &state.in_flight;
    let now = in_flight.now.fetch_add(1, Ordering::SeqCst) + 1;
    in_flight.peak.fetch_max(now, Ordering::SeqCst);
    let response = respond(reply).await;
    in_flight.now.fetch_sub(1, Ordering::SeqCst);
    response
}

async fn chat_completions(
    State(state): State<ServerState>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let Ok(body) = serde_json::from_slice::<Value>(&body) else {
        return (
            StatusCode::BAD_REQUEST,
            axum::Json(json!({"error": {"message": "the body is not JSON", "type": "invalid_request_error"}})),
        )
            .into_response();
    };
    let seen = Seen {
        wire: body.clone(),
        body,
        headers: header_list(&headers),
    };
    let reply = ask(&state, seen).await;
    answered(&state, reply).await
}

/// Waits out a reply's delays, counted in flight meanwhile, and returns its status, headers and
/// body — for a protocol that builds its own response (a stream) from a chat-completions reply.
/// A [`Reply::Hang`] never returns.
async fn settle(
    state: &ServerState,
    mut reply: Reply,
) -> (u16, Vec<(&'static str, &'static str)>, Value) {
    let in_flight = &state.in_flight;
    let now = in_flight.now.fetch_add(1, Ordering::SeqCst) + 1;
    in_flight.peak.fetch_max(now, Ordering::SeqCst);
    let settled = loop {
        match reply {
            Reply::After(delay, then) => {
                tokio::time::sleep(delay).await;
                reply = *then;
            }
            Reply::Json(status, headers, body) => break (status, headers, body),
            Reply::Hang => std::future::pending::<()>().await,
        }
    };
    in_flight.now.fetch_sub(1, Ordering::SeqCst);
    settled
}

/// A `text/event-stream` response of `events`, each an optional `event:` name and its JSON
/// `data:`, as the streaming APIs send them.
fn sse<'a>(events: impl IntoIterator<Item = (Option<&'a str>, Value)>) -> Response {
    let mut body = String::new();
    for (name, data) in events {
        if let Some(name) = name {
            body.push_str("event: ");
            body.push_str(name);
            body.push('\n');
        }
        body.push_str("data: ");
        body.push_str(&data.to_string());
        body.push_str("\n\n");
    }
    (
        StatusCode::OK,
        [
            ("content-type", "text/event-stream"),
            ("cache-control", "no-cache"),
        ],
        body,
    )
        .into_response()
}

/// A JSON response with `status` and extra `headers`.
pub(super) fn json_response(
    status: u16,
    headers: &[(&'static str, &'static str)],
    body: Value,
) -> Response {
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut response = (status, axum::Json(body)).into_response();
    add_headers(&mut response, headers);
    response
}

/// Adds a reply's extra headers to `response` (a value that is no header value is left out).
pub(super) fn add_headers(response: &mut Response, headers: &[(&'static str, &'static str)]) {
    for &(name, value) in headers {
        if let Ok(value) = HeaderValue::from_str(value) {
            response.headers_mut().insert(name, value);
        }
    }
}

async fn respond(mut reply: Reply) -> Response {
    loop {
        match reply {
            Reply::After(delay, then) => {
                tokio::time::sleep(delay).await;
                reply = *then;
            }
            Reply::Json(status, headers, body) => return json_response(status, &headers, body),
            Reply::Hang => return std::future::pending().await,
        }
    }
}

/// Returns the `messages` list of a chat-completions request.
///
/// # Panics
/// When the body has none (the delegate sent a malformed request).
pub fn messages(body: &Value) -> &Vec<Value> {
    body["messages"]
        .as_array()
        .expect("a chat-completions request has a messages list")
}

/// Returns true when the last message of the request is the harness's retry prompt.
pub fn is_retry(body: &Value) -> bool {
    messages(body).last().is_some_and(|last| {
        last["role"] == "user"
            && last["content"]
                .as_str()
                .is_some_and(|c| c.contains("VERIFICATION FAILED"))
    })
}

/// Returns true when the last message of the request is a tool result.
pub fn after_tool(body: &Value) -> bool {
    messages(body)
        .last()
        .is_some_and(|last| last["role"] == "tool")
}

/// A 200 chat completion carrying `message`. Usage: 10 prompt tokens per message sent and
/// `completion_tokens` as given, so sums in reports are checkable.
pub fn completion(
    body: &Value,
    message: Value,
    finish_reason: &str,
    completion_tokens: u64,
) -> Reply {
    let prompt_tokens = 10 * body["messages"].as_array().map_or(0, Vec::len) as u64;
    Reply::Json(
        200,
        vec![],
        json!({
            "id": "chatcmpl-fake",
            "object": "chat.completion",
            "created": 1_700_000_000,
            "model": body["model"],
            "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
        }),
    )
}

/// A plain final answer (5 completion tokens).
pub fn answer(body: &Value, content: &str) -> Reply {
    completion(
        body,
        json!({"role": "assistant", "content": content}),
        "stop",
        5,
    )
}

/// A call of tool `name` with `arguments` sent as a JSON string, as OpenAI does (7 completion
/// tokens).
pub fn tool_call(body: &Value, id: &str, name: &str, arguments: &Value) -> Reply {
    completion(
        body,
        json!({
            "role": "assistant",
            "content": null,
            "tool_calls": [{
                "id": id,
                "type": "function",
                "function": {"name": name, "arguments": arguments.to_string()},
            }],
        }),
        "tool_calls",
        7,
    )
}

/// An error status with an OpenAI-style error body.
pub fn status(code: u16, headers: Vec<(&'static str, &'static str)>) -> Reply {
    Reply::Json(
        code,
        headers,
        json!({"error": {"message": format!("fake status {code}"), "type": "server_error"}}),
    )
}
