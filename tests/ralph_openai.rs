//! The Ralph loop through `harness run` with the `openai` and `anthropic` delegates, against the
//! fake model server on 127.0.0.1 started by each test: real HTTP, real chat-completions and
//! Messages API JSON, every request recorded; every Ralph-loop test runs once per protocol. The fake model decides its answer from the conversation it is
//! sent, so the loop is exercised for real. Also runs `examples/openai/` (against the fake) and
//! `examples/command/` (offline).

use harness_testkit::model::{
    ModelServer, Reply, after_tool, answer, is_retry, messages, status, tool_call,
};
use serde_json::{Value, json};

use crate::util::{Output, TempDir, copy_tree, expect_error_kind, harness, repo_root};

/// What the claims stage says of "Done, I created hello.txt" when nothing wrote it.
const CLAIM: &str = "claim file: claims to have created hello.txt; no tool call wrote it and the workspace has no hello.txt";

/// The task every delegation here gets.
const TASK: &str = "Create hello.txt containing the word hi";

/// What the fake model claims without doing anything.
const LIE: &str = "Done, I created hello.txt";

/// What the fake model answers after its write came back.
const TRUTH: &str = "Wrote hello.txt.";

/// An API key variable that is never set, so no `Authorization` header is sent.
/// The fake server takes no key.
const NO_KEY_VAR: &str = "none";

/// Checks the real file system for the claimed file; the reason names the attempt it judged.
const FILE_VERIFIER: &str = r#"
  def run(result):
      path = args["path"]
      if fs.stat(path) == None:
          return {"verified": False, "reason": "%s does not exist (attempt %d)" % (path, result["attempt"])}
      return {"verified": True, "reason": ""}
"#;

// --- the fake model ------------------------------------------------------------------------------

/// A `write_file` call for hello.txt (7 completion tokens).
fn write_hello(body: &Value) -> Reply {
    tool_call(
        body,
        "call_w1",
        "write_file",
        &json!({"path": "hello.txt", "content": "hi\n"}),
    )
}

/// Lies until told that verification failed, then writes the file, then says so.
fn lies_once(_: usize, body: &Value) -> Reply {
    if after_tool(body) {
        answer(body, TRUTH)
    } else if is_retry(body) {
        write_hello(body)
    } else {
        answer(body, LIE)
    }
}

/// Never does the work.
fn always_lies(_: usize, body: &Value) -> Reply {
    answer(body, LIE)
}

/// Answers at once; the tests that use it have the work done already.
fn already_done(_: usize, body: &Value) -> Reply {
    answer(body, "hello.txt already contains hi.")
}

// --- running delegations -------------------------------------------------------------------------

/// The protocol a delegation speaks to the fake server: every Ralph-loop test runs with both.
#[derive(Debug, Clone, Copy)]
enum Api {
    /// `kind: openai`, chat completions.
    OpenAi,
    /// `kind: anthropic`, the Messages API (with an API key, which the fake requires).
    Anthropic,
}

impl Api {
    fn kind(self) -> &'static str {
        match self {
            Api::OpenAi => "openai",
            Api::Anthropic => "anthropic",
        }
    }
}

/// The variable holding the fake Anthropic key; every run here sets it.
const ANTHROPIC_KEY_VAR: &str = "HARNESS_FAKE_ANTHROPIC_KEY";

/// Writes `delegation.yaml` into a fresh directory: the task, a delegate speaking `api` to
/// `server` (`delegate_extra` appended inside its mapping; a request timeout of 30 s unless it
/// sets one), then `rest`.
fn delegation(api: Api, server: &ModelServer, delegate_extra: &str, rest: &str) -> TempDir {
    let timeout = if delegate_extra.contains("timeout_s") {
        ""
    } else {
        ", timeout_s: 30"
    };
    let (base_url, key) = match api {
        Api::OpenAi => (server.base_url(), NO_KEY_VAR),
        Api::Anthropic => (server.anthropic_base_url(), ANTHROPIC_KEY_VAR),
    };
    let dir = TempDir::new();
    dir.write(
        "delegation.yaml",
        format!(
            "task: {TASK:?}\ndelegate: {{kind: {}, base_url: {base_url:?}, model: fake, api_key_env: {key}{timeout}{delegate_extra}}}\n{rest}",
            api.kind()
        ),
    );
    dir
}

