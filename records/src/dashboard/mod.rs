//! The failure-mode dashboard: per delegate kind, how delegations ended, on which attempt they
//! passed, how the policy broke, and why verification failed, computed from journal records.
//!
//! Three renderings of one computation: [`Dashboard::to_json`] for scripts,
//! [`Dashboard::to_table`] for a terminal and [`Dashboard::to_html`] for one self-contained page
//! with inline SVG charts.

use std::collections::{BTreeMap, HashMap};
use std::sync::LazyLock;
use std::time::Duration;

use regex::{Captures, Regex};
use serde_json::{Value, json};

use harness::{Source, Usage};

use crate::journal::Record;

mod roots;
pub use roots::{RootStats, by_root};
mod html;
pub use html::escape as escape_html;
mod text;

/// How many reasons, hooks and errors each kind lists.
const TOP: usize = 10;
/// How many of them the terminal table shows.
const TOP_IN_TABLE: usize = 5;
/// Normalised reasons longer than this are cut (they are group keys, not documents).
const MAX_REASON_CHARS: usize = 200;

/// A failure reason with its variable parts replaced, and how often it occurred.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReasonCount {
    /// Where it came from, as the finding names it: `verify`, `hook NAME`, `check NAME`,
    /// `criterion NAME`, `scope PATH`, `critic SEVERITY`, … (`other` for records from before
    /// verdicts were kept).
    pub source: String,
    /// The reason with numbers, quoted strings, paths, URLs and ids replaced by placeholders.
    pub reason: String,
    /// How many failed attempts gave it.
    pub count: usize,
    /// One reason as it was written, before normalising.
    pub example: String,
    /// Ids of runs that gave it (the first few found, at most [`EXAMPLE_RUNS`]).
    pub runs: Vec<String>,
    /// Retries it caused: attempts that gave it and were followed by another.
    pub retries: usize,
    /// Tokens (input and output) the attempts that gave it spent.
    pub tokens: u64,
}

/// What one failure reason came to: attempts, example runs, retries, tokens.
#[derive(Debug, Default)]
struct ReasonTally {
    count: usize,
    example: String,
    runs: Vec<String>,
    retries: usize,
    tokens: u64,
}

/// What [`KindStats::compute`] counts by name before ranking it.
#[derive(Default)]
struct Tallies {
    reasons: HashMap<(String, String), ReasonTally>,
    hooks: HashMap<String, usize>,
    checks: HashMap<String, usize>,
    flaky: HashMap<String, usize>,
    tampered: HashMap<String, usize>,
    errors: HashMap<(String, String), ErrorTally>,
}

/// How often one error ended a run, and example runs.
#[derive(Default)]
struct ErrorTally {
    count: usize,
    runs: Vec<String>,
}

impl Tallies {
    /// Counts attempt `i` of `record`: its blocking findings by reason, the hooks that blocked
    /// it, the checks that did not pass, and its integrity findings.
    fn count_attempt(
        &mut self,
        stats: &mut KindStats,
        record: &Record,
        i: usize,
        attempt: &crate::RecordedAttempt,
    ) {
        let mut hooks_here: Vec<&str> = Vec::new();
        let retried = i + 1 < record.attempts.len();
        let tokens = attempt.usage.input_tokens + attempt.usage.output_tokens;
        let mut count = |source: String, message: &str| {
            let entry = self
                .reasons
                .entry((source, normalise(message)))
                .or_insert_with(|| ReasonTally {
                    example: message.to_owned(),
                    ..ReasonTally::default()
                });
            entry.count += 1;
            entry.retries += usize::from(retried);
            entry.tokens += tokens;
            if entry.runs.len() < EXAMPLE_RUNS && !entry.runs.contains(&record.id) {
                entry.runs.push(record.id.clone());
            }
        };
        match &attempt.verdict {
            // Grouped by where each blocking finding came from, as the verdict says.
            Some(verdict) => {
                for finding in verdict.blocking() {
                    count(finding.label(), &finding.message);
                    if finding.source == Source::Hook
                        && !hooks_here.contains(&finding.name.as_str())
                    {
                        hooks_here.push(&finding.name);
                    }
                }
            }
            // Records from before verdicts were kept hold reason lines only.
            None => {
                for reason in &attempt.reasons {
                    count("other".to_owned(), reason);
                }
            }
        }
        for hook in hooks_here {
            *self.hooks.entry(hook.to_owned()).or_default() += 1;
        }
        // Claims are not checks: they have their own count, by finding.
        for record in attempt
            .evidence()
            .iter()
            .filter(|e| !e.passed() && e.source != "claim")
        {
            *self.checks.entry(record.criterion.clone()).or_default() += 1;
            if record.result == harness::EvidenceResult::Flaky {
                *self.flaky.entry(record.criterion.clone()).or_default() += 1;
            }
        }
        if let Some(verdict) = &attempt.verdict {
            for finding in &verdict.findings {
                match finding.source {
                    Source::Integrity => {
                        let file = finding.path.clone().unwrap_or_else(|| finding.name.clone());
                        *self.tampered.entry(file).or_default() += 1;
                    }
                    Source::Claim => {
                        *stats
                            .integrity
                            .unsupported_claims
                            .entry(finding.name.clone())
                            .or_default() += 1;
                    }
                    Source::Gaming => {
                        *stats
                            .integrity
                            .gaming
                            .entry(finding.name.clone())
                            .or_default() += 1;
                    }
                    Source::Holdout => {
                        *stats
                            .integrity
                            .holdout_failures
                            .entry(finding.name.clone())
                            .or_default() += 1;
                    }
                    _ => {}
                }
            }
        }
    }

