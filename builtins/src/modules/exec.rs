//! `exec.run(argv, timeout=30, cwd=None)`: allow-listed programs, no shell.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::json;
use starlark::environment::GlobalsBuilder;
use starlark::eval::Evaluator;
use starlark::starlark_module;
use starlark::values::Value;
use starlark::values::list::UnpackList;
use tokio::io::{AsyncRead, AsyncReadExt};

use crate::host::Host;
use crate::json_value::alloc_json;
use crate::sandbox::Isolation;

/// Variables passed through to programs; everything else in the harness's environment is
/// withheld unless allow-listed for `env.get`, so a verifier cannot leak secrets through a child.
const PASSED_ENV: &[&str] = &["PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "TERM", "USER"];

/// Bytes of an output's end kept besides its first `cap` bytes when it runs past them: the end
/// is where a program says how it failed.
pub const KEPT_END_BYTES: usize = 16 * 1024;

/// Reads `reader` to the end, keeping the first `cap` bytes and, when it runs past them, its last
/// [`KEPT_END_BYTES`] (lossily UTF-8 both). Reading on past the cap keeps a child process from
/// blocking on a full pipe.
pub async fn read_capped(reader: impl AsyncRead + Unpin, cap: usize) -> Capped {
    read_watched(reader, cap, None).await.0
}

/// The longest line a [`StopOn`] is shown; the rest of a longer line is not looked at.
const WATCHED_LINE_BYTES: usize = 64 * 1024;

/// [`read_capped`], showing each line to `watch` as it arrives: the first it matches kills the
/// process group and is returned (reading goes on to the end of what was written).
async fn read_watched(
    mut reader: impl AsyncRead + Unpin,
    cap: usize,
    watch: Option<(StopOn<'_>, &ProcessGroup)>,
) -> (Capped, Option<String>) {
    let mut head = Vec::new();
    let mut end = Vec::new();
    let mut dropped = 0u64;
    let mut buf = [0u8; 8192];
    let mut line = Vec::new();
    let mut stopped = None;
    loop {
        match reader.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                if let (Some((stop, group)), None) = (&watch, &stopped) {
                    for piece in buf[..n].split_inclusive(|&b| b == b'\n') {
                        let room = WATCHED_LINE_BYTES.saturating_sub(line.len());
                        line.extend_from_slice(&piece[..room.min(piece.len())]);
                        if piece.ends_with(b"\n") {
                            let text = String::from_utf8_lossy(&line);
                            if (stop.0)(text.trim_end()) {
                                group.kill();
                                stopped = Some(text.trim_end().to_owned());
                                break;
                            }
                            line.clear();
                        }
                    }
                }
                let room = cap.saturating_sub(head.len()).min(n);
                head.extend_from_slice(&buf[..room]);
                end.extend_from_slice(&buf[room..n]);
                if end.len() > 2 * KEPT_END_BYTES {
                    let gone = end.len() - KEPT_END_BYTES;
                    end.drain(..gone);
                    dropped += gone as u64;
                }
            }
        }
    }
    let gone = end.len().saturating_sub(KEPT_END_BYTES);
    end.drain(..gone);
    dropped += gone as u64;
    let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
    let capped = Capped {
        head: text(&head),
        end: (!end.is_empty() || dropped > 0).then(|| text(&end)),
    };
    (capped, stopped)
}

/// A line of a program's output (stdout or stderr) that ends it: it is killed with its process
/// group when one is printed — an agent CLI that says its credentials were refused and would
/// otherwise retry for minutes.
#[derive(Clone, Copy)]
pub struct StopOn<'a>(pub &'a (dyn Fn(&str) -> bool + Sync));

impl std::fmt::Debug for StopOn<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StopOn(..)")
    }
}

/// An output read by [`read_capped`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Capped {
    /// Its first `cap` bytes.
    pub head: String,
    /// Its last bytes, when it ran past the cap (what lies between is dropped).
    pub end: Option<String>,
}

impl Capped {
    /// The output as a program's result shows it: the head, then, when it ran past `cap`, a mark
    /// and its end.
    pub fn shown(self, cap: usize) -> String {
        match self.end {
            None => self.head,
            Some(end) => format!(
                "{}\n[output truncated at the {cap}-byte cap]\n…{end}",
                self.head
            ),
        }
    }

