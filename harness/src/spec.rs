//! The delegation file (DESIGN §6), its top level: strict YAML (or a batch line's JSON) read
//! into a [`DelegationFile`] before anything runs. Each section is handed to the module that
//! uses it — `checks` and `criteria` to [`checks`](crate::checks), `critic` to the critic,
//! `delegate` to [`delegate`](crate::delegate), `tools` to [`tools`](crate::tools), `scope` to
//! [`scope`](crate::scope) — and comes back validated. Unknown keys, wrong types, missing or
//! conflicting keys and missing script files are configuration errors naming the file, the key
//! and what is expected. Scripts are read through the reader the caller gives; the project
//! policy and the caller's overrides are applied after, by the assembly of the delegation.

use std::path::{Path, PathBuf};
use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Map, Value};

use crate::config::{ReadScript, present_string, seconds, string_only};
use crate::delegate::{DelegateConfig, RawDelegate};
use crate::error::{Error, Result};
use crate::gates::Gates;
use crate::gates::critic::{CriticSpec, RawCritic};
use crate::gates::plan::{PlanStep, RawPlan};
use crate::tools::{Tool, ToolVerifiers};
use crate::tree::profile::{NOT_IN_PROFILE, PROFILE_TASK};
use crate::verifier::VerifySource;

/// The most `max_verify_retries` a delegation may ask for, however it asks.
pub const MAX_VERIFY_RETRIES: u32 = 100;

const KEYS_HINT: &str = "every key of a delegation file: docs/reference.md#the-delegation-file";

/// Default `limits.max_turns` (per attempt).
pub const DEFAULT_MAX_TURNS: u32 = 20;

crate::gates::with_gate_keys! {
    take
    /// A delegation file: the task, who does it, and how the claimed work is checked
    /// (docs/reference.md). Relative paths are relative to the file's directory.
    #[derive(Debug, Deserialize, JsonSchema)]
    #[serde(deny_unknown_fields)]
    #[schemars(title = "harness delegation file")]
    pub(crate) struct RawFile {
        /// What the delegate is asked to do (a non-empty string).
        #[serde(deserialize_with = "string_only")]
        #[schemars(regex(pattern = r"\S"))]
        task: String,
        /// Who does the work: `kind` (scripted, openai, anthropic, command, claude, codex,
        /// gemini, aider) and that kind's settings.
        delegate: RawDelegate,
        /// Built-in tools offered to scripted, openai and anthropic delegates: read_file,
        /// write_file, list_files, run_command, and delegate (hand a sub-task to a verified child
        /// delegation; docs/reference.md#delegation-trees).
        #[serde(default)]
        #[schemars(with = "Vec<crate::tools::ToolForm>")]
        tools: Vec<Value>,
        /// Named child profiles the `delegate` tool may use (`profile: NAME`); each is
        /// validated, and its scripts read, before the run starts. Needs `delegate` in `tools`.
        #[serde(default)]
        #[schemars(with = "Option<std::collections::BTreeMap<String, Value>>")]
        #[schemars(extend("propertyNames" = {"pattern": "^[A-Za-z0-9_-]+$"}))]
        delegates: Option<Map<String, Value>>,
        /// Values verifiers read as the global `args` (and delegation.pre hooks as `args`).
        #[serde(default)]
        args: Option<Map<String, Value>>,
        /// An inline Starlark verifier defining `def run(result):` (not with verify_file).
        // `None` when absent; `Some(None)` when present but empty (`verify:`), an error.
        #[serde(default, deserialize_with = "present_string")]
        #[schemars(with = "String", regex(pattern = r"\S"))]
        verify: Option<Option<String>>,
        /// A Starlark file defining `def run(result):`, relative to this file (not with verify).
        #[serde(default)]
        #[schemars(regex(pattern = r"\S"))]
        verify_file: Option<PathBuf>,
        /// Retries after a failed attempt, 0 to 100 (default: the project policy's, else 2);
        /// attempts = retries + 1.
        #[serde(default)]
        #[schemars(range(min = 0, max = 100))]
        max_verify_retries: Option<u32>,
        /// Hook files and directories, relative to this file (default: .harness/hooks in the
        /// workspace, if it exists); [] loads none.
        #[serde(default)]
        hooks: Option<Vec<PathBuf>>,
        /// The workspace root every path is confined to, relative to this file (default: this
        /// file's directory).
        #[serde(default)]
        workdir: Option<PathBuf>,
        /// Network access for verifiers and hooks.
        #[serde(default)]
        network: Option<RawNetwork>,
        /// Budgets of the delegation.
        #[serde(default)]
        limits: Option<RawLimits>,
        /// The id of the run this work was delegated from (default: $HARNESS_PARENT_ID); makes a
        /// `when: risky` critic review.
        #[serde(default)]
        #[schemars(regex(pattern = r"\S"))]
        parent_id: Option<String>,
        /// An independent reviewer that runs after every deterministic stage passed; it can send
        /// the work back, never pass it alone.
        #[serde(default)]
        critic: Option<RawCritic>,
        /// Marks the work risky, so a `when: risky` critic reviews it (default false).
        #[serde(default)]
        risk: Option<bool>,
        /// `required`: every non-heading line of the answer cites workspace lines
        /// [[cite:PATH:La-Lb#HEX]] or says [[insufficient]]; `off` (the default).
        #[serde(default)]
        #[schemars(extend("enum" = ["required", "off", null]))]
        citations: Option<String>,
        /// Steps every attempt must take; a step not taken is a blocking `plan` finding.
        #[serde(default)]
        plan: Option<RawPlan>,
    }
}

