//! The project policy, `.harness/policy.yaml` in the workspace (DESIGN §4.10): defaults for every
//! delegation that runs there and the limits its scripts run under. Strict: unknown keys and
//! values out of range are configuration errors naming the file, the key and the fix.

use std::path::{Path, PathBuf};
use std::time::Duration;

use harness_builtins::Limits;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Map, Value};

use crate::error::{Error, Result};
use crate::redact::Redactor;
use crate::spec::{DelegationFile, parse_profiles};

/// Where the project policy lives, relative to the workspace root.
pub const PROJECT_POLICY: &str = ".harness/policy.yaml";

const KEYS_HINT: &str = "every key of a project policy: docs/reference.md#the-project-policy";

/// The project policy as written.
///
/// Defaults and limits for every delegation whose workspace holds this file
/// (docs/reference.md). An empty file is valid.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(title = "harness project policy (.harness/policy.yaml)")]
pub(crate) struct RawPolicy {
    /// Used key by key where a delegation file does not give that key (a file's `checks:`
    /// replaces these checks whole).
    #[serde(default)]
    verification_defaults: Option<RawDefaults>,
    /// What every verifier, hook and scripted delegate of this workspace runs under.
    #[serde(default)]
    limits: Option<RawLimits>,
    /// Secrets replaced by [REDACTED] in everything a run prints and records.
    #[serde(default)]
    redact: Option<RawRedact>,
    /// How the programs a delegation starts are confined.
    #[serde(default)]
    commands: Option<RawCommands>,
    /// What `harness override` (and the service) may do with this workspace's runs.
    #[serde(default)]
    override_policy: Option<OverridePolicy>,
    /// Named child profiles for every delegation of this workspace that offers the `delegate`
    /// tool, and for `harness mcp` (`profile: NAME`; `default` when a call names none). Each is
    /// a delegation without `task`, `workdir`, `parent_id` or `delegates`; scripts are
    /// relative to .harness/. A delegation file's own `delegates:` of the same name wins. Read
    /// when used: docs/reference.md#policy-delegates.
    #[serde(default)]
    #[schemars(with = "Option<std::collections::BTreeMap<String, serde_json::Value>>")]
    #[schemars(extend("propertyNames" = {"pattern": "^[A-Za-z0-9_-]+$"}))]
    delegates: Option<serde_json::Map<String, serde_json::Value>>,
}

/// `commands:` as written.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "commands")]
struct RawCommands {
    /// `auto` (the default: bubblewrap where it works, else unconfined with a warning),
    /// `bwrap` (required) or `none` (unconfined, silently).
    #[serde(default)]
    #[schemars(extend("enum" = ["auto", "bwrap", "none", null]))]
    isolation: Option<String>,
}

/// `redact:` as written.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "redact")]
struct RawRedact {
    /// Regular expressions (Rust `regex` syntax) added to the built-in secret patterns.
    #[serde(default)]
    patterns: Vec<String>,
}

crate::gates::with_gate_keys! {
    take
    /// `verification_defaults:` as written.
    #[derive(Debug, Default, Deserialize, JsonSchema)]
    #[serde(deny_unknown_fields)]
    #[schemars(rename = "verification_defaults")]
    struct RawDefaults {
        /// Retries after a failed attempt, 0 to 100, when the delegation file and
        /// --max-verify-retries do not say (default 2).
        #[serde(default)]
        #[schemars(range(min = 0, max = 100))]
        max_verify_retries: Option<u32>,
        /// The reviewer of delegations that name none; scripts it names are relative to
        /// .harness/.
        #[serde(default)]
        critic: Option<crate::gates::critic::RawCritic>,
    }
}

/// `limits.steps`, `limits.wall_ms`, …: each key's range, read by the schema and the check.
const STEPS: (u64, u64) = (1_000, 10_000_000_000);
const WALL_MS: (u64, u64) = (10, 3_600_000);
const HEAP_MB: (u64, u64) = (8, 16_384);
const CALL_DEPTH: (u64, u64) = (5, 200);
const NESTING_DEPTH: (u64, u64) = (10, 1_000);
const READ_MB: (u64, u64) = (1, 4_096);
const HTTP_BODY_MB: (u64, u64) = (1, 1_024);
const OUTPUT_KB: (u64, u64) = (1, 1_048_576);

