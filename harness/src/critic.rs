//! The independent critic (DESIGN §4.9): a reviewer that reads the builder's work after every
//! deterministic stage passed, in a fresh conversation with read-only tools, and answers one JSON
//! object. It ranks below every deterministic stage: its blocking findings send the attempt back
//! with its feedback, its other findings become debt, a `HARD_FAIL` ends the run as
//! `critic_rejected` — and its word alone never passes a run. A reviewer that cannot be read
//! (prose, two objects, an unknown severity, a crash, a timeout) is recorded as `SOFT_FAIL` with
//! a non-blocking "critic unavailable" finding, never as a pass of its own.

use std::sync::LazyLock;

use harness_hooks::{DelegationResult, ToolCall};
use serde_json::{Value, json};

use crate::conversation::{Message, ToolSpec, Usage};
use crate::delegate::{Delegate, TurnRequest};
use crate::spec::{CriticSpec, CriticWhen};
use crate::tools::Toolbox;
use crate::verdict::{Finding, Severity, Source, Verdict};

/// The review prompt's version; bump it whenever the text changes.
pub const REVIEW_TEMPLATE_VERSION: &str = "review-v1";

/// The review prompt; `{task}`, `{criteria}`, `{response}`, `{evidence}`, `{diff}` and
/// `{prior}` are filled in mechanically.
pub const REVIEW_TEMPLATE: &str = "\
You are an independent reviewer. Another agent was given the task below and says it is done. \
Deterministic checks have already passed; judge what they cannot: whether the work really does \
what the task and the acceptance criteria ask. You may read the workspace with read_file and \
list_files; you cannot change anything.

Task:
{task}

Acceptance criteria:
{criteria}

The agent's final answer:
{response}

Evidence from the checks:
{evidence}

Changes to the workspace:
{diff}

Earlier findings:
{prior}

Answer with exactly one JSON object and nothing else:
{\"outcome\": \"PASS\" | \"SOFT_FAIL\" | \"HARD_FAIL\", \"reasoning\": \"...\", \"feedback\": \"what the agent must do\", \
\"confidence\": 0.0-1.0, \"findings\": [{\"severity\": \"security|crash|data_loss|wrong_algorithm|missing_ac|style|perf|other\", \
\"title\": \"...\", \"body\": \"...\", \"path\": \"file\", \"line\": 1}]}
PASS: the work is done (findings of severity style, perf or other are noted as debt). SOFT_FAIL: \
it can be fixed; the agent gets your feedback and tries again. HARD_FAIL: it must not be accepted \
and retrying will not help.";

/// Lines of the diff quoted in the review prompt, at most.
const MAX_DIFF_LINES: usize = 500;

static TEMPLATE_SHA256: LazyLock<String> =
    LazyLock::new(|| harness_builtins::sha256_hex(REVIEW_TEMPLATE.as_bytes()));

/// Returns the SHA-256 of the review prompt's template, recorded with every review.
pub fn review_template_sha256() -> &'static str {
    &TEMPLATE_SHA256
}

/// What the critic concluded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// The work is done.
    Pass,
    /// It can be fixed: the builder tries again with the feedback.
    SoftFail,
    /// It must not be accepted.
    HardFail,
}

impl Outcome {
    fn as_str(self) -> &'static str {
        match self {
            Outcome::Pass => "PASS",
            Outcome::SoftFail => "SOFT_FAIL",
            Outcome::HardFail => "HARD_FAIL",
        }
    }
}

/// One review.
#[derive(Debug)]
pub(crate) struct Review {
    /// What it concluded.
    pub(crate) outcome: Outcome,
    /// Its findings, source `critic`: blocking for security, crash, data_loss,
    /// wrong_algorithm, missing_ac (and a SOFT_FAIL's feedback); debt for the rest.
    pub(crate) findings: Vec<Finding>,
    /// The verdict's `critic` record.
    pub(crate) record: Value,
    /// Tokens the review cost.
    pub(crate) usage: Usage,
    /// What the reviewer said, for the message of a `HARD_FAIL`.
    pub(crate) summary: String,
}

