//! Isolated child workspaces (DESIGN §9): a child that can change files works in a copy of its
//! parent's workspace, so children run side by side and each one's changes are its own. The
//! copy is made when the call is made (the parent's uncommitted changes included; `.git` too, so
//! checks that ask git see what the parent has). `std::fs::copy` clones each file where the file
//! system can (`copy_file_range`: a reflink on Btrfs and XFS), else copies it; the whole copy is
//! bounded by `limits.isolation_mb`.
//!
//! When a verified child ends, its changes are applied to the parent's workspace, in call order:
//! a file the child wrote or removed that the parent's workspace still holds as it was when the
//! copy was made is taken; a file that changed there meanwhile (an earlier child's change) is a
//! conflict unless it already holds what the child wrote. One conflict, and nothing of that child
//! is applied; every write is staged beside its target before any is renamed into place. Never
//! applied: `.git` (a child's commits stay in its copy) and the journals. A path of the parent's
//! workspace that passes through a symbolic link is never written through.
//!
//! What changed is read like git's index reads a worktree: a file whose size, times, inode and
//! mode are what they were after the copy is unchanged, and its bytes are not read.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Component, Path, PathBuf};

use crate::scope::Stamp;

/// Default `limits.isolation_mb`: the largest workspace copied for a child, in MiB.
pub const DEFAULT_ISOLATION_MB: u64 = 1024;

/// Bytes of unified diff a conflict quotes, at most.
const MAX_CONFLICT_DIFF: usize = 64 * 1024;

/// A child's copy of its parent's workspace.
#[derive(Debug)]
pub(crate) struct Isolated {
    /// The temporary directory holding the copy; `None` once kept.
    dir: Option<tempfile::TempDir>,
    root: PathBuf,
    /// Each file and link copied: its stamp in the parent's workspace then, and in the copy
    /// just after.
    copied: BTreeMap<PathBuf, (Stamp, Stamp)>,
    /// Paths never copied nor applied (the journals), relative to the root.
    skipped: BTreeSet<PathBuf>,
    /// Bytes of regular files copied.
    bytes: u64,
}

/// What became of a child's changes in its parent's workspace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Applied {
    /// Every change was taken: the paths written or removed.
    Clean(Vec<String>),
    /// Nothing was taken: these paths changed in the parent's workspace since the copy was made
    /// (or pass through a link there), and how the child's version differs from the parent's.
    Conflict {
        /// The paths at fault.
        files: Vec<String>,
        /// A unified diff, the parent's version against the child's, cut at 64 KiB.
        diff: String,
    },
}

/// One path the child changed.
#[derive(Debug)]
enum Change {
    /// Written (added or modified): a file or a link.
    Wrote(PathBuf),
    /// Removed.
    Removed(PathBuf),
}

impl Change {
    fn path(&self) -> &Path {
        match self {
            Change::Wrote(p) | Change::Removed(p) => p,
        }
    }
}

impl Isolated {
    /// Copies the workspace at `source` into a new temporary directory, leaving out `skip`
    /// (paths relative to `source`) and what is neither a file, a directory nor a link.
    ///
    /// # Errors
    /// Why the copy cannot be made: the temporary directory, a file that cannot be read or
    /// written (a full disk), or more than `limit_mb` MiB of files.
    pub(crate) fn copy(source: &Path, limit_mb: u64, skip: &[PathBuf]) -> Result<Self, String> {
        let dir = tempfile::Builder::new()
            .prefix("harness-child-")
            .tempdir()
            .map_err(|e| format!("cannot make a temporary directory for it: {e}"))?;
        let root = dir.path().join("workspace");
        if root.starts_with(source) {
            return Err(format!(
                "the temporary directory {} is inside the workspace; set TMPDIR to a directory outside it",
                dir.path().display()
            ));
        }
        let mut isolated = Isolated {
            dir: Some(dir),
            root,
            copied: BTreeMap::new(),
            skipped: skip.iter().cloned().collect(),
            bytes: 0,
        };
        isolated.fill(source, limit_mb.saturating_mul(1024 * 1024))?;
        Ok(isolated)
    }