    /// The most frequent of each, into `stats`.
    fn rank(self, stats: &mut KindStats) {
        stats.top_reasons = top(self.reasons, |((source, reason), tally)| ReasonCount {
            source,
            reason,
            count: tally.count,
            example: tally.example,
            runs: tally.runs,
            retries: tally.retries,
            tokens: tally.tokens,
        });
        stats.top_hooks = top(self.hooks, |(hook, count)| HookCount { hook, count });
        stats.top_checks = top(self.checks, |(check, count)| CheckCount { check, count });
        stats.integrity.tampered_files =
            top(self.tampered, |(check, count)| CheckCount { check, count });
        stats.integrity.flaky_checks =
            top(self.flaky, |(check, count)| CheckCount { check, count });
        stats.integrity.tampered_runs = stats.errors.get("gate_tampered").copied().unwrap_or(0);
        stats.top_errors = top(self.errors, |((kind, message), tally)| ErrorCount {
            kind,
            message,
            count: tally.count,
            runs: tally.runs,
        });
    }
}

/// Example runs kept per failure reason.
pub const EXAMPLE_RUNS: usize = 3;

/// A hook and how many failed attempts it blocked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HookCount {
    /// The hook's name.
    pub hook: String,
    /// Failed attempts with a reason from it.
    pub count: usize,
}

/// A check or criterion and how many attempts it failed (its evidence said `fail`, `error` or
/// `timeout`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckCount {
    /// The check's or criterion's name.
    pub check: String,
    /// Attempts it failed.
    pub count: usize,
}

/// A normalised error message of an `error` outcome and how often it occurred.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ErrorCount {
    /// The error kind (`verifier`, `hook`, `delegate`, …).
    pub kind: String,
    /// The first line of the message, normalised like reasons.
    pub message: String,
    /// How many delegations ended with it.
    pub count: usize,
    /// Up to [`EXAMPLE_RUNS`] runs that ended with it, for a look.
    pub runs: Vec<String>,
}

/// The median, 95th percentile (nearest rank) and maximum of some measurements.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Spread {
    /// The median.
    pub p50: u64,
    /// The 95th percentile.
    pub p95: u64,
    /// The largest.
    pub max: u64,
}

impl Spread {
    fn of(mut values: Vec<u64>) -> Spread {
        values.sort_unstable();
        let rank = |p: f64| -> u64 {
            if values.is_empty() {
                return 0;
            }
            // Nearest rank: the smallest value with at least p of the values at or below it.
            let rank = (p * values.len() as f64).ceil() as usize;
            values[rank.clamp(1, values.len()) - 1]
        };
        Spread {
            p50: rank(0.50),
            p95: rank(0.95),
            max: values.last().copied().unwrap_or(0),
        }
    }

    fn to_json(self) -> Value {
        json!({"p50": self.p50, "p95": self.p95, "max": self.max})
    }
}

/// The numbers of one delegate kind (or of all of them together).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct KindStats {
    /// The delegate kind, or `all` for the total.
    pub kind: String,
    /// Delegations recorded.
    pub delegations: usize,
    /// Outcome `passed`.
    pub passed: usize,
    /// Outcome `skipped` (nothing configured to verify).
    pub skipped: usize,
    /// Outcome `failed` (every attempt failed verification).
    pub failed: usize,
    /// Outcome `error`.
    pub errored: usize,
    /// Outcome `passed_with_debt`: the checks passed, the critic still objected.
    pub passed_with_debt: usize,
    /// Critic findings the passing runs carried as debt.
    pub debt: usize,
    /// Critic reviews by outcome (`PASS`, `SOFT_FAIL`, `HARD_FAIL`, `unavailable`).
    pub critic: BTreeMap<String, usize>,
    /// Runs a human approved (`harness override --approve`).
    pub approved: usize,
    /// Runs a human rejected.
    pub rejected: usize,
    /// Runs still awaiting a human: `failed` or `passed_with_debt`, not overridden.
    pub pending_review: usize,
    /// Passed delegations by the attempt that passed: `[0]` on the 1st, `[1]` on the 2nd, …;
    /// as long as the most attempts any delegation of the kind made.
    pub pass_at_attempt: Vec<usize>,
    /// Delegations that spent every attempt without passing (`verification_failed`).
    pub exhausted: usize,
    /// Delegations stopped by a broken verifier or hook (`verifier`, `hook`).
    pub broken_policy: usize,
    /// Delegations a policy hook blocked (`blocked`).
    pub blocked: usize,
    /// Delegations ended by a change outside their scope (`scope_violation`).
    pub scope_violations: usize,
    /// Delegations whose process died before they finished (`interrupted`).
    pub interrupted: usize,
    /// Other errors: `config`, `delegate`, `tool`, `timeout`, `cancelled`, …
    pub other_errors: usize,
    /// Errored delegations per error kind (`verification_failed` excluded).
    pub errors: BTreeMap<String, usize>,
    /// Attempts per delegation.
    pub attempts: Spread,
    /// Duration per delegation, in milliseconds.
    pub duration_ms: Spread,
    /// Tokens spent.
    pub usage: Usage,
    /// The most frequent normalised failure reasons, most frequent first.
    pub top_reasons: Vec<ReasonCount>,
    /// The hooks that failed attempts most often, most frequent first.
    pub top_hooks: Vec<HookCount>,
    /// The checks and criteria that failed attempts most often, most frequent first.
    pub top_checks: Vec<CheckCount>,
    /// The most frequent normalised error messages, most frequent first.
    pub top_errors: Vec<ErrorCount>,
    /// Gate integrity: what delegates tampered with, the claims they could not back, the
    /// checks that passed only on a re-run.
    pub integrity: IntegrityStats,
    /// The time each pipeline stage took per attempt it judged, slowest in all first.
    pub stages: Vec<StageStats>,
}

