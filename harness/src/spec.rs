//! The delegation file (DESIGN §6): strict YAML, validated into a [`Delegation`] before anything
//! runs. Unknown keys, wrong types, missing or conflicting keys and missing script files are
//! configuration errors naming the file, the key and what is expected.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use serde_json::{Map, Value};

use harness_builtins::Limits;

use crate::assembly::Assembler;
use crate::checks::{CheckSpec, Criterion};
use crate::delegate::{AgentKind, AgentSpec, AnthropicSpec, CommandSpec, OpenAiSpec};
use crate::error::{Error, Result};
use crate::redact::Redactor;
use crate::scope::{OnViolation, ScopeSpec};
use crate::tools::Tool;

const KEYS_HINT: &str = "see the delegation file reference: task, delegate, tools, args, checks, criteria, require_checks, scope, verify | verify_file, max_verify_retries, stuck_after, critic, risk, citations, plan, hooks, workdir, network, limits";

/// Default `max_verify_retries`.
pub const DEFAULT_MAX_VERIFY_RETRIES: u32 = 2;
/// The most `max_verify_retries` a delegation may ask for, however it asks.
pub const MAX_VERIFY_RETRIES: u32 = 100;

/// Reads a string and nothing else: YAML would otherwise turn `task: 123` or `task: yes` into
/// the text "123" or "yes" without a word.
fn string_only<'de, D: serde::Deserializer<'de>>(d: D) -> std::result::Result<String, D::Error> {
    struct Text;
    impl serde::de::Visitor<'_> for Text {
        type Value = String;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a string")
        }
        fn visit_str<E: serde::de::Error>(self, v: &str) -> std::result::Result<String, E> {
            Ok(v.to_owned())
        }
        fn visit_string<E: serde::de::Error>(self, v: String) -> std::result::Result<String, E> {
            Ok(v)
        }
    }
    d.deserialize_any(Text)
}

/// A key that may be present but empty: `Some(None)` for `verify:` (null), `Some(Some(text))`
/// for a string; absent keys are `None` through `#[serde(default)]`.
fn present_string<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> std::result::Result<Option<Option<String>>, D::Error> {
    #[derive(Deserialize)]
    struct Strict(#[serde(deserialize_with = "string_only")] String);
    Ok(Some(Option::<Strict>::deserialize(d)?.map(|s| s.0)))
}
/// Default `limits.max_turns` (per attempt).
pub const DEFAULT_MAX_TURNS: u32 = 20;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    #[serde(deserialize_with = "string_only")]
    task: String,
    delegate: RawDelegate,
    #[serde(default)]
    tools: Vec<Value>,
    #[serde(default)]
    args: Option<Map<String, Value>>,
    /// `None` when absent; `Some(None)` when present but empty (`verify:`), which is an error.
    #[serde(default, deserialize_with = "present_string")]
    verify: Option<Option<String>>,
    #[serde(default)]
    verify_file: Option<PathBuf>,
    #[serde(default)]
    max_verify_retries: Option<u32>,
    #[serde(default)]
    hooks: Option<Vec<PathBuf>>,
    #[serde(default)]
    workdir: Option<PathBuf>,
    #[serde(default)]
    network: Option<RawNetwork>,
    #[serde(default)]
    limits: Option<RawLimits>,
    #[serde(default)]
    checks: Option<Vec<RawCheck>>,
    #[serde(default)]
    criteria: Option<Vec<Value>>,
    #[serde(default)]
    require_checks: Option<bool>,
    #[serde(default)]
    scope: Option<RawScope>,
    #[serde(default)]
    stuck_after: Option<u32>,
    #[serde(default)]
    critic: Option<RawCritic>,
    #[serde(default)]
    risk: Option<bool>,
    #[serde(default)]
    citations: Option<String>,
    #[serde(default)]
    plan: Option<RawPlan>,
}

/// `plan:` as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPlan {
    #[serde(default)]
    required_steps: Vec<Map<String, Value>>,
}

/// `critic:` as written, in a delegation file or a project policy's `verification_defaults`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawCritic {
    #[serde(default)]
    delegate: Option<RawDelegate>,
    #[serde(default)]
    when: Option<String>,
    #[serde(default)]
    criteria: Option<String>,
    #[serde(default)]
    on_exhausted: Option<String>,
    #[serde(default)]
    max_turns: Option<u32>,
}

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

/// What a spent retry budget does when only the critic still objects (`critic.on_exhausted`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnExhausted {
    /// `passed_with_debt`: the run passes, the objections are listed as debt, a human reviews.
    Debt,
    /// `failed`, kind `critic_rejected`.
    Fail,
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
    /// Turns the reviewer may take (reading files) before its verdict.
    pub max_turns: u32,
}

/// `scope:` as written, in a delegation file or a project policy's `verification_defaults`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawScope {
    #[serde(default)]
    allow: Vec<String>,
    #[serde(default)]
    deny: Vec<String>,
    #[serde(default)]
    ignore: Vec<String>,
    #[serde(default)]
    on_violation: Option<String>,
}

/// One `checks:` entry as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawCheck {
    #[serde(deserialize_with = "string_only")]
    name: String,
    #[serde(default)]
    run: Option<String>,
    #[serde(default)]
    argv: Option<Vec<String>>,
    #[serde(default)]
    required: Option<bool>,
    #[serde(default)]
    timeout_s: Option<f64>,
    #[serde(default)]
    env: Option<Map<String, Value>>,
    #[serde(default)]
    parallel: Option<bool>,
}

#[derive(Debug, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase", deny_unknown_fields)]
enum RawDelegate {
    Scripted {
        script: PathBuf,
    },
    Openai(RawModel),
    Command {
        command: Vec<String>,
        #[serde(default)]
        timeout_s: Option<f64>,
    },
    Anthropic(RawModel),
    Claude(RawAgent),
    Codex(RawAgent),
    Gemini(RawAgent),
    Aider(RawAgent),
}