    /// True when it ran past the cap.
    pub fn cut(&self) -> bool {
        self.end.is_some()
    }
}

/// The outcome of one program run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProgramRun {
    /// The exit code; None when the program was killed (timeout or signal).
    pub exit_code: Option<i32>,
    /// Standard output, lossily UTF-8, capped (see [`Capped::shown`]).
    pub stdout: String,
    /// Standard error, lossily UTF-8, capped.
    pub stderr: String,
    /// True when standard output ran past the cap: what it holds is not the whole of it.
    pub stdout_cut: bool,
    /// True when the program ran past its timeout and was killed.
    pub timed_out: bool,
    /// The line of its output that stopped it ([`Launch::stop_on`]).
    pub stopped_at: Option<String>,
    /// How long it ran.
    pub duration: Duration,
    /// The CPU time (user and system) of the program and of every process it waited for, as
    /// the kernel accounts it when the program ends; `None` for a program that timed out, and
    /// where the kernel does not say (Linux before 5.4, other systems).
    pub cpu: Option<Duration>,
}

/// How to run one program: what [`run_program`] needs besides `argv`.
#[derive(Debug, Clone)]
pub struct Launch<'a> {
    /// The working directory.
    pub cwd: &'a Path,
    /// Variables set besides the passed-through ones (they win over those).
    pub env: &'a [(String, String)],
    /// The program's `HOME` (and `TMPDIR`, its `tmp/`), instead of the user's; created when
    /// missing. `None` passes the user's through.
    pub home: Option<&'a Path>,
    /// A directory whose programs must never be found through `PATH` (the workspace: a planted
    /// `./git` must not run for `git`).
    pub hidden: Option<&'a Path>,
    /// Killed, with its whole process group, after this long.
    pub timeout: Duration,
    /// Bytes of stdout and of stderr kept, each, from their start (and when one runs past them,
    /// its last [`KEPT_END_BYTES`] after the mark).
    pub cap: usize,
    /// Run inside an OS sandbox (bubblewrap) rather than as a plain child.
    pub isolation: Option<&'a Isolation>,
    /// Pass the harness's whole environment rather than the minimal one (agent CLIs need their
    /// API keys and configuration; the operator chose the program, not a script).
    pub inherit_env: bool,
    /// Written to the program's standard input, which is then closed; `None`: no input at all.
    /// A program that exits without reading it is not an error (its exit status says).
    pub stdin: Option<&'a [u8]>,
    /// Stop it at the first line of its output this matches.
    pub stop_on: Option<StopOn<'a>>,
}

/// The user's `HOME`, when it is an absolute path to a directory.
fn user_home() -> Option<PathBuf> {
    let home = PathBuf::from(std::env::var_os("HOME")?);
    (home.is_absolute() && home.is_dir()).then_some(home)
}

/// What stays visible, read-only, of the `hidden` directories (see [`Isolation`]): each path
/// strictly inside one of them, existing, once, as given and as its real path.
fn visible(
    given: &[PathBuf],
    launch: &Launch<'_>,
    program: &Path,
    path: Option<&std::ffi::OsStr>,
    hidden: &[PathBuf],
) -> Vec<PathBuf> {
    let mut wanted: Vec<PathBuf> = given.to_vec();
    let prefix_of = |bin: &Path| {
        bin.file_name()
            .is_some_and(|name| name == "bin")
            .then(|| bin.parent().map(Path::to_path_buf))
            .flatten()
    };
    for dir in path.map(std::env::split_paths).into_iter().flatten() {
        if let Some(prefix) = prefix_of(&dir) {
            // A virtualenv on PATH: `pyvenv.cfg` beside its `bin/` is how Python finds it.
            wanted.extend(["lib", "lib64", "libexec", "pyvenv.cfg"].map(|part| prefix.join(part)));
        } else if dir.file_name().is_some_and(|name| name == "shims") {
            // A version manager's shims (pyenv, rbenv, asdf) run what its own root holds.
            wanted.extend(dir.parent().map(Path::to_path_buf));
        }
        wanted.push(dir);
    }
    for program in [program.to_path_buf()]
        .into_iter()
        .chain(program.canonicalize().ok())
    {
        if let Some(dir) = program.parent() {
            wanted.push(prefix_of(dir).unwrap_or_else(|| dir.to_path_buf()));
            wanted.push(dir.to_path_buf());
        }
    }
    for (_, value) in launch.env {
        wanted.extend(
            std::env::split_paths(value)
                .filter(|p| p.is_absolute())
                .map(|p| p.to_path_buf()),
        );
    }
    let mut seen = Vec::new();
    for path in wanted {
        let real = path.canonicalize().ok();
        for path in std::iter::once(path).chain(real) {
            // Strictly inside: a prefix that is the hidden HOME itself stays hidden.
            let inside = hidden.iter().any(|h| path.starts_with(h) && path != *h);
            if inside && path.exists() && !seen.contains(&path) {
                seen.push(path);
            }
        }
    }
    // A path inside another one bound already is there with it (its real path, when a link
    // leads elsewhere, is in the list on its own): one mount fewer each.
    let all = seen.clone();
    seen.retain(|path| {
        !all.iter()
            .any(|other| other != path && path.starts_with(other))
    });
    seen
}

