//! The decision step (DESIGN §4.5, seed 000 §6.2–6.3): the one place that turns an attempt's
//! verdict into what happens next — deliver an outcome, retry with a context, or end with an
//! error. It is a pure function of the verdict, the verdicts before it, what is left of the
//! budget and the delegation's rules: no I/O, no events, nothing the loop has to remember
//! besides what it returns. The table of its rows is the test at the bottom of this file.

use harness_hooks::CriticOutcome;

use crate::error::{Error, ErrorKind};
use crate::gates::critic::OnUnavailable;
use crate::report::Outcome;
use crate::retry::{self, RetryContext};
use crate::verdict::{Decision, Finding, Source, Verdict};

/// What a spent retry budget does when only the critic still objects (`critic.on_exhausted`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnExhausted {
    /// `passed_with_debt`: the run passes, the objections are listed as debt, a human reviews.
    Debt,
    /// `failed`, kind `critic_rejected`.
    Fail,
}

/// The delegation's rules the decision reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Rules {
    /// What a spent budget does when only the critic objects (`Fail` without a critic).
    pub(crate) on_exhausted: OnExhausted,
    /// What an unusable review does.
    pub(crate) on_unavailable: OnUnavailable,
    /// The same blocking finding on this many consecutive attempts ends the loop (0: never).
    pub(crate) stuck_after: u32,
    /// The delegation's token budget (`limits.max_tokens`).
    pub(crate) max_tokens: Option<u64>,
}

/// Where the delegation stands when its attempt is judged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Budget {
    /// Attempts allowed in all (retries + 1).
    pub(crate) total: u32,
    /// Tokens spent so far, this attempt included.
    pub(crate) tokens: u64,
    /// What the whole delegation tree spent so far and its `limits.max_tree_tokens`, when it
    /// has one.
    pub(crate) tree: Option<(u64, u64)>,
}

/// One attempt as the pipeline left it.
#[derive(Debug)]
pub(crate) struct Judged {
    /// The verdict; `None` when nothing verifies the delegation.
    pub(crate) verdict: Option<Verdict>,
    /// The error that ends the delegation whatever else the verdict says: a change to the
    /// policy, a scope violation under `on_violation: fail`.
    pub(crate) fatal: Option<Error>,
    /// Unified diffs of what the delegation changed so far, for the retry context.
    pub(crate) diff: Vec<String>,
    /// True when a deterministic stage (checks, criteria, a verifier, hooks, a scope) judged
    /// the attempt: what decides an unavailable critic's run.
    pub(crate) deterministic: bool,
}

/// What happens next.
#[derive(Debug, Clone)]
pub(crate) enum Next {
    /// The attempt's result goes to the caller (after `delegation.post` hooks) with this
    /// outcome; `debt` is what the critic noted without blocking, or still objected to.
    Deliver {
        /// `passed`, `passed_with_debt` or `skipped`.
        outcome: Outcome,
        /// The critic's findings the run passes with.
        debt: Vec<Finding>,
    },
    /// The same delegate tries again, told what failed.
    Retry(RetryContext),
    /// The delegation ends here, `failed` or `error` as the error's kind says.
    End(Error),
}

/// The decision on one attempt: the verdict with its final decision (and any finding the
/// decision itself adds, a spent budget), and what happens next.
#[derive(Debug)]
pub(crate) struct Decided {
    /// The verdict as recorded; `None` when nothing verified the attempt.
    pub(crate) verdict: Option<Verdict>,
    /// What the loop does now.
    pub(crate) next: Next,
}

