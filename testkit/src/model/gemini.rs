//! Google's Gemini API as Gemini CLI speaks it: `POST /v1beta/models/MODEL:METHOD` with
//! `streamGenerateContent?alt=sse` (server-sent `GenerateContentResponse` chunks, the main
//! requests), `generateContent` (one JSON response: side requests such as the CLI's routing
//! classifier, which asks for a JSON answer) and `countTokens` (answered without the model).
//!
//! Validated like the real service: an API key (`x-goog-api-key` or `?key=`), no unknown fields,
//! non-empty `contents` of `user` / `model` turns, each part holding one kind of data, and every
//! `functionCall` turn answered by the next turn's `functionResponse` parts, one per call, by id
//! or name. The request is translated into chat-completions terms for the model:
//! `systemInstruction` as the system message, text parts as `user` / `assistant` messages,
//! `functionCall` parts as `tool_calls` (the part's id, else a generated one), `functionResponse`
//! parts as `tool` messages, `functionDeclarations` as `tools`, a response schema as
//! `response_format` (so a model tells side requests from main ones) and `"stream": true` for a
//! stream. The model's chat-completion reply is translated back: text and `functionCall` parts
//! (carrying the tool call's id, which Gemini CLI keeps as its tool id), `finishReason` and
//! `usageMetadata`; another status becomes Google's error JSON.

use std::collections::HashMap;

use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::HeaderMap;
use axum::response::Response;
use serde_json::{Map, Value, json};

use super::{Reply, Seen, ServerState, add_headers, ask, header_list, json_response, settle, sse};

/// The fields of a `GenerateContentRequest`, in both JSON spellings the real API accepts.
const REQUEST_FIELDS: &[&str] = &[
    "model",
    "contents",
    "systemInstruction",
    "system_instruction",
    "tools",
    "toolConfig",
    "tool_config",
    "safetySettings",
    "safety_settings",
    "generationConfig",
    "generation_config",
    "cachedContent",
    "cached_content",
];

/// The data fields of a `Part`, of which each part holds exactly one.
const PART_DATA: &[&str] = &[
    "text",
    "inlineData",
    "inline_data",
    "fileData",
    "file_data",
    "functionCall",
    "function_call",
    "functionResponse",
    "function_response",
    "executableCode",
    "executable_code",
    "codeExecutionResult",
    "code_execution_result",
];

/// What the real API answers a request without any credentials.
const UNREGISTERED: &str = "Method doesn't allow unregistered callers (callers without established identity). Please use API Key or other form of API consumer identity to call this API.";

/// The methods served on a model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Method {
    /// `generateContent`: one JSON response.
    Generate,
    /// `streamGenerateContent`: server-sent events with `alt=sse`, else a JSON array.
    Stream,
    /// `countTokens`: `{"totalTokens": N}`, the model not asked.
    CountTokens,
}

/// The error the real Gemini API sends for an API key it does not know (HTTP 400,
/// `INVALID_ARGUMENT`, reason `API_KEY_INVALID`) — for a model that refuses the delegate's key.
pub fn gemini_invalid_api_key() -> Reply {
    let message = "API key not valid. Please pass a valid API key.";
    Reply::Json(
        400,
        vec![],
        json!({"error": {
            "code": 400,
            "message": message,
            "status": "INVALID_ARGUMENT",
            "details": [
                {
                    "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                    "reason": "API_KEY_INVALID",
                    "domain": "googleapis.com",
                    "metadata": {"service": "generativelanguage.googleapis.com"},
                },
                {
                    "@type": "type.googleapis.com/google.rpc.LocalizedMessage",
                    "locale": "en-US",
                    "message": message,
                },
            ],
        }}),
    )
}