/// A model delegate's settings (`kind: openai | anthropic`).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawModel {
    model: String,
    #[serde(default)]
    base_url: Option<String>,
    #[serde(default)]
    api_key_env: Option<String>,
    #[serde(default)]
    temperature: Option<f64>,
    #[serde(default)]
    max_tokens: Option<u32>,
    #[serde(default)]
    timeout_s: Option<f64>,
    #[serde(default)]
    max_retries: Option<u32>,
}

/// An agent CLI preset's settings (`kind: claude | codex | gemini | aider`).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawAgent {
    #[serde(default)]
    binary: Option<String>,
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    env: std::collections::BTreeMap<String, String>,
    #[serde(default)]
    timeout_s: Option<f64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawNetwork {
    #[serde(default)]
    allow: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLimits {
    #[serde(default)]
    max_turns: Option<u32>,
    #[serde(default)]
    timeout_s: Option<f64>,
    #[serde(default)]
    max_tokens: Option<u64>,
}

/// The delegate a delegation file asks for, with its settings resolved.
#[derive(Debug, Clone, PartialEq)]
pub enum DelegateConfig {
    /// A Starlark script playing the model.
    Scripted {
        /// The script's path (for messages).
        path: PathBuf,
        /// The script's source.
        source: String,
    },
    /// An OpenAI-compatible server.
    OpenAi(OpenAiSpec),
    /// Anthropic's Messages API.
    Anthropic(AnthropicSpec),
    /// An agent CLI; `workdir` is filled in when the delegation runs.
    Command(CommandSpec),
    /// An agent CLI preset resumed across attempts; `workdir` is filled in when the delegation
    /// runs.
    Agent(AgentSpec),
}

impl DelegateConfig {
    /// Returns the kind name: `scripted`, `openai` or `command`.
    pub fn kind(&self) -> &'static str {
        match self {
            DelegateConfig::Scripted { .. } => "scripted",
            DelegateConfig::OpenAi(_) => "openai",
            DelegateConfig::Anthropic(_) => "anthropic",
            DelegateConfig::Command(_) => "command",
            DelegateConfig::Agent(spec) => spec.kind.name(),
        }
    }

    /// The agent's name in traces (`gen_ai.agent.name`): the program of a command delegate
    /// (`claude`, `codex`, ...), else the kind.
    pub fn agent_name(&self) -> &str {
        match self {
            DelegateConfig::Command(spec) => spec
                .command
                .first()
                .and_then(|program| Path::new(program).file_name())
                .and_then(|name| name.to_str())
                .unwrap_or("command"),
            other => other.kind(),
        }
    }
}

/// An inline verifier's name (for messages) and source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifySource {
    /// The file name, or `<file>#verify` for an inline script.
    pub name: String,
    /// The `verify_file` it was read from; `None` for an inline script.
    pub path: Option<PathBuf>,
    /// The Starlark source.
    pub source: String,
}

/// A validated delegation, ready to run: the delegation file with the project policy's defaults
/// and the caller's overrides applied (see [`Assembler`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Delegation {
    /// Where it was read from (for messages).
    pub source: PathBuf,
    /// What the delegate is asked to do.
    pub task: String,
    /// Who does it.
    pub delegate: DelegateConfig,
    /// Tools offered to the delegate.
    pub tools: Vec<String>,
    /// The verifier's `args`.
    pub args: Value,
    /// The inline verifier, if any.
    pub verify: Option<VerifySource>,
    /// Retries after a failed verification; total attempts are this plus one.
    pub max_verify_retries: u32,
    /// Hook files and directories, when the file lists them.
    pub hooks: Option<Vec<PathBuf>>,
    /// Hook files and directories added by the caller (`--hooks`), after the file's own.
    pub extra_hooks: Vec<PathBuf>,
    /// The workspace root.
    pub workdir: PathBuf,
    /// Hosts verifiers and hooks may reach.
    pub allow_hosts: Vec<String>,
    /// Programs verifiers and hooks may run with `exec.run`.
    pub allow_exec: Vec<String>,
    /// Environment variables verifiers and hooks may read with `env.get`.
    pub allow_env: Vec<String>,
    /// The budgets every script of this delegation runs under (project policy `limits:`).
    pub limits: Limits,
    /// Turns allowed per attempt.
    pub max_turns: u32,
    /// Wall-clock budget of the whole delegation.
    pub timeout: Option<Duration>,
    /// Token budget (input + output, all attempts) of the whole delegation.
    pub max_tokens: Option<u64>,
    /// The secret patterns scrubbed from what the run reports (project policy `redact:`).
    pub redact: Redactor,
    /// The caller's W3C `traceparent`, made the parent of the delegation's root span.
    pub trace_parent: Option<String>,
    /// The run journal the caller writes, refused to delegate tools like the rest of the policy.
    pub journal: Option<PathBuf>,
    /// Run `run_command` children under bubblewrap (project policy `commands.isolation: bwrap`).
    pub isolate_commands: bool,
    /// Commands that judge every attempt by exit code, before the verifier (`checks:`, then the
    /// command criteria of `criteria:`).
    pub checks: Vec<CheckSpec>,
    /// Facts about the workspace every attempt must make true (`criteria:`).
    pub criteria: Vec<Criterion>,
    /// Without checks and criteria the delegation fails as `no_gate` (`require_checks: true`).
    pub require_checks: bool,
    /// What the delegate may change (`scope:`); `None`: no baseline is taken.
    pub scope: Option<ScopeSpec>,
    /// The same blocking finding on this many consecutive attempts ends the loop as `stuck`
    /// (0: never).
    pub stuck_after: u32,
    /// The independent reviewer (`critic:`), after the deterministic stages.
    pub critic: Option<CriticSpec>,
    /// The caller marked the work risky (`risk: true`): a `when: risky` critic reviews it.
    pub risk: bool,
    /// Every claim of the answer must cite its evidence (`citations: required`).
    pub citations_required: bool,
    /// Steps every attempt must take (`plan.required_steps`).
    pub plan: Vec<crate::checks::PlanStep>,
    /// Per-tool verifiers (`tools: [{name, verify | verify_file}]`): `run(call, result)` judges
    /// each call of that tool as it returns.
    pub tool_verifiers: Vec<(String, VerifySource)>,
}

