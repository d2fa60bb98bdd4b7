//! The built-in tools a model-driven delegate may call, confined to the workspace root exactly
//! like the `fs` builtins. A refused or failed call is an error result the delegate reads, never a
//! crash of the delegation.

use std::io::{Read as _, Write as _};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use harness_builtins::{PathError, Workspace};
use serde_json::{Map, Value, json};

use crate::config::ReadScript;
use crate::conversation::ToolSpec;
use crate::error::{Error, Result};
use crate::guard::PolicyGuard;
use crate::verifier::VerifySource;

/// Per-tool verifiers: the tool's name and its script.
pub(crate) type ToolVerifiers = Vec<(String, VerifySource)>;

/// Largest file `read_file` returns.
const MAX_READ_BYTES: u64 = 1024 * 1024;
/// Largest stdout/stderr `run_command` keeps, each.
const MAX_COMMAND_OUTPUT: usize = 64 * 1024;
/// Default and largest `run_command` timeout, in seconds.
const COMMAND_TIMEOUT_S: (u64, u64) = (60, 600);

/// One of the built-in tools.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Tool {
    /// `read_file {path}`.
    ReadFile,
    /// `write_file {path, content}`.
    WriteFile,
    /// `list_files {path}`.
    ListFiles,
    /// `run_command {argv, timeout_s}`.
    RunCommand,
    /// `delegate {task, profile, checks, criteria, verify, max_verify_retries}`: a whole child
    /// delegation (DESIGN §9), run by the runtime rather than the toolbox.
    Delegate,
}

/// A tool's name, in the schema: one of [`Tool::ALL`].
impl schemars::JsonSchema for Tool {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "tool_name".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let names: Vec<&str> = Tool::ALL.iter().map(|t| t.name()).collect();
        schemars::json_schema!({ "description": "A built-in tool.", "enum": names })
    }
}

/// The shapes a `tools:` entry may take, declared for the schema (`harness schema`); the parser
/// reads each entry as a JSON value to name its fault.
#[derive(schemars::JsonSchema)]
#[serde(untagged)]
#[schemars(rename = "tool")]
#[expect(dead_code, reason = "declares the schema's shapes; never built")]
pub(crate) enum ToolForm {
    /// A built-in tool.
    Name(Tool),
    /// A tool with its own verifier, `def run(call, result):`.
    #[schemars(extend("additionalProperties" = false, "oneOf" = [
        {"required": ["verify"], "properties": {"verify_file": {"type": "null"}}},
        {"required": ["verify_file"], "properties": {"verify_file": {"type": "string"}},
         "not": {"required": ["verify"]}},
    ]))]
    Judged {
        /// The tool's name.
        name: Tool,
        /// An inline Starlark verifier defining `def run(call, result):`.
        #[serde(default)]
        #[schemars(with = "String", regex(pattern = r"\S"))]
        verify: Option<String>,
        /// A Starlark file defining `def run(call, result):`, relative to the delegation file.
        #[schemars(regex(pattern = r"\S"))]
        verify_file: Option<String>,
    },
}

impl Tool {
    /// Every tool, in a stable order.
    pub const ALL: [Tool; 5] = [
        Tool::ReadFile,
        Tool::WriteFile,
        Tool::ListFiles,
        Tool::RunCommand,
        Tool::Delegate,
    ];

