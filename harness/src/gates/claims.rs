//! `claims:` (DESIGN §4.13): what an answer's claim the tool log does not show does.

use crate::error::{Error, Result};

/// What an unsupported claim does (`claims:`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ClaimsMode {
    /// A blocking finding: the delegate is told and retries (the default).
    #[default]
    Blocking,
    /// An advisory finding: said, never held against the attempt.
    Advisory,
    /// The answer is not read for claims.
    Off,
}

impl ClaimsMode {
    /// Reads `claims:` as written in `file`.
    ///
    /// # Errors
    /// [`ErrorKind::Config`](crate::ErrorKind::Config) for an unknown value.
    pub(crate) fn parse(file: &str, value: &str) -> Result<Self> {
        match value {
            "blocking" => Ok(ClaimsMode::Blocking),
            "advisory" => Ok(ClaimsMode::Advisory),
            "off" => Ok(ClaimsMode::Off),
            other => Err(Error::config(format!(
                "{file}: `claims` is {other:?}; use `blocking` (the default: an answer claiming work the tool log does not show is sent back), `advisory` (said, not held against it) or `off`"
            ))),
        }
    }
}
