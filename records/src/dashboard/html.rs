//! The dashboard as one self-contained HTML page with inline SVG charts (`harness report --html`).

use std::fmt::Write as _;

use super::{Dashboard, KindStats, human_ms, ordinal, percent, truncate};

impl Dashboard {
    /// Returns the report as one self-contained HTML page: inline CSS and inline SVG charts, no
    /// scripts and nothing loaded from elsewhere. `subtitle` (e.g. the filter used) is shown under
    /// the title; example runs link to `RUN_LINK` + their id when one is given (the service's
    /// `/runs/`), else are named. All text from records is escaped.
    pub fn to_html(&self, subtitle: &str, run_link: Option<&str>) -> String {
        let mut page = String::new();
        page.push_str("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\" />\n");
        page.push_str(
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\" />\n",
        );
        page.push_str("<title>harness failure-mode report</title>\n<style>\n");
        page.push_str(CSS);
        page.push_str("</style>\n</head>\n<body>\n<h1>harness failure-mode report</h1>\n");
        let _ = writeln!(page, "<p class=\"sub\">{}</p>", escape(subtitle));
        if self.total.delegations == 0 {
            page.push_str("<p>No delegations recorded.</p>\n</body>\n</html>\n");
            return page;
        }
        page.push_str("<h2>Summary</h2>\n");
        page.push_str(&summary_table(self));
        page.push_str("<h2>Outcomes per delegate kind</h2>\n");
        page.push_str(&outcomes_chart(&self.kinds));
        page.push_str("<h2>Outcomes over time</h2>\n");
        page.push_str(&timeline_chart(&self.timeline));
        if !self.total.stages.is_empty() {
            page.push_str("<h2>Time per stage</h2>\n");
            page.push_str(&stages_table(&self.total.stages));
        }
        for stats in &self.kinds {
            let _ = writeln!(
                page,
                "<section>\n<h2>Delegate kind <code>{}</code></h2>",
                escape(&stats.kind)
            );
            if let Some(line) = stats.authority_line() {
                let _ = writeln!(page, "<p class=\"sub\">{}</p>", escape(&line));
            }
            page.push_str("<div class=\"row\">\n<div>\n<h3>Passed on attempt</h3>\n");
            page.push_str(&pass_at_chart(&stats.pass_at_attempt));
            page.push_str("</div>\n<div>\n<h3>Attempts and duration</h3>\n");
            let _ = writeln!(
                page,
                "<table>\n<tr><th></th><th>p50</th><th>p95</th><th>max</th></tr>\n\
                 <tr><td>attempts</td><td>{}</td><td>{}</td><td>{}</td></tr>\n\
                 <tr><td>duration</td><td>{}</td><td>{}</td><td>{}</td></tr>\n</table>",
                stats.attempts.p50,
                stats.attempts.p95,
                stats.attempts.max,
                human_ms(stats.duration_ms.p50),
                human_ms(stats.duration_ms.p95),
                human_ms(stats.duration_ms.max),
            );
            page.push_str("</div>\n</div>\n<h3>Top failure reasons</h3>\n");
            if stats.top_reasons.is_empty() {
                page.push_str("<p class=\"none\">None.</p>\n");
            } else {
                page.push_str(&reasons_table(&stats.top_reasons, run_link));
            }
            page.push_str("<h3>Top failing hooks</h3>\n");
            if stats.top_hooks.is_empty() {
                page.push_str("<p class=\"none\">None.</p>\n");
            } else {
                let bars: Vec<(String, usize)> = stats
                    .top_hooks
                    .iter()
                    .map(|h| (h.hook.clone(), h.count))
                    .collect();
                page.push_str(&labelled_bars(&bars, "#6a1b9a"));
            }
            page.push_str("<h3>Top failing checks</h3>\n");
            if stats.top_checks.is_empty() {
                page.push_str("<p class=\"none\">None.</p>\n");
            } else {
                let bars: Vec<(String, usize)> = stats
                    .top_checks
                    .iter()
                    .map(|c| (c.check.clone(), c.count))
                    .collect();
                page.push_str(&labelled_bars(&bars, "#00695c"));
            }
            if !stats.integrity.is_empty() {
                let integrity = &stats.integrity;
                page.push_str("<h3>Gate integrity</h3>\n<table>\n<tr><th>guard</th><th>what</th><th>count</th></tr>\n");
                let mut row = |guard: &str, what: &str, count: usize| {
                    let _ = writeln!(
                        page,
                        "<tr><td class=\"text\">{}</td><td class=\"text\">{}</td><td>{count}</td></tr>",
                        escape(guard),
                        escape(what)
                    );
                };
                row("gate_tampered runs", "", integrity.tampered_runs);
                for file in &integrity.tampered_files {
                    row("tampered file", &file.check, file.count);
                }
                for (kind, count) in &integrity.unsupported_claims {
                    row("unsupported claim", kind, *count);
                }
                for (rule, count) in &integrity.gaming {
                    row("gaming", rule, *count);
                }
                for (name, count) in &integrity.holdout_failures {
                    row("holdout failed", name, *count);
                }
                for check in &integrity.flaky_checks {
                    row("flaky check", &check.check, check.count);
                }
                page.push_str("</table>\n");
            }
            if !stats.top_errors.is_empty() {
                page.push_str("<h3>Top errors</h3>\n<table class=\"errors\">\n<tr><th>count</th><th>kind</th><th>message</th><th>example runs</th></tr>\n");
                for e in &stats.top_errors {
                    let _ = writeln!(
                        page,
                        "<tr><td>{}</td><td>{}</td><td class=\"text\">{}</td><td class=\"text\">{}</td></tr>",
                        e.count,
                        escape(&e.kind),
                        escape(&e.message),
                        run_links(&e.runs, run_link)
                    );
                }
                page.push_str("</table>\n");
            }
            page.push_str("</section>\n");
        }
        page.push_str("</body>\n</html>\n");
        page
    }
}

