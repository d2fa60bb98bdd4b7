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

use serde::Serialize;

use crate::authority::{GENESIS, Hashing, write_object};
use crate::canon::Raw;
use crate::journal::{Record, count, millis, tokens};
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
    let events = chained(&record.events);
    let first = record.events.first().map(data_of);
    let plan = first
        .as_ref()
        .and_then(|d| d.get("plan"))
        .filter(|steps| steps.as_array().is_some_and(|s| !s.is_empty()));
    let citations = first
        .as_ref()
        .is_some_and(|d| d.get("citations") == Some(&Value::Bool(true)));
    let last_verdict = record
        .attempts
        .iter()
        .rev()
        .find_map(|a| a.verdict.as_ref());
    let document = RunDocument {
        schema_version: RUN_SCHEMA,
        run: RunPart {
            id: &record.id,
            started_at: humantime::format_rfc3339_millis(record.started_at).to_string(),
            duration_ms: millis(record.duration),
            delegate: DelegatePart {
                kind: &record.delegate_kind,
                model: record.model.as_deref(),
            },
            outcome: &record.outcome,
            error: record.error_kind.as_deref().map(|kind| RunError {
                kind,
                message: record.error_message.as_deref(),
            }),
            request: record.request.as_ref().map(Json::Value),
            usage: Tokens::of(record.usage),
            trace_id: record.trace_id.as_deref(),
            retry_template_version: &record.retry_template_version,
            source: record.source.clone(),
            workdir: record.workdir.clone(),
            warnings: Json::Strings(&record.warnings),
            parent_id: record.parent_id(),
            decision: record.decision.as_deref(),
            citations: citations_of(citations),
        },
        attempts: record
            .attempts
            .iter()
            .map(|a| AttemptPart {
                attempt: a.attempt,
                passed: a.passed,
                reasons: Json::Strings(&a.reasons),
                duration_ms: millis(a.duration),
                usage: Tokens::of(a.usage),
                result: a.result.as_ref().map(Json::Value),
                verdict: match (&a.verdict, &a.unread_verdict) {
                    (Some(verdict), _) => Some(Json::Verdict(verdict)),
                    (None, unread) => unread.as_ref().map(Json::Value),
                },
                retry_prompt: a.retry_prompt.as_deref(),
                diff: (!a.diff.is_empty()).then_some(Json::Strings(&a.diff)),
            })
            .collect(),
        events: Json::Value(&events),
        evidence: evidence_files(last_verdict),
        plan: plan.map(|steps| Plan {
            required_steps: Json::Value(steps),
        }),
        children: children_in(record.attempts.iter().filter_map(|a| a.result.as_ref())),
    };
    let sealed = document.seal();
    let mut value = serde_json::to_value(&document).expect("a run document always serialises");
    value["seal"] = Value::String(sealed);
    value
}

/// The part of a recorded event that is its own (`data`): all but its envelope.
fn data_of(event: &Value) -> Map<String, Value> {
    event
        .as_object()
        .map(|fields| {
            fields
                .iter()
                .filter(|(key, _)| !ENVELOPE.contains(&key.as_str()))
                .map(|(key, value)| (key.clone(), value.clone()))
                .collect()
        })
        .unwrap_or_default()
}

/// The members of a recorded event that are its envelope; the rest are its `data`.
pub(crate) const ENVELOPE: [&str; 5] = ["at", "attempt", "run_id", "seq", "type"];