/// What the reviewer sees of an attempt.
#[derive(Debug)]
pub(crate) struct ReviewInput<'a> {
    pub(crate) task: &'a str,
    pub(crate) result: &'a DelegationResult,
    pub(crate) evidence: &'a [Value],
    pub(crate) diff: &'a [String],
    pub(crate) earlier: &'a [&'a Verdict],
    pub(crate) risk: bool,
}

/// The reviewer of one delegation: its own delegate, a fresh conversation per review.
pub(crate) struct Critic {
    pub(crate) spec: CriticSpec,
    /// Secrets never reach the reviewer: the prompt is scrubbed as the retry prompt is.
    redact: crate::redact::Redactor,
    delegate: Box<dyn Delegate>,
    toolbox: Toolbox,
    tool_specs: Vec<ToolSpec>,
}

impl std::fmt::Debug for Critic {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Critic")
            .field("spec", &self.spec)
            .finish_non_exhaustive()
    }
}

impl Critic {
    /// A critic of `spec`, played by `delegate`, reading through `toolbox` (read-only tools).
    pub(crate) fn new(
        spec: CriticSpec,
        delegate: Box<dyn Delegate>,
        toolbox: Toolbox,
        redact: crate::redact::Redactor,
    ) -> Self {
        Critic {
            redact,
            tool_specs: toolbox.specs(),
            spec,
            delegate,
            toolbox,
        }
    }

    /// The reviewer's name: its model, else its kind.
    pub(crate) fn reviewer(&self) -> String {
        self.delegate
            .model()
            .map_or_else(|| self.delegate.kind().to_owned(), str::to_owned)
    }

    /// Whether it reviews at all.
    pub(crate) fn active(&self) -> bool {
        self.spec.when != CriticWhen::Never
    }

    /// Whether it reviews this attempt: always, or when it is risky.
    pub(crate) fn wants(&self, input: &ReviewInput<'_>) -> bool {
        match self.spec.when {
            CriticWhen::Never => false,
            CriticWhen::Always => true,
            CriticWhen::Risky => {
                let files = input
                    .result
                    .changes
                    .as_ref()
                    .map_or(0, |c| c.added.len() + c.modified.len() + c.deleted.len());
                let lines = changed_lines(input.diff);
                input.risk || input.result.parent_id.is_some() || files > 5 || lines > 300
            }
        }
    }

    /// Reviews one attempt. Never fails: a reviewer that breaks is a `SOFT_FAIL` with a
    /// non-blocking "critic unavailable" finding.
    pub(crate) async fn review(&mut self, input: &ReviewInput<'_>) -> Review {
        let mut prompt = prompt(&self.spec.criteria, input);
        self.redact.scrub_string(&mut prompt);
        let mut usage = Usage::default();
        let answer = self
            .converse(prompt, input.result.attempt, &mut usage)
            .await;
        let reviewer = self.reviewer();
        let base = json!({
            "reviewer": reviewer,
            "prompt_version": REVIEW_TEMPLATE_VERSION,
            "prompt_sha256": review_template_sha256(),
        });
        match answer.and_then(|text| parse(&text)) {
            Ok(parsed) => {
                let mut record = base;
                record["outcome"] = json!(parsed.outcome.as_str());
                record["available"] = json!(true);
                record["reasoning"] = json!(parsed.reasoning);
                record["feedback"] = json!(parsed.feedback);
                record["confidence"] = json!(parsed.confidence);
                let mut findings = parsed.findings;
                let blocking = findings.iter().any(|f| f.blocking);
                if parsed.outcome == Outcome::SoftFail && !blocking {
                    // A SOFT_FAIL always sends the attempt back, with its feedback.
                    let feedback = if parsed.feedback.trim().is_empty() {
                        parsed.reasoning.clone()
                    } else {
                        parsed.feedback.clone()
                    };
                    let mut finding = Finding::blocking(Source::Critic, "review", feedback);
                    finding.severity = Severity::Other;
                    findings.push(finding);
                }
                let summary = [parsed.reasoning.as_str(), parsed.feedback.as_str()]
                    .iter()
                    .filter(|s| !s.trim().is_empty())
                    .copied()
                    .collect::<Vec<_>>()
                    .join(" ");
                Review {
                    outcome: parsed.outcome,
                    findings,
                    record,
                    usage,
                    summary,
                }
            }
            Err(why) => {
                let mut record = base;
                record["outcome"] = json!("SOFT_FAIL");
                record["available"] = json!(false);
                record["error"] = json!(why);
                let mut finding = Finding::advisory(
                    Source::Critic,
                    "unavailable",
                    format!("critic unavailable: {why}"),
                );
                finding.severity = Severity::Other;
                Review {
                    outcome: Outcome::SoftFail,
                    findings: vec![finding],
                    record,
                    usage,
                    summary: why,
                }
            }
        }
    }

