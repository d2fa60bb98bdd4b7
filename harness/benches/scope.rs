//! Scope snapshots and diffs (DESIGN §4.8) on a generated workspace, against `git status`.
//!
//! `cargo bench -p harness --bench scope` generates a git repository of `BENCH_SCOPE_FILES`
//! files (default 100,000) in 1,000 directories totalling about `BENCH_SCOPE_MB` MiB (default
//! 1,024) under `$TMPDIR`, commits it, then times, with warm caches, the median of
//! `BENCH_SCOPE_REPEAT` runs (default 7) of:
//!
//! - `git status --porcelain` (the index refreshed beforehand, so git too compares `lstat` only);
//! - a scope snapshot and the diff after 10 files under `src/` changed and 1 was added, with
//!   `allow` matching nothing (stat only: no contents kept), `src/**` (a tenth of the files may
//!   be kept) and no `allow` (every small file may be: 16 MiB of contents are read and kept, the
//!   smallest files first).
//!
//! The last configuration is the default one with the observation cache a journal keeps beside
//! it: the text of unchanged files is taken from the cache instead of read.
//!
//! `BENCH_SCOPE_DIR=PATH` generates the tree there once and reuses it (for a profiler).
//!
//! Memory: the bytes a snapshot holds (what its drop gives back, by a counting global
//! allocator), per entry.
//! Speed is measured here, never asserted in tests.

// Counting live bytes takes a global allocator, which is an `unsafe impl`; only this benchmark
// has one.
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicIsize, Ordering};
use std::time::{Duration, Instant};

use harness::scope::{Scope, ScopeSpec};

/// The system allocator, counting the bytes live.
struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);

// SAFETY: every call forwards to `System` with the caller's layout; the counter is a side note.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: the caller's contract is `System`'s.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: as above.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(
            new_size as isize - layout.size() as isize,
            Ordering::Relaxed,
        );
        // SAFETY: as above.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

fn env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn git(root: &Path, args: &[&str]) -> std::process::Output {
    let out = Command::new("git")
        .args([
            "-c",
            "user.name=bench",
            "-c",
            "user.email=bench@example.com",
        ])
        .args(args)
        .current_dir(root)
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// `files` files in 1,000 directories (a tenth under `src/`), `total` bytes in all: most are
/// text of 1–16 KiB, the rest of the bytes in a few large files.
fn generate(root: &Path, files: usize, total: u64) {
    let dirs = 1000.min(files);
    let large = 16.min(files / 100);
    let line = b"fn step(x: u64) -> u64 { x.wrapping_mul(6364136223846793005) }\n";
    let mut written = 0u64;
    for i in 0..files - large {
        let dir = i % dirs;
        let parent = if dir < dirs / 10 {
            root.join(format!("src/m{dir:03}"))
        } else {
            root.join(format!("d{dir:03}"))
        };
        if i < dirs {
            std::fs::create_dir_all(&parent).expect("mkdir");
        }
        let size = 1024 + (i * 7919) % (15 * 1024);
        let text: Vec<u8> = line.iter().copied().cycle().take(size).collect();
        std::fs::write(parent.join(format!("f{i:06}.rs")), &text).expect("write");
        written += size as u64;
    }
    if large > 0 {
        let rest = total.saturating_sub(written) / large as u64;
        let chunk = vec![0x5au8; 1 << 20];
        std::fs::create_dir_all(root.join("assets")).expect("mkdir");
        for i in 0..large {
            use std::io::Write as _;
            let mut file =
                std::fs::File::create(root.join(format!("assets/blob{i:02}.bin"))).expect("create");
            let mut left = rest;
            while left > 0 {
                let n = left.min(chunk.len() as u64) as usize;
                file.write_all(&chunk[..n]).expect("write");
                left -= n as u64;
            }
            written += rest;
        }
    }
    eprintln!(
        "generated {files} files, {:.0} MiB, in {}",
        written as f64 / (1 << 20) as f64,
        root.display()
    );
}

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort_unstable();
    times[times.len() / 2]
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1e3)
}

