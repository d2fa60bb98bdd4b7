//! The gates a delegation file or a project policy's `verification_defaults` names — `checks`,
//! `criteria`, `require_checks`, `scope`, `stuck_after`, `observe`, `protect`, `claims`,
//! `confirm`, `flaky`, `gaming`, `holdout` — validated, each `None` when not given, so that a
//! request's keys override the project's defaults one by one.
//!
//! Each key's settings as written and as read live in a file of their own here (`checks`,
//! `criteria`, `critic`, `plan`, `gaming`, `holdout`, `runner`): data and validation only. The
//! stages that act on them are under [`crate::checks`], which depends on this module and never
//! the other way round, so the delegation file, the project policy and tree profiles read their
//! settings without reaching any stage's code.

pub(crate) mod checks;
pub(crate) mod claims;
pub(crate) mod criteria;
pub(crate) mod critic;
pub(crate) mod gaming;
pub(crate) mod holdout;
pub(crate) mod plan;
pub(crate) mod runner;

use crate::error::{Error, Result};
use crate::scope::ScopeSpec;
use checks::{CheckSpec, Flaky};
use claims::ClaimsMode;
use criteria::Criterion;
use gaming::GamingMode;
use holdout::HoldoutSpec;

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

/// Declares a struct holding its own fields and then every gate key, as the delegation file,
/// the project policy's `verification_defaults` and [`RawGates`] read them: each key, its type,
/// its documentation and its schema are written here once (in the manner of ripgrep's
/// `flags/defs.rs`). A struct declared with a leading `take` also gets `take_gates`, which moves
/// the keys out into a [`RawGates`].
///
/// Adding a gate key: its field here, its validation in [`Gates::parse`], its merge in
/// [`Gates::over`] (the schemas follow from the field).
macro_rules! with_gate_keys {
    (take $(#[$meta:meta])* $vis:vis struct $name:ident { $($body:tt)* }) => {
        crate::gates::with_gate_keys! { $(#[$meta])* $vis struct $name { $($body)* } }
        impl $name {
            /// The gate keys as written, moved out (each left `None`).
            pub(crate) fn take_gates(&mut self) -> crate::gates::RawGates {
                crate::gates::RawGates {
                    checks: self.checks.take(),
                    criteria: self.criteria.take(),
                    require_checks: self.require_checks.take(),
                    scope: self.scope.take(),
                    stuck_after: self.stuck_after.take(),
                    observe: self.observe.take(),
                    protect: self.protect.take(),
                    claims: self.claims.take(),
                    confirm: self.confirm.take(),
                    flaky: self.flaky.take(),
                    gaming: self.gaming.take(),
                    holdout: self.holdout.take(),
                }
            }
        }
    };
    ($(#[$meta:meta])* $vis:vis struct $name:ident { $($body:tt)* }) => {
        $(#[$meta])*
        $vis struct $name {
            $($body)*
            /// Commands judged by exit code on every attempt, before the verifier.
            #[serde(default)]
            pub(crate) checks: Option<Vec<crate::gates::checks::RawCheck>>,
            /// Facts each attempt must make true, each leaving an evidence record.
            #[serde(default)]
            #[schemars(with = "Option<Vec<crate::gates::criteria::CriterionForm>>")]
            pub(crate) criteria: Option<Vec<serde_json::Value>>,
            /// True: a delegation with no checks and no criteria ends failed, kind no_gate,
            /// before the delegate runs (default false).
            #[serde(default)]
            pub(crate) require_checks: Option<bool>,
            /// What the delegate may change in the workspace; a change outside it is a blocking
            /// `scope` finding.
            #[serde(default)]
            pub(crate) scope: Option<crate::scope::RawScope>,
            /// The same blocking failure on this many attempts in a row ends the delegation as
            /// failed, kind stuck; 0 turns it off (default 3).
            #[serde(default)]
            pub(crate) stuck_after: Option<u32>,
            /// Snapshot the workspace before attempt 0 and diff it after every attempt (default
            /// true); false is refused with `scope` or `no_new_skips`.
            #[serde(default)]
            pub(crate) observe: Option<bool>,
            /// Globs of gate inputs the delegate may not modify, delete or replace (default:
            /// common test locations and what checks run, when there are checks); [] turns the
            /// default off.
            #[serde(default)]
            pub(crate) protect: Option<Vec<String>>,
            /// What an answer claiming work the tool log does not show does: `blocking` (the
            /// default), `advisory` or `off`.
            #[serde(default)]
            #[schemars(extend("enum" = ["blocking", "advisory", "off", null]))]
            pub(crate) claims: Option<String>,
            /// Default `confirm` for checks that do not say: re-runs of a failing check, 0 to 5
            /// (default 0).
            #[serde(default)]
            #[schemars(range(min = 0, max = 5))]
            pub(crate) confirm: Option<u64>,
            /// Default `flaky` for checks that do not say: `fail` (the default) or `advisory`.
            #[serde(default)]
            #[schemars(extend("enum" = ["fail", "advisory", null]))]
            pub(crate) flaky: Option<String>,
            /// What the gaming stage's findings (added code that special-cases the tests'
            /// inputs, reads the caller, ends the test process or sniffs the test framework) do:
            /// `blocking` (the default), `advisory` (the run passes with debt, awaiting review)
            /// or `off`.
            #[serde(default)]
            #[schemars(extend("enum" = ["blocking", "advisory", "off", null]))]
            pub(crate) gaming: Option<String>,
            /// Checks whose tests the delegate never sees (`files: DIR` outside the workspace).
            #[serde(default)]
            #[schemars(with = "Option<Vec<crate::gates::holdout::HoldoutForm>>")]
            pub(crate) holdout: Option<Vec<serde_json::Value>>,
        }
    };
}
pub(crate) use with_gate_keys;

with_gate_keys! {
    /// The gates' keys as written.
    #[derive(Debug, Default, serde::Deserialize, schemars::JsonSchema)]
    pub(crate) struct RawGates {}
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
            confirm: raw.confirm.map(|n| checks::confirm(file, n)).transpose()?,
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
