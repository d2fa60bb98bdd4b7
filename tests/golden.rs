//! Golden files of what scripts read: `harness run --json` of the quickstart and
//! `harness report --json` over its runs, compared whole after the values that differ from run to
//! run (ids, durations, times, paths) are replaced by placeholders. Regenerate with
//! `HARNESS_BLESS=1 cargo test --test tests golden`, then read the diff: a changed key or value
//! is a change every script reading it sees.

use std::path::PathBuf;

use serde_json::Value;

use crate::util::{TempDir, copy_tree, harness, repo_root};

/// Compares `actual` (pretty JSON) with `tests/golden/NAME`, or writes it under `HARNESS_BLESS`.
fn assert_golden(name: &str, actual: &Value) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(name);
    let text = serde_json::to_string_pretty(actual).expect("JSON") + "\n";
    harness_testkit::golden::assert_golden(
        &path,
        &text,
        "HARNESS_BLESS=1 cargo test --test tests golden",
    );
}

/// Replaces what differs between runs: delegation ids, durations and times, absolute paths
/// under `root`.
fn normalise(value: &mut Value, root: &str) {
    match value {
        Value::Object(map) => {
            for (key, item) in map.iter_mut() {
                let timing = key.ends_with("_ms") || key == "at" || key == "started_at";
                if timing && !item.is_null() && !item.is_object() {
                    *item = Value::String(format!("<{key}>"));
                } else {
                    normalise(item, root);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|i| normalise(i, root)),
        Value::String(text) => {
            let mut out = text.replace(root, "<root>");
            while let Some(start) = out.find("d-").filter(|&i| {
                out[i + 2..].len() >= 16
                    && out[i + 2..i + 18].bytes().all(|b| b.is_ascii_hexdigit())
            }) {
                out.replace_range(start..start + 18, "d-<id>");
            }
            *text = out;
        }
        _ => {}
    }
}

#[test]
fn run_json_of_the_quickstart_and_the_report_over_it() {
    let dir = TempDir::new();
    copy_tree(&repo_root().join("examples/quickstart"), &dir.path());
    let _ = std::fs::remove_file(dir.join("workspace/hello.txt"));
    let journal = dir.join("runs.db");
    let root = dir
        .path()
        .canonicalize()
        .expect("canonical")
        .display()
        .to_string();
    let run = || {
        harness(["run", "--json", "delegation.yaml", "--journal"])
            .args([&journal])
            .current_dir(dir.path())
            .run()
    };
    // It lies, is caught and passes on attempt 2; run again, hello.txt is there: attempt 1.
    let first = run();
    first.expect_code(0);
    run().expect_code(0);
    let mut report = first.json();
    report["journal"] = Value::String("<journal>".to_owned());
    normalise(&mut report, &root);
    assert_golden("quickstart.run.json", &report);

    let out = harness(["report", "--json", "--journal"])
        .args([&journal])
        .current_dir(dir.path())
        .run();
    out.expect_code(0);
    let mut dashboard = out.json();
    dashboard["journal"] = Value::String("<journal>".to_owned());
    normalise(&mut dashboard, &root);
    // Durations are spreads (p50, p95, max): placeholders too.
    // So are the stages' times, and so their order (slowest first): listed by name.
    let untimed = |kind: &mut Value| {
        kind["duration_ms"] = Value::String("<duration_ms>".to_owned());
        if let Some(stages) = kind["stages"].as_array_mut() {
            for stage in stages.iter_mut() {
                stage["time_us"] = Value::String("<time_us>".to_owned());
                stage["total_us"] = Value::String("<total_us>".to_owned());
            }
            stages.sort_by(|a, b| a["stage"].as_str().cmp(&b["stage"].as_str()));
        }
    };
    untimed(&mut dashboard["total"]);
    for kind in dashboard["kinds"].as_array_mut().into_iter().flatten() {
        untimed(kind);
    }
    // Which span of time a run fell in depends on the clock: the timeline's spans are summed
    // into one (the count per outcome is what must not change).
    for kind in dashboard["timeline"]["kinds"]
        .as_array_mut()
        .into_iter()
        .flatten()
    {
        let mut sum = [0u64; 6];
        for bucket in kind["buckets"].as_array().into_iter().flatten() {
            for (total, n) in sum.iter_mut().zip(bucket.as_array().into_iter().flatten()) {
                *total += n.as_u64().unwrap_or(0);
            }
        }
        kind["buckets"] = serde_json::json!([sum]);
    }
    assert_golden("quickstart.report.json", &dashboard);
}
