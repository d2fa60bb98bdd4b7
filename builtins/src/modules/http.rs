//! `http.get` and `http.post`: allow-listed hosts, every redirect hop re-checked, local networks
//! refused unless named, capped bodies. Network failures are values (`status == 0`), sandbox
//! violations are errors.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use reqwest::{Method, Url};
use serde_json::json;
use starlark::collections::SmallMap;
use starlark::environment::GlobalsBuilder;
use starlark::eval::Evaluator;
use starlark::starlark_module;
use starlark::values::{UnpackValue, Value};

use crate::capabilities::HostAllowList;
use crate::host::Host;
use crate::json_value::alloc_json;

/// Redirect hops followed before giving up.
const MAX_REDIRECTS: usize = 10;

/// Returns a `reqwest` client builder with the process's TLS provider (ring, unless the host
/// installed another first) and its one shared TLS configuration, whose system roots are loaded
/// on the first TLS handshake of the process rather than per client (see `tls.rs`). Every HTTP
/// client of the harness starts here.
pub fn client_builder() -> reqwest::ClientBuilder {
    let builder =
        reqwest::Client::builder().user_agent(concat!("harness/", env!("CARGO_PKG_VERSION")));
    match crate::tls::client_config() {
        Ok(config) => builder.tls_backend_preconfigured(config),
        // Cannot happen with ring's defaults (the provider is installed either way); reqwest's
        // own configuration verifies the same way.
        Err(_) => builder,
    }
}

/// True for addresses that reach the local machine or network rather than the internet, or that
/// are not for ordinary unicast use at all: loopback, private, link-local, shared (CGNAT),
/// `0.0.0.0/8`, protocol-assignment, documentation, benchmarking, multicast and reserved ranges;
/// for IPv6 also unique-local, multicast and documentation ranges, NAT64 (`64:ff9b::/96`,
/// `64:ff9b:1::/48`, which reach IPv4 hosts through a translator), and every form that embeds an
/// IPv4 address (mapped `::ffff:a.b.c.d`, compatible `::a.b.c.d`, 6to4 `2002::/16`) judged by the
/// address it embeds.
pub(crate) fn is_local(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            let [a, b, c, _] = v4.octets();
            v4.is_loopback()
                || v4.is_private()
                || v4.is_link_local()
                || v4.is_multicast()
                || a == 0 // "this network", including 0.0.0.0
                || a >= 240 // reserved, and the broadcast address
                || (a == 100 && (64..128).contains(&b)) // shared address space (CGNAT)
                || (a == 192 && b == 0 && c == 0) // IETF protocol assignments
                || (a == 192 && b == 0 && c == 2) // documentation
                || (a == 198 && b == 51 && c == 100) // documentation
                || (a == 203 && b == 0 && c == 113) // documentation
                || (a == 198 && (b == 18 || b == 19)) // benchmarking
        }
        IpAddr::V6(v6) => {
            let segments = v6.segments();
            if v6.is_loopback() || v6.is_unspecified() {
                return true;
            }
            if let Some(v4) = v6.to_ipv4_mapped() {
                return is_local(IpAddr::V4(v4));
            }
            // IPv4-compatible (deprecated): `::a.b.c.d`.
            if segments[..6].iter().all(|s| *s == 0) {
                return is_local(IpAddr::V4(embedded_v4(segments[6], segments[7])));
            }
            // 6to4: the IPv4 address follows the 2002::/16 prefix.
            if segments[0] == 0x2002 {
                return is_local(IpAddr::V4(embedded_v4(segments[1], segments[2])));
            }
            let first = segments[0];
            (segments[0] == 0x0064 && segments[1] == 0xff9b) // NAT64, well-known and local-use
                || (first & 0xfe00) == 0xfc00 // unique local
                || (first & 0xffc0) == 0xfe80 // link-local
                || (first & 0xff00) == 0xff00 // multicast
                || (first == 0x2001 && segments[1] == 0x0db8) // documentation
                || (first == 0x0100 && segments[1..4].iter().all(|s| *s == 0)) // discard-only
        }
    }
}

