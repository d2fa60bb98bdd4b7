//! `GET /metrics`: the server's counters in Prometheus' text exposition format.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::Ordering;

use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};

use super::app::Shared;
use super::auth::ApiRead;

/// Appends one metric family: its help, type and samples (`labels` as `key="value"`, or empty).
fn family(text: &mut String, name: &str, kind: &str, help: &str, samples: &[(String, u64)]) {
    text.push_str(&format!("# HELP {name} {help}\n# TYPE {name} {kind}\n"));
    for (labels, value) in samples {
        if labels.is_empty() {
            text.push_str(&format!("{name} {value}\n"));
        } else {
            text.push_str(&format!("{name}{{{labels}}} {value}\n"));
        }
    }
}

/// A labelled count per key, as samples.
fn by_label(label: &str, counts: &Mutex<HashMap<String, u64>>) -> Vec<(String, u64)> {
    counts
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .iter()
        .map(|(key, n)| (format!("{label}=\"{key}\""), *n))
        .collect()
}

/// `GET /metrics`: Prometheus text exposition.
pub(crate) async fn serve(_: ApiRead, State(app): State<Shared>) -> Response {
    let m = &app.metrics;
    let plain = |n: u64| vec![(String::new(), n)];
    let (running, queued) = {
        let live = app
            .live
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let queued = live.values().filter(|l| l.queued.is_some()).count();
        (live.len() - queued, queued)
    };
    let mut text = String::new();
    for (name, kind, help, samples) in [
        (
            "harness_delegations_submitted_total",
            "counter",
            "Delegations submitted to this server.",
            plain(m.submitted.load(Ordering::Relaxed)),
        ),
        (
            "harness_delegations_finished_total",
            "counter",
            "Delegations finished, by outcome.",
            by_label("outcome", &m.finished),
        ),
        (
            "harness_delegations_running",
            "gauge",
            "Delegations running in this server now.",
            plain(u64::try_from(running).unwrap_or(u64::MAX)),
        ),
        (
            "harness_delegations_queued",
            "gauge",
            "Delegations this server queued for workers, not reported yet.",
            plain(u64::try_from(queued).unwrap_or(u64::MAX)),
        ),
        (
            "harness_overrides_total",
            "counter",
            "Overrides decided through the API or the review page, by decision.",
            by_label("decision", &m.overrides),
        ),
        (
            "harness_http_requests_total",
            "counter",
            "Requests received.",
            plain(m.requests.load(Ordering::Relaxed)),
        ),
        (
            "harness_http_unauthorized_total",
            "counter",
            "Requests refused for a missing or wrong token.",
            plain(m.unauthorized.load(Ordering::Relaxed)),
        ),
        (
            "harness_http_cross_site_total",
            "counter",
            "Requests refused as a web page's doing: another origin changing something, or a Host that is not loopback on a server without a token.",
            plain(m.cross_site.load(Ordering::Relaxed)),
        ),
    ] {
        family(&mut text, name, kind, help, &samples);
    }
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], text).into_response()
}
