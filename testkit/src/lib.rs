//! Test fakes for `harness` (dev-only): one fake model server speaking the OpenAI protocol, one
//! OTLP receiver decoding real protobuf, and shared fixtures.
#![forbid(unsafe_code)]
#![warn(missing_docs)]
