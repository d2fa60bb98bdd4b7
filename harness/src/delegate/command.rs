//! The `command` delegate: an external agent CLI run once per attempt.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};

use super::{BoxFuture, Delegate, Turn, TurnRequest};
use crate::conversation::{Message, Usage};
use crate::error::{Error, ErrorKind, Result};

/// The placeholder an argv element may contain; it is replaced by the prompt.
pub const PROMPT_PLACEHOLDER: &str = "{prompt}";
/// The most stdout kept as the response; the rest is dropped and marked `[output truncated]`.
const MAX_STDOUT_BYTES: usize = 4 * 1024 * 1024;
/// How much of the end of stderr goes into an error message.
const STDERR_TAIL_BYTES: usize = 2048;

/// Settings of a command delegate.
#[derive(Debug, Clone, PartialEq)]
pub struct CommandSpec {
    /// `[program, args...]`; every `{prompt}` in an element is replaced by the prompt (an
    /// element may be exactly `{prompt}`), else the prompt goes to standard input.
    pub command: Vec<String>,
    /// The directory it runs in (the workspace root).
    pub workdir: PathBuf,
    /// How long one run may take; then the process is killed.
    pub timeout: Duration,
}

/// A delegate that runs an agent CLI per attempt; its stdout is the response.
///
/// The prompt is the conversation's last user message: the task on the first attempt, the retry
/// prompt after a failed verification. The CLI keeps its own memory (if any); it gets no tools
/// from the harness and its tool use is its own business.
///
/// Unlike `exec.run`, which hands programs a minimal environment, the CLI inherits the harness's
/// whole environment: agent CLIs need their API keys and configuration, and the command is
/// chosen by whoever wrote the delegation file, not by a script.
#[derive(Debug)]
pub struct CommandDelegate {
    spec: CommandSpec,
}

impl CommandDelegate {
    /// Creates the delegate.
    pub fn new(spec: CommandSpec) -> Self {
        CommandDelegate { spec }
    }

    /// Returns the settings.
    pub fn spec(&self) -> &CommandSpec {
        &self.spec
    }