    /// Returns the tool's name as delegates call it.
    pub fn name(self) -> &'static str {
        match self {
            Tool::ReadFile => "read_file",
            Tool::WriteFile => "write_file",
            Tool::ListFiles => "list_files",
            Tool::RunCommand => "run_command",
            Tool::Delegate => "delegate",
        }
    }

    /// Finds a tool by name.
    pub fn from_name(name: &str) -> Option<Tool> {
        Tool::ALL.into_iter().find(|t| t.name() == name)
    }

    /// Validates `tools:` as written in `file` (the delegation file `source`): names, or
    /// `{name, verify | verify_file}` mappings. Returns the names and the per-tool verifiers.
    ///
    /// # Errors
    /// [`ErrorKind::Config`](crate::ErrorKind::Config) naming the entry: an unknown tool or
    /// key, a tool listed twice, a verifier given twice or not at all.
    pub(crate) fn parse_list(
        file: &str,
        source: &Path,
        raw: Vec<Value>,
        read: &ReadScript<'_>,
    ) -> Result<(Vec<String>, ToolVerifiers)> {
        let mut names = Vec::new();
        let mut verifiers = Vec::new();
        for (i, entry) in raw.into_iter().enumerate() {
            let at = format!("{file}: `tools[{i}]`");
            let name = match entry {
                Value::String(name) => name,
                Value::Object(map) => {
                    let (name, verifier) = tool_verifier(&at, i, source, &map, read)?;
                    verifiers.push((name.clone(), verifier));
                    name
                }
                other => {
                    return Err(Error::config(format!(
                        "{at}: expected a tool name or {{name, verify}}, got {other}"
                    )));
                }
            };
            if Tool::from_name(&name).is_none() {
                let known: Vec<&str> = Tool::ALL.iter().map(|t| t.name()).collect();
                return Err(Error::config(format!(
                    "{file}: `tools`: unknown tool {name:?} (known tools: {})",
                    known.join(", ")
                )));
            }
            if names.contains(&name) {
                // Two verifiers for one tool would leave one silently unused.
                return Err(Error::config(format!(
                    "{at}: {name:?} is listed twice; list each tool once, with at most one verifier"
                )));
            }
            names.push(name);
        }
        Ok((names, verifiers))
    }

    /// Returns the description and argument schema offered to the model.
    pub fn spec(self) -> ToolSpec {
        let (description, parameters) = match self {
            Tool::ReadFile => (
                "Read a UTF-8 text file in the workspace.",
                json!({"type": "object", "properties": {"path": {"type": "string", "description": "Path relative to the workspace root"}}, "required": ["path"]}),
            ),
            Tool::WriteFile => (
                "Create or overwrite a text file in the workspace (parent directories are created).",
                json!({"type": "object", "properties": {"path": {"type": "string"}, "content": {"type": "string"}}, "required": ["path", "content"]}),
            ),
            Tool::ListFiles => (
                "List a directory of the workspace; directories end with '/'.",
                json!({"type": "object", "properties": {"path": {"type": "string", "description": "Directory, default '.'"}}}),
            ),
            Tool::RunCommand => (
                "Run a program (no shell) in the workspace root and return its exit code and output. It runs in its own process group (killed when it exits or times out) with a scrubbed environment and a private HOME; programs are found on PATH, never in the workspace.",
                json!({"type": "object", "properties": {"argv": {"type": "array", "items": {"type": "string"}}, "timeout_s": {"type": "integer"}}, "required": ["argv"]}),
            ),
            Tool::Delegate => (
                "Hand a sub-task to a verified sub-agent. It runs as a delegation of its own (in a copy of this workspace when it can change files; when it is verified its changes are applied here, in the order you called), held to the checks, criteria and verifier you give (and the project's), retried with the reasons when it fails. Calls in one turn run at once and share your remaining token budget. The result is JSON {id, outcome, verified, attempts, answer, findings, evidence, workspace, conflict}: `answer` is what the child delivered; trust it only when `verified` is true, and report a failed child as failed. `conflict` names files an earlier child changed first: none of this child's changes were applied.",
                json!({"type": "object", "properties": {
                    "task": {"type": "string", "description": "What the child should do"},
                    "profile": {"type": "string", "description": "A named child profile (`delegates:`); default: your own kind"},
                    "checks": {"type": "array", "description": "Commands that must exit 0, e.g. {\"name\": \"tests\", \"run\": \"cargo test\"}", "items": {"type": "object"}},
                    "criteria": {"type": "array", "description": "Facts the workspace must show, e.g. {\"file_exists\": \"hello.txt\"}", "items": {"type": "object"}},
                    "verify": {"type": "string", "description": "A Starlark verifier: def run(result): return {\"verified\": ..., \"reason\": ...}"},
                    "max_verify_retries": {"type": "integer", "minimum": 0}
                }, "required": ["task"], "additionalProperties": false}),
            ),
        };
        ToolSpec {
            name: self.name().to_owned(),
            description: description.to_owned(),
            parameters,
        }
    }
}

/// Reads a `{name, verify | verify_file}` entry of `tools:` (entry `i`, at `at`).
fn tool_verifier(
    at: &str,
    i: usize,
    source: &Path,
    map: &Map<String, Value>,
    read: &ReadScript<'_>,
) -> Result<(String, VerifySource)> {
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
    let string = |key: &str| match map.get(key) {
        None => Ok(None),
        Some(Value::Null) => Ok(Some(None)),
        Some(Value::String(text)) => Ok(Some(Some(text.clone()))),
        Some(other) => Err(Error::config(format!(
            "{at} ({name}): `{key}` is {other}; give a string"
        ))),
    };
    let verifier = VerifySource::from_keys(
        &format!("{at} ({name})"),
        format!("{}#tools.{name}.verify", source.display()),
        "def run(call, result):",
        string("verify")?,
        (
            &format!("tools[{i}].verify_file"),
            string("verify_file")?.flatten().map(PathBuf::from),
        ),
        read,
    )?
    .ok_or_else(|| {
        Error::config(format!(
            "{at} ({name}): give `verify` (a script defining `def run(call, result):`) or `verify_file`, or write the tool as a plain name"
        ))
    })?;
    Ok((name.clone(), verifier))
}