/// `POST /v1beta/models/{target}`, `target` being `MODEL:METHOD` (the path's last segment).
pub(super) async fn gemini_models(
    State(state): State<ServerState>,
    Path(target): Path<String>,
    Query(query): Query<HashMap<String, String>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let Some((model, method)) = target.rsplit_once(':').filter(|(m, _)| !m.is_empty()) else {
        return google_error(
            404,
            &format!("models/{target} is not found for API version v1beta"),
        );
    };
    let method = match method {
        "generateContent" => Method::Generate,
        "streamGenerateContent" => Method::Stream,
        "countTokens" => Method::CountTokens,
        _ => {
            return google_error(
                404,
                &format!("Method {method} is not found for models/{model} in API version v1beta"),
            );
        }
    };
    let key = headers
        .get("x-goog-api-key")
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
        .or_else(|| query.get("key").cloned());
    match key {
        None if headers.get("authorization").is_none() => return google_error(403, UNREGISTERED),
        Some(key) if key.trim().is_empty() => return refuse(gemini_invalid_api_key()),
        _ => {}
    }
    let Ok(wire) = serde_json::from_slice::<Value>(&body) else {
        return google_error(400, "Invalid JSON payload received. Unexpected token.");
    };
    if method == Method::CountTokens {
        if !wire.is_object() {
            return google_error(400, "Invalid JSON payload received. Expected an object.");
        }
        let tokens = text_length(&wire).div_ceil(4).max(1);
        return json_response(200, &[], json!({"totalTokens": tokens}));
    }
    let chat = match gemini_to_chat(model, method == Method::Stream, &wire) {
        Ok(chat) => chat,
        Err(why) => return google_error(400, &why),
    };
    let seen = Seen {
        body: chat,
        wire,
        headers: header_list(&headers),
    };
    let reply = ask(&state, seen).await;
    let (status, extra, body) = settle(&state, reply).await;
    if status != 200 {
        return json_response(status, &extra, error_body(status, &body));
    }
    let choice = &body["choices"][0];
    let parts = reply_parts(&choice["message"]);
    let finish = finish_reason(choice["finish_reason"].as_str());
    let usage = usage_metadata(&body["usage"]);
    let mut response = match method {
        Method::Stream if query.get("alt").is_some_and(|alt| alt == "sse") => {
            let events = chunks(model, parts, finish, &usage);
            sse(events.into_iter().map(|chunk| (None::<&str>, chunk)))
        }
        Method::Stream => {
            json_response(200, &[], Value::Array(chunks(model, parts, finish, &usage)))
        }
        _ => json_response(
            200,
            &[],
            generated(model, parts, Some(finish), Some(&usage)),
        ),
    };
    add_headers(&mut response, &extra);
    response
}

/// Returns `value[camel]`, else `value[snake]` (the real API takes both spellings), else null.
fn field<'a>(value: &'a Value, camel: &str, snake: &str) -> &'a Value {
    match value.get(camel) {
        Some(found) => found,
        None => &value[snake],
    }
}

