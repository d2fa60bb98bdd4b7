//! The claims stage's rules as data: each way an answer states a claim is a [`Rule`] with an
//! id, the kind of claim it reads, the pattern it matches, what makes it not apply, and an
//! example of each (a test runs both). Every claim, finding and evidence record names the rule
//! that read it, so a false flag is traced to the row of [`RULES`] that made it. Below the table
//! is the vocabulary the rules read with: the verbs, the words that make a sentence no claim,
//! the programs and file names.

use std::sync::LazyLock;

use regex::Regex;

/// One way an answer states a claim.
#[derive(Debug, PartialEq, Eq)]
pub struct Rule {
    /// Its id, on claims, findings and evidence: `file-verb`.
    pub id: &'static str,
    /// What an answer it reads does, in a few words (reports, SARIF).
    pub title: &'static str,
    /// The kind of claim it reads (a finding's name): `file`, `tests`, `command`, `commit`.
    pub kind: &'static str,
    /// What it matches, in words (the patterns below it names).
    pub reads: &'static str,
    /// What makes a match no claim.
    pub unless: &'static [Unless],
    /// An answer it reads a claim from.
    pub example: &'static str,
    /// An answer like it that it reads no claim from (one of `unless` applies).
    pub counter: &'static str,
}

/// What makes a rule's match no claim.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unless {
    /// A negation, modal, condition or piece of advice before the verb ([`NOT_ASSERTED`]):
    /// "could not", "should", "if", "next, I will".
    NotAsserted,
    /// The clause is a question.
    Question,
    /// The verb is an adjective ([`ADJECTIVE_MAKERS`]): "the removed alias".
    Adjective,
    /// The path is where something came from ([`SOURCE_MARKERS`]): "updated from notes.md".
    Source,
    /// The word names no file: `branch fix/x`, `dependency a.b/c`.
    NoFile,
    /// The passive is of something else than the path: "`x.py`'s import was removed" claims no
    /// write of another file.
    NotTheSubject,
    /// A failure is reported in the same clause or line ([`FAILED_TOO`]): "12 passed, 2 failed",
    /// "12 of 14".
    FailedToo,
    /// The file is said to be unchanged, or its change is only planned.
    Unchanged,
    /// "not committed yet".
    Yet,
}

impl Unless {
    /// What it is, in a few words (SARIF's rule descriptions).
    pub fn says(self) -> &'static str {
        match self {
            Unless::NotAsserted => "a negation, modal, condition or advice comes before the verb",
            Unless::Question => "the clause is a question",
            Unless::Adjective => "the verb is an adjective (\"the removed alias\")",
            Unless::Source => "the path is where something came from (\"updated from notes.md\")",
            Unless::NoFile => "the word names no file (`branch fix/x`)",
            Unless::NotTheSubject => "the passive is of something other than the path",
            Unless::FailedToo => "a failure is reported on the same line (\"12 passed, 2 failed\")",
            Unless::Unchanged => "the file is said to be unchanged, or its change only planned",
            Unless::Yet => "it is \"not committed yet\"",
        }
    }
}

