//! A tree's configuration: `limits.max_children`, `limits.max_depth` and `limits.max_tree_tokens`,
//! the profiles a `delegate` call may name (the file's and the project policy's), and a
//! delegation's place in its tree.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{Map, Value, json};

use crate::assembly::Overrides;
use crate::config::ReadScript;
use crate::delegate::DelegateConfig;
use crate::error::{Error, Result};
use crate::project::ProjectPolicy;
use crate::spec::DelegationFile;
use crate::tools::Tool;

/// Children of one run that may run at once (`limits.max_children`) unless the file says.
pub const DEFAULT_MAX_CHILDREN: u32 = 4;
/// How deep a tree may nest (`limits.max_depth`) unless the file says: the root is depth 0.
pub const DEFAULT_MAX_DEPTH: u32 = 2;
/// The most `limits.max_children` may be.
const MAX_CHILDREN_CAP: u32 = 64;
/// The most `limits.max_depth` may be.
const MAX_DEPTH_CAP: u32 = 8;
/// The task a profile holds until a call gives one.
const PROFILE_TASK: &str = "(given by each delegate call)";
/// Keys a profile may not have: a call gives the task, children share the parent's workspace,
/// the tree links them, and profiles are named in one place.
pub(crate) const NOT_IN_PROFILE: [(&str, &str); 4] = [
    ("task", "each delegate call gives the task"),
    (
        "workdir",
        "children work in the parent's workspace, under its policy",
    ),
    ("parent_id", "the tree sets it for every child"),
    (
        "delegates",
        "name every profile at the top level of the file",
    ),
];

/// Validates `limits.max_children` and `limits.max_depth` as written in `file`.
///
/// # Errors
/// [`ErrorKind::Config`](crate::ErrorKind::Config) for 0 or more than the cap.
pub(crate) fn check_limits(file: &str, children: Option<u32>, depth: Option<u32>) -> Result<()> {
    for (key, value, cap, what) in [
        (
            "max_children",
            children,
            MAX_CHILDREN_CAP,
            "children running at once",
        ),
        ("max_depth", depth, MAX_DEPTH_CAP, "levels of nesting"),
    ] {
        match value {
            Some(0) => {
                return Err(Error::config(format!(
                    "{file}: `limits.{key}` must be at least 1 (leave `delegate` out of `tools` to allow no children)"
                )));
            }
            Some(n) if n > cap => {
                return Err(Error::config(format!(
                    "{file}: `limits.{key}` is {n}; at most {cap} {what} are allowed"
                )));
            }
            _ => {}
        }
    }
    Ok(())
}

/// Checks that `delegate` is offered only where it can be called, and that profiles are
/// named only where it is offered.
///
/// # Errors
/// [`ErrorKind::Config`](crate::ErrorKind::Config) naming the fix.
pub(crate) fn check_offer(
    file: &str,
    offers: bool,
    delegate: &DelegateConfig,
    profiles: bool,
) -> Result<()> {
    if offers && delegate.runs_its_own_tools() {
        return Err(Error::config(format!(
            "{file}: `tools: [delegate]` is offered to model and scripted delegates, which call harness's tools; a `{}` delegate runs its own tools (give it harness as an MCP server instead: `harness mcp`)",
            delegate.kind()
        )));
    }
    if profiles && !offers {
        return Err(Error::config(format!(
            "{file}: `delegates` names child profiles but `tools` does not offer `delegate`; add `delegate` to `tools` or remove `delegates`"
        )));
    }
    Ok(())
}

/// Reads `delegates:`: each entry a delegation without its task, validated now (its scripts
/// read now, so a delegate that rewrites them later changes nothing).
///
/// # Errors
/// [`ErrorKind::Config`](crate::ErrorKind::Config) naming the profile and the key.
pub(crate) fn parse_profiles(
    file: &str,
    source: &Path,
    named: Map<String, Value>,
    base: &Path,
    read: &ReadScript<'_>,
) -> Result<Vec<(String, DelegationFile)>> {
    let mut profiles = Vec::new();
    for (name, value) in named {
        let at = format!("{file}: `delegates.{name}`");
        if name.is_empty()
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        {
            return Err(Error::config(format!(
                "{at}: a profile name is letters, digits, `-` and `_`"
            )));
        }
        let Value::Object(mut map) = value else {
            return Err(Error::config(format!(
                "{at}: expected a mapping like a delegation file without `task` (at least `delegate:`), got {value}"
            )));
        };
        if let Some((key, why)) = NOT_IN_PROFILE.iter().find(|(k, _)| map.contains_key(*k)) {
            return Err(Error::config(format!(
                "{at}: `{key}` is not allowed in a profile: {why}"
            )));
        }
        map.insert("task".to_owned(), Value::String(PROFILE_TASK.to_owned()));
        // A script the profile names is read by the file's reader, which names the file only.
        let profile = DelegationFile::from_json(source, &at, Value::Object(map), base, read)
            .map_err(|e| match e.message().strip_prefix(&format!("{file}: ")) {
                Some(rest) if !rest.starts_with('`') || !rest.contains("delegates.") => {
                    Error::config(format!("{at}: {rest}"))
                }
                _ => e,
            })?;
        profiles.push((name, profile));
    }
    Ok(profiles)
}

/// The project policy's `delegates:` as written, read when a delegation uses them.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct PolicyProfiles {
    pub(crate) named: Map<String, Value>,
    /// The policy file (scripts are relative to its directory).
    pub(crate) source: PathBuf,
}

impl PolicyProfiles {
    /// Validates each profile, reading its scripts.
    ///
    /// # Errors
    /// [`ErrorKind::Config`](crate::ErrorKind::Config) naming the policy, the profile and the key.
    pub(super) fn read(&self) -> Result<Vec<(String, DelegationFile)>> {
        if self.named.is_empty() {
            return Ok(Vec::new());
        }
        let base = self.source.parent().unwrap_or(Path::new("."));
        let at = format!("project policy {}", self.source.display());
        let read = crate::project::script_reader(base, &at);
        parse_profiles(&at, &self.source, self.named.clone(), base, &read)
    }
}

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
                crate::delegation::script_paths(
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
