//! The Ralph loop (DESIGN §4.4): run the delegate, judge what it claims, and on failure send the
//! SAME delegate the fixed retry prompt with the reasons, until it passes or the budget is spent.
//! Only the loop lives here: a [`Session`] holds what lasts across attempts, [`turn`] runs one
//! attempt, the [`Pipeline`](crate::Pipeline) judges it, [`decision::decide`] says what happens
//! next, [`RetryContext`](crate::RetryContext) words the retry. A verdict is recorded in one
//! place ([`recorded`]) and every run ends in one epilogue ([`epilogue`]).

use std::time::Instant;

use opentelemetry::context::FutureExt as _;
use tracing::Instrument;
use tracing::field::Empty;

use crate::decision::{self, Budget, Decided, Judged, Next};
use crate::delegation::Delegation;
use crate::error::{Error, ErrorKind, Result};
use crate::events::{Emitter, Observer, RunEvent};
use crate::report::{AttemptRecord, Outcome, Report};
use crate::retry::RETRY_TEMPLATE_VERSION;
use crate::session::Session;
use crate::shared::Shared;
use crate::telemetry::{self, attr};
use crate::turn;
use crate::verdict::{Finding, Source, Verdict};

/// Runs one delegation under the id `id` to its report, unless `cancel` resolves first.
pub(crate) async fn run(
    shared: &std::sync::Arc<Shared>,
    id: String,
    delegation: &Delegation,
    observer: &dyn Observer,
    cancel: impl Future<Output = String>,
) -> Report {
    let kind = delegation.delegate().kind();
    let agent = delegation.delegate().agent_name();
    // The caller's context is current while the root span is created (so the span continues its
    // trace) and while the delegation runs (so a caller's trace passes on to model servers and
    // agent CLIs even when this process exports nothing).
    let parent = telemetry::parent_context(delegation.trace_parent());
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
    let request = delegation.request(&id, None);
    let mut report = Report::started(id, kind, Some(request));
    report.parent_id = delegation.parent_id().map(str::to_owned);
    report.trace_id = shared.trace_ids.and_then(|read| read(&span));
    let clock = Instant::now();
    let events = Emitter::new(&report.id, observer);
    // Boxed here and at the other seams below: async state machines nest by value, so without a
    // box the delegation's future is tens of kilobytes, copied by every move (into `instrument`,
    // into `timeout`, into the spawned task) and held per running delegation.
    let family = crate::tree::family::Family::new(delegation);
    let work = Box::pin(execute(shared, delegation, &events, &mut report, &family))
        .instrument(span.clone());
    let work = async {
        match parent {
            Some(parent) => work.with_context(parent).await,
            None => work.await,
        }
    };
    let ended = tokio::select! {
        ended = work => ended,
        why = cancel => {
            family.cancel(&format!("{why} (the parent run {} was cancelled)", report.id));
            Err(Error::new(
                ErrorKind::Cancelled,
                format!("{why}: the delegation was stopped and its commands killed"),
            ))
        }
    };
    // Children outlive nothing: whatever ended the run (an answer, a timeout, an error, a
    // cancel), those still running are stopped, and each is recorded before the parent is.
    if delegation.offers_delegate() {
        family.cancel(&format!("the parent run {} ended", report.id));
        family.settle().await;
        report.carried = family.take_carried();
    }
    epilogue(&mut report, ended, delegation, &events, &span);
    report.duration = clock.elapsed();
    report
}

/// Ends every run alike: the outcome, the warnings, the closing event, the redaction, the
/// metrics and the span's attributes.
fn epilogue(
    report: &mut Report,
    ended: Result<Outcome>,
    delegation: &Delegation,
    events: &Emitter<'_>,
    span: &tracing::Span,
) {
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
    let last = report.attempts.last().and_then(|a| a.verdict.as_ref());
    let evidenced = last.is_some_and(|v| !v.evidence.is_empty());
    let reviewed = last.is_some_and(|v| v.critic.is_some());
    let warning = match report.outcome {
        Outcome::Skipped => Some(
            "nothing verifies this delegation (no verify and no post_verify hook): the result was not checked",
        ),
        // The critic alone never passes a run: say so.
        Outcome::Passed if !evidenced && reviewed => {
            Some("no checks ran; human review recommended: only the critic judged this work")
        }
        Outcome::Passed if !evidenced => Some(
            "verified without evidence: no check or criterion ran (add `checks:` or `criteria:`, or set `require_checks: true`)",
        ),
        _ => None,
    };
    report.warnings.extend(warning.map(str::to_owned));
    span.in_scope(|| {
        events.emit(RunEvent::DelegationCompleted {
            outcome: report.outcome.as_str().to_owned(),
            kind: report.outcome.kind().map(|k| k.as_str().to_owned()),
        });
    });
    report.events = events.take();
    report.redact(delegation.redact());
    let kind = delegation.delegate().kind();
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
}

