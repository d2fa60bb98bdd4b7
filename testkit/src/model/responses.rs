//! OpenAI's Responses API (`POST /v1/responses`) as Codex CLI speaks it: a streamed request
//! (`"stream": true`, answered with server-sent events) carrying the whole conversation as
//! `input` items, or a plain one (answered with one `Response` object).
//!
//! Validated like the real service: a Bearer key in `Authorization` (else 401), no unknown
//! top-level fields, a `model`, `input` as a string or a list of items of known types (else a 400
//! `invalid_request_error` naming the `param`), each item's content parts of known types, every
//! `function_call_output` / `custom_tool_call_output` answering an earlier call of its kind in the
//! input and every call answered. The request is translated into
//! chat-completions terms for the model:
//!
//! - `instructions`, and `system` / `developer` messages, as `system` messages; `user` and
//!   `assistant` messages as such, their `input_text` / `output_text` / `refusal` parts joined by
//!   newlines (images, files and audio are left out);
//! - `function_call` items as an assistant message's `tool_calls` (consecutive calls, and a call
//!   right after the assistant's text, in one message), `function_call_output` items as `tool`
//!   messages;
//! - `custom_tool_call` items (Codex's freeform `apply_patch`) as tool calls whose arguments are
//!   `{"input": INPUT}`, their outputs as `tool` messages;
//! - `reasoning` items left out; Codex's `additional_tools` items (sent with its own catalogue's
//!   "responses lite" models) add their tools;
//! - `function` tools as chat function tools; `custom` (freeform) tools as a function whose
//!   parameters are `{"type": "object", "properties": {"input": {"type": "string"}},
//!   "required": ["input"]}` (the grammar is left out); the tools of a `namespace` tool as
//!   functions named `NAMESPACE.NAME`; hosted tools (`web_search`, `tool_search`, …) left out;
//! - `tool_choice`, `parallel_tool_calls`, `max_output_tokens` (as `max_tokens`), `temperature`,
//!   `top_p`, `reasoning.effort` (as `reasoning_effort`), a `text.format` JSON schema (as
//!   `response_format`) and `stream` carried over.
//!
//! The model's chat-completion reply is translated back: its text as a `message` item, each
//! tool call as a `function_call` item — or a `custom_tool_call` item, `input` taken from the
//! arguments' `"input"`, when the request declared that tool as custom — with the tool call's id
//! as `call_id` (and a `namespace` for a `NAMESPACE.NAME` call). Streamed as the real service
//! streams it: `response.created`, `response.in_progress`, per item `response.output_item.added`,
//! its deltas and `response.output_item.done`, then `response.completed` (or
//! `response.incomplete` for a `length` finish) with the usage. Codex itself needs only each
//! item's `response.output_item.done` and a final `response.completed`. Another status becomes
//! OpenAI's error JSON with that status.

use axum::body::Bytes;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::Response;
use serde_json::{Value, json};

use super::{
    Reply, Seen, ServerState, add_headers, ask, header_list, json_response, settle, sse, tool_call,
};

/// The request fields taken: the Responses API's, and Codex's `client_metadata`.
const REQUEST_FIELDS: &[&str] = &[
    "background",
    "client_metadata",
    "context_management",
    "conversation",
    "include",
    "input",
    "instructions",
    "max_output_tokens",
    "max_tool_calls",
    "metadata",
    "model",
    "parallel_tool_calls",
    "previous_response_id",
    "prompt",
    "prompt_cache_key",
    "prompt_cache_retention",
    "reasoning",
    "safety_identifier",
    "service_tier",
    "store",
    "stream",
    "stream_options",
    "temperature",
    "text",
    "tool_choice",
    "tools",
    "top_logprobs",
    "top_p",
    "truncation",
    "user",
];

/// The input item types served.
const ITEM_TYPES: &[&str] = &[
    "message",
    "function_call",
    "function_call_output",
    "custom_tool_call",
    "custom_tool_call_output",
    "reasoning",
    "additional_tools",
];

/// The content part types taken in a message or a tool output.
const PART_TYPES: &[&str] = &[
    "input_text",
    "input_image",
    "input_file",
    "input_audio",
    "output_text",
    "refusal",
];

/// What the real API answers a request without a key.
const NO_KEY: &str = "You didn't provide an API key. You need to provide your API key in an Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY), or as the password field (with blank username) if you're accessing the API from your browser and are prompted for a username. You can obtain an API key from https://platform.openai.com/account/API-keys.";

