//! The `openai` delegate: any OpenAI-compatible `POST {base_url}/chat/completions` server
//! (OpenAI, Azure, Ollama, vLLM, llama.cpp, LM Studio, gateways) with function calling,
//! transport retries with backoff and `Retry-After`, a per-request timeout and token usage.

use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use serde_json::{Map, Value};

use super::transport::{Transport, delegate_error, excerpt};
use super::{BoxFuture, Delegate, RequestedCall, Turn, TurnRequest};
use crate::conversation::{Message, ToolSpec, Usage, WireMessage, WireTool};
use crate::error::{Error, ErrorKind, Result};

/// The default `base_url`: OpenAI's own API.
pub const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";
/// The default `api_key_env`.
pub const DEFAULT_API_KEY_ENV: &str = "OPENAI_API_KEY";
/// The default timeout of one HTTP request; long, because a model may think for minutes.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(120);
/// The default number of transport retries after the first try.
pub const DEFAULT_MAX_RETRIES: u32 = 3;
/// The default first backoff delay; later ones double up to [`MAX_BACKOFF`](super::transport::MAX_BACKOFF).
pub const DEFAULT_RETRY_BASE: Duration = Duration::from_millis(500);
/// Reads the API key from the environment variable `var`: set and not empty, or a message saying
/// which variable is missing and the fix. Never an unauthenticated request by accident.
pub(crate) fn api_key(var: &str) -> std::result::Result<String, String> {
    match std::env::var(var) {
        Ok(key) if !key.trim().is_empty() => Ok(key),
        Ok(_) => Err(format!(
            "names {var}, which is empty; set it to the API key, or write `api_key_env: none` for a server that takes no key"
        )),
        Err(_) => Err(format!(
            "names {var}, which is not set; export it with the API key, or write `api_key_env: none` for a server that takes no key"
        )),
    }
}

/// Settings of an OpenAI-compatible delegate.
#[derive(Debug, Clone, PartialEq)]
pub struct OpenAiSpec {
    /// Model name sent as `model`.
    pub model: String,
    /// Base URL; requests go to `{base_url}/chat/completions` (a trailing `/` is ignored).
    pub base_url: String,
    /// Environment variable holding the API key, sent as `Authorization: Bearer`; it must be set
    /// and not empty. `None` for a server that takes no key (`api_key_env: none`): no header.
    pub api_key_env: Option<String>,
    /// Sampling temperature, forwarded when set (0 is valid).
    pub temperature: Option<f64>,
    /// Completion token cap, forwarded when set.
    pub max_tokens: Option<u32>,
    /// Timeout of one HTTP request, response body included.
    pub request_timeout: Duration,
    /// Transport retries after the first try (connection errors, timeouts, 408, 429, 5xx).
    pub max_retries: u32,
    /// First backoff delay between tries (default [`DEFAULT_RETRY_BASE`]); each later one
    /// doubles, up to [`MAX_BACKOFF`](super::transport::MAX_BACKOFF), with jitter. A server's `Retry-After` takes precedence.
    pub retry_base: Duration,
}

impl OpenAiSpec {
    /// Returns the settings for `model` with every other field at its default.
    pub fn new(model: impl Into<String>) -> Self {
        OpenAiSpec {
            model: model.into(),
            base_url: DEFAULT_BASE_URL.to_owned(),
            api_key_env: Some(DEFAULT_API_KEY_ENV.to_owned()),
            temperature: None,
            max_tokens: None,
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
            max_retries: DEFAULT_MAX_RETRIES,
            retry_base: DEFAULT_RETRY_BASE,
        }
    }

    fn url(&self) -> String {
        format!("{}/chat/completions", self.base_url.trim_end_matches('/'))
    }
}

/// Parses `url`. Parsing costs more than the rest of building a request, and a batch sends
/// thousands of requests to one server, so the last URL parsed is kept for the next caller.
/// Checks a `base_url` when the delegation loads: an http(s) URL with a host and no credentials
/// in it (a key in the URL would be sent wherever the URL goes and printed with it;
/// `api_key_env` names the key). Says what is wrong, never repeating credentials.
pub(crate) fn check_base_url(url: &str) -> std::result::Result<(), String> {
    let fix = format!("write it like {DEFAULT_BASE_URL} or http://localhost:11434/v1");
    let parsed =
        reqwest::Url::parse(url).map_err(|e| format!("{url:?} is not a URL ({e}); {fix}"))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(format!(
            "{url:?} must be http:// or https://, not {}:; {fix}",
            parsed.scheme()
        ));
    }
    if parsed.host_str().is_none_or(str::is_empty) {
        return Err(format!("{url:?} has no host; {fix}"));
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err("carries credentials; remove them from the URL and put the key in the variable `delegate.api_key_env` names".to_owned());
    }
    Ok(())
}

