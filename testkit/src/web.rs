//! The one plain HTTP server for tests of `http.get`/`http.post` and endpoint checks: fixed
//! routes on 127.0.0.1 covering bodies, headers, statuses, redirects and a request that never
//! ends.
//!
//! | route | answer |
//! |---|---|
//! | `GET /hello` | 200 `hello`, `content-type: text/plain; charset=utf-8`, `x-custom: Yes` |
//! | `GET /health` | 200 `ok` |
//! | `GET /status/{code}` | that status, body `status {code}` |
//! | `ANY /echo` | JSON `{method, content_type, token (x-token), body}` |
//! | `GET /never` | never answers |
//! | `GET /big` | [`BIG_BODY_BYTES`] bytes of `a` |
//! | `GET /redirect?to=URL` | 302 to `URL` |
//! | `GET /to-hello`, `/to-to-hello` | 302 → `/hello`, 301 → `/to-hello` |
//! | `GET /to-evil` | 302 to `http://evil.example.com/` |
//! | `POST /see-other`, `/temporary` | 303 / 307 → `/echo` |
//! | `GET /loop` | 302 to itself |
//!
//! ```no_run
//! let server = harness_testkit::web::WebServer::start();
//! assert!(server.url("/health").starts_with("http://127.0.0.1:"));
//! ```

use std::net::SocketAddr;

use axum::Router;
use axum::body::Bytes;
use axum::extract::Path;
use axum::http::{HeaderMap, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get, post};
use serde_json::json;

use crate::serve::Served;

/// The size of the `/big` body.
pub const BIG_BODY_BYTES: usize = 10_000;

/// The fixture server; stops when dropped.
pub struct WebServer {
    served: Served,
}

impl std::fmt::Debug for WebServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebServer")
            .field("addr", &self.served.addr())
            .finish()
    }
}

impl WebServer {
    /// Starts the server on a free loopback port.
    ///
    /// # Panics
    /// When no loopback port can be bound.
    pub fn start() -> Self {
        let app = Router::new()
            .route("/hello", get(hello))
            .route("/health", get(|| async { "ok" }))
            .route("/status/{code}", get(status))
            .route("/echo", any(echo))
            .route("/never", get(never))
            .route("/big", get(|| async { "a".repeat(BIG_BODY_BYTES) }))
            .route("/redirect", get(redirect_to))
            .route(
                "/to-evil",
                get(|| async { redirect(StatusCode::FOUND, "http://evil.example.com/") }),
            )
            .route(
                "/to-hello",
                get(|| async { redirect(StatusCode::FOUND, "/hello") }),
            )
            .route(
                "/to-to-hello",
                get(|| async { redirect(StatusCode::MOVED_PERMANENTLY, "/to-hello") }),
            )
            .route(
                "/see-other",
                post(|| async { redirect(StatusCode::SEE_OTHER, "/echo") }),
            )
            .route(
                "/temporary",
                post(|| async { redirect(StatusCode::TEMPORARY_REDIRECT, "/echo") }),
            )
            .route(
                "/loop",
                get(|| async { redirect(StatusCode::FOUND, "/loop") }),
            );
        WebServer {
            served: Served::start(app),
        }
    }

    /// Returns the address served.
    pub fn addr(&self) -> SocketAddr {
        self.served.addr()
    }

    /// Returns `http://127.0.0.1:PORT{path}`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr())
    }
}

async fn hello() -> impl IntoResponse {
    (
        [
            (header::CONTENT_TYPE, "text/plain; charset=utf-8"),
            (header::HeaderName::from_static("x-custom"), "Yes"),
        ],
        "hello",
    )
}

async fn status(Path(code): Path<u16>) -> Response {
    match StatusCode::from_u16(code) {
        Ok(status) => (status, format!("status {code}")).into_response(),
        Err(_) => (StatusCode::BAD_REQUEST, "not a status code").into_response(),
    }
}

/// Answers with what it received: method, content type, `x-token` header and body.
async fn echo(method: Method, headers: HeaderMap, body: Bytes) -> impl IntoResponse {
    let header = |name: &str| {
        headers
            .get(name)
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
    };
    axum::Json(json!({
        "method": method.as_str(),
        "content_type": header("content-type"),
        "token": header("x-token"),
        "body": String::from_utf8_lossy(&body),
    }))
}

/// Never answers; the client's timeout is what ends the request.
async fn never() -> &'static str {
    std::future::pending::<&'static str>().await
}

/// `?to=URL`, taken as written (the tests' URLs need no decoding).
async fn redirect_to(uri: Uri) -> Response {
    match uri.query().and_then(|q| q.strip_prefix("to=")) {
        Some(to) => (StatusCode::FOUND, [(header::LOCATION, to.to_owned())]).into_response(),
        None => (StatusCode::BAD_REQUEST, "give ?to=URL").into_response(),
    }
}

fn redirect(status: StatusCode, location: &'static str) -> impl IntoResponse {
    (status, [(header::LOCATION, location)])
}