/// `limits:` as written.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "script_limits")]
struct RawLimits {
    /// Starlark steps per call, 1,000 to 10,000,000,000 (default 10,000,000).
    #[serde(default)]
    #[schemars(range(min = STEPS.0, max = STEPS.1))]
    steps: Option<u64>,
    /// Wall clock per call, milliseconds, 10 to 3,600,000 (default 30,000).
    #[serde(default)]
    #[schemars(range(min = WALL_MS.0, max = WALL_MS.1))]
    wall_ms: Option<u64>,
    /// Starlark heap, MiB, 8 to 16,384 (default 256).
    #[serde(default)]
    #[schemars(range(min = HEAP_MB.0, max = HEAP_MB.1))]
    heap_mb: Option<u64>,
    /// Starlark call depth, 5 to 200 (default 50).
    #[serde(default)]
    #[schemars(range(min = CALL_DEPTH.0, max = CALL_DEPTH.1))]
    call_depth: Option<u64>,
    /// Lists and dicts nested in a value returned, encoded or printed, 10 to 1,000 (default
    /// 100).
    #[serde(default)]
    #[schemars(range(min = NESTING_DEPTH.0, max = NESTING_DEPTH.1))]
    nesting_depth: Option<u64>,
    /// Largest file fs.read returns, MiB, 1 to 4,096 (default 16).
    #[serde(default)]
    #[schemars(range(min = READ_MB.0, max = READ_MB.1))]
    read_mb: Option<u64>,
    /// Largest HTTP body http.* returns, MiB, 1 to 1,024 (default 4).
    #[serde(default)]
    #[schemars(range(min = HTTP_BODY_MB.0, max = HTTP_BODY_MB.1))]
    http_body_mb: Option<u64>,
    /// exec.run output kept per stream, KiB, 1 to 1,048,576 (default 1,024).
    #[serde(default)]
    #[schemars(range(min = OUTPUT_KB.0, max = OUTPUT_KB.1))]
    output_kb: Option<u64>,
}

/// `override_policy` (DESIGN §4.11): which human overrides the project allows. The defaults are
/// DESIGN's: check and verifier overrides allowed, a check override needs a reason, a direct
/// approval (whatever failed) is not allowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
#[schemars(rename = "override_policy")]
pub struct OverridePolicy {
    /// `--type check` (failed checks, criteria, verifiers, hooks) may approve (default true).
    pub check_override_allowed: bool,
    /// A `--type check` override needs `--reason` (default true; the other types always do).
    pub check_override_requires_reason: bool,
    /// `--type verifier` (a critic's rejection or debt) may approve (default true).
    pub verifier_override_allowed: bool,
    /// `--type direct` (approve or reject whatever failed) may approve (default false).
    pub direct_approval_allowed: bool,
}

impl Default for OverridePolicy {
    fn default() -> Self {
        OverridePolicy {
            check_override_allowed: true,
            check_override_requires_reason: true,
            verifier_override_allowed: true,
            direct_approval_allowed: false,
        }
    }
}

/// `commands.isolation`: how the programs started for a delegation (its checks and command
/// criteria, `exec.run`, `run_command`, a `command` or agent CLI delegate) are confined.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum CommandIsolation {
    /// Under bubblewrap where it is installed and works here; unconfined, with a warning on
    /// every run that starts programs, where it is not.
    #[default]
    Auto,
    /// Under bubblewrap, always: a policy that asks for it where it is missing is an error.
    Bwrap,
    /// Unconfined: the operator accepts that a delegate with `run_command` can act as them.
    None,
}

impl CommandIsolation {
    /// True when programs run under bubblewrap.
    pub fn confines(self) -> bool {
        match self {
            CommandIsolation::Bwrap => true,
            CommandIsolation::None => false,
            CommandIsolation::Auto => harness_builtins::bubblewrap_works(),
        }
    }