fn parse_url(url: &str) -> std::result::Result<reqwest::Url, String> {
    static LAST: Mutex<Option<reqwest::Url>> = Mutex::new(None);
    let mut last = LAST.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(parsed) = last.as_ref().filter(|parsed| parsed.as_str() == url) {
        return Ok(parsed.clone());
    }
    let parsed = reqwest::Url::parse(url).map_err(|e| e.to_string())?;
    // `Url` normalises what it parses; only a URL that is already normal can be matched later.
    if parsed.as_str() == url {
        *last = Some(parsed.clone());
    }
    Ok(parsed)
}

/// A delegate backed by an OpenAI-compatible chat-completions server.
#[derive(Debug)]
pub struct OpenAiDelegate {
    spec: OpenAiSpec,
    client: reqwest::Client,
}

impl OpenAiDelegate {
    /// Creates the delegate; `client` is shared across delegations and must come from
    /// [`harness_builtins::http_client_builder`], which installs the TLS provider.
    pub fn new(spec: OpenAiSpec, client: reqwest::Client) -> Self {
        OpenAiDelegate { spec, client }
    }

    /// Returns the settings.
    pub fn spec(&self) -> &OpenAiSpec {
        &self.spec
    }

    /// The request's JSON body, serialised straight from the conversation.
    fn request_body(&self, request: &TurnRequest<'_>) -> bytes::Bytes {
        let body = Body {
            model: &self.spec.model,
            messages: request.messages.iter().map(Message::wire).collect(),
            tools: request.tools.iter().map(ToolSpec::wire).collect(),
            temperature: self.spec.temperature,
            max_tokens: self.spec.max_tokens,
        };
        let size: usize = request
            .messages
            .iter()
            .map(|m| match m {
                Message::System(text) | Message::User(text) => text.len(),
                Message::Assistant { content, .. } => content.as_ref().map_or(64, String::len),
                Message::Tool { content, .. } => content.len(),
            })
            .sum();
        let mut bytes = Vec::with_capacity(1024 + size + size / 8 + 512 * request.tools.len());
        serde_json::to_writer(&mut bytes, &body).expect("a request always serialises");
        bytes.into()
    }

    /// Sends `body`, retrying transport failures, and parses the completion.
    async fn call(&self, body: bytes::Bytes) -> Result<Turn> {
        let url = self.spec.url();
        let target = parse_url(&url).map_err(|e| {
            delegate_error(format!(
                "openai: base_url {:?} is not a valid URL: {e} (write it like {DEFAULT_BASE_URL})",
                self.spec.base_url
            ))
        })?;
        let mut headers = Vec::new();
        if let Some(var) = &self.spec.api_key_env {
            let key = api_key(var).map_err(|why| {
                Error::new(ErrorKind::Config, format!("openai: `api_key_env` {why}"))
            })?;
            headers.push(("authorization", format!("Bearer {key}")));
        }
        let transport = Transport {
            client: &self.client,
            provider: "openai",
            timeout: self.spec.request_timeout,
            max_retries: self.spec.max_retries,
            retry_base: self.spec.retry_base,
        };
        let bytes = transport
            .post(
                &target,
                &headers,
                body,
                "check the model name, API key and request settings",
            )
            .await?;
        parse_completion(&url, &bytes)
    }
}

/// A chat-completions request body.
#[derive(serde::Serialize)]
struct Body<'a> {
    model: &'a str,
    messages: Vec<WireMessage<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<WireTool<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_tokens: Option<u32>,
}

/// Parses a successful chat-completions response.
fn parse_completion(url: &str, bytes: &[u8]) -> Result<Turn> {
    match typed::parse(url, bytes) {
        Some(turn) => turn,
        None => parse_completion_value(url, bytes),
    }
}

/// The common shape of a response, read without building a JSON tree: about a fifth of the
/// work of [`parse_completion_value`], which matters at thousands of requests a second. It
/// accepts only what [`parse_completion_value`] reads the same way (every object must be an
/// object, every field its usual type); anything else returns `None`, and the response is
/// parsed again by [`parse_completion_value`], which decides and words the error.
mod typed {
    use std::fmt;
    use std::marker::PhantomData;