/// `network:` as written.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "network")]
struct RawNetwork {
    /// Hosts (`*.example.com` wildcards; no scheme, port or path) verifiers and hooks may reach;
    /// loopback and private addresses only when named exactly.
    #[serde(default)]
    allow: Vec<String>,
}

/// `limits:` as written.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "limits")]
struct RawLimits {
    /// Model turns per attempt, at least 1 (default 20); running out is an error, kind timeout.
    #[serde(default)]
    #[schemars(range(min = 1))]
    max_turns: Option<u32>,
    /// Wall clock of the whole delegation in seconds, more than 0, at most 86400 (default:
    /// none); past it, error kind timeout.
    #[serde(default)]
    #[schemars(extend("exclusiveMinimum" = 0, "maximum" = 86400))]
    timeout_s: Option<f64>,
    /// Tokens (input + output, all attempts) of the whole delegation, at least 1 (default:
    /// none); past it, error kind budget.
    #[serde(default)]
    #[schemars(range(min = 1))]
    max_tokens: Option<u64>,
    /// Children of this run that may run at once, 1 to 64 (default 4); more calls wait for a
    /// free slot.
    #[serde(default)]
    #[schemars(range(min = 1, max = 64))]
    max_children: Option<u32>,
    /// How deep a delegation tree may nest, 1 to 8 (default 2; the root is depth 0); a delegate
    /// call deeper is refused.
    #[serde(default)]
    #[schemars(range(min = 1, max = 8))]
    max_depth: Option<u32>,
    /// The largest workspace copied for a child that can change files, in MiB, 1 to 1,048,576
    /// (default 1,024); a bigger one makes such a `delegate` call an error.
    #[serde(default)]
    #[schemars(range(min = 1, max = 1_048_576))]
    isolation_mb: Option<u64>,
    /// Tokens (input + output) the whole delegation tree may spend — this run, its children and
    /// theirs — at least 1 (default: none); read from the root's file. Past it, no member starts
    /// another turn or child and each ends error, kind budget.
    #[serde(default)]
    #[schemars(range(min = 1))]
    max_tree_tokens: Option<u64>,
}

