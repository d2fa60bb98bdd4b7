//! Attestations any verifier reads: a run as an in-toto Statement v1 with the test-result
//! predicate, signed in a DSSE envelope (`runs export --format dsse --sign KEY.pem`).
//!
//! The envelope is the one every DSSE library reads (securesystemslib, sigstore, in-toto-golang):
//! `payloadType` `application/vnd.in-toto+json`, the statement as base64 `payload`, and
//! `signatures: [{keyid, sig}]`, each an ed25519 signature (base64) of the pre-authentication
//! encoding `DSSEv1 <len(type)> <type> <len(payload)> <payload>`. A `keyid` is the lowercase hex
//! SHA-256 of the public key's DER SubjectPublicKeyInfo ([`dsse_key_id`], `harness keys id`).
//!
//! The statement's first subject is the run document: `harness-run/<id>` with the SHA-256 of the
//! exact bytes `harness runs export ID` writes ([`document_bytes`]); `sha256sum run.json` shows
//! it. [`audit_envelope`] verifies an envelope, and the run document beside it when given.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use ed25519_dalek::pkcs8::EncodePublicKey as _;
use ed25519_dalek::{Signer as _, SigningKey, VerifyingKey};
use serde_json::{Map, Value, json};
use sha2::{Digest as _, Sha256};

use crate::audit::{AuditFailure, AuditOptions, VerificationReport, audit};
use crate::canon::canonical;
use harness_builtins::hex;

/// The DSSE `payloadType` of an in-toto statement.
pub const PAYLOAD_TYPE: &str = "application/vnd.in-toto+json";
/// The statement's `_type`.
pub const STATEMENT_TYPE: &str = "https://in-toto.io/Statement/v1";
/// The predicate a run is attested with.
pub const PREDICATE_TYPE: &str = "https://in-toto.io/attestation/test-result/v0.1";
/// What an envelope's audit reports as its schema.
pub const ENVELOPE_SCHEMA: &str = "dsse/in-toto-test-result";

/// What a statement says besides the run document itself.
#[derive(Debug, Clone, Copy, Default)]
pub struct Attesting<'a> {
    /// The commit the workspace's `HEAD` names, when it is a git repository.
    pub git_commit: Option<&'a str>,
    /// Where the run can be read (`serve`'s page of it).
    pub url: Option<&'a str>,
}

/// The bytes of a run document as `harness runs export` writes it: pretty JSON and a newline.
/// The statement's subject digest is their SHA-256.
pub fn document_bytes(document: &Value) -> Vec<u8> {
    let mut bytes = serde_json::to_vec_pretty(document).expect("a JSON value always serialises");
    bytes.push(b'\n');
    bytes
}

/// The lowercase hex SHA-256 of `key`'s DER SubjectPublicKeyInfo: the `keyid` of its DSSE
/// signatures.
pub fn dsse_key_id(key: &VerifyingKey) -> String {
    let der = key
        .to_public_key_der()
        .expect("an ed25519 key always encodes as SubjectPublicKeyInfo");
    hex(&Sha256::digest(der.as_bytes()))
}

/// DSSE's pre-authentication encoding: what a signature signs.
pub fn pae(payload_type: &str, payload: &[u8]) -> Vec<u8> {
    let mut out = format!(
        "DSSEv1 {} {payload_type} {} ",
        payload_type.len(),
        payload.len()
    )
    .into_bytes();
    out.extend_from_slice(payload);
    out
}

/// The in-toto test-result `result` of a run's outcome: `PASSED` for `passed`, `WARNED` for
/// `passed_with_debt`, `FAILED` for every other.
pub fn test_result(outcome: &str) -> &'static str {
    match outcome {
        "passed" => "PASSED",
        "passed_with_debt" => "WARNED",
        _ => "FAILED",
    }
}

/// The in-toto Statement v1 of the run `document` (a `harness.run/v1` export).
pub fn statement(document: &Value, attesting: &Attesting<'_>) -> Value {
    let run = &document["run"];
    let id = run["id"].as_str().unwrap_or_default();
    let mut subject = vec![json!({
        "name": format!("harness-run/{id}"),
        "digest": {"sha256": hex(&Sha256::digest(document_bytes(document)))},
        "annotations": {"seal": document["seal"]},
    })];
    if let Some(commit) = attesting.git_commit {
        subject.push(json!({"name": "workspace", "digest": {"gitCommit": commit}}));
    }
    let tests = Tests::of(document);
    let mut predicate = Map::new();
    predicate.insert(
        "result".to_owned(),
        json!(test_result(run["outcome"].as_str().unwrap_or_default())),
    );
    predicate.insert("configuration".to_owned(), configuration(run));
    if let Some(url) = attesting.url {
        predicate.insert("url".to_owned(), json!(url));
    }
    predicate.insert("passedTests".to_owned(), json!(tests.passed));
    predicate.insert("warnedTests".to_owned(), json!(tests.warned));
    predicate.insert("failedTests".to_owned(), json!(tests.failed));
    json!({
        "_type": STATEMENT_TYPE,
        "subject": subject,
        "predicateType": PREDICATE_TYPE,
        "predicate": predicate,
    })
}