    /// One fresh conversation: the prompt, the reviewer's reads, its final answer.
    async fn converse(
        &mut self,
        prompt: String,
        attempt: u32,
        usage: &mut Usage,
    ) -> Result<String, String> {
        let mut messages = vec![Message::User(prompt)];
        let mut calls = 0u32;
        for turn in 0..self.spec.max_turns {
            let answer = self
                .delegate
                .turn(TurnRequest {
                    messages: &messages,
                    attempt,
                    turn,
                    tools: &self.tool_specs,
                })
                .await
                .map_err(|e| format!("the reviewer failed: {}", e.message()))?;
            usage.add(answer.usage);
            if answer.tool_calls.is_empty() {
                return Ok(answer.content.unwrap_or_default());
            }
            let requested: Vec<ToolCall> = answer
                .tool_calls
                .into_iter()
                .map(|c| {
                    calls += 1;
                    ToolCall {
                        id: c.id.unwrap_or_else(|| format!("review_call_{calls}")),
                        name: c.name,
                        arguments: c.arguments,
                    }
                })
                .collect();
            messages.push(Message::Assistant {
                content: answer.content,
                tool_calls: requested.clone(),
            });
            for call in requested {
                let output = if self.tool_specs.iter().any(|t| t.name == call.name) {
                    self.toolbox.call(&call.name, &call.arguments).await
                } else {
                    crate::tools::ToolOutput::error(format!(
                        "the reviewer may only read: {} is not one of its tools",
                        call.name
                    ))
                };
                messages.push(Message::Tool {
                    call_id: call.id,
                    name: call.name,
                    content: output.content,
                });
            }
        }
        Err(format!(
            "the reviewer used all {} turns without a verdict (critic.max_turns)",
            self.spec.max_turns
        ))
    }
}

/// Lines added or removed in unified diffs.
fn changed_lines(diff: &[String]) -> usize {
    diff.iter()
        .flat_map(|d| d.lines())
        .filter(|l| {
            (l.starts_with('+') && !l.starts_with("+++"))
                || (l.starts_with('-') && !l.starts_with("---"))
        })
        .count()
}

