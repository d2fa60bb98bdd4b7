//! `gaming:` (DESIGN §10.1): what the gaming stage's findings do.

use crate::error::{Error, Result};

/// `gaming:` — what the stage's findings do.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum GamingMode {
    /// They fail the attempt (the default).
    #[default]
    Blocking,
    /// They are said and the run passes with debt, awaiting a human's review.
    Advisory,
    /// The stage does not run.
    Off,
}

impl GamingMode {
    /// Reads `gaming:` as written at `at`.
    ///
    /// # Errors
    /// [`ErrorKind::Config`](crate::ErrorKind::Config) for another value.
    pub(crate) fn parse(at: &str, value: &str) -> Result<Self> {
        match value {
            "blocking" => Ok(GamingMode::Blocking),
            "advisory" => Ok(GamingMode::Advisory),
            "off" => Ok(GamingMode::Off),
            other => Err(Error::config(format!(
                "{at}: `gaming` is {other:?}; use `blocking` (the default: code that games the tests fails the attempt), `advisory` (the run passes with debt and waits for a human) or `off`"
            ))),
        }
    }

    /// Its name as written.
    pub fn as_str(self) -> &'static str {
        match self {
            GamingMode::Blocking => "blocking",
            GamingMode::Advisory => "advisory",
            GamingMode::Off => "off",
        }
    }
}