    /// What a run that starts programs says when they run unconfined: `auto` found no working
    /// bubblewrap, or the policy chose `none` (one line, so a person reading the run knows).
    pub fn warning(self) -> Option<&'static str> {
        match self {
            CommandIsolation::Auto if !self.confines() => Some(
                "commands run unconfined: bubblewrap (`bwrap`) is not installed or cannot make namespaces here, so a delegate's commands, an agent CLI and the tests your checks run can act as you (install bubblewrap, or set `commands.isolation: none` in .harness/policy.yaml to accept it)",
            ),
            CommandIsolation::None => Some(
                "commands run unconfined (`commands.isolation: none` in .harness/policy.yaml): a delegate's commands, an agent CLI and the tests your checks run act as you",
            ),
            _ => None,
        }
    }
}

/// A workspace's project policy; [`ProjectPolicy::default`] when it has none.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ProjectPolicy {
    /// `verification_defaults.max_verify_retries`: used when a delegation does not say.
    pub max_verify_retries: Option<u32>,
    /// The other `verification_defaults` (checks, criteria, require_checks, scope,
    /// stuck_after): each used when a delegation does not give that key.
    pub(crate) defaults: crate::gates::Gates,
    /// `commands.isolation`: how the programs a delegation starts are confined (default
    /// `auto`).
    pub commands: CommandIsolation,
    /// The budgets every script (verifier, hook, scripted delegate) runs under.
    pub limits: Limits,
    /// The built-in secret patterns plus `redact.patterns`: applied to everything a run prints
    /// and records.
    pub redact: Redactor,
    /// What human overrides of this workspace's runs may do.
    pub overrides: OverridePolicy,
    /// `verification_defaults.critic`: the reviewer of delegations that name none (scripts
    /// relative to `.harness/`).
    pub(crate) critic: Option<crate::gates::critic::CriticSpec>,
    /// `delegates`: named child profiles for every delegation of the workspace that offers
    /// `delegate`, and for `harness mcp` (scripts relative to `.harness/`).
    pub(crate) profiles: PolicyProfiles,
}

/// Reads the scripts a policy names, relative to `base` (its directory), beneath it; `at` names
/// the key's place in messages.
pub(crate) fn script_reader<'a>(
    base: &'a Path,
    at: &'a str,
) -> impl Fn(&str, &Path) -> Result<(std::path::PathBuf, String)> + 'a {
    move |key: &str, rel: &Path| {
        let full = base.join(rel);
        harness_builtins::read_named(base, rel, harness_builtins::MAX_SCRIPT_BYTES)
            .map(|text| (full.clone(), text))
            .map_err(|e| {
                Error::config(format!(
                    "{at}: `{key}`: cannot read {}: {e}",
                    full.display()
                ))
            })
    }
}