/// The parameters of a custom (freeform) tool in chat terms: its input as one string.
fn custom_parameters() -> Value {
    json!({
        "type": "object",
        "properties": {"input": {"type": "string"}},
        "required": ["input"],
    })
}

/// The error the real API sends for a key it does not know (HTTP 401, `invalid_api_key`) — for
/// a model that refuses the delegate's key.
pub fn invalid_api_key() -> Reply {
    Reply::Json(
        401,
        vec![],
        json!({"error": {
            "message": "Incorrect API key provided",
            "type": "invalid_request_error",
            "param": null,
            "code": "invalid_api_key",
        }}),
    )
}

/// A call of Codex's `apply_patch` tool with `patch` (7 completion tokens): a chat tool call
/// whose arguments are `{"input": PATCH}`, sent to Codex as a `custom_tool_call` when it declared
/// `apply_patch` as a custom tool (as it does), else as a `function_call`.
pub fn apply_patch(body: &Value, id: &str, patch: &str) -> Reply {
    tool_call(body, id, "apply_patch", &json!({"input": patch}))
}

/// An `apply_patch` patch adding the file `path` (relative to the workspace) with the lines of
/// `contents`, each ending in a newline (`"hi"` makes a file holding `"hi\n"`).
pub fn add_file_patch(path: &str, contents: &str) -> String {
    let mut patch = format!("*** Begin Patch\n*** Add File: {path}\n");
    for line in contents.lines() {
        patch.push('+');
        patch.push_str(line);
        patch.push('\n');
    }
    patch.push_str("*** End Patch\n");
    patch
}

/// A Codex model catalogue (the JSON file named by `-c model_catalog_json="PATH"`) of one model,
/// `slug`, offered the `apply_patch` tool and a shell (`exec_command`): Codex offers
/// `apply_patch` only to models of its catalogue, and a catalogue given replaces the built-in
/// one. Its fields are the fewest Codex 0.169.0 takes.
pub fn codex_model_catalog(slug: &str) -> Value {
    json!({"models": [{
        "slug": slug,
        "display_name": slug,
        "base_instructions": "You are a coding agent. Edit files with the apply_patch tool.",
        "apply_patch_tool_type": "freeform",
        "shell_type": "shell_command",
        "supported_reasoning_levels": [],
        "visibility": "list",
        "supported_in_api": true,
        "priority": 1,
        "support_verbosity": false,
        "truncation_policy": {"mode": "tokens", "limit": 10000},
        "experimental_supported_tools": [],
    }]})
}

/// Why a request is refused, as the real API reports it.
#[derive(Debug)]
struct Refusal {
    /// The message.
    message: String,
    /// The parameter at fault, if one is.
    param: Option<String>,
    /// The error code, if there is one.
    code: Option<&'static str>,
}

impl Refusal {
    /// A refusal of `param` (when given) with `message` and `code`.
    fn new(message: impl Into<String>, param: Option<&str>, code: Option<&'static str>) -> Self {
        Refusal {
            message: message.into(),
            param: param.map(str::to_owned),
            code,
        }
    }

    /// A required parameter missing.
    fn missing(param: &str) -> Self {
        Self::new(
            format!("Missing required parameter: '{param}'."),
            Some(param),
            Some("missing_required_parameter"),
        )
    }

    /// A parameter of the wrong JSON type.
    fn invalid_type(param: &str, expected: &str) -> Self {
        Self::new(
            format!("Invalid type for '{param}': expected {expected}."),
            Some(param),
            Some("invalid_type"),
        )
    }

    /// A value not among the `supported` ones.
    fn invalid_value(param: &str, value: &str, supported: &[&str]) -> Self {
        let supported: Vec<String> = supported.iter().map(|s| format!("'{s}'")).collect();
        Self::new(
            format!(
                "Invalid value: '{value}'. Supported values are: {}.",
                supported.join(", ")
            ),
            Some(param),
            Some("invalid_value"),
        )
    }

    /// The 400 response.
    fn response(&self) -> Response {
        json_response(
            400,
            &[],
            json!({"error": {
                "message": self.message,
                "type": "invalid_request_error",
                "param": self.param,
                "code": self.code,
            }}),
        )
    }
}