    fn fill(&mut self, source: &Path, limit: u64) -> Result<(), String> {
        let mut walk = walkdir::WalkDir::new(source)
            .follow_links(false)
            .sort_by_file_name()
            .into_iter();
        while let Some(entry) = walk.next() {
            let entry = entry.map_err(|e| format!("cannot read the workspace: {e}"))?;
            let rel = entry
                .path()
                .strip_prefix(source)
                .expect("the walk stays under its root")
                .to_path_buf();
            if self.skipped.contains(&rel) {
                if entry.file_type().is_dir() {
                    walk.skip_current_dir();
                }
                continue;
            }
            let to = self.root.join(&rel);
            let failed = |e: std::io::Error| format!("cannot copy {}: {e}", rel.display());
            let kind = entry.file_type();
            if kind.is_dir() {
                std::fs::create_dir(&to).map_err(failed)?;
                continue;
            }
            let before = entry.metadata().map_err(|e| failed(e.into()))?;
            if kind.is_file() {
                self.bytes += before.len();
                if self.bytes > limit {
                    return Err(format!(
                        "the workspace holds more than limits.isolation_mb = {} MiB of files; raise it in the parent's delegation file, or leave large build output out of the workspace",
                        limit / (1024 * 1024)
                    ));
                }
                std::fs::copy(entry.path(), &to).map_err(failed)?;
            } else if kind.is_symlink() {
                let target = std::fs::read_link(entry.path()).map_err(failed)?;
                std::os::unix::fs::symlink(target, &to).map_err(failed)?;
            } else {
                continue;
            }
            let after = std::fs::symlink_metadata(&to).map_err(failed)?;
            self.copied
                .insert(rel, (Stamp::of(&before), Stamp::of(&after)));
        }
        Ok(())
    }

    /// Where the copy is: the child's workspace.
    pub(crate) fn root(&self) -> &Path {
        &self.root
    }

    /// Keeps the copy on disk (`--keep-workspaces`) and returns where it is.
    pub(crate) fn keep(&mut self) -> PathBuf {
        if let Some(dir) = self.dir.take() {
            // The directory outlives the run for whoever debugs it.
            let _ = dir.keep();
        }
        self.root.clone()
    }

    /// True for a path never applied: under `.git`, or a journal.
    fn never_applied(&self, rel: &Path) -> bool {
        rel.components().next() == Some(Component::Normal(".git".as_ref()))
            || self.skipped.contains(rel)
    }

    /// What the child changed in its copy: each file or link written or removed.
    fn changes(&self) -> Result<Vec<Change>, String> {
        let mut changes = Vec::new();
        let mut seen = BTreeSet::new();
        for entry in walkdir::WalkDir::new(&self.root)
            .follow_links(false)
            .sort_by_file_name()
        {
            let entry = entry.map_err(|e| format!("cannot read the child's workspace: {e}"))?;
            let kind = entry.file_type();
            if !(kind.is_file() || kind.is_symlink()) {
                continue;
            }
            let rel = entry
                .path()
                .strip_prefix(&self.root)
                .expect("the walk stays under its root")
                .to_path_buf();
            if self.never_applied(&rel) {
                continue;
            }
            let now = entry
                .metadata()
                .map(|m| Stamp::of(&m))
                .map_err(|e| format!("cannot read {}: {e}", rel.display()))?;
            if self.copied.get(&rel).map(|(_, copy)| *copy) != Some(now) {
                changes.push(Change::Wrote(rel.clone()));
            }
            seen.insert(rel);
        }
        for rel in self.copied.keys() {
            if !seen.contains(rel) && !self.never_applied(rel) {
                changes.push(Change::Removed(rel.clone()));
            }
        }
        Ok(changes)
    }