impl ProjectPolicy {
    /// Reads `<workspace>/.harness/policy.yaml`; a workspace without one gets the defaults.
    ///
    /// # Errors
    /// [`ErrorKind::Config`](crate::ErrorKind::Config) when the file cannot be read or is
    /// invalid, naming the file, the key and the fix.
    pub fn load(workspace: &Path) -> Result<Self> {
        let path = workspace.join(PROJECT_POLICY);
        // A regular file only: a FIFO or a device planted there must not hang the assembly.
        match harness_builtins::read_beneath(workspace, &path, harness_builtins::MAX_POLICY_BYTES) {
            Ok(text) => Self::from_yaml(&path, &text),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Self::default()),
            Err(e) => Err(Error::config(format!(
                "project policy {}: cannot read it: {e}",
                path.display()
            ))),
        }
    }

    /// Validates project-policy YAML read from `path`.
    ///
    /// # Errors
    /// As [`ProjectPolicy::load`].
    pub fn from_yaml(path: &Path, text: &str) -> Result<Self> {
        let file = path.display();
        let raw: RawPolicy = if text.trim().is_empty() {
            RawPolicy::default()
        } else {
            serde_norway::from_str(text).map_err(|e| {
                Error::config(format!(
                    "project policy {file}: {} ({KEYS_HINT})",
                    crate::plain::plain_yaml(&e.to_string(), text)
                ))
            })?
        };
        let mut defaults = raw.verification_defaults.unwrap_or_default();
        let gates = defaults.take_gates();
        if let Some(n) = defaults
            .max_verify_retries
            .filter(|n| *n > crate::spec::MAX_VERIFY_RETRIES)
        {
            return Err(Error::config(format!(
                "project policy {file}: `verification_defaults.max_verify_retries` must be at most {}, got {n}",
                crate::spec::MAX_VERIFY_RETRIES
            )));
        }
        let at = format!("project policy {file}: `verification_defaults`");
        let base = path.parent().unwrap_or(Path::new("."));
        let read = script_reader(base, &at);
        let critic = defaults
            .critic
            .map(|c| crate::gates::critic::CriticSpec::parse(&at, c, &read, base))
            .transpose()?;
        // Read when a delegation that offers `delegate` (or `harness mcp`) uses them, so that a
        // profile whose model key is unset here does not stop every run of the workspace.
        let profiles = match raw.delegates {
            Some(named) => PolicyProfiles {
                named,
                source: path.to_path_buf(),
            },
            None => PolicyProfiles::default(),
        };
        let gates = crate::gates::Gates::parse(&at, base, gates)?;
        let limits = limits(&file.to_string(), raw.limits.unwrap_or_default())?;
        let patterns = raw.redact.unwrap_or_default().patterns;
        let redact = Redactor::with_patterns(&patterns).map_err(|e| {
            Error::config(format!(
                "project policy {file}: `redact.patterns`: {} (patterns are regular expressions in Rust `regex` syntax)",
                e.message()
            ))
        })?;
        let commands = isolation(&file.to_string(), raw.commands.and_then(|c| c.isolation))?;
        Ok(ProjectPolicy {
            commands,
            max_verify_retries: defaults.max_verify_retries,
            defaults: gates,
            limits,
            redact,
            overrides: raw.override_policy.unwrap_or_default(),
            critic,
            profiles,
        })
    }
}

/// The `limits` of a project policy (`file`), each within its range, over the defaults.
fn limits(file: &str, given: RawLimits) -> Result<Limits> {
    let mut limits = Limits::default();
    let range = |key: &str, value: Option<u64>, (min, max): (u64, u64)| -> Result<Option<u64>> {
        match value {
            Some(n) if !(min..=max).contains(&n) => Err(Error::config(format!(
                "project policy {file}: `limits.{key}` must be between {min} and {max}, got {n}"
            ))),
            other => Ok(other),
        }
    };
    let mib = |n: u64| usize::try_from(n.saturating_mul(1024 * 1024)).unwrap_or(usize::MAX);
    if let Some(n) = range("steps", given.steps, STEPS)? {
        limits.max_steps = n;
    }
    if let Some(n) = range("wall_ms", given.wall_ms, WALL_MS)? {
        limits.timeout = Duration::from_millis(n);
    }
    if let Some(n) = range("heap_mb", given.heap_mb, HEAP_MB)? {
        limits.max_heap_bytes = mib(n);
    }
    // Deep Starlark stacks need deep native stacks: the runtime's threads have 16 MiB.
    if let Some(n) = range("call_depth", given.call_depth, CALL_DEPTH)? {
        limits.max_call_depth = usize::try_from(n).unwrap_or(usize::MAX);
    }
    // Bounded above so that what passes the check can still be walked by recursion.
    if let Some(n) = range("nesting_depth", given.nesting_depth, NESTING_DEPTH)? {
        limits.max_nesting_depth = usize::try_from(n).unwrap_or(usize::MAX);
    }
    if let Some(n) = range("read_mb", given.read_mb, READ_MB)? {
        limits.max_read_bytes = n * 1024 * 1024;
    }
    if let Some(n) = range("http_body_mb", given.http_body_mb, HTTP_BODY_MB)? {
        limits.max_http_body_bytes = mib(n);
    }
    if let Some(n) = range("output_kb", given.output_kb, OUTPUT_KB)? {
        limits.max_exec_output_bytes =
            usize::try_from(n.saturating_mul(1024)).unwrap_or(usize::MAX);
    }
    Ok(limits)
}

