//! Agent CLIs as delegates — Claude Code, Codex, Gemini CLI and Aider — each run headless once
//! per attempt and *resumed* on a retry, so the retry prompt reaches the same session that made
//! the claim; where the CLI reports its own tool use, that log becomes the attempt's
//! `tool_calls` and `tool_results`.
//!
//! | kind | first attempt | retry | tool log |
//! |---|---|---|---|
//! | `claude` | `claude -p --output-format stream-json --verbose … PROMPT` | `--resume SESSION` | `tool_use` / `tool_result` blocks |
//! | `codex` | `codex exec --json … PROMPT` | `codex exec --json … resume THREAD PROMPT` | `item.completed` items |
//! | `gemini` | `gemini --output-format stream-json … -p PROMPT` | `--resume SESSION` | `tool_use` / `tool_result` events |
//! | `aider` | `aider --message PROMPT --chat-history-file F …` | `--restore-chat-history` | none (the scope diff is the evidence) |
//!
//! A retry that the CLI does not resume — no session id reported, a different one, a refusal —
//! is a `delegate` error with the CLI's own output, never a fresh session posing as the same
//! delegate.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Map, Value};

use super::{BoxFuture, Delegate, Host, ObservedCall, Turn, TurnRequest};
use crate::conversation::{Message, Usage};
use crate::error::{Error, ErrorKind, Result};

mod aider;
mod claude;
mod codex;
mod gemini;
mod host;

/// Stdout kept from one run (the stream of a long session can be large); the rest is dropped
/// and the run is an error, since a cut stream cannot be read to its end.
const MAX_OUTPUT_BYTES: usize = 32 * 1024 * 1024;

/// One agent CLI: how to invoke it for a new session or a resumed one, and how to read what it
/// printed. Each lives in its own file; adding a CLI is a file here and a variant of
/// [`AgentKind`].
trait Adapter: Sync {
    /// The kind's name in delegation files, which is also its program's name.
    fn name(&self) -> &'static str;
    /// How to install the CLI.
    fn install(&self) -> &'static str;
    /// The word for its session in messages.
    fn session_word(&self) -> &'static str {
        "session"
    }
    /// Its tools that write files, by the names its output gives their calls (lowercase): the
    /// claims stage grounds a claim to have written a file in them.
    fn write_tools(&self) -> &'static [&'static str] {
        &[]
    }
    /// The argument keys of those calls that hold the file's path.
    fn path_keys(&self) -> &'static [&'static str] {
        &[]
    }
    /// Whether it needs a directory of its own for the delegation's life, outside the workspace
    /// (Aider's chat history, Gemini CLI's private configuration): [`Invocation::own_dir`].
    fn keeps_own_dir(&self) -> bool {
        false
    }
    /// Where it keeps its own logins, settings and sessions (what a resumed run reads back),
    /// given the user's `home` and the run's environment: bound writable into its private HOME
    /// when it runs confined — but for what would make a later run of the CLI execute something
    /// ([`Config::Guarded`]).
    fn config(&self, home: &Path, env: &dyn Fn(&str) -> Option<PathBuf>) -> Vec<Config>;
    /// The arguments after the program: `prompt` for a new session, or a retry resuming
    /// `resume`.
    fn args(&self, run: &Invocation<'_>) -> Vec<String>;
    /// Variables the run needs besides the user's (`HOME` is the user's), after making what
    /// they point at — a private configuration directory with the settings a fresh one lacks.
    ///
    /// # Errors
    /// What could not be written.
    fn prepare(&self, run: &Invocation<'_>, home: &Path) -> std::io::Result<Vec<(String, String)>> {
        let _ = (run, home);
        Ok(Vec::new())
    }
    /// What a line of its output (stdout or stderr) means when it shows the run cannot succeed
    /// — the model API refused its credentials — and how to fix it: the CLI is stopped there
    /// rather than left to retry for minutes, and the run is a `delegate` error saying this.
    fn fatal(&self, line: &str) -> Option<String> {
        let _ = line;
        None
    }
    /// Whether it calls MCP tools ([`Adapter::serve_mcp`]).
    fn calls_mcp(&self) -> bool {
        false
    }
    /// Tells one run of it to start the MCP server `served`: arguments put into `args` (the
    /// program's, as [`Adapter::args`] made them) and the variables returned.
    ///
    /// # Errors
    /// What a settings file of the run could not be written for.
    fn serve_mcp(
        &self,
        run: &Invocation<'_>,
        args: &mut Vec<String>,
        served: &host::Served<'_>,
    ) -> std::io::Result<Vec<(String, String)>> {
        let _ = (run, args, served);
        Ok(Vec::new())
    }
    /// Reads one run's stdout.
    ///
    /// # Errors
    /// Why the output cannot be read (not the format, no closing event).
    fn parse(&self, stdout: &str, run: &Invocation<'_>) -> std::result::Result<Parsed, String>;
}

/// A path of an agent CLI's own configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Config {
    /// A directory, made when missing so that what the CLI keeps there (a session to resume)
    /// outlives the run.
    Dir(PathBuf),
    /// A file, bound when it exists.
    File(PathBuf),
    /// A file or directory inside one of those that makes the CLI run programs or take
    /// instructions the next time anyone uses it (settings with hooks and MCP servers, custom
    /// commands): read-only when it exists; one the CLI creates is moved aside and the run
    /// fails, so a confined delegate cannot plant what runs unconfined later.
    Guarded(PathBuf),
}

