//! Codex (`codex`): `exec --json` in a workspace-write sandbox; a retry is `exec … resume
//! THREAD PROMPT`. The tool log is the stream's completed items: commands run, file changes,
//! MCP tool calls, web searches.

use serde_json::Value;

use std::path::{Path, PathBuf};

use super::{
    Adapter, CallLog, Config, Invocation, Parsed, Resume, count, guarded, host, json_lines, owned,
    text,
};

/// OpenAI's Codex CLI.
pub(super) struct Codex;

impl Adapter for Codex {
    fn name(&self) -> &'static str {
        "codex"
    }

    fn install(&self) -> &'static str {
        "npm install -g @openai/codex"
    }

    fn write_tools(&self) -> &'static [&'static str] {
        // A `file_change` item's `changes` list each path with its kind (`delete`…).
        &["file_change", "apply_patch"]
    }

    /// `CODEX_HOME`, else `~/.codex`; its `config.toml` (MCP servers, `notify`), instructions
    /// and prompts guarded.
    fn config(&self, home: &Path, env: &dyn Fn(&str) -> Option<PathBuf>) -> Vec<Config> {
        let dir = env("CODEX_HOME").unwrap_or_else(|| home.join(".codex"));
        let mut config = vec![Config::Dir(dir.clone())];
        config.extend(guarded(&dir, &["config.toml", "AGENTS.md", "prompts"]));
        config
    }

    fn session_word(&self) -> &'static str {
        "thread"
    }

    fn args(&self, run: &Invocation<'_>) -> Vec<String> {
        let flags = [
            "exec",
            "--json",
            "--skip-git-repo-check",
            "--sandbox",
            "workspace-write",
        ];
        let prompt = vec![run.prompt.to_owned()];
        run.args(
            owned(&flags),
            run.resuming("resume"),
            Resume::AfterArgs,
            prompt,
        )
    }

    fn calls_mcp(&self) -> bool {
        true
    }

    /// `-c mcp_servers.harness_tree={…}` after `exec`: its calls approved (`codex exec` refuses
    /// a call that asks), and its tool timeout (60 s by default) the run's limit.
    fn serve_mcp(
        &self,
        _: &Invocation<'_>,
        args: &mut Vec<String>,
        served: &host::Served<'_>,
    ) -> std::io::Result<Vec<(String, String)>> {
        // JSON strings and arrays of strings are TOML's too.
        let server = format!(
            "mcp_servers.{}={{command={}, args={}, default_tools_approval_mode=\"approve\", tool_timeout_sec={}}}",
            host::SERVER,
            serde_json::json!(served.command),
            serde_json::json!(served.args),
            served.timeout.as_secs().max(1),
        );
        let at = usize::from(args.first().is_some_and(|a| a == "exec"));
        args.splice(at..at, ["-c".to_owned(), server]);
        Ok(Vec::new())
    }

    /// A stream line saying the provider refused the key (`401 Unauthorized`, which Codex would
    /// retry five times before the turn fails).
    fn fatal(&self, line: &str) -> Option<String> {
        let line: Value = serde_json::from_str(line).ok()?;
        let message = line["message"]
            .as_str()
            .or_else(|| line["error"]["message"].as_str())?;
        let refused = matches!(line["type"].as_str(), Some("error" | "turn.failed"))
            && message.contains("401 Unauthorized");
        refused.then(|| {
            "the model API refused its credentials (401 Unauthorized); set a valid key in the variable your model provider's `env_key` names (`OPENAI_API_KEY` for OpenAI), in `delegate.env` or your environment, or log in with `codex login`".to_owned()
        })
    }

    fn parse(&self, stdout: &str, _: &Invocation<'_>) -> std::result::Result<Parsed, String> {
        parse(stdout)
    }
}

