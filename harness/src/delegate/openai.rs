//! The `openai` delegate: any OpenAI-compatible `POST {base_url}/chat/completions` server
//! (OpenAI, Azure, Ollama, vLLM, llama.cpp, LM Studio, gateways) with function calling,
//! transport retries with backoff and `Retry-After`, a per-request timeout and token usage.

use std::sync::{Mutex, PoisonError};
use std::time::{Duration, SystemTime};

use reqwest::StatusCode;
use reqwest::header::{HeaderMap, RETRY_AFTER};
use serde_json::{Map, Value, json};

use super::{BoxFuture, Delegate, RequestedCall, Turn, TurnRequest};
use crate::conversation::Usage;
use crate::error::{Error, ErrorKind, Result};

/// The default `base_url`: OpenAI's own API.
pub const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";
/// The default `api_key_env`.
pub const DEFAULT_API_KEY_ENV: &str = "OPENAI_API_KEY";
/// The default timeout of one HTTP request; long, because a model may think for minutes.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(120);
/// The default number of transport retries after the first try.
pub const DEFAULT_MAX_RETRIES: u32 = 3;
/// The default first backoff delay; later ones double up to [`MAX_BACKOFF`].
pub const DEFAULT_RETRY_BASE: Duration = Duration::from_millis(500);
/// The longest computed backoff between two tries.
pub const MAX_BACKOFF: Duration = Duration::from_secs(20);
/// The longest wait a server's `Retry-After` can ask for; longer requests are clamped so a
/// confused gateway cannot stall a delegation for hours.
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);
/// The largest response body read; a chat completion is far smaller.
const MAX_BODY_BYTES: usize = 16 * 1024 * 1024;
/// How much of an error body goes into a message.
const BODY_EXCERPT_CHARS: usize = 500;

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
    /// doubles, up to [`MAX_BACKOFF`], with jitter. A server's `Retry-After` takes precedence.
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

    fn request_body(&self, request: &TurnRequest<'_>) -> Value {
        let mut body = Map::new();
        body.insert("model".into(), json!(self.spec.model));
        body.insert(
            "messages".into(),
            Value::Array(request.messages.iter().map(|m| m.to_openai()).collect()),
        );
        if !request.tools.is_empty() {
            body.insert(
                "tools".into(),
                Value::Array(request.tools.iter().map(|t| t.to_openai()).collect()),
            );
        }
        if let Some(temperature) = self.spec.temperature {
            body.insert("temperature".into(), json!(temperature));
        }
        if let Some(max_tokens) = self.spec.max_tokens {
            body.insert("max_tokens".into(), json!(max_tokens));
        }
        Value::Object(body)
    }

    /// Sends `body`, retrying transport failures, and parses the completion.
    async fn call(&self, body: &Value) -> Result<Turn> {
        let url = self.spec.url();
        let target = parse_url(&url).map_err(|e| {
            delegate_error(format!(
                "openai: base_url {:?} is not a valid URL: {e} (write it like {DEFAULT_BASE_URL})",
                self.spec.base_url
            ))
        })?;
        let api_key = match &self.spec.api_key_env {
            None => None,
            Some(var) => Some(api_key(var).map_err(|why| {
                Error::new(ErrorKind::Config, format!("openai: `api_key_env` {why}"))
            })?),
        };
        let tries = self.spec.max_retries.saturating_add(1);
        let mut retry = 0;
        loop {
            let failure = match self.exchange(&target, api_key.as_deref(), body).await {
                Exchange::Done(status, bytes) if status.is_success() => {
                    return parse_completion(&url, &bytes);
                }
                Exchange::Done(status, bytes) if !retryable(status) => {
                    return Err(delegate_error(format!(
                        "openai: POST {url} was refused with HTTP {status}: {} (check the model name, API key and request settings)",
                        error_excerpt(&bytes)
                    )));
                }
                Exchange::Done(status, bytes) => Failure::Status(status, bytes),
                Exchange::Throttled(status, bytes, wait) => Failure::Throttled(status, bytes, wait),
                Exchange::Transport(what) => Failure::Transport(what),
            };
            if retry >= self.spec.max_retries {
                let what = match failure {
                    Failure::Status(status, bytes) | Failure::Throttled(status, bytes, _) => {
                        format!("HTTP {status}: {}", error_excerpt(&bytes))
                    }
                    Failure::Transport(what) => what,
                };
                return Err(delegate_error(format!(
                    "openai: POST {url} failed after {tries} tr{}: {what}",
                    if tries == 1 { "y" } else { "ies" }
                )));
            }
            let wait = match &failure {
                Failure::Throttled(_, _, Some(wait)) => (*wait).min(MAX_RETRY_AFTER),
                _ => backoff(self.spec.retry_base, retry),
            };
            tracing::warn!(
                url = %url,
                retry = retry + 1,
                wait_ms = u64::try_from(wait.as_millis()).unwrap_or(u64::MAX),
                failure = %failure.summary(),
                "openai: retrying the request"
            );
            tokio::time::sleep(wait).await;
            retry += 1;
        }
    }

    /// Makes one HTTP request and reads its body, all within the request timeout.
    async fn exchange(&self, url: &reqwest::Url, api_key: Option<&str>, body: &Value) -> Exchange {
        let timeout = self.spec.request_timeout;
        let mut builder = self.client.post(url.clone()).timeout(timeout).json(body);
        if let Some(key) = api_key {
            builder = builder.bearer_auth(key);
        }
        for (name, value) in crate::telemetry::propagation_fields() {
            builder = builder.header(name, value);
        }
        let attempt = async {
            let mut response = builder.send().await?;
            let status = response.status();
            let wait = retry_after(response.headers());
            let mut bytes = Vec::new();
            while let Some(chunk) = response.chunk().await? {
                if bytes.len() + chunk.len() > MAX_BODY_BYTES {
                    // Keep what fits; the caller sees a truncated body and fails to parse it.
                    bytes.extend_from_slice(&chunk[..MAX_BODY_BYTES - bytes.len()]);
                    break;
                }
                bytes.extend_from_slice(&chunk);
            }
            Ok::<_, reqwest::Error>((status, wait, bytes))
        };
        match tokio::time::timeout(timeout, attempt).await {
            Err(_) => Exchange::Transport(timed_out(timeout)),
            Ok(Err(e)) if e.is_timeout() => Exchange::Transport(timed_out(timeout)),
            Ok(Err(e)) if e.is_connect() => Exchange::Transport(format!(
                "cannot connect: {} (is the server running and base_url right?)",
                error_chain(&e)
            )),
            Ok(Err(e)) => Exchange::Transport(error_chain(&e)),
            Ok(Ok((status, wait, bytes))) if status == StatusCode::TOO_MANY_REQUESTS => {
                Exchange::Throttled(status, bytes, wait)
            }
            Ok(Ok((status, wait, bytes))) if status.is_server_error() && wait.is_some() => {
                Exchange::Throttled(status, bytes, wait)
            }
            Ok(Ok((status, _, bytes))) => Exchange::Done(status, bytes),
        }
    }
}

