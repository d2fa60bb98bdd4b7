//! Who may call what. Every handler states its access in its signature, with one of four
//! extractors, so that no path decides it:
//!
//! | extractor | who | refused with |
//! |---|---|---|
//! | [`ApiRead`] | the bearer header, or a signed-in browser's session cookie | 401 |
//! | [`ApiChange`] | the bearer header (never the cookie alone) and a JSON body | 401, or 403 naming why |
//! | [`PageView`] | a session, or the bearer header; `?token=` signs a browser in | a redirect to `/login` |
//! | [`PageForm`] | a session; its CSRF token is compared by the form's handler | a redirect to `/login` |
//!
//! A handler with none of them (`/healthz`, `/login`) answers anyone who passes [`screen`], the
//! layer every request crosses first (the model Jupyter uses; DESIGN §8: any page the operator
//! has open may be hostile):
//!
//! - its `Host` must be an IP address, `localhost` or a name given with `--allow-host`: a page on
//!   a name rebound to this address is the same origin to the browser;
//! - a change (any method but GET, HEAD, OPTIONS) must not come from another origin (`Origin`,
//!   `Sec-Fetch-Site`): a form or a `no-cors` fetch needs no preflight, and the browser adds the
//!   session cookie to it.

use std::sync::atomic::Ordering;

use axum::extract::{FromRequestParts, Request, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Redirect, Response};
use harness::Error;
use serde_json::json;

use super::app::{ApiError, App, Shared};

/// Browser sessions kept at most (each opened with the token).
const MAX_SESSIONS: usize = 1024;
/// The review page's session cookie.
const SESSION_COOKIE: &str = "harness_session";

/// A caller of the API that only reads: the bearer header, or a browser's session (the page's
/// own scripts read the API with its cookie).
pub(crate) struct ApiRead;

impl FromRequestParts<Shared> for ApiRead {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, app: &Shared) -> Result<Self, Response> {
        if bearer(&parts.headers).is_some_and(|given| app.token_matches(given))
            || app.session_csrf(&parts.headers).is_some()
        {
            return Ok(ApiRead);
        }
        Err(unauthorized(app, Class::Api))
    }
}

/// A change through the API: the bearer header — a cookie alone is refused, as a browser adds it
/// to requests other pages make — and `Content-Type: application/json`, which no form or
/// `no-cors` fetch can send.
pub(crate) struct ApiChange;

impl FromRequestParts<Shared> for ApiChange {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, app: &Shared) -> Result<Self, Response> {
        let (method, path) = (&parts.method, parts.uri.path());
        match bearer(&parts.headers) {
            Some(given) if app.token_matches(given) => {}
            None if app.session_csrf(&parts.headers).is_some() => {
                return Err(forbidden(
                    app,
                    format!(
                        "a {method} to {path} with only the session cookie is refused: a browser sends the cookie with requests other pages make; send `Authorization: Bearer TOKEN`"
                    ),
                ));
            }
            _ => return Err(unauthorized(app, Class::Api)),
        }
        let json_body = parts
            .headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.split(';').next())
            .is_some_and(|v| v.trim().eq_ignore_ascii_case("application/json"));
        if !json_body {
            return Err(forbidden(
                app,
                format!(
                    "a {method} to {path} must be `Content-Type: application/json` (a form or a `no-cors` fetch, which any page can send, is not)"
                ),
            ));
        }
        Ok(ApiChange)
    }
}

/// A browser reading a page: a session, or the bearer header. `GET PAGE?token=…` (the URL the
/// server prints) trades the token for a session first.
pub(crate) struct PageView {
    /// The session's CSRF token, for the page's forms; `None` when read with the bearer header,
    /// which has no session to post them from.
    pub(crate) csrf: Option<String>,
}

impl FromRequestParts<Shared> for PageView {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, app: &Shared) -> Result<Self, Response> {
        if let Some(token) = query_token(parts.uri.query()) {
            return Err(sign_in(app, &token, parts.uri.path()));
        }
        let csrf = app.session_csrf(&parts.headers);
        if csrf.is_some() || bearer(&parts.headers).is_some_and(|given| app.token_matches(given)) {
            return Ok(PageView { csrf });
        }
        Err(unauthorized(app, Class::Page))
    }
}

