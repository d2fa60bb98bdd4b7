//! The Ralph loop (DESIGN §4.4): run the delegate, judge what it claims, and on failure send the
//! SAME delegate the fixed retry prompt with the reasons, until it passes or the budget is spent.
//! Only the loop lives here: a [`Session`] holds what lasts across attempts, [`turn`] runs one
//! attempt, the [`Pipeline`](crate::Pipeline) judges it, [`RetryContext`] words the retry.

use std::sync::Arc;

use harness_builtins::{Engine, Workspaces};
use opentelemetry::context::FutureExt as _;
use tracing::Instrument;
use tracing::field::Empty;

use crate::cache::Cache;
use crate::conversation::Usage;
use crate::error::{Error, ErrorKind, Result};
use crate::events::RunEvent;
use crate::report::{AttemptRecord, Outcome, Report};
use crate::retry::{RETRY_TEMPLATE_VERSION, RetryContext};
use crate::session::{Session, Shared};
use crate::spec::Delegation;
use crate::telemetry::{self, attr};
use crate::turn;
use crate::verdict::{Decision, Finding, Source, Verdict};
use harness_hooks::ToolCall;

/// What happened during a delegation, for progress displays. Delivered in order, synchronously.
#[derive(Debug)]
pub enum Event<'a> {
    /// The delegation began; `span` is its `delegation.execute` span (the binary reads the trace
    /// id from it).
    Started {
        /// The delegation id.
        id: &'a str,
        /// The delegation's span.
        span: &'a tracing::Span,
    },
    /// An attempt began.
    AttemptStarted {
        /// Attempt index, from 0.
        attempt: u32,
    },
    /// A tool call finished.
    ToolCalled {
        /// Attempt index.
        attempt: u32,
        /// The call.
        call: &'a ToolCall,
        /// Whether it failed or was refused.
        is_error: bool,
    },
    /// The delegate gave its final answer for the attempt.
    Responded {
        /// Attempt index.
        attempt: u32,
        /// The answer, as the delegate gave it.
        response: &'a str,
        /// True when `delegation.post` hooks will see (and may redact) the answer before the
        /// caller gets it: a progress display should not echo it.
        redacted_later: bool,
    },
    /// The attempt was judged.
    Judged {
        /// Attempt index.
        attempt: u32,
        /// The verdict.
        verdict: &'a Verdict,
    },
    /// A run event (DESIGN §4.12) was recorded: numbered, timed, and kept in the report.
    Recorded(&'a crate::events::EventRecord),
    /// The retry prompt is being sent.
    Retrying {
        /// The attempt that will follow, from 0.
        next_attempt: u32,
        /// The prompt text.
        prompt: &'a str,
    },
}

/// Receives [`Event`]s; any `Fn(&Event)` is an observer.
pub trait Observer: Sync {
    /// Called once per event.
    fn on_event(&self, event: &Event<'_>);
}

impl<F: Fn(&Event<'_>) + Sync> Observer for F {
    fn on_event(&self, event: &Event<'_>) {
        self(event);
    }
}

/// Runs delegations. Holds what is shared between them: the Starlark globals, the HTTP
/// connection pool and compiled scripts.
#[derive(Debug, Clone)]
pub struct Runtime {
    shared: Arc<Shared>,
}

/// Returns a fresh delegation id, `d-` and 16 hex digits.
pub fn new_id() -> String {
    format!("d-{:016x}", fastrand::u64(..))
}

impl Runtime {
    /// Creates a runtime.
    ///
    /// # Errors
    /// [`ErrorKind::Config`] when the HTTP client cannot be built.
    pub fn new() -> Result<Self> {
        let http = harness_builtins::http_client_builder()
            .build()
            .map_err(|e| Error::config(format!("cannot build the HTTP client: {e}")))?;
        Ok(Runtime {
            shared: Arc::new(Shared {
                engine: Arc::new(Engine::new()),
                hook_engine: Arc::new(harness_hooks::engine()),
                http,
                hooks: Cache::new(),
                verifiers: Cache::new(),
                scripts: Cache::new(),
                workspaces: Workspaces::new(),
            }),
        })
    }

    /// Runs one delegation to its outcome. Never panics on bad input: every failure is in the
    /// report.
    pub async fn run(&self, delegation: &Delegation, observer: &dyn Observer) -> Report {
        self.run_until(delegation, observer, std::future::pending())
            .await
    }

