//! Stage 2b: completion criteria (DESIGN §4.7) — facts each attempt must make true, each leaving
//! an evidence record: `file_exists` (a regular, non-empty file), `no_placeholders` (no TODO,
//! TBD, FIXME, XXX, `[INSERT]`, `[IMPLEMENT]`, `todo!()`, `unimplemented!()` in the files a glob
//! names) and `endpoint` (an HTTP GET answering with a status and, optionally, a body substring).
//! Command criteria run as checks do. The `criteria:` section is read in
//! [`crate::gates::criteria`].

use std::path::Path;
use std::sync::LazyLock;

use harness_hooks::{Evidence, EvidenceResult};
use sha2::{Digest, Sha256};

use super::{Check, Subject};
use crate::delegate::BoxFuture;
use crate::error::{Error, ErrorKind, Result};
use crate::events::RunEvent;
use crate::gates::criteria::Criterion;
use crate::verdict::{Finding, Source};

/// Files larger than this are not scanned for placeholders (and not hashed for evidence).
const MAX_SCANNED_BYTES: u64 = 4 * 1024 * 1024;
/// Placeholders quoted in a finding, at most.
const MAX_QUOTED: usize = 10;

/// What a placeholder looks like.
static PLACEHOLDER: LazyLock<regex::bytes::Regex> = LazyLock::new(|| {
    regex::bytes::Regex::new(
        r"\b(TODO|TBD|FIXME|XXX)\b|\[INSERT\]|\[IMPLEMENT\]|\btodo!\(|\bunimplemented!\(",
    )
    .expect("the placeholder pattern compiles")
});

/// Bytes of an endpoint's body read to look for `body_contains`, at most.
const MAX_ENDPOINT_BODY: usize = 1024 * 1024;

/// The delegation's criteria as a pipeline stage.
#[derive(Debug)]
pub(crate) struct CriteriaStage {
    criteria: Vec<Criterion>,
    workspace: harness_builtins::Workspace,
    /// For `endpoint` criteria (made only when there are some): no redirects, no proxy from
    /// the environment.
    http: Option<reqwest::Client>,
}

impl CriteriaStage {
    /// A stage judging `criteria` in `workspace`; `None` when there are none.
    ///
    /// # Errors
    /// [`ErrorKind::Check`] when the HTTP client for `endpoint` criteria cannot be made (never
    /// replaced by one that follows redirects).
    pub(crate) fn from_spec(
        criteria: &[Criterion],
        workspace: &harness_builtins::Workspace,
    ) -> Result<Option<Self>> {
        if criteria.is_empty() {
            return Ok(None);
        }
        let (criteria, workspace) = (criteria.to_vec(), workspace.clone());
        let http = if criteria
            .iter()
            .any(|c| matches!(c, Criterion::Endpoint { .. }))
        {
            let client = harness_builtins::http_client_builder()
                .redirect(reqwest::redirect::Policy::none())
                .no_proxy()
                .build()
                .map_err(|e| {
                    Error::new(
                        ErrorKind::Check,
                        format!("criteria: cannot make the HTTP client for `endpoint`: {e}"),
                    )
                })?;
            Some(client)
        } else {
            None
        };
        Ok(Some(CriteriaStage {
            criteria,
            workspace,
            http,
        }))
    }
}

/// Builds the criteria stage for [`STAGES`](crate::pipeline::STAGES).
///
/// # Errors
/// As [`CriteriaStage::from_spec`].
pub(crate) fn stage(
    m: &mut crate::checks::materials::Materials<'_>,
) -> Result<Option<Box<dyn Check>>> {
    Ok(
        CriteriaStage::from_spec(m.delegation.criteria(), m.workspace)?
            .map(|c| Box::new(c) as Box<dyn Check>),
    )
}

/// The outcome of one criterion: passed, its evidence result, what shows it, and the subject's
/// hash when it has one.
struct Judged {
    passed: bool,
    result: EvidenceResult,
    proof: String,
    /// The file's SHA-256 and size, for a `file_exists` that passed (the export's evidence files).
    sha256: Option<String>,
    bytes: Option<u64>,
}

