//! The review page in a real headless browser (Debian's `chromium`), driven over the Chrome
//! DevTools Protocol on `--remote-debugging-pipe`: the pending list, a run's findings and
//! evidence, the approve form refused by the policy (409 page) and then accepted, and the live
//! event stream of a running delegation appearing in the page as it happens.
//!
//! Without chromium (on PATH, or named by `CHROMIUM`) the test says so and skips, unless
//! `HARNESS_REQUIRE_CHROMIUM` is set.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::util::{TempDir, harness_bin};

/// A headless chromium and one page of it.
struct Browser {
    child: Child,
    input: ChildStdin,
    output: BufReader<ChildStdout>,
    id: u64,
    session: Option<String>,
    _profile: TempDir,
}

impl Browser {
    fn start() -> Option<Browser> {
        let binary = std::env::var_os("CHROMIUM")
            .map(std::path::PathBuf::from)
            .or_else(|| {
                let path = std::env::var_os("PATH")?;
                ["chromium", "chromium-browser", "google-chrome"]
                    .iter()
                    .flat_map(|name| std::env::split_paths(&path).map(move |d| d.join(name)))
                    .find(|p| p.is_file())
            });
        let Some(binary) = binary else {
            assert!(
                std::env::var_os("HARNESS_REQUIRE_CHROMIUM").is_none(),
                "HARNESS_REQUIRE_CHROMIUM is set but chromium is not installed"
            );
            eprintln!("skipped: no chromium on PATH (apt install chromium, or set CHROMIUM)");
            return None;
        };
        let profile = TempDir::new();
        // The DevTools pipe is fds 3 (commands in) and 4 (answers out): the shell puts this
        // process's pipes there.
        let script = format!(
            "exec \"$0\" --headless=new --no-sandbox --disable-gpu --disable-dev-shm-usage --no-first-run --no-default-browser-check --user-data-dir={} --remote-debugging-pipe about:blank 3<&0 4>&1 0</dev/null 1>/dev/null 2>/dev/null",
            profile.path().display()
        );
        let mut child = Command::new("sh")
            .args(["-c", &script])
            .arg(&binary)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromium starts");
        let input = child.stdin.take().expect("stdin");
        let output = BufReader::new(child.stdout.take().expect("stdout"));
        let mut browser = Browser {
            child,
            input,
            output,
            id: 0,
            session: None,
            _profile: profile,
        };
        let target = browser.call("Target.createTarget", json!({"url": "about:blank"}));
        let target = target["targetId"].as_str().expect("a target").to_owned();
        let attached = browser.call(
            "Target.attachToTarget",
            json!({"targetId": target, "flatten": true}),
        );
        browser.session = Some(
            attached["sessionId"]
                .as_str()
                .expect("a session")
                .to_owned(),
        );
        browser.call("Page.enable", json!({}));
        Some(browser)
    }

    /// Sends one command and returns its result (events in between are skipped).
    fn try_call(&mut self, method: &str, params: Value) -> Result<Value, Value> {
        self.id += 1;
        let mut message = json!({"id": self.id, "method": method, "params": params});
        if let Some(session) = &self.session {
            message["sessionId"] = json!(session);
        }
        self.input
            .write_all(format!("{message}\0").as_bytes())
            .expect("write to chromium");
        loop {
            let mut raw = Vec::new();
            self.output
                .read_until(0, &mut raw)
                .expect("read from chromium");
            assert!(!raw.is_empty(), "chromium closed the pipe");
            raw.pop();
            let answer: Value = serde_json::from_slice(&raw).expect("a DevTools message");
            if answer["id"] == json!(self.id) {
                return match answer.get("error") {
                    Some(error) => Err(error.clone()),
                    None => Ok(answer["result"].clone()),
                };
            }
        }
    }

    fn call(&mut self, method: &str, params: Value) -> Value {
        self.try_call(method, params)
            .unwrap_or_else(|e| panic!("{method}: {e}"))
    }

    /// Evaluates `expression` in the page; `None` while it cannot be (a navigation under way).
    fn eval(&mut self, expression: &str) -> Option<Value> {
        let result = self
            .try_call(
                "Runtime.evaluate",
                json!({"expression": expression, "returnByValue": true, "awaitPromise": true}),
            )
            .ok()?;
        if result.get("exceptionDetails").is_some() {
            return None;
        }
        Some(result["result"]["value"].clone())
    }