const CSS: &str = "body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 70em; color: #222; padding: 0 1em; }
h1 { margin-bottom: 0.2em; }
.wide { overflow-x: auto; }
.sub { color: #666; margin-top: 0; }
table { border-collapse: collapse; margin: 0.5em 0 1em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: right; }
th:first-child, td:first-child { text-align: left; }
td.text { text-align: left; }
section { border-top: 2px solid #eee; margin-top: 2em; }
.row { display: flex; gap: 3em; flex-wrap: wrap; }
.none { color: #888; }
svg text { font-family: system-ui, sans-serif; font-size: 12px; fill: #222; }
.legend span { display: inline-block; margin-right: 1.2em; }
.legend i { display: inline-block; width: 0.9em; height: 0.9em; margin-right: 0.3em; vertical-align: middle; }
";

/// Outcome names and their colours, in stacking order.
const OUTCOME_COLOURS: [(&str, &str); 5] = [
    ("passed", "#2e7d32"),
    ("passed with debt", "#9ccc65"),
    ("skipped", "#9e9e9e"),
    ("failed", "#ef6c00"),
    ("error", "#c62828"),
];

fn summary_table(dashboard: &Dashboard) -> String {
    let mut html = String::from(
        "<div class=\"wide\"><table>\n<tr><th>kind</th><th>delegations</th><th>pass rate</th><th>passed</th>\
         <th>passed with debt</th><th>skipped</th><th>exhausted</th><th>scope violations</th>\
         <th>broken policy</th><th>blocked</th><th>interrupted</th><th>other errors</th>\
         <th>attempts p50/p95</th><th>duration p50/p95</th></tr>\n",
    );
    let mut kinds: Vec<&KindStats> = dashboard.kinds.iter().collect();
    if dashboard.kinds.len() > 1 {
        kinds.push(&dashboard.total);
    }
    for s in kinds {
        let _ = writeln!(
            html,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}/{}</td><td>{}/{}</td></tr>",
            escape(&s.kind),
            s.delegations,
            s.pass_rate().map_or_else(|| "-".to_owned(), percent),
            s.passed,
            s.passed_with_debt,
            s.skipped,
            s.exhausted,
            s.scope_violations,
            s.broken_policy,
            s.blocked,
            s.interrupted,
            s.other_errors,
            s.attempts.p50,
            s.attempts.p95,
            human_ms(s.duration_ms.p50),
            human_ms(s.duration_ms.p95),
        );
    }
    html.push_str("</table></div>\n");
    html
}

/// What each pipeline stage took per attempt it judged (p50, p95, max) and in all, slowest in
/// all first.
fn stages_table(stages: &[super::StageStats]) -> String {
    let mut html = String::from(
        "<table id=\"stages\">\n<tr><th>stage</th><th>attempts judged</th><th>p50</th><th>p95</th><th>max</th><th>in all</th></tr>\n",
    );
    for stage in stages {
        let _ = writeln!(
            html,
            "<tr><td><code>{}</code></td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            escape(&stage.stage),
            stage.attempts,
            super::human_us(stage.time_us.p50),
            super::human_us(stage.time_us.p95),
            super::human_us(stage.time_us.max),
            super::human_us(stage.total_us),
        );
    }
    html.push_str("</table>\n");
    html
}

/// Per delegate kind, one stacked column per span of time: how many delegations that started
/// then ended in each outcome; the axis says when.
fn timeline_chart(timeline: &super::Timeline) -> String {
    const LABEL: f64 = 140.0;
    const WIDTH: f64 = 600.0;
    const ROW: f64 = 70.0;
    const PLOT: f64 = 50.0;
    let Some(buckets) = timeline.kinds.first().map(|(_, b)| b.len()) else {
        return "<p class=\"none\">No delegations.</p>\n".to_owned();
    };
    let most = timeline
        .kinds
        .iter()
        .flat_map(|(_, b)| b.iter().map(|c| c.iter().sum::<usize>()))
        .max()
        .unwrap_or(0)
        .max(1) as f64;
    let column = WIDTH / buckets as f64;
    let height = ROW * timeline.kinds.len() as f64 + 24.0;
    let colours = [
        OUTCOME_COLOURS[0].1,
        OUTCOME_COLOURS[1].1,
        OUTCOME_COLOURS[2].1,
        OUTCOME_COLOURS[3].1,
        OUTCOME_COLOURS[4].1,
        "#1565c0",
    ];
    let mut svg = format!(
        "<svg role=\"img\" aria-label=\"outcomes over time\" class=\"timeline\" width=\"{w}\" height=\"{height}\" viewBox=\"0 0 {w} {height}\">\n",
        w = LABEL + WIDTH + 10.0
    );
    for (row, (kind, counts)) in timeline.kinds.iter().enumerate() {
        let base = ROW * row as f64 + PLOT + 4.0;
        let _ = writeln!(
            svg,
            "<text x=\"0\" y=\"{:.1}\">{}</text>",
            base - PLOT / 2.0,
            escape(&truncate(kind, 20))
        );
        for (i, bucket) in counts.iter().enumerate() {
            let x = LABEL + column * i as f64;
            let mut y = base;
            for (n, (outcome, colour)) in bucket
                .iter()
                .zip(super::TIMELINE_OUTCOMES.iter().zip(colours))
            {
                if *n == 0 {
                    continue;
                }
                let h = PLOT * *n as f64 / most;
                y -= h;
                let _ = writeln!(
                    svg,
                    "<rect x=\"{x:.1}\" y=\"{y:.1}\" width=\"{:.1}\" height=\"{h:.1}\" fill=\"{colour}\"><title>{}: {n} {}</title></rect>",
                    (column - 1.0).max(1.0),
                    escape(kind),
                    outcome.replace('_', " ")
                );
            }
        }
    }
    // The axis: when the first, middle and last spans start.
    let at = |i: usize| {
        let ms = timeline.start_ms + timeline.bucket_ms * i as u64;
        let time = std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms);
        humantime::format_rfc3339_seconds(time)
            .to_string()
            .replace('T', " ")
    };
    let axis = ROW * timeline.kinds.len() as f64 + 16.0;
    // As many labels as fit without overlapping: the start, the end from two spans, the middle
    // from six.
    let mut labels = vec![(0, "start")];
    if buckets >= 6 {
        labels.push((buckets / 2, "middle"));
    }
    if buckets >= 2 {
        labels.push((buckets - 1, "end"));
    }
    for (i, anchor) in labels {
        let x = LABEL + column * i as f64 + if anchor == "end" { column } else { 0.0 };
        let _ = writeln!(
            svg,
            "<text x=\"{x:.1}\" y=\"{axis}\" text-anchor=\"{anchor}\" class=\"axis\">{}</text>",
            // The right edge is when the last span ends.
            at(if anchor == "end" { i + 1 } else { i })
        );
    }
    svg.push_str("</svg>\n");
    let _ = writeln!(
        svg,
        "<p class=\"sub\">Each column: the delegations started in {}, by outcome.</p>",
        span_words(timeline.bucket_ms)
    );
    svg
}

/// A span of a timeline in words: "a minute", "6 hours", "a week".
fn span_words(ms: u64) -> String {
    match ms {
        60_000 => "a minute".to_owned(),
        3_600_000 => "an hour".to_owned(),
        86_400_000 => "a day".to_owned(),
        604_800_000 => "a week".to_owned(),
        ms if ms % 86_400_000 == 0 => format!("{} days", ms / 86_400_000),
        ms if ms % 3_600_000 == 0 => format!("{} hours", ms / 3_600_000),
        ms if ms % 60_000 == 0 => format!("{} minutes", ms / 60_000),
        ms => human_ms(ms),
    }
}

/// Example runs: links to `run_link` + their id when one is given, else their ids.
fn run_links(runs: &[String], run_link: Option<&str>) -> String {
    runs.iter()
        .map(|id| match run_link {
            Some(link) => format!(
                "<a href=\"{}{}\">{}</a>",
                escape(link),
                escape(id),
                escape(id)
            ),
            None => format!("<code>{}</code>", escape(id)),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The failure reasons, most frequent first: how many attempts gave each, where from (the
/// finding's source and name), the reason, and example runs.
fn reasons_table(reasons: &[super::ReasonCount], run_link: Option<&str>) -> String {
    let mut html = String::from(
        "<table class=\"reasons\">\n<tr><th>attempts</th><th>retries</th><th>tokens</th><th>from</th><th>reason</th><th>example runs</th></tr>\n",
    );
    for r in reasons {
        let runs = run_links(&r.runs, run_link);
        let _ = writeln!(
            html,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td class=\"text\">{}</td><td class=\"text\" title=\"{}\">{}</td><td class=\"text\">{}</td></tr>",
            r.count,
            r.retries,
            r.tokens,
            escape(&r.source),
            escape(&r.example),
            escape(&r.reason),
            runs
        );
    }
    html.push_str("</table>\n");
    html
}

/// One horizontal stacked bar per kind: passed, passed with debt, skipped, failed, error.
fn outcomes_chart(kinds: &[KindStats]) -> String {
    const LABEL: f64 = 140.0;
    const WIDTH: f64 = 520.0;
    const ROW: f64 = 26.0;
    let most = kinds
        .iter()
        .map(|k| k.delegations)
        .max()
        .unwrap_or(0)
        .max(1) as f64;
    let height = ROW * kinds.len() as f64 + 6.0;
    let mut svg = format!(
        "<svg role=\"img\" aria-label=\"outcomes per delegate kind\" width=\"{}\" height=\"{height}\" viewBox=\"0 0 {} {height}\">\n",
        LABEL + WIDTH + 50.0,
        LABEL + WIDTH + 50.0
    );
    for (i, stats) in kinds.iter().enumerate() {
        let y = ROW * i as f64 + 3.0;
        let _ = writeln!(
            svg,
            "<text x=\"0\" y=\"{}\">{}</text>",
            y + 15.0,
            escape(&truncate(&stats.kind, 20))
        );
        let mut x = LABEL;
        let counts = [
            stats.passed,
            stats.passed_with_debt,
            stats.skipped,
            stats.failed,
            stats.errored,
        ];
        for ((name, colour), n) in OUTCOME_COLOURS.iter().zip(counts) {
            if n == 0 {
                continue;
            }
            let w = WIDTH * n as f64 / most;
            let _ = writeln!(
                svg,
                "<rect x=\"{x:.1}\" y=\"{y}\" width=\"{w:.1}\" height=\"20\" fill=\"{colour}\"><title>{name}: {n}</title></rect>"
            );
            x += w;
        }
        let _ = writeln!(
            svg,
            "<text x=\"{:.1}\" y=\"{}\">{}</text>",
            x + 6.0,
            y + 15.0,
            stats.delegations
        );
    }
    svg.push_str("</svg>\n<p class=\"legend\">");
    for (name, colour) in OUTCOME_COLOURS {
        let _ = write!(
            svg,
            "<span><i style=\"background: {colour}\"></i>{name}</span>"
        );
    }
    svg.push_str("</p>\n");
    svg
}

/// Vertical bars: how many delegations passed on the 1st, 2nd, … attempt.
fn pass_at_chart(histogram: &[usize]) -> String {
    if histogram.iter().all(|&n| n == 0) {
        return "<p class=\"none\">No delegation passed.</p>\n".to_owned();
    }
    const BAR: f64 = 44.0;
    const GAP: f64 = 16.0;
    const PLOT: f64 = 120.0;
    let most = histogram.iter().copied().max().unwrap_or(0).max(1) as f64;
    let width = (BAR + GAP) * histogram.len() as f64 + GAP;
    let height = PLOT + 40.0;
    let mut svg = format!(
        "<svg role=\"img\" aria-label=\"passed on attempt\" width=\"{width}\" height=\"{height}\" viewBox=\"0 0 {width} {height}\">\n"
    );
    for (i, &n) in histogram.iter().enumerate() {
        let x = GAP + (BAR + GAP) * i as f64;
        let h = PLOT * n as f64 / most;
        let y = 18.0 + PLOT - h;
        let _ = writeln!(
            svg,
            "<rect x=\"{x}\" y=\"{y:.1}\" width=\"{BAR}\" height=\"{h:.1}\" fill=\"#2e7d32\"><title>passed on attempt {}: {n}</title></rect>",
            i + 1
        );
        let _ = writeln!(
            svg,
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{n}</text>",
            x + BAR / 2.0,
            y - 4.0
        );
        let _ = writeln!(
            svg,
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>",
            x + BAR / 2.0,
            18.0 + PLOT + 16.0,
            ordinal(i + 1)
        );
    }
    svg.push_str("</svg>\n");
    svg
}

/// Horizontal bars, each under its (escaped) label.
fn labelled_bars(bars: &[(String, usize)], colour: &str) -> String {
    const WIDTH: f64 = 600.0;
    const ROW: f64 = 38.0;
    let most = bars.iter().map(|b| b.1).max().unwrap_or(0).max(1) as f64;
    let height = ROW * bars.len() as f64;
    let mut svg = format!(
        "<svg role=\"img\" aria-label=\"counts\" width=\"{}\" height=\"{height}\" viewBox=\"0 0 {} {height}\">\n",
        WIDTH + 60.0,
        WIDTH + 60.0
    );
    for (i, (label, n)) in bars.iter().enumerate() {
        let y = ROW * i as f64;
        let w = WIDTH * *n as f64 / most;
        let _ = writeln!(
            svg,
            "<text x=\"0\" y=\"{:.1}\">{}<title>{}</title></text>",
            y + 13.0,
            escape(&truncate(label, 100)),
            escape(label)
        );
        let _ = writeln!(
            svg,
            "<rect x=\"0\" y=\"{:.1}\" width=\"{w:.1}\" height=\"14\" fill=\"{colour}\" />",
            y + 18.0
        );
        let _ = writeln!(
            svg,
            "<text x=\"{:.1}\" y=\"{:.1}\">{n}</text>",
            w + 6.0,
            y + 30.0
        );
    }
    svg.push_str("</svg>\n");
    svg
}

/// Escapes text for HTML element content and attribute values.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            _ => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dashboard::tests::sample;

    /// Runs over two hours: five-minute spans, each outcome stacked in its span, the axis
    /// labelled at the start, the middle and the end.
    #[test]
    fn the_timeline_has_a_time_axis() {
        use crate::dashboard::tests::record;
        let at = |minutes: u64, mut r: crate::Record| {
            r.started_at = std::time::UNIX_EPOCH + std::time::Duration::from_secs(minutes * 60);
            r
        };
        let records = vec![
            at(
                0,
                record("d-1", "claude", "passed", None, &[(Some(true), &[])]),
            ),
            at(
                31,
                record("d-2", "claude", "failed", Some("scope_violation"), &[]),
            ),
            at(120, record("d-3", "codex", "error", Some("timeout"), &[])),
        ];
        let dashboard = Dashboard::build(&records);
        assert_eq!(dashboard.timeline.bucket_ms, 300_000);
        let claude = &dashboard.timeline.kinds[0].1;
        assert_eq!((claude.len(), claude[0][0], claude[6][3]), (25, 1, 1));
        let html = dashboard.to_html("", None);
        assert_eq!(html.matches("class=\"axis\"").count(), 3, "{html}");
        assert!(html.contains(">1970-01-01 00:00:00Z<"), "{html}");
        assert!(html.contains(">1970-01-01 02:05:00Z<"), "{html}");
        assert!(html.contains("started in 5 minutes"), "{html}");
    }

    #[test]
    fn the_page_is_self_contained_and_escapes_record_text() {
        let page = Dashboard::build(&sample()).to_html("kind <b>*</b>", None);
        assert!(page.starts_with("<!DOCTYPE html>"));
        assert!(page.contains("<svg"));
        assert!(!page.contains("<script"), "unescaped script in the page");
        assert!(page.contains("&lt;script&gt;"));
        assert!(page.contains("kind &lt;b&gt;*&lt;/b&gt;"));
        assert!(!page.contains("http://") && !page.contains("https://"));
        assert_eq!(page.matches("<svg").count(), page.matches("</svg>").count());
    }

    #[test]
    fn escape_covers_markup_and_quotes() {
        assert_eq!(
            escape(r#"<a href="x">'&'</a>"#),
            "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;"
        );
    }
}
