//! Judging: whether what an attempt did supports each claim, one function per kind of claim.

use harness_hooks::{Evidence, EvidenceResult};

use super::extract::command_words;
use super::ground::{Call, calls, components, is_test_command, names, runs};
use super::{Claim, Claimed, Ground};

/// Each claim of `claims` that `ground` does not support, with why: the tool log read once.
pub(super) fn unsupported_all<'c>(
    claims: &'c [Claimed],
    ground: &Ground<'_>,
) -> Vec<(&'c Claimed, String)> {
    let calls = calls(ground);
    claims
        .iter()
        .filter_map(|c| judge(&c.claim, ground, &calls).map(|why| (c, why)))
        .collect()
}

/// Why `claim` is not supported by `ground` and the attempt's `calls`, or `None` when it is.
pub(super) fn judge(claim: &Claim, ground: &Ground<'_>, calls: &[Call]) -> Option<String> {
    let root = ground.root.to_string_lossy();
    let root = format!("{}/", root.trim_end_matches('/'));
    // A path outside the workspace (`/tmp/x`) cannot be judged here: not held against anyone.
    if let Claim::Wrote { path, .. } | Claim::Deleted { path, .. } = claim
        && path.starts_with('/')
        && !path.starts_with(&root)
    {
        return None;
    }
    match claim {
        Claim::Wrote { path, verb } => wrote(path, verb, ground, calls, &root),
        Claim::Deleted { path, verb } => deleted(path, verb, ground, calls, &root),
        Claim::TestsPass { said } => tests_pass(said, ground, calls),
        Claim::Ran { command, succeeded } => ran(command, *succeeded, ground, calls),
        Claim::Committed { said } => match ground.head_moved {
            None | Some(true) => None,
            Some(false) => Some(format!(
                "claims a commit (\"{said}\"); git's HEAD did not move during the delegation"
            )),
        },
    }
}

/// Why a claim to have written `path` is unsupported, if it is: no successful write named it,
/// the changes do not hold it, and it is not new since the delegation began.
pub(super) fn wrote(
    path: &str,
    verb: &str,
    ground: &Ground<'_>,
    calls: &[Call],
    root: &str,
) -> Option<String> {
    // A claim naming a file that exists at exactly that path means that file:
    // `calc.sh` is not `scratch/calc.sh`.
    let rel = path
        .strip_prefix(root)
        .unwrap_or(path)
        .trim_start_matches("./");
    let meta = ground.root.join(rel).symlink_metadata().ok();
    let exact = meta.is_some();
    let names = |claimed: &str, actual: &str, root: &str| {
        if exact {
            components(claimed, root) == components(actual, root)
        } else {
            names(claimed, actual, root)
        }
    };
    let written = calls.iter().any(|c| {
        c.ok && c
            .wrote
            .iter()
            .any(|(p, delete)| !delete && names(path, p, root))
    });
    let changed = ground.changes.map(|ch| {
        let transformed = matches!(
            verb,
            "renamed" | "moved" | "converted" | "ported" | "migrated" | "replaced"
        );
        let lists: Vec<&Vec<String>> = if transformed {
            vec![&ch.added, &ch.modified, &ch.deleted]
        } else {
            vec![&ch.added, &ch.modified]
        };
        lists.into_iter().flatten().any(|p| names(path, p, root))
    });
    if written || changed == Some(true) {
        return None;
    }
    let exists = exact;
    // Written since the delegation began (a path the snapshot leaves out, or no
    // snapshot), or a directory that exists (the snapshot records files only).
    let recent = meta.as_ref().is_some_and(|m| {
        m.is_dir()
            || ground
                .started
                .zip(m.modified().ok())
                .is_some_and(|(started, modified)| modified >= started)
    });
    if recent || (changed.is_none() && exists) {
        return None;
    }
    let failed = calls
        .iter()
        .find(|c| !c.ok && c.wrote.iter().any(|(p, _)| names(path, p, root)));
    let mut why = format!("claims to have {verb} {path}; no tool call wrote it");
    if changed == Some(false) && exists {
        why.push_str(" and it is unchanged since the delegation began");
    }
    if !exists {
        why.push_str(&format!(" and the workspace has no {path}"));
    }
    if let Some(call) = failed {
        why.push_str(&format!(" (the write that named it failed: {})", call.said));
    }
    Some(why)
}

