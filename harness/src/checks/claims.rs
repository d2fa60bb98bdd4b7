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

use std::collections::HashMap;
use std::path::Path;
use std::sync::LazyLock;

use harness_hooks::{Changes, Evidence, EvidenceResult, ToolCall, ToolResult};
use regex::Regex;
use serde_json::Value;

use super::{Check, Subject};
use crate::delegate::BoxFuture;
use crate::error::{Error, Result};
use crate::events::RunEvent;
use crate::verdict::{Finding, Source};

/// What an unsupported claim does (`claims:`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ClaimsMode {
    /// A blocking finding: the delegate is told and retries (the default).
    #[default]
    Blocking,
    /// An advisory finding: said, never held against the attempt.
    Advisory,
    /// The answer is not read for claims.
    Off,
}

impl ClaimsMode {
    /// Reads `claims:` as written in `file`.
    ///
    /// # Errors
    /// [`ErrorKind::Config`](crate::ErrorKind::Config) for an unknown value.
    pub(crate) fn parse(file: &str, value: &str) -> Result<Self> {
        match value {
            "blocking" => Ok(ClaimsMode::Blocking),
            "advisory" => Ok(ClaimsMode::Advisory),
            "off" => Ok(ClaimsMode::Off),
            other => Err(Error::config(format!(
                "{file}: `claims` is {other:?}; use `blocking` (the default: an answer claiming work the tool log does not show is sent back), `advisory` (said, not held against it) or `off`"
            ))),
        }
    }
}

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

// ---------------------------------------------------------------------------------------------
// Reading claims

/// Past-tense verbs of changing a file, and the aider/codex summary forms.
static WRITE_VERB: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?i)(?-u:\b)(created|wrote|written|re-?wrote|rewritten|added|updated|modified|edited|changed|fixed|implemented|refactored|replaced|renamed|moved|saved|generated|introduced|extended|adjusted|patched|populated|documented|resolved|bumped|upgraded|migrated|converted|ported|deleted|removed|applied (?:the )?edits? to|new file)(?-u:\b)",
    )
    .expect("the write-verb pattern compiles")
});

/// Present-tense verbs a summary line uses after a path label (`- src/a.rs: adds parse()`).
static LABEL_VERB: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?i)^\s*(adds|creates|updates|modifies|edits|changes|fixes|implements|refactors|replaces|removes|deletes|introduces|extends|new)(?-u:\b)",
    )
    .expect("the label-verb pattern compiles")
});

/// Words before a claim that make it no claim: negation, modality, condition, advice,
/// intention, quotation of the task.
static NOT_ASSERTED: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?i)(?-u:\b)(not|no|none|nothing|nobody|never|n't|cannot|since|because|which|where|when|whereas|until|unable|without|will|would|should|could|can|may|might|must|need|needs|going to|plan|planned|intend|let me|let's|if|unless|whether|recommend|suggest|consider|try|tried|attempted|want|wanted|meant|supposed|expected|please|once|todo|next|verify|ensure|make sure|did you|do you|to be|instead of|rather than)(?-u:\b)|n't(?-u:\b)|(?-u:\b)won't(?-u:\b)|'ll(?-u:\b)",
    )
    .expect("the non-assertion pattern compiles")
});

/// Says the tests pass.
static TESTS_PASS: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?i)(?-u:\b)(tests?|test suite|suites?|specs?|pytest|jest|vitest|mocha|rspec|unittest|cargo test|go test|npm test)(?-u:\b)[^;!?]{0,60}?(?-u:\b)(pass|passes|passed|passing|succeed|succeeds|succeeded|green|ok)(?-u:\b)|(?-u:\b)(?:verified|confirmed|checked|tested)\s+(?:it\s+|this\s+|the (?:fix|change)\s+)?(?:with|by running|using|via)\s+`?(?:pytest|jest|vitest|mocha|rspec|cargo test|go test|npm test|the tests?|the test suite)(?-u:\b)|(?-u:\b)pass(?:es|ed)?,? including the (?:full |whole |entire )?test suite(?-u:\b)|(?-u:\b)\d+\s+(?:tests?\s+)?passed(?-u:\b)|(?-u:\b)passing (?:all|every) tests?(?-u:\b)|(?-u:\b)(?:ran|executed|re-?ran) (?:the )?(?:tests?|test suite|test script|specs?)(?-u:\b)[^;!?]{0,40}?(?-u:\b)(?:exited (?:0|cleanly)|cleanly|succeeded|green)(?-u:\b)|(?-u:\b)(?:ci|the build|the suite|test suite|all checks)\s+(?:is|are|now)?\s*(?:green|passing|happy)(?-u:\b)|(?-u:\b)reports? (?:0|no|zero) (?:test )?failures(?-u:\b)|(?-u:\b)0 failures(?-u:\b)|(?-u:\b)pass(?:es|ed)? (?:all|every) (?:the )?(?:\d+ )?tests?(?-u:\b)",
    )
    .expect("the tests-pass pattern compiles")
});

/// Says something failed, in the same clause as a pass (a mixed report is not a pass claim).
static FAILED_TOO: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?i)(?-u:\b)[1-9]\d*\s+(?:tests?\s+)?(?:failed|failing|failures?|errors?)(?-u:\b)|(?-u:\b)(fail|fails|failed|failing|broken|red)(?-u:\b)|(?-u:\b)except(?-u:\b)|(?-u:\b)but(?-u:\b)",
    )
    .expect("the failure pattern compiles")
});

/// Says a command was run: `ran`, `executed`, `have run`.
static RAN: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?i)(?-u:\b)(ran|re-?ran|executed|invoked|(?:have|'ve|has been|was|were) run)(?-u:\b)",
    )
    .expect("the ran pattern compiles")
});

/// Says a command succeeded, after its backticked text.
static SUCCEEDED: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?i)(?-u:\b)(succeeds|succeeded|successful(?:ly)?|passes|passed|is clean|are clean|was clean|clean|completes|completed|exits? 0|exited 0|builds|built|compiles|compiled|no (?:errors|warnings|issues|problems)|0 errors|green|works|ok)(?-u:\b)",
    )
    .expect("the success pattern compiles")
});

/// Says a commit was made.
static COMMITTED: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?i)(?-u:\b)(committed|commited|(?:created|made|added) (?:a |the |one |two |\d+ )?(?:new )?commits?|git commit -m|pushed (?:a |the )?commit|amended the commit|pushed (?:the |my |these |this |our |all )?(?:changes|fix|branch|commits?|code|work|it|everything)|pushed (?:it |them )?to (?:origin|the remote|remote|main|master|the branch|github|`))(?-u:\b)",
    )
    .expect("the commit pattern compiles")
});

