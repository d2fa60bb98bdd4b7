//! The `command` delegate running real programs (`sh`, `cat`, `sleep`) in a temporary workspace.

use std::path::Path;
use std::time::Duration;

use harness::delegate::{CommandDelegate, CommandSpec, Delegate, Turn, TurnRequest};
use harness::{Error, ErrorKind, Message, ToolSpec};
use serde_json::json;

/// A prompt with characters a shell would mangle if the delegate used one.
const RETRY_PROMPT: &str = "Verification failed: \"hello.txt\" is missing; it's $HOME `not` done";

/// What a retry sends: the task again, then the retry prompt (a fresh CLI run remembers nothing).
fn retry_prompt() -> String {
    format!("Create hello.txt\n\n{RETRY_PROMPT}")
}

fn conversation() -> Vec<Message> {
    vec![
        Message::System("You are a careful engineer.".into()),
        Message::User("Create hello.txt".into()),
        Message::Assistant {
            content: Some("Done, I created hello.txt".into()),
            tool_calls: vec![],
        },
        Message::User(RETRY_PROMPT.into()),
    ]
}

async fn run(command: &[&str], workdir: &Path, timeout: Duration) -> Result<Turn, Error> {
    let tools = [ToolSpec {
        name: "read_file".into(),
        description: "Reads a file.".into(),
        parameters: json!({"type": "object", "properties": {"path": {"type": "string"}}}),
    }];
    let messages = conversation();
    let mut delegate = CommandDelegate::new(CommandSpec {
        command: command.iter().map(|s| (*s).to_owned()).collect(),
        workdir: workdir.to_path_buf(),
        timeout,
        isolation: None,
    });
    delegate
        .turn(TurnRequest {
            run_id: "",
            messages: &messages,
            attempt: 1,
            turn: 0,
            tools: &tools,
            host: None,
        })
        .await
}

async fn output(command: &[&str]) -> Result<Turn, Error> {
    let dir = tempfile::tempdir().expect("temp dir");
    run(command, dir.path(), Duration::from_secs(30)).await
}

#[tokio::test(flavor = "multi_thread")]
async fn prompt_placeholder_is_replaced_by_the_task_and_the_retry_prompt() {
    let turn = output(&["sh", "-c", r#"printf "%s" "$1""#, "sh", "{prompt}"])
        .await
        .expect("turn");
    assert_eq!(turn.content.as_deref(), Some(retry_prompt().as_str()));
    assert!(turn.tool_calls.is_empty());
    assert_eq!(turn.usage.requests, 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn prompt_placeholder_inside_an_argument_is_replaced() {
    let turn = output(&["sh", "-c", r#"printf "%s" "$1""#, "sh", "--prompt={prompt}"])
        .await
        .expect("turn");
    assert_eq!(
        turn.content.as_deref(),
        Some(format!("--prompt={}", retry_prompt()).as_str())
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn without_a_placeholder_the_prompt_goes_to_stdin() {
    let turn = output(&["cat"]).await.expect("turn");
    assert_eq!(turn.content.as_deref(), Some(retry_prompt().as_str()));
}

#[tokio::test(flavor = "multi_thread")]
async fn trailing_newlines_are_trimmed() {
    let turn = output(&["sh", "-c", "cat; echo; echo"])
        .await
        .expect("turn");
    assert_eq!(turn.content.as_deref(), Some(retry_prompt().as_str()));
}

#[tokio::test(flavor = "multi_thread")]
async fn runs_in_the_workdir() {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(dir.path().join("marker.txt"), "here").expect("write marker");
    let turn = run(&["cat", "marker.txt"], dir.path(), Duration::from_secs(30))
        .await
        .expect("turn");
    assert_eq!(turn.content.as_deref(), Some("here"));
}

#[tokio::test(flavor = "multi_thread")]
async fn inherits_the_environment() {
    // Any variable the harness has, outside the few that exec.run passes through.
    let passed = ["PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "TERM", "USER"];
    let Some((name, value)) = std::env::vars().find(|(name, value)| {
        !passed.contains(&name.as_str())
            && !value.is_empty()
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            && !value.ends_with('\n')
    }) else {
        panic!("the test process has no environment variable to look for");
    };
    let script = format!(r#"printf "%s" "${name}""#);
    let turn = output(&["sh", "-c", &script]).await.expect("turn");
    assert_eq!(turn.content.as_deref(), Some(value.as_str()), "${name}");
}

#[tokio::test(flavor = "multi_thread")]
async fn non_zero_exit_is_an_error_with_the_stderr_tail() {
    let err = output(&[
        "sh",
        "-c",
        "echo 'Done!'; seq 1 5000 >&2; echo 'boom: the agent gave up' >&2; exit 3",
    ])
    .await
    .expect_err("fails");
    assert_eq!(err.kind(), ErrorKind::Delegate);
    let message = err.message();
    assert!(message.contains("code 3"), "{message}");
    assert!(message.contains("boom: the agent gave up"), "{message}");
    assert!(message.contains("4999"), "{message}");
    assert!(
        message.len() < 3000,
        "only the tail of stderr: {} bytes",
        message.len()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn timeout_kills_the_command() {
    let dir = tempfile::tempdir().expect("temp dir");
    let err = run(&["sleep", "10"], dir.path(), Duration::from_secs(1))
        .await
        .expect_err("times out");
    assert_eq!(err.kind(), ErrorKind::Delegate);
    assert!(err.message().contains("timed out"), "{}", err.message());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_missing_program_is_an_error() {
    let err = output(&["harness-test-no-such-program"])
        .await
        .expect_err("fails");
    assert_eq!(err.kind(), ErrorKind::Delegate);
    assert!(
        err.message().contains("harness-test-no-such-program"),
        "{}",
        err.message()
    );
}
