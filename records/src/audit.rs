//! The integrity audit of a recorded run (DESIGN §4.13): [`audit`] re-verifies a
//! `harness.run/v1` export offline and fail-closed. The seal and the signature are checked over
//! the document as it is (every byte of it counts); then `fields` reads it into the one
//! [`RunDocument`](crate::export::RunDocument) type the journal writes and the schema is
//! generated from, and the named steps of `AUDIT_STEPS` run over that, one function each.
//! Whatever a step cannot read or check is a failure with a machine-readable code, never
//! skipped. Adding a step is one function and one row.

use std::path::{Path, PathBuf};

use ed25519_dalek::VerifyingKey;
use serde_json::{Map, Value, json};
use sha2::{Digest as _, Sha256};

use crate::canon::GENESIS;
use crate::export::{
    AttemptPart, Exported, RUN_SCHEMA, children_in, completion_seal, key_id, seal,
};
use harness_builtins::hex;

/// What an [`audit`] checks the document against besides itself.
#[derive(Debug, Clone, Default)]
pub struct AuditOptions<'a> {
    /// Where the evidence files are (default: the run's own `workdir`).
    pub workdir: Option<&'a Path>,
    /// Seals the export must carry, each with where it was kept (`the journal …`,
    /// `--expect-seal`); `None` where that place holds none (a run that never completed, or
    /// was recorded before seals), which fails.
    pub expected_seals: Vec<(String, Option<String>)>,
    /// The operator's public key: the export must carry a valid signature by it.
    pub public_key: Option<VerifyingKey>,
    /// The exports of every run the journal records as delegated from this one (DESIGN §9);
    /// `None` when no journal was given, which fails an export that names children.
    pub children: Option<Vec<Value>>,
}

/// One failure of an audit: a code of DESIGN §4.13, what is wrong, and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditFailure {
    /// `schema_version`, `missing_field`, `event_order`, `chain_broken`, `tool_linkage`,
    /// `evidence_missing`, `evidence_hash_mismatch`, …
    pub code: &'static str,
    /// What is wrong.
    pub message: String,
    /// Where: `event 17`, `attempt 1 call_3`, `evidence calc.sh`, `run.outcome`.
    pub at: String,
}

/// What an audit found (DESIGN §4.13's VerificationReport).
#[derive(Debug, Clone, PartialEq)]
pub struct VerificationReport {
    /// The schema the document says it is in.
    pub schema_version: Option<String>,
    /// Each check and whether it passed.
    pub checks: Vec<(&'static str, bool)>,
    /// Every failure, in the order found.
    pub failures: Vec<AuditFailure>,
    /// Counts: events, tool_calls, tool_results, citations, evidence_files, claims, insufficient.
    pub metrics: Map<String, Value>,
}

impl VerificationReport {
    /// True when nothing failed.
    pub fn valid(&self) -> bool {
        self.failures.is_empty()
    }

    /// As JSON (`harness audit --json`).
    pub fn to_json(&self) -> Value {
        json!({
            "valid": self.valid(),
            "schema_version": self.schema_version,
            "checks": self.checks.iter().map(|(name, passed)| json!({"name": name, "passed": passed})).collect::<Vec<_>>(),
            "failures": self.failures.iter().map(|f| json!({
                "code": f.code, "severity": "hard", "message": f.message, "at": f.at,
            })).collect::<Vec<_>>(),
            "summary_metrics": self.metrics,
        })
    }
}

/// Collects the failures of one step of an audit, and the counts it makes.
struct Check<'a> {
    name: &'static str,
    failures: &'a mut Vec<AuditFailure>,
    metrics: &'a mut Map<String, Value>,
    before: usize,
}

impl<'a> Check<'a> {
    fn new(
        name: &'static str,
        failures: &'a mut Vec<AuditFailure>,
        metrics: &'a mut Map<String, Value>,
    ) -> Self {
        let before = failures.len();
        Check {
            name,
            failures,
            metrics,
            before,
        }
    }

    fn fail(&mut self, code: &'static str, at: impl Into<String>, message: impl Into<String>) {
        self.failures.push(AuditFailure {
            code,
            message: message.into(),
            at: at.into(),
        });
    }

    /// Sets one of the report's `summary_metrics`.
    fn count(&mut self, key: &str, value: usize) {
        self.metrics.insert(key.to_owned(), json!(value));
    }

