//! Stage 2b: completion criteria (DESIGN §4.7) — facts about the workspace each attempt must
//! make true, each leaving an evidence record: `file_exists` (a regular, non-empty file) and
//! `no_placeholders` (no TODO, TBD, FIXME, XXX, `[INSERT]`, `[IMPLEMENT]`, `todo!()`,
//! `unimplemented!()` in the files a glob names). Command criteria run as checks do.

use std::path::Path;
use std::sync::LazyLock;

use serde_json::json;
use sha2::{Digest, Sha256};

use super::{Check, Subject};
use crate::delegate::BoxFuture;
use crate::error::{Error, ErrorKind, Result};
use crate::verdict::{Finding, Source};

/// Files larger than this are not scanned for placeholders (and not hashed for evidence).
const MAX_SCANNED_BYTES: u64 = 4 * 1024 * 1024;
/// Placeholders quoted in a finding, at most.
const MAX_QUOTED: usize = 10;

/// What a placeholder looks like.
static PLACEHOLDER: LazyLock<regex::Regex> = LazyLock::new(|| {
    regex::Regex::new(
        r"\b(TODO|TBD|FIXME|XXX)\b|\[INSERT\]|\[IMPLEMENT\]|\btodo!\(|\bunimplemented!\(",
    )
    .expect("the placeholder pattern compiles")
});

/// One file criterion of a delegation file's `criteria:`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileCriterion {
    /// `file_exists:PATH` — a regular file of at least one byte.
    FileExists(String),
    /// `no_placeholders:GLOB` — no placeholder marker in any file the glob matches.
    NoPlaceholders(String),
}

impl FileCriterion {
    /// The criterion's name in findings and evidence, e.g. `file_exists:src/lib.rs`.
    pub fn name(&self) -> String {
        match self {
            FileCriterion::FileExists(path) => format!("file_exists:{path}"),
            FileCriterion::NoPlaceholders(glob) => format!("no_placeholders:{glob}"),
        }
    }
}

/// The delegation's file criteria as a pipeline stage.
#[derive(Debug)]
pub(crate) struct FileCriteria {
    pub(crate) criteria: Vec<FileCriterion>,
    pub(crate) workspace: harness_builtins::Workspace,
}

/// The outcome of one criterion: passed, what shows it, and the subject's hash when it has one.
struct Judged {
    passed: bool,
    proof: String,
    sha256: Option<String>,
}

impl Check for FileCriteria {
    fn check<'a>(&'a self, subject: &'a mut Subject) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            let criteria = self.criteria.clone();
            let workspace = self.workspace.clone();
            // Reading and walking the workspace waits on the file system: a blocking thread.
            let judged = tokio::task::spawn_blocking(move || {
                criteria
                    .iter()
                    .map(|c| (c.clone(), judge(&workspace, c)))
                    .collect::<Vec<_>>()
            })
            .await
            .map_err(|e| Error::new(ErrorKind::Check, format!("criteria failed to run: {e}")))?;
            let at = humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string();
            for (criterion, judged) in judged {
                let (method, target) = match &criterion {
                    FileCriterion::FileExists(path) => ("file_exists", path),
                    FileCriterion::NoPlaceholders(glob) => ("no_placeholders", glob),
                };
                subject.evidence.push(json!({
                    "criterion": criterion.name(),
                    "source": "criterion",
                    "method": method,
                    "target": target,
                    "required": true,
                    "result": if judged.passed { "pass" } else { "fail" },
                    "proof": judged.proof,
                    "exit_code": null,
                    "duration_ms": 0,
                    "output_tail": null,
                    "subject_sha256": judged.sha256,
                    "at": at,
                }));
                if !judged.passed {
                    subject.findings.push(Finding::blocking(
                        Source::Criterion,
                        criterion.name(),
                        judged.proof,
                    ));
                }
            }
            Ok(())
        })
    }
}

fn judge(workspace: &harness_builtins::Workspace, criterion: &FileCriterion) -> Judged {
    match criterion {
        FileCriterion::FileExists(path) => file_exists(workspace, path),
        FileCriterion::NoPlaceholders(glob) => no_placeholders(workspace, glob),
    }
}

fn fail(proof: String) -> Judged {
    Judged {
        passed: false,
        proof,
        sha256: None,
    }
}

fn file_exists(workspace: &harness_builtins::Workspace, path: &str) -> Judged {
    let full = match workspace.resolve(path) {
        Ok(full) => full,
        Err(e) => return fail(format!("{path} cannot be checked: {e}")),
    };
    match std::fs::symlink_metadata(&full) {
        Err(_) => fail(format!("{path} does not exist")),
        Ok(meta) if !meta.is_file() => fail(format!("{path} is not a regular file")),
        Ok(meta) if meta.len() == 0 => fail(format!("{path} is empty")),
        Ok(meta) => Judged {
            passed: true,
            proof: format!("{path} exists, {} bytes", meta.len()),
            sha256: (meta.len() <= MAX_SCANNED_BYTES)
                .then(|| sha256_of(&full))
                .flatten(),
        },
    }
}

fn sha256_of(path: &Path) -> Option<String> {
    let mut file = harness_builtins::open_regular(path).ok()?;
    let mut hasher = Sha256::new();
    std::io::copy(&mut file, &mut hasher).ok()?;
    Some(format!("{:x}", hasher.finalize()))
}

fn no_placeholders(workspace: &harness_builtins::Workspace, glob: &str) -> Judged {
    let matcher = match globset::Glob::new(glob) {
        Ok(g) => g.compile_matcher(),
        Err(e) => return fail(format!("the pattern {glob:?} does not compile: {e}")),
    };
    let root = workspace.root();
    let mut scanned = 0usize;
    let mut found: Vec<String> = Vec::new();
    let mut count = 0usize;
    let walk = walkdir::WalkDir::new(root)
        .follow_links(false)
        .sort_by_file_name()
        .into_iter()
        .filter_entry(|e| {
            let name = e.file_name().to_string_lossy();
            !(e.depth() > 0 && e.file_type().is_dir() && (name == ".git" || name == ".harness"))
        })
        .filter_map(std::result::Result::ok)
        .filter(|e| e.file_type().is_file());
    for entry in walk {
        let rel = workspace.relative(entry.path());
        if !matcher.is_match(&rel) {
            continue;
        }
        if entry
            .metadata()
            .map_or(true, |m| m.len() > MAX_SCANNED_BYTES)
        {
            continue;
        }
        let Ok(text) = harness_builtins::open_regular(entry.path()).and_then(|mut f| {
            let mut text = String::new();
            std::io::Read::read_to_string(&mut f, &mut text).map(|_| text)
        }) else {
            continue;
        };
        scanned += 1;
        for (i, line) in text.lines().enumerate() {
            for m in PLACEHOLDER.find_iter(line) {
                count += 1;
                if found.len() < MAX_QUOTED {
                    found.push(format!("{rel}:{} {}", i + 1, m.as_str()));
                }
            }
        }
    }
    if count == 0 {
        Judged {
            passed: true,
            proof: format!("no placeholders in {scanned} file(s) matching {glob}"),
            sha256: None,
        }
    } else {
        let more = if count > found.len() {
            format!(" and {} more", count - found.len())
        } else {
            String::new()
        };
        fail(format!(
            "{count} placeholder(s) in files matching {glob}: {}{more}",
            found.join(", ")
        ))
    }
}