impl Check for CriteriaStage {
    fn name(&self) -> &'static str {
        "criteria"
    }

    fn check<'a>(&'a self, subject: &'a mut Subject<'_>) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            let files: Vec<Criterion> = self
                .criteria
                .iter()
                .filter(|c| matches!(c, Criterion::FileExists(_) | Criterion::NoPlaceholders(_)))
                .cloned()
                .collect();
            let workspace = self.workspace.clone();
            for criterion in &self.criteria {
                subject.emit(RunEvent::CheckStarted {
                    check_name: criterion.name(),
                    required: true,
                });
            }
            // Reading and walking the workspace waits on the file system: a blocking thread.
            let mut judged = tokio::task::spawn_blocking(move || {
                files
                    .into_iter()
                    .map(|c| {
                        let started = std::time::Instant::now();
                        let judged = judge(&workspace, &c);
                        (c, judged, started.elapsed())
                    })
                    .collect::<Vec<_>>()
            })
            .await
            .map_err(|e| Error::new(ErrorKind::Check, format!("criteria failed to run: {e}")))?;
            for criterion in &self.criteria {
                if let Criterion::Endpoint {
                    url,
                    status,
                    body_contains,
                    timeout,
                } = criterion
                {
                    let started = std::time::Instant::now();
                    let http = self.http.as_ref().ok_or_else(|| {
                        Error::new(ErrorKind::Check, "criteria: no HTTP client for `endpoint`")
                    })?;
                    let result =
                        endpoint(http, url, *status, body_contains.as_deref(), *timeout).await;
                    judged.push((criterion.clone(), result, started.elapsed()));
                }
            }
            for criterion in &self.criteria {
                if let Criterion::NoNewSkips(glob) = criterion {
                    let started = std::time::Instant::now();
                    let result = skips(glob.as_deref(), subject);
                    judged.push((criterion.clone(), result, started.elapsed()));
                }
            }
            // Evidence in the order the criteria were written.
            judged.sort_by_key(|(c, _, _)| self.criteria.iter().position(|d| d == c));
            let at = humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string();
            for (criterion, judged, took) in judged {
                subject.emit(RunEvent::CheckCompleted {
                    check_name: criterion.name(),
                    passed: judged.passed,
                    exit_code: None,
                    duration_ms: u64::try_from(took.as_millis()).unwrap_or(u64::MAX),
                    required: true,
                    exit_codes: Vec::new(),
                    flaky: false,
                    runner: None,
                    cpu_ms: None,
                });
                let (method, target) = criterion.method_and_target();
                subject.evidence.push(Evidence {
                    method: Some(method.to_owned()),
                    target: Some(target.to_owned()),
                    proof: Some(judged.proof.clone()),
                    duration_ms: Some(u64::try_from(took.as_millis()).unwrap_or(u64::MAX)),
                    subject_sha256: judged.sha256,
                    subject_bytes: judged.bytes,
                    at: Some(at.clone()),
                    ..Evidence::new(criterion.name(), "criterion", judged.result)
                });
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

fn judge(workspace: &harness_builtins::Workspace, criterion: &Criterion) -> Judged {
    match criterion {
        Criterion::FileExists(path) => file_exists(workspace, path),
        Criterion::NoPlaceholders(glob) => no_placeholders(workspace, glob),
        Criterion::Endpoint { .. } | Criterion::NoNewSkips(_) => {
            unreachable!("endpoints and skips are judged in `check`")
        }
    }
}

fn fail(proof: String) -> Judged {
    Judged {
        passed: false,
        result: EvidenceResult::Fail,
        proof,
        sha256: None,
        bytes: None,
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
            result: EvidenceResult::Pass,
            proof: format!("{path} exists, {} bytes", meta.len()),
            sha256: (meta.len() <= MAX_SCANNED_BYTES)
                .then(|| sha256_of(&full))
                .flatten(),
            bytes: Some(meta.len()),
        },
    }
}

fn sha256_of(path: &Path) -> Option<String> {
    let mut file = harness_builtins::open_regular(path).ok()?;
    let mut hasher = Sha256::new();
    std::io::copy(&mut file, &mut hasher).ok()?;
    Some(harness_builtins::hex(&hasher.finalize()))
}