/// The IPv4 address held in two IPv6 segments.
fn embedded_v4(high: u16, low: u16) -> std::net::Ipv4Addr {
    let [a, b] = high.to_be_bytes();
    let [c, d] = low.to_be_bytes();
    std::net::Ipv4Addr::new(a, b, c, d)
}

/// Refusal raised by the resolver; found again in the error chain to tell a violation from a
/// network failure.
#[derive(Debug, thiserror::Error)]
#[error(
    "host {host:?} resolves to local address {ip}, which is refused unless the host is allow-listed by its exact name"
)]
struct LocalAddressRefused {
    host: String,
    ip: IpAddr,
}

/// Resolves names and refuses local answers for hosts not named exactly, so a public name cannot
/// be pointed at the local network. The connection uses exactly the addresses checked here.
struct GuardedResolver {
    hosts: HostAllowList,
}

impl reqwest::dns::Resolve for GuardedResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let host = name.as_str().to_owned();
        let exact = self.hosts.names_exactly(&host);
        Box::pin(async move {
            let addrs: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            if !exact && let Some(addr) = addrs.iter().find(|a| is_local(a.ip())) {
                return Err(Box::new(LocalAddressRefused {
                    host,
                    ip: addr.ip(),
                })
                    as Box<dyn std::error::Error + Send + Sync>);
            }
            Ok(Box::new(addrs.into_iter()) as reqwest::dns::Addrs)
        })
    }
}

fn client(host: &Host) -> anyhow::Result<reqwest::Client> {
    let sandbox = host.sandbox;
    sandbox
        .http
        .get_or_init(|| {
            client_builder()
                .redirect(reqwest::redirect::Policy::none())
                .dns_resolver(Arc::new(GuardedResolver {
                    hosts: sandbox.capabilities.hosts.clone(),
                }))
                .build()
                .map_err(|e| e.to_string())
        })
        .clone()
        .map_err(|e| anyhow::anyhow!("http: cannot build the HTTP client: {e}"))
}

/// Refuses a URL whose scheme, host or address the sandbox does not allow.
fn check_url(host: &Host, func: &str, url: &Url) -> anyhow::Result<()> {
    let surface = host.sandbox.surface.as_str();
    if !matches!(url.scheme(), "http" | "https") {
        return Err(host.refuse(format!(
            "{func}: {url} uses scheme {:?}; only http and https are allowed",
            url.scheme()
        )));
    }
    let Some(name) = url.host_str() else {
        return Err(host.refuse(format!("{func}: {url} has no host")));
    };
    let hosts = &host.sandbox.capabilities.hosts;
    if !hosts.allows(name) {
        let allowed: Vec<&str> = hosts.patterns().collect();
        let listed = if allowed.is_empty() {
            "no hosts are allowed".to_owned()
        } else {
            format!("allowed: {}", allowed.join(", "))
        };
        return Err(host.refuse(format!(
            "{func}: host {name:?} is not on the allow-list for {surface} scripts ({listed}; add it with --allow-host {})",
            name.trim_start_matches('[').trim_end_matches(']')
        )));
    }
    let literal = name.trim_start_matches('[').trim_end_matches(']');
    if let Ok(ip) = literal.parse::<IpAddr>()
        && is_local(ip)
        && !hosts.names_exactly(literal)
    {
        return Err(host.refuse(format!(
            "{func}: {ip} is a local address, refused unless allow-listed by exact address"
        )));
    }
    Ok(())
}

struct Request {
    method: Method,
    url: String,
    headers: Vec<(String, String)>,
    body: Option<Vec<u8>>,
    content_type: Option<&'static str>,
    timeout: Duration,
}

/// Walks the error chain for the resolver's refusal.
fn local_refusal(error: &reqwest::Error) -> Option<String> {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(e) = source {
        if let Some(refused) = e.downcast_ref::<LocalAddressRefused>() {
            return Some(refused.to_string());
        }
        source = e.source();
    }
    None
}

