//! The policy guard (DESIGN §4.8): what judges a delegate is out of its reach. The harness's own
//! policy — the workspace's `.harness/` (hooks, project policy, journal), the delegation file,
//! the verifier and the agent script, the hook files — is refused to every delegate tool, and,
//! when the delegate can change files some other way (a `run_command` child, an agent CLI), is
//! fingerprinted before the first attempt so that a change is found after the attempt and fails
//! the delegation.
//!
//! A fingerprint is what `stat` says — size, modification and status-change times, inode — not
//! a hash of the contents: a write always moves the status-change time, which a user cannot set
//! back, and a stat costs microseconds where hashing a large batch file per attempt would cost
//! milliseconds.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::integrity::GateInputs;

use crate::error::{Error, ErrorKind};

/// Files fingerprinted under one protected directory, at most; past this the rest is still
/// refused to tools but not compared.
const MAX_FILES: usize = 10_000;

/// How many review decisions a journal holds that this process did not record (DESIGN §4.11):
/// an override, or a row of the audit log, that appears while a delegate is running was made
/// by someone else — perhaps the delegate, deciding its own review.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReviewState {
    /// Overrides in the journal, less those this process recorded.
    pub overrides: u64,
    /// Rows of the audit log, less those this process appended.
    pub audit_rows: u64,
}

/// Reads a journal's [`ReviewState`]; `None` when there is nothing to read (no journal yet, or
/// one that cannot be opened).
pub type ReviewProbe = Arc<dyn Fn(&Path) -> Option<ReviewState> + Send + Sync>;

/// A [`ReviewProbe`] as the runtime and the guards hold it.
#[derive(Clone)]
pub(crate) struct Probe(pub(crate) ReviewProbe);

impl std::fmt::Debug for Probe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ReviewProbe")
    }
}

/// The protected paths of one delegation and their fingerprints before its first attempt.
#[derive(Debug, Clone, Default)]
pub(crate) struct PolicyGuard {
    /// The protected paths and journals as the delegation names them.
    given: Vec<PathBuf>,
    /// Absolute paths (files or directories) no delegate tool may write, as given and resolved:
    /// worked out on first use, since most delegations never write.
    protected: std::sync::OnceLock<Vec<PathBuf>>,
    /// Journal files: refused to tools, never fingerprinted (other delegations write them).
    journals: Vec<PathBuf>,
    /// Path → fingerprint of every protected file when the guard was made; `None` when the
    /// delegate has no way to change files but through the (refusing) tools.
    before: Option<BTreeMap<PathBuf, Fingerprint>>,
    /// The gate inputs inside the workspace (`protect`): existing ones are refused to tools.
    gate: Arc<GateInputs>,
    /// Each journal's review state when the guard was made, and how to read it again; empty
    /// when the delegate cannot write but through the tools, or no probe is installed.
    reviews: Vec<(PathBuf, Option<ReviewState>)>,
    review: Option<Probe>,
}

/// What `stat` says about a file: enough to see that it was written, replaced or touched.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Fingerprint {
    len: u64,
    modified: Option<std::time::SystemTime>,
    /// Status-change time (seconds, nanoseconds) and inode, where the platform has them.
    changed: (i64, i64, u64),
}

/// How a protected file changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Change {
    /// The file.
    pub(crate) path: PathBuf,
    /// `added`, `modified` or `deleted`.
    pub(crate) how: &'static str,
}

impl PolicyGuard {
    /// Protects the `protected` paths (files or directories, inside the workspace or not) and
    /// the `journals` (refused, not fingerprinted), and fingerprints the protected files when
    /// `watch`: the delegate can write other than through the tools (it is offered
    /// `run_command`, or it is an agent CLI). `gate` are the workspace's gate inputs. With
    /// `review` and `watch`, the journals' review states are read too: a decision recorded in
    /// one while the delegate runs is a change of the policy.
    pub(crate) fn new(
        mut protected: Vec<PathBuf>,
        journals: Vec<PathBuf>,
        watch: bool,
        gate: Arc<GateInputs>,
        review: Option<Probe>,
    ) -> Self {
        protected.extend(journals.iter().cloned());
        let mut guard = PolicyGuard {
            given: protected,
            protected: std::sync::OnceLock::new(),
            journals,
            before: None,
            gate,
            reviews: Vec::new(),
            review: review.filter(|_| watch),
        };
        if watch {
            guard.before = Some(guard.fingerprints());
            if let Some(Probe(probe)) = &guard.review {
                guard.reviews = guard
                    .journals
                    .iter()
                    .map(|j| (j.clone(), probe(j)))
                    .collect();
            }
        }
        guard
    }