fn main() {
    let files = env("BENCH_SCOPE_FILES", 100_000);
    let total = env("BENCH_SCOPE_MB", 1024) as u64 * (1 << 20);
    let repeat = env("BENCH_SCOPE_REPEAT", 7).max(1);
    // BENCH_SCOPE_DIR keeps the tree (made there when missing) for the next run or a profiler.
    let kept = std::env::var_os("BENCH_SCOPE_DIR").map(std::path::PathBuf::from);
    let tmp = match &kept {
        Some(_) => None,
        None => Some(
            tempfile::Builder::new()
                .prefix("harness-scope-bench")
                .tempdir()
                .expect("temp dir"),
        ),
    };
    let root = kept
        .as_deref()
        .or(tmp.as_ref().map(tempfile::TempDir::path))
        .expect("a root");
    if root.join(".git").exists() {
        eprintln!("reusing the tree in {}", root.display());
    } else {
        let started = Instant::now();
        std::fs::create_dir_all(root).expect("mkdir");
        generate(root, files, total);
        git(root, &["init", "-q"]);
        git(root, &["add", "-A"]);
        git(root, &["commit", "-qm", "bench"]);
        eprintln!("set up in {:.0} s", started.elapsed().as_secs_f64());
    }
    // Refresh the index (and warm the page cache) so git compares `lstat` results only.
    git(root, &["status", "--porcelain"]);

    // `git status` is timed in every round, next to the walks, so the machine's noise falls on
    // both alike.
    let mut git_status = Vec::new();
    let mut measure = |allow: Vec<String>, cache: Option<&Path>| {
        let spec = ScopeSpec {
            allow,
            ..ScopeSpec::default()
        };
        let scope = Scope::compile(&spec, root, "bench")
            .expect("compiles")
            .with_cache(cache.map(Path::to_path_buf));
        if cache.is_some() {
            // The delegation before this one left the cache.
            scope.snapshot(&|_| false, &std::sync::Arc::default());
        }
        let mut cached = 0;
        let mut snapshots = Vec::new();
        let mut walks = Vec::new();
        let mut diffs = Vec::new();
        let mut bytes = 0isize;
        let mut entries = 0;
        for round in 0..repeat {
            let t = Instant::now();
            git(root, &["status", "--porcelain"]);
            git_status.push(t.elapsed());
            // The walk is what a delegation waits for before the delegate may act; the text is
            // read after it, beside the delegate's first turn.
            let t = Instant::now();
            let mut snapshot = scope.walk_baseline(&std::sync::Arc::default());
            walks.push(t.elapsed());
            scope.keep_contents(&mut snapshot, &|_| false);
            snapshots.push(t.elapsed());
            entries = snapshot.entries();
            cached = snapshot.cached();
            if round == 0 {
                // What a snapshot holds: the bytes its drop gives back.
                let spare = scope.snapshot(&|_| false, &std::sync::Arc::default());
                let with = LIVE.load(Ordering::Relaxed);
                drop(spare);
                bytes = with - LIVE.load(Ordering::Relaxed);
            }
            // The delegate's work: ten files changed under src/, one added.
            for i in 0..10 {
                let dir = i % 100;
                let path = root.join(format!("src/m{dir:03}/f{i:06}.rs"));
                let mut text = std::fs::read(&path).expect("read");
                text.extend_from_slice(format!("// round {round}\n").as_bytes());
                std::fs::write(&path, text).expect("write");
            }
            std::fs::write(root.join(format!("src/new{round}.rs")), "fn new() {}\n")
                .expect("write");
            let t = Instant::now();
            let diff = scope.diff(&snapshot);
            diffs.push(t.elapsed());
            assert_eq!(diff.changes.modified.len(), 10, "{:?}", diff.changes);
            assert_eq!(diff.violations.is_empty(), scope.refuses("src/x").is_none());
            assert_eq!(diff.changes.added.len(), 1, "{:?}", diff.changes);
            std::fs::remove_file(root.join(format!("src/new{round}.rs"))).expect("rm");
        }
        (
            median(snapshots),
            median(walks),
            median(diffs),
            bytes,
            entries,
            cached,
        )
    };
    // `allow` decides which files' contents may be kept: none, a tenth of the tree, all of it.
    let (stat_snap, stat_walk, stat_diff, stat_bytes, entries, _) =
        measure(vec!["nothing/**".to_owned()], None);
    let (src_snap, src_walk, src_diff, src_bytes, _, _) = measure(vec!["src/**".to_owned()], None);
    let (kept_snap, kept_walk, kept_diff, kept_bytes, _, _) = measure(Vec::new(), None);
    // The same with the observation cache a journal keeps beside it (`runs.db-observe`).
    let state = tempfile::tempdir().expect("temp dir");
    let cache = harness::scope::cache::path_of(&state.path().join("runs.db"));
    let (cache_snap, cache_walk, cache_diff, cache_bytes, _, cached) =
        measure(Vec::new(), Some(&cache));

    let git = median(git_status);
    println!("workspace: {entries} entries (files and directories), {files} files");
    println!("git status --porcelain:          {}", ms(git));
    for (name, snap, walk, diff, bytes) in [
        (
            "allow nothing/** (stat only)",
            stat_snap,
            stat_walk,
            stat_diff,
            stat_bytes,
        ),
        (
            "allow src/** (a tenth kept)",
            src_snap,
            src_walk,
            src_diff,
            src_bytes,
        ),
        (
            "no allow (all eligible)",
            kept_snap,
            kept_walk,
            kept_diff,
            kept_bytes,
        ),
        (
            "no allow, the cache beside",
            cache_snap,
            cache_walk,
            cache_diff,
            cache_bytes,
        ),
    ] {
        println!(
            "scope, {name:29} snapshot {} (walk {}), diff {}, snapshot+diff {} = {:.2}x git status, \
             walk+diff {:.2}x, diff {:.2}x; {:.0} B per entry ({:.1} MiB)",
            ms(snap),
            ms(walk),
            ms(diff),
            ms(snap + diff),
            (snap + diff).as_secs_f64() / git.as_secs_f64(),
            (walk + diff).as_secs_f64() / git.as_secs_f64(),
            diff.as_secs_f64() / git.as_secs_f64(),
            bytes as f64 / entries as f64,
            bytes as f64 / (1 << 20) as f64
        );
    }
    println!(
        "with the cache: the text of {cached} files taken from it ({} KiB on disk)",
        std::fs::metadata(&cache).map_or(0, |m| m.len() / 1024)
    );
}
