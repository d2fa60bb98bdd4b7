//! Telemetry for the `harness` binary: the `tracing` subscriber, OpenTelemetry traces and
//! metrics exported over OTLP, and W3C trace-context propagation.
#![forbid(unsafe_code)]
#![warn(missing_docs)]