/// A delegation file as it was written, every section validated; the project policy's defaults
/// and the caller's overrides are not applied yet.
#[derive(Debug, Clone)]
pub(crate) struct DelegationFile {
    /// Where it was read from.
    pub(crate) source: PathBuf,
    /// How messages name it: the file, or a batch entry (`batch.jsonl: line 3`).
    pub(crate) label: String,
    pub(crate) task: String,
    pub(crate) delegate: DelegateConfig,
    pub(crate) tools: Vec<String>,
    pub(crate) tool_verifiers: ToolVerifiers,
    pub(crate) args: Value,
    pub(crate) verify: Option<VerifySource>,
    pub(crate) max_verify_retries: Option<u32>,
    /// Hook files and directories, resolved against the file's directory.
    pub(crate) hooks: Option<Vec<PathBuf>>,
    /// The workspace the file names, resolved against its directory.
    pub(crate) workdir: PathBuf,
    pub(crate) allow_hosts: Vec<String>,
    pub(crate) max_turns: u32,
    pub(crate) timeout: Option<Duration>,
    pub(crate) max_tokens: Option<u64>,
    pub(crate) gates: Gates,
    pub(crate) critic: Option<CriticSpec>,
    pub(crate) risk: bool,
    /// The run this work was delegated from (`parent_id:`), when the file says.
    pub(crate) parent_id: Option<String>,
    pub(crate) citations_required: bool,
    pub(crate) plan: Vec<PlanStep>,
    /// Named child profiles (`delegates:`), each validated as a delegation of its own (scripts
    /// read now, so nothing the delegate writes later changes them); empty for a profile.
    pub(crate) profiles: Vec<(String, DelegationFile)>,
    /// `limits.max_children`, `limits.max_depth`, `limits.isolation_mb` and
    /// `limits.max_tree_tokens` as written.
    pub(crate) max_children: Option<u32>,
    pub(crate) max_depth: Option<u32>,
    pub(crate) isolation_mb: Option<u64>,
    pub(crate) max_tree_tokens: Option<u64>,
}

impl DelegationFile {
    /// Reads delegation YAML named `source`; scripts it names are read by `read`, paths are
    /// relative to `base`.
    ///
    /// # Errors
    /// [`ErrorKind::Config`](crate::ErrorKind::Config) naming the file, the key and the fix.
    pub(crate) fn from_yaml(
        source: &Path,
        text: &str,
        base: &Path,
        read: &ReadScript<'_>,
    ) -> Result<Self> {
        let file = source.display().to_string();
        let raw: RawFile = serde_norway::from_str(text).map_err(|e| {
            Error::config(format!(
                "{file}: {} ({KEYS_HINT})",
                crate::plain::plain_yaml(&e.to_string(), text)
            ))
        })?;
        Self::from_raw(source, file, raw, base, read)
    }

    /// Reads one delegation given as a JSON object (an entry of a batch file); `label` names it
    /// in messages (e.g. `batch.yaml: args[3]`).
    ///
    /// # Errors
    /// As [`DelegationFile::from_yaml`], naming the field.
    pub(crate) fn from_json(
        source: &Path,
        label: &str,
        value: Value,
        base: &Path,
        read: &ReadScript<'_>,
    ) -> Result<Self> {
        let raw: RawFile = serde_path_to_error::deserialize(value)
            .map_err(|e| shape_error(label, e.path(), e.inner()))?;
        Self::from_raw(source, label.to_owned(), raw, base, read)
    }

    /// Like [`DelegationFile::from_json`], from the JSON text itself (a batch line): read
    /// straight into the delegation, without a JSON tree in between. Text that is not JSON is
    /// reported as such; JSON of the wrong shape names the field, and where in the line it is.
    ///
    /// # Errors
    /// As [`DelegationFile::from_json`].
    pub(crate) fn from_json_text(
        source: &Path,
        label: &str,
        text: &str,
        base: &Path,
        read: &ReadScript<'_>,
    ) -> Result<Self> {
        // The usual line reads without tracking where the reader is; only a line that fails is
        // read again, with its path, for the message.
        if let Ok(raw) = serde_json::from_str::<RawFile>(text) {
            return Self::from_raw(source, label.to_owned(), raw, base, read);
        }
        let not_json =
            |e: serde_json::Error| Error::config(format!("{label}: not valid JSON: {e}"));
        let mut reader = serde_json::Deserializer::from_str(text);
        let raw: RawFile = match serde_path_to_error::deserialize(&mut reader) {
            Ok(raw) => raw,
            Err(e) if e.inner().is_data() => return Err(shape_error(label, e.path(), e.inner())),
            Err(e) => return Err(not_json(e.into_inner())),
        };
        reader.end().map_err(not_json)?;
        Self::from_raw(source, label.to_owned(), raw, base, read)
    }