/// The file-verified delegation most tests use: `tools: [write_file, read_file]`,
/// `args: {path: hello.txt}`, [`FILE_VERIFIER`], then `extra`.
fn verified(api: Api, server: &ModelServer, delegate_extra: &str, extra: &str) -> TempDir {
    delegation(
        api,
        server,
        delegate_extra,
        &format!(
            "tools: [write_file, read_file]\nargs: {{path: hello.txt}}\nverify: |{FILE_VERIFIER}{extra}"
        ),
    )
}

/// Runs `harness run FILE --json` in `dir` with loopback exempt from any proxy.
fn run_file(dir: &TempDir, file: &str, env: &[(&str, &str)]) -> (Output, Value) {
    let mut command = harness(["run", file, "--json"])
        .current_dir(dir.path())
        .env("NO_PROXY", "127.0.0.1")
        .env("no_proxy", "127.0.0.1")
        .env(ANTHROPIC_KEY_VAR, "sk-ant-fake-key");
    for (name, value) in env {
        command = command.env(name, value);
    }
    let out = command.run();
    let report = out.json();
    (out, report)
}

/// Runs `harness run delegation.yaml --json` in `dir`.
fn run_json(dir: &TempDir) -> (Output, Value) {
    run_file(dir, "delegation.yaml", &[])
}

/// Returns `usage.per_attempt` as `(input_tokens, output_tokens, requests)` triples.
fn usage_per_attempt(report: &Value) -> Vec<(u64, u64, u64)> {
    report["usage"]["per_attempt"]
        .as_array()
        .expect("usage.per_attempt is a list")
        .iter()
        .map(|a| {
            let n = |key: &str| a[key].as_u64().expect("a count");
            (n("input_tokens"), n("output_tokens"), n("requests"))
        })
        .collect()
}

// --- the Ralph loop ------------------------------------------------------------------------------

fn passes_first_try_with_one_request(api: Api) {
    let server = ModelServer::start(already_done);
    let dir = verified(api, &server, "", "");
    dir.write("hello.txt", "hi\n");
    let (out, report) = run_json(&dir);
    out.expect_code(0);
    assert_eq!(report["outcome"], json!("passed"), "{out:?}");
    assert_eq!(report["verified"], json!(true));
    assert_eq!(report["attempts"], json!(1));
    assert_eq!(report["reasons"], json!([[]]));
    assert_eq!(report["error"], Value::Null);
    assert_eq!(
        report["result"]["response"],
        json!("hello.txt already contains hi.")
    );
    assert_eq!(
        report["delegate"],
        json!({"kind": api.kind(), "model": "fake"})
    );
    assert_eq!(server.seen().len(), 1);
    assert_eq!(report["usage"]["requests"], json!(1));
}

fn does_the_work_first_try_through_a_tool_call(api: Api) {
    let server = ModelServer::start(|_, body| {
        if messages(body).last().expect("a message")["role"] == "tool" {
            answer(body, TRUTH)
        } else {
            write_hello(body)
        }
    });
    let dir = verified(api, &server, "", "");
    let (out, report) = run_json(&dir);
    out.expect_code(0);
    assert_eq!(report["outcome"], json!("passed"), "{out:?}");
    assert_eq!(report["attempts"], json!(1));
    // The tool call, then the answer.
    assert_eq!(server.seen().len(), 2);
    assert_eq!(usage_per_attempt(&report), [(10 + 30, 7 + 5, 2)]);
    assert_eq!(dir.read("hello.txt").as_deref(), Some("hi\n"));
    assert_eq!(report["result"]["response"], json!(TRUTH));
}