    use serde::de::value::MapAccessDeserializer;
    use serde::de::{Deserialize, Deserializer, MapAccess, Visitor};
    use serde_json::value::RawValue;

    use super::{Result, Turn, Usage, parse_tool_call};

    /// A `T` that must be written as a JSON object. A derived `Deserialize` would also take an
    /// array, matching its elements to the fields in order; the tree-based parser never does.
    struct Object<T>(T);

    impl<'de, T: Deserialize<'de>> Deserialize<'de> for Object<T> {
        fn deserialize<D: Deserializer<'de>>(
            deserializer: D,
        ) -> std::result::Result<Self, D::Error> {
            struct Only<T>(PhantomData<T>);
            impl<'de, T: Deserialize<'de>> Visitor<'de> for Only<T> {
                type Value = T;
                fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                    f.write_str("a JSON object")
                }
                fn visit_map<A: MapAccess<'de>>(self, map: A) -> std::result::Result<T, A::Error> {
                    T::deserialize(MapAccessDeserializer::new(map))
                }
            }
            deserializer.deserialize_map(Only(PhantomData)).map(Object)
        }
    }

    #[derive(serde::Deserialize)]
    struct Completion<'a> {
        #[serde(borrow)]
        choices: Vec<Object<Choice<'a>>>,
        #[serde(default)]
        usage: Option<Object<Counts>>,
    }

    #[derive(serde::Deserialize)]
    struct Choice<'a> {
        #[serde(borrow)]
        message: Object<Message<'a>>,
        #[serde(default)]
        finish_reason: Option<String>,
    }

    #[derive(serde::Deserialize)]
    struct Message<'a> {
        #[serde(default)]
        content: Option<String>,
        #[serde(default, borrow)]
        tool_calls: Option<Vec<&'a RawValue>>,
    }

    #[derive(serde::Deserialize)]
    struct Counts {
        #[serde(default)]
        prompt_tokens: Option<u64>,
        #[serde(default)]
        completion_tokens: Option<u64>,
        #[serde(default)]
        prompt_tokens_details: Option<Object<Details>>,
    }

    #[derive(serde::Deserialize)]
    struct Details {
        #[serde(default)]
        cached_tokens: Option<u64>,
    }

    /// Reads the usual shape of a completion; `None` when it is anything else.
    pub(super) fn parse(url: &str, bytes: &[u8]) -> Option<Result<Turn>> {
        // Unknown fields, at any depth, are skipped without being built.
        let Object(completion) = serde_json::from_slice::<Object<Completion<'_>>>(bytes).ok()?;
        let Object(choice) = completion.choices.into_iter().next()?;
        let Object(message) = choice.message;
        if choice.finish_reason.as_deref() == Some("length") {
            // The tree-based parser words this error.
            return None;
        }
        let mut tool_calls = Vec::new();
        for raw in message.tool_calls.unwrap_or_default() {
            let call = serde_json::from_str(raw.get()).ok()?;
            tool_calls.push(match parse_tool_call(url, &call) {
                Ok(call) => call,
                Err(e) => return Some(Err(e)),
            });
        }
        let counts = completion.usage.map(|Object(u)| u);
        let count = |pick: fn(&Counts) -> Option<u64>| counts.as_ref().and_then(pick).unwrap_or(0);
        Some(Ok(Turn {
            content: message.content,
            tool_calls,
            usage: Usage {
                input_tokens: count(|c| c.prompt_tokens),
                output_tokens: count(|c| c.completion_tokens),
                requests: 1,
                cached_input_tokens: count(|c| {
                    c.prompt_tokens_details
                        .as_ref()
                        .and_then(|Object(d)| d.cached_tokens)
                }),
            },
            finish_reason: choice.finish_reason,
            observed: Vec::new(),
        }))
    }
}

