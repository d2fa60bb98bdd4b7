//! Policy-as-code hooks for `harness`: Markdown files whose YAML front matter names an event and
//! whose Starlark `handle(event, payload)` allows, blocks or modifies what passes through it.
//!
//! ```no_run
//! use std::sync::Arc;
//! use harness_builtins::{Capabilities, Limits, Sandbox, Surface, Workspace};
//! use harness_hooks::{Event, HookSet};
//!
//! let sandbox = Arc::new(Sandbox::new(Surface::Hook, Workspace::new(".")?,
//!     Capabilities::read_only(), Limits::default()));
//! let hooks = HookSet::load(&harness_hooks::engine(), sandbox, &[".harness/hooks".into()])
//!     .map_err(|problems| format!("{} problems", problems.len()))?;
//! let call = serde_json::json!({"id": "call_1", "name": "write_file",
//!     "arguments": {"path": ".git/config", "content": ""}});
//! let dispatch = hooks.dispatch(Event::ToolPre, call, &["write_file"])?;
//! if let Some(block) = dispatch.blocked {
//!     println!("blocked by {}: {}", block.hook, block.reason);
//! }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod decision;
mod dispatcher;
mod event;
mod evidence;
mod hook;
mod payload;

pub use decision::{Action, Decision, merge};
pub use dispatcher::{Dispatch, HookError, HookRun, HookSet, Resume, SPAN_HOOK, Step, engine};
pub use event::Event;
pub use evidence::{CriticOutcome, CriticReview, Evidence, EvidenceResult};
pub use hook::{Hook, Matcher, Problem};
pub use payload::{Changes, DelegateInfo, DelegationResult, Request, ToolCall, ToolResult};