/// What one pipeline stage cost over the attempts it judged (their verdicts' `stage_us`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StageStats {
    /// The stage (`checks`, `verify`, `critic`, …).
    pub stage: String,
    /// Attempts it judged.
    pub attempts: usize,
    /// Its time per attempt, in microseconds.
    pub time_us: Spread,
    /// Its time over every attempt, in microseconds.
    pub total_us: u64,
}

impl StageStats {
    /// The stages of `records`' verdicts, slowest in all first.
    fn of(records: &[&Record]) -> Vec<StageStats> {
        let mut times: BTreeMap<&str, Vec<u64>> = BTreeMap::new();
        for record in records {
            for verdict in record.attempts.iter().filter_map(|a| a.verdict.as_ref()) {
                for (stage, us) in &verdict.stage_us {
                    times.entry(stage.as_str()).or_default().push(*us);
                }
            }
        }
        let mut stages: Vec<StageStats> = times
            .into_iter()
            .map(|(stage, times)| StageStats {
                stage: stage.to_owned(),
                attempts: times.len(),
                total_us: times.iter().sum(),
                time_us: Spread::of(times),
            })
            .collect();
        stages.sort_by(|a, b| b.total_us.cmp(&a.total_us).then(a.stage.cmp(&b.stage)));
        stages
    }
}

/// How often the gate's integrity guards fired for one kind (DESIGN §4.7–4.8).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IntegrityStats {
    /// Delegations that ended `gate_tampered`.
    pub tampered_runs: usize,
    /// The files delegates tampered with (policy, gate inputs, git hooks), most often first.
    pub tampered_files: Vec<CheckCount>,
    /// Unsupported claims by kind (`file`, `tests`, `command`, `commit`), attempts.
    pub unsupported_claims: BTreeMap<String, usize>,
    /// Checks whose result was `flaky` (failed, then passed on a re-run), most often first.
    pub flaky_checks: Vec<CheckCount>,
    /// Gaming findings by rule (`special-cased-input`, `reads-caller`, …), attempts.
    pub gaming: BTreeMap<String, usize>,
    /// Holdout checks that failed, by name, attempts.
    pub holdout_failures: BTreeMap<String, usize>,
}

impl IntegrityStats {
    /// True when no guard fired.
    pub fn is_empty(&self) -> bool {
        self.tampered_runs == 0
            && self.tampered_files.is_empty()
            && self.unsupported_claims.is_empty()
            && self.flaky_checks.is_empty()
            && self.gaming.is_empty()
            && self.holdout_failures.is_empty()
    }

    /// One line for the text table, or `None` when nothing fired.
    pub fn line(&self) -> Option<String> {
        if self.is_empty() {
            return None;
        }
        let claims: usize = self.unsupported_claims.values().sum();
        let by_kind = self
            .unsupported_claims
            .iter()
            .map(|(kind, n)| format!("{kind} {n}"))
            .collect::<Vec<_>>()
            .join(", ");
        let gaming: usize = self.gaming.values().sum();
        let by_rule = self
            .gaming
            .iter()
            .map(|(rule, n)| format!("{rule} {n}"))
            .collect::<Vec<_>>()
            .join(", ");
        let holdouts: usize = self.holdout_failures.values().sum();
        // The v4 guards are said when they fired (older journals' lines stay as they were).
        let gaming = if gaming > 0 {
            format!(" · {gaming} gaming finding(s) ({by_rule})")
        } else {
            String::new()
        };
        let holdouts = if holdouts > 0 {
            format!(" · {holdouts} holdout failure(s)")
        } else {
            String::new()
        };
        Some(format!(
            "gate integrity: {} run(s) gate_tampered ({} file(s)) · {claims} unsupported claim(s){}{gaming}{holdouts} · {} flaky check(s)",
            self.tampered_runs,
            self.tampered_files.len(),
            if by_kind.is_empty() {
                String::new()
            } else {
                format!(" ({by_kind})")
            },
            self.flaky_checks.len()
        ))
    }
}

impl KindStats {
    /// Returns passed / (delegations − skipped): the share of verified delegations that passed,
    /// or `None` when none was verified.
    pub fn pass_rate(&self) -> Option<f64> {
        let verified = self.delegations - self.skipped;
        (verified > 0).then(|| self.passed as f64 / verified as f64)
    }

