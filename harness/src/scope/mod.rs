//! Scope (DESIGN §4.8): what the delegate changed in the workspace, and whether it was allowed
//! to. Before attempt 0 a [`Snapshot`] records every file; after each attempt a second walk
//! finds what was added, modified and deleted since, which verifiers read as
//! `result["changes"]`, the retry context quotes as a unified diff, and `allow`/`deny` judge.
//!
//! Cheap the way `git status` is: a snapshot is what `lstat` says (size, modification and
//! status-change times, inode, mode) — nothing is read or hashed for most files, and a write
//! always moves the status-change time, which a user cannot set back. Small text files the
//! delegate may change (inside `allow`) are also kept, up to a budget, so that a touch without a
//! change is not reported and the diff can show the lines. The walk runs on several threads,
//! never follows links, never opens FIFOs or devices, and skips what it cannot read with a
//! warning. The workspace's own ignore files are not read: the delegate could write one to hide
//! its work; only `scope.ignore`, from the policy, is.

use std::collections::HashMap;
use std::os::unix::ffi::OsStrExt as _;
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use globset::{Glob, GlobSet, GlobSetBuilder};
use harness_hooks::Changes;
use serde::Deserialize;

use crate::error::{Error, Result};

pub mod cache;

/// Files larger than this are never kept for diffs.
const MAX_KEPT_FILE: u64 = 256 * 1024;
/// All kept contents together, at most.
const MAX_KEPT_TOTAL: u64 = 6 * 1024 * 1024;
/// Warnings kept from one walk, at most (the rest are counted).
const MAX_WARNINGS: usize = 20;

/// What a delegation's `scope:` says.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ScopeSpec {
    /// Globs (relative to the workspace) the delegate may change; empty = anything.
    pub allow: Vec<String>,
    /// Globs it may never change, even inside `allow`.
    pub deny: Vec<String>,
    /// Gitignore-style patterns left out of the snapshot altogether (build output, caches).
    pub ignore: Vec<String>,
    /// What a violation does.
    pub on_violation: OnViolation,
}

/// What a change outside the scope does to the delegation.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum OnViolation {
    /// End the delegation at once as `failed`, kind `scope_violation` (the default).
    #[default]
    Fail,
    /// A blocking finding: the delegate is told and retries, within its budget.
    Retry,
}

/// `scope:` as written, in a delegation file or a project policy's `verification_defaults`.
///
/// What the delegate may change in the workspace; a change outside it is a blocking `scope`
/// finding.
#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "scope")]
pub(crate) struct RawScope {
    /// Globs (relative to the workspace) the delegate may change; empty or absent: anything.
    #[serde(default)]
    allow: Vec<String>,
    /// Globs it may never change, even inside `allow`.
    #[serde(default)]
    deny: Vec<String>,
    /// Gitignore-style patterns left out of the snapshot altogether (build output, caches).
    #[serde(default)]
    ignore: Vec<String>,
    /// `fail` ends the delegation at once as failed, kind scope_violation (the default);
    /// `retry` tells the delegate and lets it retry.
    #[serde(default)]
    #[schemars(extend("enum" = ["fail", "retry", null]))]
    on_violation: Option<String>,
}

impl ScopeSpec {
    /// Validates `scope:` as written in `file`.
    ///
    /// # Errors
    /// [`ErrorKind::Config`](crate::ErrorKind::Config) naming the key: a glob that does not
    /// compile, an unknown `on_violation`.
    pub(crate) fn parse(file: &str, raw: RawScope) -> Result<Self> {
        let on_violation = match raw.on_violation.as_deref() {
            None | Some("fail") => OnViolation::Fail,
            Some("retry") => OnViolation::Retry,
            Some(other) => {
                return Err(Error::config(format!(
                    "{file}: `scope.on_violation` is {other:?}; use `fail` (the default: end the delegation) or `retry` (tell the delegate and let it retry)"
                )));
            }
        };
        let spec = ScopeSpec {
            allow: raw.allow,
            deny: raw.deny,
            ignore: raw.ignore,
            on_violation,
        };
        spec.validate(file)?;
        Ok(spec)
    }

    /// Checks every glob and pattern compiles; `at` names the file and key in messages.
    ///
    /// # Errors
    /// [`ErrorKind::Config`](crate::ErrorKind::Config) naming the glob.
    pub fn validate(&self, at: &str) -> Result<()> {
        Scope::compile(self, Path::new("/"), at).map(|_| ())
    }
}

/// A [`ScopeSpec`] compiled for one workspace.
#[derive(Debug, Clone)]
pub struct Scope {
    /// What the delegation file (or project policy) said.
    pub spec: ScopeSpec,
    root: PathBuf,
    allow: GlobSet,
    deny: GlobSet,
    ignore: Arc<ignore::gitignore::Gitignore>,
    /// Where the kept text is cached between baselines ([`cache`]), if anywhere.
    cache: Option<PathBuf>,
}

