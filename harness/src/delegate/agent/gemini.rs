//! Gemini CLI (`gemini`): `--output-format stream-json --approval-mode auto_edit -p PROMPT`; a
//! retry adds `--resume ID`. The tool log is the stream's `tool_use` / `tool_result` events.

use std::path::{Path, PathBuf};

use super::{
    Adapter, CallLog, Config, Invocation, Parsed, Resume, count, guarded, json_lines, owned,
    prefixed, text,
};

/// Google's Gemini CLI.
pub(super) struct Gemini;

impl Adapter for Gemini {
    fn name(&self) -> &'static str {
        "gemini"
    }

    fn install(&self) -> &'static str {
        "npm install -g @google/gemini-cli"
    }

    /// `.gemini` in `GEMINI_CLI_HOME`, else in the user's HOME; its settings (MCP servers,
    /// hooks), memory, commands and extensions guarded.
    fn config(&self, home: &Path, env: &dyn Fn(&str) -> Option<PathBuf>) -> Vec<Config> {
        let dir = env("GEMINI_CLI_HOME")
            .unwrap_or_else(|| home.to_path_buf())
            .join(".gemini");
        let mut config = vec![Config::Dir(dir.clone())];
        config.extend(guarded(
            &dir,
            &["settings.json", "GEMINI.md", "commands", "extensions"],
        ));
        config
    }

    fn args(&self, run: &Invocation<'_>) -> Vec<String> {
        let flags = [
            "--output-format",
            "stream-json",
            "--approval-mode",
            "auto_edit",
        ];
        let prompt = owned(&["-p", run.prompt]);
        run.args(
            owned(&flags),
            run.resuming("--resume"),
            Resume::BeforeArgs,
            prompt,
        )
    }

    fn parse(&self, stdout: &str, _: &Invocation<'_>) -> std::result::Result<Parsed, String> {
        parse(stdout)
    }
}

/// Gemini CLI's `--output-format stream-json`: `init` with the session id, assistant `message`
/// deltas, `tool_use` / `tool_result`, and a closing `result` (or `error` events).
fn parse(stdout: &str) -> std::result::Result<Parsed, String> {
    let mut parsed = Parsed::default();
    let mut log = CallLog::default();
    let mut result = None;
    for line in json_lines(stdout, "stream-json")? {
        match line["type"].as_str() {
            Some("init") => parsed.session = line["session_id"].as_str().map(str::to_owned),
            Some("message") if line["role"] == "assistant" => {
                let content = line["content"].as_str().unwrap_or_default();
                if line["delta"].as_bool().unwrap_or(false) {
                    parsed.response.push_str(content);
                } else {
                    content.clone_into(&mut parsed.response);
                }
            }
            Some("tool_use") => log.call(
                line["tool_id"].as_str().unwrap_or_default().to_owned(),
                line["tool_name"].as_str().unwrap_or_default().to_owned(),
                line["parameters"].clone(),
            ),
            Some("tool_result") => {
                let ok = line["status"] == "success";
                let content = if ok {
                    text(&line["output"])
                } else {
                    text(&line["error"]["message"])
                };
                log.result(line["tool_id"].as_str().unwrap_or_default(), content, !ok);
            }
            Some("error") if line["severity"] == "error" => {
                parsed.error = Some(text(&line["message"]));
            }
            Some("result") => result = Some(line),
            _ => {}
        }
    }
    let Some(result) = result else {
        return Err("the stream ended without a `result` event (did the CLI crash?)".to_owned());
    };
    if result["status"] != "success" {
        parsed.error = Some(format!(
            "the run ended in `{}`{}",
            result["status"].as_str().unwrap_or("error"),
            prefixed(": ", &text(&result["error"]["message"]))
        ));
    }
    let stats = &result["stats"];
    parsed.usage.input_tokens = count(&stats["input_tokens"]);
    parsed.usage.output_tokens = count(&stats["output_tokens"]);
    parsed.observed = log.calls;
    Ok(parsed)
}
