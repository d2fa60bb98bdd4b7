//! `critic:` (DESIGN §4.9), in a delegation file or a project policy's
//! `verification_defaults`: the independent reviewer, as written and read.

use std::path::Path;

use serde::Deserialize;

use crate::config::ReadScript;
use crate::decision::OnExhausted;
use crate::delegate::{DelegateConfig, RawDelegate};
use crate::error::{Error, Result};

/// Turns a reviewer may take (reading files) before its verdict, unless `critic.max_turns` says.
const DEFAULT_MAX_TURNS: u32 = 10;

/// When the critic reviews an attempt (`critic.when`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CriticWhen {
    /// Every attempt the deterministic stages passed.
    Always,
    /// Only risky ones: `risk: true`, delegated work (`parent_id`), more than 5 files or 300
    /// lines changed.
    Risky,
    /// Never (a default switched off).
    Never,
}

/// What an unusable review does (`critic.on_unavailable`, DESIGN §4.9). Either way the run never
/// ends plain `passed` on it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum OnUnavailable {
    /// With deterministic stages passing, `passed_with_debt` naming the unavailable critic (a
    /// human decides); with none, `failed`, kind `no_gate`.
    #[default]
    Debt,
    /// The builder is re-prompted ("the reviewer was unavailable") and the next attempt is
    /// reviewed again, within the retry budget.
    Retry,
}

/// The independent reviewer of a delegation (DESIGN §4.9).
#[derive(Debug, Clone, PartialEq)]
pub struct CriticSpec {
    /// Who reviews; `None`: the same kind as the delegate, in a fresh conversation.
    pub delegate: Option<DelegateConfig>,
    /// When it reviews.
    pub when: CriticWhen,
    /// What the work must satisfy, in the reviewer's prompt.
    pub criteria: String,
    /// What a spent budget does when only the critic objects.
    pub on_exhausted: OnExhausted,
    /// What an unusable review (unparseable, a crash, a timeout) does.
    pub on_unavailable: OnUnavailable,
    /// Turns the reviewer may take (reading files) before its verdict.
    pub max_turns: u32,
}

impl CriticSpec {
    /// False for `when: never`: such a critic is parsed and kept, never built or run.
    pub fn reviews(&self) -> bool {
        self.when != CriticWhen::Never
    }
}

/// `critic:` as written, in a delegation file or a project policy's `verification_defaults`.
///
/// An independent reviewer that runs after every deterministic stage passed; it can send the
/// work back, never pass it alone.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "critic")]
pub(crate) struct RawCritic {
    /// Who reviews (any kind); default: the delegate's own kind, in a fresh conversation.
    #[serde(default)]
    delegate: Option<RawDelegate>,
    /// `always`, `risky` (the default: risk: true, a parent_id, more than 5 files or 300 lines
    /// changed) or `never`.
    #[serde(default)]
    #[schemars(extend("enum" = ["always", "risky", "never", null]))]
    when: Option<String>,
    /// What the work must satisfy, quoted in the reviewer's prompt.
    #[serde(default)]
    criteria: Option<String>,
    /// When the retry budget is spent and only the critic objects: `debt` (passed_with_debt,
    /// the default) or `fail` (critic_rejected).
    #[serde(default)]
    #[schemars(extend("enum" = ["debt", "fail", null]))]
    on_exhausted: Option<String>,
    /// When the review cannot be read: `debt` (the default) or `retry` (re-prompt the builder
    /// and review again).
    #[serde(default)]
    #[schemars(extend("enum" = ["debt", "retry", null]))]
    on_unavailable: Option<String>,
    /// Turns the reviewer may spend reading files before its verdict, at least 1 (default 10).
    #[serde(default)]
    #[schemars(range(min = 1))]
    max_turns: Option<u32>,
}

impl CriticSpec {
    /// Validates `critic:` as written in `file`; scripts its delegate names are read by `read`,
    /// relative to `base`.
    ///
    /// # Errors
    /// [`ErrorKind::Config`](crate::ErrorKind::Config) naming the key and the values it takes.
    pub(crate) fn parse(
        file: &str,
        raw: RawCritic,
        read: &ReadScript<'_>,
        base: &Path,
    ) -> Result<CriticSpec> {
        let delegate = raw
            .delegate
            .map(|d| DelegateConfig::parse(file, "critic.delegate", d, read, base))
            .transpose()?;
        let when = match raw.when.as_deref() {
            None | Some("risky") => CriticWhen::Risky,
            Some("always") => CriticWhen::Always,
            Some("never") => CriticWhen::Never,
            Some(other) => {
                return Err(Error::config(format!(
                    "{file}: `critic.when` is {other:?}; use `always`, `risky` (the default: risk: true, delegated work, more than 5 files or 300 lines changed) or `never`"
                )));
            }
        };
        let on_exhausted = match raw.on_exhausted.as_deref() {
            None | Some("debt") => OnExhausted::Debt,
            Some("fail") => OnExhausted::Fail,
            Some(other) => {
                return Err(Error::config(format!(
                    "{file}: `critic.on_exhausted` is {other:?}; use `debt` (the default: passed_with_debt, a human reviews) or `fail`"
                )));
            }
        };
        let on_unavailable = match raw.on_unavailable.as_deref() {
            None | Some("debt") => OnUnavailable::Debt,
            Some("retry") => OnUnavailable::Retry,
            Some(other) => {
                return Err(Error::config(format!(
                    "{file}: `critic.on_unavailable` is {other:?}; use `debt` (the default: with deterministic checks passing the run ends passed_with_debt for a human; with none it ends failed, no_gate) or `retry` (the builder is re-prompted and reviewed again)"
                )));
            }
        };
        let max_turns = raw.max_turns.unwrap_or(DEFAULT_MAX_TURNS);
        if max_turns == 0 {
            return Err(Error::config(format!(
                "{file}: `critic.max_turns` must be at least 1"
            )));
        }
        Ok(CriticSpec {
            delegate,
            when,
            criteria: raw.criteria.unwrap_or_default(),
            on_exhausted,
            on_unavailable,
            max_turns,
        })
    }
}
