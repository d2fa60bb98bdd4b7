//! Stage 2c: claims (DESIGN §4.8) — what the final answer says it did, checked against what it
//! did. Agents end with "Created `hello.txt`", "All 14 tests pass", "Committed the fix"; this
//! stage reads those side-effect claims with deterministic patterns (no model) and checks each
//! against the attempt's tool log, the workspace's `changes` and the check results. An
//! unsupported claim is a `claim` finding (blocking unless `claims: advisory`) and an evidence
//! record; its message goes into the retry prompt.
//!
//! Precision comes first: a claim is read only from an assertive clause (no negation, modal,
//! condition or advice before the verb), only past-tense verbs of change count, and a path is
//! only a word that looks like one (a known extension, a `/`, or a backticked file name). The
//! corpus in `tests/data/claims_corpus.jsonl` measures it: no honest answer may be flagged.
//!
//! The folder reads as the stage works: [`reading`] (an answer as clauses, words and paths —
//! pure text), [`rules`] (the ways a claim is said, as a table of named rules, and their
//! vocabulary), [`extract`] (the claims of an answer, each with the rule that read it),
//! [`ground`] (the tool log as calls), [`judge`] (whether what the attempt did supports each
//! claim) and [`stage`] (findings and evidence, each naming its rule).

use std::path::Path;

use harness_hooks::{Changes, Evidence, ToolCall, ToolResult};

mod extract;
mod ground;
mod judge;
mod reading;
mod rules;
mod stage;

pub use rules::describe;
pub(crate) use stage::stage;

/// One side-effect claim read from an answer.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Claim {
    /// A file created, written or changed; `verb` as written (`created`, `updated`, …).
    Wrote {
        /// The path as the answer wrote it, cleaned of quotes and line numbers.
        path: String,
        /// The verb.
        verb: String,
    },
    /// A file deleted or removed.
    Deleted {
        /// The path as the answer wrote it.
        path: String,
        /// The verb.
        verb: String,
    },
    /// The tests pass.
    TestsPass {
        /// The words that say so.
        said: String,
    },
    /// A command was run (and, when `succeeded`, that it succeeded).
    Ran {
        /// The command as the answer wrote it.
        command: String,
        /// The answer says it succeeded.
        succeeded: bool,
    },
    /// A commit was made.
    Committed {
        /// The words that say so.
        said: String,
    },
}

impl Claim {
    /// The finding's name: `file`, `tests`, `command` or `commit`.
    pub fn kind(&self) -> &'static str {
        match self {
            Claim::Wrote { .. } | Claim::Deleted { .. } => "file",
            Claim::TestsPass { .. } => "tests",
            Claim::Ran { .. } => "command",
            Claim::Committed { .. } => "commit",
        }
    }
}

/// A claim read from an answer, with the rule that read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claimed {
    /// What the answer claims.
    pub claim: Claim,
    /// The rule of [`rules::RULES`] that read it.
    pub rule: &'static rules::Rule,
}

/// What an attempt did, to check claims against.
#[derive(Debug, Clone, Copy)]
pub struct Ground<'a> {
    /// The attempt's tool calls.
    pub calls: &'a [ToolCall],
    /// Their results.
    pub results: &'a [ToolResult],
    /// What changed in the workspace since the baseline; `None` when it is not observed.
    pub changes: Option<&'a Changes>,
    /// Evidence of the checks and criteria of this attempt.
    pub evidence: &'a [Evidence],
    /// Whether git's HEAD moved during the delegation: `None` when unknown (not observed),
    /// `Some(false)` also when the workspace is no git repository.
    pub head_moved: Option<bool>,
    /// The workspace root (to strip from absolute paths, and to see what exists).
    pub root: &'a Path,
    /// When the delegation began: a file modified since was written during it (whether or not
    /// the snapshot could see it — `scope.ignore`, `observe: false`).
    pub started: Option<std::time::SystemTime>,
}

#[cfg(test)]
mod tests {
    use harness_hooks::EvidenceResult;
    use serde_json::Value;

    use super::extract::claims;
    use super::judge::unsupported_all;
    use super::*;

    /// The corpus of `tests/data/claims_corpus.jsonl`: honest and lying final answers in the
    /// styles real agents write, each with what the attempt really did. No honest answer may
    /// get a finding; at least 90% of the lies must.
    #[test]
    fn the_corpus_no_honest_answer_is_flagged_and_nine_in_ten_lies_are_caught() {
        assert_precise_and_nine_in_ten("claims_corpus.jsonl", 75);
    }

    /// A second corpus, written apart from the first and from this code, that the patterns
    /// were not tuned on: how they carry over to answers they have not seen.
    #[test]
    fn the_held_out_corpus() {
        assert_precise_and_nine_in_ten("claims_heldout.jsonl", 50);
    }

    /// The corpus `name` has at least `least` honest answers and as many lies; no honest answer
    /// is flagged, and at least nine lies in ten are caught.
    fn assert_precise_and_nine_in_ten(name: &str, least: u32) {
        let (honest, flagged, lies, caught) = measure(name);
        assert!(honest >= least && lies >= least, "the corpus is too small");
        assert!(
            flagged.is_empty(),
            "honest answers flagged:\n{}",
            flagged.join("\n")
        );
        assert!(
            f64::from(caught) >= 0.9 * f64::from(lies),
            "only {caught} of {lies} lies caught"
        );
    }

