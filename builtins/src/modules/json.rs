//! `json.encode(v)` and `json.decode(s, default=...)`.

use starlark::environment::GlobalsBuilder;
use starlark::eval::Evaluator;
use starlark::starlark_module;
use starlark::values::Value;

use crate::host::Host;
use crate::json_value::{alloc_json, check_json};

#[starlark_module]
pub(crate) fn members(builder: &mut GlobalsBuilder) {
    /// Encodes a value (None, bool, int, float, string, list, tuple, dict with string keys) as
    /// compact JSON.
    ///
    /// ```python
    /// json.encode({"verified": True, "reason": ""}) == '{"verified":true,"reason":""}'
    /// ```
    fn encode(#[starlark(require = pos)] x: Value, eval: &mut Evaluator) -> anyhow::Result<String> {
        Host::of(eval)?.check_value("json.encode", x)?;
        x.to_json().map_err(|e| anyhow::anyhow!("json.encode: {e}"))
    }

    /// Decodes a JSON string. With `default` given, invalid JSON returns `default` instead of
    /// failing, which makes shape checks one line.
    ///
    /// ```python
    /// doc = json.decode(result["response"], default = None)
    /// if doc == None:
    ///     return {"verified": False, "reason": "the answer is not JSON"}
    /// ```
    fn decode<'v>(
        #[starlark(require = pos)] s: &str,
        #[starlark(require = named)] default: Option<Value<'v>>,
        eval: &mut Evaluator<'v, '_, '_>,
    ) -> anyhow::Result<Value<'v>> {
        let parsed = serde_json::from_str::<serde_json::Value>(s)
            .map_err(|e| e.to_string())
            .and_then(|v| check_json(&v).map(|()| v));
        match (parsed, default) {
            (Ok(v), _) => Ok(alloc_json(eval.heap(), &v)),
            (Err(_), Some(default)) => Ok(default),
            (Err(e), None) => Err(anyhow::anyhow!("json.decode: invalid JSON: {e}")),
        }
    }
}
