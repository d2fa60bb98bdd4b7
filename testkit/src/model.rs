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
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};

use crate::serve::Served;

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
            .route("/v1/messages", post(anthropic_messages))
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

/// An Anthropic error response.
fn anthropic_error(status: u16, kind: &str, message: &str) -> Response {
    (
        StatusCode::from_u16(status).expect("a valid status"),
        axum::Json(json!({"type": "error", "error": {"type": kind, "message": message}})),
    )
        .into_response()
}

async fn anthropic_messages(
    State(state): State<ServerState>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if headers.get("x-api-key").is_none() {
        return anthropic_error(401, "authentication_error", "x-api-key header is required");
    }
    if headers.get("anthropic-version").is_none() {
        return anthropic_error(
            400,
            "invalid_request_error",
            "anthropic-version header is required",
        );
    }
    let Ok(wire) = serde_json::from_slice::<Value>(&body) else {
        return anthropic_error(400, "invalid_request_error", "the body is not JSON");
    };
    let chat = match anthropic_to_chat(&wire) {
        Ok(chat) => chat,
        Err(why) => return anthropic_error(400, "invalid_request_error", &why),
    };
    let seen = Seen {
        body: chat,
        wire,
        headers: header_list(&headers),
    };
    let reply = ask(&state, seen).await;
    answered(&state, chat_reply_to_anthropic(reply)).await
}

/// Checks a Messages API request as the real API does and translates it into a chat-completions
/// body: the system text first, `tool_use` blocks as `tool_calls`, `tool_result` blocks as
/// `tool` messages.
fn anthropic_to_chat(wire: &Value) -> Result<Value, String> {
    let model = wire["model"].as_str().ok_or("model: Field required")?;
    if wire["max_tokens"].as_u64().is_none_or(|n| n == 0) {
        return Err("max_tokens: Field required (a positive integer)".to_owned());
    }
    let turns = wire["messages"]
        .as_array()
        .filter(|m| !m.is_empty())
        .ok_or("messages: at least one message is required")?;
    let mut messages = Vec::new();
    if let Some(system) = wire.get("system") {
        let text = system.as_str().ok_or("system: must be a string")?;
        messages.push(json!({"role": "system", "content": text}));
    }
    let mut open_calls: Vec<String> = Vec::new();
    for (i, turn) in turns.iter().enumerate() {
        let role = turn["role"].as_str().unwrap_or_default();
        let expected = if i % 2 == 0 { "user" } else { "assistant" };
        if role != expected {
            return Err(format!(
                "messages.{i}.role: roles must alternate between \"user\" and \"assistant\", starting with \"user\" (got {role:?})"
            ));
        }
        let blocks: Vec<Value> = match &turn["content"] {
            Value::String(text) => vec![json!({"type": "text", "text": text})],
            Value::Array(blocks) if !blocks.is_empty() => blocks.clone(),
            _ => {
                return Err(format!(
                    "messages.{i}.content: a non-empty string or list is required"
                ));
            }
        };
        if role == "user" {
            let mut answered = Vec::new();
            let mut seen_text = false;
            let mut texts = Vec::new();
            for block in &blocks {
                match block["type"].as_str() {
                    Some("tool_result") => {
                        if seen_text {
                            return Err(format!(
                                "messages.{i}: tool_result blocks must come first in the content"
                            ));
                        }
                        let id = block["tool_use_id"].as_str().unwrap_or_default().to_owned();
                        if !open_calls.contains(&id) {
                            return Err(format!(
                                "messages.{i}: unexpected tool_use_id {id:?} in tool_result blocks: each tool_result must answer a tool_use of the previous message"
                            ));
                        }
                        let content = match &block["content"] {
                            Value::String(text) => text.clone(),
                            other => other.to_string(),
                        };
                        messages
                            .push(json!({"role": "tool", "tool_call_id": id, "content": content}));
                        answered.push(id);
                    }
                    Some("text") => {
                        seen_text = true;
                        let text = block["text"].as_str().unwrap_or_default();
                        if text.is_empty() {
                            return Err(format!(
                                "messages.{i}: text content blocks must be non-empty"
                            ));
                        }
                        texts.push(text.to_owned());
                    }
                    other => {
                        return Err(format!(
                            "messages.{i}: unexpected block type {other:?} in a user turn"
                        ));
                    }
                }
            }
            if let Some(missing) = open_calls.iter().find(|id| !answered.contains(id)) {
                return Err(format!(
                    "messages.{i}: tool_use ids were found without tool_result blocks immediately after: {missing}"
                ));
            }
            open_calls.clear();
            if !texts.is_empty() {
                messages.push(json!({"role": "user", "content": texts.join("\n")}));
            }
        } else {
            let mut text = None::<String>;
            let mut calls = Vec::new();
            for block in &blocks {
                match block["type"].as_str() {
                    Some("text") => {
                        let t = block["text"].as_str().unwrap_or_default();
                        if t.is_empty() {
                            return Err(format!(
                                "messages.{i}: text content blocks must be non-empty"
                            ));
                        }
                        text.get_or_insert_with(String::new).push_str(t);
                    }
                    Some("tool_use") => {
                        let id = block["id"].as_str().unwrap_or_default().to_owned();
                        if id.is_empty() || !block["input"].is_object() {
                            return Err(format!(
                                "messages.{i}: a tool_use block needs an id and an object input"
                            ));
                        }
                        calls.push(json!({
                            "id": id,
                            "type": "function",
                            "function": {"name": block["name"], "arguments": block["input"].to_string()},
                        }));
                        open_calls.push(id);
                    }
                    other => {
                        return Err(format!(
                            "messages.{i}: unexpected block type {other:?} in an assistant turn"
                        ));
                    }
                }
            }
            let mut message = json!({"role": "assistant", "content": text});
            if !calls.is_empty() {
                message["tool_calls"] = Value::Array(calls);
            }
            messages.push(message);
        }
    }
    if turns.last().is_some_and(|t| t["role"] != "user") {
        return Err("the last message must be a user message".to_owned());
    }
    let mut chat = json!({"model": model, "messages": messages, "max_tokens": wire["max_tokens"]});
    if let Some(tools) = wire["tools"].as_array() {
        let tools: Vec<Value> = tools
            .iter()
            .map(|t| json!({"type": "function", "function": {"name": t["name"], "description": t["description"], "parameters": t["input_schema"]}}))
            .collect();
        chat["tools"] = Value::Array(tools);
    }
    if let Some(t) = wire.get("temperature") {
        chat["temperature"] = t.clone();
    }
    Ok(chat)
}

