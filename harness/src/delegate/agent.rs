//! Agent CLIs as delegates — Claude Code, Codex, Gemini CLI and Aider — each run headless once
//! per attempt and *resumed* on a retry, so the retry prompt reaches the same session that made
//! the claim; where the CLI reports its own tool use, that log becomes the attempt's
//! `tool_calls` and `tool_results`.
//!
//! | kind | first attempt | retry | tool log |
//! |---|---|---|---|
//! | `claude` | `claude -p --output-format stream-json --verbose … PROMPT` | `--resume SESSION` | `tool_use` / `tool_result` blocks |
//! | `codex` | `codex exec --json … PROMPT` | `codex exec --json … resume THREAD PROMPT` | `item.completed` items |
//! | `gemini` | `gemini --output-format stream-json … -p PROMPT` | `--resume SESSION` | `tool_use` / `tool_result` events |
//! | `aider` | `aider --message PROMPT --chat-history-file F …` | `--restore-chat-history` | none (the scope diff is the evidence) |
//!
//! A retry that the CLI does not resume — no session id reported, a different one, a refusal —
//! is a `delegate` error with the CLI's own output, never a fresh session posing as the same
//! delegate.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Map, Value};

use super::{BoxFuture, Delegate, ObservedCall, Turn, TurnRequest};
use crate::conversation::{Message, Usage};
use crate::error::{Error, ErrorKind, Result};

/// Stdout kept from one run (the stream of a long session can be large); the rest is dropped
/// and the run is an error, since a cut stream cannot be read to its end.
const MAX_OUTPUT_BYTES: usize = 32 * 1024 * 1024;
/// How much of the output goes into an error message.
const RAW_TAIL_BYTES: usize = 2048;

/// Which agent CLI a delegate runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AgentKind {
    /// Anthropic's Claude Code (`claude`).
    Claude,
    /// OpenAI's Codex CLI (`codex`).
    Codex,
    /// Google's Gemini CLI (`gemini`).
    Gemini,
    /// Aider (`aider`).
    Aider,
}

impl AgentKind {
    /// Every kind, in the order the docs list them.
    pub const ALL: [AgentKind; 4] = [
        AgentKind::Claude,
        AgentKind::Codex,
        AgentKind::Gemini,
        AgentKind::Aider,
    ];

    /// The kind's name in delegation files, which is also its program's name.
    pub fn name(self) -> &'static str {
        match self {
            AgentKind::Claude => "claude",
            AgentKind::Codex => "codex",
            AgentKind::Gemini => "gemini",
            AgentKind::Aider => "aider",
        }
    }

    /// The kind named `name`.
    pub fn from_name(name: &str) -> Option<AgentKind> {
        AgentKind::ALL.into_iter().find(|k| k.name() == name)
    }

    /// How to install the CLI.
    pub fn install(self) -> &'static str {
        match self {
            AgentKind::Claude => "npm install -g @anthropic-ai/claude-code",
            AgentKind::Codex => "npm install -g @openai/codex",
            AgentKind::Gemini => "npm install -g @google/gemini-cli",
            AgentKind::Aider => "python -m pip install aider-install && aider-install",
        }
    }

    /// The word for its session in messages.
    fn session_word(self) -> &'static str {
        match self {
            AgentKind::Codex => "thread",
            AgentKind::Aider => "chat history",
            _ => "session",
        }
    }
}

/// Settings of an agent CLI delegate.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentSpec {
    /// Which CLI.
    pub kind: AgentKind,
    /// The program: a name looked up on `PATH` (never in the workspace), or a path.
    pub binary: PathBuf,
    /// The model to ask for (`--model`), when not the CLI's default.
    pub model: Option<String>,
    /// Arguments added to every invocation, before the prompt (e.g. Claude's
    /// `--allowedTools`).
    pub args: Vec<String>,
    /// Environment variables set besides the harness's own.
    pub env: Vec<(String, String)>,
    /// How long one run may take; then it is killed with its process group.
    pub timeout: Duration,
    /// The directory it runs in (the workspace root; filled in when the delegation runs).
    pub workdir: PathBuf,
}