    /// Waits until `expression` is true in the page.
    fn wait(&mut self, what: &str, expression: &str) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while self.eval(expression) != Some(json!(true)) {
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {what}; the page: {:?}",
                self.eval("document.body && document.body.innerText")
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn goto(&mut self, url: &str) {
        self.goto_landing(url, url);
    }

    /// Opens `url` and waits until the page that loaded is `landing` (where it redirects).
    fn goto_landing(&mut self, url: &str, landing: &str) {
        self.call("Page.navigate", json!({"url": url}));
        self.wait(
            url,
            &format!(
                "document.readyState === 'complete' && location.href === {}",
                json!(landing)
            ),
        );
    }

    /// Saves a PNG of the page as it looks under `target/screenshots/NAME`, and under
    /// `docs/screenshots/NAME` (what the README shows) when `HARNESS_BLESS` is set.
    fn screenshot(&mut self, name: &str) {
        self.call(
            "Emulation.setDeviceMetricsOverride",
            json!({"width": 1200, "height": 900, "deviceScaleFactor": 1, "mobile": false}),
        );
        let shot = self.call(
            "Page.captureScreenshot",
            json!({"format": "png", "captureBeyondViewport": true}),
        );
        let png = base64::Engine::decode(
            &base64::engine::general_purpose::STANDARD,
            shot["data"].as_str().expect("screenshot data"),
        )
        .expect("a base64 screenshot");
        let mut places =
            vec![std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("screenshots")];
        if std::env::var_os("HARNESS_BLESS").is_some() {
            places.push(crate::util::repo_root().join("docs/screenshots"));
        }
        for dir in places {
            std::fs::create_dir_all(&dir).expect("a screenshot directory");
            std::fs::write(dir.join(name), &png).expect("the screenshot");
        }
    }

    fn text(&mut self, selector: &str) -> String {
        self.eval(&format!(
            "(document.querySelector({}) || {{innerText: ''}}).innerText",
            json!(selector)
        ))
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default()
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A server with a failing run to review.
struct Served {
    child: Child,
    base: String,
    /// The token the server generated and printed.
    token: String,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn serve(dir: &TempDir) -> Served {
    let mut child = Command::new(harness_bin())
        .args(["serve", "--listen", "127.0.0.1:0", "--root"])
        .arg(dir.join("root"))
        .arg("--journal")
        .arg(dir.join("runs.db"))
        .env_remove("HARNESS_API_TOKEN")
        .env_remove("HARNESS_API_USER")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the server starts");
    let mut lines = BufReader::new(child.stderr.take().expect("stderr")).lines();
    let first = lines
        .next()
        .and_then(Result::ok)
        .expect("the server's first line");
    let url = first
        .split("http://")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .expect("an address");
    let (addr, token) = url
        .split_once("/?token=")
        .unwrap_or_else(|| panic!("no generated token in {first:?}"));
    std::thread::spawn(move || for _ in lines {});
    Served {
        child,
        base: format!("http://{addr}"),
        token: token.to_owned(),
    }
}

/// `text` percent-encoded for a `data:` URL.
fn urlencode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// POSTs a delegation over plain HTTP with the bearer token; returns its id.
fn submit(server: &Served, delegation: &Value) -> String {
    let addr = server.base.trim_start_matches("http://");
    let body = delegation.to_string();
    let mut stream = std::net::TcpStream::connect(addr).expect("connect");
    write!(
        stream,
        "POST /v1/delegations HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nAuthorization: Bearer {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        server.token,
        body.len()
    )
    .expect("write");
    let mut response = String::new();
    std::io::Read::read_to_string(&mut stream, &mut response).expect("read");
    let json = response.split("\r\n\r\n").nth(1).expect("a body");
    let value: Value = serde_json::from_str(json).expect("JSON");
    value["id"].as_str().expect("an id").to_owned()
}

#[test]
fn the_review_page_in_a_real_browser() {
    let dir = TempDir::new();
    std::fs::create_dir_all(dir.join("root/ws")).expect("workspace");
    // A liar that writes a draft elsewhere, then claims the work done — with markup in its
    // answer, which the page must show as text, never run.
    dir.write(
        "root/liar.star",
        r#"def respond(request):
    if request["messages"][-1]["role"] == "tool":
        return {"content": "Done, I created hello.txt <img src=x onerror=\"document.title='owned'\">"}
    return {"tool_calls": [{"name": "write_file", "arguments": {"path": "notes.txt", "content": "draft\n"}}]}
"#,
    );
    let Some(mut browser) = Browser::start() else {
        return;
    };
    let server = serve(&dir);
    // The URL the server printed signs the browser in (and drops the token from the address).
    browser.goto_landing(
        &format!("{}/?token={}", server.base, server.token),
        &format!("{}/", server.base),
    );
    let failed = submit(
        &server,
        &json!({
            "task": "Create hello.txt",
            "delegate": {"kind": "scripted", "script": "liar.star"},
            "tools": ["write_file"],
            "verify": "def run(result):\n    return {\"verified\": fs.exists(\"hello.txt\"), \"reason\": \"hello.txt does not exist\"}\n",
            "criteria": ["file_exists:hello.txt"],
            "max_verify_retries": 0,
            "workdir": "ws",
        }),
    );
    // The pending list (the run is in it once it has finished and been recorded).
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        browser.goto(&format!("{}/", server.base));
        let listed = format!("!!document.querySelector('tr.pending[data-id=\"{failed}\"]')");
        if browser.eval(&listed) == Some(json!(true)) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{failed} never listed: {}",
            browser.text("body")
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // A hostile page (another origin, with the signed-in browser's cookies at its disposal)
    // posts the approve form and a text/plain submission: both refused, nothing recorded.
    let hostile = format!(
        r#"<form id="f" method="post" action="{base}/runs/{failed}/override"><input name="decision" value="approve"><input name="type" value="check"><input name="reason" value="x"><input name="user" value="mallory"></form><script>document.getElementById('f').submit()</script>"#,
        base = server.base
    );
    browser.call(
        "Page.navigate",
        json!({"url": format!("data:text/html,{}", urlencode(&hostile))}),
    );
    browser.wait(
        "the refusal of a cross-site form",
        "document.body && document.body.innerText.includes('forbidden')",
    );
    // The run: findings and evidence; still awaiting review.
    browser.goto(&format!("{}/runs/{failed}", server.base));
    assert!(
        browser.eval("!!document.getElementById('approve')") == Some(json!(true)),
        "{}",
        browser.text("body")
    );
    assert!(
        browser.text("#outcome").contains("failed"),
        "{}",
        browser.text("body")
    );
    // What the delegate claimed, beside what was found and proved; its tool calls; what it
    // changed.
    let attempt = "#attempt-1";
    assert!(
        browser
            .text(&format!("{attempt} .answer"))
            .contains("Done, I created hello.txt"),
        "{}",
        browser.text("body")
    );
    assert!(
        browser
            .text(&format!("{attempt} .findings"))
            .contains("hello.txt does not exist")
    );
    assert!(
        browser
            .text(&format!("{attempt} .evidence"))
            .contains("file_exists:hello.txt")
    );
    assert!(
        browser.eval(&format!(
            "document.querySelector('{attempt} .answer img') === null && document.title !== 'owned'"
        )) == Some(json!(true)),
        "the delegate's markup ran in the page"
    );
    assert!(
        browser
            .text(&format!("{attempt} .answer"))
            .contains("<img src=x")
    );
    let tools = browser.text(&format!("{attempt} .tools"));
    assert!(
        tools.contains("write_file") && tools.contains("notes.txt") && tools.contains("wrote"),
        "{tools}"
    );
    assert!(
        browser
            .text(&format!("{attempt} .changes"))
            .contains("+ notes.txt")
    );
    // The diff itself, its added line marked.
    assert!(
        browser.eval(&format!(
            "[...document.querySelectorAll('{attempt} .diff .add')].some((l) => l.textContent === '+draft')"
        )) == Some(json!(true)),
        "{}",
        browser.text("body")
    );
    assert!(browser.text("#task").contains("Create hello.txt"));
    browser.screenshot("review-run.png");
    // Approve it directly: the default policy refuses `direct` — a 409 page naming why.
    browser.eval(
        "const f = document.getElementById('approve'); f.elements['type'].value = 'direct'; f.elements['reason'].value = 'looks fine'; f.elements['user'].value = 'alice'; f.submit(); true",
    );
    browser.wait("the refusal", "!!document.getElementById('refused')");
    assert!(browser.text("#refused").contains("override_not_allowed"));
    // Back, and approve as a check override with a reason: recorded, the run leaves the list.
    browser.goto(&format!("{}/runs/{failed}", server.base));
    browser.eval(
        "const g = document.getElementById('approve'); g.elements['type'].value = 'check'; g.elements['reason'].value = 'the file is there now'; g.elements['user'].value = 'alice'; g.submit(); true",
    );
    browser.wait("the notice", "!!document.getElementById('notice')");
    // Who decided what, and why.
    let decision = browser.text("#decision");
    assert!(
        decision.contains("approved")
            && decision.contains("alice")
            && decision.contains("the file is there now"),
        "{}",
        browser.text("body")
    );
    browser.goto(&format!("{}/", server.base));
    assert!(browser.text("#empty").contains("No runs await review"));
    // Every run is listed and linked; the filters narrow the list.
    assert!(
        browser.eval(&format!("!!document.querySelector('#runs tr.run[data-id=\"{failed}\"] a[href=\"/runs/{failed}\"]')"))
            == Some(json!(true)),
        "{}",
        browser.text("body")
    );
    browser.goto(&format!("{}/?outcome=passed", server.base));
    assert!(
        browser.text("#none").contains("No runs match"),
        "{}",
        browser.text("body")
    );
    browser.goto(&format!(
        "{}/?outcome=failed&delegate=scripted",
        server.base
    ));
    assert!(browser.text("#runs").contains(&failed));

    // A running delegation's events appear in its page as they happen.
    let slow = submit(
        &server,
        &json!({
            "task": "take a moment",
            "delegate": {"kind": "command", "command": ["sh", "-c", "sleep 1.5; echo done"]},
            "workdir": "ws",
        }),
    );
    browser.goto(&format!("{}/runs/{slow}", server.base));
    browser.wait(
        "the first events",
        "document.querySelectorAll('#events li').length > 0",
    );
    // Each event with what it is about: the delegate it started, its outcome.
    browser.wait(
        "the start, with its delegate",
        "[...document.querySelectorAll('#events li')].some((li) => li.textContent.startsWith('DelegationStarted') && li.textContent.includes('delegate=command'))",
    );
    // When it completes, the page becomes the full view of the record.
    browser.wait(
        "the full view",
        "!!document.getElementById('outcome') && !!document.getElementById('attempt-1')",
    );
    assert!(
        browser.text("#attempt-1 .answer").contains("done"),
        "{}",
        browser.text("body")
    );
    // A run delegated by the failed one: each page links the other.
    let child = submit(
        &server,
        &json!({
            // Markup in a task is text on every page that shows it, the tree included.
            "task": "a part of the work <img src=x onerror=\"document.title='owned'\">",
            "parent_id": failed,
            "delegate": {"kind": "scripted", "script": "liar.star"},
            "tools": ["write_file"],
            "workdir": "ws",
        }),
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        browser.goto(&format!("{}/runs/{failed}", server.base));
        let linked = format!("!!document.querySelector('ul.children a[href=\"/runs/{child}\"]')");
        if browser.eval(&linked) == Some(json!(true)) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{child} never listed: {}",
            browser.text("body")
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // What each attempt (each retry) cost, and a row for the child linking to it.
    let spend = browser.text("#spend");
    for row in ["Attempt 1", "This run", "With everything under it (2 runs)"] {
        assert!(spend.contains(row), "{row} in {spend}");
    }
    assert_eq!(
        browser.eval(&format!(
            "!!document.querySelector('#spend a[href=\"/runs/{child}\"]')"
        )),
        Some(json!(true)),
        "{spend}"
    );
    // Listed from its start (its row names its parent); its page is the full view once it ends.
    browser.goto(&format!("{}/runs/{child}", server.base));
    browser.wait(
        "the child's full view",
        "!!document.getElementById('outcome')",
    );
    assert!(
        browser.text("#parent").contains(&failed),
        "{}",
        browser.text("body")
    );
    // The tree from its root, this run marked.
    let marked =
        format!("!!document.querySelector('ul.tree li.current > a[href=\"/runs/{child}\"]')");
    assert_eq!(
        browser.eval(&marked),
        Some(json!(true)),
        "{}",
        browser.text("#tree")
    );
    assert!(
        browser.text("#tree").contains(&failed),
        "{}",
        browser.text("#tree")
    );
    assert!(
        browser.text("#tree").contains("<img src=x onerror="),
        "{}",
        browser.text("#tree")
    );
    assert_ne!(browser.eval("document.title"), Some(json!("owned")));

    browser.goto(&format!("{}/", server.base));
    browser.screenshot("review-list.png");
    browser.goto(&format!("{}/report", server.base));
    assert!(
        browser.text("h1").contains("failure-mode report"),
        "{}",
        browser.text("body")
    );
    // Every outcome has its column; each failure reason links to the runs that gave it.
    assert!(browser.text("table").contains("passed with debt"));
    assert!(
        browser.eval(&format!(
            "!!document.querySelector('table.reasons a[href=\"/runs/{failed}\"]')"
        )) == Some(json!(true)),
        "{}",
        browser.text("body")
    );
    browser.screenshot("dashboard.png");
}