/// What the run was configured with: the request as it ran (after `delegation.pre` hooks),
/// digested as canonical JSON and named by the delegation file it came from.
fn configuration(run: &Value) -> Value {
    if run["request"].is_null() {
        return json!([]);
    }
    let name = run["source"].as_str().unwrap_or("request");
    json!([{
        "name": name,
        "digest": {"sha256": hex(&Sha256::digest(canonical(&run["request"]).as_bytes()))},
        "annotations": {"digested": "the request as it ran, canonical JSON"},
    }])
}

/// The names of what judged the final attempt, by result.
#[derive(Debug, Default)]
struct Tests {
    passed: Vec<String>,
    warned: Vec<String>,
    failed: Vec<String>,
}

impl Tests {
    /// Every check, criterion and holdout of the final verdict's evidence (`check tests`), and
    /// every stage that found something (`gaming exit_status_forced`).
    fn of(document: &Value) -> Tests {
        let mut tests = Tests::default();
        let Some(verdict) = document["attempts"]
            .as_array()
            .and_then(|attempts| attempts.iter().rev().find(|a| a["verdict"].is_object()))
            .map(|a| &a["verdict"])
        else {
            return tests;
        };
        let none = Vec::new();
        for evidence in verdict["evidence"].as_array().unwrap_or(&none) {
            let name = label(&evidence["source"], &evidence["criterion"]);
            match (evidence["result"].as_str(), evidence["required"] != false) {
                (Some("pass"), _) => tests.passed.push(name),
                (_, false) => tests.warned.push(name),
                _ => tests.failed.push(name),
            }
        }
        // The stages the final attempt's events show ran: passed unless a finding of theirs
        // says otherwise (below).
        let events = document["events"].as_array().unwrap_or(&none);
        let last_attempt = events
            .iter()
            .rposition(|e| e["type"] == "AttemptStarted")
            .unwrap_or(0);
        for event in &events[last_attempt..] {
            let stage = match event["type"].as_str() {
                Some("ScopeValidated") => "scope",
                Some("ClaimsChecked") => "claim",
                Some("CriticCompleted") => "critic",
                _ => continue,
            };
            if !tests.passed.iter().any(|p| p == stage) {
                tests.passed.push(stage.to_owned());
            }
        }
        for finding in verdict["findings"].as_array().unwrap_or(&none) {
            let name = label(&finding["source"], &finding["name"]);
            let known = |list: &[String]| list.contains(&name);
            if known(&tests.failed) || known(&tests.warned) {
                continue;
            }
            let source = finding["source"].as_str().unwrap_or_default();
            tests
                .passed
                .retain(|passed| *passed != name && passed != source);
            if finding["blocking"] == true {
                tests.failed.push(name);
            } else {
                tests.warned.push(name);
            }
        }
        tests
    }
}

/// `source name`, or `source` alone when the name is empty.
fn label(source: &Value, name: &Value) -> String {
    let source = source.as_str().unwrap_or("unknown");
    match name.as_str() {
        Some(name) if !name.is_empty() => format!("{source} {name}"),
        _ => source.to_owned(),
    }
}

/// `statement` in a DSSE envelope signed with `key`.
pub fn envelope(statement: &Value, key: &SigningKey) -> Value {
    let payload = serde_json::to_vec(statement).expect("a JSON value always serialises");
    let signature = key.sign(&pae(PAYLOAD_TYPE, &payload));
    json!({
        "payloadType": PAYLOAD_TYPE,
        "payload": STANDARD.encode(&payload),
        "signatures": [{
            "keyid": dsse_key_id(&key.verifying_key()),
            "sig": STANDARD.encode(signature.to_bytes()),
        }],
    })
}

/// True when `value` has the shape of a DSSE envelope (what `harness audit` tells apart from a
/// run document).
pub fn is_envelope(value: &Value) -> bool {
    value.get("payloadType").is_some() && value.get("signatures").is_some()
}

/// The run document an envelope is audited with, and the bytes it was read from.
#[derive(Debug, Clone, Copy)]
pub struct Beside<'a> {
    /// The run document.
    pub document: &'a Value,
    /// Its bytes as read (their SHA-256 must be the statement's subject digest).
    pub bytes: &'a [u8],
}