/// Compiles the globs written at `key` (`scope.allow`, `protect`) of the file `at`.
///
/// # Errors
/// [`ErrorKind::Config`](crate::ErrorKind::Config) naming the entry that does not compile.
pub(crate) fn globs(patterns: &[String], at: &str, key: &str) -> Result<GlobSet> {
    let mut set = GlobSetBuilder::new();
    for (i, pattern) in patterns.iter().enumerate() {
        let glob = Glob::new(pattern).map_err(|e| {
            Error::config(format!(
                "{at}: `{key}[{i}]`: the glob {pattern:?} does not compile: {e}; write a glob relative to the workspace, like \"tests/**\""
            ))
        })?;
        set.add(glob);
    }
    set.build()
        .map_err(|e| Error::config(format!("{at}: `{key}`: {e}")))
}

impl Scope {
    /// Compiles `spec` for the workspace at `root`.
    pub fn compile(spec: &ScopeSpec, root: &Path, at: &str) -> Result<Self> {
        let mut ignore = ignore::gitignore::GitignoreBuilder::new(root);
        for (i, pattern) in spec.ignore.iter().enumerate() {
            ignore.add_line(None, pattern).map_err(|e| {
                Error::config(format!(
                    "{at}: `scope.ignore[{i}]`: the pattern {pattern:?} does not compile: {e}"
                ))
            })?;
        }
        let ignore = ignore
            .build()
            .map_err(|e| Error::config(format!("{at}: `scope.ignore`: {e}")))?;
        Ok(Scope {
            allow: globs(&spec.allow, at, "scope.allow")?,
            deny: globs(&spec.deny, at, "scope.deny")?,
            ignore: Arc::new(ignore),
            root: root.to_path_buf(),
            spec: spec.clone(),
            cache: None,
        })
    }

    /// The same, keeping the text of unchanged files between baselines in the observation
    /// cache at `file` ([`cache`]; [`cache::path_of`] the journal).
    #[must_use]
    pub fn with_cache(mut self, file: Option<PathBuf>) -> Self {
        self.cache = file;
        self
    }

