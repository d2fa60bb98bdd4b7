//! The payloads hooks and verifiers see (DESIGN §4.1, §4.2), defined once: the runtime builds
//! them, hooks receive and may modify them, `harness verify` and policy tests read them.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The request as `delegation.pre` hooks see it; a `modify` may change `task`, `tools`, `args`
/// and `max_verify_retries`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Request {
    /// The delegation's id (`d-…`).
    pub id: String,
    /// What the delegate is asked to do.
    pub task: String,
    /// Who does it.
    pub delegate: DelegateInfo,
    /// The tools offered to the delegate.
    pub tools: Vec<String>,
    /// The verifier's `args`.
    pub args: Map<String, Value>,
    /// Retries after a failed verification.
    pub max_verify_retries: u32,
}

/// The delegate of a [`Request`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DelegateInfo {
    /// Its kind: `scripted`, `openai`, `command`, ….
    pub kind: String,
    /// Its model, when it has one.
    pub model: Option<String>,
}

/// One tool call the delegate made.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolCall {
    /// The call's id, unique within the attempt (`call_1`, or the model's own id).
    pub id: String,
    /// The tool's name.
    pub name: String,
    /// The decoded arguments object.
    pub arguments: serde_json::Map<String, serde_json::Value>,
}

/// What one tool call returned.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolResult {
    /// The id of the call this answers.
    pub call_id: String,
    /// The tool's name.
    pub name: String,
    /// The text the delegate saw.
    pub content: String,
    /// True when the tool failed or was refused.
    pub is_error: bool,
}

/// What one delegation attempt produced.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DelegationResult {
    /// The delegation's id (`d-…`).
    pub id: String,
    /// The delegation that issued this one, if any.
    #[serde(default)]
    pub parent_id: Option<String>,
    /// The attempt index, from 0.
    #[serde(default)]
    pub attempt: u32,
    /// The final assistant text of this attempt.
    pub response: String,
    /// This attempt's tool calls, in order.
    #[serde(default)]
    pub tool_calls: Vec<ToolCall>,
    /// This attempt's tool results, in order.
    #[serde(default)]
    pub tool_results: Vec<ToolResult>,
    /// What the delegation has changed in the workspace since its scope baseline, before
    /// attempt 0; absent when no baseline was taken (the delegation has no `scope:`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub changes: Option<Changes>,
    /// The evidence records (DESIGN §4.7) the checks and criteria of this attempt left, in
    /// pipeline order: verifiers and hooks read what the commands found. Absent or `null`
    /// reads as none (Results written before evidence existed).
    #[serde(default, deserialize_with = "null_as_empty")]
    pub evidence: Vec<crate::Evidence>,
}

/// Reads `null` as an empty list.
fn null_as_empty<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<crate::Evidence>, D::Error> {
    Ok(Option::<Vec<crate::Evidence>>::deserialize(d)?.unwrap_or_default())
}

/// Workspace paths (relative, `/`-separated) added, modified and deleted, each sorted.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Changes {
    /// Paths that did not exist at the baseline.
    #[serde(default)]
    pub added: Vec<String>,
    /// Paths whose content or type changed.
    #[serde(default)]
    pub modified: Vec<String>,
    /// Paths that existed at the baseline and no longer do.
    #[serde(default)]
    pub deleted: Vec<String>,
}

impl Changes {
    /// Returns true when nothing changed.
    pub fn is_empty(&self) -> bool {
        self.added.is_empty() && self.modified.is_empty() && self.deleted.is_empty()
    }

    /// Every changed path with what happened to it, sorted by path.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &'static str)> {
        let mut all: Vec<(&str, &'static str)> = self
            .added
            .iter()
            .map(|p| (p.as_str(), "added"))
            .chain(self.modified.iter().map(|p| (p.as_str(), "modified")))
            .chain(self.deleted.iter().map(|p| (p.as_str(), "deleted")))
            .collect();
        all.sort_unstable();
        all.into_iter()
    }
}

impl DelegationResult {
    /// Parses a Result from JSON text; `source` names where it came from in messages.
    ///
    /// # Errors
    /// A message naming `source`, the field, line and column when the text is not a Result.
    pub fn from_json(source: &str, text: &str) -> Result<Self, String> {
        let mut deserializer = serde_json::Deserializer::from_str(text);
        serde_path_to_error::deserialize(&mut deserializer).map_err(|e| {
            let path = e.path().to_string();
            let place = if path == "." { String::new() } else { format!("field `{path}`: ") };
            format!(
                "{source}: not a delegation result: {place}{} (expected an object with `id` and `response`, and optionally `parent_id`, `attempt`, `tool_calls`, `tool_results`, `changes`, `evidence`)",
                e.inner()
            )
        })
    }

    /// Returns the Result as the JSON value scripts receive.
    pub fn to_value(&self) -> serde_json::Value {
        serde_json::to_value(self).expect("a Result always serialises")
    }
}