/// A file written: a past-tense verb of change ([`WRITE_VERB`]), then the paths it names.
pub const FILE_VERB: Rule = Rule {
    id: "file-verb",
    title: "claims to have written a file",
    kind: "file",
    reads: "a past-tense verb of change (WRITE_VERB), then the paths it names",
    unless: &[
        Unless::NotAsserted,
        Unless::Question,
        Unless::Adjective,
        Unless::Source,
        Unless::NoFile,
    ],
    example: "Created `hello.txt` with the greeting.",
    counter: "I have not created `hello.txt` yet.",
};
/// A file written, said in the passive: "`hello.txt` was created".
pub const FILE_PASSIVE: Rule = Rule {
    id: "file-passive",
    title: "says a file was written",
    kind: "file",
    reads: "a path, then a passive of a verb of change (PASSIVE_AUXILIARIES, WRITE_VERB)",
    unless: &[Unless::NotAsserted, Unless::NotTheSubject, Unless::Question],
    example: "`hello.txt` was created.",
    counter: "`hello.txt` was not created.",
};
/// A file renamed or moved: the first path gone, the second there.
pub const FILE_RENAMED: Rule = Rule {
    id: "file-renamed",
    title: "claims to have renamed or moved a file",
    kind: "file",
    reads: "`renamed`/`moved` (WRITE_VERB), then exactly two paths",
    unless: &[Unless::NotAsserted, Unless::Source],
    example: "Renamed `a.go` to `b.go`.",
    counter: "Renamed the helper in `a.go`.",
};
/// A file listed under a header that announces changes ("Files changed:").
pub const FILE_LISTED: Rule = Rule {
    id: "file-listed",
    title: "lists a file as changed",
    kind: "file",
    reads: "a list item that starts with a path, under a header that announces changes",
    unless: &[Unless::NotAsserted, Unless::Unchanged],
    example: "Files changed:\n- `src/a.rs`\n",
    counter: "Files changed:\n- `src/a.rs` would get a new parser\n",
};
/// A path as a label: `src/a.rs: adds parse()`, `**src/a.rs** — updated`.
pub const FILE_LABELLED: Rule = Rule {
    id: "file-labelled",
    title: "labels a file as changed",
    kind: "file",
    reads: "a clause that starts with a path and `:`, `—`, `-` or `->`, then a verb of change (WRITE_VERB, LABEL_VERB)",
    unless: &[Unless::NotAsserted],
    example: "- `src/a.rs`: adds `parse()`\n",
    counter: "- `src/a.rs`: should add `parse()`\n",
};
/// A table row: its first cell the file, another what happened to it.
pub const FILE_TABLE_ROW: Rule = Rule {
    id: "file-table-row",
    title: "tabulates a file as changed",
    kind: "file",
    reads: "a table row whose first cell is a path and another says what changed (WRITE_VERB, LABEL_VERB)",
    unless: &[Unless::NotAsserted, Unless::Unchanged],
    example: "| File | Change |\n|---|---|\n| `x.go` | Added handler |\n",
    counter: "| File | Change |\n|---|---|\n| `x.go` | unchanged |\n",
};
/// The tests pass ([`TESTS_PASS`]).
pub const TESTS_PASS_RULE: Rule = Rule {
    id: "tests-pass",
    title: "says the tests pass",
    kind: "tests",
    reads: "words that say the tests pass (TESTS_PASS)",
    unless: &[Unless::NotAsserted, Unless::FailedToo, Unless::Question],
    example: "All 14 tests pass.",
    counter: "12 passed, 2 failed.",
};
/// A command run ([`RAN`]), and whether it is said to have gone well ([`SUCCEEDED`]).
pub const COMMAND_RAN: Rule = Rule {
    id: "command-ran",
    title: "claims to have run a command",
    kind: "command",
    reads: "`ran`/`executed` (RAN), then a command in code or a known program (PROGRAMS)",
    unless: &[Unless::NotAsserted, Unless::Question],
    example: "I ran `cargo clippy` and it is clean.",
    counter: "You should run `cargo clippy` next.",
};
/// A command in code said to have gone well ([`WENT_WELL`]): "`cargo build` succeeds".
pub const COMMAND_WENT_WELL: Rule = Rule {
    id: "command-went-well",
    title: "says a command went well",
    kind: "command",
    reads: "a command in code followed by words of success (WENT_WELL), or after them in parentheses (SUCCEEDED)",
    unless: &[Unless::NotAsserted, Unless::FailedToo],
    example: "`cargo build` succeeds.",
    counter: "`cargo build` still fails.",
};
/// A commit made ([`COMMITTED`]).
pub const COMMIT_VERB: Rule = Rule {
    id: "commit-verb",
    title: "claims a commit",
    kind: "commit",
    reads: "a verb of committing (COMMITTED)",
    unless: &[Unless::NotAsserted, Unless::Yet, Unless::Question],
    example: "Committed the fix.",
    counter: "The fix is not committed yet.",
};
/// A commit named in a table row labelled `Commit`.
pub const COMMIT_LABEL: Rule = Rule {
    id: "commit-label",
    title: "tabulates a commit",
    kind: "commit",
    reads: "a table row whose first cell is `Commit` (or `Committed`, `git commit`) and another names it",
    unless: &[Unless::NotAsserted, Unless::Unchanged],
    example: "| Step | Result |\n|---|---|\n| Commit | `1a2b3c4` fix: parse headers |\n",
    counter: "| Step | Result |\n|---|---|\n| Commit | — |\n",
};
/// Aider's line naming the commit it made: "Commit 1a2b3c4 fix: …".
pub const COMMIT_HASH_LINE: Rule = Rule {
    id: "commit-hash-line",
    title: "names a commit made",
    kind: "commit",
    reads: "a line that starts with `Commit`/`Committed` and a hash of 7 to 40 hex digits",
    unless: &[],
    example: "Commit 1a2b3c4 fix: parse headers",
    counter: "Commit message: fix parse headers",
};

