//! `log(msg)`: a line of script output that becomes an event on the current span.

use starlark::environment::GlobalsBuilder;
use starlark::eval::Evaluator;
use starlark::starlark_module;
use starlark::values::Value;
use starlark::values::none::NoneType;

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
        let line = match msg.unpack_str() {
            Some(s) => s.to_owned(),
            None => msg.to_str(),
        };
        Host::of(eval)?.log(line);
        Ok(NoneType)
    }
}