    /// Runs one delegation as [`Runtime::run`] does, unless `cancel` resolves first: then the
    /// delegation is stopped where it is (its commands and their process groups are killed) and
    /// the report, with the attempts made so far, ends in an error of kind `cancelled` whose
    /// message is what `cancel` resolved to (e.g. "interrupted by SIGINT").
    pub async fn run_until(
        &self,
        delegation: &Delegation,
        observer: &dyn Observer,
        cancel: impl Future<Output = String>,
    ) -> Report {
        self.run_as(new_id(), delegation, observer, cancel).await
    }

    /// Runs one delegation as [`Runtime::run_until`] does, under the id `id` given to it when it
    /// was queued (`d-` and 16 hex digits), so that a delegation delivered twice is recorded
    /// once.
    pub async fn run_as(
        &self,
        id: String,
        delegation: &Delegation,
        observer: &dyn Observer,
        cancel: impl Future<Output = String>,
    ) -> Report {
        let kind = delegation.delegate.kind();
        let agent = delegation.delegate.agent_name();
        // The caller's context is current while the root span is created (so the span continues
        // its trace) and while the delegation runs (so a caller's trace passes on to model
        // servers and agent CLIs even when this process exports nothing).
        let parent = telemetry::parent_context(delegation.trace_parent.as_deref());
        let entered = parent.clone().map(opentelemetry::Context::attach);
        let span = tracing::info_span!(
            telemetry::SPAN_DELEGATION,
            otel.name = format!("{} {agent}", telemetry::SPAN_DELEGATION).as_str(),
            gen_ai.operation.name = telemetry::SPAN_DELEGATION,
            gen_ai.agent.name = agent,
            gen_ai.agent.id = id.as_str(),
            { attr::DELEGATION_ID } = id.as_str(),
            { attr::DELEGATION_KIND } = kind,
            { attr::RETRY_TEMPLATE_VERSION } = RETRY_TEMPLATE_VERSION,
            { attr::VERIFY_ATTEMPTS } = Empty,
            { attr::VERIFY_PASSED } = Empty,
            { attr::VERIFY_OUTCOME } = Empty,
            { attr::OUTCOME } = Empty,
            { attr::ERROR_TYPE } = Empty,
            otel.status_code = Empty,
        );
        drop(entered);
        let mut report = Report {
            request: Some(crate::session::request(&id, delegation, None)),
            id,
            outcome: Outcome::Skipped,
            delegate_kind: kind.to_owned(),
            model: None,
            attempts: Vec::new(),
            error: None,
            delivered: None,
            warnings: Vec::new(),
            events: Vec::new(),
            debt: Vec::new(),
            started_at: std::time::SystemTime::now(),
            duration: std::time::Duration::ZERO,
        };
        let clock = std::time::Instant::now();
        observer.on_event(&Event::Started {
            id: &report.id,
            span: &span,
        });
        let events = crate::events::Emitter::new(&report.id, observer);
        // Boxed here and at the other seams below: async state machines nest by value, so
        // without a box the delegation's future is tens of kilobytes, copied by every move (into
        // `instrument`, into `timeout`, into the spawned task) and held per running delegation.
        let work = Box::pin(self.execute(delegation, observer, &events, &mut report))
            .instrument(span.clone());
        let work = async {
            match parent {
                Some(parent) => work.with_context(parent).await,
                None => work.await,
            }
        };
        let ended = tokio::select! {
            ended = work => ended,
            why = cancel => Err(Error::new(
                ErrorKind::Cancelled,
                format!("{why}: the delegation was stopped and its commands killed"),
            )),
        };
        report.outcome = match ended {
            Ok(outcome) => outcome,
            Err(e) => {
                let outcome = if e.kind().is_failure() {
                    Outcome::Failed(e.kind())
                } else {
                    Outcome::Error(e.kind())
                };
                report.error = Some(e);
                outcome
            }
        };
        if report.outcome == Outcome::Skipped {
            report.warnings.push(
                "nothing verifies this delegation (no verify and no post_verify hook): the result was not checked"
                    .to_owned(),
            );
        }
        let evidenced = report
            .attempts
            .last()
            .and_then(|a| a.verdict.as_ref())
            .is_some_and(|v| !v.evidence.is_empty());
        let reviewed = report
            .attempts
            .last()
            .and_then(|a| a.verdict.as_ref())
            .is_some_and(|v| v.critic.is_some());
        if report.outcome == Outcome::Passed && !evidenced && reviewed {
            // The critic alone never passes a run: say so.
            report.warnings.push(
                "no checks ran; human review recommended: only the critic judged this work"
                    .to_owned(),
            );
        } else if report.outcome == Outcome::Passed && !evidenced {
            report.warnings.push(
                "verified without evidence: no check or criterion ran (add `checks:` or `criteria:`, or set `require_checks: true`)"
                    .to_owned(),
            );
        }
        span.in_scope(|| {
            events.emit(crate::events::RunEvent::DelegationCompleted {
                outcome: report.outcome.as_str().to_owned(),
                kind: report.outcome.kind().map(|k| k.as_str().to_owned()),
            });
        });
        report.events = events.take();
        report.redact(&delegation.redact);
        report.duration = clock.elapsed();
        telemetry::record_delegation(
            kind,
            report.outcome.as_str(),
            report.attempts.len() as u64,
            report.usage(),
        );
        // As i64: OTLP integers are signed, and a count is always one.
        span.record(
            attr::VERIFY_ATTEMPTS,
            i64::try_from(report.attempts.len()).unwrap_or(i64::MAX),
        );
        span.record(attr::VERIFY_PASSED, report.verified());
        span.record(attr::VERIFY_OUTCOME, report.outcome.verify_outcome());
        span.record(attr::OUTCOME, report.outcome.as_str());
        if let Some(error) = &report.error {
            span.record(attr::ERROR_TYPE, error.kind().as_str());
            span.record("otel.status_code", "ERROR");
        }
        report
    }

