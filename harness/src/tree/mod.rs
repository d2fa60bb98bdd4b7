//! Delegation trees (DESIGN §9): the `delegate` tool. A model or scripted delegate offered
//! `delegate` hands a sub-task to a child delegation — its own Ralph loop, checks, verdict and
//! record, with `parent_id` naming the parent — and reads back the child's deliverable AND its
//! verdict as the tool result. A failed child is information for the parent, never the parent's
//! error.
//!
//! What bounds a tree: `limits.max_depth` (nesting), `limits.max_children` (children running at
//! once), and the parent's own budgets (a child gets at most the time and tokens the parent has
//! left, shared among the calls of one turn). A child that can change files works in a copy of
//! its parent's workspace ([`isolate`]) and its changes are applied to the parent's when it ends
//! verified, in call order; the others run in the parent's workspace. All run side by side, up
//! to `limits.max_children`. Each child runs
//! as a task of its own, so a parent that is cancelled or times out cancels its children, and
//! every child is recorded however it ended.
//!
//! [`profile`] is the configuration, which the delegation file and the project policy read;
//! [`family`] is the running, which the loop uses.

pub(crate) mod family;
pub(crate) mod isolate;
pub(crate) mod place;
pub(crate) mod profile;

pub use family::delegation_for;
pub use profile::{DEFAULT_MAX_CHILDREN, DEFAULT_MAX_DEPTH};
