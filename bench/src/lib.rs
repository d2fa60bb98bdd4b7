//! Benchmark helpers for harness: the pieces `bench/run.sh` drives.
//!
//! - `fake-openai`: an OpenAI-compatible chat-completions server on 127.0.0.1 that answers a first
//!   attempt with `{"name": "widget"}` and a retry with `{"name": "widget", "id": 42}`, counts
//!   requests, and doubles as an OTLP/HTTP sink.
//! - `bare-reqwest`: the floor, the same requests sent by a plain reqwest loop.
//!
//! ```text
//! cargo build --release -p harness-bench
//! target/release/fake-openai 0          # prints http://127.0.0.1:PORT
//! ```
#![forbid(unsafe_code)]
#![warn(missing_docs)]

use std::time::Duration;

/// CPU time (user + system) and peak resident set of the calling process, read from `/proc`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ProcessUsage {
    /// User plus system CPU time.
    pub cpu: Duration,
    /// Peak resident set size in KiB (`VmHWM`).
    pub peak_rss_kib: u64,
}

/// Reads this process's CPU time and peak RSS; `None` where `/proc` is unavailable.
pub fn process_usage() -> Option<ProcessUsage> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the parenthesised command name; utime and stime are fields 14 and 15.
    let rest = stat.get(stat.rfind(')')? + 2..)?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    // Linux reports these in USER_HZ, which is 100 on every mainstream architecture.
    let ticks = utime + stime;
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let peak_rss_kib = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())?;
    Some(ProcessUsage {
        cpu: Duration::from_millis(ticks * 10),
        peak_rss_kib,
    })
}