/// Opens the session and runs the attempts within the delegation's time budget.
async fn execute(
    shared: &std::sync::Arc<Shared>,
    delegation: &Delegation,
    events: &Emitter<'_>,
    report: &mut Report,
    family: &std::sync::Arc<crate::tree::family::Family>,
) -> Result<Outcome> {
    events.emit(RunEvent::DelegationStarted {
        delegate: delegation.delegate().kind().to_owned(),
        max_attempts: delegation.max_attempts(),
        citations: delegation.citations_required(),
        plan: delegation
            .plan()
            .iter()
            .map(crate::gates::plan::PlanStep::to_json)
            .collect(),
    });
    if delegation.require_checks()
        && delegation.checks().is_empty()
        && delegation.criteria().is_empty()
    {
        return Err(Error::new(
            ErrorKind::NoGate,
            format!(
                "{}: `require_checks` is set but the delegation has no `checks` and no `criteria`: nothing deterministic would judge it",
                delegation.source().display()
            ),
        ));
    }
    // Delegations that can change files observe a workspace one at a time (DESIGN §4.8); the
    // others run beside them. A child that can change files works in a copy of its own.
    let _writing = if delegation.changes_files() && delegation.observe() {
        let lock = shared.writer_lock(delegation.workdir());
        match lock.clone().try_lock_owned() {
            Ok(guard) => Some(guard),
            Err(_) => {
                report.warnings.push(format!(
                    "waited for another delegation changing {}: delegations that can change files observe a workspace one at a time, so each diff is its own",
                    delegation.workdir().display()
                ));
                Some(lock.lock_owned().await)
            }
        }
    } else {
        None
    };
    let mut session = Box::pin(Session::open(
        shared,
        delegation,
        &report.id,
        std::sync::Arc::clone(family),
    ))
    .await?;
    report.model = session.delegate.model().map(str::to_owned);
    report.warnings.append(&mut session.warnings);
    report.request = Some(
        session
            .delegation
            .request(&report.id, report.model.as_deref()),
    );
    let work = Box::pin(attempts(&mut session, events, report));
    let ended = match delegation.timeout() {
        None => work.await,
        Some(limit) => tokio::time::timeout(limit, work).await.unwrap_or_else(|_| {
            // Out of time before the delegate could act: the walk of its workspace is the cause.
            Err(session.pipeline.baseline_unfinished().unwrap_or_else(|| {
                Error::new(
                    ErrorKind::Timeout,
                    format!(
                        "{}: the delegation ran longer than limits.timeout_s = {}s and was stopped",
                        delegation.source().display(),
                        limit.as_secs_f64()
                    ),
                )
            }))
        }),
    };
    report.delegate_version = session.delegate.version().map(str::to_owned);
    // However the attempts ended, a changed policy is the finding that matters.
    match ended {
        Err(e)
            if !matches!(
                e.kind(),
                ErrorKind::ScopeViolation | ErrorKind::GateTampered
            ) =>
        {
            match session.guard.violation(session.toolbox.root()) {
                Some((_, violation)) => Err(violation),
                None => Err(e),
            }
        }
        ended => ended,
    }
}

/// The loop: attempt, judge, decide; retry with the reasons until the decision delivers an
/// outcome or ends the delegation.
async fn attempts(
    session: &mut Session,
    events: &Emitter<'_>,
    report: &mut Report,
) -> Result<Outcome> {
    let total = session.delegation.max_attempts();
    let rules = session.delegation.rules();
    let mut attempt = 0;
    loop {
        events.set_attempt(attempt);
        let span = tracing::info_span!(
            telemetry::SPAN_ATTEMPT,
            attempt = i64::from(attempt),
            verify.passed = Empty,
            verify.reasons = Empty,
            gen_ai.usage.input_tokens = Empty,
            gen_ai.usage.output_tokens = Empty,
            gen_ai.usage.cache_read.input_tokens = Empty,
            { telemetry::attr::RETRY_TEMPLATE_VERSION } = RETRY_TEMPLATE_VERSION,
            { telemetry::attr::RETRY_TEMPLATE_SHA256 } = crate::retry::retry_template_sha256(),
        );
        span.in_scope(|| events.emit(RunEvent::AttemptStarted));
        report.attempts.push(AttemptRecord::new(attempt));
        let clock = Instant::now();
        let judged = Box::pin(judge(session, attempt, events, report))
            .instrument(span.clone())
            .await;
        report.attempts[attempt as usize].duration = clock.elapsed();
        // What this attempt spent, its critic included (OTLP integers are signed).
        let usage = report.attempts[attempt as usize].usage;
        let signed = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
        span.record("gen_ai.usage.input_tokens", signed(usage.input_tokens));
        span.record("gen_ai.usage.output_tokens", signed(usage.output_tokens));
        if usage.cached_input_tokens > 0 {
            span.record(
                "gen_ai.usage.cache_read.input_tokens",
                signed(usage.cached_input_tokens),
            );
        }
        let budget = Budget {
            total,
            // Its children's tokens are in their own records, and in its budget.
            tokens: tokens(&report.attempts) + session.family.children_spent(),
            tree: session.family.tree_spent(),
        };
        let (earlier, current) = report.attempts.split_at_mut(attempt as usize);
        let earlier: Vec<&Verdict> = earlier.iter().filter_map(|a| a.verdict.as_ref()).collect();
        let Decided { verdict, next } = decision::decide(judged?, &earlier, budget, rules);
        let record = &mut current[0];
        record.verdict = verdict;
        span.in_scope(|| recorded(events, &span, record, &session.delegation));
        match next {
            Next::Deliver { outcome, debt } => {
                let result = record
                    .result
                    .as_ref()
                    .expect("a judged attempt has a result");
                let delivered = Box::pin(session.deliver(result)).await?;
                report.delivered = delivered;
                report.debt = debt;
                return Ok(outcome);
            }
            Next::End(error) => return Err(error),
            Next::Retry(context) => {
                let mut prompt = context.render();
                // Reasons quote what verifiers and hooks saw; secrets among them never go to
                // the model.
                session.delegation.redact().scrub_string(&mut prompt);
                span.in_scope(|| {
                    events.emit(RunEvent::RetryContextAssembled {
                        template_version: RETRY_TEMPLATE_VERSION.to_owned(),
                        reasons: context.reasons.len(),
                        repeated: context.repeated.is_some(),
                    });
                    tracing::info!(template.version = RETRY_TEMPLATE_VERSION, "retry prompt sent");
                    tracing::debug!(template.version = RETRY_TEMPLATE_VERSION, prompt = %prompt, "retry prompt text");
                });
                session
                    .messages
                    .push(crate::conversation::Message::User(prompt.clone()));
                report.attempts[attempt as usize].retry_prompt = Some(prompt);
            }
        }
        attempt += 1;
    }
}

