//! Gemini CLI (`gemini`): `--output-format stream-json --approval-mode auto_edit -p PROMPT`; a
//! retry adds `--resume ID`. The tool log is the stream's `tool_use` / `tool_result` events.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::{
    Adapter, CallLog, Config, Invocation, Parsed, Resume, count, guarded, host, json_lines, owned,
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

    fn write_tools(&self) -> &'static [&'static str] {
        &["write_file", "replace"]
    }

    fn path_keys(&self) -> &'static [&'static str] {
        &["file_path", "absolute_path"]
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

    /// Its private configuration directory (`GEMINI_CLI_HOME`) when it is used, else none.
    fn keeps_own_dir(&self) -> bool {
        true
    }

    /// The workspace trusted (`GEMINI_CLI_TRUST_WORKSPACE`: harness chose it; untrusted, the
    /// CLI exits 55 or drops `auto_edit`), one process (`GEMINI_CLI_NO_RELAUNCH`), and for a
    /// user with an API key but no settings of their own, a private `GEMINI_CLI_HOME` whose
    /// settings select that key (without them Gemini CLI exits 41, "Invalid auth method
    /// selected").
    fn prepare(&self, run: &Invocation<'_>, home: &Path) -> std::io::Result<Vec<(String, String)>> {
        let mut env = vec![
            ("GEMINI_CLI_TRUST_WORKSPACE".to_owned(), "true".to_owned()),
            ("GEMINI_CLI_NO_RELAUNCH".to_owned(), "true".to_owned()),
        ];
        if let Some(private) = private_home(run, home) {
            let settings = private.join(".gemini/settings.json");
            if !settings.exists() {
                std::fs::create_dir_all(private.join(".gemini"))?;
                std::fs::write(
                    &settings,
                    r#"{"security": {"auth": {"selectedType": "gemini-api-key"}}}"#,
                )?;
            }
            env.push(("GEMINI_CLI_HOME".to_owned(), private.display().to_string()));
        }
        Ok(env)
    }

    fn calls_mcp(&self) -> bool {
        true
    }

    /// A system settings file of the run (`GEMINI_CLI_SYSTEM_SETTINGS_PATH`: the highest
    /// scope, so no settings of the user's or the project's can redefine the server): the
    /// system settings in force, when there are any, with the server added, trusted (its calls
    /// need no confirmation) and its timeout the run's limit.
    fn serve_mcp(
        &self,
        run: &Invocation<'_>,
        _: &mut Vec<String>,
        served: &host::Served<'_>,
    ) -> std::io::Result<Vec<(String, String)>> {
        let default = if cfg!(target_os = "macos") {
            "/Library/Application Support/GeminiCli/settings.json"
        } else {
            "/etc/gemini-cli/settings.json"
        };
        let system = run
            .var("GEMINI_CLI_SYSTEM_SETTINGS_PATH")
            .map_or_else(|| PathBuf::from(default), PathBuf::from);
        let mut settings = match std::fs::read_to_string(&system) {
            Ok(text) => serde_json::from_str::<Value>(&text).map_err(|e| {
                std::io::Error::other(format!(
                    "Gemini CLI's system settings {} are not JSON ({e}): fix them, or unset GEMINI_CLI_SYSTEM_SETTINGS_PATH",
                    system.display()
                ))
            })?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => serde_json::json!({}),
            Err(e) => return Err(e),
        };
        if !settings.is_object() {
            settings = serde_json::json!({});
        }
        if !settings["mcpServers"].is_object() {
            settings["mcpServers"] = serde_json::json!({});
        }
        settings["mcpServers"][host::SERVER] = served.entry();
        let path = served.dir.join("gemini-system-settings.json");
        std::fs::write(&path, settings.to_string())?;
        Ok(vec![(
            "GEMINI_CLI_SYSTEM_SETTINGS_PATH".to_owned(),
            path.display().to_string(),
        )])
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

    /// Its error report for a key the API refused (`API_KEY_INVALID`).
    fn fatal(&self, line: &str) -> Option<String> {
        (line.contains("API_KEY_INVALID") || line.contains("API key not valid")).then(|| {
            "the model API refused its credentials (API_KEY_INVALID); set a valid `GEMINI_API_KEY` in `delegate.env` or your environment, or log in with `gemini`".to_owned()
        })
    }

    fn parse(&self, stdout: &str, run: &Invocation<'_>) -> std::result::Result<Parsed, String> {
        let mut parsed = parse(stdout)?;
        // The stream reports no result for most tools (a file written has none): what the model
        // was sent is in the session's file.
        if let Some(session) = &parsed.session {
            let homes = [
                run.own_dir.map(Path::to_path_buf),
                run.var("GEMINI_CLI_HOME").map(PathBuf::from),
                run.var("HOME").map(PathBuf::from),
            ];
            if let Some(results) = homes
                .into_iter()
                .flatten()
                .find_map(|home| session_results(&home, session))
            {
                for call in &mut parsed.observed {
                    if call.content.is_empty()
                        && let Some(result) = results.get(&call.id)
                    {
                        call.content.clone_from(result);
                    }
                }
            }
        }
        // Gemini CLI writes its session file as it goes and may exit before the last write
        // lands (seen under load): say what is known rather than record an empty result.
        for call in &mut parsed.observed {
            if call.content.is_empty() && !call.is_error {
                call.content = "(no output: Gemini CLI reported the call succeeded, and its session file held no result for it)".to_owned();
            }
        }
        Ok(parsed)
    }
}

/// The private configuration directory a run uses: the delegation's own, when the user set no
/// `GEMINI_CLI_HOME`, has no settings of their own and gives an API key.
fn private_home<'a>(run: &Invocation<'a>, home: &Path) -> Option<&'a Path> {
    let keyed = run.var("GEMINI_API_KEY").is_some() || run.var("GOOGLE_API_KEY").is_some();
    let own = run.var("GEMINI_CLI_HOME").is_some() || home.join(".gemini/settings.json").exists();
    if keyed && !own { run.own_dir } else { None }
}