/// The default `stuck_after`.
pub const DEFAULT_STUCK_AFTER: u32 = 3;

/// The gates a delegation file or a project policy's `verification_defaults` names, validated.
/// Each key is `None` when not given, so that a request's keys override the defaults one by one.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Gates {
    pub(crate) checks: Option<Vec<CheckSpec>>,
    /// Command criteria (run as checks) and the others.
    pub(crate) criteria: Option<(Vec<CheckSpec>, Vec<Criterion>)>,
    pub(crate) require_checks: Option<bool>,
    pub(crate) scope: Option<ScopeSpec>,
    pub(crate) stuck_after: Option<u32>,
}

impl Gates {
    /// Validates the raw keys; `file` names where they were written in messages.
    pub(crate) fn parse(
        file: &str,
        checks: Option<Vec<RawCheck>>,
        criteria_list: Option<Vec<Value>>,
        require_checks: Option<bool>,
        scope: Option<RawScope>,
        stuck_after: Option<u32>,
    ) -> Result<Self> {
        Ok(Gates {
            checks: checks.map(|c| check_specs(file, c)).transpose()?,
            criteria: criteria_list.map(|c| criteria(file, c)).transpose()?,
            require_checks,
            scope: scope.map(|s| scope_spec(file, s)).transpose()?,
            stuck_after,
        })
    }

    /// These gates, each key missing here taken from `defaults`; `file` and `defaults_file`
    /// name both in messages.
    fn over(self, defaults: &Gates, file: &str, defaults_file: &str) -> Result<Gates> {
        let gates = Gates {
            checks: self.checks.or_else(|| defaults.checks.clone()),
            criteria: self.criteria.or_else(|| defaults.criteria.clone()),
            require_checks: self.require_checks.or(defaults.require_checks),
            scope: self.scope.or_else(|| defaults.scope.clone()),
            stuck_after: self.stuck_after.or(defaults.stuck_after),
        };
        let commands = gates.checks.iter().flatten();
        let named = gates.criteria.iter().flat_map(|(c, _)| c.iter());
        let mut seen = std::collections::HashSet::new();
        for check in commands.chain(named) {
            if !seen.insert(check.name.as_str()) {
                return Err(Error::config(format!(
                    "{file}: a check and a command criterion are both named {:?} (with the defaults of {defaults_file}); names must be unique",
                    check.name
                )));
            }
        }
        Ok(gates)
    }
}

/// Validates `scope:`.
fn scope_spec(file: &str, raw: RawScope) -> Result<ScopeSpec> {
    let on_violation = match raw.on_violation.as_deref() {
        None | Some("fail") => OnViolation::Fail,
        Some("retry") => OnViolation::Retry,
        Some(other) => {
            return Err(Error::config(format!(
                "{file}: `scope.on_violation` is {other:?}; use `fail` (the default: end the delegation) or `retry` (tell the delegate and let it retry)"
            )));
        }
    };
    let spec = ScopeSpec {
        allow: raw.allow,
        deny: raw.deny,
        ignore: raw.ignore,
        on_violation,
    };
    spec.validate(file)?;
    Ok(spec)
}

fn seconds(file: &str, key: &str, value: Option<f64>, default: f64) -> Result<Duration> {
    let s = value.unwrap_or(default);
    if s.is_finite() && s > 0.0 && s <= 86_400.0 {
        Ok(Duration::from_secs_f64(s))
    } else {
        Err(Error::config(format!(
            "{file}: `{key}` must be a number of seconds between 0 and 86400, got {s}"
        )))
    }
}

impl Delegation {
    /// Validates delegation YAML named `source`, resolving relative paths against `base`.
    pub(crate) fn from_yaml(
        assembler: &Assembler,
        source: &Path,
        text: &str,
        base: &Path,
    ) -> Result<Self> {
        let file = source.display().to_string();
        let raw: RawFile = serde_norway::from_str(text)
            .map_err(|e| Error::config(format!("{file}: {e} ({KEYS_HINT})")))?;
        Self::from_raw(assembler, source, &file, raw, base)
    }

    /// Validates one delegation given as a JSON object (an entry of a batch file); `label` names
    /// it in messages (e.g. `batch.yaml: args[3]`).
    pub(crate) fn from_json(
        assembler: &Assembler,
        source: &Path,
        label: &str,
        value: serde_json::Value,
        base: &Path,
    ) -> Result<Self> {
        let raw: RawFile = serde_path_to_error::deserialize(value)
            .map_err(|e| shape_error(label, e.path(), e.inner()))?;
        Self::from_raw(assembler, source, label, raw, base)
    }