    async fn execute(
        &self,
        delegation: &Delegation,
        observer: &dyn Observer,
        events: &crate::events::Emitter<'_>,
        report: &mut Report,
    ) -> Result<Outcome> {
        events.emit(crate::events::RunEvent::DelegationStarted {
            delegate: delegation.delegate.kind().to_owned(),
            max_attempts: delegation.max_verify_retries.saturating_add(1),
            citations: delegation.citations_required,
            plan: delegation
                .plan
                .iter()
                .map(crate::checks::PlanStep::to_json)
                .collect(),
        });
        if delegation.require_checks
            && delegation.checks.is_empty()
            && delegation.criteria.is_empty()
        {
            return Err(Error::new(
                ErrorKind::NoGate,
                format!(
                    "{}: `require_checks` is set but the delegation has no `checks` and no `criteria`: nothing deterministic would judge it",
                    delegation.source.display()
                ),
            ));
        }
        let mut session = Box::pin(Session::open(&self.shared, delegation, &report.id)).await?;
        report.model = session.delegate.model().map(str::to_owned);
        report.warnings.append(&mut session.warnings);
        report.request = Some(crate::session::request(
            &report.id,
            &session.delegation,
            report.model.as_deref(),
        ));
        let work = Box::pin(attempts(&mut session, observer, events, report));
        let ended = match delegation.timeout {
            None => work.await,
            Some(limit) => tokio::time::timeout(limit, work).await.unwrap_or_else(|_| {
                Err(Error::new(
                    ErrorKind::Timeout,
                    format!(
                        "{}: the delegation ran longer than limits.timeout_s = {}s and was stopped",
                        delegation.source.display(),
                        limit.as_secs_f64()
                    ),
                ))
            }),
        };
        // However the attempts ended, a changed policy is the finding that matters.
        match ended {
            Err(e) if e.kind() != ErrorKind::ScopeViolation => {
                match session.guard.violation(session.toolbox.root()) {
                    Some(violation) => Err(violation),
                    None => Err(e),
                }
            }
            ended => ended,
        }
    }
}

/// The loop: attempt, judge, and retry with the reasons until a verdict passes or the budget is
/// spent.
async fn attempts(
    session: &mut Session,
    observer: &dyn Observer,
    events: &crate::events::Emitter<'_>,
    report: &mut Report,
) -> Result<Outcome> {
    let total = session.delegation.max_verify_retries.saturating_add(1);
    for attempt in 0..total {
        observer.on_event(&Event::AttemptStarted { attempt });
        events.set_attempt(attempt);
        let span = tracing::info_span!(
            telemetry::SPAN_ATTEMPT,
            attempt = i64::from(attempt),
            verify.passed = Empty,
            verify.reasons = Empty,
        );
        span.in_scope(|| events.emit(RunEvent::AttemptStarted));
        report.attempts.push(AttemptRecord {
            attempt,
            result: None,
            verdict: None,
            retry_prompt: None,
            usage: Usage::default(),
            duration: std::time::Duration::ZERO,
        });
        let clock = std::time::Instant::now();
        let (earlier, current) = report.attempts.split_at_mut(attempt as usize);
        let record = &mut current[0];
        let produced = Box::pin(turn::attempt(
            session,
            attempt,
            &report.id,
            observer,
            events,
            &mut record.usage,
        ))
        .instrument(span.clone())
        .await;
        record.duration = clock.elapsed();
        let result = produced?;
        // Judged only when the policy that judges it is as it was: a change fails the delegation.
        if let Some(violation) = session.guard.violation(session.toolbox.root()) {
            let verdict = Verdict::refused(
                attempt,
                Finding::blocking(Source::Scope, "policy", violation.message()),
            );
            span.in_scope(|| {
                events.emit(RunEvent::ScopeViolationDetected {
                    paths: session
                        .guard
                        .changes()
                        .iter()
                        .map(|c| c.path.display().to_string())
                        .collect(),
                    on_violation: "fail".to_owned(),
                });
                verification_completed(events, &verdict, &session.delegation.redact);
            });
            observer.on_event(&Event::Judged {
                attempt,
                verdict: &verdict,
            });
            record.result = Some(result);
            record.verdict = Some(verdict);
            return Err(violation);
        }
        observer.on_event(&Event::Responded {
            attempt,
            response: &result.response,
            redacted_later: session.redacts_later(),
        });
        span.in_scope(|| events.emit(RunEvent::VerificationStarted));
        let judged = session
            .pipeline
            .judge_attempt(result, events)
            .instrument(span.clone())
            .await;
        record.duration = clock.elapsed();
        let result = &*record.result.insert(judged.result);
        let mut verdict = match judged.verdict? {
            Some(verdict) => verdict,
            // Nothing deterministic is configured, but a critic is: it still reviews (and its
            // pass carries the warning that nothing else checked).
            None if session
                .critic
                .as_ref()
                .is_some_and(crate::critic::Critic::active) =>
            {
                Verdict {
                    attempt,
                    decision: Decision::Pass,
                    findings: Vec::new(),
                    evidence: Vec::new(),
                    critic: None,
                    logs: Vec::new(),
                }
            }
            None => {
                report.delivered = Box::pin(session.deliver(result)).await?;
                return Ok(Outcome::Skipped);
            }
        };
        if let Some(fatal) = judged.fatal {
            span.in_scope(|| {
                verification_completed(events, &verdict, &session.delegation.redact);
            });
            observer.on_event(&Event::Judged {
                attempt,
                verdict: &verdict,
            });
            record.verdict = Some(verdict);
            return Err(fatal);
        }
        // What per-tool verifiers refused during the attempt: said, never failing it alone.
        verdict.findings.append(&mut session.tool_findings);
        let last = attempt + 1 == total;
        let earlier_verdicts: Vec<&Verdict> =
            earlier.iter().filter_map(|a| a.verdict.as_ref()).collect();
        // Stage 5: the critic, only when every deterministic stage passed.
        if verdict.decision == Decision::Pass {
            let input = crate::critic::ReviewInput {
                task: &session.delegation.task,
                result,
                evidence: &verdict.evidence,
                diff: &judged.diff,
                earlier: &earlier_verdicts,
                risk: session.delegation.risk,
            };
            if let Some(critic) = session.critic.as_mut().filter(|c| c.wants(&input)) {
                let review = critic.review(&input).instrument(span.clone()).await;
                record.usage.add(review.usage);
                span.in_scope(|| {
                    events.emit(RunEvent::CriticCompleted {
                        outcome: review.record["outcome"]
                            .as_str()
                            .unwrap_or_default()
                            .to_owned(),
                        reviewer: critic.reviewer(),
                        findings: review.findings.len(),
                        blocking: review.findings.iter().filter(|f| f.blocking).count(),
                    });
                });
                telemetry::record_critic(review.record["outcome"].as_str().unwrap_or_default());
                verdict.critic = Some(review.record);
                verdict.findings.extend(review.findings);
                if review.outcome == crate::critic::Outcome::HardFail {
                    verdict.decision = Decision::Fail;
                    span.record("verify.passed", false);
                    span.in_scope(|| {
                        verification_completed(events, &verdict, &session.delegation.redact);
                        evaluation_event(&verdict, &verdict.reasons());
                    });
                    observer.on_event(&Event::Judged {
                        attempt,
                        verdict: &verdict,
                    });
                    record.verdict = Some(verdict);
                    return Err(Error::new(
                        ErrorKind::CriticRejected,
                        format!(
                            "the critic rejected attempt {} (HARD_FAIL): {}",
                            attempt + 1,
                            review.summary
                        ),
                    ));
                }
                if verdict.findings.iter().any(|f| f.blocking) {
                    verdict.decision = Decision::Retry;
                }
            }
        }
        // The budget is spent and only the critic still objects: debt or a failure, as the
        // critic's `on_exhausted` says.
        let critic_only = verdict.decision == Decision::Retry
            && verdict
                .findings
                .iter()
                .filter(|f| f.blocking)
                .all(|f| f.source == Source::Critic);
        if last && critic_only {
            let on_exhausted = session
                .critic
                .as_ref()
                .map_or(crate::spec::OnExhausted::Fail, |c| c.spec.on_exhausted);
            span.record("verify.passed", false);
            span.in_scope(|| {
                verification_completed(events, &verdict, &session.delegation.redact);
                evaluation_event(&verdict, &verdict.reasons());
            });
            if on_exhausted == crate::spec::OnExhausted::Debt {
                verdict.decision = Decision::Pass;
                observer.on_event(&Event::Judged {
                    attempt,
                    verdict: &verdict,
                });
                report.debt = critic_findings(&verdict);
                report.delivered = Box::pin(session.deliver(result)).await?;
                record.verdict = Some(verdict);
                return Ok(Outcome::PassedWithDebt);
            }
            verdict.decision = Decision::Fail;
            observer.on_event(&Event::Judged {
                attempt,
                verdict: &verdict,
            });
            let objections: Vec<String> = verdict.blocking().map(ToString::to_string).collect();
            record.verdict = Some(verdict);
            return Err(Error::new(
                ErrorKind::CriticRejected,
                format!(
                    "the critic still objected after all {total} attempts (critic.on_exhausted: fail):\n  {}",
                    objections.join("\n  ")
                ),
            ));
        }
        if verdict.decision == Decision::Retry && last {
            verdict.decision = Decision::Fail;
        }
        let tokens: u64 = earlier
            .iter()
            .map(|a| &a.usage)
            .chain(std::iter::once(&record.usage))
            .map(|u| u.input_tokens + u.output_tokens)
            .sum();
        let earlier = earlier_verdicts;
        // A spent budget or a loop that is not getting anywhere ends early, the reason in the
        // verdict.
        let ended = if verdict.passed() {
            None
        } else if let Some(max) = session.delegation.max_tokens.filter(|max| tokens > *max) {
            let message = format!(
                "the delegation used {tokens} tokens, more than limits.max_tokens = {max}; it was stopped after attempt {}",
                attempt + 1
            );
            verdict.decision = Decision::Fail;
            verdict.findings.push(Finding::blocking(
                Source::Budget,
                "max_tokens",
                message.clone(),
            ));
            Some(Error::new(ErrorKind::Budget, message))
        } else {
            stuck(&verdict, &earlier, session.delegation.stuck_after)
                .filter(|_| !last)
                .map(|message| {
                    verdict.decision = Decision::Fail;
                    Error::new(ErrorKind::Stuck, message)
                })
        };
        span.record("verify.passed", verdict.passed());
        span.in_scope(|| verification_completed(events, &verdict, &session.delegation.redact));
        observer.on_event(&Event::Judged {
            attempt,
            verdict: &verdict,
        });
        let passed = verdict.passed();
        let reasons = verdict.reasons();
        span.in_scope(|| evaluation_event(&verdict, &reasons));
        // Reasons quote what verifiers and hooks saw; secrets among them never go to the model.
        if let Some(ended) = ended {
            record.verdict = Some(verdict);
            return Err(ended);
        }
        let retry = (!passed && !last).then(|| {
            let context = RetryContext::assemble(&verdict, total, &earlier, &judged.diff);
            span.in_scope(|| {
                events.emit(RunEvent::RetryContextAssembled {
                    template_version: RETRY_TEMPLATE_VERSION.to_owned(),
                    reasons: context.reasons.len(),
                    repeated: context.repeated.is_some(),
                });
            });
            let mut prompt = context.render();
            session.delegation.redact.scrub_string(&mut prompt);
            prompt
        });
        if passed {
            report.delivered = Box::pin(session.deliver(result)).await?;
            // What the critic noted without blocking is the run's debt.
            report.debt = critic_findings(&verdict);
            record.verdict = Some(verdict);
            return Ok(Outcome::Passed);
        }
        record.verdict = Some(verdict);
        span.record("verify.reasons", reasons.join("\n").as_str());
        if let Some(prompt) = retry {
            span.in_scope(|| {
                tracing::info!(template.version = RETRY_TEMPLATE_VERSION, "retry prompt sent");
                tracing::debug!(template.version = RETRY_TEMPLATE_VERSION, prompt = %prompt, "retry prompt text");
            });
            observer.on_event(&Event::Retrying {
                next_attempt: attempt + 1,
                prompt: &prompt,
            });
            session
                .messages
                .push(crate::conversation::Message::User(prompt.clone()));
            record.retry_prompt = Some(prompt);
        }
    }
    let mut message = format!("verification failed on all {total} attempts");
    for record in &report.attempts {
        message.push_str(&format!("\nattempt {}:", record.attempt + 1));
        for reason in record.reasons() {
            message.push_str(&format!("\n  {reason}"));
        }
    }
    Err(Error::new(ErrorKind::VerificationFailed, message))
}

/// The critic's findings of `verdict`: the run's debt when it passes with them.
fn critic_findings(verdict: &Verdict) -> Vec<Finding> {
    verdict
        .findings
        .iter()
        .filter(|f| f.source == Source::Critic)
        .cloned()
        .collect()
}

/// Says why the loop is stuck when `verdict` failed on the same finding as the `stuck_after - 1`
/// attempts before it (never with `stuck_after` 0).
fn stuck(verdict: &Verdict, earlier: &[&Verdict], stuck_after: u32) -> Option<String> {
    let key = crate::retry::finding_key(crate::retry::primary(verdict)?);
    let needed = usize::try_from(stuck_after).ok()?.checked_sub(1)?;
    if stuck_after == 0 || earlier.len() < needed {
        return None;
    }
    let same = earlier
        .iter()
        .rev()
        .take(needed)
        .all(|v| crate::retry::primary(v).is_some_and(|p| crate::retry::finding_key(p) == key));
    same.then(|| {
        format!(
            "stuck: attempts {} to {} failed on the same finding (stuck_after = {stuck_after}); the loop stopped early:\n  {}",
            verdict.attempt + 2 - stuck_after,
            verdict.attempt + 1,
            crate::retry::primary(verdict).map(ToString::to_string).unwrap_or_default()
        )
    })
}

/// Records the `VerificationCompleted` event of `verdict`, its reasons scrubbed.
fn verification_completed(
    events: &crate::events::Emitter<'_>,
    verdict: &Verdict,
    redact: &crate::redact::Redactor,
) {
    let mut reasoning = verdict.reasons().join("\n");
    redact.scrub_string(&mut reasoning);
    events.emit(RunEvent::VerificationCompleted {
        outcome: verdict.decision.as_str().to_owned(),
        reasoning,
    });
}

/// Emits the verdict as a GenAI evaluation event on the attempt's span.
fn evaluation_event(verdict: &Verdict, reasons: &[String]) {
    tracing::info!(
        gen_ai.evaluation.name = "harness.verification",
        gen_ai.evaluation.score.label = if verdict.passed() { "pass" } else { "fail" },
        gen_ai.evaluation.explanation = reasons.join("\n").as_str(),
        "{}",
        telemetry::EVENT_EVALUATION
    );
}