/// What the model was sent for each tool call of `session`, by call id, from the session's file
/// (`.gemini/tmp/PROJECT/chats/session-…-ID8.jsonl` in `home`).
fn session_results(home: &Path, session: &str) -> Option<HashMap<String, String>> {
    let short: String = session.chars().take(8).collect();
    let projects = std::fs::read_dir(home.join(".gemini/tmp")).ok()?;
    let file = projects.flatten().find_map(|project| {
        std::fs::read_dir(project.path().join("chats"))
            .ok()?
            .flatten()
            .map(|entry| entry.path())
            .find(|path| {
                path.file_name().and_then(|n| n.to_str()).is_some_and(|n| {
                    n.starts_with("session-") && n.ends_with(&format!("-{short}.jsonl"))
                })
            })
    })?;
    let lines = std::fs::read_to_string(file).ok()?;
    let mut results = HashMap::new();
    for record in lines
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
    {
        for call in record["toolCalls"].as_array().into_iter().flatten() {
            let response = &call["result"][0]["functionResponse"]["response"];
            let said = match (&response["output"], &response["error"]) {
                (Value::Null, Value::Null) => continue,
                (Value::Null, error) => text(error),
                (output, _) => text(output),
            };
            if let Some(id) = call["id"].as_str() {
                results.insert(id.to_owned(), said);
            }
        }
    }
    Some(results)
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
    parsed.usage.cached_input_tokens = count(&stats["cached"]);
    parsed.observed = log.calls;
    Ok(parsed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_result_gives_the_tokens_with_the_cached_share_of_the_input() {
        let stream = [
            r#"{"type":"init","session_id":"s-1","model":"m"}"#,
            r#"{"type":"message","role":"assistant","content":"Done","delta":true}"#,
            r#"{"type":"result","status":"success","stats":{"total_tokens":1230,"input_tokens":1200,"output_tokens":30,"cached":800,"input":400,"duration_ms":9,"tool_calls":0}}"#,
        ]
        .join("\n");
        let parsed = parse(&stream).expect("parses");
        assert_eq!(parsed.response, "Done");
        let usage = parsed.usage;
        assert_eq!(
            (
                usage.input_tokens,
                usage.cached_input_tokens,
                usage.output_tokens
            ),
            (1200, 800, 30)
        );
    }

    #[test]
    fn a_tool_result_is_read_from_the_sessions_file() {
        let home = tempfile::tempdir().expect("a home");
        let chats = home.path().join(".gemini/tmp/abc123/chats");
        std::fs::create_dir_all(&chats).expect("chats");
        let lines = [
            serde_json::json!({"toolCalls": [{"id": "write_file__call_4", "status": "executing"}]}),
            serde_json::json!({"toolCalls": [{"id": "write_file__call_4", "result": [
                {"functionResponse": {"response": {"output": "Successfully created hello.txt"}}}]}]}),
            serde_json::json!({"toolCalls": [{"id": "read_file__call_5", "result": [
                {"functionResponse": {"response": {"error": "no such file"}}}]}]}),
        ];
        let text: Vec<String> = lines.iter().map(ToString::to_string).collect();
        std::fs::write(
            chats.join("session-2026-11-26T10-00-1a2b3c4d.jsonl"),
            text.join("\n"),
        )
        .expect("the session file");
        let results = session_results(home.path(), "1a2b3c4d-0000-0000").expect("found");
        assert_eq!(
            results.get("write_file__call_4").map(String::as_str),
            Some("Successfully created hello.txt")
        );
        assert_eq!(
            results.get("read_file__call_5").map(String::as_str),
            Some("no such file")
        );
        assert!(session_results(home.path(), "ffffffff-0000").is_none());
    }
}