fn no_placeholders(workspace: &harness_builtins::Workspace, glob: &str) -> Judged {
    let matcher = match globset::Glob::new(glob) {
        Ok(g) => g.compile_matcher(),
        Err(e) => return fail(format!("the pattern {glob:?} does not compile: {e}")),
    };
    let mut scan = PlaceholderScan::default();
    let walk = walkdir::WalkDir::new(workspace.root())
        .follow_links(false)
        .sort_by_file_name()
        .into_iter()
        .filter_entry(|e| {
            let name = e.file_name().to_string_lossy();
            !(e.depth() > 0 && e.file_type().is_dir() && (name == ".git" || name == ".harness"))
        });
    for entry in walk {
        let entry = match entry {
            Ok(entry) => entry,
            Err(e) => {
                // A directory that cannot be read may hold matching files.
                let at = e
                    .path()
                    .map_or_else(|| "?".to_owned(), |p| workspace.relative(p));
                scan.unjudged.push(format!("{at}: cannot be read ({e})"));
                continue;
            }
        };
        let rel = workspace.relative(entry.path());
        if entry.file_type().is_dir() || !matcher.is_match(&rel) {
            continue;
        }
        match scanned_bytes(&entry) {
            Ok(bytes) => scan.file(&rel, &bytes),
            Err(why) => scan.unjudged.push(format!("{rel}: {why}")),
        }
    }
    scan.judged(glob)
}

/// What `no_placeholders` found so far.
#[derive(Default)]
struct PlaceholderScan {
    /// Files scanned.
    scanned: usize,
    /// Placeholders found, the first [`MAX_QUOTED`] quoted as `path:line marker`.
    found: Vec<String>,
    count: usize,
    /// Files the glob names that could not be judged: each is a failure, never skipped.
    unjudged: Vec<String>,
}

impl PlaceholderScan {
    /// Scans one file's bytes (not text: a file that is not UTF-8 is scanned all the same).
    fn file(&mut self, rel: &str, bytes: &[u8]) {
        self.scanned += 1;
        for (i, line) in bytes.split(|b| *b == b'\n').enumerate() {
            for m in PLACEHOLDER.find_iter(line) {
                self.count += 1;
                if self.found.len() < MAX_QUOTED {
                    self.found.push(format!(
                        "{rel}:{} {}",
                        i + 1,
                        String::from_utf8_lossy(m.as_bytes())
                    ));
                }
            }
        }
    }

    /// The judgement: a pass only when some file was scanned, none held a placeholder and
    /// every file the glob names could be judged.
    fn judged(self, glob: &str) -> Judged {
        if self.scanned == 0 && self.unjudged.is_empty() {
            return fail(format!(
                "no file matches {glob}: nothing was checked (no evidence is not a pass)"
            ));
        }
        if self.count == 0 && self.unjudged.is_empty() {
            return Judged {
                passed: true,
                result: EvidenceResult::Pass,
                proof: format!(
                    "no placeholders in {} file(s) matching {glob}",
                    self.scanned
                ),
                sha256: None,
                bytes: None,
            };
        }
        let more = |shown: usize, of: usize| {
            if of > shown {
                format!(" and {} more", of - shown)
            } else {
                String::new()
            }
        };
        let mut parts = Vec::new();
        if self.count > 0 {
            parts.push(format!(
                "{} placeholder(s) in files matching {glob}: {}{}",
                self.count,
                self.found.join(", "),
                more(self.found.len(), self.count)
            ));
        }
        if !self.unjudged.is_empty() {
            let shown = self.unjudged.len().min(MAX_QUOTED);
            parts.push(format!(
                "{} file(s) matching {glob} could not be judged: {}{}",
                self.unjudged.len(),
                self.unjudged[..shown].join("; "),
                more(shown, self.unjudged.len())
            ));
        }
        fail(parts.join("; "))
    }
}

/// The bytes of a file `no_placeholders` scans, or why it cannot be judged: a link (never
/// followed), not a regular file, over the scan cap, or unreadable.
fn scanned_bytes(entry: &walkdir::DirEntry) -> std::result::Result<Vec<u8>, String> {
    let kind = entry.file_type();
    if kind.is_symlink() {
        return Err("is a symbolic link (not followed)".to_owned());
    }
    if !kind.is_file() {
        return Err("is not a regular file".to_owned());
    }
    let len = entry
        .metadata()
        .map_err(|e| format!("cannot be read ({e})"))?
        .len();
    if len > MAX_SCANNED_BYTES {
        return Err(format!(
            "is {len} bytes, over the {MAX_SCANNED_BYTES}-byte scan cap"
        ));
    }
    let mut bytes = Vec::new();
    harness_builtins::open_regular(entry.path())
        .and_then(|f| {
            std::io::Read::read_to_end(
                &mut std::io::Read::take(f, MAX_SCANNED_BYTES + 1),
                &mut bytes,
            )
        })
        .map_err(|e| format!("cannot be read ({e})"))?;
    Ok(bytes)
}