/// Describes a network failure in one line, with its innermost cause.
fn describe(error: &reqwest::Error) -> Failure {
    let (kind, mut text) = if error.is_timeout() {
        ("timeout", "timed out".to_owned())
    } else if error.is_connect() {
        ("connect", "connection failed".to_owned())
    } else if error.is_body() || error.is_decode() {
        ("body", "reading the body failed".to_owned())
    } else {
        ("request", "request failed".to_owned())
    };
    let mut source = std::error::Error::source(error);
    let mut last = None;
    while let Some(e) = source {
        last = Some(e.to_string());
        source = e.source();
    }
    if let Some(cause) = last {
        text.push_str(": ");
        text.push_str(&cause);
    }
    (kind, text)
}

/// Why a request got no response a script can read: its `error_kind` (`timeout`, `connect`,
/// `body`, `redirects`, `request`) and its `error` in words.
type Failure = (&'static str, String);

/// True for headers that carry credentials, which are not sent across origins on a redirect.
fn is_credential(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    matches!(
        name.as_str(),
        "authorization" | "proxy-authorization" | "cookie"
    ) || ["token", "key", "secret", "auth", "session", "password"]
        .iter()
        .any(|word| name.contains(word))
}

fn perform(host: &Host, func: &str, request: Request) -> anyhow::Result<serde_json::Value> {
    host.needs_thread(func)?;
    let cap = host.sandbox.limits.max_http_body_bytes;
    let mut url = Url::parse(&request.url)
        .map_err(|e| anyhow::anyhow!("{func}: invalid URL {:?}: {e}", request.url))?;
    let mut method = request.method;
    let mut body = request.body;
    let deadline = request.timeout.min(host.remaining());
    let failure = |url: &Url, (kind, error): (&str, String)| json!({"status": 0, "ok": false, "headers": {}, "body": "", "url": url.as_str(), "error": error, "error_kind": kind, "truncated": false});
    let intercepted = match &host.sandbox.interceptor {
        // The same checks first: an interceptor only ever narrows what a script reaches.
        Some(interceptor) => {
            check_url(host, func, &url)?;
            interceptor.http(&request.url, url.as_str())
        }
        None => None,
    };
    if let Some(reply) = intercepted {
        let reply = reply.map_err(|e| anyhow::anyhow!("{func}: {e}"))?;
        if let Some(error) = &reply.error {
            let kind = reply.error_kind.as_deref().unwrap_or("connect");
            return Ok(failure(&url, (kind, error.clone())));
        }
        return Ok(intercepted_reply(
            &url,
            &reply.body,
            reply.status,
            &reply.headers,
            cap,
        ));
    }
    let client = client(host)?;
    host.block_on(async {
        let started = tokio::time::Instant::now();
        let origin = url.origin();
        for _hop in 0..=MAX_REDIRECTS {
            check_url(host, func, &url)?;
            let mut builder = client.request(method.clone(), url.clone());
            // Credentials go to the origin the script named, never to one a redirect names.
            let same_origin = url.origin() == origin;
            for (name, value) in &request.headers {
                if same_origin || !is_credential(name) {
                    builder = builder.header(name, value);
                }
            }
            if let Some(bytes) = &body {
                if let Some(ct) = request.content_type {
                    builder = builder.header(reqwest::header::CONTENT_TYPE, ct);
                }
                builder = builder.body(bytes.clone());
            }
            let left = deadline.saturating_sub(started.elapsed());
            let response = match builder.timeout(left).send().await {
                Ok(response) => response,
                Err(e) => {
                    if let Some(refusal) = local_refusal(&e) {
                        return Err(host.refuse(format!("{func}: {refusal}")));
                    }
                    return Ok(failure(&url, describe(&e)));
                }
            };
            let status = response.status();
            if status.is_redirection()
                && let Some(location) = response.headers().get(reqwest::header::LOCATION)
            {
                let location = location.to_str().unwrap_or_default();
                url = url.join(location).map_err(|e| {
                    anyhow::anyhow!("{func}: bad redirect location {location:?}: {e}")
                })?;
                if status == reqwest::StatusCode::SEE_OTHER
                    || (method == Method::POST && status.as_u16() <= 302)
                {
                    method = Method::GET;
                    body = None;
                }
                continue;
            }
            let headers = joined_headers(response.headers());
            let final_url = response.url().to_string();
            let left = deadline.saturating_sub(started.elapsed());
            let (kept, truncated) = match read_capped(response, left, cap).await {
                Ok(read) => read,
                Err(why) => return Ok(failure(&url, why)),
            };
            return Ok(json!({
                "status": status.as_u16(),
                "ok": status.is_success(),
                "headers": headers,
                "body": String::from_utf8_lossy(&kept),
                "url": final_url,
                "error": null,
                "error_kind": null,
                "truncated": truncated,
            }));
        }
        Ok(failure(
            &url,
            ("redirects", format!("more than {MAX_REDIRECTS} redirects")),
        ))
    })?
}

/// What an interceptor answered, as a response: its body cut at `cap` bytes (on a character
/// boundary).
fn intercepted_reply(
    url: &Url,
    body: &str,
    status: u16,
    headers: &std::collections::BTreeMap<String, String>,
    cap: usize,
) -> serde_json::Value {
    let mut body = body.to_owned();
    let truncated = body.len() > cap;
    if truncated {
        let mut end = cap;
        while !body.is_char_boundary(end) {
            end -= 1;
        }
        body.truncate(end);
    }
    json!({
        "status": status,
        "ok": (200..300).contains(&status),
        "headers": headers,
        "body": body,
        "url": url.as_str(),
        "error": null,
        "error_kind": null,
        "truncated": truncated,
    })
}

/// A response's headers by name, repeated ones joined with `, `.
fn joined_headers(
    given: &reqwest::header::HeaderMap,
) -> serde_json::Map<String, serde_json::Value> {
    let mut headers = serde_json::Map::new();
    for (name, value) in given {
        let value = String::from_utf8_lossy(value.as_bytes()).into_owned();
        headers
            .entry(name.as_str().to_owned())
            .and_modify(|v| {
                if let serde_json::Value::String(s) = v {
                    s.push_str(", ");
                    s.push_str(&value);
                }
            })
            .or_insert(serde_json::Value::String(value));
    }
    headers
}

/// The body, at most `cap` bytes of it (and whether there was more), read within `left`; `Err`
/// says why it could not be read.
async fn read_capped(
    mut response: reqwest::Response,
    left: Duration,
    cap: usize,
) -> Result<(Vec<u8>, bool), Failure> {
    let deadline = tokio::time::Instant::now() + left;
    let mut kept = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        match tokio::time::timeout(left, response.chunk()).await {
            Ok(Ok(Some(chunk))) => {
                let room = cap.saturating_sub(kept.len());
                kept.extend_from_slice(&chunk[..chunk.len().min(room)]);
                if chunk.len() > room {
                    return Ok((kept, true));
                }
            }
            Ok(Ok(None)) => return Ok((kept, false)),
            Ok(Err(e)) => return Err(describe(&e)),
            Err(_) => return Err(("timeout", "timed out reading the body".to_owned())),
        }
    }
}