/// The bubblewrap program, when it is installed.
///
/// # Errors
/// `NotFound`, saying how to install it.
pub fn bubblewrap() -> std::io::Result<PathBuf> {
    find_bubblewrap(search_path(None).as_deref())
}

/// True when bubblewrap is installed and can make its namespaces here (a container may forbid
/// user namespaces): tried once per process, by confining `true`.
pub fn bubblewrap_works() -> bool {
    static WORKS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *WORKS.get_or_init(|| {
        let Ok(bwrap) = bubblewrap() else {
            return false;
        };
        let Ok(truth) = resolve_program("true", search_path(None).as_deref(), Path::new("/"))
        else {
            return false;
        };
        std::process::Command::new(bwrap)
            .args(SANDBOX_ARGS)
            .arg("--")
            .arg(truth)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|status| status.success())
    })
}

/// What every bubblewrap sandbox starts with: the whole file system read-only, fresh `/dev`,
/// `/proc` and `/tmp`, every namespace of its own (PID: everything in it dies with it; no
/// network), a session of its own (no terminal to inject into), and gone when harness is.
///
/// The program is the namespace's PID 1 itself (`--as-pid-1`), not a child of bubblewrap's own
/// init: bubblewrap then waits for it, so the CPU time it and the processes it waited for used
/// is bubblewrap's to report ([`ProgramRun::cpu`]); with the init in between, bubblewrap exits
/// without waiting for it and that time is lost. Everything in the namespace still dies when
/// the program ends.
const SANDBOX_ARGS: [&str; 13] = [
    "--die-with-parent",
    "--new-session",
    "--unshare-all",
    "--as-pid-1",
    "--ro-bind",
    "/",
    "/",
    "--dev",
    "/dev",
    "--proc",
    "/proc",
    "--tmpfs",
    "/tmp",
];

/// Finds `bwrap` on `path` (absolute entries only, as [`search_path`] leaves them).
fn find_bubblewrap(path: Option<&std::ffi::OsStr>) -> std::io::Result<PathBuf> {
    resolve_program("bwrap", path, Path::new("/")).map_err(|_| {
        std::io::Error::new(
            std::io::ErrorKind::NotFound,
            "bubblewrap (`bwrap`) is not installed; install it (Debian/Ubuntu: apt install bubblewrap) or set `commands.isolation: none`",
        )
    })
}

