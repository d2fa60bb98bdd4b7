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

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::canon::Raw;
use crate::canon::{GENESIS, Hashing, write_object};
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
    let (key, value) = (key_id(&key.verifying_key()), hex(&signature.to_bytes()));
    document["signature"] = serde_json::to_value(Signature {
        alg: "ed25519",
        key: &key,
        value: &value,
    })
    .expect("a signature serialises");
}

/// `sha256(prev_hash ‖ canonical JSON of the event's chained part)`, hex, its canonical text
/// written to `scratch` (cleared first) and hashed at once: a chain of events reuses one buffer
/// ([`Event::hash_after`] makes it from an event read back).
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
        seal: None,
        signature: None,
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
pub(crate) fn children_in<'v>(results: impl Iterator<Item = &'v Value>) -> Vec<Child> {
    let empty = Vec::new();
    results
        .flat_map(|r| r["tool_results"].as_array().unwrap_or(&empty))
        .filter(|r| r["name"] == "delegate" && r["is_error"] != true)
        .map(|r| Child::returned(r["content"].as_str().unwrap_or_default()))
        .collect()
}

/// A `harness.run/v1` document (DESIGN §4.13): what `harness runs export` writes, the seal
/// covers and [`audit`](crate::audit) reads, declared once. The journal's writer fills one from
/// the report it records (its JSON payloads the canonical text it stores, `written`), a reader
/// from the stored record ([`export`]), each with [`Json`] payloads (`J`) and events (`E`); the
/// audit reads an export back into one ([`Exported`]: payloads as values, events typed), which
/// is its `fields` check; and `schemas/harness.run.v1.json` is generated from it
/// ([`run_schema`]). So a sealed field is added in one place, and the compiler asks the writer
/// and the reader to fill it. Members are listed in the order an export shows them; the seal
/// writes them sorted.
#[derive(Serialize, Deserialize, JsonSchema)]
#[schemars(
    title = "harness.run/v1",
    bound = "J: JsonSchema + Default, E: JsonSchema",
    description = "One recorded delegation as `harness runs export` writes it and `harness audit` reads it. Events are hash-chained: hash = sha256(prev_hash \u{2016} canonical JSON of {seq, at, type, attempt, data}), keys sorted, no whitespace; the first prev_hash is 64 zeros."
)]
pub struct RunDocument<'a, J = Json<'a>, E = Json<'a>> {
    /// The schema the document is written in.
    #[schemars(extend("const" = RUN_SCHEMA))]
    pub schema_version: &'a str,
    /// The run.
    #[serde(borrow)]
    pub run: RunPart<'a, J>,
    /// Every attempt, in order.
    #[serde(borrow)]
    pub attempts: Vec<AttemptPart<'a, J>>,
    /// The run's events, hash-chained.
    pub events: E,
    /// The files the final verdict's evidence vouched for, with their SHA-256.
    #[serde(borrow)]
    pub evidence: Vec<EvidenceFile<'a>>,
    /// What every attempt had to do (`plan.required_steps` of the request), when it named steps.
    #[serde(default)]
    pub plan: Option<Plan<J>>,
    /// The child delegations this run's delegate calls ran, in the order they returned, each
    /// with the seal its record had when it completed; `harness audit` checks each against the
    /// journal (`delegation_linkage`).
    #[serde(default)]
    pub children: Vec<Child>,
    /// sha256 (hex) of the canonical JSON (keys sorted at every level, no spaces) of everything
    /// in the export but `seal` and `signature`. The journal stores it when the run completes
    /// (and again when an override adds its decision). Absent only from what is being sealed.
    #[serde(default, borrow, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^[0-9a-f]{64}$"), with = "String")]
    pub seal: Option<&'a str>,
    /// `runs export --sign KEY.pem`: an ed25519 signature of the seal's hex text by the
    /// operator's key; `audit --pubkey` verifies it.
    #[serde(default, borrow, skip_serializing_if = "Option::is_none")]
    pub signature: Option<Signature<'a>>,
}