fn lies_then_tells_the_truth(api: Api) {
    let server = ModelServer::start(lies_once);
    let dir = verified(api, &server, "", "");
    let (out, report) = run_json(&dir);
    out.expect_code(0);
    assert_eq!(report["outcome"], json!("passed"), "{out:?}");
    assert_eq!(report["verified"], json!(true));
    assert_eq!(report["attempts"], json!(2));
    assert_eq!(
        report["reasons"],
        json!([[CLAIM, "verify: hello.txt does not exist (attempt 0)"], []])
    );
    assert_eq!(report["result"]["attempt"], json!(1));
    assert_eq!(report["result"]["response"], json!(TRUTH));
    assert_eq!(dir.read("hello.txt").as_deref(), Some("hi\n"));

    // Attempt 1: the lie. Attempt 2: the write, then the answer. Nothing else.
    let bodies = server.bodies();
    assert_eq!(bodies.len(), 3, "{bodies:#?}");
    for body in &bodies {
        assert_eq!(body["model"], json!("fake"));
        let tools: Vec<&Value> = body["tools"]
            .as_array()
            .expect("tools are offered")
            .iter()
            .map(|t| &t["function"]["name"])
            .collect();
        assert_eq!(tools, [&json!("write_file"), &json!("read_file")]);
    }
    let first = messages(&bodies[0]);
    assert_eq!(first, &vec![json!({"role": "user", "content": TASK})]);

    // The second attempt's first request: the whole first conversation, then the retry prompt
    // quoting the verifier's reason.
    let second = messages(&bodies[1]);
    assert_eq!(second.len(), 3, "{second:#?}");
    assert_eq!(&second[..1], &first[..]);
    assert_eq!(second[1], json!({"role": "assistant", "content": LIE}));
    assert_eq!(second[2]["role"], json!("user"));
    let retry = second[2]["content"].as_str().expect("retry prompt text");
    assert!(retry.contains("VERIFICATION FAILED"), "{retry}");
    assert!(
        retry.contains("verify: hello.txt does not exist (attempt 0)"),
        "{retry}"
    );

    // The third: all of that, the model's own tool call as it sent it, and the tool's result.
    let third = messages(&bodies[2]);
    assert_eq!(third.len(), 5, "{third:#?}");
    assert_eq!(&third[..3], &second[..]);
    assert_eq!(third[3]["role"], json!("assistant"));
    let call = &third[3]["tool_calls"][0];
    assert_eq!(call["id"], json!("call_w1"));
    assert_eq!(call["type"], json!("function"));
    assert_eq!(call["function"]["name"], json!("write_file"));
    let arguments: Value = serde_json::from_str(
        call["function"]["arguments"]
            .as_str()
            .expect("arguments are a JSON string"),
    )
    .expect("arguments are JSON");
    assert_eq!(arguments, json!({"path": "hello.txt", "content": "hi\n"}));
    assert_eq!(third[4]["role"], json!("tool"));
    assert_eq!(third[4]["tool_call_id"], json!("call_w1"));
    let tool_output = third[4]["content"].as_str().expect("tool output");
    assert!(tool_output.contains("hello.txt"), "{tool_output}");

    // The Result of attempt 2 records the call and its result.
    assert_eq!(
        report["result"]["tool_calls"][0]["name"],
        json!("write_file")
    );
    assert_eq!(report["result"]["tool_calls"][0]["arguments"], arguments);
    assert_eq!(
        report["result"]["tool_results"][0]["is_error"],
        json!(false)
    );

    // Token usage from the fake's `usage` objects, per attempt and in total.
    assert_eq!(
        usage_per_attempt(&report),
        [(10, 5, 1), (30 + 50, 7 + 5, 2)]
    );
    assert_eq!(report["usage"]["input_tokens"], json!(90));
    assert_eq!(report["usage"]["output_tokens"], json!(17));
    assert_eq!(report["usage"]["requests"], json!(3));
}

