//! The `delegate:` section (and `critic.delegate:`): which kind plays the sub-agent and its
//! settings, validated into a [`DelegateConfig`], and the delegate built from it when a
//! delegation opens. Adding a kind means a variant here and the kind's own file.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use harness_builtins::{Capabilities, Engine, Limits, Sandbox, Script, Surface, Workspace};
use serde::Deserialize;

use super::{
    AgentDelegate, AgentKind, AgentSpec, AnthropicDelegate, AnthropicSpec, CommandDelegate,
    CommandSpec, Delegate, OpenAiDelegate, OpenAiSpec, ScriptedDelegate,
};
use crate::cache::Cache;
use crate::config::{ReadScript, seconds};
use crate::error::{Error, Result};

/// `delegate:` as written.
///
/// Who does the work: `kind` picks the delegate, the other keys are that kind's settings.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(tag = "kind", rename_all = "lowercase", deny_unknown_fields)]
#[schemars(rename = "delegate")]
pub(crate) enum RawDelegate {
    /// A Starlark script whose `def respond(request)` plays the model: offline and
    /// deterministic.
    Scripted {
        /// The script defining `respond(request)`, relative to the delegation file.
        #[schemars(regex(pattern = r"\S"))]
        script: PathBuf,
    },
    /// Any OpenAI-compatible /chat/completions server, with the built-in tools as functions.
    Openai(RawModel),
    /// Any other program, run afresh once per attempt in the workspace; stdout is the answer.
    Command {
        /// The program and its arguments; `{prompt}` in an argument is replaced by the prompt,
        /// else the prompt goes to stdin.
        #[schemars(length(min = 1))]
        #[schemars(extend("prefixItems" = [{"type": "string", "pattern": "\\S"}]))]
        command: Vec<String>,
        /// Seconds one run may take before it is killed with its process group, more than 0,
        /// at most 86400 (default 600).
        #[serde(default)]
        #[schemars(extend("exclusiveMinimum" = 0, "maximum" = 86400))]
        timeout_s: Option<f64>,
    },
    /// Anthropic's Messages API, with the built-in tools.
    #[schemars(transform = anthropic_ranges)]
    Anthropic(RawModel),
    /// The Claude Code preset: an agent CLI resumed across attempts, its own tool log read.
    Claude(RawAgent),
    /// The OpenAI Codex CLI preset: an agent CLI resumed across attempts, its own tool log read.
    Codex(RawAgent),
    /// The Gemini CLI preset: an agent CLI resumed across attempts, its own tool log read.
    Gemini(RawAgent),
    /// The Aider preset: an agent CLI resumed across attempts, its own tool log read.
    Aider(RawAgent),
}

/// Anthropic's narrower ranges than OpenAI's, in the schema: a temperature of at most 1 and at
/// least one token per answer.
fn anthropic_ranges(schema: &mut schemars::Schema) {
    for (key, bound, value) in [("temperature", "maximum", 1), ("max_tokens", "minimum", 1)] {
        if let Some(field) = schema
            .get_mut("properties")
            .and_then(|p| p.get_mut(key))
            .and_then(|f| f.as_object_mut())
        {
            field.insert(bound.to_owned(), value.into());
        }
    }
}

/// A model delegate's settings (`kind: openai | anthropic`).
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawModel {
    /// The model name sent with every request (required, not empty).
    #[schemars(regex(pattern = r"\S"))]
    model: String,
    /// The API's base URL, http(s) with a host and no credentials (default
    /// https://api.openai.com/v1 for openai, https://api.anthropic.com for anthropic).
    #[serde(default)]
    #[schemars(regex(pattern = "^[Hh][Tt][Tt][Pp][Ss]?://"))]
    base_url: Option<String>,
    /// The environment variable holding the API key, which must be set when the file loads
    /// (default OPENAI_API_KEY or ANTHROPIC_API_KEY); `none` for a server that takes no key.
    #[serde(default)]
    #[schemars(regex(pattern = r"\S"))]
    api_key_env: Option<String>,
    /// Sampling temperature, 0 to 2 for openai, 0 to 1 for anthropic (default: not sent).
    #[serde(default)]
    #[schemars(range(min = 0, max = 2))]
    temperature: Option<f64>,
    /// Largest answer per request, in tokens (openai: default not sent; anthropic: at least 1,
    /// default 8192).
    #[serde(default)]
    max_tokens: Option<u32>,
    /// Seconds one HTTP request may take, more than 0, at most 86400 (default 120).
    #[serde(default)]
    #[schemars(extend("exclusiveMinimum" = 0, "maximum" = 86400))]
    timeout_s: Option<f64>,
    /// Transport retries on connection errors, 429 and 5xx (default 3).
    #[serde(default)]
    max_retries: Option<u32>,
}

