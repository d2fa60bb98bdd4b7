//! `time.now()`.

use starlark::environment::GlobalsBuilder;
use starlark::starlark_module;

/// Formats a point in time as RFC 3339 in UTC with millisecond precision.
pub(crate) fn rfc3339(t: std::time::SystemTime) -> String {
    humantime::format_rfc3339_millis(t).to_string()
}

#[starlark_module]
pub(crate) fn members(builder: &mut GlobalsBuilder) {
    /// Returns the current time as an RFC 3339 string in UTC, e.g.
    /// `"2026-11-21T20:06:59.123Z"`. Strings in this form sort chronologically.
    ///
    /// ```python
    /// time.now() > "2026-01-01T00:00:00.000Z"
    /// ```
    fn now() -> anyhow::Result<String> {
        Ok(rfc3339(std::time::SystemTime::now()))
    }
}
