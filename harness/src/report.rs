//! How a delegation ended, as the caller and `harness run --json` see it.

use serde::Serialize;
use serde_json::{Map, Value};

use crate::conversation::Usage;
use crate::error::{Error, ErrorKind};
use crate::redact::Redactor;
use crate::retry::{RETRY_TEMPLATE_VERSION, retry_template_sha256};
use crate::verdict::{Decision, Finding, Verdict};
use harness_hooks::{CriticReview, DelegationResult, Evidence, Request};

/// The outcome of one delegation (DESIGN §4.6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// An attempt was verified.
    Passed,
    /// The retry budget was spent with every deterministic stage passing and only the critic
    /// still objecting, under `critic.on_exhausted: debt`: the objections are the run's debt
    /// and a human reviews it.
    PassedWithDebt,
    /// Nothing was configured to verify; the result passed through.
    Skipped,
    /// The delegate's work was refused: every attempt failed verification
    /// (`verification_failed`), or it changed the policy (`scope_violation`).
    Failed(ErrorKind),
    /// The delegation stopped with an error of this kind.
    Error(ErrorKind),
}

impl Outcome {
    /// Returns `passed`, `skipped`, `failed` or `error`.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Passed => "passed",
            Outcome::PassedWithDebt => "passed_with_debt",
            Outcome::Skipped => "skipped",
            Outcome::Failed(_) => "failed",
            Outcome::Error(_) => "error",
        }
    }

    /// Returns the kind of a `failed` or `error` outcome (`verification_failed`, `verifier`, …).
    pub fn kind(self) -> Option<ErrorKind> {
        match self {
            Outcome::Passed | Outcome::PassedWithDebt | Outcome::Skipped => None,
            Outcome::Failed(kind) => Some(kind),
            Outcome::Error(kind) => Some(kind),
        }
    }

    /// Returns true when a human should look at the run: it enters the review queue.
    pub fn needs_review(self) -> bool {
        matches!(self, Outcome::Failed(_) | Outcome::PassedWithDebt)
    }

    /// Returns `passed`, `failed` or `skipped`: how verification went, whatever else happened.
    pub fn verify_outcome(self) -> &'static str {
        match self {
            Outcome::Passed | Outcome::PassedWithDebt => "passed",
            Outcome::Skipped => "skipped",
            Outcome::Failed(_) | Outcome::Error(_) => "failed",
        }
    }
}

/// One attempt as recorded.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct AttemptRecord {
    /// The attempt index, from 0.
    pub attempt: u32,
    /// What the attempt produced (absent when it ended in an error before producing a result).
    pub result: Option<DelegationResult>,
    /// The pipeline's verdict (absent when nothing verified it or it ended in an error first).
    pub verdict: Option<Verdict>,
    /// The retry prompt sent after it, when one was.
    pub retry_prompt: Option<String>,
    /// Unified diffs of the text files the delegation had changed by the end of it (for the
    /// people who review it; secrets scrubbed).
    #[serde(default)]
    pub diff: Vec<String>,
    /// Tokens it cost.
    pub usage: Usage,
    /// How long it took, delegate and verification together.
    pub duration: std::time::Duration,
}

impl AttemptRecord {
    /// Returns whether it passed verification (`None` when it was not verified).
    pub fn passed(&self) -> Option<bool> {
        self.verdict.as_ref().map(Verdict::passed)
    }

    /// Returns why it failed verification, one reason line per blocking finding.
    pub fn reasons(&self) -> Vec<String> {
        self.verdict
            .as_ref()
            .map(Verdict::reasons)
            .unwrap_or_default()
    }
}

