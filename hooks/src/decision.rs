//! What a hook decides, and how a `modify` patch merges into the payload.

use serde_json::{Map, Value};
use starlark::environment::GlobalsBuilder;
use starlark::starlark_module;
use starlark::values::dict::AllocDict;
use starlark::values::{Heap, Value as StarlarkValue};

/// A hook's decision on one payload.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    /// Let it through unchanged.
    Allow,
    /// Stop: the event's block effect applies (DESIGN §4.4).
    Block {
        /// Why, in words the delegate or operator reads.
        reason: String,
    },
    /// Deep-merge this patch into the payload; later hooks see the merged payload.
    Modify(Map<String, Value>),
}

/// What a hook did with a payload: the kind of its [`Decision`], without the data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Action {
    /// Let it through unchanged.
    Allow,
    /// Stopped it.
    Block,
    /// Changed it.
    Modify,
}

impl Action {
    /// Returns `allow`, `block` or `modify`: the stable name on spans and metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Allow => "allow",
            Action::Block => "block",
            Action::Modify => "modify",
        }
    }
}

impl std::fmt::Display for Action {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Decision {
    /// Returns the decision's action.
    pub fn action(&self) -> Action {
        match self {
            Decision::Allow => Action::Allow,
            Decision::Block { .. } => Action::Block,
            Decision::Modify(_) => Action::Modify,
        }
    }

    /// Reads what `handle` returned: `allow()`, `block(reason)`, `modify(patch)`, the dict form
    /// `{"action": ..., "reason": ..., "payload": ...}`, or None (allow).
    ///
    /// # Errors
    /// A message saying what was returned instead.
    pub fn from_value(value: Value) -> Result<Decision, String> {
        let expected = "return allow(), block(reason), modify(patch), None, or {\"action\": \"allow\"|\"block\"|\"modify\", \"reason\": str, \"payload\": dict}";
        let map = match value {
            Value::Null => return Ok(Decision::Allow),
            Value::Object(map) => map,
            other => return Err(format!("`handle` returned {other}; {expected}")),
        };
        if let Some(key) = map
            .keys()
            .find(|k| !matches!(k.as_str(), "action" | "reason" | "payload"))
        {
            return Err(format!(
                "`handle` returned a dict with unknown key {key:?}; {expected}"
            ));
        }
        let reason = match map.get("reason") {
            None | Some(Value::Null) => String::new(),
            Some(Value::String(s)) => s.clone(),
            Some(other) => return Err(format!("`reason` must be a string, got {other}")),
        };
        match map.get("action").and_then(Value::as_str) {
            Some("allow") => Ok(Decision::Allow),
            Some("block") => Ok(Decision::Block { reason }),
            Some("modify") => match map.get("payload") {
                Some(Value::Object(patch)) => Ok(Decision::Modify(patch.clone())),
                other => Err(format!(
                    "a modify decision needs a dict `payload` (the patch), got {}",
                    other.map_or_else(|| "nothing".to_owned(), Value::to_string)
                )),
            },
            Some(other) => Err(format!("unknown action {other:?}; {expected}")),
            None => Err(format!(
                "`handle` returned a dict without a string `action`; {expected}"
            )),
        }
    }
}

/// Deep-merges `patch` into `target`: objects merge key by key, anything else is replaced.
pub fn merge(target: &mut Value, patch: &Map<String, Value>) {
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    let Value::Object(map) = target else {
        return;
    };
    for (key, value) in patch {
        match (map.get_mut(key), value) {
            (Some(existing @ Value::Object(_)), Value::Object(inner)) => merge(existing, inner),
            _ => {
                map.insert(key.clone(), value.clone());
            }
        }
    }
}

fn decision<'v>(
    heap: Heap<'v>,
    action: &str,
    field: Option<(&'static str, StarlarkValue<'v>)>,
) -> StarlarkValue<'v> {
    let mut entries = vec![("action", heap.alloc(action))];
    entries.extend(field);
    heap.alloc(AllocDict(entries))
}

/// Registers `allow()`, `block(reason)` and `modify(patch)` for hook scripts.
#[starlark_module]
pub(crate) fn decisions(builder: &mut GlobalsBuilder) {
    /// Lets the payload through unchanged.
    ///
    /// ```python
    /// return allow()
    /// ```
    fn allow<'v>(heap: Heap<'v>) -> starlark::Result<StarlarkValue<'v>> {
        Ok(decision(heap, "allow", None))
    }

    /// Blocks: the event's block effect applies and `reason` is reported.
    ///
    /// ```python
    /// return block("writes outside src/ are not allowed")
    /// ```
    fn block<'v>(
        #[starlark(require = pos)] reason: StarlarkValue<'v>,
        heap: Heap<'v>,
    ) -> starlark::Result<StarlarkValue<'v>> {
        Ok(decision(heap, "block", Some(("reason", reason))))
    }

    /// Deep-merges `patch` into the payload; later hooks and the runtime see the result.
    ///
    /// ```python
    /// return modify({"arguments": {"path": "src/" + name}})
    /// ```
    fn modify<'v>(
        #[starlark(require = pos)] patch: StarlarkValue<'v>,
        heap: Heap<'v>,
    ) -> starlark::Result<StarlarkValue<'v>> {
        Ok(decision(heap, "modify", Some(("payload", patch))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn decisions_from_values() {
        assert_eq!(Decision::from_value(json!(null)), Ok(Decision::Allow));
        assert_eq!(
            Decision::from_value(json!({"action": "allow"})),
            Ok(Decision::Allow)
        );
        assert_eq!(
            Decision::from_value(json!({"action": "block", "reason": "no"})),
            Ok(Decision::Block {
                reason: "no".into()
            })
        );
        assert!(matches!(
            Decision::from_value(json!({"action": "modify", "payload": {"a": 1}})),
            Ok(Decision::Modify(_))
        ));
        for bad in [
            json!(true),
            json!("allow"),
            json!({}),
            json!({"action": "permit"}),
            json!({"action": "modify"}),
            json!({"action": "modify", "payload": [1]}),
            json!({"action": "block", "reason": 3}),
            json!({"action": "allow", "extra": 1}),
        ] {
            assert!(Decision::from_value(bad.clone()).is_err(), "{bad}");
        }
    }

    #[test]
    fn merge_is_deep_for_objects_only() {
        let mut target = json!({"a": {"x": 1, "y": 2}, "list": [1, 2], "keep": true});
        let patch = json!({"a": {"y": 3, "z": 4}, "list": [9], "new": "n"});
        merge(&mut target, patch.as_object().expect("object"));
        assert_eq!(
            target,
            json!({"a": {"x": 1, "y": 3, "z": 4}, "list": [9], "keep": true, "new": "n"})
        );
    }
}