/// Checks a `GenerateContentRequest` as the real API does and translates it into a
/// chat-completions body; the error is the real API's message where known.
fn gemini_to_chat(model: &str, stream: bool, wire: &Value) -> Result<Value, String> {
    let request = wire
        .as_object()
        .ok_or("Invalid JSON payload received. Expected an object.")?;
    if let Some(unknown) = request
        .keys()
        .find(|name| !REQUEST_FIELDS.contains(&name.as_str()))
    {
        return Err(format!(
            "Invalid JSON payload received. Unknown name \"{unknown}\": Cannot find field."
        ));
    }
    let contents = wire["contents"]
        .as_array()
        .filter(|contents| !contents.is_empty())
        .ok_or("* GenerateContentRequest.contents: contents is not specified\n")?;
    let mut messages = Vec::new();
    let system = field(wire, "systemInstruction", "system_instruction");
    if !system.is_null() {
        let parts = system["parts"]
            .as_array()
            .filter(|parts| !parts.is_empty())
            .ok_or("* GenerateContentRequest.system_instruction.parts: contents.parts must not be empty.\n")?;
        let text: Vec<&str> = parts.iter().filter_map(|p| p["text"].as_str()).collect();
        messages.push(json!({"role": "system", "content": text.join("\n")}));
    }
    // The calls of the previous turn, when it was a model turn calling functions: (id, name).
    let mut open_calls: Vec<(String, String)> = Vec::new();
    for (i, content) in contents.iter().enumerate() {
        let role = match &content["role"] {
            Value::Null => "user",
            Value::String(role) if role == "user" || role == "model" => role.as_str(),
            _ => return Err("Please use a valid role: user, model.".to_owned()),
        };
        let parts = content["parts"]
            .as_array()
            .filter(|parts| !parts.is_empty())
            .ok_or_else(|| {
                format!(
                    "* GenerateContentRequest.contents[{i}].parts: contents.parts must not be empty.\n"
                )
            })?;
        for (j, part) in parts.iter().enumerate() {
            if PART_DATA
                .iter()
                .filter(|name| part.get(**name).is_some())
                .count()
                != 1
            {
                return Err(format!(
                    "* GenerateContentRequest.contents[{i}].parts[{j}].data: required oneof field 'data' must have one initialized field\n"
                ));
            }
        }
        let calls: Vec<&Value> = parts
            .iter()
            .map(|p| field(p, "functionCall", "function_call"))
            .filter(|call| !call.is_null())
            .collect();
        let responses: Vec<&Value> = parts
            .iter()
            .map(|p| field(p, "functionResponse", "function_response"))
            .filter(|response| !response.is_null())
            .collect();
        let texts: Vec<&str> = parts
            .iter()
            .filter(|p| p["thought"] != true)
            .filter_map(|p| p["text"].as_str())
            .collect();
        if !open_calls.is_empty() && (role != "user" || responses.len() != open_calls.len()) {
            return Err(format!(
                "Please ensure that the number of function response parts is equal to the number of function call parts of the function call turn (contents[{i}] answers {} of {} calls).",
                responses.len(),
                open_calls.len()
            ));
        }
        if open_calls.is_empty() && !responses.is_empty() {
            return Err(format!(
                "Please ensure that function response turn comes immediately after a function call turn (contents[{i}])."
            ));
        }
        if role == "user" {
            if !calls.is_empty() {
                return Err(format!(
                    "* GenerateContentRequest.contents[{i}]: a functionCall part must be in a model turn\n"
                ));
            }
            let mut answered = vec![false; open_calls.len()];
            for response in responses {
                let name = response["name"].as_str().unwrap_or_default();
                let by_id = response["id"].as_str().and_then(|id| {
                    open_calls
                        .iter()
                        .position(|(call_id, _)| call_id == id)
                        .filter(|&k| !answered[k])
                });
                let by_name =
                    || (0..open_calls.len()).find(|&k| !answered[k] && open_calls[k].1 == name);
                let Some(k) = by_id.or_else(by_name).filter(|&k| open_calls[k].1 == name) else {
                    return Err(format!(
                        "* GenerateContentRequest.contents[{i}]: functionResponse {name:?} answers no functionCall of the function call turn\n"
                    ));
                };
                answered[k] = true;
                let output = &response["response"];
                let content = match output["output"].as_str() {
                    Some(text) if output.as_object().is_some_and(|o| o.len() == 1) => {
                        text.to_owned()
                    }
                    _ => output.to_string(),
                };
                messages.push(
                    json!({"role": "tool", "tool_call_id": open_calls[k].0, "content": content}),
                );
            }
            open_calls.clear();
            if !texts.is_empty() || answered.is_empty() {
                messages.push(json!({"role": "user", "content": texts.join("\n")}));
            }
        } else {
            // (A model turn with functionResponse parts was refused above: none was open.)
            let text = texts.concat();
            let content = if text.is_empty() {
                Value::Null
            } else {
                Value::String(text)
            };
            let mut message = json!({"role": "assistant", "content": content});
            let mut tool_calls = Vec::new();
            for (k, call) in calls.iter().enumerate() {
                let name = call["name"].as_str().unwrap_or_default().to_owned();
                if name.is_empty() {
                    return Err(format!(
                        "* GenerateContentRequest.contents[{i}]: a functionCall needs a name\n"
                    ));
                }
                let id = call["id"]
                    .as_str()
                    .filter(|id| !id.is_empty())
                    .map_or_else(|| format!("call_{i}_{k}"), str::to_owned);
                let args = if call["args"].is_null() {
                    json!({})
                } else {
                    call["args"].clone()
                };
                tool_calls.push(json!({
                    "id": id,
                    "type": "function",
                    "function": {"name": name, "arguments": args.to_string()},
                }));
                open_calls.push((id, name));
            }
            if !tool_calls.is_empty() {
                message["tool_calls"] = Value::Array(tool_calls);
            }
            messages.push(message);
        }
    }
    let mut chat = json!({"model": model, "messages": messages});
    if stream {
        chat["stream"] = json!(true);
    }
    let tools = chat_tools(&wire["tools"])?;
    if !tools.is_empty() {
        chat["tools"] = Value::Array(tools);
    }
    let config = field(wire, "generationConfig", "generation_config");
    for (camel, snake, name) in [
        ("temperature", "temperature", "temperature"),
        ("topP", "top_p", "top_p"),
        ("maxOutputTokens", "max_output_tokens", "max_tokens"),
        ("stopSequences", "stop_sequences", "stop"),
    ] {
        let value = field(config, camel, snake);
        if !value.is_null() {
            chat[name] = value.clone();
        }
    }
    let schema = field(config, "responseJsonSchema", "response_json_schema");
    let openapi = field(config, "responseSchema", "response_schema");
    if !schema.is_null() || !openapi.is_null() {
        let schema = if schema.is_null() {
            json_schema(openapi)
        } else {
            schema.clone()
        };
        chat["response_format"] =
            json!({"type": "json_schema", "json_schema": {"name": "response", "schema": schema}});
    } else if field(config, "responseMimeType", "response_mime_type").as_str()
        == Some("application/json")
    {
        chat["response_format"] = json!({"type": "json_object"});
    }
    Ok(chat)
}