    /// Returns every protected path, absolute: each as given and, where it differs, where it
    /// leads, so a tool resolving either is refused.
    pub(crate) fn paths(&self) -> &[PathBuf] {
        self.protected.get_or_init(|| {
            let mut all = Vec::new();
            for path in &self.given {
                let path = absolute(path);
                if let Ok(canonical) = path.canonicalize()
                    && canonical != path
                {
                    all.push(canonical);
                }
                all.push(path);
            }
            all.sort();
            all.dedup();
            all
        })
    }

    /// The workspace's gate inputs.
    pub(crate) fn gate(&self) -> &GateInputs {
        &self.gate
    }

    /// Returns the protected path covering `path` (an absolute, resolved path), if any.
    pub(crate) fn covering(&self, path: &Path) -> Option<&Path> {
        self.paths()
            .iter()
            .find(|p| path.starts_with(p))
            .map(PathBuf::as_path)
    }

    /// Returns what changed in the protected files since the guard was made, in path order.
    pub(crate) fn changes(&self) -> Vec<Change> {
        let Some(before) = &self.before else {
            return Vec::new();
        };
        let now = self.fingerprints();
        let mut changes = Vec::new();
        for (path, was) in before {
            match now.get(path) {
                None => changes.push(Change {
                    path: path.clone(),
                    how: "deleted",
                }),
                Some(after) if after != was => changes.push(Change {
                    path: path.clone(),
                    how: "modified",
                }),
                Some(_) => {}
            }
        }
        for path in now.keys().filter(|p| !before.contains_key(*p)) {
            changes.push(Change {
                path: path.clone(),
                how: "added",
            });
        }
        if let Some(Probe(probe)) = &self.review {
            // A journal that appears meanwhile (this run's start being written) holds no
            // decision: the same as none.
            for (journal, was) in &self.reviews {
                if probe(journal).unwrap_or_default() != was.unwrap_or_default() {
                    changes.push(Change {
                        path: journal.clone(),
                        how: "a review decision recorded by another process",
                    });
                }
            }
        }
        changes.sort_by(|a, b| a.path.cmp(&b.path));
        changes
    }

    /// The changes of the protected files, each as `path (how)` (paths inside `root` relative
    /// to it), and the `gate_tampered` error to end the delegation with; `None` when nothing
    /// changed.
    pub(crate) fn violation(&self, root: &Path) -> Option<(Vec<String>, Error)> {
        let changes = self.changes();
        if changes.is_empty() {
            return None;
        }
        let listed: Vec<String> = changes
            .iter()
            .map(|c| {
                let shown = c.path.strip_prefix(root).unwrap_or(&c.path);
                format!("{} ({})", shown.display(), c.how)
            })
            .collect();
        let error = Error::new(
            ErrorKind::GateTampered,
            format!(
                "the delegate changed the harness policy that judges it: {}; hooks, .harness/, the delegation file, the verifier and agent scripts, git's config, hooks and info/, and the review decisions in the run journal are out of a delegate's reach (DESIGN §4.8)",
                listed.join(", ")
            ),
        );
        Some((listed, error))
    }

    /// Whether `path` is a journal or one of its companions (SQLite's files, the observation
    /// cache): the operator's, never a delegate's to read or write.
    pub(crate) fn is_journal(&self, path: &Path) -> bool {
        let text = path.as_os_str().to_string_lossy();
        // The database and its -wal, -shm and -journal companions.
        self.journals
            .iter()
            .any(|j| text.starts_with(absolute(j).as_os_str().to_string_lossy().as_ref()))
    }