/// Everything known about a finished delegation. It serialises whole (a worker sends it back to
/// whoever queued the delegation, which records it).
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct Report {
    /// The delegation id.
    pub id: String,
    /// The request as it ran: what `delegation.pre` hooks left of the delegation file's (as the
    /// file gave it when the run stopped before they ran).
    pub request: Option<Request>,
    /// How it ended.
    pub outcome: Outcome,
    /// The delegate kind.
    pub delegate_kind: String,
    /// The model, when the delegate has one.
    pub model: Option<String>,
    /// The delegate program's version, when it reports one (an agent CLI's `--version`).
    #[serde(default)]
    pub delegate_version: Option<String>,
    /// Every attempt made, in order.
    pub attempts: Vec<AttemptRecord>,
    /// The error, for `failed` and `error` outcomes.
    pub error: Option<Error>,
    /// The Result after `delegation.post` hooks rewrote it, when they did.
    pub delivered: Option<DelegationResult>,
    /// What the run wants a human to know (nothing verified it, …).
    pub warnings: Vec<String>,
    /// What happened, in order (DESIGN §4.12).
    pub events: Vec<crate::events::EventRecord>,
    /// The critic's findings the run passed with: its non-blocking ones, and under
    /// `passed_with_debt` the blocking ones it still had.
    pub debt: Vec<Finding>,
    /// When the delegation started.
    pub started_at: std::time::SystemTime,
    /// How long it took.
    pub duration: std::time::Duration,
    /// The trace its spans belong to, when the process exports traces (see
    /// [`Runtime::with_trace_ids`](crate::Runtime::with_trace_ids)).
    #[serde(default)]
    pub trace_id: Option<String>,
    /// The run it was delegated from (`parent_id`, `HARNESS_PARENT_ID`, or its parent's
    /// `delegate` call, DESIGN §9).
    pub parent_id: Option<String>,
    /// The child runs of its tree that this process sealed but could not record (a queue
    /// worker: the journal is its submitter's), children's children first: whoever records this
    /// report records them with it, in the same transaction.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub carried: Vec<CarriedRun>,
}

/// A child run carried in its root's [`Report`] to be recorded where the root is (see
/// [`Runtime::carry_children`](crate::Runtime::carry_children)).
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct CarriedRun {
    /// The delegation file it was read from, absolute.
    pub source: std::path::PathBuf,
    /// The workspace it is recorded as working in (its parent's, for a child that worked in a
    /// copy of its own), absolute.
    pub workdir: std::path::PathBuf,
    /// How it went (its own `carried` is empty: a tree's runs are all in its root's).
    pub report: Report,
}

impl CarriedRun {
    /// `run` as whoever records it reads it: written as JSON and read back, so that a seal
    /// made of it is the seal of what is recorded.
    ///
    /// # Errors
    /// Why it has no JSON form.
    pub(crate) fn as_sent(run: &CarriedRun) -> std::result::Result<CarriedRun, String> {
        serde_json::to_vec(run)
            .and_then(|json| serde_json::from_slice(&json))
            .map_err(|e| format!("the child's report has no JSON form: {e}"))
    }
}

impl AttemptRecord {
    /// Attempt `attempt`, begun: nothing produced, judged or spent yet.
    pub(crate) fn new(attempt: u32) -> Self {
        AttemptRecord {
            attempt,
            result: None,
            verdict: None,
            retry_prompt: None,
            diff: Vec::new(),
            usage: Usage::default(),
            duration: std::time::Duration::ZERO,
        }
    }
}

impl Report {
    /// The report of delegation `id` as it starts: outcome `skipped` until the run says
    /// otherwise, no attempts, the request as the delegation file gave it.
    pub(crate) fn started(id: String, delegate_kind: &str, request: Option<Request>) -> Report {
        Report {
            id,
            request,
            outcome: Outcome::Skipped,
            delegate_kind: delegate_kind.to_owned(),
            model: None,
            delegate_version: None,
            attempts: Vec::new(),
            error: None,
            delivered: None,
            warnings: Vec::new(),
            events: Vec::new(),
            debt: Vec::new(),
            started_at: std::time::SystemTime::now(),
            duration: std::time::Duration::ZERO,
            trace_id: None,
            parent_id: None,
            carried: Vec::new(),
        }
    }