/// What the reply's translation needs to know of the request's tools.
#[derive(Debug, Default)]
struct Tools {
    /// The chat names of the custom (freeform) tools: their calls go back as `custom_tool_call`
    /// items.
    custom: Vec<String>,
    /// The namespaces declared: a call of `NAMESPACE.NAME` goes back as `name` and `namespace`.
    namespaces: Vec<String>,
}

/// `POST /v1/responses`.
pub(super) async fn responses(
    State(state): State<ServerState>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let key = headers
        .get("authorization")
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.strip_prefix("Bearer "))
        .map(str::trim)
        .unwrap_or_default();
    if key.is_empty() {
        return json_response(
            401,
            &[],
            json!({"error": {
                "message": NO_KEY,
                "type": "invalid_request_error",
                "param": null,
                "code": null,
            }}),
        );
    }
    let Ok(wire) = serde_json::from_slice::<Value>(&body) else {
        return Refusal::new(
            "We could not parse the JSON body of your request. (HINT: This likely means you aren't using your HTTP library correctly. The OpenAI API expects a JSON payload, but what was sent was not valid JSON.)",
            None,
            None,
        )
        .response();
    };
    let (chat, tools) = match responses_to_chat(&wire) {
        Ok(translated) => translated,
        Err(refusal) => return refusal.response(),
    };
    let stream = wire["stream"] == true;
    let seen = Seen {
        body: chat,
        wire: wire.clone(),
        headers: header_list(&headers),
    };
    let reply = ask(&state, seen).await;
    let (status, extra, body) = settle(&state, reply).await;
    if status != 200 {
        return json_response(status, &extra, error_body(status, &body));
    }
    let choice = &body["choices"][0];
    let items = output_items(&choice["message"], &tools);
    let incomplete = choice["finish_reason"] == "length";
    let response = response_object(&wire, items, usage(&body["usage"]), incomplete);
    let mut answer = if stream {
        sse(events(&response)
            .into_iter()
            .map(|(name, data)| (Some(name), data)))
    } else {
        json_response(200, &[], response)
    };
    add_headers(&mut answer, &extra);
    answer
}

/// Checks a Responses API request as the real API does and translates it into a
/// chat-completions body; returns it with what the reply's translation needs of the tools.
fn responses_to_chat(wire: &Value) -> Result<(Value, Tools), Refusal> {
    let request = wire
        .as_object()
        .ok_or_else(|| Refusal::new("The request body must be a JSON object.", None, None))?;
    if let Some(unknown) = request
        .keys()
        .find(|name| !REQUEST_FIELDS.contains(&name.as_str()))
    {
        return Err(Refusal::new(
            format!("Unknown parameter: '{unknown}'."),
            Some(unknown.as_str()),
            Some("unknown_parameter"),
        ));
    }
    let model = match &wire["model"] {
        Value::Null => return Err(Refusal::missing("model")),
        Value::String(model) if !model.is_empty() => model.clone(),
        _ => return Err(Refusal::invalid_type("model", "a non-empty string")),
    };
    if !wire["stream"].is_null() && !wire["stream"].is_boolean() {
        return Err(Refusal::invalid_type("stream", "a boolean"));
    }
    let mut messages = Vec::new();
    match &wire["instructions"] {
        Value::Null => {}
        Value::String(text) => messages.push(json!({"role": "system", "content": text})),
        _ => return Err(Refusal::invalid_type("instructions", "a string")),
    }
    let mut tools = Tools::default();
    let mut chat_tools = Vec::new();
    declare_tools(&wire["tools"], "tools", &mut tools, &mut chat_tools)?;
    match &wire["input"] {
        Value::Null => return Err(Refusal::missing("input")),
        Value::String(text) => messages.push(json!({"role": "user", "content": text})),
        Value::Array(items) => {
            input_messages(items, &mut messages, &mut tools, &mut chat_tools)?;
        }
        _ => return Err(Refusal::invalid_type("input", "a string or an array")),
    }
    let mut chat = json!({"model": model, "messages": messages});
    if wire["stream"] == true {
        chat["stream"] = json!(true);
    }
    if !chat_tools.is_empty() {
        chat["tools"] = Value::Array(chat_tools);
        if let Some(parallel) = wire.get("parallel_tool_calls").filter(|p| p.is_boolean()) {
            chat["parallel_tool_calls"] = parallel.clone();
        }
    }
    match &wire["tool_choice"] {
        Value::String(choice) => chat["tool_choice"] = json!(choice),
        Value::Object(choice) if choice.get("type").is_some_and(|t| *t == "function") => {
            chat["tool_choice"] =
                json!({"type": "function", "function": {"name": choice.get("name")}});
        }
        _ => {}
    }
    for (from, to) in [
        ("max_output_tokens", "max_tokens"),
        ("temperature", "temperature"),
        ("top_p", "top_p"),
    ] {
        if let Some(value) = wire.get(from).filter(|v| !v.is_null()) {
            chat[to] = value.clone();
        }
    }
    if let Some(effort) = wire["reasoning"]["effort"].as_str() {
        chat["reasoning_effort"] = json!(effort);
    }
    let format = &wire["text"]["format"];
    if format["type"] == "json_schema" {
        let mut schema = json!({"name": format["name"], "schema": format["schema"]});
        if let Some(strict) = format.get("strict").filter(|s| s.is_boolean()) {
            schema["strict"] = strict.clone();
        }
        chat["response_format"] = json!({"type": "json_schema", "json_schema": schema});
    } else if format["type"] == "json_object" {
        chat["response_format"] = json!({"type": "json_object"});
    }
    Ok((chat, tools))
}

