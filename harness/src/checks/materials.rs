//! What every stage is built from ([`Materials`]), and the shape of a stage's builder.

use super::Check;
use crate::delegate::Delegate;
use crate::delegation::Delegation;
use crate::error::Result;
use crate::policy::Policy;
use crate::tools::Toolbox;
use crate::verifier::Verifier;
use harness_builtins::Workspace;

/// What the stages of one delegation are built from: what the session compiled and loaded for
/// it, and what earlier stages leave for later ones (observation's baseline). Every stage is
/// built from this one value by its entry in [`STAGES`](crate::pipeline::STAGES).
pub(crate) struct Materials<'a> {
    /// The delegation, as `delegation.pre` hooks left it.
    pub(crate) delegation: &'a Delegation,
    /// Its workspace.
    pub(crate) workspace: &'a Workspace,
    /// The inline verifier, compiled (taken by its stage).
    pub(crate) verifier: Option<Verifier>,
    /// The hooks, loaded.
    pub(crate) policy: Option<&'a Policy>,
    /// The delegate's kind and model, matched by hooks' `delegates:` globs.
    pub(crate) names: &'a [String],
    /// The critic's delegate and its read-only tools, when the delegation has a critic that
    /// reviews (not `when: never`); taken by its stage.
    pub(crate) critic: Option<(Box<dyn Delegate>, Toolbox)>,
    /// The gate inputs (`protect`, or its default).
    pub(crate) gate: std::sync::Arc<crate::integrity::GateInputs>,
    /// The sandbox the checks run in; `None`: unconfined.
    pub(crate) isolation: Option<&'a harness_builtins::Isolation>,
    /// The workspace's baseline as it is being taken (left by observation; `None` when the
    /// workspace is not observed or the delegate cannot change it).
    pub(crate) baseline: Option<crate::checks::Baseline>,
    /// True when observation runs (`observe:` is not false).
    pub(crate) observed: bool,
    /// The base collection (the untouched workspace's tests, by the checks' runners), when one
    /// was started: the baseline and the checks wait on it.
    pub(crate) collection: Option<crate::checks::runner::Collection>,
    /// The holdouts, prepared by the base collection (their bases are listed with the checks').
    pub(crate) holdouts: Option<Vec<crate::checks::holdout::Prepared>>,
    /// What building the stages found worth telling the caller.
    pub(crate) warnings: Vec<String>,
}

/// Builds one stage from the materials: `None` when the delegation does not ask for it.
pub(crate) type BuildStage = fn(&mut Materials<'_>) -> Result<Option<Box<dyn Check>>>;
