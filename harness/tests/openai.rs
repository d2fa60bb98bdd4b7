//! The `openai` delegate against a fake OpenAI-compatible server on 127.0.0.1 that speaks the
//! real protocol (real HTTP, real JSON) and records every request it receives.

use std::time::Duration;

use harness::delegate::{Delegate, OpenAiDelegate, OpenAiSpec, Turn, TurnRequest};
use harness::{Error, ErrorKind, Message, ToolCall, ToolSpec, Usage};
use harness_testkit::model::{ModelServer, Reply};
use serde_json::{Map, Value, json};

/// A chat completion as OpenAI sends it.
fn completion(message: Value, finish_reason: &str) -> Value {
    json!({
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": "test-model",
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
        "usage": {"prompt_tokens": 12, "completion_tokens": 5, "total_tokens": 17},
    })
}

fn answer(content: &str) -> Reply {
    Reply::Json(
        200,
        vec![],
        completion(json!({"role": "assistant", "content": content}), "stop"),
    )
}

fn status(code: u16) -> Reply {
    Reply::Json(
        code,
        vec![],
        json!({"error": {"message": format!("status {code}"), "type": "server_error"}}),
    )
}

fn spec(base_url: &str) -> OpenAiSpec {
    OpenAiSpec {
        model: "test-model".to_owned(),
        base_url: base_url.to_owned(),
        api_key_env: None,
        temperature: None,
        max_tokens: None,
        request_timeout: Duration::from_secs(10),
        max_retries: 2,
        retry_base: Duration::from_millis(1),
    }
}

fn client() -> reqwest::Client {
    harness_builtins::http_client_builder()
        .no_proxy()
        .build()
        .expect("HTTP client")
}

fn conversation() -> Vec<Message> {
    let mut arguments = Map::new();
    arguments.insert("path".into(), json!("."));
    vec![
        Message::System("You are a careful engineer.".into()),
        Message::User("Create hello.txt".into()),
        Message::Assistant {
            content: None,
            tool_calls: vec![ToolCall {
                id: "call_1".into(),
                name: "list_files".into(),
                arguments,
            }],
        },
        Message::Tool {
            call_id: "call_1".into(),
            name: "list_files".into(),
            content: "README.md".into(),
        },
        Message::User("Verification failed: hello.txt does not exist".into()),
    ]
}

fn tools() -> Vec<ToolSpec> {
    vec![ToolSpec {
        name: "write_file".into(),
        description: "Writes a file in the workspace.".into(),
        parameters: json!({
            "type": "object",
            "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
            "required": ["path", "content"],
        }),
    }]
}

/// Runs one turn of a delegate built from `spec` over the standard conversation.
async fn turn_with(spec: OpenAiSpec, tools: &[ToolSpec]) -> Result<Turn, Error> {
    let messages = conversation();
    let mut delegate = OpenAiDelegate::new(spec, client());
    delegate
        .turn(TurnRequest {
            run_id: "",
            messages: &messages,
            attempt: 1,
            turn: 0,
            tools,
            host: None,
        })
        .await
}

async fn turn(spec: OpenAiSpec) -> Result<Turn, Error> {
    turn_with(spec, &tools()).await
}