/// Translates the `input` items into chat messages (appended to `messages`), and the tools of
/// `additional_tools` items into chat tools.
fn input_messages(
    items: &[Value],
    messages: &mut Vec<Value>,
    tools: &mut Tools,
    chat_tools: &mut Vec<Value>,
) -> Result<(), Refusal> {
    // The calls so far: (call id, item type), and the call ids answered.
    let mut calls: Vec<(String, &'static str)> = Vec::new();
    let mut answered: Vec<String> = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let param = format!("input[{i}]");
        if !item.is_object() {
            return Err(Refusal::invalid_type(&param, "an object"));
        }
        let kind = match &item["type"] {
            // An easy input message: a role and content, no type.
            Value::Null if !item["role"].is_null() => "message",
            Value::Null => return Err(Refusal::missing(&format!("{param}.type"))),
            Value::String(kind) => kind.as_str(),
            _ => return Err(Refusal::invalid_type(&format!("{param}.type"), "a string")),
        };
        match kind {
            "message" => {
                let role = match item["role"].as_str() {
                    Some("system" | "developer") => "system",
                    Some(role @ ("user" | "assistant")) => role,
                    Some(other) => {
                        return Err(Refusal::invalid_value(
                            &format!("{param}.role"),
                            other,
                            &["assistant", "developer", "system", "user"],
                        ));
                    }
                    None => return Err(Refusal::missing(&format!("{param}.role"))),
                };
                let text = content_text(&item["content"], &format!("{param}.content"))?;
                messages.push(json!({"role": role, "content": text}));
            }
            "function_call" | "custom_tool_call" => {
                let call_id = string(item, &param, "call_id")?;
                let mut name = string(item, &param, "name")?.to_owned();
                if let Some(namespace) = item["namespace"].as_str().filter(|n| !n.is_empty()) {
                    name = format!("{namespace}.{name}");
                }
                let arguments = if kind == "function_call" {
                    string(item, &param, "arguments")?.to_owned()
                } else {
                    json!({"input": string(item, &param, "input")?}).to_string()
                };
                let call = json!({
                    "id": call_id,
                    "type": "function",
                    "function": {"name": name, "arguments": arguments},
                });
                let last = messages
                    .last_mut()
                    .filter(|last| last["role"] == "assistant");
                if let Some(last) = last {
                    if let Some(Value::Array(list)) = last.get_mut("tool_calls") {
                        list.push(call);
                    } else {
                        last["tool_calls"] = json!([call]);
                    }
                } else {
                    messages
                        .push(json!({"role": "assistant", "content": null, "tool_calls": [call]}));
                }
                calls.push((
                    call_id.to_owned(),
                    if kind == "function_call" {
                        "function_call"
                    } else {
                        "custom_tool_call"
                    },
                ));
            }
            "function_call_output" | "custom_tool_call_output" => {
                let call_id = string(item, &param, "call_id")?;
                let (call_kind, what) = if kind == "function_call_output" {
                    ("function_call", "function call")
                } else {
                    ("custom_tool_call", "custom tool call")
                };
                if !calls.iter().any(|(id, k)| id == call_id && *k == call_kind) {
                    return Err(Refusal::new(
                        format!("No tool call found for {what} output with call_id {call_id}."),
                        Some("input"),
                        None,
                    ));
                }
                let output = match &item["output"] {
                    Value::Null => return Err(Refusal::missing(&format!("{param}.output"))),
                    output => content_text(output, &format!("{param}.output"))?,
                };
                messages.push(json!({"role": "tool", "tool_call_id": call_id, "content": output}));
                answered.push(call_id.to_owned());
            }
            "reasoning" => {}
            "additional_tools" => {
                declare_tools(&item["tools"], &format!("{param}.tools"), tools, chat_tools)?;
            }
            other => {
                return Err(Refusal::invalid_value(
                    &format!("{param}.type"),
                    other,
                    ITEM_TYPES,
                ));
            }
        }
    }
    if let Some((id, kind)) = calls.iter().find(|(id, _)| !answered.contains(id)) {
        let what = if *kind == "function_call" {
            "function call"
        } else {
            "custom tool call"
        };
        return Err(Refusal::new(
            format!("No tool output found for {what} {id}."),
            Some("input"),
            None,
        ));
    }
    Ok(())
}