/// `names` inside `dir`, guarded.
fn guarded(dir: &Path, names: &[&str]) -> Vec<Config> {
    names
        .iter()
        .map(|name| Config::Guarded(dir.join(name)))
        .collect()
}

/// What one run is: the prompt, the session it resumes, the settings.
struct Invocation<'a> {
    spec: &'a AgentSpec,
    prompt: &'a str,
    resume: Option<&'a str>,
    /// The delegation's own directory, for a CLI that keeps one ([`Adapter::keeps_own_dir`]).
    own_dir: Option<&'a Path>,
}

/// Where a CLI takes what resumes a session: before the user's `args` (a flag, `--resume ID`)
/// or after them (a subcommand, `resume ID`).
#[derive(Clone, Copy)]
enum Resume {
    BeforeArgs,
    AfterArgs,
}

impl Invocation<'_> {
    /// The arguments of a CLI whose invocations all look alike: its fixed `flags`, `--model
    /// MODEL` when the settings name one, `resume` where `at` says (empty for a new session),
    /// the user's `args`, then `prompt`.
    fn args(
        &self,
        flags: Vec<String>,
        resume: Vec<String>,
        at: Resume,
        prompt: Vec<String>,
    ) -> Vec<String> {
        let mut args = flags;
        if let Some(model) = &self.spec.model {
            args.extend(["--model".to_owned(), model.clone()]);
        }
        let (before, after) = match at {
            Resume::BeforeArgs => (resume, Vec::new()),
            Resume::AfterArgs => (Vec::new(), resume),
        };
        args.extend(before);
        args.extend(self.spec.args.iter().cloned());
        args.extend(after);
        args.extend(prompt);
        args
    }

    /// The variable `name` as the run sees it: `delegate.env`, else the user's environment.
    fn var(&self, name: &str) -> Option<String> {
        self.spec
            .env
            .iter()
            .rev()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.clone())
            .or_else(|| std::env::var(name).ok())
            .filter(|value| !value.is_empty())
    }

    /// `flag ID` when the run resumes session ID, else nothing.
    fn resuming(&self, flag: &str) -> Vec<String> {
        self.resume
            .iter()
            .flat_map(|id| [flag.to_owned(), (*id).to_owned()])
            .collect()
    }
}

/// `names` as owned strings.
fn owned(names: &[&str]) -> Vec<String> {
    names.iter().map(|n| (*n).to_owned()).collect()
}