/// Verifies a DSSE envelope fail-closed: its shape and statement (`envelope`), a signature by
/// `key` over its pre-authentication encoding (`signature`), and with the run document beside it
/// that the document is the statement's subject (`subject`), that the statement's result is the
/// document's outcome (`result`), and the document's own audit (every step of [`audit`] but the
/// document's signature: the envelope's is the one that vouches here).
pub fn audit_envelope(
    envelope: &Value,
    key: &VerifyingKey,
    beside: Option<Beside<'_>>,
    options: &AuditOptions<'_>,
) -> VerificationReport {
    let mut failures = Vec::new();
    let mut checks = Vec::new();
    let fail = |failures: &mut Vec<AuditFailure>, code, at: &str, message: String| {
        failures.push(AuditFailure {
            code,
            message,
            at: at.to_owned(),
        });
    };
    let opened = open(envelope);
    let statement = match &opened {
        Ok((_, statement)) => Some(statement),
        Err((at, why)) => {
            fail(&mut failures, "envelope_invalid", at, why.clone());
            None
        }
    };
    checks.push(("envelope", failures.is_empty()));
    if let Ok((payload, _)) = &opened {
        let before = failures.len();
        if let Err(why) = signed_by(envelope, payload, key) {
            fail(&mut failures, "signature_invalid", "signatures", why);
        }
        checks.push(("signature", failures.len() == before));
    }
    let mut metrics = Map::new();
    if let (Some(statement), Some(beside)) = (statement, beside) {
        let before = failures.len();
        let digest = hex(&Sha256::digest(beside.bytes));
        let id = beside.document["run"]["id"].as_str().unwrap_or_default();
        let name = format!("harness-run/{id}");
        let subject = statement["subject"]
            .as_array()
            .and_then(|s| s.iter().find(|s| s["name"] == name.as_str()));
        match subject.and_then(|s| s["digest"]["sha256"].as_str()) {
            Some(attested) if attested.eq_ignore_ascii_case(&digest) => {}
            Some(attested) => fail(
                &mut failures,
                "subject_mismatch",
                "subject",
                format!(
                    "the run document is not the one attested: its bytes hash to {digest}, the statement names {attested} (export it again with `harness runs export {id} -o FILE`, unchanged)"
                ),
            ),
            None => fail(
                &mut failures,
                "subject_mismatch",
                "subject",
                format!("the statement names no subject {name} with a sha256 digest"),
            ),
        }
        checks.push(("subject", failures.len() == before));
        let before = failures.len();
        let outcome = beside.document["run"]["outcome"]
            .as_str()
            .unwrap_or_default();
        let expected = test_result(outcome);
        if statement["predicate"]["result"] != expected {
            fail(
                &mut failures,
                "result_mismatch",
                "predicate.result",
                format!(
                    "the statement says {}, the run's outcome {outcome:?} is {expected}",
                    statement["predicate"]["result"]
                ),
            );
        }
        checks.push(("result", failures.len() == before));
        let options = AuditOptions {
            public_key: None,
            ..options.clone()
        };
        let report = audit(beside.document, &options);
        checks.extend(report.checks);
        failures.extend(report.failures);
        metrics = report.metrics;
    }
    if let Some(statement) = statement {
        metrics.insert(
            "result".to_owned(),
            statement["predicate"]["result"].clone(),
        );
        metrics.insert(
            "subjects".to_owned(),
            json!(statement["subject"].as_array().map_or(0, Vec::len)),
        );
    }
    VerificationReport {
        schema_version: Some(ENVELOPE_SCHEMA.to_owned()),
        checks,
        failures,
        metrics,
    }
}

/// The envelope's payload and the statement it holds, or where and why it is not one.
fn open(envelope: &Value) -> Result<(Vec<u8>, Value), (&'static str, String)> {
    match envelope["payloadType"].as_str() {
        Some(PAYLOAD_TYPE) => {}
        other => {
            return Err((
                "payloadType",
                format!("payloadType is {other:?}, not {PAYLOAD_TYPE:?}"),
            ));
        }
    }
    let payload = envelope["payload"]
        .as_str()
        .and_then(|text| STANDARD.decode(text).ok())
        .ok_or(("payload", "the payload is not base64".to_owned()))?;
    let statement: Value = serde_json::from_slice(&payload)
        .map_err(|e| ("payload", format!("the payload is not JSON ({e})")))?;
    if statement["_type"] != STATEMENT_TYPE {
        return Err((
            "payload._type",
            format!(
                "the payload is not an in-toto Statement v1 (_type {})",
                statement["_type"]
            ),
        ));
    }
    if statement["predicateType"] != PREDICATE_TYPE {
        return Err((
            "payload.predicateType",
            format!(
                "the statement's predicateType is {}, not {PREDICATE_TYPE}",
                statement["predicateType"]
            ),
        ));
    }
    Ok((payload, statement))
}