/// The title of the rule `id` and what it reads and when not (SARIF's rule descriptions), if
/// it is one.
pub fn describe(id: &str) -> Option<(&'static str, String)> {
    let rule = RULES.iter().find(|rule| rule.id == id)?;
    let mut reads = rule.reads.to_owned();
    if !rule.unless.is_empty() {
        let unless: Vec<&str> = rule.unless.iter().map(|u| u.says()).collect();
        reads.push_str("; not when ");
        reads.push_str(&unless.join(", or "));
    }
    Some((rule.title, reads))
}

/// Every rule, in the order an answer is read with them.
pub const RULES: [&Rule; 12] = [
    &FILE_TABLE_ROW,
    &FILE_LISTED,
    &FILE_LABELLED,
    &FILE_PASSIVE,
    &FILE_RENAMED,
    &FILE_VERB,
    &TESTS_PASS_RULE,
    &COMMAND_RAN,
    &COMMAND_WENT_WELL,
    &COMMIT_LABEL,
    &COMMIT_HASH_LINE,
    &COMMIT_VERB,
];

/// Past-tense verbs of changing a file, and the aider/codex summary forms.
pub(super) static WRITE_VERB: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?i)(?-u:\b)(created|wrote|written|re-?wrote|rewritten|added|updated|modified|edited|changed|fixed|implemented|refactored|replaced|renamed|moved|saved|generated|introduced|extended|adjusted|patched|populated|documented|resolved|bumped|upgraded|migrated|converted|ported|deleted|removed|applied (?:the )?edits? to|new file)(?-u:\b)",
    )
    .expect("the write-verb pattern compiles")
});

/// Present-tense verbs a summary line uses after a path label (`- src/a.rs: adds parse()`).
pub(super) static LABEL_VERB: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?i)^\s*(adds|creates|updates|modifies|edits|changes|fixes|implements|refactors|replaces|removes|deletes|introduces|extends|new)(?-u:\b)",
    )
    .expect("the label-verb pattern compiles")
});

/// Words before a claim that make it no claim: negation, modality, condition, advice,
/// intention, quotation of the task.
pub(super) static NOT_ASSERTED: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?i)(?-u:\b)(not|no|none|nothing|nobody|never|n't|cannot|since|because|which|where|when|whereas|until|unable|without|will|would|should|could|can|may|might|must|need|needs|going to|plan|planned|intend|let me|let's|if|unless|whether|recommend|suggest|consider|try|tried|attempted|want|wanted|meant|supposed|expected|please|once|todo|next|verify|ensure|make sure|did you|do you|to be|instead of|rather than)(?-u:\b)|n't(?-u:\b)|(?-u:\b)won't(?-u:\b)|'ll(?-u:\b)",
    )
    .expect("the non-assertion pattern compiles")
});

