//! The `scripted` delegate: a Starlark script plays the model. Offline, deterministic, and a
//! lying delegate is one line.

use std::sync::Arc;

use harness_builtins::{Sandbox, Script};
use serde_json::{Map, Value, json};

use super::{BoxFuture, Delegate, RequestedCall, Turn, TurnRequest};
use crate::conversation::Usage;
use crate::error::{Error, ErrorKind, Result};

/// A delegate whose answers come from `def respond(request)` in a Starlark script.
///
/// `request` is `{"messages": [...], "attempt": n, "turn": k, "tools": [names]}` with messages
/// in OpenAI's shape (tool-call `arguments` decoded). `respond` returns
/// `{"content": "..."}`, `{"tool_calls": [{"name": ..., "arguments": {...}}]}`, both, or a bare
/// string (the content).
#[derive(Debug, Clone)]
pub struct ScriptedDelegate {
    script: Arc<Script>,
    sandbox: Arc<Sandbox>,
}

impl ScriptedDelegate {
    /// Creates the delegate from a compiled script that defines `respond`.
    ///
    /// # Errors
    /// [`ErrorKind::Config`] when the script does not define `respond`.
    pub fn new(script: Arc<Script>, sandbox: Arc<Sandbox>) -> Result<Self> {
        if !script.defines("respond") {
            return Err(Error::config(format!(
                "delegate script {}: does not define `respond` (add `def respond(request):` returning {{\"content\": ...}} or {{\"tool_calls\": [...]}})",
                script.name()
            )));
        }
        Ok(ScriptedDelegate { script, sandbox })
    }

    fn respond_blocking(&self, request: &Value) -> Result<Turn> {
        let name = self.script.name();
        let output = self
            .script
            .call(&self.sandbox, "respond", &[request])
            .map_err(|e| {
                Error::new(
                    ErrorKind::Delegate,
                    format!("delegate script {e} [{}]", e.kind().as_str()),
                )
            })?;
        parse_turn(name, output.value)
    }
}

fn parse_turn(name: &str, value: Value) -> Result<Turn> {
    let bad = |what: String| {
        Error::new(
            ErrorKind::Delegate,
            format!(
                "delegate script {name}: `respond` returned {what}; return {{\"content\": str}}, {{\"tool_calls\": [{{\"name\": str, \"arguments\": dict}}]}}, or both"
            ),
        )
    };
    let object = match value {
        Value::String(content) => {
            return Ok(Turn {
                content: Some(content),
                usage: Usage {
                    requests: 1,
                    ..Usage::default()
                },
                ..Turn::default()
            });
        }
        Value::Object(map) => map,
        other => return Err(bad(format!("{other}"))),
    };
    if let Some(key) = object
        .keys()
        .find(|k| !matches!(k.as_str(), "content" | "tool_calls"))
    {
        return Err(bad(format!("a dict with unknown key {key:?}")));
    }
    let content = match object.get("content") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(other) => return Err(bad(format!("content = {other}"))),
    };
    let mut tool_calls = Vec::new();
    match object.get("tool_calls") {
        None | Some(Value::Null) => {}
        Some(Value::Array(calls)) => {
            for call in calls {
                let Value::Object(call) = call else {
                    return Err(bad(format!("a tool call that is not a dict: {call}")));
                };
                if let Some(key) = call
                    .keys()
                    .find(|k| !matches!(k.as_str(), "id" | "name" | "arguments"))
                {
                    return Err(bad(format!("a tool call with unknown key {key:?}")));
                }
                let Some(Value::String(tool)) = call.get("name") else {
                    return Err(bad("a tool call without a string `name`".to_owned()));
                };
                let arguments = match call.get("arguments") {
                    None | Some(Value::Null) => Map::new(),
                    Some(Value::Object(args)) => args.clone(),
                    Some(other) => return Err(bad(format!("tool call arguments = {other}"))),
                };
                let id = match call.get("id") {
                    None | Some(Value::Null) => None,
                    Some(Value::String(id)) => Some(id.clone()),
                    Some(other) => return Err(bad(format!("tool call id = {other}"))),
                };
                tool_calls.push(RequestedCall {
                    id,
                    name: tool.clone(),
                    arguments,
                });
            }
        }
        Some(other) => return Err(bad(format!("tool_calls = {other}"))),
    }
    if content.is_none() && tool_calls.is_empty() {
        return Err(bad("neither content nor tool calls".to_owned()));
    }
    let finish_reason = if tool_calls.is_empty() {
        "stop"
    } else {
        "tool_calls"
    };
    Ok(Turn {
        content,
        tool_calls,
        usage: Usage {
            requests: 1,
            ..Usage::default()
        },
        finish_reason: Some(finish_reason.to_owned()),
        observed: Vec::new(),
    })
}

impl Delegate for ScriptedDelegate {
    fn kind(&self) -> &'static str {
        "scripted"
    }

    fn turn<'a>(&'a mut self, request: TurnRequest<'a>) -> BoxFuture<'a, Result<Turn>> {
        let value = json!({
            "messages": request.messages.iter().map(|m| m.to_script_value()).collect::<Vec<_>>(),
            "attempt": request.attempt,
            "turn": request.turn,
            "tools": request.tools.iter().map(|t| t.name.clone()).collect::<Vec<_>>(),
        });
        // Scripted delegates are usually tiny and pure: answer inline when that is cheap.
        match self.script.call_inline(&self.sandbox, "respond", &[&value]) {
            Ok(output) => {
                let turn = parse_turn(self.script.name(), output.value);
                return Box::pin(async move { turn });
            }
            Err(e) if e.kind() == harness_builtins::ErrorKind::WouldBlock => {}
            Err(e) => {
                let error = Error::new(
                    ErrorKind::Delegate,
                    format!("delegate script {e} [{}]", e.kind().as_str()),
                );
                return Box::pin(async move { Err(error) });
            }
        }
        let this = self.clone();
        let span = tracing::Span::current();
        Box::pin(async move {
            tokio::task::spawn_blocking(move || span.in_scope(|| this.respond_blocking(&value)))
                .await
                .map_err(|e| Error::new(ErrorKind::Delegate, format!("delegate script: {e}")))?
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn turn_shapes() {
        let ok = [
            json!("Done"),
            json!({"content": "Done"}),
            json!({"tool_calls": [{"name": "write_file", "arguments": {"path": "a"}}]}),
            json!({"content": "writing", "tool_calls": [{"name": "list_files"}]}),
        ];
        for value in ok {
            assert!(parse_turn("a.star", value.clone()).is_ok(), "{value}");
        }
        let bad = [
            json!(null),
            json!(3),
            json!({}),
            json!({"content": 3}),
            json!({"contents": "typo"}),
            json!({"tool_calls": [{"arguments": {}}]}),
            json!({"tool_calls": [{"name": "x", "arguments": "{}"}]}),
            json!({"tool_calls": "x"}),
        ];
        for value in bad {
            let err = parse_turn("a.star", value.clone()).expect_err(&value.to_string());
            assert_eq!(err.kind(), ErrorKind::Delegate);
        }
    }
}
