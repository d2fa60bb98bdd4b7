//! The workspace root every path a script or tool names must stay inside.

use std::io;
use std::path::{Component, Path, PathBuf};

/// A directory that confines file access: paths resolve inside it, `..` escapes and symlinks
/// leading out of it are refused.
#[derive(Debug, Clone)]
pub struct Workspace {
    root: PathBuf,
}

/// Why a path was refused.
#[derive(Debug, Clone, thiserror::Error)]
pub enum PathError {
    /// The path leaves the workspace root, lexically or through a symlink.
    #[error("{path:?} escapes the workspace root {root} (paths must stay inside it)")]
    Escapes {
        /// The path as given.
        path: String,
        /// The workspace root.
        root: PathBuf,
    },
    /// The path names something that may not be written (a dangling symbolic link, which would
    /// create its target wherever it points) or read (a FIFO, socket or device, which could block
    /// forever or never end).
    #[error("{path:?} {reason}")]
    Refused {
        /// The path as given.
        path: String,
        /// Why, e.g. "is a dangling symbolic link".
        reason: String,
    },
    /// The path could not be inspected.
    #[error("{path:?}: {message}")]
    Io {
        /// The path as given.
        path: String,
        /// What the operating system said.
        message: String,
    },
}

impl Workspace {
    /// Opens `root` as a workspace; it must be an existing directory.
    ///
    /// # Errors
    /// The directory does not exist or cannot be resolved.
    pub fn new(root: impl AsRef<Path>) -> io::Result<Self> {
        let root = root.as_ref();
        let canonical = root.canonicalize().map_err(|e| {
            io::Error::new(e.kind(), format!("workspace root {}: {e}", root.display()))
        })?;
        if !canonical.is_dir() {
            return Err(io::Error::new(
                io::ErrorKind::NotADirectory,
                format!("workspace root {} is not a directory", root.display()),
            ));
        }
        Ok(Workspace { root: canonical })
    }

    /// Returns the canonical root directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Resolves `path` (relative to the root, or absolute inside it) to an absolute path inside
    /// the root, following symlinks of the part that exists. The path need not exist.
    ///
    /// # Errors
    /// [`PathError::Escapes`] when the path, lexically or through a symlink, leaves the root.
    pub fn resolve(&self, path: &str) -> Result<PathBuf, PathError> {
        self.resolve_checked(path, false)
    }

    /// Resolves `path` as [`Workspace::resolve`] does, for creating or overwriting a file: also
    /// refuses a path that leads through a dangling symbolic link (writing through it would
    /// create the link's target, wherever it points) and one that names a directory or a special
    /// file.
    ///
    /// # Errors
    /// [`PathError::Escapes`] as for [`Workspace::resolve`]; [`PathError::Refused`] as above.
    pub fn resolve_for_write(&self, path: &str) -> Result<PathBuf, PathError> {
        let full = self.resolve_checked(path, true)?;
        match std::fs::symlink_metadata(&full) {
            Ok(meta) if !meta.is_file() => Err(PathError::Refused {
                path: path.to_owned(),
                reason: format!("is {}, not a regular file", describe(meta.file_type())),
            }),
            _ => Ok(full),
        }
    }

