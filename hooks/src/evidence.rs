//! The records the gate leaves (DESIGN §4.7, §4.9), defined once beside the payloads that carry
//! them: an [`Evidence`] record per check, criterion or verifier claim, and the critic's
//! [`CriticReview`]. The verdict, the journal, the export, the dashboard and the review page all
//! read these types; each keeps the keys it does not name, so a verifier's extra field survives
//! the round trip through the journal.

use serde::de::Error as _;
use serde::ser::SerializeMap as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

/// How one check, criterion or claim came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EvidenceResult {
    /// It held.
    Pass,
    /// It did not hold.
    Fail,
    /// It could not be judged.
    Error,
    /// It ran out of time (a failure, seed 000 §10.3).
    Timeout,
    /// It failed and then passed when re-run on the same state (`confirm`): a failure unless
    /// the check says `flaky: advisory`.
    Flaky,
}

impl EvidenceResult {
    /// Returns `pass`, `fail`, `error`, `timeout` or `flaky`.
    pub fn as_str(self) -> &'static str {
        match self {
            EvidenceResult::Pass => "pass",
            EvidenceResult::Fail => "fail",
            EvidenceResult::Error => "error",
            EvidenceResult::Timeout => "timeout",
            EvidenceResult::Flaky => "flaky",
        }
    }
}

/// One evidence record (DESIGN §4.7): what was checked, how, and what showed it.
#[derive(Debug, Clone, PartialEq)]
pub struct Evidence {
    /// What was checked: a check's or criterion's name.
    pub criterion: String,
    /// Who checked it: `check`, `criterion`, `verify` or `hook`.
    pub source: String,
    /// How: `sh -c 'cargo test'`, `file_exists`, ….
    pub method: Option<String>,
    /// What it looked at (a path, a glob, a URL), when it looked at one thing.
    pub target: Option<String>,
    /// False for an advisory check.
    pub required: bool,
    /// How it came out.
    pub result: EvidenceResult,
    /// What shows it, in words: `exit 0 in 2.4 s`, `hello.txt exists, 3 bytes`.
    pub proof: Option<String>,
    /// A command's exit code.
    pub exit_code: Option<i64>,
    /// How long it took.
    pub duration_ms: Option<u64>,
    /// The end of a command's output, scrubbed.
    pub output_tail: Option<String>,
    /// The SHA-256 of what it looked at (a file, a body), hex.
    pub subject_sha256: Option<String>,
    /// The size of that file, bytes.
    pub subject_bytes: Option<u64>,
    /// When, RFC 3339.
    pub at: Option<String>,
    /// Keys the record carries that this type does not name (a verifier's own), kept as given.
    pub extra: Map<String, Value>,
}

impl Evidence {
    /// A record of `criterion`, checked by `source`, that came out `result`; the rest unset.
    pub fn new(criterion: impl Into<String>, source: &str, result: EvidenceResult) -> Self {
        Evidence {
            criterion: criterion.into(),
            source: source.to_owned(),
            method: None,
            target: None,
            required: true,
            result,
            proof: None,
            exit_code: None,
            duration_ms: None,
            output_tail: None,
            subject_sha256: None,
            subject_bytes: None,
            at: None,
            extra: Map::new(),
        }
    }

    /// Returns true when it held.
    pub fn passed(&self) -> bool {
        self.result == EvidenceResult::Pass
    }

    /// Every text it holds, for scrubbing: its strings (a verifier writes them all, `criterion`
    /// and `at` included), and the values of its extra keys.
    pub fn texts_mut(&mut self) -> (Vec<&mut String>, &mut Map<String, Value>) {
        // Named field by field, so a field added later must be placed here too.
        let Evidence {
            criterion,
            source,
            method,
            target,
            required: _,
            result: _,
            proof,
            exit_code: _,
            duration_ms: _,
            output_tail,
            subject_sha256,
            subject_bytes: _,
            at,
            extra,
        } = self;
        let mut texts = vec![criterion, source];
        texts.extend(
            [method, target, proof, output_tail, subject_sha256, at]
                .into_iter()
                .flatten(),
        );
        (texts, extra)
    }