fn always_lies_until_the_retries_run_out(api: Api) {
    let server = ModelServer::start(always_lies);
    let dir = verified(api, &server, "", "max_verify_retries: 2\n");
    let (out, report) = run_json(&dir);
    out.expect_code(1);
    assert_eq!(report["outcome"], json!("failed"), "{out:?}");
    assert_eq!(report["verified"], json!(false));
    assert_eq!(report["attempts"], json!(3));
    assert_eq!(report["error"]["kind"], json!("verification_failed"));
    assert_eq!(
        report["reasons"],
        json!([
            [CLAIM, "verify: hello.txt does not exist (attempt 0)"],
            [CLAIM, "verify: hello.txt does not exist (attempt 1)"],
            [CLAIM, "verify: hello.txt does not exist (attempt 2)"],
        ])
    );
    let message = report["error"]["message"].as_str().expect("a message");
    for attempt in 0..3 {
        assert!(
            message.contains(&format!("(attempt {attempt})")),
            "{message}"
        );
    }
    // One request per attempt, each carrying the conversation so far.
    let bodies = server.bodies();
    assert_eq!(bodies.len(), 3);
    let lengths: Vec<usize> = bodies.iter().map(|b| messages(b).len()).collect();
    assert_eq!(lengths, [1, 3, 5]);
    let last = messages(&bodies[2]);
    assert_eq!(&last[..3], &messages(&bodies[1])[..]);
    let retry = last[4]["content"]
        .as_str()
        .expect("the second retry prompt");
    assert!(retry.contains("VERIFICATION FAILED"), "{retry}");
    assert!(retry.contains("(attempt 1)"), "{retry}");
    assert_eq!(
        usage_per_attempt(&report),
        [(10, 5, 1), (30, 5, 1), (50, 5, 1)]
    );
    assert_eq!(report["usage"]["input_tokens"], json!(90));
    assert_eq!(report["usage"]["output_tokens"], json!(15));
    assert_eq!(dir.read("hello.txt"), None);
}

fn zero_retries_means_one_request(api: Api) {
    let server = ModelServer::start(lies_once);
    let dir = verified(api, &server, "", "max_verify_retries: 0\n");
    let (out, report) = run_json(&dir);
    out.expect_code(1);
    assert_eq!(report["outcome"], json!("failed"), "{out:?}");
    assert_eq!(report["attempts"], json!(1));
    assert_eq!(report["error"]["kind"], json!("verification_failed"));
    assert_eq!(
        report["reasons"],
        json!([[CLAIM, "verify: hello.txt does not exist (attempt 0)"]])
    );
    assert_eq!(server.seen().len(), 1);
    assert_eq!(dir.read("hello.txt"), None);
}

fn no_verifier_means_skipped_after_one_request(api: Api) {
    let server = ModelServer::start(lies_once);
    let dir = delegation(api, &server, "", "tools: [write_file]\nclaims: off\n");
    let (out, report) = run_json(&dir);
    out.expect_code(0);
    assert_eq!(report["outcome"], json!("skipped"), "{out:?}");
    assert_eq!(report["verified"], json!(false));
    assert_eq!(report["attempts"], json!(1));
    assert_eq!(report["reasons"], json!([]));
    assert_eq!(report["error"], Value::Null);
    // The lie passes through unchecked: that is what `skipped` means.
    assert_eq!(report["result"]["response"], json!(LIE));
    assert_eq!(server.seen().len(), 1);
}

fn a_broken_verifier_stops_at_once(api: Api) {
    let server = ModelServer::start(lies_once);
    // lies_once would pass on a retry: there must be none.
    let dir = delegation(
        api,
        &server,
        "",
        "tools: [write_file]\nverify: |\n  def run(result):\n      return 1 // 0\n",
    );
    let (out, report) = run_json(&dir);
    expect_error_kind(&out, &report, 3, "verifier");
    assert_eq!(report["attempts"], json!(1));
    assert_eq!(server.seen().len(), 1);
    assert_eq!(dir.read("hello.txt"), None);
}

// --- transport failures --------------------------------------------------------------------------

fn a_server_error_is_a_transport_retry_not_a_verify_retry(api: Api) {
    let server = ModelServer::start(|index, body| {
        if index == 0 {
            status(500, vec![])
        } else {
            already_done(index, body)
        }
    });
    let dir = verified(api, &server, ", max_retries: 1", "");
    dir.write("hello.txt", "hi\n");
    let (out, report) = run_json(&dir);
    out.expect_code(0);
    assert_eq!(report["outcome"], json!("passed"), "{out:?}");
    assert_eq!(report["attempts"], json!(1));
    assert_eq!(report["reasons"], json!([[]]));
    // Two HTTP requests, the same one twice, but one model call in one attempt.
    let bodies = server.bodies();
    assert_eq!(bodies.len(), 2);
    assert_eq!(bodies[0], bodies[1]);
    assert_eq!(usage_per_attempt(&report), [(10, 5, 1)]);
}

