//! The retry prompt (DESIGN §4.4): a [`RetryContext`] assembled mechanically from the verdicts
//! and the scope diff, filled into one fixed, versioned template. No model writes it.
//!
//! What it holds, in order: attempt n of m; the primary failure; every blocking finding, the
//! deterministic stages first (scope, checks, criteria), then the specific ones (verifier,
//! hooks), then the critic; the advisory findings, labelled "Advisory"; a note when the same
//! finding failed earlier attempts; the primary reasons of at most three earlier attempts; and
//! the changes so far as a unified diff of at most 500 lines. Check findings already carry the
//! exit code and the last 50 lines of output.

use std::sync::LazyLock;

use crate::prompt::{MAX_DIFF_LINES, Prompt, diff_lines};
use crate::verdict::{Finding, Source, Verdict};

/// The template's version; bump it whenever the text of [`RETRY_TEMPLATE`] or
/// [`RETRY_PHRASES`] changes.
pub const RETRY_TEMPLATE_VERSION: &str = "retry-v3";

/// The template, every heading included. `{attempt}`, `{total}` and `{primary}` are filled in
/// mechanically; a section `{?name}…{/name}` is sent only when its `{name}` has something to
/// say (lines quoted `  > `, or the diff indented four spaces).
pub const RETRY_TEMPLATE: &str = "\
VERIFICATION FAILED (attempt {attempt} of {total}).

Your previous answer was checked against the real state of the workspace and it does not hold.
Primary failure:
{primary}
{?also}
Also blocking:
{also}{/also}{?repeated}
Note: {repeated}.
{/repeated}{?feedback}
The reviewer's feedback:
{feedback}{/feedback}{?advisory}
Not blocking (fix them if it is cheap):
{advisory}{/advisory}{?prior}
Earlier attempts failed on:
{prior}{/prior}{?diff}
Your changes to the workspace so far:
{diff}{/diff}
Do not claim success again. Look at the actual state of the world with your tools (read the \
files, list the directories, run the commands), do whatever work is still missing, and only then \
give your final answer. Your answer will be verified again.";

/// The phrases the context's lines are made of, each a template of its own: a repeated failure,
/// an advisory finding, an earlier attempt, a cut diff. Hashed with [`RETRY_TEMPLATE`].
pub const RETRY_PHRASES: [(&str, &str); 4] = [
    (
        "repeated",
        "attempts {attempts} failed the same {what}: what you are doing is not fixing it; try a different approach",
    ),
    ("advisory", "Advisory: {label}: {message}"),
    ("prior", "attempt {attempt}: {reason}"),
    (
        "diff_cut",
        "[diff cut: {more} more lines; at most {max} are shown]",
    ),
];

/// Earlier attempts whose primary reasons are quoted, at most.
pub const MAX_PRIOR_ATTEMPTS: usize = 3;

/// The retry prompt, read.
static RETRY: LazyLock<Prompt> = LazyLock::new(|| Prompt::new(RETRY_TEMPLATE, &RETRY_PHRASES));

/// Returns the SHA-256 of every word of the retry prompt the code does not take from a verdict:
/// [`RETRY_TEMPLATE`], then each of [`RETRY_PHRASES`] as a line `\nNAME: PHRASE`. Recorded
/// with every run and on every span.
pub fn retry_template_sha256() -> &'static str {
    RETRY.sha256()
}

/// Where a finding stands in the retry prompt: deterministic stages first, then the specific
/// judges, then opinions.
fn rank(source: Source) -> u8 {
    match source {
        Source::Integrity | Source::Scope => 0,
        Source::Check | Source::Holdout => 1,
        Source::Criterion => 2,
        Source::Budget | Source::Plan | Source::Citation | Source::Claim | Source::Gaming => 3,
        Source::Verify => 4,
        Source::Hook => 5,
        Source::Critic => 6,
    }
}

/// Whether two findings are "the same" across attempts: the stage and the name, and for unnamed
/// ones (the inline verifier) the message.
fn same_finding(a: &Finding, b: &Finding) -> bool {
    a.source == b.source && a.name == b.name && (!a.name.is_empty() || a.message == b.message)
}