    /// Why the delegate may not change `path`, or `None` when it may.
    pub fn refuses(&self, path: &str) -> Option<&'static str> {
        if self.deny.is_match(path) {
            Some("inside `scope.deny`")
        } else if !self.spec.allow.is_empty() && !self.allow.is_match(path) {
            Some("outside `scope.allow`")
        } else {
            None
        }
    }

    /// Records the workspace as it is now: [`Scope::walk_baseline`], then
    /// [`Scope::keep_contents`]. `first` names the files whose text is kept before all others.
    pub fn snapshot(&self, first: &dyn Fn(&str) -> bool, stop: &Arc<AtomicBool>) -> Snapshot {
        let mut snapshot = self.walk_baseline(stop);
        self.keep_contents(&mut snapshot, first);
        snapshot
    }

    /// The baseline's walk: what `lstat` says of every entry, nothing read. The walk ends
    /// early, incomplete, when `stop` is set.
    pub fn walk_baseline(&self, stop: &Arc<AtomicBool>) -> Snapshot {
        let mut snapshot = self.walk(None, Some(stop));
        for (index, entry) in snapshot.files.values_mut().enumerate() {
            entry.index = u32::try_from(index).unwrap_or(u32::MAX);
        }
        snapshot
    }

    /// Keeps the text of small files the delegate may change (to the budget, smallest first,
    /// the `first` ones before the rest), so a touch is no change and the diff can show lines.
    ///
    /// It may run while the delegate works: a file is kept only when its `lstat` after the read
    /// is still the baseline's — any write moves the status-change time — so what is kept is
    /// the baseline's text or nothing (the diff then reports the file without its lines).
    /// With an observation cache ([`Scope::with_cache`]) and at least a thousand files to keep,
    /// the text of a file whose `lstat` is the one cached is taken from the cache, not read.
    pub fn keep_contents(&self, snapshot: &mut Snapshot, first: &dyn Fn(&str) -> bool) {
        let mut candidates: Vec<(bool, u64, &str)> = snapshot
            .files
            .iter()
            .filter(|(_, entry)| entry.is_file() && entry.size <= MAX_KEPT_FILE)
            .filter_map(|(path, entry)| {
                let priority = first(path);
                (priority || self.refuses(path).is_none())
                    .then_some((!priority, entry.size, &**path))
            })
            .collect();
        candidates.sort_unstable();
        let mut budget = MAX_KEPT_TOTAL;
        let mut kept = Vec::new();
        for (_, size, path) in candidates {
            if size > budget {
                continue;
            }
            budget -= size;
            kept.push(path.to_owned());
        }
        // What the cache holds for exactly the `lstat` the walk found is not read again.
        let read_at = std::time::SystemTime::now();
        let mut cached = self
            .cache
            .as_deref()
            .filter(|_| kept.len() >= cache::FROM_FILES)
            .map(|file| {
                let loaded = cache::Loaded::read(file, &self.root, &mut snapshot.warnings);
                (file, loaded)
            });
        if let Some((_, loaded)) = &mut cached {
            kept.retain(|path| {
                let Some(entry) = snapshot.files.get_mut(path.as_str()) else {
                    return true;
                };
                match loaded.take(path, entry) {
                    Some(text) => {
                        entry.content = Some(text);
                        snapshot.cached += 1;
                        false
                    }
                    None => true,
                }
            });
        }
        self.read_kept(snapshot, &kept);
        if let Some((file, loaded)) = cached {
            // Written again only when it no longer says what the files do: something it held
            // changed or went, or a file read now is old enough to be stored.
            let stale = !loaded.found
                || loaded.left() > 0
                || kept.iter().any(|path| {
                    snapshot
                        .files
                        .get(path.as_str())
                        .is_some_and(|e| e.content.is_some() && cache::settled(e, read_at))
                });
            if stale {
                let entries = snapshot
                    .files
                    .iter()
                    .filter(|(_, e)| e.content.is_some() && cache::settled(e, read_at))
                    .map(|(path, e)| (&**path, e));
                if let Err(e) = cache::write(file, &self.root, entries) {
                    snapshot.warnings.push(format!(
                        "scope: the observation cache {} could not be written: {e}",
                        file.display()
                    ));
                }
            }
        }
    }

    /// Reads the text of the `kept` files into `snapshot`, on as many threads as the walk used
    /// (thousands of small reads): a file is kept only when its `lstat` after the read is
    /// still the walk's.
    fn read_kept(&self, snapshot: &mut Snapshot, kept: &[String]) {
        let chunk = kept.len().div_ceil(threads()).max(1);
        let files = &snapshot.files;
        let read: Vec<(String, Option<Vec<u8>>)> = std::thread::scope(|scope| {
            let readers: Vec<_> = kept
                .chunks(chunk)
                .map(|part| {
                    scope.spawn(move || {
                        part.iter()
                            .map(|path| {
                                let full = self.root.join(path);
                                let content = read_small(&full).filter(|_| {
                                    // Still the baseline's file: kept; changed since: not.
                                    let now = full.symlink_metadata().ok().map(|m| Entry::of(&m));
                                    match (now, files.get(path.as_str())) {
                                        (Some(now), Some(then)) => then.same_stat(&now),
                                        _ => false,
                                    }
                                });
                                (path.clone(), content)
                            })
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            readers
                .into_iter()
                .flat_map(|reader| reader.join().unwrap_or_default())
                .collect()
        });
        for (path, content) in read {
            if let (Some(content), Some(entry)) = (content, snapshot.files.get_mut(path.as_str())) {
                entry.content = Some(content.into_boxed_slice());
            }
        }
    }

    /// What changed between `before` and now, with the violations of the scope.
    pub fn diff(&self, before: &Snapshot) -> Diff {
        let seen: Vec<AtomicBool> = before
            .files
            .iter()
            .map(|_| AtomicBool::new(false))
            .collect();
        // Only what is new or whose `lstat` moved comes back; the rest is marked in `seen`.
        let after = self.walk(Some((before, &seen)), None);
        let mut changes = Changes::default();
        let mut diffs = Vec::new();
        for (path, now) in &after.files {
            match before.files.get(path) {
                None => {
                    changes.added.push(path.to_string());
                    if now.is_file()
                        && now.size <= MAX_KEPT_FILE
                        && let Some(new) = read_small(&self.root.join(&**path))
                    {
                        diffs.push(unified(path, b"", &new, "/dev/null"));
                    }
                }
                Some(then) if then.same_stat(now) => {}
                Some(then) => match (&then.content, now.is_file()) {
                    // Kept: compare the bytes, so a touch is not a change.
                    (Some(old), true) => match read_small(&self.root.join(&**path)) {
                        // The same bytes and the same mode: a touch, not a change (`chmod -x`
                        // of a test is a change: a runner may skip what it cannot execute).
                        Some(new) if new.as_slice() == &**old && then.mode == now.mode => {}
                        Some(new) => {
                            changes.modified.push(path.to_string());
                            diffs.push(unified(path, old, &new, path));
                        }
                        None => changes.modified.push(path.to_string()),
                    },
                    _ => changes.modified.push(path.to_string()),
                },
            }
        }
        for (path, then) in &before.files {
            let index = then.index as usize;
            if !seen.get(index).is_some_and(|s| s.load(Ordering::Relaxed)) {
                changes.deleted.push(path.to_string());
                if let Some(old) = &then.content {
                    diffs.push(unified(path, old, b"", path));
                }
            }
        }
        changes.added.sort_unstable();
        changes.modified.sort_unstable();
        changes.deleted.sort_unstable();
        diffs.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        let violations = changes
            .iter()
            .filter_map(|(path, how)| {
                self.refuses(path)
                    .map(|why| (path.to_owned(), format!("{how}, {why}")))
            })
            .collect();
        Diff {
            changes,
            violations,
            diff: diffs.into_iter().filter_map(|(_, text)| text).collect(),
            warnings: after.warnings,
        }
    }

    /// Walks the workspace on several threads: `.git/` and `.harness/` at the top and
    /// `scope.ignore` are left out, links are recorded but never followed. Against a
    /// `baseline`, only the entries that are new or whose `lstat` moved are gathered; the others
    /// are marked in its `seen` flags (by [`Entry::index`]).
    fn walk(
        &self,
        baseline: Option<(&Snapshot, &[AtomicBool])>,
        stop: Option<&Arc<AtomicBool>>,
    ) -> Snapshot {
        let shared = Shared::default();
        let ignore = Arc::clone(&self.ignore);
        ignore::WalkBuilder::new(&self.root)
            .standard_filters(false)
            .follow_links(false)
            .threads(threads())
            .filter_entry(move |entry| {
                let is_dir = entry.file_type().is_some_and(|t| t.is_dir());
                let name = entry.file_name();
                // A directory left out takes what it holds with it: the entry alone is matched.
                !(entry.depth() == 1 && is_dir && (name == ".git" || name == ".harness"))
                    && !ignore.matched(entry.path(), is_dir).is_ignore()
            })
            .build_parallel()
            .visit(&mut Visitors {
                shared: &shared,
                root: &self.root,
                baseline,
                stop: stop.map(|s| &**s),
            });
        let Gathered {
            files,
            mut warnings,
            dropped,
        } = shared
            .state
            .into_inner()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if dropped > 0 {
            warnings.push(format!("scope: {dropped} more entries could not be read"));
        }
        Snapshot {
            files,
            warnings,
            cached: 0,
        }
    }
}

/// Threads a walk or a read uses: one per core, at most 8.
fn threads() -> usize {
    // Asked once: the answer reads the cgroup's CPU quota, which costs more than a small walk.
    static THREADS: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *THREADS.get_or_init(|| std::thread::available_parallelism().map_or(2, |n| n.get().min(8)))
}

/// The workspace at one moment: path (relative, `/`-separated) → what `lstat` said.
#[derive(Debug, Default)]
pub struct Snapshot {
    files: Files,
    /// What could not be read, reported and skipped.
    pub warnings: Vec<String>,
    /// How many files' text came from the observation cache instead of the files.
    cached: usize,
}

impl Snapshot {
    /// The number of entries recorded.
    pub fn entries(&self) -> usize {
        self.files.len()
    }

    /// The paths recorded, in no order.
    pub fn paths(&self) -> impl Iterator<Item = &str> {
        self.files.keys().map(|p| &**p)
    }

    /// How many files' kept text came from the observation cache ([`cache`]), not read again.
    pub fn cached(&self) -> usize {
        self.cached
    }

    /// The bytes kept of `path` at the snapshot, if they were kept.
    pub fn kept(&self, path: &str) -> Option<&[u8]> {
        self.files.get(path)?.content.as_deref()
    }
}

/// What one walk after an attempt found.
#[derive(Debug, Default)]
pub struct Diff {
    /// Added, modified, deleted since the baseline.
    pub changes: Changes,
    /// Each change the scope refuses: the path and what is wrong (`added, outside
    /// `scope.allow``).
    pub violations: Vec<(String, String)>,
    /// Unified diffs of the text files that changed, by path.
    pub diff: Vec<String>,
    /// What could not be read, reported and skipped.
    pub warnings: Vec<String>,
}

/// One entry of a snapshot.
#[derive(Debug)]
struct Entry {
    size: u64,
    modified: (i64, i64),
    changed: (i64, i64),
    inode: u64,
    mode: u32,
    /// Its place in the snapshot, for the `seen` flags of a diff (in what would be padding).
    index: u32,
    /// The bytes, for small files the delegate may change (see [`Scope::snapshot`]).
    content: Option<Box<[u8]>>,
}

impl Entry {
    fn of(meta: &std::fs::Metadata) -> Self {
        Entry {
            size: meta.len(),
            modified: (meta.mtime(), meta.mtime_nsec()),
            changed: (meta.ctime(), meta.ctime_nsec()),
            inode: meta.ino(),
            mode: meta.mode(),
            index: 0,
            content: None,
        }
    }

    fn is_file(&self) -> bool {
        self.mode & libc_type_mask() == libc_regular()
    }

    /// What `lstat` said of it (the entry keeps the fields flat: an index fits in the padding).
    fn stamp(&self) -> Stamp {
        Stamp {
            len: self.size,
            mtime: self.modified,
            ctime: self.changed,
            ino: self.inode,
            mode: self.mode,
        }
    }

    fn same_stat(&self, other: &Entry) -> bool {
        self.stamp() == other.stamp()
    }
}

/// `S_IFMT` and `S_IFREG`: the file-type bits of `st_mode`, fixed by POSIX.
const fn libc_type_mask() -> u32 {
    0o170_000
}
const fn libc_regular() -> u32 {
    0o100_000
}

/// Reads a small regular file without following a link or blocking on a FIFO.
fn read_small(path: &Path) -> Option<Vec<u8>> {
    let mut file = harness_builtins::open_regular(path).ok()?;
    let mut bytes = Vec::new();
    std::io::Read::read_to_end(
        &mut std::io::Read::take(&mut file, MAX_KEPT_FILE + 1),
        &mut bytes,
    )
    .ok()?;
    (bytes.len() as u64 <= MAX_KEPT_FILE).then_some(bytes)
}

/// A unified diff of one file, when both sides are text.
fn unified(path: &str, old: &[u8], new: &[u8], old_name: &str) -> (String, Option<String>) {
    let (Ok(old), Ok(new)) = (std::str::from_utf8(old), std::str::from_utf8(new)) else {
        return (
            path.to_owned(),
            Some(format!("Binary file {path} changed\n")),
        );
    };
    let (a, b) = if old_name == "/dev/null" {
        ("/dev/null".to_owned(), format!("b/{path}"))
    } else if new.is_empty() && !old.is_empty() {
        (format!("a/{path}"), "/dev/null".to_owned())
    } else {
        (format!("a/{path}"), format!("b/{path}"))
    };
    let text = similar::TextDiff::from_lines(old, new)
        .unified_diff()
        .context_radius(3)
        .header(&a, &b)
        .to_string();
    (path.to_owned(), (!text.is_empty()).then_some(text))
}

/// What the walker threads fill.
#[derive(Default)]
struct Shared {
    state: Mutex<Gathered>,
}

/// The entries, the warnings, and how many warnings were dropped past [`MAX_WARNINGS`].
#[derive(Default)]
struct Gathered {
    files: Files,
    warnings: Vec<String>,
    dropped: usize,
}

/// Makes one [`Visitor`] per walker thread.
struct Visitors<'s> {
    shared: &'s Shared,
    root: &'s Path,
    baseline: Option<(&'s Snapshot, &'s [AtomicBool])>,
    stop: Option<&'s AtomicBool>,
}

impl<'s> ignore::ParallelVisitorBuilder<'s> for Visitors<'s> {
    fn build(&mut self) -> Box<dyn ignore::ParallelVisitor + 's> {
        Box::new(Visitor {
            shared: self.shared,
            root: self.root,
            baseline: self.baseline,
            stop: self.stop,
            batch: Vec::with_capacity(BATCH),
            problems: Vec::new(),
        })
    }
}