/// An export as the audit reads it: payloads as values, events typed.
pub type Exported<'a> = RunDocument<'a, Value, Vec<Event<'a>>>;

impl<J: Serialize, E: Serialize> RunDocument<'_, J, E> {
    /// Its seal: the SHA-256 of its canonical JSON, hex (made before it carries one).
    pub(crate) fn seal(&self) -> String {
        debug_assert!(self.seal.is_none() && self.signature.is_none());
        let mut whole = Vec::with_capacity(16 * 1024);
        crate::canon::write(self, &mut whole).expect("a run document always serialises");
        hex(&Sha256::digest(&whole))
    }
}

impl<'a> Exported<'a> {
    /// `document` read as a run document, or where and why it does not read as one.
    ///
    /// # Errors
    /// A member missing or of the wrong type: its path (`events[3].type`) and what is wrong.
    pub fn read(document: &'a Value) -> Result<Self, (String, String)> {
        serde_path_to_error::deserialize(document).map_err(|e| {
            let path = e.path().to_string();
            (path, e.into_inner().to_string())
        })
    }
}

/// The JSON Schema of `harness.run/v1` (`schemas/harness.run.v1.json`, `harness schema run`),
/// generated from [`RunDocument`].
pub fn run_schema() -> Value {
    let mut root = schemars::generate::SchemaSettings::draft2020_12()
        .into_generator()
        .into_root_schema_for::<Exported<'static>>()
        .to_value();
    // An export always carries its seal: the type goes without one only while it is sealed.
    if let Some(required) = root["required"].as_array_mut() {
        required.push(json!("seal"));
    }
    without_defaults(&mut root);
    harness::schema::finished(root, RUN_SCHEMA_FILE)
}

/// `schema` without the `default`s serde's would give: a reader of an export finds every member
/// written, and an empty text is no default a writer should use.
fn without_defaults(schema: &mut Value) {
    match schema {
        Value::Object(map) => {
            map.shift_remove("default");
            map.values_mut().for_each(without_defaults);
        }
        Value::Array(items) => items.iter_mut().for_each(without_defaults),
        _ => {}
    }
}

/// Where the run document's schema is kept, under `schemas/`.
pub const RUN_SCHEMA_FILE: &str = "harness.run.v1.json";

/// The run section of an export.
#[derive(Serialize, Deserialize, JsonSchema)]
#[schemars(bound = "J: JsonSchema + Default")]
pub struct RunPart<'a, J = Json<'a>> {
    /// The run's id.
    pub id: &'a str,
    /// When it started (RFC 3339, milliseconds).
    #[serde(default)]
    pub started_at: String,
    /// How long it took.
    #[serde(default)]
    #[schemars(range(min = 0))]
    pub duration_ms: i64,
    /// Who the delegate was.
    #[serde(default, borrow)]
    pub delegate: DelegatePart<'a>,
    /// How it ended.
    #[schemars(extend("enum" = ["passed", "passed_with_debt", "skipped", "failed", "error"]))]
    pub outcome: &'a str,
    /// How a run that did not pass ended, when it ended in an error.
    #[serde(default, borrow)]
    pub error: Option<RunError<'a>>,
    /// The request as it ran (secrets redacted).
    #[serde(default)]
    #[schemars(with = "Option<Map<String, Value>>")]
    pub request: Option<J>,
    /// The tokens of the whole run.
    #[serde(default)]
    pub usage: Tokens,
    /// The trace the run's spans are in.
    #[serde(default, borrow)]
    pub trace_id: Option<&'a str>,
    /// The version of the retry prompt's template.
    #[serde(default)]
    pub retry_template_version: &'a str,
    /// The delegation file it was read from.
    #[serde(default)]
    pub source: Option<String>,
    /// The workspace it ran in.
    #[serde(default)]
    pub workdir: Option<String>,
    /// What the run wanted a human to know.
    #[serde(default)]
    #[schemars(with = "Vec<String>")]
    pub warnings: J,
    /// The run this one was delegated from (a parent's delegate call, `parent_id:`, or
    /// `HARNESS_PARENT_ID`).
    #[serde(default, borrow)]
    pub parent_id: Option<&'a str>,
    /// A human's decision (`approved`, `rejected`): none when a run is recorded.
    #[serde(default, borrow)]
    #[schemars(extend("enum" = ["approved", "rejected", null]))]
    pub decision: Option<&'a str>,
    /// `required` when the request set `citations: required` (the audit re-checks every claim
    /// line of the final answer).
    #[serde(default)]
    #[schemars(extend("enum" = ["required", "off"]))]
    pub citations: &'a str,
}

