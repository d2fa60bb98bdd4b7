//! Recorded runs as files, and their integrity audit (DESIGN §4.13).
//!
//! [`export`] writes a run as `harness.run/v1`: the run, its attempts, its events hash-chained
//! the way the audit log is (`hash = sha256(prev_hash ‖ canonical JSON of {seq, at, type,
//! attempt, data})`), and the files its evidence vouched for with their SHA-256. [`audit`]
//! re-verifies such a file offline and fail-closed: whatever it cannot read or check is a
//! failure with a machine-readable code, never skipped.
//!
//! Every export carries a [`seal`]: the sha256 of the canonical JSON of everything else in it.
//! The chain alone proves only that the events were not edited one by one; anyone can rewrite a
//! whole export and recompute both. The seal the journal stored when the run completed, a seal
//! kept elsewhere (`--expect-seal`) or an ed25519 signature ([`sign`], `--pubkey`) is what
//! proves the export is the one recorded.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};
use sha2::{Digest as _, Sha256};

use ed25519_dalek::pkcs8::{DecodePrivateKey as _, DecodePublicKey as _};
use ed25519_dalek::{Signer as _, SigningKey, VerifyingKey};

use crate::authority::{GENESIS, Hashing, write_object};
use crate::journal::Record;
use harness_builtins::hex;

/// The schema an export is written in, and the only one [`audit`] reads.
pub const RUN_SCHEMA: &str = "harness.run/v1";

/// The members of an export its seal does not cover: the seal, and the signature made over it.
const UNSEALED: [&str; 2] = ["seal", "signature"];

/// The seal of an export (DESIGN §4.13): sha256 of the canonical JSON of everything in it but
/// its `seal` and `signature`, hex. Anything edited — the run's outcome, an attempt, an event,
/// even with the chain recomputed — changes it.
pub fn seal(document: &Value) -> String {
    let mut hash = Hashing(Sha256::new());
    match document.as_object() {
        Some(members) => {
            let mut keys: Vec<&String> = members
                .keys()
                .filter(|k| !UNSEALED.contains(&k.as_str()))
                .collect();
            keys.sort_unstable();
            write_object(
                keys.into_iter().map(|k| (k.as_str(), &members[k])),
                &mut hash,
            );
        }
        None => write_object(std::iter::empty(), &mut hash),
    }
    hex(&hash.0.finalize())
}

/// Reads an ed25519 private key in PEM (PKCS#8, as `openssl genpkey -algorithm ed25519`
/// writes it).
///
/// # Errors
/// Why the text is not such a key.
pub fn signing_key(pem: &str) -> std::result::Result<SigningKey, String> {
    SigningKey::from_pkcs8_pem(pem).map_err(|e| {
        format!("not an ed25519 private key in PEM ({e}); make one with `openssl genpkey -algorithm ed25519 -out KEY.pem`")
    })
}

/// Reads an ed25519 public key in PEM (SubjectPublicKeyInfo, as `openssl pkey -pubout`
/// writes it).
///
/// # Errors
/// Why the text is not such a key.
pub fn verifying_key(pem: &str) -> std::result::Result<VerifyingKey, String> {
    VerifyingKey::from_public_key_pem(pem).map_err(|e| {
        format!("not an ed25519 public key in PEM ({e}); make it from the private key with `openssl pkey -in KEY.pem -pubout -out KEY.pub.pem`")
    })
}

/// A short name of a public key: the first 16 hex digits of its sha256.
fn key_id(key: &VerifyingKey) -> String {
    hex(&Sha256::digest(key.as_bytes()))[..16].to_owned()
}

/// Signs an export's seal with `key`: adds `signature: {alg, key, value}` (the seal is computed
/// again first, so a signature never vouches for a stale one).
pub fn sign(document: &mut Value, key: &SigningKey) {
    let sealed = seal(document);
    let signature = key.sign(sealed.as_bytes());
    document["seal"] = json!(sealed);
    document["signature"] = json!({
        "alg": "ed25519",
        "key": key_id(&key.verifying_key()),
        "value": hex(&signature.to_bytes()),
    });
}