/// Translates a chat-completions reply into the Messages API's.
fn chat_reply_to_anthropic(reply: Reply) -> Reply {
    match reply {
        Reply::After(delay, then) => Reply::After(delay, Box::new(chat_reply_to_anthropic(*then))),
        Reply::Hang => Reply::Hang,
        Reply::Json(200, headers, body) => {
            let choice = &body["choices"][0];
            let message = &choice["message"];
            let mut content = Vec::new();
            if let Some(text) = message["content"].as_str() {
                content.push(json!({"type": "text", "text": text}));
            }
            for call in message["tool_calls"].as_array().into_iter().flatten() {
                let input: Value = call["function"]["arguments"]
                    .as_str()
                    .and_then(|a| serde_json::from_str(a).ok())
                    .unwrap_or_else(|| json!({}));
                content.push(json!({"type": "tool_use", "id": call["id"], "name": call["function"]["name"], "input": input}));
            }
            let stop_reason = match choice["finish_reason"].as_str() {
                Some("length") => "max_tokens",
                Some("tool_calls") => "tool_use",
                _ => "end_turn",
            };
            Reply::Json(
                200,
                headers,
                json!({
                    "id": "msg_fake",
                    "type": "message",
                    "role": "assistant",
                    "model": body["model"],
                    "content": content,
                    "stop_reason": stop_reason,
                    "stop_sequence": null,
                    "usage": {
                        "input_tokens": body["usage"]["prompt_tokens"],
                        "output_tokens": body["usage"]["completion_tokens"],
                    },
                }),
            )
        }
        Reply::Json(status, headers, body) => {
            let message = body["error"]["message"]
                .as_str()
                .unwrap_or("error")
                .to_owned();
            let kind = match status {
                429 => "rate_limit_error",
                529 => "overloaded_error",
                500..=599 => "api_error",
                _ => "invalid_request_error",
            };
            Reply::Json(
                status,
                headers,
                json!({"type": "error", "error": {"type": kind, "message": message}}),
            )
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
            Reply::Json(status, headers, body) => {
                let status = StatusCode::from_u16(status).expect("a valid status");
                let mut response = (status, axum::Json(body)).into_response();
                for (name, value) in headers {
                    response
                        .headers_mut()
                        .insert(name, value.parse().expect("a valid header value"));
                }
                return response;
            }
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