/// What one tool call returned to the delegate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolOutput {
    /// The text the delegate reads.
    pub content: String,
    /// True when the call failed or was refused.
    pub is_error: bool,
}

impl ToolOutput {
    /// A successful result.
    pub fn ok(content: impl Into<String>) -> Self {
        ToolOutput {
            content: content.into(),
            is_error: false,
        }
    }

    /// An error result the delegate reads.
    pub fn error(content: impl Into<String>) -> Self {
        ToolOutput {
            content: content.into(),
            is_error: true,
        }
    }
}

/// The tools one delegation offers, bound to its workspace.
#[derive(Debug, Clone)]
pub struct Toolbox {
    workspace: Workspace,
    tools: Vec<Tool>,
    guard: Arc<PolicyGuard>,
    /// The private `HOME` of `run_command` children, made when the tool is offered and removed
    /// with the last clone of the toolbox.
    home: Option<Arc<tempfile::TempDir>>,
    /// The bubblewrap sandbox of `run_command` children; `None`: unconfined (project policy
    /// `commands.isolation`).
    isolation: Option<harness_builtins::Isolation>,
}

impl Toolbox {
    /// Creates a toolbox offering `names` inside `workspace`; `guard` names what no tool may
    /// write.
    ///
    /// # Errors
    /// [`ErrorKind::Config`](crate::ErrorKind::Config) for an unknown tool name.
    pub(crate) fn new(
        workspace: Workspace,
        names: &[String],
        guard: Arc<PolicyGuard>,
        isolation: Option<harness_builtins::Isolation>,
    ) -> Result<Self> {
        let mut tools = Vec::new();
        for name in names {
            let tool = Tool::from_name(name).ok_or_else(|| {
                let known: Vec<&str> = Tool::ALL.iter().map(|t| t.name()).collect();
                Error::config(format!(
                    "unknown tool {name:?} (known tools: {})",
                    known.join(", ")
                ))
            })?;
            if !tools.contains(&tool) {
                tools.push(tool);
            }
        }
        let home = if tools.contains(&Tool::RunCommand) {
            let dir = tempfile::Builder::new()
                .prefix("harness-home-")
                .tempdir()
                .map_err(|e| {
                    Error::new(
                        crate::ErrorKind::Tool,
                        format!("cannot make the private HOME for run_command: {e}"),
                    )
                })?;
            Some(Arc::new(dir))
        } else {
            None
        };
        Ok(Toolbox {
            workspace,
            tools,
            guard,
            home,
            isolation,
        })
    }

    /// Returns the specs of the offered tools.
    pub fn specs(&self) -> Vec<ToolSpec> {
        self.tools.iter().map(|t| t.spec()).collect()
    }

    /// Runs one call. Unknown or not-offered tools, bad arguments and refusals come back as error
    /// results, so the delegate can correct itself.
    pub async fn call(&self, name: &str, arguments: &Map<String, Value>) -> ToolOutput {
        let Some(tool) = Tool::from_name(name).filter(|t| self.tools.contains(t)) else {
            let offered: Vec<&str> = self.tools.iter().map(|t| t.name()).collect();
            return ToolOutput::error(format!(
                "unknown tool {name:?}; available tools: {}",
                if offered.is_empty() {
                    "none".to_owned()
                } else {
                    offered.join(", ")
                }
            ));
        };
        let result = match tool {
            Tool::ReadFile => self.read_file(arguments),
            Tool::WriteFile => self.write_file(arguments),
            Tool::ListFiles => self.list_files(arguments),
            Tool::RunCommand => self.run_command(arguments).await,
            // The runtime runs it (a whole child delegation); a toolbox alone cannot.
            Tool::Delegate => {
                Err("a child delegation needs the runtime that runs this one".to_owned())
            }
        };
        result.unwrap_or_else(|message| ToolOutput::error(format!("{name}: {message}")))
    }