/// Ok when a signature of `envelope` whose keyid is `key`'s verifies over the payload's PAE.
fn signed_by(envelope: &Value, payload: &[u8], key: &VerifyingKey) -> Result<(), String> {
    let keyid = dsse_key_id(key);
    let signed = pae(PAYLOAD_TYPE, payload);
    let none = Vec::new();
    let signatures = envelope["signatures"].as_array().unwrap_or(&none);
    let by_key: Vec<&Value> = signatures
        .iter()
        .filter(|s| s["keyid"] == keyid.as_str())
        .collect();
    if by_key.is_empty() {
        return Err(format!(
            "no signature by the key {keyid} (the envelope is signed by {})",
            signatures
                .iter()
                .filter_map(|s| s["keyid"].as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    let holds = by_key.iter().any(|s| {
        s["sig"]
            .as_str()
            .and_then(|text| STANDARD.decode(text).ok())
            .and_then(|bytes| <[u8; 64]>::try_from(bytes).ok())
            .is_some_and(|bytes| {
                key.verify_strict(&signed, &ed25519_dalek::Signature::from_bytes(&bytes))
                    .is_ok()
            })
    });
    if holds {
        Ok(())
    } else {
        Err(format!(
            "the signature by the key {keyid} does not hold for this payload (changed since it was signed)"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> SigningKey {
        SigningKey::from_bytes(&[7; 32])
    }

    fn document() -> Value {
        json!({
            "schema_version": "harness.run/v1",
            "run": {"id": "d-1", "outcome": "passed_with_debt", "request": {"task": "t"}, "source": "d.yaml"},
            "attempts": [{"verdict": {
                "evidence": [
                    {"criterion": "tests", "source": "check", "result": "pass", "required": true},
                    {"criterion": "lint", "source": "check", "result": "fail", "required": false},
                ],
                "findings": [{"source": "gaming", "name": "exit_status_forced", "blocking": true}],
            }}],
        })
    }

    #[test]
    fn the_pae_is_dsses() {
        // The example of the DSSE protocol's specification.
        assert_eq!(
            pae("http://example.com/HelloWorld", b"hello world"),
            b"DSSEv1 29 http://example.com/HelloWorld 11 hello world"
        );
    }

    #[test]
    fn a_statement_names_the_document_and_what_judged_it() {
        let document = document();
        let statement = statement(
            &document,
            &Attesting {
                git_commit: Some("abc"),
                url: None,
            },
        );
        let digest = hex(&Sha256::digest(document_bytes(&document)));
        assert_eq!(statement["subject"][0]["name"], "harness-run/d-1");
        assert_eq!(statement["subject"][0]["digest"]["sha256"], digest.as_str());
        assert_eq!(statement["subject"][1]["digest"]["gitCommit"], "abc");
        let predicate = &statement["predicate"];
        assert_eq!(predicate["result"], "WARNED");
        assert_eq!(predicate["passedTests"], json!(["check tests"]));
        assert_eq!(predicate["warnedTests"], json!(["check lint"]));
        assert_eq!(
            predicate["failedTests"],
            json!(["gaming exit_status_forced"])
        );
        assert_eq!(predicate["configuration"][0]["name"], "d.yaml");
    }

    #[test]
    fn an_envelope_verifies_by_its_key_only_and_unchanged() {
        let document = document();
        let signed = envelope(&statement(&document, &Attesting::default()), &key());
        let bytes = document_bytes(&document);
        let beside = Some(Beside {
            document: &document,
            bytes: &bytes,
        });
        let options = AuditOptions::default();
        let report = audit_envelope(&signed, &key().verifying_key(), None, &options);
        assert!(report.valid(), "{:?}", report.failures);

        let other = SigningKey::from_bytes(&[8; 32]).verifying_key();
        let report = audit_envelope(&signed, &other, None, &options);
        assert_eq!(report.failures[0].code, "signature_invalid");

        let mut tampered = signed.clone();
        let mut statement = statement(&document, &Attesting::default());
        statement["predicate"]["result"] = json!("PASSED");
        tampered["payload"] = json!(STANDARD.encode(statement.to_string()));
        let report = audit_envelope(&tampered, &key().verifying_key(), beside, &options);
        let codes: Vec<_> = report.failures.iter().map(|f| f.code).collect();
        assert!(codes.contains(&"signature_invalid"), "{codes:?}");
        assert!(codes.contains(&"result_mismatch"), "{codes:?}");

        let mut edited = document.clone();
        edited["run"]["outcome"] = json!("passed");
        let edited_bytes = document_bytes(&edited);
        let beside = Some(Beside {
            document: &edited,
            bytes: &edited_bytes,
        });
        let report = audit_envelope(&signed, &key().verifying_key(), beside, &options);
        let codes: Vec<_> = report.failures.iter().map(|f| f.code).collect();
        assert!(codes.contains(&"subject_mismatch"), "{codes:?}");
    }
}