    /// This delegation as the profile its own `delegate` calls use by default: the same
    /// delegate, tools and hooks; none of what judges the parent (its checks, criteria,
    /// verifier, critic, scope, plan): a child is held to what its call asks for and to the
    /// project's gates.
    pub(crate) fn as_profile(&self) -> DelegationFile {
        DelegationFile {
            source: self.source.clone(),
            label: self.label.clone(),
            task: String::new(),
            delegate: self.delegate.clone(),
            tools: self.tools.clone(),
            tool_verifiers: self.tool_verifiers.clone(),
            args: Value::Object(Map::new()),
            verify: None,
            max_verify_retries: None,
            hooks: self.hooks.clone(),
            workdir: self.workdir.clone(),
            allow_hosts: self.allow_hosts.clone(),
            max_turns: self.max_turns,
            timeout: None,
            max_tokens: None,
            gates: Gates::default(),
            critic: None,
            risk: false,
            parent_id: None,
            citations_required: false,
            plan: Vec::new(),
            profiles: Vec::new(),
            max_children: None,
            max_depth: None,
            isolation_mb: None,
            max_tree_tokens: None,
        }
    }

    fn from_raw(
        source: &Path,
        file: String,
        mut raw: RawFile,
        base: &Path,
        read: &ReadScript<'_>,
    ) -> Result<Self> {
        let gates = raw.take_gates();
        if raw.task.trim().is_empty() {
            return Err(Error::config(format!(
                "{file}: `task` is empty; say what the delegate should do"
            )));
        }
        let delegate = DelegateConfig::parse(&file, "delegate", raw.delegate, read, base)?;
        let critic = raw
            .critic
            .map(|critic| CriticSpec::parse(&file, critic, read, base))
            .transpose()?;
        let citations_required = match raw.citations.as_deref() {
            None | Some("off") => false,
            Some("required") => true,
            Some(other) => {
                return Err(Error::config(format!(
                    "{file}: `citations` is {other:?}; use `required` (every claim of the answer cites its evidence) or `off`"
                )));
            }
        };
        let plan = match raw.plan {
            None => Vec::new(),
            Some(plan) => PlanStep::parse_list(&file, plan)?,
        };
        let (tools, tool_verifiers) = Tool::parse_list(&file, source, raw.tools, read)?;
        // Named after the file, not the batch line: the name is part of the compiled-script
        // cache key, so identical inline verifiers on many lines compile once.
        let verify = VerifySource::from_keys(
            &file,
            format!("{}#verify", source.display()),
            "def run(result):",
            raw.verify,
            ("verify_file", raw.verify_file),
            read,
        )?;
        let gates = Gates::parse(&file, base, gates)?;
        let limits = raw.limits.unwrap_or_default();
        for (key, value) in [
            ("max_tokens", limits.max_tokens),
            ("max_tree_tokens", limits.max_tree_tokens),
        ] {
            if value == Some(0) {
                return Err(Error::config(format!(
                    "{file}: `limits.{key}` must be at least 1 (leave it out for no token budget)"
                )));
            }
        }
        let max_turns = limits.max_turns.unwrap_or(DEFAULT_MAX_TURNS);
        if max_turns == 0 {
            return Err(Error::config(format!(
                "{file}: `limits.max_turns` must be at least 1"
            )));
        }
        let timeout = limits
            .timeout_s
            .map(|s| seconds(&file, "limits.timeout_s", Some(s), 0.0))
            .transpose()?;
        crate::tree::profile::check_limits(&file, limits.max_children, limits.max_depth)?;
        if let Some(mb) = limits
            .isolation_mb
            .filter(|mb| !(1..=1_048_576).contains(mb))
        {
            return Err(Error::config(format!(
                "{file}: `limits.isolation_mb` is {mb}; give 1 to 1048576 MiB (the default is {})",
                crate::tree::isolate::DEFAULT_ISOLATION_MB
            )));
        }
        let offers = tools
            .iter()
            .any(|t| t == crate::tools::Tool::Delegate.name());
        crate::tree::profile::check_offer(&file, offers, &delegate, raw.delegates.is_some())?;
        let profiles = match raw.delegates {
            None => Vec::new(),
            Some(named) => parse_profiles(&file, source, named, base, read)?,
        };
        Ok(DelegationFile {
            source: source.to_path_buf(),
            task: raw.task,
            delegate,
            tools,
            tool_verifiers,
            args: Value::Object(raw.args.unwrap_or_default()),
            verify,
            max_verify_retries: raw.max_verify_retries,
            hooks: raw.hooks.map(|h| h.iter().map(|p| base.join(p)).collect()),
            workdir: base.join(raw.workdir.unwrap_or_else(|| PathBuf::from("."))),
            allow_hosts: raw.network.map(|n| n.allow).unwrap_or_default(),
            max_turns,
            timeout,
            max_tokens: limits.max_tokens,
            gates,
            critic,
            risk: raw.risk.unwrap_or(false),
            parent_id: match raw.parent_id.map(|p| p.trim().to_owned()) {
                Some(p) if p.is_empty() => {
                    return Err(Error::config(format!(
                        "{file}: `parent_id` is empty; give the id of the run this work was delegated from, or leave the key out"
                    )));
                }
                p => p,
            },
            citations_required,
            plan,
            profiles,
            max_children: limits.max_children,
            max_depth: limits.max_depth,
            isolation_mb: limits.isolation_mb,
            max_tree_tokens: limits.max_tree_tokens,
            label: file,
        })
    }
}

