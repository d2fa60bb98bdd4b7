//! The event catalog (DESIGN §4.4) and the shape each event's payload must keep.

use std::fmt;

use serde_json::Value;

/// A point in a delegation's life where hooks run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Event {
    /// Before the delegate starts; the payload is the request.
    DelegationPre,
    /// After each attempt, as part of verification; the payload is the Result.
    DelegationPostVerify,
    /// After verification passed, before the caller gets the Result.
    DelegationPost,
    /// Before a tool call runs; the payload is the call.
    ToolPre,
    /// After a tool call ran; the payload is its result.
    ToolPost,
}

impl Event {
    /// Every event, in lifecycle order.
    pub const ALL: [Event; 5] = [
        Event::DelegationPre,
        Event::DelegationPostVerify,
        Event::DelegationPost,
        Event::ToolPre,
        Event::ToolPost,
    ];

    /// Returns the event's name, e.g. `delegation.post_verify`.
    pub fn as_str(self) -> &'static str {
        match self {
            Event::DelegationPre => "delegation.pre",
            Event::DelegationPostVerify => "delegation.post_verify",
            Event::DelegationPost => "delegation.post",
            Event::ToolPre => "tool.pre",
            Event::ToolPost => "tool.post",
        }
    }

    /// Finds an event by name.
    pub fn from_name(name: &str) -> Option<Event> {
        Event::ALL.into_iter().find(|e| e.as_str() == name)
    }

    /// Returns true for `tool.pre` and `tool.post`.
    pub fn is_tool_event(self) -> bool {
        matches!(self, Event::ToolPre | Event::ToolPost)
    }

    /// Checks that `payload` has this event's shape: the keys it must have, with their types,
    /// and no others.
    ///
    /// # Errors
    /// A message naming the first key that is missing, mistyped or unexpected.
    pub fn check_shape(self, payload: &Value) -> Result<(), String> {
        check_fields(self.fields(), payload, &format!("the {self} payload"))?;
        // The runtime reads these lists back as tool calls, tool results and tool names: a
        // broken entry is this hook's fault and must be reported as such.
        let lists: &[(&str, Option<Event>)] = match self {
            Event::DelegationPre => &[("tools", None)],
            Event::DelegationPostVerify | Event::DelegationPost => &[
                ("tool_calls", Some(Event::ToolPre)),
                ("tool_results", Some(Event::ToolPost)),
            ],
            Event::ToolPre | Event::ToolPost => &[],
        };
        for (key, entries) in lists {
            let list = payload[*key].as_array().map_or(&[][..], Vec::as_slice);
            for (i, entry) in list.iter().enumerate() {
                let subject = format!("the {self} payload's `{key}[{i}]`");
                match entries {
                    Some(event) => check_fields(event.fields(), entry, &subject)?,
                    None if !entry.is_string() => {
                        return Err(format!("{subject} must be a string, got {}", short(entry)));
                    }
                    None => {}
                }
            }
        }
        Ok(())
    }

    /// The keys this event's payload must have, with their types.
    fn fields(self) -> &'static [(&'static str, Kind)] {
        use Kind::{Bool, Int, List, Object, OptList, OptObject, OptString, Str};
        match self {
            Event::DelegationPre => &[
                ("id", Str),
                ("task", Str),
                ("delegate", Object),
                ("tools", List),
                ("args", Object),
                ("max_verify_retries", Int),
            ],
            Event::DelegationPostVerify | Event::DelegationPost => &[
                ("id", Str),
                ("parent_id", OptString),
                ("attempt", Int),
                ("response", Str),
                ("tool_calls", List),
                ("tool_results", List),
                ("changes", OptObject),
                ("evidence", OptList),
            ],
            Event::ToolPre => &[("id", Str), ("name", Str), ("arguments", Object)],
            Event::ToolPost => &[
                ("call_id", Str),
                ("name", Str),
                ("content", Str),
                ("is_error", Bool),
            ],
        }
    }
}