/// Runs `argv` (no shell) as [`Launch`] says, with a minimal environment (`PATH` without
/// relative entries or any inside `launch.hidden`, `HOME`, `LANG`, `LC_ALL`, `TMPDIR`, `TERM`,
/// `USER` plus `launch.env`), in a process group of its own: when the program exits or times
/// out, the whole group is killed, so a background child can neither hold the output open nor
/// outlive the call. A program named without a `/` is looked up on that `PATH` here, never in
/// the working directory.
///
/// # Errors
/// `argv` is empty, the program is not found, or it cannot be started.
pub async fn run_program(argv: &[String], launch: &Launch<'_>) -> std::io::Result<ProgramRun> {
    let Some((program, rest)) = argv.split_first() else {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "empty argv",
        ));
    };
    let started = Instant::now();
    let path = search_path(launch.hidden);
    let resolved = resolve_program(program, path.as_deref(), launch.cwd)?;
    let mut command = match &launch.isolation {
        None => tokio::process::Command::new(resolved),
        Some(isolation) => {
            // Found like the program: never in the workspace.
            let mut command = tokio::process::Command::new(find_bubblewrap(path.as_deref())?);
            command
                .args(isolation.arguments(launch, &resolved, path.as_deref()))
                .arg(resolved);
            command
        }
    };
    command.args(rest).current_dir(launch.cwd);
    if !launch.inherit_env {
        command.env_clear();
    }
    command
        .stdin(if launch.stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    #[cfg(unix)]
    command.process_group(0);
    for name in PASSED_ENV {
        if let Ok(value) = std::env::var(name) {
            command.env(name, value);
        }
    }
    match &path {
        Some(path) => command.env("PATH", path),
        None => command.env_remove("PATH"),
    };
    if let Some(home) = launch.home {
        let tmp = home.join("tmp");
        std::fs::create_dir_all(&tmp)?;
        command.env("HOME", home).env("TMPDIR", tmp);
    }
    command.envs(launch.env.iter().map(|(k, v)| (k, v)));
    let mut child = crate::reaper::spawn(&mut command, launch.isolation.is_some())?;
    let leader = child.id();
    // Before anything may reap it: its usage is read when it ends, then tokio reaps it.
    let exit = crate::cpu::Exit::watch(leader);
    let group = ProcessGroup::new(leader);
    let stdout = child.stdout.take().expect("stdout is piped");
    let stderr = child.stderr.take().expect("stderr is piped");
    let input = child.stdin.take().zip(launch.stdin);
    let cap = launch.cap;
    let write_input = async {
        if let Some((mut pipe, bytes)) = input {
            use tokio::io::AsyncWriteExt as _;
            // A program that exits without reading its input closes the pipe: its exit status
            // says whether it worked.
            let _ = pipe.write_all(bytes).await;
            let _ = pipe.shutdown().await;
        }
    };
    let output = async {
        let waited = async {
            let cpu = match &exit {
                Some(exit) => exit.cpu().await,
                None => None,
            };
            let status = child.wait().await;
            // Whatever it left running in the background goes with it, closing the pipes.
            group.kill();
            (status, cpu)
        };
        let ((), out, err, status) = tokio::join!(
            write_input,
            read_watched(stdout, cap, launch.stop_on.map(|stop| (stop, &group))),
            read_watched(stderr, cap, launch.stop_on.map(|stop| (stop, &group))),
            waited
        );
        (out, err, status)
    };
    let ended = tokio::time::timeout(launch.timeout, output).await;
    // On a timeout, the leader is killed when the future drops the child; the rest now, and
    // whatever detached itself from the group.
    group.kill();
    crate::reaper::ended(leader).await;
    match ended {
        Ok(((stdout, out_stop), (stderr, err_stop), (status, cpu))) => Ok(ProgramRun {
            exit_code: status?.code(),
            stdout_cut: stdout.cut(),
            stdout: stdout.shown(cap),
            stderr: stderr.shown(cap),
            timed_out: false,
            stopped_at: out_stop.or(err_stop),
            duration: started.elapsed(),
            cpu,
        }),
        Err(_) => Ok(ProgramRun {
            exit_code: None,
            stdout: String::new(),
            stderr: String::new(),
            stdout_cut: false,
            timed_out: true,
            stopped_at: None,
            duration: started.elapsed(),
            cpu: None,
        }),
    }
}

/// The process group a child leads (its pid; start it with `process_group(0)`), killed as a
/// whole once: after the leader exits, on a timeout, or at the latest when dropped, so a
/// cancelled call leaves nothing running. Only once, because a group id is free for reuse when
/// its last member is gone.
#[derive(Debug)]
pub struct ProcessGroup(std::sync::Mutex<Option<u32>>);

impl ProcessGroup {
    /// The group led by the child `pid` (as `Child::id` gives it).
    pub fn new(pid: Option<u32>) -> Self {
        ProcessGroup(std::sync::Mutex::new(pid))
    }