    /// The report of a delegation that never ran to an outcome of its own (a queued job
    /// dead-lettered after every delivery failed): outcome `error` of `error`'s kind, no
    /// attempts, and the one `DelegationCompleted` event saying so — a record like any other,
    /// for the journal, the review queue and the audit.
    pub fn not_run(id: String, delegate_kind: &str, error: Error) -> Report {
        let outcome = if error.kind().is_failure() {
            Outcome::Failed(error.kind())
        } else {
            Outcome::Error(error.kind())
        };
        let events = crate::events::Emitter::quiet(&id);
        events.emit(crate::events::RunEvent::DelegationCompleted {
            outcome: outcome.as_str().to_owned(),
            kind: outcome.kind().map(|k| k.as_str().to_owned()),
        });
        Report {
            outcome,
            error: Some(error),
            events: events.take(),
            ..Report::started(id, delegate_kind, None)
        }
    }

    /// Returns true when the outcome is `passed`.
    pub fn verified(&self) -> bool {
        matches!(self.outcome, Outcome::Passed | Outcome::PassedWithDebt)
    }

    /// Returns what the caller gets: the last attempt's result, as `delegation.post` hooks
    /// delivered it.
    pub fn result(&self) -> Option<&DelegationResult> {
        self.delivered
            .as_ref()
            .or_else(|| self.attempts.iter().rev().find_map(|a| a.result.as_ref()))
    }

    /// Replaces every secret `redactor` finds in the request, results, retry prompts, findings,
    /// logs, warnings and error with `[REDACTED]` (DESIGN §4.10): what is printed and recorded
    /// from here on carries none.
    pub fn redact(&mut self, redactor: &Redactor) {
        if let Some(request) = &mut self.request {
            redactor.scrub_string(&mut request.task);
            for value in request.args.values_mut() {
                redactor.scrub_json(value);
            }
        }
        for finding in &mut self.debt {
            redactor.scrub_string(&mut finding.message);
        }
        let results = self
            .attempts
            .iter_mut()
            .filter_map(|a| a.result.as_mut())
            .chain(self.delivered.as_mut());
        for result in results {
            redactor.scrub_string(&mut result.response);
            for call in &mut result.tool_calls {
                for value in call.arguments.values_mut() {
                    redactor.scrub_json(value);
                }
            }
            for tool_result in &mut result.tool_results {
                redactor.scrub_string(&mut tool_result.content);
            }
            for record in &mut result.evidence {
                scrub_texts(redactor, record.texts_mut());
            }
        }
        for attempt in &mut self.attempts {
            if let Some(prompt) = &mut attempt.retry_prompt {
                redactor.scrub_string(prompt);
            }
            for diff in &mut attempt.diff {
                redactor.scrub_string(diff);
            }
            if let Some(verdict) = &mut attempt.verdict {
                for finding in &mut verdict.findings {
                    redactor.scrub_string(&mut finding.message);
                }
                for line in &mut verdict.logs {
                    redactor.scrub_string(line);
                }
                for record in &mut verdict.evidence {
                    scrub_texts(redactor, record.texts_mut());
                }
                if let Some(review) = &mut verdict.critic {
                    scrub_texts(redactor, review.texts_mut());
                }
            }
        }
        for warning in &mut self.warnings {
            redactor.scrub_string(warning);
        }
        if let Some(error) = &self.error
            && let std::borrow::Cow::Owned(message) = redactor.scrub(error.message())
        {
            self.error = Some(Error::new(error.kind(), message));
        }
    }

    /// Returns the tokens the whole delegation cost.
    pub fn usage(&self) -> Usage {
        let mut total = Usage::default();
        for attempt in &self.attempts {
            total.add(attempt.usage);
        }
        total
    }

    /// Returns the reasons of every verified attempt, one list per attempt.
    pub fn reasons(&self) -> Vec<Vec<String>> {
        self.attempts
            .iter()
            .filter(|a| a.verdict.is_some())
            .map(AttemptRecord::reasons)
            .collect()
    }