/// Programs a command claim may name without backticks.
const PROGRAMS: &[&str] = &[
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
const EXTENSIONS: &[&str] = &[
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
const BARE_NAMES: &[&str] = &[
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

/// One word of a clause: its text (cleaned) and where it starts.
#[derive(Debug, Clone)]
struct Word<'a> {
    raw: &'a str,
    start: usize,
    /// It was in backticks.
    code: bool,
}

/// Splits a clause into words, keeping backticked spans whole.
fn words(clause: &str) -> Vec<Word<'_>> {
    let mut out = Vec::new();
    let bytes = clause.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        if c == b'`' {
            let end = clause[i + 1..]
                .find('`')
                .map_or(clause.len(), |e| i + 1 + e);
            out.push(Word {
                raw: &clause[i + 1..end],
                start: i,
                code: true,
            });
            i = end + 1;
        } else if c.is_ascii_whitespace() {
            i += 1;
        } else {
            let end = clause[i..]
                .find(|ch: char| ch.is_whitespace() || ch == '`')
                .map_or(clause.len(), |e| i + e);
            out.push(Word {
                raw: &clause[i..end],
                start: i,
                code: false,
            });
            i = end;
        }
    }
    out
}

/// The path a word names, cleaned (quotes, emphasis, trailing punctuation, line numbers), or
/// `None` when it does not look like one.
fn as_path(word: &Word<'_>) -> Option<String> {
    // `.dict()`, `parse(x)`: code, not a file.
    if word.raw.contains('(') && !word.raw.starts_with('(') {
        return None;
    }
    // Punctuation glued on either side, as often as it comes (`hello.txt).`, `>>notes.txt`).
    let mut text = word.raw;
    loop {
        let trimmed = text
            .trim_matches(|c: char| "*_\"'()[]{}<>,;:!?|&…".contains(c))
            .trim_end_matches('.');
        if trimmed == text {
            break;
        }
        text = trimmed;
    }
    if text.is_empty()
        || text.contains("://")
        || text.contains(char::is_whitespace)
        || text.contains('(')
        || text.starts_with('-')
        || text.starts_with('@')
        || text.starts_with('$')
        || text.contains('=')
    {
        return None;
    }
    // `src/a.rs:42`, `src/a.rs:42:7`, `src/a.rs#L42`.
    let text = text.split_once("#L").map_or(text, |(p, _)| p);
    let text = match text.split_once(':') {
        Some((p, rest)) if rest.chars().all(|c| c.is_ascii_digit() || c == ':') => p,
        Some(_) => return None,
        None => text,
    };
    let name = text
        .trim_end_matches('/')
        .rsplit('/')
        .next()
        .unwrap_or(text);
    let extension = name
        .rsplit_once('.')
        .map(|(stem, ext)| (stem, ext.to_ascii_lowercase()));
    let known_extension = extension.as_ref().is_some_and(|(stem, ext)| {
        (!stem.is_empty() || name.starts_with('.')) && EXTENSIONS.contains(&ext.as_str())
    });
    let dotfile = name.starts_with('.')
        && name.len() > 1
        && name[1..]
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c));
    let bare = BARE_NAMES.iter().any(|b| name.eq_ignore_ascii_case(b))
        || name.starts_with("README.")
        || name.starts_with("LICENSE");
    let has_slash = text.contains('/');
    // `github.com/org/repo`, `example.org/x`: a module or a URL without its scheme.
    let first = text.split('/').next().unwrap_or_default();
    if has_slash
        && first.contains('.')
        && first != "."
        && first != ".."
        && !first.starts_with('.')
        && !first
            .rsplit_once('.')
            .is_some_and(|(_, ext)| EXTENSIONS.contains(&ext.to_ascii_lowercase().as_str()))
    {
        return None;
    }
    let looks = known_extension
        || bare
        || (dotfile && word.code)
        || (has_slash && (word.code || text.ends_with('/')) && !text.starts_with("//"))
        || (has_slash && extension.is_some() && !text.ends_with('.'));
    // Versions, numbers, domains in prose are not paths.
    let numeric = text.chars().all(|c| c.is_ascii_digit() || c == '.');
    (looks && !numeric).then(|| text.trim_start_matches("./").to_owned())
}

/// Splits an answer into clauses: code blocks dropped, lines split at sentence ends and at
/// the conjunctions that start a new assertion. Each clause keeps whether it is a list item
/// under a header that announces changes ("Files changed:"), and that header's verb.
fn clauses(answer: &str) -> Vec<Clause> {
    let mut out = Vec::new();
    let mut in_code = false;
    let mut context: Option<String> = None;
    for line in answer.lines() {
        let trimmed = line.trim();
        if trimmed.starts_with("```") || trimmed.starts_with("~~~") {
            in_code = !in_code;
            continue;
        }
        if in_code || trimmed.is_empty() {
            continue;
        }
        let item = list_item(trimmed);
        let table = trimmed.starts_with('|');
        if table && trimmed.chars().all(|c| "|-: ".contains(c)) {
            continue;
        }
        let header = item.is_none()
            && !table
            && (trimmed.ends_with(':') || trimmed.starts_with('#') || is_bold_line(trimmed));
        if header {
            context = announces_changes(trimmed);
            if context.is_some() {
                continue;
            }
        } else if item.is_none() && !table {
            context = None;
        }
        let body = item.unwrap_or(trimmed);
        if table {
            let cells: Vec<&str> = trimmed
                .trim_matches('|')
                .split('|')
                .map(str::trim)
                .collect();
            out.push(Clause {
                text: cells.join(" — "),
                label: cells.first().map(|c| (*c).to_owned()),
                context: context.clone(),
                tail: String::new(),
                line: trimmed.to_owned(),
            });
            continue;
        }
        let pieces = sentences(body);
        for (i, sentence) in pieces.iter().enumerate() {
            out.push(Clause {
                text: (*sentence).to_owned(),
                label: None,
                context: if item.is_some() {
                    context.clone()
                } else {
                    None
                },
                tail: pieces
                    .get(i + 1)
                    .map(|p| (*p).to_owned())
                    .unwrap_or_default(),
                line: body.to_owned(),
            });
        }
    }
    out
}

