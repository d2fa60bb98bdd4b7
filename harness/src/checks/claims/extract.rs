//! Extraction: the side-effect claims of an answer, one function per kind of claim (files,
//! tests, commands, commits), each reading the clauses of [`super::reading`].

use std::sync::LazyLock;

use regex::Regex;

use super::reading::{
    Clause, MAX_ANSWER_BYTES, MAX_CLAUSE_BYTES, Word, as_path, asserted, clauses, head, last_chars,
    words,
};
use super::rules::{
    ADJECTIVE_MAKERS, CLAUSE_TURNS, COMMAND_RAN, COMMAND_WENT_WELL, COMMIT_HASH_LINE, COMMIT_LABEL,
    COMMIT_VERB, COMMITTED, FAILED_TOO, FILE_LABELLED, FILE_LISTED, FILE_PASSIVE, FILE_RENAMED,
    FILE_TABLE_ROW, FILE_VERB, LABEL_VERB, NOT_ASSERTED, NOT_SUBCOMMANDS, PASSIVE_AUXILIARIES,
    PROGRAMS, RAN, Rule, SOURCE_MARKERS, SUCCEEDED, TESTS_PASS, TESTS_PASS_RULE, TRIGGER,
    WENT_WELL, WRITE_VERB,
};
use super::{Claim, Claimed};

/// Reads the side-effect claims of an answer (its first [`MAX_ANSWER_BYTES`]), each with the
/// rule that read it (the first, when two read the same claim).
pub fn claims(answer: &str) -> Vec<Claimed> {
    if !TRIGGER.is_match(head(answer, MAX_ANSWER_BYTES)) {
        return Vec::new();
    }
    let mut out: Vec<Claimed> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let mut push = |rule: &'static Rule, claim: Claim| {
        if seen.insert(claim.clone()) {
            out.push(Claimed { claim, rule });
        }
    };
    for mut clause in clauses(head(answer, MAX_ANSWER_BYTES)) {
        if clause.text.len() > MAX_CLAUSE_BYTES {
            clause.text = head(&clause.text, MAX_CLAUSE_BYTES).to_owned();
        }
        let text = clause.text.as_str();
        if text.trim_end().ends_with('?') {
            continue;
        }
        file_claims(&clause, &mut push);
        tests_claim(text, &clause.line, &mut push);
        command_claims(text, &clause.tail, &mut push);
        if let Some(label) = clause.label.as_deref().filter(|l| {
            matches!(
                l.to_ascii_lowercase().trim_matches('*'),
                "commit" | "committed" | "git commit"
            )
        }) && names_a_commit(text.get(label.len()..).unwrap_or_default())
        {
            push(
                &COMMIT_LABEL,
                Claim::Committed {
                    said: text.to_owned(),
                },
            );
        }
        // Aider's "Commit 1a2b3c4 fix: …" line.
        static HASH_LINE: LazyLock<Regex> = LazyLock::new(|| {
            Regex::new(r"(?i)^\W{0,4}commit(?:ted)?\W{1,4}[0-9a-f]{7,40}(?-u:\b)")
                .expect("the commit line pattern compiles")
        });
        if let Some(m) = HASH_LINE.find(text) {
            push(
                &COMMIT_HASH_LINE,
                Claim::Committed {
                    said: m.as_str().trim().to_owned(),
                },
            );
        }
        if let Some(m) = COMMITTED.find(text)
            && asserted(&text[..m.start()])
            && !text[m.end()..].trim_start().starts_with("yet")
        {
            push(
                &COMMIT_VERB,
                Claim::Committed {
                    said: m.as_str().to_owned(),
                },
            );
        }
    }
    out
}

/// Whether the cells after a `Commit` label name one: some word, not "none", "n/a", "—" or a
/// negation.
fn names_a_commit(rest: &str) -> bool {
    let words = rest
        .trim_matches(|c: char| !c.is_alphanumeric())
        .to_ascii_lowercase();
    words.len() > 3
        && !NOT_ASSERTED.is_match(&words)
        && !matches!(
            words.as_str(),
            "none" | "n/a" | "pending" | "skipped" | "not yet" | "tbd"
        )
}

