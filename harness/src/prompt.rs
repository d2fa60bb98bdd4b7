//! The retry prompt: one fixed, versioned template. No model writes it.

use std::sync::LazyLock;

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

/// Fills the template for the attempt (0-based) that failed, quoting each reason on its own line.
pub fn retry_prompt(failed_attempt: u32, reasons: &[String]) -> String {
    let quoted: Vec<String> = reasons
        .iter()
        .flat_map(|r| {
            r.lines()
                .map(|line| format!("  > {line}"))
                .collect::<Vec<_>>()
        })
        .collect();
    RETRY_TEMPLATE
        .replace("{attempt}", &(failed_attempt + 1).to_string())
        .replace("{reasons}", &quoted.join("\n"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prompt_quotes_every_reason() {
        let prompt = retry_prompt(
            0,
            &[
                "verify: hello.txt does not exist".to_owned(),
                "hook h: a\nb".to_owned(),
            ],
        );
        assert!(prompt.starts_with("VERIFICATION FAILED (attempt 1)."));
        assert!(prompt.contains("  > verify: hello.txt does not exist\n  > hook h: a\n  > b\n"));
        assert_eq!(retry_template_sha256().len(), 64);
    }
}
