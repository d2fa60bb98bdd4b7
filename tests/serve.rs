//! `harness serve` through real HTTP: submit a delegation and follow its server-sent events to
//! the end, list the runs awaiting review, override with every 409 case, the bearer token, a
//! workdir outside the root, an oversized body, and a graceful shutdown that records what ran;
//! with `--queue`, the same through worker processes on both queues, a restart while a
//! delegation is queued, and a dead letter recorded.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::queue::{Backend, Worker, queue_for, wait_for};
use crate::util::{TempDir, harness_bin};

/// A running server, killed when dropped.
struct Server {
    child: Child,
    addr: String,
    /// The token it requires: the one it printed, or the one it was given.
    token: String,
}

impl Server {
    fn start(root: &TempDir, env: &[(&str, &str)], listen: &str) -> Server {
        Server::start_with(root, env, listen, &[])
    }

    fn start_with(root: &TempDir, env: &[(&str, &str)], listen: &str, extra: &[&str]) -> Server {
        let mut command = Command::new(harness_bin());
        command
            .args(["serve", "--listen", listen, "--root"])
            .arg(root.join("root"))
            .arg("--journal")
            .arg(root.join("runs.db"))
            .args(extra)
            .env_remove("HARNESS_API_TOKEN")
            .env_remove("HARNESS_API_USER")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        for (name, value) in env {
            command.env(name, value);
        }
        let mut child = command.spawn().expect("the server starts");
        let stderr = child.stderr.take().expect("stderr");
        let mut lines = BufReader::new(stderr).lines();
        let first = lines
            .next()
            .and_then(Result::ok)
            .unwrap_or_else(|| panic!("the server said nothing: {:?}", child.wait()));
        let (addr, printed) = printed_url(&first);
        let token = env
            .iter()
            .find(|(name, _)| *name == "HARNESS_API_TOKEN")
            .map(|(_, token)| (*token).to_owned())
            .or(printed)
            .unwrap_or_else(|| panic!("no token in {first:?}"));
        // Keep draining stderr so the server never blocks on it.
        std::thread::spawn(move || for _ in lines {});
        Server { child, addr, token }
    }

    /// Signs a browser in through the printed URL; returns its session cookie (`name=value`).
    fn sign_in(&self) -> String {
        let (status, head, _) = self.exchange(
            "GET",
            &format!("/?token={}", self.token),
            &[("Authorization", "")],
            None,
        );
        assert_eq!(status, 303, "{head}");
        let cookie = head
            .lines()
            .find_map(|l| l.strip_prefix("set-cookie: "))
            .unwrap_or_else(|| panic!("no cookie in {head}"));
        assert!(
            cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"),
            "{cookie}"
        );
        cookie.split(';').next().expect("name=value").to_owned()
    }

    /// Sends one request with the bearer token (unless `headers` name an `Authorization`; an
    /// empty one sends none); returns the status and body (the whole stream, for server-sent
    /// events).
    fn request(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: Option<&str>,
    ) -> (u16, String) {
        let (status, _, body) = self.exchange(method, path, headers, body);
        (status, body)
    }

    /// [`Server::request`], with the response's head.
    fn exchange(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: Option<&str>,
    ) -> (u16, String, String) {
        self.exchange_then(method, path, headers, body, &mut || {})
    }

    /// A `GET` of `path` whose `arrived` is called once the response's head is in (a stream's
    /// follower is subscribed by then), before its body is read to the end.
    fn follow(&self, path: &str, arrived: &mut dyn FnMut()) -> (u16, String) {
        let (status, _, body) = self.exchange_then("GET", path, &[], None, arrived);
        (status, body)
    }

