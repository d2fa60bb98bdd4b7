//! Stage 5: the independent critic (DESIGN §4.9) — a reviewer that reads the builder's work
//! after every deterministic stage passed, in a fresh conversation with read-only tools, and
//! answers one JSON object. It ranks below every deterministic stage: it runs only when no
//! blocking finding came before it, its blocking findings send the attempt back with its
//! feedback, its other findings become debt, a `HARD_FAIL` ends the run as `critic_rejected` —
//! and its word alone never passes a run. A reviewer that cannot be read (prose, two objects, an
//! unknown severity, a crash, a timeout) is recorded as `SOFT_FAIL` with a non-blocking "critic
//! unavailable" finding, never as a pass of its own.
//!
//! The `critic:` section of a delegation file (or of a project policy's
//! `verification_defaults`) is read in [`crate::gates::critic`].

use std::sync::LazyLock;

use harness_hooks::{CriticOutcome, CriticReview, DelegationResult, ToolCall};
use serde_json::Value;
use tracing::Instrument as _;

use super::{Check, Subject};
use crate::conversation::{Message, ToolSpec, Usage};
use crate::delegate::{BoxFuture, Delegate, TurnRequest};
use crate::error::Result;
use crate::events::RunEvent;
use crate::gates::critic::{CriticSpec, CriticWhen};
use crate::prompt::{Prompt, diff_lines};
use crate::tools::Toolbox;
use crate::verdict::{Finding, Severity, Source};

/// The review prompt's version; bump it whenever the text of [`REVIEW_TEMPLATE`] or
/// [`REVIEW_PHRASES`] changes.
pub const REVIEW_TEMPLATE_VERSION: &str = "review-v2";

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

/// The phrases the prompt's parts are made of, each a template of its own: an empty part, an
/// evidence record, an earlier finding, a cut diff. Hashed with [`REVIEW_TEMPLATE`].
pub const REVIEW_PHRASES: [(&str, &str); 4] = [
    ("none", "(none)"),
    ("evidence", "- {criterion} [{result}]: {proof}"),
    ("prior", "- attempt {attempt}: {finding}"),
    ("diff_cut", "[diff cut: {more} more lines]"),
];

/// The review prompt, read.
static REVIEW: LazyLock<Prompt> = LazyLock::new(|| Prompt::new(REVIEW_TEMPLATE, &REVIEW_PHRASES));

/// Returns the SHA-256 of every word of the review prompt the code does not take from the
/// attempt: [`REVIEW_TEMPLATE`], then each of [`REVIEW_PHRASES`] as a line `\nNAME: PHRASE`.
/// Recorded with every review.
pub fn review_template_sha256() -> &'static str {
    REVIEW.sha256()
}

/// What a review found.
#[derive(Debug)]
struct Review {
    /// The verdict's `critic` record.
    record: CriticReview,
    /// Its findings, source `critic`: blocking for security, crash, data_loss, wrong_algorithm,
    /// missing_ac (and a SOFT_FAIL's feedback); debt for the rest.
    findings: Vec<Finding>,
}

/// The critic as a pipeline stage: its own delegate, a fresh conversation per review, read-only
/// tools. It reviews only an attempt no earlier stage blocked, and only when its `when` says.
pub(crate) struct Critic {
    spec: CriticSpec,
    /// The task as the reviewer reads it (after `delegation.pre` hooks).
    task: String,
    /// The caller marked the work risky (`risk: true`).
    risk: bool,
    /// Secrets never reach the reviewer: the prompt is scrubbed as the retry prompt is.
    redact: crate::redact::Redactor,
    /// One review at a time: the delegate keeps state across turns.
    delegate: tokio::sync::Mutex<Box<dyn Delegate>>,
    reviewer: String,
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
    /// The critic of `spec` for `task`, played by `delegate`, reading through `toolbox`
    /// (read-only tools). A `when: never` critic is not built at all (see
    /// [`CriticSpec::reviews`]).
    pub(crate) fn new(
        spec: &CriticSpec,
        task: &str,
        risk: bool,
        delegate: Box<dyn Delegate>,
        toolbox: Toolbox,
        redact: crate::redact::Redactor,
    ) -> Self {
        Critic {
            reviewer: delegate
                .model()
                .map_or_else(|| delegate.kind().to_owned(), str::to_owned),
            tool_specs: toolbox.specs(),
            spec: spec.clone(),
            task: task.to_owned(),
            risk,
            redact,
            delegate: tokio::sync::Mutex::new(delegate),
            toolbox,
        }
    }