/// A delegate that runs an agent CLI per attempt and resumes its session on a retry.
#[derive(Debug)]
pub struct AgentDelegate {
    spec: AgentSpec,
    /// The session (thread) the first run started; every retry resumes it.
    session: Option<String>,
    /// Aider's chat history, kept outside the workspace for the delegation's life.
    history: Option<tempfile::TempDir>,
    /// Runs made so far.
    runs: u32,
}

impl AgentDelegate {
    /// Creates the delegate.
    ///
    /// # Errors
    /// [`ErrorKind::Config`] when the CLI is not installed (naming how to install it).
    pub fn new(spec: AgentSpec) -> Result<Self> {
        let program = spec.binary.to_string_lossy();
        harness_builtins::find_program(&program, &spec.workdir, Some(&spec.workdir)).map_err(
            |e| {
                Error::config(format!(
                    "delegate `{}`: cannot find {program:?}: {e}; install it ({}) or set `delegate.binary` to its path",
                    spec.kind.name(),
                    spec.kind.install()
                ))
            },
        )?;
        let history = match spec.kind {
            AgentKind::Aider => Some(
                tempfile::Builder::new()
                    .prefix("harness-aider-")
                    .tempdir()
                    .map_err(|e| {
                        Error::config(format!(
                            "delegate `aider`: cannot create its chat history directory: {e}"
                        ))
                    })?,
            ),
            _ => None,
        };
        Ok(AgentDelegate {
            spec,
            session: None,
            history,
            runs: 0,
        })
    }

    /// The argv of this run: `prompt` for a new session, or a retry resuming `session`.
    fn argv(&self, prompt: &str, resume: Option<&str>) -> Vec<String> {
        let spec = &self.spec;
        let mut argv = vec![spec.binary.to_string_lossy().into_owned()];
        let model = |argv: &mut Vec<String>, flag: &str| {
            if let Some(model) = &spec.model {
                argv.extend([flag.to_owned(), model.clone()]);
            }
        };
        match spec.kind {
            AgentKind::Claude => {
                argv.extend(
                    [
                        "-p",
                        "--output-format",
                        "stream-json",
                        "--verbose",
                        "--permission-mode",
                        "acceptEdits",
                    ]
                    .map(str::to_owned),
                );
                model(&mut argv, "--model");
                if let Some(id) = resume {
                    argv.extend(["--resume".to_owned(), id.to_owned()]);
                }
                argv.extend(spec.args.iter().cloned());
                argv.push(prompt.to_owned());
            }
            AgentKind::Codex => {
                argv.extend(
                    [
                        "exec",
                        "--json",
                        "--skip-git-repo-check",
                        "--sandbox",
                        "workspace-write",
                    ]
                    .map(str::to_owned),
                );
                model(&mut argv, "--model");
                argv.extend(spec.args.iter().cloned());
                if let Some(id) = resume {
                    argv.extend(["resume".to_owned(), id.to_owned()]);
                }
                argv.push(prompt.to_owned());
            }
            AgentKind::Gemini => {
                argv.extend(
                    [
                        "--output-format",
                        "stream-json",
                        "--approval-mode",
                        "auto_edit",
                    ]
                    .map(str::to_owned),
                );
                model(&mut argv, "--model");
                if let Some(id) = resume {
                    argv.extend(["--resume".to_owned(), id.to_owned()]);
                }
                argv.extend(spec.args.iter().cloned());
                argv.extend(["-p".to_owned(), prompt.to_owned()]);
            }
            AgentKind::Aider => {
                let dir = self
                    .history
                    .as_ref()
                    .map_or_else(PathBuf::new, |d| d.path().to_path_buf());
                argv.extend(
                    [
                        "--yes-always",
                        "--no-pretty",
                        "--no-stream",
                        "--no-auto-commits",
                        "--no-check-update",
                        "--no-show-release-notes",
                    ]
                    .map(str::to_owned),
                );
                argv.push("--chat-history-file".to_owned());
                argv.push(dir.join("chat.md").display().to_string());
                argv.push("--input-history-file".to_owned());
                argv.push(dir.join("input.txt").display().to_string());
                if resume.is_some() {
                    argv.push("--restore-chat-history".to_owned());
                }
                model(&mut argv, "--model");
                argv.extend(spec.args.iter().cloned());
                argv.extend(["--message".to_owned(), prompt.to_owned()]);
            }
        }
        argv
    }