/// How many of the attempts just before `verdict`'s (the latest first, without a gap) failed on
/// the same primary finding as it; `None` when it has no blocking finding.
pub(crate) fn same_failure_run(verdict: &Verdict, earlier: &[&Verdict]) -> Option<usize> {
    let first = primary(verdict)?;
    Some(
        earlier
            .iter()
            .rev()
            .take_while(|v| primary(v).is_some_and(|p| same_finding(p, first)))
            .count(),
    )
}

/// The finding an attempt failed on first: the highest-ranked blocking one.
pub(crate) fn primary(verdict: &Verdict) -> Option<&Finding> {
    verdict.blocking().min_by_key(|f| rank(f.source))
}

/// What the retry prompt tells the delegate, taken from the verdicts and the diff only.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryContext {
    /// The attempt that failed, from 0.
    pub failed_attempt: u32,
    /// Attempts in all (retries + 1).
    pub total_attempts: u32,
    /// The blocking findings, deterministic stages first, as reason lines; the first is the
    /// primary failure.
    pub reasons: Vec<String>,
    /// The advisory findings, as reason lines.
    pub advisory: Vec<String>,
    /// "attempts 1 and 2 failed the same check: tests", when the primary failure repeats.
    pub repeated: Option<String>,
    /// `attempt N: primary reason` of at most [`MAX_PRIOR_ATTEMPTS`] earlier attempts.
    pub prior: Vec<String>,
    /// The changes so far as unified diff lines, at most [`MAX_DIFF_LINES`], with a note when
    /// cut.
    pub diff: Vec<String>,
    /// What the critic told the delegate to do, when the critic sent the attempt back.
    pub critic_feedback: Option<String>,
}

impl RetryContext {
    /// Assembles the context for the attempt `verdict` judged, out of `total` attempts;
    /// `earlier` are the verdicts of the attempts before it, oldest first; `diff` the unified
    /// diffs of what the delegation changed so far (empty without a scope).
    pub fn assemble(verdict: &Verdict, total: u32, earlier: &[&Verdict], diff: &[String]) -> Self {
        let mut blocking: Vec<&Finding> = verdict.blocking().collect();
        // Stable: within each rank the pipeline's order stands.
        blocking.sort_by_key(|f| rank(f.source));
        let advisory = verdict
            .findings
            .iter()
            .filter(|f| !f.blocking)
            .map(|f| {
                RETRY.phrase(
                    "advisory",
                    &[("{label}", &f.label()), ("{message}", &f.message)],
                )
            })
            .collect();
        let repeated = blocking.first().and_then(|first| {
            // The run of consecutive earlier attempts that failed on the same finding.
            let run = same_failure_run(verdict, earlier).filter(|&run| run > 0)?;
            let numbers: Vec<String> = earlier[earlier.len() - run..]
                .iter()
                .map(|v| v.attempt)
                .chain([verdict.attempt])
                .map(|attempt| (attempt + 1).to_string())
                .collect();
            let (last, rest) = numbers.split_last().expect("at least two");
            let what = if first.name.is_empty() {
                format!("{}: {}", first.source.as_str(), first.message)
            } else {
                format!("{} {}", stage_noun(first.source), first.name)
            };
            let attempts = format!("{} and {last}", rest.join(", "));
            Some(RETRY.phrase("repeated", &[("{attempts}", &attempts), ("{what}", &what)]))
        });
        let prior = earlier
            .iter()
            .rev()
            .take(MAX_PRIOR_ATTEMPTS)
            .rev()
            .filter_map(|v| {
                primary(v).map(|p| {
                    RETRY.phrase(
                        "prior",
                        &[
                            ("{attempt}", &(v.attempt + 1).to_string()),
                            ("{reason}", &first_line(p)),
                        ],
                    )
                })
            })
            .collect();
        let (lines, cut) = diff_lines(diff);
        let mut diff: Vec<String> = lines.into_iter().map(str::to_owned).collect();
        if cut > 0 {
            diff.push(RETRY.phrase(
                "diff_cut",
                &[
                    ("{more}", &cut.to_string()),
                    ("{max}", &MAX_DIFF_LINES.to_string()),
                ],
            ));
        }
        let critic_feedback = verdict
            .critic
            .as_ref()
            .filter(|_| blocking.iter().any(|f| f.source == Source::Critic))
            .and_then(|c| c.feedback.as_deref())
            .map(str::trim)
            .filter(|f| !f.is_empty())
            .map(str::to_owned);
        RetryContext {
            critic_feedback,
            failed_attempt: verdict.attempt,
            total_attempts: total,
            reasons: blocking.iter().map(|f| f.to_string()).collect(),
            advisory,
            repeated,
            prior,
            diff,
        }
    }

