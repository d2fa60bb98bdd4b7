//! The dashboard as a plain-text table for a terminal (`harness report`).

use std::fmt::Write as _;

use super::{Dashboard, KindStats, TOP_IN_TABLE, human_ms, human_us, percent};

impl Dashboard {
    /// Returns the report as a plain-text table for a terminal.
    pub fn to_table(&self) -> String {
        let mut out = String::new();
        if self.total.delegations == 0 {
            out.push_str("no delegations recorded\n");
            return out;
        }
        let header = [
            "KIND",
            "RUNS",
            "PASS RATE",
            "PASS@1/2/..",
            "EXHAUSTED",
            "BROKEN",
            "BLOCKED",
            "OTHER ERR",
            "SKIPPED",
            "ATTEMPTS p50/p95",
            "DURATION p50/p95",
        ];
        let mut rows: Vec<Vec<String>> = vec![header.iter().map(|h| (*h).to_owned()).collect()];
        let mut kinds: Vec<&KindStats> = self.kinds.iter().collect();
        if self.kinds.len() > 1 {
            kinds.push(&self.total);
        }
        for stats in &kinds {
            rows.push(vec![
                stats.kind.clone(),
                stats.delegations.to_string(),
                stats.pass_rate().map_or_else(|| "-".to_owned(), percent),
                stats
                    .pass_at_attempt
                    .iter()
                    .map(usize::to_string)
                    .collect::<Vec<_>>()
                    .join("/"),
                stats.exhausted.to_string(),
                stats.broken_policy.to_string(),
                stats.blocked.to_string(),
                stats.other_errors.to_string(),
                stats.skipped.to_string(),
                format!("{}/{}", stats.attempts.p50, stats.attempts.p95),
                format!(
                    "{}/{}",
                    human_ms(stats.duration_ms.p50),
                    human_ms(stats.duration_ms.p95)
                ),
            ]);
        }
        out.push_str(&aligned(&rows));
        stages(&mut out, &self.total);
        for stats in &self.kinds {
            details(&mut out, stats);
        }
        out
    }
}

/// The time each pipeline stage took, over every kind: per attempt it judged and in all.
fn stages(out: &mut String, total: &KindStats) {
    if total.stages.is_empty() {
        return;
    }
    out.push_str(
        "
time per stage (per attempt judged p50 / p95 / max, and in all):
",
    );
    let mut rows = vec![
        ["STAGE", "ATTEMPTS", "p50", "p95", "max", "IN ALL"]
            .map(str::to_owned)
            .to_vec(),
    ];
    for stage in &total.stages {
        rows.push(vec![
            format!("  {}", stage.stage),
            stage.attempts.to_string(),
            human_us(stage.time_us.p50),
            human_us(stage.time_us.p95),
            human_us(stage.time_us.max),
            human_us(stage.total_us),
        ]);
    }
    rows[0][0] = format!("  {}", rows[0][0]);
    out.push_str(&aligned(&rows));
}

/// `rows` as text columns: the first left-aligned, the rest right-aligned, two spaces apart.
fn aligned(rows: &[Vec<String>]) -> String {
    let columns = rows.first().map_or(0, Vec::len);
    let widths: Vec<usize> = (0..columns)
        .map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for row in rows {
        let mut line = String::new();
        for (c, cell) in row.iter().enumerate() {
            let pad = widths[c] - cell.chars().count();
            if c == 0 {
                line.push_str(cell);
                line.push_str(&" ".repeat(pad));
            } else {
                line.push_str("  ");
                line.push_str(&" ".repeat(pad));
                line.push_str(cell);
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// One kind's details under the table: authority, integrity, and the top reasons, hooks,
/// checks and errors; nothing when it has none.
fn details(out: &mut String, stats: &KindStats) {
    let authority = stats.authority_line();
    let integrity = stats.integrity.line();
    if stats.top_reasons.is_empty()
        && stats.top_hooks.is_empty()
        && stats.top_checks.is_empty()
        && stats.top_errors.is_empty()
        && authority.is_none()
        && integrity.is_none()
    {
        return;
    }
    let _ = writeln!(out, "\n{}:", stats.kind);
    if let Some(line) = authority {
        let _ = writeln!(out, "  {line}");
    }
    if let Some(line) = integrity {
        let _ = writeln!(out, "  {line}");
        for file in stats.integrity.tampered_files.iter().take(TOP_IN_TABLE) {
            let _ = writeln!(out, "  {:>5}  tampered: {}", file.count, file.check);
        }
        for (rule, count) in &stats.integrity.gaming {
            let _ = writeln!(out, "  {count:>5}  gaming: {rule}");
        }
        for (name, count) in &stats.integrity.holdout_failures {
            let _ = writeln!(out, "  {count:>5}  holdout failed: {name}");
        }
        for check in stats.integrity.flaky_checks.iter().take(TOP_IN_TABLE) {
            let _ = writeln!(out, "  {:>5}  flaky: {}", check.count, check.check);
        }
    }
    if !stats.top_reasons.is_empty() {
        out.push_str("  top failure reasons:\n");
        for r in stats.top_reasons.iter().take(TOP_IN_TABLE) {
            let _ = writeln!(out, "  {:>5}  [{}] {}", r.count, r.source, r.reason);
        }
    }
    if !stats.top_hooks.is_empty() {
        out.push_str("  top failing hooks:\n");
        for h in stats.top_hooks.iter().take(TOP_IN_TABLE) {
            let _ = writeln!(out, "  {:>5}  {}", h.count, h.hook);
        }
    }
    if !stats.top_checks.is_empty() {
        out.push_str("  top failing checks:\n");
        for c in stats.top_checks.iter().take(TOP_IN_TABLE) {
            let _ = writeln!(out, "  {:>5}  {}", c.count, c.check);
        }
    }
    if !stats.top_errors.is_empty() {
        out.push_str("  top errors:\n");
        for e in stats.top_errors.iter().take(TOP_IN_TABLE) {
            let _ = writeln!(out, "  {:>5}  [{}] {}", e.count, e.kind, e.message);
        }
    }
}