/// Which agent CLI a delegate runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AgentKind {
    /// Anthropic's Claude Code (`claude`).
    Claude,
    /// OpenAI's Codex CLI (`codex`).
    Codex,
    /// Google's Gemini CLI (`gemini`).
    Gemini,
    /// Aider (`aider`).
    Aider,
}

impl AgentKind {
    /// Every agent CLI harness runs.
    pub const ALL: [AgentKind; 4] = [
        AgentKind::Claude,
        AgentKind::Codex,
        AgentKind::Gemini,
        AgentKind::Aider,
    ];

    /// Whether it calls MCP tools, so that a run can serve it `delegate`.
    pub(crate) fn calls_mcp(self) -> bool {
        self.adapter().calls_mcp()
    }

    /// Its tools that write files, as its output names their calls (lowercase).
    pub(crate) fn write_tools(self) -> &'static [&'static str] {
        self.adapter().write_tools()
    }

    /// The argument keys of its write calls that hold the path.
    pub(crate) fn path_keys(self) -> &'static [&'static str] {
        self.adapter().path_keys()
    }

    fn adapter(self) -> &'static dyn Adapter {
        match self {
            AgentKind::Claude => &claude::Claude,
            AgentKind::Codex => &codex::Codex,
            AgentKind::Gemini => &gemini::Gemini,
            AgentKind::Aider => &aider::Aider,
        }
    }

    /// The kind's name in delegation files, which is also its program's name.
    pub fn name(self) -> &'static str {
        self.adapter().name()
    }

    /// How to install the CLI.
    pub fn install(self) -> &'static str {
        self.adapter().install()
    }
}

/// Fails the run when the CLI created any of the guarded configuration paths that were `absent`
/// before it (settings, hooks, commands that would act the next time the CLI runs unconfined):
/// each is moved aside, kept for a look, where the CLI will not load it.
///
/// # Errors
/// [`ErrorKind::Delegate`] naming each path and where it went.
fn planted(name: &str, absent: &[PathBuf]) -> Result<()> {
    let mut moved = Vec::new();
    for path in absent.iter().filter(|p| p.symlink_metadata().is_ok()) {
        let mut aside = path.as_os_str().to_owned();
        aside.push(format!(".harness-refused-{}", std::process::id()));
        let aside = PathBuf::from(aside);
        moved.push(match std::fs::rename(path, &aside) {
            Ok(()) => format!("{} (moved to {})", path.display(), aside.display()),
            Err(e) => format!(
                "{} (could not move it aside: {e}; remove it)",
                path.display()
            ),
        });
    }
    if moved.is_empty() {
        return Ok(());
    }
    Err(Error::new(
        ErrorKind::Delegate,
        format!(
            "delegate `{name}`: it created its own configuration, which would act the next time the CLI runs outside harness: {}; a confined CLI may keep its logins and sessions, not change its settings (write them yourself)",
            moved.join(", ")
        ),
    ))
}

/// Settings of an agent CLI delegate.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentSpec {
    /// Which CLI.
    pub kind: AgentKind,
    /// The program: a name looked up on `PATH` (never in the workspace), or a path.
    pub binary: PathBuf,
    /// The model to ask for (`--model`), when not the CLI's default.
    pub model: Option<String>,
    /// Arguments added to every invocation, before the prompt (e.g. Claude's
    /// `--allowedTools`).
    pub args: Vec<String>,
    /// Environment variables set besides the harness's own.
    pub env: Vec<(String, String)>,
    /// How long one run may take; then it is killed with its process group.
    pub timeout: Duration,
    /// The directory it runs in (the workspace root; filled in when the delegation runs).
    pub workdir: PathBuf,
    /// The sandbox it runs in (filled in when the delegation runs): the delegation's, with the
    /// network and the CLI's own configuration added; `None`: unconfined.
    pub isolation: Option<harness_builtins::Isolation>,
}