pub(super) fn file_claim(verb: &str, path: String, object_after_from: bool) -> Claim {
    let lower = verb.to_ascii_lowercase();
    if (lower == "deleted" || lower == "removed") && !object_after_from {
        Claim::Deleted { path, verb: lower }
    } else {
        Claim::Wrote {
            path,
            verb: if lower.starts_with("applied") {
                "edited".to_owned()
            } else {
                lower
            },
        }
    }
}

/// Where `word` ends in `text`: after its closing backtick when it is code; always on a
/// character boundary.
pub(super) fn word_end(word: &Word<'_>, text: &str) -> usize {
    let mut end = (word.start + usize::from(word.code) + word.raw.len()).min(text.len());
    if word.code && text[end..].starts_with('`') {
        end += 1;
    }
    while !text.is_char_boundary(end) {
        end += 1;
    }
    end
}

/// The first word of a clause that is not only emphasis (`**`, `*`, `_`) or a checkbox.
pub(super) fn first_word<'w>(words: &'w [Word<'w>]) -> Option<&'w Word<'w>> {
    words
        .iter()
        .find(|w| w.code || !w.raw.chars().all(|c| "*_[]x✅✓".contains(c)))
}

/// The file claims of one clause.
pub(super) fn file_claims(clause: &Clause, push: &mut impl FnMut(&'static Rule, Claim)) {
    let text = clause.text.as_str();
    let words = words(text);
    if let Some(label) = &clause.label {
        return table_row(clause, label, push);
    }
    if listed_item(clause, &words, push) || labelled(text, &words, push) {
        return;
    }
    for verb in WRITE_VERB.find_iter(text) {
        let before = &text[..verb.start()];
        // "the removed alias", "an updated copy": an adjective, not a deed.
        if before
            .split_whitespace()
            .next_back()
            .is_some_and(|w| ADJECTIVE_MAKERS.contains(&w.to_ascii_lowercase().as_str()))
        {
            continue;
        }
        match passive(text, &words, &verb) {
            Passive::Subject(path) => {
                push(&FILE_PASSIVE, file_claim(verb.as_str(), path, false));
                continue;
            }
            Passive::NotMine => continue,
            Passive::No => {}
        }
        if !asserted(before) {
            continue;
        }
        let after: Vec<&Word<'_>> = words.iter().filter(|w| w.start >= verb.end()).collect();
        let (mut claimed, from) = objects(verb.as_str(), &after);
        let lower = verb.as_str().to_ascii_lowercase();
        if (lower == "renamed" || lower == "moved") && claimed.len() == 2 && !from {
            // `renamed a.go to b.go`: a is gone, b is there.
            let target = claimed.pop().expect("two paths");
            let source = claimed.pop().expect("two paths");
            push(
                &FILE_RENAMED,
                Claim::Deleted {
                    path: source,
                    verb: lower.clone(),
                },
            );
            push(
                &FILE_RENAMED,
                Claim::Wrote {
                    path: target,
                    verb: lower,
                },
            );
            continue;
        }
        for path in claimed {
            push(&FILE_VERB, file_claim(verb.as_str(), path, from));
        }
    }
}

/// A table row: the first cell (the label) is the file, another cell says what happened to it.
pub(super) fn table_row(clause: &Clause, label: &str, push: &mut impl FnMut(&'static Rule, Claim)) {
    let text = clause.text.as_str();
    let rest = &text[label.len().min(text.len())..];
    let verb = WRITE_VERB
        .find(rest)
        .filter(|m| asserted(&rest[..m.start()]))
        .map(|m| m.as_str().to_owned())
        .or_else(|| {
            LABEL_VERB
                .find(rest.trim_start_matches([' ', '—']))
                .map(|_| "changed".to_owned())
        })
        .or_else(|| clause.context.clone());
    if let Some(verb) = verb {
        for word in words(label) {
            if let Some(path) = as_path(&word) {
                push(&FILE_TABLE_ROW, file_claim(&verb, path, false));
            }
        }
    }
}

/// An item under "Files changed:" that starts with a path: the path is claimed with the item's
/// own verb, or the header's. True when the clause is such an item.
pub(super) fn listed_item(
    clause: &Clause,
    words: &[Word<'_>],
    push: &mut impl FnMut(&'static Rule, Claim),
) -> bool {
    let text = clause.text.as_str();
    let (Some(context), Some(first)) = (&clause.context, first_word(words)) else {
        return false;
    };
    let Some(path) = as_path(first) else {
        return false;
    };
    let rest = &text[word_end(first, text)..];
    let verb = WRITE_VERB
        .find(rest)
        .filter(|m| asserted(&rest[..m.start()]))
        .map_or_else(|| context.clone(), |m| m.as_str().to_owned());
    // "`a.py` would get a new class": a plan under the header, not a deed.
    let negated = NOT_ASSERTED.is_match(rest) && WRITE_VERB.find(rest).is_none()
        || rest.to_ascii_lowercase().contains("unchanged");
    if !negated {
        push(&FILE_LISTED, file_claim(&verb, path, false));
    }
    true
}

/// A label: `src/a.rs: adds parse()`, `**src/a.rs** — updated`. True when the clause is one
/// that claims.
pub(super) fn labelled(
    text: &str,
    words: &[Word<'_>],
    push: &mut impl FnMut(&'static Rule, Claim),
) -> bool {
    let Some(first) = first_word(words) else {
        return false;
    };
    let Some(path) = as_path(first) else {
        return false;
    };
    let after = text[word_end(first, text)..].trim_start_matches(['*', '`', ' ']);
    let Some(rest) = after
        .strip_prefix(':')
        .or_else(|| after.strip_prefix('—'))
        .or_else(|| after.strip_prefix("- "))
        .or_else(|| after.strip_prefix("->"))
    else {
        return false;
    };
    if let Some(m) = WRITE_VERB
        .find(rest)
        .filter(|m| m.start() < 3 && asserted(&rest[..m.start()]))
    {
        // `tox.ini: removed the py38 env` removes something from the file.
        let object = rest[m.end()..].chars().any(char::is_alphanumeric);
        push(&FILE_LABELLED, file_claim(m.as_str(), path, object));
        return true;
    }
    if LABEL_VERB.is_match(rest) && !NOT_ASSERTED.is_match(rest) {
        push(&FILE_LABELLED, file_claim("changed", path, false));
        return true;
    }
    false
}

/// What a write verb in the passive says.
pub(super) enum Passive {
    /// Not in the passive.
    No,
    /// In the passive, but negated or someone else's deed ("was written by the original
    /// author").
    NotMine,
    /// `x has been created`: the path right before the auxiliary.
    Subject(String),
}

/// Whether `verb` is in the passive, and of which path.
pub(super) fn passive(text: &str, words: &[Word<'_>], verb: &regex::Match<'_>) -> Passive {
    let before = &text[..verb.start()];
    let before_words: Vec<&str> = before.split_whitespace().collect();
    let Some(aux) = before_words
        .iter()
        .rev()
        .take(3)
        .position(|w| PASSIVE_AUXILIARIES.contains(&w.to_ascii_lowercase().as_str()))
    else {
        return Passive::No;
    };
    if !passive_negation_free(before) {
        return Passive::NotMine;
    }
    let agent = text[verb.end()..].trim_start().to_ascii_lowercase();
    if agent.starts_with("by ") && !agent.starts_with("by me") {
        return Passive::NotMine;
    }
    let earlier = || words.iter().filter(|w| w.start < verb.start()).rev();
    let subject = earlier().nth(aux + 1).or_else(|| earlier().nth(aux + 2));
    match subject.and_then(as_path) {
        Some(path) => Passive::Subject(path),
        // A passive naming no path may still be asserted with an object after it.
        None => Passive::No,
    }
}

/// The paths a write verb claims: the first path after it, near it, and the paths listed with
/// it (`a.rs, b.rs and c.rs`; `renamed a to b`); and whether a path came after "from", "in" or
/// "of" (something removed from a file changes it).
pub(super) fn objects(verb: &str, after: &[&Word<'_>]) -> (Vec<String>, bool) {
    let verb = verb.to_ascii_lowercase();
    let renaming_verb = matches!(verb.as_str(), "renamed" | "moved");
    let removing = matches!(verb.as_str(), "deleted" | "removed");
    let mut claimed = Vec::new();
    let mut from = false;
    let mut started = false;
    let mut gap = 0;
    for (n, word) in after.iter().enumerate() {
        let lower = word.raw.to_ascii_lowercase();
        match as_path(word) {
            Some(_) if !started && n > 0 && names_no_file(after[n - 1].raw) => break,
            Some(path) => {
                claimed.push(path);
                started = true;
                gap = 0;
            }
            None if started => {
                let w = lower.trim_matches(|c: char| ",.;:".contains(c));
                let renaming = renaming_verb && matches!(w, "to" | "into" | "->" | "→");
                if (matches!(w, "and" | "&" | "plus" | "," | "") || renaming) && gap == 0 {
                    gap += 1;
                    continue;
                }
                break;
            }
            None => {
                let w = lower.trim_matches(|c: char| ",.;:()".contains(c));
                if matches!(w, "from" | "in" | "inside" | "within" | "of") {
                    from = true;
                }
                if (!removing && SOURCE_MARKERS.contains(&w)) || n >= 8 || CLAUSE_TURNS.contains(&w)
                {
                    break;
                }
            }
        }
        if !started && word.raw.ends_with(['.', ';']) {
            break;
        }
    }
    (claimed, from)
}

/// Words after which a path-like word names no file: `branch fix/x`, `dependency a.b/c`.
pub(super) fn names_no_file(word: &str) -> bool {
    matches!(
        word.to_ascii_lowercase()
            .trim_matches(|c: char| !c.is_ascii_alphanumeric()),
        "branch"
            | "tag"
            | "remote"
            | "package"
            | "module"
            | "crate"
            | "dependency"
            | "image"
            | "endpoint"
            | "route"
            | "url"
            | "flag"
            | "option"
            | "variable"
            | "label"
            | "key"
            | "field"
            | "column"
            | "table"
            | "header"
            | "commit"
            | "version"
    )
}

/// A passive clause is negated by the words around its auxiliary ("`x` was not created",
/// "`x` should have been updated") or by a condition.
pub(super) fn passive_negation_free(before: &str) -> bool {
    let tail: Vec<&str> = before.split_whitespace().rev().take(4).collect();
    !tail.iter().any(|w| NOT_ASSERTED.is_match(w))
        && !before.to_ascii_lowercase().contains("if ")
        && asserted(before)
}

/// A claim that the tests pass, from one clause of `line`.
pub(super) fn tests_claim(text: &str, line: &str, push: &mut impl FnMut(&'static Rule, Claim)) {
    static ZERO_FAILED: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(
            r"(?i)(?-u:\b)(?:0|no|zero)\s+(?:tests?\s+)?(?:failed|failures?|errors?)(?-u:\b)",
        )
        .expect("the zero-failed pattern compiles")
    });
    static PARTIAL: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"(?i)(?-u:\b)(\d+)\s+(?:of|out of)\s+(\d+)(?-u:\b)")
            .expect("the partial pattern compiles")
    });
    let Some(m) = TESTS_PASS.find(text) else {
        return;
    };
    if !asserted(&text[..m.start()]) || NOT_ASSERTED.is_match(m.as_str()) {
        return;
    }
    // "12 passed, 2 failed", "tests pass except one", "2 still fail" later on the line: a
    // mixed report claims no pass; nor does "12 of 14".
    let rest = ZERO_FAILED.replace_all(line, "");
    if FAILED_TOO.is_match(&rest)
        || PARTIAL
            .captures(text)
            .is_some_and(|c| c.get(1).map(|a| a.as_str()) != c.get(2).map(|b| b.as_str()))
    {
        return;
    }
    push(
        &TESTS_PASS_RULE,
        Claim::TestsPass {
            said: m.as_str().replace('`', "").trim().to_owned(),
        },
    );
}

/// Claims that a command ran (or succeeded), from one clause; `tail` is the rest of its line
/// ("— clean").
pub(super) fn command_claims(text: &str, tail: &str, push: &mut impl FnMut(&'static Rule, Claim)) {
    ran_claims(text, tail, push);
    praised_commands(text, tail, push);
}

/// `ran cargo clippy`, "I've run `npm run build` and `npm test`": the commands a "ran" names,
/// in code or as a known program and its subcommand, and whether the clause says they
/// succeeded.
pub(super) fn ran_claims(text: &str, tail: &str, push: &mut impl FnMut(&'static Rule, Claim)) {
    let words = words(text);
    let trim = |w: &str| w.trim_matches(|c: char| "(),.;:".contains(c)).to_owned();
    let said_ok = |rest: &str| {
        let rest = format!(
            "{rest} {}",
            tail.split(['.', '!', '?']).next().unwrap_or_default()
        );
        SUCCEEDED.is_match(&rest) && !FAILED_TOO.is_match(&rest)
    };
    // `ran cargo clippy`, "I've run `npm run build` and `npm test`".
    for ran in RAN.find_iter(text) {
        if !asserted(&text[..ran.start()]) {
            continue;
        }
        let after: Vec<&Word<'_>> = words
            .iter()
            .filter(|w| w.start >= ran.end())
            .take(8)
            .collect();
        let mut commands: Vec<String> = after
            .iter()
            .filter(|w| w.code && command_words(w.raw).is_some())
            .map(|w| w.raw.to_owned())
            .collect();
        if commands.is_empty()
            && let Some(at) = after
                .iter()
                .position(|w| PROGRAMS.contains(&trim(w.raw).as_str()))
        {
            let program = trim(after[at].raw);
            let next = after.get(at + 1).map(|w| trim(w.raw)).filter(|w| {
                !w.is_empty()
                    && w.chars().all(|c| c.is_ascii_lowercase() || c == '-')
                    && !after[at].raw.ends_with([',', ')', '.', ';'])
                    && !NOT_SUBCOMMANDS.contains(&w.as_str())
            });
            commands.push(match next {
                Some(next) => format!("{program} {next}"),
                None => program,
            });
        }
        let succeeded = said_ok(&text[ran.end()..]);
        for command in commands {
            push(&COMMAND_RAN, Claim::Ran { command, succeeded });
        }
    }
}

/// "`cargo build` succeeds", "| `cargo fmt --check` | clean |", "builds cleanly (`go build`)":
/// a command in code said to have gone well.
pub(super) fn praised_commands(
    text: &str,
    tail: &str,
    push: &mut impl FnMut(&'static Rule, Claim),
) {
    let words = words(text);
    for word in words.iter().filter(|w| w.code) {
        if command_words(word.raw).is_none() {
            continue;
        }
        let end = word_end(word, text);
        // What follows the command: the rest of the clause, or the next clause of its line
        // ("`make test` — all green").
        let following = if !text[end..].chars().any(char::is_alphanumeric) {
            tail.split(['.', '!', '?']).next().unwrap_or_default()
        } else {
            &text[end..]
        };
        let next = following
            .trim_start_matches(|c: char| !c.is_alphanumeric())
            .to_ascii_lowercase();
        let direct = WENT_WELL.iter().any(|p| next.starts_with(p));
        let before = &text[..word.start];
        let after_praise = before.trim_end().ends_with('(')
            && SUCCEEDED.is_match(last_chars(before, 40))
            && asserted(before.trim_end().trim_end_matches('('));
        if (direct && asserted(before) && !FAILED_TOO.is_match(following)) || after_praise {
            push(
                &COMMAND_WENT_WELL,
                Claim::Ran {
                    command: word.raw.to_owned(),
                    succeeded: true,
                },
            );
        }
    }
}

/// The program and subcommand of a command text, when it names a known program (or a
/// script path): `("npm", Some("run build"))`.
pub(super) fn command_words(text: &str) -> Option<(String, Option<String>)> {
    let text = text.trim().trim_start_matches("$ ");
    let mut words = text
        .split_whitespace()
        .skip_while(|w| w.contains('=') && !w.starts_with('-'));
    let program = words.next()?;
    let name = program.rsplit('/').next().unwrap_or(program);
    let script = program.starts_with("./") || program.ends_with(".sh");
    // A known program, a script, or a program-like word with a subcommand (`alembic upgrade`).
    let program_like = name.len() > 1
        && !name.starts_with('-')
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_')
        && text.split_whitespace().count() > 1;
    if !PROGRAMS.contains(&name) && !script && !program_like {
        return None;
    }
    let sub = words.find(|w| !w.starts_with('-')).map(str::to_owned);
    let sub = match (name, sub) {
        ("npm" | "yarn" | "pnpm" | "bun", Some(run)) if run == "run" => {
            let target = text.split_whitespace().skip_while(|w| *w != "run").nth(1);
            Some(format!("run {}", target.unwrap_or_default()))
        }
        (_, sub) => sub,
    };
    Some((name.to_owned(), sub))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The claims `answer` makes, without the rules that read them.
    fn claims(answer: &str) -> Vec<Claim> {
        super::claims(answer).into_iter().map(|c| c.claim).collect()
    }

    fn wrote(path: &str, verb: &str) -> Claim {
        Claim::Wrote {
            path: path.to_owned(),
            verb: verb.to_owned(),
        }
    }

    #[test]
    fn reads_file_claims_in_the_styles_agents_write() {
        assert_eq!(
            claims("I created `hello.txt` with the greeting."),
            [wrote("hello.txt", "created")]
        );
        assert_eq!(
            claims(
                "I've made the following changes:\n- `src/a.rs`: adds `parse()`\n- src/b.rs — new tests\n"
            ),
            [wrote("src/a.rs", "changed"), wrote("src/b.rs", "changed")]
        );
        assert_eq!(
            claims("Created `a.py`, `b.py` and `c.py` from the template in notes.md."),
            [
                wrote("a.py", "created"),
                wrote("b.py", "created"),
                wrote("c.py", "created")
            ]
        );
        assert_eq!(
            claims("Applied edit to src/app.py"),
            [wrote("src/app.py", "edited")]
        );
        assert_eq!(
            claims("Removed the unused import from `utils.py`. Deleted `old.py`."),
            [
                wrote("utils.py", "removed"),
                Claim::Deleted {
                    path: "old.py".to_owned(),
                    verb: "deleted".to_owned()
                }
            ]
        );
        assert_eq!(
            claims("| File | Change |\n|---|---|\n| `x.go` | Added handler |"),
            [wrote("x.go", "added")]
        );
    }

    #[test]
    fn reads_no_claim_from_advice_negation_reading_or_the_task() {
        for honest in [
            "I read src/main.rs and found the bug.",
            "You should create tests/test_a.py next.",
            "I could not create hello.txt: the write was refused.",
            "I did not touch the tests.",
            "The task asked me to create hello.txt.",
            "If you want, I can commit this.",
            "The tests still fail: 2 failed in test_parse.",
            "To verify, run `cargo test`.",
            "Next, I will add `src/cli.rs`.",
            "`utils.py` already handles this case.",
            "12 passed, 2 failed",
        ] {
            assert_eq!(claims(honest), [], "{honest}");
        }
    }

    #[test]
    fn reads_test_command_and_commit_claims() {
        assert_eq!(
            claims("All 14 tests pass."),
            [Claim::TestsPass {
                said: "tests pass".to_owned()
            }]
        );
        assert!(
            claims("I ran `cargo clippy` and it is clean.").contains(&Claim::Ran {
                command: "cargo clippy".to_owned(),
                succeeded: true
            })
        );
        assert_eq!(
            claims("Committed the fix."),
            [Claim::Committed {
                said: "Committed".to_owned()
            }]
        );
    }

    /// Each rule of the table reads a claim of its kind from its example and none from its
    /// counterexample; no two rules share an id.
    #[test]
    fn each_rule_reads_its_example_and_not_its_counter() {
        let mut ids = std::collections::HashSet::new();
        for rule in super::super::rules::RULES {
            assert!(ids.insert(rule.id), "{} twice", rule.id);
            let read = super::claims(rule.example);
            assert!(
                read.iter()
                    .any(|c| c.rule == rule && c.claim.kind() == rule.kind),
                "{}: {:?} reads {read:?}",
                rule.id,
                rule.example
            );
            let counter = super::claims(rule.counter);
            assert!(
                counter.iter().all(|c| c.rule != rule),
                "{}: {:?} reads {counter:?}",
                rule.id,
                rule.counter
            );
        }
    }
}
