//! The conversation a delegate keeps across turns and attempts, in OpenAI chat terms.

use serde_json::{Map, Value, json};

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
        match self {
            Message::Assistant {
                content,
                tool_calls,
            } => {
                let mut message = Map::new();
                message.insert("role".into(), json!("assistant"));
                message.insert("content".into(), json!(content));
                if !tool_calls.is_empty() {
                    let calls: Vec<Value> = tool_calls
                        .iter()
                        .map(|c| {
                            json!({
                                "id": c.id,
                                "type": "function",
                                "function": {
                                    "name": c.name,
                                    "arguments": Value::Object(c.arguments.clone()).to_string(),
                                },
                            })
                        })
                        .collect();
                    message.insert("tool_calls".into(), Value::Array(calls));
                }
                Value::Object(message)
            }
            Message::Tool {
                call_id, content, ..
            } => json!({"role": "tool", "tool_call_id": call_id, "content": content}),
            other => other.to_script_value(),
        }
    }
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
    /// Returns the spec in the OpenAI `tools` wire format.
    pub fn to_openai(&self) -> Value {
        json!({
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters,
            },
        })
    }
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
}

impl Usage {
    /// Adds another count to this one.
    pub fn add(&mut self, other: Usage) {
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
        self.requests += other.requests;
    }
}