/// Decides what happens after an attempt: `judged` is the pipeline's verdict on it, `earlier`
/// the verdicts of the attempts before it (oldest first), `budget` where the delegation stands,
/// `rules` its policy.
pub(crate) fn decide(
    judged: Judged,
    earlier: &[&Verdict],
    budget: Budget,
    rules: Rules,
) -> Decided {
    let Judged {
        verdict,
        fatal,
        diff,
        deterministic,
    } = judged;
    let Some(mut verdict) = verdict else {
        return Decided {
            verdict: None,
            next: Next::Deliver {
                outcome: Outcome::Skipped,
                debt: Vec::new(),
            },
        };
    };
    let last = verdict.attempt + 1 >= budget.total;
    let end = |verdict: &mut Verdict, error: Error| {
        verdict.decision = Decision::Fail;
        Next::End(error)
    };
    // A spent budget (`limits.KEY`): a blocking budget finding saying why, and the end.
    let spent = |verdict: &mut Verdict, key: &str, message: String| {
        verdict
            .findings
            .push(Finding::blocking(Source::Budget, key, message.clone()));
        end(verdict, Error::new(ErrorKind::Budget, message))
    };
    let next = if let Some(fatal) = fatal {
        end(&mut verdict, fatal)
    } else if let Some(review) = verdict
        .critic
        .as_ref()
        .filter(|c| c.outcome == CriticOutcome::HardFail)
    {
        let message = format!(
            "the critic rejected attempt {} (HARD_FAIL): {}",
            verdict.attempt + 1,
            review.summary()
        );
        end(&mut verdict, Error::new(ErrorKind::CriticRejected, message))
    } else if verdict.blocking().next().is_none() && unavailable(&verdict) {
        // An unusable review never leaves a run plain `passed` (DESIGN §4.9).
        let retry = rules.on_unavailable == OnUnavailable::Retry && !last;
        if retry {
            review_again(&mut verdict);
            Next::Retry(RetryContext::assemble(
                &verdict,
                budget.total,
                earlier,
                &diff,
            ))
        } else if deterministic {
            verdict.decision = Decision::Pass;
            Next::Deliver {
                outcome: Outcome::PassedWithDebt,
                debt: critic_findings(&verdict),
            }
        } else {
            let message = format!(
                "the critic was unavailable on attempt {} and nothing deterministic judged the work (no checks, criteria, verifier or hooks): {}; add `checks:` or `criteria:`, or set `critic.on_unavailable: retry`",
                verdict.attempt + 1,
                verdict
                    .critic
                    .as_ref()
                    .and_then(|c| c.error.as_deref())
                    .unwrap_or("no usable answer")
            );
            end(&mut verdict, Error::new(ErrorKind::NoGate, message))
        }
    } else if verdict.blocking().next().is_none() {
        passed(&mut verdict)
    } else if last && verdict.blocking().all(|f| f.source == Source::Critic) {
        critic_still_objects(&mut verdict, rules.on_exhausted, budget.total)
    } else if let Some(max) = rules.max_tokens.filter(|max| budget.tokens > *max) {
        let message = format!(
            "the delegation used {} tokens, more than limits.max_tokens = {max}; it was stopped after attempt {}",
            budget.tokens,
            verdict.attempt + 1
        );
        spent(&mut verdict, "max_tokens", message)
    } else if let Some((tree, max)) = budget.tree.filter(|(tree, max)| tree >= max) {
        let message = format!(
            "the delegation tree spent {tree} tokens, limits.max_tree_tokens = {max}; this run was stopped after attempt {}",
            verdict.attempt + 1
        );
        spent(&mut verdict, "max_tree_tokens", message)
    } else if let Some(message) = stuck(&verdict, earlier, rules.stuck_after).filter(|_| !last) {
        end(&mut verdict, Error::new(ErrorKind::Stuck, message))
    } else if last {
        let message = exhausted(earlier, &verdict, budget.total);
        end(
            &mut verdict,
            Error::new(ErrorKind::VerificationFailed, message),
        )
    } else {
        verdict.decision = Decision::Retry;
        Next::Retry(RetryContext::assemble(
            &verdict,
            budget.total,
            earlier,
            &diff,
        ))
    };
    Decided {
        verdict: Some(verdict),
        next,
    }
}

/// A pass: its debt is the critic's findings and, under `gaming: advisory`, the gaming stage's —
/// code that games the tests is no failure, but never a plain pass.
fn passed(verdict: &mut Verdict) -> Next {
    verdict.decision = Decision::Pass;
    let mut debt = critic_findings(verdict);
    let gaming: Vec<Finding> = verdict
        .findings
        .iter()
        .filter(|f| f.source == Source::Gaming)
        .cloned()
        .collect();
    let outcome = if gaming.is_empty() {
        Outcome::Passed
    } else {
        Outcome::PassedWithDebt
    };
    debt.extend(gaming);
    Next::Deliver { outcome, debt }
}