/// A delegate that runs an agent CLI per attempt and resumes its session on a retry.
#[derive(Debug)]
pub struct AgentDelegate {
    spec: AgentSpec,
    /// The session (thread) the first run started; every retry resumes it.
    session: Option<String>,
    /// The delegation's own directory, outside the workspace, for its life: Aider's chat
    /// history, Gemini CLI's private configuration.
    own_dir: Option<tempfile::TempDir>,
    /// Runs made so far.
    runs: u32,
    /// What `BINARY --version` printed (its first line), asked before the first run.
    version: Option<String>,
}

impl AgentDelegate {
    /// Creates the delegate.
    ///
    /// # Errors
    /// [`ErrorKind::Config`] when the CLI is not installed (naming how to install it).
    pub fn new(spec: AgentSpec) -> Result<Self> {
        let program = spec.binary.to_string_lossy();
        harness_builtins::find_program(&program, &spec.workdir, Some(&spec.workdir)).map_err(
            |e| {
                Error::config(format!(
                    "delegate `{}`: cannot find {program:?}: {e}; install it ({}) or set `delegate.binary` to its path",
                    spec.kind.name(),
                    spec.kind.install()
                ))
            },
        )?;
        let adapter = spec.kind.adapter();
        let own_dir = if adapter.keeps_own_dir() {
            let dir = tempfile::Builder::new()
                .prefix(&format!("harness-{}-", adapter.name()))
                .tempdir()
                .map_err(|e| {
                    Error::config(format!(
                        "delegate `{}`: cannot create its own directory: {e}",
                        adapter.name()
                    ))
                })?;
            Some(dir)
        } else {
            None
        };
        Ok(AgentDelegate {
            spec,
            session: None,
            own_dir,
            runs: 0,
            version: None,
        })
    }

    /// Asks the CLI its version (`--version`, confined like its runs, 30 s at most): the first
    /// line it prints, or `None` when it says nothing useful. Recorded in the run's `delegate`
    /// block and named in every error, so a changed output format points at the upgrade.
    async fn ask_version(&self, isolation: Option<&harness_builtins::Isolation>) -> Option<String> {
        let argv = [
            self.spec.binary.to_string_lossy().into_owned(),
            "--version".to_owned(),
        ];
        let launch = harness_builtins::Launch {
            cwd: &self.spec.workdir,
            env: &self.spec.env,
            home: None,
            hidden: Some(&self.spec.workdir),
            timeout: Duration::from_secs(30),
            cap: 4096,
            isolation,
            inherit_env: true,
            stdin: None,
            stop_on: None,
        };
        let run = harness_builtins::run_program(&argv, &launch).await.ok()?;
        if run.exit_code != Some(0) {
            return None;
        }
        run.stdout
            .lines()
            .map(str::trim)
            .find(|line| !line.is_empty())
            .map(|line| line.chars().take(120).collect())
    }

    /// The delegate as errors name it: its kind and, when known, its version.
    fn named(&self) -> String {
        match &self.version {
            Some(version) => format!("`{}`, version {version}", self.spec.kind.name()),
            None => format!("`{}`", self.spec.kind.name()),
        }
    }

    /// The sandbox of one run: the delegation's, with the network (the CLI talks to its model),
    /// its own directory and its configuration writable — nothing else of the user's HOME —
    /// and the paths of that configuration that would run programs later read-only. Also the
    /// guarded paths that do not exist yet, to be looked at after the run.
    ///
    /// # Errors
    /// [`ErrorKind::Delegate`] when a configuration directory cannot be made.
    fn isolation(
        &self,
        run: &Invocation<'_>,
    ) -> Result<(Option<harness_builtins::Isolation>, Vec<PathBuf>)> {
        let Some(base) = &self.spec.isolation else {
            return Ok((None, Vec::new()));
        };
        let adapter = self.spec.kind.adapter();
        let mut isolation = base.clone().with_network();
        if let Some(own) = run.own_dir {
            isolation = isolation.writable(own);
        }
        let Some(home) = std::env::var_os("HOME").map(PathBuf::from) else {
            return Ok((Some(isolation), Vec::new()));
        };
        let env = |name: &str| {
            run.var(name)
                .map(PathBuf::from)
                .filter(|path| path.is_absolute())
        };
        let mut absent = Vec::new();
        for config in adapter.config(&home, &env) {
            match config {
                Config::Dir(dir) => {
                    std::fs::create_dir_all(&dir).map_err(|e| {
                        Error::new(
                            ErrorKind::Delegate,
                            format!(
                                "delegate `{}`: cannot make its configuration directory {}: {e}",
                                adapter.name(),
                                dir.display()
                            ),
                        )
                    })?;
                    isolation = isolation.writable(&dir);
                }
                Config::File(file) => isolation = isolation.writable(&file),
                Config::Guarded(path) if path.symlink_metadata().is_ok() => {
                    isolation.read_only.push(path);
                }
                Config::Guarded(path) => absent.push(path),
            }
        }
        Ok((Some(isolation), absent))
    }

