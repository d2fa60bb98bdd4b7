//! OTLP export end to end (DESIGN §4.14): the testkit's OTLP receiver on 127.0.0.1 — HTTP/protobuf
//! and gRPC, decoding the real protobuf types — receives what `harness run` exports, and the tests
//! read the story back from it: one trace per delegation under the GenAI span names
//! (`invoke_agent`, `chat`, `execute_tool`), its parent/child structure, every attribute, the
//! evaluation events and status, the metrics, and the W3C trace context passed to a caller's
//! trace, a model server and an agent CLI.
//!
//! The binary flushes before it exits; the tests still wait for the data with a deadline (never a
//! fixed sleep) and assert nothing about time.

use harness_testkit::model::{ModelServer, answer};
use harness_testkit::otlp::proto::common::v1::any_value;
use harness_testkit::otlp::proto::trace::v1::Span;
use harness_testkit::otlp::{
    Collected, Protocol, Receiver, Trace, attr, boolean, counter, events, hex, histogram, int,
    is_error, matches, show, sum_points, text,
};
use serde_json::{Value, json};

use crate::util::{Output, TempDir, closed_port, copy_tree, harness, repo_root};

/// The retry template version every delegation span carries.
const TEMPLATE_VERSION: &str = "retry-v3";

/// The metrics every delegation with hooks produces.
const METRICS: [&str; 4] = [
    "harness.delegations",
    "harness.delegation.verify_attempts",
    "harness.verify.duration",
    "harness.hook.decisions",
];

/// The root span of a scripted delegation.
const ROOT: &str = "invoke_agent scripted";

// ---------------------------------------------------------------------------------------------
// Running delegations.

/// Always lies: claims the file without writing it.
const ALWAYS_LIES: &str = r#"
def respond(request):
    return {"content": "Done, I created hello.txt"}
"#;

/// A copy of `examples/quickstart` (lies once, then writes hello.txt) in a temporary directory.
fn quickstart() -> TempDir {
    let dir = TempDir::new();
    copy_tree(&repo_root().join("examples/quickstart"), &dir.path());
    dir
}

/// The quickstart with a delegate that always lies and one retry.
fn exhausted() -> TempDir {
    let dir = quickstart();
    dir.write("agent.star", ALWAYS_LIES);
    let file = dir.read("delegation.yaml").expect("delegation.yaml");
    let file = file.replace("max_verify_retries: 2", "max_verify_retries: 1");
    assert!(file.contains("max_verify_retries: 1"), "{file}");
    dir.write("delegation.yaml", file);
    dir
}

/// Runs `harness --otlp-endpoint URL run delegation.yaml --json` in `dir` against `receiver`
/// (gRPC through `OTEL_EXPORTER_OTLP_PROTOCOL`), with `env` besides.
fn run_exported(dir: &TempDir, receiver: &Receiver, env: &[(&str, &str)]) -> (Output, Value) {
    let endpoint = receiver.endpoint();
    let mut command = harness([
        "--otlp-endpoint",
        endpoint.as_str(),
        "run",
        "delegation.yaml",
        "--json",
    ])
    .current_dir(dir.path());
    if receiver.protocol() == Protocol::Grpc {
        command = command.env("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc");
    }
    for (name, value) in env {
        command = command.env(name, value);
    }
    let out = command.run();
    let report = out.json();
    (out, report)
}

/// Waits until the delegation's root span and `metrics` arrived, then checks that every span
/// belongs to one trace whose id `--json` printed, and returns the trace.
fn collect(receiver: &Receiver, report: &Value, metrics: &[&str]) -> (Trace, Collected) {
    let collected = receiver.wait_until("the delegation's spans and metrics", |c| {
        let root = c.spans.iter().any(|s| s.name.starts_with("invoke_agent "));
        root && c.has_metrics(metrics)
    });
    let trace_id = report["trace_id"]
        .as_str()
        .unwrap_or_else(|| panic!("--json has no trace_id: {report}"));
    assert_eq!(trace_id.len(), 32, "{trace_id}");
    assert!(
        trace_id.chars().all(|c| c.is_ascii_hexdigit()),
        "{trace_id}"
    );
    for span in &collected.spans {
        assert_eq!(
            hex(&span.trace_id),
            trace_id,
            "span {} is not in the delegation's trace",
            span.name
        );
    }
    let trace = Trace {
        spans: collected.spans.clone(),
    };
    (trace, collected)
}

/// Checks the root span against the `--json` report and returns it.
#[track_caller]
fn root<'a>(trace: &'a Trace, report: &Value) -> &'a Span {
    let roots = trace.named(ROOT);
    assert_eq!(roots.len(), 1, "spans: {:?}", trace.names());
    let root = roots[0];
    assert!(root.parent_span_id.is_empty(), "{ROOT} has a parent");
    let a = &root.attributes;
    let id = report["id"].as_str().expect("id");
    assert_eq!(text(a, "gen_ai.operation.name"), "invoke_agent");
    assert_eq!(text(a, "gen_ai.agent.name"), "scripted");
    assert_eq!(text(a, "gen_ai.agent.id"), id);
    assert_eq!(text(a, "delegation.id"), id);
    assert_eq!(text(a, "delegation.kind"), "scripted");
    assert_eq!(
        int(a, "delegation.verify_attempts"),
        report["attempts"].as_i64().expect("attempts")
    );
    assert_eq!(
        boolean(a, "delegation.verify_passed"),
        report["verified"].as_bool().expect("verified")
    );
    assert_eq!(
        text(a, "delegation.outcome"),
        report["outcome"].as_str().expect("outcome")
    );
    assert_eq!(
        text(a, "delegation.retry_template.version"),
        TEMPLATE_VERSION
    );
    // Every other span hangs under it.
    for span in &trace.spans {
        if span.span_id != root.span_id {
            assert!(
                trace.descends_from(span, root),
                "{} is not under {ROOT}",
                span.name
            );
        }
    }
    root
}