/// An agent CLI preset's settings (`kind: claude | codex | gemini | aider`).
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawAgent {
    /// The CLI to run: a path containing `/` (relative to the delegation file), else a name
    /// looked up on PATH (default: the kind's name, e.g. `claude`).
    #[serde(default)]
    #[schemars(regex(pattern = r"\S"))]
    binary: Option<String>,
    /// The model the CLI is asked to use (default: the CLI's own).
    #[serde(default)]
    #[schemars(regex(pattern = r"\S"))]
    model: Option<String>,
    /// Extra arguments added to every run of the CLI.
    #[serde(default)]
    args: Vec<String>,
    /// Environment variables set for the CLI, besides yours.
    #[serde(default)]
    #[schemars(extend("propertyNames" = {"pattern": "^[^=]+$"}))]
    env: std::collections::BTreeMap<String, String>,
    /// Seconds one run of the CLI may take before it is killed with its process group, more
    /// than 0, at most 86400 (default 1800).
    #[serde(default)]
    #[schemars(extend("exclusiveMinimum" = 0, "maximum" = 86400))]
    timeout_s: Option<f64>,
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

/// What building a delegate needs besides its configuration: the runtime's shared engine, script
/// cache and HTTP client, and the delegation's workspace and limits.
pub(crate) struct Materials<'a> {
    pub(crate) engine: &'a Arc<Engine>,
    pub(crate) scripts: &'a Cache<(Arc<Script>, Arc<Sandbox>)>,
    pub(crate) http: &'a reqwest::Client,
    pub(crate) workspace: &'a Workspace,
    pub(crate) limits: &'a Limits,
    /// Everything besides name and source that shapes a compiled script (the cache key).
    pub(crate) shape: &'a crate::cache::Key,
    /// The sandbox of the delegation's programs, for a delegate that runs one; `None`:
    /// unconfined.
    pub(crate) isolation: Option<&'a harness_builtins::Isolation>,
}