/// What one HTTP exchange came to.
enum Exchange {
    /// A response (any status) and its body.
    Done(StatusCode, Vec<u8>),
    /// A 429, or a 5xx with `Retry-After`, and how long the server asked to wait.
    Throttled(StatusCode, Vec<u8>, Option<Duration>),
    /// No response: connection failure, timeout, broken body.
    Transport(String),
}

/// A failure worth retrying.
enum Failure {
    Status(StatusCode, Vec<u8>),
    Throttled(StatusCode, Vec<u8>, Option<Duration>),
    Transport(String),
}

impl Failure {
    fn summary(&self) -> String {
        match self {
            Failure::Status(status, _) | Failure::Throttled(status, _, _) => {
                format!("HTTP {status}")
            }
            Failure::Transport(what) => what.clone(),
        }
    }
}

fn delegate_error(message: String) -> Error {
    Error::new(ErrorKind::Delegate, message)
}

fn timed_out(timeout: Duration) -> String {
    format!(
        "the request timed out after {}s (raise the delegate's request timeout if the model is slow)",
        timeout.as_secs_f64()
    )
}

/// True for statuses that say "try again later" rather than "this request is wrong".
fn retryable(status: StatusCode) -> bool {
    status == StatusCode::REQUEST_TIMEOUT
        || status == StatusCode::TOO_MANY_REQUESTS
        || status.is_server_error()
}

/// Returns the `retry`-th backoff delay (from 0): `base * 2^retry`, capped at [`MAX_BACKOFF`],
/// of which a random half is jitter so that many clients do not retry in lockstep.
fn backoff(base: Duration, retry: u32) -> Duration {
    let full = base
        .saturating_mul(2u32.saturating_pow(retry.min(30)))
        .min(MAX_BACKOFF);
    let half = full / 2;
    half + half.mul_f64(fastrand::f64())
}

