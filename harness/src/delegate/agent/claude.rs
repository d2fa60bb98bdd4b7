//! Claude Code (`claude`): `-p --output-format stream-json --verbose`, edits accepted; a retry
//! resumes the session with `--resume ID` and sends only the retry prompt. The tool log is the
//! stream's `tool_use` / `tool_result` content blocks.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::{
    Adapter, CallLog, Config, Invocation, Parsed, Resume, count, guarded, host, json_lines, owned,
    prefixed, text,
};
use crate::conversation::Usage;

/// Claude Code.
pub(super) struct Claude;

impl Adapter for Claude {
    fn name(&self) -> &'static str {
        "claude"
    }

    fn install(&self) -> &'static str {
        "npm install -g @anthropic-ai/claude-code"
    }

    fn write_tools(&self) -> &'static [&'static str] {
        &["write", "edit", "multiedit", "notebookedit"]
    }

    fn path_keys(&self) -> &'static [&'static str] {
        &["file_path", "notebook_path"]
    }

    /// `CLAUDE_CONFIG_DIR`, else `~/.claude` and `~/.claude.json`; its settings (hooks,
    /// permissions), memory, commands, agents, skills and plugins guarded.
    fn config(&self, home: &Path, env: &dyn Fn(&str) -> Option<PathBuf>) -> Vec<Config> {
        let (dir, mut config) = match env("CLAUDE_CONFIG_DIR") {
            Some(dir) => (dir.clone(), vec![Config::Dir(dir)]),
            None => (
                home.join(".claude"),
                vec![
                    Config::Dir(home.join(".claude")),
                    Config::File(home.join(".claude.json")),
                ],
            ),
        };
        config.extend(guarded(
            &dir,
            &[
                "settings.json",
                "settings.local.json",
                "CLAUDE.md",
                "hooks",
                "commands",
                "agents",
                "skills",
                // Not all of `plugins/`: Claude Code keeps its built-in plugins' state in
                // `plugins/store` on every start. What installs a plugin is guarded.
                "plugins/installed_plugins.json",
                "plugins/installed_plugins_v2.json",
                "plugins/known_marketplaces.json",
                "plugins/marketplaces",
                "plugins/cache",
                "plugins/repos",
                "output-styles",
            ],
        ));
        config
    }

    fn args(&self, run: &Invocation<'_>) -> Vec<String> {
        let flags = [
            "-p",
            "--output-format",
            "stream-json",
            "--verbose",
            "--permission-mode",
            "acceptEdits",
        ];
        let prompt = vec![run.prompt.to_owned()];
        run.args(
            owned(&flags),
            run.resuming("--resume"),
            Resume::BeforeArgs,
            prompt,
        )
    }

    fn calls_mcp(&self) -> bool {
        true
    }

    /// `--mcp-config` with the server and `--allowedTools` its tools, first (both take several
    /// values: an option must follow them, never the prompt); `MCP_TOOL_TIMEOUT` its run's limit.
    fn serve_mcp(
        &self,
        _: &Invocation<'_>,
        args: &mut Vec<String>,
        served: &host::Served<'_>,
    ) -> std::io::Result<Vec<(String, String)>> {
        let config = serde_json::json!({"mcpServers": {host::SERVER: {
            "type": "stdio", "command": served.command, "args": served.args,
        }}});
        let allowed = format!("mcp__{}", host::SERVER);
        args.splice(
            0..0,
            [
                "--mcp-config".to_owned(),
                config.to_string(),
                "--allowedTools".to_owned(),
                allowed,
            ],
        );
        Ok(vec![(
            "MCP_TOOL_TIMEOUT".to_owned(),
            host::millis(served.timeout).to_string(),
        )])
    }

    /// A stream line saying the API refused the key (`"error":"authentication_failed"`, or a
    /// 401 `api_retry`): Claude Code would retry it ten times over about three minutes.
    fn fatal(&self, line: &str) -> Option<String> {
        if !line.contains("authentication_failed") && !line.contains("\"error_status\":401") {
            return None;
        }
        let line: Value = serde_json::from_str(line).ok()?;
        let refused =
            line["error"] == "authentication_failed" || line["error_status"].as_u64() == Some(401);
        refused.then(|| {
            "the model API refused its credentials (401 authentication_failed); set a valid `ANTHROPIC_API_KEY` (or `ANTHROPIC_AUTH_TOKEN` for a proxy) in `delegate.env` or your environment, or log in with `claude`".to_owned()
        })
    }

    fn parse(&self, stdout: &str, _: &Invocation<'_>) -> std::result::Result<Parsed, String> {
        parse(stdout)
    }
}