/// A run's recorded events as an export has them: `{seq, at, type, attempt, data}` each,
/// hash-chained (`prev_hash`, `hash`).
fn chained(recorded: &[Value]) -> Value {
    let mut previous = GENESIS.to_owned();
    let mut scratch = Vec::with_capacity(1024);
    let events = recorded
        .iter()
        .map(|event| {
            let member = |key: &str| event.get(key).cloned().unwrap_or(Value::Null);
            let mut chained = Map::new();
            chained.insert("seq".to_owned(), member("seq"));
            chained.insert("at".to_owned(), member("at"));
            chained.insert("type".to_owned(), member("type"));
            chained.insert("attempt".to_owned(), member("attempt"));
            chained.insert("data".to_owned(), Value::Object(data_of(event)));
            let mut chained = Value::Object(chained);
            let hash = event_hash_with(&previous, &chained, &mut scratch);
            chained["prev_hash"] = Value::String(std::mem::replace(&mut previous, hash.clone()));
            chained["hash"] = Value::String(hash);
            chained
        })
        .collect();
    Value::Array(events)
}

/// `run.citations` of an export: what its first event says the run was held to.
pub(crate) fn citations_of(required: bool) -> &'static str {
    if required { "required" } else { "off" }
}

/// The files the final verdict's evidence vouched for (those it hashed).
pub(crate) fn evidence_files(verdict: Option<&harness::Verdict>) -> Vec<EvidenceFile<'_>> {
    verdict
        .map(|v| v.evidence.as_slice())
        .unwrap_or_default()
        .iter()
        .filter(|e| e.method.as_deref() == Some("file_exists") && e.subject_sha256.is_some())
        .map(|e| EvidenceFile {
            id: &e.criterion,
            path: e.target.as_deref(),
            sha256: e.subject_sha256.as_deref(),
            bytes: e.subject_bytes,
        })
        .collect()
}

/// The children the delegate calls of `attempts` (an export's) name: `{id, seal}` each, as the
/// tool results the runtime wrote say.
pub(crate) fn children_of(attempts: &Value) -> Vec<Value> {
    let results = attempts
        .as_array()
        .into_iter()
        .flatten()
        .map(|a| &a["result"]);
    children_in(results)
        .into_iter()
        .map(|c| json!({"id": c.id, "seal": c.seal}))
        .collect()
}

/// The children the successful `delegate` calls among `results` (Results as JSON) returned.
fn children_in<'v>(results: impl Iterator<Item = &'v Value>) -> Vec<Child> {
    let empty = Vec::new();
    results
        .flat_map(|r| r["tool_results"].as_array().unwrap_or(&empty))
        .filter(|r| r["name"] == "delegate" && r["is_error"] != true)
        .map(|r| Child::returned(r["content"].as_str().unwrap_or_default()))
        .collect()
}

/// A `harness.run/v1` document without its seal and signature: what the seal covers (DESIGN
/// §4.13). The journal's writer makes one from the report it records (its JSON the canonical
/// text it stores, `written`), a reader from the stored record ([`export`]); one shape, so a
/// sealed field is added in one place and both must fill it. Members are listed in the order an
/// export shows them; the seal writes them sorted.
#[derive(Serialize)]
pub(crate) struct RunDocument<'a> {
    pub(crate) schema_version: &'static str,
    pub(crate) run: RunPart<'a>,
    pub(crate) attempts: Vec<AttemptPart<'a>>,
    pub(crate) events: Json<'a>,
    pub(crate) evidence: Vec<EvidenceFile<'a>>,
    pub(crate) plan: Option<Plan<'a>>,
    pub(crate) children: Vec<Child>,
}

impl RunDocument<'_> {
    /// Its seal: the SHA-256 of its canonical JSON, hex.
    pub(crate) fn seal(&self) -> String {
        let mut whole = Vec::with_capacity(16 * 1024);
        crate::canon::write(self, &mut whole).expect("a run document always serialises");
        hex(&Sha256::digest(&whole))
    }
}

