//! The sandboxed Starlark engine of `harness`: scripts parsed once and called many times under
//! step, time, stack and heap limits, with builtin modules (`fs`, `http`, `json`, `re`, `hash`,
//! `time`, `env`, `exec`, `log`) gated by per-surface capabilities.
//!
//! ```no_run
//! use harness_builtins::{Capabilities, Engine, Limits, Sandbox, Script, Surface, Workspace};
//!
//! let engine = Engine::new();
//! let sandbox = Sandbox::new(
//!     Surface::Verifier,
//!     Workspace::new(".")?,
//!     Capabilities::read_only(),
//!     Limits::default(),
//! );
//! let script = Script::compile(&engine, &sandbox, "check.star",
//!     "def run(result):\n    return fs.exists(result['path'])\n", &[])?;
//! let out = script.call(&sandbox, "run", &[&serde_json::json!({"path": "Cargo.toml"})])?;
//! assert_eq!(out.value, serde_json::json!(true));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![deny(unsafe_code)]
#![warn(missing_docs)]

mod capabilities;
pub mod citation;
#[allow(unsafe_code)] // see the module's docs
mod cpu;
mod engine;
mod error;
#[allow(unsafe_code)] // see the module's docs
mod host;
mod intercept;
mod json_value;
mod limits;
mod modules;
mod nesting;
mod reaper;
mod sandbox;
mod tls;
mod workspace;

pub use capabilities::{Capabilities, HostAllowList, HostPatternError, Surface};
pub use engine::{CallOutput, Engine, INLINE_BUDGET, Script, TestOutcome};
pub use error::{Error, ErrorKind, Limit, Location};
pub use host::interceptor;
pub use intercept::{HttpReply, Interceptor, ProgramReply};
pub use limits::Limits;
pub use modules::{
    Capped, Example, KEPT_END_BYTES, Launch, ProcessGroup, ProgramRun, StopOn, bubblewrap,
    bubblewrap_works, examples, find_program, hex, http_client_builder, read_capped, run_program,
    sha256_hex, unhex,
};
pub use reaper::become_subreaper;
pub use sandbox::{Isolation, Sandbox};
pub use workspace::{
    MAX_POLICY_BYTES, MAX_SCRIPT_BYTES, list_beneath, open_read_beneath, read_beneath, read_named,
};
pub use workspace::{PathError, Workspace, Workspaces, create_beneath, open_regular, read_regular};

/// At most `max` characters of `text`, with `…` when any were dropped (for messages).
pub fn shorten(text: &str, max: usize) -> String {
    let mut out: String = text.chars().take(max).collect();
    if out.len() < text.len() {
        out.push('…');
    }
    out
}

/// Re-exported so hosts extending the globals (`Engine::with_extension`) use the same starlark.
pub use starlark;