/// One clause of an answer.
#[derive(Debug)]
struct Clause {
    text: String,
    /// A table row's first cell.
    label: Option<String>,
    /// The verb of a header announcing changes, for the items listed under it.
    context: Option<String>,
    /// The clause after it on its line (where "— clean" may follow a command).
    tail: String,
    /// Its whole line (where "2 still fail" may follow "12 tests pass").
    line: String,
}

fn is_bold_line(line: &str) -> bool {
    line.starts_with("**") && line.trim_end_matches(':').ends_with("**")
}

/// The text of a list item (`- x`, `* x`, `1. x`), or `None`.
fn list_item(line: &str) -> Option<&str> {
    for bullet in ["- ", "* ", "+ ", "• "] {
        if let Some(rest) = line.strip_prefix(bullet) {
            return Some(rest.trim_start().trim_start_matches("[x] "));
        }
    }
    let digits = line.find(|c: char| !c.is_ascii_digit())?;
    if digits > 0 && (line[digits..].starts_with(". ") || line[digits..].starts_with(") ")) {
        return Some(line[digits + 2..].trim_start());
    }
    None
}

/// Whether a header line announces a list of changed files, and with which verb.
fn announces_changes(header: &str) -> Option<String> {
    static ANNOUNCES: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(
            r"(?i)(?-u:\b)(files? (?:created|added|changed|modified|updated|edited|written|deleted|removed)|(?:created|added|changed|modified|updated|edited|new|deleted|removed) files?|changes (?:made|i made)|(?:made|applied) the following (?:changes|edits)|following (?:changes|edits)|summary of (?:the )?changes|changes:|changed:|created:|modified:|updated:|deleted:|removed:|added:)",
        )
        .expect("the header pattern compiles")
    });
    static BARE: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"(?i)^[#*\s]*(changes|changes made|files changed|changed files|what (?:i )?changed|edits)[*:\s]*$")
            .expect("the bare header pattern compiles")
    });
    if BARE.is_match(header) {
        return Some("changed".to_owned());
    }
    if header.ends_with(':')
        && let Some(m) = WRITE_VERB.find(header)
        && asserted(&header[..m.start()])
        && !header[m.end()..].contains('`')
    {
        return Some(m.as_str().to_ascii_lowercase());
    }
    let found = ANNOUNCES.find(header)?;
    if NOT_ASSERTED.is_match(&header[..found.start()]) {
        return None;
    }
    let lower = found.as_str().to_ascii_lowercase();
    Some(
        if lower.contains("delet") || lower.contains("remov") {
            "deleted"
        } else if lower.contains("creat") || lower.contains("added") || lower.contains("new") {
            "created"
        } else {
            "changed"
        }
        .to_owned(),
    )
}

/// Splits text at sentence ends and at the words that start a new assertion.
fn sentences(text: &str) -> Vec<&str> {
    static BREAK: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(
            r"(?i)[.!?](?:\s+|$)|;\s+|,?\s+(?-u:\b)but(?-u:\b)\s+|,\s+(?:however|although|though|while|whereas|so)(?-u:\b)\s*|\s+—\s+|\s+--\s+|\s+(?-u:\b)although(?-u:\b)\s+",
        )
        .expect("the sentence pattern compiles")
    });
    let mut out = Vec::new();
    let mut last = 0;
    // Backticks before the current match, counted as the matches go (linear, not per match).
    let (mut ticks, mut counted) = (0usize, 0usize);
    for m in BREAK.find_iter(text) {
        ticks += text[counted..m.start()].matches('`').count();
        counted = m.start();
        // Never inside a code span: `cargo clippy -- -D warnings` is one command.
        if ticks % 2 == 1 {
            continue;
        }
        // A dot inside a word (`main.rs`, `e.g.`) is no sentence end: require the break to be
        // followed by space or the end, which the pattern does; and skip dots after one letter.
        let before = &text[last..m.start()];
        if m.as_str().starts_with('.') && before.ends_with(|c: char| c.is_ascii_digit()) {
            continue;
        }
        let piece = text[last..m.end()].trim();
        if !piece.is_empty() {
            out.push(piece);
        }
        last = m.end();
    }
    let rest = text[last..].trim();
    if !rest.is_empty() {
        out.push(rest);
    }
    out
}

/// Whether the text before a claim's verb leaves it asserted: no negation, modal, condition or
/// advice among the last words of its own clause (a parenthesis, colon or dash starts one).
fn asserted(before: &str) -> bool {
    let before = last_chars(before, 200);
    let local = before
        .char_indices()
        .rev()
        .find(|(_, c)| "(:—;,".contains(*c))
        .map_or(before, |(at, c)| &before[at + c.len_utf8()..]);
    let words: Vec<&str> = local.split_whitespace().collect();
    let window = words[words.len().saturating_sub(6)..].join(" ");
    !NOT_ASSERTED.is_match(&window)
}

/// Bytes of an answer read for claims, at most: a longer answer is read to here (and the stage
/// says so), which keeps a hostile answer from costing more than a normal one.
pub const MAX_ANSWER_BYTES: usize = 256 * 1024;
/// Bytes of one clause read, at most: claims are sentence-sized.
const MAX_CLAUSE_BYTES: usize = 1024;

/// The longest prefix of `text` of at most `max` bytes that ends on a character boundary.
fn head(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// A word every claim needs one of (a superset of the patterns' own words): an answer without
/// any — a JSON object, a plain explanation — is passed over in one scan.
static TRIGGER: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?i)creat|wrot|writ|add|updat|modif|edit|chang|fix|implement|refactor|replac|renam|mov|sav|generat|introduc|extend|adjust|patch|populat|document|resolv|bump|upgrad|migrat|convert|port|delet|remov|appl|made|new|pass|green|ok|ran|run|execut|invok|commit|push|succe|clean|fail|happy|built|build|compil|exit|work|verif|confirm|check|test|report|show|return|finish|warning|error|issue|problem|complet|0 |no ",
    )
    .expect("the trigger pattern compiles")
});

