//! The gates a delegation file or a project policy's `verification_defaults` names — `checks`,
//! `criteria`, `require_checks`, `scope`, `stuck_after`, `observe`, `protect`, `claims`,
//! `confirm`, `flaky`, `gaming`, `holdout` — validated, each `None` when not given, so that a request's keys override
//! the project's defaults one by one.

use serde_json::Value;

use crate::checks::{CheckSpec, ClaimsMode, Criterion, Flaky, GamingMode, HoldoutSpec, RawCheck};
use crate::error::{Error, Result};
use crate::scope::{RawScope, ScopeSpec};

/// The gates of one file, validated.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Gates {
    pub(crate) checks: Option<Vec<CheckSpec>>,
    /// Command criteria (run as checks) and the others.
    pub(crate) criteria: Option<(Vec<CheckSpec>, Vec<Criterion>)>,
    pub(crate) require_checks: Option<bool>,
    pub(crate) scope: Option<ScopeSpec>,
    pub(crate) stuck_after: Option<u32>,
    pub(crate) observe: Option<bool>,
    /// Globs of gate inputs, validated; `Some([])` turns the default off.
    pub(crate) protect: Option<Vec<String>>,
    pub(crate) claims: Option<ClaimsMode>,
    /// The `confirm` and `flaky` of checks that do not say.
    pub(crate) confirm: Option<u8>,
    pub(crate) flaky: Option<Flaky>,
    pub(crate) gaming: Option<GamingMode>,
    /// Checks whose tests the delegate never sees.
    pub(crate) holdout: Option<Vec<HoldoutSpec>>,
}

/// The gates' keys as written.
#[derive(Debug, Default)]
pub(crate) struct RawGates {
    pub(crate) checks: Option<Vec<RawCheck>>,
    pub(crate) criteria: Option<Vec<Value>>,
    pub(crate) require_checks: Option<bool>,
    pub(crate) scope: Option<RawScope>,
    pub(crate) stuck_after: Option<u32>,
    pub(crate) observe: Option<bool>,
    pub(crate) protect: Option<Vec<String>>,
    pub(crate) claims: Option<String>,
    pub(crate) confirm: Option<u64>,
    pub(crate) flaky: Option<String>,
    pub(crate) gaming: Option<String>,
    pub(crate) holdout: Option<Vec<Value>>,
}

impl Gates {
    /// Validates the raw keys, each by the module that owns it; `file` names where they were
    /// written in messages, and paths in them are relative to `base`.
    ///
    /// # Errors
    /// [`ErrorKind::Config`](crate::ErrorKind::Config) naming the key at fault.
    pub(crate) fn parse(file: &str, base: &std::path::Path, raw: RawGates) -> Result<Self> {
        Ok(Gates {
            checks: raw
                .checks
                .map(|c| CheckSpec::parse_list(file, c))
                .transpose()?,
            criteria: raw
                .criteria
                .map(|c| Criterion::parse_list(file, c))
                .transpose()?,
            require_checks: raw.require_checks,
            scope: raw.scope.map(|s| ScopeSpec::parse(file, s)).transpose()?,
            stuck_after: raw.stuck_after,
            observe: raw.observe,
            protect: raw
                .protect
                .map(|globs| crate::integrity::GateInputs::compile(&globs, file).map(|_| globs))
                .transpose()?,
            claims: raw
                .claims
                .map(|c| ClaimsMode::parse(file, &c))
                .transpose()?,
            confirm: raw
                .confirm
                .map(|n| crate::checks::confirm(file, n))
                .transpose()?,
            flaky: raw.flaky.map(|f| Flaky::parse(file, &f)).transpose()?,
            gaming: raw
                .gaming
                .map(|g| GamingMode::parse(file, &g))
                .transpose()?,
            holdout: raw
                .holdout
                .map(|h| HoldoutSpec::parse_list(file, base, h))
                .transpose()?,
        })
    }

    /// These gates, each key missing here taken from `defaults`; `file` and `defaults_file`
    /// name both in messages.
    ///
    /// # Errors
    /// [`ErrorKind::Config`](crate::ErrorKind::Config) when a check and a command criterion
    /// end up with one name.
    pub(crate) fn over(self, defaults: &Gates, file: &str, defaults_file: &str) -> Result<Gates> {
        let gates = Gates {
            checks: self.checks.or_else(|| defaults.checks.clone()),
            criteria: self.criteria.or_else(|| defaults.criteria.clone()),
            require_checks: self.require_checks.or(defaults.require_checks),
            scope: self.scope.or_else(|| defaults.scope.clone()),
            stuck_after: self.stuck_after.or(defaults.stuck_after),
            observe: self.observe.or(defaults.observe),
            protect: self.protect.or_else(|| defaults.protect.clone()),
            claims: self.claims.or(defaults.claims),
            confirm: self.confirm.or(defaults.confirm),
            flaky: self.flaky.or(defaults.flaky),
            gaming: self.gaming.or(defaults.gaming),
            holdout: self.holdout.or_else(|| defaults.holdout.clone()),
        };
        let commands = gates.checks.iter().flatten();
        let named = gates.criteria.iter().flat_map(|(c, _)| c.iter());
        let holdouts = gates.holdout.iter().flatten().map(|h| &h.check);
        let mut seen = std::collections::HashSet::new();
        for check in commands.chain(named).chain(holdouts) {
            if !seen.insert(check.name.as_str()) {
                return Err(Error::config(format!(
                    "{file}: two of the checks, command criteria and holdouts are named {:?} (with the defaults of {defaults_file}); names must be unique",
                    check.name
                )));
            }
        }
        Ok(gates)
    }
}