/// Returns the non-empty string field `name` of the item at `param`.
fn string<'a>(item: &'a Value, param: &str, name: &str) -> Result<&'a str, Refusal> {
    match &item[name] {
        Value::String(value) if !value.is_empty() => Ok(value.as_str()),
        Value::Null => Err(Refusal::missing(&format!("{param}.{name}"))),
        _ => Err(Refusal::invalid_type(
            &format!("{param}.{name}"),
            "a non-empty string",
        )),
    }
}

/// The text of a message's content or a tool's output (`param`): a string, or the text of its
/// parts joined by newlines (images, files and audio have none).
fn content_text(content: &Value, param: &str) -> Result<String, Refusal> {
    let parts = match content {
        Value::String(text) => return Ok(text.clone()),
        Value::Array(parts) => parts,
        Value::Null => return Err(Refusal::missing(param)),
        _ => return Err(Refusal::invalid_type(param, "a string or an array")),
    };
    let mut texts = Vec::new();
    for (j, part) in parts.iter().enumerate() {
        let part_param = format!("{param}[{j}]");
        let kind = match part["type"].as_str() {
            Some(kind) if PART_TYPES.contains(&kind) => kind,
            Some(other) => {
                return Err(Refusal::invalid_value(
                    &format!("{part_param}.type"),
                    other,
                    PART_TYPES,
                ));
            }
            None => return Err(Refusal::missing(&format!("{part_param}.type"))),
        };
        let field = match kind {
            "input_text" | "output_text" => "text",
            "refusal" => "refusal",
            _ => continue,
        };
        match part[field].as_str() {
            Some(text) => texts.push(text),
            None => return Err(Refusal::missing(&format!("{part_param}.{field}"))),
        }
    }
    Ok(texts.join("\n"))
}

/// Translates the tools at `param` into chat tools (appended to `chat`), noting the custom ones
/// and the namespaces in `tools`.
fn declare_tools(
    list: &Value,
    param: &str,
    tools: &mut Tools,
    chat: &mut Vec<Value>,
) -> Result<(), Refusal> {
    let list = match list {
        Value::Null => return Ok(()),
        Value::Array(list) => list,
        _ => return Err(Refusal::invalid_type(param, "an array")),
    };
    for (t, tool) in list.iter().enumerate() {
        declare_tool(tool, &format!("{param}[{t}]"), None, tools, chat)?;
    }
    Ok(())
}