/// Claude Code's `--output-format stream-json` (with `--verbose`): a `system`/`init` line with
/// the session id, `assistant` and `user` messages whose content blocks carry `tool_use` and
/// `tool_result`, and a closing `result` line.
fn parse(stdout: &str) -> std::result::Result<Parsed, String> {
    let mut parsed = Parsed::default();
    let mut log = CallLog::default();
    let mut result = None;
    for line in json_lines(stdout, "stream-json")? {
        if let Some(id) = line["session_id"].as_str() {
            parsed.session.get_or_insert_with(|| id.to_owned());
        }
        match line["type"].as_str() {
            Some("assistant") => {
                for block in line["message"]["content"].as_array().into_iter().flatten() {
                    if block["type"] == "tool_use" {
                        log.call(
                            block["id"].as_str().unwrap_or_default().to_owned(),
                            block["name"].as_str().unwrap_or_default().to_owned(),
                            block["input"].clone(),
                        );
                    }
                }
            }
            Some("user") => {
                for block in line["message"]["content"].as_array().into_iter().flatten() {
                    if block["type"] == "tool_result" {
                        log.result(
                            block["tool_use_id"].as_str().unwrap_or_default(),
                            text(&block["content"]),
                            block["is_error"].as_bool().unwrap_or(false),
                        );
                    }
                }
            }
            Some("result") => result = Some(line),
            _ => {}
        }
    }
    let Some(result) = result else {
        return Err("the stream ended without a `result` line (did the CLI crash?)".to_owned());
    };
    if let Some(id) = result["session_id"].as_str() {
        parsed.session = Some(id.to_owned());
    }
    let usage = &result["usage"];
    parsed.usage = Usage {
        input_tokens: count(&usage["input_tokens"])
            + count(&usage["cache_creation_input_tokens"])
            + count(&usage["cache_read_input_tokens"]),
        output_tokens: count(&usage["output_tokens"]),
        cached_input_tokens: count(&usage["cache_read_input_tokens"]),
        ..Usage::default()
    };
    let subtype = result["subtype"].as_str().unwrap_or_default();
    if result["is_error"].as_bool().unwrap_or(false) || subtype != "success" {
        let said = result["result"]
            .as_str()
            .map(str::to_owned)
            .or_else(|| {
                result["errors"]
                    .as_array()
                    .map(|e| text(&Value::Array(e.clone())))
            })
            .unwrap_or_default();
        parsed.error = Some(format!(
            "the run ended in `{subtype}`{}",
            prefixed(": ", &said)
        ));
    }
    parsed.response = result["result"].as_str().unwrap_or_default().to_owned();
    parsed.observed = log.calls;
    Ok(parsed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claude_stream_maps_tools_and_session() {
        let out = concat!(
            r#"{"type":"system","subtype":"init","cwd":"/w","session_id":"s-1","tools":["Write"],"model":"claude-sonnet-4-5"}"#,
            "\n",
            r#"{"type":"assistant","message":{"id":"m1","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"tool_use","id":"toolu_1","name":"Write","input":{"file_path":"/w/a.txt","content":"hi"}}]},"parent_tool_use_id":null,"session_id":"s-1"}"#,
            "\n",
            r#"{"type":"user","message":{"role":"user","content":[{"tool_use_id":"toolu_1","type":"tool_result","content":[{"type":"text","text":"File created"}]}]},"parent_tool_use_id":null,"session_id":"s-1"}"#,
            "\n",
            r#"{"type":"result","subtype":"success","is_error":false,"duration_ms":10,"duration_api_ms":9,"num_turns":2,"result":"Wrote a.txt","session_id":"s-1","total_cost_usd":0.01,"usage":{"input_tokens":5,"cache_read_input_tokens":2,"output_tokens":7}}"#,
            "\n"
        );
        let parsed = parse(out).expect("parses");
        assert_eq!(parsed.session.as_deref(), Some("s-1"));
        assert_eq!(parsed.response, "Wrote a.txt");
        assert_eq!(parsed.observed.len(), 1);
        assert_eq!(parsed.observed[0].name, "Write");
        assert_eq!(parsed.observed[0].content, "File created");
        assert!(!parsed.observed[0].is_error);
        assert_eq!(
            (parsed.usage.input_tokens, parsed.usage.output_tokens),
            (7, 7)
        );
        // Of the input, what the CLI read from the prompt cache.
        assert_eq!(parsed.usage.cached_input_tokens, 2);
        assert!(parse("not json\n").is_err());
        let cut = out.lines().take(2).collect::<Vec<_>>().join("\n");
        assert!(
            parse(&cut)
                .expect_err("no result")
                .contains("without a `result`")
        );
    }
}