/// A browser posting one of the page's forms: only a session can, and the form must carry the
/// session's CSRF token (compared by the handler, which reads the form).
pub(crate) struct PageForm {
    /// The CSRF token of the session the cookie names.
    pub(crate) csrf: String,
}

impl FromRequestParts<Shared> for PageForm {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, app: &Shared) -> Result<Self, Response> {
        match app.session_csrf(&parts.headers) {
            Some(csrf) => Ok(PageForm { csrf }),
            None => Err(unauthorized(app, Class::Page)),
        }
    }
}

/// The layer every request crosses before its handler: counts it, and refuses (403) a `Host`
/// that may be a rebinding page's and a change another origin may have sent.
pub(crate) async fn screen(State(app): State<Shared>, request: Request, next: Next) -> Response {
    app.metrics.requests.fetch_add(1, Ordering::Relaxed);
    let headers = request.headers();
    let refused =
        foreign_host(&app.allowed_hosts, headers).or_else(|| cross_site(request.method(), headers));
    match refused {
        Some(why) => forbidden(&app, why),
        None => next.run(request).await,
    }
}

impl App {
    /// True when `given` is the token (compared in constant time).
    pub(crate) fn token_matches(&self, given: &str) -> bool {
        same_secret(given, &self.token)
    }

    /// Opens a browser session: its id (the cookie's value) and the CSRF token its forms carry.
    pub(crate) fn open_session(&self) -> Result<(String, String), ApiError> {
        let internal = |e: Error| {
            ApiError(
                StatusCode::INTERNAL_SERVER_ERROR,
                "internal".into(),
                e.message().to_owned(),
            )
        };
        let id = random_hex(16).map_err(internal)?;
        let csrf = random_hex(16).map_err(internal)?;
        let mut sessions = self
            .sessions
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        // Sign-ins are rare; a flood of them (each needs the token) only signs the rest out.
        if sessions.len() >= MAX_SESSIONS {
            sessions.clear();
        }
        sessions.insert(id.clone(), csrf.clone());
        Ok((id, csrf))
    }

    /// The CSRF token of the session the request's `harness_session` cookie names, if it names
    /// one this server opened.
    fn session_csrf(&self, headers: &HeaderMap) -> Option<String> {
        let id = cookie(headers, SESSION_COOKIE)?;
        let sessions = self
            .sessions
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        sessions
            .iter()
            .find(|(known, _)| same_secret(id, known))
            .map(|(_, csrf)| csrf.clone())
    }
}

/// `bytes` random bytes from the operating system, as hex.
pub(crate) fn random_hex(bytes: usize) -> Result<String, Error> {
    let mut buffer = vec![0u8; bytes];
    getrandom::fill(&mut buffer)
        .map_err(|e| Error::config(format!("the operating system gave no random bytes: {e}")))?;
    Ok(buffer.iter().map(|b| format!("{b:02x}")).collect())
}

/// `given == secret`, in time that depends only on their lengths.
pub(crate) fn same_secret(given: &str, secret: &str) -> bool {
    given.len() == secret.len()
        && given
            .bytes()
            .zip(secret.bytes())
            .fold(0u8, |acc, (a, b)| acc | (a ^ b))
            == 0
}

/// The `Set-Cookie` value of session `id`.
pub(crate) fn session_cookie(id: &str) -> String {
    format!("{SESSION_COOKIE}={id}; HttpOnly; SameSite=Strict; Path=/")
}

/// The token of an `Authorization: Bearer TOKEN` header.
fn bearer(headers: &HeaderMap) -> Option<&str> {
    headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
}

/// The value of cookie `name` in the request.
fn cookie<'h>(headers: &'h HeaderMap, name: &str) -> Option<&'h str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .find_map(|c| c.trim().strip_prefix(name)?.strip_prefix('='))
}