/// Translates `tools[].functionDeclarations` into chat-completions `tools` (other tools, such
/// as Google Search, have no chat equivalent and are left out).
fn chat_tools(tools: &Value) -> Result<Vec<Value>, String> {
    let mut chat = Vec::new();
    for (t, tool) in tools.as_array().into_iter().flatten().enumerate() {
        let declarations = field(tool, "functionDeclarations", "function_declarations");
        for (d, declaration) in declarations.as_array().into_iter().flatten().enumerate() {
            let name = declaration["name"].as_str().unwrap_or_default();
            if !valid_function_name(name) {
                return Err(format!(
                    "* GenerateContentRequest.tools[{t}].function_declarations[{d}].name: Invalid function name. Must start with a letter or an underscore. Must be alphameric (a-z, A-Z, 0-9), underscores (_), dots (.), colons (:), or dashes (-), with a maximum length of 64.\n"
                ));
            }
            let schema = field(
                declaration,
                "parametersJsonSchema",
                "parameters_json_schema",
            );
            let openapi = &declaration["parameters"];
            if !schema.is_null() && !openapi.is_null() {
                return Err(format!(
                    "* GenerateContentRequest.tools[{t}].function_declarations[{d}]: parameters and parameters_json_schema cannot both be set\n"
                ));
            }
            let mut function = json!({"name": name});
            if let Some(description) = declaration["description"].as_str() {
                function["description"] = json!(description);
            }
            if !schema.is_null() {
                function["parameters"] = schema.clone();
            } else if !openapi.is_null() {
                function["parameters"] = json_schema(openapi);
            }
            chat.push(json!({"type": "function", "function": function}));
        }
    }
    Ok(chat)
}

/// Returns true for a name the real API takes for a function: a letter or underscore, then
/// letters, digits, `_`, `.`, `:` or `-`, at most 64 in all.
fn valid_function_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|first| first.is_ascii_alphabetic() || first == '_')
        && name.len() <= 64
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | ':' | '-'))
}

/// An OpenAPI-style schema (`"type": "OBJECT"`, as in `parameters` and `responseSchema`) as
/// JSON Schema (types in lower case).
fn json_schema(schema: &Value) -> Value {
    match schema {
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(name, value)| {
                    let value = match (name.as_str(), value) {
                        ("type", Value::String(kind)) => Value::String(kind.to_lowercase()),
                        _ => json_schema(value),
                    };
                    (name.clone(), value)
                })
                .collect::<Map<String, Value>>(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(json_schema).collect()),
        other => other.clone(),
    }
}

/// Returns the number of bytes of text in `value`'s `text` fields (for `countTokens`).
fn text_length(value: &Value) -> u64 {
    match value {
        Value::Object(map) => map
            .iter()
            .map(|(name, value)| match value {
                Value::String(text) if name.as_str() == "text" => text.len() as u64,
                other => text_length(other),
            })
            .sum(),
        Value::Array(items) => items.iter().map(text_length).sum(),
        _ => 0,
    }
}