    /// Kills every process of the group (SIGKILL), the first time only.
    pub fn kill(&self) {
        let pid = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        #[cfg(unix)]
        if let Some(pid) = pid.and_then(|pid| i32::try_from(pid).ok()) {
            // Gone already (ESRCH) is the usual, fine answer.
            let _ = nix::sys::signal::killpg(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
        #[cfg(not(unix))]
        let _ = pid;
    }
}

impl Drop for ProcessGroup {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Finds `program` as [`run_program`] would: a name without `/` on the harness's `PATH` (never
/// inside `hidden`), a path with one relative to `cwd`.
///
/// # Errors
/// `NotFound` naming the program.
pub fn find_program(program: &str, cwd: &Path, hidden: Option<&Path>) -> std::io::Result<PathBuf> {
    let path = search_path(hidden);
    let found = resolve_program(program, path.as_deref(), cwd)?;
    if is_executable(&found) {
        Ok(found)
    } else {
        Err(std::io::Error::new(
            std::io::ErrorKind::NotFound,
            format!("{} is not an executable file", found.display()),
        ))
    }
}

/// The harness's `PATH` without empty or relative entries and without any inside `hidden`.
fn search_path(hidden: Option<&Path>) -> Option<std::ffi::OsString> {
    let path = std::env::var_os("PATH")?;
    let hidden = hidden.and_then(|h| h.canonicalize().ok());
    let kept: Vec<PathBuf> = std::env::split_paths(&path)
        .filter(|dir| dir.is_absolute())
        .filter(|dir| {
            let Some(hidden) = &hidden else { return true };
            let real = dir.canonicalize().unwrap_or_else(|_| dir.clone());
            !real.starts_with(hidden)
        })
        .collect();
    std::env::join_paths(kept).ok()
}

/// Finds `program` on `path` when it has no `/`; a path with one is taken relative to `cwd`.
fn resolve_program(
    program: &str,
    path: Option<&std::ffi::OsStr>,
    cwd: &Path,
) -> std::io::Result<PathBuf> {
    if program.contains('/') {
        return Ok(cwd.join(program));
    }
    let found = path
        .map(std::env::split_paths)
        .into_iter()
        .flatten()
        .map(|dir| dir.join(program))
        .find(|candidate| is_executable(candidate));
    found.ok_or_else(|| {
        std::io::Error::new(
            std::io::ErrorKind::NotFound,
            format!("{program:?} is not on PATH (the workspace is never searched; name a program in it as ./{program})"),
        )
    })
}

fn is_executable(path: &Path) -> bool {
    let Ok(meta) = std::fs::metadata(path) else {
        return false;
    };
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        meta.is_file() && meta.permissions().mode() & 0o111 != 0
    }
    #[cfg(not(unix))]
    {
        meta.is_file()
    }
}

#[starlark_module]
pub(crate) fn members(builder: &mut GlobalsBuilder) {
    /// Runs a program (no shell) and returns
    /// `{exit_code, stdout, stderr, timed_out, duration_ms}`. `argv[0]` must be allow-listed
    /// exactly (`--allow-exec PROGRAM`); `cwd` must be inside the workspace (default: its root).
    /// A program that runs past `timeout` seconds is killed: `timed_out` is True and `exit_code`
    /// None. Output beyond the cap is dropped and marked `[output truncated …]`, its last 16 KiB
    /// kept after the mark.
    ///
    /// ```python
    /// r = exec.run(["cargo", "test", "--quiet"], timeout = 300)
    /// ok = r["exit_code"] == 0
    /// ```
    fn run<'v>(
        #[starlark(require = pos)] argv: UnpackList<String>,
        #[starlark(require = named, default = 30)] timeout: i32,
        #[starlark(require = named)] cwd: Option<&str>,
        eval: &mut Evaluator<'v, '_, '_>,
    ) -> anyhow::Result<Value<'v>> {
        let host = Host::of(eval)?;
        host.needs_thread("exec.run")?;
        let argv = Some(argv.items)
            .filter(|a| !a.is_empty())
            .ok_or_else(|| anyhow::anyhow!("exec.run: argv must be a non-empty list of strings"))?;
        let program = &argv[0];
        if !host
            .sandbox
            .capabilities
            .programs
            .iter()
            .any(|p| p == program)
        {
            return Err(host.refuse(format!(
                "exec.run: program {program:?} is not allowed for {} scripts (allow it with --allow-exec {program})",
                host.sandbox.surface.as_str()
            )));
        }
        let workspace = &host.sandbox.workspace;
        let intercepted = host
            .sandbox
            .interceptor
            .as_ref()
            .and_then(|i| i.exec(program));
        if let Some(reply) = intercepted {
            // The canned run; no program starts.
            let reply = reply.map_err(|e| anyhow::anyhow!("exec.run: {e}"))?;
            return Ok(alloc_json(
                eval.heap(),
                &json!({
                    "exit_code": reply.exit_code,
                    "stdout": reply.stdout,
                    "stderr": reply.stderr,
                    "timed_out": false,
                    "duration_ms": 0,
                }),
            ));
        }
        let dir = match cwd {
            None => workspace.root().to_path_buf(),
            Some(cwd) => workspace
                .resolve(cwd)
                .map_err(|e| host.refuse(format!("exec.run: cwd {e}")))?,
        };
        let env: Vec<(String, String)> = host
            .sandbox
            .capabilities
            .env
            .iter()
            .filter_map(|n| std::env::var(n).ok().map(|v| (n.clone(), v)))
            .collect();
        let wait =
            Duration::from_secs(u64::try_from(timeout.max(1)).unwrap_or(1)).min(host.remaining());
        let cap = host.sandbox.limits.max_exec_output_bytes;
        // Its own HOME, as a check's: nothing a delegate planted in the user's configuration
        // (or in a HOME it could write) changes what the judge's program does.
        let home = tempfile::Builder::new()
            .prefix("harness-exec-home-")
            .tempdir()
            .map_err(|e| anyhow::anyhow!("exec.run: cannot make its private HOME: {e}"))?;
        let launch = Launch {
            cwd: &dir,
            env: &env,
            home: Some(home.path()),
            hidden: Some(workspace.root()),
            timeout: wait,
            cap,
            isolation: host.sandbox.isolation.as_ref(),
            inherit_env: false,
            stdin: None,
            stop_on: None,
        };
        let run = host
            .block_on(run_program(&argv, &launch))?
            .map_err(|e| anyhow::anyhow!("exec.run: cannot start {program:?}: {e}"))?;
        Ok(alloc_json(
            eval.heap(),
            &json!({
                "exit_code": run.exit_code,
                "stdout": run.stdout,
                "stderr": run.stderr,
                "timed_out": run.timed_out,
                "duration_ms": u64::try_from(run.duration.as_millis()).unwrap_or(u64::MAX),
            }),
        ))
    }
}

