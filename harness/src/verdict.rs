//! Findings and verdicts (DESIGN §4.3): what the verification pipeline concludes about one
//! attempt, as structured data. The reason lines people read (`verify: …`, `hook NAME: …`) are
//! rendered from findings; nothing parses them back.

use std::fmt;

use harness_hooks::{CriticReview, Evidence};
use serde::{Deserialize, Serialize};

/// Which stage of the pipeline produced a finding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    /// Gate integrity: the delegate changed what judges it (policy, protected gate inputs).
    Integrity,
    /// The scope check: what changed against what was allowed.
    Scope,
    /// A deterministic check command.
    Check,
    /// A completion criterion.
    Criterion,
    /// The inline verifier, `run(result)`.
    Verify,
    /// A `delegation.post_verify` hook.
    Hook,
    /// The independent critic.
    Critic,
    /// A required step of the plan.
    Plan,
    /// A citation in the response.
    Citation,
    /// A claim in the response (a file written, tests passing, a commit) the tool log and the
    /// workspace do not support.
    Claim,
    /// A budget (tokens, time).
    Budget,
    /// The gaming stage: added code that passes the tests without doing the work (special-cased
    /// inputs, caller reads, process exits, test-framework sniffing).
    Gaming,
    /// A holdout check: tests the delegate never sees.
    Holdout,
}

impl Source {
    /// Returns the stable name, e.g. `verify`.
    pub fn as_str(self) -> &'static str {
        match self {
            Source::Integrity => "integrity",
            Source::Scope => "scope",
            Source::Check => "check",
            Source::Criterion => "criterion",
            Source::Verify => "verify",
            Source::Hook => "hook",
            Source::Critic => "critic",
            Source::Plan => "plan",
            Source::Citation => "citation",
            Source::Claim => "claim",
            Source::Budget => "budget",
            Source::Gaming => "gaming",
            Source::Holdout => "holdout",
        }
    }

    /// Returns true for the deterministic stages, which outrank opinions when findings are
    /// ordered for the retry prompt.
    pub fn is_deterministic(self) -> bool {
        !matches!(self, Source::Critic)
    }
}

/// How bad a finding is. `blocking` and `advisory` are the pipeline's own; the rest are the
/// critic's vocabulary (DESIGN §4.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    /// Fails the attempt.
    Blocking,
    /// Reported, never fails the attempt.
    Advisory,
    /// A security problem.
    Security,
    /// A crash.
    Crash,
    /// Data loss.
    DataLoss,
    /// The wrong algorithm.
    WrongAlgorithm,
    /// An acceptance criterion is missing.
    MissingAc,
    /// Style.
    Style,
    /// Performance.
    Perf,
    /// Anything else.
    Other,
}

impl Severity {
    /// Returns the stable name, e.g. `data_loss`.
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Blocking => "blocking",
            Severity::Advisory => "advisory",
            Severity::Security => "security",
            Severity::Crash => "crash",
            Severity::DataLoss => "data_loss",
            Severity::WrongAlgorithm => "wrong_algorithm",
            Severity::MissingAc => "missing_ac",
            Severity::Style => "style",
            Severity::Perf => "perf",
            Severity::Other => "other",
        }
    }
}

/// One thing the pipeline found wrong (or worth saying) about an attempt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Finding {
    /// The stage that found it.
    pub source: Source,
    /// The check, criterion or hook name; empty for the inline verifier.
    pub name: String,
    /// How bad it is.
    pub severity: Severity,
    /// True when it fails the attempt.
    pub blocking: bool,
    /// What is wrong, in words the delegate and the operator read.
    pub message: String,
    /// The file it is about, when it is about one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// The line it is about, when it is about one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<u32>,
    /// The rule of its stage's table that made it (a claims rule such as `file-verb`, a gaming
    /// pattern such as `py-os-exit`), so a false finding is traced to the row that made it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
}

impl Finding {
    /// A blocking finding of `source` named `name`.
    pub fn blocking(source: Source, name: impl Into<String>, message: impl Into<String>) -> Self {
        Finding {
            source,
            name: name.into(),
            severity: Severity::Blocking,
            blocking: true,
            message: message.into(),
            path: None,
            line: None,
            rule: None,
        }
    }

    /// An advisory (never blocking) finding of `source` named `name`.
    pub fn advisory(source: Source, name: impl Into<String>, message: impl Into<String>) -> Self {
        Finding {
            severity: Severity::Advisory,
            blocking: false,
            ..Finding::blocking(source, name, message)
        }
    }

    /// Returns the one-line label of where it comes from: `verify`, `hook NAME`, `check NAME`.
    pub fn label(&self) -> String {
        if self.name.is_empty() {
            self.source.as_str().to_owned()
        } else {
            format!("{} {}", self.source.as_str(), self.name)
        }
    }
}

/// Renders the reason line of v1: `verify: …`, `hook NAME: …`; advisory findings say so.
impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.blocking {
            write!(f, "{}: {}", self.label(), self.message)
        } else {
            write!(f, "{} (advisory): {}", self.label(), self.message)
        }
    }
}