    /// Reads a record from `map`, naming the key at fault.
    ///
    /// # Errors
    /// A known key of the wrong type, or a missing `criterion` or `result`.
    pub fn from_map(mut map: Map<String, Value>) -> Result<Self, String> {
        let criterion = match map.remove("criterion") {
            Some(Value::String(name)) if !name.trim().is_empty() => name,
            _ => {
                return Err("needs `criterion`, a non-empty string naming what was checked".into());
            }
        };
        let result = match map.remove("result") {
            Some(value) => serde_json::from_value(value).map_err(|_| {
                "needs `result`: \"pass\", \"fail\", \"error\" or \"timeout\"".to_owned()
            })?,
            None => {
                return Err("needs `result`: \"pass\", \"fail\", \"error\" or \"timeout\"".into());
            }
        };
        let source = take_opt::<String>(&mut map, "source")?.unwrap_or_default();
        Ok(Evidence {
            criterion,
            source,
            method: take_opt(&mut map, "method")?,
            target: take_opt(&mut map, "target")?,
            required: take_opt(&mut map, "required")?.unwrap_or(true),
            result,
            proof: take_opt(&mut map, "proof")?,
            exit_code: take_opt(&mut map, "exit_code")?,
            duration_ms: take_opt(&mut map, "duration_ms")?,
            output_tail: take_opt(&mut map, "output_tail")?,
            subject_sha256: take_opt(&mut map, "subject_sha256")?,
            subject_bytes: take_opt(&mut map, "subject_bytes")?,
            at: take_opt(&mut map, "at")?,
            extra: map,
        })
    }
}

/// Takes `key` out of `map` as a `T`; absent or `null` is `None`.
fn take_opt<T: serde::de::DeserializeOwned>(
    map: &mut Map<String, Value>,
    key: &str,
) -> Result<Option<T>, String> {
    match map.remove(key) {
        None | Some(Value::Null) => Ok(None),
        Some(value) => T::deserialize(&value)
            .map(Some)
            .map_err(|e| format!("`{key}` = {value} is not what it must be: {e}")),
    }
}

impl Serialize for Evidence {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry("criterion", &self.criterion)?;
        map.serialize_entry("source", &self.source)?;
        map.serialize_entry("method", &self.method)?;
        map.serialize_entry("target", &self.target)?;
        map.serialize_entry("required", &self.required)?;
        map.serialize_entry("result", &self.result)?;
        map.serialize_entry("proof", &self.proof)?;
        map.serialize_entry("exit_code", &self.exit_code)?;
        map.serialize_entry("duration_ms", &self.duration_ms)?;
        map.serialize_entry("output_tail", &self.output_tail)?;
        map.serialize_entry("subject_sha256", &self.subject_sha256)?;
        if let Some(bytes) = self.subject_bytes {
            map.serialize_entry("subject_bytes", &bytes)?;
        }
        map.serialize_entry("at", &self.at)?;
        for (key, value) in &self.extra {
            map.serialize_entry(key, value)?;
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for Evidence {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let map = Map::<String, Value>::deserialize(deserializer)?;
        Evidence::from_map(map).map_err(D::Error::custom)
    }
}

/// What the critic concluded (DESIGN §4.9).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum CriticOutcome {
    /// The work is done.
    #[serde(rename = "PASS")]
    Pass,
    /// It can be fixed: the builder tries again with the feedback.
    #[serde(rename = "SOFT_FAIL")]
    SoftFail,
    /// It must not be accepted.
    #[serde(rename = "HARD_FAIL")]
    HardFail,
}

impl CriticOutcome {
    /// Returns `PASS`, `SOFT_FAIL` or `HARD_FAIL`.
    pub fn as_str(self) -> &'static str {
        match self {
            CriticOutcome::Pass => "PASS",
            CriticOutcome::SoftFail => "SOFT_FAIL",
            CriticOutcome::HardFail => "HARD_FAIL",
        }
    }
}

/// The critic's review of one attempt, as the verdict records it. Its findings are the
/// verdict's findings of source `critic`.
#[derive(Debug, Clone, PartialEq)]
pub struct CriticReview {
    /// The reviewer: its model, else its delegate kind.
    pub reviewer: String,
    /// The review prompt's template version.
    pub prompt_version: String,
    /// The review prompt's template SHA-256.
    pub prompt_sha256: String,
    /// What it concluded; `SOFT_FAIL` when it could not be read.
    pub outcome: CriticOutcome,
    /// False when the reviewer broke, timed out or answered something unreadable.
    pub available: bool,
    /// Why it concluded so.
    pub reasoning: Option<String>,
    /// What the builder must do.
    pub feedback: Option<String>,
    /// How sure it is, 0 to 1.
    pub confidence: Option<f64>,
    /// Why it was unavailable.
    pub error: Option<String>,
    /// Keys the record carries that this type does not name, kept as given.
    pub extra: Map<String, Value>,
}

impl CriticReview {
    /// Every text it holds, for scrubbing: its strings, and the values of its extra keys.
    pub fn texts_mut(&mut self) -> (Vec<&mut String>, &mut Map<String, Value>) {
        // Named field by field, so a field added later must be placed here too.
        let CriticReview {
            reviewer,
            prompt_version,
            prompt_sha256,
            outcome: _,
            available: _,
            reasoning,
            feedback,
            confidence: _,
            error,
            extra,
        } = self;
        let mut texts = vec![reviewer, prompt_version, prompt_sha256];
        texts.extend([reasoning, feedback, error].into_iter().flatten());
        (texts, extra)
    }