impl DelegateConfig {
    /// Validates a `delegate:` mapping (or `critic.delegate:`, named `key` in messages) as
    /// written in `file`; scripts and binaries it names are relative to `base`.
    ///
    /// # Errors
    /// [`ErrorKind::Config`](crate::ErrorKind::Config) naming the key and the fix.
    pub(crate) fn parse(
        file: &str,
        key: &str,
        raw: RawDelegate,
        read: &ReadScript<'_>,
        base: &Path,
    ) -> Result<Self> {
        Ok(match raw {
            RawDelegate::Claude(raw) => agent(file, key, AgentKind::Claude, raw, base)?,
            RawDelegate::Codex(raw) => agent(file, key, AgentKind::Codex, raw, base)?,
            RawDelegate::Gemini(raw) => agent(file, key, AgentKind::Gemini, raw, base)?,
            RawDelegate::Aider(raw) => agent(file, key, AgentKind::Aider, raw, base)?,
            RawDelegate::Scripted { script } => {
                let (path, source) = read(&format!("{key}.script"), &script)?;
                DelegateConfig::Scripted { path, source }
            }
            RawDelegate::Openai(raw) => {
                let mut spec = OpenAiSpec::new(String::new());
                let given = ModelSettings::parse(file, key, raw, 2.0, spec.api_key_env.take())?;
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
                let given = ModelSettings::parse(file, key, raw, 1.0, spec.api_key_env.take())?;
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
                    isolation: None,
                    timeout: seconds(file, &format!("{key}.timeout_s"), timeout_s, 600.0)?,
                })
            }
        })
    }

    /// Returns the kind name: `scripted`, `openai`, `anthropic`, `command`, or an agent CLI's.
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

    /// The model asked for, when the kind has one.
    pub fn model(&self) -> Option<&str> {
        match self {
            DelegateConfig::OpenAi(spec) => Some(&spec.model),
            DelegateConfig::Anthropic(spec) => Some(&spec.model),
            DelegateConfig::Agent(spec) => spec.model.as_deref(),
            DelegateConfig::Scripted { .. } | DelegateConfig::Command(_) => None,
        }
    }

    /// Returns true when the delegate changes files by means of its own, which the tools'
    /// refusals cannot stop (a command or an agent CLI).
    pub fn runs_its_own_tools(&self) -> bool {
        matches!(self, DelegateConfig::Command(_) | DelegateConfig::Agent(_))
    }

    /// Returns true for an agent CLI that calls MCP tools (Claude Code, Codex, Gemini CLI):
    /// offered `tools: [delegate]`, it reaches `delegate` through the MCP server its run
    /// serves it ([`Host`](crate::delegate::Host)).
    pub fn calls_mcp(&self) -> bool {
        matches!(self, DelegateConfig::Agent(spec) if spec.kind.calls_mcp())
    }

    /// Returns true for a remote model, which can change the workspace only through the
    /// harness's tools: its first request may go out while the workspace's baseline is still
    /// being taken (the tools wait for it).
    pub fn is_remote_model(&self) -> bool {
        matches!(
            self,
            DelegateConfig::OpenAi(_) | DelegateConfig::Anthropic(_)
        )
    }

    /// Builds the delegate, in `made.workspace`; a script is compiled once per shape.
    ///
    /// # Errors
    /// [`ErrorKind::Config`](crate::ErrorKind::Config) for a delegate script that does not
    /// compile or an agent CLI that is not installed.
    pub(crate) async fn build(&self, made: &Materials<'_>) -> Result<Box<dyn Delegate>> {
        Ok(match self {
            DelegateConfig::Scripted { path, source } => {
                let sandbox = Arc::new(Sandbox::new(
                    Surface::Delegate,
                    made.workspace.clone(),
                    Capabilities::default(),
                    made.limits.clone(),
                ));
                let engine = Arc::clone(made.engine);
                let (name, source) = (path.display().to_string(), source.clone());
                let key = made.shape.clone().with(&name).with(&source);
                let (script, sandbox) = made
                    .scripts
                    .get_or_compile(key, move || {
                        let script = Script::compile(&engine, &sandbox, &name, &source, &[])
                            .map_err(|e| {
                                Error::config(format!(
                                    "delegate script {e} [{}]",
                                    e.kind().as_str()
                                ))
                            })?;
                        Ok((Arc::new(script), sandbox))
                    })
                    .await?;
                Box::new(ScriptedDelegate::new(script, sandbox)?)
            }
            DelegateConfig::OpenAi(spec) => {
                Box::new(OpenAiDelegate::new(spec.clone(), made.http.clone()))
            }
            DelegateConfig::Anthropic(spec) => {
                Box::new(AnthropicDelegate::new(spec.clone(), made.http.clone()))
            }
            DelegateConfig::Command(spec) => {
                let mut spec = spec.clone();
                spec.workdir = made.workspace.root().to_path_buf();
                spec.isolation = made.isolation.cloned().map(|i| i.with_network());
                Box::new(CommandDelegate::new(spec))
            }
            DelegateConfig::Agent(spec) => {
                let mut spec = spec.clone();
                spec.workdir = made.workspace.root().to_path_buf();
                spec.isolation = made.isolation.cloned();
                Box::new(AgentDelegate::new(spec)?)
            }
        })
    }
}

/// Validates an agent CLI preset's settings.
fn agent(
    file: &str,
    key: &str,
    kind: AgentKind,
    raw: RawAgent,
    base: &Path,
) -> Result<DelegateConfig> {
    let binary = match raw.binary.as_deref() {
        Some(b) if b.trim().is_empty() => {
            return Err(Error::config(format!(
                "{file}: `{key}.binary` is empty; leave it out to use `{}` on PATH",
                kind.name()
            )));
        }
        Some(b) => super::binary_path(base, b),
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
        isolation: None,
    }))
}

/// A model delegate's settings, checked.
struct ModelSettings {
    model: String,
    base_url: Option<String>,
    api_key_env: Option<String>,
    temperature: Option<f64>,
    max_tokens: Option<u32>,
    timeout: std::time::Duration,
    max_retries: Option<u32>,
}

impl ModelSettings {
    /// Checks a model delegate's settings: `model` not empty, `temperature` from 0 to
    /// `max_temperature`, `base_url` an http(s) URL without credentials, and `api_key_env`
    /// (`none` for a server that takes no key, else the variable, `default_key` when not given)
    /// holding a key now.
    fn parse(
        file: &str,
        key: &str,
        raw: RawModel,
        max_temperature: f64,
        default_key: Option<String>,
    ) -> Result<Self> {
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
            super::check_base_url(url)
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
            super::api_key(var)
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
}