/// The attempt spans under `root`, checked against the report's reasons.
#[track_caller]
fn attempts<'a>(trace: &'a Trace, root: &Span, report: &Value) -> Vec<&'a Span> {
    let mut attempts = trace.children(root, "delegation.attempt");
    // By their index, not their timestamps.
    attempts.sort_by_key(|s| match attr(&s.attributes, "attempt") {
        Some(any_value::Value::IntValue(i)) => *i,
        _ => i64::MAX,
    });
    let reasons = report["reasons"].as_array().expect("reasons");
    assert_eq!(attempts.len(), reasons.len(), "spans: {:?}", trace.names());
    for (index, (span, reasons)) in attempts.iter().zip(reasons).enumerate() {
        let a = &span.attributes;
        assert_eq!(int(a, "attempt"), index as i64);
        let reasons: Vec<&str> = reasons
            .as_array()
            .expect("a list of reasons")
            .iter()
            .map(|r| r.as_str().expect("a reason"))
            .collect();
        assert_eq!(boolean(a, "verify.passed"), reasons.is_empty());
        // What the attempt spent: its model calls' tokens together.
        for key in ["gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens"] {
            let calls: i64 = trace
                .below(span, "chat")
                .iter()
                .filter_map(|c| match attr(&c.attributes, key) {
                    Some(any_value::Value::IntValue(n)) => Some(*n),
                    _ => None,
                })
                .sum();
            assert_eq!(int(a, key), calls, "attempt {index}: {key}");
        }
        // The verdict as a GenAI evaluation event.
        let verdicts = events(span, "gen_ai.evaluation.result");
        assert_eq!(verdicts.len(), 1, "attempt {index}: {:?}", span.events);
        let e = &verdicts[0].attributes;
        assert_eq!(text(e, "gen_ai.evaluation.name"), "harness.verification");
        let label = if reasons.is_empty() { "pass" } else { "fail" };
        assert_eq!(text(e, "gen_ai.evaluation.score.label"), label);
        assert_eq!(text(e, "gen_ai.evaluation.explanation"), reasons.join("\n"));
        if reasons.is_empty() {
            assert!(attr(a, "verify.reasons").is_none(), "{}", show(a));
        } else {
            assert_eq!(text(a, "verify.reasons"), reasons.join("\n"));
        }
    }
    attempts
}

/// Checks the retry prompt events: on every attempt but the last of `attempts`, when it failed.
#[track_caller]
fn retry_events(attempts: &[&Span], reasons: &[&str]) {
    for (index, attempt) in attempts.iter().enumerate() {
        let sent = events(attempt, "retry prompt sent");
        let text_events = events(attempt, "retry prompt text");
        if index + 1 == attempts.len() {
            assert!(
                sent.is_empty() && text_events.is_empty(),
                "no retry follows the last attempt"
            );
            continue;
        }
        assert_eq!(sent.len(), 1, "attempt {index}: {:?}", attempt.events);
        assert_eq!(
            text(&sent[0].attributes, "template.version"),
            TEMPLATE_VERSION
        );
        assert_eq!(
            text_events.len(),
            1,
            "attempt {index}: {:?}",
            attempt.events
        );
        let a = &text_events[0].attributes;
        assert_eq!(text(a, "template.version"), TEMPLATE_VERSION);
        let prompt = text(a, "prompt");
        assert!(prompt.contains("VERIFICATION FAILED"), "{prompt}");
        assert!(prompt.contains(reasons[index]), "{prompt}");
    }
}

/// Checks a `chat` span.
#[track_caller]
fn chat(span: &Span) {
    let a = &span.attributes;
    assert_eq!(text(a, "gen_ai.operation.name"), "chat");
    assert_eq!(text(a, "gen_ai.provider.name"), "scripted");
    assert!(!is_error(span));
}

/// Checks an `execute_tool` span.
#[track_caller]
fn tool(span: &Span, name: &str, call_id: &str, failed: bool) {
    let a = &span.attributes;
    assert_eq!(text(a, "gen_ai.operation.name"), "execute_tool");
    assert_eq!(text(a, "gen_ai.tool.name"), name);
    assert_eq!(text(a, "gen_ai.tool.call.id"), call_id);
    assert_eq!(boolean(a, "tool.is_error"), failed);
}

