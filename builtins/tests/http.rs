//! `http.get` / `http.post` against a real HTTP server on 127.0.0.1, started inside each test.
//!
//! Scripts run on a blocking thread (`spawn_blocking`), as hosts must run them: the builtins
//! wait for HTTP with `Handle::block_on`. Nothing here leaves the loopback interface; the one
//! foreign host name (`evil.example.com`) is refused before any lookup.

use std::net::SocketAddr;

use harness_builtins::{
    Capabilities, Engine, Error, ErrorKind, HostAllowList, Limits, Sandbox, Script, Surface,
    Workspace,
};
use harness_testkit::web::{BIG_BODY_BYTES, WebServer};
use serde_json::{Value, json};

fn allow(hosts: &[&str]) -> Capabilities {
    Capabilities {
        hosts: HostAllowList::new(hosts).expect("valid host patterns"),
        ..Capabilities::default()
    }
}

/// Compiles `source` and calls `run(arg)` on a blocking thread, as a host must.
async fn run(
    capabilities: Capabilities,
    limits: Limits,
    source: &str,
    arg: Value,
) -> Result<Value, Error> {
    let source = source.to_owned();
    tokio::task::spawn_blocking(move || {
        let dir = tempfile::tempdir().expect("tempdir");
        let sandbox = Sandbox::new(
            Surface::Verifier,
            Workspace::new(dir.path()).expect("workspace"),
            capabilities,
            limits,
        );
        let engine = Engine::new();
        let script = Script::compile(&engine, &sandbox, "http.star", &source, &[])?;
        script.call(&sandbox, "run", &[&arg]).map(|out| out.value)
    })
    .await
    .expect("the script thread panicked")
}

fn expect_sandbox(result: Result<Value, Error>) -> Error {
    match result {
        Ok(value) => panic!("expected a sandbox error, got {value}"),
        Err(e) => {
            assert_eq!(e.kind(), ErrorKind::Sandbox, "{e}");
            e
        }
    }
}

const GET: &str = "def run(url):\n    return http.get(url)\n";

