//! `env.get(name, default=None)`, for allow-listed variables only.

use starlark::environment::GlobalsBuilder;
use starlark::eval::Evaluator;
use starlark::starlark_module;
use starlark::values::Value;

use crate::host::Host;

#[starlark_module]
pub(crate) fn members(builder: &mut GlobalsBuilder) {
    /// Returns the environment variable `name`, or `default` when it is unset. Only variables the
    /// host allow-listed (`--allow-env NAME`) may be read; any other name is an error.
    ///
    /// ```python
    /// token = env.get("CI_TOKEN", default = "")
    /// ```
    fn get<'v>(
        #[starlark(require = pos)] name: &str,
        #[starlark(require = named)] default: Option<Value<'v>>,
        eval: &mut Evaluator<'v, '_, '_>,
    ) -> anyhow::Result<Value<'v>> {
        let host = Host::of(eval)?;
        if !host.sandbox.capabilities.env.iter().any(|n| n == name) {
            return Err(host.refuse(format!(
                "env.get: {name:?} is not an allowed variable for {} scripts (allow it with --allow-env {name})",
                host.sandbox.surface.as_str()
            )));
        }
        Ok(match std::env::var(name) {
            Ok(value) => eval.heap().alloc(value),
            Err(_) => default.unwrap_or_else(Value::new_none),
        })
    }
}