/// Tokens the delegation spent in all its attempts so far.
fn tokens(attempts: &[AttemptRecord]) -> u64 {
    attempts
        .iter()
        .map(|a| a.usage.input_tokens + a.usage.output_tokens)
        .sum()
}

/// Runs attempt `attempt` and judges it: the delegate's turns, then — when the policy that
/// judges it is as it was — the pipeline. The attempt's Result and usage go into its record.
///
/// # Errors
/// The delegate's, a tool's or a broken judge's error: the delegation stops without a verdict.
async fn judge(
    session: &mut Session,
    attempt: u32,
    events: &Emitter<'_>,
    report: &mut Report,
) -> Result<Judged> {
    let (earlier, current) = report.attempts.split_at_mut(attempt as usize);
    let record = &mut current[0];
    let result = Box::pin(turn::attempt(session, attempt, events, &mut record.usage)).await?;
    // Judged only when the policy that judges it is as it was: a change fails the delegation.
    if let Some((paths, violation)) = session.guard.violation(session.toolbox.root()) {
        events.emit(RunEvent::GateTampered { paths });
        let finding = Finding::blocking(Source::Integrity, "policy", violation.message());
        record.result = Some(result);
        return Ok(Judged {
            verdict: Some(Verdict::refused(attempt, finding)),
            fatal: Some(violation),
            diff: Vec::new(),
            deterministic: true,
        });
    }
    events.progress(|| RunEvent::Responded {
        response: result.response.clone(),
        redacted_later: session.redacts_later(),
    });
    events.emit(RunEvent::VerificationStarted);
    let earlier: Vec<&Verdict> = earlier.iter().filter_map(|a| a.verdict.as_ref()).collect();
    let carried = std::mem::take(&mut session.tool_findings);
    let judgement = session
        .pipeline
        .judge_attempt(result, &earlier, carried, events)
        .await;
    record.usage.add(judgement.usage);
    // The critic's tokens count against the run's budget and its tree's, like its turns'.
    session
        .family
        .spend(judgement.usage.input_tokens + judgement.usage.output_tokens);
    record.result = Some(judgement.result);
    record.diff.clone_from(&judgement.diff);
    Ok(Judged {
        verdict: judgement.verdict?,
        fatal: judgement.fatal,
        diff: judgement.diff,
        deterministic: session.pipeline.is_deterministic(),
    })
}

/// Records the verdict `record` now holds — the one place a verdict is told: its
/// `VerificationCompleted` event (reasons scrubbed), the attempt span's attributes and the GenAI
/// evaluation event. An attempt nothing verified has nothing to tell.
fn recorded(
    events: &Emitter<'_>,
    span: &tracing::Span,
    record: &AttemptRecord,
    delegation: &Delegation,
) {
    let Some(verdict) = &record.verdict else {
        return;
    };
    // Scrubbed once, for the record and the trace alike: an exporter is as far as a journal.
    let mut reasoning = verdict.reasons().join("\n");
    delegation.redact().scrub_string(&mut reasoning);
    span.record("verify.passed", verdict.passed());
    if !verdict.passed() {
        span.record("verify.reasons", reasoning.as_str());
    }
    tracing::info!(
        gen_ai.evaluation.name = "harness.verification",
        gen_ai.evaluation.score.label = if verdict.passed() { "pass" } else { "fail" },
        gen_ai.evaluation.explanation = reasoning.as_str(),
        "{}",
        telemetry::EVENT_EVALUATION
    );
    events.emit(RunEvent::VerificationCompleted {
        outcome: verdict.decision.as_str().to_owned(),
        reasoning,
    });
}