    fn resolve_checked(&self, path: &str, for_write: bool) -> Result<PathBuf, PathError> {
        let escapes = || PathError::Escapes {
            path: path.to_owned(),
            root: self.root.clone(),
        };
        let given = Path::new(path);
        let joined = if given.is_absolute() {
            given.to_path_buf()
        } else {
            self.root.join(given)
        };
        let lexical = normalise(&joined).ok_or_else(escapes)?;
        if !lexical.starts_with(&self.root) {
            return Err(escapes());
        }
        // Resolve symlinks in the longest prefix that exists; the rest cannot be a link yet.
        let mut existing = lexical.as_path();
        let mut rest = Vec::new();
        let resolved = loop {
            match existing.canonicalize() {
                Ok(canonical) => break canonical,
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    // Present but unresolvable: a link whose target does not exist.
                    if for_write && std::fs::symlink_metadata(existing).is_ok() {
                        return Err(PathError::Refused {
                            path: path.to_owned(),
                            reason: format!(
                                "leads through the dangling symbolic link {}",
                                self.relative(existing)
                            ),
                        });
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::NotADirectory => {}
                Err(e) => {
                    return Err(PathError::Io {
                        path: path.to_owned(),
                        message: e.to_string(),
                    });
                }
            }
            match (existing.parent(), existing.file_name()) {
                (Some(parent), Some(name)) => {
                    rest.push(name.to_owned());
                    existing = parent;
                }
                _ => return Err(escapes()),
            }
        };
        let mut full = resolved;
        for name in rest.iter().rev() {
            full.push(name);
        }
        if full.starts_with(&self.root) {
            Ok(full)
        } else {
            Err(escapes())
        }
    }

    /// Returns `path` relative to the root, with `/` separators, for showing to scripts.
    pub fn relative(&self, path: &Path) -> String {
        let rel = path.strip_prefix(&self.root).unwrap_or(path);
        let text = rel.to_string_lossy().replace('\\', "/");
        if text.is_empty() {
            ".".to_owned()
        } else {
            text
        }
    }
}

/// Opens the file at `full` (a path [`Workspace::resolve`] returned) for reading, refusing what is
/// not a regular file — a FIFO, socket, device or directory — without waiting on it: a FIFO is
/// opened non-blocking and refused once seen, so a reader never hangs on one.
///
/// # Errors
/// The file cannot be opened, or is not a regular file (`InvalidInput`, saying what it is).
pub fn open_regular(full: &Path) -> io::Result<std::fs::File> {
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags(nix::libc::O_NONBLOCK);
    }
    let file = options.open(full)?;
    regular(file)
}

/// The most bytes harness reads of a policy file of its own: a delegation, a project policy, a
/// hook (each is a page or two of YAML).
pub const MAX_POLICY_BYTES: u64 = 1024 * 1024;
/// The most bytes harness reads of a Starlark script (a verifier, a scripted delegate, a hook's
/// `script_file`).
pub const MAX_SCRIPT_BYTES: u64 = 4 * 1024 * 1024;

/// Reads the text of the regular file at `path`, as [`open_regular`] opens it (never waiting on a
/// FIFO or device), refusing one larger than `max` bytes before reading it.
///
/// # Errors
/// As [`open_regular`]; the file is larger than `max` (`InvalidData`, saying both sizes), or it
/// is not UTF-8.
pub fn read_regular(path: &Path, max: u64) -> io::Result<String> {
    use std::io::Read as _;
    let file = open_regular(path)?;
    let size = file.metadata()?.len();
    let too_large = |size: u64| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("is {size} bytes, more than the {max} harness reads of such a file"),
        )
    };
    if size > max {
        return Err(too_large(size));
    }
    let mut bytes = Vec::new();
    file.take(max + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > max {
        return Err(too_large(bytes.len() as u64));
    }
    String::from_utf8(bytes)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "is not UTF-8 text"))
}

/// [`read_regular`] for a file that must lie inside `root` (a workspace's own policy): one that
/// is, or passes through, a link leading out of `root` is refused, naming where it leads.
///
/// # Errors
/// As [`read_regular`]; `PermissionDenied` for a link out of `root`.
pub fn read_beneath(root: &Path, path: &Path, max: u64) -> io::Result<String> {
    let resolved = path.canonicalize()?;
    let root = root.canonicalize()?;
    if !resolved.starts_with(&root) {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "leads out of {} through a link (to {}); a workspace's policy must be its own",
                root.display(),
                resolved.display()
            ),
        ));
    }
    read_regular(&resolved, max)
}

/// [`read_regular`] for a script a policy file names relative to its own directory `base` (a
/// hook's `script_file`, a project policy's critic): a path that passes through a link is read
/// only when it ends beneath `base`, so a link planted on the way cannot swap in a script from
/// elsewhere. A plain path (`../shared/guard.star`) is the author's to choose.
///
/// # Errors
/// As [`read_regular`]; `PermissionDenied` for a link leading out of `base`.
pub fn read_named(base: &Path, rel: &Path, max: u64) -> io::Result<String> {
    let full = base.join(rel);
    let real = full.canonicalize()?;
    let plain = std::path::absolute(&full).ok().and_then(|p| normalise(&p));
    if plain.as_deref() != Some(real.as_path()) && !real.starts_with(base.canonicalize()?) {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "leads out of {} through a link (to {}); copy the script in beside the file that names it",
                base.display(),
                real.display()
            ),
        ));
    }
    read_regular(&real, max)
}