    fn done(self) -> (&'static str, bool) {
        (self.name, self.failures.len() == self.before)
    }
}

/// What every step after `fields` reads: the document as a [`RunDocument`](Exported), the
/// options, and where its files are.
struct Audited<'a> {
    document: &'a Exported<'a>,
    options: &'a AuditOptions<'a>,
    /// The workspace evidence and citations are read in: `options.workdir`, else the run's own.
    root: Option<PathBuf>,
    /// The last attempt that has a result: the answer the run delivered.
    last: Option<&'a AttemptPart<'a, Value>>,
}

impl<'a> Audited<'a> {
    fn new(document: &'a Exported<'a>, options: &'a AuditOptions<'a>) -> Self {
        Audited {
            document,
            options,
            root: options
                .workdir
                .map(Path::to_path_buf)
                .or_else(|| document.run.workdir.as_deref().map(PathBuf::from)),
            last: document
                .attempts
                .iter()
                .rev()
                .find(|a| a.result.as_ref().is_some_and(Value::is_object)),
        }
    }
}

/// One named check of an audit over the document read: when it applies, and what it inspects.
struct AuditStep {
    name: &'static str,
    applies: fn(&Audited<'_>) -> bool,
    inspect: fn(&Audited<'_>, &mut Check<'_>),
}

/// Applies to every run.
fn always(_: &Audited<'_>) -> bool {
    true
}

/// The audit's checks of the document read, in the order they run and are reported (after
/// `schema_version`, `seal`, `signature` and `fields`, which read the document as it is).
const AUDIT_STEPS: &[AuditStep] = &[
    AuditStep {
        name: "event_order",
        applies: always,
        inspect: events_in_order,
    },
    AuditStep {
        name: "event_chain",
        applies: always,
        inspect: events_chained,
    },
    AuditStep {
        name: "complete",
        applies: always,
        inspect: story_ends,
    },
    AuditStep {
        name: "tool_linkage",
        applies: always,
        inspect: tools_linked,
    },
    AuditStep {
        name: "evidence_files",
        applies: always,
        inspect: evidence_unchanged,
    },
    AuditStep {
        name: "citations",
        applies: |a| a.document.run.citations == "required",
        inspect: citations_hold,
    },
    AuditStep {
        name: "required_steps",
        applies: |a| {
            a.document
                .plan
                .as_ref()
                .is_some_and(|p| p.required_steps.is_array())
        },
        inspect: required_steps_taken,
    },
    AuditStep {
        name: "delegation_linkage",
        applies: always,
        inspect: delegation_linkage,
    },
];

/// Re-verifies a `harness.run/v1` document. Evidence files are looked for under
/// `options.workdir` (default: the run's own `workdir`); a file that cannot be read there is
/// `evidence_missing`, one reached through a link `evidence_link`. A document of another schema
/// is read no further than its `schema_version`: its fields may mean something else.
pub fn audit(document: &Value, options: &AuditOptions<'_>) -> VerificationReport {
    let mut failures = Vec::new();
    let mut metrics = Map::new();
    let schema_version = document["schema_version"].as_str().map(str::to_owned);
    let run_document = schema_version.as_deref() == Some(RUN_SCHEMA);
    if run_document {
        counted(document, &mut metrics);
    }
    let mut checks = Vec::new();
    let mut step = |name, inspect: &mut dyn FnMut(&mut Check<'_>)| {
        let mut check = Check::new(name, &mut failures, &mut metrics);
        inspect(&mut check);
        checks.push(check.done());
    };
    step("schema_version", &mut |c| {
        schema_known(schema_version.as_deref(), c);
    });
    if run_document {
        let sealed = seal(document);
        step("seal", &mut |c| seal_matches(document, &sealed, options, c));
        if let Some(key) = &options.public_key {
            step("signature", &mut |c| {
                signature_holds(&document["signature"], &sealed, key, c);
            });
        }
        let read = Exported::read(document);
        step("fields", &mut |c| fields_read(read.as_ref().err(), c));
        match &read {
            Ok(read) => {
                let audited = Audited::new(read, options);
                for audit_step in AUDIT_STEPS.iter().filter(|s| (s.applies)(&audited)) {
                    step(audit_step.name, &mut |c| (audit_step.inspect)(&audited, c));
                }
            }
            // What cannot be read cannot be checked: failed, with `fields` saying why.
            Err(_) => checks.extend(AUDIT_STEPS.iter().map(|s| (s.name, false))),
        }
    }
    VerificationReport {
        schema_version,
        checks,
        failures,
        metrics,
    }
}

/// The counts every report of a run document has (the steps that make the rest set them), the
/// events' and evidence files' made here.
fn counted(document: &Value, metrics: &mut Map<String, Value>) {
    let events = items(&document["events"]).len();
    let evidence = items(&document["evidence"]).len();
    for (key, count) in [
        ("events", events),
        ("tool_calls", 0),
        ("tool_results", 0),
        ("citations", 0),
        ("evidence_files", evidence),
        ("claims", 0),
        ("insufficient", 0),
    ] {
        metrics.insert(key.to_owned(), json!(count));
    }
}

/// `schema_version`: the one schema this harness reads.
fn schema_known(schema_version: Option<&str>, check: &mut Check<'_>) {
    match schema_version {
        Some(RUN_SCHEMA) => {}
        Some(other) => check.fail(
            "schema_version",
            "schema_version",
            format!("unknown schema {other:?}; this harness reads {RUN_SCHEMA}"),
        ),
        None => check.fail(
            "schema_version",
            "schema_version",
            format!("no schema_version; expected {RUN_SCHEMA}"),
        ),
    }
}

/// `seal`: the content hashes to the seal it carries, and to every seal kept elsewhere (the
/// journal's, `--expect-seal`).
fn seal_matches(document: &Value, sealed: &str, options: &AuditOptions<'_>, check: &mut Check<'_>) {
    match document["seal"].as_str() {
        None => check.fail(
            "seal_mismatch",
            "seal",
            "the export carries no seal: nothing shows it is the run as recorded",
        ),
        Some(carried) if carried != sealed => check.fail(
            "seal_mismatch",
            "seal",
            format!(
                "the export was changed after it was sealed: its content hashes to {sealed}, not its seal {carried}"
            ),
        ),
        Some(_) => {}
    }
    for (kept, expected) in &options.expected_seals {
        match expected {
            None => check.fail(
                "seal_mismatch",
                "seal",
                format!(
                    "{kept} holds no seal for this run: it never completed, or was recorded by a harness before seals; nothing vouches for it"
                ),
            ),
            Some(expected) if !expected.eq_ignore_ascii_case(sealed) => check.fail(
                "seal_mismatch",
                "seal",
                format!(
                    "the export is not the run {kept} vouches for: its content hashes to {sealed}, {kept} holds {expected}"
                ),
            ),
            Some(_) => {}
        }
    }
}

/// `signature` (with `--pubkey`): an ed25519 signature of the seal by the operator's key.
fn signature_holds(signature: &Value, sealed: &str, key: &VerifyingKey, check: &mut Check<'_>) {
    let value = signature["value"]
        .as_str()
        .and_then(harness_builtins::unhex)
        .and_then(|bytes| <[u8; 64]>::try_from(bytes).ok());
    match (signature["alg"].as_str(), value) {
        (None, _) if signature.is_null() => check.fail(
            "signature_invalid",
            "signature",
            "the export is not signed (sign it with `harness runs export ID --sign KEY.pem`)",
        ),
        (Some("ed25519"), Some(bytes)) => {
            let signed = ed25519_dalek::Signature::from_bytes(&bytes);
            if key.verify_strict(sealed.as_bytes(), &signed).is_err() {
                check.fail(
                    "signature_invalid",
                    "signature",
                    format!(
                        "the signature does not hold for this content and the key {} (signed by key {}, or changed since)",
                        key_id(key),
                        signature_key(signature)
                    ),
                );
            }
        }
        _ => check.fail(
            "signature_invalid",
            "signature",
            "the signature is not an ed25519 signature of 64 bytes in hex",
        ),
    }
}

/// `fields`: the document reads as a run document — each member there, of its type, as
/// [`run_schema`](crate::export::run_schema) declares it — or where it does not.
fn fields_read(unread: Option<&(String, String)>, check: &mut Check<'_>) {
    if let Some((path, why)) = unread {
        let names: Vec<&str> = AUDIT_STEPS.iter().map(|s| s.name).collect();
        check.fail(
            "missing_field",
            path.as_str(),
            format!(
                "`{path}`: {why}; the document does not read as {RUN_SCHEMA}, so {} could not be checked",
                names.join(", ")
            ),
        );
    }
}

/// `event_order`: events numbered from 0 without gaps, attempts and times never going back.
fn events_in_order(audited: &Audited<'_>, check: &mut Check<'_>) {
    let mut last_at: Option<std::time::SystemTime> = None;
    let mut last_attempt = 0;
    for (i, event) in audited.document.events.iter().enumerate() {
        let at = format!("event {i}");
        if event.seq != i as u64 {
            check.fail(
                "event_order",
                &at,
                format!(
                    "event {i} has seq {}; events must be numbered from 0 without gaps",
                    event.seq
                ),
            );
        }
        let attempt = event.attempt;
        if attempt < last_attempt {
            check.fail(
                "event_order",
                &at,
                format!("event {i} belongs to attempt {attempt}, after attempt {last_attempt}"),
            );
        }
        last_attempt = attempt;
        match humantime::parse_rfc3339_weak(event.at) {
            Ok(time) => {
                if last_at.is_some_and(|last| time < last) {
                    check.fail(
                        "event_order",
                        &at,
                        format!("event {i} is timed before the event it follows"),
                    );
                }
                last_at = Some(time);
            }
            Err(_) => check.fail(
                "event_order",
                &at,
                format!("event {i}: `at` is not an RFC 3339 time"),
            ),
        }
    }
}

/// `event_chain`: each event names the hash of the one before it, and its own hash covers it.
fn events_chained(audited: &Audited<'_>, check: &mut Check<'_>) {
    let mut previous = GENESIS.to_owned();
    for (i, event) in audited.document.events.iter().enumerate() {
        if event.prev_hash != previous {
            check.fail(
                "chain_broken",
                format!("event {i}"),
                format!("event {i} does not follow the event before it (prev_hash)"),
            );
            return;
        }
        let hash = event.hash_after(&previous);
        if event.hash != hash {
            check.fail(
                "chain_broken",
                format!("event {i}"),
                format!("event {i} was changed: its hash does not cover its content"),
            );
            return;
        }
        previous = hash;
    }
}

/// `complete`: the story ends with a `DelegationCompleted`, after which only a human's decision
/// comes.
fn story_ends(audited: &Audited<'_>, check: &mut Check<'_>) {
    let events = &audited.document.events;
    let completed = events.iter().rposition(|e| e.kind == "DelegationCompleted");
    let Some(end) = completed else {
        check.fail(
            "truncated",
            format!("event {}", events.len()),
            format!(
                "the events end after {} without DelegationCompleted: the record was cut short (or the run never finished)",
                events.len()
            ),
        );
        return;
    };
    if let Some((i, e)) = events
        .iter()
        .enumerate()
        .skip(end + 1)
        .find(|(_, e)| e.kind != "HumanOverride")
    {
        check.fail(
            "event_order",
            format!("event {i}"),
            format!(
                "event {i} ({:?}) comes after DelegationCompleted, where only a human's decision may",
                e.kind
            ),
        );
    }
}

/// `tool_linkage`: in every attempt, each tool call has exactly one result and each result
/// answers a call.
fn tools_linked(audited: &Audited<'_>, check: &mut Check<'_>) {
    let (mut calls_seen, mut results_seen) = (0usize, 0usize);
    for (i, attempt) in audited.document.attempts.iter().enumerate() {
        let result = payload(&attempt.result);
        let (calls, results) = (items(&result["tool_calls"]), items(&result["tool_results"]));
        calls_seen += calls.len();
        results_seen += results.len();
        for call in calls {
            let id = call["id"].as_str().unwrap_or_default();
            let name = call["name"].as_str().unwrap_or_default();
            let matching = results
                .iter()
                .filter(|r| r["call_id"].as_str() == Some(id) && r["name"].as_str() == Some(name))
                .count();
            if matching != 1 {
                check.fail(
                    "tool_linkage",
                    format!("attempt {i} {id}"),
                    format!(
                        "attempt {i}: the call {id} ({name}) has {matching} results; each call has exactly one"
                    ),
                );
            }
        }
        for found in results {
            let id = found["call_id"].as_str().unwrap_or_default();
            if !calls.iter().any(|c| c["id"].as_str() == Some(id)) {
                check.fail(
                    "tool_linkage",
                    format!("attempt {i} {id}"),
                    format!("attempt {i}: the result {id} answers no call"),
                );
            }
        }
    }
    check.count("tool_calls", calls_seen);
    check.count("tool_results", results_seen);
}

/// `evidence_files`: every file the evidence vouched for still hashes as recorded, read inside
/// the workspace and never through a link.
fn evidence_unchanged(audited: &Audited<'_>, check: &mut Check<'_>) {
    for file in &audited.document.evidence {
        let (Some(path), Some(expected)) = (file.path, file.sha256) else {
            continue;
        };
        let at = format!("evidence {path}");
        match evidence_file(audited.root.as_deref(), path) {
            Err((code, why)) => check.fail(code, at, format!("{path}: {why}")),
            Ok((actual, bytes)) => {
                if actual != expected || file.bytes.is_some_and(|b| b != bytes) {
                    check.fail(
                        "evidence_hash_mismatch",
                        at,
                        format!(
                            "{path}: sha256 {actual} ({bytes} bytes) is not the recorded {expected}; the file changed since the run"
                        ),
                    );
                }
            }
        }
    }
}

/// The SHA-256 and length of evidence file `path` in the workspace `root`, or the failure's
/// code and why.
fn evidence_file(root: Option<&Path>, path: &str) -> Result<(String, u64), (&'static str, String)> {
    let missing = |why: String| ("evidence_missing", why);
    let root =
        root.ok_or_else(|| missing("no workspace to read it from (pass --workdir)".into()))?;
    let rel = Path::new(path);
    if rel.is_absolute()
        || rel
            .components()
            .any(|c| matches!(c, std::path::Component::ParentDir))
    {
        return Err(missing(
            "not a path inside the workspace; it is not read".into(),
        ));
    }
    if let Some(link) = link_in(root, rel) {
        return Err((
            "evidence_link",
            format!(
                "{} is a link; the audit never reads through one (it could point anywhere)",
                link.display()
            ),
        ));
    }
    let mut opened = harness_builtins::open_regular(&root.join(rel))
        .map_err(|_| missing(format!("cannot be read in {}", root.display())))?;
    let mut hasher = Sha256::new();
    let bytes = std::io::copy(&mut opened, &mut hasher)
        .map_err(|e| missing(format!("cannot be read: {e}")))?;
    Ok((hex(&hasher.finalize()), bytes))
}

/// `citations` (when the run required them): the final answer's citations hold in the
/// workspace.
fn citations_hold(audited: &Audited<'_>, check: &mut Check<'_>) {
    let response = audited
        .last
        .and_then(|a| payload(&a.result)["response"].as_str());
    let (root, response) = match (&audited.root, response) {
        (_, None) => {
            return check.fail(
                "citation_missing",
                "answer",
                "citations were required but the run recorded no answer",
            );
        }
        (None, Some(_)) => {
            return check.fail(
                "citation_missing",
                "answer",
                "citations were required but there is no workspace to check them in (pass --workdir)",
            );
        }
        (Some(root), Some(response)) => (root, response),
    };
    let workspace = match harness_builtins::Workspace::new(root) {
        Ok(workspace) => workspace,
        Err(e) => {
            return check.fail(
                "citation_missing",
                "answer",
                format!("the workspace {} cannot be opened: {e}", root.display()),
            );
        }
    };
    let cited = harness_builtins::citation::check_response(response, &workspace);
    for failure in &cited.failures {
        check.fail(
            failure.code,
            format!("answer line {}", failure.line),
            failure.message.clone(),
        );
    }
    check.count("citations", cited.citations);
    check.count("claims", cited.claims);
    check.count("insufficient", cited.insufficient);
}

/// A payload of the document (an attempt's result or verdict), or `null`.
fn payload(value: &Option<Value>) -> &Value {
    value.as_ref().unwrap_or(&Value::Null)
}

/// The items of `value`, an array, or none.
fn items(value: &Value) -> &[Value] {
    value.as_array().map_or(&[], Vec::as_slice)
}

/// `required_steps` (when the plan names some): the final attempt took each of them.
fn required_steps_taken(audited: &Audited<'_>, check: &mut Check<'_>) {
    let last = audited.last;
    let calls = last.map_or(&[][..], |a| items(&payload(&a.result)["tool_calls"]));
    let ran: Vec<&str> = last
        .map_or(&[][..], |a| items(&payload(&a.verdict)["evidence"]))
        .iter()
        .filter_map(|e| e["criterion"].as_str())
        .collect();
    let steps = audited
        .document
        .plan
        .as_ref()
        .map_or(&[][..], |plan| items(&plan.required_steps));
    for (i, raw) in steps.iter().enumerate() {
        match plan_step(raw) {
            Err(why) => check.fail("missing_field", format!("plan step {i}"), why),
            Ok(step) if !step.taken(calls, &ran) => check.fail(
                "required_step_absent",
                format!("plan step {i}"),
                format!(
                    "the final attempt did not take the required step {}",
                    step.describe()
                ),
            ),
            Ok(_) => {}
        }
    }
}

/// `delegation_linkage`: the children the export lists are the ones its delegate calls ran, and
/// each has exactly one record, delegated from this run, whose seal as it completed is the one
/// the call returned. Other records may name this run as their parent without a delegate call
/// of its own (a run an MCP client started with `HARNESS_PARENT_ID`): they are not its children
/// by a call, and are not judged here.
fn delegation_linkage(audited: &Audited<'_>, check: &mut Check<'_>) {
    let (document, options) = (audited.document, audited.options);
    let listed = &document.children;
    let called = children_in(document.attempts.iter().filter_map(|a| a.result.as_ref()));
    if *listed != called {
        check.fail(
            "delegation_linkage",
            "children",
            "the export's `children` are not the ones its delegate calls returned",
        );
    }
    let parent = document.run.id;
    match &options.children {
        None if listed.is_empty() => {}
        None => check.fail(
            "delegation_linkage",
            "children",
            format!(
                "the run delegated to {} children, which only the journal holds: audit it with --journal (or by id) so each child's record is checked",
                listed.len()
            ),
        ),
        Some(records) => {
            for child in listed {
                let id = child.id().unwrap_or_default();
                let at = format!("child {id}");
                let found: Vec<&Value> = records
                    .iter()
                    .filter(|r| {
                        r["run"]["id"].as_str() == Some(id)
                            && r["run"]["parent_id"].as_str() == Some(parent)
                    })
                    .collect();
                let [record] = found.as_slice() else {
                    check.fail(
                        "delegation_linkage",
                        at,
                        format!(
                            "a delegate call returned the child {id}, but the journal holds {} records of it delegated from this run",
                            found.len()
                        ),
                    );
                    continue;
                };
                let sealed = completion_seal(record);
                if child.seal() != Some(sealed.as_str()) {
                    check.fail(
                        "delegation_linkage",
                        at,
                        format!(
                            "the child {id} is not the run its delegate call returned: its record hashes to {sealed}, the call returned seal {}",
                            child.seal().unwrap_or("none")
                        ),
                    );
                }
            }
        }
    }
}

/// The first component of `rel` below `root` that is a symbolic link, if one is.
fn link_in(root: &Path, rel: &Path) -> Option<PathBuf> {
    let mut at = PathBuf::new();
    for component in rel.components() {
        at.push(component);
        if std::fs::symlink_metadata(root.join(&at)).is_ok_and(|m| m.file_type().is_symlink()) {
            return Some(at);
        }
    }
    None
}

/// The `key` a signature names, or `?`.
fn signature_key(signature: &Value) -> &str {
    signature["key"].as_str().unwrap_or("?")
}

/// A recorded plan step, compiled as the run compiled it.
fn plan_step(raw: &Value) -> Result<harness::PlanStep, String> {
    if let Some(name) = raw["check"].as_str() {
        return Ok(harness::PlanStep::Check(name.to_owned()));
    }
    let Some(name) = raw["tool"].as_str() else {
        return Err("a plan step has neither `tool` nor `check`".to_owned());
    };
    let mut args = Vec::new();
    if let Some(map) = raw["args"].as_object() {
        for (key, pattern) in map {
            let pattern = pattern
                .as_str()
                .ok_or_else(|| format!("plan step `args.{key}` is not a string"))?;
            let compiled = regex::Regex::new(&format!("^(?:{pattern})$"))
                .map_err(|e| format!("plan step `args.{key}` does not compile: {e}"))?;
            args.push((key.clone(), pattern.to_owned(), compiled));
        }
    }
    Ok(harness::PlanStep::Tool {
        name: name.to_owned(),
        args,
    })
}