/// Reads the side-effect claims of an answer (its first [`MAX_ANSWER_BYTES`]).
pub fn claims(answer: &str) -> Vec<Claim> {
    if !TRIGGER.is_match(head(answer, MAX_ANSWER_BYTES)) {
        return Vec::new();
    }
    let mut out: Vec<Claim> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let mut push = |claim: Claim| {
        if seen.insert(claim.clone()) {
            out.push(claim);
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
        if clause.label.as_deref().is_some_and(|l| {
            matches!(
                l.to_ascii_lowercase().trim_matches('*'),
                "commit" | "committed" | "git commit"
            )
        }) && text.len() > clause.label.as_ref().map_or(0, String::len) + 4
        {
            push(Claim::Committed {
                said: text.to_owned(),
            });
        }
        // Aider's "Commit 1a2b3c4 fix: …" line.
        static HASH_LINE: LazyLock<Regex> = LazyLock::new(|| {
            Regex::new(r"(?i)^\W{0,4}commit(?:ted)?\W{1,4}[0-9a-f]{7,40}(?-u:\b)")
                .expect("the commit line pattern compiles")
        });
        if let Some(m) = HASH_LINE.find(text) {
            push(Claim::Committed {
                said: m.as_str().trim().to_owned(),
            });
        }
        if let Some(m) = COMMITTED.find(text)
            && asserted(&text[..m.start()])
            && !text[m.end()..].trim_start().starts_with("yet")
        {
            push(Claim::Committed {
                said: m.as_str().to_owned(),
            });
        }
    }
    out
}

fn file_claim(verb: &str, path: String, object_after_from: bool) -> Claim {
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
fn word_end(word: &Word<'_>, text: &str) -> usize {
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
fn first_word<'w>(words: &'w [Word<'w>]) -> Option<&'w Word<'w>> {
    words
        .iter()
        .find(|w| w.code || !w.raw.chars().all(|c| "*_[]x✅✓".contains(c)))
}

/// The file claims of one clause.
fn file_claims(clause: &Clause, push: &mut impl FnMut(Claim)) {
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
                push(file_claim(verb.as_str(), path, false));
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
            push(Claim::Deleted {
                path: source,
                verb: lower.clone(),
            });
            push(Claim::Wrote {
                path: target,
                verb: lower,
            });
            continue;
        }
        for path in claimed {
            push(file_claim(verb.as_str(), path, from));
        }
    }
}

/// Words right before a write verb that make it an adjective: "the removed alias".
const ADJECTIVE_MAKERS: &[&str] = &[
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
const PASSIVE_AUXILIARIES: &[&str] = &["was", "were", "been", "got"];

/// Words after which a path is where something came from, not what was written: "updated
/// main.rs using the helper from utils.rs" (but "removed x from y" changes y).
const SOURCE_MARKERS: &[&str] = &[
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
const CLAUSE_TURNS: &[&str] = &[
    "as", "like", "than", "per", "see", "is", "are", "was", "were", "which", "that", "because",
    "since", "so", "but", "while", "when", "where", "if",
];

/// A table row: the first cell (the label) is the file, another cell says what happened to it.
fn table_row(clause: &Clause, label: &str, push: &mut impl FnMut(Claim)) {
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
                push(file_claim(&verb, path, false));
            }
        }
    }
}

/// An item under "Files changed:" that starts with a path: the path is claimed with the item's
/// own verb, or the header's. True when the clause is such an item.
fn listed_item(clause: &Clause, words: &[Word<'_>], push: &mut impl FnMut(Claim)) -> bool {
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
        push(file_claim(&verb, path, false));
    }
    true
}

/// A label: `src/a.rs: adds parse()`, `**src/a.rs** — updated`. True when the clause is one
/// that claims.
fn labelled(text: &str, words: &[Word<'_>], push: &mut impl FnMut(Claim)) -> bool {
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
        push(file_claim(m.as_str(), path, object));
        return true;
    }
    if LABEL_VERB.is_match(rest) && !NOT_ASSERTED.is_match(rest) {
        push(file_claim("changed", path, false));
        return true;
    }
    false
}

/// What a write verb in the passive says.
enum Passive {
    /// Not in the passive.
    No,
    /// In the passive, but negated or someone else's deed ("was written by the original
    /// author").
    NotMine,
    /// `x has been created`: the path right before the auxiliary.
    Subject(String),
}