    /// Returns what each attempt's verdict decided, in order: the verdict's own decision; an
    /// attempt that ended the run in an error is `error`; one nothing judged is `None`.
    fn decisions(&self) -> impl Iterator<Item = Option<Decision>> + '_ {
        let last = self.attempts.len().checked_sub(1);
        self.attempts
            .iter()
            .enumerate()
            .map(move |(i, a)| match (&a.verdict, self.outcome) {
                (Some(verdict), _) => Some(verdict.decision),
                (None, Outcome::Error(_)) if Some(i) == last => Some(Decision::Error),
                (None, _) => None,
            })
    }

    /// Returns the `harness run --json` object.
    pub fn to_json(&self) -> Value {
        serde_json::to_value(self.json()).expect("a report always serialises")
    }

    /// The child delegations its `delegate` calls ran, in the order they returned, as the tool
    /// results the runtime wrote say: `{id, outcome, verified, attempts, seal}` each.
    pub fn children(&self) -> Vec<Value> {
        children_of(self.attempts.iter().filter_map(|a| a.result.as_ref()))
    }

    /// Returns the `harness run --json` object as a borrowed view that serialises straight to
    /// text: what [`Report::to_json`] returns, without building the JSON tree first (batch writes
    /// one per delegation).
    pub fn json(&self) -> ReportJson<'_> {
        let usage = self.usage();
        ReportJson {
            id: &self.id,
            outcome: self.outcome.as_str(),
            kind: self.outcome.kind().map(ErrorKind::as_str),
            verified: self.verified(),
            attempts: self.attempts.len(),
            reasons: self.reasons(),
            result: self.result(),
            error: self.error.as_ref().map(|e| ErrorJson {
                kind: e.kind().as_str(),
                message: e.message(),
            }),
            usage: UsageJson {
                input_tokens: usage.input_tokens,
                output_tokens: usage.output_tokens,
                requests: usage.requests,
                cached_input_tokens: usage.cached_input_tokens,
                per_attempt: self
                    .attempts
                    .iter()
                    .map(|a| AttemptUsageJson {
                        duration_ms: millis(a.duration),
                        input_tokens: a.usage.input_tokens,
                        output_tokens: a.usage.output_tokens,
                        requests: a.usage.requests,
                        cached_input_tokens: a.usage.cached_input_tokens,
                    })
                    .collect(),
            },
            delegate: DelegateJson {
                kind: &self.delegate_kind,
                model: self.model.as_deref(),
                version: self.delegate_version.as_deref(),
            },
            duration_ms: millis(self.duration),
            retry_template: TemplateJson {
                version: RETRY_TEMPLATE_VERSION,
                sha256: retry_template_sha256(),
            },
            history: self
                .attempts
                .iter()
                .zip(self.decisions())
                .map(|(a, decision)| HistoryJson {
                    attempt: a.attempt,
                    decision: decision.map(Decision::as_str),
                    findings: a.verdict.as_ref().map_or(&[], |v| v.findings.as_slice()),
                    evidence: a.verdict.as_ref().map_or(&[], |v| v.evidence.as_slice()),
                    critic: a.verdict.as_ref().and_then(|v| v.critic.as_ref()),
                    retry_prompt: a.retry_prompt.as_deref(),
                })
                .collect(),
            debt: &self.debt,
            warnings: &self.warnings,
            review: ReviewJson {
                status: self.outcome.needs_review().then_some("pending"),
            },
            line: None,
            trace_id: self.trace_id.as_deref(),
            parent_id: self.parent_id.as_deref(),
            children: self.children(),
        }
    }
}

/// Scrubs every text of a typed record (see [`Evidence::texts_mut`]).
fn scrub_texts(redactor: &Redactor, (texts, extra): (Vec<&mut String>, &mut Map<String, Value>)) {
    for text in texts {
        redactor.scrub_string(text);
    }
    for value in extra.values_mut() {
        redactor.scrub_json(value);
    }
}

/// The children `results` name: each successful `delegate` call's result (which the runtime
/// writes as JSON), its id, outcome, whether it was verified, its attempts and seal.
pub fn children_of<'a>(results: impl Iterator<Item = &'a DelegationResult>) -> Vec<Value> {
    results
        .flat_map(|r| r.tool_results.iter())
        .filter(|t| t.name == crate::tools::Tool::Delegate.name() && !t.is_error)
        .filter_map(|t| serde_json::from_str::<Value>(&t.content).ok())
        .map(|child| {
            serde_json::json!({
                "id": child["id"], "outcome": child["outcome"], "verified": child["verified"],
                "attempts": child["attempts"], "seal": child["seal"],
            })
        })
        .collect()
}