/// The `commands.isolation` of a project policy (`file`); `bwrap` only where bubblewrap works.
fn isolation(file: &str, isolation: Option<String>) -> Result<CommandIsolation> {
    let isolation = match isolation.as_deref() {
        None | Some("auto") => CommandIsolation::Auto,
        Some("none") => CommandIsolation::None,
        Some("bwrap") => {
            harness_builtins::bubblewrap().map_err(|e| {
                Error::config(format!(
                    "project policy {file}: `commands.isolation: bwrap`: {e}"
                ))
            })?;
            CommandIsolation::Bwrap
        }
        Some(other) => {
            return Err(Error::config(format!(
                "project policy {file}: `commands.isolation` is {other:?}; use `auto` (the default: bubblewrap where it works), `bwrap` or `none`"
            )));
        }
    };
    Ok(isolation)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<ProjectPolicy> {
        ProjectPolicy::from_yaml(Path::new("w/.harness/policy.yaml"), text)
    }

    #[test]
    fn an_empty_policy_keeps_todays_defaults() {
        assert_eq!(parse("").expect("valid"), ProjectPolicy::default());
        assert_eq!(parse("{}").expect("valid"), ProjectPolicy::default());
    }

    #[test]
    fn limits_and_defaults_are_read_in_their_units() {
        let policy = parse(
            "verification_defaults: {max_verify_retries: 0}\nlimits: {steps: 5000000, wall_ms: 10000, heap_mb: 64, call_depth: 100, read_mb: 2, http_body_mb: 1, output_kb: 256}\n",
        )
        .expect("valid");
        assert_eq!(policy.max_verify_retries, Some(0));
        let limits = policy.limits;
        assert_eq!(limits.max_steps, 5_000_000);
        assert_eq!(limits.timeout, Duration::from_secs(10));
        assert_eq!(limits.max_heap_bytes, 64 * 1024 * 1024);
        assert_eq!(limits.max_call_depth, 100);
        assert_eq!(limits.max_read_bytes, 2 * 1024 * 1024);
        assert_eq!(limits.max_http_body_bytes, 1024 * 1024);
        assert_eq!(limits.max_exec_output_bytes, 256 * 1024);
    }

    #[test]
    fn bad_policies_name_the_file_and_the_key() {
        let cases = [
            ("limits: {stepz: 1}\n", "stepz"),
            ("bogus: 1\n", "bogus"),
            ("limits: {wall_ms: 0}\n", "limits.wall_ms"),
            ("limits: {call_depth: 100000}\n", "limits.call_depth"),
            ("limits: {heap_mb: lots}\n", "heap_mb"),
            (
                "verification_defaults: {max_verify_retries: -1}\n",
                "max_verify_retries",
            ),
            ("limits: [1]\n", "limits"),
        ];
        for (text, needle) in cases {
            let err = parse(text).expect_err(text);
            assert_eq!(err.kind(), crate::ErrorKind::Config, "{text}");
            assert!(err.message().contains(needle), "{text}: {}", err.message());
            assert!(
                err.message().contains("w/.harness/policy.yaml"),
                "{text}: {}",
                err.message()
            );
        }
    }
}

/// The project policy's `delegates:` as written, read when a delegation uses them.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct PolicyProfiles {
    pub(crate) named: Map<String, Value>,
    /// The policy file (scripts are relative to its directory).
    pub(crate) source: PathBuf,
}

impl PolicyProfiles {
    /// Validates each profile, reading its scripts.
    ///
    /// # Errors
    /// [`ErrorKind::Config`](crate::ErrorKind::Config) naming the policy, the profile and the key.
    pub(super) fn read(&self) -> Result<Vec<(String, DelegationFile)>> {
        if self.named.is_empty() {
            return Ok(Vec::new());
        }
        let base = self.source.parent().unwrap_or(Path::new("."));
        let at = format!("project policy {}", self.source.display());
        let read = crate::project::script_reader(base, &at);
        parse_profiles(&at, &self.source, self.named.clone(), base, &read)
    }
}
