//! `fs.*`: read-only access to the workspace.

use std::io::Read;
use std::path::{Path, PathBuf};

use globset::GlobBuilder;
use serde_json::json;
use starlark::environment::GlobalsBuilder;
use starlark::eval::Evaluator;
use starlark::starlark_module;
use starlark::values::Value;

use crate::host::Host;
use crate::json_value::alloc_json;
use crate::workspace::PathError;

/// Refuses builtin `func` when the `fs` capability is missing.
fn require_fs(host: &Host, func: &str) -> anyhow::Result<()> {
    if host.sandbox.capabilities.fs_read {
        Ok(())
    } else {
        Err(host.refuse(format!(
            "{func}: file access is not enabled for {} scripts",
            host.sandbox.surface.as_str()
        )))
    }
}

/// Resolves `path` for builtin `func`, refusing escapes and a missing `fs` capability.
fn resolve(host: &Host, func: &str, path: &str) -> anyhow::Result<PathBuf> {
    host.needs_thread(func)?;
    require_fs(host, func)?;
    host.sandbox.workspace.resolve(path).map_err(|e| match e {
        PathError::Escapes { .. } | PathError::Refused { .. } => {
            host.refuse(format!("{func}: {e}"))
        }
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

/// Reads a whole file, refusing files larger than `cap` bytes and anything that is not a regular
/// file (a FIFO would block the script past every deadline).
fn read_capped(
    host: &Host,
    func: &str,
    shown: &str,
    path: &Path,
    cap: u64,
) -> anyhow::Result<Vec<u8>> {
    let file = crate::workspace::open_regular(path).map_err(|e| {
        if e.kind() == std::io::ErrorKind::InvalidInput {
            host.refuse(format!("{func}: {shown:?} {e}"))
        } else {
            anyhow::anyhow!("{func}: {shown:?}: {e}")
        }
    })?;
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

/// A glob pattern split where its wildcards start, `.` and `..` resolved lexically.
#[derive(Debug, PartialEq, Eq)]
struct GlobParts {
    /// The directory to walk: the longest leading part without glob characters (`src` for
    /// `src/**/*.rs`; the parent of a pattern without any, `a/b` for `a/b/c.txt`). Starts with
    /// `/` when the pattern is absolute; `.` when empty.
    start: String,
    /// The rest, matched against paths relative to `start`. Empty only for a pattern that names
    /// no path (`""`, `"."`, `"/"`).
    rest: String,
    /// The whole pattern, normalised (`/`-prefixed when absolute, `.` when empty).
    whole: String,
}

/// Why a glob pattern was refused before matching.
#[derive(Debug, PartialEq, Eq)]
enum GlobProblem {
    /// A `..` climbs above the start of the pattern (the workspace root or `/`).
    Escapes,
    /// A `..` follows a wildcard component, which has no single lexical meaning.
    ParentOfWildcard,
}

fn is_wild(component: &str) -> bool {
    component.contains(['*', '?', '[', '{'])
}

fn split_pattern(pattern: &str) -> Result<GlobParts, GlobProblem> {
    let absolute = pattern.starts_with('/');
    let mut parts: Vec<&str> = Vec::new();
    for part in pattern.split('/') {
        match part {
            "" | "." => {}
            ".." => match parts.last() {
                None => return Err(GlobProblem::Escapes),
                Some(last) if is_wild(last) => return Err(GlobProblem::ParentOfWildcard),
                Some(_) => {
                    parts.pop();
                }
            },
            _ => parts.push(part),
        }
    }
    let mut literal = parts.iter().take_while(|p| !is_wild(p)).count();
    // A pattern without glob characters names one path; walk its parent.
    if literal == parts.len() {
        literal = literal.saturating_sub(1);
    }
    let path = |parts: &[&str]| {
        let joined = parts.join("/");
        if absolute {
            format!("/{joined}")
        } else if joined.is_empty() {
            ".".to_owned()
        } else {
            joined
        }
    };
    Ok(GlobParts {
        start: path(&parts[..literal]),
        rest: parts[literal..].join("/"),
        whole: path(&parts),
    })
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
            Some(info) => alloc_json(eval.heap(), &info),
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
        let data = read_capped(
            host,
            "fs.read",
            path,
            &full,
            host.sandbox.limits.max_read_bytes,
        )?;
        String::from_utf8(data).map_err(|_| anyhow::anyhow!("fs.read: {path:?} is not UTF-8 text"))
    }

    /// Returns a citation of lines `start..end` (1-based, inclusive) of `path`:
    /// `[[cite:PATH:L<start>-L<end>#<16 hex digits of the lines' SHA-256>]]`, the marker a
    /// response under `citations: required` cites its evidence with.
    ///
    /// ```python
    /// fs.cite("src/lib.rs", 10, 12)  # "[[cite:src/lib.rs:L10-L12#0c1f…]]"
    /// ```
    fn cite(
        #[starlark(require = pos)] path: &str,
        #[starlark(require = pos)] start: i32,
        #[starlark(require = pos)] end: i32,
        eval: &mut Evaluator,
    ) -> anyhow::Result<String> {
        cite_lines(Host::of(eval)?, path, start, end)
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
        list_dir(Host::of(eval)?, dir)
    }

    /// Returns the sorted workspace-relative paths of the files and directories matching a glob
    /// (`*` stays inside one directory, `**` crosses directories). Symlinks are not followed.
    /// The pattern may be absolute inside the workspace; `.` and `..` are resolved before
    /// matching (`sub/../*.txt` is `*.txt`), and a `..` leading out of the workspace is refused.
    ///
    /// ```python
    /// fs.glob("src/**/*.rs")
    /// ```
    fn glob(
        #[starlark(require = pos)] pattern: &str,
        eval: &mut Evaluator,
    ) -> anyhow::Result<Vec<String>> {
        glob_in(Host::of(eval)?, pattern)
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
        let data = read_capped(
            host,
            "fs.sha256",
            path,
            &full,
            host.sandbox.limits.max_read_bytes,
        )?;
        Ok(super::hash::sha256_hex(&data))
    }
}

/// `fs.cite(path, start, end)`: the citation marker of those lines.
fn cite_lines(host: &Host, path: &str, start: i32, end: i32) -> anyhow::Result<String> {
    let full = resolve(host, "fs.cite", path)?;
    if start < 1 || end < start {
        anyhow::bail!(
            "fs.cite: lines {start}..{end} of {path:?}: lines count from 1 and end at or after start"
        );
    }
    let (start, end) = (start.unsigned_abs().into(), end.unsigned_abs().into());
    match crate::citation::hash_lines(&full, start, end) {
        Ok(hash) => Ok(crate::citation::marker(path, start, end, &hash)),
        Err(crate::citation::LinesError::OutOfBounds(lines)) => {
            anyhow::bail!("fs.cite: {path:?} has {lines} line(s), not {end}")
        }
        Err(crate::citation::LinesError::Unreadable(e)) => {
            anyhow::bail!("fs.cite: {path:?}: {e}")
        }
    }
}

/// `fs.list(dir)`: the sorted names of its entries.
fn list_dir(host: &Host, dir: &str) -> anyhow::Result<Vec<String>> {
    let full = resolve(host, "fs.list", dir)?;
    let entries = std::fs::read_dir(&full).map_err(|e| anyhow::anyhow!("fs.list: {dir:?}: {e}"))?;
    let mut names = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| anyhow::anyhow!("fs.list: {dir:?}: {e}"))?;
        names.push(entry.file_name().to_string_lossy().into_owned());
    }
    names.sort();
    Ok(names)
}

/// `fs.glob(pattern)`: the sorted workspace-relative paths matching it, walked without
/// following links from the pattern's literal start.
fn glob_in(host: &Host, pattern: &str) -> anyhow::Result<Vec<String>> {
    require_fs(host, "fs.glob")?;
    let workspace = &host.sandbox.workspace;
    let escapes = || {
        let e = PathError::Escapes {
            path: pattern.to_owned(),
            root: workspace.root().to_path_buf(),
        };
        host.refuse(format!("fs.glob: {e}"))
    };
    let parts = split_pattern(pattern).map_err(|problem| match problem {
        GlobProblem::Escapes => escapes(),
        GlobProblem::ParentOfWildcard => {
            anyhow::anyhow!("fs.glob: invalid pattern {pattern:?}: `..` cannot follow a wildcard")
        }
    })?;
    // A pattern naming the root itself (its absolute path, `.`) matches nothing: the root is
    // never listed. (Its parent, where the walk would start, is outside.)
    if !is_wild(&parts.rest)
        && workspace
            .resolve(&parts.whole)
            .is_ok_and(|p| p == workspace.root())
    {
        return Ok(Vec::new());
    }
    let start = workspace.resolve(&parts.start).map_err(|e| match e {
        PathError::Escapes { .. } => escapes(),
        PathError::Io { .. } | PathError::Refused { .. } => anyhow::anyhow!("fs.glob: {e}"),
    })?;
    if parts.rest.is_empty() {
        return Ok(Vec::new());
    }
    let matcher = GlobBuilder::new(&parts.rest)
        .literal_separator(true)
        .build()
        .map_err(|e| anyhow::anyhow!("fs.glob: invalid pattern {pattern:?}: {}", e.kind()))?
        .compile_matcher();
    let mut found = Vec::new();
    for entry in walkdir::WalkDir::new(&start)
        .min_depth(1)
        .follow_links(false)
    {
        let Ok(entry) = entry else { continue };
        let Ok(below) = entry.path().strip_prefix(&start) else {
            continue;
        };
        let below = below.to_string_lossy().replace('\\', "/");
        if matcher.is_match(&below) {
            found.push(workspace.relative(entry.path()));
        }
    }
    found.sort();
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::{GlobParts, GlobProblem, split_pattern};

    #[test]
    fn patterns_split_where_wildcards_start() {
        for (pattern, start, rest, whole) in [
            ("src/**/*.rs", "src", "**/*.rs", "src/**/*.rs"),
            ("*.txt", ".", "*.txt", "*.txt"),
            ("a/b/c.txt", "a/b", "c.txt", "a/b/c.txt"),
            ("c.txt", ".", "c.txt", "c.txt"),
            ("a/b*/c", "a", "b*/c", "a/b*/c"),
            ("**", ".", "**", "**"),
            ("./sub/*.txt", "sub", "*.txt", "sub/*.txt"),
            ("sub/../*.txt", ".", "*.txt", "*.txt"),
            ("sub/./deeper/../*.md", "sub", "*.md", "sub/*.md"),
            ("a//b/*", "a/b", "*", "a/b/*"),
            ("/w/sub/*.txt", "/w/sub", "*.txt", "/w/sub/*.txt"),
            ("/w/x/../sub/*", "/w/sub", "*", "/w/sub/*"),
            ("/w/sub/a.txt", "/w/sub", "a.txt", "/w/sub/a.txt"),
            (".", ".", "", "."),
            ("", ".", "", "."),
            ("/", "/", "", "/"),
        ] {
            assert_eq!(
                split_pattern(pattern),
                Ok(GlobParts {
                    start: start.to_owned(),
                    rest: rest.to_owned(),
                    whole: whole.to_owned(),
                }),
                "{pattern}"
            );
        }
    }

    #[test]
    fn patterns_that_climb_out_or_past_wildcards_are_refused() {
        for pattern in ["..", "../*", "sub/../../*", "/..", "/w/../../x"] {
            assert_eq!(
                split_pattern(pattern),
                Err(GlobProblem::Escapes),
                "{pattern}"
            );
        }
        for pattern in ["*/..", "src/**/../x", "a/b?/../c", "{a,b}/../x"] {
            assert_eq!(
                split_pattern(pattern),
                Err(GlobProblem::ParentOfWildcard),
                "{pattern}"
            );
        }
    }
}