    async fn run(&mut self, prompt: &str, request: TurnRequest<'_>) -> Result<Turn> {
        let adapter = self.spec.kind.adapter();
        let name = adapter.name();
        let resume = self.resume(request.attempt)?;
        let hosting = self.hosting(&request)?;
        let invocation = Invocation {
            spec: &self.spec,
            prompt,
            resume: resume.as_deref(),
            own_dir: self.own_dir.as_ref().map(tempfile::TempDir::path),
        };
        let cannot = |e: std::io::Error| {
            Error::new(
                ErrorKind::Delegate,
                format!("delegate `{name}`: cannot run it: {e}"),
            )
        };
        let mut args = adapter.args(&invocation);
        let home = std::env::var_os("HOME").map_or_else(PathBuf::new, PathBuf::from);
        let mut env = adapter.prepare(&invocation, &home).map_err(cannot)?;
        env.extend(self.spec.env.iter().cloned());
        if let Some((hosting, host)) = &hosting {
            // After `delegate.env`: what points the CLI at the server is harness's to set.
            let served = hosting.served(host.bridge(), self.spec.timeout);
            env.extend(
                adapter
                    .serve_mcp(&invocation, &mut args, &served)
                    .map_err(cannot)?,
            );
        }
        let mut argv = vec![self.spec.binary.to_string_lossy().into_owned()];
        argv.extend(args);
        env.extend(super::trace_env());
        env.extend(super::parent_env(request.run_id));
        let (mut isolation, absent) = self.isolation(&invocation)?;
        if let (Some(isolation), Some((hosting, host))) = (&mut isolation, &hosting) {
            // The socket's directory, read-only (a socket is reached through a read-only
            // mount, and no other can be put in its place), and the relay the CLI starts.
            *isolation = std::mem::take(isolation).visible(hosting.dir());
            if let Some(dir) = host.bridge().first().and_then(|p| Path::new(p).parent()) {
                *isolation = std::mem::take(isolation).visible(dir);
            }
        }
        if self.runs == 0 {
            self.version = self.ask_version(isolation.as_ref()).await;
        }
        let fatal = |line: &str| adapter.fatal(line).is_some();
        let launch = harness_builtins::Launch {
            cwd: &self.spec.workdir,
            env: &env,
            home: None,
            hidden: Some(&self.spec.workdir),
            timeout: self.spec.timeout,
            cap: MAX_OUTPUT_BYTES,
            isolation: isolation.as_ref(),
            inherit_env: true,
            stdin: None,
            stop_on: Some(harness_builtins::StopOn(&fatal)),
        };
        self.runs += 1;
        let cli = harness_builtins::run_program(&argv, &launch);
        let (run, served) = match hosting {
            Some((hosting, host)) => {
                let (run, served) = hosting.serve(cli, host, request.tools).await;
                (run, Some(served))
            }
            None => (cli.await, None),
        };
        // A broken tool hook fails the attempt, as it does a model's call.
        let served = served.transpose()?;
        // A run that fails after calls were served still says which children they ran: its
        // error is what the record keeps of the attempt.
        let ran = |e: Error| host::naming_children(e, served.as_deref());
        planted(name, &absent).map_err(ran)?;
        let run = run.map_err(|e| {
            Error::new(
                ErrorKind::Delegate,
                format!("delegate `{name}`: cannot start {:?}: {e}", argv[0]),
            )
        })?;
        let mut parsed = self.read_run(&run, &invocation).map_err(ran)?;
        // `read_run` refused an answer that names no session.
        self.session.clone_from(&parsed.session);
        // No call of the CLI's own log under the name of harness's `delegate`; and where this
        // process served it, what it ran, not what the CLI says it asked of the server.
        for call in &mut parsed.observed {
            if call.name == crate::tools::Tool::Delegate.name() {
                call.name = format!("{name}:{}", call.name);
            }
        }
        if let Some(served) = served {
            parsed.observed.retain(|call| !host::reported(call));
            parsed.observed.extend(served);
        }
        Ok(Turn {
            content: Some(parsed.response),
            tool_calls: Vec::new(),
            usage: Usage {
                requests: 1,
                ..parsed.usage
            },
            finish_reason: Some("stop".to_owned()),
            observed: parsed.observed,
        })
    }
}

