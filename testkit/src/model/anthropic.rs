//! Anthropic's Messages API (`POST /v1/messages`), validated as strictly as the real one and
//! answered as the real one answers: one JSON message, or with `"stream": true` the server-sent
//! events Claude Code reads (`message_start`, `ping`, each content block as
//! `content_block_start` / `content_block_delta` / `content_block_stop`, `message_delta` with the
//! stop reason and usage, `message_stop`).
//!
//! Accepted as the real API accepts them: `system` as a string or a list of text blocks,
//! `cache_control` on blocks (at most four), `tool_result` content as a string or a list of
//! blocks, `thinking` and `redacted_thinking` blocks in assistant turns, `metadata`, `thinking`,
//! consecutive turns of one role (the API merges them into one turn) and, with a
//! `per-turn-control-*` beta, `system` turns inside `messages` (Claude Code sends its environment
//! that way).

use std::sync::atomic::{AtomicU64, Ordering};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::{Reply, Seen, ServerState, answered, ask, header_list, settle, sse};

/// The most blocks with `cache_control` one request may carry.
const MAX_BREAKPOINTS: usize = 4;

/// The number in the next reply's id. Ids are unique, as the real API's are: resuming a session,
/// Claude Code joins the content of the replies that share an id into one turn.
static NEXT_MESSAGE: AtomicU64 = AtomicU64::new(1);

/// A new message id, `msg_fake` with this process's id and a count (unique across the servers
/// of one test run, and across runs that share a Claude Code session directory).
fn message_id() -> String {
    let n = NEXT_MESSAGE.fetch_add(1, Ordering::Relaxed);
    format!("msg_fake{:x}_{n:06}", std::process::id())
}

/// An Anthropic error response.
fn anthropic_error(status: u16, kind: &str, message: &str) -> Response {
    (
        StatusCode::from_u16(status).expect("a valid status"),
        axum::Json(json!({"type": "error", "error": {"type": kind, "message": message}})),
    )
        .into_response()
}

/// `POST /v1/messages` (Claude Code adds `?beta=true`, which changes nothing here).
pub(super) async fn anthropic_messages(
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
    let system_turns = betas(&headers)
        .iter()
        .any(|beta| beta.starts_with("per-turn-control-"));
    let chat = match anthropic_to_chat(&wire, system_turns) {
        Ok(chat) => chat,
        Err(why) => return anthropic_error(400, "invalid_request_error", &why),
    };
    let stream = match wire.get("stream") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(stream)) => *stream,
        Some(_) => {
            return anthropic_error(
                400,
                "invalid_request_error",
                "stream: Input should be a valid boolean",
            );
        }
    };
    let seen = Seen {
        body: chat,
        wire,
        headers: header_list(&headers),
    };
    let reply = chat_reply_to_anthropic(ask(&state, seen).await);
    if !stream {
        return answered(&state, reply).await;
    }
    let (status, extra, body) = settle(&state, reply).await;
    let mut response = if status == 200 {
        sse(message_events(&body))
    } else {
        (
            StatusCode::from_u16(status).expect("a valid status"),
            axum::Json(body),
        )
            .into_response()
    };
    for (name, value) in extra {
        response
            .headers_mut()
            .insert(name, value.parse().expect("a valid header value"));
    }
    response
}

/// The betas a request opts into: every `anthropic-beta` header, comma-separated.
fn betas(headers: &HeaderMap) -> Vec<String> {
    headers
        .get_all("anthropic-beta")
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .map(|beta| beta.trim().to_owned())
        .filter(|beta| !beta.is_empty())
        .collect()
}