/// Reads how long the server asks to wait: OpenAI's `retry-after-ms`, else `Retry-After` in
/// seconds or as an HTTP date.
fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let text = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
    };
    if let Some(ms) = text("retry-after-ms").and_then(|v| v.parse::<f64>().ok()) {
        return seconds(ms / 1000.0);
    }
    let value = text(RETRY_AFTER.as_str())?;
    if let Ok(secs) = value.parse::<f64>() {
        return seconds(secs);
    }
    let at = parse_http_date(value)?;
    Some(
        at.duration_since(SystemTime::now())
            .unwrap_or(Duration::ZERO),
    )
}

fn seconds(secs: f64) -> Option<Duration> {
    (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs.min(1e9)))
}

/// Parses an IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`), the HTTP date form servers send.
fn parse_http_date(text: &str) -> Option<SystemTime> {
    let (_, rest) = text.split_once(", ")?;
    let parts: Vec<&str> = rest.split(' ').collect();
    let [day, month, year, time, "GMT"] = parts.as_slice() else {
        return None;
    };
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let month = i64::try_from(MONTHS.iter().position(|m| m == month)? + 1).ok()?;
    let day: i64 = day.parse().ok()?;
    let year: i64 = year.parse().ok()?;
    let hms: Vec<i64> = time
        .split(':')
        .map(|p| p.parse().ok())
        .collect::<Option<_>>()?;
    let [h, m, s] = hms.as_slice() else {
        return None;
    };
    if !(1..=31).contains(&day) || *h > 23 || *m > 59 || *s > 60 {
        return None;
    }
    // Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's days_from_civil).
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let secs = u64::try_from(days * 86_400 + h * 3600 + m * 60 + s).ok()?;
    SystemTime::UNIX_EPOCH.checked_add(Duration::from_secs(secs))
}

/// Renders an error with its sources, which is where reqwest keeps the useful part.
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let line = cause.to_string();
        if !text.contains(&line) {
            text.push_str(": ");
            text.push_str(&line);
        }
        source = cause.source();
    }
    text
}

/// Returns the server's own message from an OpenAI error body, else the start of the body.
fn error_excerpt(bytes: &[u8]) -> String {
    if let Ok(value) = serde_json::from_slice::<Value>(bytes) {
        let message = value
            .pointer("/error/message")
            .or_else(|| value.get("error").filter(|e| e.is_string()))
            .or_else(|| value.get("message"))
            .and_then(Value::as_str);
        if let Some(message) = message {
            return format!("{message:?}");
        }
    }
    excerpt(&String::from_utf8_lossy(bytes))
}

fn excerpt(text: &str) -> String {
    let text = text.trim();
    if text.is_empty() {
        return "(empty body)".to_owned();
    }
    match text.char_indices().nth(BODY_EXCERPT_CHARS) {
        Some((cut, _)) => format!("{:?}…", &text[..cut]),
        None => format!("{text:?}"),
    }
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
            tracing::trace!(request = %body, "openai: request");
            let result = self.call(&body).await;
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
    fn http_dates() {
        let cases = [
            ("Sun, 06 Nov 1994 08:49:37 GMT", Some(784_111_777)),
            ("Thu, 01 Jan 1970 00:00:00 GMT", Some(0)),
            ("Tue, 29 Feb 2000 23:59:59 GMT", Some(951_868_799)),
            ("Sun, 06 Nov 1994 08:49:37 UTC", None),
            ("Sun, 06 Foo 1994 08:49:37 GMT", None),
            ("yesterday", None),
        ];
        for (text, want) in cases {
            let got = parse_http_date(text).map(|t| {
                t.duration_since(SystemTime::UNIX_EPOCH)
                    .expect("after the epoch")
                    .as_secs()
            });
            assert_eq!(got, want, "{text}");
        }
    }

    #[test]
    fn retry_after_forms() {
        let mut headers = HeaderMap::new();
        assert_eq!(retry_after(&headers), None);
        headers.insert(RETRY_AFTER, "2".parse().expect("valid header"));
        assert_eq!(retry_after(&headers), Some(Duration::from_secs(2)));
        headers.insert(
            RETRY_AFTER,
            "Thu, 01 Jan 1970 00:00:00 GMT"
                .parse()
                .expect("valid header"),
        );
        assert_eq!(retry_after(&headers), Some(Duration::ZERO));
        headers.insert("retry-after-ms", "250".parse().expect("valid header"));
        assert_eq!(retry_after(&headers), Some(Duration::from_millis(250)));
    }

    #[test]
    fn backoff_grows_and_is_capped() {
        let base = Duration::from_millis(500);
        for retry in 0..40 {
            let full = base
                .saturating_mul(2u32.saturating_pow(retry.min(30)))
                .min(MAX_BACKOFF);
            let wait = backoff(base, retry);
            assert!(wait >= full / 2 && wait <= full, "retry {retry}: {wait:?}");
        }
    }

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