impl AgentDelegate {
    /// The MCP server of this run, when the delegation offers the CLI harness's tools: a
    /// socket listening, and the host that runs its calls.
    ///
    /// # Errors
    /// [`ErrorKind::Config`] when `delegate` is offered but this process serves no tools to a
    /// CLI (a runtime without [`Runtime::bridge_mcp`](crate::Runtime::bridge_mcp)), or the CLI
    /// calls no MCP tools; [`ErrorKind::Delegate`] when the socket cannot be made.
    fn hosting<'a>(
        &self,
        request: &TurnRequest<'a>,
    ) -> Result<Option<(host::Hosting, &'a dyn Host)>> {
        let name = self.spec.kind.name();
        let offered = request
            .tools
            .iter()
            .any(|t| t.name == crate::tools::Tool::Delegate.name());
        let host = match (offered, request.host) {
            (false, _) => return Ok(None),
            (true, Some(host)) if self.spec.kind.calls_mcp() && !host.bridge().is_empty() => host,
            (true, _) => {
                return Err(Error::config(format!(
                    "delegate `{name}`: the delegation offers it `delegate`, which this process cannot serve it (an agent CLI reaches it over MCP, served by `harness run`, `batch`, `serve` and `worker`: `Runtime::bridge_mcp`)"
                )));
            }
        };
        let hosting = host::Hosting::open().map_err(|e| {
            Error::new(
                ErrorKind::Delegate,
                format!("delegate `{name}`: cannot make the socket of its MCP server: {e}"),
            )
        })?;
        Ok(Some((hosting, host)))
    }

    /// The session attempt `attempt` resumes: none for the first run, the one recorded for every
    /// later one — never a fresh session as the same delegate.
    fn resume(&self, attempt: u32) -> Result<Option<String>> {
        match (&self.session, self.runs) {
            (Some(id), _) => Ok(Some(id.clone())),
            (None, 0) => Ok(None),
            (None, _) => {
                let adapter = self.spec.kind.adapter();
                Err(Error::new(
                    ErrorKind::Delegate,
                    format!(
                        "delegate `{}`: attempt {} must resume the {} of attempt 1, but none was recorded; refusing to start a fresh one as the same delegate",
                        adapter.name(),
                        attempt + 1,
                        adapter.session_word()
                    ),
                ))
            }
        }
    }

    /// What the CLI's run answered, or why it is no answer: stopped on a fatal line, timed out,
    /// output cut, a failed exit or stream, or no session id (or another than the one resumed).
    fn read_run(
        &self,
        run: &harness_builtins::ProgramRun,
        invocation: &Invocation<'_>,
    ) -> Result<Parsed> {
        let adapter = self.spec.kind.adapter();
        let named = self.named();
        let fail = |what: String| {
            Err(Error::new(
                ErrorKind::Delegate,
                format!(
                    "delegate {named}: {what}{}",
                    super::output_tail(&run.stdout, &run.stderr)
                ),
            ))
        };
        if let Some(line) = &run.stopped_at {
            let why = adapter.fatal(line).unwrap_or_default();
            return fail(format!(
                "{why}; stopped at this line of its output: {}",
                clipped(line)
            ));
        }
        if run.timed_out {
            return fail(format!(
                "timed out after {}s and was killed with its process group (raise `delegate.timeout_s` if the agent needs longer)",
                self.spec.timeout.as_secs_f64()
            ));
        }
        if run.stdout_cut {
            return fail(format!(
                "its output ran past {MAX_OUTPUT_BYTES} bytes; a cut stream cannot be read to its end (give the agent a smaller task)"
            ));
        }
        let parsed = match (
            adapter.parse(&run.stdout, invocation),
            super::how_it_ended(run.exit_code),
        ) {
            (Ok(parsed), None) => parsed,
            // The CLI's own words first: an error it reported in its stream, else how it exited.
            (Ok(parsed), Some(exit)) => {
                let said = parsed.error.unwrap_or_default();
                return fail(format!("{exit}{}", prefixed(": ", &said)));
            }
            (Err(why), Some(exit)) => return fail(format!("{exit}; {why}")),
            (Err(why), None) => return fail(why),
        };
        if let Some(error) = parsed.error {
            return fail(error);
        }
        let word = adapter.session_word();
        let Some(session) = &parsed.session else {
            return fail(format!(
                "the output names no {word} id, so a retry could not continue it"
            ));
        };
        if let Some(expected) = invocation.resume
            && expected != session
        {
            return fail(format!(
                "asked to resume {word} {expected}, the CLI reported {session}: it did not continue the same {word}"
            ));
        }
        Ok(parsed)
    }
}

