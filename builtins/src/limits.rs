//! Resource budgets for one script evaluation.

use std::time::Duration;

/// The budgets a script runs under. Hitting any of them is an error of kind
/// [`ErrorKind::Limit`](crate::ErrorKind::Limit) naming the limit.
///
/// Starlark checks the step, time and heap budgets every ~1000 steps, and cannot interrupt a
/// builtin that is running, so every builtin that waits (`http`, `exec`) also caps its own wait at
/// the time left, and every builtin that reads (`fs.read`, `http` bodies, `exec` output) has its own
/// size cap.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Maximum steps (function calls plus loop iterations) per evaluation.
    pub max_steps: u64,
    /// Wall-clock budget per evaluation.
    pub timeout: Duration,
    /// Maximum Starlark call-stack depth.
    pub max_call_depth: usize,
    /// Maximum Starlark heap size in bytes.
    pub max_heap_bytes: usize,
    /// How deeply lists, tuples, dicts and structs may nest in a value that is returned,
    /// encoded (`json.encode`) or printed (`str`, `repr`, `print`, `log`).
    pub max_nesting_depth: usize,
    /// Largest file `fs.read` returns, in bytes.
    pub max_read_bytes: u64,
    /// Largest HTTP response body kept, in bytes; longer bodies are truncated.
    pub max_http_body_bytes: usize,
    /// Largest stdout or stderr kept from `exec.run`, in bytes each; the rest is discarded.
    pub max_exec_output_bytes: usize,
}

impl Limits {
    /// Every budget in one short line, for the keys of caches of scripts compiled under them.
    pub fn key(&self) -> String {
        let numbers = [
            self.max_steps,
            u64::try_from(self.timeout.as_nanos()).unwrap_or(u64::MAX),
            self.max_call_depth as u64,
            self.max_heap_bytes as u64,
            self.max_nesting_depth as u64,
            self.max_read_bytes,
            self.max_http_body_bytes as u64,
            self.max_exec_output_bytes as u64,
        ];
        let mut key = String::with_capacity(96);
        for n in numbers {
            key.push_str(&n.to_string());
            key.push(' ');
        }
        key
    }
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_steps: 10_000_000,
            timeout: Duration::from_secs(30),
            max_call_depth: 50,
            max_heap_bytes: 256 * 1024 * 1024,
            max_nesting_depth: 100,
            max_read_bytes: 16 * 1024 * 1024,
            max_http_body_bytes: 4 * 1024 * 1024,
            max_exec_output_bytes: 1024 * 1024,
        }
    }
}
