//! Citations (DESIGN §4.13): `[[cite:PATH:L<a>-L<b>#<hex>]]` names lines `a..=b` (1-based) of a
//! workspace file and a prefix (at least 8 hex digits) of the SHA-256 of those lines' exact
//! bytes, line terminators included. The same check judges a response live (a pipeline stage)
//! and later (`harness audit`), so both agree on what a valid citation is.
//!
//! Under `citations: required`, every non-empty line of a response that is not a heading (`#`)
//! must carry a valid citation or the marker `[[insufficient]]`: a claim without evidence, or an
//! honest statement that there is none. A cited path is resolved inside the workspace before
//! anything is read: `..`, absolute paths and links that lead out are `citation_malformed` and
//! never opened.

use std::io::BufRead as _;
use std::path::Path;
use std::sync::LazyLock;

use regex::Regex;
use sha2::{Digest as _, Sha256};

use crate::workspace::{Workspace, open_regular};

/// Hex digits of the hash a citation must give, at least.
pub const MIN_HEX: usize = 8;
/// Hex digits `fs.cite` writes.
pub const CITE_HEX: usize = 16;
/// The marker of a line that says the evidence is insufficient.
pub const INSUFFICIENT: &str = "[[insufficient]]";
/// Bytes read from a cited file, at most (a citation past them is refused, not read on).
pub const MAX_CITED_BYTES: u64 = 64 * 1024 * 1024;

static MARKER: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^\[\[cite:([^\]\s]+):L([0-9]+)-L([0-9]+)#([0-9a-f]+)\]\]$")
        .expect("the citation pattern compiles")
});

/// One citation as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Marker {
    /// The cited path, as written.
    pub path: String,
    /// The first line, from 1.
    pub start: u64,
    /// The last line, inclusive.
    pub end: u64,
    /// The hash prefix, lowercase hex.
    pub hex: String,
}

/// Why a citation does not hold; `code` is the audit's failure code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CitationFailure {
    /// `citation_missing`, `citation_malformed`, `citation_out_of_bounds` or
    /// `citation_hash_mismatch`.
    pub code: &'static str,
    /// The response line it is on, from 1.
    pub line: usize,
    /// What is wrong.
    pub message: String,
}

/// What checking a response found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CitationReport {
    /// Every failure, in response order.
    pub failures: Vec<CitationFailure>,
    /// Citations seen.
    pub citations: usize,
    /// Lines that make a claim (non-empty, not headings).
    pub claims: usize,
    /// Lines marked `[[insufficient]]`.
    pub insufficient: usize,
}

/// Reads the markers of `text`: each `[[cite:` up to its `]]`, valid or not (`Err` holds the
/// raw text of one that does not parse).
pub fn markers(text: &str) -> Vec<Result<Marker, String>> {
    let mut found = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find("[[cite:") {
        let from = &rest[start..];
        let raw = match from.find("]]") {
            Some(end) => &from[..end + 2],
            None => from,
        };
        found.push(match MARKER.captures(raw) {
            Some(c) => {
                let number = |i: usize| c[i].parse::<u64>().ok();
                match (number(2), number(3)) {
                    (Some(a), Some(b))
                        if a >= 1 && b >= a && c[4].len() >= MIN_HEX && c[4].len() <= 64 =>
                    {
                        Ok(Marker {
                            path: c[1].to_owned(),
                            start: a,
                            end: b,
                            hex: c[4].to_owned(),
                        })
                    }
                    _ => Err(raw.to_owned()),
                }
            }
            None => Err(raw.to_owned()),
        });
        rest = &from[raw.len()..];
    }
    found
}

/// Why the lines of a file could not be hashed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LinesError {
    /// The file has only this many lines.
    OutOfBounds(u64),
    /// It cannot be opened or read.
    Unreadable(String),
}

/// The hex SHA-256 of lines `start..=end` (1-based) of `file`, terminators included; reads no
/// further than line `end`, and no more than [`MAX_CITED_BYTES`].
///
/// # Errors
/// [`LinesError::OutOfBounds`] when the file ends first, [`LinesError::Unreadable`] otherwise.
pub fn hash_lines(file: &Path, start: u64, end: u64) -> Result<String, LinesError> {
    let opened = open_regular(file).map_err(|e| LinesError::Unreadable(e.to_string()))?;
    let mut reader = std::io::BufReader::new(std::io::Read::take(opened, MAX_CITED_BYTES));
    let mut hasher = Sha256::new();
    let mut line = Vec::new();
    let mut number = 0u64;
    while number < end {
        line.clear();
        let read = reader
            .read_until(b'\n', &mut line)
            .map_err(|e| LinesError::Unreadable(e.to_string()))?;
        if read == 0 {
            return Err(LinesError::OutOfBounds(number));
        }
        number += 1;
        if number >= start {
            hasher.update(&line);
        }
    }
    Ok(crate::modules::hex(&hasher.finalize()))
}

/// A valid marker for lines `start..=end` of `path` whose bytes hash to `sha256`.
pub fn marker(path: &str, start: u64, end: u64, sha256: &str) -> String {
    format!(
        "[[cite:{path}:L{start}-L{end}#{}]]",
        &sha256[..CITE_HEX.min(sha256.len())]
    )
}