/// Fills the review template.
fn prompt(criteria: &str, input: &ReviewInput<'_>) -> String {
    let or_none = |text: String| {
        if text.trim().is_empty() {
            "(none)".to_owned()
        } else {
            text
        }
    };
    let evidence = input
        .evidence
        .iter()
        .map(|e| {
            format!(
                "- {} [{}]: {}",
                e["criterion"].as_str().unwrap_or("?"),
                e["result"].as_str().unwrap_or("?"),
                e["proof"].as_str().unwrap_or("")
            )
        })
        .collect::<Vec<_>>()
        .join("\n");
    let lines: Vec<&str> = input.diff.iter().flat_map(|d| d.lines()).collect();
    let mut diff = lines
        .iter()
        .take(MAX_DIFF_LINES)
        .copied()
        .collect::<Vec<_>>()
        .join("\n");
    if lines.len() > MAX_DIFF_LINES {
        diff.push_str(&format!(
            "\n[diff cut: {} more lines]",
            lines.len() - MAX_DIFF_LINES
        ));
    }
    let prior = input
        .earlier
        .iter()
        .flat_map(|v| {
            v.findings
                .iter()
                .map(move |f| format!("- attempt {}: {f}", v.attempt + 1))
        })
        .collect::<Vec<_>>()
        .join("\n");
    let values = [
        ("{task}", input.task.to_owned()),
        ("{criteria}", or_none(criteria.to_owned())),
        ("{response}", or_none(input.result.response.clone())),
        ("{evidence}", or_none(evidence)),
        ("{diff}", or_none(diff)),
        ("{prior}", or_none(prior)),
    ];
    let values: Vec<(&str, &str)> = values.iter().map(|(k, v)| (*k, v.as_str())).collect();
    crate::retry::fill(REVIEW_TEMPLATE, &values)
}

/// A reviewer's answer, read.
#[derive(Debug)]
struct Parsed {
    outcome: Outcome,
    reasoning: String,
    feedback: String,
    confidence: Option<f64>,
    findings: Vec<Finding>,
}