/// The prompt tokens the provider read from its cache (`prompt_tokens_details.cached_tokens`)
/// are counted apart, whichever way the completion is read (the fast typed parse, or the tree
/// when the completion has an unusual shape elsewhere).
#[tokio::test(flavor = "multi_thread")]
async fn the_cached_share_of_the_prompt_is_counted() {
    let mut usual = completion(json!({"role": "assistant", "content": "Done"}), "stop");
    usual["usage"]["prompt_tokens_details"] = json!({"cached_tokens": 8, "audio_tokens": 0});
    let mut unusual = usual.clone();
    // A second choice whose message is not an object: the typed parse gives up on it.
    if let Some(choices) = unusual["choices"].as_array_mut() {
        choices.push(json!({"index": 1, "message": [1, 2], "finish_reason": "stop"}));
    }
    for body in [usual, unusual] {
        let server = ModelServer::replies(vec![Reply::Json(200, vec![], body)]);
        let turn = turn(spec(server.base_url())).await.expect("turn");
        assert_eq!(turn.content.as_deref(), Some("Done"));
        assert_eq!(
            (turn.usage.input_tokens, turn.usage.cached_input_tokens),
            (12, 8)
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn plain_answer_and_the_request_on_the_wire() {
    let server = ModelServer::replies(vec![answer("Done, I created hello.txt")]);
    // A trailing slash on base_url is ignored.
    let turn = turn(spec(&format!("{}/", server.base_url())))
        .await
        .expect("turn");
    assert_eq!(turn.content.as_deref(), Some("Done, I created hello.txt"));
    assert!(turn.tool_calls.is_empty());
    assert_eq!(turn.finish_reason.as_deref(), Some("stop"));
    assert_eq!(
        turn.usage,
        Usage {
            input_tokens: 12,
            output_tokens: 5,
            requests: 1,
            cached_input_tokens: 0,
        }
    );

    let seen = server.seen();
    assert_eq!(seen.len(), 1);
    let body = &seen[0].body;
    assert_eq!(body["model"], "test-model");
    let expected: Vec<Value> = conversation().iter().map(Message::to_openai).collect();
    assert_eq!(body["messages"], Value::Array(expected));
    assert_eq!(
        body["messages"][2]["tool_calls"][0]["function"]["arguments"],
        r#"{"path":"."}"#
    );
    assert_eq!(body["tools"][0]["type"], "function");
    assert_eq!(body["tools"][0]["function"]["name"], "write_file");
    assert_eq!(
        body["tools"][0]["function"]["parameters"]["required"][0],
        "path"
    );
    assert!(body.get("temperature").is_none(), "{body}");
    assert!(body.get("max_tokens").is_none(), "{body}");
    assert_eq!(seen[0].authorization(), None);
}

#[tokio::test(flavor = "multi_thread")]
async fn tools_are_omitted_when_none_are_offered() {
    let server = ModelServer::replies(vec![answer("ok")]);
    turn_with(spec(server.base_url()), &[]).await.expect("turn");
    let body = &server.seen()[0].body;
    assert!(body.get("tools").is_none(), "{body}");
}

#[tokio::test(flavor = "multi_thread")]
async fn tool_calls_are_decoded() {
    let message = json!({
        "role": "assistant",
        "content": null,
        "tool_calls": [
            {"id": "call_abc", "type": "function", "function": {
                "name": "write_file",
                "arguments": "{\"path\": \"hello.txt\", \"content\": \"hi\\n\"}",
            }},
            {"id": "call_def", "type": "function", "function": {"name": "list_files", "arguments": "{}"}},
        ],
    });
    let server = ModelServer::replies(vec![Reply::Json(
        200,
        vec![],
        completion(message, "tool_calls"),
    )]);
    let turn = turn(spec(server.base_url())).await.expect("turn");
    assert_eq!(turn.content, None);
    assert_eq!(turn.finish_reason.as_deref(), Some("tool_calls"));
    assert_eq!(turn.tool_calls.len(), 2);
    let write = &turn.tool_calls[0];
    assert_eq!(write.id.as_deref(), Some("call_abc"));
    assert_eq!(write.name, "write_file");
    assert_eq!(write.arguments["path"], "hello.txt");
    assert_eq!(write.arguments["content"], "hi\n");
    assert_eq!(turn.tool_calls[1].name, "list_files");
    assert!(turn.tool_calls[1].arguments.is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn temperature_zero_and_max_tokens_are_forwarded() {
    let server = ModelServer::replies(vec![answer("ok")]);
    let mut spec = spec(server.base_url());
    spec.temperature = Some(0.0);
    spec.max_tokens = Some(256);
    turn(spec).await.expect("turn");
    let body = &server.seen()[0].body;
    assert_eq!(body["temperature"], json!(0.0));
    assert_eq!(body["max_tokens"], json!(256));
}

/// Set by `authorization_header_from_the_env_var` for the child test run only.
const AUTH_VAR: &str = "HARNESS_TEST_OPENAI_KEY_AUTH";

/// Runs `authorization_child` in a child process with its key variable set: changing this
/// process's environment while other tests run on other threads is not sound.
#[test]
fn authorization_header_from_the_env_var() {
    let exe = std::env::current_exe().expect("the test binary's path");
    let output = std::process::Command::new(exe)
        .args([
            "authorization_child",
            "--exact",
            "--ignored",
            "--test-threads=1",
        ])
        .env(AUTH_VAR, "sk-test-123")
        .output()
        .expect("run the test binary");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success() && stdout.contains("1 passed"),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "run by authorization_header_from_the_env_var with its variable set"]
async fn authorization_child() {
    assert_eq!(
        std::env::var(AUTH_VAR).as_deref(),
        Ok("sk-test-123"),
        "run through authorization_header_from_the_env_var"
    );
    let server = ModelServer::replies(vec![answer("ok")]);
    let mut spec = spec(server.base_url());
    spec.api_key_env = Some(AUTH_VAR.to_owned());
    turn(spec).await.expect("turn");
    assert_eq!(server.seen()[0].authorization(), Some("Bearer sk-test-123"));
}

#[tokio::test(flavor = "multi_thread")]
async fn server_error_then_success_is_retried() {
    let server = ModelServer::replies(vec![status(500), answer("ok")]);
    let turn = turn(spec(server.base_url())).await.expect("turn");
    assert_eq!(turn.content.as_deref(), Some("ok"));
    assert_eq!(turn.usage.requests, 1);
    assert_eq!(server.seen().len(), 2);
    // The retry sends the same request again.
    assert_eq!(server.seen()[0].body, server.seen()[1].body);
}

#[tokio::test(flavor = "multi_thread")]
async fn rate_limit_with_retry_after_is_retried() {
    let server = ModelServer::replies(vec![
        Reply::Json(
            429,
            vec![("retry-after", "1")],
            json!({"error": {"message": "Rate limit reached", "type": "requests"}}),
        ),
        answer("ok"),
    ]);
    let turn = turn(spec(server.base_url())).await.expect("turn");
    assert_eq!(turn.content.as_deref(), Some("ok"));
    assert_eq!(server.seen().len(), 2);
}

#[tokio::test(flavor = "multi_thread")]
async fn persistent_server_errors_become_a_delegate_error() {
    let server = ModelServer::replies(vec![Reply::Json(
        500,
        vec![],
        json!({"error": {"message": "the engine is overloaded"}}),
    )]);
    let err = turn(spec(server.base_url())).await.expect_err("fails");
    assert_eq!(err.kind(), ErrorKind::Delegate);
    assert_eq!(server.seen().len(), 3);
    let message = err.message();
    assert!(message.contains("/v1/chat/completions"), "{message}");
    assert!(message.contains("500"), "{message}");
    assert!(message.contains("the engine is overloaded"), "{message}");
}

#[tokio::test(flavor = "multi_thread")]
async fn client_errors_are_not_retried() {
    let server = ModelServer::replies(vec![Reply::Json(
        400,
        vec![],
        json!({"error": {
            "message": "The model `nope` does not exist",
            "type": "invalid_request_error",
            "code": "model_not_found",
        }}),
    )]);
    let err = turn(spec(server.base_url())).await.expect_err("fails");
    assert_eq!(err.kind(), ErrorKind::Delegate);
    assert_eq!(server.seen().len(), 1);
    assert!(
        err.message().contains("The model `nope` does not exist"),
        "{}",
        err.message()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn hitting_max_tokens_is_an_error_not_an_answer() {
    let server = ModelServer::replies(vec![Reply::Json(
        200,
        vec![],
        completion(
            json!({"role": "assistant", "content": "Done, I crea"}),
            "length",
        ),
    )]);
    let err = turn(spec(server.base_url())).await.expect_err("fails");
    assert_eq!(err.kind(), ErrorKind::Delegate);
    assert!(err.message().contains("max_tokens"), "{}", err.message());
    assert_eq!(server.seen().len(), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn invalid_tool_arguments_are_an_error() {
    let message = json!({
        "role": "assistant",
        "content": null,
        "tool_calls": [{"id": "call_1", "type": "function", "function": {
            "name": "write_file",
            "arguments": "{\"path\": \"hello.txt\", ",
        }}],
    });
    let server = ModelServer::replies(vec![Reply::Json(
        200,
        vec![],
        completion(message, "tool_calls"),
    )]);
    let err = turn(spec(server.base_url())).await.expect_err("fails");
    assert_eq!(err.kind(), ErrorKind::Delegate);
    assert!(err.message().contains("write_file"), "{}", err.message());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_hanging_server_hits_the_request_timeout() {
    let server = ModelServer::replies(vec![Reply::Hang]);
    let mut spec = spec(server.base_url());
    spec.request_timeout = Duration::from_secs(1);
    spec.max_retries = 0;
    let err = turn(spec).await.expect_err("fails");
    assert_eq!(err.kind(), ErrorKind::Delegate);
    assert!(err.message().contains("timed out"), "{}", err.message());
    assert_eq!(server.seen().len(), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn connection_refused_is_retried_then_an_error() {
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1");
        listener.local_addr().expect("local address").port()
    };
    let base_url = format!("http://127.0.0.1:{port}/v1");
    let err = turn(spec(&base_url)).await.expect_err("fails");
    assert_eq!(err.kind(), ErrorKind::Delegate);
    let message = err.message();
    assert!(message.contains(&base_url), "{message}");
    assert!(message.contains("3 tries"), "{message}");
    assert!(message.contains("connect"), "{message}");
}
