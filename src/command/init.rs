//! `harness init`: a working `.harness/` and a delegation file to start from.

use std::path::{Path, PathBuf};

use harness::Error;

use crate::args::InitArgs;
use crate::exit;

/// What `init` writes: a path under the directory, and its text.
const FILES: [(&str, &str); 7] = [
    (
        ".harness/policy.yaml",
        include_str!("../scaffold/policy.yaml"),
    ),
    (
        ".harness/hooks/claim-check.md",
        include_str!("../scaffold/claim-check.md"),
    ),
    (
        ".harness/hooks/claim-check_test.star",
        include_str!("../scaffold/claim-check_test.star"),
    ),
    (
        ".harness/verifiers/file-exists.star",
        include_str!("../scaffold/file-exists.star"),
    ),
    (
        ".harness/verifiers/file-exists_test.star",
        include_str!("../scaffold/file-exists_test.star"),
    ),
    (
        ".harness/agents/example.star",
        include_str!("../scaffold/agent.star"),
    ),
    (
        "delegation.yaml",
        include_str!("../scaffold/delegation.yaml"),
    ),
];

/// Runs `harness init`; returns the exit code.
pub fn run(args: &InitArgs) -> u8 {
    match write(args) {
        Ok(written) => {
            for path in &written {
                println!("wrote {}", path.display());
            }
            let dir = args.dir.clone().unwrap_or_else(|| PathBuf::from("."));
            eprintln!(
                "next: harness hooks check {hooks}\n      harness test {policy}\n      harness run {file}",
                hooks = dir.join(".harness/hooks").display(),
                policy = dir.join(".harness").display(),
                file = dir.join("delegation.yaml").display()
            );
            exit::OK
        }
        Err(e) => exit::fail(&e, false),
    }
}

fn write(args: &InitArgs) -> Result<Vec<PathBuf>, Error> {
    let dir = args.dir.clone().unwrap_or_else(|| PathBuf::from("."));
    let targets: Vec<(PathBuf, &str)> = FILES
        .iter()
        .map(|(rel, text)| (dir.join(rel), *text))
        .collect();
    // Nothing is written unless everything can be.
    let existing: Vec<String> = targets
        .iter()
        .filter(|(path, _)| path.symlink_metadata().is_ok())
        .map(|(path, _)| path.display().to_string())
        .collect();
    if !existing.is_empty() && !args.force {
        return Err(Error::config(format!(
            "harness init: these files exist and were left alone: {} (pass --force to overwrite them)",
            existing.join(", ")
        )));
    }
    let mut written = Vec::new();
    for (path, text) in targets {
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).map_err(|e| {
                Error::config(format!(
                    "harness init: cannot create {}: {e}",
                    parent.display()
                ))
            })?;
        }
        write_file(&path, text)?;
        written.push(path);
    }
    Ok(written)
}

fn write_file(path: &Path, text: &str) -> Result<(), Error> {
    // Replace a link rather than write through it.
    if path
        .symlink_metadata()
        .is_ok_and(|m| m.file_type().is_symlink())
    {
        std::fs::remove_file(path).map_err(|e| {
            Error::config(format!(
                "harness init: cannot replace {}: {e}",
                path.display()
            ))
        })?;
    }
    std::fs::write(path, text).map_err(|e| {
        Error::config(format!(
            "harness init: cannot write {}: {e}",
            path.display()
        ))
    })
}
