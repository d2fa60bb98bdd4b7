//! Delegates: whatever plays the sub-agent. One small trait, one file per kind.
//!
//! The runtime owns the conversation and hands it to the delegate on every turn, so a delegate
//! that is asked again after a failed verification sees its own earlier claim, the tool results
//! and the retry prompt: it is the same conversation, continued.

use std::future::Future;
use std::pin::Pin;

use serde_json::{Map, Value};

use crate::conversation::{Message, ToolSpec, Usage};
use crate::error::Result;

mod agent;
mod anthropic;
mod command;
mod config;
mod openai;
mod scripted;
mod transport;

pub(crate) use agent::binary_path;
pub use agent::{AgentDelegate, AgentKind, AgentSpec};
pub use anthropic::{AnthropicDelegate, AnthropicSpec};
pub use command::{CommandDelegate, CommandSpec};
pub use config::DelegateConfig;
pub(crate) use config::{Materials, RawDelegate};
pub use openai::{OpenAiDelegate, OpenAiSpec};
pub(crate) use openai::{api_key, check_base_url};
pub use scripted::ScriptedDelegate;

/// How much of a program's output goes into an error message.
const RAW_TAIL_BYTES: usize = 2048;

/// The ends of stdout and stderr, for an error message.
pub(crate) fn output_tail(stdout: &str, stderr: &str) -> String {
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

/// The current trace context as a child process's environment (`TRACEPARENT`, `TRACESTATE`), so
/// an agent CLI continues this trace.
/// `HARNESS_PARENT_ID` for the programs run `run_id`'s delegate runs (none for an empty id).
pub(crate) fn parent_env(run_id: &str) -> Option<(String, String)> {
    (!run_id.is_empty()).then(|| ("HARNESS_PARENT_ID".to_owned(), run_id.to_owned()))
}

pub(crate) fn trace_env() -> impl Iterator<Item = (String, String)> {
    crate::telemetry::propagation_fields()
        .into_iter()
        .map(|(name, value)| (name.to_ascii_uppercase(), value))
}

/// How a program that did not succeed ended, in words; `None` when it exited 0.
pub(crate) fn how_it_ended(exit_code: Option<i32>) -> Option<String> {
    match exit_code {
        Some(0) => None,
        Some(code) => Some(format!("exited with code {code}")),
        None => Some("was killed by a signal".to_owned()),
    }
}

/// A boxed future, as returned by [`Delegate::turn`].
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// What the delegate is asked on one turn.
#[derive(Debug, Clone, Copy)]
pub struct TurnRequest<'a> {
    /// The whole conversation so far, the newest message last.
    pub messages: &'a [Message],
    /// The attempt index, from 0.
    pub attempt: u32,
    /// The turn index within the attempt, from 0.
    pub turn: u32,
    /// The tools the delegate may call.
    pub tools: &'a [ToolSpec],
    /// The run the turn belongs to (empty for a critic's review): a program the delegate runs
    /// gets it as `HARNESS_PARENT_ID`, so a delegation it makes (`harness mcp`, `harness run`)
    /// is recorded as this run's child.
    pub run_id: &'a str,
    /// Harness's own tools served to a delegate that runs its own tools, when the delegation
    /// offers them to it (`tools: [delegate]` for an agent CLI): `None` for every other.
    pub host: Option<&'a dyn Host>,
}

/// What serves harness's own tools to a delegate that runs its own tools: an agent CLI offered
/// `tools: [delegate]` reaches them as an MCP server whose calls run in this process — each
/// `delegate` call a child delegation of the run, built, bounded, recorded and linked exactly as
/// a model's call is — through a relay program on a socket only that run's CLI is given.
pub trait Host: Send + Sync + std::fmt::Debug {
    /// The program and arguments that relay an MCP client's standard input and output to a Unix
    /// socket, given as one more argument (`harness mcp --via`).
    fn bridge(&self) -> &[String];
    /// Runs one call through the run's `tool.pre` hooks, the tool and `tool.post`: the call as
    /// it was made (after any hook's modify) and what the delegate reads back.
    ///
    /// # Errors
    /// [`ErrorKind::Hook`](crate::ErrorKind::Hook) when a tool hook is broken: the attempt
    /// fails closed, as it does for a model's call.
    fn call(
        &self,
        call: harness_hooks::ToolCall,
    ) -> BoxFuture<'_, Result<(harness_hooks::ToolCall, crate::tools::ToolOutput)>>;
}

/// A tool call as the delegate asked for it.
#[derive(Debug, Clone, PartialEq)]
pub struct RequestedCall {
    /// The delegate's id for the call; the runtime assigns `call_N` when absent.
    pub id: Option<String>,
    /// The tool's name.
    pub name: String,
    /// The decoded arguments.
    pub arguments: Map<String, Value>,
}

/// A tool call the delegate made and ran itself — an agent CLI's own tools, as its log reports
/// them: recorded in the attempt's `tool_calls` and `tool_results` like the harness's own, but
/// never run (or gated by `tool.pre`) by the harness.
#[derive(Debug, Clone, PartialEq)]
pub struct ObservedCall {
    /// The CLI's id for the call (unique within the attempt).
    pub id: String,
    /// The tool, named as the CLI names it (`Write`, `Bash`, `command_execution`, …).
    pub name: String,
    /// Its input as the CLI reports it.
    pub arguments: Map<String, Value>,
    /// What it returned, as text.
    pub content: String,
    /// True when it failed, was denied, or reported no result.
    pub is_error: bool,
}

/// The delegate's answer on one turn: text, tool calls, or both. An answer without tool calls
/// ends the attempt.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Turn {
    /// Assistant text.
    pub content: Option<String>,
    /// Tool calls to run before the next turn.
    pub tool_calls: Vec<RequestedCall>,
    /// Tokens this turn cost.
    pub usage: Usage,
    /// Why the model stopped (`stop`, `tool_calls`), when it says.
    pub finish_reason: Option<String>,
    /// Tools the delegate already ran itself during this turn, in order (agent CLIs).
    pub observed: Vec<ObservedCall>,
}

/// Something that plays the sub-agent.
pub trait Delegate: Send + Sync {
    /// Returns the delegate's kind: `scripted`, `openai`, `command`, or an agent CLI's
    /// (`claude`, `codex`, `gemini`, `aider`).
    fn kind(&self) -> &'static str;

    /// Returns the model name, when there is one (for spans and reports).
    fn model(&self) -> Option<&str> {
        None
    }

    /// Returns the id of the session the delegate keeps on its side (an agent CLI's session or
    /// thread), once it has one: every retry continues it.
    fn session(&self) -> Option<&str> {
        None
    }

    /// The delegate program's own version, when it reports one (an agent CLI's `--version`).
    fn version(&self) -> Option<&str> {
        None
    }

    /// Produces the next assistant message for the conversation in `request`.
    ///
    /// # Errors
    /// [`ErrorKind::Delegate`](crate::ErrorKind::Delegate) when the provider, model, script or
    /// command fails (after the delegate's own transport retries).
    fn turn<'a>(&'a mut self, request: TurnRequest<'a>) -> BoxFuture<'a, Result<Turn>>;
}
