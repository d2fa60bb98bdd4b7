//! `log(msg)` and `print(...)`: a line of script output that becomes an event on the current
//! span; `str` and `repr`, bounded: Starlark's own would recurse without limit into a deeply
//! nested value and overflow the stack.

use starlark::environment::GlobalsBuilder;
use starlark::eval::Evaluator;
use starlark::starlark_module;
use starlark::values::none::NoneType;
use starlark::values::string::StarlarkStr;
use starlark::values::tuple::UnpackTuple;
use starlark::values::{StringValue, Value};

use crate::host::Host;

#[starlark_module]
pub(crate) fn globals(builder: &mut GlobalsBuilder) {
    /// Records a line of output; it becomes an event on the current span and is shown by
    /// `harness verify`.
    ///
    /// ```python
    /// log("checked %d files" % len(files))
    /// ```
    fn log(
        #[starlark(require = pos)] msg: Value,
        eval: &mut Evaluator,
    ) -> anyhow::Result<NoneType> {
        let host = Host::of(eval)?;
        let line = match msg.unpack_str() {
            Some(s) => s.to_owned(),
            None => {
                host.check_value("log", msg)?;
                msg.to_str()
            }
        };
        host.log(line);
        Ok(NoneType)
    }

    /// Prints its arguments, separated by spaces, as one line of script output (as `log`).
    ///
    /// ```python
    /// print("checked", 3, "files")
    /// ```
    fn print(
        #[starlark(args)] args: UnpackTuple<Value>,
        eval: &mut Evaluator,
    ) -> anyhow::Result<NoneType> {
        let host = Host::of(eval)?;
        let mut line = String::new();
        for (i, value) in args.items.iter().enumerate() {
            if i > 0 {
                line.push(' ');
            }
            match value.unpack_str() {
                Some(s) => line.push_str(s),
                None => {
                    host.check_value("print", *value)?;
                    line.push_str(&value.to_str());
                }
            }
        }
        host.log(line);
        Ok(NoneType)
    }

    /// Formats its argument as a string: a string as itself, anything else as `repr` would.
    /// Values nested deeper than the nesting limit, or whose text would outgrow the heap limit,
    /// are an error naming the limit.
    ///
    /// ```python
    /// str([1, "x"]) == '[1, "x"]'
    /// ```
    #[starlark(as_type = StarlarkStr, speculative_exec_safe)]
    fn str<'v>(
        #[starlark(require = pos)] a: Value<'v>,
        eval: &mut Evaluator<'v, '_, '_>,
    ) -> anyhow::Result<StringValue<'v>> {
        if let Some(s) = StringValue::new(a) {
            return Ok(s);
        }
        Host::of(eval)?.check_value("str", a)?;
        Ok(eval.heap().alloc_str(&a.to_str()))
    }

    /// Formats its argument as a string, strings double-quoted. Bounded as `str` is.
    ///
    /// ```python
    /// repr("x") == '"x"'
    /// ```
    #[starlark(speculative_exec_safe)]
    fn repr<'v>(
        #[starlark(require = pos)] a: Value<'v>,
        eval: &mut Evaluator<'v, '_, '_>,
    ) -> anyhow::Result<StringValue<'v>> {
        Host::of(eval)?.check_value("repr", a)?;
        Ok(eval.heap().alloc_str(&a.to_repr()))
    }
}