fn a_rate_limit_with_retry_after_is_honoured(api: Api) {
    let server = ModelServer::start(|index, body| {
        if index == 0 {
            status(429, vec![("retry-after", "1")])
        } else {
            already_done(index, body)
        }
    });
    let dir = verified(api, &server, ", max_retries: 1", "");
    dir.write("hello.txt", "hi\n");
    let (out, report) = run_json(&dir);
    out.expect_code(0);
    assert_eq!(report["outcome"], json!("passed"), "{out:?}");
    assert_eq!(report["attempts"], json!(1));
    let bodies = server.bodies();
    assert_eq!(bodies.len(), 2);
    assert_eq!(bodies[0], bodies[1]);
    assert_eq!(report["usage"]["requests"], json!(1));
}

fn persistent_server_errors_are_a_delegate_error(api: Api) {
    let server = ModelServer::start(|_, _| status(503, vec![("retry-after", "0")]));
    let dir = verified(api, &server, ", max_retries: 2", "");
    let (out, report) = run_json(&dir);
    expect_error_kind(&out, &report, 4, "delegate");
    assert_eq!(report["attempts"], json!(1));
    // The first try and two transport retries; never a verify retry.
    assert_eq!(server.seen().len(), 3);
    let message = report["error"]["message"].as_str().expect("a message");
    assert!(message.contains("503"), "{message}");
    assert!(message.contains("fake status 503"), "{message}");
}

fn a_hanging_provider_hits_the_request_timeout(api: Api) {
    let server = ModelServer::start(|_, _| Reply::Hang);
    let dir = verified(api, &server, ", timeout_s: 1, max_retries: 0", "");
    let (out, report) = run_json(&dir);
    expect_error_kind(&out, &report, 4, "delegate");
    assert_eq!(report["attempts"], json!(1));
    let message = report["error"]["message"].as_str().expect("a message");
    assert!(message.contains("timed out"), "{message}");
    assert_eq!(server.seen().len(), 1);
}