/// The run section of an export.
#[derive(Serialize)]
pub(crate) struct RunPart<'a> {
    pub(crate) id: &'a str,
    pub(crate) started_at: String,
    pub(crate) duration_ms: i64,
    pub(crate) delegate: DelegatePart<'a>,
    pub(crate) outcome: &'a str,
    pub(crate) error: Option<RunError<'a>>,
    pub(crate) request: Option<Json<'a>>,
    pub(crate) usage: Tokens,
    pub(crate) trace_id: Option<&'a str>,
    pub(crate) retry_template_version: &'a str,
    pub(crate) source: Option<String>,
    pub(crate) workdir: Option<String>,
    pub(crate) warnings: Json<'a>,
    pub(crate) parent_id: Option<&'a str>,
    /// A human's decision (`approved`, `rejected`): none when a run is recorded.
    pub(crate) decision: Option<&'a str>,
    pub(crate) citations: &'static str,
}

/// Who the delegate was.
#[derive(Serialize)]
pub(crate) struct DelegatePart<'a> {
    pub(crate) kind: &'a str,
    pub(crate) model: Option<&'a str>,
}

/// How a run that did not pass ended.
#[derive(Serialize)]
pub(crate) struct RunError<'a> {
    pub(crate) kind: &'a str,
    pub(crate) message: Option<&'a str>,
}

/// One attempt of an export.
#[derive(Serialize)]
pub(crate) struct AttemptPart<'a> {
    pub(crate) attempt: u32,
    pub(crate) passed: Option<bool>,
    pub(crate) reasons: Json<'a>,
    pub(crate) duration_ms: i64,
    pub(crate) usage: Tokens,
    pub(crate) result: Option<Json<'a>>,
    pub(crate) verdict: Option<Json<'a>>,
    pub(crate) retry_prompt: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) diff: Option<Json<'a>>,
}

/// Token counts as the journal's integer columns give them back; the cached share only when
/// there is one, so that a record made before it was counted exports (and seals) as it did.
#[derive(Serialize)]
pub(crate) struct Tokens {
    input_tokens: u64,
    output_tokens: u64,
    requests: u64,
    #[serde(skip_serializing_if = "is_zero")]
    cached_input_tokens: u64,
}

impl Tokens {
    pub(crate) fn of(usage: harness::Usage) -> Self {
        let stored = |n: u64| count(tokens(n));
        Tokens {
            input_tokens: stored(usage.input_tokens),
            output_tokens: stored(usage.output_tokens),
            requests: stored(usage.requests),
            cached_input_tokens: stored(usage.cached_input_tokens),
        }
    }
}

#[allow(clippy::trivially_copy_pass_by_ref)]
fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// A file the final verdict's evidence vouched for.
#[derive(Serialize)]
pub(crate) struct EvidenceFile<'a> {
    id: &'a str,
    path: Option<&'a str>,
    sha256: Option<&'a str>,
    bytes: Option<u64>,
}

/// What every attempt had to do.
#[derive(Serialize)]
pub(crate) struct Plan<'a> {
    pub(crate) required_steps: Json<'a>,
}

/// A child a `delegate` call returned: its id and the seal its record had when it completed.
#[derive(Serialize)]
pub(crate) struct Child {
    id: Value,
    seal: Value,
}

impl Child {
    /// The child named by a successful `delegate` call's result text.
    pub(crate) fn returned(content: &str) -> Self {
        let child: Value = serde_json::from_str(content).unwrap_or(Value::Null);
        Child {
            id: child["id"].clone(),
            seal: child["seal"].clone(),
        }
    }
}

/// A JSON value of a run document: as the writer has it (the canonical text it stores), or as a
/// reader has it (read back, or typed).
pub(crate) enum Json<'a> {
    /// Canonical JSON text, put in place as it is (written canonically only: see [`Raw`]).
    Raw(&'a str),
    /// A value read back.
    Value(&'a Value),
    /// A list of strings.
    Strings(&'a [String]),
    /// A verdict.
    Verdict(&'a harness::Verdict),
}

impl Serialize for Json<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Json::Raw(text) => Raw(text).serialize(serializer),
            Json::Value(value) => value.serialize(serializer),
            Json::Strings(strings) => strings.serialize(serializer),
            Json::Verdict(verdict) => verdict.serialize(serializer),
        }
    }
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