/// `line`, cut to what an error message can show.
fn clipped(line: &str) -> String {
    const SHOWN: usize = 300;
    if line.chars().count() <= SHOWN {
        line.to_owned()
    } else {
        format!("{}…", line.chars().take(SHOWN).collect::<String>())
    }
}

/// `prefix` then `text`, or nothing when `text` is empty.
fn prefixed(prefix: &str, text: &str) -> String {
    if text.trim().is_empty() {
        String::new()
    } else {
        format!("{prefix}{}", text.trim())
    }
}

/// What one run's output says.
#[derive(Debug, Default)]
struct Parsed {
    response: String,
    session: Option<String>,
    observed: Vec<ObservedCall>,
    usage: Usage,
    /// A failure the CLI reported in its own output.
    error: Option<String>,
}

/// Reads JSON lines; a line that is not JSON is the CLI's output changing under us (an upgrade,
/// a crash mid-stream), reported with its line number.
fn json_lines(stdout: &str, format: &str) -> std::result::Result<Vec<Value>, String> {
    stdout
        .lines()
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty())
        .map(|(i, line)| {
            serde_json::from_str::<Value>(line).map_err(|e| {
                format!(
                    "line {} of its output is not {format} ({e}): {}; the CLI's output format may have changed (a new version?)",
                    i + 1,
                    clipped(line)
                )
            })
        })
        .collect()
}

fn text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        // Claude's tool results may be a list of content blocks.
        Value::Array(blocks) => blocks
            .iter()
            .map(|b| match b {
                Value::Object(block) => block
                    .get("text")
                    .and_then(Value::as_str)
                    .map_or_else(|| b.to_string(), str::to_owned),
                other => text(other),
            })
            .collect::<Vec<_>>()
            .join("\n"),
        other => other.to_string(),
    }
}

fn count(value: &Value) -> u64 {
    value.as_u64().unwrap_or(0)
}

/// Tool calls in the order they were made, answered by id as results arrive.
#[derive(Default)]
struct CallLog {
    calls: Vec<ObservedCall>,
    /// The CLI's id of each call to the latest call that carried it.
    index: HashMap<String, usize>,
    /// Every id given out, suffixed ones included.
    given: HashSet<String>,
}