/// Codex's `exec --json`: `thread.started` with the thread id, `item.completed` items (the agent's
/// messages, commands it ran, file changes, MCP tool calls), `turn.completed` with usage, or
/// `turn.failed` / `error`.
fn parse(stdout: &str) -> std::result::Result<Parsed, String> {
    let mut parsed = Parsed::default();
    let mut log = CallLog::default();
    let mut completed = false;
    let mut said = None;
    for line in json_lines(stdout, "JSONL")? {
        match line["type"].as_str() {
            Some("thread.started") => {
                parsed.session = line["thread_id"].as_str().map(str::to_owned);
            }
            Some("item.completed") => {
                let item = &line["item"];
                let id = item["id"].as_str().unwrap_or_default().to_owned();
                let kind = item["type"].as_str().unwrap_or_default();
                let status = item["status"].as_str().unwrap_or_default();
                // A completed item the log keeps: its arguments, what it returned, whether it
                // failed.
                let done = match kind {
                    "agent_message" => {
                        parsed.response = item["text"].as_str().unwrap_or_default().to_owned();
                        None
                    }
                    "command_execution" => Some((
                        serde_json::json!({"command": item["command"]}),
                        text(&item["aggregated_output"]),
                        status != "completed" || item["exit_code"].as_i64() != Some(0),
                    )),
                    "file_change" => Some((
                        serde_json::json!({"changes": item["changes"]}),
                        status.to_owned(),
                        status != "completed",
                    )),
                    "mcp_tool_call" => Some((
                        serde_json::json!({"server": item["server"], "tool": item["tool"], "arguments": item["arguments"]}),
                        match &item["error"] {
                            Value::Null => text(&item["result"]["content"]),
                            error => text(&error["message"]),
                        },
                        status != "completed",
                    )),
                    "web_search" => Some((
                        serde_json::json!({"query": item["query"]}),
                        "searched".to_owned(),
                        false,
                    )),
                    _ => None,
                };
                if let Some((arguments, content, failed)) = done {
                    log.call(id.clone(), kind.to_owned(), arguments);
                    log.result(&id, content, failed);
                }
            }
            Some("turn.completed") => {
                completed = true;
                let usage = &line["usage"];
                parsed.usage.input_tokens += count(&usage["input_tokens"]);
                parsed.usage.output_tokens += count(&usage["output_tokens"]);
                parsed.usage.cached_input_tokens += count(&usage["cached_input_tokens"]);
            }
            Some("turn.failed") => {
                parsed.error = Some(format!(
                    "the turn failed: {}",
                    line["error"]["message"].as_str().unwrap_or("(no message)")
                ));
            }
            // Also what it says while it reconnects: an error only if the turn never completes.
            Some("error") => {
                said = Some(
                    line["message"]
                        .as_str()
                        .unwrap_or("an error without a message")
                        .to_owned(),
                );
            }
            _ => {}
        }
    }
    if !completed && parsed.error.is_none() {
        match said {
            Some(said) => parsed.error = Some(said),
            None => {
                return Err(
                    "the stream ended without `turn.completed` (did the CLI crash?)".to_owned(),
                );
            }
        }
    }
    parsed.observed = log.calls;
    Ok(parsed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usage_is_summed_over_turns_with_the_cached_share_of_the_input() {
        let stream = [
            r#"{"type":"thread.started","thread_id":"t-1"}"#,
            r#"{"type":"item.completed","item":{"id":"i1","type":"agent_message","text":"Done"}}"#,
            r#"{"type":"turn.completed","usage":{"input_tokens":1200,"cached_input_tokens":800,"output_tokens":30}}"#,
            r#"{"type":"turn.completed","usage":{"input_tokens":100,"output_tokens":5}}"#,
        ]
        .join("\n");
        let parsed = parse(&stream).expect("parses");
        assert_eq!(parsed.session.as_deref(), Some("t-1"));
        assert_eq!(parsed.response, "Done");
        let usage = parsed.usage;
        assert_eq!(
            (
                usage.input_tokens,
                usage.cached_input_tokens,
                usage.output_tokens
            ),
            (1300, 800, 35)
        );
    }
}
