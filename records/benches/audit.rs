//! The integrity audit of a large recorded run (DESIGN §4.13): 10,000 hash-chained events and an
//! answer with 1,000 citations into a 100 MiB workspace (100 files of 1 MiB, ~16,000 lines each).
//!
//! `cargo bench -p harness-records --bench audit` builds the run as a journal record, exports it
//! (`harness runs export`'s code), then times `audit` (the median of `BENCH_AUDIT_REPEAT`, default
//! 5, after one warm-up that fills the page cache) and measures its peak heap with a counting
//! allocator. `BENCH_AUDIT_KEEP=DIR` keeps the export and its workspace to time `harness audit`
//! end to end. Speed is measured here, never asserted in tests.

// Measuring the peak heap takes a global allocator, which is an `unsafe impl`; only this
// benchmark has one.
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};
use std::time::{Duration, Instant, SystemTime};

use harness::Usage;
use harness_records::{AuditOptions, Record, RecordedAttempt, audit, export};
use serde_json::json;
use sha2::{Digest as _, Sha256};

struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);
static PEAK: AtomicIsize = AtomicIsize::new(0);

fn grew(by: isize) {
    let now = LIVE.fetch_add(by, Ordering::Relaxed) + by;
    PEAK.fetch_max(now, Ordering::Relaxed);
}

// SAFETY: every call forwards to `System` with the caller's layout; the counters are a side note.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        grew(layout.size() as isize);
        // SAFETY: the caller's contract is `System`'s.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: as above.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        grew(new_size as isize - layout.size() as isize);
        // SAFETY: as above.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

const FILES: usize = 100;
const LINE: &str =
    "let total = items.iter().map(|item| item.price * item.quantity).sum::<u64>();\n";

fn main() {
    let repeat: usize = std::env::var("BENCH_AUDIT_REPEAT")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5)
        .max(1);
    let dir = tempfile::tempdir().expect("temp dir");
    let lines_per_file = (1 << 20) / LINE.len();
    let text = LINE.repeat(lines_per_file);
    for i in 0..FILES {
        std::fs::write(dir.path().join(format!("f{i:03}.rs")), &text).expect("write");
    }
    let line_hash = format!("{:x}", Sha256::digest(LINE.as_bytes()));
    // 1,000 claims, each citing one line somewhere in one of the files.
    let answer: String = (0..1000)
        .map(|i| {
            let line = 1 + (i * 7919) % lines_per_file;
            format!(
                "Claim {i} [[cite:f{:03}.rs:L{line}-L{line}#{}]]\n",
                i % FILES,
                &line_hash[..16]
            )
        })
        .collect();
    let events: Vec<_> = (0..10_000u64)
        .map(|seq| {
            let kind = match seq {
                0 => "DelegationStarted",
                9_999 => "DelegationCompleted",
                _ => "CheckCompleted",
            };
            json!({"run_id": "d-bench", "attempt": 0, "seq": seq, "at": "2026-11-25T12:00:00.000Z",
                   "type": kind, "check_name": format!("check-{seq}"), "passed": true,
                   "exit_code": 0, "duration_ms": 3, "required": true, "citations": seq == 0})
        })
        .collect();
    let record = Record {
        id: "d-bench".to_owned(),
        started_at: SystemTime::now(),
        duration: Duration::from_secs(1),
        delegate_kind: "scripted".to_owned(),
        model: None,
        outcome: "passed".to_owned(),
        error_kind: None,
        error_message: None,
        attempts: vec![RecordedAttempt {
            attempt: 0,
            passed: Some(true),
            reasons: Vec::new(),
            duration: Duration::from_secs(1),
            usage: Usage::default(),
            result: Some(json!({"id": "d-bench", "attempt": 0, "response": answer,
                                "tool_calls": [], "tool_results": []})),
            verdict: Some(harness::Verdict {
                attempt: 0,
                decision: harness::Decision::Pass,
                findings: Vec::new(),
                evidence: Vec::new(),
                critic: None,
                logs: Vec::new(),
                stage_us: std::collections::BTreeMap::new(),
            }),
            unread_verdict: None,
            retry_prompt: None,
            diff: Vec::new(),
        }],
        usage: Usage::default(),
        trace_id: None,
        retry_template_version: "retry-v3".to_owned(),
        source: None,
        workdir: Some(dir.path().display().to_string()),
        request: None,
        warnings: Vec::new(),
        events,
        decision: None,
        seal: None,
        parent: None,
    };
    let document = export(&record);
    drop(record);
    let warm = audit(&document, &AuditOptions::default());
    assert!(warm.valid(), "{:?}", warm.failures.first());
    assert_eq!(warm.metrics["citations"], json!(1000));
    let mut times = Vec::new();
    let mut peak = 0;
    for _ in 0..repeat {
        let base = LIVE.load(Ordering::Relaxed);
        PEAK.store(base, Ordering::Relaxed);
        let clock = Instant::now();
        let report = audit(&document, &AuditOptions::default());
        times.push(clock.elapsed());
        peak = peak.max(PEAK.load(Ordering::Relaxed) - base);
        assert!(report.valid());
    }
    times.sort_unstable();
    let document_bytes = document.to_string().len();
    println!(
        "audit of 10,000 events + 1,000 citations over {FILES} MiB ({} lines per file; document {:.1} MiB): median {:.0} ms (min {:.0} ms), peak heap during the audit {:.0} KiB (besides the document)",
        lines_per_file,
        document_bytes as f64 / (1 << 20) as f64,
        times[times.len() / 2].as_secs_f64() * 1e3,
        times[0].as_secs_f64() * 1e3,
        peak as f64 / 1024.0
    );
    // BENCH_AUDIT_KEEP=DIR keeps the workspace and the export there, to time `harness audit`.
    if let Some(keep) = std::env::var_os("BENCH_AUDIT_KEEP") {
        let keep = std::path::PathBuf::from(keep);
        std::fs::create_dir_all(&keep).expect("mkdir");
        std::fs::write(keep.join("run.json"), document.to_string()).expect("write");
        let workspace = dir.keep();
        println!(
            "kept: {} (harness audit {} --workdir {})",
            keep.join("run.json").display(),
            keep.join("run.json").display(),
            workspace.display()
        );
    }
}