impl CallLog {
    fn call(&mut self, id: String, name: String, arguments: Value) {
        let arguments = match arguments {
            Value::Object(map) => map,
            Value::Null => Map::new(),
            other => Map::from_iter([("input".to_owned(), other)]),
        };
        // Ids are the CLI's; one reused within the run (or clashing with a suffix given
        // earlier) gets a suffix no call has, so every call keeps exactly one id and one result;
        // a result answers the latest call of its id.
        let mut unique = id.clone();
        let mut n = 1;
        while self.given.contains(&unique) {
            n += 1;
            unique = format!("{id}#{n}");
        }
        self.given.insert(unique.clone());
        self.index.insert(id, self.calls.len());
        self.calls.push(ObservedCall {
            id: unique,
            name,
            arguments,
            content: "(the CLI reported no result for this call)".to_owned(),
            is_error: true,
        });
    }

    fn result(&mut self, id: &str, content: String, is_error: bool) {
        if let Some(call) = self.index.get(id).and_then(|&i| self.calls.get_mut(i)) {
            call.content = content;
            call.is_error = is_error;
        }
    }
}

/// The prompt of this run: the task on the first attempt; on a retry only the retry prompt,
/// since the resumed session already holds the task and its own earlier claim.
fn prompt(messages: &[Message], resuming: bool) -> Option<String> {
    let mut users = messages.iter().filter_map(|m| match m {
        Message::User(text) => Some(text.as_str()),
        _ => None,
    });
    let first = users.next()?;
    Some(if resuming {
        users.next_back().unwrap_or(first).to_owned()
    } else {
        first.to_owned()
    })
}

impl Delegate for AgentDelegate {
    fn kind(&self) -> &'static str {
        self.spec.kind.name()
    }

    fn model(&self) -> Option<&str> {
        self.spec.model.as_deref()
    }

    fn session(&self) -> Option<&str> {
        self.session.as_deref()
    }

    fn version(&self) -> Option<&str> {
        self.version.as_deref()
    }

    fn turn<'a>(&'a mut self, request: TurnRequest<'a>) -> BoxFuture<'a, Result<Turn>> {
        Box::pin(async move {
            let Some(prompt) = prompt(request.messages, self.runs > 0) else {
                return Err(Error::new(
                    ErrorKind::Delegate,
                    format!(
                        "delegate `{}`: the conversation has no user message to send as the prompt",
                        self.spec.kind.name()
                    ),
                ));
            };
            self.run(&prompt, request).await
        })
    }
}

/// The program `binary` names: a path (containing `/`) resolved against the delegation file's
/// directory `base` — absolute, since the CLI runs in the workspace, not where harness was
/// started — or a name looked up on `PATH`.
pub(crate) fn binary_path(base: &Path, binary: &str) -> PathBuf {
    if binary.contains('/') {
        let path = base.join(binary);
        std::path::absolute(&path).unwrap_or(path)
    } else {
        PathBuf::from(binary)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_without_a_result_is_an_error_result() {
        let mut log = CallLog::default();
        log.call("a".into(), "Bash".into(), Value::Null);
        log.result("a", "ok".into(), false);
        log.call("a".into(), "Bash".into(), Value::Null);
        assert_eq!(log.calls[1].id, "a#2");
        assert!(!log.calls[0].is_error);
        assert!(log.calls[1].is_error);
    }

    /// The CLI's ids are the delegate's to choose: however it reuses them (or names one after a
    /// suffix), every call in the log keeps an id of its own.
    #[test]
    fn reused_ids_never_make_two_calls_one() {
        let mut log = CallLog::default();
        for id in ["a", "a", "a", "a#4", "a", "a#2"] {
            log.call(id.into(), "Bash".into(), Value::Null);
        }
        let ids: Vec<&str> = log.calls.iter().map(|c| c.id.as_str()).collect();
        assert_eq!(ids, ["a", "a#2", "a#3", "a#4", "a#5", "a#2#2"]);
        log.result("a", "last".into(), false);
        assert_eq!(log.calls[4].content, "last");
    }
}