    /// Like [`Delegation::from_json`], from the JSON text itself (a batch line): read straight
    /// into the delegation, without a JSON tree in between. Text that is not JSON is reported as
    /// such; JSON of the wrong shape names the field, and where in the line it is.
    pub(crate) fn from_json_text(
        assembler: &Assembler,
        source: &Path,
        label: &str,
        text: &str,
        base: &Path,
    ) -> Result<Self> {
        // The usual line reads without tracking where the reader is; only a line that fails is
        // read again, with its path, for the message.
        if let Ok(raw) = serde_json::from_str::<RawFile>(text) {
            return Self::from_raw(assembler, source, label, raw, base);
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
        Self::from_raw(assembler, source, label, raw, base)
    }

    fn from_raw(
        assembler: &Assembler,
        source: &Path,
        file: &str,
        raw: RawFile,
        base: &Path,
    ) -> Result<Self> {
        let file = file.to_owned();
        if raw.task.trim().is_empty() {
            return Err(Error::config(format!(
                "{file}: `task` is empty; say what the delegate should do"
            )));
        }
        let read = |key: &str, rel: &Path| -> Result<(PathBuf, String)> {
            let full = base.join(rel);
            let text = assembler.script(&full).map_err(|e| {
                Error::config(format!(
                    "{file}: `{key}`: cannot read {}: {e}",
                    full.display()
                ))
            })?;
            Ok((full, text))
        };
        let delegate = delegate_config(&file, "delegate", raw.delegate, &read, base)?;
        let critic = match raw.critic {
            None => None,
            Some(critic) => Some(critic_spec(&file, critic, &read, base)?),
        };
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
            Some(plan) => plan_steps(&file, plan.required_steps)?,
        };
        let (tools, tool_verifiers) = tool_list(&file, source, raw.tools, &read)?;
        let verify = match raw.verify {
            Some(Some(script)) if !script.trim().is_empty() => Some(script),
            Some(_) => {
                return Err(Error::config(format!(
                    "{file}: `verify` is empty; give a Starlark script defining `def run(result):`, or remove the key"
                )));
            }
            None => None,
        };
        let verify = match (verify, raw.verify_file) {
            (Some(_), Some(_)) => {
                return Err(Error::config(format!(
                    "{file}: give `verify` (inline script) or `verify_file` (a path), not both"
                )));
            }
            // Named after the file, not the batch line: the name is part of the compiled-script
            // cache key, so identical inline verifiers on many lines compile once.
            (Some(script), None) => Some(VerifySource {
                name: format!("{}#verify", source.display()),
                path: None,
                source: script,
            }),
            (None, Some(rel)) => {
                let (path, source) = read("verify_file", &rel)?;
                Some(VerifySource {
                    name: path.display().to_string(),
                    path: Some(path),
                    source,
                })
            }
            (None, None) => None,
        };
        let gates = Gates::parse(
            &file,
            raw.checks,
            raw.criteria,
            raw.require_checks,
            raw.scope,
            raw.stuck_after,
        )?;
        let limits = raw.limits.unwrap_or(RawLimits {
            max_turns: None,
            timeout_s: None,
            max_tokens: None,
        });
        if limits.max_tokens == Some(0) {
            return Err(Error::config(format!(
                "{file}: `limits.max_tokens` must be at least 1 (leave it out for no token budget)"
            )));
        }
        let max_turns = limits.max_turns.unwrap_or(DEFAULT_MAX_TURNS);
        if max_turns == 0 {
            return Err(Error::config(format!(
                "{file}: `limits.max_turns` must be at least 1"
            )));
        }
        let timeout = match limits.timeout_s {
            Some(s) => Some(seconds(&file, "limits.timeout_s", Some(s), 0.0)?),
            None => None,
        };
        let overrides = assembler.overrides();
        let workdir = match &overrides.workdir {
            Some(dir) => dir.clone(),
            None => base.join(raw.workdir.unwrap_or_else(|| PathBuf::from("."))),
        };
        let project = assembler.project_policy(&workdir)?;
        let gates = gates.over(
            &project.defaults,
            &file,
            &workdir
                .join(crate::project::PROJECT_POLICY)
                .display()
                .to_string(),
        )?;
        let (command_criteria, criteria) = gates.criteria.unwrap_or_default();
        let mut checks = gates.checks.unwrap_or_default();
        checks.extend(command_criteria);
        for (source, retries) in [
            ("--max-verify-retries", overrides.max_verify_retries),
            ("`max_verify_retries`", raw.max_verify_retries),
        ] {
            if let Some(n) = retries.filter(|n| *n > MAX_VERIFY_RETRIES) {
                return Err(Error::config(format!(
                    "{file}: {source} is {n}; at most {MAX_VERIFY_RETRIES} retries are allowed"
                )));
            }
        }
        let mut allow_hosts = raw.network.map(|n| n.allow).unwrap_or_default();
        allow_hosts.extend(overrides.allow_hosts.iter().cloned());
        Ok(Delegation {
            source: source.to_path_buf(),
            task: raw.task,
            delegate,
            tools,
            tool_verifiers,
            args: Value::Object(raw.args.unwrap_or_default()),
            verify,
            max_verify_retries: overrides
                .max_verify_retries
                .or(raw.max_verify_retries)
                .or(project.max_verify_retries)
                .unwrap_or(DEFAULT_MAX_VERIFY_RETRIES),
            hooks: raw.hooks.map(|h| h.iter().map(|p| base.join(p)).collect()),
            extra_hooks: overrides.hooks.clone(),
            workdir,
            allow_hosts,
            allow_exec: overrides.allow_exec.clone(),
            allow_env: overrides.allow_env.clone(),
            limits: project.limits.clone(),
            max_turns,
            timeout,
            max_tokens: limits.max_tokens,
            redact: project.redact.clone(),
            trace_parent: overrides.trace_parent.clone(),
            journal: overrides.journal.clone(),
            isolate_commands: project.isolate_commands,
            checks,
            criteria,
            require_checks: gates.require_checks.unwrap_or(false),
            scope: gates.scope,
            stuck_after: gates.stuck_after.unwrap_or(DEFAULT_STUCK_AFTER),
            critic: critic.or_else(|| project.critic.clone()),
            risk: raw.risk.unwrap_or(false),
            citations_required,
            plan,
        })
    }
}