    /// One line on the critic, debt and human review ("critic: PASS 2, SOFT_FAIL 1 · debt 3 ·
    /// review: 1 approved, 0 rejected, 2 pending"), or `None` when there is nothing to say.
    pub fn authority_line(&self) -> Option<String> {
        if self.critic.is_empty()
            && self.debt == 0
            && self.approved + self.rejected + self.pending_review + self.passed_with_debt == 0
        {
            return None;
        }
        let critic = if self.critic.is_empty() {
            "none".to_owned()
        } else {
            self.critic
                .iter()
                .map(|(outcome, n)| format!("{outcome} {n}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        Some(format!(
            "critic reviews: {critic} · passed with debt: {} · debt findings: {} · review: {} approved, {} rejected, {} pending",
            self.passed_with_debt, self.debt, self.approved, self.rejected, self.pending_review
        ))
    }

    fn compute(kind: &str, records: &[&Record]) -> KindStats {
        let mut stats = KindStats {
            kind: kind.to_owned(),
            delegations: records.len(),
            ..KindStats::default()
        };
        let most_attempts = records.iter().map(|r| r.attempts.len()).max().unwrap_or(0);
        stats.pass_at_attempt = vec![0; most_attempts];
        let mut tallies = Tallies::default();
        for record in records {
            stats.count_run(record, &mut tallies);
            for (i, attempt) in record.attempts.iter().enumerate() {
                tallies.count_attempt(&mut stats, record, i, attempt);
            }
        }
        stats.attempts = Spread::of(records.iter().map(|r| r.attempts.len() as u64).collect());
        stats.duration_ms = Spread::of(
            records
                .iter()
                .map(|r| u64::try_from(r.duration.as_millis()).unwrap_or(u64::MAX))
                .collect(),
        );
        tallies.rank(&mut stats);
        stats.stages = StageStats::of(records);
        stats
    }

    /// Counts what one run adds up to: its outcome, review, debt, critic reviews, the attempt
    /// it passed on and the error it ended with.
    fn count_run(&mut self, record: &Record, tallies: &mut Tallies) {
        self.usage.add(record.usage);
        match record.outcome.as_str() {
            "passed" => self.passed += 1,
            "passed_with_debt" => self.passed_with_debt += 1,
            "skipped" => self.skipped += 1,
            "failed" => self.failed += 1,
            _ => self.errored += 1,
        }
        match record.decision.as_deref() {
            Some("approved") => self.approved += 1,
            Some(_) => self.rejected += 1,
            None if matches!(record.outcome.as_str(), "failed" | "passed_with_debt") => {
                self.pending_review += 1;
            }
            None => {}
        }
        if matches!(record.outcome.as_str(), "passed" | "passed_with_debt") {
            self.debt += record
                .attempts
                .last()
                .and_then(|a| a.verdict.as_ref())
                .map_or(0, |v| {
                    v.findings
                        .iter()
                        .filter(|f| f.source == Source::Critic)
                        .count()
                });
        }
        for attempt in &record.attempts {
            let critic = attempt.verdict.as_ref().and_then(|v| v.critic.as_ref());
            if let Some(critic) = critic {
                let outcome = if critic.available {
                    critic.outcome.as_str()
                } else {
                    "unavailable"
                };
                *self.critic.entry(outcome.to_owned()).or_default() += 1;
            }
        }
        if let Some(n) = record.passed_on() {
            if self.pass_at_attempt.len() < n {
                self.pass_at_attempt.resize(n, 0);
            }
            self.pass_at_attempt[n - 1] += 1;
        }
        match record.error_kind.as_deref() {
            None => {}
            Some("verification_failed") => self.exhausted += 1,
            Some(kind) => {
                match kind {
                    "verifier" | "hook" => self.broken_policy += 1,
                    "blocked" => self.blocked += 1,
                    "scope_violation" => self.scope_violations += 1,
                    "interrupted" => self.interrupted += 1,
                    _ => self.other_errors += 1,
                }
                *self.errors.entry(kind.to_owned()).or_default() += 1;
                let message = record.error_message.as_deref().unwrap_or_default();
                let first = message.lines().next().unwrap_or_default();
                let tally = tallies
                    .errors
                    .entry((kind.to_owned(), normalise_error(first)))
                    .or_default();
                tally.count += 1;
                if tally.runs.len() < EXAMPLE_RUNS {
                    tally.runs.push(record.id.clone());
                }
            }
        }
    }

    fn to_json(&self) -> Value {
        json!({
            "kind": self.kind,
            "delegations": self.delegations,
            "outcomes": {
                "passed": self.passed,
                "passed_with_debt": self.passed_with_debt,
                "skipped": self.skipped,
                "failed": self.failed,
                "error": self.errored,
            },
            "pass_rate": self.pass_rate(),
            "pass_at_attempt": self.pass_at_attempt,
            "exhausted": self.exhausted,
            "broken_policy": self.broken_policy,
            "blocked": self.blocked,
            "scope_violations": self.scope_violations,
            "interrupted": self.interrupted,
            "other_errors": self.other_errors,
            "errors": self.errors,
            "attempts": self.attempts.to_json(),
            "duration_ms": self.duration_ms.to_json(),
            "stages": self.stages.iter().map(|s| json!({
                "stage": s.stage, "attempts": s.attempts, "total_us": s.total_us,
                "time_us": s.time_us.to_json(),
            })).collect::<Vec<_>>(),
            "usage": {
                "input_tokens": self.usage.input_tokens,
                "cached_input_tokens": self.usage.cached_input_tokens,
                "output_tokens": self.usage.output_tokens,
                "requests": self.usage.requests,
            },
            "top_reasons": self.top_reasons.iter().map(|r| json!({
                "source": r.source, "reason": r.reason, "count": r.count, "example": r.example,
                "runs": r.runs, "retries": r.retries, "tokens": r.tokens,
            })).collect::<Vec<_>>(),
            "top_hooks": self.top_hooks.iter().map(|h| json!({
                "hook": h.hook, "count": h.count,
            })).collect::<Vec<_>>(),
            "top_checks": self.top_checks.iter().map(|c| json!({
                "check": c.check, "count": c.count,
            })).collect::<Vec<_>>(),
            "top_errors": self.top_errors.iter().map(|e| json!({
                "kind": e.kind, "message": e.message, "count": e.count, "runs": e.runs,
            })).collect::<Vec<_>>(),
            "integrity": {
                "gate_tampered": self.integrity.tampered_runs,
                "tampered_files": self.integrity.tampered_files.iter().map(|c| json!({
                    "path": c.check, "count": c.count,
                })).collect::<Vec<_>>(),
                "unsupported_claims": self.integrity.unsupported_claims,
                "gaming": self.integrity.gaming,
                "holdout_failures": self.integrity.holdout_failures,
                "flaky_checks": self.integrity.flaky_checks.iter().map(|c| json!({
                    "check": c.check, "count": c.count,
                })).collect::<Vec<_>>(),
            },
            "debt": self.debt,
            "critic": self.critic,
            "review": {
                "approved": self.approved,
                "rejected": self.rejected,
                "pending": self.pending_review,
            },
        })
    }
}

/// Sorts counted entries by count (descending) then key, keeps the first [`TOP`].
fn top<K: Ord, V, T>(counts: HashMap<K, V>, make: impl Fn((K, V)) -> T) -> Vec<T>
where
    V: Counted,
{
    let mut entries: Vec<(K, V)> = counts.into_iter().collect();
    entries.sort_by(|a, b| b.1.count().cmp(&a.1.count()).then_with(|| a.0.cmp(&b.0)));
    entries.into_iter().take(TOP).map(make).collect()
}

trait Counted {
    fn count(&self) -> usize;
}

impl Counted for usize {
    fn count(&self) -> usize {
        *self
    }
}

impl Counted for ReasonTally {
    fn count(&self) -> usize {
        self.count
    }
}

impl Counted for ErrorTally {
    fn count(&self) -> usize {
        self.count
    }
}

/// The failure-mode report over a set of journal records.
#[derive(Debug, Clone, PartialEq)]
pub struct Dashboard {
    /// Every record together (`kind` is `all`).
    pub total: KindStats,
    /// One entry per delegate kind, by name.
    pub kinds: Vec<KindStats>,
    /// Outcomes over time, per delegate kind.
    pub timeline: Timeline,
}

/// The outcomes of each delegate kind in equal spans of time, from the first record's start to
/// the last's.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Timeline {
    /// When the first span starts, in milliseconds since the Unix epoch.
    pub start_ms: u64,
    /// How long each span is, in milliseconds (a minute, an hour, a day …: the smallest of
    /// [`SPANS`] that needs at most [`MOST_BUCKETS`] of them).
    pub bucket_ms: u64,
    /// Per delegate kind, per span: how many delegations started then ended in each outcome, in
    /// the order of [`TIMELINE_OUTCOMES`].
    pub kinds: Vec<(String, Vec<[usize; 6]>)>,
}

