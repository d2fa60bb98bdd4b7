//! `fs.*`: read-only access to the workspace.

use std::io::Read;
use std::path::{Path, PathBuf};

use globset::GlobBuilder;
use serde_json::json;
use starlark::environment::GlobalsBuilder;
use starlark::eval::Evaluator;
use starlark::starlark_module;
use starlark::values::Value;

use super::alloc;
use crate::host::Host;
use crate::workspace::PathError;

/// Resolves `path` for builtin `func`, refusing escapes and a missing `fs` capability.
fn resolve(host: &Host, func: &str, path: &str) -> anyhow::Result<PathBuf> {
    if !host.sandbox.capabilities.fs_read {
        return Err(host.refuse(format!(
            "{func}: file access is not enabled for {} scripts",
            host.sandbox.surface.as_str()
        )));
    }
    host.sandbox.workspace.resolve(path).map_err(|e| match e {
        PathError::Escapes { .. } => host.refuse(format!("{func}: {e}")),
        PathError::Io { .. } => anyhow::anyhow!("{func}: {e}"),
    })
}

fn stat_json(host: &Host, path: &Path) -> Option<serde_json::Value> {
    let meta = std::fs::metadata(path).ok()?;
    let modified = meta.modified().ok().map(super::time::rfc3339);
    Some(json!({
        "path": host.sandbox.workspace.relative(path),
        "size": meta.len(),
        "is_file": meta.is_file(),
        "is_dir": meta.is_dir(),
        "modified": modified,
    }))
}

/// Reads a whole file, refusing files larger than `cap` bytes.
fn read_capped(func: &str, shown: &str, path: &Path, cap: u64) -> anyhow::Result<Vec<u8>> {
    let file = std::fs::File::open(path).map_err(|e| anyhow::anyhow!("{func}: {shown:?}: {e}"))?;
    let mut data = Vec::new();
    file.take(cap + 1)
        .read_to_end(&mut data)
        .map_err(|e| anyhow::anyhow!("{func}: {shown:?}: {e}"))?;
    if data.len() as u64 > cap {
        anyhow::bail!(
            "{func}: {shown:?} is larger than the {cap}-byte read limit (max_read_bytes)"
        );
    }
    Ok(data)
}

/// The directory to start walking from: the longest leading part of the pattern without glob
/// characters, so `src/**/*.rs` walks `src/` only.
fn literal_prefix(pattern: &str) -> &str {
    let mut end = 0;
    for (i, part) in pattern.split('/').enumerate() {
        if part.contains(['*', '?', '[', '{']) {
            break;
        }
        if i > 0 {
            end += 1;
        }
        end += part.len();
    }
    let prefix = &pattern[..end.min(pattern.len())];
    // A pattern without glob characters names one path; walk its parent.
    if prefix.len() == pattern.len() {
        prefix.rsplit_once('/').map_or("", |(dir, _)| dir)
    } else {
        prefix
    }
}

