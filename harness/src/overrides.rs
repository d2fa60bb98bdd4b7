//! What the caller sets over a delegation file: the command line's flags, a service request's
//! headers, a queued delegation's submitter's settings.

use std::path::PathBuf;

/// What the caller sets over the delegation file (the command line's flags). It travels with a
/// queued delegation, so a worker assembles it as the submitter would have.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct Overrides {
    /// Replaces the file's `workdir`.
    pub workdir: Option<PathBuf>,
    /// Replaces the file's (and the project's) `max_verify_retries`.
    pub max_verify_retries: Option<u32>,
    /// Hosts verifiers and hooks may reach, besides the file's `network.allow`.
    pub allow_hosts: Vec<String>,
    /// Programs verifiers and hooks may run with `exec.run`.
    pub allow_exec: Vec<String>,
    /// Environment variables verifiers and hooks may read with `env.get`.
    pub allow_env: Vec<String>,
    /// Hook files and directories added to the delegation's own.
    pub hooks: Vec<PathBuf>,
    /// The caller's W3C `traceparent`: each delegation's trace continues it (the CLI reads
    /// `TRACEPARENT`; a service reads its request's headers).
    pub trace_parent: Option<String>,
    /// The run journal this process writes: delegate tools may not write it.
    pub journal: Option<PathBuf>,
    /// The run this work was delegated from, when the file does not say `parent_id:` (the CLI
    /// reads `HARNESS_PARENT_ID`).
    pub parent_id: Option<String>,
    /// Leaves each child's isolated workspace on disk after it ends (`--keep-workspaces`), for
    /// debugging; the parent's tool result says where.
    pub keep_workspaces: bool,
}
