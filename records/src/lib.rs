//! The run records of `harness`: the run journal (every delegation, whole, in SQLite), the one
//! rule that finds it, the batch writer that records from async workers without blocking them,
//! and the failure-mode dashboard computed from it with its text and HTML renderers.
//!
//! ```no_run
//! use harness_records::{Filter, Journal, locate};
//!
//! let found = locate(None)?; // --journal, HARNESS_JOURNAL, .harness/runs.db upward, ./.harness/runs.db
//! let journal = Journal::open_read_only(&found.path)?;
//! for record in journal.list(&Filter::default())? {
//!     println!("{} {}", record.id, record.outcome);
//! }
//! # Ok::<(), harness_records::Error>(())
//! ```
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod attest;
mod audit;
mod authority;
mod canon;
mod dashboard;
mod error;
mod export;
mod journal;
mod locate;
mod sarif;
mod spend;
mod writer;
mod written;

pub use attest::{
    Attesting, Beside, ENVELOPE_SCHEMA, PAYLOAD_TYPE, PREDICATE_TYPE, STATEMENT_TYPE,
    audit_envelope, document_bytes, dsse_key_id, envelope, is_envelope, pae, statement,
    test_result,
};
pub use audit::{AuditFailure, AuditOptions, VerificationReport, audit};
pub use authority::{
    AuditCheck, Broken, Override, OverrideRequest, OverrideType, Pending, apply_override,
    review_state, review_status, reviewed_json,
};
pub use canon::{GENESIS, canonical};
pub use dashboard::{
    CheckCount, Dashboard, ErrorCount, HookCount, KindStats, ReasonCount, RootStats, Spread,
    StageStats, by_root, escape_html, human_us, normalise,
};
pub use ed25519_dalek::{SigningKey, VerifyingKey};
pub use error::{Error, ErrorKind, Result};
pub use export::{
    AttemptPart, Child, DelegatePart, Event, EvidenceFile, Exported, Json, Plan, RUN_SCHEMA,
    RUN_SCHEMA_FILE, RunDocument, RunError, RunPart, Signature, Tokens, completion_seal, export,
    run_schema, seal, sign, signing_key, verifying_key,
};
pub use journal::{
    Filter, Journal, Record, RecordMeta, RecordedAttempt, SCHEMA_VERSION, Started, TreeNode,
};
pub use locate::{DEFAULT_JOURNAL, Found, JOURNAL_ENV, Located, locate, locate_from};
pub use sarif::{SARIF_SCHEMA, SARIF_VERSION, WORKSPACE_BASE, sarif};
pub use spend::{AttemptSpend, ChildSpend, Cost, Spend};
pub use writer::{JournalWriter, Written};
pub use written::seal_of;