/// Translates one tool (at `param`, in `namespace` when given) into chat tools.
fn declare_tool(
    tool: &Value,
    param: &str,
    namespace: Option<&str>,
    tools: &mut Tools,
    chat: &mut Vec<Value>,
) -> Result<(), Refusal> {
    let kind = match &tool["type"] {
        Value::String(kind) => kind.as_str(),
        Value::Null => return Err(Refusal::missing(&format!("{param}.type"))),
        _ => return Err(Refusal::invalid_type(&format!("{param}.type"), "a string")),
    };
    match kind {
        "function" | "custom" => {
            let name = string(tool, param, "name")?;
            let name = match namespace {
                Some(namespace) => format!("{namespace}.{name}"),
                None => name.to_owned(),
            };
            let parameters = if kind == "custom" {
                tools.custom.push(name.clone());
                custom_parameters()
            } else {
                match &tool["parameters"] {
                    Value::Null => json!({"type": "object", "properties": {}}),
                    parameters => parameters.clone(),
                }
            };
            let mut function = json!({"name": name});
            if let Some(description) = tool["description"].as_str() {
                function["description"] = json!(description);
            }
            function["parameters"] = parameters;
            if let Some(strict) = tool.get("strict").filter(|s| s.is_boolean()) {
                function["strict"] = strict.clone();
            }
            chat.push(json!({"type": "function", "function": function}));
        }
        "namespace" => {
            let name = string(tool, param, "name")?;
            tools.namespaces.push(name.to_owned());
            let children = match &tool["tools"] {
                Value::Array(children) => children,
                Value::Null => return Err(Refusal::missing(&format!("{param}.tools"))),
                _ => return Err(Refusal::invalid_type(&format!("{param}.tools"), "an array")),
            };
            for (k, child) in children.iter().enumerate() {
                declare_tool(
                    child,
                    &format!("{param}.tools[{k}]"),
                    Some(name),
                    tools,
                    chat,
                )?;
            }
        }
        // Hosted tools (web_search, tool_search, image_generation, …) have no chat equivalent.
        _ => {}
    }
    Ok(())
}

/// The output items of a chat-completions reply's `message`: its text as a `message` item, then
/// one `function_call` or `custom_tool_call` item per tool call.
fn output_items(message: &Value, tools: &Tools) -> Vec<Value> {
    let mut items = Vec::new();
    let text = match &message["content"] {
        Value::String(text) => text.clone(),
        Value::Array(parts) => parts.iter().filter_map(|p| p["text"].as_str()).collect(),
        _ => String::new(),
    };
    if !text.is_empty() {
        items.push(json!({
            "id": "msg_fake",
            "type": "message",
            "status": "completed",
            "role": "assistant",
            "content": [{"type": "output_text", "text": text, "annotations": []}],
        }));
    }
    for (k, call) in message["tool_calls"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        let call_id = call["id"]
            .as_str()
            .filter(|id| !id.is_empty())
            .map_or_else(|| format!("call_fake_{k}"), str::to_owned);
        let name = call["function"]["name"].as_str().unwrap_or_default();
        let arguments = call["function"]["arguments"].as_str().unwrap_or("{}");
        let mut item = if tools.custom.iter().any(|custom| custom == name) {
            let input = serde_json::from_str::<Value>(arguments)
                .ok()
                .and_then(|args| args["input"].as_str().map(str::to_owned))
                .unwrap_or_else(|| arguments.to_owned());
            json!({
                "id": format!("ctc_{call_id}"),
                "type": "custom_tool_call",
                "status": "completed",
                "call_id": call_id,
                "name": name,
                "input": input,
            })
        } else {
            json!({
                "id": format!("fc_{call_id}"),
                "type": "function_call",
                "status": "completed",
                "call_id": call_id,
                "name": name,
                "arguments": arguments,
            })
        };
        let namespaced = name
            .split_once('.')
            .filter(|(namespace, _)| tools.namespaces.iter().any(|n| n == namespace));
        if let Some((namespace, short)) = namespaced {
            item["name"] = json!(short);
            item["namespace"] = json!(namespace);
        }
        items.push(item);
    }
    items
}

/// The Responses API `usage` of a chat-completions `usage`.
fn usage(usage: &Value) -> Value {
    let input = usage["prompt_tokens"].as_u64().unwrap_or(0);
    let output = usage["completion_tokens"].as_u64().unwrap_or(0);
    json!({
        "input_tokens": input,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": output,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": input + output,
    })
}

/// The `Response` object answering `wire`: done, with `items` and `usage` (incomplete for a reply
/// cut at its token limit).
fn response_object(wire: &Value, items: Vec<Value>, usage: Value, incomplete: bool) -> Value {
    let default = |name: &str, value: Value| match wire.get(name) {
        Some(given) if !given.is_null() => given.clone(),
        _ => value,
    };
    let (status, details) = if incomplete {
        ("incomplete", json!({"reason": "max_output_tokens"}))
    } else {
        ("completed", Value::Null)
    };
    json!({
        "id": "resp_fake",
        "object": "response",
        "created_at": 1_700_000_000,
        "status": status,
        "error": null,
        "incomplete_details": details,
        "instructions": default("instructions", Value::Null),
        "max_output_tokens": default("max_output_tokens", Value::Null),
        "model": wire["model"],
        "output": items,
        "parallel_tool_calls": default("parallel_tool_calls", json!(true)),
        "previous_response_id": null,
        "reasoning": default("reasoning", json!({"effort": null, "summary": null})),
        "store": default("store", json!(true)),
        "temperature": default("temperature", json!(1.0)),
        "text": default("text", json!({"format": {"type": "text"}})),
        "tool_choice": default("tool_choice", json!("auto")),
        "top_p": default("top_p", json!(1.0)),
        "truncation": default("truncation", json!("disabled")),
        "usage": usage,
        "metadata": default("metadata", json!({})),
    })
}