    async fn run(&self, prompt: &str) -> Result<Turn> {
        let spec = &self.spec;
        let Some(program) = spec.command.first() else {
            return Err(Error::new(
                ErrorKind::Delegate,
                "command delegate: the command is empty (give `command: [program, args...]`)",
            ));
        };
        let on_stdin = !spec.command.iter().any(|a| a.contains(PROMPT_PLACEHOLDER));
        let args = spec.command[1..]
            .iter()
            .map(|a| a.replace(PROMPT_PLACEHOLDER, prompt));
        let mut command = tokio::process::Command::new(program.replace(PROMPT_PLACEHOLDER, prompt));
        command
            .args(args)
            .current_dir(&spec.workdir)
            .stdin(if on_stdin {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        // A group of its own: whatever it leaves running is killed with it.
        #[cfg(unix)]
        command.process_group(0);
        // The agent CLI continues this trace (W3C `TRACEPARENT`/`TRACESTATE`).
        for (name, value) in crate::telemetry::propagation_fields() {
            command.env(name.to_ascii_uppercase(), value);
        }
        let mut child = command.spawn().map_err(|e| {
            let hint = if e.kind() == std::io::ErrorKind::NotFound {
                " (is it installed and on PATH, and does the working directory exist?)"
            } else {
                ""
            };
            Error::new(
                ErrorKind::Delegate,
                format!(
                    "command delegate: cannot start {program:?} in {}: {e}{hint}",
                    spec.workdir.display()
                ),
            )
        })?;
        let group = harness_builtins::ProcessGroup::new(child.id());
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().expect("stdout is piped");
        let stderr = child.stderr.take().expect("stderr is piped");
        let write_prompt = async {
            if let Some(mut stdin) = stdin {
                // A CLI that exits without reading its input closes the pipe; that is its call,
                // and its exit status says whether it worked.
                let _ = stdin.write_all(prompt.as_bytes()).await;
                let _ = stdin.shutdown().await;
            }
        };
        let finished = async {
            let waited = async {
                let status = child.wait().await;
                // Whatever it left running in the background goes with it, closing the pipes.
                group.kill();
                status
            };
            let ((), (out, out_cut), err, status) = tokio::join!(
                write_prompt,
                harness_builtins::read_capped(stdout, MAX_STDOUT_BYTES),
                read_tail(stderr, STDERR_TAIL_BYTES),
                waited
            );
            (out, out_cut, err, status)
        };
        let outcome = tokio::time::timeout(spec.timeout, finished).await;
        // On a timeout or a cancelled attempt (this future dropped), the whole group now.
        group.kill();
        let (stdout, out_cut, stderr, status) = match outcome {
            Ok(done) => done,
            Err(_) => {
                return Err(Error::new(
                    ErrorKind::Delegate,
                    format!(
                        "command delegate: {program:?} timed out after {}s and was killed (raise the delegate's timeout if the agent needs longer)",
                        spec.timeout.as_secs_f64()
                    ),
                ));
            }
        };
        let status = status.map_err(|e| {
            Error::new(
                ErrorKind::Delegate,
                format!("command delegate: waiting for {program:?} failed: {e}"),
            )
        })?;
        if !status.success() {
            let how = match status.code() {
                Some(code) => format!("exited with code {code}"),
                None => format!("was killed ({status})"),
            };
            let stderr = stderr.trim();
            let tail = if stderr.is_empty() {
                "(stderr was empty)".to_owned()
            } else {
                format!("stderr ends with:\n{stderr}")
            };
            return Err(Error::new(
                ErrorKind::Delegate,
                format!("command delegate: {program:?} {how}; {tail}"),
            ));
        }
        let mut content = stdout.trim_end_matches(['\n', '\r']).to_owned();
        if out_cut {
            content.push_str(&format!(
                "\n[output truncated at the command delegate's {MAX_STDOUT_BYTES}-byte cap]"
            ));
        }
        Ok(Turn {
            content: Some(content),
            tool_calls: Vec::new(),
            usage: Usage {
                requests: 1,
                ..Usage::default()
            },
            finish_reason: Some("stop".to_owned()),
            observed: Vec::new(),
        })
    }
}

/// Reads `reader` to the end, keeping about the last `cap` bytes (cut at a line start when one
/// is near, marked with `…` when anything was dropped).
async fn read_tail(mut reader: impl AsyncRead + Unpin, cap: usize) -> String {
    let mut kept = Vec::new();
    let mut buf = [0u8; 8192];
    let mut dropped = false;
    loop {
        match reader.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                kept.extend_from_slice(&buf[..n]);
                if kept.len() > 2 * cap {
                    kept.drain(..kept.len() - cap);
                    dropped = true;
                }
            }
        }
    }
    if kept.len() > cap {
        kept.drain(..kept.len() - cap);
        dropped = true;
    }
    let text = String::from_utf8_lossy(&kept);
    if !dropped {
        return text.into_owned();
    }
    // Start at a line when one begins in the first quarter, else mid-line; the lossy decode
    // already turned a split UTF-8 sequence at the start into a replacement character.
    let start = text
        .find('\n')
        .filter(|&i| i < text.len() / 4)
        .map_or(0, |i| i + 1);
    format!("…{}", &text[start..])
}

/// Returns the prompt for this run: the task on the first attempt; on a retry, the task again
/// followed by the retry prompt, because an agent CLI run afresh remembers nothing of the last
/// run.
fn prompt(messages: &[Message]) -> Option<String> {
    let mut users = messages.iter().filter_map(|m| match m {
        Message::User(text) => Some(text.as_str()),
        _ => None,
    });
    let task = users.next()?;
    Some(match users.next_back() {
        None => task.to_owned(),
        Some(retry) => format!("{task}\n\n{retry}"),
    })
}

impl Delegate for CommandDelegate {
    fn kind(&self) -> &'static str {
        "command"
    }

    fn turn<'a>(&'a mut self, request: TurnRequest<'a>) -> BoxFuture<'a, Result<Turn>> {
        Box::pin(async move {
            let Some(prompt) = prompt(request.messages) else {
                return Err(Error::new(
                    ErrorKind::Delegate,
                    "command delegate: the conversation has no user message to send as the prompt",
                ));
            };
            tracing::trace!(prompt, "command delegate: prompt");
            self.run(&prompt).await
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn tail_keeps_the_end() {
        let text: String = (0..1000).map(|i| format!("line {i}\n")).collect();
        let tail = read_tail(text.as_bytes(), 100).await;
        assert!(tail.starts_with('…'), "{tail}");
        assert!(tail.ends_with("line 999\n"), "{tail}");
        assert!(tail.len() <= 110, "{tail}");
        assert_eq!(read_tail(&b"short"[..], 100).await, "short");
    }

    #[tokio::test]
    async fn head_marks_truncation() {
        assert_eq!(
            harness_builtins::read_capped(&b"abcdef"[..], 3).await,
            ("abc".to_owned(), true)
        );
        assert_eq!(
            harness_builtins::read_capped(&b"abc"[..], 3).await,
            ("abc".to_owned(), false)
        );
    }
}