    /// Whether it reviews this attempt: always, or when it is risky.
    fn wants(&self, result: &DelegationResult, diff: &[String]) -> bool {
        match self.spec.when {
            CriticWhen::Never => false,
            CriticWhen::Always => true,
            CriticWhen::Risky => {
                let files = result
                    .changes
                    .as_ref()
                    .map_or(0, |c| c.added.len() + c.modified.len() + c.deleted.len());
                let lines = changed_lines(diff);
                self.risk || result.parent_id.is_some() || files > 5 || lines > 300
            }
        }
    }

    /// Reviews one attempt. Never fails: a reviewer that breaks is a `SOFT_FAIL` with a
    /// non-blocking "critic unavailable" finding.
    async fn review(&self, subject: &Subject<'_>, usage: &mut Usage) -> Review {
        let mut prompt = prompt(&self.spec.criteria, &self.task, subject);
        self.redact.scrub_string(&mut prompt);
        let answer = self
            .converse(prompt, subject.result.attempt, usage)
            .await
            .and_then(|text| parse(&text));
        let mut record = CriticReview {
            reviewer: self.reviewer.clone(),
            prompt_version: REVIEW_TEMPLATE_VERSION.to_owned(),
            prompt_sha256: review_template_sha256().to_owned(),
            outcome: CriticOutcome::SoftFail,
            available: false,
            reasoning: None,
            feedback: None,
            confidence: None,
            error: None,
            extra: serde_json::Map::new(),
        };
        match answer {
            Ok(parsed) => {
                record.outcome = parsed.outcome;
                record.available = true;
                record.confidence = parsed.confidence;
                let mut findings = parsed.findings;
                let blocking = findings.iter().any(|f| f.blocking);
                if parsed.outcome == CriticOutcome::SoftFail && !blocking {
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
                record.reasoning = Some(parsed.reasoning);
                record.feedback = Some(parsed.feedback);
                Review { record, findings }
            }
            Err(why) => {
                let mut finding = Finding::advisory(
                    Source::Critic,
                    "unavailable",
                    format!("critic unavailable: {why}"),
                );
                finding.severity = Severity::Other;
                record.error = Some(why);
                Review {
                    record,
                    findings: vec![finding],
                }
            }
        }
    }

    /// One fresh conversation: the prompt, the reviewer's reads, its final answer.
    async fn converse(
        &self,
        prompt: String,
        attempt: u32,
        usage: &mut Usage,
    ) -> std::result::Result<String, String> {
        let mut delegate = self.delegate.lock().await;
        let mut messages = vec![Message::User(prompt)];
        let mut calls = 0u32;
        for turn in 0..self.spec.max_turns {
            let answer = delegate
                .turn(TurnRequest {
                    run_id: "",
                    messages: &messages,
                    attempt,
                    turn,
                    tools: &self.tool_specs,
                    host: None,
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

/// Builds the critic's stage for [`STAGES`](crate::pipeline::STAGES): when the delegation has
/// a critic that reviews.
///
/// # Errors
/// Never; the signature is every stage's.
pub(crate) fn stage(
    m: &mut crate::checks::materials::Materials<'_>,
) -> crate::error::Result<Option<Box<dyn Check>>> {
    let delegation = m.delegation;
    Ok(match (delegation.critic(), m.critic.take()) {
        (Some(spec), Some((delegate, toolbox))) => Some(Box::new(Critic::new(
            spec,
            delegation.task(),
            delegation.risk(),
            delegate,
            toolbox,
            delegation.redact().clone(),
        ))),
        _ => None,
    })
}

impl Check for Critic {
    fn name(&self) -> &'static str {
        "critic"
    }

    fn check<'a>(&'a self, subject: &'a mut Subject<'_>) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            if subject.findings.iter().any(|f| f.blocking)
                || !self.wants(&subject.result, &subject.diff)
            {
                return Ok(());
            }
            let span = tracing::info_span!("critic", critic.reviewer = self.reviewer.as_str());
            let mut usage = Usage::default();
            let review = self.review(subject, &mut usage).instrument(span).await;
            subject.usage.add(usage);
            subject.emit(RunEvent::CriticCompleted {
                outcome: review.record.outcome.as_str().to_owned(),
                reviewer: self.reviewer.clone(),
                findings: review.findings.len(),
                blocking: review.findings.iter().filter(|f| f.blocking).count(),
            });
            crate::telemetry::record_critic(review.record.outcome.as_str());
            subject.findings.extend(review.findings);
            subject.critic = Some(review.record);
            Ok(())
        })
    }

    fn is_opinion(&self) -> bool {
        true
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

/// Fills the review template for the attempt in `subject`.
fn prompt(criteria: &str, task: &str, subject: &Subject<'_>) -> String {
    let none = REVIEW.phrase("none", &[]);
    let or_none = |text: &'_ str| -> String {
        if text.trim().is_empty() {
            none.clone()
        } else {
            text.to_owned()
        }
    };
    let evidence = subject
        .evidence
        .iter()
        .map(|e| {
            REVIEW.phrase(
                "evidence",
                &[
                    ("{criterion}", &e.criterion),
                    ("{result}", e.result.as_str()),
                    ("{proof}", e.proof.as_deref().unwrap_or("")),
                ],
            )
        })
        .collect::<Vec<_>>()
        .join("\n");
    let (lines, cut) = diff_lines(&subject.diff);
    let mut diff = lines.join("\n");
    if cut > 0 {
        diff.push('\n');
        diff.push_str(&REVIEW.phrase("diff_cut", &[("{more}", &cut.to_string())]));
    }
    let prior = subject
        .earlier
        .iter()
        .flat_map(|v| {
            v.findings.iter().map(move |f| {
                REVIEW.phrase(
                    "prior",
                    &[
                        ("{attempt}", &(v.attempt + 1).to_string()),
                        ("{finding}", &f.to_string()),
                    ],
                )
            })
        })
        .collect::<Vec<_>>()
        .join("\n");
    REVIEW.render(&[
        ("task", task),
        ("criteria", &or_none(criteria)),
        ("response", &or_none(&subject.result.response)),
        ("evidence", &or_none(&evidence)),
        ("diff", &or_none(&diff)),
        ("prior", &or_none(&prior)),
    ])
}

/// A reviewer's answer, read.
#[derive(Debug)]
struct Parsed {
    outcome: CriticOutcome,
    reasoning: String,
    feedback: String,
    confidence: Option<f64>,
    findings: Vec<Finding>,
}

/// Reads exactly one JSON object (a single ```json fence around it is tolerated).
fn parse(text: &str) -> Result<Parsed, String> {
    let map = one_object(text)?;
    let outcome = match map.get("outcome").and_then(Value::as_str) {
        Some("PASS") => CriticOutcome::Pass,
        Some("SOFT_FAIL") => CriticOutcome::SoftFail,
        Some("HARD_FAIL") => CriticOutcome::HardFail,
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
    let listed: &[Value] = match map.get("findings") {
        None | Some(Value::Null) => &[],
        Some(Value::Array(items)) => items,
        Some(_) => return Err("the reviewer's `findings` must be a list".to_owned()),
    };
    let findings = listed
        .iter()
        .enumerate()
        .map(|(i, item)| critic_finding(&format!("the reviewer's `findings[{i}]`"), item))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Parsed {
        outcome,
        reasoning,
        feedback,
        confidence,
        findings,
    })
}

/// The one JSON object a reviewer's answer must be (a fenced block is unwrapped).
fn one_object(text: &str) -> Result<serde_json::Map<String, Value>, String> {
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
    match value {
        Value::Object(map) => Ok(map),
        _ => Err(format!(
            "the reviewer's answer is not a JSON object: {}",
            harness_builtins::shorten(body, 200)
        )),
    }
}

/// One of the reviewer's findings (`at` names it in errors): blocking for security, crash,
/// data_loss, wrong_algorithm and missing_ac; advisory (debt) for the rest.
fn critic_finding(at: &str, item: &Value) -> Result<Finding, String> {
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
    Ok(finding)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verdict::Verdict;

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
        assert_eq!(parsed.outcome, CriticOutcome::SoftFail);
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

    /// The review prompt as the reviewer reads it, every part filled.
    #[test]
    fn golden_review_prompt() {
        use harness_hooks::{Evidence, EvidenceResult};
        let events = crate::events::Emitter::detached();
        let earlier = [Verdict {
            attempt: 0,
            decision: crate::verdict::Decision::Retry,
            findings: vec![Finding::blocking(Source::Check, "tests", "exit 1")],
            evidence: Vec::new(),
            critic: None,
            logs: Vec::new(),
            stage_us: std::collections::BTreeMap::new(),
        }];
        let refs: Vec<&Verdict> = earlier.iter().collect();
        let result = DelegationResult {
            id: "d-0000000000000001".to_owned(),
            parent_id: None,
            attempt: 1,
            response: "Done: src/parser.rs parses the grammar; tests pass.".to_owned(),
            tool_calls: Vec::new(),
            tool_results: Vec::new(),
            changes: None,
            evidence: Vec::new(),
        };
        let mut subject = Subject::new(result, &refs, &events);
        subject.evidence.push(Evidence {
            proof: Some("exit 0 in 1.2 s".to_owned()),
            ..Evidence::new("tests", "check", EvidenceResult::Pass)
        });
        subject.diff = vec![
            "--- /dev/null\n+++ b/src/parser.rs\n@@ -0,0 +1 @@\n+pub fn parse() {}\n".to_owned(),
        ];
        let text = prompt(
            "- new tests cover the parser\n- no unsafe",
            "Write a parser for the grammar in GRAMMAR.md",
            &subject,
        );
        crate::golden::assert_golden("review-v2.prompt", &text);
    }
}
