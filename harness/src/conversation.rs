//! The conversation a delegate keeps across turns and attempts, in OpenAI chat terms.

use serde::Serialize;
use serde_json::{Value, json};

use harness_hooks::ToolCall;

/// One chat message.
#[derive(Debug, Clone, PartialEq)]
pub enum Message {
    /// Instructions from the harness.
    System(String),
    /// The task, or a retry prompt.
    User(String),
    /// What the delegate said and which tools it called.
    Assistant {
        /// Text, if any.
        content: Option<String>,
        /// Tool calls, if any.
        tool_calls: Vec<ToolCall>,
    },
    /// A tool's answer to one call.
    Tool {
        /// The call this answers.
        call_id: String,
        /// The tool's name.
        name: String,
        /// What the tool returned (or why it failed).
        content: String,
    },
}

impl Message {
    /// Returns the message as a script sees it: OpenAI's shape with `arguments` decoded:
    /// `{"role": "assistant", "content": ..., "tool_calls": [{"id", "name", "arguments": {...}}]}`
    /// and `{"role": "tool", "tool_call_id", "name", "content"}`.
    pub fn to_script_value(&self) -> Value {
        match self {
            Message::System(content) => json!({"role": "system", "content": content}),
            Message::User(content) => json!({"role": "user", "content": content}),
            Message::Assistant {
                content,
                tool_calls,
            } => json!({
                "role": "assistant",
                "content": content,
                "tool_calls": tool_calls
                    .iter()
                    .map(|c| json!({"id": c.id, "name": c.name, "arguments": c.arguments}))
                    .collect::<Vec<_>>(),
            }),
            Message::Tool {
                call_id,
                name,
                content,
            } => json!({"role": "tool", "tool_call_id": call_id, "name": name, "content": content}),
        }
    }

    /// Returns the message in the OpenAI chat-completions wire format (`arguments` as a JSON
    /// string, `tool_calls` omitted when empty).
    pub fn to_openai(&self) -> Value {
        serde_json::to_value(self.wire()).expect("a message always serialises")
    }

    /// The message as the OpenAI chat-completions wire format has it, borrowed, for a request
    /// body serialised without building a JSON tree first.
    pub(crate) fn wire(&self) -> WireMessage<'_> {
        match self {
            Message::System(content) => WireMessage::System { content },
            Message::User(content) => WireMessage::User { content },
            Message::Assistant {
                content,
                tool_calls,
            } => WireMessage::Assistant {
                content: content.as_deref(),
                tool_calls: tool_calls
                    .iter()
                    .map(|c| WireCall {
                        id: &c.id,
                        kind: "function",
                        function: WireFunction {
                            name: &c.name,
                            arguments: serde_json::to_string(&c.arguments)
                                .expect("arguments always serialise"),
                        },
                    })
                    .collect(),
            },
            Message::Tool {
                call_id, content, ..
            } => WireMessage::Tool {
                tool_call_id: call_id,
                content,
            },
        }
    }
}

/// One chat message on the OpenAI wire.
#[derive(Debug, Serialize)]
#[serde(tag = "role", rename_all = "lowercase")]
pub(crate) enum WireMessage<'a> {
    System {
        content: &'a str,
    },
    User {
        content: &'a str,
    },
    Assistant {
        content: Option<&'a str>,
        #[serde(skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<WireCall<'a>>,
    },
    Tool {
        tool_call_id: &'a str,
        content: &'a str,
    },
}

/// A tool call on the OpenAI wire: its arguments as a JSON string.
#[derive(Debug, Serialize)]
pub(crate) struct WireCall<'a> {
    id: &'a str,
    #[serde(rename = "type")]
    kind: &'static str,
    function: WireFunction<'a>,
}

#[derive(Debug, Serialize)]
struct WireFunction<'a> {
    name: &'a str,
    arguments: String,
}

/// The description of one tool offered to a delegate.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolSpec {
    /// The tool's name.
    pub name: String,
    /// What it does, for the model.
    pub description: String,
    /// JSON Schema of its arguments object.
    pub parameters: Value,
}

impl ToolSpec {
    /// The tool as the OpenAI wire has it, borrowed.
    pub(crate) fn wire(&self) -> WireTool<'_> {
        WireTool {
            kind: "function",
            function: WireToolFunction {
                name: &self.name,
                description: &self.description,
                parameters: &self.parameters,
            },
        }
    }
}

/// A tool offered on the OpenAI wire.
#[derive(Debug, Serialize)]
pub(crate) struct WireTool<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    function: WireToolFunction<'a>,
}

#[derive(Debug, Serialize)]
struct WireToolFunction<'a> {
    name: &'a str,
    description: &'a str,
    parameters: &'a Value,
}

/// Token counts of model calls.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Usage {
    /// Prompt tokens.
    pub input_tokens: u64,
    /// Completion tokens.
    pub output_tokens: u64,
    /// Model calls made.
    pub requests: u64,
    /// Of the input tokens, those the provider read from its prompt cache (OpenAI's
    /// `prompt_tokens_details.cached_tokens`, Anthropic's and Claude Code's
    /// `cache_read_input_tokens`, Codex's `cached_input_tokens`, Gemini CLI's `cached`); 0 when
    /// it does not say. They are counted in `input_tokens` too.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cached_input_tokens: u64,
}

/// For `skip_serializing_if`: a count of none is not written.
#[allow(clippy::trivially_copy_pass_by_ref)]
pub(crate) fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl Usage {
    /// Adds another count to this one.
    pub fn add(&mut self, other: Usage) {
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
        self.requests += other.requests;
        self.cached_input_tokens += other.cached_input_tokens;
    }
}