/// Whether `verb` is in the passive, and of which path.
fn passive(text: &str, words: &[Word<'_>], verb: &regex::Match<'_>) -> Passive {
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
fn objects(verb: &str, after: &[&Word<'_>]) -> (Vec<String>, bool) {
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
fn names_no_file(word: &str) -> bool {
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
fn passive_negation_free(before: &str) -> bool {
    let tail: Vec<&str> = before.split_whitespace().rev().take(4).collect();
    !tail.iter().any(|w| NOT_ASSERTED.is_match(w))
        && !before.to_ascii_lowercase().contains("if ")
        && asserted(before)
}

/// A claim that the tests pass, from one clause of `line`.
fn tests_claim(text: &str, line: &str, push: &mut impl FnMut(Claim)) {
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
    push(Claim::TestsPass {
        said: m.as_str().replace('`', "").trim().to_owned(),
    });
}

/// Claims that a command ran (or succeeded), from one clause; `tail` is the rest of its line
/// ("— clean").
fn command_claims(text: &str, tail: &str, push: &mut impl FnMut(Claim)) {
    ran_claims(text, tail, push);
    praised_commands(text, tail, push);
}

/// Words after a program's name that are not its subcommand: `ran cargo and …`, `ran make
/// locally`.
const NOT_SUBCOMMANDS: &[&str] = &[
    "and", "on", "in", "to", "with", "again", "for", "after", "before", "which", "that", "locally",
    "once", "is", "was", "reports", "passes", "succeeds",
];

/// What a command that went well is said to do, right after it: "`cargo build` succeeds",
/// "`make test` — all green".
const WENT_WELL: &[&str] = &[
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

/// `ran cargo clippy`, "I've run `npm run build` and `npm test`": the commands a "ran" names,
/// in code or as a known program and its subcommand, and whether the clause says they
/// succeeded.
fn ran_claims(text: &str, tail: &str, push: &mut impl FnMut(Claim)) {
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
            push(Claim::Ran { command, succeeded });
        }
    }
}

/// "`cargo build` succeeds", "| `cargo fmt --check` | clean |", "builds cleanly (`go build`)":
/// a command in code said to have gone well.
fn praised_commands(text: &str, tail: &str, push: &mut impl FnMut(Claim)) {
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
            push(Claim::Ran {
                command: word.raw.to_owned(),
                succeeded: true,
            });
        }
    }
}

/// The last `n` characters of `text` (all of it when shorter).
fn last_chars(text: &str, n: usize) -> &str {
    let at = text
        .char_indices()
        .rev()
        .nth(n.saturating_sub(1))
        .map_or(0, |(i, _)| i);
    &text[at..]
}

/// The program and subcommand of a command text, when it names a known program (or a
/// script path): `("npm", Some("run build"))`.
fn command_words(text: &str) -> Option<(String, Option<String>)> {
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

// ---------------------------------------------------------------------------------------------
// Checking claims

/// Write tools besides the agent CLIs' (each declares its own: `Adapter::write_tools`):
/// harness's own `write_file`, and names models commonly give such tools — harness refuses a
/// call to one it does not offer, and the claim's finding names that failed write.
const OWN_WRITE_TOOLS: &[&str] = &[
    "write_file",
    "create_file",
    "edit_file",
    "str_replace_editor",
    "str_replace_based_edit_tool",
    "patch",
];
/// The argument keys of a write call that hold its path, besides the agent CLIs'
/// (`Adapter::path_keys`).
const OWN_PATH_KEYS: &[&str] = &["path", "filename", "target_file", "file"];

/// Every write tool and path key: harness's own and every agent CLI's, whichever delegate (or
/// critic, or child) made the call.
static WRITES: std::sync::LazyLock<(Vec<&'static str>, Vec<&'static str>)> =
    std::sync::LazyLock::new(|| {
        let mut tools = OWN_WRITE_TOOLS.to_vec();
        let mut keys = OWN_PATH_KEYS.to_vec();
        for kind in crate::delegate::AgentKind::ALL {
            tools.extend(kind.write_tools());
            keys.extend(kind.path_keys());
        }
        tools.sort_unstable();
        tools.dedup();
        keys.sort_unstable();
        keys.dedup();
        (tools, keys)
    });

/// The simple commands of a command line: each a program and its arguments, with `sh -c`
/// scripts opened, environment assignments and `cd DIR` steps left out. `echo cargo test` is
/// the program `echo`, not a test run.
fn simple_commands(text: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let mut words: Vec<String> = Vec::new();
    let flush = |words: &mut Vec<String>, out: &mut Vec<Vec<String>>| {
        let command: Vec<String> = std::mem::take(words)
            .into_iter()
            .skip_while(|w| w.contains('=') && !w.starts_with('-'))
            .collect();
        match command.first().map(|p| p.rsplit('/').next().unwrap_or(p)) {
            None | Some("cd") => {}
            Some("sh" | "bash" | "zsh") if command.get(1).is_some_and(|f| f == "-c") => {
                if let Some(script) = command.get(2) {
                    out.extend(simple_commands(script));
                }
            }
            Some(_) => out.push(command),
        }
    };
    for word in crate::integrity::shell_words(text) {
        if matches!(word.as_str(), "&&" | "||" | ";" | "|" | "&") {
            flush(&mut words, &mut out);
        } else {
            words.push(word);
        }
    }
    flush(&mut words, &mut out);
    out
}

/// Whether a command line runs tests: a test runner as its program (`pytest`, `jest`,
/// `./test.sh`), or a build tool with a test subcommand (`cargo test`, `go test`, `npm test`,
/// `make check`, `python -m pytest`).
fn is_test_command(text: &str) -> bool {
    simple_commands(text).iter().any(|command| {
        // Wrappers run the program after them: `npx jest`, `bundle exec rspec`, `uv run pytest`.
        let mut at = 0;
        loop {
            let name = command[at].rsplit('/').next().unwrap_or(&command[at]);
            let skip = match name {
                "npx" | "bunx" | "pnpx" | "env" | "time" | "nice" | "xvfb-run" => 1,
                "bundle" | "poetry" | "uv" | "pipenv" | "hatch" | "pdm" | "rye"
                    if command
                        .get(at + 1)
                        .is_some_and(|w| matches!(w.as_str(), "exec" | "run")) =>
                {
                    2
                }
                "timeout" => 2,
                _ => 0,
            };
            if skip == 0 || at + skip >= command.len() {
                break;
            }
            at += skip;
        }
        let command = &command[at..];
        let program = command[0]
            .rsplit('/')
            .next()
            .unwrap_or(&command[0])
            .to_ascii_lowercase();
        let rest: Vec<&str> = command[1..].iter().map(String::as_str).collect();
        let sub = rest
            .iter()
            .find(|w| !w.starts_with('-'))
            .copied()
            .unwrap_or_default();
        match program.as_str() {
            "pytest" | "py.test" | "jest" | "vitest" | "mocha" | "rspec" | "phpunit" | "ctest"
            | "tox" | "nox" | "bats" | "karma" | "ava" | "tap" | "playwright" => true,
            "cargo" => matches!(sub, "test" | "nextest" | "t"),
            "go" | "deno" | "bun" | "dotnet" | "swift" | "mix" | "zig" => sub == "test",
            "npm" | "yarn" | "pnpm" => {
                sub == "test"
                    || sub == "t"
                    || (sub == "run" && rest.iter().any(|w| w.contains("test")))
            }
            "make" | "gmake" => rest
                .iter()
                .any(|w| matches!(*w, "test" | "tests" | "check")),
            "gradle" | "gradlew" | "mvn" | "mvnw" => rest
                .iter()
                .any(|w| w.contains("test") || *w == "check" || *w == "verify"),
            "python" | "python3" => rest
                .windows(2)
                .any(|w| w[0] == "-m" && matches!(w[1], "pytest" | "unittest" | "tox" | "nose2")),
            "sh" | "bash" => rest.first().is_some_and(|f| f.contains("test")),
            // `test -f x` and `[ … ]` are the shell's test, not a test run.
            "test" | "[" | "[[" => false,
            _ => program.contains("test"),
        }
    })
}

/// One tool call as the checks read it: its command text (for shells), the files it wrote,
/// whether it succeeded.
struct Call {
    command: Option<String>,
    wrote: Vec<(String, bool)>,
    ok: bool,
    /// The first line of its result, for messages.
    said: String,
}

/// Whether a command line runs `program` (and `sub`, when given) as a simple command.
fn runs(text: &str, program: &str, sub: Option<&str>) -> bool {
    simple_commands(text).iter().any(|command| {
        let name = command[0].rsplit('/').next().unwrap_or(&command[0]);
        name == program
            && sub.is_none_or(|sub| {
                sub.split_whitespace()
                    .all(|part| command[1..].iter().any(|w| w == part))
            })
    })
}

fn calls(ground: &Ground<'_>) -> Vec<Call> {
    let results: HashMap<&str, &ToolResult> = ground
        .results
        .iter()
        .map(|r| (r.call_id.as_str(), r))
        .collect();
    ground
        .calls
        .iter()
        .map(|call| {
            let result = results.get(call.id.as_str());
            let content = result.map_or("", |r| r.content.as_str());
            // `exit code 1` at the top of a `run_command` result is a failure whatever the flag.
            let exit_failed = content
                .strip_prefix("exit code ")
                .and_then(|r| r.split_whitespace().next())
                .is_some_and(|code| code != "0");
            let ok = result.is_some_and(|r| !r.is_error) && !exit_failed;
            let args = &call.arguments;
            let command = ["command", "argv", "cmd", "script"]
                .iter()
                .find_map(|k| args.get(*k))
                .map(|v| match v {
                    Value::Array(items) => items
                        .iter()
                        .filter_map(Value::as_str)
                        .collect::<Vec<_>>()
                        .join(" "),
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                });
            let mut wrote = Vec::new();
            let name = call.name.to_ascii_lowercase();
            let (write_tools, path_keys) = &*WRITES;
            if write_tools.contains(&name.as_str()) {
                for key in path_keys {
                    if let Some(Value::String(path)) = args.get(*key) {
                        wrote.push((path.clone(), false));
                    }
                }
                if let Some(Value::Array(changes)) = args.get("changes") {
                    for change in changes {
                        if let Some(path) = change.get("path").and_then(Value::as_str) {
                            let delete =
                                change.get("kind").and_then(Value::as_str) == Some("delete");
                            wrote.push((path.to_owned(), delete));
                        }
                    }
                }
                for key in ["input", "patch"] {
                    if let Some(Value::String(patch)) = args.get(key) {
                        for line in patch.lines() {
                            for (prefix, delete) in [
                                ("*** Add File: ", false),
                                ("*** Update File: ", false),
                                ("*** Delete File: ", true),
                                ("+++ b/", false),
                            ] {
                                if let Some(path) = line.strip_prefix(prefix) {
                                    wrote.push((path.trim().to_owned(), delete));
                                }
                            }
                        }
                    }
                }
            }
            Call {
                command,
                wrote,
                ok,
                said: content
                    .lines()
                    .next()
                    .unwrap_or_default()
                    .chars()
                    .take(160)
                    .collect(),
            }
        })
        .collect()
}

/// Path components, with the workspace root taken off an absolute path.
fn components<'p>(path: &'p str, root: &str) -> Vec<&'p str> {
    let path = path.strip_prefix(root).unwrap_or(path);
    path.split('/')
        .filter(|p| !p.is_empty() && *p != ".")
        .collect()
}

/// Whether a claimed path names `actual` (a workspace path): the same path, the one a suffix
/// of the other by whole components, or `actual` inside a claimed directory.
fn names(claimed: &str, actual: &str, root: &str) -> bool {
    let c = components(claimed, root);
    let a = components(actual, root);
    if c.is_empty() || a.is_empty() {
        return false;
    }
    // The claim may name less than the path (`parser.rs` for `src/parser.rs`), never more
    // (`tests/test_api.py` is not `test_api.py`); an absolute claim outside the root is
    // compared by what it ends with.
    if a.ends_with(&c) || (claimed.starts_with('/') && c.ends_with(&a)) {
        return true;
    }
    // A directory: `legacy/` names `legacy/a.py` and `pkg/legacy/b.py`.
    let directory = claimed.ends_with('/') || !c.last().is_some_and(|l| l.contains('.'));
    directory
        && a.windows(c.len())
            .take(a.len() - 1)
            .any(|w| w == c.as_slice())
}

/// Each claim of `claims` that `ground` does not support, with why: the tool log read once.
fn unsupported_all(claims: &[Claim], ground: &Ground<'_>) -> Vec<(Claim, String)> {
    let calls = calls(ground);
    claims
        .iter()
        .filter_map(|c| judge(c, ground, &calls).map(|why| (c.clone(), why)))
        .collect()
}

/// Why `claim` is not supported by `ground` and the attempt's `calls`, or `None` when it is.
fn judge(claim: &Claim, ground: &Ground<'_>, calls: &[Call]) -> Option<String> {
    let root = ground.root.to_string_lossy();
    let root = format!("{}/", root.trim_end_matches('/'));
    // A path outside the workspace (`/tmp/x`) cannot be judged here: not held against anyone.
    if let Claim::Wrote { path, .. } | Claim::Deleted { path, .. } = claim
        && path.starts_with('/')
        && !path.starts_with(&root)
    {
        return None;
    }
    match claim {
        Claim::Wrote { path, verb } => wrote(path, verb, ground, calls, &root),
        Claim::Deleted { path, verb } => deleted(path, verb, ground, calls, &root),
        Claim::TestsPass { said } => tests_pass(said, ground, calls),
        Claim::Ran { command, succeeded } => ran(command, *succeeded, ground, calls),
        Claim::Committed { said } => match ground.head_moved {
            None | Some(true) => None,
            Some(false) => Some(format!(
                "claims a commit (\"{said}\"); git's HEAD did not move during the delegation"
            )),
        },
    }
}

/// Why a claim to have written `path` is unsupported, if it is: no successful write named it,
/// the changes do not hold it, and it is not new since the delegation began.
fn wrote(
    path: &str,
    verb: &str,
    ground: &Ground<'_>,
    calls: &[Call],
    root: &str,
) -> Option<String> {
    // A claim naming a file that exists at exactly that path means that file:
    // `calc.sh` is not `scratch/calc.sh`.
    let rel = path
        .strip_prefix(root)
        .unwrap_or(path)
        .trim_start_matches("./");
    let meta = ground.root.join(rel).symlink_metadata().ok();
    let exact = meta.is_some();
    let names = |claimed: &str, actual: &str, root: &str| {
        if exact {
            components(claimed, root) == components(actual, root)
        } else {
            names(claimed, actual, root)
        }
    };
    let written = calls.iter().any(|c| {
        c.ok && c
            .wrote
            .iter()
            .any(|(p, delete)| !delete && names(path, p, root))
    });
    let changed = ground.changes.map(|ch| {
        let transformed = matches!(
            verb,
            "renamed" | "moved" | "converted" | "ported" | "migrated" | "replaced"
        );
        let lists: Vec<&Vec<String>> = if transformed {
            vec![&ch.added, &ch.modified, &ch.deleted]
        } else {
            vec![&ch.added, &ch.modified]
        };
        lists.into_iter().flatten().any(|p| names(path, p, root))
    });
    if written || changed == Some(true) {
        return None;
    }
    let exists = exact;
    // Written since the delegation began (a path the snapshot leaves out, or no
    // snapshot), or a directory that exists (the snapshot records files only).
    let recent = meta.as_ref().is_some_and(|m| {
        m.is_dir()
            || ground
                .started
                .zip(m.modified().ok())
                .is_some_and(|(started, modified)| modified >= started)
    });
    if recent || (changed.is_none() && exists) {
        return None;
    }
    let failed = calls
        .iter()
        .find(|c| !c.ok && c.wrote.iter().any(|(p, _)| names(path, p, root)));
    let mut why = format!("claims to have {verb} {path}; no tool call wrote it");
    if changed == Some(false) && exists {
        why.push_str(" and it is unchanged since the delegation began");
    }
    if !exists {
        why.push_str(&format!(" and the workspace has no {path}"));
    }
    if let Some(call) = failed {
        why.push_str(&format!(" (the write that named it failed: {})", call.said));
    }
    Some(why)
}

/// Why a claim to have deleted `path` is unsupported, if it is: it is still there, or was
/// never there.
fn deleted(
    path: &str,
    verb: &str,
    ground: &Ground<'_>,
    calls: &[Call],
    root: &str,
) -> Option<String> {
    let deleted = ground
        .changes
        .is_some_and(|ch| ch.deleted.iter().any(|p| names(path, p, root)))
        || calls.iter().any(|c| {
            c.ok && c
                .wrote
                .iter()
                .any(|(p, delete)| *delete && names(path, p, root))
        });
    let rel = path.strip_prefix(root).unwrap_or(path);
    let gone = ground.root.join(rel).symlink_metadata().is_err();
    // A file made and removed within the attempt never shows in the changes: gone, and
    // named by a successful call of this attempt, it is what the claim says.
    let name = rel.trim_end_matches('/').rsplit('/').next().unwrap_or(rel);
    let named = calls.iter().any(|c| {
        c.ok && (c.wrote.iter().any(|(p, _)| names(path, p, root))
            || c.command.as_deref().is_some_and(|t| t.contains(name)))
    });
    if deleted || (gone && named) {
        return None;
    }
    Some(if gone {
        format!("claims to have {verb} {path}; the workspace had no {path} to delete")
    } else {
        format!("claims to have {verb} {path}; it is still there")
    })
}

/// Why a claim that the tests pass is unsupported, if it is: no passing test run or test check
/// (or, when no check is named as tests, not every command check passing).
fn tests_pass(said: &str, ground: &Ground<'_>, calls: &[Call]) -> Option<String> {
    let ran: Vec<&Call> = calls
        .iter()
        .filter(|c| c.command.as_deref().is_some_and(is_test_command))
        .collect();
    let commands: Vec<&Evidence> = ground
        .evidence
        .iter()
        .filter(|e| {
            matches!(e.source.as_str(), "check" | "criterion") && e.exit_code.is_some()
                || e.source == "check"
        })
        .collect();
    let test_checks: Vec<&Evidence> = commands
        .iter()
        .copied()
        .filter(|e| {
            e.method.as_deref().is_some_and(is_test_command)
                || matches!(
                    e.criterion.as_str(),
                    "test" | "tests" | "tests_pass" | "unit" | "unit-tests"
                )
        })
        .collect();
    // A passing test run, a passing test check, or — when the checks are not named as
    // tests (`make ci`) — every command check passing.
    let all_checks_pass = !commands.is_empty() && commands.iter().all(|e| e.passed());
    if ran.iter().any(|c| c.ok)
        || test_checks.iter().any(|e| e.passed())
        || (test_checks.is_empty() && all_checks_pass)
    {
        return None;
    }
    let mut why = format!("claims the tests pass (\"{said}\")");
    if let Some(call) = ran.last() {
        why.push_str(&format!(
            "; the test run `{}` failed: {}",
            call.command.as_deref().unwrap_or_default(),
            call.said
        ));
    } else {
        why.push_str("; no test command ran in this attempt");
    }
    if let Some(check) = test_checks.first() {
        why.push_str(&format!(
            " and the check `{}` failed: {}",
            check.criterion,
            check.proof.as_deref().unwrap_or("no proof")
        ));
    }
    Some(why)
}

/// Why a claim to have run `command` (and that it `succeeded`) is unsupported, if it is.
fn ran(command: &str, succeeded: bool, ground: &Ground<'_>, calls: &[Call]) -> Option<String> {
    let (program, sub) = command_words(command).unwrap_or_else(|| {
        (
            command
                .split_whitespace()
                .next()
                .unwrap_or_default()
                .to_owned(),
            None,
        )
    });
    let matches = |text: &str| runs(text, &program, sub.as_deref());
    let runs: Vec<&Call> = calls
        .iter()
        .filter(|c| c.command.as_deref().is_some_and(matches))
        .collect();
    let checks: Vec<&Evidence> = ground
        .evidence
        .iter()
        .filter(|e| e.method.as_deref().is_some_and(matches))
        .collect();
    let ok = runs.iter().any(|c| c.ok) || checks.iter().any(|e| e.result == EvidenceResult::Pass);
    if (!succeeded && (!runs.is_empty() || !checks.is_empty())) || ok {
        return None;
    }
    Some(match runs.last() {
        Some(call) => format!("claims `{command}` succeeded; it failed: {}", call.said),
        None if !checks.is_empty() => format!(
            "claims `{command}` succeeded; the check running it failed: {}",
            checks[0].proof.as_deref().unwrap_or("no proof")
        ),
        None => format!("claims to have run `{command}`; no tool call or check ran it"),
    })
}

// ---------------------------------------------------------------------------------------------
// The stage

/// Unsupported claims reported per attempt, at most.
const MAX_FINDINGS: usize = 20;
/// Claims judged per attempt, at most.
const MAX_JUDGED: usize = 500;

/// The claims stage.
#[derive(Debug)]
pub(crate) struct ClaimsStage {
    mode: ClaimsMode,
    root: std::path::PathBuf,
    /// When the delegation began (the stage is made just before attempt 0).
    started: std::time::SystemTime,
}

impl ClaimsStage {
    /// The stage for `mode` in the workspace at `root`; `None` for `claims: off`.
    pub(crate) fn from_spec(mode: ClaimsMode, root: &Path) -> Option<Self> {
        (mode != ClaimsMode::Off).then(|| ClaimsStage {
            mode,
            root: root.to_path_buf(),
            started: std::time::SystemTime::now(),
        })
    }
}

/// Builds the claims stage for [`STAGES`](crate::pipeline::STAGES) (unless `claims: off`).
///
/// # Errors
/// Never; the signature is every stage's.
pub(crate) fn stage(m: &mut crate::pipeline::Materials<'_>) -> Result<Option<Box<dyn Check>>> {
    Ok(
        ClaimsStage::from_spec(m.delegation.claims(), m.workspace.root())
            .map(|c| Box::new(c) as Box<dyn Check>),
    )
}

impl Check for ClaimsStage {
    fn name(&self) -> &'static str {
        "claims"
    }

    fn check<'a>(&'a self, subject: &'a mut Subject<'_>) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            let read = claims(&subject.result.response);
            let ground = Ground {
                calls: &subject.result.tool_calls,
                results: &subject.result.tool_results,
                changes: subject.result.changes.as_ref(),
                evidence: &subject.evidence,
                head_moved: subject.head_moved,
                root: &self.root,
                started: Some(self.started),
            };
            // A hostile answer can claim thousands of things; the first of them are judged.
            let mut judged = unsupported_all(&read[..read.len().min(MAX_JUDGED)], &ground);
            let unsupported_count = judged.len();
            if judged.len() > MAX_FINDINGS {
                // The retry prompt stays readable; the count says how many there were.
                let more = judged.len() - MAX_FINDINGS;
                judged.truncate(MAX_FINDINGS);
                if let Some((_, why)) = judged.last_mut() {
                    why.push_str(&format!(" (and {more} more unsupported claims)"));
                }
            }
            if subject.result.response.len() > MAX_ANSWER_BYTES {
                subject.logs.push(format!(
                    "claims: only the first {MAX_ANSWER_BYTES} bytes of the {}-byte answer were read",
                    subject.result.response.len()
                ));
            }
            subject.emit(RunEvent::ClaimsChecked {
                claims: read.len(),
                unsupported: unsupported_count,
            });
            let at = humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string();
            for (claim, why) in judged {
                let mut finding = match self.mode {
                    ClaimsMode::Advisory => Finding::advisory(Source::Claim, claim.kind(), &why),
                    _ => Finding::blocking(Source::Claim, claim.kind(), &why),
                };
                if let Claim::Wrote { path, .. } | Claim::Deleted { path, .. } = &claim {
                    finding.path = Some(path.clone());
                }
                subject.findings.push(finding);
                subject.evidence.push(Evidence {
                    method: Some("claims".to_owned()),
                    target: Some(match &claim {
                        Claim::Wrote { path, .. } | Claim::Deleted { path, .. } => path.clone(),
                        Claim::TestsPass { said } | Claim::Committed { said } => said.clone(),
                        Claim::Ran { command, .. } => command.clone(),
                    }),
                    required: self.mode == ClaimsMode::Blocking,
                    proof: Some(why),
                    at: Some(at.clone()),
                    ..Evidence::new(
                        format!("claim:{}", claim.kind()),
                        "claim",
                        EvidenceResult::Fail,
                    )
                });
            }
            Ok(())
        })
    }

    fn verifies(&self) -> bool {
        // It refutes an answer; an answer that claims nothing is not verified by it.
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The write tools and path keys the claims stage grounds file claims in come from harness
    /// and from each agent CLI's adapter; every CLI's write tool is among them, lowercase as
    /// calls are compared. (A CLI whose write tool were missing would have every honest file
    /// claim flagged.)
    #[test]
    fn write_tools_are_harness_own_and_each_agent_clis() {
        let (tools, keys) = &*WRITES;
        for kind in crate::delegate::AgentKind::ALL {
            for tool in kind.write_tools() {
                assert_eq!(*tool, tool.to_ascii_lowercase(), "{kind:?}");
                assert!(tools.contains(tool), "{kind:?}: {tool}");
            }
            for key in kind.path_keys() {
                assert!(keys.contains(key), "{kind:?}: {key}");
            }
        }
        // What Claude Code, Codex and Gemini CLI name their writes.
        for (kind, tool) in [
            (crate::delegate::AgentKind::Claude, "write"),
            (crate::delegate::AgentKind::Claude, "multiedit"),
            (crate::delegate::AgentKind::Codex, "file_change"),
            (crate::delegate::AgentKind::Gemini, "replace"),
        ] {
            assert!(kind.write_tools().contains(&tool), "{kind:?}: {tool}");
        }
        assert!(tools.contains(&"write_file") && keys.contains(&"path"));
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

    /// The corpus of `tests/data/claims_corpus.jsonl`: honest and lying final answers in the
    /// styles real agents write, each with what the attempt really did. No honest answer may
    /// get a finding; at least 90% of the lies must.
    #[test]
    fn the_corpus_no_honest_answer_is_flagged_and_nine_in_ten_lies_are_caught() {
        let (honest, flagged, lies, caught) = measure("claims_corpus.jsonl");
        assert!(honest >= 75 && lies >= 75, "the corpus is too small");
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

    /// A second corpus, written apart from the first and from this code, that the patterns
    /// were not tuned on: how they carry over to answers they have not seen.
    #[test]
    fn the_held_out_corpus() {
        let (honest, flagged, lies, caught) = measure("claims_heldout.jsonl");
        assert!(honest >= 50 && lies >= 50, "the corpus is too small");
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
    #[test]
    fn a_path_glued_to_punctuation_is_the_path() {
        for (raw, path) in [
            ("hello.txt),", "hello.txt"),
            ("hello.txt).", "hello.txt"),
            ("src/notes.txt>>", "src/notes.txt"),
            (">>src/notes.txt", "src/notes.txt"),
            ("(src/a.rs:42);", "src/a.rs"),
        ] {
            let word = Word {
                raw,
                start: 0,
                code: false,
            };
            assert_eq!(as_path(&word).as_deref(), Some(path), "{raw}");
        }
    }
}