/// Says the tests pass.
pub(super) static TESTS_PASS: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?i)(?-u:\b)(tests?|test suite|suites?|specs?|pytest|jest|vitest|mocha|rspec|unittest|cargo test|go test|npm test)(?-u:\b)[^;!?]{0,60}?(?-u:\b)(pass|passes|passed|passing|succeed|succeeds|succeeded|green|ok)(?-u:\b)|(?-u:\b)(?:verified|confirmed|checked|tested)\s+(?:it\s+|this\s+|the (?:fix|change)\s+)?(?:with|by running|using|via)\s+`?(?:pytest|jest|vitest|mocha|rspec|cargo test|go test|npm test|the tests?|the test suite)(?-u:\b)|(?-u:\b)pass(?:es|ed)?,? including the (?:full |whole |entire )?test suite(?-u:\b)|(?-u:\b)\d+\s+(?:tests?\s+)?passed(?-u:\b)|(?-u:\b)passing (?:all|every) tests?(?-u:\b)|(?-u:\b)(?:ran|executed|re-?ran) (?:the )?(?:tests?|test suite|test script|specs?)(?-u:\b)[^;!?]{0,40}?(?-u:\b)(?:exited (?:0|cleanly)|cleanly|succeeded|green)(?-u:\b)|(?-u:\b)(?:ci|the build|the suite|test suite|all checks)\s+(?:is|are|now)?\s*(?:green|passing|happy)(?-u:\b)|(?-u:\b)reports? (?:0|no|zero) (?:test )?failures(?-u:\b)|(?-u:\b)0 failures(?-u:\b)|(?-u:\b)pass(?:es|ed)? (?:all|every) (?:the )?(?:\d+ )?tests?(?-u:\b)",
    )
    .expect("the tests-pass pattern compiles")
});

/// Says something failed, in the same clause as a pass (a mixed report is not a pass claim).
pub(super) static FAILED_TOO: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?i)(?-u:\b)[1-9]\d*\s+(?:tests?\s+)?(?:failed|failing|failures?|errors?)(?-u:\b)|(?-u:\b)(fail|fails|failed|failing|broken|red)(?-u:\b)|(?-u:\b)except(?-u:\b)|(?-u:\b)but(?-u:\b)",
    )
    .expect("the failure pattern compiles")
});

/// Says a command was run: `ran`, `executed`, `have run`.
pub(super) static RAN: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?i)(?-u:\b)(ran|re-?ran|executed|invoked|(?:have|'ve|has been|was|were) run)(?-u:\b)",
    )
    .expect("the ran pattern compiles")
});

/// Says a command succeeded, after its backticked text.
pub(super) static SUCCEEDED: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?i)(?-u:\b)(succeeds|succeeded|successful(?:ly)?|passes|passed|is clean|are clean|was clean|clean|completes|completed|exits? 0|exited 0|builds|built|compiles|compiled|no (?:errors|warnings|issues|problems)|0 errors|green|works|ok)(?-u:\b)",
    )
    .expect("the success pattern compiles")
});

/// Says a commit was made.
pub(super) static COMMITTED: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?i)(?-u:\b)(committed|commited|(?:created|made|added) (?:a |the |one |two |\d+ )?(?:new )?commits?|git commit -m|pushed (?:a |the )?commit|amended the commit|pushed (?:the |my |these |this |our |all )?(?:changes|fix|branch|commits?|code|work|it|everything)|pushed (?:it |them )?to (?:origin|the remote|remote|main|master|the branch|github|`))(?-u:\b)",
    )
    .expect("the commit pattern compiles")
});

/// Programs a command claim may name without backticks.
pub(super) const PROGRAMS: &[&str] = &[
    "cargo",
    "npm",
    "npx",
    "yarn",
    "pnpm",
    "go",
    "python",
    "python3",
    "pytest",
    "make",
    "ruff",
    "eslint",
    "black",
    "mypy",
    "tsc",
    "gradle",
    "mvn",
    "rustfmt",
    "prettier",
    "flake8",
    "pylint",
    "node",
    "deno",
    "bun",
    "jest",
    "vitest",
    "mocha",
    "rspec",
    "bundle",
    "rake",
    "dotnet",
    "cmake",
    "ctest",
    "tox",
    "pip",
    "uv",
    "poetry",
    "clippy",
    "gofmt",
    "golangci-lint",
    "isort",
];

/// File extensions a bare word must have to be read as a path.
pub(super) const EXTENSIONS: &[&str] = &[
    "rs",
    "py",
    "pyi",
    "ts",
    "tsx",
    "js",
    "jsx",
    "mjs",
    "cjs",
    "go",
    "java",
    "kt",
    "kts",
    "rb",
    "c",
    "h",
    "cc",
    "cpp",
    "hpp",
    "cxx",
    "cs",
    "swift",
    "php",
    "md",
    "txt",
    "json",
    "jsonl",
    "yaml",
    "yml",
    "toml",
    "ini",
    "cfg",
    "conf",
    "sh",
    "bash",
    "zsh",
    "html",
    "htm",
    "css",
    "scss",
    "sass",
    "less",
    "sql",
    "xml",
    "csv",
    "tsv",
    "lock",
    "env",
    "proto",
    "gradle",
    "vue",
    "svelte",
    "dart",
    "ex",
    "exs",
    "erl",
    "lua",
    "pl",
    "r",
    "scala",
    "tf",
    "mk",
    "rst",
    "adoc",
    "ipynb",
    "star",
    "graphql",
    "gql",
    "svg",
    "png",
    "jpg",
    "gif",
    "pdf",
    "db",
    "sqlite",
    "log",
    "patch",
    "diff",
    "dockerfile",
    "bat",
    "ps1",
    "zig",
    "nim",
    "ml",
    "hs",
    "clj",
    "elm",
    "tex",
];

