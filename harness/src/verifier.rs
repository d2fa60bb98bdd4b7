//! The inline verifier contract (DESIGN §4.3): `run(result)` judged strictly, failing closed.
//! The `verify` / `verify_file` keys (and a tool's own) are read here too, into a
//! [`VerifySource`].

use std::path::{Path, PathBuf};
use std::sync::Arc;

use harness_builtins::{Engine, Sandbox, Script};
use harness_hooks::{DelegationResult, Evidence};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::config::ReadScript;
use crate::error::{Error, ErrorKind, Result};

/// A verifier's name (for messages) and source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifySource {
    /// The file name, or `<file>#verify` for an inline script.
    pub name: String,
    /// The `verify_file` it was read from; `None` for an inline script.
    pub path: Option<PathBuf>,
    /// The Starlark source.
    pub source: String,
}

impl VerifySource {
    /// Reads a `verify` (an inline script, `Some(None)` when the key is present but empty) and
    /// a `verify_file` (read by `read`, as `file_key` says) given at `at`: a delegation's, or a
    /// tool's. The inline script is named `name`; `signature` is what it must define.
    ///
    /// # Errors
    /// [`ErrorKind::Config`]: both keys, an empty script, an unreadable file.
    pub(crate) fn from_keys(
        at: &str,
        name: String,
        signature: &str,
        inline: Option<Option<String>>,
        (file_key, path): (&str, Option<PathBuf>),
        read: &ReadScript<'_>,
    ) -> Result<Option<Self>> {
        let inline = match inline {
            Some(Some(script)) if !script.trim().is_empty() => Some(script),
            Some(_) => {
                return Err(Error::config(format!(
                    "{at}: `verify` is empty; give a Starlark script defining `{signature}`, or remove the key"
                )));
            }
            None => None,
        };
        Ok(match (inline, path) {
            (Some(_), Some(_)) => {
                return Err(Error::config(format!(
                    "{at}: give one of `verify` (an inline script) and `verify_file` (a path), not both"
                )));
            }
            (Some(script), None) => Some(VerifySource {
                name,
                path: None,
                source: script,
            }),
            (None, Some(rel)) => Some(VerifySource::read(read, file_key, &rel)?),
            (None, None) => None,
        })
    }

    /// Reads the script a `key` names at `rel` with `read`.
    pub(crate) fn read(read: &ReadScript<'_>, key: &str, rel: &Path) -> Result<Self> {
        let (path, source) = read(key, rel)?;
        Ok(VerifySource {
            name: path.display().to_string(),
            path: Some(path),
            source,
        })
    }
}

/// The verdict on one attempt.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VerifyOutcome {
    /// True when the claimed work checks out.
    pub verified: bool,
    /// Why not (what the delegate reads on retry); may be empty when verified.
    pub reason: String,
    /// Evidence records the verifier returned (`"evidence": [...]`, DESIGN §4.7), completed
    /// with `source: "verify"` and the time.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub evidence: Vec<Evidence>,
}

/// The reason given when a verifier returns a bare `False`.
pub const FALSE_REASON: &str = "verifier returned False";
/// The reason given when a verifier says `verified: false` without a reason.
pub const EMPTY_REASON: &str = "verifier reported failure without a reason";

impl VerifyOutcome {
    /// A passing verdict.
    pub fn pass() -> Self {
        VerifyOutcome {
            verified: true,
            reason: String::new(),
            evidence: Vec::new(),
        }
    }

    /// A failing verdict; an empty reason is replaced by a generic one.
    pub fn fail(reason: impl Into<String>) -> Self {
        let reason = reason.into();
        VerifyOutcome {
            verified: false,
            reason: if reason.trim().is_empty() {
                EMPTY_REASON.to_owned()
            } else {
                reason
            },
            evidence: Vec::new(),
        }
    }
}

/// An inline verifier: a script defining `run(result)`, parsed once, called once per attempt.
#[derive(Debug, Clone)]
pub struct Verifier {
    script: Arc<Script>,
    sandbox: Arc<Sandbox>,
}

fn broken(e: harness_builtins::Error) -> Error {
    let mut message = format!("verifier {e} [{}]", e.kind().as_str());
    if !e.logs().is_empty() {
        message.push_str("\nthe script logged before failing:");
        for line in e.logs() {
            message.push_str("\n  ");
            message.push_str(line);
        }
    }
    Error::new(ErrorKind::Verifier, message)
}

impl Verifier {
    /// Compiles a verifier named `name` (its file name, for messages) with the global `args`.
    ///
    /// # Errors
    /// [`ErrorKind::Verifier`] when the script does not parse, fails at top level or does not
    /// define `run`.
    pub fn compile(
        engine: &Engine,
        sandbox: Arc<Sandbox>,
        name: &str,
        source: &str,
        args: &Value,
    ) -> Result<Self> {
        let script =
            Script::compile(engine, &sandbox, name, source, &[("args", args)]).map_err(broken)?;
        if !script.defines("run") {
            return Err(Error::new(
                ErrorKind::Verifier,
                format!(
                    "verifier {name}: does not define `run` (add `def run(result):` returning a bool or {{\"verified\": ..., \"reason\": ...}})"
                ),
            ));
        }
        Ok(Verifier {
            script: Arc::new(script),
            sandbox,
        })
    }