/// The server-sent events streaming `response` (done), each named by its `type` and numbered by
/// `sequence_number`.
fn events(response: &Value) -> Vec<(&'static str, Value)> {
    let mut opening = response.clone();
    opening["status"] = json!("in_progress");
    opening["incomplete_details"] = Value::Null;
    opening["output"] = json!([]);
    opening["usage"] = Value::Null;
    let mut events = vec![
        ("response.created", json!({"response": opening})),
        ("response.in_progress", json!({"response": opening})),
    ];
    for (index, item) in response["output"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        let id = &item["id"];
        let mut added = item.clone();
        added["status"] = json!("in_progress");
        match item["type"].as_str() {
            Some("message") => added["content"] = json!([]),
            Some("function_call") => added["arguments"] = json!(""),
            _ => added["input"] = json!(""),
        }
        events.push((
            "response.output_item.added",
            json!({"output_index": index, "item": added}),
        ));
        match item["type"].as_str() {
            Some("message") => {
                let part = &item["content"][0];
                let text = &part["text"];
                let empty = json!({"type": "output_text", "text": "", "annotations": []});
                events.push((
                    "response.content_part.added",
                    json!({
                        "item_id": id,
                        "output_index": index,
                        "content_index": 0,
                        "part": empty,
                    }),
                ));
                events.push((
                    "response.output_text.delta",
                    json!({
                        "item_id": id,
                        "output_index": index,
                        "content_index": 0,
                        "delta": text,
                        "logprobs": [],
                    }),
                ));
                events.push((
                    "response.output_text.done",
                    json!({
                        "item_id": id,
                        "output_index": index,
                        "content_index": 0,
                        "text": text,
                        "logprobs": [],
                    }),
                ));
                events.push((
                    "response.content_part.done",
                    json!({"item_id": id, "output_index": index, "content_index": 0, "part": part}),
                ));
            }
            Some("function_call") => {
                let arguments = &item["arguments"];
                events.push((
                    "response.function_call_arguments.delta",
                    json!({"item_id": id, "output_index": index, "delta": arguments}),
                ));
                events.push((
                    "response.function_call_arguments.done",
                    json!({"item_id": id, "output_index": index, "arguments": arguments}),
                ));
            }
            _ => {
                let input = &item["input"];
                events.push((
                    "response.custom_tool_call_input.delta",
                    json!({"item_id": id, "output_index": index, "delta": input}),
                ));
                events.push((
                    "response.custom_tool_call_input.done",
                    json!({"item_id": id, "output_index": index, "input": input}),
                ));
            }
        }
        events.push((
            "response.output_item.done",
            json!({"output_index": index, "item": item}),
        ));
    }
    let last = if response["status"] == "incomplete" {
        "response.incomplete"
    } else {
        "response.completed"
    };
    events.push((last, json!({"response": response})));
    events
        .into_iter()
        .enumerate()
        .map(|(n, (name, data))| {
            let mut event = json!({"type": name, "sequence_number": n});
            if let (Value::Object(event), Value::Object(data)) = (&mut event, data) {
                event.extend(data);
            }
            (name, event)
        })
        .collect()
}

/// The error type the real API gives a status.
fn error_type(status: u16) -> &'static str {
    match status {
        429 => "requests",
        500..=599 => "server_error",
        _ => "invalid_request_error",
    }
}

/// The error body of a non-200 reply: OpenAI's shape (`message`, `type`, `param`, `code`) around
/// the reply's error.
fn error_body(status: u16, body: &Value) -> Value {
    let mut error = match &body["error"] {
        Value::Object(error) => error.clone(),
        _ => serde_json::Map::new(),
    };
    error
        .entry("message")
        .or_insert_with(|| json!(format!("fake status {status}")));
    error
        .entry("type")
        .or_insert_with(|| json!(error_type(status)));
    error.entry("param").or_insert(Value::Null);
    error.entry("code").or_insert(Value::Null);
    json!({"error": error})
}