/// Path → entry, hashed with foldhash's DoS-resistant variant (the delegate names the files;
/// SipHash was a tenth of a walk).
type Files = HashMap<Box<str>, Entry, foldhash::quality::RandomState>;

/// Entries one thread merges at a time.
const BATCH: usize = 1024;

/// One walker thread: gathers entries locally and merges them in batches (and when dropped).
struct Visitor<'s> {
    shared: &'s Shared,
    root: &'s Path,
    baseline: Option<(&'s Snapshot, &'s [AtomicBool])>,
    stop: Option<&'s AtomicBool>,
    batch: Vec<(Box<str>, Entry)>,
    problems: Vec<String>,
}

impl Visitor<'_> {
    fn flush(&mut self) {
        let mut state = self
            .shared
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        state.files.extend(self.batch.drain(..));
        for problem in self.problems.drain(..) {
            if state.warnings.len() < MAX_WARNINGS {
                state.warnings.push(problem);
            } else {
                state.dropped += 1;
            }
        }
    }
}

impl Drop for Visitor<'_> {
    fn drop(&mut self) {
        self.flush();
    }
}

impl ignore::ParallelVisitor for Visitor<'_> {
    fn visit(
        &mut self,
        entry: std::result::Result<ignore::DirEntry, ignore::Error>,
    ) -> ignore::WalkState {
        let entry = match entry {
            Ok(entry) => entry,
            Err(e) => {
                self.problems.push(format!("scope: skipped: {e}"));
                return ignore::WalkState::Continue;
            }
        };
        if entry.depth() == 0 {
            return ignore::WalkState::Continue;
        }
        if self.stop.is_some_and(|s| s.load(Ordering::Relaxed)) {
            return ignore::WalkState::Quit;
        }
        // Directories are walked, not recorded: a change shows in what they hold.
        if entry.file_type().is_some_and(|t| t.is_dir()) {
            return ignore::WalkState::Continue;
        }
        match entry.path().symlink_metadata() {
            Ok(meta) => {
                // The walk yields `root/…`, `/`-separated: the rest is the relative path.
                let full = entry.path().as_os_str().as_bytes();
                let rel = full
                    .strip_prefix(self.root.as_os_str().as_bytes())
                    .map_or(full, |rel| rel.strip_prefix(b"/").unwrap_or(rel));
                let rel = String::from_utf8_lossy(rel);
                let now = Entry::of(&meta);
                if let Some((before, seen)) = self.baseline
                    && let Some(then) = before.files.get(&*rel)
                {
                    if let Some(flag) = seen.get(then.index as usize) {
                        flag.store(true, Ordering::Relaxed);
                    }
                    if then.same_stat(&now) {
                        return ignore::WalkState::Continue;
                    }
                }
                // A FIFO, socket or device is recorded (its coming and going is a change), its
                // contents never read: said, so nobody takes it for snapshotted text.
                use std::os::unix::fs::FileTypeExt as _;
                let kind = meta.file_type();
                let special = if kind.is_fifo() {
                    Some("a FIFO")
                } else if kind.is_socket() {
                    Some("a socket")
                } else if kind.is_char_device() || kind.is_block_device() {
                    Some("a device")
                } else {
                    None
                };
                if let Some(what) = special {
                    self.problems.push(format!(
                        "scope: {rel} is {what}: recorded, its contents not read"
                    ));
                }
                self.batch.push((rel.into_owned().into_boxed_str(), now));
                if self.batch.len() >= BATCH {
                    self.flush();
                }
            }
            Err(e) => self
                .problems
                .push(format!("scope: skipped {}: {e}", entry.path().display())),
        }
        ignore::WalkState::Continue
    }
}