/// Checks that `value` is a dict with exactly `fields`; `subject` names it in the message.
fn check_fields(fields: &[(&str, Kind)], value: &Value, subject: &str) -> Result<(), String> {
    let Value::Object(map) = value else {
        return Err(format!("{subject} must be a dict, got {}", short(value)));
    };
    for (key, kind) in fields {
        let value = map.get(*key).unwrap_or(&Value::Null);
        if !kind.accepts(value) {
            return Err(format!(
                "{subject}'s `{key}` must be {}, got {}",
                kind.describe(),
                short(value)
            ));
        }
    }
    if let Some(extra) = map.keys().find(|k| !fields.iter().any(|(f, _)| f == k)) {
        return Err(format!("{subject} has an unexpected key `{extra}`"));
    }
    Ok(())
}

impl fmt::Display for Event {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Clone, Copy)]
enum Kind {
    Str,
    OptString,
    Int,
    Bool,
    List,
    /// A list, or None / absent.
    OptList,
    Object,
    /// A dict, or None / absent.
    OptObject,
}

impl Kind {
    fn accepts(self, value: &Value) -> bool {
        match self {
            Kind::Str => value.is_string(),
            Kind::OptString => value.is_string() || value.is_null(),
            Kind::Int => value.as_u64().is_some(),
            Kind::Bool => value.is_boolean(),
            Kind::List => value.is_array(),
            Kind::OptList => value.is_array() || value.is_null(),
            Kind::Object => value.is_object(),
            Kind::OptObject => value.is_object() || value.is_null(),
        }
    }

    fn describe(self) -> &'static str {
        match self {
            Kind::Str => "a string",
            Kind::OptString => "a string or None",
            Kind::Int => "a non-negative int",
            Kind::Bool => "a bool",
            Kind::List => "a list",
            Kind::OptList => "a list or None",
            Kind::Object => "a dict",
            Kind::OptObject => "a dict or None",
        }
    }
}

fn short(value: &Value) -> String {
    let text = value.to_string();
    if text.chars().count() > 60 {
        format!("{}...", text.chars().take(60).collect::<String>())
    } else {
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn shapes() {
        let call = json!({"id": "c1", "name": "write_file", "arguments": {}});
        assert!(Event::ToolPre.check_shape(&call).is_ok());
        assert!(
            Event::ToolPre
                .check_shape(&json!({"id": "c1", "name": 3, "arguments": {}}))
                .is_err()
        );
        assert!(
            Event::ToolPre
                .check_shape(&json!({"id": "c1", "name": "x", "arguments": {}, "more": 1}))
                .is_err()
        );
        let result = json!({"id": "d", "parent_id": null, "attempt": 0, "response": "", "tool_calls": [], "tool_results": [], "evidence": []});
        assert!(Event::DelegationPostVerify.check_shape(&result).is_ok());
        let mut changed = result.clone();
        changed["changes"] = json!({"added": ["a"], "modified": [], "deleted": []});
        assert!(Event::DelegationPostVerify.check_shape(&changed).is_ok());
        changed["changes"] = json!(["a"]);
        assert!(Event::DelegationPostVerify.check_shape(&changed).is_err());
        assert!(
            Event::DelegationPost
                .check_shape(&json!({"id": "d"}))
                .is_err()
        );
        let mut bad_call = result.clone();
        bad_call["tool_calls"] = json!([{"id": "c1", "name": "write_file"}]);
        assert!(Event::DelegationPost.check_shape(&bad_call).is_err());
        let mut bad_result = result.clone();
        bad_result["tool_results"] = json!([1]);
        assert!(
            Event::DelegationPostVerify
                .check_shape(&bad_result)
                .is_err()
        );
        let request = json!({"id": "d", "task": "t", "delegate": {}, "tools": ["read_file", 3], "args": {}, "max_verify_retries": 0});
        assert!(Event::DelegationPre.check_shape(&request).is_err());
        for event in Event::ALL {
            assert_eq!(Event::from_name(event.as_str()), Some(event));
        }
    }
}