/// Who a refused caller is: a client of the API (told 401) or a browser (sent to sign in).
#[derive(Clone, Copy)]
enum Class {
    Api,
    Page,
}

/// A 403 naming why, counted as a request a web page may have sent.
fn forbidden(app: &App, why: String) -> Response {
    app.metrics.cross_site.fetch_add(1, Ordering::Relaxed);
    tracing::warn!("refused a request: {why}");
    (
        StatusCode::FORBIDDEN,
        axum::Json(json!({"error": "forbidden", "message": why})),
    )
        .into_response()
}

/// A missing or wrong token: 401 for the API, the sign-in page for a browser.
fn unauthorized(app: &App, class: Class) -> Response {
    app.metrics.unauthorized.fetch_add(1, Ordering::Relaxed);
    match class {
        Class::Page => Redirect::to("/login").into_response(),
        Class::Api => (
            StatusCode::UNAUTHORIZED,
            [(header::WWW_AUTHENTICATE, "Bearer")],
            axum::Json(json!({"error": "unauthorized"})),
        )
            .into_response(),
    }
}

/// The `token` parameter of a query string.
fn query_token(query: Option<&str>) -> Option<String> {
    query?
        .split('&')
        .find_map(|pair| pair.strip_prefix("token="))
        .map(str::to_owned)
}

/// `GET PAGE?token=…`: with the right token a session cookie and a redirect to the page without
/// the token, so it stays out of the history and the `Referer`.
fn sign_in(app: &App, token: &str, path: &str) -> Response {
    if !app.token_matches(token) {
        return unauthorized(app, Class::Page);
    }
    match app.open_session() {
        Ok((id, _)) => (
            StatusCode::SEE_OTHER,
            [
                (header::SET_COOKIE, session_cookie(&id)),
                (header::LOCATION, path.to_owned()),
            ],
        )
            .into_response(),
        Err(e) => e.into_response(),
    }
}

/// Why the request's `Host` may be a page rebinding a name to this address, if it may: only IP
/// addresses, `localhost` and the `allowed` names are answered.
fn foreign_host(allowed: &[String], headers: &HeaderMap) -> Option<String> {
    let host = headers.get(header::HOST)?;
    let Ok(host) = host.to_str() else {
        return Some("the Host header is not text".to_owned());
    };
    let name = match host.strip_prefix('[') {
        Some(bracketed) => bracketed.split(']').next().unwrap_or(""),
        None => host.rsplit_once(':').map_or(host, |(name, _)| name),
    };
    let name = name.trim_end_matches('.').to_ascii_lowercase();
    if name == "localhost" || name.parse::<std::net::IpAddr>().is_ok() || allowed.contains(&name) {
        return None;
    }
    Some(format!(
        "Host {host:?} is not this server's: it answers IP addresses, localhost and the names given with --allow-host (a page on another name may be rebinding it to this address); use http://127.0.0.1:PORT, or start the server with --allow-host {name}"
    ))
}

/// Why a change may be another origin's doing, if it may: a form or a `no-cors` fetch needs no
/// preflight, but the browser says where it comes from (`Origin`, `Sec-Fetch-Site`). Clients
/// that are not browsers send neither.
fn cross_site(method: &Method, headers: &HeaderMap) -> Option<String> {
    if method.is_safe() {
        return None;
    }
    let text = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let host = text(header::HOST.as_str());
    if let Some(origin) = text(header::ORIGIN.as_str()) {
        let authority = origin
            .split_once("://")
            .map_or(origin, |(_, rest)| rest)
            .trim_end_matches('/');
        if host.is_none_or(|host| !authority.eq_ignore_ascii_case(host)) {
            return Some(format!(
                "a {method} from origin {origin:?} is refused: changes are accepted only from this server's own pages or from clients that are not browsers"
            ));
        }
    }
    match text("sec-fetch-site") {
        Some(site @ ("cross-site" | "same-site")) => Some(format!(
            "a {site} {method} is refused: changes are accepted only from this server's own pages or from clients that are not browsers"
        )),
        _ => None,
    }
}