/// `sha256(prev_hash ‖ canonical JSON of the event's chained part)`, hex.
fn event_hash(prev_hash: &str, event: &Value) -> String {
    let mut hash = Hashing(Sha256::new());
    hash.0.update(prev_hash.as_bytes());
    // `{seq, at, type, attempt, data}` in canonical order; a missing member is `null`.
    let member = |key: &str| event.get(key).unwrap_or(&Value::Null);
    write_object(
        ["at", "attempt", "data", "seq", "type"]
            .into_iter()
            .map(|key| (key, member(key))),
        &mut hash,
    );
    hex(&hash.0.finalize())
}

/// The run `record` as a `harness.run/v1` document.
pub fn export(record: &Record) -> Value {
    // Built by moving the parts of the record's JSON, never copying them (a copy of a `Value`
    // through `json!` serialises it again).
    let mut whole = record.to_json();
    let mut run = Map::new();
    for key in [
        "id",
        "started_at",
        "duration_ms",
        "delegate",
        "outcome",
        "error",
        "request",
        "usage",
        "trace_id",
        "retry_template_version",
        "source",
        "workdir",
        "warnings",
        "parent_id",
    ] {
        run.insert(key.to_owned(), whole[key].take());
    }
    run.insert(
        "decision".to_owned(),
        record.decision.clone().map_or(Value::Null, Value::String),
    );
    let mut previous = GENESIS.to_owned();
    let recorded = match whole["events"].take() {
        Value::Array(events) => events,
        _ => Vec::new(),
    };
    let events: Vec<Value> = recorded
        .into_iter()
        .map(|event| {
            let mut fields = match event {
                Value::Object(fields) => fields,
                _ => Map::new(),
            };
            let mut take = |key: &str| fields.remove(key).unwrap_or(Value::Null);
            let (seq, at, kind, attempt) = (take("seq"), take("at"), take("type"), take("attempt"));
            fields.remove("run_id");
            let mut chained = Map::new();
            chained.insert("seq".to_owned(), seq);
            chained.insert("at".to_owned(), at);
            chained.insert("type".to_owned(), kind);
            chained.insert("attempt".to_owned(), attempt);
            // What is left is the event's own data (the keys above and `run_id` are its
            // envelope).
            chained.insert("data".to_owned(), Value::Object(fields));
            let mut chained = Value::Object(chained);
            let hash = event_hash(&previous, &chained);
            chained["prev_hash"] = Value::String(previous.clone());
            chained["hash"] = Value::String(hash.clone());
            previous = hash;
            chained
        })
        .collect();
    // The files the final verdict's evidence vouched for.
    let last = record.attempts.iter().rev().find(|a| a.verdict.is_some());
    let evidence: Vec<Value> = last
        .map(crate::journal::RecordedAttempt::evidence)
        .unwrap_or_default()
        .iter()
        .filter(|e| e.method.as_deref() == Some("file_exists") && e.subject_sha256.is_some())
        .map(|e| {
            json!({
                "id": e.criterion,
                "path": e.target,
                "sha256": e.subject_sha256,
                "bytes": e.subject_bytes,
            })
        })
        .collect();
    // What the run was held to, as its first event says.
    let started = events.first().map(|e| &e["data"]);
    let plan = started
        .and_then(|d| d["plan"].as_array())
        .filter(|steps| !steps.is_empty())
        .map_or(Value::Null, |steps| json!({"required_steps": steps}));
    run.insert(
        "citations".to_owned(),
        json!(if started.is_some_and(|d| d["citations"] == json!(true)) {
            "required"
        } else {
            "off"
        }),
    );
    let mut document = Map::new();
    document.insert("schema_version".to_owned(), Value::from(RUN_SCHEMA));
    document.insert("run".to_owned(), Value::Object(run));
    document.insert("attempts".to_owned(), whole["attempts"].take());
    document.insert("events".to_owned(), Value::Array(events));
    document.insert("evidence".to_owned(), Value::Array(evidence));
    document.insert("plan".to_owned(), plan);
    // The children its `delegate` calls ran, each with the seal its record had when it completed.
    document.insert("children".to_owned(), whole["children"].take());
    let mut document = Value::Object(document);
    document["seal"] = json!(seal(&document));
    document
}