/// The parts of a chat-completions reply's `message`: its text, then one `functionCall` per
/// tool call (with the call's id, arguments parsed from their JSON string).
fn reply_parts(message: &Value) -> Vec<Value> {
    let mut parts = Vec::new();
    let text = match &message["content"] {
        Value::String(text) => text.clone(),
        Value::Array(items) => items.iter().filter_map(|i| i["text"].as_str()).collect(),
        _ => String::new(),
    };
    if !text.is_empty() {
        parts.push(json!({"text": text}));
    }
    for call in message["tool_calls"].as_array().into_iter().flatten() {
        let args = call["function"]["arguments"]
            .as_str()
            .and_then(|a| serde_json::from_str::<Value>(a).ok())
            .unwrap_or_else(|| json!({}));
        let mut function_call = json!({"name": call["function"]["name"], "args": args});
        if let Some(id) = call["id"].as_str() {
            function_call["id"] = json!(id);
        }
        parts.push(json!({"functionCall": function_call}));
    }
    parts
}

/// The Gemini `finishReason` of a chat-completions `finish_reason` (a function call ends in
/// `STOP`, as with the real API).
fn finish_reason(reason: Option<&str>) -> &'static str {
    match reason {
        Some("length") => "MAX_TOKENS",
        Some("content_filter") => "SAFETY",
        _ => "STOP",
    }
}

/// The `usageMetadata` of a chat-completions `usage`.
fn usage_metadata(usage: &Value) -> Value {
    let prompt = usage["prompt_tokens"].as_u64().unwrap_or(0);
    let output = usage["completion_tokens"].as_u64().unwrap_or(0);
    json!({
        "promptTokenCount": prompt,
        "candidatesTokenCount": output,
        "totalTokenCount": prompt + output,
    })
}

/// One `GenerateContentResponse`: a candidate with `parts`, and its finish reason and the usage
/// when given.
fn generated(model: &str, parts: Vec<Value>, finish: Option<&str>, usage: Option<&Value>) -> Value {
    let mut candidate = json!({"content": {"role": "model", "parts": parts}, "index": 0});
    if let Some(finish) = finish {
        candidate["finishReason"] = json!(finish);
    }
    let mut response =
        json!({"candidates": [candidate], "modelVersion": model, "responseId": "fake-response"});
    if let Some(usage) = usage {
        response["usageMetadata"] = usage.clone();
    }
    response
}

/// A stream's chunks: one per part, the last with the finish reason and the usage.
fn chunks(model: &str, parts: Vec<Value>, finish: &str, usage: &Value) -> Vec<Value> {
    if parts.is_empty() {
        return vec![generated(model, parts, Some(finish), Some(usage))];
    }
    let last = parts.len() - 1;
    parts
        .into_iter()
        .enumerate()
        .map(|(k, part)| {
            if k == last {
                generated(model, vec![part], Some(finish), Some(usage))
            } else {
                generated(model, vec![part], None, None)
            }
        })
        .collect()
}

/// The Google RPC status name of an HTTP status.
fn status_name(code: u16) -> &'static str {
    match code {
        400 => "INVALID_ARGUMENT",
        401 => "UNAUTHENTICATED",
        403 => "PERMISSION_DENIED",
        404 => "NOT_FOUND",
        409 => "ABORTED",
        429 => "RESOURCE_EXHAUSTED",
        499 => "CANCELLED",
        500 => "INTERNAL",
        501 => "NOT_IMPLEMENTED",
        503 => "UNAVAILABLE",
        504 => "DEADLINE_EXCEEDED",
        _ => "UNKNOWN",
    }
}

/// The error body of a non-200 reply: a Google error as it is (one with a `status` name, such
/// as [`gemini_invalid_api_key`]'s), else Google's shape around the reply's message.
fn error_body(status: u16, body: &Value) -> Value {
    if body["error"]["status"].is_string() {
        return body.clone();
    }
    let message = body["error"]["message"]
        .as_str()
        .map_or_else(|| format!("fake status {status}"), str::to_owned);
    json!({"error": {"code": status, "message": message, "status": status_name(status)}})
}

/// A Google error response.
fn google_error(status: u16, message: &str) -> Response {
    json_response(
        status,
        &[],
        json!({"error": {"code": status, "message": message, "status": status_name(status)}}),
    )
}

/// Sends a reply decided before the model is asked (not counted in flight).
fn refuse(reply: Reply) -> Response {
    match reply {
        Reply::Json(status, headers, body) => json_response(status, &headers, body),
        _ => google_error(500, "a refusal is a JSON reply"),
    }
}
