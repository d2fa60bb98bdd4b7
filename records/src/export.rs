//! Recorded runs as files (DESIGN §4.13).
//!
//! [`export`] writes a run as `harness.run/v1`: the run, its attempts, its events hash-chained
//! the way the audit log is (`hash = sha256(prev_hash ‖ canonical JSON of {seq, at, type,
//! attempt, data})`), and the files its evidence vouched for with their SHA-256.
//! [`audit`](crate::audit) re-verifies such a file offline.
//!
//! Every export carries a [`seal`]: the sha256 of the canonical JSON of everything else in it.
//! The chain alone proves only that the events were not edited one by one; anyone can rewrite a
//! whole export and recompute both. The seal the journal stored when the run completed, a seal
//! kept elsewhere (`--expect-seal`) or an ed25519 signature ([`sign`], `--pubkey`) is what
//! proves the export is the one recorded.

use std::io::Write as _;

use serde_json::{Map, Value, json};
use sha2::{Digest as _, Sha256};

use ed25519_dalek::pkcs8::{DecodePrivateKey as _, DecodePublicKey as _};
use ed25519_dalek::{Signer as _, SigningKey, VerifyingKey};

use crate::authority::{GENESIS, Hashing, write_object};
use crate::journal::Record;
use harness_builtins::hex;

/// The schema an export is written in, and the only one [`audit`](crate::audit) reads.
pub const RUN_SCHEMA: &str = "harness.run/v1";

/// The members of an export its seal does not cover: the seal, and the signature made over it.
const UNSEALED: [&str; 2] = ["seal", "signature"];

/// The seal of an export (DESIGN §4.13): sha256 of the canonical JSON of everything in it but
/// its `seal` and `signature`, hex. Anything edited — the run's outcome, an attempt, an event,
/// even with the chain recomputed — changes it.
pub fn seal(document: &Value) -> String {
    let mut hash = Hashing(Sha256::new());
    {
        // The canonical text arrives a token at a time: gathered, it is hashed a block at a time
        // (a hash update per token cost more than the hashing).
        let mut out = std::io::BufWriter::with_capacity(HASH_BUFFER, &mut hash);
        match document.as_object() {
            Some(members) => {
                let mut sealed: Vec<(&String, &Value)> = members
                    .iter()
                    .filter(|(k, _)| !UNSEALED.contains(&k.as_str()))
                    .collect();
                sealed.sort_unstable_by_key(|(k, _)| *k);
                write_object(sealed.into_iter().map(|(k, v)| (k.as_str(), v)), &mut out);
            }
            None => write_object(std::iter::empty(), &mut out),
        }
        // Hashing never fails to take bytes.
        let _ = out.flush();
    }
    hex(&hash.0.finalize())
}

/// How much canonical text is gathered before it is hashed.
const HASH_BUFFER: usize = 16 * 1024;

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
pub(crate) fn key_id(key: &VerifyingKey) -> String {
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
pub(crate) fn event_hash(prev_hash: &str, event: &Value) -> String {
    event_hash_with(prev_hash, event, &mut Vec::new())
}

/// [`event_hash`], its canonical text written to `scratch` (cleared first) and hashed at once:
/// a chain of events reuses one buffer.
fn event_hash_with(prev_hash: &str, event: &Value, scratch: &mut Vec<u8>) -> String {
    scratch.clear();
    // `{seq, at, type, attempt, data}` in canonical order; a missing member is `null`.
    let member = |key: &str| event.get(key).unwrap_or(&Value::Null);
    write_object(
        ["at", "attempt", "data", "seq", "type"]
            .into_iter()
            .map(|key| (key, member(key))),
        scratch,
    );
    let mut hash = Sha256::new();
    hash.update(prev_hash.as_bytes());
    hash.update(&scratch[..]);
    hex(&hash.finalize())
}

/// The run `record` as a `harness.run/v1` document.
pub fn export(record: &Record) -> Value {
    document(record.to_json(), record.decision.clone(), evidence(record))
}

/// The files the final verdict's evidence vouched for.
fn evidence(record: &Record) -> Vec<Value> {
    let last = record.attempts.iter().rev().find(|a| a.verdict.is_some());
    last.map(crate::journal::RecordedAttempt::evidence)
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
        .collect()
}

/// The document of a record's JSON (`Record::to_json`), its decision and evidence files.
fn document(mut whole: Value, decision: Option<String>, evidence: Vec<Value>) -> Value {
    // Built by moving the parts of the record's JSON, never copying them (a copy of a `Value`
    // through `json!` serialises it again).
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
        decision.map_or(Value::Null, Value::String),
    );
    let mut previous = GENESIS.to_owned();
    let mut scratch = Vec::with_capacity(1024);
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
            let hash = event_hash_with(&previous, &chained, &mut scratch);
            chained["prev_hash"] = Value::String(std::mem::replace(&mut previous, hash.clone()));
            chained["hash"] = Value::String(hash);
            chained
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
