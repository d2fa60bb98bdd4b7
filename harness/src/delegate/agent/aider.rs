//! Aider (`aider`): `--message PROMPT` with a chat history file of its own, outside the
//! workspace; a retry adds `--restore-chat-history`. Aider reports no tool log: the scope diff is
//! the evidence of what it changed.

use std::path::{Path, PathBuf};

use super::{Adapter, Config, Invocation, Parsed, Resume, guarded, owned};

/// Aider.
pub(super) struct Aider;

impl Adapter for Aider {
    fn name(&self) -> &'static str {
        "aider"
    }

    fn install(&self) -> &'static str {
        "python -m pip install aider-install && aider-install"
    }

    /// `~/.aider` (its caches); its settings files in HOME (`lint-cmd`, `test-cmd`) guarded.
    fn config(&self, home: &Path, _: &dyn Fn(&str) -> Option<PathBuf>) -> Vec<Config> {
        let mut config = vec![Config::Dir(home.join(".aider"))];
        config.extend(guarded(
            home,
            &[
                ".aider.conf.yml",
                ".aider.model.settings.yml",
                ".aider.model.metadata.json",
            ],
        ));
        config
    }

    fn session_word(&self) -> &'static str {
        "chat history"
    }

    fn keeps_own_dir(&self) -> bool {
        true
    }

    fn args(&self, run: &Invocation<'_>) -> Vec<String> {
        let dir = run.own_dir.unwrap_or(std::path::Path::new(""));
        let mut flags = owned(&[
            "--yes-always",
            "--no-pretty",
            "--no-stream",
            "--no-auto-commits",
            "--no-check-update",
            "--no-show-release-notes",
        ]);
        for (flag, file) in [
            ("--chat-history-file", "chat.md"),
            ("--input-history-file", "input.txt"),
        ] {
            flags.extend([flag.to_owned(), dir.join(file).display().to_string()]);
        }
        let restore = match run.resume {
            Some(_) => owned(&["--restore-chat-history"]),
            None => Vec::new(),
        };
        let prompt = owned(&["--message", run.prompt]);
        run.args(flags, restore, Resume::BeforeArgs, prompt)
    }

    /// Aider's answer is its plain stdout; its session is its chat history file.
    fn parse(&self, stdout: &str, run: &Invocation<'_>) -> std::result::Result<Parsed, String> {
        Ok(Parsed {
            response: stdout.trim_end().to_owned(),
            session: run
                .own_dir
                .map(|dir| dir.join("chat.md").display().to_string()),
            ..Parsed::default()
        })
    }
}