    /// Applies the child's changes to the workspace at `target` (its parent's), all or none.
    ///
    /// # Errors
    /// A change that could not be staged or put in place (a full disk, no permission); what was
    /// staged is removed.
    pub(crate) fn apply(&self, target: &Path) -> Result<Applied, String> {
        let changes = self.changes()?;
        let mut conflicts = Vec::new();
        for change in &changes {
            let rel = change.path();
            let base = self.copied.get(rel).map(|(source, _)| *source);
            let linked = linked_ancestor(target, rel);
            let unchanged = !linked && base == stamp_file(&target.join(rel));
            if unchanged || (!linked && self.same_as_child(target, change)) {
                continue;
            }
            conflicts.push(rel.to_path_buf());
        }
        if !conflicts.is_empty() {
            let diff = self.diff(target, &conflicts);
            return Ok(Applied::Conflict {
                files: conflicts.iter().map(|p| p.display().to_string()).collect(),
                diff,
            });
        }
        let staged = self.stage(target, &changes)?;
        let mut done = Vec::new();
        for (change, temp) in changes.iter().zip(staged) {
            let to = target.join(change.path());
            let put = match (change, temp) {
                (Change::Wrote(_), Some(temp)) => std::fs::rename(&temp, &to),
                (Change::Removed(_), _) => match std::fs::remove_file(&to) {
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
                    other => other,
                },
                (Change::Wrote(_), None) => Ok(()),
            };
            put.map_err(|e| format!("cannot put {} in place: {e}", change.path().display()))?;
            done.push(change.path().display().to_string());
        }
        Ok(Applied::Clean(done))
    }

    /// True when the parent's workspace already holds what the child left at `change`'s path.
    fn same_as_child(&self, target: &Path, change: &Change) -> bool {
        let theirs = target.join(change.path());
        match change {
            Change::Removed(_) => std::fs::symlink_metadata(&theirs).is_err(),
            Change::Wrote(rel) => same_entry(&theirs, &self.root.join(rel)),
        }
    }

    /// Stages each write beside its target (a temporary name in the same directory, so the
    /// rename that puts it in place is atomic): the temporary paths, in the order of `changes`
    /// (`None` for a removal). On a failure, what was staged is removed.
    fn stage(&self, target: &Path, changes: &[Change]) -> Result<Vec<Option<PathBuf>>, String> {
        let mut staged: Vec<Option<PathBuf>> = Vec::with_capacity(changes.len());
        let undo = |staged: &[Option<PathBuf>]| {
            for temp in staged.iter().flatten() {
                let _ = std::fs::remove_file(temp);
            }
        };
        for change in changes {
            let Change::Wrote(rel) = change else {
                staged.push(None);
                continue;
            };
            let to = target.join(rel);
            let from = self.root.join(rel);
            let temp = to.with_file_name(format!(
                ".{}.harness-apply-{:08x}",
                rel.file_name().unwrap_or_default().to_string_lossy(),
                fastrand::u32(..)
            ));
            let made = to
                .parent()
                .map_or(Ok(()), std::fs::create_dir_all)
                .and_then(|()| match std::fs::symlink_metadata(&from) {
                    Ok(m) if m.is_symlink() => std::fs::read_link(&from)
                        .and_then(|link| std::os::unix::fs::symlink(link, &temp)),
                    Ok(_) => std::fs::copy(&from, &temp).map(|_| ()),
                    Err(e) => Err(e),
                });
            if let Err(e) = made {
                undo(&staged);
                return Err(format!("cannot stage {}: {e}", rel.display()));
            }
            staged.push(Some(temp));
        }
        Ok(staged)
    }

    /// The parent's version of each conflicting path against the child's, as a unified diff.
    fn diff(&self, target: &Path, paths: &[PathBuf]) -> String {
        let mut out = String::new();
        for rel in paths {
            let read = |p: &Path| {
                std::fs::read(p)
                    .ok()
                    .filter(|_| !linked_ancestor(target, rel))
            };
            let (theirs, ours) = (read(&target.join(rel)), read(&self.root.join(rel)));
            let text = |bytes: &Option<Vec<u8>>| match bytes {
                None => Some(String::new()),
                Some(b) => String::from_utf8(b.clone()).ok(),
            };
            let name = rel.display().to_string();
            match (text(&theirs), text(&ours)) {
                (Some(theirs), Some(ours)) => {
                    let diff = similar::TextDiff::from_lines(&theirs, &ours);
                    out.push_str(
                        &diff
                            .unified_diff()
                            .context_radius(3)
                            .header(&format!("workspace/{name}"), &format!("child/{name}"))
                            .to_string(),
                    );
                }
                _ => out.push_str(&format!(
                    "Binary files workspace/{name} and child/{name} differ\n"
                )),
            }
            if out.len() > MAX_CONFLICT_DIFF {
                let cut = (0..=MAX_CONFLICT_DIFF)
                    .rev()
                    .find(|i| out.is_char_boundary(*i))
                    .unwrap_or(0);
                out.truncate(cut);
                out.push_str("\n[… cut at 64 KiB]\n");
                break;
            }
        }
        out
    }
}