    /// Fills the template, quoting each reason line.
    pub fn render(&self) -> String {
        let quote = |lines: &[String]| -> String {
            let mut out = String::new();
            for line in lines.iter().flat_map(|r| r.lines()) {
                out.push_str("  > ");
                out.push_str(line);
                out.push('\n');
            }
            out
        };
        let primary = quote(&self.reasons[..self.reasons.len().min(1)]);
        let mut diff = String::new();
        for line in &self.diff {
            diff.push_str("    ");
            diff.push_str(line);
            diff.push('\n');
        }
        let (attempt, total) = (
            (self.failed_attempt + 1).to_string(),
            self.total_attempts.to_string(),
        );
        let (also, feedback) = (
            quote(self.reasons.get(1..).unwrap_or_default()),
            quote(self.critic_feedback.as_slice()),
        );
        let (advisory, prior) = (quote(&self.advisory), quote(&self.prior));
        RETRY.render(&[
            ("attempt", &attempt),
            ("total", &total),
            ("primary", primary.trim_end()),
            ("also", &also),
            ("repeated", self.repeated.as_deref().unwrap_or_default()),
            ("feedback", &feedback),
            ("advisory", &advisory),
            ("prior", &prior),
            ("diff", &diff),
        ])
    }
}

/// "check", "criterion", … as a noun before a name.
fn stage_noun(source: Source) -> &'static str {
    match source {
        Source::Hook => "hook",
        other => other.as_str(),
    }
}