    /// [`Server::exchange`], calling `arrived` once the response's head is in.
    fn exchange_then(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: Option<&str>,
        arrived: &mut dyn FnMut(),
    ) -> (u16, String, String) {
        let mut stream = TcpStream::connect(&self.addr).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_secs(60)))
            .expect("timeout");
        let body = body.unwrap_or("");
        // Addressed to the server's own address unless the caller names another `Host`.
        let host = headers
            .iter()
            .find(|(name, _)| name.eq_ignore_ascii_case("host"))
            .map_or(self.addr.as_str(), |(_, host)| host);
        let mut head = format!(
            "{method} {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\nContent-Length: {}\r\n",
            body.len()
        );
        if !headers
            .iter()
            .any(|(name, _)| name.eq_ignore_ascii_case("content-type"))
        {
            head.push_str("Content-Type: application/json\r\n");
        }
        if !headers
            .iter()
            .any(|(name, _)| name.eq_ignore_ascii_case("authorization"))
        {
            head.push_str(&format!("Authorization: Bearer {}\r\n", self.token));
        }
        for (name, value) in headers
            .iter()
            .filter(|(name, value)| !name.eq_ignore_ascii_case("host") && !value.is_empty())
        {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        head.push_str("\r\n");
        stream.write_all(head.as_bytes()).expect("write");
        stream.write_all(body.as_bytes()).expect("write");
        let mut response = Vec::new();
        let mut chunk = [0u8; 4096];
        while !response.windows(4).any(|w| w == b"\r\n\r\n") {
            match stream.read(&mut chunk) {
                Ok(0) | Err(_) => break,
                Ok(n) => response.extend_from_slice(&chunk[..n]),
            }
        }
        arrived();
        let _ = stream.read_to_end(&mut response);
        let response = String::from_utf8_lossy(&response).into_owned();
        let (head, rest) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
        let status = head
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        let body = if head
            .to_ascii_lowercase()
            .contains("transfer-encoding: chunked")
        {
            dechunk(rest)
        } else {
            rest.to_owned()
        };
        (status, head.to_owned(), body)
    }

    fn json(&self, method: &str, path: &str, body: Option<&Value>) -> (u16, Value) {
        let text = body.map(Value::to_string);
        let (status, body) = self.request(method, path, &[], text.as_deref());
        let value = serde_json::from_str(&body).unwrap_or_else(|_| json!({"raw": body}));
        (status, value)
    }

    /// Submits `delegation` and waits until it is recorded; returns its id.
    fn run(&self, delegation: &Value) -> String {
        let (status, answer) = self.json("POST", "/v1/delegations", Some(delegation));
        assert_eq!(status, 202, "{answer}");
        let id = answer["id"].as_str().expect("an id").to_owned();
        self.wait(&id);
        id
    }

    /// Waits until delegation `id` is recorded; returns its record.
    fn wait(&self, id: &str) -> Value {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let (_, record) = self.json("GET", &format!("/v1/delegations/{id}"), None);
            if record.get("outcome").is_some() {
                return record;
            }
            assert!(Instant::now() < deadline, "{id} never finished: {record}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Server {
    /// Stops the server with SIGTERM, as an operator would, and waits for it to exit.
    fn stop(&mut self) {
        let killed = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .expect("kill runs");
        assert!(killed.success());
        let status = self.child.wait().expect("the server exits");
        assert_eq!(status.code(), Some(0));
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The address and the token in a server's first line (`… listening on http://ADDR/?token=T …`).
fn printed_url(first: &str) -> (String, Option<String>) {
    let url = first
        .split("http://")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("no address in {first:?}"));
    let (addr, rest) = url.split_once('/').unwrap_or((url, ""));
    let token = rest.split_once("token=").map(|(_, t)| t.to_owned());
    (addr.to_owned(), token)
}

fn dechunk(mut text: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = text.split_once("\r\n") {
        let Ok(size) = usize::from_str_radix(size.trim(), 16) else {
            break;
        };
        if size == 0 || rest.len() < size {
            break;
        }
        out.push_str(&rest[..size]);
        text = rest[size..].trim_start_matches("\r\n");
    }
    out
}

/// A root with a workspace `ws` and a scripted delegate that lies once, then writes hello.txt.
fn root() -> TempDir {
    let dir = TempDir::new();
    std::fs::create_dir_all(dir.join("root/ws")).expect("workspace");
    dir.write(
        "root/agent.star",
        r#"def respond(request):
    if request["attempt"] == 0:
        return {"content": "Done, I created hello.txt"}
    if request["turn"] == 0:
        return {"tool_calls": [{"name": "write_file", "arguments": {"path": "hello.txt", "content": "hi\n"}}]}
    return {"content": "Wrote hello.txt"}
"#,
    );
    dir.write(
        "root/liar.star",
        "def respond(request):\n    return {\"content\": \"Done, I created hello.txt\"}\n",
    );
    dir
}

fn delegation(script: &str) -> Value {
    json!({
        "task": "Create hello.txt",
        "delegate": {"kind": "scripted", "script": script},
        "tools": ["write_file"],
        "verify": "def run(result):\n    return fs.exists(\"hello.txt\")\n",
        "max_verify_retries": 1,
        "workdir": "ws",
    })
}

#[test]
fn submit_and_follow_the_events_to_the_end() {
    let dir = root();
    let server = Server::start(&dir, &[], "127.0.0.1:0");
    assert_eq!(
        server.json("GET", "/healthz", None),
        (200, json!({"status": "ok"}))
    );
    let (status, answer) = server.json("POST", "/v1/delegations", Some(&delegation("agent.star")));
    assert_eq!(status, 202, "{answer}");
    let id = answer["id"].as_str().expect("an id").to_owned();
    assert_eq!(
        answer["links"]["events"],
        json!(format!("/v1/delegations/{id}/events"))
    );
    // The stream: every event in order, ending with DelegationCompleted, then closed.
    let (status, stream) =
        server.request("GET", &format!("/v1/delegations/{id}/events"), &[], None);
    assert_eq!(status, 200);
    let events = assert_whole_run(&stream, &id);
    // The record, as `runs show --json` prints it; and the stream again, from the journal.
    let record = server.wait(&id);
    assert_eq!(record["outcome"], json!("passed"), "{record}");
    let (_, replay) = server.request("GET", &format!("/v1/delegations/{id}/events"), &[], None);
    assert_eq!(replay.matches("data: ").count(), events.len());
    let (status, report) = server.json("GET", "/v1/report", None);
    assert_eq!(status, 200, "{report}");
    let (status, metrics) = server.request("GET", "/metrics", &[], None);
    assert_eq!(status, 200);
    assert!(
        metrics.contains("harness_delegations_finished_total{outcome=\"passed\"} 1"),
        "{metrics}"
    );
    assert_eq!(
        server
            .json("GET", "/v1/delegations/d-0000000000000000", None)
            .0,
        404
    );
}

#[test]
fn review_and_override_with_every_refusal() {
    let dir = root();
    let server = Server::start(&dir, &[("HARNESS_API_USER", "ops-bot")], "127.0.0.1:0");
    let failed = server.run(&delegation("liar.star"));
    let (status, pending) = server.json("GET", "/v1/delegations?review=pending", None);
    assert_eq!(status, 200);
    let ids: Vec<&Value> = pending["pending"]
        .as_array()
        .expect("pending")
        .iter()
        .map(|p| &p["id"])
        .collect();
    assert_eq!(ids, [&json!(failed)], "{pending}");
    // The run list's filter narrows the runs awaiting review too, and says what it hides.
    let (status, page) = server.request("GET", "/?outcome=passed", &[], None);
    assert_eq!(status, 200, "{page}");
    assert!(
        page.contains("0 of 1 run(s) awaiting review match the filter")
            && !page.contains("class=\"pending\""),
        "{page}"
    );
    let (_, page) = server.request("GET", "/?outcome=failed", &[], None);
    assert!(
        page.contains(&format!("<tr class=\"pending\" data-id=\"{failed}\">"))
            && !page.contains("id=\"hidden\""),
        "{page}"
    );
    // The API's record is `runs show --json`'s: the review pending, no override yet.
    let (_, shown) = server.json("GET", &format!("/v1/delegations/{failed}"), None);
    assert_eq!(shown["review"], json!({"status": "pending"}), "{shown}");
    assert_eq!(shown["override"], Value::Null, "{shown}");
    let path = format!("/v1/delegations/{failed}/override");
    // `direct` is not allowed by the default policy.
    let (status, refused) = server.json(
        "POST",
        &path,
        Some(&json!({"decision": "approve", "type": "direct", "reason": "looks fine"})),
    );
    assert_eq!(
        (status, &refused["error"]),
        (409, &json!("override_not_allowed")),
        "{refused}"
    );
    // A check override needs a reason.
    let (status, refused) = server.json(
        "POST",
        &path,
        Some(&json!({"decision": "approve", "type": "check"})),
    );
    assert_eq!(
        (status, &refused["error"]),
        (409, &json!("reason_required")),
        "{refused}"
    );
    // Accepted, attributed to the token's owner.
    let (status, done) = server.json(
        "POST",
        &path,
        Some(&json!({"decision": "approve", "type": "check", "reason": "the file is there now"})),
    );
    assert_eq!(status, 200, "{done}");
    assert_eq!(done["override"]["user"], json!("ops-bot"));
    assert_eq!(done["override"]["decision"], json!("approved"));
    // Decided: who, what, when and why are in the API's record, exactly as `runs show --json`.
    let (_, shown) = server.json("GET", &format!("/v1/delegations/{failed}"), None);
    assert_eq!(shown["review"], json!({"status": "approved"}), "{shown}");
    assert_eq!(shown["override"]["user"], json!("ops-bot"), "{shown}");
    assert_eq!(
        shown["override"]["reason"],
        json!("the file is there now"),
        "{shown}"
    );
    let cli = crate::util::harness(["runs", "show", &failed, "--json", "--journal"])
        .args([dir.join("runs.db")])
        .run();
    cli.expect_code(0);
    assert_eq!(cli.json(), shown);
    // Decided once: a second decision is an illegal transition.
    let (status, refused) = server.json(
        "POST",
        &path,
        Some(&json!({"decision": "reject", "type": "check", "reason": "changed my mind", "user": "alice"})),
    );
    assert_eq!(
        (status, &refused["error"]),
        (409, &json!("illegal_transition")),
        "{refused}"
    );
    let (_, pending) = server.json("GET", "/v1/delegations?review=pending", None);
    assert_eq!(pending["pending"], json!([]));
    // Unknown runs and malformed decisions.
    let (status, refused) = server.json(
        "POST",
        "/v1/delegations/d-0000000000000000/override",
        Some(&json!({"decision": "approve", "type": "check", "reason": "x"})),
    );
    assert_eq!(
        (status, &refused["error"]),
        (404, &json!("not_found")),
        "{refused}"
    );
    let (status, refused) = server.json(
        "POST",
        &path,
        Some(&json!({"decision": "maybe", "type": "check"})),
    );
    assert_eq!(
        (status, &refused["error"]),
        (400, &json!("config")),
        "{refused}"
    );
}

/// With more runs awaiting review than the list shows, `/` shows the newest and counts the rest
/// (`harness review` lists them all).
#[test]
fn the_run_list_shows_the_newest_runs_awaiting_review_and_counts_the_rest() {
    let dir = root();
    let server = Server::start(&dir, &[], "127.0.0.1:0");
    let ids: Vec<String> = (0..51)
        .map(|_| {
            let (status, answer) =
                server.json("POST", "/v1/delegations", Some(&delegation("liar.star")));
            assert_eq!(status, 202, "{answer}");
            answer["id"].as_str().expect("an id").to_owned()
        })
        .collect();
    for id in &ids {
        server.wait(id);
    }
    let (status, page) = server.request("GET", "/", &[], None);
    assert_eq!(status, 200, "{page}");
    assert!(
        page.contains("The 50 newest of 51 runs awaiting review"),
        "{page}"
    );
    assert_eq!(page.matches("<tr class=\"pending\"").count(), 50, "{page}");
}

#[test]
fn an_override_without_a_user_is_refused() {
    let dir = root();
    let server = Server::start(&dir, &[], "127.0.0.1:0");
    let failed = server.run(&delegation("liar.star"));
    let (status, refused) = server.json(
        "POST",
        &format!("/v1/delegations/{failed}/override"),
        Some(&json!({"decision": "approve", "type": "check", "reason": "ok"})),
    );
    assert_eq!(
        (status, &refused["error"]),
        (400, &json!("user_required")),
        "{refused}"
    );
}

#[test]
fn bad_requests_are_refused_with_a_reason() {
    let dir = root();
    let server = Server::start(&dir, &[], "127.0.0.1:0");
    for workdir in ["../..", "/etc", "no-such-dir"] {
        let mut request = delegation("agent.star");
        request["workdir"] = json!(workdir);
        let (status, refused) = server.json("POST", "/v1/delegations", Some(&request));
        assert_eq!(
            (status, &refused["error"]),
            (400, &json!("workdir_outside_root")),
            "{workdir}: {refused}"
        );
    }
    let (status, refused) = server.json("POST", "/v1/delegations", Some(&json!({"task": "t"})));
    assert_eq!(
        (status, &refused["error"]),
        (400, &json!("config")),
        "{refused}"
    );
    let (status, _) = server.request("POST", "/v1/delegations", &[], Some("{not json"));
    assert_eq!(status, 400);
    let huge = format!("{{\"task\": \"{}\"}}", "x".repeat(2 * 1024 * 1024));
    let (status, _) = server.request("POST", "/v1/delegations", &[], Some(&huge));
    assert_eq!(status, 413);
}

#[test]
fn a_token_guards_every_request() {
    let dir = root();
    let server = Server::start(
        &dir,
        &[("HARNESS_API_TOKEN", "s3cret-token")],
        "127.0.0.1:0",
    );
    for headers in [
        vec![("Authorization", "")],
        vec![("Authorization", "Bearer wrong-token!")],
        vec![("Authorization", "s3cret-token")],
        vec![("Authorization", ""), ("Cookie", "harness_session=forged")],
    ] {
        let (status, body) =
            server.request("GET", "/v1/delegations?review=pending", &headers, None);
        assert_eq!(status, 401, "{headers:?}");
        assert_eq!(
            serde_json::from_str::<Value>(&body).ok(),
            Some(json!({"error": "unauthorized"}))
        );
    }
    // Health answers anyone (a load balancer has no token); nothing else does.
    let (status, _) = server.request("GET", "/healthz", &[("Authorization", "")], None);
    assert_eq!(status, 200);
    let (status, _) = server.request("GET", "/metrics", &[("Authorization", "")], None);
    assert_eq!(status, 401);
    let (status, body) = server.request("GET", "/v1/delegations?review=pending", &[], None);
    assert_eq!(status, 200, "{body}");
    // Reachable from other machines without a token: refuses to start.
    let refused = Command::new(harness_bin())
        .args(["serve", "--listen", "0.0.0.0:0", "--root"])
        .arg(dir.join("root"))
        .env_remove("HARNESS_API_TOKEN")
        .output()
        .expect("runs");
    let refused = crate::util::Output {
        code: refused.status.code().expect("an exit code"),
        stdout: String::from_utf8_lossy(&refused.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&refused.stderr).into_owned(),
    };
    refused.expect_code(2).expect_stderr_kind("config");
    assert!(refused.stderr.contains("HARNESS_API_TOKEN"), "{refused:?}");
}

/// Each endpoint's access, as a table: what it answers a caller with no credentials, one with the
/// bearer token, and a signed-in browser (its cookie only). Only health and the sign-in page
/// answer anyone; the API refuses with 401, the pages send a browser to sign in; a change to the
/// API needs the bearer header (the cookie alone is a web page's doing, 403), and a page's form
/// needs a session (the bearer header has none).
#[test]
fn every_endpoint_answers_only_the_callers_its_access_names() {
    let dir = root();
    let server = Server::start(&dir, &[("HARNESS_API_USER", "ops-bot")], "127.0.0.1:0");
    let cookie = server.sign_in();
    let form = "application/x-www-form-urlencoded";
    let json = "application/json";
    let override_body = r#"{"decision": "approve", "type": "check"}"#;
    let override_form = "decision=approve&type=check&reason=r&user=u&csrf=x";
    // (method, path, content type, body, anonymous, bearer, cookie)
    let table: &[(&str, &str, &str, &str, u16, u16, u16)] = &[
        ("GET", "/healthz", json, "", 200, 200, 200),
        ("GET", "/login", json, "", 200, 200, 200),
        ("POST", "/login", form, "token=wrong", 401, 401, 401),
        ("GET", "/metrics", json, "", 401, 200, 200),
        ("GET", "/v1/delegations", json, "", 401, 200, 200),
        ("POST", "/v1/delegations", json, "{}", 401, 400, 403),
        ("GET", "/v1/delegations/nope", json, "", 401, 404, 404),
        (
            "GET",
            "/v1/delegations/nope/events",
            json,
            "",
            401,
            404,
            404,
        ),
        (
            "POST",
            "/v1/delegations/nope/override",
            json,
            override_body,
            401,
            404,
            403,
        ),
        ("GET", "/v1/report", json, "", 401, 200, 200),
        ("GET", "/", json, "", 303, 200, 200),
        ("GET", "/runs/nope", json, "", 303, 404, 404),
        ("GET", "/report", json, "", 303, 200, 200),
        (
            "POST",
            "/runs/nope/override",
            form,
            override_form,
            303,
            303,
            403,
        ),
    ];
    for &(method, path, content, body, anonymous, bearer, signed_in) in table {
        for (caller, headers, expected) in [
            ("anonymous", vec![("Authorization", "")], anonymous),
            ("bearer", vec![], bearer),
            (
                "cookie",
                vec![("Authorization", ""), ("Cookie", cookie.as_str())],
                signed_in,
            ),
        ] {
            let mut headers = headers;
            headers.push(("Content-Type", content));
            let (status, head, answer) = server.exchange(method, path, &headers, Some(body));
            assert_eq!(
                status, expected,
                "{method} {path} as {caller}: {head}\n{answer}"
            );
            if status == 303 && caller != "cookie" {
                assert!(
                    head.to_ascii_lowercase().contains("location: /login"),
                    "{method} {path} as {caller} is sent to sign in: {head}"
                );
            }
        }
    }
}

/// Without HARNESS_API_TOKEN the server makes one up and prints it in the URL that signs a
/// browser in; nothing is answered without it, and two servers never share one.
#[test]
fn a_server_without_a_configured_token_generates_one() {
    let dir = root();
    let first = Server::start(&dir, &[], "127.0.0.1:0");
    let second = Server::start(&dir, &[], "127.0.0.1:0");
    assert_eq!(first.token.len(), 32, "{}", first.token);
    assert!(first.token.bytes().all(|b| b.is_ascii_hexdigit()));
    assert_ne!(first.token, second.token);
    let (status, _) = first.request("GET", "/v1/delegations", &[("Authorization", "")], None);
    assert_eq!(status, 401);
    let (status, _) = first.request("GET", "/", &[("Authorization", "")], None);
    assert_eq!(status, 303, "the page sends a browser to sign in");
    let (status, _) = first.request(
        "GET",
        "/v1/delegations",
        &[("Authorization", &format!("Bearer {}", second.token))],
        None,
    );
    assert_eq!(status, 401, "another server's token");
    let (status, _, _) = first.exchange(
        "GET",
        "/?token=0123456789abcdef0123456789abcdef",
        &[("Authorization", "")],
        None,
    );
    assert_eq!(status, 303);
    let cookie = first.sign_in();
    let (status, page) = first.request(
        "GET",
        "/",
        &[("Authorization", ""), ("Cookie", &cookie)],
        None,
    );
    assert_eq!(status, 200, "{page}");
    assert!(page.contains("No runs await review"), "{page}");
}

/// Any web page the operator has open is an attacker, and the operator is signed in: the
/// browser adds the session cookie to whatever a page sends. A cross-site form or `no-cors`
/// fetch (text/plain: no preflight) must neither run a delegation nor override a run, a page on
/// a name rebound to 127.0.0.1 must not be answered at all, and the review page's form works
/// only from the page itself (its CSRF token); clients with the token still work.
#[test]
fn a_hostile_web_page_can_neither_submit_nor_override_nor_rebind() {
    let dir = root();
    let server = Server::start(&dir, &[("HARNESS_API_USER", "ops-bot")], "127.0.0.1:0");
    let failed = server.run(&delegation("liar.star"));
    let cookie = server.sign_in();
    let session = ("Cookie", cookie.as_str());
    let no_bearer = ("Authorization", "");
    let own = format!("http://{}", server.addr);
    let text_plain = ("Content-Type", "text/plain;charset=UTF-8");
    let form = ("Content-Type", "application/x-www-form-urlencoded");
    let submission = delegation("agent.star").to_string();
    let approve = "decision=approve&type=check&reason=looks+fine&user=mallory";
    let override_path = format!("/runs/{failed}/override");
    let api_override = format!("/v1/delegations/{failed}/override");
    let api_approve =
        r#"{"decision": "approve", "type": "check", "reason": "fine", "user": "mallory"}"#;
    for (what, method, path, headers, body) in [
        (
            "a no-cors fetch from another site",
            "POST",
            "/v1/delegations",
            vec![
                no_bearer,
                session,
                text_plain,
                ("Origin", "https://evil.example"),
            ],
            submission.as_str(),
        ),
        (
            "a form on another site",
            "POST",
            override_path.as_str(),
            vec![no_bearer, session, form, ("Origin", "https://evil.example")],
            approve,
        ),
        (
            "a sandboxed page (origin null)",
            "POST",
            override_path.as_str(),
            vec![no_bearer, session, form, ("Origin", "null")],
            approve,
        ),
        (
            "another port on this machine",
            "POST",
            "/v1/delegations",
            vec![
                no_bearer,
                session,
                text_plain,
                ("Origin", "http://127.0.0.1:1"),
                ("Sec-Fetch-Site", "same-site"),
            ],
            submission.as_str(),
        ),
        (
            "a browser that names the site only in Sec-Fetch-Site",
            "POST",
            "/v1/delegations",
            vec![
                no_bearer,
                session,
                text_plain,
                ("Sec-Fetch-Site", "cross-site"),
            ],
            submission.as_str(),
        ),
        (
            "a text/plain POST naming no origin, with only the cookie",
            "POST",
            "/v1/delegations",
            vec![no_bearer, session, text_plain],
            submission.as_str(),
        ),
        (
            "a JSON override with only the cookie",
            "POST",
            api_override.as_str(),
            vec![no_bearer, session],
            api_approve,
        ),
        (
            "a text/plain POST even with the token",
            "POST",
            "/v1/delegations",
            vec![text_plain],
            submission.as_str(),
        ),
        (
            "a page rebound to 127.0.0.1, same origin to the browser",
            "POST",
            "/v1/delegations",
            vec![
                ("Host", "rebind.evil.example"),
                ("Origin", "http://rebind.evil.example"),
            ],
            submission.as_str(),
        ),
        (
            "a page rebound to 127.0.0.1, reading the runs",
            "GET",
            "/v1/delegations?review=pending",
            vec![("Host", "localhost.evil.example:80")],
            "",
        ),
    ] {
        let (status, answer) = server.request(method, path, &headers, Some(body));
        assert_eq!(status, 403, "{what}: {answer}");
        let answer: Value = serde_json::from_str(&answer).expect("a JSON refusal");
        assert_eq!(answer["error"], json!("forbidden"), "{what}");
        assert!(
            answer["message"].as_str().is_some_and(|m| !m.is_empty()),
            "{what}"
        );
    }
    // The review page's form posted from elsewhere without its CSRF token (an old browser that
    // names no origin), or with another session's, is refused by the form's handler.
    let other = server.sign_in();
    let page_of = |cookie: &str| {
        let (status, page) = server.request(
            "GET",
            &format!("/runs/{failed}"),
            &[no_bearer, ("Cookie", cookie)],
            None,
        );
        assert_eq!(status, 200, "{page}");
        page.split("name=\"csrf\" value=\"")
            .nth(1)
            .and_then(|rest| rest.split('"').next())
            .unwrap_or_else(|| panic!("no CSRF token in {page}"))
            .to_owned()
    };
    let others_csrf = page_of(&other);
    for body in [approve.to_owned(), format!("{approve}&csrf={others_csrf}")] {
        let (status, page) = server.request(
            "POST",
            &override_path,
            &[no_bearer, session, form],
            Some(&body),
        );
        assert_eq!(status, 403, "{body}: {page}");
        assert!(page.contains("CSRF"), "{page}");
    }
    // Nothing ran and nothing was decided: the one failed run is all there is, still pending.
    let (_, pending) = server.json("GET", "/v1/delegations?review=pending", None);
    assert_eq!(
        pending["pending"].as_array().map(Vec::len),
        Some(1),
        "{pending}"
    );
    let (_, all) = server.json("GET", "/v1/delegations", None);
    assert_eq!(all["runs"].as_array().map(Vec::len), Some(1), "{all}");
    assert!(!dir.join("root/ws/hello.txt").exists());
    let (_, metrics) = server.request("GET", "/metrics", &[], None);
    assert!(
        metrics.contains("harness_http_cross_site_total 10"),
        "{metrics}"
    );
    // The review page's own form (same origin, its session's CSRF token) and a client with the
    // token still work.
    let csrf = page_of(&cookie);
    let (status, page) = server.request(
        "POST",
        &override_path,
        &[
            no_bearer,
            session,
            form,
            ("Origin", own.as_str()),
            ("Sec-Fetch-Site", "same-origin"),
        ],
        Some(&format!("{approve}&csrf={csrf}")),
    );
    assert_eq!(status, 303, "{page}");
    let (status, answer) = server.request(
        "GET",
        "/v1/delegations?review=pending",
        &[("Host", "localhost")],
        None,
    );
    assert_eq!(status, 200, "{answer}");
    assert!(answer.contains(r#""pending":[]"#), "{answer}");
    let (status, answer) = server.json("POST", "/v1/delegations", Some(&delegation("agent.star")));
    assert_eq!(status, 202, "{answer}");
    // A name the operator allows is answered.
    let named = Server::start_with(
        &dir,
        &[],
        "127.0.0.1:0",
        &["--allow-host", "harness.internal"],
    );
    let (status, answer) = named.request(
        "GET",
        "/v1/delegations",
        &[("Host", "harness.internal:8080")],
        None,
    );
    assert_eq!(status, 200, "{answer}");
}

/// `/login` trades the token for a same-site, HttpOnly session cookie the page then accepts.
#[test]
fn the_review_page_signs_in_with_the_token() {
    let dir = root();
    let server = Server::start(
        &dir,
        &[("HARNESS_API_TOKEN", "s3cret-token")],
        "127.0.0.1:0",
    );
    let no_bearer = ("Authorization", "");
    let (status, _) = server.request("GET", "/", &[no_bearer], None);
    assert_eq!(status, 303);
    let form = ("Content-Type", "application/x-www-form-urlencoded");
    let (status, answer) = server.request("POST", "/login", &[no_bearer, form], Some("token=nope"));
    assert_eq!(status, 401, "{answer}");
    let (status, head, _) = server.exchange(
        "POST",
        "/login",
        &[no_bearer, form],
        Some("token=s3cret-token"),
    );
    assert_eq!(status, 303, "{head}");
    let cookie = head
        .lines()
        .find_map(|l| l.strip_prefix("set-cookie: "))
        .expect("a cookie");
    assert!(
        cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"),
        "{cookie}"
    );
    assert!(
        !cookie.contains("s3cret-token"),
        "the cookie is not the token"
    );
    let pair = cookie.split(';').next().expect("name=value");
    let (status, page) = server.request("GET", "/", &[no_bearer, ("Cookie", pair)], None);
    assert_eq!(status, 200, "{page}");
    assert!(page.contains("No runs await review"), "{page}");
}

/// SIGTERM: the server stops accepting, cancels the running delegation and records it.
#[test]
fn shutdown_records_running_delegations() {
    let dir = root();
    let mut server = Server::start(&dir, &[], "127.0.0.1:0");
    let slow = json!({
        "task": "take your time",
        "delegate": {"kind": "command", "command": ["sh", "-c", "touch started; sleep 30; echo done"]},
        "workdir": "ws",
    });
    let (status, answer) = server.json("POST", "/v1/delegations", Some(&slow));
    assert_eq!(status, 202, "{answer}");
    let id = answer["id"].as_str().expect("an id").to_owned();
    let deadline = Instant::now() + Duration::from_secs(30);
    while !dir.join("root/ws/started").exists() {
        assert!(Instant::now() < deadline, "the delegation never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    // A client follows the run's events while the server stops: the stream must not hold the
    // shutdown (and with it the cancellation) until the delegate finishes on its own.
    let addr = server.addr.clone();
    let token = server.token.clone();
    let path = format!("/v1/delegations/{id}/events");
    let (open, opened) = std::sync::mpsc::channel();
    let follower = std::thread::spawn(move || {
        let mut stream = TcpStream::connect(&addr).expect("connect");
        write!(
            stream,
            "GET {path} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\nConnection: close\r\n\r\n"
        )
        .expect("write");
        let mut answer = Vec::new();
        let mut buf = [0u8; 4096];
        let mut told = false;
        while let Ok(n) = stream.read(&mut buf) {
            if n == 0 {
                break;
            }
            answer.extend_from_slice(&buf[..n]);
            if !told && String::from_utf8_lossy(&answer).contains("AttemptStarted") {
                told = true;
                let _ = open.send(());
            }
        }
        String::from_utf8_lossy(&answer).into_owned()
    });
    opened
        .recv_timeout(Duration::from_secs(30))
        .expect("the stream opened");
    server.stop();
    let streamed = dechunk(
        follower
            .join()
            .expect("the follower")
            .split_once("\r\n\r\n")
            .map_or("", |(_, body)| body),
    );
    let last = stream_events(&streamed).pop().expect("events");
    assert_eq!(last["type"], json!("DelegationCompleted"), "{streamed}");
    assert_eq!(last["kind"], json!("cancelled"), "{streamed}");
    let out = crate::util::harness(["runs", "show", &id, "--json", "--journal"])
        .args([dir.join("runs.db")])
        .run();
    out.expect_code(0);
    let record = out.json();
    assert_eq!(record["outcome"], json!("error"), "{record}");
    assert_eq!(record["error"]["kind"], json!("cancelled"), "{record}");
}

/// The events a server-sent stream carried, in order.
fn stream_events(stream: &str) -> Vec<Value> {
    stream
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .map(|d| serde_json::from_str(d).expect("an event"))
        .collect()
}

/// Asserts `stream` carried delegation `id`'s whole run of the test's agent — started, a tool
/// call, completed, numbered without gaps or repeats — and returns its events.
fn assert_whole_run(stream: &str, id: &str) -> Vec<Value> {
    let events = stream_events(stream);
    let types: Vec<&str> = events
        .iter()
        .map(|e| e["type"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(types.first(), Some(&"DelegationStarted"), "{types:?}");
    assert_eq!(types.last(), Some(&"DelegationCompleted"), "{types:?}");
    assert!(types.contains(&"ToolCalled"), "{types:?}");
    let seqs: Vec<u64> = events.iter().filter_map(|e| e["seq"].as_u64()).collect();
    assert_eq!(
        seqs,
        (0..seqs.len() as u64).collect::<Vec<_>>(),
        "no gaps, no repeats"
    );
    assert!(events.iter().all(|e| e["run_id"] == json!(id)));
    assert!(stream.contains("event: DelegationCompleted"), "{stream}");
    events
}

/// `serve --queue`: a submission is queued, a worker process runs it, and its report comes back
/// into the server's journal — ending the event stream a client opened while it was queued with
/// the worker's events; a failed run is then awaiting review like any other.
fn queued_submissions_run_on_a_worker_and_come_back(backend: Backend) {
    let dir = root();
    let Some((queue, _nats)) = queue_for(backend, &dir) else {
        return;
    };
    let server = Server::start_with(&dir, &[], "127.0.0.1:0", &["--queue", &queue]);
    let (status, answer) = server.json("POST", "/v1/delegations", Some(&delegation("agent.star")));
    assert_eq!(
        (status, &answer["status"]),
        (202, &json!("queued")),
        "{answer}"
    );
    let id = answer["id"].as_str().expect("an id").to_owned();
    let (status, shown) = server.json("GET", &format!("/v1/delegations/{id}"), None);
    assert_eq!(
        (status, &shown["status"]),
        (200, &json!("queued")),
        "{shown}"
    );
    let (_, metrics) = server.request("GET", "/metrics", &[], None);
    assert!(
        metrics.contains("harness_delegations_queued 1"),
        "{metrics}"
    );
    std::thread::scope(|scope| {
        // A client follows it while no worker is there yet: the worker starts once the
        // follower's stream has begun (it is subscribed by then).
        let (begun, subscribed) = std::sync::mpsc::channel();
        let (server, path) = (&server, format!("/v1/delegations/{id}/events"));
        let follower = scope.spawn(move || {
            server.follow(&path, &mut || {
                let _ = begun.send(());
            })
        });
        subscribed
            .recv_timeout(Duration::from_secs(60))
            .expect("the follower's stream begins");
        let _worker = Worker::start(&queue, &[]);
        let (status, stream) = follower.join().expect("the follower");
        assert_eq!(status, 200);
        assert_whole_run(&stream, &id);
        // Recorded by the time the stream ended.
        let (status, record) = server.json("GET", &format!("/v1/delegations/{id}"), None);
        assert_eq!(
            (status, &record["outcome"]),
            (200, &json!("passed")),
            "{record}"
        );
        assert!(
            dir.join("root/ws/hello.txt").exists(),
            "the worker did the work"
        );
        // A failed run (in a workspace without hello.txt) comes back awaiting review.
        std::fs::create_dir_all(dir.join("root/ws2")).expect("workspace");
        let mut liar = delegation("liar.star");
        liar["workdir"] = json!("ws2");
        let failed = server.run(&liar);
        let (_, pending) = server.json("GET", "/v1/delegations?review=pending", None);
        assert_eq!(pending["pending"][0]["id"], json!(failed), "{pending}");
    });
    let (_, metrics) = server.request("GET", "/metrics", &[], None);
    assert!(
        metrics.contains("harness_delegations_queued 0"),
        "{metrics}"
    );
    assert!(
        metrics.contains("harness_delegations_finished_total{outcome=\"passed\"} 1"),
        "{metrics}"
    );
}

/// `serve --queue` stopped while a delegation is queued loses nothing: the worker runs it while
/// the server is down, and the restarted server records its report. A job that fails on every
/// delivery comes back as a dead letter and is recorded as an error saying why.
#[test]
fn a_queued_delegation_outlives_a_server_restart_and_dead_letters_are_recorded() {
    let dir = root();
    let queue = format!("sqlite:{}", dir.join("queue.db").display());
    let mut server = Server::start_with(&dir, &[], "127.0.0.1:0", &["--queue", &queue]);
    let (status, answer) = server.json("POST", "/v1/delegations", Some(&delegation("agent.star")));
    assert_eq!(status, 202, "{answer}");
    let id = answer["id"].as_str().expect("an id").to_owned();
    // Its script is there when it is checked, gone when a worker runs it.
    dir.write(
        "root/gone.star",
        "def respond(request):\n    return {\"content\": \"hi\"}\n",
    );
    let (status, answer) = server.json("POST", "/v1/delegations", Some(&delegation("gone.star")));
    assert_eq!(status, 202, "{answer}");
    let dead = answer["id"].as_str().expect("an id").to_owned();
    std::fs::remove_file(dir.join("root/gone.star")).expect("remove the script");
    server.stop();
    {
        let _worker = Worker::start(&queue, &["--max-deliver", "1"]);
        wait_for("the worker to run the delegation", || {
            dir.join("root/ws/hello.txt").exists()
        });
        // Both jobs finished (one dead): nothing left to lease.
        wait_for("both jobs to finish", || {
            rusqlite::Connection::open(dir.join("queue.db"))
                .and_then(|c| {
                    c.query_row(
                        "SELECT count(*) FROM jobs WHERE state IN ('done', 'dead')",
                        [],
                        |row| row.get::<_, i64>(0),
                    )
                })
                .is_ok_and(|n| n == 2)
        });
    }
    let server = Server::start_with(&dir, &[], "127.0.0.1:0", &["--queue", &queue]);
    let record = server.wait(&id);
    assert_eq!(record["outcome"], json!("passed"), "{record}");
    let record = server.wait(&dead);
    assert_eq!(record["outcome"], json!("error"), "{record}");
    assert_eq!(record["error"]["kind"], json!("delegate"), "{record}");
    let message = record["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("dead-lettered after 1 delivery"),
        "{message}"
    );
    assert!(message.contains("gone.star"), "{message}");
    let (_, replay) = server.request("GET", &format!("/v1/delegations/{dead}/events"), &[], None);
    assert_eq!(stream_events(&replay).len(), 1, "{replay}");
    // Its record audits like any other, and so does the worker's.
    for id in [&id, &dead] {
        let out = crate::util::harness(["audit", id.as_str(), "--json", "--journal"])
            .args([dir.join("runs.db")])
            .run();
        let report = out.json();
        assert_eq!(report["valid"], json!(true), "{id}: {report:#}");
        out.expect_code(0);
    }
}

/// `serve --queue`: a submitted delegation tree runs on a worker, child and all, and comes
/// back into the server's journal with its child, whose record the tree of the root's record
/// shows and whose seal the audit finds where the parent's call quoted it.
fn a_queued_tree_comes_back_with_its_child(backend: Backend) {
    let dir = root();
    let Some((queue, _nats)) = queue_for(backend, &dir) else {
        return;
    };
    dir.write(
        "root/parent.star",
        "def respond(request):\n    made = [m for m in request[\"messages\"] if m[\"role\"] == \"tool\"]\n    if not made:\n        return {\"tool_calls\": [{\"name\": \"delegate\", \"arguments\": {\"task\": \"Say done\", \"profile\": \"helper\"}}]}\n    return made[0][\"content\"]\n",
    );
    dir.write(
        "root/helper.star",
        "def respond(request):\n    return \"done\"\n",
    );
    let server = Server::start_with(&dir, &[], "127.0.0.1:0", &["--queue", &queue]);
    let _worker = Worker::start(&queue, &[]);
    let id = server.run(&json!({
        "task": "Ask for help",
        "delegate": {"kind": "scripted", "script": "parent.star"},
        "tools": ["delegate"],
        "delegates": {"helper": {
            "delegate": {"kind": "scripted", "script": "helper.star"},
            "verify": "def run(result):\n    return result[\"response\"] == \"done\"\n",
        }},
        "verify": "def run(result):\n    return '\"verified\":true' in result[\"response\"]\n",
        "workdir": "ws",
    }));
    let (_, record) = server.json("GET", &format!("/v1/delegations/{id}"), None);
    assert_eq!(record["outcome"], json!("passed"), "{record}");
    let children = record["tree"]["children"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(children.len(), 1, "{record}");
    assert_eq!(children[0]["outcome"], json!("passed"), "{record}");
    let audit = crate::util::harness(["audit", "--json", &id, "--journal"])
        .args([dir.join("runs.db")])
        .run();
    audit.expect_code(0);
}

/// Each `--queue` scenario on both queues.
mod queued {
    #[test]
    fn sqlite() {
        super::queued_submissions_run_on_a_worker_and_come_back(super::Backend::Sqlite);
    }

    #[test]
    fn a_tree_sqlite() {
        super::a_queued_tree_comes_back_with_its_child(super::Backend::Sqlite);
    }

    #[test]
    fn a_tree_nats() {
        super::a_queued_tree_comes_back_with_its_child(super::Backend::Nats);
    }

    #[test]
    fn nats() {
        super::queued_submissions_run_on_a_worker_and_come_back(super::Backend::Nats);
    }
}

/// A workdir whose policy is hostile (a FIFO where `.harness/policy.yaml` should be, a link to
/// `/dev/zero`): the submission is refused with a 400 naming the file, and the server goes on
/// answering, `/healthz` included.
#[test]
fn a_hostile_workdir_is_refused_and_the_server_keeps_answering() {
    let dir = root();
    std::fs::create_dir_all(dir.join("root/fifo/.harness")).expect("dir");
    let made = Command::new("mkfifo")
        .arg(dir.join("root/fifo/.harness/policy.yaml"))
        .status()
        .expect("mkfifo runs");
    assert!(made.success());
    std::fs::create_dir_all(dir.join("root/zero/.harness")).expect("dir");
    std::os::unix::fs::symlink("/dev/zero", dir.join("root/zero/.harness/policy.yaml"))
        .expect("link");
    let server = Server::start(&dir, &[], "127.0.0.1:0");
    for workdir in ["fifo", "zero"] {
        let mut submission = delegation("agent.star");
        submission["workdir"] = json!(workdir);
        let (status, answer) = server.json("POST", "/v1/delegations", Some(&submission));
        assert_eq!(status, 400, "{workdir}: {answer}");
        assert_eq!(answer["error"], json!("config"), "{workdir}: {answer}");
        assert!(
            answer["message"]
                .as_str()
                .is_some_and(|m| m.contains("policy.yaml")),
            "{workdir}: {answer}"
        );
        let (status, _) = server.request("GET", "/healthz", &[], None);
        assert_eq!(status, 200);
    }
}
