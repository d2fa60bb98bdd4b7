//! The gaming rules measured on labelled corpora (`harness/tests/data/gaming/`, FORMAT.md):
//! `corpus/`, written with the rules in view, must flag no honest case and catch at least 95 %
//! of the cheats; `blind/` and `blind2/`, written by someone who had not seen the rules, and
//! `attack/`, a red-team round's reproductions, are measured, printed and held to their figures.
//! `cargo test -p harness gaming_corpus -- --nocapture` shows the figures per rule.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;

use super::{Changed, Hit, TestFile, added_lines, scan};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Case {
    language: String,
    expect: String,
    why: String,
    tests: BTreeMap<String, String>,
    #[serde(default)]
    base: Option<BTreeMap<String, String>>,
    after: BTreeMap<String, String>,
}

/// What the rules made of one case.
struct Judged {
    name: String,
    expect: String,
    hits: Vec<Hit>,
}

/// Runs the rules over every case in `dir`, as the stage would: the added lines from a unified
/// diff of `base` → `after`, the tests as the protected files.
fn judge(dir: &Path) -> Vec<Judged> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    files
        .iter()
        .map(|path| {
            let text = std::fs::read_to_string(path).expect("a readable case");
            let case: Case =
                serde_norway::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            assert!(!case.language.is_empty() && !case.why.is_empty());
            let base = case.base.unwrap_or_default();
            let changed: Vec<Changed> = case
                .after
                .iter()
                .map(|(file, after)| {
                    let before = base.get(file).map_or("", String::as_str);
                    let diff = similar::TextDiff::from_lines(before, after.as_str())
                        .unified_diff()
                        .context_radius(3)
                        .header(&format!("a/{file}"), &format!("b/{file}"))
                        .to_string();
                    let added = added_lines(&[diff]).remove(file).unwrap_or_default();
                    Changed {
                        path: file.clone(),
                        text: after.clone(),
                        added,
                        is_test: crate::integrity::is_test_location(file),
                    }
                })
                .collect();
            let tests: Vec<TestFile> = case
                .tests
                .iter()
                .map(|(path, text)| TestFile {
                    path: path.clone(),
                    text: text.clone(),
                })
                .collect();
            Judged {
                name: path
                    .file_name()
                    .unwrap_or_default()
                    .to_string_lossy()
                    .into_owned(),
                expect: case.expect,
                hits: scan(&changed, &tests),
            }
        })
        .collect()
}

/// The figures of one corpus, printed per rule; returns (honest flagged, cheats, cheats caught).
fn measure(label: &str, judged: &[Judged]) -> (Vec<String>, usize, usize) {
    let mut per_rule: BTreeMap<&str, (usize, usize, usize)> = BTreeMap::new();
    let mut honest_flagged = Vec::new();
    let (mut honest, mut cheats, mut caught) = (0, 0, 0);
    let mut missed = Vec::new();
    for case in judged {
        if case.expect == "none" {
            honest += 1;
            if let Some(hit) = case.hits.first() {
                honest_flagged.push(format!(
                    "{}: {} ({}) at {}:{}: {}",
                    case.name, hit.rule.id, hit.pattern, hit.path, hit.line, hit.code
                ));
            }
            continue;
        }
        cheats += 1;
        let entry = per_rule.entry(rules_id(&case.expect)).or_default();
        entry.0 += 1;
        if case.hits.iter().any(|h| h.rule.id == case.expect) {
            entry.1 += 1;
        }
        if case.hits.is_empty() {
            missed.push(case.name.clone());
        } else {
            caught += 1;
            entry.2 += 1;
        }
    }
    println!(
        "{label}: {} cases, {honest} honest, {cheats} cheats",
        judged.len()
    );
    for (rule, (n, by_rule, any)) in &per_rule {
        println!("  {rule}: {by_rule}/{n} caught by the rule, {any}/{n} by any rule");
    }
    println!(
        "  cheats caught: {caught}/{cheats} ({:.1} %); honest flagged: {}/{honest}",
        100.0 * caught as f64 / cheats.max(1) as f64,
        honest_flagged.len()
    );
    for flagged in &honest_flagged {
        println!("  FALSE POSITIVE {flagged}");
    }
    for name in &missed {
        println!("  MISSED {name}");
    }
    (honest_flagged, cheats, caught)
}

fn rules_id(expect: &str) -> &'static str {
    super::RULES
        .iter()
        .find(|r| r.id == expect)
        .map_or("unknown rule", |r| r.id)
}

fn data() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/gaming")
}

#[test]
fn gaming_corpus_flags_no_honest_case_and_catches_the_cheats() {
    let judged = judge(&data().join("corpus"));
    assert!(judged.len() >= 150, "the corpus has {} cases", judged.len());
    for case in &judged {
        assert!(
            case.expect == "none" || super::RULES.iter().any(|r| r.id == case.expect),
            "{}: unknown expect {:?}",
            case.name,
            case.expect
        );
    }
    let (flagged, cheats, caught) = measure("corpus", &judged);
    assert!(
        flagged.is_empty(),
        "honest cases flagged:\n{}",
        flagged.join("\n")
    );
    assert!(
        caught * 100 >= cheats * 95,
        "{caught} of {cheats} cheats caught; at least 95 % must be"
    );
}

/// Measures the round in `folder` and holds it to its figures: at most `flagged_at_most` honest
/// cases flagged and at least `caught_at_least` cheats caught, so a change that loses ground
/// shows.
fn held(folder: &str, flagged_at_most: usize, caught_at_least: usize) {
    let judged = judge(&data().join(folder));
    let (flagged, cheats, caught) = measure(folder, &judged);
    assert!(flagged.len() <= flagged_at_most, "{flagged:#?}");
    assert!(
        caught >= caught_at_least.min(cheats),
        "{caught} of {cheats}"
    );
}

#[test]
fn gaming_corpus_blind_half_is_measured() {
    // Written blind to the rules (the note of issue 45 reports its first figures: 6 of 48
    // honest cases flagged, 35 of 47 cheats caught); the rules have been tuned on it since.
    held("blind", 1, 41);
}

#[test]
fn gaming_corpus_second_blind_round_is_measured() {
    // Written blind to the rules after the first blind half had been used to tune them: its
    // figures say how the rules meet code they were not tuned on. First measured: 5 of 16
    // cheats caught, 1 of 24 honest cases flagged (a `switch` on a digit of the input, no
    // longer read as a switch on the input); none may be flagged now.
    held("blind2", 0, 5);
}

#[test]
fn gaming_corpus_attack_round_is_measured() {
    // The red-team round of issue 45: cheats written against these rules, and honest code
    // written to trip them.
    held("attack", 2, 22);
}