/// Creates or truncates the regular file at `rel` (a relative path, `..`-free, as
/// [`Workspace::relative`] gives for a path [`Workspace::resolve_for_write`] returned) beneath
/// `root`, making missing directories, for writing. No symbolic link is followed in any
/// component: each directory is opened relative to the one before it without following a link
/// (`openat` with `O_NOFOLLOW | O_DIRECTORY`), so a directory swapped for a link between the check
/// and the write fails the write rather than landing it outside. Never waits on or writes into a
/// FIFO, socket or device, and never writes a file that has other hard links.
///
/// # Errors
/// A component is a link or not a directory, the file cannot be opened, or it is not a regular
/// file.
pub fn create_beneath(root: &Path, rel: &Path) -> io::Result<std::fs::File> {
    let file = open_beneath(root, rel, true)?;
    let file = regular(file)?;
    // A file with another name elsewhere (a hard link made by a command) would carry the write
    // to that name too: perhaps the policy, perhaps outside the workspace.
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        if file.metadata()?.nlink() > 1 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "has other hard links; writing it would change them too",
            ));
        }
    }
    file.set_len(0)?;
    Ok(file)
}

/// Opens the regular file at `rel` beneath `root` for reading, as [`create_beneath`] walks to it:
/// no link followed in any component, so a directory swapped for a link since the path was
/// checked cannot make the read land outside; never waits on a FIFO or device.
///
/// # Errors
/// A component is a link or not a directory, the file cannot be opened, or it is not a regular
/// file.
pub fn open_read_beneath(root: &Path, rel: &Path) -> io::Result<std::fs::File> {
    if rel.as_os_str().is_empty() || rel == Path::new(".") {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "is the workspace itself, a directory",
        ));
    }
    regular(open_beneath(root, rel, false)?)
}

/// Opens the directory `root` itself (the workspace; a link to it is followed: it was resolved
/// when the workspace was opened), the start of every walk beneath it.
#[cfg(unix)]
fn open_root(root: &Path) -> io::Result<rustix::fd::OwnedFd> {
    use rustix::fs::{CWD, Mode, OFlags, openat};
    Ok(openat(
        CWD,
        root,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )?)
}

/// The entries of the directory `rel` beneath `root` (`""` or `.`: `root` itself), each name
/// with whether it is a directory (a link is not), reached with no link followed in any
/// component, the last included: a directory swapped for a link since the check lists nothing
/// outside.
///
/// # Errors
/// A component is a link or not a directory, or it cannot be read.
#[cfg(unix)]
pub fn list_beneath(root: &Path, rel: &Path) -> io::Result<Vec<(String, bool)>> {
    use rustix::fs::{AtFlags, Dir, FileType, Mode, OFlags, openat, statat};
    let walk = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let mut dir = open_root(root)?;
    for component in rel.components() {
        match component {
            std::path::Component::Normal(name) => {
                dir = openat(&dir, name, walk, Mode::empty())?;
            }
            std::path::Component::CurDir => {}
            _ => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "is not a plain relative path beneath the workspace",
                ));
            }
        }
    }
    let mut entries = Vec::new();
    for entry in Dir::read_from(&dir)? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if name == "." || name == ".." {
            continue;
        }
        let is_dir = match entry.file_type() {
            FileType::Unknown => statat(&dir, entry.file_name(), AtFlags::SYMLINK_NOFOLLOW)
                .is_ok_and(|stat| FileType::from_raw_mode(stat.st_mode) == FileType::Directory),
            kind => kind == FileType::Directory,
        };
        entries.push((name, is_dir));
    }
    Ok(entries)
}

