//! A tree's configuration as a delegation file or a project policy writes it: `limits.max_children`
//! and `limits.max_depth`, where `delegate` may be offered, and what a profile (`delegates:`) may
//! not say. The delegation file ([`crate::spec`]) and the project policy read it; a delegation's
//! place in its tree is [`super::place`], the running is [`super::family`].

use crate::delegate::DelegateConfig;
use crate::error::{Error, Result};

/// Children of one run that may run at once (`limits.max_children`) unless the file says.
pub const DEFAULT_MAX_CHILDREN: u32 = 4;
/// How deep a tree may nest (`limits.max_depth`) unless the file says: the root is depth 0.
pub const DEFAULT_MAX_DEPTH: u32 = 2;
/// The most `limits.max_children` may be.
const MAX_CHILDREN_CAP: u32 = 64;
/// The most `limits.max_depth` may be.
const MAX_DEPTH_CAP: u32 = 8;
/// The task a profile holds until a call gives one.
pub(crate) const PROFILE_TASK: &str = "(given by each delegate call)";
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
    if offers && delegate.runs_its_own_tools() && !delegate.calls_mcp() {
        return Err(Error::config(format!(
            "{file}: `tools: [delegate]` is offered to model and scripted delegates, which call harness's tools, and to the agent CLIs that call MCP tools (claude, codex, gemini); a `{}` delegate runs its own tools and has no way to call it (run `harness run` from it instead)",
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