/// Who the delegate was.
#[derive(Default, Serialize, Deserialize, JsonSchema)]
pub struct DelegatePart<'a> {
    /// Its kind (`openai`, `claude`, `command`, …).
    #[serde(default)]
    pub kind: &'a str,
    /// Its model, when it names one.
    #[serde(default, borrow)]
    pub model: Option<&'a str>,
}

/// How a run that did not pass ended.
#[derive(Serialize, Deserialize, JsonSchema)]
pub struct RunError<'a> {
    /// The error's kind (DESIGN's error kinds).
    #[serde(default)]
    pub kind: &'a str,
    /// What happened.
    #[serde(default, borrow)]
    pub message: Option<&'a str>,
}

/// One attempt of an export.
#[derive(Serialize, Deserialize, JsonSchema)]
#[schemars(bound = "J: JsonSchema + Default")]
pub struct AttemptPart<'a, J = Json<'a>> {
    /// Its number, from 1.
    #[schemars(range(min = 0))]
    pub attempt: u32,
    /// Whether its verdict passed (none when it ended before one).
    #[serde(default)]
    pub passed: Option<bool>,
    /// Its verdict's reasons.
    #[serde(default)]
    #[schemars(with = "Vec<String>")]
    pub reasons: J,
    /// How long it took.
    #[serde(default)]
    #[schemars(range(min = 0))]
    pub duration_ms: i64,
    /// Its tokens.
    #[serde(default)]
    pub usage: Tokens,
    /// What the delegate delivered (DESIGN's Result: `response`, `tool_calls`, `tool_results`,
    /// …); for the last attempt, as the caller got it.
    #[serde(default)]
    #[schemars(with = "Option<Map<String, Value>>")]
    pub result: Option<J>,
    /// Its verdict (DESIGN's Verdict: findings, evidence, …).
    #[serde(default)]
    #[schemars(with = "Option<Map<String, Value>>")]
    pub verdict: Option<J>,
    /// The retry prompt it was sent, when it was a retry.
    #[serde(default, borrow)]
    pub retry_prompt: Option<&'a str>,
    /// Unified diffs of the text files the delegation had changed by the end of this attempt
    /// (absent when none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<Vec<String>>")]
    pub diff: Option<J>,
}

/// One event of an export, chained to the one before it.
#[derive(Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Event<'a> {
    /// Its place in the run, from 0.
    pub seq: u64,
    /// When it happened (RFC 3339).
    pub at: &'a str,
    /// What it is (`AttemptStarted`, `CheckCompleted`, `DelegationCompleted`, …).
    #[serde(rename = "type")]
    pub kind: &'a str,
    /// The attempt it belongs to (0: before the first).
    pub attempt: u64,
    /// What it says.
    pub data: Map<String, Value>,
    /// The hash of the event before it (64 zeros for the first).
    #[schemars(regex(pattern = r"^[0-9a-f]{64}$"))]
    pub prev_hash: &'a str,
    /// sha256(prev_hash ‖ canonical JSON of {seq, at, type, attempt, data}), hex.
    #[schemars(regex(pattern = r"^[0-9a-f]{64}$"))]
    pub hash: &'a str,
}