/// Judges `no_new_skips` (of `glob`, or the common test locations) on what the attempt changed.
fn skips(glob: Option<&str>, subject: &Subject<'_>) -> Judged {
    let mut set = globset::GlobSetBuilder::new();
    let shown = match glob {
        Some(glob) => match globset::Glob::new(glob) {
            Ok(g) => {
                set.add(g);
                glob.to_owned()
            }
            Err(e) => return fail(format!("the pattern {glob:?} does not compile: {e}")),
        },
        None => {
            for default in crate::integrity::DEFAULT_PROTECT {
                set.add(globset::Glob::new(default).expect("the default globs compile"));
            }
            "the common test locations".to_owned()
        }
    };
    let Ok(tests) = set.build() else {
        return fail(format!("the pattern {shown:?} does not compile"));
    };
    let Some(changes) = &subject.result.changes else {
        return fail(
            "no_new_skips needs the workspace observed (`observe: false` is set): nothing was checked"
                .to_owned(),
        );
    };
    let changed: Vec<&str> = changes
        .added
        .iter()
        .chain(&changes.modified)
        .map(String::as_str)
        .collect();
    no_new_skips(&tests, &shown, &changed, &subject.diff)
}

/// What a test skip looks like in the common frameworks (pytest, unittest, Rust, Go, Jest,
/// Mocha, Vitest, JUnit).
static SKIP_MARKER: LazyLock<regex::Regex> = LazyLock::new(|| {
    regex::Regex::new(
        r"@pytest\.mark\.skip|\bpytest\.skip\(|@unittest\.skip|#\[ignore\b|\bt\.Skip(Now|f)?\(|\b(it|describe|test|context)\.skip\b|\bx(it|describe|test)\(|@Disabled\b|\.only\(",
    )
    .expect("the skip pattern compiles")
});

/// `no_new_skips`: the unified `diffs` of the attempt add no skip marker to a file `tests`
/// matches. A changed test file without a diff (binary, too large to keep) cannot be judged
/// and fails.
fn no_new_skips(
    tests: &globset::GlobSet,
    glob: &str,
    changed: &[&str],
    diffs: &[String],
) -> Judged {
    let mut found = Vec::new();
    let mut judged = std::collections::HashSet::new();
    for diff in diffs {
        let mut file: Option<&str> = None;
        let mut line = 0u32;
        for text in diff.lines() {
            if let Some(name) = text.strip_prefix("+++ ") {
                file = name.strip_prefix("b/").filter(|f| tests.is_match(f));
                if let Some(f) = file {
                    judged.insert(f.to_owned());
                }
                continue;
            }
            if text.starts_with("--- ") {
                continue;
            }
            if let Some(hunk) = text.strip_prefix("@@ ") {
                // `@@ -a,b +c,d @@`: new lines count from c.
                line = hunk
                    .split_whitespace()
                    .nth(1)
                    .and_then(|new| new.trim_start_matches('+').split(',').next())
                    .and_then(|n| n.parse().ok())
                    .unwrap_or(1);
                continue;
            }
            let Some(file) = file else { continue };
            if let Some(added) = text.strip_prefix('+') {
                if let Some(m) = SKIP_MARKER.find(added)
                    && found.len() < MAX_QUOTED
                {
                    found.push(format!("{file}:{line} adds `{}`", m.as_str()));
                }
                line += 1;
            } else if !text.starts_with('-') && !text.starts_with('\\') {
                line += 1;
            }
        }
    }
    let unjudged: Vec<&str> = changed
        .iter()
        .filter(|f| tests.is_match(f) && !judged.contains(**f))
        .copied()
        .collect();
    if !found.is_empty() {
        return fail(format!(
            "the attempt adds a test skip to a test file ({glob}): {}; fix the code instead of skipping its tests",
            found.join(", ")
        ));
    }
    if !unjudged.is_empty() {
        return fail(format!(
            "changed test file(s) could not be judged for new skips (no text diff: binary or too large): {}",
            unjudged.join(", ")
        ));
    }
    Judged {
        passed: true,
        result: EvidenceResult::Pass,
        proof: format!("no skip marker added to files matching {glob}"),
        sha256: None,
        bytes: None,
    }
}

