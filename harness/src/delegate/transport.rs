//! HTTP for the model delegates (`openai`, `anthropic`): one POST of a JSON body, retried on
//! connection failures, timeouts, 408, 429 and 5xx with exponential backoff and jitter, honouring
//! the server's `Retry-After` (or `retry-after-ms`); the body is capped and read within the
//! request timeout.

use std::time::{Duration, SystemTime};

use reqwest::StatusCode;
use reqwest::header::{HeaderMap, RETRY_AFTER};
use serde_json::Value;

use crate::error::{Error, ErrorKind, Result};

/// The longest computed backoff between two tries.
pub(crate) const MAX_BACKOFF: Duration = Duration::from_secs(20);
/// The longest wait a server's `Retry-After` can ask for; longer requests are clamped so a
/// confused gateway cannot stall a delegation for hours.
pub(crate) const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);
/// The largest response body read; a chat completion is far smaller.
const MAX_BODY_BYTES: usize = 16 * 1024 * 1024;
/// How much of an error body goes into a message.
const BODY_EXCERPT_CHARS: usize = 500;

/// How one provider's requests are sent and retried.
pub(crate) struct Transport<'a> {
    /// The shared client (from `harness_builtins::http_client_builder`).
    pub(crate) client: &'a reqwest::Client,
    /// The delegate kind, for messages (`openai`, `anthropic`).
    pub(crate) provider: &'static str,
    /// Timeout of one request, body included.
    pub(crate) timeout: Duration,
    /// Retries after the first try.
    pub(crate) max_retries: u32,
    /// The first backoff delay.
    pub(crate) retry_base: Duration,
}

impl Transport<'_> {
    /// POSTs `body` to `url` with `headers` (and the trace context), retrying what is worth
    /// retrying; returns the body of the first successful response. `hint` says what to check
    /// when the server refuses the request outright.
    ///
    /// # Errors
    /// [`ErrorKind::Delegate`] naming the URL: refused (4xx other than 408/429), or still failing
    /// after every retry.
    pub(crate) async fn post(
        &self,
        url: &reqwest::Url,
        headers: &[(&str, String)],
        body: bytes::Bytes,
        hint: &str,
    ) -> Result<Vec<u8>> {
        let provider = self.provider;
        let tries = self.max_retries.saturating_add(1);
        let mut retry = 0;
        loop {
            let failure = match self.exchange(url, headers, body.clone()).await {
                Exchange::Done(status, bytes) if status.is_success() => return Ok(bytes),
                Exchange::Done(status, bytes) if !retryable(status) => {
                    return Err(delegate_error(format!(
                        "{provider}: POST {url} was refused with HTTP {status}: {} ({hint})",
                        error_excerpt(&bytes)
                    )));
                }
                Exchange::Done(status, bytes) => Failure::Status(status, bytes),
                Exchange::Throttled(status, bytes, wait) => Failure::Throttled(status, bytes, wait),
                Exchange::Transport(what) => Failure::Transport(what),
            };
            if retry >= self.max_retries {
                let what = match failure {
                    Failure::Status(status, bytes) | Failure::Throttled(status, bytes, _) => {
                        format!("HTTP {status}: {}", error_excerpt(&bytes))
                    }
                    Failure::Transport(what) => what,
                };
                return Err(delegate_error(format!(
                    "{provider}: POST {url} failed after {tries} tr{}: {what}",
                    if tries == 1 { "y" } else { "ies" }
                )));
            }
            let wait = match &failure {
                Failure::Throttled(_, _, Some(wait)) => (*wait).min(MAX_RETRY_AFTER),
                _ => backoff(self.retry_base, retry),
            };
            tracing::warn!(
                url = %url,
                retry = retry + 1,
                wait_ms = u64::try_from(wait.as_millis()).unwrap_or(u64::MAX),
                failure = %failure.summary(),
                "{provider}: retrying the request"
            );
            tokio::time::sleep(wait).await;
            retry += 1;
        }
    }

    /// Makes one HTTP request and reads its body, all within the request timeout.
    async fn exchange(
        &self,
        url: &reqwest::Url,
        headers: &[(&str, String)],
        body: bytes::Bytes,
    ) -> Exchange {
        let timeout = self.timeout;
        let mut builder = self
            .client
            .post(url.clone())
            .timeout(timeout)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body);
        for (name, value) in headers {
            builder = builder.header(*name, value);
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

pub(crate) fn delegate_error(message: String) -> Error {
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

pub(crate) fn excerpt(text: &str) -> String {
    let text = text.trim();
    if text.is_empty() {
        return "(empty body)".to_owned();
    }
    match text.char_indices().nth(BODY_EXCERPT_CHARS) {
        Some((cut, _)) => format!("{:?}…", &text[..cut]),
        None => format!("{text:?}"),
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
}