    async fn run(&mut self, prompt: &str, attempt: u32) -> Result<Turn> {
        let kind = self.spec.kind;
        let name = kind.name();
        let resume = match (&self.session, self.runs) {
            (Some(id), _) => Some(id.clone()),
            (None, 0) => None,
            (None, _) => {
                return Err(Error::new(
                    ErrorKind::Delegate,
                    format!(
                        "delegate `{name}`: attempt {} must resume the {} of attempt 1, but none was recorded; refusing to start a fresh one as the same delegate",
                        attempt + 1,
                        kind.session_word()
                    ),
                ));
            }
        };
        let argv = self.argv(prompt, resume.as_deref());
        let mut env = self.spec.env.clone();
        // The agent CLI continues this trace (W3C `TRACEPARENT`/`TRACESTATE`).
        for (key, value) in crate::telemetry::propagation_fields() {
            env.push((key.to_ascii_uppercase(), value));
        }
        let launch = harness_builtins::Launch {
            cwd: &self.spec.workdir,
            env: &env,
            home: None,
            hidden: Some(&self.spec.workdir),
            timeout: self.spec.timeout,
            cap: MAX_OUTPUT_BYTES,
            isolation: None,
            inherit_env: true,
        };
        self.runs += 1;
        let run = harness_builtins::run_program(&argv, &launch)
            .await
            .map_err(|e| {
                Error::new(
                    ErrorKind::Delegate,
                    format!("delegate `{name}`: cannot start {:?}: {e}", argv[0]),
                )
            })?;
        let fail = |what: String| {
            Error::new(
                ErrorKind::Delegate,
                format!(
                    "delegate `{name}`: {what}{}",
                    raw_tail(&run.stdout, &run.stderr)
                ),
            )
        };
        if run.timed_out {
            return Err(fail(format!(
                "timed out after {}s and was killed with its process group (raise `delegate.timeout_s` if the agent needs longer)",
                self.spec.timeout.as_secs_f64()
            )));
        }
        let parsed = match kind {
            AgentKind::Claude => parse_claude(&run.stdout),
            AgentKind::Codex => parse_codex(&run.stdout),
            AgentKind::Gemini => parse_gemini(&run.stdout),
            AgentKind::Aider => Ok(Parsed {
                response: run.stdout.trim_end().to_owned(),
                session: self
                    .history
                    .as_ref()
                    .map(|d| d.path().join("chat.md").display().to_string()),
                ..Parsed::default()
            }),
        };
        let exit = match run.exit_code {
            Some(0) => None,
            Some(code) => Some(format!("exited with code {code}")),
            None => Some("was killed by a signal".to_owned()),
        };
        let parsed = match (parsed, exit) {
            (Ok(parsed), None) => parsed,
            // The CLI's own words first: an error it reported in its stream, else how it exited.
            (Ok(parsed), Some(exit)) => {
                let said = parsed.error.unwrap_or_default();
                return Err(fail(format!("{exit}{}", prefixed(": ", &said))));
            }
            (Err(why), Some(exit)) => return Err(fail(format!("{exit}; {why}"))),
            (Err(why), None) => return Err(fail(why)),
        };
        if let Some(error) = parsed.error {
            return Err(fail(error));
        }
        let Some(session) = parsed.session else {
            return Err(fail(format!(
                "the output names no {} id, so a retry could not continue it",
                kind.session_word()
            )));
        };
        if let Some(expected) = &resume {
            if *expected != session {
                return Err(fail(format!(
                    "asked to resume {} {expected}, the CLI reported {session}: it did not continue the same {}",
                    kind.session_word(),
                    kind.session_word()
                )));
            }
        }
        self.session = Some(session);
        Ok(Turn {
            content: Some(parsed.response),
            tool_calls: Vec::new(),
            usage: Usage {
                requests: 1,
                ..parsed.usage
            },
            finish_reason: Some("stop".to_owned()),
            observed: parsed.observed,
        })
    }
}

/// `prefix` then `text`, or nothing when `text` is empty.
fn prefixed(prefix: &str, text: &str) -> String {
    if text.trim().is_empty() {
        String::new()
    } else {
        format!("{prefix}{}", text.trim())
    }
}

