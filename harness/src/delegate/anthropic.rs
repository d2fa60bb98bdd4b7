//! The `anthropic` delegate: Anthropic's Messages API (`POST {base_url}/v1/messages`) with tool
//! use — `x-api-key`, `anthropic-version`, transport retries with backoff and `Retry-After`, a
//! per-request timeout and token usage — continuing the same conversation across attempts.

use std::time::Duration;

use serde_json::{Map, Value, json};

use super::transport::{Transport, delegate_error, excerpt};
use super::{BoxFuture, Delegate, RequestedCall, Turn, TurnRequest};
use crate::conversation::{Message, Usage};
use crate::error::{Error, ErrorKind, Result};

/// The default `base_url`: Anthropic's own API.
pub const DEFAULT_BASE_URL: &str = "https://api.anthropic.com";
/// The default `api_key_env`.
pub const DEFAULT_API_KEY_ENV: &str = "ANTHROPIC_API_KEY";
/// The API version sent as `anthropic-version`.
pub const API_VERSION: &str = "2023-06-01";
/// `max_tokens` when the delegation file sets none (the API requires one).
pub const DEFAULT_MAX_TOKENS: u32 = 8192;

/// Settings of an Anthropic delegate.
#[derive(Debug, Clone, PartialEq)]
pub struct AnthropicSpec {
    /// Model name sent as `model`.
    pub model: String,
    /// Base URL; requests go to `{base_url}/v1/messages` (or `{base_url}/messages` when it
    /// already ends in `/v1`).
    pub base_url: String,
    /// Environment variable holding the API key, sent as `x-api-key`; `None` for a gateway that
    /// takes no key (`api_key_env: none`).
    pub api_key_env: Option<String>,
    /// Sampling temperature (0 to 1), forwarded when set.
    pub temperature: Option<f64>,
    /// Output token cap per request.
    pub max_tokens: u32,
    /// Timeout of one HTTP request, response body included.
    pub request_timeout: Duration,
    /// Transport retries after the first try (connection errors, timeouts, 408, 429, 5xx, 529).
    pub max_retries: u32,
    /// First backoff delay between tries; each later one doubles, with jitter.
    pub retry_base: Duration,
}

impl AnthropicSpec {
    /// Returns the settings for `model` with every other field at its default.
    pub fn new(model: impl Into<String>) -> Self {
        AnthropicSpec {
            model: model.into(),
            base_url: DEFAULT_BASE_URL.to_owned(),
            api_key_env: Some(DEFAULT_API_KEY_ENV.to_owned()),
            temperature: None,
            max_tokens: DEFAULT_MAX_TOKENS,
            request_timeout: super::openai::DEFAULT_REQUEST_TIMEOUT,
            max_retries: super::openai::DEFAULT_MAX_RETRIES,
            retry_base: super::openai::DEFAULT_RETRY_BASE,
        }
    }

    fn url(&self) -> String {
        let base = self.base_url.trim_end_matches('/');
        if base.ends_with("/v1") {
            format!("{base}/messages")
        } else {
            format!("{base}/v1/messages")
        }
    }
}

/// A delegate backed by the Anthropic Messages API.
#[derive(Debug)]
pub struct AnthropicDelegate {
    spec: AnthropicSpec,
    client: reqwest::Client,
}

impl AnthropicDelegate {
    /// Creates the delegate; `client` is shared across delegations and must come from
    /// [`harness_builtins::http_client_builder`], which installs the TLS provider.
    pub fn new(spec: AnthropicSpec, client: reqwest::Client) -> Self {
        AnthropicDelegate { spec, client }
    }

    fn request_body(&self, request: &TurnRequest<'_>) -> Value {
        let (system, messages) = to_messages(request.messages);
        let mut body = Map::new();
        body.insert("model".into(), json!(self.spec.model));
        body.insert("max_tokens".into(), json!(self.spec.max_tokens));
        if let Some(system) = system {
            body.insert("system".into(), json!(system));
        }
        body.insert("messages".into(), Value::Array(messages));
        if !request.tools.is_empty() {
            let tools: Vec<Value> = request
                .tools
                .iter()
                .map(|t| {
                    json!({
                        "name": t.name,
                        "description": t.description,
                        "input_schema": t.parameters,
                    })
                })
                .collect();
            body.insert("tools".into(), Value::Array(tools));
        }
        if let Some(temperature) = self.spec.temperature {
            body.insert("temperature".into(), json!(temperature));
        }
        Value::Object(body)
    }

