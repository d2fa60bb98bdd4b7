//! The review page: server-rendered HTML, no build step. `/` lists the runs awaiting a human;
//! `/runs/{id}` shows one — its findings, evidence table, changes and retry prompts (the diffs
//! the delegate was shown), approve/reject forms that go through the same override path and
//! policy as the API, and, while it runs, its live event stream. `/login` (or the `?token=` URL
//! the server prints) trades the token for a session cookie; the forms carry the session's
//! CSRF token.

use std::time::SystemTime;

use axum::Form;
use axum::extract::{Path as UrlPath, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{Html, IntoResponse, Redirect, Response};
use harness_records::Journal;

use super::{ApiError, Shared, read};

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
</style></head><body>
<p><a href="/">Awaiting review</a></p>
<h1>{title}</h1>
{body}
</body></html>"#,
        title = esc(title)
    ))
}

/// `GET /`: the runs awaiting a human.
pub(super) async fn index(State(app): State<Shared>) -> Result<Html<String>, ApiError> {
    let pending = read(&app, Journal::review_queue).await?;
    let now = SystemTime::now();
    let mut body = String::new();
    if pending.is_empty() {
        body.push_str("<p id=\"empty\">No runs await review.</p>");
    } else {
        body.push_str("<table id=\"pending\"><tr><th>Run</th><th>Outcome</th><th>Delegate</th><th>Primary finding</th><th>Age</th></tr>");
        for p in &pending {
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
    Ok(page("Awaiting review", &body))
}

#[derive(serde::Deserialize, Default)]
pub(super) struct Notice {
    done: Option<String>,
}

/// `GET /runs/{id}`: one run, with the override forms while it awaits review, or its live events
/// while it runs.
pub(super) async fn run_page(
    State(app): State<Shared>,
    UrlPath(id): UrlPath<String>,
    Query(notice): Query<Notice>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let running = app
        .live
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .contains_key(&id);
    let lookup = id.clone();
    // A run of this server's has a row from its start; while it runs, its events say more.
    let (record, decided) = read(&app, move |j| {
        Ok((j.get(&lookup)?, j.override_of(&lookup)?))
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
        body.push_str(&format!(
            r#"<p id="status">Running.</p><h2>Events</h2><ol id="events"></ol>
<script>
// The stream's events name themselves (`type` in each event's data): read them as they come,
// whatever events there are.
const list = document.getElementById("events");
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
      item.textContent = event.type;
      list.appendChild(item);
      if (event.type === "DelegationCompleted") {{
        document.getElementById("status").textContent = "Finished.";
        reader.cancel();
        return;
      }}
    }}
  }}
}})();
</script>"#,
            id = esc(&id)
        ));
        return Ok(page(&format!("Run {id}"), &body).into_response());
    };
    let json = record.to_json();
    body.push_str(&format!(
        "<p id=\"outcome\">Outcome <b>{}</b>{} after {} attempt(s); delegate {}; task: {}</p>",
        esc(&record.outcome),
        record
            .error_kind
            .as_deref()
            .map(|k| format!(" ({})", esc(k)))
            .unwrap_or_default(),
        record.attempts.len(),
        esc(&record.delegate_kind),
        esc(json["request"]["task"].as_str().unwrap_or("-")),
    ));
    if let Some(o) = &decided {
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
        body.push_str(&format!("<pre id=\"error\">{}</pre>", esc(message)));
    }
    // Findings of the last attempt.
    let last = record.attempts.last();
    let findings: Vec<&harness::Finding> = last
        .and_then(|a| a.verdict.as_ref())
        .map(|v| v.findings.iter().collect())
        .unwrap_or_default();
    body.push_str("<h2>Findings</h2>");
    if findings.is_empty() {
        body.push_str("<p>None.</p>");
    } else {
        body.push_str(
            "<table id=\"findings\"><tr><th>Severity</th><th>Source</th><th>Message</th></tr>",
        );
        for f in findings {
            body.push_str(&format!(
                "<tr class=\"{}\"><td>{}</td><td>{}</td><td>{}</td></tr>",
                if f.blocking { "blocking" } else { "advisory" },
                esc(f.severity.as_str()),
                esc(f.source.as_str()),
                esc(&f.message),
            ));
        }
        body.push_str("</table>");
    }
    body.push_str("<h2>Evidence</h2>");
    let evidence = last
        .map(harness_records::RecordedAttempt::evidence)
        .unwrap_or_default();
    if evidence.is_empty() {
        body.push_str("<p>No evidence records: nothing but a verifier judged this run.</p>");
    } else {
        body.push_str("<table id=\"evidence\"><tr><th>Criterion</th><th>Source</th><th>Result</th><th>Proof</th></tr>");
        for e in evidence {
            body.push_str(&format!(
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                esc(&e.criterion),
                esc(&e.source),
                esc(e.result.as_str()),
                esc(e.proof.as_deref().unwrap_or("")),
            ));
        }
        body.push_str("</table>");
    }
    if let Some(changes) = last
        .and_then(|a| a.result.as_ref())
        .map(|r| &r["changes"])
        .filter(|c| c.is_object())
    {
        body.push_str(&format!(
            "<h2>Changes</h2><pre id=\"changes\">{}</pre>",
            esc(&serde_json::to_string_pretty(changes).unwrap_or_default())
        ));
    }
    for attempt in &record.attempts {
        if let Some(prompt) = &attempt.retry_prompt {
            body.push_str(&format!(
                "<details><summary>Retry prompt after attempt {} (reasons and diffs the delegate was shown)</summary><pre>{}</pre></details>",
                attempt.attempt + 1,
                esc(prompt)
            ));
        }
    }
    let awaiting = matches!(record.outcome.as_str(), "failed" | "passed_with_debt")
        && record.decision.is_none();
    // Forms need a browser session (a page read with the bearer header has none to offer).
    let csrf = app.session_csrf(&headers);
    if let (true, Some(csrf)) = (awaiting, csrf) {
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
                id = esc(&id),
                csrf = esc(&csrf)
            ));
        }
    }
    Ok(page(&format!("Run {id}"), &body).into_response())
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
    State(app): State<Shared>,
    UrlPath(id): UrlPath<String>,
    headers: HeaderMap,
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
    if !app
        .session_csrf(&headers)
        .is_some_and(|csrf| super::same_secret(&form.csrf, &csrf))
    {
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
                (header::SET_COOKIE, super::session_cookie(&session)),
                (header::LOCATION, "/".to_owned()),
            ],
        )
            .into_response(),
        Err(e) => e.into_response(),
    }
}