/// Checks one citation in `workspace`: `None` when it holds.
fn check(workspace: &Workspace, marker: &Marker) -> Option<(&'static str, String)> {
    let raw = Path::new(&marker.path);
    if raw.is_absolute()
        || raw
            .components()
            .any(|c| matches!(c, std::path::Component::ParentDir))
    {
        return Some((
            "citation_malformed",
            format!(
                "{}: not a path inside the workspace; it is not read",
                marker.path
            ),
        ));
    }
    let full = match workspace.resolve(&marker.path) {
        Ok(full) => full,
        Err(e) => {
            return Some((
                "citation_malformed",
                format!("{}: {e}; it is not read", marker.path),
            ));
        }
    };
    if !full.exists() {
        return Some((
            "citation_missing",
            format!("{} does not exist in the workspace", marker.path),
        ));
    }
    match hash_lines(&full, marker.start, marker.end) {
        Err(LinesError::OutOfBounds(lines)) => Some((
            "citation_out_of_bounds",
            format!(
                "{}:L{}-L{}: the file has {lines} line(s)",
                marker.path, marker.start, marker.end
            ),
        )),
        Err(LinesError::Unreadable(e)) => Some((
            "citation_missing",
            format!("{} cannot be read: {e}", marker.path),
        )),
        Ok(hash) if !hash.starts_with(&marker.hex) => Some((
            "citation_hash_mismatch",
            format!(
                "{}:L{}-L{}: the lines hash to {}…, not {}; cite them as they are now",
                marker.path,
                marker.start,
                marker.end,
                &hash[..CITE_HEX],
                marker.hex
            ),
        )),
        Ok(_) => None,
    }
}

/// Checks every line of `response` under `citations: required`.
pub fn check_response(response: &str, workspace: &Workspace) -> CitationReport {
    let mut report = CitationReport::default();
    for (i, line) in response.lines().enumerate() {
        let text = line.trim();
        if text.is_empty() || text.starts_with('#') {
            continue;
        }
        report.claims += 1;
        let found = markers(text);
        report.citations += found.len();
        let insufficient = text.contains(INSUFFICIENT);
        if insufficient {
            report.insufficient += 1;
        }
        let mut valid = false;
        for marker in found {
            match marker {
                Ok(marker) => match check(workspace, &marker) {
                    None => valid = true,
                    Some((code, message)) => report.failures.push(CitationFailure {
                        code,
                        line: i + 1,
                        message,
                    }),
                },
                Err(raw) => report.failures.push(CitationFailure {
                    code: "citation_malformed",
                    line: i + 1,
                    message: format!(
                        "{raw} is not a citation: write [[cite:PATH:L<a>-L<b>#<at least {MIN_HEX} hex digits of the lines' SHA-256>]]"
                    ),
                }),
            }
        }
        if !valid && !insufficient && !report.failures.iter().any(|f| f.line == i + 1) {
            report.failures.push(CitationFailure {
                code: "citation_missing",
                line: i + 1,
                message: format!(
                    "this line makes a claim without a citation (or {INSUFFICIENT}): {}",
                    crate::shorten(text, 80)
                ),
            });
        }
    }
    report
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markers_parse_strictly() {
        let text = "a [[cite:src/lib.rs:L2-L3#0123abcd]] b [[cite:x:L0-L1#0123abcd]] [[cite:y:L1-L1#zz]] [[cite:open";
        let found = markers(text);
        assert_eq!(found.len(), 4);
        assert_eq!(
            found[0],
            Ok(Marker {
                path: "src/lib.rs".to_owned(),
                start: 2,
                end: 3,
                hex: "0123abcd".to_owned()
            })
        );
        assert!(found[1].is_err(), "line 0");
        assert!(found[2].is_err(), "not hex");
        assert!(found[3].is_err(), "unterminated");
    }

    #[test]
    fn lines_hash_with_their_terminators_and_stop_at_the_end() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("f.txt");
        std::fs::write(&file, "one\ntwo\nthree").expect("write");
        assert_eq!(
            hash_lines(&file, 2, 3),
            Ok(crate::modules::hex(&Sha256::digest(b"two\nthree")))
        );
        assert_eq!(hash_lines(&file, 1, 4), Err(LinesError::OutOfBounds(3)));
    }

    #[test]
    fn a_response_is_judged_line_by_line() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("notes.txt"), "alpha\nbeta\n").expect("write");
        let workspace = Workspace::new(dir.path()).expect("workspace");
        let good = marker(
            "notes.txt",
            2,
            2,
            &crate::modules::hex(&Sha256::digest(b"beta\n")),
        );
        let response = format!(
            "# Answer\n\nThe second word is beta {good}\nNothing says what gamma is. {INSUFFICIENT}\nIt is also delta.\nSee [[cite:../secret:L1-L1#00000000]] and [[cite:notes.txt:L1-L9#00000000]] and [[cite:notes.txt:L1-L1#00000000]]\n"
        );
        let report = check_response(&response, &workspace);
        let codes: Vec<(&str, usize)> = report.failures.iter().map(|f| (f.code, f.line)).collect();
        assert_eq!(
            codes,
            [
                ("citation_missing", 5),
                ("citation_malformed", 6),
                ("citation_out_of_bounds", 6),
                ("citation_hash_mismatch", 6)
            ]
        );
        assert_eq!(report.claims, 4);
        assert_eq!(report.citations, 4);
        assert_eq!(report.insufficient, 1);
    }
}