/// A delegation of the wrong shape: the file or line, the field, what is wrong, and the keys.
fn shape_error(
    label: &str,
    path: &serde_path_to_error::Path,
    what: impl std::fmt::Display,
) -> Error {
    let path = path.to_string();
    let place = if path == "." {
        String::new()
    } else {
        format!("`{path}`: ")
    };
    let what = crate::plain::plain(&what.to_string());
    Error::config(format!("{label}: {place}{what} ({KEYS_HINT})"))
}

/// Reads `delegates:`: each entry a delegation without its task, validated now (its scripts
/// read now, so a delegate that rewrites them later changes nothing).
///
/// # Errors
/// [`ErrorKind::Config`](crate::ErrorKind::Config) naming the profile and the key.
pub(crate) fn parse_profiles(
    file: &str,
    source: &Path,
    named: Map<String, Value>,
    base: &Path,
    read: &ReadScript<'_>,
) -> Result<Vec<(String, DelegationFile)>> {
    let mut profiles = Vec::new();
    for (name, value) in named {
        let at = format!("{file}: `delegates.{name}`");
        if name.is_empty()
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        {
            return Err(Error::config(format!(
                "{at}: a profile name is letters, digits, `-` and `_`"
            )));
        }
        let Value::Object(mut map) = value else {
            return Err(Error::config(format!(
                "{at}: expected a mapping like a delegation file without `task` (at least `delegate:`), got {value}"
            )));
        };
        if let Some((key, why)) = NOT_IN_PROFILE.iter().find(|(k, _)| map.contains_key(*k)) {
            return Err(Error::config(format!(
                "{at}: `{key}` is not allowed in a profile: {why}"
            )));
        }
        map.insert("task".to_owned(), Value::String(PROFILE_TASK.to_owned()));
        // A script the profile names is read by the file's reader, which names the file only.
        let profile = DelegationFile::from_json(source, &at, Value::Object(map), base, read)
            .map_err(|e| match e.message().strip_prefix(&format!("{file}: ")) {
                Some(rest) if !rest.starts_with('`') || !rest.contains("delegates.") => {
                    Error::config(format!("{at}: {rest}"))
                }
                _ => e,
            })?;
        profiles.push((name, profile));
    }
    Ok(profiles)
}

/// The script files a delegation (or a child profile) reads: its verifier, its per-tool
/// verifiers, and the scripts of a scripted delegate and critic.
pub(crate) fn script_paths(
    verify: Option<&VerifySource>,
    tool_verifiers: &[(String, VerifySource)],
    delegate: &DelegateConfig,
    critic: Option<&CriticSpec>,
) -> Vec<PathBuf> {
    let verifiers = verify
        .into_iter()
        .chain(tool_verifiers.iter().map(|(_, v)| v));
    let mut paths: Vec<PathBuf> = verifiers.filter_map(|v| v.path.clone()).collect();
    for delegate in std::iter::once(delegate).chain(critic.and_then(|c| c.delegate.as_ref())) {
        if let DelegateConfig::Scripted { path, .. } = delegate {
            paths.push(path.clone());
        }
    }
    paths
}