/// GETs `url` and judges the status and body.
async fn endpoint(
    http: &reqwest::Client,
    url: &str,
    status: u16,
    body_contains: Option<&str>,
    timeout: std::time::Duration,
) -> Judged {
    let request = async {
        let mut response = http.get(url).send().await?;
        let got = response.status().as_u16();
        let mut body = Vec::new();
        if body_contains.is_some() {
            while let Some(chunk) = response.chunk().await? {
                let room = MAX_ENDPOINT_BODY - body.len();
                body.extend_from_slice(&chunk[..chunk.len().min(room)]);
                if body.len() == MAX_ENDPOINT_BODY {
                    break;
                }
            }
        }
        Ok::<_, reqwest::Error>((got, body))
    };
    match tokio::time::timeout(timeout, request).await {
        Err(_) => Judged {
            passed: false,
            result: EvidenceResult::Timeout,
            proof: format!("GET {url} did not answer within {timeout:?}"),
            sha256: None,
            bytes: None,
        },
        Ok(Err(e)) => Judged {
            passed: false,
            result: EvidenceResult::Fail,
            proof: format!("GET {url} failed: {}", error_chain(&e)),
            sha256: None,
            bytes: None,
        },
        Ok(Ok((got, _))) if got != status => {
            fail(format!("GET {url} answered {got}, expected {status}"))
        }
        Ok(Ok((got, body))) => {
            let text = String::from_utf8_lossy(&body);
            match body_contains {
                Some(needle) if !text.contains(needle) => fail(format!(
                    "GET {url} answered {got} but the body (first {} bytes) does not contain {needle:?}",
                    body.len()
                )),
                _ => Judged {
                    passed: true,
                    result: EvidenceResult::Pass,
                    proof: match body_contains {
                        Some(needle) => {
                            format!("GET {url} answered {got}; the body contains {needle:?}")
                        }
                        None => format!("GET {url} answered {got}"),
                    },
                    sha256: (!body.is_empty()).then(|| harness_builtins::sha256_hex(&body)),
                    bytes: None,
                },
            }
        }
    }
}

/// An error and its causes on one line (reqwest's own message hides "connection refused").
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `no_placeholders` on one workspace: what it passes, quotes, and refuses to judge.
    #[test]
    fn no_placeholders_quotes_what_it_finds_and_fails_what_it_cannot_judge() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path();
        std::fs::create_dir_all(root.join("src")).expect("src");
        std::fs::write(root.join("src/done.rs"), "fn done() {}\n").expect("write");
        let many: String = (0..MAX_QUOTED + 2).map(|_| "// TODO\n").collect();
        std::fs::write(root.join("src/many.py"), many).expect("write");
        std::fs::write(root.join("src/bytes.c"), b"\xff\xfe int x; /* FIXME */\n").expect("write");
        std::os::unix::fs::symlink("done.rs", root.join("src/link.rs")).expect("link");
        let big = vec![b'a'; usize::try_from(MAX_SCANNED_BYTES).expect("fits") + 1];
        std::fs::write(root.join("src/big.txt"), big).expect("write");
        let workspace = harness_builtins::Workspace::new(root).expect("workspace");
        let judged = |glob: &str| no_placeholders(&workspace, glob);

        let clean = judged("src/done.rs");
        assert!(clean.passed, "{}", clean.proof);
        assert_eq!(
            clean.proof,
            "no placeholders in 1 file(s) matching src/done.rs"
        );

        let many = judged("src/*.py");
        assert!(!many.passed);
        assert!(
            many.proof.starts_with(&format!(
                "{} placeholder(s) in files matching src/*.py: src/many.py:1 TODO",
                MAX_QUOTED + 2
            )) && many.proof.ends_with(" and 2 more"),
            "{}",
            many.proof
        );

        let not_utf8 = judged("src/*.c");
        assert!(!not_utf8.passed);
        assert!(
            not_utf8.proof.contains("src/bytes.c:1 FIXME"),
            "{}",
            not_utf8.proof
        );

        for (glob, why) in [
            (
                "src/link.rs",
                "src/link.rs: is a symbolic link (not followed)",
            ),
            ("src/*.txt", "over the"),
            ("nothing/*.rs", "no file matches nothing/*.rs"),
            ("src/[", "does not compile"),
        ] {
            let judged = judged(glob);
            assert!(!judged.passed, "{glob}");
            assert!(judged.proof.contains(why), "{glob}: {}", judged.proof);
        }
    }
}