    async fn call(&self, body: &Value) -> Result<Turn> {
        let url = self.spec.url();
        let target = reqwest::Url::parse(&url).map_err(|e| {
            delegate_error(format!(
                "anthropic: base_url {:?} is not a valid URL: {e} (write it like {DEFAULT_BASE_URL})",
                self.spec.base_url
            ))
        })?;
        let mut headers = vec![("anthropic-version", API_VERSION.to_owned())];
        if let Some(var) = &self.spec.api_key_env {
            let key = super::api_key(var).map_err(|why| {
                Error::new(ErrorKind::Config, format!("anthropic: `api_key_env` {why}"))
            })?;
            headers.push(("x-api-key", key));
        }
        let transport = Transport {
            client: &self.client,
            provider: "anthropic",
            timeout: self.spec.request_timeout,
            max_retries: self.spec.max_retries,
            retry_base: self.spec.retry_base,
        };
        let bytes = transport
            .post(
                &target,
                &headers,
                serde_json::to_vec(body)
                    .expect("a request always serialises")
                    .into(),
                "check the model name, API key and request settings",
            )
            .await?;
        parse_message(&url, &bytes)
    }
}

/// The conversation in Messages API terms: the system text apart, then alternating `user` and
/// `assistant` turns — tool calls as `tool_use` blocks of the assistant's turn, their results as
/// `tool_result` blocks opening the next user turn, before any text (the retry prompt).
fn to_messages(messages: &[Message]) -> (Option<String>, Vec<Value>) {
    let mut system: Vec<&str> = Vec::new();
    let mut turns: Vec<(&'static str, Vec<Value>)> = Vec::new();
    let mut push = |role: &'static str, block: Value| match turns.last_mut() {
        Some((last, blocks)) if *last == role => blocks.push(block),
        _ => turns.push((role, vec![block])),
    };
    for message in messages {
        match message {
            Message::System(text) => system.push(text),
            Message::User(text) => push("user", json!({"type": "text", "text": text})),
            Message::Assistant {
                content,
                tool_calls,
            } => {
                let text = content.as_deref().filter(|t| !t.trim().is_empty());
                match text {
                    Some(text) => push("assistant", json!({"type": "text", "text": text})),
                    // The API refuses an empty turn; an empty answer is still an answer.
                    None if tool_calls.is_empty() => {
                        push("assistant", json!({"type": "text", "text": "(no answer)"}));
                    }
                    None => {}
                }
                for call in tool_calls {
                    push(
                        "assistant",
                        json!({"type": "tool_use", "id": call.id, "name": call.name, "input": call.arguments}),
                    );
                }
            }
            Message::Tool {
                call_id, content, ..
            } => push(
                "user",
                json!({"type": "tool_result", "tool_use_id": call_id, "content": content}),
            ),
        }
    }
    let messages = turns
        .into_iter()
        .map(|(role, blocks)| match blocks.as_slice() {
            // A user turn of plain text is sent as a string, as people write it.
            [only] if role == "user" && only["type"] == "text" => {
                json!({"role": role, "content": only["text"]})
            }
            _ => json!({"role": role, "content": blocks}),
        })
        .collect();
    let system = (!system.is_empty()).then(|| system.join("\n\n"));
    (system, messages)
}

/// Parses a successful Messages API response.
fn parse_message(url: &str, bytes: &[u8]) -> Result<Turn> {
    let bad = |what: String| {
        delegate_error(format!(
            "anthropic: POST {url} returned {what}, which is not a Messages API response"
        ))
    };
    let value: Value = serde_json::from_slice(bytes).map_err(|e| {
        bad(format!(
            "invalid JSON ({e}): {}",
            excerpt(&String::from_utf8_lossy(bytes))
        ))
    })?;
    if value["type"] != "message" {
        return Err(bad(excerpt(&value.to_string())));
    }
    let Some(blocks) = value["content"].as_array() else {
        return Err(bad(format!(
            "a message without a content list: {}",
            excerpt(&value.to_string())
        )));
    };
    let stop_reason = value["stop_reason"].as_str().map(str::to_owned);
    if stop_reason.as_deref() == Some("max_tokens") {
        return Err(delegate_error(format!(
            "anthropic: POST {url}: the model hit max_tokens before finishing (stop_reason \"max_tokens\"); raise max_tokens or shorten the task"
        )));
    }
    let mut texts = Vec::new();
    let mut tool_calls = Vec::new();
    for block in blocks {
        match block["type"].as_str() {
            Some("text") => texts.push(block["text"].as_str().unwrap_or_default().to_owned()),
            Some("tool_use") => {
                let Some(name) = block["name"].as_str() else {
                    return Err(bad(format!(
                        "a tool_use block without a name: {}",
                        excerpt(&block.to_string())
                    )));
                };
                let arguments = match &block["input"] {
                    Value::Object(input) => input.clone(),
                    Value::Null => Map::new(),
                    other => {
                        return Err(delegate_error(format!(
                            "anthropic: the model called tool {name:?} with input that is not a JSON object: {}",
                            excerpt(&other.to_string())
                        )));
                    }
                };
                tool_calls.push(RequestedCall {
                    id: block["id"]
                        .as_str()
                        .filter(|id| !id.is_empty())
                        .map(str::to_owned),
                    name: name.to_owned(),
                    arguments,
                });
            }
            // Thinking and other blocks are the model's own business.
            _ => {}
        }
    }
    let count = |name: &str| value["usage"][name].as_u64().unwrap_or(0);
    Ok(Turn {
        content: (!texts.is_empty()).then(|| texts.join("")),
        tool_calls,
        usage: Usage {
            input_tokens: count("input_tokens")
                + count("cache_creation_input_tokens")
                + count("cache_read_input_tokens"),
            output_tokens: count("output_tokens"),
            requests: 1,
            cached_input_tokens: count("cache_read_input_tokens"),
        },
        finish_reason: stop_reason,
        observed: Vec::new(),
    })
}