/// Runs each named test once per protocol, as `openai::NAME` and `anthropic::NAME`.
macro_rules! both_protocols {
    ($($name:ident),* $(,)?) => {
        mod openai {
            $(#[test] fn $name() { super::$name(super::Api::OpenAi) })*
        }
        mod anthropic {
            $(#[test] fn $name() { super::$name(super::Api::Anthropic) })*
        }
    };
}

both_protocols!(
    passes_first_try_with_one_request,
    does_the_work_first_try_through_a_tool_call,
    lies_then_tells_the_truth,
    always_lies_until_the_retries_run_out,
    zero_retries_means_one_request,
    no_verifier_means_skipped_after_one_request,
    a_broken_verifier_stops_at_once,
    a_server_error_is_a_transport_retry_not_a_verify_retry,
    a_rate_limit_with_retry_after_is_honoured,
    persistent_server_errors_are_a_delegate_error,
    a_hanging_provider_hits_the_request_timeout,
);

/// The Messages API on the wire: the key as `x-api-key`, `anthropic-version`, a `max_tokens`
/// (the API requires one), the verifier's retry prompt after the lie, the tool call as a
/// `tool_use` block and its result as a `tool_result` block opening the next user turn; a 529
/// (overloaded) is retried like any 5xx.
#[test]
fn anthropic_speaks_the_messages_api() {
    let server = ModelServer::start(|index, body| {
        if index == 0 {
            status(529, vec![("retry-after", "0")])
        } else {
            lies_once(index, body)
        }
    });
    let dir = verified(
        Api::Anthropic,
        &server,
        ", max_retries: 1, temperature: 0.2",
        "",
    );
    let (out, report) = run_json(&dir);
    out.expect_code(0);
    assert_eq!(report["outcome"], json!("passed"), "{out:?}");
    let seen = server.seen();
    assert_eq!(seen.len(), 4, "the 529, the lie, the write, the answer");
    for request in &seen {
        assert_eq!(request.header("x-api-key"), Some("sk-ant-fake-key"));
        assert_eq!(request.header("anthropic-version"), Some("2023-06-01"));
        assert_eq!(request.authorization(), None);
        assert_eq!(request.wire["max_tokens"], json!(8192));
        assert_eq!(request.wire["temperature"], json!(0.2));
        assert_eq!(request.wire["tools"][0]["name"], json!("write_file"));
        assert!(request.wire["tools"][0]["input_schema"].is_object());
    }
    let last = seen[3].wire["messages"].as_array().expect("messages");
    let roles: Vec<&str> = last
        .iter()
        .map(|m| m["role"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(roles, ["user", "assistant", "user", "assistant", "user"]);
    assert_eq!(last[0]["content"], json!(TASK));
    assert!(
        last[2]["content"]
            .as_str()
            .is_some_and(|c| c.starts_with("VERIFICATION FAILED"))
    );
    assert_eq!(last[3]["content"][0]["type"], json!("tool_use"));
    assert_eq!(last[3]["content"][0]["id"], json!("call_w1"));
    assert_eq!(
        last[3]["content"][0]["input"],
        json!({"path": "hello.txt", "content": "hi\n"})
    );
    assert_eq!(last[4]["content"][0]["type"], json!("tool_result"));
    assert_eq!(last[4]["content"][0]["tool_use_id"], json!("call_w1"));

    // No key in the environment: refused when the file loads, naming the variable.
    let dir = verified(Api::Anthropic, &server, "", "");
    let out = harness(["run", "delegation.yaml", "--json"])
        .current_dir(dir.path())
        .run();
    let report = out.json();
    expect_error_kind(&out, &report, 2, "config");
    assert!(
        report["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains(ANTHROPIC_KEY_VAR)),
        "{report}"
    );
}

// --- settings on the wire ------------------------------------------------------------------------

#[test]
fn settings_are_forwarded_in_the_request_body() {
    let server = ModelServer::start(already_done);
    let dir = verified(
        Api::OpenAi,
        &server,
        ", temperature: 0, max_tokens: 256",
        "",
    );
    dir.write("hello.txt", "hi\n");
    let (out, _) = run_json(&dir);
    out.expect_code(0);
    let seen = server.seen();
    assert_eq!(seen.len(), 1);
    let body = &seen[0].body;
    // 0 is a temperature, not "unset".
    assert_eq!(body["temperature"].as_f64(), Some(0.0), "{body}");
    assert_eq!(body["max_tokens"], json!(256), "{body}");
    assert_eq!(body["model"], json!("fake"));
    assert_eq!(body["tools"][0]["type"], json!("function"));
    // The key variable is unset: no Authorization header.
    assert_eq!(seen[0].authorization(), None);

    // Unset settings are not sent at all.
    let server = ModelServer::start(already_done);
    let dir = verified(Api::OpenAi, &server, "", "");
    dir.write("hello.txt", "hi\n");
    run_json(&dir).0.expect_code(0);
    let body = &server.bodies()[0];
    assert!(body.get("temperature").is_none(), "{body}");
    assert!(body.get("max_tokens").is_none(), "{body}");
}

// --- examples ------------------------------------------------------------------------------------

/// Copies `examples/openai` into a temporary directory, points `file` at `server` by replacing
/// `base_url` (which the file must spell exactly), and returns the copy.
fn openai_example(server: &ModelServer, file: &str, base_url: &str) -> TempDir {
    let dir = TempDir::new();
    copy_tree(&repo_root().join("examples/openai"), &dir.path());
    let _ = std::fs::remove_file(dir.join("workspace/hello.txt"));
    let text = dir.read(file).expect("the example file exists");
    let needle = format!("base_url: {base_url}\n");
    assert!(
        text.contains(&needle),
        "examples/openai/{file} must set `{}`",
        needle.trim()
    );
    dir.write(
        file,
        text.replace(&needle, &format!("base_url: {}\n", server.base_url())),
    );
    dir
}

#[test]
fn the_openai_example_runs_against_the_fake() {
    let readme = std::fs::read_to_string(repo_root().join("examples/openai/README.md"))
        .expect("examples/openai/README.md");
    for shown in [
        "cargo run --release -- run examples/openai/delegation.yaml",
        "cargo run --release -- run examples/openai/delegation.ollama.yaml",
        "OPENAI_API_KEY",
    ] {
        assert!(readme.contains(shown), "the README does not show {shown:?}");
    }

    let server = ModelServer::start(lies_once);
    let dir = openai_example(&server, "delegation.yaml", "https://api.openai.com/v1");
    let (out, report) = run_file(
        &dir,
        "delegation.yaml",
        &[("OPENAI_API_KEY", "sk-fake-for-tests")],
    );
    out.expect_code(0);
    assert_eq!(report["outcome"], json!("passed"), "{out:?}");
    assert_eq!(report["attempts"], json!(2));
    assert_eq!(dir.read("workspace/hello.txt").as_deref(), Some("hi\n"));
    let seen = server.seen();
    assert_eq!(seen.len(), 3);
    // The model named in the file, the key from OPENAI_API_KEY, the tools the file lists.
    assert_eq!(seen[0].body["model"], json!("gpt-4o-mini"));
    assert_eq!(seen[0].authorization(), Some("Bearer sk-fake-for-tests"));
    let tools: Vec<&Value> = seen[0].body["tools"]
        .as_array()
        .expect("tools are offered")
        .iter()
        .map(|t| &t["function"]["name"])
        .collect();
    assert_eq!(tools, [&json!("write_file"), &json!("read_file")]);
}

#[test]
fn the_ollama_example_runs_against_the_fake() {
    let server = ModelServer::start(lies_once);
    let dir = openai_example(
        &server,
        "delegation.ollama.yaml",
        "http://localhost:11434/v1",
    );
    // Ollama needs no key: with its variable empty, no Authorization header goes out.
    let (out, report) = run_file(&dir, "delegation.ollama.yaml", &[("OLLAMA_API_KEY", "")]);
    out.expect_code(0);
    assert_eq!(report["outcome"], json!("passed"), "{out:?}");
    assert_eq!(report["attempts"], json!(2));
    let seen = server.seen();
    assert_eq!(seen.len(), 3);
    assert_eq!(seen[0].body["model"], json!("llama3.1"));
    assert_eq!(seen[0].body["temperature"].as_f64(), Some(0.0));
    assert_eq!(seen[0].authorization(), None);
}

#[test]
fn the_command_example_lies_is_caught_and_passes_on_attempt_2() {
    let readme = std::fs::read_to_string(repo_root().join("examples/command/README.md"))
        .expect("examples/command/README.md");
    assert!(
        readme.contains("cargo run --release -- run examples/command/delegation.yaml"),
        "the README does not show the command"
    );

    // Run a copy, from elsewhere: the agent writes into the workspace, and the script's path in
    // the file must work from the workspace, not from where harness was started.
    let dir = TempDir::new();
    copy_tree(&repo_root().join("examples/command"), &dir.path());
    let _ = std::fs::remove_file(dir.join("workspace/hello.txt"));
    let elsewhere = TempDir::new();
    let out = harness(["run", "--json"])
        .args([dir.join("delegation.yaml")])
        .current_dir(elsewhere.path())
        .run();
    out.expect_code(0);
    let report = out.json();
    assert_eq!(report["outcome"], json!("passed"), "{out:?}");
    assert_eq!(report["attempts"], json!(2));
    assert_eq!(
        report["delegate"],
        json!({"kind": "command", "model": null})
    );
    let reasons = report["reasons"].as_array().expect("reasons");
    assert_eq!(reasons.len(), 2);
    assert_eq!(reasons[1], json!([]));
    let first = reasons[0][0].as_str().expect("the first attempt's reason");
    assert!(first.contains("hello.txt"), "{first}");
    assert_eq!(report["usage"]["requests"], json!(2));
    assert_eq!(dir.read("workspace/hello.txt").as_deref(), Some("hi\n"));
    assert!(!elsewhere.join("hello.txt").exists());
}

/// A `base_url` that is not an http(s) URL with a host, or that carries credentials, is a
/// configuration error at load (exit 2) naming the file and key; no request is sent.
#[test]
fn a_bad_base_url_is_refused_at_load() {
    for (url, says) in [
        (
            "file:///etc/passwd",
            "must be http:// or https://, not file:",
        ),
        (
            "ftp://models.example/v1",
            "must be http:// or https://, not ftp:",
        ),
        ("localhost:11434/v1", "must be http:// or https://"),
        ("not a url", "is not a URL"),
        (
            "https://user:sk-secret@models.example/v1",
            "carries credentials",
        ),
    ] {
        let dir = TempDir::new();
        dir.write(
            "delegation.yaml",
            format!("task: hi\ndelegate: {{kind: openai, base_url: {url:?}, model: fake}}\n"),
        );
        let out = harness(["run", "delegation.yaml"])
            .current_dir(dir.path())
            .run();
        out.expect_code(2).expect_stderr_kind("config");
        assert!(out.stderr.contains("delegation.yaml"), "{url}: {out:?}");
        assert!(out.stderr.contains("`delegate.base_url`"), "{url}: {out:?}");
        assert!(out.stderr.contains(says), "{url}: {out:?}");
        assert!(!out.stderr.contains("sk-secret"), "{url}: {out:?}");
    }
}

#[test]
fn a_spent_token_budget_stops_the_loop_with_a_budget_finding() {
    let server = ModelServer::start(always_lies);
    // Attempt 1 costs 15 tokens, attempt 2 another 35: past 40 after the second.
    let dir = verified(
        Api::OpenAi,
        &server,
        "",
        "max_verify_retries: 5\nlimits: {max_tokens: 40}\n",
    );
    let (out, report) = run_json(&dir);
    out.expect_code(4);
    assert_eq!(report["outcome"], json!("error"), "{out:?}");
    assert_eq!(report["kind"], json!("budget"));
    assert_eq!(report["attempts"], json!(2));
    let last = &report["history"][1];
    assert_eq!(last["decision"], json!("fail"), "{last}");
    let budget = last["findings"]
        .as_array()
        .and_then(|f| f.iter().find(|f| f["source"] == json!("budget")))
        .expect("a budget finding");
    assert!(
        budget["message"]
            .as_str()
            .is_some_and(|m| m.contains("50 tokens, more than limits.max_tokens = 40")),
        "{budget}"
    );
    assert_eq!(server.bodies().len(), 2, "no third request");
}

/// The share of the prompt the provider read from its cache is counted per attempt, recorded,
/// shown in the spend table and sealed into the export.
#[test]
fn the_cached_share_of_the_prompt_is_recorded_shown_and_sealed() {
    // Every completion says 8 of its prompt tokens came from the provider's cache.
    let server = ModelServer::start(|_, body| {
        let reply = if after_tool(body) {
            answer(body, TRUTH)
        } else {
            write_hello(body)
        };
        let Reply::Json(status, headers, mut completion) = reply else {
            unreachable!("the fake's replies are JSON")
        };
        completion["usage"]["prompt_tokens_details"] = json!({"cached_tokens": 8});
        Reply::Json(status, headers, completion)
    });
    let dir = verified(Api::OpenAi, &server, "", "");
    let journal = dir.join("runs.db");
    let journal = journal.to_str().expect("UTF-8");
    let (out, report) = run_file(&dir, "delegation.yaml", &[("HARNESS_JOURNAL", journal)]);
    out.expect_code(0);
    assert_eq!(
        report["usage"]["cached_input_tokens"],
        json!(16),
        "{report}"
    );
    assert_eq!(
        report["usage"]["per_attempt"][0]["cached_input_tokens"],
        json!(16)
    );
    let id = report["id"].as_str().expect("an id");
    let input = report["usage"]["input_tokens"].as_u64().expect("a count");
    let cli = |args: &[&str]| {
        harness(args)
            .current_dir(dir.path())
            .env("HARNESS_JOURNAL", journal)
            .run()
    };

    let shown = cli(&["runs", "show", id]);
    shown.expect_code(0);
    assert!(
        shown.stdout.contains(&format!("{input} (16 cached)")),
        "{}",
        shown.stdout
    );
    let shown = cli(&["runs", "show", id, "--json"]);
    shown.expect_code(0);
    let spend = &shown.json()["spend"];
    assert_eq!(spend["run"]["cached_input_tokens"], json!(16), "{spend}");
    assert_eq!(spend["attempts"][0]["cached_input_tokens"], json!(16));

    let exported = cli(&["runs", "export", id]);
    exported.expect_code(0);
    let document: Value = serde_json::from_str(&exported.stdout).expect("an export");
    assert_eq!(document["run"]["usage"]["cached_input_tokens"], json!(16));
    // Sealed as written, and the audit agrees.
    cli(&["audit", id]).expect_code(0);
}