/// Reads a script named by a key, relative to the delegation file: its full path and text.
pub(crate) type ReadScript<'a> = dyn Fn(&str, &Path) -> Result<(PathBuf, String)> + 'a;

/// A model delegate's settings, checked.
struct ModelSettings {
    model: String,
    base_url: Option<String>,
    api_key_env: Option<String>,
    temperature: Option<f64>,
    max_tokens: Option<u32>,
    timeout: Duration,
    max_retries: Option<u32>,
}

/// Checks a model delegate's settings: `model` not empty, `temperature` from 0 to `max_temperature`,
/// `base_url` an http(s) URL without credentials, and `api_key_env` (`none` for a server that
/// takes no key, else the variable, `default_key` when not given) holding a key now.
fn model_settings(
    file: &str,
    key: &str,
    raw: RawModel,
    max_temperature: f64,
    default_key: Option<String>,
) -> Result<ModelSettings> {
    if raw.model.trim().is_empty() {
        return Err(Error::config(format!("{file}: `{key}.model` is empty")));
    }
    if let Some(t) = raw
        .temperature
        .filter(|t| !(0.0..=max_temperature).contains(t))
    {
        return Err(Error::config(format!(
            "{file}: `{key}.temperature` must be between 0 and {max_temperature}, got {t}"
        )));
    }
    if let Some(url) = &raw.base_url {
        crate::delegate::check_base_url(url)
            .map_err(|why| Error::config(format!("{file}: `{key}.base_url` {why}")))?;
    }
    let api_key_env = match raw.api_key_env.as_deref() {
        Some("none") => None,
        Some(var) if var.trim().is_empty() => {
            return Err(Error::config(format!(
                "{file}: `{key}.api_key_env` is empty; name the variable holding the key, or write `none` for a server that takes no key"
            )));
        }
        Some(var) => Some(var.to_owned()),
        None => default_key,
    };
    if let Some(var) = &api_key_env {
        crate::delegate::api_key(var)
            .map_err(|why| Error::config(format!("{file}: `{key}.api_key_env` {why}")))?;
    }
    Ok(ModelSettings {
        model: raw.model,
        base_url: raw.base_url,
        api_key_env,
        temperature: raw.temperature,
        max_tokens: raw.max_tokens,
        timeout: seconds(file, &format!("{key}.timeout_s"), raw.timeout_s, 120.0)?,
        max_retries: raw.max_retries,
    })
}

/// Validates a `delegate:` mapping (or `critic.delegate:`, named `key` in messages); paths in it
/// are relative to `base`.
fn delegate_config(
    file: &str,
    key: &str,
    raw: RawDelegate,
    read: &ReadScript<'_>,
    base: &Path,
) -> Result<DelegateConfig> {
    let agent = |kind: AgentKind, raw: RawAgent| -> Result<DelegateConfig> {
        let binary = match raw.binary.as_deref() {
            Some(b) if b.trim().is_empty() => {
                return Err(Error::config(format!(
                    "{file}: `{key}.binary` is empty; leave it out to use `{}` on PATH",
                    kind.name()
                )));
            }
            Some(b) => crate::delegate::binary_path(base, b),
            None => PathBuf::from(kind.name()),
        };
        if raw.model.as_deref().is_some_and(|m| m.trim().is_empty()) {
            return Err(Error::config(format!(
                "{file}: `{key}.model` is empty; leave it out for the CLI's default"
            )));
        }
        if let Some(name) = raw.env.keys().find(|k| k.is_empty() || k.contains('=')) {
            return Err(Error::config(format!(
                "{file}: `{key}.env` has an invalid variable name {name:?}"
            )));
        }
        Ok(DelegateConfig::Agent(AgentSpec {
            kind,
            binary,
            model: raw.model,
            args: raw.args,
            env: raw.env.into_iter().collect(),
            timeout: seconds(file, &format!("{key}.timeout_s"), raw.timeout_s, 1800.0)?,
            workdir: PathBuf::new(),
        }))
    };
    Ok(match raw {
        RawDelegate::Claude(raw) => agent(AgentKind::Claude, raw)?,
        RawDelegate::Codex(raw) => agent(AgentKind::Codex, raw)?,
        RawDelegate::Gemini(raw) => agent(AgentKind::Gemini, raw)?,
        RawDelegate::Aider(raw) => agent(AgentKind::Aider, raw)?,
        RawDelegate::Scripted { script } => {
            let (path, source) = read(&format!("{key}.script"), &script)?;
            DelegateConfig::Scripted { path, source }
        }
        RawDelegate::Openai(raw) => {
            let mut spec = OpenAiSpec::new(String::new());
            let given = model_settings(file, key, raw, 2.0, spec.api_key_env.take())?;
            spec.model = given.model;
            spec.base_url = given.base_url.unwrap_or(spec.base_url);
            spec.api_key_env = given.api_key_env;
            spec.temperature = given.temperature;
            spec.max_tokens = given.max_tokens;
            spec.request_timeout = given.timeout;
            spec.max_retries = given.max_retries.unwrap_or(spec.max_retries);
            DelegateConfig::OpenAi(spec)
        }
        RawDelegate::Anthropic(raw) => {
            let mut spec = AnthropicSpec::new(String::new());
            let given = model_settings(file, key, raw, 1.0, spec.api_key_env.take())?;
            if given.max_tokens == Some(0) {
                return Err(Error::config(format!(
                    "{file}: `{key}.max_tokens` must be at least 1"
                )));
            }
            spec.model = given.model;
            spec.base_url = given.base_url.unwrap_or(spec.base_url);
            spec.api_key_env = given.api_key_env;
            spec.temperature = given.temperature;
            spec.max_tokens = given.max_tokens.unwrap_or(spec.max_tokens);
            spec.request_timeout = given.timeout;
            spec.max_retries = given.max_retries.unwrap_or(spec.max_retries);
            DelegateConfig::Anthropic(spec)
        }
        RawDelegate::Command { command, timeout_s } => {
            if command.first().is_none_or(|p| p.trim().is_empty()) {
                return Err(Error::config(format!(
                    "{file}: `{key}.command` must be a non-empty list [program, args...]"
                )));
            }
            DelegateConfig::Command(CommandSpec {
                command,
                workdir: PathBuf::new(),
                timeout: seconds(file, &format!("{key}.timeout_s"), timeout_s, 600.0)?,
            })
        }
    })
}