fn timeout_of(seconds: Value) -> anyhow::Result<Duration> {
    let secs = if let Some(i) = seconds.unpack_i32() {
        f64::from(i)
    } else if let Ok(Some(f)) = starlark::values::float::StarlarkFloat::unpack_value(seconds) {
        f.0
    } else {
        anyhow::bail!("timeout must be a number of seconds");
    };
    if !(secs.is_finite() && secs > 0.0) {
        anyhow::bail!("timeout must be a positive number of seconds");
    }
    Ok(Duration::from_secs_f64(secs.min(3600.0)))
}

fn header_pairs(headers: Option<SmallMap<String, String>>) -> Vec<(String, String)> {
    headers.map(|h| h.into_iter().collect()).unwrap_or_default()
}

#[starlark_module]
pub(crate) fn members(builder: &mut GlobalsBuilder) {
    /// Sends a GET request and returns `{status, ok, headers, body, url, error, error_kind,
    /// truncated}`. A refused connection, DNS failure or timeout is not an error: `status` is 0,
    /// `error` says what happened and `error_kind` is `timeout`, `connect`, `body`, `redirects`
    /// or `request` (null when a response was read). A host that is not allow-listed (also as a redirect target) is an
    /// error. Header names are lowercase; the body is text, capped.
    ///
    /// ```python
    /// r = http.get("https://api.example.com/health", timeout = 5)
    /// if r["status"] == 0:
    ///     return {"verified": False, "reason": "endpoint is down: " + r["error"]}
    /// ```
    fn get<'v>(
        #[starlark(require = pos)] url: &str,
        #[starlark(require = named)] headers: Option<SmallMap<String, String>>,
        #[starlark(require = named, default = 10)] timeout: Value<'v>,
        eval: &mut Evaluator<'v, '_, '_>,
    ) -> anyhow::Result<Value<'v>> {
        let host = Host::of(eval)?;
        let request = Request {
            method: Method::GET,
            url: url.to_owned(),
            headers: header_pairs(headers),
            body: None,
            content_type: None,
            timeout: timeout_of(timeout).map_err(|e| anyhow::anyhow!("http.get: {e}"))?,
        };
        let response = perform(host, "http.get", request)?;
        Ok(alloc_json(eval.heap(), &response))
    }

    /// Sends a POST request with a text `body` or a `json` value (encoded, with
    /// `content-type: application/json`) and returns the same dict as `http.get`.
    ///
    /// ```python
    /// r = http.post("http://localhost:8080/items", json = {"name": "widget"})
    /// r["status"] == 201
    /// ```
    fn post<'v>(
        #[starlark(require = pos)] url: &str,
        #[starlark(require = named)] body: Option<&str>,
        #[starlark(require = named)] json: Option<Value<'v>>,
        #[starlark(require = named)] headers: Option<SmallMap<String, String>>,
        #[starlark(require = named, default = 10)] timeout: Value<'v>,
        eval: &mut Evaluator<'v, '_, '_>,
    ) -> anyhow::Result<Value<'v>> {
        let host = Host::of(eval)?;
        let (body, content_type) = match (body, json) {
            (Some(_), Some(_)) => anyhow::bail!("http.post: give `body` or `json`, not both"),
            (Some(text), None) => (Some(text.as_bytes().to_vec()), None),
            (None, Some(value)) => (
                Some(value.to_json()?.into_bytes()),
                Some("application/json"),
            ),
            (None, None) => (None, None),
        };
        let request = Request {
            method: Method::POST,
            url: url.to_owned(),
            headers: header_pairs(headers),
            body,
            content_type,
            timeout: timeout_of(timeout).map_err(|e| anyhow::anyhow!("http.post: {e}"))?,
        };
        let response = perform(host, "http.post", request)?;
        Ok(alloc_json(eval.heap(), &response))
    }
}

