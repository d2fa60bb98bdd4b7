//! Secret scrubbing (DESIGN §4.10): what a run prints and records never carries a credential the
//! delegate, a tool or a script happened to echo.
//!
//! The built-in patterns catch the common credential shapes (PEM private keys, OpenAI, GitHub,
//! GitLab, Slack, AWS and Google keys, `Bearer` tokens, JWTs, and `NAME_KEY=…`-style
//! assignments); a project adds its own with `redact.patterns` in `.harness/policy.yaml`.

use std::borrow::Cow;
use std::sync::{Arc, LazyLock};

use regex::{Regex, RegexSet};
use serde_json::Value;

use crate::error::{Error, Result};

/// What a secret is replaced with.
pub const REDACTED: &str = "[REDACTED]";

/// The built-in patterns. A pattern with a capture group keeps the group (the variable's name)
/// and replaces the rest of the match.
const BUILTIN: &[&str] = &[
    r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----[\s\S]*?(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|\z)",
    r"\bsk-[A-Za-z0-9_-]{16,}",
    r"\bghp_[A-Za-z0-9]{20,}",
    r"\bgithub_pat_[A-Za-z0-9_]{20,}",
    r"\bglpat-[A-Za-z0-9_-]{20,}",
    r"\bxox[abposr]-[A-Za-z0-9-]{10,}",
    r"\bAKIA[0-9A-Z]{16}\b",
    r"\bAIza[0-9A-Za-z_-]{35}",
    r"\b[Bb]earer\s+[A-Za-z0-9._~+/-]{8,}=*",
    r"\beyJ[A-Za-z0-9_-]{4,}\.eyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{4,}",
    r"\b([A-Za-z][A-Za-z0-9_]*_(?:KEY|TOKEN|SECRET|PASSWORD|key|token|secret|password))\s*[=:]\s*[^\s'\x22]+",
];

/// A compiled set of secret patterns.
#[derive(Debug, Clone)]
pub struct Redactor {
    inner: Arc<Compiled>,
}

#[derive(Debug)]
struct Compiled {
    /// The project's own patterns, as given (for equality and messages).
    extra: Vec<String>,
    /// Every pattern at once: most text has no secret, and one pass over it says so.
    any: RegexSet,
    each: Vec<Regex>,
}

static BUILTIN_REDACTOR: LazyLock<Redactor> =
    LazyLock::new(|| Redactor::compile(&[]).expect("the built-in secret patterns compile"));

impl Default for Redactor {
    fn default() -> Self {
        BUILTIN_REDACTOR.clone()
    }
}

impl PartialEq for Redactor {
    fn eq(&self, other: &Self) -> bool {
        self.inner.extra == other.inner.extra
    }
}

impl Redactor {
    /// Returns the built-in patterns plus `extra` (regular expressions, `regex` crate syntax).
    ///
    /// # Errors
    /// [`ErrorKind::Config`](crate::ErrorKind::Config) naming the pattern that does not compile.
    pub fn with_patterns(extra: &[String]) -> Result<Self> {
        if extra.is_empty() {
            return Ok(Self::default());
        }
        Self::compile(extra)
    }

    fn compile(extra: &[String]) -> Result<Self> {
        let patterns: Vec<&str> = BUILTIN
            .iter()
            .copied()
            .chain(extra.iter().map(String::as_str))
            .collect();
        let each = patterns
            .iter()
            .map(|p| Regex::new(p).map_err(|e| Error::config(format!("redact pattern {p:?}: {e}"))))
            .collect::<Result<Vec<_>>>()?;
        let any =
            RegexSet::new(&patterns).map_err(|e| Error::config(format!("redact patterns: {e}")))?;
        Ok(Redactor {
            inner: Arc::new(Compiled {
                extra: extra.to_vec(),
                any,
                each,
            }),
        })
    }

    /// Returns `text` with every secret replaced by [`REDACTED`] (borrowed when it has none).
    pub fn scrub<'a>(&self, text: &'a str) -> Cow<'a, str> {
        // Most text has no secret: one pass that stops at the first match says so.
        if !self.inner.any.is_match(text) {
            return Cow::Borrowed(text);
        }
        let matched = self.inner.any.matches(text);
        let mut out = text.to_owned();
        for index in matched.iter() {
            let regex = &self.inner.each[index];
            let replaced = if regex.captures_len() > 1 {
                regex.replace_all(&out, format!("${{1}}={REDACTED}").as_str())
            } else {
                regex.replace_all(&out, REDACTED)
            };
            if let Cow::Owned(changed) = replaced {
                out = changed;
            }
        }
        Cow::Owned(out)
    }

    /// Scrubs `text` in place.
    pub fn scrub_string(&self, text: &mut String) {
        if let Cow::Owned(clean) = self.scrub(text) {
            *text = clean;
        }
    }

    /// Scrubs every string (values, not keys) in `value`, however deep.
    pub fn scrub_json(&self, value: &mut Value) {
        let mut pending = vec![value];
        while let Some(value) = pending.pop() {
            match value {
                Value::String(text) => self.scrub_string(text),
                Value::Array(items) => pending.extend(items.iter_mut()),
                Value::Object(map) => pending.extend(map.values_mut()),
                _ => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn common_credentials_are_replaced_and_other_text_is_kept() {
        let r = Redactor::default();
        let cases = [
            ("key sk-abcdefghijklmnop1234 here", "key [REDACTED] here"),
            ("token ghp_0123456789abcdefghijABCDEF", "token [REDACTED]"),
            ("AKIAIOSFODNN7EXAMPLE is aws", "[REDACTED] is aws"),
            (
                "Authorization: Bearer abc.def-ghi_jkl",
                "Authorization: [REDACTED]",
            ),
            (
                "OPENAI_API_KEY=sk-x export",
                "OPENAI_API_KEY=[REDACTED] export",
            ),
            ("db_password: hunter2", "db_password=[REDACTED]"),
            (
                "-----BEGIN RSA PRIVATE KEY-----\nMIIE\n-----END RSA PRIVATE KEY-----\nafter",
                "[REDACTED]\nafter",
            ),
            (
                "jwt eyJhbGciOi.eyJzdWIiOiIx.c2lnbmF0dXJl ok",
                "jwt [REDACTED] ok",
            ),
            (
                "hello.txt written, 3 tests passed",
                "hello.txt written, 3 tests passed",
            ),
            ("the task-list and skeleton", "the task-list and skeleton"),
        ];
        for (text, want) in cases {
            assert_eq!(r.scrub(text), want, "scrubbing {text:?}");
        }
        assert!(matches!(r.scrub("nothing secret"), Cow::Borrowed(_)));
    }

    #[test]
    fn project_patterns_add_to_the_builtins_and_bad_ones_are_named() {
        let r = Redactor::with_patterns(&["(?i)internal-token-[a-z0-9]+".to_owned()])
            .expect("compiles");
        assert_eq!(
            r.scrub("use Internal-Token-abc123 and sk-abcdefghijklmnop1234"),
            "use [REDACTED] and [REDACTED]"
        );
        let e = Redactor::with_patterns(&["(".to_owned()]).expect_err("does not compile");
        assert!(
            e.message().contains("redact pattern \"(\""),
            "{}",
            e.message()
        );
    }

    #[test]
    fn json_strings_are_scrubbed_at_any_depth() {
        let mut value = json!({"a": ["x", {"b": "ghp_0123456789abcdefghijABCDEF"}], "n": 1});
        Redactor::default().scrub_json(&mut value);
        assert_eq!(value, json!({"a": ["x", {"b": "[REDACTED]"}], "n": 1}));
    }
}
