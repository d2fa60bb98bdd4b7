//! The run journal of `harness`: every delegation recorded in SQLite, read back for `runs` and
//! the failure-mode dashboard.
#![forbid(unsafe_code)]
#![warn(missing_docs)]