/// The outcomes a timeline counts, in its order.
pub const TIMELINE_OUTCOMES: [&str; 6] = [
    "passed",
    "passed_with_debt",
    "skipped",
    "failed",
    "error",
    "running",
];

/// The spans a timeline may use, shortest first: a minute, five, fifteen, an hour, six hours, a
/// day, a week.
pub const SPANS: [u64; 7] = [
    60_000,
    300_000,
    900_000,
    3_600_000,
    21_600_000,
    86_400_000,
    604_800_000,
];

/// The most spans a timeline shows.
pub const MOST_BUCKETS: u64 = 48;

impl Timeline {
    fn build(records: &[Record]) -> Timeline {
        // Before the epoch counts as the epoch.
        let started =
            |r: &Record| u64::try_from(crate::journal::unix_millis(r.started_at)).unwrap_or(0);
        let (Some(first), Some(last)) = (
            records.iter().map(started).min(),
            records.iter().map(started).max(),
        ) else {
            return Timeline::default();
        };
        let span = last - first;
        let bucket_ms = SPANS
            .iter()
            .copied()
            .find(|b| span / b < MOST_BUCKETS)
            .unwrap_or_else(|| (span / MOST_BUCKETS).max(1) + 1);
        let start_ms = first - first % bucket_ms;
        let buckets = usize::try_from((last - start_ms) / bucket_ms + 1).unwrap_or(1);
        let mut kinds: BTreeMap<&str, Vec<[usize; 6]>> = BTreeMap::new();
        for record in records {
            let at = usize::try_from((started(record) - start_ms) / bucket_ms).unwrap_or(0);
            let outcome = TIMELINE_OUTCOMES
                .iter()
                .position(|o| *o == record.outcome)
                .unwrap_or(4);
            kinds
                .entry(record.delegate_kind.as_str())
                .or_insert_with(|| vec![[0; 6]; buckets])[at][outcome] += 1;
        }
        Timeline {
            start_ms,
            bucket_ms,
            kinds: kinds
                .into_iter()
                .map(|(kind, counts)| (kind.to_owned(), counts))
                .collect(),
        }
    }

    fn to_json(&self) -> Value {
        json!({
            "start_ms": self.start_ms,
            "bucket_ms": self.bucket_ms,
            "outcomes": TIMELINE_OUTCOMES,
            "kinds": self.kinds.iter().map(|(kind, counts)| json!({"kind": kind, "buckets": counts})).collect::<Vec<_>>(),
        })
    }
}

impl Dashboard {
    /// Computes the report.
    pub fn build(records: &[Record]) -> Dashboard {
        let mut by_kind: BTreeMap<&str, Vec<&Record>> = BTreeMap::new();
        for record in records {
            by_kind
                .entry(record.delegate_kind.as_str())
                .or_default()
                .push(record);
        }
        let all: Vec<&Record> = records.iter().collect();
        Dashboard {
            total: KindStats::compute("all", &all),
            kinds: by_kind
                .into_iter()
                .map(|(kind, records)| KindStats::compute(kind, &records))
                .collect(),
            timeline: Timeline::build(records),
        }
    }

    /// Returns the report as JSON: `{"delegations", "total", "kinds": [...]}`.
    pub fn to_json(&self) -> Value {
        json!({
            "delegations": self.total.delegations,
            "total": self.total.to_json(),
            "kinds": self.kinds.iter().map(KindStats::to_json).collect::<Vec<_>>(),
            "timeline": self.timeline.to_json(),
        })
    }
}

fn ordinal(n: usize) -> String {
    let suffix = match (n % 10, n % 100) {
        (_, 11..=13) => "th",
        (1, _) => "st",
        (2, _) => "nd",
        (3, _) => "rd",
        _ => "th",
    };
    format!("{n}{suffix}")
}

fn percent(rate: f64) -> String {
    format!("{:.1}%", rate * 100.0)
}

