//! The floor: the requests of a two-attempt delegation sent by a plain reqwest loop, with no
//! verification, hooks, spans or journal.
//!
//! ```text
//! bare-reqwest BASE_URL [--delegations N] [--concurrency C]
//! ```
//!
//! Sends N first-attempt bodies and N retry bodies (each "delegation" is one of each, in order)
//! to `BASE_URL/v1/chat/completions` with at most C delegations in flight, parsing every answer
//! as JSON. The bodies are the ones the fake server saw first from harness (`GET /samples`), or a
//! built-in approximation when it has seen none. Prints one JSON summary line on stdout (wall
//! time, CPU, peak RSS, requests, errors) and a readable one on stderr.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use harness_bench::process_usage;
use serde_json::{Value, json};

/// The same per-request timeout as harness's openai delegate default.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(120);

fn usage() -> ! {
    eprintln!("usage: bare-reqwest BASE_URL [--delegations N] [--concurrency C]");
    std::process::exit(2);
}

fn fallback_bodies() -> (Value, Value) {
    let task = "Describe widget 1 as a JSON object with a string `name` and an integer `id`.";
    let first = json!({"model": "bench-model", "messages": [{"role": "user", "content": task}]});
    let retry = json!({"model": "bench-model", "messages": [
        {"role": "user", "content": task},
        {"role": "assistant", "content": "{\"name\": \"widget\"}"},
        {"role": "user", "content": "VERIFICATION FAILED (attempt 1).\n\n  > verify: the response has no `id`\n\nDo not claim success again."}
    ]});
    (first, retry)
}

async fn bodies(client: &reqwest::Client, base: &str) -> (Value, Value) {
    let fetched = async {
        let samples: Value = client
            .get(format!("{base}/samples"))
            .send()
            .await
            .ok()?
            .json()
            .await
            .ok()?;
        let first = samples.get("first").filter(|v| !v.is_null())?.clone();
        let retry = samples.get("retry").filter(|v| !v.is_null())?.clone();
        Some((first, retry))
    };
    match fetched.await {
        Some(found) => {
            eprintln!("bare-reqwest: replaying the request bodies harness sent");
            found
        }
        None => {
            eprintln!("bare-reqwest: the server has no samples yet; using built-in bodies");
            fallback_bodies()
        }
    }
}

/// Sends one body and returns the answer's content, or `None` on any failure.
async fn exchange(client: &reqwest::Client, url: &str, body: &Value) -> Option<String> {
    let response = client
        .post(url)
        .timeout(REQUEST_TIMEOUT)
        .json(body)
        .send()
        .await
        .ok()?;
    if !response.status().is_success() {
        return None;
    }
    let bytes = response.bytes().await.ok()?;
    let value: Value = serde_json::from_slice(&bytes).ok()?;
    value
        .pointer("/choices/0/message/content")
        .and_then(Value::as_str)
        .map(str::to_owned)
}

fn main() {
    let mut args = std::env::args().skip(1);
    let Some(base) = args.next() else { usage() };
    let base = base.trim_end_matches('/').to_owned();
    let mut delegations: u64 = 2_000;
    let mut concurrency: u64 = 32;
    while let Some(arg) = args.next() {
        let value = args.next().and_then(|v| v.parse::<u64>().ok());
        match (arg.as_str(), value) {
            ("--delegations", Some(n)) => delegations = n,
            ("--concurrency", Some(c)) if c > 0 => concurrency = c,
            _ => usage(),
        }
    }
    // The same runtime shape as the harness binary: multi-threaded, one worker per core.
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("bare-reqwest: cannot start the runtime: {e}");
            std::process::exit(1);
        }
    };
    let code = runtime.block_on(async move {
        let client = match harness_builtins::http_client_builder().build() {
            Ok(client) => client,
            Err(e) => {
                eprintln!("bare-reqwest: cannot build the HTTP client: {e}");
                return 1;
            }
        };
        let (first, retry) = bodies(&client, &base).await;
        let url = format!("{base}/v1/chat/completions");
        let shared = Arc::new((client, url, first, retry));
        let next = Arc::new(AtomicU64::new(0));
        let sent = Arc::new(AtomicU64::new(0));
        let errors = Arc::new(AtomicU64::new(0));
        let before = process_usage();
        let started = Instant::now();
        let mut workers = tokio::task::JoinSet::new();
        for _ in 0..concurrency.min(delegations) {
            let shared = Arc::clone(&shared);
            let next = Arc::clone(&next);
            let sent = Arc::clone(&sent);
            let errors = Arc::clone(&errors);
            workers.spawn(async move {
                let (client, url, first, retry) = &*shared;
                // Bounded: every worker stops once all N delegations are claimed.
                while next.fetch_add(1, Ordering::Relaxed) < delegations {
                    for body in [first, retry] {
                        sent.fetch_add(1, Ordering::Relaxed);
                        if exchange(client, url, body).await.is_none() {
                            errors.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
            });
        }
        while workers.join_next().await.is_some() {}
        let wall = started.elapsed();
        let after = process_usage();
        let cpu = match (before, after) {
            (Some(b), Some(a)) => Some(a.cpu.saturating_sub(b.cpu)),
            _ => None,
        };
        let requests = sent.load(Ordering::Relaxed);
        let errors = errors.load(Ordering::Relaxed);
        let summary = json!({
            "delegations": delegations,
            "concurrency": concurrency,
            "requests": requests,
            "errors": errors,
            "wall_s": wall.as_secs_f64(),
            "delegations_per_s": delegations as f64 / wall.as_secs_f64(),
            "cpu_s": cpu.map(|c| c.as_secs_f64()),
            "peak_rss_kib": after.map(|a| a.peak_rss_kib),
        });
        println!("{summary}");
        eprintln!(
            "bare-reqwest: {delegations} delegations ({requests} requests, {errors} errors) in {:.3}s, {:.0}/s; CPU {}",
            wall.as_secs_f64(),
            delegations as f64 / wall.as_secs_f64(),
            cpu.map_or("unknown".to_owned(), |c| format!(
                "{:.3}s ({:.1} µs per delegation)",
                c.as_secs_f64(),
                c.as_secs_f64() * 1e6 / delegations.max(1) as f64
            ))
        );
        i32::from(errors > 0)
    });
    std::process::exit(code);
}