/// [`list_beneath`] where no `openat` exists: the directory read by its path.
#[cfg(not(unix))]
pub fn list_beneath(root: &Path, rel: &Path) -> io::Result<Vec<(String, bool)>> {
    let mut entries = Vec::new();
    for entry in std::fs::read_dir(root.join(rel))? {
        let entry = entry?;
        let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
        entries.push((entry.file_name().to_string_lossy().into_owned(), is_dir));
    }
    Ok(entries)
}

/// Walks to `rel` beneath `root` with no link followed; opens it for writing (creating it and
/// the directories on the way) when `write`, else for reading.
#[cfg(unix)]
fn open_beneath(root: &Path, rel: &Path, write: bool) -> io::Result<std::fs::File> {
    use rustix::fs::{Mode, OFlags, mkdirat, openat};
    let invalid = || {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            "is not a plain relative path beneath the workspace",
        )
    };
    let names = rel
        .components()
        .map(|c| match c {
            std::path::Component::Normal(name) => Ok(name),
            _ => Err(invalid()),
        })
        .collect::<io::Result<Vec<_>>>()?;
    let (last, dirs) = names.split_last().ok_or_else(invalid)?;
    let walk = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let mut dir = open_root(root)?;
    for name in dirs {
        dir = match openat(&dir, *name, walk, Mode::empty()) {
            Err(rustix::io::Errno::NOENT) if write => {
                match mkdirat(&dir, *name, Mode::from_raw_mode(0o777)) {
                    Ok(()) | Err(rustix::io::Errno::EXIST) => {}
                    Err(e) => return Err(e.into()),
                }
                openat(&dir, *name, walk, Mode::empty())?
            }
            opened => opened?,
        };
    }
    let access = if write {
        OFlags::WRONLY | OFlags::CREATE
    } else {
        OFlags::RDONLY
    };
    let fd = openat(
        &dir,
        *last,
        access | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o666),
    )?;
    Ok(std::fs::File::from(fd))
}

#[cfg(not(unix))]
fn open_beneath(root: &Path, rel: &Path, write: bool) -> io::Result<std::fs::File> {
    let full = root.join(rel);
    if !write {
        return std::fs::File::open(full);
    }
    if let Some(parent) = full.parent() {
        std::fs::create_dir_all(parent)?;
    }
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .open(full)
}

fn regular(file: std::fs::File) -> io::Result<std::fs::File> {
    let kind = file.metadata()?.file_type();
    if kind.is_file() {
        Ok(file)
    } else {
        Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("is {}, not a regular file", describe(kind)),
        ))
    }
}

/// Names a kind of file for messages: "a directory", "a FIFO", ….
fn describe(kind: std::fs::FileType) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if kind.is_fifo() {
            return "a FIFO";
        }
        if kind.is_socket() {
            return "a socket";
        }
        if kind.is_block_device() || kind.is_char_device() {
            return "a device";
        }
    }
    if kind.is_dir() {
        "a directory"
    } else if kind.is_symlink() {
        "a symbolic link"
    } else if kind.is_file() {
        "a regular file"
    } else {
        "a special file"
    }
}

/// Opens workspaces, reusing the last root it resolved while the directory at that path is still
/// the same one: one `stat` instead of resolving every component of the path again. Many
/// delegations of a batch share one working directory.
#[derive(Debug, Default)]
pub struct Workspaces {
    last: std::sync::Mutex<Option<Opened>>,
}

#[derive(Debug)]
struct Opened {
    given: PathBuf,
    /// Device and inode of the directory `given` led to.
    identity: (u64, u64),
    workspace: Workspace,
}

impl Workspaces {
    /// A memo with nothing opened yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// As [`Workspace::new`]. When `root` names the directory it named last time (same device
    /// and inode), the root resolved then is reused.
    ///
    /// # Errors
    /// As [`Workspace::new`].
    pub fn open(&self, root: &Path) -> io::Result<Workspace> {
        let Some(identity) = identity(root) else {
            return Workspace::new(root);
        };
        let last = || {
            self.last
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
        };
        if let Some(opened) = last()
            .as_ref()
            .filter(|o| o.identity == identity && o.given == root)
        {
            return Ok(opened.workspace.clone());
        }
        // Resolved without the lock held: other delegations need not wait on these system calls.
        let workspace = Workspace::new(root)?;
        *last() = Some(Opened {
            given: root.to_path_buf(),
            identity,
            workspace: workspace.clone(),
        });
        Ok(workspace)
    }
}

