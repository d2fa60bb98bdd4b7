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
            // Without it Aider git-inits the workspace and writes `.gitignore` and its tags
            // cache there: changes nobody asked for, outside any `scope:`. harness's own diff is
            // the evidence of what changed.
            "--no-git",
            // `--yes-always` would answer its opt-in question.
            "--no-analytics",
            "--no-fancy-input",
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

    /// Its stdout when the provider refused the key (it would exit 0 with that as the answer).
    fn fatal(&self, line: &str) -> Option<String> {
        line.starts_with("litellm.AuthenticationError").then(|| {
            "the model API refused its credentials (litellm.AuthenticationError); set a valid key for the provider (`OPENAI_API_KEY`, `ANTHROPIC_API_KEY`, …) in `delegate.env` or your environment".to_owned()
        })
    }

    /// `BROWSER=true`: with `--yes-always` Aider opens the address in an error message in a
    /// browser; a delegate has none to open. A workspace with a `.env` is refused: Aider always
    /// reads the `.env` of its working directory over its environment (`--env-file` only adds
    /// one), so a cloned repository's `.env` could point it at another server with your key.
    fn prepare(&self, run: &Invocation<'_>, _: &Path) -> std::io::Result<Vec<(String, String)>> {
        let planted = run.spec.workdir.join(".env");
        if planted.symlink_metadata().is_ok() {
            return Err(std::io::Error::other(format!(
                "the workspace has {}, which Aider reads over the key and the API base it was given (a repository's `.env` could send your key to another server); remove or rename it, and give the variables you need in `delegate.env`",
                planted.display()
            )));
        }
        Ok(vec![("BROWSER".to_owned(), "true".to_owned())])
    }

    /// Aider's answer is its plain stdout; its session is its chat history file. A model call
    /// that failed for good (`litellm.…Error` and no `Tokens:` line: Aider exits 0 all the same)
    /// is an error, not an answer.
    fn parse(&self, stdout: &str, run: &Invocation<'_>) -> std::result::Result<Parsed, String> {
        let failed = stdout.lines().find(|l| l.starts_with("litellm."));
        let answered = stdout.lines().any(|l| l.starts_with("Tokens: "));
        let error = match (failed, answered) {
            (Some(line), false) => Some(format!("its model call failed: {line}")),
            _ => None,
        };
        Ok(Parsed {
            error,
            response: stdout.trim_end().to_owned(),
            session: run
                .own_dir
                .map(|dir| dir.join("chat.md").display().to_string()),
            ..Parsed::default()
        })
    }
}
