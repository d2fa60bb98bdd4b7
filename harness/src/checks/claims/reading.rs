//! Reading an answer as text: clauses (sentences, list items, table rows, what a header
//! announces), words, and the words that are paths. Pure text: nothing here knows what a claim
//! is.

use std::sync::LazyLock;

use regex::Regex;

use super::rules::{BARE_NAMES, EXTENSIONS, NOT_ASSERTED, WRITE_VERB};

/// One word of a clause: its text (cleaned) and where it starts.
#[derive(Debug, Clone)]
pub(super) struct Word<'a> {
    pub(super) raw: &'a str,
    pub(super) start: usize,
    /// It was in backticks.
    pub(super) code: bool,
}

/// Splits a clause into words, keeping backticked spans whole.
pub(super) fn words(clause: &str) -> Vec<Word<'_>> {
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
pub(super) fn as_path(word: &Word<'_>) -> Option<String> {
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
pub(super) fn clauses(answer: &str) -> Vec<Clause> {
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
pub(super) struct Clause {
    pub(super) text: String,
    /// A table row's first cell.
    pub(super) label: Option<String>,
    /// The verb of a header announcing changes, for the items listed under it.
    pub(super) context: Option<String>,
    /// The clause after it on its line (where "— clean" may follow a command).
    pub(super) tail: String,
    /// Its whole line (where "2 still fail" may follow "12 tests pass").
    pub(super) line: String,
}

pub(super) fn is_bold_line(line: &str) -> bool {
    line.starts_with("**") && line.trim_end_matches(':').ends_with("**")
}

/// The text of a list item (`- x`, `* x`, `1. x`), or `None`.
pub(super) fn list_item(line: &str) -> Option<&str> {
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
pub(super) fn announces_changes(header: &str) -> Option<String> {
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
pub(super) fn sentences(text: &str) -> Vec<&str> {
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
pub(super) fn asserted(before: &str) -> bool {
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
pub(super) const MAX_CLAUSE_BYTES: usize = 1024;

/// The longest prefix of `text` of at most `max` bytes that ends on a character boundary.
pub(super) fn head(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// The last `n` characters of `text` (all of it when shorter).
pub(super) fn last_chars(text: &str, n: usize) -> &str {
    let at = text
        .char_indices()
        .rev()
        .nth(n.saturating_sub(1))
        .map_or(0, |(i, _)| i);
    &text[at..]
}

#[cfg(test)]
mod tests {
    use super::*;

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