impl Delegate for AnthropicDelegate {
    fn kind(&self) -> &'static str {
        "anthropic"
    }

    fn model(&self) -> Option<&str> {
        Some(&self.spec.model)
    }

    fn turn<'a>(&'a mut self, request: TurnRequest<'a>) -> BoxFuture<'a, Result<Turn>> {
        let body = self.request_body(&request);
        Box::pin(async move {
            tracing::trace!(request = %body, "anthropic: request");
            self.call(&body).await
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use harness_hooks::ToolCall;

    #[test]
    fn the_conversation_alternates_with_tool_results_first() {
        let call = ToolCall {
            id: "call_1".into(),
            name: "write_file".into(),
            arguments: Map::from_iter([("path".to_owned(), json!("a"))]),
        };
        let (system, messages) = to_messages(&[
            Message::System("be honest".into()),
            Message::User("task".into()),
            Message::Assistant {
                content: Some("Done".into()),
                tool_calls: vec![],
            },
            Message::User("VERIFICATION FAILED".into()),
            Message::Assistant {
                content: None,
                tool_calls: vec![call],
            },
            Message::Tool {
                call_id: "call_1".into(),
                name: "write_file".into(),
                content: "wrote".into(),
            },
        ]);
        assert_eq!(system.as_deref(), Some("be honest"));
        assert_eq!(
            Value::Array(messages),
            json!([
                {"role": "user", "content": "task"},
                {"role": "assistant", "content": [{"type": "text", "text": "Done"}]},
                {"role": "user", "content": "VERIFICATION FAILED"},
                {"role": "assistant", "content": [{"type": "tool_use", "id": "call_1", "name": "write_file", "input": {"path": "a"}}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "call_1", "content": "wrote"}]},
            ])
        );
    }

    #[test]
    fn responses_and_their_failures() {
        let url = "http://x/v1/messages";
        let turn = parse_message(
            url,
            br#"{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[{"type":"text","text":"Let me write it."},{"type":"tool_use","id":"toolu_1","name":"write_file","input":{"path":"a"}}],"stop_reason":"tool_use","stop_sequence":null,"usage":{"input_tokens":10,"cache_read_input_tokens":5,"output_tokens":3}}"#,
        )
        .expect("parses");
        assert_eq!(turn.content.as_deref(), Some("Let me write it."));
        assert_eq!(turn.tool_calls[0].id.as_deref(), Some("toolu_1"));
        assert_eq!((turn.usage.input_tokens, turn.usage.output_tokens), (15, 3));
        assert_eq!(turn.usage.cached_input_tokens, 5);
        for (body, needle) in [
            (&br#"{"type":"message","content":[],"stop_reason":"max_tokens"}"#[..], "max_tokens"),
            (&br#"{"type":"error","error":{"message":"x"}}"#[..], "not a Messages API response"),
            (&br#"not json"#[..], "invalid JSON"),
            (
                &br#"{"type":"message","content":[{"type":"tool_use","id":"t","name":"n","input":[1]}]}"#[..],
                "not a JSON object",
            ),
        ] {
            let err = parse_message(url, body).expect_err(needle).to_string();
            assert!(err.contains(needle), "{err}");
        }
        let mut spec = AnthropicSpec::new("m");
        assert_eq!(spec.url(), "https://api.anthropic.com/v1/messages");
        spec.base_url = "http://127.0.0.1:9/v1/".into();
        assert_eq!(spec.url(), "http://127.0.0.1:9/v1/messages");
    }
}