#[starlark_module]
pub(crate) fn members(builder: &mut GlobalsBuilder) {
    /// Returns True when `path` exists inside the workspace.
    ///
    /// ```python
    /// fs.exists("hello.txt")
    /// ```
    fn exists(#[starlark(require = pos)] path: &str, eval: &mut Evaluator) -> anyhow::Result<bool> {
        let host = Host::of(eval)?;
        Ok(resolve(host, "fs.exists", path)?.exists())
    }

    /// Returns `{path, size, is_file, is_dir, modified}` for `path`, or None when it does not
    /// exist. `modified` is an RFC 3339 string.
    ///
    /// ```python
    /// info = fs.stat("hello.txt")
    /// ok = info != None and info["size"] > 0
    /// ```
    fn stat<'v>(
        #[starlark(require = pos)] path: &str,
        eval: &mut Evaluator<'v, '_, '_>,
    ) -> anyhow::Result<Value<'v>> {
        let host = Host::of(eval)?;
        let full = resolve(host, "fs.stat", path)?;
        Ok(match stat_json(host, &full) {
            Some(info) => alloc(eval.heap(), info),
            None => Value::new_none(),
        })
    }

    /// Returns the contents of a UTF-8 text file. Files over the read limit, missing files and
    /// files that are not UTF-8 are errors.
    ///
    /// ```python
    /// "hi" in fs.read("hello.txt")
    /// ```
    fn read(#[starlark(require = pos)] path: &str, eval: &mut Evaluator) -> anyhow::Result<String> {
        let host = Host::of(eval)?;
        let full = resolve(host, "fs.read", path)?;
        let data = read_capped("fs.read", path, &full, host.sandbox.limits.max_read_bytes)?;
        String::from_utf8(data).map_err(|_| anyhow::anyhow!("fs.read: {path:?} is not UTF-8 text"))
    }

    /// Returns the sorted names of the entries of directory `dir` (default: the workspace root).
    ///
    /// ```python
    /// "main.rs" in fs.list("src")
    /// ```
    fn list(
        #[starlark(require = pos, default = ".")] dir: &str,
        eval: &mut Evaluator,
    ) -> anyhow::Result<Vec<String>> {
        let host = Host::of(eval)?;
        let full = resolve(host, "fs.list", dir)?;
        let entries =
            std::fs::read_dir(&full).map_err(|e| anyhow::anyhow!("fs.list: {dir:?}: {e}"))?;
        let mut names = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|e| anyhow::anyhow!("fs.list: {dir:?}: {e}"))?;
            names.push(entry.file_name().to_string_lossy().into_owned());
        }
        names.sort();
        Ok(names)
    }

    /// Returns the sorted workspace-relative paths of the files and directories matching a glob
    /// (`*` stays inside one directory, `**` crosses directories). Symlinks are not followed.
    ///
    /// ```python
    /// fs.glob("src/**/*.rs")
    /// ```
    fn glob(
        #[starlark(require = pos)] pattern: &str,
        eval: &mut Evaluator,
    ) -> anyhow::Result<Vec<String>> {
        let host = Host::of(eval)?;
        let pattern = pattern.trim_start_matches("./");
        let matcher = GlobBuilder::new(pattern)
            .literal_separator(true)
            .build()
            .map_err(|e| anyhow::anyhow!("fs.glob: invalid pattern {pattern:?}: {e}"))?
            .compile_matcher();
        let start = resolve(host, "fs.glob", literal_prefix(pattern))?;
        let workspace = &host.sandbox.workspace;
        let mut found = Vec::new();
        for entry in walkdir::WalkDir::new(&start).follow_links(false) {
            let Ok(entry) = entry else { continue };
            let relative = workspace.relative(entry.path());
            if relative != "." && matcher.is_match(&relative) {
                found.push(relative);
            }
        }
        found.sort();
        Ok(found)
    }

    /// Returns the hex SHA-256 of a file's bytes.
    ///
    /// ```python
    /// fs.sha256("dist/app.tar.gz") == args["expected_sha256"]
    /// ```
    fn sha256(
        #[starlark(require = pos)] path: &str,
        eval: &mut Evaluator,
    ) -> anyhow::Result<String> {
        let host = Host::of(eval)?;
        let full = resolve(host, "fs.sha256", path)?;
        let data = read_capped("fs.sha256", path, &full, host.sandbox.limits.max_read_bytes)?;
        Ok(super::hash::sha256_hex(&data))
    }
}

#[cfg(test)]
mod tests {
    use super::literal_prefix;

    #[test]
    fn literal_prefixes() {
        for (pattern, prefix) in [
            ("src/**/*.rs", "src"),
            ("*.txt", ""),
            ("a/b/c.txt", "a/b"),
            ("c.txt", ""),
            ("a/b*/c", "a"),
            ("**", ""),
        ] {
            assert_eq!(literal_prefix(pattern), prefix, "{pattern}");
        }
    }
}
