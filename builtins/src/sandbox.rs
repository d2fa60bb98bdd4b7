//! What every script of one surface may touch ([`Sandbox`]: the workspace, the capabilities,
//! the limits, an interceptor) and the OS sandbox its programs run in ([`Isolation`]).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use crate::capabilities::{Capabilities, Surface};
use crate::intercept::Interceptor;
use crate::limits::Limits;
use crate::workspace::Workspace;

/// Everything a script's builtins may touch: the surface, the workspace root, the capabilities
/// and the limits. Shared by all scripts of one surface; cheap to keep, costly to rebuild (it owns
/// the HTTP connection pool).
#[derive(Debug)]
pub struct Sandbox {
    pub(crate) surface: Surface,
    pub(crate) workspace: Workspace,
    pub(crate) capabilities: Capabilities,
    pub(crate) limits: Limits,
    pub(crate) http: OnceLock<Result<reqwest::Client, String>>,
    pub(crate) regexes: Mutex<HashMap<String, regex::Regex>>,
    /// What stands between the scripts and the outside world, when a host put something there.
    pub(crate) interceptor: Option<Arc<dyn Interceptor>>,
    /// The bubblewrap sandbox `exec.run` programs run in; `None`: unconfined.
    pub(crate) isolation: Option<crate::Isolation>,
}

impl Sandbox {
    /// Creates a sandbox for scripts of `surface` confined to `workspace`.
    pub fn new(
        surface: Surface,
        workspace: Workspace,
        capabilities: Capabilities,
        limits: Limits,
    ) -> Self {
        Sandbox {
            surface,
            workspace,
            capabilities,
            limits,
            http: OnceLock::new(),
            regexes: Mutex::new(HashMap::new()),
            interceptor: None,
            isolation: None,
        }
    }

    /// Runs the programs `exec.run` starts in `isolation` (bubblewrap); `None` leaves them
    /// unconfined.
    #[must_use]
    pub fn with_isolation(mut self, isolation: Option<crate::Isolation>) -> Self {
        self.isolation = isolation;
        self
    }

    /// Puts `interceptor` between the scripts and the outside world: it answers `http` and
    /// `exec` calls (after the capability checks) and watches each evaluation.
    #[must_use]
    pub fn with_interceptor(mut self, interceptor: Arc<dyn Interceptor>) -> Self {
        self.interceptor = Some(interceptor);
        self
    }

    /// Returns the surface this sandbox serves.
    pub fn surface(&self) -> Surface {
        self.surface
    }

    /// Returns the workspace root.
    pub fn workspace(&self) -> &Workspace {
        &self.workspace
    }

    /// Returns the granted capabilities.
    pub fn capabilities(&self) -> &Capabilities {
        &self.capabilities
    }

    /// Returns the limits every evaluation runs under.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }
}

/// An OS sandbox for programs, made with bubblewrap (`bwrap`): the whole file system read-only,
/// the user's `HOME` and `/tmp` private and empty, no network unless asked for, its own PID, IPC
/// and UTS namespaces (every process in it dies with it), and only `writable` writable — except
/// `read_only` paths inside them, bound read-only over them.
///
/// What a program needs from the hidden places stays visible, read-only: the directories on
/// `PATH` inside them with their install prefix's `lib`, `lib64` and `libexec` (a toolchain
/// under `~/.cargo/bin` or `~/.local/bin`) or, for a version manager's `shims` directory, its
/// whole root (`~/.pyenv`), the install prefix of the program itself (where its
/// real path lies in a `bin/`, as in a virtualenv or a pyenv version) or else its directory, and
/// the absolute paths named by the values of [`Launch::env`] (what a check's `env:` names). The
/// program's private `HOME` ([`Launch::home`]) is writable, and [`Isolation::visible`] paths are
/// visible.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Isolation {
    /// Directories (or files) that stay writable: the workspace, an agent CLI's own
    /// configuration directory. Missing ones are left out.
    pub writable: Vec<PathBuf>,
    /// Paths inside those bound read-only: the harness's own policy, the journal.
    pub read_only: Vec<PathBuf>,
    /// Paths kept visible, read-only, where they lie in a hidden place: the directory of the
    /// delegation file (the scripts it names beside it).
    pub visible: Vec<PathBuf>,
    /// Keep the host's network (an agent CLI talks to its model); otherwise there is none.
    pub network: bool,
    /// What is hidden wherever it lies (the rest of the file system is visible, read-only): a
    /// directory under an empty mount (a holdout's test files), a file under `/dev/null` (the
    /// run journal).
    pub masked: Vec<PathBuf>,
}

impl Isolation {
    /// A sandbox in which only `workspace` is writable, with `protected` read-only inside it.
    pub fn new(workspace: &Path, protected: &[PathBuf]) -> Self {
        Isolation {
            writable: vec![workspace.to_path_buf()],
            read_only: protected.to_vec(),
            visible: Vec::new(),
            network: false,
            masked: Vec::new(),
        }
    }

    /// The same with `path` hidden under an empty mount.
    #[must_use]
    pub fn masked(mut self, path: &Path) -> Self {
        self.masked.push(path.to_path_buf());
        self
    }

    /// The same with `path` writable too.
    #[must_use]
    pub fn writable(mut self, path: &Path) -> Self {
        self.writable.push(path.to_path_buf());
        self
    }

    /// The same with `path` visible, read-only, where it lies in a hidden place.
    #[must_use]
    pub fn visible(mut self, path: &Path) -> Self {
        self.visible.push(path.to_path_buf());
        self
    }

    /// The same with the host's network.
    #[must_use]
    pub fn with_network(mut self) -> Self {
        self.network = true;
        self
    }
}