/// A finding's reason line, up to its first newline.
fn first_line(finding: &Finding) -> String {
    let text = finding.to_string();
    match text.split_once('\n') {
        Some((first, _)) => format!("{first} …"),
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::verdict::Decision;

    fn verdict(attempt: u32, findings: Vec<Finding>) -> Verdict {
        Verdict {
            attempt,
            decision: Decision::Retry,
            findings,
            evidence: Vec::new(),
            critic: None,
            logs: Vec::new(),
            stage_us: std::collections::BTreeMap::new(),
        }
    }

    #[test]
    fn placeholders_inside_reasons_are_quoted_as_they_are() {
        let judged = verdict(
            0,
            vec![
                Finding::blocking(Source::Check, "tests", "printed {details} and {total}"),
                Finding::blocking(Source::Verify, "", "second"),
            ],
        );
        let prompt = RetryContext::assemble(&judged, 2, &[], &[]).render();
        assert!(
            prompt.contains("  > check tests: printed {details} and {total}\n"),
            "{prompt}"
        );
        assert_eq!(prompt.matches("Also blocking:").count(), 1, "{prompt}");
        assert!(prompt.starts_with("VERIFICATION FAILED (attempt 1 of 2)."));
        assert!(!prompt.contains("{attempt}") && !prompt.contains("{primary}"));
    }

    #[test]
    fn prompt_orders_findings_by_authority_and_labels_advisory_ones() {
        let judged = verdict(
            0,
            vec![
                Finding::blocking(Source::Verify, "", "hello.txt does not exist"),
                Finding::advisory(Source::Hook, "style", "prefer tabs"),
                Finding::blocking(Source::Hook, "h", "a\nb"),
                Finding::blocking(Source::Check, "tests", "exit 1"),
            ],
        );
        let prompt = RetryContext::assemble(&judged, 3, &[], &[]).render();
        assert!(
            prompt.starts_with("VERIFICATION FAILED (attempt 1 of 3)."),
            "{prompt}"
        );
        assert!(
            prompt.contains("Primary failure:\n  > check tests: exit 1\n"),
            "{prompt}"
        );
        assert!(
            prompt.contains(
                "Also blocking:\n  > verify: hello.txt does not exist\n  > hook h: a\n  > b\n"
            ),
            "{prompt}"
        );
        assert!(
            prompt.contains("  > Advisory: hook style: prefer tabs\n"),
            "{prompt}"
        );
        assert!(!prompt.contains("Earlier attempts"), "{prompt}");
        assert_eq!(retry_template_sha256().len(), 64);
    }

    #[test]
    fn a_repeated_failure_is_named_and_earlier_attempts_are_capped() {
        let tests = || Finding::blocking(Source::Check, "tests", "exit 1\nlong output");
        let earlier: Vec<Verdict> = (0..4)
            .map(|n| {
                if n == 0 {
                    verdict(n, vec![Finding::blocking(Source::Verify, "", "no file")])
                } else {
                    verdict(n, vec![tests()])
                }
            })
            .collect();
        let refs: Vec<&Verdict> = earlier.iter().collect();
        let context = RetryContext::assemble(&verdict(4, vec![tests()]), 6, &refs, &[]);
        assert_eq!(
            context.repeated.as_deref(),
            Some(
                "attempts 2, 3, 4 and 5 failed the same check tests: what you are doing is not fixing it; try a different approach"
            )
        );
        assert_eq!(
            context.prior,
            vec![
                "attempt 2: check tests: exit 1 …",
                "attempt 3: check tests: exit 1 …",
                "attempt 4: check tests: exit 1 …",
            ]
        );
        let prompt = context.render();
        assert!(prompt.contains("Note: attempts 2, 3, 4 and 5"), "{prompt}");
    }

    #[test]
    fn the_diff_is_capped_at_500_lines() {
        let diff = vec![(0..700).map(|i| format!("+line {i}\n")).collect::<String>()];
        let judged = verdict(0, vec![Finding::blocking(Source::Scope, "scope", "x")]);
        let context = RetryContext::assemble(&judged, 2, &[], &diff);
        assert_eq!(context.diff.len(), MAX_DIFF_LINES + 1);
        assert_eq!(
            context.diff.last().map(String::as_str),
            Some("[diff cut: 200 more lines; at most 500 are shown]")
        );
        assert!(context.render().contains("    +line 499\n"));
    }

    /// Every section of the retry prompt at once, as the delegate reads it.
    #[test]
    fn golden_retry_prompt() {
        let earlier = [
            verdict(0, vec![Finding::blocking(Source::Verify, "", "no file")]),
            verdict(
                1,
                vec![Finding::blocking(
                    Source::Check,
                    "tests",
                    "exit 1\nFAILED parser",
                )],
            ),
        ];
        let mut failed = verdict(
            2,
            vec![
                Finding::blocking(
                    Source::Check,
                    "tests",
                    "`sh -c 'make test'` failed: exit 1 in 0.2 s; the last 2 line(s) of its output:\nrunning 3 tests\nFAILED parser",
                ),
                Finding::blocking(
                    Source::Criterion,
                    "file_exists:src/parser.rs",
                    "src/parser.rs does not exist",
                ),
                Finding::blocking(Source::Critic, "missing_ac", "no tests for the parser"),
                Finding::advisory(Source::Check, "fmt", "`cargo fmt --check` failed: exit 1"),
            ],
        );
        failed.critic = Some(harness_hooks::CriticReview {
            reviewer: "reviewer-model".to_owned(),
            prompt_version: "review-v1".to_owned(),
            prompt_sha256: String::new(),
            outcome: harness_hooks::CriticOutcome::SoftFail,
            available: true,
            reasoning: Some("the parser is untested".to_owned()),
            feedback: Some("add a test that parses an empty file".to_owned()),
            confidence: Some(0.8),
            error: None,
            extra: serde_json::Map::new(),
        });
        let refs: Vec<&Verdict> = earlier.iter().collect();
        let diff = vec![
            "--- a/src/lib.rs\n+++ b/src/lib.rs\n@@ -1 +1,2 @@\n-pub mod old;\n+pub mod parser;\n+pub mod old;\n".to_owned(),
        ];
        let prompt = RetryContext::assemble(&failed, 4, &refs, &diff).render();
        crate::golden::assert_golden("retry-v3.prompt", &prompt);
        let bare = RetryContext::assemble(
            &verdict(
                0,
                vec![Finding::blocking(
                    Source::Verify,
                    "",
                    "hello.txt does not exist",
                )],
            ),
            3,
            &[],
            &[],
        )
        .render();
        crate::golden::assert_golden("retry-v3-bare.prompt", &bare);
    }
}