    /// The verifier, when its `run` takes the arguments it will be called with (`["result"]`
    /// for a delegation's, `["call", "result"]` for a tool's).
    ///
    /// # Errors
    /// [`ErrorKind::Verifier`] naming how `run` is declared and how to declare it.
    pub fn expecting(self, arguments: &[&str]) -> Result<Self> {
        match self.script.takes("run", arguments.len()) {
            Ok(()) => Ok(self),
            Err(declared) => Err(Error::new(
                ErrorKind::Verifier,
                format!(
                    "verifier {}: `def {declared}` takes the wrong arguments: it is called as `run({})` (write `def run({}):`)",
                    self.script.name(),
                    arguments.join(", "),
                    arguments.join(", ")
                ),
            )),
        }
    }

    /// Returns the script's name.
    pub fn name(&self) -> &str {
        self.script.name()
    }

    /// Judges one attempt on the calling thread (which it blocks while the script runs).
    ///
    /// # Errors
    /// [`ErrorKind::Verifier`] when the script crashes, hits a limit, violates its sandbox or
    /// returns anything outside the contract.
    pub fn verify_blocking(
        &self,
        result: &DelegationResult,
    ) -> Result<(VerifyOutcome, Vec<String>)> {
        self.judge(
            self.script
                .call(&self.sandbox, "run", &[&result.to_value()]),
        )
    }

    /// Calls `run(*args)` on the calling thread (which it blocks while the script runs): one
    /// argument for a delegation verifier, `call` and `result` for a per-tool one.
    ///
    /// # Errors
    /// As [`Verifier::verify_blocking`].
    pub fn run_blocking(&self, args: &[&Value]) -> Result<(VerifyOutcome, Vec<String>)> {
        self.judge(self.script.call(&self.sandbox, "run", args))
    }

    /// Applies the contract to what `run` returned, or to how it failed.
    fn judge(
        &self,
        called: Result<harness_builtins::CallOutput, harness_builtins::Error>,
    ) -> Result<(VerifyOutcome, Vec<String>)> {
        let output = called.map_err(broken)?;
        let outcome = interpret(self.name(), output.value)?;
        Ok((outcome, output.logs))
    }

    /// Judges one attempt without blocking the async runtime: inline when the script is small
    /// and pure (no `fs`, `http`, `exec`; done within the inline budget), else on a blocking
    /// thread, keeping the caller's span.
    ///
    /// # Errors
    /// As [`Verifier::verify_blocking`].
    pub async fn verify(&self, result: &DelegationResult) -> Result<(VerifyOutcome, Vec<String>)> {
        self.verify_value(&result.to_value()).await
    }

    /// Like [`Verifier::verify`], for a Result already converted with
    /// [`DelegationResult::to_value`] (the pipeline converts once per attempt). A small pure
    /// verifier runs on it right here; only one that must move to a blocking thread copies it.
    ///
    /// # Errors
    /// As [`Verifier::verify_blocking`].
    pub async fn verify_value(
        &self,
        value: &serde_json::Value,
    ) -> Result<(VerifyOutcome, Vec<String>)> {
        self.evaluate(&[value]).await
    }

    /// Judges one tool call as it returns: `run(call, result)` of a per-tool verifier, with the
    /// same contract and the same inline-or-blocking evaluation as [`Verifier::verify_value`].
    ///
    /// # Errors
    /// As [`Verifier::verify_blocking`].
    pub async fn verify_call(
        &self,
        call: &serde_json::Value,
        result: &serde_json::Value,
    ) -> Result<(VerifyOutcome, Vec<String>)> {
        self.evaluate(&[call, result]).await
    }

    /// Calls `run(*args)`: a small pure verifier right here, within the inline budget, on the
    /// borrowed arguments; anything else (or one that runs past the budget, having had no
    /// effect) on a blocking thread that keeps the caller's span, with copies of them.
    async fn evaluate(&self, args: &[&serde_json::Value]) -> Result<(VerifyOutcome, Vec<String>)> {
        match self.script.call_inline(&self.sandbox, "run", args) {
            Err(e) if e.kind() == harness_builtins::ErrorKind::WouldBlock => {}
            called => return self.judge(called),
        }
        let this = self.clone();
        let owned: Vec<serde_json::Value> = args.iter().map(|&v| v.clone()).collect();
        let span = tracing::Span::current();
        tokio::task::spawn_blocking(move || {
            let refs: Vec<&serde_json::Value> = owned.iter().collect();
            span.in_scope(|| this.judge(this.script.call(&this.sandbox, "run", &refs)))
        })
        .await
        .map_err(|e| {
            Error::new(
                ErrorKind::Verifier,
                format!("verifier {}: {e}", self.name()),
            )
        })?
    }
}