/// Per-tool verifiers: the tool's name and its script.
type ToolVerifiers = Vec<(String, VerifySource)>;

/// Validates `tools:`: names, or `{name, verify | verify_file}` mappings. Returns the names and
/// the per-tool verifiers.
fn tool_list(
    file: &str,
    source: &Path,
    raw: Vec<Value>,
    read: &ReadScript<'_>,
) -> Result<(Vec<String>, ToolVerifiers)> {
    let known = || {
        Tool::ALL
            .iter()
            .map(|t| t.name())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut names = Vec::new();
    let mut verifiers = Vec::new();
    for (i, entry) in raw.into_iter().enumerate() {
        let at = format!("{file}: `tools[{i}]`");
        let name = match entry {
            Value::String(name) => name,
            Value::Object(map) => {
                if let Some(key) = map
                    .keys()
                    .find(|k| !["name", "verify", "verify_file"].contains(&k.as_str()))
                {
                    return Err(Error::config(format!(
                        "{at}: unknown key `{key}`; a tool is a name or {{name, verify | verify_file}}"
                    )));
                }
                let Some(Value::String(name)) = map.get("name") else {
                    return Err(Error::config(format!(
                        "{at}: `name` is missing or not a string"
                    )));
                };
                let verifier = match (map.get("verify"), map.get("verify_file")) {
                    (Some(Value::String(script)), None) if !script.trim().is_empty() => {
                        VerifySource {
                            name: format!("{}#tools.{name}.verify", source.display()),
                            path: None,
                            source: script.clone(),
                        }
                    }
                    (None, Some(Value::String(rel))) => {
                        let (path, text) =
                            read(&format!("tools[{i}].verify_file"), Path::new(rel))?;
                        VerifySource {
                            name: path.display().to_string(),
                            path: Some(path),
                            source: text,
                        }
                    }
                    (None, None) => {
                        return Err(Error::config(format!(
                            "{at} ({name}): give `verify` (a script defining `def run(call, result):`) or `verify_file`, or write the tool as a plain name"
                        )));
                    }
                    _ => {
                        return Err(Error::config(format!(
                            "{at} ({name}): give one of `verify` (an inline script) and `verify_file` (a path), as a non-empty string"
                        )));
                    }
                };
                verifiers.push((name.clone(), verifier));
                name.clone()
            }
            other => {
                return Err(Error::config(format!(
                    "{at}: expected a tool name or {{name, verify}}, got {other}"
                )));
            }
        };
        if Tool::from_name(&name).is_none() {
            return Err(Error::config(format!(
                "{file}: `tools`: unknown tool {name:?} (known tools: {})",
                known()
            )));
        }
        names.push(name);
    }
    Ok((names, verifiers))
}

/// Validates `plan.required_steps`: each `{tool: NAME, args: {KEY: REGEX}}` or `{check: NAME}`.
fn plan_steps(file: &str, raw: Vec<Map<String, Value>>) -> Result<Vec<crate::checks::PlanStep>> {
    let mut steps = Vec::new();
    for (i, step) in raw.into_iter().enumerate() {
        let at = format!("{file}: `plan.required_steps[{i}]`");
        if let Some(key) = step
            .keys()
            .find(|k| !["tool", "args", "check"].contains(&k.as_str()))
        {
            return Err(Error::config(format!(
                "{at}: unknown key `{key}`; a step is {{tool: NAME, args: {{ARG: REGEX}}}} or {{check: NAME}}"
            )));
        }
        match (step.get("tool"), step.get("check")) {
            (Some(Value::String(tool)), None) => {
                if Tool::from_name(tool).is_none() {
                    return Err(Error::config(format!("{at}: unknown tool {tool:?}")));
                }
                let mut args = Vec::new();
                match step.get("args") {
                    None => {}
                    Some(Value::Object(map)) => {
                        for (key, pattern) in map {
                            let Value::String(pattern) = pattern else {
                                return Err(Error::config(format!(
                                    "{at}: `args.{key}` must be a regular expression (a string)"
                                )));
                            };
                            let compiled =
                                regex::Regex::new(&format!("^(?:{pattern})$")).map_err(|e| {
                                    Error::config(format!(
                                        "{at}: `args.{key}` {pattern:?} does not compile: {e}"
                                    ))
                                })?;
                            args.push((key.clone(), pattern.clone(), compiled));
                        }
                    }
                    Some(_) => {
                        return Err(Error::config(format!(
                            "{at}: `args` must map argument names to regular expressions"
                        )));
                    }
                }
                steps.push(crate::checks::PlanStep::Tool {
                    name: tool.clone(),
                    args,
                });
            }
            (None, Some(Value::String(check))) if step.get("args").is_none() => {
                steps.push(crate::checks::PlanStep::Check(check.clone()));
            }
            _ => {
                return Err(Error::config(format!(
                    "{at}: give `tool` (with optional `args`) or `check`, as a name"
                )));
            }
        }
    }
    Ok(steps)
}

/// Validates `critic:`.
pub(crate) fn critic_spec(
    file: &str,
    raw: RawCritic,
    read: &ReadScript<'_>,
    base: &Path,
) -> Result<CriticSpec> {
    let delegate = raw
        .delegate
        .map(|d| delegate_config(file, "critic.delegate", d, read, base))
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
    let max_turns = raw.max_turns.unwrap_or(10);
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
        max_turns,
    })
}

