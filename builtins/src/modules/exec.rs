//! `exec.run(argv, timeout=30, cwd=None)`: allow-listed programs, no shell.

use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::json;
use starlark::environment::GlobalsBuilder;
use starlark::eval::Evaluator;
use starlark::starlark_module;
use starlark::values::Value;
use starlark::values::list::UnpackList;
use tokio::io::{AsyncRead, AsyncReadExt};

use crate::engine::alloc_json;
use crate::host::Host;

/// Variables passed through to programs; everything else in the harness's environment is
/// withheld unless allow-listed for `env.get`, so a verifier cannot leak secrets through a child.
const PASSED_ENV: &[&str] = &["PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "TERM", "USER"];

/// Reads `reader` to the end, keeping the first `cap` bytes; returns the kept text (lossily
/// UTF-8) and whether anything was dropped. Reading on past the cap keeps a child process from
/// blocking on a full pipe.
pub async fn read_capped(mut reader: impl AsyncRead + Unpin, cap: usize) -> (String, bool) {
    let mut kept = Vec::new();
    let mut buf = [0u8; 8192];
    let mut dropped = false;
    loop {
        match reader.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                let room = cap.saturating_sub(kept.len());
                kept.extend_from_slice(&buf[..n.min(room)]);
                dropped |= n > room;
            }
        }
    }
    (String::from_utf8_lossy(&kept).into_owned(), dropped)
}

/// The outcome of one program run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProgramRun {
    /// The exit code; None when the program was killed (timeout or signal).
    pub exit_code: Option<i32>,
    /// Standard output, lossily UTF-8, capped.
    pub stdout: String,
    /// Standard error, lossily UTF-8, capped.
    pub stderr: String,
    /// True when the program ran past its timeout and was killed.
    pub timed_out: bool,
    /// How long it ran.
    pub duration: Duration,
}

/// Runs `argv` (no shell) in `cwd` with a minimal environment (`PATH`, `HOME`, `LANG`, `LC_ALL`,
/// `TMPDIR`, `TERM`, `USER` plus `extra_env`), stdout and stderr capped at `cap` bytes each, and
/// killed after `timeout`. `argv` must not be empty.
///
/// # Errors
/// The program cannot be started.
pub async fn run_program(
    argv: &[String],
    cwd: &std::path::Path,
    extra_env: &[(String, String)],
    timeout: Duration,
    cap: usize,
) -> std::io::Result<ProgramRun> {
    let Some((program, rest)) = argv.split_first() else {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "empty argv",
        ));
    };
    let started = Instant::now();
    let mut command = tokio::process::Command::new(program);
    command
        .args(rest)
        .current_dir(cwd)
        .env_clear()
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    for name in PASSED_ENV {
        if let Ok(value) = std::env::var(name) {
            command.env(name, value);
        }
    }
    command.envs(extra_env.iter().map(|(k, v)| (k, v)));
    let mut child = command.spawn()?;
    let stdout = child.stdout.take().expect("stdout is piped");
    let stderr = child.stderr.take().expect("stderr is piped");
    let output = async {
        let ((out, out_cut), (err, err_cut)) =
            tokio::join!(read_capped(stdout, cap), read_capped(stderr, cap));
        let status = child.wait().await;
        (out, out_cut, err, err_cut, status)
    };
    match tokio::time::timeout(timeout, output).await {
        Ok((mut stdout, out_cut, mut stderr, err_cut, status)) => {
            if out_cut {
                stdout.push_str("\n[output truncated]");
            }
            if err_cut {
                stderr.push_str("\n[output truncated]");
            }
            Ok(ProgramRun {
                exit_code: status?.code(),
                stdout,
                stderr,
                timed_out: false,
                duration: started.elapsed(),
            })
        }
        // Dropping the future drops the child, which kill_on_drop kills.
        Err(_) => Ok(ProgramRun {
            exit_code: None,
            stdout: String::new(),
            stderr: String::new(),
            timed_out: true,
            duration: started.elapsed(),
        }),
    }
}

#[starlark_module]
pub(crate) fn members(builder: &mut GlobalsBuilder) {
    /// Runs a program (no shell) and returns
    /// `{exit_code, stdout, stderr, timed_out, duration_ms}`. `argv[0]` must be allow-listed
    /// exactly (`--allow-exec PROGRAM`); `cwd` must be inside the workspace (default: its root).
    /// A program that runs past `timeout` seconds is killed: `timed_out` is True and `exit_code`
    /// None. Output beyond the cap is dropped and marked `[output truncated]`.
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
        let run = host
            .block_on(run_program(&argv, &dir, &env, wait, cap))?
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