/// The budget is spent and only the critic still objects: debt for a human, or a failure
/// (`critic.on_exhausted: fail`).
fn critic_still_objects(verdict: &mut Verdict, on_exhausted: OnExhausted, total: u32) -> Next {
    if on_exhausted == OnExhausted::Debt {
        verdict.decision = Decision::Pass;
        return Next::Deliver {
            outcome: Outcome::PassedWithDebt,
            debt: critic_findings(verdict),
        };
    }
    let objections: Vec<String> = verdict.blocking().map(ToString::to_string).collect();
    verdict.decision = Decision::Fail;
    Next::End(Error::new(
        ErrorKind::CriticRejected,
        format!(
            "the critic still objected after all {total} attempts (critic.on_exhausted: fail):\n  {}",
            objections.join("\n  ")
        ),
    ))
}

/// `critic.on_unavailable: retry`: the attempt is sent back to be reviewed again, with a
/// blocking finding saying why.
fn review_again(verdict: &mut Verdict) {
    let why = verdict
        .critic
        .as_ref()
        .and_then(|c| c.error.clone())
        .unwrap_or_default();
    let mut finding = Finding::blocking(
        Source::Critic,
        "unavailable",
        format!(
            "the reviewer was unavailable ({why}); the work is sent back to be reviewed again (critic.on_unavailable: retry)"
        ),
    );
    finding.severity = crate::verdict::Severity::Other;
    verdict.findings.push(finding);
    verdict.decision = Decision::Retry;
}

/// Whether the critic reviewed `verdict`'s attempt and its review could not be used.
fn unavailable(verdict: &Verdict) -> bool {
    verdict.critic.as_ref().is_some_and(|c| !c.available)
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
    let needed = usize::try_from(stuck_after).ok()?.checked_sub(1)?;
    let run = retry::same_failure_run(verdict, earlier)?;
    (run >= needed).then(|| {
        format!(
            "stuck: attempts {} to {} failed on the same finding (stuck_after = {stuck_after}); the loop stopped early:\n  {}",
            verdict.attempt + 2 - stuck_after,
            verdict.attempt + 1,
            retry::primary(verdict)
                .map(ToString::to_string)
                .unwrap_or_default()
        )
    })
}

/// The message of a delegation whose every attempt failed: each attempt's reasons.
fn exhausted(earlier: &[&Verdict], last: &Verdict, total: u32) -> String {
    let mut message = if total == 1 {
        "verification failed on its only attempt".to_owned()
    } else {
        format!("verification failed on all {total} attempts")
    };
    for verdict in earlier.iter().copied().chain(std::iter::once(last)) {
        message.push_str(&format!("\nattempt {}:", verdict.attempt + 1));
        for reason in verdict.reasons() {
            message.push_str(&format!("\n  {reason}"));
        }
    }
    message
}

#[cfg(test)]
mod tests {
    use super::*;
    use harness_hooks::CriticReview;

    fn verdict(attempt: u32, findings: Vec<Finding>, critic: Option<CriticOutcome>) -> Verdict {
        Verdict {
            attempt,
            decision: Decision::Pass,
            findings,
            evidence: Vec::new(),
            critic: critic.map(|outcome| CriticReview {
                reviewer: "reviewer-model".to_owned(),
                prompt_version: "review-v1".to_owned(),
                prompt_sha256: String::new(),
                outcome,
                available: true,
                reasoning: Some("the parser drops input".to_owned()),
                feedback: Some("keep it".to_owned()),
                confidence: None,
                error: None,
                extra: serde_json::Map::new(),
            }),
            logs: Vec::new(),
            stage_us: std::collections::BTreeMap::new(),
        }
    }

    fn check_failed() -> Finding {
        Finding::blocking(Source::Check, "tests", "`cargo test` failed: exit 101")
    }

    fn critic_blocks() -> Finding {
        Finding::blocking(Source::Critic, "missing_ac", "no tests for the parser")
    }

    fn critic_notes() -> Finding {
        Finding::advisory(Source::Critic, "style", "long function")
    }

    /// What the table expects of a row.
    #[derive(Debug, PartialEq)]
    enum Expect {
        Deliver(Outcome, usize),
        Retry,
        End(ErrorKind),
    }

    struct Row {
        name: &'static str,
        attempt: u32,
        total: u32,
        findings: Vec<Finding>,
        critic: Option<CriticOutcome>,
        fatal: Option<ErrorKind>,
        earlier: Vec<Verdict>,
        tokens: u64,
        tree: Option<(u64, u64)>,
        rules: Rules,
        expect: Expect,
        decision: Option<Decision>,
        /// The critic reviewed, and its answer could not be used.
        unavailable: bool,
        /// A deterministic stage judged the attempt.
        deterministic: bool,
    }

