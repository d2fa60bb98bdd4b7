//! Stage 0: the base collection ([`super::runner::Collection`]) — the tests of the untouched
//! workspace, listed by each check's and each holdout's runner before the delegate may act.

use std::sync::Arc;

use super::launch::Launcher;
use super::runner::{Collection, Found, find};
use crate::gates::checks::CheckSpec;

/// Starts the base collection for [`STAGES`](crate::pipeline::STAGES): when the delegate can
/// change the workspace and a check runs a runner with a list mode. It adds no stage; the
/// checks and the baseline wait on it.
///
/// # Errors
/// [`ErrorKind::Check`](crate::ErrorKind::Check) when the listing's private directories cannot
/// be made.
pub(crate) fn collect(
    m: &mut crate::checks::materials::Materials<'_>,
) -> crate::error::Result<Option<Box<dyn crate::checks::Check>>> {
    if !m.delegation.changes_files() {
        return Ok(None);
    }
    let root = m.workspace.root();
    let listed: Vec<(CheckSpec, Found)> = m
        .delegation
        .checks()
        .iter()
        .filter_map(|check| {
            let found = find(check.runner, &check.argv, root)?;
            found.list().is_some().then(|| (check.clone(), found))
        })
        .collect();
    let mut jobs: Vec<(CheckSpec, Found, Arc<Launcher>)> = Vec::new();
    if !listed.is_empty() {
        let launcher = Arc::new(Launcher::new(root, m.isolation, Vec::new(), true)?);
        jobs.extend(
            listed
                .into_iter()
                .map(|(check, found)| (check, found, Arc::clone(&launcher))),
        );
    }
    // The holdouts' tests too, each where it runs (its files visible, the workspace read-only).
    if !m.delegation.holdouts().is_empty() {
        let prepared = crate::checks::holdout::prepare(m.delegation.holdouts(), root, m.isolation)?;
        for holdout in &prepared {
            if let Some(found) = holdout.runner.clone().filter(|f| f.list().is_some()) {
                jobs.push((
                    holdout.spec.check.clone(),
                    found,
                    Arc::clone(&holdout.launcher),
                ));
            }
        }
        m.holdouts = Some(prepared);
    }
    if !jobs.is_empty() {
        m.collection = Some(Collection::start(jobs));
    }
    Ok(None)
}
