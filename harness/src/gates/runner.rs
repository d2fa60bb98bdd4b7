//! `runner:` of a check (DESIGN §10.1): the test runner whose own report judges it.

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// A test runner harness reads the report of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Runner {
    /// pytest (`pytest`, `python -m pytest`, `py.test`): JUnit XML through `PYTEST_ADDOPTS`.
    Pytest,
    /// `cargo test`: its `test result:` lines.
    Cargo,
    /// `cargo nextest run`: its summary line.
    Nextest,
    /// `go test`: `-json` events.
    Go,
    /// jest: `--json --outputFile`.
    Jest,
    /// vitest: the JSON reporter's file.
    Vitest,
    /// `node --test`: the JUnit reporter's file.
    Node,
    /// mocha: its summary (`N passing`, `N failing`).
    Mocha,
}

impl Runner {
    /// Every runner, in the order `--help` and the docs list them.
    pub const ALL: [Runner; 8] = [
        Runner::Pytest,
        Runner::Cargo,
        Runner::Nextest,
        Runner::Go,
        Runner::Jest,
        Runner::Vitest,
        Runner::Node,
        Runner::Mocha,
    ];

    /// Its name as written in `runner:` and shown in evidence.
    pub fn as_str(self) -> &'static str {
        match self {
            Runner::Pytest => "pytest",
            Runner::Cargo => "cargo",
            Runner::Nextest => "nextest",
            Runner::Go => "go",
            Runner::Jest => "jest",
            Runner::Vitest => "vitest",
            Runner::Node => "node",
            Runner::Mocha => "mocha",
        }
    }

    fn named(name: &str) -> Option<Self> {
        Runner::ALL.into_iter().find(|r| r.as_str() == name)
    }
}

/// `runner:` on a check.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum RunnerSetting {
    /// Known runners are recognised in the command (the default).
    #[default]
    Auto,
    /// The check is judged by its exit code alone.
    None,
    /// The command runs this runner (through a wrapper such as `make test`, say).
    Named(Runner),
}

impl RunnerSetting {
    /// Reads `runner:` as written at `at`.
    ///
    /// # Errors
    /// [`ErrorKind::Config`](crate::ErrorKind::Config) naming the runners.
    pub(crate) fn parse(at: &str, value: &str) -> Result<Self> {
        match value {
            "auto" => Ok(RunnerSetting::Auto),
            "none" => Ok(RunnerSetting::None),
            name => Runner::named(name).map(RunnerSetting::Named).ok_or_else(|| {
                let names: Vec<&str> = Runner::ALL.iter().map(|r| r.as_str()).collect();
                Error::config(format!(
                    "{at}: `runner` is {name:?}; use `auto` (the default: a known runner is recognised in the command), `none` (judged by exit code alone) or one of {}",
                    names.join(", ")
                ))
            }),
        }
    }
}

/// The schema of `runner:`: `auto`, `none` or a runner's name (from [`Runner::ALL`]).
pub(crate) fn setting_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    let mut names: Vec<Option<&str>> = vec![Some("auto"), Some("none")];
    names.extend(Runner::ALL.iter().map(|r| Some(r.as_str())));
    names.push(None);
    schemars::json_schema!({ "enum": names })
}