    /// Runs the claims stage over a corpus: honest answers, those flagged, lies, lies caught.
    fn measure(name: &str) -> (u32, Vec<String>, u32, u32) {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/data")
            .join(name);
        let text = std::fs::read_to_string(&path).expect("the corpus");
        let (mut honest, mut flagged, mut lies, mut caught) = (0u32, Vec::new(), 0u32, 0u32);
        let mut missed = Vec::new();
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            // Each case gets a real workspace holding what its changes say exists now (the
            // corpus names it /work/ws): "still there" and "never there" are told apart as
            // they are in a run.
            let dir = tempfile::tempdir().expect("a workspace");
            let root = dir.path();
            let line = line.replace("/work/ws", &root.display().to_string());
            let case: Value = serde_json::from_str(&line).expect("a corpus line is JSON");
            for key in ["added", "modified"] {
                for path in case["changes"][key].as_array().into_iter().flatten() {
                    let file = root.join(path.as_str().unwrap_or_default());
                    std::fs::create_dir_all(file.parent().expect("a parent")).expect("mkdir");
                    std::fs::write(file, "x").expect("write");
                }
            }
            let id = case["id"].as_str().expect("an id");
            let mut calls = Vec::new();
            let mut results = Vec::new();
            for (i, call) in case["tool_calls"]
                .as_array()
                .expect("calls")
                .iter()
                .enumerate()
            {
                let name = call["name"].as_str().expect("a name").to_owned();
                calls.push(ToolCall {
                    id: format!("c{i}"),
                    name: name.clone(),
                    arguments: call["arguments"].as_object().cloned().unwrap_or_default(),
                });
                results.push(ToolResult {
                    call_id: format!("c{i}"),
                    name,
                    content: call["output"].as_str().unwrap_or_default().to_owned(),
                    is_error: call["is_error"].as_bool().unwrap_or(false),
                });
            }
            let changes: Changes =
                serde_json::from_value(case["changes"].clone()).expect("changes");
            let evidence: Vec<Evidence> = case["checks"]
                .as_array()
                .map(|checks| {
                    checks
                        .iter()
                        .map(|c| Evidence {
                            method: c["method"].as_str().map(str::to_owned),
                            ..Evidence::new(
                                c["name"].as_str().unwrap_or_default(),
                                "check",
                                if c["result"] == "pass" {
                                    EvidenceResult::Pass
                                } else {
                                    EvidenceResult::Fail
                                },
                            )
                        })
                        .collect()
                })
                .unwrap_or_default();
            let ground = Ground {
                calls: &calls,
                results: &results,
                changes: Some(&changes),
                evidence: &evidence,
                head_moved: case["head_moved"].as_bool(),
                root,
                started: None,
            };
            let answer = case["answer"].as_str().expect("an answer");
            let found: Vec<String> = unsupported_all(&claims(answer), &ground)
                .into_iter()
                .map(|(_, why)| why)
                .collect();
            if case["honest"].as_bool().expect("honest") {
                honest += 1;
                if !found.is_empty() {
                    flagged.push(format!("{id}: {found:?}"));
                }
            } else {
                lies += 1;
                if found.is_empty() {
                    missed.push(format!("{id}: {}", case["lie"]));
                } else {
                    caught += 1;
                }
            }
        }
        eprintln!(
            "{name}: {honest} honest answers, {} flagged; {lies} lies, {caught} caught ({:.1}%)",
            flagged.len(),
            100.0 * f64::from(caught) / f64::from(lies)
        );
        for miss in &missed {
            eprintln!("  missed {miss}");
        }
        (honest, flagged, lies, caught)
    }

    /// What extraction reads from every answer of both corpora, each claim with its rule:
    /// `tests/golden/claims_read.txt`, so extraction is tested apart from judging and a change
    /// to the rules shows as a diff of what they read (`HARNESS_BLESS=1` rewrites it).
    #[test]
    fn what_the_rules_read_from_the_corpora() {
        let mut text = String::new();
        for name in ["claims_corpus.jsonl", "claims_heldout.jsonl"] {
            let path = Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("tests/data")
                .join(name);
            let corpus = std::fs::read_to_string(&path).expect("the corpus");
            for line in corpus.lines().filter(|l| !l.trim().is_empty()) {
                let case: Value = serde_json::from_str(line).expect("a corpus line is JSON");
                text.push_str(&format!("{name} {}\n", case["id"].as_str().expect("an id")));
                for Claimed { claim, rule } in claims(case["answer"].as_str().expect("an answer")) {
                    text.push_str(&format!("  {:<18} {claim:?}\n", rule.id));
                }
            }
        }
        harness_testkit::golden::assert_golden(
            &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/claims_read.txt"),
            &text,
            "HARNESS_BLESS=1 cargo test -p harness --lib claims",
        );
    }
}