/// The children the delegate calls of `attempts` (an export's) name: `{id, seal}` each, as the
/// tool results the runtime wrote say.
pub(crate) fn children_of(attempts: &Value) -> Vec<Value> {
    let empty = Vec::new();
    attempts
        .as_array()
        .unwrap_or(&empty)
        .iter()
        .flat_map(|a| a["result"]["tool_results"].as_array().unwrap_or(&empty))
        .filter(|r| r["name"] == "delegate" && r["is_error"] != true)
        .map(|r| {
            let child: Value = r["content"]
                .as_str()
                .and_then(|text| serde_json::from_str(text).ok())
                .unwrap_or(Value::Null);
            json!({"id": child["id"], "seal": child["seal"]})
        })
        .collect()
}

/// The seal an export had when its run completed (DESIGN §9): its seal with no human decision
/// in it — neither the run's `decision` nor the events after `DelegationCompleted` (a
/// `HumanOverride`). A parent's record holds this seal of each child, which an override of the
/// child later does not change.
pub fn completion_seal(document: &Value) -> String {
    let mut completed = document.clone();
    completed["run"]["decision"] = Value::Null;
    if let Some(events) = completed["events"].as_array_mut()
        && let Some(end) = events
            .iter()
            .rposition(|e| e["type"] == "DelegationCompleted")
    {
        events.truncate(end + 1);
    }
    seal(&completed)
}

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

/// Collects failures of one check.
struct Check<'a> {
    name: &'static str,
    failures: &'a mut Vec<AuditFailure>,
    before: usize,
}