impl Event<'_> {
    /// The hash this event's content makes after `prev_hash`.
    pub(crate) fn hash_after(&self, prev_hash: &str) -> String {
        #[derive(Serialize)]
        struct Chained<'e> {
            seq: u64,
            at: &'e str,
            #[serde(rename = "type")]
            kind: &'e str,
            attempt: u64,
            data: &'e Map<String, Value>,
        }
        let mut text = Vec::with_capacity(512);
        let chained = Chained {
            seq: self.seq,
            at: self.at,
            kind: self.kind,
            attempt: self.attempt,
            data: &self.data,
        };
        crate::canon::write(&chained, &mut text).expect("an event always serialises");
        let mut hash = Sha256::new();
        hash.update(prev_hash.as_bytes());
        hash.update(&text);
        hex(&hash.finalize())
    }
}

/// Token counts as the journal's integer columns give them back; the cached share only when
/// there is one, so that a record made before it was counted exports (and seals) as it did.
#[derive(Default, Serialize, Deserialize, JsonSchema)]
pub struct Tokens {
    /// Prompt tokens.
    #[serde(default)]
    input_tokens: u64,
    /// Completion tokens.
    #[serde(default)]
    output_tokens: u64,
    /// Model requests.
    #[serde(default)]
    requests: u64,
    /// Of the prompt tokens, those read from the provider's cache (absent when none).
    #[serde(default, skip_serializing_if = "is_zero")]
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
#[derive(Serialize, Deserialize, JsonSchema)]
pub struct EvidenceFile<'a> {
    /// The criterion that vouched for it.
    #[serde(default)]
    pub id: &'a str,
    /// Its path in the workspace.
    #[serde(borrow, deserialize_with = "present")]
    #[schemars(with = "String")]
    pub path: Option<&'a str>,
    /// Its SHA-256 as the run saw it, hex.
    #[serde(borrow, deserialize_with = "present")]
    #[schemars(with = "String", regex(pattern = r"^[0-9a-f]{64}$"))]
    pub sha256: Option<&'a str>,
    /// Its length as the run saw it.
    #[serde(default)]
    pub bytes: Option<u64>,
}

/// A text a writer may lack but a reader must find.
fn present<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<&'de str>, D::Error> {
    <&'de str>::deserialize(deserializer).map(Some)
}

/// What every attempt had to do.
#[derive(Serialize, Deserialize, JsonSchema)]
#[schemars(bound = "J: JsonSchema + Default")]
pub struct Plan<J> {
    /// The steps, each `{tool, args}` (argument patterns) or `{check}`.
    #[schemars(with = "Vec<RequiredStep>")]
    pub required_steps: J,
}

/// A required step of a plan, as recorded (the schema's shape of one; the audit compiles it as
/// the run did).
#[derive(JsonSchema)]
#[allow(dead_code)]
struct RequiredStep {
    /// A tool the final attempt must have called.
    tool: Option<String>,
    /// Its arguments' patterns (regular expressions each argument must match whole).
    args: Option<std::collections::BTreeMap<String, String>>,
    /// A check the final attempt must have run.
    check: Option<String>,
}

/// A child a `delegate` call returned: its id and the seal its record had when it completed.
#[derive(Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Child {
    /// The child's run id.
    #[schemars(with = "Option<String>")]
    id: Value,
    /// The seal its record had when it completed.
    #[schemars(with = "Option<String>")]
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

    /// Its run id.
    pub fn id(&self) -> Option<&str> {
        self.id.as_str()
    }

    /// The seal its delegate call returned.
    pub fn seal(&self) -> Option<&str> {
        self.seal.as_str()
    }
}

/// An ed25519 signature of an export's seal (`runs export --sign`).
#[derive(Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Signature<'a> {
    /// Always `ed25519`.
    #[schemars(extend("const" = "ed25519"))]
    pub alg: &'a str,
    /// The first 16 hex digits of the sha256 of the public key.
    pub key: &'a str,
    /// The signature of the seal's hex text, hex.
    #[schemars(regex(pattern = r"^[0-9a-f]{128}$"))]
    pub value: &'a str,
}

/// A JSON value of a run document: as the writer has it (the canonical text it stores), or as a
/// reader has it (read back, or typed).
pub enum Json<'a> {
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
