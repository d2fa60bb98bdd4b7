//! Which journal a command reads or writes (DESIGN §6), found the way git finds its repository:
//! `--journal PATH`, else `HARNESS_JOURNAL`, else the nearest `.harness/runs.db` from the current
//! directory upward, else `./.harness/runs.db` (which writers create).

use std::ffi::OsString;
use std::fmt;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// The environment variable naming the journal when no `--journal` is given.
pub const JOURNAL_ENV: &str = "HARNESS_JOURNAL";

/// Where a journal lives relative to the directory it belongs to.
pub const DEFAULT_JOURNAL: &str = ".harness/runs.db";

/// How the journal was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Found {
    /// `--journal PATH`.
    Flag,
    /// The `HARNESS_JOURNAL` variable.
    Env,
    /// An existing `.harness/runs.db` in the current directory or one above it.
    Upward,
    /// None of those: `./.harness/runs.db`, which may not exist yet.
    Default,
}

/// A journal's path and how it was found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Located {
    /// The journal file.
    pub path: PathBuf,
    /// Which rule found it.
    pub found: Found,
}

impl fmt::Display for Located {
    /// The path, as a user would type it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.path.display())
    }
}

impl Located {
    /// Says how the journal was chosen, for messages (`from HARNESS_JOURNAL`, …).
    pub fn how(&self) -> &'static str {
        match self.found {
            Found::Flag => "from --journal",
            Found::Env => "from HARNESS_JOURNAL",
            Found::Upward => "found from the current directory upward",
            Found::Default => "the default in the current directory",
        }
    }
}

/// Finds the journal for this process: `flag`, else `HARNESS_JOURNAL`, else the nearest
/// `.harness/runs.db` from the current directory upward, else `./.harness/runs.db`.
///
/// # Errors
/// [`ErrorKind::Config`](crate::ErrorKind::Config) when the current directory cannot be read
/// (only needed when neither the flag nor the variable names a journal).
pub fn locate(flag: Option<&Path>) -> Result<Located> {
    let env = std::env::var_os(JOURNAL_ENV);
    if flag.is_none() && env.as_ref().is_none_or(|v| v.is_empty()) {
        let cwd = std::env::current_dir().map_err(|e| {
            Error::config(format!(
                "cannot read the current directory to find the run journal: {e} (pass --journal PATH)"
            ))
        })?;
        return Ok(locate_from(None, None, &cwd));
    }
    Ok(locate_from(flag, env, Path::new(".")))
}

/// The rule of [`locate`] with its inputs given: the flag, the variable's value and the
/// directory to search from. An empty variable counts as unset.
pub fn locate_from(flag: Option<&Path>, env: Option<OsString>, cwd: &Path) -> Located {
    if let Some(path) = flag {
        return Located {
            path: path.to_path_buf(),
            found: Found::Flag,
        };
    }
    if let Some(path) = env.filter(|v| !v.is_empty()) {
        return Located {
            path: PathBuf::from(path),
            found: Found::Env,
        };
    }
    if let Some(path) = cwd
        .ancestors()
        .map(|dir| dir.join(DEFAULT_JOURNAL))
        .find(|path| path.is_file())
    {
        // Inside the current directory, say it the short way.
        let path = match path.strip_prefix(cwd) {
            Ok(relative) => relative.to_path_buf(),
            Err(_) => path,
        };
        return Located {
            path,
            found: Found::Upward,
        };
    }
    Located {
        path: PathBuf::from(DEFAULT_JOURNAL),
        found: Found::Default,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn journal_in(dir: &Path) {
        std::fs::create_dir_all(dir.join(".harness")).expect("mkdir");
        std::fs::write(dir.join(DEFAULT_JOURNAL), "").expect("write");
    }

    #[test]
    fn the_flag_then_the_variable_then_upward_then_the_default() {
        let root = tempfile::tempdir().expect("tempdir");
        let deep = root.path().join("a").join("b");
        std::fs::create_dir_all(&deep).expect("mkdir");
        let flag = Path::new("flag.db");
        let env = || Some(OsString::from("env.db"));

        let got = locate_from(Some(flag), env(), &deep);
        assert_eq!((got.path.as_path(), got.found), (flag, Found::Flag));
        let got = locate_from(None, env(), &deep);
        assert_eq!((got.path, got.found), (PathBuf::from("env.db"), Found::Env));
        // Empty is unset, as in most tools.
        let got = locate_from(None, Some(OsString::new()), &deep);
        assert_eq!(got.found, Found::Default);
        assert_eq!(got.path, PathBuf::from(DEFAULT_JOURNAL));

        journal_in(root.path());
        let got = locate_from(None, None, &deep);
        assert_eq!(got.found, Found::Upward);
        assert_eq!(got.path, root.path().join(DEFAULT_JOURNAL));
        // The nearest one wins.
        journal_in(&root.path().join("a"));
        let got = locate_from(None, None, &deep);
        assert_eq!(got.path, root.path().join("a").join(DEFAULT_JOURNAL));
        // In the current directory itself: the short path.
        let got = locate_from(None, None, &root.path().join("a"));
        assert_eq!(got.path, PathBuf::from(DEFAULT_JOURNAL));
        assert_eq!(got.found, Found::Upward);
    }

    #[test]
    fn a_directory_named_like_the_journal_is_not_one() {
        let root = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir_all(root.path().join(DEFAULT_JOURNAL)).expect("mkdir");
        let got = locate_from(None, None, root.path());
        assert_eq!(got.found, Found::Default);
    }
}
