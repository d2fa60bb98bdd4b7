//! The review page: server-rendered HTML, no build step. `/` lists the runs awaiting a human;
//! `/runs/{id}` shows one — its findings, evidence table, changes and retry prompts (the diffs
//! the delegate was shown), approve/reject forms that go through the same override path and
//! policy as the API, and, while it runs, its live event stream. `/login` (or the `?token=` URL
//! the server prints) trades the token for a session cookie; the forms carry the session's
//! CSRF token.

use std::time::SystemTime;

use axum::Form;
use axum::extract::{Path as UrlPath, Query, State};
use axum::http::{StatusCode, header};
use axum::response::{Html, IntoResponse, Redirect, Response};

use super::api::read;
use super::app::{ApiError, Shared};
use super::auth::{PageForm, PageView, same_secret, session_cookie};

use harness_records::escape_html as esc;

fn page(title: &str, body: &str) -> Html<String> {
    Html(format!(
        r#"<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{title} — harness</title>
<style>
body {{ font: 14px/1.45 system-ui, sans-serif; margin: 2em auto; max-width: 72em; padding: 0 1em; color: #222; }}
table {{ border-collapse: collapse; width: 100%; margin: .5em 0 1.5em; }}
th, td {{ border-bottom: 1px solid #ddd; padding: .3em .5em; text-align: left; vertical-align: top; }}
pre {{ background: #f6f6f6; padding: .6em; overflow-x: auto; white-space: pre-wrap; }}
.blocking {{ color: #a00; }} .advisory {{ color: #666; }} .ok {{ color: #070; }}
form {{ display: inline-block; margin-right: 2em; padding: .6em; border: 1px solid #ddd; }}
.notice {{ padding: .6em; background: #eef6ee; }} .refused {{ padding: .6em; background: #fbeaea; }}
.suspect {{ background: #fff4d6; border-left: 4px solid #b36b00; }}
.attempt {{ border-top: 2px solid #ccc; margin-top: 1.5em; }}
.cols {{ display: grid; grid-template-columns: 1fr 1fr; gap: 1.5em; }}
.refused {{ color: #a00; }} td.refused {{ background: #fbeaea; }}
.add {{ color: #070; background: #eaf6ea; }} .del {{ color: #a00; background: #fbeaea; }} .hunk {{ color: #555; }}
ul.changes {{ list-style: none; padding-left: 0; font-family: monospace; }}
.filters label {{ margin-right: 1em; }}
td pre {{ margin: 0; padding: .3em; }}
ul.tree, ul.tree ul {{ list-style: none; padding-left: 1.4em; border-left: 1px solid #ccc; }}
ul.tree li.current {{ background: #f3f3ff; }}
.outcome-failed, .outcome-error {{ color: #a00; }} .outcome-passed {{ color: #070; }}
tr.pending td:first-child, tr.run td:first-child {{ white-space: nowrap; }}
td.n, th.n {{ text-align: right; font-variant-numeric: tabular-nums; }} tr.total td {{ font-weight: 600; }}
</style></head><body>
<p><a href="/">Runs</a> · <a href="/report">Report</a></p>
<h1>{title}</h1>
{body}
</body></html>"#,
        title = esc(title)
    ))
}

/// What `/` lists of the recent runs: `?outcome=`, `?kind=` (the error kind) and `?delegate=`;
/// empty means any.
#[derive(serde::Deserialize, Default)]
pub(super) struct ListFilter {
    #[serde(default)]
    outcome: String,
    #[serde(default)]
    kind: String,
    #[serde(default)]
    delegate: String,
}

impl ListFilter {
    /// True when a run of `outcome`, error `kind` and `delegate` kind passes the filter.
    fn matches(&self, outcome: &str, kind: Option<&str>, delegate: &str) -> bool {
        (self.outcome.is_empty() || outcome == self.outcome)
            && (self.kind.is_empty() || kind == Some(self.kind.as_str()))
            && (self.delegate.is_empty() || delegate == self.delegate)
    }

    /// True when anything is chosen.
    fn is_active(&self) -> bool {
        !(self.outcome.is_empty() && self.kind.is_empty() && self.delegate.is_empty())
    }
}

/// Recent runs `/` lists at most.
const LISTED: usize = 200;

/// Runs awaiting review `/` lists at most (the rest are counted, and `harness review` lists
/// them all).
const AWAITING_LISTED: usize = 50;

/// `GET /`: the runs awaiting a human, then the recent runs, both filtered by outcome, error kind
/// and delegate, each linked to its page.
pub(super) async fn index(
    _: PageView,
    State(app): State<Shared>,
    Query(filter): Query<ListFilter>,
) -> Result<Html<String>, ApiError> {
    let (pending, recent) = read(&app, |j| {
        let recent = j.list(&harness_records::Filter {
            limit: Some(LISTED),
            ..harness_records::Filter::default()
        })?;
        Ok((j.review_queue()?, recent))
    })
    .await?;
    let now = SystemTime::now();
    let mut body = String::from("<h2>Awaiting review</h2>");
    // The filter applies to both lists: a run awaiting review that does not match is counted,
    // not shown.
    let awaiting = pending.len();
    let pending: Vec<_> = pending
        .into_iter()
        .filter(|p| filter.matches(&p.outcome, p.kind.as_deref(), &p.delegate_kind))
        .collect();
    if filter.is_active() && pending.len() < awaiting {
        body.push_str(&format!(
            "<p id=\"hidden\">{} of {awaiting} run(s) awaiting review match the filter; <a href=\"/\">show all</a>.</p>",
            pending.len()
        ));
    }
    if awaiting == 0 {
        body.push_str("<p id=\"empty\">No runs await review.</p>");
    } else if !pending.is_empty() {
        if pending.len() > AWAITING_LISTED {
            body.push_str(&format!(
                "<p id=\"more\">The {AWAITING_LISTED} newest of {} runs awaiting review; filter to narrow them, or list them all with <code>harness review</code>.</p>",
                pending.len()
            ));
        }
        body.push_str("<table id=\"pending\"><tr><th>Run</th><th>Outcome</th><th>Delegate</th><th>Primary finding</th><th>Age</th></tr>");
        for p in pending.iter().take(AWAITING_LISTED) {
            let json = p.to_json(now);
            body.push_str(&format!(
                "<tr class=\"pending\" data-id=\"{id}\"><td><a href=\"/runs/{id}\">{id}</a></td><td>{outcome}{kind}</td><td>{delegate}</td><td>{primary}</td><td>{age}s</td></tr>",
                id = esc(&p.id),
                outcome = esc(&p.outcome),
                kind = p.kind.as_deref().map(|k| format!(" ({})", esc(k))).unwrap_or_default(),
                delegate = esc(&p.delegate_kind),
                primary = esc(p.primary.as_deref().and_then(|r| r.lines().next()).unwrap_or("-")),
                age = json["age_s"].as_u64().unwrap_or(0),
            ));
        }
        body.push_str("</table>");
    }
    body.push_str("<h2>Recent runs</h2>");
    let choices = |pick: &dyn Fn(&harness_records::Record) -> Option<String>| {
        let mut values: Vec<String> = recent.iter().filter_map(pick).collect();
        values.sort();
        values.dedup();
        values
    };
    let select = |name: &str, label: &str, chosen: &str, values: Vec<String>| {
        let mut options = String::from("<option value=\"\">any</option>");
        for value in values {
            options.push_str(&format!(
                "<option{}>{}</option>",
                if value == chosen { " selected" } else { "" },
                esc(&value)
            ));
        }
        format!("<label>{label} <select name=\"{name}\">{options}</select></label>")
    };
    body.push_str(&format!(
        "<form class=\"filters\" id=\"filters\" method=\"get\" action=\"/\">{}{}{}<button type=\"submit\">Filter</button></form>",
        select("outcome", "Outcome", &filter.outcome, choices(&|r| Some(r.outcome.clone()))),
        select("kind", "Kind", &filter.kind, choices(&|r| r.error_kind.clone())),
        select("delegate", "Delegate", &filter.delegate, choices(&|r| Some(r.delegate_kind.clone()))),
    ));
    let shown: Vec<&harness_records::Record> = recent
        .iter()
        .filter(|r| filter.matches(&r.outcome, r.error_kind.as_deref(), &r.delegate_kind))
        .collect();
    if shown.is_empty() {
        body.push_str("<p id=\"none\">No runs match.</p>");
    } else {
        body.push_str("<table id=\"runs\"><tr><th>Run</th><th>Started</th><th>Outcome</th><th>Delegate</th><th>Attempts</th><th>Review</th></tr>");
        for r in shown {
            body.push_str(&format!(
                "<tr class=\"run\" data-id=\"{id}\"><td><a href=\"/runs/{id}\">{id}</a></td><td>{started}</td><td class=\"outcome-{outcome}\">{outcome}{kind}</td><td>{delegate}</td><td>{attempts}</td><td>{review}</td></tr>",
                id = esc(&r.id),
                started = humantime::format_rfc3339_seconds(r.started_at),
                outcome = esc(&r.outcome),
                kind = r.error_kind.as_deref().map(|k| format!(" ({})", esc(k))).unwrap_or_default(),
                delegate = esc(&r.delegate_kind),
                attempts = r.attempts.len(),
                review = esc(r.decision.as_deref().unwrap_or("")),
            ));
        }
        body.push_str("</table>");
    }
    Ok(page("Runs", &body))
}

/// `GET /report`: the failure-mode dashboard of every recorded run (what `harness report
/// --html` writes), with a link back to the runs.
pub(super) async fn report(
    _: PageView,
    State(app): State<Shared>,
) -> Result<Html<String>, ApiError> {
    let records = read(&app, |j| j.list(&harness_records::Filter::default())).await?;
    let dashboard = harness_records::Dashboard::build(&records);
    let html = dashboard.to_html(
        &format!("{} recorded run(s)", records.len()),
        Some("/runs/"),
    );
    Ok(Html(html.replacen(
        "<body>\n",
        "<body>\n<p><a href=\"/\">Runs</a></p>\n",
        1,
    )))
}

#[derive(serde::Deserialize, Default)]
pub(super) struct Notice {
    done: Option<String>,
}

/// `GET /runs/{id}`: one run, with the override forms while it awaits review, or its live events
/// while it runs.
pub(super) async fn run_page(
    PageView { csrf }: PageView,
    State(app): State<Shared>,
    UrlPath(id): UrlPath<String>,
    Query(notice): Query<Notice>,
) -> Result<Response, ApiError> {
    let running = app
        .live
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .contains_key(&id);
    let lookup = id.clone();
    // A run of this server's has a row from its start; while it runs, its events say more.
    let (record, decided, tree) = read(&app, move |j| {
        Ok((j.get(&lookup)?, j.override_of(&lookup)?, j.tree(&lookup)?))
    })
    .await?;
    let record = record.filter(|r| !(r.outcome == "running" && running));
    let mut body = String::new();
    if let Some(done) = &notice.done {
        body.push_str(&format!(
            "<p class=\"notice\" id=\"notice\">Recorded: {}.</p>",
            esc(done)
        ));
    }
    let Some(record) = record else {
        if !running {
            return Ok((
                StatusCode::NOT_FOUND,
                page("Not found", &format!("<p>No run {}.</p>", esc(&id))),
            )
                .into_response());
        }
        body.push_str(&live_view(&id));
        return Ok(page(&format!("Run {id}"), &body).into_response());
    };
    body.push_str(&header_view(&record, decided.as_ref()));
    body.push_str(&tree_view(&record, tree.as_ref()));
    body.push_str(&spend_view(&harness_records::Spend::of(
        &record,
        tree.as_ref(),
    )));
    let refusals = refusals(&record.events);
    // The last attempt first: it is what is decided on.
    for attempt in record.attempts.iter().rev() {
        body.push_str(&attempt_view(attempt, &refusals));
    }
    let awaiting = matches!(record.outcome.as_str(), "failed" | "passed_with_debt")
        && record.decision.is_none();
    // Forms need a browser session (a page read with the bearer header has none to offer).
    if let (true, Some(csrf)) = (awaiting, csrf) {
        body.push_str(&decide_forms(&id, &csrf));
    }
    Ok(page(&format!("Run {id}"), &body).into_response())
}

/// A run still going: its events as they come, from the event stream; the full view once it
/// has ended.
fn live_view(id: &str) -> String {
    format!(
        r#"<p id="status">Running.</p><h2>Events</h2><ol id="events"></ol>
<script>
// The stream's events name themselves (`type` in each event's data): read them as they come,
// whatever events there are.
const list = document.getElementById("events");
// An event with what it is about and how it came out: its type, then its other plain fields
// (check_name=tests passed=false exit_code=1), attempts counted from 1 as people read them.
function summary(event) {{
  const skip = new Set(["type", "seq", "at", "run_id"]);
  const parts = [event.type];
  for (const [key, value] of Object.entries(event)) {{
    if (skip.has(key) || value === null || typeof value === "object") continue;
    const shown = key === "attempt" && typeof value === "number" ? value + 1 : value;
    parts.push(key + "=" + String(shown).slice(0, 200));
  }}
  return parts.join(" ");
}}
(async () => {{
  const response = await fetch("/v1/delegations/{id}/events", {{headers: {{"Accept": "text/event-stream"}}}});
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffered = "";
  for (;;) {{
    const {{done, value}} = await reader.read();
    if (done) break;
    buffered += decoder.decode(value, {{stream: true}});
    let end;
    while ((end = buffered.indexOf("\n\n")) >= 0) {{
      const block = buffered.slice(0, end);
      buffered = buffered.slice(end + 2);
      const data = block.split("\n").filter((l) => l.startsWith("data:")).map((l) => l.slice(5).trim()).join("\n");
      if (!data) continue;
      const event = JSON.parse(data);
      const item = document.createElement("li");
      item.className = "event";
      item.dataset.type = event.type;
      item.textContent = summary(event);
      list.appendChild(item);
      if (event.type === "DelegationCompleted") {{
        // The record is the full view: load it (again, until the journal has it).
        document.getElementById("status").textContent = "Finished: " + summary(event) + ". Loading the full view…";
        reader.cancel();
        setTimeout(() => location.reload(), 400);
        return;
      }}
    }}
  }}
}})();
</script>"#,
        id = esc(id)
    )
}

/// What a reviewer reads first: the outcome, the task, a human's decision, why the run ended.
fn header_view(
    record: &harness_records::Record,
    decided: Option<&harness_records::Override>,
) -> String {
    let mut body = String::new();
    body.push_str(&format!(
        "<p id=\"outcome\" class=\"outcome-{outcome}\">Outcome <b>{outcome}</b>{kind} after {n} attempt(s); delegate {delegate}{model}</p>",
        outcome = esc(&record.outcome),
        kind = record
            .error_kind
            .as_deref()
            .map(|k| format!(" ({})", esc(k)))
            .unwrap_or_default(),
        n = record.attempts.len(),
        delegate = esc(&record.delegate_kind),
        model = record
            .model
            .as_deref()
            .map(|m| format!(" ({})", esc(m)))
            .unwrap_or_default(),
    ));
    body.push_str(&format!(
        "<h2>Task</h2><pre id=\"task\">{}</pre>",
        esc(record
            .request
            .as_ref()
            .and_then(|r| r["task"].as_str())
            .unwrap_or("-"))
    ));
    if let Some(o) = decided {
        body.push_str(&format!(
            "<p id=\"decision\">Review: <b>{}</b> by {} ({} override) at {}{}</p>",
            esc(&o.decision),
            esc(&o.user),
            esc(&o.override_type),
            humantime::format_rfc3339_seconds(o.at),
            o.reason
                .as_deref()
                .map(|r| format!(": {}", esc(r)))
                .unwrap_or_default(),
        ));
        if let Some(why) = &o.suspect {
            body.push_str(&format!(
                "<p class=\"notice suspect\" id=\"suspect\"><b>Suspect decision:</b> {}. Confirm it with {} before relying on it.</p>",
                esc(why),
                esc(&o.user)
            ));
        }
    }
    if let Some(message) = &record.error_message {
        body.push_str(&format!(
            "<h2>Why it ended</h2><pre id=\"error\">{}</pre>",
            esc(message)
        ));
    }
    body
}

/// The forms that approve or reject a run, each with the session's CSRF token.
fn decide_forms(id: &str, csrf: &str) -> String {
    let mut body = String::new();
    body.push_str("<h2>Decide</h2>");
    for (decision, label) in [("approve", "Approve"), ("reject", "Reject")] {
        body.push_str(&format!(
            r#"<form method="post" action="/runs/{id}/override" id="{decision}">
<input type="hidden" name="decision" value="{decision}">
<input type="hidden" name="csrf" value="{csrf}">
<label>Type <select name="type"><option value="check">check</option><option value="verifier">verifier</option><option value="direct">direct</option></select></label><br>
<label>Reason <input name="reason" size="40"></label><br>
<label>User <input name="user" size="20"></label><br>
<button type="submit">{label}</button>
</form>"#,
            id = esc(id),
            csrf = esc(csrf)
        ));
    }
    body
}

/// What the run spent: each attempt (what each retry cost) and each child's whole subtree, in
/// tokens and time, with the totals.
fn spend_view(spend: &harness_records::Spend) -> String {
    let ms = |ms: u64| humantime::format_duration(std::time::Duration::from_millis(ms)).to_string();
    let cpu = |cost: &harness_records::Cost| match cost.check_cpu_ms {
        0 => String::new(),
        n => ms(n),
    };
    let row = |what: String, cost: &harness_records::Cost, checks: String| {
        format!(
            "<tr><td>{what}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td>{}</td><td class=\"cpu\">{}</td><td>{checks}</td></tr>",
            cost.input(),
            cost.output_tokens,
            ms(cost.duration_ms),
            cpu(cost)
        )
    };
    let mut out = String::from(
        "<h2>Spend</h2><table id=\"spend\"><tr><th>Spent by</th><th class=\"n\">Input tokens</th><th class=\"n\">Output tokens</th><th>Time</th><th>Check CPU</th><th>Checks · slowest stages</th></tr>",
    );
    for a in &spend.attempts {
        let checks = match a.checks {
            0 => "-".to_owned(),
            1 => format!("1 check, {}", ms(a.checks_ms)),
            n => format!("{n} checks, {}", ms(a.checks_ms)),
        };
        let slowest: Vec<String> = a
            .stages
            .iter()
            .take(3)
            .map(|(stage, us)| format!("{} {}", esc(stage), harness_records::human_us(*us)))
            .collect();
        let checks = if slowest.is_empty() {
            checks
        } else {
            format!("{checks} · {}", slowest.join(", "))
        };
        out.push_str(&row(format!("Attempt {}", a.attempt), &a.cost, checks));
    }
    for c in &spend.children {
        let under = match c.descendants {
            0 => String::new(),
            n => format!(" and {n} run(s) under it"),
        };
        let what = format!(
            "Child <a href=\"/runs/{id}\">{id}</a> ({outcome}{kind}){under}",
            id = esc(&c.id),
            outcome = esc(&c.outcome),
            kind = c
                .kind
                .as_deref()
                .map(|k| format!(", {}", esc(k)))
                .unwrap_or_default()
        );
        out.push_str(&row(what, &c.cost, String::new()));
    }
    out.push_str(&row("This run".to_owned(), &spend.run, String::new()));
    let (tree, runs) = spend.tree;
    if runs > 1 {
        out.push_str(&format!(
            "<tr class=\"total\"><td>With everything under it ({runs} runs)</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td></td><td class=\"cpu\">{}</td><td></td></tr>",
            tree.input(),
            tree.output_tokens,
            cpu(&tree)
        ));
    }
    out.push_str("</table>");
    out
}

/// The run's place in a delegation tree (DESIGN §9): the parent it names (`parent_id`), and the
/// whole tree from its root, each run linked with its outcome, this one marked; the runs this
/// one delegated to are the list of class `children`.
fn tree_view(record: &harness_records::Record, tree: Option<&harness_records::TreeNode>) -> String {
    let mut out = String::new();
    if let Some(parent) = record.parent_id() {
        out.push_str(&format!(
            "<p id=\"parent\">Delegated by <a href=\"/runs/{p}\">{p}</a></p>",
            p = esc(parent)
        ));
    }
    if let Some(tree) = tree.filter(|t| !t.children.is_empty()) {
        out.push_str("<div id=\"tree\"><p>Delegation tree:</p><ul class=\"tree\">");
        node(tree, &record.id, &mut out);
        out.push_str("</ul></div>");
    }
    out
}

/// One run of a tree and the runs under it, as list items.
fn node(tree: &harness_records::TreeNode, current: &str, out: &mut String) {
    let outcome = match &tree.error_kind {
        Some(kind) => format!("{} ({kind})", tree.outcome),
        None => tree.outcome.clone(),
    };
    let here = tree.id == current;
    out.push_str(&format!(
        "<li{}><a href=\"/runs/{id}\">{id}</a> <span class=\"outcome-{class}\">{outcome}</span>, {attempts} attempt(s): {task}{}",
        if here { " class=\"current\"" } else { "" },
        if here { " <b>(this run)</b>" } else { "" },
        id = esc(&tree.id),
        class = esc(&tree.outcome),
        outcome = esc(&outcome),
        attempts = tree.attempts,
        task = esc(tree.task.as_deref().unwrap_or_default()),
    ));
    if !tree.children.is_empty() {
        out.push_str(if here {
            "<ul class=\"children\">"
        } else {
            "<ul>"
        });
        for child in &tree.children {
            node(child, current, out);
        }
        out.push_str("</ul>");
    }
    out.push_str("</li>");
}

/// Why each refused tool call was refused (`ToolVerificationFailed` events: a per-tool verifier), by call id.
fn refusals(events: &[serde_json::Value]) -> std::collections::HashMap<&str, &str> {
    events
        .iter()
        .filter(|e| e["type"] == "ToolVerificationFailed")
        .filter_map(|e| Some((e["call_id"].as_str()?, e["reason"].as_str().unwrap_or(""))))
        .collect()
}

/// One attempt: what the delegate claimed beside what was found and proved, its tool calls, what
/// it changed, the critic's review and the retry prompt it was sent. Attempts are numbered from 1
/// here, as in every text harness prints (JSON counts from 0: `data-attempt`).
fn attempt_view(
    attempt: &harness_records::RecordedAttempt,
    refusals: &std::collections::HashMap<&str, &str>,
) -> String {
    let n = attempt.attempt + 1;
    let verdict = attempt.verdict.as_ref();
    let state = match attempt.passed {
        Some(true) => "<span class=\"ok\">verified</span>",
        Some(false) => "<span class=\"blocking\">not verified</span>",
        None => "not verified by anything",
    };
    let result = attempt.result.as_ref();
    let answer = result
        .and_then(|r| r["response"].as_str())
        .filter(|a| !a.trim().is_empty())
        .map_or_else(
            || "<p>(no answer)</p>".to_owned(),
            |a| format!("<pre class=\"answer\">{}</pre>", esc(a)),
        );
    let mut out = format!(
        "<section class=\"attempt\" id=\"attempt-{n}\" data-attempt=\"{}\"><h2>Attempt {n}: {state}</h2><div class=\"cols\"><div><h3>What the delegate claimed</h3>{answer}</div><div>",
        attempt.attempt
    );
    let findings = verdict.map(|v| v.findings.as_slice()).unwrap_or_default();
    out.push_str("<h3>Findings</h3>");
    if findings.is_empty() {
        out.push_str("<p>None.</p>");
    } else {
        out.push_str(
            "<table class=\"findings\"><tr><th>Severity</th><th>Source</th><th>Message</th></tr>",
        );
        for f in findings {
            let source = if f.name.is_empty() {
                f.source.as_str().to_owned()
            } else {
                format!("{} {}", f.source.as_str(), f.name)
            };
            out.push_str(&format!(
                "<tr class=\"{}\"><td>{}</td><td>{}</td><td>{}</td></tr>",
                if f.blocking { "blocking" } else { "advisory" },
                esc(f.severity.as_str()),
                esc(&source),
                esc(&f.message),
            ));
        }
        out.push_str("</table>");
    }
    out.push_str("<h3>Evidence</h3>");
    let evidence = attempt.evidence();
    if evidence.is_empty() {
        out.push_str("<p>No evidence records: nothing but a verifier judged this attempt.</p>");
    } else {
        out.push_str("<table class=\"evidence\"><tr><th>Criterion</th><th>Source</th><th>Result</th><th>Proof</th></tr>");
        for e in evidence {
            out.push_str(&format!(
                "<tr><td>{}</td><td>{}</td><td class=\"{}\">{}</td><td>{}</td></tr>",
                esc(&e.criterion),
                esc(&e.source),
                if e.result.as_str() == "pass" {
                    "ok"
                } else {
                    "blocking"
                },
                esc(e.result.as_str()),
                esc(e.proof.as_deref().unwrap_or("")),
            ));
        }
        out.push_str("</table>");
        out.push_str(&runners_view(evidence));
    }
    out.push_str("</div></div>");
    out.push_str(&gaming_view(findings));
    out.push_str(&holdouts_view(evidence));
    if let Some(result) = result {
        out.push_str(&tool_calls_view(result, refusals));
        out.push_str(&changes_view(&result["changes"]));
    }
    if !attempt.diff.is_empty() {
        out.push_str(&format!(
            "<h3>The diff</h3><pre class=\"diff\">{}</pre>",
            diff_lines(&attempt.diff.join("\n"))
        ));
    }
    if let Some(critic) = verdict.and_then(|v| v.critic.as_ref()) {
        out.push_str(&format!(
            "<h3>The critic's review</h3><p class=\"critic\"><b>{}</b> from {}{}</p>",
            esc(critic.outcome.as_str()),
            esc(&critic.reviewer),
            critic
                .confidence
                .map(|c| format!(", confidence {c:.2}"))
                .unwrap_or_default()
        ));
        for (label, text) in [
            ("Reasoning", &critic.reasoning),
            ("Feedback", &critic.feedback),
            ("Unavailable", &critic.error),
        ] {
            if let Some(text) = text {
                out.push_str(&format!("<p><i>{label}:</i> {}</p>", esc(text)));
            }
        }
    }
    if let Some(prompt) = &attempt.retry_prompt {
        out.push_str(&format!(
            "<details class=\"retry\"><summary>Retry prompt sent after attempt {n} (the reasons and the diff the delegate was shown)</summary><pre>{}</pre></details>",
            diff_lines(prompt)
        ));
    }
    out.push_str("</section>");
    out
}

/// A line per check whose test runner reported: `tests — pytest: 14 passed, 0 failed, 0 skipped
/// (base 14)`, or why a run that exited 0 did not pass.
fn runners_view(evidence: &[harness::Evidence]) -> String {
    let mut out = String::new();
    for e in evidence {
        let Some(runner) = e.extra.get("runner").and_then(|r| r.as_str()) else {
            continue;
        };
        let counts = e.extra.get("tests").map(|t| {
            let n = |k: &str| t.get(k).and_then(serde_json::Value::as_u64).unwrap_or(0);
            format!(
                "{} passed, {} failed, {} skipped{}",
                n("passed"),
                n("failed"),
                n("skipped"),
                if n("errors") > 0 {
                    format!(", {} errors", n("errors"))
                } else {
                    String::new()
                }
            )
        });
        let base = e.extra.get("base").map(|b| {
            match (
                b.get("tests").and_then(serde_json::Value::as_u64),
                b.get("unavailable"),
            ) {
                (Some(n), _) => format!(
                    " (base {n}{})",
                    b.get("unit")
                        .and_then(|u| u.as_str())
                        .filter(|u| *u != "tests")
                        .map(|u| format!(" {u}"))
                        .unwrap_or_default()
                ),
                (None, Some(why)) => format!(" (no base: {})", why.as_str().unwrap_or("")),
                _ => String::new(),
            }
        });
        let said = match (runner, counts) {
            ("unknown", _) => "no known test runner: judged by its exit code".to_owned(),
            (runner, Some(counts)) => format!("{runner}: {counts}{}", base.unwrap_or_default()),
            (runner, None) => format!("{runner}: no report{}", base.unwrap_or_default()),
        };
        out.push_str(&format!(
            "<p class=\"runner\"><b>{}</b> — {}</p>",
            esc(&e.criterion),
            esc(&said)
        ));
    }
    out
}

/// The gaming stage's findings: each rule, where, and the added line.
fn gaming_view(findings: &[harness::Finding]) -> String {
    let gaming: Vec<&harness::Finding> = findings
        .iter()
        .filter(|f| f.source == harness::Source::Gaming)
        .collect();
    if gaming.is_empty() {
        return String::new();
    }
    let mut out = String::from(
        "<h3>Gaming</h3><table class=\"gaming\"><tr><th>Rule</th><th>Where</th><th>What</th></tr>",
    );
    for f in gaming {
        let place = match (&f.path, f.line) {
            (Some(path), Some(line)) => format!("{path}:{line}"),
            (Some(path), None) => path.clone(),
            _ => String::new(),
        };
        out.push_str(&format!(
            "<tr class=\"{}\"><td>{}</td><td>{}</td><td>{}</td></tr>",
            if f.blocking { "blocking" } else { "advisory" },
            esc(&f.name),
            esc(&place),
            esc(&f.message)
        ));
    }
    out.push_str("</table>");
    out
}

/// The holdout checks: each with its result and, for the reviewer only, its output (the
/// delegate was told only which holdout failed and its counts).
fn holdouts_view(evidence: &[harness::Evidence]) -> String {
    let holdouts: Vec<&harness::Evidence> = evidence
        .iter()
        .filter(|e| e.source == harness::Source::Holdout.as_str())
        .collect();
    if holdouts.is_empty() {
        return String::new();
    }
    let mut out = String::from("<h3>Holdouts</h3>");
    for e in holdouts {
        out.push_str(&format!(
            "<p class=\"holdout\"><b>{}</b>: <span class=\"{}\">{}</span> — {}</p>",
            esc(&e.criterion),
            if e.passed() { "ok" } else { "blocking" },
            esc(e.result.as_str()),
            esc(e.proof.as_deref().unwrap_or(""))
        ));
        if let Some(output) = e.output_tail.as_deref().filter(|o| !o.trim().is_empty()) {
            out.push_str(&format!(
                "<details class=\"holdout-output\"><summary>Its output (for the reviewer: never shown to the delegate)</summary><pre>{}</pre></details>",
                esc(output)
            ));
        }
    }
    out
}

/// The attempt's tool calls: name, arguments, and what came back — a refusal with its reason.
fn tool_calls_view(
    result: &serde_json::Value,
    refusals: &std::collections::HashMap<&str, &str>,
) -> String {
    let calls = result["tool_calls"]
        .as_array()
        .map_or(&[][..], Vec::as_slice);
    if calls.is_empty() {
        return "<h3>Tool calls</h3><p>None reported.</p>".to_owned();
    }
    let results = result["tool_results"]
        .as_array()
        .map_or(&[][..], Vec::as_slice);
    let mut out = String::from(
        "<h3>Tool calls</h3><table class=\"tools\"><tr><th>Tool</th><th>Arguments</th><th>Result</th></tr>",
    );
    for call in calls {
        let id = call["id"].as_str().unwrap_or_default();
        let answer = results.iter().find(|r| r["call_id"].as_str() == Some(id));
        let (class, shown) = match (refusals.get(id), answer) {
            (Some(reason), _) => ("refused", format!("refused: {reason}")),
            (None, Some(r)) if r["is_error"] == true => (
                "blocking",
                format!("error: {}", r["content"].as_str().unwrap_or_default()),
            ),
            (None, Some(r)) => ("ok", r["content"].as_str().unwrap_or_default().to_owned()),
            (None, None) => ("advisory", "(no result)".to_owned()),
        };
        let arguments = serde_json::to_string_pretty(&call["arguments"]).unwrap_or_default();
        out.push_str(&format!(
            "<tr class=\"tool\"><td>{}</td><td><pre>{}</pre></td><td class=\"{class}\"><pre>{}</pre></td></tr>",
            esc(call["name"].as_str().unwrap_or("?")),
            esc(&harness_builtins::shorten(&arguments, 2000)),
            esc(&harness_builtins::shorten(&shown, 2000)),
        ));
    }
    out.push_str("</table>");
    out
}

/// The paths the attempt added, modified and deleted.
fn changes_view(changes: &serde_json::Value) -> String {
    let mut items = String::new();
    for (key, mark, class) in [
        ("added", "+", "add"),
        ("modified", "~", "mod"),
        ("deleted", "-", "del"),
    ] {
        for path in changes[key].as_array().into_iter().flatten() {
            items.push_str(&format!(
                "<li class=\"{class}\">{mark} {}</li>",
                esc(path.as_str().unwrap_or_default())
            ));
        }
    }
    if items.is_empty() {
        "<h3>Changes</h3><p>Nothing in the workspace changed.</p>".to_owned()
    } else {
        format!("<h3>Changes</h3><ul class=\"changes\">{items}</ul>")
    }
}

/// `text` escaped, with the lines of unified diffs in it marked as additions and deletions.
fn diff_lines(text: &str) -> String {
    text.lines()
        .map(|line| {
            let class = if line.starts_with("+++") || line.starts_with("---") {
                None
            } else if line.starts_with('+') {
                Some("add")
            } else if line.starts_with('-') {
                Some("del")
            } else if line.starts_with("@@") {
                Some("hunk")
            } else {
                None
            };
            match class {
                Some(class) => format!("<span class=\"{class}\">{}</span>\n", esc(line)),
                None => format!("{}\n", esc(line)),
            }
        })
        .collect()
}

#[derive(serde::Deserialize)]
pub(super) struct OverrideForm {
    decision: String,
    #[serde(rename = "type")]
    override_type: String,
    #[serde(default)]
    reason: String,
    #[serde(default)]
    user: String,
    /// The session's CSRF token, which only this server's own page knows.
    #[serde(default)]
    csrf: String,
}

/// `POST /runs/{id}/override`: the forms, through the same override path and policy as the API;
/// a refusal is a 409 page naming why.
pub(super) async fn decide(
    session: PageForm,
    State(app): State<Shared>,
    UrlPath(id): UrlPath<String>,
    Form(form): Form<OverrideForm>,
) -> Response {
    let refused = |status: StatusCode, kind: &str, message: &str| {
        (
            status,
            page(
                "Not recorded",
                &format!(
                    "<p class=\"refused\" id=\"refused\"><b>{}</b>: {}</p><p><a href=\"/runs/{}\">Back to the run</a></p>",
                    esc(kind),
                    esc(message),
                    esc(&id)
                ),
            ),
        )
            .into_response()
    };
    if !same_secret(&form.csrf, &session.csrf) {
        return refused(
            StatusCode::FORBIDDEN,
            "forbidden",
            "the form did not come from this server's page for your session (its CSRF token is missing or wrong); open the run again and decide there",
        );
    }
    let request = match app.override_request(
        &id,
        &form.decision,
        &form.override_type,
        Some(form.reason),
        Some(&form.user),
        "fill in User",
    ) {
        Ok(request) => request,
        Err(ApiError(status, kind, message)) => return refused(status, &kind, &message),
    };
    match app.decide(request).await {
        Ok(done) => Redirect::to(&format!("/runs/{id}?done={}", done.decision)).into_response(),
        Err(ApiError(status, kind, message)) => refused(status, &kind, &message),
    }
}

/// `GET /login`: a form for the API token (servers that require one).
pub(super) async fn login_form() -> Html<String> {
    page(
        "Sign in",
        r#"<form method="post" action="/login"><label>API token <input name="token" type="password" size="40"></label> <button type="submit">Sign in</button></form>"#,
    )
}

#[derive(serde::Deserialize)]
pub(super) struct LoginForm {
    token: String,
}

/// `POST /login`: with the token, a session (an HttpOnly, same-site cookie), then the review
/// list.
pub(super) async fn login(State(app): State<Shared>, Form(form): Form<LoginForm>) -> Response {
    if !app.token_matches(&form.token) {
        return (
            StatusCode::UNAUTHORIZED,
            page("Sign in", "<p class=\"refused\">Wrong token.</p>"),
        )
            .into_response();
    }
    match app.open_session() {
        Ok((session, _)) => (
            StatusCode::SEE_OTHER,
            [
                (header::SET_COOKIE, session_cookie(&session)),
                (header::LOCATION, "/".to_owned()),
            ],
        )
            .into_response(),
        Err(e) => e.into_response(),
    }
}
