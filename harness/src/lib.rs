//! The `harness` delegation runtime: hands a task to a delegate (a model, an agent CLI or a
//! script), checks the claimed work against ground truth with Starlark verifiers and hooks, and
//! re-prompts the same delegate with the reasons until the work is real or the budget is spent.
//!
//! ```no_run
//! use harness::{Verifier, DelegationResult};
//! use harness_builtins::{Capabilities, Engine, Limits, Sandbox, Surface, Workspace};
//! use std::sync::Arc;
//!
//! let sandbox = Arc::new(Sandbox::new(Surface::Verifier, Workspace::new(".")?,
//!     Capabilities::read_only(), Limits::default()));
//! let verifier = Verifier::compile(&Engine::new(), sandbox, "verify.star",
//!     "def run(result):\n    return fs.exists('hello.txt')\n", &serde_json::json!({}))?;
//! let result = DelegationResult::from_json("result.json",
//!     r#"{"id": "d-1", "response": "Done, I created hello.txt"}"#)?;
//! let (outcome, _logs) = verifier.verify_blocking(&result)?;
//! println!("verified: {}", outcome.verified);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod assembly;
pub mod batch;
mod cache;
mod checks;
mod config;
mod conversation;
mod decision;
pub mod delegate;
mod delegation;
mod error;
pub mod events;
mod gates;
#[cfg(test)]
mod golden;
mod guard;
pub mod integrity;
mod overrides;
mod pipeline;
mod plain;
mod policy;
mod project;
mod prompt;
mod ralph;
pub mod redact;
mod report;
mod retry;
mod runtime;
pub mod schema;
pub mod scope;
mod session;
mod shared;
mod spec;
pub mod telemetry;
mod tools;
mod tree;
mod turn;
mod verdict;
mod verifier;

pub use assembly::Assembler;
pub use checks::{
    BaseTests, Claim, REVIEW_TEMPLATE, REVIEW_TEMPLATE_VERSION, TestCounts, claims_rule,
    gaming_rule, review_template_sha256, shareable_evidence,
};
pub use conversation::{Message, ToolSpec, Usage};
pub use decision::OnExhausted;
pub use delegate::DelegateConfig;
pub use delegation::{DEFAULT_MAX_VERIFY_RETRIES, DEFAULT_STUCK_AFTER, Delegation};
pub use error::{Error, ErrorKind, Result};
pub use events::{EventRecord, Nobody, Observer, RunEvent};
pub use gates::checks::{CheckSpec, Flaky};
pub use gates::claims::ClaimsMode;
pub use gates::criteria::Criterion;
pub use gates::critic::{CriticSpec, CriticWhen, OnUnavailable};
pub use gates::gaming::GamingMode;
pub use gates::holdout::HoldoutSpec;
pub use gates::plan::PlanStep;
pub use gates::runner::{Runner, RunnerSetting};
pub use guard::{ReviewProbe, ReviewState};
pub use harness_hooks::{
    Changes, CriticOutcome, CriticReview, DelegateInfo, DelegationResult, Evidence, EvidenceResult,
    Request, ToolCall, ToolResult,
};
pub use overrides::Overrides;
pub use pipeline::Pipeline;
pub use policy::Policy;
pub use project::{CommandIsolation, OverridePolicy, PROJECT_POLICY, ProjectPolicy};
pub use redact::Redactor;
pub use report::{AttemptRecord, CarriedRun, Outcome, Report, ReportJson};
pub use retry::{RETRY_TEMPLATE, RETRY_TEMPLATE_VERSION, RetryContext, retry_template_sha256};
pub use runtime::Runtime;
pub use scope::{OnViolation, ScopeSpec};
pub use shared::{
    ChildEvent, ChildObserver, ChildRecorder, ChildSealer, RunStarted, StartRecorder,
    TraceIdReader, new_id,
};
pub use spec::{DEFAULT_MAX_TURNS, MAX_VERIFY_RETRIES};
pub use tools::{Tool, ToolOutput, Toolbox};
pub use tree::{DEFAULT_MAX_CHILDREN, DEFAULT_MAX_DEPTH, delegation_for};
pub use verdict::{Decision, Finding, Severity, Source, Verdict};
pub use verifier::{EMPTY_REASON, FALSE_REASON, Verifier, VerifyOutcome, VerifySource};