#[cfg(test)]
mod tests {
    use super::is_local;

    #[test]
    fn local_addresses() {
        for (ip, local) in [
            ("127.0.0.1", true),
            ("10.1.2.3", true),
            ("172.16.0.1", true),
            ("192.168.1.1", true),
            ("169.254.169.254", true),
            ("100.64.0.1", true),
            ("0.0.0.0", true),
            ("8.8.8.8", false),
            ("::1", true),
            ("fe80::1", true),
            ("fd00::1", true),
            ("::ffff:127.0.0.1", true),
            ("::ffff:8.8.8.8", false),
            ("::127.0.0.1", true),
            ("::10.0.0.1", true),
            ("64:ff9b::808:808", true),
            ("64:ff9b::7f00:1", true),
            ("64:ff9b:1::1", true),
            ("2002:7f00:1::", true),
            ("2002:808:808::", false),
            ("0.1.2.3", true),
            ("255.255.255.255", true),
            ("240.0.0.1", true),
            ("224.0.0.251", true),
            ("192.0.0.170", true),
            ("198.18.0.1", true),
            ("203.0.113.9", true),
            ("ff02::1", true),
            ("2001:db8::1", true),
            ("2606:4700::1111", false),
            ("1.1.1.1", false),
        ] {
            assert_eq!(is_local(ip.parse().expect("ip")), local, "{ip}");
        }
    }
}