/// How bubblewrap is told to run a program in this sandbox.
impl Isolation {
    /// The bubblewrap arguments that run `program` (resolved, as found on `path`) for `launch`,
    /// up to and including the `--` before the program.
    fn arguments(
        &self,
        launch: &Launch<'_>,
        program: &Path,
        path: Option<&std::ffi::OsStr>,
    ) -> Vec<std::ffi::OsString> {
        let mut args: Vec<std::ffi::OsString> = SANDBOX_ARGS.iter().map(Into::into).collect();
        if self.network {
            args.push("--share-net".into());
        }
        let mut hidden = vec![PathBuf::from("/tmp")];
        let writable: Vec<&Path> = self
            .writable
            .iter()
            .map(PathBuf::as_path)
            .chain(launch.home)
            .filter(|p| p.exists())
            .collect();
        if let Some(home) = user_home().filter(|home| {
            // Already hidden, or where everything is: left alone; a HOME inside a writable
            // directory is writable anyway.
            !home.starts_with("/tmp")
                && home.parent().is_some()
                && !writable.iter().any(|w| home.starts_with(w))
        }) {
            args.extend(["--tmpfs".into(), home.as_os_str().into()]);
            hidden.push(home);
        }
        let mut bind = |flag: &str, path: &Path| {
            args.extend([flag.into(), path.into(), path.into()]);
        };
        for seen in visible(&self.visible, launch, program, path, &hidden) {
            bind("--ro-bind", &seen);
        }
        for dir in writable {
            bind("--bind", dir);
        }
        for path in self.read_only.iter().filter(|p| p.exists()) {
            bind("--ro-bind", path);
        }
        // A directory under an empty tmpfs, a file under `/dev/null`.
        for path in &self.masked {
            match path.symlink_metadata() {
                Ok(meta) if meta.is_dir() => args.extend(["--tmpfs".into(), path.into()]),
                Ok(_) => args.extend(["--ro-bind".into(), "/dev/null".into(), path.into()]),
                Err(_) => {}
            }
        }
        args.extend(["--chdir".into(), launch.cwd.into(), "--".into()]);
        args
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The line that stops a program is found however its output is split across reads, the
    /// program is killed there (not at its timeout), and what it printed before is kept.
    #[tokio::test]
    async fn a_line_split_across_reads_stops_the_program() {
        let dir = tempfile::tempdir().expect("a directory");
        let argv = [
            "sh".to_owned(),
            "-c".to_owned(),
            "echo first; printf 'auth'; sleep 0.2; printf 'entication refused\\nafter\\n'; sleep 30"
                .to_owned(),
        ];
        let stop = |line: &str| line.starts_with("authentication refused");
        let launch = Launch {
            cwd: dir.path(),
            env: &[],
            home: None,
            hidden: None,
            timeout: Duration::from_secs(60),
            cap: 4096,
            isolation: None,
            inherit_env: false,
            stdin: None,
            stop_on: Some(StopOn(&stop)),
        };
        let run = run_program(&argv, &launch).await.expect("it runs");
        assert_eq!(run.stopped_at.as_deref(), Some("authentication refused"));
        // Killed (no exit code of its own), not left to sleep out and exit 0.
        assert!(!run.timed_out);
        assert_eq!(run.exit_code, None);
        assert!(
            run.stdout.starts_with("first\nauthentication refused"),
            "{}",
            run.stdout
        );
    }

    /// A program's CPU time counts what it and the processes it waited for computed, not the
    /// time it took; a program that times out has none (no figure is made up). A pidfd-less
    /// platform has no figure at all, which the runs below then do not assert.
    #[tokio::test]
    async fn the_cpu_a_program_used_is_its_own_and_its_waited_childrens() {
        let dir = tempfile::tempdir().expect("a directory");
        let run = |script: &str, timeout: u64, isolation: Option<Isolation>| {
            let argv = ["sh".to_owned(), "-c".to_owned(), script.to_owned()];
            let dir = dir.path().to_path_buf();
            async move {
                let launch = Launch {
                    cwd: &dir,
                    env: &[],
                    home: None,
                    hidden: None,
                    timeout: Duration::from_secs(timeout),
                    cap: 4096,
                    isolation: isolation.as_ref(),
                    inherit_env: false,
                    stdin: None,
                    stop_on: None,
                };
                run_program(&argv, &launch).await.expect("it runs")
            }
        };
        let loop_in_a_child = "sh -c 'i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done'";
        let busy = run(loop_in_a_child, 60, None).await;
        let idle = run("sleep 0.5", 60, None).await;
        let late = run("sleep 5", 1, None).await;
        assert!(late.timed_out);
        assert_eq!(late.cpu, None, "a timed-out program has no figure");
        if !cfg!(target_os = "linux") {
            assert_eq!((busy.cpu, idle.cpu), (None, None));
            return;
        }
        let busy_cpu = busy.cpu.expect("Linux says a program's CPU time");
        assert!(busy_cpu >= Duration::from_millis(50), "{busy_cpu:?}");
        assert!(busy_cpu <= busy.duration + Duration::from_millis(50));
        let idle_cpu = idle.cpu.expect("Linux says a program's CPU time");
        assert!(idle.duration >= Duration::from_millis(450));
        assert!(idle_cpu < Duration::from_millis(200), "{idle_cpu:?}");
        // Confined, the program is bubblewrap's child and its time is still counted.
        if bubblewrap_works() {
            let sandbox = Isolation::new(dir.path(), &[]);
            let confined = run(loop_in_a_child, 60, Some(sandbox)).await;
            assert_eq!(confined.exit_code, Some(0), "{}", confined.stderr);
            let cpu = confined.cpu.expect("Linux says a program's CPU time");
            assert!(cpu >= Duration::from_millis(50), "confined: {cpu:?}");
        }
    }
}