fn base(addr: SocketAddr) -> String {
    format!("http://{addr}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_returns_status_body_and_lowercase_headers() {
    let server = WebServer::start();
    let addr = server.addr();
    let url = format!("{}/hello", base(addr));
    let r = run(allow(&["127.0.0.1"]), Limits::default(), GET, json!(url))
        .await
        .expect("get");
    assert_eq!(r["status"], json!(200), "{r}");
    assert_eq!(r["ok"], json!(true));
    assert_eq!(r["body"], json!("hello"));
    assert_eq!(r["url"], json!(url));
    assert_eq!(r["error"], json!(null));
    assert_eq!(r["error_kind"], json!(null));
    assert_eq!(r["truncated"], json!(false));
    let headers = r["headers"].as_object().expect("headers dict");
    assert_eq!(headers["x-custom"], json!("Yes"), "{r}");
    assert_eq!(headers["content-type"], json!("text/plain; charset=utf-8"));
    assert_eq!(headers["content-length"], json!("5"));
    assert!(
        headers.keys().all(|k| k == &k.to_ascii_lowercase()),
        "header names are lowercase: {headers:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_sends_headers() {
    let server = WebServer::start();
    let addr = server.addr();
    let source = "
def run(url):
    r = http.get(url, headers = {\"X-Token\": \"t0k\"}, timeout = 5)
    return json.decode(r[\"body\"])
";
    let echoed = run(
        allow(&["127.0.0.1"]),
        Limits::default(),
        source,
        json!(format!("{}/echo", base(addr))),
    )
    .await
    .expect("get");
    assert_eq!(
        echoed,
        json!({"method": "GET", "content_type": null, "token": "t0k", "body": ""})
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn post_sends_json_and_text_bodies() {
    let server = WebServer::start();
    let addr = server.addr();
    let source = "
def run(url):
    a = http.post(url, json = {\"b\": [True, None], \"a\": 1})
    b = http.post(url, body = \"plain text\", headers = {\"content-type\": \"text/plain\"})
    c = http.post(url)
    return [a[\"status\"], json.decode(a[\"body\"]), json.decode(b[\"body\"]), json.decode(c[\"body\"])]
";
    let r = run(
        allow(&["127.0.0.1"]),
        Limits::default(),
        source,
        json!(format!("{}/echo", base(addr))),
    )
    .await
    .expect("post");
    assert_eq!(
        r,
        json!([
            200,
            {"method": "POST", "content_type": "application/json", "token": null,
             "body": "{\"b\":[true,null],\"a\":1}"},
            {"method": "POST", "content_type": "text/plain", "token": null, "body": "plain text"},
            {"method": "POST", "content_type": null, "token": null, "body": ""},
        ])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn post_with_both_body_and_json_is_a_runtime_error() {
    let server = WebServer::start();
    let addr = server.addr();
    let source = "def run(url):\n    return http.post(url, body = \"x\", json = {})\n";
    let e = run(
        allow(&["127.0.0.1"]),
        Limits::default(),
        source,
        json!(format!("{}/echo", base(addr))),
    )
    .await
    .expect_err("both bodies");
    assert_eq!(e.kind(), ErrorKind::Runtime, "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_404_is_a_response_not_an_error() {
    let server = WebServer::start();
    let addr = server.addr();
    let r = run(
        allow(&["127.0.0.1"]),
        Limits::default(),
        GET,
        json!(format!("{}/nowhere", base(addr))),
    )
    .await
    .expect("get");
    assert_eq!(r["status"], json!(404), "{r}");
    assert_eq!(r["ok"], json!(false));
    assert_eq!(r["error"], json!(null));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_connection_is_status_0_with_an_error() {
    // A port nobody listens on: bind one, note it, release it.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("ephemeral port")
        .port();
    let r = run(
        allow(&["127.0.0.1"]),
        Limits::default(),
        GET,
        json!(format!("http://127.0.0.1:{port}/")),
    )
    .await
    .expect("a network failure is a value");
    assert_eq!(r["status"], json!(0), "{r}");
    assert_eq!(r["ok"], json!(false));
    assert!(
        r["error"].as_str().is_some_and(|e| !e.is_empty()),
        "error says what happened: {r}"
    );
    assert_eq!(r["error_kind"], json!("connect"), "{r}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_does_not_answer_in_time_is_status_0() {
    let server = WebServer::start();
    let addr = server.addr();
    let source = "def run(url):\n    return http.get(url, timeout = 1)\n";
    let r = run(
        allow(&["127.0.0.1"]),
        Limits::default(),
        source,
        json!(format!("{}/never", base(addr))),
    )
    .await
    .expect("a timeout is a value");
    assert_eq!(r["status"], json!(0), "{r}");
    assert_eq!(r["ok"], json!(false));
    assert!(r["error"].as_str().is_some_and(|e| !e.is_empty()), "{r}");
    assert_eq!(r["error_kind"], json!("timeout"), "{r}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hosts_not_on_the_allow_list_are_refused() {
    let server = WebServer::start();
    let addr = server.addr();
    let url = json!(format!("{}/hello", base(addr)));
    for hosts in [&[][..], &["example.com"][..], &["127.0.0.2"][..]] {
        let e = expect_sandbox(run(allow(hosts), Limits::default(), GET, url.clone()).await);
        assert!(e.message().contains("allow-list"), "{e}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wildcard_does_not_open_loopback_addresses() {
    let server = WebServer::start();
    let addr = server.addr();
    let port = addr.port();
    for url in [
        format!("http://127.0.0.1:{port}/hello"),
        format!("http://localhost:{port}/hello"),
    ] {
        let e = expect_sandbox(run(allow(&["*"]), Limits::default(), GET, json!(url)).await);
        assert!(e.message().contains("local address"), "{e}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn localhost_works_only_when_named_exactly() {
    let server = WebServer::start();
    let addr = server.addr();
    let url = json!(format!("http://localhost:{}/hello", addr.port()));
    let r = run(allow(&["localhost"]), Limits::default(), GET, url.clone())
        .await
        .expect("localhost is listed exactly");
    assert_eq!(r["status"], json!(200), "{r}");
    assert_eq!(r["body"], json!("hello"));

    // A pattern that matches the name without naming it does not open a local address.
    for pattern in ["localhos*", "local?ost"] {
        let e = expect_sandbox(run(allow(&[pattern]), Limits::default(), GET, url.clone()).await);
        assert!(e.message().contains("local address"), "{e}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redirect_to_a_host_not_allowed_is_refused() {
    let server = WebServer::start();
    let addr = server.addr();
    let e = expect_sandbox(
        run(
            allow(&["127.0.0.1"]),
            Limits::default(),
            GET,
            json!(format!("{}/to-evil", base(addr))),
        )
        .await,
    );
    assert!(e.message().contains("evil.example.com"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redirects_on_the_same_host_are_followed() {
    let server = WebServer::start();
    let addr = server.addr();
    for path in ["/to-hello", "/to-to-hello"] {
        let r = run(
            allow(&["127.0.0.1"]),
            Limits::default(),
            GET,
            json!(format!("{}{path}", base(addr))),
        )
        .await
        .expect("get");
        assert_eq!(r["status"], json!(200), "{path}: {r}");
        assert_eq!(r["body"], json!("hello"));
        assert_eq!(
            r["url"],
            json!(format!("{}/hello", base(addr))),
            "final url"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn post_redirects_keep_or_drop_the_body_by_status() {
    let server = WebServer::start();
    let addr = server.addr();
    let source = "
def run(base):
    see_other = http.post(base + \"/see-other\", body = \"payload\")
    temporary = http.post(base + \"/temporary\", body = \"payload\")
    return [json.decode(see_other[\"body\"]), json.decode(temporary[\"body\"])]
";
    let r = run(
        allow(&["127.0.0.1"]),
        Limits::default(),
        source,
        json!(base(addr)),
    )
    .await
    .expect("post");
    assert_eq!(r[0]["method"], json!("GET"), "303 turns into GET: {r}");
    assert_eq!(r[0]["body"], json!(""));
    assert_eq!(r[1]["method"], json!("POST"), "307 keeps the method: {r}");
    assert_eq!(r[1]["body"], json!("payload"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redirect_loop_ends_as_status_0() {
    let server = WebServer::start();
    let addr = server.addr();
    let r = run(
        allow(&["127.0.0.1"]),
        Limits::default(),
        GET,
        json!(format!("{}/loop", base(addr))),
    )
    .await
    .expect("a redirect loop is a value");
    assert_eq!(r["status"], json!(0), "{r}");
    assert!(r["error"].as_str().is_some_and(|e| !e.is_empty()), "{r}");
    assert_eq!(r["error_kind"], json!("redirects"), "{r}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bodies_over_the_cap_are_truncated() {
    let server = WebServer::start();
    let addr = server.addr();
    let limits = Limits {
        max_http_body_bytes: 1000,
        ..Limits::default()
    };
    let source = "
def run(base):
    big = http.get(base + \"/big\")
    small = http.get(base + \"/hello\")
    return [big[\"status\"], len(big[\"body\"]), big[\"truncated\"], small[\"body\"], small[\"truncated\"]]
";
    let r = run(allow(&["127.0.0.1"]), limits, source, json!(base(addr)))
        .await
        .expect("get");
    assert_eq!(r, json!([200, 1000, true, "hello", false]));

    // Under the default cap the same body arrives whole.
    let r = run(
        allow(&["127.0.0.1"]),
        Limits::default(),
        source,
        json!(base(addr)),
    )
    .await
    .expect("get");
    assert_eq!(r, json!([200, BIG_BODY_BYTES, false, "hello", false]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_urls_and_timeouts_are_runtime_errors() {
    for (source, url) in [
        (GET, "not a url"),
        (
            "def run(url):\n    return http.get(url, timeout = 0)\n",
            "http://127.0.0.1/",
        ),
        (
            "def run(url):\n    return http.get(url, timeout = \"5\")\n",
            "http://127.0.0.1/",
        ),
    ] {
        let e = run(allow(&["127.0.0.1"]), Limits::default(), source, json!(url))
            .await
            .expect_err(url);
        assert_eq!(e.kind(), ErrorKind::Runtime, "{e}");
    }
}

#[tokio::test]
async fn scripts_can_run_under_a_current_thread_runtime() {
    let server = WebServer::start();
    let addr = server.addr();
    let r = run(
        allow(&["127.0.0.1"]),
        Limits::default(),
        GET,
        json!(format!("{}/hello", base(addr))),
    )
    .await
    .expect("get");
    assert_eq!(r["body"], json!("hello"), "{r}");
}

#[test]
fn scripts_can_run_without_an_ambient_runtime() {
    // The server runs on its own runtime's workers; the script runs on this plain thread, where
    // each builtin call brings a runtime of its own. The sandbox (and its HTTP client) outlives
    // those runtimes, so the second call must not reuse a connection of a dropped runtime.
    let server = WebServer::start();
    let addr = server.addr();
    let dir = tempfile::tempdir().expect("tempdir");
    let sandbox = Sandbox::new(
        Surface::Verifier,
        Workspace::new(dir.path()).expect("workspace"),
        allow(&["127.0.0.1"]),
        Limits::default(),
    );
    let engine = Engine::new();
    let source = "def run(base):\n    return [http.get(base + \"/hello\")[\"body\"], http.get(base + \"/hello\")[\"body\"]]\n";
    let script = Script::compile(&engine, &sandbox, "http.star", source, &[]).expect("compile");
    for _ in 0..3 {
        let out = script
            .call(&sandbox, "run", &[&json!(base(addr))])
            .expect("call");
        assert_eq!(out.value, json!(["hello", "hello"]));
    }
}

/// A TLS server on 127.0.0.1 whose certificate (tests/fixtures/tls, self-signed, for localhost
/// and 127.0.0.1) no system root vouches for. Returns its address and what its one handshake
/// ended with.
fn start_untrusted_tls_server() -> (SocketAddr, std::sync::mpsc::Receiver<String>) {
    use rustls::pki_types::pem::PemObject as _;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/tls");
    let certs = CertificateDer::pem_file_iter(format!("{dir}/self-signed.crt"))
        .expect("certificate file")
        .collect::<Result<Vec<_>, _>>()
        .expect("certificate");
    let key = PrivateKeyDer::from_pem_file(format!("{dir}/self-signed.key")).expect("key");
    let config = rustls::ServerConfig::builder_with_provider(std::sync::Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("protocol versions")
    .with_no_client_auth()
    .with_single_cert(certs, key)
    .expect("server config");
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("address");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let (socket, _) = listener.accept().expect("accept");
        let connection =
            rustls::ServerConnection::new(std::sync::Arc::new(config)).expect("connection");
        let mut stream = rustls::StreamOwned::new(connection, socket);
        let mut buf = [0u8; 1024];
        let ended = match std::io::Read::read(&mut stream, &mut buf) {
            Ok(n) => format!("read {n} bytes"),
            Err(e) => e.to_string(),
        };
        let _ = tx.send(ended);
    });
    (addr, rx)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_untrusted_certificate_is_refused_not_read() {
    let (addr, handshake) = start_untrusted_tls_server();
    let r = run(
        allow(&["127.0.0.1"]),
        Limits::default(),
        GET,
        json!(format!("https://{addr}/")),
    )
    .await
    .expect("a TLS failure is a value");
    assert_eq!(r["status"], json!(0), "{r}");
    assert_eq!(r["ok"], json!(false));
    let error = r["error"].as_str().unwrap_or_default().to_ascii_lowercase();
    assert!(
        error.contains("certificate"),
        "the error names the certificate: {r}"
    );
    // The client broke off the handshake with an alert (here CertificateUnknown: no system root
    // vouches for the certificate), so the server never got a request to read.
    let ended = handshake
        .recv_timeout(std::time::Duration::from_secs(10))
        .expect("the server saw a handshake");
    assert!(
        ended.contains("received fatal alert"),
        "the client rejected the certificate during the handshake: {ended}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn credentials_are_never_sent_to_another_origin_on_a_redirect() {
    let named = WebServer::start();
    let other = WebServer::start();
    let source = "
def run(url):
    r = http.get(url, headers = {\"X-Token\": \"t0k\", \"Authorization\": \"Bearer s3cret\"}, timeout = 5)
    return json.decode(r[\"body\"])
";
    let via = |to: String| json!(format!("{}/redirect?to={to}", base(named.addr())));
    let same = run(
        allow(&["127.0.0.1"]),
        Limits::default(),
        source,
        via(format!("{}/echo", base(named.addr()))),
    )
    .await
    .expect("same origin");
    assert_eq!(same["token"], json!("t0k"), "{same}");
    // Another port is another origin: the credential headers stay behind.
    let crossed = run(
        allow(&["127.0.0.1"]),
        Limits::default(),
        source,
        via(format!("{}/echo", base(other.addr()))),
    )
    .await
    .expect("other origin");
    assert_eq!(crossed["method"], json!("GET"), "{crossed}");
    assert_eq!(crossed["token"], Value::Null, "{crossed}");
}