/// Validates `checks:` entries into runnable specs, naming the entry and the key at fault.
pub(crate) fn check_specs(file: &str, raw: Vec<RawCheck>) -> Result<Vec<CheckSpec>> {
    let mut specs: Vec<CheckSpec> = Vec::new();
    for (i, check) in raw.into_iter().enumerate() {
        let at = format!("{file}: `checks[{i}]`");
        let name = check.name.trim().to_owned();
        if name.is_empty() {
            return Err(Error::config(format!(
                "{at}: `name` is empty; name the check (it labels findings and evidence)"
            )));
        }
        if specs.iter().any(|s| s.name == name) {
            return Err(Error::config(format!(
                "{at}: a check named {name:?} is already defined; names must be unique"
            )));
        }
        let argv = match (check.run, check.argv) {
            (Some(run), None) if !run.trim().is_empty() => {
                vec!["sh".to_owned(), "-c".to_owned(), run]
            }
            (None, Some(argv)) if argv.first().is_some_and(|p| !p.trim().is_empty()) => argv,
            (Some(_), Some(_)) => {
                return Err(Error::config(format!(
                    "{at} ({name}): give `run` (a shell command) or `argv` (a program and its arguments), not both"
                )));
            }
            _ => {
                return Err(Error::config(format!(
                    "{at} ({name}): give `run` (a shell command) or `argv` (a non-empty list: program, arguments)"
                )));
            }
        };
        let timeout = seconds(&at, "timeout_s", check.timeout_s, 300.0)?;
        let mut env = Vec::new();
        for (key, value) in check.env.unwrap_or_default() {
            let valid = !key.is_empty()
                && !key.starts_with(|c: char| c.is_ascii_digit())
                && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            let Value::String(value) = value else {
                return Err(Error::config(format!(
                    "{at} ({name}): `env.{key}` must be a string"
                )));
            };
            if !valid {
                return Err(Error::config(format!(
                    "{at} ({name}): `env` name {key:?} is not a valid variable name"
                )));
            }
            env.push((key, value));
        }
        specs.push(CheckSpec {
            name,
            argv,
            required: check.required.unwrap_or(true),
            timeout,
            env,
            criterion: false,
            parallel: check.parallel.unwrap_or(false),
        });
    }
    Ok(specs)
}

/// The criterion kinds, for messages.
const CRITERIA_HINT: &str = "\"file_exists:PATH\", \"no_placeholders:GLOB\", \"endpoint:URL\" or {endpoint: URL, status: 200, body_contains: \"…\", timeout_s: 5}, or {command: \"…\", name: compiles | lint_passes | tests_pass | …}";

/// Validates `criteria:` entries: the command criteria (run as checks) and the others.
fn criteria(file: &str, raw: Vec<Value>) -> Result<(Vec<CheckSpec>, Vec<Criterion>)> {
    let mut out = Vec::new();
    let mut checks: Vec<CheckSpec> = Vec::new();
    for (i, entry) in raw.into_iter().enumerate() {
        let at = format!("{file}: `criteria[{i}]`");
        let bad =
            |why: String| Error::config(format!("{at}: {why} (a criterion is {CRITERIA_HINT})"));
        let (kind, target) = match &entry {
            Value::String(text) => match text.split_once(':') {
                Some((kind, target)) => (
                    kind.trim().to_owned(),
                    Value::String(target.trim().to_owned()),
                ),
                None => return Err(bad(format!("{text:?} has no `kind:target` form"))),
            },
            Value::Object(map) if map.contains_key("command") => {
                let command = map
                    .get("command")
                    .and_then(Value::as_str)
                    .filter(|c| !c.trim().is_empty());
                let name = map
                    .get("name")
                    .and_then(Value::as_str)
                    .filter(|n| !n.trim().is_empty());
                let (Some(command), Some(name)) = (command, name) else {
                    return Err(bad(
                        "a command criterion needs `command` (a shell command) and `name`"
                            .to_owned(),
                    ));
                };
                if let Some(key) = map
                    .keys()
                    .find(|k| !["command", "name", "timeout_s"].contains(&k.as_str()))
                {
                    return Err(bad(format!("unknown key `{key}` in a command criterion")));
                }
                if checks.iter().any(|c| c.name == name) {
                    return Err(bad(format!(
                        "a criterion named {name:?} is already defined"
                    )));
                }
                checks.push(CheckSpec {
                    name: name.to_owned(),
                    argv: vec!["sh".to_owned(), "-c".to_owned(), command.to_owned()],
                    required: true,
                    timeout: seconds(
                        &at,
                        "timeout_s",
                        map.get("timeout_s").and_then(Value::as_f64),
                        300.0,
                    )?,
                    env: Vec::new(),
                    criterion: true,
                    parallel: false,
                });
                continue;
            }
            Value::Object(map) if map.contains_key("endpoint") => {
                out.push(endpoint(map).map_err(bad)?);
                continue;
            }
            Value::Object(map) if map.len() == 1 => {
                let (kind, target) = map.iter().next().expect("one entry");
                (kind.clone(), target.clone())
            }
            other => return Err(bad(format!("{other} is not a criterion"))),
        };
        let Some(target) = target
            .as_str()
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .map(str::to_owned)
        else {
            return Err(bad(format!("`{kind}` needs a path or glob")));
        };
        out.push(match kind.as_str() {
            "file_exists" => Criterion::FileExists(target),
            "endpoint" => {
                let mut map = Map::new();
                map.insert("endpoint".to_owned(), Value::String(target));
                endpoint(&map).map_err(bad)?
            }
            "no_placeholders" => {
                globset::Glob::new(&target)
                    .map_err(|e| bad(format!("the glob {target:?} does not compile: {e}")))?;
                Criterion::NoPlaceholders(target)
            }
            other => return Err(bad(format!("unknown criterion kind {other:?}"))),
        });
    }
    Ok((checks, out))
}