    /// `call` with its `path` argument as the workspace resolves it: relative to the root,
    /// normalised, a link inside the workspace followed (`./src/../x` is `x`). A path that does
    /// not resolve inside (it escapes, it is not a string) is left as given, for the tool to
    /// refuse; a trailing `/` is kept, for `write_file` to refuse.
    pub(crate) fn normalise(&self, mut call: harness_hooks::ToolCall) -> harness_hooks::ToolCall {
        let Some(Value::String(path)) = call.arguments.get("path") else {
            return call;
        };
        let Ok(full) = self.workspace.resolve(path.as_str()) else {
            return call;
        };
        let mut clean = self.workspace.relative(&full);
        if path.ends_with('/') || path.ends_with("/.") {
            clean.push('/');
        }
        call.arguments
            .insert("path".to_owned(), Value::String(clean));
        call
    }

    fn resolve(&self, path: &str) -> Result<std::path::PathBuf, String> {
        self.workspace.resolve(path).map_err(refusal)
    }

    /// Resolves `path` for writing: inside the workspace, not through a dangling link, not a
    /// special file, and not the harness's own policy.
    fn resolve_for_write(&self, path: &str) -> Result<std::path::PathBuf, String> {
        let full = self.workspace.resolve_for_write(path).map_err(refusal)?;
        if let Some(protected) = self.guard.covering(&full) {
            return Err(format!(
                "refused: {path:?} is part of the harness policy that judges this delegation ({}); delegates may not change it",
                self.workspace.relative(protected)
            ));
        }
        let rel = self.workspace.relative(&full);
        if let Some(what) = crate::integrity::always_protected(&rel) {
            return Err(format!(
                "refused: {path:?} is {what}, which is always out of a delegate's reach: it would change what judges this or a later run"
            ));
        }
        if full.symlink_metadata().is_err() && self.guard.gate().refuses_new(&rel) {
            return Err(format!(
                "refused: {path:?} would be new test configuration (conftest.py, pytest.ini, jest.config…), which changes how the existing tests run; delegates may not add it"
            ));
        }
        if full.symlink_metadata().is_ok()
            && let Some(glob) = self.guard.gate().matching(&rel)
        {
            return Err(format!(
                "refused: {path:?} is a gate input (it matches protect glob `{glob}`): existing tests and the files the checks run may not be modified, deleted or replaced by the delegate; add a new file instead (new files under the glob are allowed)"
            ));
        }
        Ok(full)
    }

    fn read_file(&self, args: &Map<String, Value>) -> Result<ToolOutput, String> {
        let path = string_arg(args, "path")?;
        let full = self.resolve(path)?;
        if self.guard.is_journal(&full) {
            // Every run's record (a holdout's output among them) and the observation cache.
            return Err(format!(
                "refused: {path:?} is the run journal (or a file of it), which is the operator's; delegates may not read it"
            ));
        }
        // Read by the path checked, with no link followed on the way (a swap since the check
        // cannot make it read outside).
        let rel = self.workspace.relative(&full);
        let file = harness_builtins::open_read_beneath(self.workspace.root(), Path::new(&rel))
            .map_err(|e| format!("{path:?}: {e}"))?;
        let mut data = Vec::new();
        file.take(MAX_READ_BYTES + 1)
            .read_to_end(&mut data)
            .map_err(|e| format!("{path:?}: {e}"))?;
        if data.len() as u64 > MAX_READ_BYTES {
            return Err(format!(
                "{path:?} is larger than the read_file cap of {MAX_READ_BYTES} bytes"
            ));
        }
        let text = String::from_utf8(data).map_err(|_| format!("{path:?} is not UTF-8 text"))?;
        Ok(ToolOutput::ok(text))
    }

    fn write_file(&self, args: &Map<String, Value>) -> Result<ToolOutput, String> {
        let path = string_arg(args, "path")?;
        let content = string_arg(args, "content")?;
        if path.ends_with('/') || path.ends_with("/.") || path == "." {
            // `sub/` names a directory: writing it would make a file where one was asked for.
            return Err(format!(
                "refused: {path:?} names a directory; write_file writes a file: give its path (directories are made as needed)"
            ));
        }
        let full = self.resolve_for_write(path)?;
        let rel = self.workspace.relative(&full);
        if self.guard.gate().guards_scripts(&rel) {
            let before = harness_builtins::open_regular(&full).and_then(|mut f| {
                let mut bytes = Vec::new();
                f.read_to_end(&mut bytes).map(|_| bytes)
            });
            if let Ok(before) = before
                && self
                    .guard
                    .gate()
                    .guarded_differ(&rel, &before, content.as_bytes())
            {
                let scripts = rel.ends_with("package.json")
                    && crate::integrity::scripts_differ(&before, content.as_bytes());
                return Err(if scripts {
                    format!(
                        "refused: the `scripts` of {path:?} run the checks (`npm test`…) and may not be changed by the delegate; change the other keys only"
                    )
                } else {
                    format!(
                        "refused: {path:?} holds the test runner's configuration (`jest`, `[tool.pytest.ini_options]`, `[tool:pytest]`, `[pytest]`), which may not be changed by the delegate; change the other keys only"
                    )
                });
            }
        }
        // Written by the path checked, with no link followed in any component: a directory
        // swapped for a link since the check fails the write instead of landing it elsewhere.
        harness_builtins::create_beneath(self.workspace.root(), Path::new(&rel))
            .and_then(|mut file| file.write_all(content.as_bytes()))
            .map_err(|e| format!("{path:?}: {e}"))?;
        Ok(ToolOutput::ok(format!(
            "wrote {} bytes to {path}",
            content.len()
        )))
    }