    /// What the reviewer said, in one line: its reasoning and its feedback, or why it was
    /// unavailable.
    pub fn summary(&self) -> String {
        if !self.available {
            return self.error.clone().unwrap_or_default();
        }
        [self.reasoning.as_deref(), self.feedback.as_deref()]
            .into_iter()
            .flatten()
            .filter(|s| !s.trim().is_empty())
            .collect::<Vec<_>>()
            .join(" ")
    }
}

impl Serialize for CriticReview {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry("reviewer", &self.reviewer)?;
        map.serialize_entry("prompt_version", &self.prompt_version)?;
        map.serialize_entry("prompt_sha256", &self.prompt_sha256)?;
        map.serialize_entry("outcome", &self.outcome)?;
        map.serialize_entry("available", &self.available)?;
        if self.available {
            map.serialize_entry("reasoning", &self.reasoning.as_deref().unwrap_or(""))?;
            map.serialize_entry("feedback", &self.feedback.as_deref().unwrap_or(""))?;
            map.serialize_entry("confidence", &self.confidence)?;
        }
        if let Some(error) = &self.error {
            map.serialize_entry("error", error)?;
        }
        for (key, value) in &self.extra {
            map.serialize_entry(key, value)?;
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for CriticReview {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let mut map = Map::<String, Value>::deserialize(deserializer)?;
        let take = |map: &mut Map<String, Value>, key: &str| -> Result<String, D::Error> {
            take_opt::<String>(map, key)
                .map(Option::unwrap_or_default)
                .map_err(D::Error::custom)
        };
        let outcome = match map.remove("outcome") {
            Some(value) => serde_json::from_value(value).map_err(|_| {
                D::Error::custom("a critic review's `outcome` is PASS, SOFT_FAIL or HARD_FAIL")
            })?,
            None => return Err(D::Error::missing_field("outcome")),
        };
        Ok(CriticReview {
            reviewer: take(&mut map, "reviewer")?,
            prompt_version: take(&mut map, "prompt_version")?,
            prompt_sha256: take(&mut map, "prompt_sha256")?,
            outcome,
            available: take_opt(&mut map, "available")
                .map_err(D::Error::custom)?
                .unwrap_or(true),
            reasoning: take_opt(&mut map, "reasoning").map_err(D::Error::custom)?,
            feedback: take_opt(&mut map, "feedback").map_err(D::Error::custom)?,
            confidence: take_opt(&mut map, "confidence").map_err(D::Error::custom)?,
            error: take_opt(&mut map, "error").map_err(D::Error::custom)?,
            extra: map,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn evidence_keeps_what_it_does_not_name_and_refuses_what_is_wrong() {
        let given = json!({"criterion": "tests", "source": "check", "method": "sh -c 'true'",
            "target": null, "required": false, "result": "fail", "proof": "exit 1 in 0.1 s",
            "exit_code": 1, "duration_ms": 100, "output_tail": "x", "subject_sha256": null,
            "at": "2026-11-26T00:00:00.000Z", "flake_rate": 0.25, "runner": {"host": "ci-3"}});
        let record: Evidence = serde_json::from_value(given.clone()).expect("reads");
        assert_eq!(record.result, EvidenceResult::Fail);
        assert!(!record.required);
        assert_eq!(record.extra["runner"], json!({"host": "ci-3"}));
        assert_eq!(serde_json::to_value(&record).expect("writes"), given);

        for (bad, says) in [
            (json!({"result": "pass"}), "criterion"),
            (json!({"criterion": "x"}), "result"),
            (json!({"criterion": "x", "result": "maybe"}), "result"),
            (
                json!({"criterion": "x", "result": "pass", "exit_code": "one"}),
                "exit_code",
            ),
        ] {
            let err = serde_json::from_value::<Evidence>(bad).expect_err(says);
            assert!(err.to_string().contains(says), "{err}");
        }
    }

    #[test]
    fn a_review_round_trips_with_its_extra_keys() {
        let given = json!({"reviewer": "m", "prompt_version": "review-v1", "prompt_sha256": "ab",
            "outcome": "SOFT_FAIL", "available": true, "reasoning": "r", "feedback": "f",
            "confidence": 0.5, "model_family": "x"});
        let review: CriticReview = serde_json::from_value(given.clone()).expect("reads");
        assert_eq!(review.outcome, CriticOutcome::SoftFail);
        assert_eq!(review.summary(), "r f");
        assert_eq!(serde_json::to_value(&review).expect("writes"), given);
        let down = json!({"reviewer": "m", "prompt_version": "v", "prompt_sha256": "ab",
            "outcome": "SOFT_FAIL", "available": false, "error": "timed out"});
        let review: CriticReview = serde_json::from_value(down.clone()).expect("reads");
        assert_eq!(review.summary(), "timed out");
        assert_eq!(serde_json::to_value(&review).expect("writes"), down);
    }
}