/// Why a claim to have deleted `path` is unsupported, if it is: it is still there, or was
/// never there.
pub(super) fn deleted(
    path: &str,
    verb: &str,
    ground: &Ground<'_>,
    calls: &[Call],
    root: &str,
) -> Option<String> {
    let deleted = ground
        .changes
        .is_some_and(|ch| ch.deleted.iter().any(|p| names(path, p, root)))
        || calls.iter().any(|c| {
            c.ok && c
                .wrote
                .iter()
                .any(|(p, delete)| *delete && names(path, p, root))
        });
    let rel = path.strip_prefix(root).unwrap_or(path);
    let gone = ground.root.join(rel).symlink_metadata().is_err();
    // A file made and removed within the attempt never shows in the changes: gone, and
    // named by a successful call of this attempt, it is what the claim says.
    let name = rel.trim_end_matches('/').rsplit('/').next().unwrap_or(rel);
    let named = calls.iter().any(|c| {
        c.ok && (c.wrote.iter().any(|(p, _)| names(path, p, root))
            || c.command.as_deref().is_some_and(|t| t.contains(name)))
    });
    if deleted || (gone && named) {
        return None;
    }
    Some(if gone {
        format!("claims to have {verb} {path}; the workspace had no {path} to delete")
    } else {
        format!("claims to have {verb} {path}; it is still there")
    })
}

/// Why a claim that the tests pass is unsupported, if it is: no passing test run or test check
/// (or, when no check is named as tests, not every command check passing).
pub(super) fn tests_pass(said: &str, ground: &Ground<'_>, calls: &[Call]) -> Option<String> {
    let ran: Vec<&Call> = calls
        .iter()
        .filter(|c| c.command.as_deref().is_some_and(is_test_command))
        .collect();
    let commands: Vec<&Evidence> = ground
        .evidence
        .iter()
        .filter(|e| {
            matches!(e.source.as_str(), "check" | "criterion") && e.exit_code.is_some()
                || e.source == "check"
        })
        .collect();
    let test_checks: Vec<&Evidence> = commands
        .iter()
        .copied()
        .filter(|e| {
            e.method.as_deref().is_some_and(is_test_command)
                || matches!(
                    e.criterion.as_str(),
                    "test" | "tests" | "tests_pass" | "unit" | "unit-tests"
                )
        })
        .collect();
    // A passing test run, a passing test check, or — when the checks are not named as
    // tests (`make ci`) — every command check passing.
    let all_checks_pass = !commands.is_empty() && commands.iter().all(|e| e.passed());
    if ran.iter().any(|c| c.ok)
        || test_checks.iter().any(|e| e.passed())
        || (test_checks.is_empty() && all_checks_pass)
    {
        return None;
    }
    let mut why = format!("claims the tests pass (\"{said}\")");
    if let Some(call) = ran.last() {
        why.push_str(&format!(
            "; the test run `{}` failed: {}",
            call.command.as_deref().unwrap_or_default(),
            call.said
        ));
    } else {
        why.push_str("; no test command ran in this attempt");
    }
    if let Some(check) = test_checks.first() {
        why.push_str(&format!(
            " and the check `{}` failed: {}",
            check.criterion,
            check.proof.as_deref().unwrap_or("no proof")
        ));
    }
    Some(why)
}

/// Why a claim to have run `command` (and that it `succeeded`) is unsupported, if it is.
pub(super) fn ran(
    command: &str,
    succeeded: bool,
    ground: &Ground<'_>,
    calls: &[Call],
) -> Option<String> {
    let (program, sub) = command_words(command).unwrap_or_else(|| {
        (
            command
                .split_whitespace()
                .next()
                .unwrap_or_default()
                .to_owned(),
            None,
        )
    });
    let matches = |text: &str| runs(text, &program, sub.as_deref());
    let runs: Vec<&Call> = calls
        .iter()
        .filter(|c| c.command.as_deref().is_some_and(matches))
        .collect();
    let checks: Vec<&Evidence> = ground
        .evidence
        .iter()
        .filter(|e| e.method.as_deref().is_some_and(matches))
        .collect();
    let ok = runs.iter().any(|c| c.ok) || checks.iter().any(|e| e.result == EvidenceResult::Pass);
    if (!succeeded && (!runs.is_empty() || !checks.is_empty())) || ok {
        return None;
    }
    Some(match runs.last() {
        Some(call) => format!("claims `{command}` succeeded; it failed: {}", call.said),
        None if !checks.is_empty() => format!(
            "claims `{command}` succeeded; the check running it failed: {}",
            checks[0].proof.as_deref().unwrap_or("no proof")
        ),
        None => format!("claims to have run `{command}`; no tool call or check ran it"),
    })
}