/// True when a component of `rel` above its last, in the workspace at `root`, is a symbolic
/// link (or not a directory): writing there could leave the workspace.
fn linked_ancestor(root: &Path, rel: &Path) -> bool {
    let mut at = root.to_path_buf();
    let parents: Vec<Component<'_>> = rel.components().collect();
    for component in &parents[..parents.len().saturating_sub(1)] {
        at.push(component);
        match std::fs::symlink_metadata(&at) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => return true,
            // Not there yet: the stage makes it, a directory.
            Err(_) => return false,
        }
    }
    false
}

/// True when `a` and `b` are both files with the same bytes, or both links to the same place.
fn same_entry(a: &Path, b: &Path) -> bool {
    match (std::fs::symlink_metadata(a), std::fs::symlink_metadata(b)) {
        (Ok(x), Ok(y)) if x.is_symlink() && y.is_symlink() => {
            std::fs::read_link(a).ok() == std::fs::read_link(b).ok()
        }
        (Ok(x), Ok(y)) if x.is_file() && y.is_file() && x.len() == y.len() => {
            matches!((std::fs::read(a), std::fs::read(b)), (Ok(p), Ok(q)) if p == q)
        }
        _ => false,
    }
}

/// The stamp of `path` when it is a file or a link (what a copy holds); `None` otherwise.
fn stamp_file(path: &Path) -> Option<Stamp> {
    std::fs::symlink_metadata(path)
        .ok()
        .filter(|m| m.is_file() || m.is_symlink())
        .map(|m| Stamp::of(&m))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(root: &Path, rel: &str, text: &str) {
        let path = root.join(rel);
        std::fs::create_dir_all(path.parent().expect("a parent")).expect("mkdir");
        std::fs::write(path, text).expect("write");
    }

    fn read(root: &Path, rel: &str) -> Option<String> {
        std::fs::read_to_string(root.join(rel)).ok()
    }

    #[test]
    fn a_childs_changes_are_applied_and_nothing_else() {
        let parent = tempfile::tempdir().expect("tempdir");
        write(parent.path(), "src/a.txt", "a\n");
        write(parent.path(), "src/b.txt", "b\n");
        write(parent.path(), ".git/HEAD", "ref: refs/heads/main\n");
        write(parent.path(), ".harness/runs.db", "journal");
        let copy = Isolated::copy(
            parent.path(),
            DEFAULT_ISOLATION_MB,
            &[PathBuf::from(".harness/runs.db")],
        )
        .expect("copied");
        assert!(
            read(copy.root(), ".harness/runs.db").is_none(),
            "the journal is not copied"
        );
        write(copy.root(), "src/a.txt", "A\n");
        write(copy.root(), "new/c.txt", "c\n");
        std::fs::remove_file(copy.root().join("src/b.txt")).expect("rm");
        write(copy.root(), ".git/HEAD", "ref: refs/heads/evil\n");
        let applied = copy.apply(parent.path()).expect("applied");
        assert_eq!(
            applied,
            Applied::Clean(vec![
                "new/c.txt".into(),
                "src/a.txt".into(),
                "src/b.txt".into()
            ])
        );
        assert_eq!(read(parent.path(), "src/a.txt").as_deref(), Some("A\n"));
        assert_eq!(read(parent.path(), "new/c.txt").as_deref(), Some("c\n"));
        assert!(read(parent.path(), "src/b.txt").is_none());
        assert_eq!(
            read(parent.path(), ".git/HEAD").as_deref(),
            Some("ref: refs/heads/main\n"),
            "a child's .git is never applied"
        );
        let leftovers: Vec<_> = walkdir::WalkDir::new(parent.path())
            .into_iter()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().contains("harness-apply"))
            .collect();
        assert!(leftovers.is_empty(), "{leftovers:?}");
    }

    #[test]
    fn a_change_over_an_earlier_childs_is_a_conflict_and_applies_nothing() {
        let parent = tempfile::tempdir().expect("tempdir");
        write(parent.path(), "shared.txt", "one\ntwo\n");
        let first = Isolated::copy(parent.path(), DEFAULT_ISOLATION_MB, &[]).expect("copied");
        let second = Isolated::copy(parent.path(), DEFAULT_ISOLATION_MB, &[]).expect("copied");
        write(first.root(), "shared.txt", "one\nTWO\n");
        write(second.root(), "shared.txt", "ONE\ntwo\n");
        write(second.root(), "own.txt", "mine\n");
        // The same file written alike by both is no conflict.
        write(first.root(), "same.txt", "same\n");
        write(second.root(), "same.txt", "same\n");
        assert!(matches!(first.apply(parent.path()), Ok(Applied::Clean(_))));
        let Ok(Applied::Conflict { files, diff }) = second.apply(parent.path()) else {
            panic!("a conflict")
        };
        assert_eq!(files, ["shared.txt"]);
        for line in ["-one", "-TWO", "+ONE", "+two"] {
            assert!(diff.lines().any(|l| l == line), "{line}: {diff}");
        }
        assert_eq!(
            read(parent.path(), "shared.txt").as_deref(),
            Some("one\nTWO\n")
        );
        assert!(
            read(parent.path(), "own.txt").is_none(),
            "nothing applied half-way"
        );
    }

    #[test]
    fn a_link_in_the_parents_workspace_is_never_written_through() {
        let parent = tempfile::tempdir().expect("tempdir");
        let outside = tempfile::tempdir().expect("tempdir");
        write(parent.path(), "dir/x.txt", "x\n");
        let copy = Isolated::copy(parent.path(), DEFAULT_ISOLATION_MB, &[]).expect("copied");
        write(copy.root(), "dir/y.txt", "y\n");
        // Meanwhile `dir` became a link out of the workspace.
        std::fs::remove_dir_all(parent.path().join("dir")).expect("rm");
        std::os::unix::fs::symlink(outside.path(), parent.path().join("dir")).expect("ln");
        let applied = copy.apply(parent.path()).expect("judged");
        assert!(matches!(applied, Applied::Conflict { .. }), "{applied:?}");
        assert!(read(outside.path(), "y.txt").is_none());
    }

    #[test]
    fn a_child_that_removes_its_git_or_its_whole_workspace_takes_nothing_from_the_parent() {
        let parent = tempfile::tempdir().expect("tempdir");
        write(parent.path(), "a.txt", "a\n");
        write(parent.path(), ".git/HEAD", "ref: refs/heads/main\n");
        let copy = Isolated::copy(parent.path(), DEFAULT_ISOLATION_MB, &[]).expect("copied");
        std::fs::remove_dir_all(copy.root().join(".git")).expect("rm .git");
        write(copy.root(), "b.txt", "b\n");
        assert_eq!(
            copy.apply(parent.path()),
            Ok(Applied::Clean(vec!["b.txt".into()]))
        );
        assert!(parent.path().join(".git/HEAD").is_file(), "its .git stays");
        // A workspace that is gone is an error, not the removal of every file it held.
        let gone = Isolated::copy(parent.path(), DEFAULT_ISOLATION_MB, &[]).expect("copied");
        std::fs::remove_dir_all(gone.root()).expect("rm the copy");
        let refused = gone.apply(parent.path()).expect_err("nothing to apply");
        assert!(
            refused.contains("cannot read the child's workspace"),
            "{refused}"
        );
        assert_eq!(read(parent.path(), "a.txt").as_deref(), Some("a\n"));
        assert_eq!(read(parent.path(), "b.txt").as_deref(), Some("b\n"));
    }

    #[test]
    fn a_workspace_over_the_limit_is_refused_and_removed() {
        let parent = tempfile::tempdir().expect("tempdir");
        std::fs::write(parent.path().join("big"), vec![0u8; 2 * 1024 * 1024]).expect("write");
        let refused = Isolated::copy(parent.path(), 1, &[]).expect_err("refused");
        assert!(refused.contains("limits.isolation_mb = 1 MiB"), "{refused}");
    }
}