    fn fingerprints(&self) -> BTreeMap<PathBuf, Fingerprint> {
        let mut out = BTreeMap::new();
        for root in self.paths() {
            let walk = walkdir::WalkDir::new(root)
                .follow_links(false)
                .into_iter()
                .filter_map(std::result::Result::ok)
                .filter(|e| !e.file_type().is_dir())
                .take(MAX_FILES);
            for entry in walk {
                let path = entry.path();
                if self.is_journal(path) || out.contains_key(path) {
                    continue;
                }
                if let Ok(meta) = entry.path().symlink_metadata() {
                    out.insert(path.to_path_buf(), fingerprint(&meta));
                }
            }
        }
        out
    }
}

fn fingerprint(meta: &std::fs::Metadata) -> Fingerprint {
    #[cfg(unix)]
    let changed = {
        use std::os::unix::fs::MetadataExt;
        (meta.ctime(), meta.ctime_nsec(), meta.ino())
    };
    #[cfg(not(unix))]
    let changed = (0, 0, 0);
    Fingerprint {
        len: meta.len(),
        modified: meta.modified().ok(),
        changed,
    }
}

fn absolute(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::delegation::Delegation;

    fn delegation(dir: &Path, tools: &str) -> Delegation {
        std::fs::write(dir.join("agent.star"), "def respond(m):\n    return 'x'\n").expect("agent");
        std::fs::write(
            dir.join("delegation.yaml"),
            format!(
                "task: t\ndelegate: {{kind: scripted, script: agent.star}}\ntools: [{tools}]\n"
            ),
        )
        .expect("file");
        crate::Assembler::default()
            .file(&dir.join("delegation.yaml"))
            .expect("assembles")
    }

    #[test]
    fn protects_the_policy_and_finds_every_kind_of_change() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir_all(dir.path().join(".harness/hooks")).expect("mkdir");
        std::fs::write(dir.path().join(".harness/hooks/gate.md"), "a").expect("hook");
        std::fs::write(dir.path().join(".harness/runs.db"), "journal").expect("journal");
        let root = dir.path().canonicalize().expect("canonical");
        // Without run_command the tools refuse every write: nothing needs watching.
        let guard_of = |d: Delegation| {
            PolicyGuard::new(
                d.protected_paths(&root),
                d.journals(&root),
                d.changes_files_itself(),
                Arc::default(),
                None,
            )
        };
        let unwatched = guard_of(delegation(&root, "write_file"));
        let guard = guard_of(delegation(&root, "run_command"));
        assert!(
            guard
                .covering(&root.join(".harness/hooks/new.md"))
                .is_some()
        );
        assert!(guard.covering(&root.join("agent.star")).is_some());
        assert!(guard.covering(&root.join("delegation.yaml")).is_some());
        assert!(guard.covering(&root.join("src/lib.rs")).is_none());
        assert!(guard.changes().is_empty());

        // The journal is written by the harness itself: never a change.
        std::fs::write(root.join(".harness/runs.db"), "more journal").expect("journal");
        std::fs::write(root.join(".harness/runs.db-wal"), "wal").expect("wal");
        assert!(guard.changes().is_empty());

        // Same length, new contents: the status-change time still moves.
        std::thread::sleep(std::time::Duration::from_millis(20));
        std::fs::write(root.join(".harness/hooks/gate.md"), "b").expect("tamper");
        std::fs::write(root.join(".harness/hooks/extra.md"), "c").expect("add");
        std::fs::remove_file(root.join("agent.star")).expect("delete");
        let changes: Vec<(String, &str)> = guard
            .changes()
            .into_iter()
            .map(|c| {
                let rel = c.path.strip_prefix(&root).expect("inside").display();
                (rel.to_string(), c.how)
            })
            .collect();
        assert_eq!(
            changes,
            [
                (".harness/hooks/extra.md".to_owned(), "added"),
                (".harness/hooks/gate.md".to_owned(), "modified"),
                ("agent.star".to_owned(), "deleted"),
            ]
        );
        assert!(unwatched.covering(&root.join("agent.star")).is_some());
        assert!(unwatched.changes().is_empty());
    }
}