/// The ends of stdout and stderr, for an error message.
fn raw_tail(stdout: &str, stderr: &str) -> String {
    let tail = |text: &str| {
        let text = text.trim();
        let mut start = text.len().saturating_sub(RAW_TAIL_BYTES);
        while !text.is_char_boundary(start) {
            start += 1;
        }
        let cut = if start > 0 { "…" } else { "" };
        format!("{cut}{}", &text[start..])
    };
    let mut out = String::new();
    if !stdout.trim().is_empty() {
        out.push_str(&format!("\nstdout ends with:\n{}", tail(stdout)));
    }
    if !stderr.trim().is_empty() {
        out.push_str(&format!("\nstderr ends with:\n{}", tail(stderr)));
    }
    out
}

/// What one run's output says.
#[derive(Debug, Default)]
struct Parsed {
    response: String,
    session: Option<String>,
    observed: Vec<ObservedCall>,
    usage: Usage,
    /// A failure the CLI reported in its own output.
    error: Option<String>,
}

/// Reads JSON lines; a line that is not JSON is the CLI's output changing under us (an upgrade,
/// a crash mid-stream), reported with its line number.
fn json_lines(stdout: &str, format: &str) -> std::result::Result<Vec<Value>, String> {
    stdout
        .lines()
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty())
        .map(|(i, line)| {
            serde_json::from_str::<Value>(line).map_err(|e| {
                format!(
                    "line {} of its output is not {format} ({e}); the CLI's output format may have changed",
                    i + 1
                )
            })
        })
        .collect()
}

fn text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        // Claude's tool results may be a list of content blocks.
        Value::Array(blocks) => blocks
            .iter()
            .map(|b| match b {
                Value::Object(block) => block
                    .get("text")
                    .and_then(Value::as_str)
                    .map_or_else(|| b.to_string(), str::to_owned),
                other => text(other),
            })
            .collect::<Vec<_>>()
            .join("\n"),
        other => other.to_string(),
    }
}

fn count(value: &Value) -> u64 {
    value.as_u64().unwrap_or(0)
}

/// Tool calls in the order they were made, answered by id as results arrive.
#[derive(Default)]
struct CallLog {
    calls: Vec<ObservedCall>,
    index: HashMap<String, usize>,
}

impl CallLog {
    fn call(&mut self, id: String, name: String, arguments: Value) {
        let arguments = match arguments {
            Value::Object(map) => map,
            Value::Null => Map::new(),
            other => Map::from_iter([("input".to_owned(), other)]),
        };
        // Ids are the CLI's; one reused within the run gets a suffix, so every call keeps
        // exactly one result.
        let mut unique = id.clone();
        let mut n = 1;
        while self.index.contains_key(&unique) {
            n += 1;
            unique = format!("{id}#{n}");
        }
        self.index.insert(id, self.calls.len());
        self.calls.push(ObservedCall {
            id: unique,
            name,
            arguments,
            content: "(the CLI reported no result for this call)".to_owned(),
            is_error: true,
        });
    }

    fn result(&mut self, id: &str, content: String, is_error: bool) {
        if let Some(call) = self.index.get(id).and_then(|&i| self.calls.get_mut(i)) {
            call.content = content;
            call.is_error = is_error;
        }
    }
}