/// Reads exactly one JSON object (a single ```json fence around it is tolerated).
fn parse(text: &str) -> Result<Parsed, String> {
    let mut body = text.trim();
    if let Some(inner) = body
        .strip_prefix("```json")
        .or_else(|| body.strip_prefix("```"))
        .and_then(|rest| rest.strip_suffix("```"))
    {
        body = inner.trim();
    }
    if body.is_empty() {
        return Err("the reviewer answered nothing; it must answer one JSON object".to_owned());
    }
    let mut values = serde_json::Deserializer::from_str(body).into_iter::<Value>();
    let value = match values.next() {
        Some(Ok(value)) => value,
        Some(Err(e)) => {
            return Err(format!(
                "the reviewer's answer is not one JSON object ({e}): {}",
                harness_builtins::shorten(body, 200)
            ));
        }
        None => return Err("the reviewer answered nothing".to_owned()),
    };
    if values.next().is_some() {
        return Err(format!(
            "the reviewer answered more than one JSON value; it must answer exactly one object: {}",
            harness_builtins::shorten(body, 200)
        ));
    }
    let Value::Object(map) = value else {
        return Err(format!(
            "the reviewer's answer is not a JSON object: {}",
            harness_builtins::shorten(body, 200)
        ));
    };
    let outcome = match map.get("outcome").and_then(Value::as_str) {
        Some("PASS") => Outcome::Pass,
        Some("SOFT_FAIL") => Outcome::SoftFail,
        Some("HARD_FAIL") => Outcome::HardFail,
        other => {
            return Err(format!(
                "the reviewer's `outcome` is {}; it must be PASS, SOFT_FAIL or HARD_FAIL",
                other.map_or_else(|| "missing".to_owned(), |o| format!("{o:?}"))
            ));
        }
    };
    let text_of = |key: &str| -> Result<String, String> {
        match map.get(key) {
            None | Some(Value::Null) => Ok(String::new()),
            Some(Value::String(s)) => Ok(s.clone()),
            Some(other) => Err(format!(
                "the reviewer's `{key}` must be a string, got {}",
                harness_builtins::shorten(&other.to_string(), 200)
            )),
        }
    };
    let reasoning = text_of("reasoning")?;
    let feedback = text_of("feedback")?;
    let confidence = match map.get("confidence") {
        None | Some(Value::Null) => None,
        Some(Value::Number(n)) => n.as_f64(),
        Some(other) => {
            return Err(format!(
                "the reviewer's `confidence` must be a number, got {}",
                harness_builtins::shorten(&other.to_string(), 200)
            ));
        }
    };
    let listed = match map.get("findings") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) => items.clone(),
        Some(_) => return Err("the reviewer's `findings` must be a list".to_owned()),
    };
    let mut findings = Vec::new();
    for (i, item) in listed.iter().enumerate() {
        let at = format!("the reviewer's `findings[{i}]`");
        let Value::Object(f) = item else {
            return Err(format!("{at} must be an object"));
        };
        let severity = match f.get("severity").and_then(Value::as_str) {
            Some("security") => Severity::Security,
            Some("crash") => Severity::Crash,
            Some("data_loss") => Severity::DataLoss,
            Some("wrong_algorithm") => Severity::WrongAlgorithm,
            Some("missing_ac") => Severity::MissingAc,
            Some("style") => Severity::Style,
            Some("perf") => Severity::Perf,
            Some("other") => Severity::Other,
            other => {
                return Err(format!(
                    "{at}: unknown severity {}; use security, crash, data_loss, wrong_algorithm, missing_ac, style, perf or other",
                    other.map_or_else(|| "(missing)".to_owned(), |s| format!("{s:?}"))
                ));
            }
        };
        let title = f
            .get("title")
            .and_then(Value::as_str)
            .filter(|t| !t.trim().is_empty())
            .ok_or_else(|| format!("{at} needs a `title`"))?;
        let body = f.get("body").and_then(Value::as_str).unwrap_or_default();
        let blocking = matches!(
            severity,
            Severity::Security
                | Severity::Crash
                | Severity::DataLoss
                | Severity::WrongAlgorithm
                | Severity::MissingAc
        );
        let message = if body.trim().is_empty() {
            title.to_owned()
        } else {
            format!("{title}: {body}")
        };
        let mut finding = if blocking {
            Finding::blocking(Source::Critic, severity.as_str(), message)
        } else {
            Finding::advisory(Source::Critic, severity.as_str(), message)
        };
        finding.severity = severity;
        finding.path = f.get("path").and_then(Value::as_str).map(str::to_owned);
        finding.line = f
            .get("line")
            .and_then(Value::as_u64)
            .and_then(|l| u32::try_from(l).ok());
        findings.push(finding);
    }
    Ok(Parsed {
        outcome,
        reasoning,
        feedback,
        confidence,
        findings,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_object_is_read_and_severities_decide_what_blocks() {
        let parsed = parse(
            r#"```json
{"outcome": "SOFT_FAIL", "reasoning": "no tests", "feedback": "add tests", "confidence": 0.8,
 "findings": [{"severity": "missing_ac", "title": "no tests for the parser", "path": "src/p.rs", "line": 3},
              {"severity": "style", "title": "long function"}]}
```"#,
        )
        .expect("parses");
        assert_eq!(parsed.outcome, Outcome::SoftFail);
        assert_eq!(parsed.findings.len(), 2);
        assert!(parsed.findings[0].blocking);
        assert_eq!(parsed.findings[0].severity, Severity::MissingAc);
        assert_eq!(parsed.findings[0].path.as_deref(), Some("src/p.rs"));
        assert!(!parsed.findings[1].blocking);
        assert_eq!(parsed.confidence, Some(0.8));
    }

    #[test]
    fn prose_two_objects_unknown_severities_and_nothing_are_refused() {
        for (answer, expect) in [
            ("Looks good to me!", "not one JSON object"),
            (
                r#"{"outcome": "PASS"} {"outcome": "PASS"}"#,
                "more than one JSON value",
            ),
            (
                r#"{"outcome": "PASS", "findings": [{"severity": "meh", "title": "x"}]}"#,
                "unknown severity",
            ),
            (r#"{"outcome": "MAYBE"}"#, "PASS, SOFT_FAIL or HARD_FAIL"),
            ("", "answered nothing"),
            ("[1, 2]", "not a JSON object"),
        ] {
            let why = parse(answer).expect_err(answer);
            assert!(why.contains(expect), "{answer:?}: {why}");
        }
    }

    #[test]
    fn changed_lines_count_additions_and_removals_not_headers() {
        let diff = vec!["--- a/x\n+++ b/x\n@@ -1 +1 @@\n-old\n+new\n+more\n".to_owned()];
        assert_eq!(changed_lines(&diff), 3);
    }
}
