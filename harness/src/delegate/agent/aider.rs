//! Aider (`aider`): `--message PROMPT` with a chat history file of its own, outside the
//! workspace; a retry adds `--restore-chat-history`. Aider reports no tool log: the scope diff is
//! the evidence of what it changed.

use super::{Adapter, Invocation, Parsed};

/// Aider.
pub(super) struct Aider;

impl Adapter for Aider {
    fn name(&self) -> &'static str {
        "aider"
    }

    fn install(&self) -> &'static str {
        "python -m pip install aider-install && aider-install"
    }

    fn session_word(&self) -> &'static str {
        "chat history"
    }

    fn keeps_history(&self) -> bool {
        true
    }

    fn args(&self, run: &Invocation<'_>) -> Vec<String> {
        let dir = run.history.unwrap_or(std::path::Path::new(""));
        let mut args: Vec<String> = [
            "--yes-always",
            "--no-pretty",
            "--no-stream",
            "--no-auto-commits",
            "--no-check-update",
            "--no-show-release-notes",
        ]
        .map(str::to_owned)
        .into();
        args.push("--chat-history-file".to_owned());
        args.push(dir.join("chat.md").display().to_string());
        args.push("--input-history-file".to_owned());
        args.push(dir.join("input.txt").display().to_string());
        if run.resume.is_some() {
            args.push("--restore-chat-history".to_owned());
        }
        args.extend(run.model("--model"));
        args.extend(run.spec.args.iter().cloned());
        args.extend(["--message".to_owned(), run.prompt.to_owned()]);
        args
    }

    /// Aider's answer is its plain stdout; its session is its chat history file.
    fn parse(&self, stdout: &str, run: &Invocation<'_>) -> std::result::Result<Parsed, String> {
        Ok(Parsed {
            response: stdout.trim_end().to_owned(),
            session: run
                .history
                .map(|dir| dir.join("chat.md").display().to_string()),
            ..Parsed::default()
        })
    }
}