/// Validates the mapping form of an `endpoint` criterion.
fn endpoint(map: &Map<String, Value>) -> std::result::Result<Criterion, String> {
    if let Some(key) = map
        .keys()
        .find(|k| !["endpoint", "status", "body_contains", "timeout_s"].contains(&k.as_str()))
    {
        return Err(format!("unknown key `{key}` in an endpoint criterion"));
    }
    let url = map
        .get("endpoint")
        .and_then(Value::as_str)
        .map(str::trim)
        .unwrap_or_default();
    match reqwest::Url::parse(url) {
        Ok(parsed) if matches!(parsed.scheme(), "http" | "https") && parsed.host().is_some() => {}
        Ok(_) => {
            return Err(format!(
                "the endpoint {url:?} is not an http(s) URL with a host"
            ));
        }
        Err(e) => return Err(format!("the endpoint {url:?} is not a URL: {e}")),
    }
    let status = match map.get("status") {
        None => 200,
        Some(value) => match value.as_u64().and_then(|n| u16::try_from(n).ok()) {
            Some(n) if (100..=599).contains(&n) => n,
            _ => {
                return Err(format!(
                    "`status` is {value}; give an HTTP status, 100 to 599"
                ));
            }
        },
    };
    let body_contains = match map.get("body_contains") {
        None | Some(Value::Null) => None,
        Some(Value::String(text)) if !text.is_empty() => Some(text.clone()),
        Some(other) => {
            return Err(format!(
                "`body_contains` is {other}; give a non-empty string"
            ));
        }
    };
    let timeout = match map.get("timeout_s") {
        None => Duration::from_secs(5),
        Some(value) => match value
            .as_f64()
            .filter(|s| s.is_finite() && *s > 0.0 && *s <= 3600.0)
        {
            Some(s) => Duration::from_secs_f64(s),
            None => {
                return Err(format!(
                    "`timeout_s` is {value}; give seconds, more than 0 and at most 3600"
                ));
            }
        },
    };
    Ok(Criterion::Endpoint {
        url: url.to_owned(),
        status,
        body_contains,
        timeout,
    })
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
    Error::config(format!("{label}: {place}{what} ({KEYS_HINT})"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Delegation> {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(
            dir.path().join("agent.star"),
            "def respond(r):\n    return 'ok'\n",
        )
        .expect("write");
        Delegation::from_yaml(&Assembler::default(), Path::new("d.yaml"), text, dir.path())
    }

    #[test]
    fn minimal_file_gets_defaults() {
        let d =
            parse("task: do it\ndelegate: {kind: scripted, script: agent.star}\n").expect("valid");
        assert_eq!(d.max_verify_retries, 2);
        assert_eq!(d.max_turns, 20);
        assert!(d.verify.is_none());
        assert_eq!(d.args, serde_json::json!({}));
    }

    #[test]
    fn malformed_files_are_config_errors_naming_the_key() {
        let cases = [
            ("delegate: {kind: scripted, script: agent.star}\n", "task"),
            ("task: x\n", "delegate"),
            (
                "task: x\ndelegate: {kind: scripted, script: agent.star}\nbogus: 1\n",
                "bogus",
            ),
            (
                "task: x\ndelegate: {kind: scripted, script: agent.star, extra: 1}\n",
                "extra",
            ),
            ("task: x\ndelegate: {kind: wizard}\n", "wizard"),
            (
                "task: x\ndelegate: {kind: scripted, script: missing.star}\n",
                "missing.star",
            ),
            (
                "task: x\ndelegate: {kind: scripted, script: agent.star}\nverify: 'x'\nverify_file: v.star\n",
                "not both",
            ),
            (
                "task: x\ndelegate: {kind: scripted, script: agent.star}\nverify_file: nope.star\n",
                "nope.star",
            ),
            (
                "task: x\ndelegate: {kind: scripted, script: agent.star}\nmax_verify_retries: many\n",
                "max_verify_retries",
            ),
            (
                "task: x\ndelegate: {kind: scripted, script: agent.star}\ntools: [teleport]\n",
                "teleport",
            ),
            (
                "task: [1]\ndelegate: {kind: scripted, script: agent.star}\n",
                "task",
            ),
            (
                "task: x\ndelegate: {kind: scripted, script: agent.star}\nlimits: {max_turns: 0}\n",
                "max_turns",
            ),
            (
                "task: x\ndelegate: {kind: command, command: []}\n",
                "delegate.command",
            ),
            ("task: x\ndelegate: {kind: openai}\n", "model"),
            (
                "task: '  '\ndelegate: {kind: scripted, script: agent.star}\n",
                "task",
            ),
        ];
        for (text, needle) in cases {
            let err = parse(text).expect_err(text);
            assert_eq!(err.kind(), crate::ErrorKind::Config, "{text}");
            assert!(err.message().contains(needle), "{text}: {}", err.message());
            assert!(
                err.message().contains("d.yaml"),
                "{text}: {}",
                err.message()
            );
        }
    }
}