fn millis(duration: std::time::Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

/// The `harness run --json` object of a [`Report`], borrowed from it (see [`Report::json`]).
/// Fields serialise in this order.
#[derive(Debug, Serialize)]
pub struct ReportJson<'a> {
    id: &'a str,
    outcome: &'static str,
    kind: Option<&'static str>,
    verified: bool,
    attempts: usize,
    reasons: Vec<Vec<String>>,
    result: Option<&'a DelegationResult>,
    error: Option<ErrorJson<'a>>,
    usage: UsageJson,
    delegate: DelegateJson<'a>,
    duration_ms: u64,
    retry_template: TemplateJson,
    history: Vec<HistoryJson<'a>>,
    debt: &'a [Finding],
    warnings: &'a [String],
    review: ReviewJson,
    /// The batch line, in `harness batch --json` output.
    #[serde(skip_serializing_if = "Option::is_none")]
    line: Option<usize>,
    trace_id: Option<&'a str>,
    /// The run it was delegated from.
    parent_id: Option<&'a str>,
    /// The child delegations its `delegate` calls ran (DESIGN §9).
    children: Vec<Value>,
}

impl ReportJson<'_> {
    /// The object of a batch entry: `line` added before `trace_id`.
    #[must_use]
    pub fn with_line(mut self, line: usize) -> Self {
        self.line = Some(line);
        self
    }
}

/// One attempt of `history`: its verdict (DESIGN §4.3) with what it produced and the retry
/// prompt it led to.
#[derive(Debug, Serialize)]
struct HistoryJson<'a> {
    attempt: u32,
    decision: Option<&'static str>,
    findings: &'a [Finding],
    evidence: &'a [Evidence],
    critic: Option<&'a CriticReview>,
    retry_prompt: Option<&'a str>,
}

#[derive(Debug, Serialize)]
struct ReviewJson {
    status: Option<&'static str>,
}

#[derive(Debug, Serialize)]
struct ErrorJson<'a> {
    kind: &'static str,
    message: &'a str,
}

#[derive(Debug, Serialize)]
struct UsageJson {
    input_tokens: u64,
    output_tokens: u64,
    requests: u64,
    /// Of the input, what the provider read from its cache; written only when it read some.
    #[serde(skip_serializing_if = "crate::conversation::is_zero")]
    cached_input_tokens: u64,
    per_attempt: Vec<AttemptUsageJson>,
}

#[derive(Debug, Serialize)]
struct AttemptUsageJson {
    duration_ms: u64,
    input_tokens: u64,
    output_tokens: u64,
    requests: u64,
    #[serde(skip_serializing_if = "crate::conversation::is_zero")]
    cached_input_tokens: u64,
}

#[derive(Debug, Serialize)]
struct DelegateJson<'a> {
    kind: &'a str,
    model: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    version: Option<&'a str>,
}

#[derive(Debug, Serialize)]
struct TemplateJson {
    version: &'static str,
    sha256: &'static str,
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use serde_json::json;

    use super::*;
    use harness_hooks::ToolCall;

    fn attempt(n: u32, passed: Option<bool>, reasons: &[&str], response: &str) -> AttemptRecord {
        AttemptRecord {
            attempt: n,
            result: Some(DelegationResult {
                id: "d-0000000000000001".to_owned(),
                parent_id: None,
                attempt: n,
                response: response.to_owned(),
                tool_calls: vec![ToolCall {
                    id: "call_1".to_owned(),
                    name: "write_file".to_owned(),
                    arguments: json!({"path": "a.txt", "content": "é\n\"q\""})
                        .as_object()
                        .cloned()
                        .unwrap_or_default(),
                }],
                tool_results: Vec::new(),
                changes: None,
                evidence: Vec::new(),
            }),
            verdict: crate::verdict::test_verdict(n, passed, reasons),
            retry_prompt: None,
            diff: Vec::new(),
            usage: Usage {
                input_tokens: 10 + u64::from(n),
                output_tokens: 3,
                requests: 1,
                ..Usage::default()
            },
            duration: Duration::from_micros(1_500_700 + u64::from(n)),
        }
    }

