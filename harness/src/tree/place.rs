//! A delegation's place in its tree: the profiles its `delegate` calls may name, how deep it
//! is, what bounds its children and what its spending counts toward. Built from the root's
//! delegation file, the project policy and the caller's overrides when the root is assembled.

use std::path::PathBuf;
use std::sync::Arc;

use serde_json::json;

use super::profile::{DEFAULT_MAX_CHILDREN, DEFAULT_MAX_DEPTH};
use crate::error::Result;
use crate::overrides::Overrides;
use crate::project::ProjectPolicy;
use crate::spec::DelegationFile;
use crate::tools::Tool;

/// What every delegation of one tree shares: the profiles children are made from, and what they
/// are assembled with.
pub(super) struct Profiles {
    /// The root's own delegate, tools and hooks (the default profile of its calls).
    pub(super) root: DelegationFile,
    pub(super) named: Vec<(String, DelegationFile)>,
    pub(super) project: Arc<ProjectPolicy>,
    pub(super) overrides: Overrides,
}

/// A delegation's place in a tree: the profiles its `delegate` calls may name, how deep it is,
/// and what bounds its children.
#[derive(Clone)]
pub(crate) struct Tree {
    pub(super) profiles: Arc<Profiles>,
    /// The profile this delegation runs as (`None`: the root's own).
    pub(super) own: Option<String>,
    pub(super) depth: u32,
    pub(super) max_depth: u32,
    pub(super) max_children: u32,
    /// The largest workspace copied for a child that can change files, in MiB
    /// (`limits.isolation_mb` of the root).
    pub(super) isolation_mb: u64,
    /// What the whole tree may spend (`limits.max_tree_tokens` of the root).
    pub(super) max_tree_tokens: Option<u64>,
    /// What this delegation's spending counts toward, from the root down: the whole tree's
    /// tokens, then each subtree it is in (its own last). Empty at the root, whose run starts
    /// the tree's count.
    pub(super) tallies: Vec<Arc<std::sync::atomic::AtomicU64>>,
}

impl std::fmt::Debug for Tree {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tree")
            .field("profiles", &self.names())
            .field("own", &self.own)
            .field("depth", &self.depth)
            .field("max_depth", &self.max_depth)
            .field("max_children", &self.max_children)
            .field("max_tree_tokens", &self.max_tree_tokens)
            .finish_non_exhaustive()
    }
}

impl PartialEq for Tree {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.profiles, &other.profiles)
            && self.own == other.own
            && self.depth == other.depth
            && self.max_depth == other.max_depth
            && self.max_children == other.max_children
            && self.max_tree_tokens == other.max_tree_tokens
    }
}

impl Tree {
    /// The tree a delegation file roots, when it offers `delegate`; `None` otherwise.
    ///
    /// # Errors
    /// [`ErrorKind::Config`](crate::ErrorKind::Config) for a bad profile of the project policy.
    pub(crate) fn root(
        file: &DelegationFile,
        project: &Arc<ProjectPolicy>,
        overrides: &Overrides,
    ) -> Result<Option<Tree>> {
        if !file.tools.iter().any(|t| t == Tool::Delegate.name()) {
            return Ok(None);
        }
        // The file's profiles, then the project's it does not name.
        let mut named = file.profiles.clone();
        for (name, profile) in project.profiles.read()? {
            if !named.iter().any(|(n, _)| *n == name) {
                named.push((name, profile));
            }
        }
        Ok(Some(Tree {
            profiles: Arc::new(Profiles {
                root: file.as_profile(),
                named,
                project: Arc::clone(project),
                overrides: overrides.clone(),
            }),
            own: None,
            depth: 0,
            max_depth: file.max_depth.unwrap_or(DEFAULT_MAX_DEPTH),
            max_children: file.max_children.unwrap_or(DEFAULT_MAX_CHILDREN),
            isolation_mb: file
                .isolation_mb
                .unwrap_or(super::isolate::DEFAULT_ISOLATION_MB),
            max_tree_tokens: file.max_tree_tokens,
            tallies: Vec::new(),
        }))
    }

    /// The profile names a call may give.
    pub(crate) fn names(&self) -> Vec<&str> {
        self.profiles
            .named
            .iter()
            .map(|(name, _)| name.as_str())
            .collect()
    }

    /// How deep this delegation is (the root is 0).
    pub(crate) fn depth(&self) -> u32 {
        self.depth
    }

    /// Children that may run at once.
    pub(crate) fn max_children(&self) -> u32 {
        self.max_children
    }

    /// What the whole tree may spend (`limits.max_tree_tokens`).
    pub(crate) fn max_tree_tokens(&self) -> Option<u64> {
        self.max_tree_tokens
    }

    /// The counts this delegation's spending adds to (see [`Tree::tallies`]).
    pub(crate) fn tallies(&self) -> &[Arc<std::sync::atomic::AtomicU64>] {
        &self.tallies
    }

    /// True when a child may run programs itself: a profile of an agent CLI or `command`
    /// delegate, or one offering `run_command`.
    pub(crate) fn children_run_programs(&self) -> bool {
        std::iter::once(&self.profiles.root)
            .chain(self.profiles.named.iter().map(|(_, p)| p))
            .any(|p| p.delegate.runs_its_own_tools() || p.tools.iter().any(|t| t == "run_command"))
    }

    /// Scripts of every profile, which no delegate of the tree may change.
    pub(crate) fn scripts(&self) -> Vec<PathBuf> {
        self.profiles
            .named
            .iter()
            .flat_map(|(_, p)| {
                crate::spec::script_paths(
                    p.verify.as_ref(),
                    &p.tool_verifiers,
                    &p.delegate,
                    p.critic.as_ref(),
                )
            })
            .collect()
    }

    /// The `delegate` tool as this delegation offers it: its profiles named in the schema.
    pub(crate) fn spec(&self) -> crate::conversation::ToolSpec {
        let mut spec = Tool::Delegate.spec();
        let names = self.names();
        if !names.is_empty() {
            spec.parameters["properties"]["profile"]["enum"] = json!(names);
        }
        spec.description = format!(
            "{} Up to {} children run at once; this delegation is at depth {} of at most {}.",
            spec.description, self.max_children, self.depth, self.max_depth
        );
        spec
    }
}