    const RULES: Rules = Rules {
        on_exhausted: OnExhausted::Debt,
        on_unavailable: OnUnavailable::Debt,
        stuck_after: 3,
        max_tokens: None,
    };

    fn row(name: &'static str, findings: Vec<Finding>, expect: Expect) -> Row {
        let decision = match &expect {
            Expect::Deliver(..) => Some(Decision::Pass),
            Expect::Retry => Some(Decision::Retry),
            Expect::End(_) => Some(Decision::Fail),
        };
        Row {
            name,
            attempt: 0,
            total: 3,
            findings,
            critic: None,
            fatal: None,
            earlier: Vec::new(),
            tokens: 0,
            tree: None,
            rules: RULES,
            expect,
            decision,
            unavailable: false,
            deterministic: true,
        }
    }

    fn critic_unavailable() -> Finding {
        Finding::advisory(Source::Critic, "unavailable", "critic unavailable: no JSON")
    }

    #[test]
    fn every_row_of_the_decision_table() {
        let rows = vec![
            // DESIGN §4.9: an unusable review never leaves a run plain `passed`: with
            // deterministic stages green → passed_with_debt, naming the critic…
            Row {
                critic: Some(CriticOutcome::SoftFail),
                unavailable: true,
                ..row(
                    "critic unavailable, checks passed",
                    vec![critic_unavailable()],
                    Expect::Deliver(Outcome::PassedWithDebt, 1),
                )
            },
            // …with nothing deterministic → failed, no_gate…
            Row {
                critic: Some(CriticOutcome::SoftFail),
                unavailable: true,
                deterministic: false,
                ..row(
                    "critic unavailable, nothing deterministic",
                    vec![critic_unavailable()],
                    Expect::End(ErrorKind::NoGate),
                )
            },
            // …and with on_unavailable: retry, the builder is re-prompted while it can be.
            Row {
                critic: Some(CriticOutcome::SoftFail),
                unavailable: true,
                rules: Rules {
                    on_unavailable: OnUnavailable::Retry,
                    ..RULES
                },
                ..row(
                    "critic unavailable, on_unavailable retry",
                    vec![critic_unavailable()],
                    Expect::Retry,
                )
            },
            Row {
                attempt: 2,
                critic: Some(CriticOutcome::SoftFail),
                unavailable: true,
                rules: Rules {
                    on_unavailable: OnUnavailable::Retry,
                    ..RULES
                },
                ..row(
                    "critic unavailable, on_unavailable retry, no retries left",
                    vec![critic_unavailable()],
                    Expect::Deliver(Outcome::PassedWithDebt, 1),
                )
            },
            // DESIGN §4.5 / seed 000 §6.3: scope violation → failed, no retry.
            Row {
                fatal: Some(ErrorKind::ScopeViolation),
                ..row(
                    "scope violation",
                    vec![Finding::blocking(Source::Scope, "Cargo.lock", "denied")],
                    Expect::End(ErrorKind::ScopeViolation),
                )
            },
            // Required check failed, retries remain → retry.
            row(
                "required check failed, retries left",
                vec![check_failed()],
                Expect::Retry,
            ),
            // Required check failed, none remain → failed, verification_failed.
            Row {
                attempt: 2,
                earlier: vec![
                    verdict(0, vec![check_failed()], None),
                    verdict(1, vec![critic_blocks()], None),
                ],
                ..row(
                    "required check failed, no retries left",
                    vec![check_failed()],
                    Expect::End(ErrorKind::VerificationFailed),
                )
            },
            // An advisory check failing never holds an attempt back.
            row(
                "advisory check failed",
                vec![Finding::advisory(Source::Check, "fmt", "exit 1")],
                Expect::Deliver(Outcome::Passed, 0),
            ),
            // `gaming: advisory` → every check green, but the run passes with the gaming
            // findings as debt and waits for a human.
            row(
                "advisory gaming finding",
                vec![Finding::advisory(
                    Source::Gaming,
                    "special-cased-input",
                    "calc.py:2: special-cases the inputs of tests/test_calc.py:4 (40, 2)",
                )],
                Expect::Deliver(Outcome::PassedWithDebt, 1),
            ),
            // `gaming: blocking` → retry with the finding.
            row(
                "blocking gaming finding",
                vec![Finding::blocking(
                    Source::Gaming,
                    "ends-the-process",
                    "calc.py:3: ends the process at once: `os._exit(0)`",
                )],
                Expect::Retry,
            ),
            // Critic HARD_FAIL → failed, critic_rejected, whatever the budget.
            Row {
                critic: Some(CriticOutcome::HardFail),
                ..row(
                    "critic HARD_FAIL",
                    vec![critic_blocks()],
                    Expect::End(ErrorKind::CriticRejected),
                )
            },
            // Critic SOFT_FAIL with retries → retry with its feedback.
            Row {
                critic: Some(CriticOutcome::SoftFail),
                ..row(
                    "critic SOFT_FAIL, retries left",
                    vec![critic_blocks()],
                    Expect::Retry,
                )
            },
            // Critic SOFT_FAIL without retries, on_exhausted: debt → passed_with_debt.
            Row {
                attempt: 2,
                critic: Some(CriticOutcome::SoftFail),
                ..row(
                    "critic SOFT_FAIL, no retries, debt",
                    vec![critic_blocks(), critic_notes()],
                    Expect::Deliver(Outcome::PassedWithDebt, 2),
                )
            },
            // The same with on_exhausted: fail → failed, critic_rejected.
            Row {
                attempt: 2,
                critic: Some(CriticOutcome::SoftFail),
                rules: Rules {
                    on_exhausted: OnExhausted::Fail,
                    ..RULES
                },
                ..row(
                    "critic SOFT_FAIL, no retries, fail",
                    vec![critic_blocks()],
                    Expect::End(ErrorKind::CriticRejected),
                )
            },
            // A check still failing at the end is no debt, whatever the critic says.
            Row {
                attempt: 2,
                ..row(
                    "check and critic failing at exhaustion",
                    vec![check_failed(), critic_blocks()],
                    Expect::End(ErrorKind::VerificationFailed),
                )
            },
            // PASS with checks green → passed; the critic's notes are debt.
            Row {
                critic: Some(CriticOutcome::Pass),
                ..row(
                    "critic PASS, checks green",
                    vec![critic_notes()],
                    Expect::Deliver(Outcome::Passed, 1),
                )
            },
            // No critic, every stage passed → passed.
            row("all green", Vec::new(), Expect::Deliver(Outcome::Passed, 0)),
            // The same blocking finding on stuck_after attempts → stuck, before the budget ends.
            Row {
                attempt: 2,
                total: 5,
                earlier: vec![
                    verdict(0, vec![check_failed()], None),
                    verdict(1, vec![check_failed()], None),
                ],
                ..row("stuck", vec![check_failed()], Expect::End(ErrorKind::Stuck))
            },
            // stuck_after: 0 never ends early.
            Row {
                attempt: 2,
                total: 5,
                earlier: vec![
                    verdict(0, vec![check_failed()], None),
                    verdict(1, vec![check_failed()], None),
                ],
                rules: Rules {
                    stuck_after: 0,
                    ..RULES
                },
                ..row("stuck_after 0", vec![check_failed()], Expect::Retry)
            },
            // A different failure before is progress, not stuck.
            Row {
                attempt: 2,
                total: 5,
                earlier: vec![
                    verdict(0, vec![critic_blocks()], None),
                    verdict(1, vec![check_failed()], None),
                ],
                ..row("not stuck", vec![check_failed()], Expect::Retry)
            },
            // The token budget spent on a failing attempt → error, kind budget.
            Row {
                tokens: 1_001,
                rules: Rules {
                    max_tokens: Some(1_000),
                    ..RULES
                },
                ..row(
                    "budget",
                    vec![check_failed()],
                    Expect::End(ErrorKind::Budget),
                )
            },
            // A passing attempt is delivered even past the token budget.
            Row {
                tokens: 1_001,
                rules: Rules {
                    max_tokens: Some(1_000),
                    ..RULES
                },
                ..row(
                    "budget, but passed",
                    Vec::new(),
                    Expect::Deliver(Outcome::Passed, 0),
                )
            },
            // The tree's tokens spent (by this run or any other member) → error, kind budget.
            Row {
                tree: Some((5_000, 5_000)),
                ..row(
                    "tree budget",
                    vec![check_failed()],
                    Expect::End(ErrorKind::Budget),
                )
            },
            // Some of the tree's tokens left: retried.
            Row {
                tree: Some((4_999, 5_000)),
                ..row("tree budget left", vec![check_failed()], Expect::Retry)
            },
            // A passing attempt is delivered even when the tree's tokens are spent.
            Row {
                tree: Some((6_000, 5_000)),
                ..row(
                    "tree budget, but passed",
                    Vec::new(),
                    Expect::Deliver(Outcome::Passed, 0),
                )
            },
            // With no retries at all the first failure is final.
            Row {
                total: 1,
                ..row(
                    "max_verify_retries 0",
                    vec![check_failed()],
                    Expect::End(ErrorKind::VerificationFailed),
                )
            },
        ];
        for row in rows {
            let earlier: Vec<&Verdict> = row.earlier.iter().collect();
            let mut judged_verdict = verdict(row.attempt, row.findings, row.critic);
            if row.unavailable {
                let review = judged_verdict.critic.as_mut().expect("a review");
                review.available = false;
                review.error = Some("no JSON".to_owned());
            }
            let judged = Judged {
                verdict: Some(judged_verdict),
                fatal: row.fatal.map(|k| Error::new(k, "fatal")),
                diff: Vec::new(),
                deterministic: row.deterministic,
            };
            let budget = Budget {
                total: row.total,
                tokens: row.tokens,
                tree: row.tree,
            };
            let decided = decide(judged, &earlier, budget, row.rules);
            let got = match &decided.next {
                Next::Deliver { outcome, debt } => Expect::Deliver(*outcome, debt.len()),
                Next::Retry(_) => Expect::Retry,
                Next::End(e) => Expect::End(e.kind()),
            };
            assert_eq!(got, row.expect, "{}", row.name);
            assert_eq!(
                decided.verdict.as_ref().map(|v| v.decision),
                row.decision,
                "{}",
                row.name
            );
        }
    }