/// What `lstat` says of a file or link: enough to tell it changed without reading it (any
/// write moves its status-change time, which no user can set back). The gate re-check stamps
/// protected files with it; a child's isolated copy stamps what it copied.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct Stamp {
    len: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
    ino: u64,
    mode: u32,
}

impl Stamp {
    /// The stamp of what `meta` describes.
    pub(crate) fn of(meta: &std::fs::Metadata) -> Self {
        Stamp {
            len: meta.len(),
            mtime: (meta.mtime(), meta.mtime_nsec()),
            ctime: (meta.ctime(), meta.ctime_nsec()),
            ino: meta.ino(),
            mode: meta.mode(),
        }
    }

    /// `path` stamped now, without following a link; `None` when it does not exist.
    pub(crate) fn now(path: &Path) -> Option<Self> {
        path.symlink_metadata().ok().map(|m| Stamp::of(&m))
    }
}

/// The most bytes of a workspace file [`read_text`] reads.
const MAX_FILE: u64 = 1024 * 1024;

/// The text of `rel` beneath `root`, no link followed, at most [`MAX_FILE`] bytes; `None` for
/// what cannot be read as text.
pub(crate) fn read_text(root: &std::path::Path, rel: &str) -> Option<String> {
    let file = harness_builtins::open_read_beneath(root, std::path::Path::new(rel)).ok()?;
    let mut bytes = Vec::new();
    std::io::Read::read_to_end(&mut std::io::Read::take(file, MAX_FILE), &mut bytes).ok()?;
    String::from_utf8(bytes).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scope(root: &Path, allow: &[&str], ignore: &[&str]) -> Scope {
        let spec = ScopeSpec {
            allow: allow.iter().map(|s| (*s).to_owned()).collect(),
            ignore: ignore.iter().map(|s| (*s).to_owned()).collect(),
            ..ScopeSpec::default()
        };
        Scope::compile(&spec, root, "test").expect("compiles")
    }

    fn write(root: &Path, path: &str, text: &str) {
        let path = root.join(path);
        std::fs::create_dir_all(path.parent().expect("a parent")).expect("mkdir");
        std::fs::write(path, text).expect("write");
    }

    fn strs(paths: &[String]) -> Vec<&str> {
        paths.iter().map(String::as_str).collect()
    }

    fn changes(diff: &Diff) -> (Vec<&str>, Vec<&str>, Vec<&str>) {
        (
            strs(&diff.changes.added),
            strs(&diff.changes.modified),
            strs(&diff.changes.deleted),
        )
    }

    #[test]
    fn added_modified_and_deleted_files_are_found_and_a_touch_is_not_a_change() {
        let dir = tempfile::tempdir().expect("temp dir");
        let root = dir.path();
        write(root, "src/keep.rs", "fn keep() {}\n");
        write(root, "src/edit.rs", "fn edit() {}\n");
        write(root, "src/touch.rs", "fn touch() {}\n");
        write(root, "src/gone.rs", "fn gone() {}\n");
        write(root, "docs/outside.md", "# outside\n");
        let scope = scope(root, &["src/**"], &[]);
        let before = scope.snapshot(&|_| false, &Arc::default());
        assert_eq!(before.entries(), 5);

        write(root, "src/edit.rs", "fn edit() { changed() }\n");
        write(root, "src/touch.rs", "fn touch() {}\n"); // the same bytes, written again
        std::fs::remove_file(root.join("src/gone.rs")).expect("rm");
        write(root, "src/new.rs", "fn new() {}\n");
        write(root, "docs/outside.md", "# outside, edited\n");
        let diff = scope.diff(&before);
        assert_eq!(
            changes(&diff),
            (
                vec!["src/new.rs"],
                vec!["docs/outside.md", "src/edit.rs"],
                vec!["src/gone.rs"]
            )
        );
        assert_eq!(
            diff.violations,
            vec![(
                "docs/outside.md".to_owned(),
                "modified, outside `scope.allow`".to_owned()
            )]
        );
        // Diffs for the kept text files; the one outside `allow` was never kept.
        let text = diff.diff.join("");
        assert!(text.contains("+fn edit() { changed() }"), "{text}");
        assert!(text.contains("-fn gone() {}"), "{text}");
        assert!(text.contains("+fn new() {}"), "{text}");
        assert!(!text.contains("outside"), "{text}");

        // The baseline is unchanged by a diff: a second one against it finds the same.
        let again = scope.diff(&before);
        assert_eq!(changes(&again), changes(&diff));
    }

    #[test]
    fn text_read_after_the_walk_is_kept_only_when_the_file_is_still_the_baselines() {
        let dir = tempfile::tempdir().expect("temp dir");
        let root = dir.path();
        write(root, "a.txt", "before\n");
        write(root, "b.txt", "steady\n");
        let scope = scope(root, &[], &[]);
        let mut baseline = scope.walk_baseline(&Arc::default());
        // The delegate writes between the walk and the read of the text.
        std::thread::sleep(std::time::Duration::from_millis(20));
        write(root, "a.txt", "written by the delegate\n");
        scope.keep_contents(&mut baseline, &|_| false);
        assert_eq!(
            baseline.kept("a.txt"),
            None,
            "the delegate's text is no baseline"
        );
        assert_eq!(baseline.kept("b.txt"), Some(&b"steady\n"[..]));
        // The change is still found; only its lines are unknown.
        let diff = scope.diff(&baseline);
        assert_eq!(changes(&diff), (vec![], vec!["a.txt"], vec![]));
        assert!(diff.diff.is_empty(), "{:?}", diff.diff);
    }

    #[test]
    fn a_file_replaced_by_a_rename_is_modified_and_ignored_paths_are_never_seen() {
        let dir = tempfile::tempdir().expect("temp dir");
        let root = dir.path();
        write(root, "a.txt", "one\n");
        write(root, "target/out.bin", "old\n");
        let scope = scope(root, &[], &["target/", "*.log"]);
        let before = scope.snapshot(&|_| false, &Arc::default());
        assert_eq!(before.entries(), 1);

        write(root, "b.txt", "two\n");
        std::fs::rename(root.join("b.txt"), root.join("a.txt")).expect("rename");
        write(root, "target/out.bin", "new\n");
        write(root, "build.log", "noise\n");
        let diff = scope.diff(&before);
        assert_eq!(changes(&diff), (vec![], vec!["a.txt"], vec![]));
        assert!(diff.violations.is_empty());
    }

    /// A workspace of `n` small files under `src/`, old enough for the cache to store them.
    fn settled_workspace(n: usize) -> tempfile::TempDir {
        let dir = tempfile::tempdir().expect("temp dir");
        for i in 0..n {
            write(
                dir.path(),
                &format!("src/f{i:04}.txt"),
                &format!("line {i}\n"),
            );
        }
        std::thread::sleep(cache::RACY + std::time::Duration::from_millis(50));
        dir
    }

    #[test]
    fn unchanged_files_text_comes_from_the_cache_and_a_changed_or_young_file_is_read_again() {
        let ws = settled_workspace(cache::FROM_FILES);
        let root = ws.path();
        let state = tempfile::tempdir().expect("journal dir");
        let file = cache::path_of(&state.path().join("runs.db"));
        let scope = scope(root, &[], &[]).with_cache(Some(file.clone()));

        let first = scope.snapshot(&|_| false, &Arc::default());
        assert_eq!(first.cached(), 0, "nothing cached yet");
        assert!(file.is_file(), "the baseline leaves its cache");
        assert!(first.warnings.is_empty(), "{:?}", first.warnings);

        // One file changes between delegations: its text is read again, the rest is not.
        write(root, "src/f0007.txt", "changed between runs\n");
        let second = scope.snapshot(&|_| false, &Arc::default());
        assert_eq!(second.cached(), cache::FROM_FILES - 1);
        assert_eq!(
            second.kept("src/f0007.txt"),
            Some(&b"changed between runs\n"[..])
        );
        assert_eq!(second.kept("src/f0001.txt"), Some(&b"line 1\n"[..]));

        // The cached text is the baseline the diff shows lines against.
        write(root, "src/f0001.txt", "line one, edited\n");
        let diff = scope.diff(&second);
        assert_eq!(changes(&diff), (vec![], vec!["src/f0001.txt"], vec![]));
        let text = diff.diff.join("");
        assert!(
            text.contains("-line 1\n") && text.contains("+line one, edited"),
            "{text}"
        );

        // Written less than the racy window ago, neither file was stored: both are read again
        // (a second write in the same clock tick could leave `lstat` as it was).
        let third = scope.snapshot(&|_| false, &Arc::default());
        assert_eq!(third.cached(), cache::FROM_FILES - 2);
        assert_eq!(
            third.kept("src/f0001.txt"),
            Some(&b"line one, edited\n"[..])
        );

        // A small workspace reads its files directly and leaves no cache.
        let small = tempfile::tempdir().expect("temp dir");
        write(small.path(), "a.txt", "a\n");
        let other = cache::path_of(&state.path().join("other.db"));
        let snapshot = scope_with_cache(small.path(), &other).snapshot(&|_| false, &Arc::default());
        assert_eq!(snapshot.kept("a.txt"), Some(&b"a\n"[..]));
        assert!(!other.exists());
    }

    fn scope_with_cache(root: &Path, file: &Path) -> Scope {
        scope(root, &[], &[]).with_cache(Some(file.to_path_buf()))
    }

    #[test]
    fn a_damaged_cache_or_another_workspaces_is_not_used_and_is_written_again() {
        let ws = settled_workspace(cache::FROM_FILES);
        let root = ws.path();
        let state = tempfile::tempdir().expect("journal dir");
        let file = cache::path_of(&state.path().join("runs.db"));
        let scope = scope_with_cache(root, &file);
        scope.snapshot(&|_| false, &Arc::default());

        // One byte of the stored text changed (a bad disk, or a hand): never trusted.
        let mut bytes = std::fs::read(&file).expect("the cache");
        let at = bytes.len() - 3;
        bytes[at] ^= 0x20;
        std::fs::write(&file, &bytes).expect("damage");
        let snapshot = scope.snapshot(&|_| false, &Arc::default());
        assert_eq!(snapshot.cached(), 0);
        assert!(
            snapshot
                .warnings
                .iter()
                .any(|w| w.contains("damaged") && w.contains("checksum")),
            "{:?}",
            snapshot.warnings
        );
        assert_eq!(snapshot.kept("src/f0999.txt"), Some(&b"line 999\n"[..]));
        // Written again from the files, and trusted from then on.
        let snapshot = scope.snapshot(&|_| false, &Arc::default());
        assert_eq!(snapshot.cached(), cache::FROM_FILES);
        assert!(snapshot.warnings.is_empty(), "{:?}", snapshot.warnings);

        // Not a cache at all: the same.
        std::fs::write(&file, "not a cache").expect("overwrite");
        let snapshot = scope.snapshot(&|_| false, &Arc::default());
        assert_eq!(snapshot.cached(), 0);
        assert!(
            snapshot.warnings.iter().any(|w| w.contains("damaged")),
            "{:?}",
            snapshot.warnings
        );

        // Another workspace with the same files (and the same journal) never takes this one's.
        let copy = tempfile::tempdir().expect("temp dir");
        for i in 0..cache::FROM_FILES {
            write(
                copy.path(),
                &format!("src/f{i:04}.txt"),
                &format!("line {i}\n"),
            );
        }
        let snapshot = scope_with_cache(copy.path(), &file).snapshot(&|_| false, &Arc::default());
        assert_eq!(snapshot.cached(), 0);
        assert!(snapshot.warnings.is_empty(), "{:?}", snapshot.warnings);
    }
}
