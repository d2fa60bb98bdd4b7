//! The retry prompt (DESIGN §4.4): a [`RetryContext`] assembled mechanically from the verdict,
//! filled into one fixed, versioned template. No model writes it.

use std::sync::LazyLock;

use crate::verdict::{Finding, Verdict};

/// The template's version; bump it whenever the text changes.
pub const RETRY_TEMPLATE_VERSION: &str = "retry-v1";

/// The template; `{attempt}` and `{reasons}` are filled in mechanically.
pub const RETRY_TEMPLATE: &str = "\
VERIFICATION FAILED (attempt {attempt}).

Your previous answer was checked against the real state of the workspace and it does not hold:
{reasons}

Do not claim success again. Look at the actual state of the world with your tools (read the \
files, list the directories, run the commands), do whatever work is still missing, and only then \
give your final answer. Your answer will be verified again.";

static TEMPLATE_SHA256: LazyLock<String> = LazyLock::new(|| {
    use sha2::{Digest, Sha256};
    Sha256::digest(RETRY_TEMPLATE.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
});

/// Returns the SHA-256 of the template text, recorded with every run.
pub fn retry_template_sha256() -> &'static str {
    &TEMPLATE_SHA256
}

/// What the retry prompt tells the delegate, taken from the verdict and nothing else.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryContext {
    /// The attempt that failed, from 0.
    pub failed_attempt: u32,
    /// The blocking findings, deterministic stages first, as reason lines.
    pub reasons: Vec<String>,
}

impl RetryContext {
    /// Assembles the context for the attempt `verdict` judged.
    pub fn assemble(verdict: &Verdict) -> Self {
        let mut blocking: Vec<&Finding> = verdict.blocking().collect();
        // Stable: within each authority class the pipeline's order stands.
        blocking.sort_by_key(|f| !f.source.is_deterministic());
        RetryContext {
            failed_attempt: verdict.attempt,
            reasons: blocking.iter().map(|f| f.to_string()).collect(),
        }
    }

    /// Fills the template, quoting each reason line.
    pub fn render(&self) -> String {
        let quoted: Vec<String> = self
            .reasons
            .iter()
            .flat_map(|r| r.lines().map(|line| format!("  > {line}")))
            .collect();
        RETRY_TEMPLATE
            .replace("{attempt}", &(self.failed_attempt + 1).to_string())
            .replace("{reasons}", &quoted.join("\n"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::verdict::{Decision, Source};

    #[test]
    fn prompt_quotes_every_reason() {
        let verdict = Verdict {
            attempt: 0,
            decision: Decision::Retry,
            findings: vec![
                Finding::blocking(Source::Verify, "", "hello.txt does not exist"),
                Finding::advisory(Source::Hook, "style", "never quoted"),
                Finding::blocking(Source::Hook, "h", "a\nb"),
            ],
            evidence: Vec::new(),
            critic: None,
            logs: Vec::new(),
        };
        let prompt = RetryContext::assemble(&verdict).render();
        assert!(!prompt.contains("never quoted"));
        assert!(prompt.starts_with("VERIFICATION FAILED (attempt 1)."));
        assert!(prompt.contains("  > verify: hello.txt does not exist\n  > hook h: a\n  > b\n"));
        assert_eq!(retry_template_sha256().len(), 64);
    }
}
