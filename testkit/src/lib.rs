//! Test fakes for `harness` (dev-only): one fake model server speaking the OpenAI protocol, one
//! OTLP receiver decoding real protobuf, one plain HTTP fixture server, and golden files.
//!
//! ```no_run
//! use harness_testkit::model::{ModelServer, answer};
//!
//! let server = ModelServer::start(|_, body| answer(body, "done"));
//! assert!(server.base_url().starts_with("http://127.0.0.1:"));
//! ```
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod golden;
pub mod model;
pub mod otlp;
mod serve;
pub mod web;