    /// The object as the JSON tree was built before the typed view, key for key.
    fn reference(report: &Report) -> Value {
        let usage = report.usage();
        json!({
            "id": report.id,
            "outcome": report.outcome.as_str(),
            "kind": report.outcome.kind().map(ErrorKind::as_str),
            "verified": report.verified(),
            "attempts": report.attempts.len(),
            "reasons": report.reasons(),
            "result": report.result().map(DelegationResult::to_value),
            "error": report.error.as_ref().map(|e| json!({"kind": e.kind().as_str(), "message": e.message()})),
            "usage": {
                "input_tokens": usage.input_tokens,
                "output_tokens": usage.output_tokens,
                "requests": usage.requests,
                "per_attempt": report.attempts.iter().map(|a| json!({
                    "duration_ms": u64::try_from(a.duration.as_millis()).unwrap_or(u64::MAX),
                    "input_tokens": a.usage.input_tokens,
                    "output_tokens": a.usage.output_tokens,
                    "requests": a.usage.requests,
                })).collect::<Vec<_>>(),
            },
            "delegate": {"kind": report.delegate_kind, "model": report.model},
            "duration_ms": u64::try_from(report.duration.as_millis()).unwrap_or(u64::MAX),
            "retry_template": {"version": RETRY_TEMPLATE_VERSION, "sha256": retry_template_sha256()},
            "history": report.attempts.iter().enumerate().map(|(i, a)| json!({
                "attempt": a.attempt,
                "decision": match (&a.verdict, report.outcome) {
                    (Some(v), _) => Some(v.decision.as_str()),
                    (None, Outcome::Error(_)) if i + 1 == report.attempts.len() => Some("error"),
                    (None, _) => None,
                },
                "findings": a.verdict.as_ref().map_or(json!([]), |v| json!(v.findings)),
                "evidence": a.verdict.as_ref().map_or(json!([]), |v| json!(v.evidence)),
                "critic": a.verdict.as_ref().and_then(|v| v.critic.clone()),
                "retry_prompt": a.retry_prompt,
            })).collect::<Vec<_>>(),
            "debt": [],
            "warnings": report.warnings,
            "review": {"status": report.outcome.needs_review().then_some("pending")},
            "trace_id": report.trace_id,
            "parent_id": report.parent_id,
            "children": report.children(),
        })
    }

    #[test]
    fn the_typed_view_writes_exactly_the_run_json_object() {
        let failed = Report {
            id: "d-0000000000000001".to_owned(),
            request: None,
            outcome: Outcome::Failed(ErrorKind::VerificationFailed),
            delegate_kind: "openai".to_owned(),
            model: Some("m".to_owned()),
            delegate_version: None,
            attempts: vec![
                attempt(0, Some(false), &["no `id`", "line two"], "{\"name\": 1}"),
                attempt(1, Some(false), &["still no `id`"], "tab\there"),
            ],
            error: Some(Error::new(
                ErrorKind::VerificationFailed,
                "verification failed after 2 attempts",
            )),
            delivered: None,
            warnings: Vec::new(),
            events: Vec::new(),
            debt: Vec::new(),
            started_at: std::time::SystemTime::UNIX_EPOCH,
            duration: Duration::from_millis(3_001),
            trace_id: None,
            parent_id: None,
            carried: Vec::new(),
        };
        let mut errored = failed.clone();
        errored.outcome = Outcome::Error(ErrorKind::Timeout);
        errored.attempts.push(AttemptRecord {
            result: None,
            verdict: None,
            ..attempt(2, None, &[], "")
        });
        errored.model = None;
        let mut passed = failed.clone();
        passed.outcome = Outcome::Passed;
        passed.error = None;
        passed.delivered = Some(DelegationResult {
            response: "[redacted]".to_owned(),
            ..attempt(1, None, &[], "")
                .result
                .expect("attempt() makes a result")
        });
        for report in [&failed, &errored, &passed] {
            let text = serde_json::to_string(&report.json()).expect("serialises");
            assert_eq!(text, reference(report).to_string());
            assert_eq!(report.to_json(), reference(report));
        }
    }
}