/// Claude Code's `--output-format stream-json` (with `--verbose`): a `system`/`init` line with
/// the session id, `assistant` and `user` messages whose content blocks carry `tool_use` and
/// `tool_result`, and a closing `result` line.
fn parse_claude(stdout: &str) -> std::result::Result<Parsed, String> {
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

/// Codex's `exec --json`: `thread.started` with the thread id, `item.completed` items (the agent's
/// messages, commands it ran, file changes, MCP tool calls), `turn.completed` with usage, or
/// `turn.failed` / `error`.
fn parse_codex(stdout: &str) -> std::result::Result<Parsed, String> {
    let mut parsed = Parsed::default();
    let mut log = CallLog::default();
    let mut completed = false;
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
                match kind {
                    "agent_message" => {
                        parsed.response = item["text"].as_str().unwrap_or_default().to_owned();
                    }
                    "command_execution" => {
                        log.call(
                            id.clone(),
                            kind.to_owned(),
                            serde_json::json!({"command": item["command"]}),
                        );
                        let failed = status != "completed" || item["exit_code"].as_i64() != Some(0);
                        log.result(&id, text(&item["aggregated_output"]), failed);
                    }
                    "file_change" => {
                        log.call(
                            id.clone(),
                            kind.to_owned(),
                            serde_json::json!({"changes": item["changes"]}),
                        );
                        log.result(&id, status.to_owned(), status != "completed");
                    }
                    "mcp_tool_call" => {
                        log.call(
                            id.clone(),
                            kind.to_owned(),
                            serde_json::json!({"server": item["server"], "tool": item["tool"], "arguments": item["arguments"]}),
                        );
                        let content = match &item["error"] {
                            Value::Null => text(&item["result"]["content"]),
                            error => text(&error["message"]),
                        };
                        log.result(&id, content, status != "completed");
                    }
                    "web_search" => {
                        log.call(
                            id.clone(),
                            kind.to_owned(),
                            serde_json::json!({"query": item["query"]}),
                        );
                        log.result(&id, "searched".to_owned(), false);
                    }
                    _ => {}
                }
            }
            Some("turn.completed") => {
                completed = true;
                let usage = &line["usage"];
                parsed.usage.input_tokens += count(&usage["input_tokens"]);
                parsed.usage.output_tokens += count(&usage["output_tokens"]);
            }
            Some("turn.failed") => {
                parsed.error = Some(format!(
                    "the turn failed: {}",
                    line["error"]["message"].as_str().unwrap_or("(no message)")
                ));
            }
            Some("error") => {
                parsed.error = Some(
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
        return Err("the stream ended without `turn.completed` (did the CLI crash?)".to_owned());
    }
    parsed.observed = log.calls;
    Ok(parsed)
}

/// Gemini CLI's `--output-format stream-json`: `init` with the session id, assistant `message`
/// deltas, `tool_use` / `tool_result`, and a closing `result` (or `error` events).
fn parse_gemini(stdout: &str) -> std::result::Result<Parsed, String> {
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

/// The prompt of this run: the task on the first attempt; on a retry only the retry prompt,
/// since the resumed session already holds the task and its own earlier claim.
fn prompt(messages: &[Message], resuming: bool) -> Option<String> {
    let mut users = messages.iter().filter_map(|m| match m {
        Message::User(text) => Some(text.as_str()),
        _ => None,
    });
    let first = users.next()?;
    Some(if resuming {
        users.next_back().unwrap_or(first).to_owned()
    } else {
        first.to_owned()
    })
}

impl Delegate for AgentDelegate {
    fn kind(&self) -> &'static str {
        self.spec.kind.name()
    }

    fn model(&self) -> Option<&str> {
        self.spec.model.as_deref()
    }

    fn session(&self) -> Option<&str> {
        self.session.as_deref()
    }

    fn turn<'a>(&'a mut self, request: TurnRequest<'a>) -> BoxFuture<'a, Result<Turn>> {
        Box::pin(async move {
            let Some(prompt) = prompt(request.messages, self.runs > 0) else {
                return Err(Error::new(
                    ErrorKind::Delegate,
                    format!(
                        "delegate `{}`: the conversation has no user message to send as the prompt",
                        self.spec.kind.name()
                    ),
                ));
            };
            self.run(&prompt, request.attempt).await
        })
    }
}

/// Whether `path` names a program by path (resolved against the delegation file) rather than a
/// name looked up on `PATH`.
pub(crate) fn binary_path(base: &Path, binary: &str) -> PathBuf {
    if binary.contains('/') {
        base.join(binary)
    } else {
        PathBuf::from(binary)
    }
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
        let parsed = parse_claude(out).expect("parses");
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
        assert!(parse_claude("not json\n").is_err());
        let cut = out.lines().take(2).collect::<Vec<_>>().join("\n");
        assert!(
            parse_claude(&cut)
                .expect_err("no result")
                .contains("without a `result`")
        );
    }

    #[test]
    fn a_call_without_a_result_is_an_error_result() {
        let mut log = CallLog::default();
        log.call("a".into(), "Bash".into(), Value::Null);
        log.result("a", "ok".into(), false);
        log.call("a".into(), "Bash".into(), Value::Null);
        assert_eq!(log.calls[1].id, "a#2");
        assert!(!log.calls[0].is_error);
        assert!(log.calls[1].is_error);
    }
}