/// Checks a Messages API request as the real API does and translates it into a chat-completions
/// body: the system text first, `system` turns (taken only when `system_turns`) as system
/// messages where they stand, `tool_use` blocks as `tool_calls`, `tool_result` blocks as `tool`
/// messages; thinking blocks are left out.
fn anthropic_to_chat(wire: &Value, system_turns: bool) -> Result<Value, String> {
    let model = wire["model"]
        .as_str()
        .filter(|m| !m.is_empty())
        .ok_or("model: Field required")?;
    let max_tokens = wire["max_tokens"]
        .as_u64()
        .filter(|&n| n > 0)
        .ok_or("max_tokens: Field required (a positive integer)")?;
    let turns = wire["messages"]
        .as_array()
        .filter(|m| !m.is_empty())
        .ok_or("messages: at least one message is required")?;
    check_thinking(&wire["thinking"], max_tokens)?;
    check_metadata(&wire["metadata"])?;
    let mut breakpoints = 0;
    let mut messages = Vec::new();
    if let Some(system) = wire.get("system").filter(|s| !s.is_null()) {
        let text = system_text(system, "system", &mut breakpoints)?;
        messages.push(json!({"role": "system", "content": text}));
    }
    // The role of the turn being read: consecutive messages of one role are one turn.
    let mut role_now: Option<&str> = None;
    // Where the user turn being read began.
    let mut turn_start = 0;
    // The `tool_use` ids of the last assistant turn, and those the user turn answered so far.
    let mut open_calls: Vec<String> = Vec::new();
    let mut answered: Vec<String> = Vec::new();
    // Every `tool_use` id so far: the API wants them unique.
    let mut call_ids: Vec<String> = Vec::new();
    // Whether the user turn being read had a block other than a `tool_result`.
    let mut past_results = false;
    for (i, turn) in turns.iter().enumerate() {
        let role = turn["role"].as_str().unwrap_or_default();
        if role == "system" && system_turns {
            let at = format!("messages.{i}.content");
            let text = system_text(&turn["content"], &at, &mut breakpoints)?;
            messages.push(json!({"role": "system", "content": text}));
            continue;
        }
        if role != "user" && role != "assistant" {
            return Err(format!(
                "messages.{i}.role: Input should be 'user' or 'assistant' (got {role:?})"
            ));
        }
        let blocks = content_blocks(&turn["content"], i)?;
        if role == "user" {
            if role_now != Some("user") {
                role_now = Some("user");
                turn_start = i;
                answered.clear();
                past_results = false;
            }
            let mut texts = Vec::new();
            for (j, block) in blocks.iter().enumerate() {
                let at = format!("messages.{i}.content.{j}");
                cache_control(block, &at, &mut breakpoints)?;
                match block["type"].as_str() {
                    Some("tool_result") => {
                        if past_results {
                            return Err(format!(
                                "{at}: tool_result blocks must come first in the user turn, before any other content"
                            ));
                        }
                        let id = block["tool_use_id"].as_str().unwrap_or_default().to_owned();
                        if !open_calls.contains(&id) {
                            return Err(format!(
                                "{at}: unexpected `tool_use_id` found in `tool_result` blocks: {id:?}. Each `tool_result` block must have a corresponding `tool_use` block in the previous message."
                            ));
                        }
                        if answered.contains(&id) {
                            return Err(format!(
                                "{at}: each `tool_use` must have a single result. Found multiple `tool_result` blocks with id: {id}"
                            ));
                        }
                        let content = tool_result_text(&block["content"], &at, &mut breakpoints)?;
                        messages
                            .push(json!({"role": "tool", "tool_call_id": id, "content": content}));
                        answered.push(id);
                    }
                    Some("text") => {
                        past_results = true;
                        texts.push(block_text(block, &at)?);
                    }
                    other => {
                        return Err(format!(
                            "{at}.type: unexpected block type {other:?} in a user turn"
                        ));
                    }
                }
            }
            if !texts.is_empty() {
                messages.push(json!({"role": "user", "content": texts.join("\n")}));
            }
        } else {
            match role_now {
                None => {
                    return Err(format!(
                        "messages.{i}.role: the first message must use the \"user\" role"
                    ));
                }
                Some("user") => {
                    all_answered(&open_calls, &answered, turn_start)?;
                    open_calls.clear();
                }
                Some(_) => {}
            }
            role_now = Some("assistant");
            let mut text = None::<String>;
            let mut calls = Vec::new();
            for (j, block) in blocks.iter().enumerate() {
                let at = format!("messages.{i}.content.{j}");
                cache_control(block, &at, &mut breakpoints)?;
                match block["type"].as_str() {
                    Some("text") => {
                        let t = block_text(block, &at)?;
                        text.get_or_insert_with(String::new).push_str(&t);
                    }
                    Some("tool_use") => {
                        let id = block["id"].as_str().unwrap_or_default().to_owned();
                        let name = block["name"].as_str().unwrap_or_default();
                        if id.is_empty() || name.is_empty() || !block["input"].is_object() {
                            return Err(format!(
                                "{at}: a tool_use block needs an id, a name and an object input"
                            ));
                        }
                        if call_ids.contains(&id) {
                            return Err(format!("{at}: `tool_use` ids must be unique: {id}"));
                        }
                        calls.push(json!({
                            "id": id,
                            "type": "function",
                            "function": {"name": name, "arguments": block["input"].to_string()},
                        }));
                        call_ids.push(id.clone());
                        open_calls.push(id);
                    }
                    Some("thinking") => {
                        if !block["thinking"].is_string() || !block["signature"].is_string() {
                            return Err(format!(
                                "{at}: a thinking block needs `thinking` and `signature` strings"
                            ));
                        }
                    }
                    Some("redacted_thinking") => {
                        if !block["data"].is_string() {
                            return Err(format!(
                                "{at}: a redacted_thinking block needs a `data` string"
                            ));
                        }
                    }
                    other => {
                        return Err(format!(
                            "{at}.type: unexpected block type {other:?} in an assistant turn"
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
    if role_now != Some("user") {
        return Err("the last message must be a user message".to_owned());
    }
    all_answered(&open_calls, &answered, turn_start)?;
    let mut chat = json!({"model": model, "messages": messages, "max_tokens": max_tokens});
    if let Some(tools) = wire.get("tools").filter(|t| !t.is_null()) {
        chat["tools"] = Value::Array(chat_tools(tools, &mut breakpoints)?);
    }
    if breakpoints > MAX_BREAKPOINTS {
        return Err(format!(
            "A maximum of {MAX_BREAKPOINTS} blocks with cache_control may be provided. Found {breakpoints}."
        ));
    }
    if let Some(t) = wire.get("temperature") {
        chat["temperature"] = t.clone();
    }
    Ok(chat)
}

/// Returns a turn's content as blocks (a string is one text block); empty content is refused.
fn content_blocks(content: &Value, i: usize) -> Result<Vec<Value>, String> {
    match content {
        Value::String(text) if !text.is_empty() => Ok(vec![json!({"type": "text", "text": text})]),
        Value::Array(blocks) if !blocks.is_empty() => Ok(blocks.clone()),
        _ => Err(format!(
            "messages.{i}: all messages must have non-empty content"
        )),
    }
}

/// Returns the text of a text block at `at`, which must be non-empty.
fn block_text(block: &Value, at: &str) -> Result<String, String> {
    match block["text"].as_str() {
        Some(text) if !text.is_empty() => Ok(text.to_owned()),
        _ => Err(format!("{at}: text content blocks must be non-empty")),
    }
}

/// Returns a system prompt's text: a string, or a list of text blocks joined by newlines.
fn system_text(system: &Value, at: &str, breakpoints: &mut usize) -> Result<String, String> {
    match system {
        Value::String(text) => Ok(text.clone()),
        Value::Array(blocks) => {
            let mut texts = Vec::new();
            for (j, block) in blocks.iter().enumerate() {
                let at = format!("{at}.{j}");
                if block["type"] != "text" {
                    return Err(format!("{at}.type: Input should be 'text'"));
                }
                cache_control(block, &at, breakpoints)?;
                texts.push(block_text(block, &at)?);
            }
            Ok(texts.join("\n"))
        }
        _ => Err(format!(
            "{at}: Input should be a valid string or a list of text blocks"
        )),
    }
}

/// Returns the text of a `tool_result`'s content at `at`: none, a string, or a list of text
/// blocks joined by newlines (an image stands in as `[image]`).
fn tool_result_text(content: &Value, at: &str, breakpoints: &mut usize) -> Result<String, String> {
    match content {
        Value::Null => Ok(String::new()),
        Value::String(text) => Ok(text.clone()),
        Value::Array(blocks) => {
            let mut texts = Vec::new();
            for (k, block) in blocks.iter().enumerate() {
                let at = format!("{at}.content.{k}");
                cache_control(block, &at, breakpoints)?;
                match block["type"].as_str() {
                    Some("text") => texts.push(block_text(block, &at)?),
                    Some("image") => texts.push("[image]".to_owned()),
                    other => {
                        return Err(format!(
                            "{at}.type: unexpected block type {other:?} in tool_result content"
                        ));
                    }
                }
            }
            Ok(texts.join("\n"))
        }
        _ => Err(format!(
            "{at}.content: Input should be a valid string or list"
        )),
    }
}

/// Checks a block's `cache_control`, if any (`{"type": "ephemeral"}` with an optional `ttl` of
/// `5m` or `1h`), and counts it.
fn cache_control(block: &Value, at: &str, breakpoints: &mut usize) -> Result<(), String> {
    let Some(control) = block.get("cache_control").filter(|c| !c.is_null()) else {
        return Ok(());
    };
    if control["type"] != "ephemeral" {
        return Err(format!(
            "{at}.cache_control.type: Input should be 'ephemeral'"
        ));
    }
    match control.get("ttl") {
        None | Some(Value::Null) => {}
        Some(ttl) if ttl == "5m" || ttl == "1h" => {}
        Some(_) => {
            return Err(format!(
                "{at}.cache_control.ttl: Input should be '5m' or '1h'"
            ));
        }
    }
    *breakpoints += 1;
    Ok(())
}

/// Fails when a `tool_use` of the last assistant turn has no `tool_result` in the user turn that
/// began at message `i`.
fn all_answered(open_calls: &[String], answered: &[String], i: usize) -> Result<(), String> {
    match open_calls.iter().find(|id| !answered.contains(id)) {
        Some(missing) => Err(format!(
            "messages.{i}: `tool_use` ids were found without `tool_result` blocks immediately after: {missing}. Each `tool_use` block must have a corresponding `tool_result` block in the next message."
        )),
        None => Ok(()),
    }
}

/// Checks `thinking`, if given: `disabled`, `adaptive`, or `enabled` with a `budget_tokens` of at
/// least 1024 and below `max_tokens`.
fn check_thinking(thinking: &Value, max_tokens: u64) -> Result<(), String> {
    if thinking.is_null() {
        return Ok(());
    }
    match thinking["type"].as_str() {
        Some("disabled" | "adaptive") => Ok(()),
        Some("enabled") => {
            let budget = thinking["budget_tokens"].as_u64().unwrap_or(0);
            if budget < 1024 {
                Err(
                    "thinking.enabled.budget_tokens: Input should be greater than or equal to 1024"
                        .to_owned(),
                )
            } else if budget >= max_tokens {
                Err("`max_tokens` must be greater than `thinking.budget_tokens`".to_owned())
            } else {
                Ok(())
            }
        }
        _ => Err("thinking.type: Input should be 'enabled', 'disabled' or 'adaptive'".to_owned()),
    }
}

/// Checks `metadata`, if given: an object whose `user_id`, if any, is a string of at most 256
/// characters (Claude Code sends a JSON text with its session id there).
fn check_metadata(metadata: &Value) -> Result<(), String> {
    match metadata {
        Value::Null => Ok(()),
        Value::Object(fields) => match fields.get("user_id") {
            None | Some(Value::Null) => Ok(()),
            Some(Value::String(id)) if id.chars().count() <= 256 => Ok(()),
            Some(_) => Err(
                "metadata.user_id: Input should be a string of at most 256 characters".to_owned(),
            ),
        },
        _ => Err("metadata: Input should be a valid dictionary".to_owned()),
    }
}

/// Translates `tools` into chat-completions functions: every custom tool (a `name` and an object
/// `input_schema`; names unique); server tools (with a `type` of their own) have no counterpart
/// and are left out.
fn chat_tools(tools: &Value, breakpoints: &mut usize) -> Result<Vec<Value>, String> {
    let tools = tools
        .as_array()
        .ok_or("tools: Input should be a valid list")?;
    let mut names: Vec<&str> = Vec::new();
    let mut functions = Vec::new();
    for (i, tool) in tools.iter().enumerate() {
        let at = format!("tools.{i}");
        cache_control(tool, &at, breakpoints)?;
        if tool["type"].as_str().is_some_and(|kind| kind != "custom") {
            continue;
        }
        let name = tool["name"]
            .as_str()
            .filter(|n| !n.is_empty())
            .ok_or_else(|| format!("{at}.custom.name: Field required"))?;
        if !tool["input_schema"].is_object() {
            return Err(format!("{at}.custom.input_schema: Field required"));
        }
        if names.contains(&name) {
            return Err(format!(
                "tools: Tool names must be unique (found {name:?} twice)"
            ));
        }
        names.push(name);
        let mut function = json!({"name": name, "parameters": tool["input_schema"]});
        if let Some(description) = tool.get("description").filter(|d| !d.is_null()) {
            function["description"] = description.clone();
        }
        functions.push(json!({"type": "function", "function": function}));
    }
    Ok(functions)
}

/// Returns `usage[key]` as a count (0 when absent).
fn tokens(usage: &Value, key: &str) -> u64 {
    usage[key].as_u64().unwrap_or(0)
}

/// The events the real API streams for `message` (a Messages API reply): `message_start` with
/// the message emptied of content (output so far: 1 token), `ping`, then per content block
/// `content_block_start` (the block empty), its deltas (`text_delta`; `input_json_delta` with
/// the input as JSON text; `thinking_delta` then `signature_delta`; none for a block sent whole,
/// such as `redacted_thinking`) and `content_block_stop`; then `message_delta` with the stop
/// reason and the final usage (which replaces the start's), and `message_stop`.
fn message_events(message: &Value) -> Vec<(Option<&'static str>, Value)> {
    let usage = &message["usage"];
    let final_usage = json!({
        "input_tokens": tokens(usage, "input_tokens"),
        "cache_creation_input_tokens": tokens(usage, "cache_creation_input_tokens"),
        "cache_read_input_tokens": tokens(usage, "cache_read_input_tokens"),
        "output_tokens": tokens(usage, "output_tokens"),
    });
    let mut start = message.clone();
    start["content"] = json!([]);
    start["stop_reason"] = Value::Null;
    start["stop_sequence"] = Value::Null;
    start["usage"] = final_usage.clone();
    start["usage"]["output_tokens"] = json!(1);
    let mut events = vec![
        (
            Some("message_start"),
            json!({"type": "message_start", "message": start}),
        ),
        (Some("ping"), json!({"type": "ping"})),
    ];
    for (index, block) in message["content"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        let (empty, deltas) = match block["type"].as_str() {
            Some("text") => (
                json!({"type": "text", "text": ""}),
                vec![json!({"type": "text_delta", "text": block["text"]})],
            ),
            Some("tool_use") => (
                json!({"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}),
                vec![
                    json!({"type": "input_json_delta", "partial_json": block["input"].to_string()}),
                ],
            ),
            Some("thinking") => (
                json!({"type": "thinking", "thinking": "", "signature": ""}),
                vec![
                    json!({"type": "thinking_delta", "thinking": block["thinking"]}),
                    json!({"type": "signature_delta", "signature": block["signature"]}),
                ],
            ),
            _ => (block.clone(), Vec::new()),
        };
        events.push((
            Some("content_block_start"),
            json!({"type": "content_block_start", "index": index, "content_block": empty}),
        ));
        for delta in deltas {
            events.push((
                Some("content_block_delta"),
                json!({"type": "content_block_delta", "index": index, "delta": delta}),
            ));
        }
        events.push((
            Some("content_block_stop"),
            json!({"type": "content_block_stop", "index": index}),
        ));
    }
    events.push((
        Some("message_delta"),
        json!({
            "type": "message_delta",
            "delta": {"stop_reason": message["stop_reason"], "stop_sequence": message["stop_sequence"]},
            "usage": final_usage,
        }),
    ));
    events.push((Some("message_stop"), json!({"type": "message_stop"})));
    events
}

/// Translates a chat-completions reply into the Messages API's. A reply that already is one (a
/// body whose `type` is `message` or `error`, for a scripted thinking block or error) is sent as
/// it is.
fn chat_reply_to_anthropic(reply: Reply) -> Reply {
    match reply {
        Reply::After(delay, then) => Reply::After(delay, Box::new(chat_reply_to_anthropic(*then))),
        Reply::Hang => Reply::Hang,
        Reply::Json(status, headers, body)
            if body["type"] == "message" || body["type"] == "error" =>
        {
            Reply::Json(status, headers, body)
        }
        Reply::Json(200, headers, body) => {
            let choice = &body["choices"][0];
            let message = &choice["message"];
            let mut content = Vec::new();
            // The API never sends an empty text block (and refuses one sent back).
            if let Some(text) = message["content"].as_str().filter(|t| !t.is_empty()) {
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
                    "id": message_id(),
                    "type": "message",
                    "role": "assistant",
                    "model": body["model"],
                    "content": content,
                    "stop_reason": stop_reason,
                    "stop_sequence": null,
                    "usage": {
                        "input_tokens": body["usage"]["prompt_tokens"],
                        "cache_creation_input_tokens": 0,
                        "cache_read_input_tokens": 0,
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
                401 => "authentication_error",
                403 => "permission_error",
                404 => "not_found_error",
                413 => "request_too_large",
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The shape of Claude Code 2.1.332's requests: system blocks with `cache_control`, a
    /// `system` turn, string and block content, a `tool_result` answering the `tool_use`.
    fn claude_code_request() -> Value {
        json!({
            "model": "claude-opus-5-5",
            "max_tokens": 128000,
            "stream": true,
            "thinking": {"type": "adaptive", "display": "updates"},
            "metadata": {"user_id": "{\"device_id\":\"d\",\"account_uuid\":\"\",\"session_id\":\"s\"}"},
            "system": [
                {"type": "text", "text": "billing"},
                {"type": "text", "text": "You are Claude.", "cache_control": {"type": "ephemeral"}},
            ],
            "tools": [
                {"name": "Write", "description": "Writes a file", "input_schema": {"type": "object"}},
                {"name": "Placeholder", "input_schema": {"type": "object"}, "defer_loading": true},
            ],
            "messages": [
                {"role": "user", "content": [{"type": "text", "text": "Create hello.txt"}]},
                {"role": "system", "content": "# Environment"},
                {"role": "assistant", "content": [{"type": "text", "text": "Done"}]},
                {"role": "user", "content": "VERIFICATION FAILED"},
                {"role": "assistant", "content": [
                    {"type": "thinking", "thinking": "hm", "signature": "sig"},
                    {"type": "tool_use", "id": "toolu_1", "name": "Write", "input": {"file_path": "/w/hello.txt", "content": "hi"}},
                ]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "File created", "cache_control": {"type": "ephemeral"}}]},
            ],
        })
    }

    #[test]
    fn claude_code_requests_translate() {
        let chat = anthropic_to_chat(&claude_code_request(), true).expect("accepted");
        let roles: Vec<&str> = chat["messages"]
            .as_array()
            .expect("messages")
            .iter()
            .map(|m| m["role"].as_str().unwrap_or_default())
            .collect();
        assert_eq!(
            roles,
            [
                "system",
                "user",
                "system",
                "assistant",
                "user",
                "assistant",
                "tool"
            ]
        );
        assert_eq!(chat["messages"][0]["content"], "billing\nYou are Claude.");
        assert_eq!(chat["messages"][5]["content"], Value::Null);
        assert_eq!(chat["messages"][6]["tool_call_id"], "toolu_1");
        assert_eq!(chat["tools"].as_array().map(Vec::len), Some(2));
        // Without the per-turn-control beta a `system` turn is refused.
        let refused = anthropic_to_chat(&claude_code_request(), false).expect_err("refused");
        assert!(refused.contains("messages.1.role"), "{refused}");
    }

    #[test]
    fn the_real_apis_rules_hold() {
        let mut request = claude_code_request();
        request["messages"][5]["content"] = json!("no result");
        let why = anthropic_to_chat(&request, true).expect_err("an unanswered tool_use");
        assert!(why.contains("without `tool_result`"), "{why}");

        // Consecutive user turns are one turn, as the API merges them.
        let mut request = claude_code_request();
        let messages = request["messages"].as_array_mut().expect("messages");
        messages.push(json!({"role": "user", "content": "and more"}));
        anthropic_to_chat(&request, true).expect("merged");

        let mut request = claude_code_request();
        let ephemeral = json!({"type": "ephemeral"});
        for tool in request["tools"].as_array_mut().expect("tools") {
            tool["cache_control"] = ephemeral.clone();
        }
        request["system"][0]["cache_control"] = ephemeral;
        let why = anthropic_to_chat(&request, true).expect_err("five breakpoints");
        assert!(why.contains("Found 5"), "{why}");

        let mut request = claude_code_request();
        request["messages"][2]["content"] = json!([{"type": "text", "text": ""}]);
        assert!(
            anthropic_to_chat(&request, true).is_err(),
            "an empty text block"
        );
    }

    #[test]
    fn a_streamed_reply_has_the_real_event_sequence() {
        let chat = anthropic_to_chat(&claude_code_request(), true).expect("accepted");
        let reply = chat_reply_to_anthropic(super::super::tool_call(
            &chat,
            "toolu_2",
            "Write",
            &json!({"file_path": "/w/a", "content": "hi"}),
        ));
        let Reply::Json(200, _, message) = reply else {
            panic!("a 200 reply");
        };
        let again = chat_reply_to_anthropic(super::super::answer(&chat, "Done"));
        let Reply::Json(200, _, again) = again else {
            panic!("a 200 reply");
        };
        // Claude Code joins replies that share an id into one turn when it resumes.
        assert_ne!(message["id"], again["id"]);
        let events = message_events(&message);
        let names: Vec<&str> = events.iter().filter_map(|(name, _)| *name).collect();
        assert_eq!(
            names,
            [
                "message_start",
                "ping",
                "content_block_start",
                "content_block_delta",
                "content_block_stop",
                "message_delta",
                "message_stop",
            ]
        );
        for (name, data) in &events {
            assert_eq!(Some(data["type"].as_str().unwrap_or_default()), *name);
        }
        assert_eq!(events[0].1["message"]["content"], json!([]));
        assert_eq!(events[2].1["content_block"]["input"], json!({}));
        let partial = events[3].1["delta"]["partial_json"]
            .as_str()
            .unwrap_or_default();
        assert_eq!(
            serde_json::from_str::<Value>(partial).ok(),
            Some(json!({"file_path": "/w/a", "content": "hi"}))
        );
        assert_eq!(events[5].1["delta"]["stop_reason"], "tool_use");
        assert_eq!(events[5].1["usage"]["input_tokens"], 70);
        assert_eq!(events[5].1["usage"]["output_tokens"], 7);
    }

    #[test]
    fn errors_keep_the_models_message_under_the_apis_type() {
        let reply = chat_reply_to_anthropic(super::super::status(401, vec![]));
        let Reply::Json(401, _, body) = reply else {
            panic!("a 401 reply");
        };
        assert_eq!(
            body,
            json!({"type": "error", "error": {"type": "authentication_error", "message": "fake status 401"}})
        );
    }
}