/// File names without an extension that are read as paths when backticked or bare.
pub(super) const BARE_NAMES: &[&str] = &[
    "Makefile",
    "Dockerfile",
    "Gemfile",
    "Rakefile",
    "Procfile",
    "Justfile",
    "LICENSE",
    "README",
    "CHANGELOG",
    "Containerfile",
];

/// A word every claim needs one of (a superset of the patterns' own words): an answer without
/// any — a JSON object, a plain explanation — is passed over in one scan.
pub(super) static TRIGGER: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?i)creat|wrot|writ|add|updat|modif|edit|chang|fix|implement|refactor|replac|renam|mov|sav|generat|introduc|extend|adjust|patch|populat|document|resolv|bump|upgrad|migrat|convert|port|delet|remov|appl|made|new|pass|green|ok|ran|run|execut|invok|commit|push|succe|clean|fail|happy|built|build|compil|exit|work|verif|confirm|check|test|report|show|return|finish|warning|error|issue|problem|complet|0 |no ",
    )
    .expect("the trigger pattern compiles")
});

/// Words right before a write verb that make it an adjective: "the removed alias".
pub(super) const ADJECTIVE_MAKERS: &[&str] = &[
    "the",
    "a",
    "an",
    "its",
    "this",
    "that",
    "these",
    "those",
    "newly",
    "any",
    "as",
    "already",
    "previously",
    "originally",
    "auto",
    "automatically",
];

/// Auxiliaries of the passive: `hello.txt was created`, `src/a.rs has been updated`.
pub(super) const PASSIVE_AUXILIARIES: &[&str] = &["was", "were", "been", "got"];

/// Words after which a path is where something came from, not what was written: "updated
/// main.rs using the helper from utils.rs" (but "removed x from y" changes y).
pub(super) const SOURCE_MARKERS: &[&str] = &[
    "from",
    "using",
    "following",
    "with",
    "via",
    "by",
    "after",
    "matching",
    "mirroring",
    "based",
    "according",
    "reported",
    "described",
    "mentioned",
    "noted",
    "listed",
    "shown",
    "specified",
    "defined",
    "found",
    "seen",
    "documented",
];

/// Words that take a clause on to other things, so that the verb's object is not after them:
/// "fixed the bug, as described in notes.md".
pub(super) const CLAUSE_TURNS: &[&str] = &[
    "as", "like", "than", "per", "see", "is", "are", "was", "were", "which", "that", "because",
    "since", "so", "but", "while", "when", "where", "if",
];

/// Words after a program's name that are not its subcommand: `ran cargo and …`, `ran make
/// locally`.
pub(super) const NOT_SUBCOMMANDS: &[&str] = &[
    "and", "on", "in", "to", "with", "again", "for", "after", "before", "which", "that", "locally",
    "once", "is", "was", "reports", "passes", "succeeds",
];

/// What a command that went well is said to do, right after it: "`cargo build` succeeds",
/// "`make test` — all green".
pub(super) const WENT_WELL: &[&str] = &[
    "succeed",
    "pass",
    "is clean",
    "are clean",
    "was clean",
    "clean",
    "runs clean",
    "completed",
    "completes",
    "exits 0",
    "exited 0",
    "builds",
    "compiles",
    "now passes",
    "now succeeds",
    "is green",
    "reports no",
    "shows no",
    "returns 0",
    "finished without",
    "ok",
    "no warnings",
    "no errors",
    "0 errors",
    "all green",
    "green",
    "all pass",
    "passes",
    "passed",
    "succeeded",
    "works",
];