/// Applies the accepted return forms of `run`: a bool, a dict, or a JSON-encoded dict.
fn interpret(name: &str, value: Value) -> Result<VerifyOutcome> {
    let bad = |what: String| {
        Error::new(
            ErrorKind::Verifier,
            format!(
                "verifier {name}: `run` returned {what}; return True/False, a dict {{\"verified\": bool, \"reason\": str}}, or json.encode of that dict"
            ),
        )
    };
    let object = match value {
        Value::Bool(true) => return Ok(VerifyOutcome::pass()),
        Value::Bool(false) => return Ok(VerifyOutcome::fail(FALSE_REASON)),
        Value::Object(map) => map,
        Value::String(text) => match serde_json::from_str::<Value>(&text) {
            Ok(Value::Object(map)) => map,
            Ok(other) => return Err(bad(format!("a JSON string holding {}", describe(&other)))),
            Err(e) => return Err(bad(format!("a string that is not valid JSON ({e})"))),
        },
        other => return Err(bad(describe(&other))),
    };
    if let Some(key) = object
        .keys()
        .find(|k| !matches!(k.as_str(), "verified" | "reason" | "evidence"))
    {
        return Err(bad(format!("a dict with unknown key {key:?}")));
    }
    let verified = match object.get("verified") {
        Some(Value::Bool(b)) => *b,
        Some(other) => return Err(bad(format!("`verified` = {}", describe(other)))),
        None => return Err(bad("a dict without `verified`".to_owned())),
    };
    let reason = match object.get("reason") {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(other) => return Err(bad(format!("`reason` = {}", describe(other)))),
    };
    let evidence = match object.get("evidence") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(records)) => records
            .iter()
            .enumerate()
            .map(|(i, record)| {
                evidence_record(record).map_err(|why| bad(format!("`evidence[{i}]` {why}")))
            })
            .collect::<Result<_>>()?,
        Some(other) => {
            return Err(bad(format!(
                "`evidence` = {} (a list of records)",
                describe(other)
            )));
        }
    };
    let mut outcome = if verified {
        VerifyOutcome {
            verified: true,
            reason,
            evidence: Vec::new(),
        }
    } else {
        VerifyOutcome::fail(reason)
    };
    outcome.evidence = evidence;
    Ok(outcome)
}

/// Reads one evidence record a verifier returned and completes it: `source` `verify`,
/// `required` true and `at` now unless given. A record needs `criterion` and `result`; keys the
/// record type does not name are kept.
fn evidence_record(record: &Value) -> std::result::Result<Evidence, String> {
    let Value::Object(given) = record else {
        return Err(format!("is {}, not a dict", describe(record)));
    };
    let mut record = Evidence::from_map(given.clone())?;
    "verify".clone_into(&mut record.source);
    if record.at.is_none() {
        record.at =
            Some(humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string());
    }
    Ok(record)
}

fn describe(value: &Value) -> String {
    match value {
        Value::Null => "None".to_owned(),
        Value::Bool(b) => format!("the bool {}", if *b { "True" } else { "False" }),
        Value::Number(n) => format!("the number {n}"),
        Value::String(s) => format!("the string {s:?}"),
        Value::Array(_) => "a list".to_owned(),
        Value::Object(_) => "a dict".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn accepted_and_rejected_returns() {
        let cases: Vec<(Value, Option<(bool, &str)>)> = vec![
            (json!(true), Some((true, ""))),
            (json!(false), Some((false, FALSE_REASON))),
            (json!({"verified": true}), Some((true, ""))),
            (
                json!({"verified": false, "reason": "no file"}),
                Some((false, "no file")),
            ),
            (
                json!({"verified": false, "reason": ""}),
                Some((false, EMPTY_REASON)),
            ),
            (json!({"verified": false}), Some((false, EMPTY_REASON))),
            (
                json!(r#"{"verified": true, "reason": "ok"}"#),
                Some((true, "ok")),
            ),
            (json!(r#"{"verified": false}"#), Some((false, EMPTY_REASON))),
            (json!(null), None),
            (json!(1), None),
            (json!("yes"), None),
            (json!("[true]"), None),
            (json!([true]), None),
            (json!({"reason": "x"}), None),
            (json!({"verified": "true"}), None),
            (json!({"verified": 1}), None),
            (json!({"verified": true, "reason": 3}), None),
            (json!({"verified": true, "reasons": "typo"}), None),
        ];
        for (value, expected) in cases {
            let got = interpret("v.star", value.clone());
            match expected {
                Some((verified, reason)) => {
                    let got = got.unwrap_or_else(|e| panic!("{value}: {e}"));
                    assert_eq!(
                        (got.verified, got.reason.as_str()),
                        (verified, reason),
                        "{value}"
                    );
                }
                None => {
                    let err = got.expect_err(&value.to_string());
                    assert_eq!(err.kind(), ErrorKind::Verifier, "{value}");
                }
            }
        }
    }
}