/// What the verdict means for the loop.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    /// Every stage passed.
    Pass,
    /// A stage failed: send the reasons back to the same delegate.
    Retry,
    /// A stage failed in a way a retry cannot mend, or the budget is spent.
    Fail,
    /// The attempt ended in an error before it could be judged, or the policy is broken.
    Error,
}

impl Decision {
    /// Returns `pass`, `retry`, `fail` or `error`.
    pub fn as_str(self) -> &'static str {
        match self {
            Decision::Pass => "pass",
            Decision::Retry => "retry",
            Decision::Fail => "fail",
            Decision::Error => "error",
        }
    }
}

/// The verdict on one attempt: the decision and everything that led to it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    /// The attempt, from 0.
    pub attempt: u32,
    /// What the loop does next.
    pub decision: Decision,
    /// Every finding, in pipeline order.
    pub findings: Vec<Finding>,
    /// Evidence records of this attempt's checks (DESIGN §4.7).
    pub evidence: Vec<Evidence>,
    /// The critic's review, when a critic ran.
    pub critic: Option<CriticReview>,
    /// Lines the inline verifier logged.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub logs: Vec<String>,
    /// How long each stage that ran took to judge the attempt, in microseconds, by stage name
    /// (`checks`, `verify`, `critic`, …); empty in records made before stages were timed.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub stage_us: std::collections::BTreeMap<String, u64>,
}

impl Verdict {
    /// A verdict that fails attempt `attempt` at once, on `finding`, with no retry.
    pub fn refused(attempt: u32, finding: Finding) -> Self {
        Verdict {
            attempt,
            decision: Decision::Fail,
            findings: vec![finding],
            evidence: Vec::new(),
            critic: None,
            logs: Vec::new(),
            stage_us: std::collections::BTreeMap::new(),
        }
    }

    /// Returns true when the attempt passed.
    pub fn passed(&self) -> bool {
        self.decision == Decision::Pass
    }

    /// Returns the blocking findings.
    pub fn blocking(&self) -> impl Iterator<Item = &Finding> {
        self.findings.iter().filter(|f| f.blocking)
    }

    /// Returns the reason lines of the blocking findings, as v1 printed and recorded them.
    pub fn reasons(&self) -> Vec<String> {
        self.blocking().map(Finding::to_string).collect()
    }

    /// Returns the first blocking finding: the primary failure.
    pub fn primary(&self) -> Option<&Finding> {
        self.blocking().next()
    }
}

/// Builds verdicts from v1 reason lines (`verify: …`, `hook NAME: …`), for tests of code that
/// records or reports verdicts.
#[cfg(test)]
pub(crate) fn test_verdict(attempt: u32, passed: Option<bool>, lines: &[&str]) -> Option<Verdict> {
    let passed = passed?;
    let findings = lines
        .iter()
        .map(|line| {
            let (label, message) = line.split_once(": ").unwrap_or(("verify", line));
            match label.split_once(' ') {
                Some((_, name)) => Finding::blocking(Source::Hook, name, message),
                None => Finding::blocking(Source::Verify, "", message),
            }
        })
        .collect();
    Some(Verdict {
        attempt,
        decision: if passed {
            Decision::Pass
        } else {
            Decision::Retry
        },
        findings,
        evidence: Vec::new(),
        critic: None,
        logs: Vec::new(),
        stage_us: std::collections::BTreeMap::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reason_lines_are_rendered_from_findings() {
        let cases = [
            (
                Finding::blocking(Source::Verify, "", "hello.txt does not exist"),
                "verify: hello.txt does not exist",
            ),
            (
                Finding::blocking(Source::Hook, "claims", "no file was written"),
                "hook claims: no file was written",
            ),
            (
                Finding::advisory(Source::Check, "fmt", "cargo fmt --check exited 1"),
                "check fmt (advisory): cargo fmt --check exited 1",
            ),
        ];
        for (finding, line) in cases {
            assert_eq!(finding.to_string(), line);
        }
    }

    #[test]
    fn a_verdict_serialises_to_the_contract() {
        let verdict = Verdict {
            attempt: 1,
            decision: Decision::Retry,
            findings: vec![Finding::blocking(Source::Hook, "h", "no")],
            evidence: Vec::new(),
            critic: None,
            logs: Vec::new(),
            stage_us: std::collections::BTreeMap::new(),
        };
        assert_eq!(
            serde_json::to_value(&verdict).expect("serialises"),
            serde_json::json!({"attempt": 1, "decision": "retry", "findings": [
                {"source": "hook", "name": "h", "severity": "blocking", "blocking": true, "message": "no"}
            ], "evidence": [], "critic": null})
        );
        assert_eq!(verdict.reasons(), ["hook h: no"]);
        assert_eq!(
            verdict.primary().map(Finding::label).as_deref(),
            Some("hook h")
        );
    }
}