impl<'a> Check<'a> {
    fn new(name: &'static str, failures: &'a mut Vec<AuditFailure>) -> Self {
        let before = failures.len();
        Check {
            name,
            failures,
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

    fn done(self) -> (&'static str, bool) {
        (self.name, self.failures.len() == self.before)
    }
}

/// Re-verifies a `harness.run/v1` document. Evidence files are looked for under
/// `options.workdir` (default: the run's own `workdir`); a file that cannot be read there is
/// `evidence_missing`, one reached through a link `evidence_link`.
pub fn audit(document: &Value, options: &AuditOptions<'_>) -> VerificationReport {
    let workdir = options.workdir;
    let mut failures = Vec::new();
    let mut checks = Vec::new();
    let mut metrics = Map::new();
    let schema_version = document["schema_version"].as_str().map(str::to_owned);

    let mut check = Check::new("schema_version", &mut failures);
    match schema_version.as_deref() {
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
    checks.push(check.done());
    if schema_version.as_deref() != Some(RUN_SCHEMA) {
        // Nothing else of an unknown schema is read: its fields may mean something else.
        return VerificationReport {
            schema_version,
            checks,
            failures,
            metrics,
        };
    }

    let mut check = Check::new("seal", &mut failures);
    let sealed = seal(document);
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
        let Some(expected) = expected else {
            check.fail(
                "seal_mismatch",
                "seal",
                format!(
                    "{kept} holds no seal for this run: it never completed, or was recorded by a harness before seals; nothing vouches for it"
                ),
            );
            continue;
        };
        if !expected.eq_ignore_ascii_case(&sealed) {
            check.fail(
                "seal_mismatch",
                "seal",
                format!(
                    "the export is not the run {kept} vouches for: its content hashes to {sealed}, {kept} holds {expected}"
                ),
            );
        }
    }
    checks.push(check.done());
    if let Some(key) = &options.public_key {
        let mut check = Check::new("signature", &mut failures);
        let signature = &document["signature"];
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
                let signature = ed25519_dalek::Signature::from_bytes(&bytes);
                if key.verify_strict(sealed.as_bytes(), &signature).is_err() {
                    check.fail(
                        "signature_invalid",
                        "signature",
                        format!(
                            "the signature does not hold for this content and the key {} (signed by key {}, or changed since)",
                            key_id(key),
                            signature_key(&document["signature"])
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
        checks.push(check.done());
    }

    let mut check = Check::new("fields", &mut failures);
    let run = &document["run"];
    for (key, ok) in [
        ("run", run.is_object()),
        ("run.id", run["id"].is_string()),
        ("run.outcome", run["outcome"].is_string()),
        ("attempts", document["attempts"].is_array()),
        ("events", document["events"].is_array()),
        ("evidence", document["evidence"].is_array()),
    ] {
        if !ok {
            check.fail(
                "missing_field",
                key,
                format!("`{key}` is missing or of the wrong type"),
            );
        }
    }
    let empty = Vec::new();
    let events = document["events"].as_array().unwrap_or(&empty);
    let attempts = document["attempts"].as_array().unwrap_or(&empty);
    let evidence = document["evidence"].as_array().unwrap_or(&empty);
    for (i, event) in events.iter().enumerate() {
        for (key, ok) in [
            ("seq", event["seq"].is_u64()),
            ("at", event["at"].is_string()),
            ("type", event["type"].is_string()),
            ("attempt", event["attempt"].is_u64()),
            ("data", event["data"].is_object()),
            ("prev_hash", event["prev_hash"].is_string()),
            ("hash", event["hash"].is_string()),
        ] {
            if !ok {
                check.fail(
                    "missing_field",
                    format!("event {i}"),
                    format!("event {i}: `{key}` is missing or of the wrong type"),
                );
            }
        }
    }
    for (i, file) in evidence.iter().enumerate() {
        for (key, ok) in [
            ("path", file["path"].is_string()),
            ("sha256", file["sha256"].is_string()),
        ] {
            if !ok {
                check.fail(
                    "missing_field",
                    format!("evidence {i}"),
                    format!("evidence {i}: `{key}` is missing or of the wrong type"),
                );
            }
        }
    }
    checks.push(check.done());

    let mut check = Check::new("event_order", &mut failures);
    let mut last_at: Option<std::time::SystemTime> = None;
    let mut last_attempt = 0;
    for (i, event) in events.iter().enumerate() {
        if event["seq"].as_u64() != Some(i as u64) {
            check.fail(
                "event_order",
                format!("event {i}"),
                format!(
                    "event {i} has seq {}; events must be numbered from 0 without gaps",
                    event["seq"]
                ),
            );
        }
        let attempt = event["attempt"].as_u64().unwrap_or(0);
        if attempt < last_attempt {
            check.fail(
                "event_order",
                format!("event {i}"),
                format!("event {i} belongs to attempt {attempt}, after attempt {last_attempt}"),
            );
        }
        last_attempt = attempt;
        match event["at"].as_str().map(humantime::parse_rfc3339_weak) {
            Some(Ok(at)) => {
                if last_at.is_some_and(|last| at < last) {
                    check.fail(
                        "event_order",
                        format!("event {i}"),
                        format!("event {i} is timed before the event it follows"),
                    );
                }
                last_at = Some(at);
            }
            _ => check.fail(
                "event_order",
                format!("event {i}"),
                format!("event {i}: `at` is not an RFC 3339 time"),
            ),
        }
    }
    checks.push(check.done());

    let mut check = Check::new("event_chain", &mut failures);
    let mut previous = GENESIS.to_owned();
    for (i, event) in events.iter().enumerate() {
        if event["prev_hash"].as_str() != Some(previous.as_str()) {
            check.fail(
                "chain_broken",
                format!("event {i}"),
                format!("event {i} does not follow the event before it (prev_hash)"),
            );
            break;
        }
        let hash = event_hash(&previous, event);
        if event["hash"].as_str() != Some(hash.as_str()) {
            check.fail(
                "chain_broken",
                format!("event {i}"),
                format!("event {i} was changed: its hash does not cover its content"),
            );
            break;
        }
        previous = hash;
    }
    checks.push(check.done());

    // The story must end: a DelegationCompleted, after which only a human's decision comes.
    let mut check = Check::new("complete", &mut failures);
    let completed = events
        .iter()
        .rposition(|e| e["type"].as_str() == Some("DelegationCompleted"));
    match completed {
        None => check.fail(
            "truncated",
            format!("event {}", events.len()),
            format!(
                "the events end after {} without DelegationCompleted: the record was cut short (or the run never finished)",
                events.len()
            ),
        ),
        Some(at) => {
            if let Some((i, e)) = events
                .iter()
                .enumerate()
                .skip(at + 1)
                .find(|(_, e)| e["type"].as_str() != Some("HumanOverride"))
            {
                check.fail(
                    "event_order",
                    format!("event {i}"),
                    format!(
                        "event {i} ({}) comes after DelegationCompleted, where only a human's decision may",
                        e["type"]
                    ),
                );
            }
        }
    }
    checks.push(check.done());

    let mut check = Check::new("tool_linkage", &mut failures);
    let (mut calls_seen, mut results_seen) = (0usize, 0usize);
    for (i, attempt) in attempts.iter().enumerate() {
        let result = &attempt["result"];
        if result.is_null() {
            continue;
        }
        let calls = result["tool_calls"].as_array().unwrap_or(&empty);
        let results = result["tool_results"].as_array().unwrap_or(&empty);
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
    checks.push(check.done());

    let mut check = Check::new("evidence_files", &mut failures);
    let root: Option<PathBuf> = workdir
        .map(Path::to_path_buf)
        .or_else(|| run["workdir"].as_str().map(PathBuf::from));
    for file in evidence {
        let (Some(path), Some(expected)) = (file["path"].as_str(), file["sha256"].as_str()) else {
            continue;
        };
        let at = format!("evidence {path}");
        let Some(root) = &root else {
            check.fail(
                "evidence_missing",
                at,
                format!("{path}: no workspace to read it from (pass --workdir)"),
            );
            continue;
        };
        let rel = Path::new(path);
        if rel.is_absolute()
            || rel
                .components()
                .any(|c| matches!(c, std::path::Component::ParentDir))
        {
            check.fail(
                "evidence_missing",
                at,
                format!("{path}: not a path inside the workspace; it is not read"),
            );
            continue;
        }
        if let Some(link) = link_in(root, rel) {
            check.fail(
                "evidence_link",
                at,
                format!(
                    "{path}: {} is a link; the audit never reads through one (it could point anywhere)",
                    link.display()
                ),
            );
            continue;
        }
        let full = root.join(rel);
        let Ok(mut opened) = harness_builtins::open_regular(&full) else {
            check.fail(
                "evidence_missing",
                at,
                format!("{path}: cannot be read in {}", root.display()),
            );
            continue;
        };
        let mut hasher = Sha256::new();
        let bytes = match std::io::copy(&mut opened, &mut hasher) {
            Ok(bytes) => bytes,
            Err(e) => {
                check.fail(
                    "evidence_missing",
                    at,
                    format!("{path}: cannot be read: {e}"),
                );
                continue;
            }
        };
        let actual = hex(&hasher.finalize());
        if actual != expected || file["bytes"].as_u64().is_some_and(|b| b != bytes) {
            check.fail(
                "evidence_hash_mismatch",
                at,
                format!(
                    "{path}: sha256 {actual} ({bytes} bytes) is not the recorded {expected}; the file changed since the run"
                ),
            );
        }
    }
    checks.push(check.done());

    // The final answer's citations, when the run required them.
    let last = attempts.iter().rev().find(|a| a["result"].is_object());
    let mut cited = harness_builtins::citation::CitationReport::default();
    if run["citations"] == json!("required") {
        let mut check = Check::new("citations", &mut failures);
        let response = last.and_then(|a| a["result"]["response"].as_str());
        match (&root, response) {
            (_, None) => check.fail(
                "citation_missing",
                "answer",
                "citations were required but the run recorded no answer",
            ),
            (None, Some(_)) => check.fail(
                "citation_missing",
                "answer",
                "citations were required but there is no workspace to check them in (pass --workdir)",
            ),
            (Some(root), Some(response)) => match harness_builtins::Workspace::new(root) {
                Err(e) => check.fail(
                    "citation_missing",
                    "answer",
                    format!("the workspace {} cannot be opened: {e}", root.display()),
                ),
                Ok(workspace) => {
                    cited = harness_builtins::citation::check_response(response, &workspace);
                    for failure in &cited.failures {
                        check.fail(
                            failure.code,
                            format!("answer line {}", failure.line),
                            failure.message.clone(),
                        );
                    }
                }
            },
        }
        checks.push(check.done());
    }
    // The plan's required steps, in the final attempt.
    if let Some(steps) = document["plan"]["required_steps"].as_array() {
        let mut check = Check::new("required_steps", &mut failures);
        let calls = last
            .and_then(|a| a["result"]["tool_calls"].as_array())
            .unwrap_or(&empty);
        let ran: Vec<&str> = last
            .and_then(|a| a["verdict"]["evidence"].as_array())
            .unwrap_or(&empty)
            .iter()
            .filter_map(|e| e["criterion"].as_str())
            .collect();
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
        checks.push(check.done());
    }
    checks.push(delegation_linkage(document, options, &mut failures));
    for (key, value) in [
        ("events", events.len()),
        ("tool_calls", calls_seen),
        ("tool_results", results_seen),
        ("citations", cited.citations),
        ("evidence_files", evidence.len()),
        ("claims", cited.claims),
        ("insufficient", cited.insufficient),
    ] {
        metrics.insert(key.to_owned(), json!(value));
    }
    VerificationReport {
        schema_version,
        checks,
        failures,
        metrics,
    }
}

/// `delegation_linkage`: the children the export lists are the ones its delegate calls ran, and
/// each has exactly one record, delegated from this run, whose seal as it completed is the one
/// the call returned. Other records may name this run as their parent without a delegate call
/// of its own (a run an MCP client started with `HARNESS_PARENT_ID`): they are not its children
/// by a call, and are not judged here.
fn delegation_linkage(
    document: &Value,
    options: &AuditOptions<'_>,
    failures: &mut Vec<AuditFailure>,
) -> (&'static str, bool) {
    let mut check = Check::new("delegation_linkage", failures);
    let listed = document["children"].as_array().cloned().unwrap_or_default();
    if listed != children_of(&document["attempts"]) {
        check.fail(
            "delegation_linkage",
            "children",
            "the export's `children` are not the ones its delegate calls returned",
        );
    }
    let parent = document["run"]["id"].as_str().unwrap_or_default();
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
            for child in &listed {
                let id = child["id"].as_str().unwrap_or_default();
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
                if child["seal"].as_str() != Some(sealed.as_str()) {
                    check.fail(
                        "delegation_linkage",
                        at,
                        format!(
                            "the child {id} is not the run its delegate call returned: its record hashes to {sealed}, the call returned seal {}",
                            child["seal"].as_str().unwrap_or("none")
                        ),
                    );
                }
            }
        }
    }
    check.done()
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
