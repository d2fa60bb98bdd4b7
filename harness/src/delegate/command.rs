//! The `command` delegate: an external agent CLI run once per attempt.

use std::path::PathBuf;
use std::time::Duration;

use super::{BoxFuture, Delegate, Turn, TurnRequest};
use crate::conversation::{Message, Usage};
use crate::error::{Error, ErrorKind, Result};

/// The placeholder an argv element may contain; it is replaced by the prompt.
pub const PROMPT_PLACEHOLDER: &str = "{prompt}";
/// The most stdout kept as the response; the rest is dropped and marked `[output truncated]`.
const MAX_STDOUT_BYTES: usize = 4 * 1024 * 1024;

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
    /// The sandbox it runs in (filled in when the delegation runs): the delegation's, with the
    /// network; `None`: unconfined.
    pub isolation: Option<harness_builtins::Isolation>,
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

    async fn run(&self, prompt: &str, run_id: &str) -> Result<Turn> {
        let spec = &self.spec;
        let Some(program) = spec.command.first() else {
            return Err(Error::new(
                ErrorKind::Delegate,
                "command delegate: the command is empty (give `command: [program, args...]`)",
            ));
        };
        let on_stdin = !spec.command.iter().any(|a| a.contains(PROMPT_PLACEHOLDER));
        let argv: Vec<String> = spec
            .command
            .iter()
            .map(|a| a.replace(PROMPT_PLACEHOLDER, prompt))
            .collect();
        // The agent CLI continues this trace (W3C `TRACEPARENT`/`TRACESTATE`).
        let env: Vec<(String, String)> = super::trace_env()
            .chain(super::parent_env(run_id))
            .collect();
        // Run as every other program is: its own process group (whatever it leaves running is
        // killed with it), output capped, never found in the workspace through PATH. Unlike a
        // check, it inherits the whole environment: agent CLIs need their keys, and the command
        // is the operator's choice, not a script's.
        let launch = harness_builtins::Launch {
            cwd: &spec.workdir,
            env: &env,
            home: None,
            hidden: Some(&spec.workdir),
            timeout: spec.timeout,
            cap: MAX_STDOUT_BYTES,
            isolation: spec.isolation.as_ref(),
            inherit_env: true,
            stdin: on_stdin.then_some(prompt.as_bytes()),
            stop_on: None,
        };
        let run = harness_builtins::run_program(&argv, &launch)
            .await
            .map_err(|e| {
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
        if run.timed_out {
            return Err(Error::new(
                ErrorKind::Delegate,
                format!(
                    "command delegate: {program:?} timed out after {}s and was killed (raise the delegate's timeout if the agent needs longer)",
                    spec.timeout.as_secs_f64()
                ),
            ));
        }
        if let Some(how) = super::how_it_ended(run.exit_code) {
            let tail = match super::output_tail("", &run.stderr) {
                tail if tail.is_empty() => "; stderr was empty".to_owned(),
                tail => tail,
            };
            return Err(Error::new(
                ErrorKind::Delegate,
                format!("command delegate: {program:?} {how}{tail}"),
            ));
        }
        Ok(Turn {
            content: Some(run.stdout.trim_end_matches(['\n', '\r']).to_owned()),
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
            self.run(&prompt, request.run_id).await
        })
    }
}

#[cfg(test)]
mod tests {
    use harness_builtins::{Capped, KEPT_END_BYTES, read_capped};

    #[tokio::test]
    async fn the_head_and_the_end_of_a_long_output_are_kept() {
        assert_eq!(
            read_capped(&b"abc"[..], 3).await,
            Capped {
                head: "abc".to_owned(),
                end: None
            }
        );
        let short = read_capped(&b"abcdef"[..], 3).await;
        assert_eq!(short.end.as_deref(), Some("def"));
        assert_eq!(
            short.shown(3),
            "abc\n[output truncated at the 3-byte cap]\n…def"
        );
        // The end is the last bytes however long the middle, not what followed the head.
        let long: Vec<u8> = (0..200_000u32)
            .flat_map(|i| format!("line {i}\n").into_bytes())
            .collect();
        let capped = read_capped(&long[..], 10).await;
        assert_eq!(capped.head, "line 0\nlin");
        let end = capped.end.expect("cut");
        assert_eq!(end.len(), KEPT_END_BYTES);
        assert!(end.ends_with("line 199999\n"), "{}", &end[end.len() - 40..]);
    }
}
