//! `holdout:` entries (DESIGN §10.1): checks whose test files the delegate never sees, as
//! written and read.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::checks::{CheckSpec, RawCheck};
use crate::error::{Error, Result};

/// One `holdout:` entry: a check whose test files the delegate never sees.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HoldoutSpec {
    /// The check (its `name`, `run`/`argv`, `timeout_s`, `env`, `runner`, `min_tests`, …).
    pub check: CheckSpec,
    /// The directory holding its files, absolute and real (no link).
    pub files: PathBuf,
}

/// A `holdout:` entry's shape, declared for the schema (`harness schema`): the keys of a check
/// and `files`. The parser takes `files` out and reads the rest as a check.
#[derive(schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "holdout")]
#[expect(dead_code, reason = "declares the schema's shape; never built")]
/// A check whose test files (`files`, a directory outside the workspace) the delegate never
/// sees; it runs after the visible checks and criteria pass, with the workspace read-only and
/// the directory at $HARNESS_HOLDOUT.
pub(crate) struct HoldoutForm {
    #[serde(flatten)]
    check: RawCheck,
    /// The directory of the holdout's files: outside the workspace, relative to this file's
    /// directory or absolute; hidden from every program the delegate's work runs in.
    #[schemars(regex(pattern = r"\S"))]
    files: String,
}

impl HoldoutSpec {
    /// Validates `holdout:` entries as written in `file`, whose directory is `base` (relative
    /// `files` are resolved against it).
    ///
    /// # Errors
    /// [`ErrorKind::Config`](crate::ErrorKind::Config): what `checks:` refuses, a missing or
    /// unreadable `files`, one that is a link.
    pub(crate) fn parse_list(file: &str, base: &Path, raw: Vec<Value>) -> Result<Vec<Self>> {
        let mut checks = Vec::with_capacity(raw.len());
        let mut dirs = Vec::with_capacity(raw.len());
        for (i, entry) in raw.into_iter().enumerate() {
            let at = format!("{file}: `holdout[{i}]`");
            let Value::Object(mut map) = entry else {
                return Err(Error::config(format!(
                    "{at}: must be a mapping: a check (`name`, `run` or `argv`, …) with `files: DIR`"
                )));
            };
            let files = match map.remove("files") {
                Some(Value::String(dir)) if !dir.trim().is_empty() => dir,
                Some(_) => {
                    return Err(Error::config(format!(
                        "{at}: `files` must be a directory's path (relative to {file}'s directory, or absolute)"
                    )));
                }
                None => {
                    return Err(Error::config(format!(
                        "{at}: `files` is missing; give the directory of the holdout's tests, outside the workspace"
                    )));
                }
            };
            let check: RawCheck = serde_json::from_value(Value::Object(map)).map_err(|e| {
                Error::config(format!(
                    "{at}: {} (a holdout takes the keys of a check, and `files`)",
                    crate::plain::plain(&e.to_string())
                ))
            })?;
            checks.push(check);
            dirs.push((at, directory(base, &files)?));
        }
        let specs = CheckSpec::parse_entries(file, "holdout", checks)?;
        Ok(specs
            .into_iter()
            .zip(dirs)
            .map(|(check, (_, files))| HoldoutSpec { check, files })
            .collect())
    }
}

/// `files` resolved against `base`, checked: an existing, readable directory that is not a
/// link.
fn directory(base: &Path, files: &str) -> Result<PathBuf> {
    let given = base.join(files);
    let absolute = std::path::absolute(&given).unwrap_or_else(|_| given.clone());
    let shown = absolute.display();
    let real = absolute.canonicalize().map_err(|e| {
        Error::config(format!(
            "holdout `files: {files}`: {shown}: {e}; give an existing directory outside the workspace"
        ))
    })?;
    if !real.is_dir() {
        return Err(Error::config(format!(
            "holdout `files: {files}`: {shown} is not a directory; give the directory that holds the holdout's tests"
        )));
    }
    if std::fs::read_dir(&real).is_err() {
        return Err(Error::config(format!(
            "holdout `files: {files}`: {shown} cannot be read; harness must read it to run the holdout"
        )));
    }
    if normalized(&absolute) != real {
        return Err(Error::config(format!(
            "holdout `files: {files}`: {shown} is or passes through a link (to {}); give the real directory, so what is hidden is what runs",
            real.display()
        )));
    }
    Ok(real)
}

/// `path` with `.` and `..` taken out, lexically.
fn normalized(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            std::path::Component::CurDir => {}
            std::path::Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

/// Checks `holdouts` against the workspace at `root`: each directory lies outside it (and does
/// not hold it).
///
/// # Errors
/// [`ErrorKind::Config`](crate::ErrorKind::Config) naming the holdout and the fix.
pub(crate) fn check_outside(label: &str, holdouts: &[HoldoutSpec], root: &Path) -> Result<()> {
    let Ok(root) = root.canonicalize() else {
        // The workspace's own error is said where it is opened.
        return Ok(());
    };
    for holdout in holdouts {
        let dir = &holdout.files;
        if dir.starts_with(&root) {
            return Err(Error::config(format!(
                "{label}: holdout {}: `files` ({}) is inside the workspace {}, where the delegate can read it; move the holdout's tests outside the workspace",
                holdout.check.name,
                dir.display(),
                root.display()
            )));
        }
        if root.starts_with(dir) {
            return Err(Error::config(format!(
                "{label}: holdout {}: `files` ({}) holds the workspace {}; give a directory beside it, not around it",
                holdout.check.name,
                dir.display(),
                root.display()
            )));
        }
    }
    Ok(())
}