/// The device and inode of the directory `path` leads to, when it is one.
#[cfg(unix)]
fn identity(path: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    let metadata = std::fs::metadata(path).ok()?;
    metadata.is_dir().then(|| (metadata.dev(), metadata.ino()))
}

#[cfg(not(unix))]
fn identity(_path: &Path) -> Option<(u64, u64)> {
    None
}

/// Removes `.` and `..` components without touching the file system; `None` when `..` climbs
/// above the file-system root.
fn normalise(path: &Path) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::ParentDir => {
                if !out.pop() {
                    return None;
                }
            }
            Component::CurDir => {}
            other => out.push(other.as_os_str()),
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(unix)]
    #[test]
    fn a_remembered_root_is_reused_only_while_the_path_leads_to_the_same_directory() {
        let dir = tempfile::tempdir().expect("tempdir");
        let a = dir.path().join("a");
        let b = dir.path().join("b");
        let link = dir.path().join("work");
        std::fs::create_dir(&a).expect("mkdir a");
        std::fs::create_dir(&b).expect("mkdir b");
        std::os::unix::fs::symlink(&a, &link).expect("work -> a");
        let workspaces = Workspaces::new();
        let canonical_a = a.canonicalize().expect("canonical a");
        assert_eq!(workspaces.open(&link).expect("open").root(), canonical_a);
        assert_eq!(workspaces.open(&link).expect("again").root(), canonical_a);
        // The link now leads elsewhere: resolved afresh, not the remembered root.
        std::fs::remove_file(&link).expect("unlink");
        std::os::unix::fs::symlink(&b, &link).expect("work -> b");
        assert_eq!(
            workspaces
                .open(&link)
                .expect("open after the switch")
                .root(),
            b.canonicalize().expect("canonical b")
        );
        // A path that is no longer a directory is an error, as for `Workspace::new`.
        std::fs::remove_file(&link).expect("unlink");
        std::fs::write(&link, "not a directory").expect("a file in its place");
        assert!(workspaces.open(&link).is_err());
    }

    #[test]
    fn resolves_inside_and_refuses_escapes() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir(dir.path().join("sub")).expect("mkdir");
        std::fs::write(dir.path().join("sub/a.txt"), "a").expect("write");
        let ws = Workspace::new(dir.path()).expect("workspace");
        let root = ws.root().to_path_buf();

        assert_eq!(
            ws.resolve("sub/a.txt").expect("inside"),
            root.join("sub/a.txt")
        );
        assert_eq!(
            ws.resolve("sub/../sub/a.txt").expect("inside"),
            root.join("sub/a.txt")
        );
        assert_eq!(
            ws.resolve("missing/x").expect("missing is fine"),
            root.join("missing/x")
        );
        let absolute = root.join("sub/a.txt");
        assert!(ws.resolve(absolute.to_str().expect("utf-8")).is_ok());
        assert_eq!(ws.resolve(".").expect("root"), root);

        for bad in ["..", "../x", "sub/../../x", "/etc/passwd"] {
            let err = ws.resolve(bad).expect_err(bad);
            assert!(matches!(err, PathError::Escapes { .. }), "{bad}: {err}");
        }
    }

    #[cfg(unix)]
    #[test]
    fn refuses_symlinks_that_leave() {
        let outside = tempfile::tempdir().expect("tempdir");
        std::fs::write(outside.path().join("secret"), "s").expect("write");
        let dir = tempfile::tempdir().expect("tempdir");
        std::os::unix::fs::symlink(outside.path(), dir.path().join("link")).expect("symlink");
        std::os::unix::fs::symlink("sub", dir.path().join("inner")).expect("symlink");
        std::fs::create_dir(dir.path().join("sub")).expect("mkdir");
        let ws = Workspace::new(dir.path()).expect("workspace");
        assert!(matches!(
            ws.resolve("link/secret"),
            Err(PathError::Escapes { .. })
        ));
        assert!(matches!(
            ws.resolve("link/new"),
            Err(PathError::Escapes { .. })
        ));
        assert!(ws.resolve("inner/x").is_ok());
    }
}