/// Parses a successful chat-completions response through a JSON tree: the reference reading,
/// and the one that explains what is wrong with a response.
fn parse_completion_value(url: &str, bytes: &[u8]) -> Result<Turn> {
    let bad = |what: String| {
        delegate_error(format!(
            "openai: POST {url} returned {what}, which is not a chat completion"
        ))
    };
    let value: Value = serde_json::from_slice(bytes).map_err(|e| {
        bad(format!(
            "invalid JSON ({e}): {}",
            excerpt(&String::from_utf8_lossy(bytes))
        ))
    })?;
    let Some(choice) = value.pointer("/choices/0") else {
        return Err(bad(format!("no choices: {}", excerpt(&value.to_string()))));
    };
    let Some(message) = choice.get("message").filter(|m| m.is_object()) else {
        return Err(bad(format!(
            "a choice without a message: {}",
            excerpt(&choice.to_string())
        )));
    };
    let finish_reason = choice
        .get("finish_reason")
        .and_then(Value::as_str)
        .map(str::to_owned);
    if finish_reason.as_deref() == Some("length") {
        return Err(delegate_error(format!(
            "openai: POST {url}: the model hit max_tokens before finishing (finish_reason \"length\"); raise max_tokens or shorten the task"
        )));
    }
    let content = match message.get("content") {
        None | Some(Value::Null) => None,
        Some(Value::String(text)) => Some(text.clone()),
        // Some servers send content parts; the text parts are the answer.
        Some(Value::Array(parts)) => Some(
            parts
                .iter()
                .filter_map(|p| p.get("text").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join(""),
        ),
        Some(other) => {
            return Err(bad(format!(
                "message content {}",
                excerpt(&other.to_string())
            )));
        }
    };
    let mut tool_calls = Vec::new();
    match message.get("tool_calls") {
        None | Some(Value::Null) => {}
        Some(Value::Array(calls)) => {
            for call in calls {
                tool_calls.push(parse_tool_call(url, call)?);
            }
        }
        Some(other) => return Err(bad(format!("tool_calls {}", excerpt(&other.to_string())))),
    }
    let count = |name: &str| {
        value
            .get("usage")
            .and_then(|u| u.get(name))
            .and_then(Value::as_u64)
            .unwrap_or(0)
    };
    Ok(Turn {
        content,
        tool_calls,
        usage: Usage {
            input_tokens: count("prompt_tokens"),
            output_tokens: count("completion_tokens"),
            requests: 1,
            cached_input_tokens: value
                .get("usage")
                .and_then(|u| u.get("prompt_tokens_details"))
                .and_then(|d| d.get("cached_tokens"))
                .and_then(Value::as_u64)
                .unwrap_or(0),
        },
        finish_reason,
        observed: Vec::new(),
    })
}

fn parse_tool_call(url: &str, call: &Value) -> Result<RequestedCall> {
    let Some(name) = call.pointer("/function/name").and_then(Value::as_str) else {
        return Err(delegate_error(format!(
            "openai: POST {url} returned a tool call without function.name: {}",
            excerpt(&call.to_string())
        )));
    };
    let id = call
        .get("id")
        .and_then(Value::as_str)
        .filter(|id| !id.is_empty())
        .map(str::to_owned);
    let arguments = match call.pointer("/function/arguments") {
        None | Some(Value::Null) => Map::new(),
        // The protocol sends a JSON string; some local servers send the object itself.
        Some(Value::Object(args)) => args.clone(),
        Some(Value::String(text)) if text.trim().is_empty() => Map::new(),
        Some(Value::String(text)) => match serde_json::from_str::<Value>(text) {
            Ok(Value::Object(args)) => args,
            Ok(other) => {
                return Err(delegate_error(format!(
                    "openai: the model called tool {name:?} with arguments that are not a JSON object: {}",
                    excerpt(&other.to_string())
                )));
            }
            Err(e) => {
                return Err(delegate_error(format!(
                    "openai: the model called tool {name:?} with arguments that are not valid JSON ({e}): {}",
                    excerpt(text)
                )));
            }
        },
        Some(other) => {
            return Err(delegate_error(format!(
                "openai: the model called tool {name:?} with arguments {}, expected a JSON string",
                excerpt(&other.to_string())
            )));
        }
    };
    Ok(RequestedCall {
        id,
        name: name.to_owned(),
        arguments,
    })
}

impl Delegate for OpenAiDelegate {
    fn kind(&self) -> &'static str {
        "openai"
    }

    fn model(&self) -> Option<&str> {
        Some(&self.spec.model)
    }

    fn turn<'a>(&'a mut self, request: TurnRequest<'a>) -> BoxFuture<'a, Result<Turn>> {
        let body = self.request_body(&request);
        Box::pin(async move {
            tracing::trace!(request = %String::from_utf8_lossy(&body), "openai: request");
            let result = self.call(body).await;
            if let Ok(turn) = &result {
                tracing::trace!(content = ?turn.content, tool_calls = ?turn.tool_calls, "openai: response");
            }
            result
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn url_ignores_trailing_slash() {
        let mut spec = OpenAiSpec::new("m");
        spec.base_url = "http://127.0.0.1:1/v1/".into();
        assert_eq!(spec.url(), "http://127.0.0.1:1/v1/chat/completions");
    }

    #[test]
    fn urls_are_parsed_once_and_a_bad_one_says_why() {
        let url = "http://127.0.0.1:9/v1/chat/completions";
        let first = parse_url(url).expect("valid");
        assert_eq!(first.as_str(), url);
        assert_eq!(parse_url(url).expect("valid"), first);
        // Another URL in between, one that parsing normalises: each caller gets its own.
        let other = parse_url("HTTP://LOCALHOST:10/x").expect("valid");
        assert_eq!(other.as_str(), "http://localhost:10/x");
        assert_eq!(parse_url(url).expect("valid"), first);
        let err = parse_url("api.example.com/v1/chat/completions").expect_err("no scheme");
        assert!(err.contains("relative URL without a base"), "{err}");
    }

    /// The fast reading of a response agrees with the tree-based one wherever it answers, and
    /// answers for the usual shapes.
    #[test]
    fn the_typed_reading_agrees_with_the_tree() {
        let url = "http://127.0.0.1:9/v1/chat/completions";
        let usual = [
            r#"{"id":"c1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"{\"name\": \"widget\"}"},"finish_reason":"stop"}],"usage":{"prompt_tokens":12,"completion_tokens":7,"total_tokens":19}}"#,
            r#"{"choices":[{"message":{"content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"write_file","arguments":"{\"path\":\"a\",\"content\":\"b\"}"}}]},"finish_reason":"tool_calls"}]}"#,
            r#"{"choices":[{"message":{"content":"hi ✓ \u00e9","extra":{"deep":[1,{"x":null}]}}}],"usage":null}"#,
            r#"{"choices":[{"message":{"content":"x","tool_calls":[{"function":{"name":"t","arguments":"[1]"}}]}}]}"#,
            r#"{"choices":[{"message":{"content":"x","tool_calls":[{"function":{"arguments":"{}"}}]}}]}"#,
        ];
        let unusual = [
            r#"{"choices":[{"message":{"content":"a"}},{"message":[1,2]}],"usage":{"prompt_tokens":1}}"#,
            r#"[{"choices":[]}]"#,
            r#"{"choices":[]}"#,
            r#"{"choices":{"0":{"message":{"content":"keyed, not listed"}}}}"#,
            r#"{"choices":[["assistant","positional"]]}"#,
            r#"{"choices":[{"message":["assistant","positional"]}]}"#,
            r#"{"choices":[{"message":{"content":"x"},"finish_reason":"length"}]}"#,
            r#"{"choices":[{"message":{"content":"x"},"finish_reason":3}]}"#,
            r#"{"choices":[{"message":{"content":[{"type":"text","text":"a"},{"text":"b"},7]}}]}"#,
            r#"{"choices":[{"message":{"content":42}}]}"#,
            r#"{"choices":[{"message":{"content":"x","tool_calls":{"id":"1"}}}]}"#,
            r#"{"choices":[{"message":{"content":"x"}}],"usage":{"prompt_tokens":-1,"completion_tokens":2.0}}"#,
            r#"{"choices":[{"message":{"content":"x"}}],"usage":[5,6]}"#,
            r#"{"choices":[{"message":{"content":"first"}}],"choices":[{"message":{"content":"second"}}]}"#,
            r#"{"choices":[{"message":null}]}"#,
            r#"{"choices":[{"message":{"content":"x"}}]} trailing"#,
            "not json",
        ];
        let tree =
            |body: &str| parse_completion_value(url, body.as_bytes()).map_err(|e| e.to_string());
        for body in usual {
            let fast = typed::parse(url, body.as_bytes())
                .unwrap_or_else(|| panic!("the usual shape {body} took the slow path"))
                .map_err(|e| e.to_string());
            assert_eq!(fast, tree(body), "{body}");
        }
        for body in unusual {
            if let Some(fast) = typed::parse(url, body.as_bytes()) {
                assert_eq!(fast.map_err(|e| e.to_string()), tree(body), "{body}");
            }
            // Either way, the answer is the tree's.
            assert_eq!(
                parse_completion(url, body.as_bytes()).map_err(|e| e.to_string()),
                tree(body),
                "{body}"
            );
        }
    }
}