/// Checks a `verify.inline` span.
#[track_caller]
fn inline(span: &Span, reason: Option<&str>) {
    let a = &span.attributes;
    match reason {
        None => {
            assert_eq!(text(a, "verify.outcome"), "passed");
            assert!(attr(a, "verify.reason").is_none(), "{}", show(a));
        }
        Some(reason) => {
            assert_eq!(text(a, "verify.outcome"), "failed");
            assert_eq!(text(a, "verify.reason"), reason);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The tests.

const NO_FILE: &str = "expected file hello.txt does not exist";

/// The quickstart: the lie, the verdict, the retry prompt, the corrective tool call and the
/// acceptance, as one connected trace.
fn lies_then_tells_the_truth(protocol: Protocol) {
    let receiver = Receiver::start(protocol);
    let dir = quickstart();
    let (out, report) = run_exported(&dir, &receiver, &[]);
    out.expect_code(0);
    assert_eq!(report["outcome"], json!("passed"));
    assert_eq!(report["attempts"], json!(2));
    let (trace, collected) = collect(&receiver, &report, &METRICS[..3]);

    let root = root(&trace, &report);
    let a = &root.attributes;
    assert_eq!(text(a, "delegation.verify_outcome"), "passed");
    assert!(attr(a, "error.type").is_none(), "{}", show(a));
    assert!(!is_error(root));

    let attempts = attempts(&trace, root, &report);
    assert_eq!(attempts.len(), 2);
    retry_events(&attempts, &[NO_FILE]);

    // Attempt 1: one model call (the lie), no tool call, the verifier says no.
    let (first, second) = (attempts[0], attempts[1]);
    let calls = trace.children(first, "chat");
    assert_eq!(calls.len(), 1);
    chat(calls[0]);
    assert!(trace.below(first, "execute_tool write_file").is_empty());
    let verify = trace.in_stage(first, "verify", "verify.inline");
    assert_eq!(verify.len(), 1);
    inline(verify[0], Some(NO_FILE));

    // Attempt 2: the model asks for write_file, the tool runs, the model answers, the verifier
    // accepts.
    let calls = trace.children(second, "chat");
    assert_eq!(calls.len(), 2);
    calls.iter().for_each(|c| chat(c));
    let tools = trace.children(second, "execute_tool write_file");
    assert_eq!(tools.len(), 1);
    let call_id = report["result"]["tool_calls"][0]["id"]
        .as_str()
        .expect("a tool call id");
    tool(tools[0], "write_file", call_id, false);
    let verify = trace.in_stage(second, "verify", "verify.inline");
    assert_eq!(verify.len(), 1);
    inline(verify[0], None);
    assert!(trace.named("hook.run").is_empty());

    // The resource names the service.
    assert!(
        collected
            .resources
            .iter()
            .all(|r| text(r, "service.name") == "harness"),
        "{:?}",
        collected
            .resources
            .iter()
            .map(|r| show(r))
            .collect::<Vec<_>>()
    );

    // Metrics.
    let labels = [
        ("delegation.kind", "scripted"),
        ("delegation.outcome", "passed"),
    ];
    assert_eq!(counter(&collected, "harness.delegations", &labels), 1);
    let attempts = histogram(&collected, "harness.delegation.verify_attempts", &labels);
    assert_eq!(attempts.count, 1);
    assert_eq!(attempts.sum, Some(2.0));
    let verify = histogram(
        &collected,
        "harness.verify.duration",
        &[("surface", "inline")],
    );
    assert_eq!(verify.count, 2);
}

#[test]
fn lies_then_tells_the_truth_over_http() {
    lies_then_tells_the_truth(Protocol::Http);
}

#[test]
fn lies_then_tells_the_truth_over_grpc() {
    lies_then_tells_the_truth(Protocol::Grpc);
}

/// Always lies, one retry: `failed`, `error.type` and an error status on the root span.
fn exhausts_its_retries(protocol: Protocol) {
    let receiver = Receiver::start(protocol);
    let dir = exhausted();
    let (out, report) = run_exported(&dir, &receiver, &[("OTEL_SERVICE_NAME", "telemetry-test")]);
    out.expect_code(1);
    assert_eq!(report["outcome"], json!("failed"));
    assert_eq!(report["error"]["kind"], json!("verification_failed"));
    let (trace, collected) = collect(&receiver, &report, &METRICS[..3]);

    let root = root(&trace, &report);
    let a = &root.attributes;
    assert_eq!(text(a, "delegation.verify_outcome"), "failed");
    assert!(!boolean(a, "delegation.verify_passed"));
    assert_eq!(int(a, "delegation.verify_attempts"), 2);
    assert_eq!(text(a, "error.type"), "verification_failed");
    assert!(is_error(root), "status: {:?}", root.status);

    let attempts = attempts(&trace, root, &report);
    assert_eq!(attempts.len(), 2);
    retry_events(&attempts, &[NO_FILE]);
    for attempt in &attempts {
        assert!(!boolean(&attempt.attributes, "verify.passed"));
        let calls = trace.children(attempt, "chat");
        assert_eq!(calls.len(), 1);
        chat(calls[0]);
        let verify = trace.in_stage(attempt, "verify", "verify.inline");
        assert_eq!(verify.len(), 1);
        inline(verify[0], Some(NO_FILE));
        // Failed verification is the delegate's failure, not the attempt span's error.
        assert!(!is_error(attempt));
    }

    // OTEL_SERVICE_NAME names the service.
    assert!(
        collected
            .resources
            .iter()
            .all(|r| text(r, "service.name") == "telemetry-test")
    );

    let labels = [
        ("delegation.kind", "scripted"),
        ("delegation.outcome", "failed"),
    ];
    assert_eq!(counter(&collected, "harness.delegations", &labels), 1);
    let attempts = histogram(&collected, "harness.delegation.verify_attempts", &labels);
    assert_eq!((attempts.count, attempts.sum), (1, Some(2.0)));
}

#[test]
fn an_exhausted_delegation_over_http() {
    exhausts_its_retries(Protocol::Http);
}

#[test]
fn an_exhausted_delegation_over_grpc() {
    exhausts_its_retries(Protocol::Grpc);
}

/// Writes out.txt in every attempt, then answers.
const WRITES: &str = r#"
def respond(request):
    last = request["messages"][-1]
    if last["role"] == "tool":
        return {"content": "Wrote out.txt"}
    return {"tool_calls": [{"name": "write_file", "arguments": {"path": "out.txt", "content": "data"}}]}
"#;

/// A post-verify hook that turns the first attempt down, and a tool.pre hook that allows; the
/// verifier logs a line. Exported over HTTP to `OTEL_EXPORTER_OTLP_ENDPOINT` (not the flag).
#[test]
fn hook_runs_and_verifier_logs_are_in_the_trace() {
    let receiver = Receiver::start(Protocol::Http);
    let dir = TempDir::new();
    dir.write("agent.star", WRITES);
    dir.write(
        "hooks/gate.md",
        "---\nevent: delegation.post_verify\nscript: |\n  def handle(event, payload):\n      if payload[\"attempt\"] == 0:\n          return block(\"first attempts are never accepted\")\n      return allow()\n---\n# Gate\n",
    );
    dir.write(
        "hooks/tool-guard.md",
        "---\nevent: tool.pre\ntools: [write_file]\nscript: |\n  def handle(event, payload):\n      return allow()\n---\n# Tool guard\n",
    );
    dir.write(
        "delegation.yaml",
        "task: \"Create out.txt\"\ndelegate: {kind: scripted, script: agent.star}\ntools: [write_file]\nhooks: [hooks]\nmax_verify_retries: 2\nverify: |\n  def run(result):\n      log(\"checking out.txt\")\n      return fs.stat(\"out.txt\") != None\n",
    );
    let out = harness(["run", "delegation.yaml", "--json"])
        .current_dir(dir.path())
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", &receiver.endpoint())
        .run();
    out.expect_code(0);
    let report = out.json();
    assert_eq!(report["outcome"], json!("passed"));
    assert_eq!(report["attempts"], json!(2));
    let (trace, collected) = collect(&receiver, &report, &METRICS);

    let root = root(&trace, &report);
    assert_eq!(
        text(&root.attributes, "delegation.verify_outcome"),
        "passed"
    );
    let attempts = attempts(&trace, root, &report);
    assert_eq!(attempts.len(), 2);
    let gate_reason = "hook gate: first attempts are never accepted";
    assert_eq!(text(&attempts[0].attributes, "verify.reasons"), gate_reason);
    retry_events(&attempts, &[gate_reason]);

    for (index, attempt) in attempts.iter().enumerate() {
        // The tool call, with its tool.pre hook run under it.
        let tools = trace.children(attempt, "execute_tool write_file");
        assert_eq!(tools.len(), 1);
        let call_id = format!("call_{}", index + 1);
        tool(tools[0], "write_file", &call_id, false);
        let guard = trace.children(tools[0], "hook.run");
        assert_eq!(guard.len(), 1);
        let a = &guard[0].attributes;
        assert_eq!(text(a, "hook.name"), "tool-guard");
        assert_eq!(text(a, "hook.event"), "tool.pre");
        assert_eq!(text(a, "hook.action"), "allow");

        // The inline verifier passes both times and its log line is an event on its span.
        let verify = trace.in_stage(attempt, "verify", "verify.inline");
        assert_eq!(verify.len(), 1);
        inline(verify[0], None);
        let logged = events(verify[0], "checking out.txt");
        assert_eq!(logged.len(), 1, "{:?}", verify[0].events);
        assert_eq!(text(&logged[0].attributes, "surface"), "verifier");

        // The post-verify hook: block on the first attempt, allow on the second.
        let gate = trace.in_stage(attempt, "hooks", "hook.run");
        assert_eq!(gate.len(), 1, "attempt {index}");
        let a = &gate[0].attributes;
        assert_eq!(text(a, "hook.name"), "gate");
        assert_eq!(text(a, "hook.event"), "delegation.post_verify");
        if index == 0 {
            assert_eq!(text(a, "hook.action"), "block");
            assert_eq!(text(a, "hook.reason"), "first attempts are never accepted");
        } else {
            assert_eq!(text(a, "hook.action"), "allow");
            assert!(attr(a, "hook.reason").is_none(), "{}", show(a));
        }
    }
    assert_eq!(trace.named("hook.run").len(), 4);

    // Metrics: hook decisions by event, hook and action; verification time by surface.
    let decisions = |event: &str, hook: &str, action: &str| {
        counter(
            &collected,
            "harness.hook.decisions",
            &[
                ("hook.event", event),
                ("hook.name", hook),
                ("hook.action", action),
            ],
        )
    };
    assert_eq!(decisions("tool.pre", "tool-guard", "allow"), 2);
    assert_eq!(decisions("delegation.post_verify", "gate", "block"), 1);
    assert_eq!(decisions("delegation.post_verify", "gate", "allow"), 1);
    for surface in ["inline", "hook"] {
        let point = histogram(
            &collected,
            "harness.verify.duration",
            &[("surface", surface)],
        );
        assert_eq!(point.count, 2, "surface {surface}");
    }
}

/// A collector that is down never fails a delegation (and the trace id is still printed).
#[test]
fn a_receiver_that_is_down_does_not_fail_the_delegation() {
    for protocol in [None, Some("grpc")] {
        let dir = quickstart();
        let endpoint = format!("http://127.0.0.1:{}", closed_port());
        let mut command = harness([
            "--otlp-endpoint",
            endpoint.as_str(),
            "run",
            "delegation.yaml",
            "--json",
        ])
        .current_dir(dir.path());
        if let Some(protocol) = protocol {
            command = command.env("OTEL_EXPORTER_OTLP_PROTOCOL", protocol);
        }
        let out = command.run();
        out.expect_code(0);
        let report = out.json();
        assert_eq!(report["outcome"], json!("passed"), "{protocol:?}");
        assert!(report["trace_id"].is_string(), "{protocol:?}: {report}");
        assert_eq!(dir.read("workspace/hello.txt").as_deref(), Some("hi\n"));
        if protocol.is_none() {
            // Said once, however many exports fail (spans and metrics, at every flush).
            let said = out.stderr.matches("OTLP export failed").count();
            assert_eq!(said, 1, "{}", out.stderr);
            assert!(
                out.stderr.contains("refused the connection"),
                "{}",
                out.stderr
            );
        }
    }
}

/// A verifier's reason may quote a secret: the trace gets it scrubbed, as the record does (the
/// attempt span's `verify.reasons` and the evaluation event's explanation).
#[test]
fn secrets_in_reasons_are_scrubbed_from_the_trace() {
    const SECRET: &str = "sk-abcdefghijklmnop1234";
    let receiver = Receiver::start(Protocol::Http);
    let dir = quickstart();
    dir.write("agent.star", ALWAYS_LIES);
    dir.write(
        "delegation.yaml",
        format!(
            "task: t\ndelegate: {{kind: scripted, script: agent.star}}\nverify: |\n  def run(result):\n      return {{\"verified\": False, \"reason\": \"the key {SECRET} leaked\"}}\nmax_verify_retries: 0\nworkdir: workspace\n"
        ),
    );
    let (out, report) = run_exported(&dir, &receiver, &[]);
    out.expect_code(1);
    let (trace, _) = collect(&receiver, &report, &METRICS[..2]);
    let root = root(&trace, &report);
    let attempts = attempts(&trace, root, &report);
    let reasons = text(&attempts[0].attributes, "verify.reasons");
    assert!(reasons.contains("[REDACTED]"), "{reasons}");
    for span in &trace.spans {
        let shown = format!("{span:?}");
        assert!(
            !shown.contains(SECRET),
            "{} carries the secret: {shown}",
            span.name
        );
    }
}

/// Without `--json`, the trace id is on stderr with the `HARNESS_TRACE_URL` link; without any
/// OTLP configuration there is no trace id at all.
#[test]
fn the_trace_id_and_link_are_printed() {
    let receiver = Receiver::start(Protocol::Http);
    let dir = quickstart();
    let endpoint = receiver.endpoint();
    let out = harness([
        "run",
        "delegation.yaml",
        "--otlp-endpoint",
        endpoint.as_str(),
    ])
    .current_dir(dir.path())
    .env(
        "HARNESS_TRACE_URL",
        "http://localhost:16686/trace/{trace_id}",
    )
    .run();
    out.expect_code(0);
    let line = out
        .stderr
        .lines()
        .find_map(|l| l.strip_prefix("trace: "))
        .unwrap_or_else(|| panic!("no trace line:\n{out:?}"));
    let (id, url) = line
        .split_once(' ')
        .unwrap_or_else(|| panic!("no link: {line}"));
    assert_eq!(url, format!("http://localhost:16686/trace/{id}"));
    let collected = receiver.wait_until("the delegation span", |c| c.has_span(ROOT));
    let root = collected.span(ROOT).expect("the root span");
    assert_eq!(hex(&root.trace_id), id);

    let dir = quickstart();
    let out = harness(["run", "delegation.yaml", "--json"])
        .current_dir(dir.path())
        .run();
    out.expect_code(0);
    assert_eq!(out.json()["trace_id"], Value::Null);
    let out = harness(["run", "delegation.yaml"])
        .current_dir(dir.path())
        .env(
            "HARNESS_TRACE_URL",
            "http://localhost:16686/trace/{trace_id}",
        )
        .run();
    out.expect_code(0);
    assert!(!out.stderr.contains("trace:"), "{out:?}");
}

/// A caller's W3C trace context (in the `TRACEPARENT` variable).
const CALLER_TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CALLER_SPAN: &str = "00f067aa0ba902b7";

fn caller_traceparent() -> String {
    format!("00-{CALLER_TRACE}-{CALLER_SPAN}-01")
}

/// With `TRACEPARENT` set, the delegation continues the caller's trace: its root span is a child
/// of the caller's span, and every span and the printed trace id are the caller's trace.
#[test]
fn a_callers_traceparent_is_the_parent_of_the_delegation() {
    let receiver = Receiver::start(Protocol::Http);
    let dir = quickstart();
    let traceparent = caller_traceparent();
    let (out, report) = run_exported(&dir, &receiver, &[("TRACEPARENT", traceparent.as_str())]);
    out.expect_code(0);
    assert_eq!(report["trace_id"], json!(CALLER_TRACE));
    let collected = receiver.wait_until("the delegation span", |c| c.has_span(ROOT));
    let root = collected.span(ROOT).expect("the root span");
    assert_eq!(hex(&root.parent_span_id), CALLER_SPAN);
    for span in &collected.spans {
        assert_eq!(hex(&span.trace_id), CALLER_TRACE, "span {}", span.name);
    }

    // A value that is not a traceparent is named on stderr and a new trace starts.
    let dir = quickstart();
    let (out, report) = run_exported(&dir, &receiver, &[("TRACEPARENT", "00-not-a-trace-01")]);
    out.expect_code(0);
    assert!(
        out.stderr
            .contains("TRACEPARENT=\"00-not-a-trace-01\" is not a W3C traceparent"),
        "{out:?}"
    );
    let id = report["trace_id"].as_str().expect("a trace id");
    assert_ne!(id, CALLER_TRACE);
}

/// The model server receives the `traceparent` of the `chat` span that made the request, so its
/// own spans join the delegation's trace.
#[test]
fn model_requests_carry_the_trace_context() {
    let receiver = Receiver::start(Protocol::Http);
    let server = ModelServer::start(|_, body| answer(body, "done"));
    let dir = TempDir::new();
    dir.write(
        "delegation.yaml",
        format!(
            "task: Say done\ndelegate: {{kind: openai, base_url: {:?}, model: fake, api_key_env: none}}\nverify: |\n  def run(result):\n      return result[\"response\"] == \"done\"\n",
            server.base_url()
        ),
    );
    let (out, report) = run_exported(&dir, &receiver, &[]);
    out.expect_code(0);
    let (trace, _) = collect(&receiver, &report, &[]);
    let chats = trace.named("chat fake");
    assert_eq!(chats.len(), 1, "spans: {:?}", trace.names());
    assert_eq!(text(&chats[0].attributes, "gen_ai.request.model"), "fake");
    assert_eq!(text(&chats[0].attributes, "gen_ai.provider.name"), "openai");
    let trace_id = report["trace_id"].as_str().expect("a trace id");
    let seen = server.seen();
    assert_eq!(seen.len(), 1);
    assert_eq!(
        seen[0].header("traceparent"),
        Some(format!("00-{trace_id}-{}-01", hex(&chats[0].span_id)).as_str())
    );

    // Exporting nothing, a caller's trace context still passes through unchanged.
    let traceparent = caller_traceparent();
    let out = harness(["run", "delegation.yaml"])
        .current_dir(dir.path())
        .env("TRACEPARENT", &traceparent)
        .run();
    out.expect_code(0);
    let seen = server.seen();
    assert_eq!(seen.len(), 2);
    assert_eq!(seen[1].header("traceparent"), Some(traceparent.as_str()));

    // And with no trace at all, there is no header.
    let out = harness(["run", "delegation.yaml"])
        .current_dir(dir.path())
        .run();
    out.expect_code(0);
    assert_eq!(server.seen()[2].header("traceparent"), None);
}

/// An agent CLI gets `TRACEPARENT` naming the `chat` span it runs under, so a CLI that traces
/// (or a wrapper script) joins the delegation's trace.
#[test]
fn agent_clis_get_the_trace_context_in_traceparent() {
    let receiver = Receiver::start(Protocol::Http);
    let dir = TempDir::new();
    dir.write(
        "delegation.yaml",
        "task: Record the trace context\ndelegate: {kind: command, command: [sh, -c, 'printf %s \"$TRACEPARENT\" > traceparent.txt; echo Done']}\nverify: |\n  def run(result):\n      return fs.stat(\"traceparent.txt\") != None\n",
    );
    let (out, report) = run_exported(&dir, &receiver, &[]);
    out.expect_code(0);
    let (trace, _) = collect(&receiver, &report, &[]);
    let root = trace.named("invoke_agent sh");
    assert_eq!(root.len(), 1, "spans: {:?}", trace.names());
    assert_eq!(text(&root[0].attributes, "gen_ai.agent.name"), "sh");
    let chats = trace.named("chat");
    assert_eq!(chats.len(), 1, "spans: {:?}", trace.names());
    let trace_id = report["trace_id"].as_str().expect("a trace id");
    assert_eq!(
        dir.read("traceparent.txt"),
        Some(format!("00-{trace_id}-{}-01", hex(&chats[0].span_id)))
    );

    // Exporting nothing, the caller's context passes through.
    let traceparent = caller_traceparent();
    let out = harness(["run", "delegation.yaml"])
        .current_dir(dir.path())
        .env("TRACEPARENT", &traceparent)
        .run();
    out.expect_code(0);
    assert_eq!(dir.read("traceparent.txt"), Some(traceparent));
}

/// A hook that outruns the inline budget (1 ms on the async worker) finishes on a blocking
/// thread in the same `hook.run` span: one span per hook run, however loaded the machine.
#[test]
fn a_hook_that_outruns_the_inline_budget_is_one_span() {
    let receiver = Receiver::start(Protocol::Http);
    let dir = quickstart();
    dir.write(
        "hooks/slow.md",
        "---\nevent: delegation.post_verify\nscript: |\n  def handle(event, payload):\n      n = 0\n      for i in range(300000):\n          n += i\n      return allow()\n---\n",
    );
    let file = dir.read("delegation.yaml").expect("delegation.yaml");
    dir.write("delegation.yaml", format!("{file}hooks: [hooks]\n"));
    let (out, report) = run_exported(&dir, &receiver, &[]);
    out.expect_code(0);
    let (trace, _) = collect(&receiver, &report, &[]);
    let runs = trace.named("hook.run");
    let attempts = report["attempts"].as_u64().expect("attempts") as usize;
    assert_eq!(runs.len(), attempts, "spans: {:?}", trace.names());
    for run in runs {
        assert_eq!(text(&run.attributes, "hook.name"), "slow");
        assert_eq!(text(&run.attributes, "hook.action"), "allow");
    }
}

/// An agent CLI's session id is on every `chat` span once the CLI reported it, the same on the
/// first run and on the resumed one; the retry's CLI run joins the delegation's trace.
#[test]
fn an_agent_clis_session_is_on_its_chat_spans() {
    let receiver = Receiver::start(Protocol::Http);
    let dir = TempDir::new();
    let fake = repo_root().join("tests/fixtures/agents/claude");
    dir.write(
        "delegation.yaml",
        format!(
            "task: Create hello.txt\ndelegate: {{kind: claude, binary: {:?}}}\nverify: |\n  def run(result):\n      return fs.stat(\"hello.txt\") != None\n",
            fake.display()
        ),
    );
    // The CLI's own configuration directory is made in HOME: a test's, not the user's.
    let home = dir.join("home").display().to_string();
    let (out, report) = run_exported(&dir, &receiver, &[("HOME", home.as_str())]);
    out.expect_code(0);
    assert_eq!(report["attempts"], json!(2));
    let (trace, _) = collect(&receiver, &report, &[]);
    let chats = trace.named("chat");
    assert_eq!(chats.len(), 2, "spans: {:?}", trace.names());
    for chat in chats {
        assert_eq!(
            text(&chat.attributes, "gen_ai.conversation.id"),
            "5f0c1a2e-0d5b-4b8e-9c57-1f3e0a9b7c21"
        );
        assert_eq!(text(&chat.attributes, "gen_ai.provider.name"), "claude");
    }
}

/// `OTEL_TRACES_SAMPLER=always_off`: no spans leave and no trace id is printed, while metrics
/// still do.
#[test]
fn a_sampler_that_drops_the_trace_exports_no_spans() {
    let receiver = Receiver::start(Protocol::Http);
    let dir = quickstart();
    let (out, report) = run_exported(&dir, &receiver, &[("OTEL_TRACES_SAMPLER", "always_off")]);
    out.expect_code(0);
    assert_eq!(report["trace_id"], Value::Null);
    // Spans are flushed before metrics at exit, so by the time the metrics are here any span
    // would be too.
    let collected = receiver.wait_until("the metrics", |c| c.has_metrics(&METRICS[..1]));
    assert!(collected.spans.is_empty(), "{:?}", collected.spans);
}

/// A `--otlp-endpoint` that is not an http(s) base URL is a usage error naming the fix, before
/// anything runs.
#[test]
fn a_bad_otlp_endpoint_is_a_usage_error() {
    let dir = quickstart();
    for bad in ["localhost:4318", "grpc://localhost:4317"] {
        let out = harness(["--otlp-endpoint", bad, "run", "delegation.yaml"])
            .current_dir(dir.path())
            .run();
        out.expect_code(2);
        assert!(out.stderr.contains("--otlp-endpoint"), "{out:?}");
        assert!(out.stderr.contains("http://localhost:4318"), "{out:?}");
        assert_eq!(dir.read("workspace/hello.txt"), None, "the delegation ran");
    }
}

/// Every span event named `name`, anywhere in the trace, with the span it was recorded on.
fn run_events<'a>(trace: &'a Trace, name: &str) -> Vec<(&'a Span, serde_json::Value)> {
    let mut found = Vec::new();
    for span in &trace.spans {
        for event in events(span, name) {
            let body = text(&event.attributes, "harness.event.body");
            let body: Value = serde_json::from_str(body)
                .unwrap_or_else(|e| panic!("{name}: harness.event.body is not JSON ({e}): {body}"));
            found.push((span, body));
        }
    }
    found
}

/// `examples/checks`: the run events (DESIGN §4.12) reach the trace as span events, each with
/// its JSON body, under the delegation's spans — the failed `tests` check on the first attempt
/// and the passed one on the second.
#[test]
fn run_events_are_span_events_in_the_trace() {
    let receiver = Receiver::start(Protocol::Http);
    let dir = TempDir::new();
    copy_tree(&repo_root().join("examples/checks"), &dir.path());
    let (out, report) = run_exported(&dir, &receiver, &[]);
    out.expect_code(0);
    assert_eq!(report["outcome"], json!("passed"));
    assert_eq!(report["attempts"], json!(2));
    let (trace, _) = collect(&receiver, &report, &METRICS[..2]);
    let root = root(&trace, &report);
    let attempts = attempts(&trace, root, &report);
    assert_eq!(attempts.len(), 2);

    let started = run_events(&trace, "DelegationStarted");
    assert_eq!(started.len(), 1, "{:?}", trace.names());
    assert_eq!(started[0].0.span_id, root.span_id);
    let completed = run_events(&trace, "DelegationCompleted");
    assert_eq!(completed.len(), 1);
    assert_eq!(completed[0].0.span_id, root.span_id);
    assert_eq!(completed[0].1["outcome"], json!("passed"));

    let tests: Vec<_> = run_events(&trace, "CheckCompleted")
        .into_iter()
        .filter(|(_, body)| body["check_name"] == json!("tests"))
        .collect();
    assert_eq!(tests.len(), 2, "one `tests` check per attempt");
    for (index, attempt) in attempts.iter().enumerate() {
        let (span, body) = tests
            .iter()
            .find(|(span, _)| *span == *attempt || trace.descends_from(span, attempt))
            .unwrap_or_else(|| panic!("no CheckCompleted under attempt {index}"));
        assert_eq!(body["passed"], json!(index == 1), "attempt {index}: {body}");
        assert_eq!(body["required"], json!(true));
        let seq = events(span, "CheckCompleted")
            .iter()
            .map(|e| int(&e.attributes, "harness.event.seq"))
            .min()
            .expect("a seq");
        assert!(seq > 0, "DelegationStarted is event 0");
    }
}

/// `harness override` exports the `harness.overrides` counter: decisions and refusals by type.
#[test]
fn overrides_and_refusals_are_counted() {
    let receiver = Receiver::start(Protocol::Http);
    let dir = exhausted();
    let out = harness(["run", "delegation.yaml", "--json", "--journal", "runs.db"])
        .current_dir(dir.path())
        .run();
    out.expect_code(1);
    let id = out.json()["id"].as_str().expect("id").to_owned();
    let endpoint = receiver.endpoint();
    let decide = |extra: &[&str]| {
        harness([
            "--otlp-endpoint",
            endpoint.as_str(),
            "override",
            id.as_str(),
        ])
        .args([
            "--approve",
            "--type",
            "check",
            "--user",
            "ann",
            "--journal",
            "runs.db",
        ])
        .args(extra)
        .current_dir(dir.path())
        .run()
    };
    // Each process exports its own counts when it exits: look at each in turn.
    let counted = |decision: &str| {
        let want = [("override.type", "check"), ("override.decision", decision)];
        let collected = receiver.wait_until(decision, |c| {
            c.has_metrics(&["harness.overrides"])
                && sum_points(c.metric("harness.overrides"))
                    .iter()
                    .any(|p| matches(&p.attributes, &want))
        });
        counter(&collected, "harness.overrides", &want)
    };
    // No reason: refused, and counted as such.
    decide(&[])
        .expect_code(2)
        .expect_stderr_kind("reason_required");
    assert_eq!(counted("reason_required"), 1);
    decide(&["--reason", "checked by hand"]).expect_code(0);
    assert_eq!(counted("approved"), 1);
}

/// A delegation tree is one trace: each child's `invoke_agent` span is a child of the parent's
/// `execute_tool delegate` span, which its attempt holds.
#[test]
fn a_delegation_tree_is_one_trace() {
    let receiver = Receiver::start(Protocol::Http);
    let dir = TempDir::new();
    copy_tree(&repo_root().join("examples/fan-out"), &dir.path());
    let (out, report) = run_exported(&dir, &receiver, &[]);
    out.expect_code(0);
    let collected = receiver.wait_until("the parent's and its children's spans", |c| {
        c.spans.iter().filter(|s| s.name == ROOT).count() == 4
    });
    let trace = Trace {
        spans: collected.spans.clone(),
    };
    let trace_id = report["trace_id"].as_str().expect("trace id");
    assert!(
        trace.spans.iter().all(|s| hex(&s.trace_id) == trace_id),
        "every span of the tree is in the parent's trace"
    );
    let roots: Vec<&Span> = trace
        .named(ROOT)
        .into_iter()
        .filter(|s| trace.parent(s).is_none())
        .collect();
    assert_eq!(roots.len(), 1, "one root: {:?}", trace.names());
    let calls = trace.below(roots[0], "execute_tool delegate");
    assert_eq!(calls.len(), 3, "{:?}", trace.names());
    for call in calls {
        let children = trace.children(call, ROOT);
        assert_eq!(children.len(), 1, "one child delegation per call");
        let a = &children[0].attributes;
        let id = text(a, "delegation.id");
        assert!(
            report["children"]
                .as_array()
                .expect("children")
                .iter()
                .any(|c| c["id"] == json!(id)),
            "{id} is one of the report's children"
        );
    }
}