fn human_ms(ms: u64) -> String {
    let d = Duration::from_millis(ms);
    if ms < 1000 {
        format!("{ms}ms")
    } else if ms < 60_000 {
        format!("{:.1}s", d.as_secs_f64())
    } else {
        format!("{:.1}m", d.as_secs_f64() / 60.0)
    }
}

/// Microseconds as people read them: `850µs`, `12ms`, `2.1s`, `3.5m` (what `harness report`,
/// `runs show` and the pages say of a stage's time).
pub fn human_us(us: u64) -> String {
    if us < 1000 {
        format!("{us}µs")
    } else {
        human_ms(us / 1000)
    }
}

fn truncate(text: &str, max: usize) -> String {
    if text.chars().count() > max {
        format!("{}…", text.chars().take(max).collect::<String>())
    } else {
        text.to_owned()
    }
}

/// Compiles a pattern that is a constant of this module.
fn pattern(re: &str) -> Regex {
    Regex::new(re).expect("the normalisation patterns are valid")
}

static URL: LazyLock<Regex> = LazyLock::new(|| pattern(r"\b[A-Za-z][A-Za-z0-9+.-]*://[^\s]+"));
static QUOTED: LazyLock<Regex> =
    LazyLock::new(|| pattern(r#""(?:[^"\\\n]|\\.)*"|`[^`\n]*`|(^|[^\w])'[^'\n]*'"#));
static UUID: LazyLock<Regex> = LazyLock::new(|| {
    pattern(r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b")
});
static HEX: LazyLock<Regex> = LazyLock::new(|| pattern(r"\b(?:0x[0-9a-fA-F]+|[0-9a-fA-F]{7,})\b"));
static PATH: LazyLock<Regex> = LazyLock::new(|| {
    pattern(
        r"(?:[A-Za-z]:)?[\w.~-]*(?:[/\\][\w.~-]+)+[/\\]?|\b[\w-]+(?:\.[\w-]+)*\.[A-Za-z][A-Za-z0-9]{0,7}\b",
    )
});
static NUMBER: LazyLock<Regex> = LazyLock::new(|| pattern(r"-?\b\d+(?:\.\d+)?\b"));
static SPACE: LazyLock<Regex> = LazyLock::new(|| pattern(r"\s+"));

/// Replaces the variable parts of a reason with placeholders so that reasons differing only in
/// a file name, a number, an id or a quoted value group together: URLs become `<url>`, quoted
/// strings `<str>`, UUIDs and hex ids `<id>`, paths and file names `<path>`, numbers `<n>`.
pub fn normalise(reason: &str) -> String {
    let text = URL.replace_all(reason, "<url>");
    let text = QUOTED.replace_all(&text, |c: &Captures<'_>| {
        format!("{}<str>", c.get(1).map_or("", |m| m.as_str()))
    });
    let text = UUID.replace_all(&text, "<id>");
    let text = HEX.replace_all(&text, |c: &Captures<'_>| {
        let m = &c[0];
        // A hex id has both digits and letters (or a 0x prefix); plain numbers and words stay.
        let digits = m.bytes().any(|b| b.is_ascii_digit());
        let letters = m.bytes().any(|b| b.is_ascii_alphabetic());
        if m.starts_with("0x") || (digits && letters) {
            "<id>".to_owned()
        } else {
            m.to_owned()
        }
    });
    let text = PATH.replace_all(&text, "<path>");
    let text = NUMBER.replace_all(&text, "<n>");
    let text = SPACE.replace_all(text.trim(), " ");
    truncate(&text, MAX_REASON_CHARS)
}

/// An error message normalised as [`normalise`] does, but for the name of the verifier or hook
/// that broke (`verifier checks/size.star: …`, `hook no-secrets: …`): which one broke is the
/// point of the line.
fn normalise_error(message: &str) -> String {
    for prefix in ["verifier ", "hook "] {
        if let Some((name, rest)) = message
            .strip_prefix(prefix)
            .and_then(|rest| rest.split_once(": "))
        {
            return format!("{prefix}{name}: {}", normalise(rest));
        }
    }
    normalise(message)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::journal::RecordedAttempt;
    use harness::Usage;
    use std::time::UNIX_EPOCH;

    #[test]
    fn normalise_groups_reasons_that_differ_only_in_values() {
        let cases = [
            (
                "expected file a.txt does not exist",
                "expected file <path> does not exist",
            ),
            (
                "expected file b.txt does not exist",
                "expected file <path> does not exist",
            ),
            (
                "hello.txt does not exist (attempt 0)",
                "<path> does not exist (attempt <n>)",
            ),
            ("src/lib.rs: 12 tests failed", "<path>: <n> tests failed"),
            ("/tmp/w/out/report.json is empty", "<path> is empty"),
            (
                r#"expected "hi" but found "bye""#,
                "expected <str> but found <str>",
            ),
            ("name 'x' is not 'y'", "name <str> is not <str>"),
            (
                "the agent doesn't say what it's done",
                "the agent doesn't say what it's done",
            ),
            (
                "GET https://api.example.com/v1/items?id=3 returned 503",
                "GET <url> returned <n>",
            ),
            (
                "commit 9babdb3 is not on main",
                "commit <id> is not on main",
            ),
            (
                "delegation d-00ff12ab34cd56ef failed",
                "delegation d-<id> failed",
            ),
            (
                "run 123e4567-e89b-12d3-a456-426614174000 lost",
                "run <id> lost",
            ),
            ("pointer 0xdeadbeef is null", "pointer <id> is null"),
            ("took 1.5 seconds, limit 1", "took <n> seconds, limit <n>"),
            ("accessed defaced records", "accessed defaced records"),
            (
                "  claims   a file\n but made no tool call ",
                "claims a file but made no tool call",
            ),
            ("verifier returned False", "verifier returned False"),
        ];
        for (raw, want) in cases {
            assert_eq!(normalise(raw), want, "normalising {raw:?}");
        }
    }

    #[test]
    fn spreads_use_the_nearest_rank() {
        let cases: [(&[u64], Spread); 4] = [
            (
                &[],
                Spread {
                    p50: 0,
                    p95: 0,
                    max: 0,
                },
            ),
            (
                &[7],
                Spread {
                    p50: 7,
                    p95: 7,
                    max: 7,
                },
            ),
            (
                &[3, 1, 2, 1, 0, 1, 1],
                Spread {
                    p50: 1,
                    p95: 3,
                    max: 3,
                },
            ),
            (
                &[1, 2, 3, 4],
                Spread {
                    p50: 2,
                    p95: 4,
                    max: 4,
                },
            ),
        ];
        for (values, want) in cases {
            assert_eq!(Spread::of(values.to_vec()), want, "spread of {values:?}");
        }
    }

    pub(crate) fn record(
        id: &str,
        kind: &str,
        outcome: &str,
        error: Option<&str>,
        attempts: &[(Option<bool>, &[&str])],
    ) -> Record {
        Record {
            id: id.to_owned(),
            started_at: UNIX_EPOCH,
            duration: Duration::from_millis(100),
            delegate_kind: kind.to_owned(),
            model: None,
            outcome: outcome.to_owned(),
            error_kind: error.map(str::to_owned),
            error_message: error.map(|e| format!("{e} went wrong in step 3")),
            attempts: attempts
                .iter()
                .enumerate()
                .map(|(i, (passed, reasons))| RecordedAttempt {
                    attempt: i as u32,
                    passed: *passed,
                    reasons: reasons.iter().map(|r| (*r).to_owned()).collect(),
                    duration: Duration::from_millis(50),
                    usage: Usage::default(),
                    result: None,
                    verdict: crate::journal::tests::verdict(i as u32, *passed, reasons),
                    unread_verdict: None,
                    retry_prompt: None,
                    diff: Vec::new(),
                })
                .collect(),
            usage: Usage::default(),
            trace_id: None,
            retry_template_version: "retry-v1".to_owned(),
            source: None,
            workdir: None,
            request: None,
            warnings: Vec::new(),
            events: Vec::new(),
            decision: None,
            seal: None,
            parent: None,
        }
    }

    pub(crate) fn sample() -> Vec<Record> {
        let missing_a: &[&str] = &["verify: expected file a.txt does not exist"];
        let missing_b: &[&str] = &[
            "verify: expected file b.txt does not exist",
            "hook no-claims: <script>alert(1)</script>",
        ];
        vec![
            record("d-1", "scripted", "passed", None, &[(Some(true), &[])]),
            record(
                "d-2",
                "scripted",
                "passed",
                None,
                &[(Some(false), missing_a), (Some(true), &[])],
            ),
            record(
                "d-3",
                "scripted",
                "failed",
                Some("verification_failed"),
                &[
                    (Some(false), missing_a),
                    (Some(false), missing_b),
                    (Some(false), missing_a),
                ],
            ),
            record("d-4", "scripted", "error", Some("verifier"), &[(None, &[])]),
            record("d-5", "scripted", "error", Some("blocked"), &[]),
            record("d-6", "scripted", "skipped", None, &[(None, &[])]),
            record("d-7", "command", "error", Some("delegate"), &[(None, &[])]),
            record("d-8", "command", "passed", None, &[(Some(true), &[])]),
        ]
    }

    /// Every outcome has its column: the summary of a kind adds up to its delegations, and a
    /// scope violation or a run whose process died is named, not an "other error".
    /// A broken verifier or hook keeps its name in the error table; the rest is normalised.
    #[test]
    fn a_broken_verifier_is_named_in_the_errors() {
        assert_eq!(
            normalise_error("verifier checks/size.star: line 3: x is not defined (attempt 2)"),
            "verifier checks/size.star: line <n>: x is not defined (attempt <n>)"
        );
        assert_eq!(
            normalise_error("hook no-secrets: timed out after 5s"),
            "hook no-secrets: timed out after 5s"
        );
        assert_eq!(
            normalise_error("config /tmp/x.yaml: bad"),
            "config <path>: bad"
        );
    }

    #[test]
    fn every_outcome_is_counted_in_its_own_column() {
        let records = vec![
            record("d-1", "claude", "passed", None, &[(Some(true), &[])]),
            record(
                "d-2",
                "claude",
                "passed_with_debt",
                None,
                &[(Some(true), &[])],
            ),
            record(
                "d-3",
                "claude",
                "failed",
                Some("scope_violation"),
                &[(None, &[])],
            ),
            record("d-4", "claude", "error", Some("interrupted"), &[]),
            record("d-5", "claude", "error", Some("timeout"), &[(None, &[])]),
        ];
        let dashboard = Dashboard::build(&records);
        let s = &dashboard.kinds[0];
        assert_eq!(
            (
                s.passed,
                s.passed_with_debt,
                s.scope_violations,
                s.interrupted,
                s.other_errors
            ),
            (1, 1, 1, 1, 1)
        );
        let html = dashboard.to_html("", None);
        assert!(html.contains("<th>passed with debt</th>"), "{html}");
        // All five started at the epoch: one span of a minute, five outcomes in it.
        assert_eq!(dashboard.timeline.bucket_ms, 60_000);
        assert_eq!(dashboard.timeline.kinds[0].1, vec![[1, 1, 0, 1, 2, 0]]);
        assert!(html.contains("<title>claude: 2 error</title>"), "{html}");
        assert!(html.contains("started in a minute"), "{html}");
        assert!(
            html.contains("<title>passed with debt: 1</title>"),
            "{html}"
        );
    }

    /// A broken verifier or hook ends a run with an error, not a reason: its row links example
    /// runs like every reason's.
    #[test]
    fn errors_link_their_example_runs() {
        let records: Vec<Record> = (1..=5)
            .map(|n| record(&format!("d-{n}"), "claude", "error", Some("verifier"), &[]))
            .collect();
        let dashboard = Dashboard::build(&records);
        let errors = &dashboard.kinds[0].top_errors;
        assert_eq!(errors[0].count, 5);
        assert_eq!(errors[0].runs, ["d-1", "d-2", "d-3"]);
        assert_eq!(
            dashboard.to_json()["kinds"][0]["top_errors"][0]["runs"],
            json!(["d-1", "d-2", "d-3"])
        );
        let html = dashboard.to_html("", Some("/runs/"));
        assert!(html.contains("<a href=\"/runs/d-1\">d-1</a>"), "{html}");
    }

    #[test]
    fn the_dashboard_counts_outcomes_attempts_and_reasons_per_kind() {
        let dashboard = Dashboard::build(&sample());
        assert_eq!(dashboard.total.delegations, 8);
        assert_eq!(dashboard.kinds.len(), 2);
        let command = &dashboard.kinds[0];
        assert_eq!(command.kind, "command");
        assert_eq!(command.pass_rate(), Some(0.5));
        assert_eq!(command.other_errors, 1);
        let s = &dashboard.kinds[1];
        assert_eq!(s.kind, "scripted");
        assert_eq!(s.delegations, 6);
        assert_eq!((s.passed, s.skipped, s.failed, s.errored), (2, 1, 1, 2));
        assert_eq!(s.pass_rate(), Some(2.0 / 5.0));
        assert_eq!(s.pass_at_attempt, vec![1, 1, 0]);
        assert_eq!(s.exhausted, 1);
        assert_eq!(s.broken_policy, 1);
        assert_eq!(s.blocked, 1);
        assert_eq!(s.other_errors, 0);
        assert_eq!(
            s.attempts,
            Spread {
                p50: 1,
                p95: 3,
                max: 3
            }
        );
        assert_eq!(s.top_reasons[0].source, "verify");
        assert_eq!(
            s.top_reasons[0].reason,
            "expected file <path> does not exist"
        );
        assert_eq!(s.top_reasons[0].count, 4);
        // Three of those four attempts were followed by a retry (d-2's first, d-3's first two).
        assert_eq!(s.top_reasons[0].retries, 3);
        assert_eq!(
            s.top_hooks,
            vec![HookCount {
                hook: "no-claims".to_owned(),
                count: 1
            }]
        );
        assert_eq!(s.top_errors.len(), 2);
        assert_eq!(s.top_errors[0].message, "blocked went wrong in step <n>");
        let json = dashboard.to_json();
        assert_eq!(json["kinds"][1]["pass_at_attempt"], json!([1, 1, 0]));
        assert_eq!(json["total"]["outcomes"]["error"], 3);
    }

    #[test]
    fn failures_group_by_the_source_and_name_their_findings_carry() {
        use harness::{Decision, Finding, Source, Verdict};
        let mut failed = record(
            "d-9",
            "openai",
            "failed",
            Some("verification_failed"),
            &[(Some(false), &[]), (Some(false), &[])],
        );
        let findings = [
            Finding::blocking(Source::Check, "tests", "`sh -c 'make test'` failed: exit 2"),
            Finding::blocking(
                Source::Criterion,
                "file_exists:a.txt",
                "a.txt does not exist",
            ),
            Finding::blocking(Source::Scope, "Cargo.lock", "inside `scope.deny`"),
            Finding::blocking(Source::Critic, "missing_ac", "no tests for the parser"),
            Finding::advisory(Source::Check, "fmt", "never counted: not blocking"),
        ];
        for attempt in &mut failed.attempts {
            attempt.verdict = Some(Verdict {
                attempt: attempt.attempt,
                decision: Decision::Retry,
                findings: findings.to_vec(),
                evidence: Vec::new(),
                critic: None,
                logs: Vec::new(),
                stage_us: std::collections::BTreeMap::new(),
            });
        }
        let stats = &Dashboard::build(&[failed]).total;
        let sources: Vec<(&str, &str, usize)> = stats
            .top_reasons
            .iter()
            .map(|r| (r.source.as_str(), r.reason.as_str(), r.count))
            .collect();
        assert_eq!(
            sources,
            [
                ("check tests", "<str> failed: exit <n>", 2),
                ("criterion file_exists:a.txt", "<path> does not exist", 2),
                ("critic missing_ac", "no tests for the parser", 2),
                ("scope Cargo.lock", "inside <str>", 2),
            ]
        );
        assert!(stats.top_reasons.iter().all(|r| r.source != "other"));
    }

    #[test]
    fn the_table_lists_every_kind_and_the_total() {
        let table = Dashboard::build(&sample()).to_table();
        let lines: Vec<&str> = table.lines().collect();
        assert!(lines[0].starts_with("KIND"), "{table}");
        assert!(lines[1].starts_with("command"), "{table}");
        assert!(lines[2].starts_with("scripted"), "{table}");
        assert!(lines[3].starts_with("all"), "{table}");
        assert!(
            table.contains("[verify] expected file <path> does not exist"),
            "{table}"
        );
        assert_eq!(
            Dashboard::build(&[]).to_table(),
            "no delegations recorded\n"
        );
    }

    #[test]
    fn ordinals() {
        let cases = [
            (1, "1st"),
            (2, "2nd"),
            (3, "3rd"),
            (4, "4th"),
            (11, "11th"),
            (12, "12th"),
            (21, "21st"),
        ];
        for (n, want) in cases {
            assert_eq!(ordinal(n), want);
        }
    }
}