    #[test]
    fn nothing_to_verify_is_skipped() {
        let judged = Judged {
            verdict: None,
            fatal: None,
            diff: Vec::new(),
            deterministic: true,
        };
        let budget = Budget {
            total: 3,
            tokens: 0,
            tree: None,
        };
        let decided = decide(judged, &[], budget, RULES);
        assert!(decided.verdict.is_none());
        assert!(matches!(
            decided.next,
            Next::Deliver { outcome: Outcome::Skipped, ref debt } if debt.is_empty()
        ));
    }

    #[test]
    fn the_messages_name_what_ended_the_loop() {
        let budget = Budget {
            total: 3,
            tokens: 0,
            tree: None,
        };
        let end = |judged: Judged, earlier: &[&Verdict], rules: Rules| match decide(
            judged, earlier, budget, rules,
        )
        .next
        {
            Next::End(e) => e.message().to_owned(),
            other => panic!("expected an end, got {other:?}"),
        };
        let first = verdict(0, vec![check_failed()], None);
        let second = verdict(1, vec![check_failed()], None);
        let last = Judged {
            verdict: Some(verdict(2, vec![check_failed()], None)),
            fatal: None,
            diff: Vec::new(),
            deterministic: true,
        };
        let message = end(last, &[&first, &second], RULES);
        assert!(
            message.starts_with("verification failed on all 3 attempts\nattempt 1:\n  check tests: `cargo test` failed: exit 101\nattempt 2:"),
            "{message}"
        );
        let hard = Judged {
            verdict: Some(verdict(
                0,
                vec![critic_blocks()],
                Some(CriticOutcome::HardFail),
            )),
            fatal: None,
            diff: Vec::new(),
            deterministic: true,
        };
        assert_eq!(
            end(hard, &[], RULES),
            "the critic rejected attempt 1 (HARD_FAIL): the parser drops input keep it"
        );
        let stuck = Judged {
            verdict: Some(verdict(1, vec![check_failed()], None)),
            fatal: None,
            diff: Vec::new(),
            deterministic: true,
        };
        let two = Rules {
            stuck_after: 2,
            ..RULES
        };
        assert!(
            end(stuck, &[&first], two)
                .starts_with("stuck: attempts 1 to 2 failed on the same finding (stuck_after = 2)"),
        );
    }
}