    fn list_files(&self, args: &Map<String, Value>) -> Result<ToolOutput, String> {
        let path = match args.get("path") {
            None | Some(Value::Null) => ".",
            Some(Value::String(p)) => p.as_str(),
            Some(_) => return Err("`path` must be a string".to_owned()),
        };
        let full = self.resolve(path)?;
        // Listed by the path checked, with no link followed on the way (a directory swapped for
        // a link since the check cannot make it list outside).
        let rel = self.workspace.relative(&full);
        let entries = harness_builtins::list_beneath(self.workspace.root(), Path::new(&rel))
            .map_err(|e| format!("{path:?}: {e}"))?;
        let mut names: Vec<String> = entries
            .into_iter()
            .map(|(name, is_dir)| if is_dir { format!("{name}/") } else { name })
            .collect();
        names.sort();
        Ok(ToolOutput::ok(names.join("\n")))
    }

    async fn run_command(&self, args: &Map<String, Value>) -> Result<ToolOutput, String> {
        let argv: Vec<String> = match args.get("argv") {
            Some(Value::Array(items)) if !items.is_empty() => items
                .iter()
                .map(|v| v.as_str().map(str::to_owned))
                .collect::<Option<_>>()
                .ok_or("`argv` must be a list of strings")?,
            _ => return Err("`argv` must be a non-empty list of strings".to_owned()),
        };
        let timeout = match args.get("timeout_s") {
            None | Some(Value::Null) => COMMAND_TIMEOUT_S.0,
            Some(v) => v
                .as_u64()
                .filter(|t| *t > 0)
                .ok_or("`timeout_s` must be a positive integer")?
                .min(COMMAND_TIMEOUT_S.1),
        };
        let home = self.home.as_deref().map(tempfile::TempDir::path);
        let launch = harness_builtins::Launch {
            cwd: self.workspace.root(),
            env: &[],
            home,
            hidden: Some(self.workspace.root()),
            timeout: Duration::from_secs(timeout),
            cap: MAX_COMMAND_OUTPUT,
            isolation: self.isolation.as_ref(),
            inherit_env: false,
            stdin: None,
            stop_on: None,
        };
        let run = harness_builtins::run_program(&argv, &launch)
            .await
            .map_err(|e| format!("cannot start {:?}: {e}", argv[0]))?;
        let status = match (run.timed_out, run.exit_code) {
            (true, _) => format!(
                "timed out after {timeout}s and was killed with its process group (timeout_s cap)"
            ),
            (false, Some(code)) => format!("exit code {code}"),
            (false, None) => "killed by a signal".to_owned(),
        };
        let text = format!(
            "{status}\n--- stdout ---\n{}\n--- stderr ---\n{}",
            run.stdout, run.stderr
        );
        Ok(if run.exit_code == Some(0) {
            ToolOutput::ok(text)
        } else {
            ToolOutput::error(text)
        })
    }

    /// Returns the workspace root.
    pub fn root(&self) -> &Path {
        self.workspace.root()
    }
}

/// The message a delegate reads for a path the workspace refused.
fn refusal(e: PathError) -> String {
    match e {
        PathError::Escapes { .. } | PathError::Refused { .. } => format!("refused: {e}"),
        PathError::Io { .. } => e.to_string(),
    }
}

fn string_arg<'a>(args: &'a Map<String, Value>, key: &str) -> Result<&'a str, String> {
    match args.get(key) {
        Some(Value::String(s)) => Ok(s),
        Some(_) => Err(format!("`{key}` must be a string")),
        None => Err(format!("missing argument `{key}`")),
    }
}
