//! A run as the journal writes it: the JSON text of its columns and the seal of its export,
//! each value serialised once (issue 46).
//!
//! Each JSON column (the request, every attempt's result, verdict and diff, the events) is
//! written as canonical JSON straight from the report's typed values ([`canon`]). The export a
//! reader will make of the stored record (`harness runs export`, `audit RUN_ID`,
//! [`export`](crate::export::export)) is then assembled from those same bytes: the one
//! [`RunDocument`] shape a reader fills too, each column's text put in place as it is, the
//! events chained from their members, and the whole hashed into the seal. Nothing is parsed,
//! turned into a `serde_json::Value` or written twice. A reader parses the stored text and
//! writes it canonically again, which gives back the same bytes, so the two seals agree
//! (`journal::tests::the_seal_written_with_a_record_is_the_seal_of_the_record_read_back`).

use harness::{RETRY_TEMPLATE_VERSION, Report};
use harness_builtins::hex;
use sha2::{Digest as _, Sha256};

use crate::authority::GENESIS;
use crate::canon;
use crate::export::{
    AttemptPart, Child, DelegatePart, ENVELOPE, Json, Plan, RUN_SCHEMA, RunDocument, RunError,
    RunPart, Tokens, citations_of, evidence_files,
};
use crate::journal::{RecordMeta, from_unix_millis, millis, unix_millis};

/// The JSON text of a run's columns, canonical, and its export's seal.
#[derive(Debug)]
pub(crate) struct Written {
    /// The request as it ran.
    pub(crate) request: Option<String>,
    /// What the run wanted a human to know.
    pub(crate) warnings: String,
    /// Its events, in order.
    pub(crate) events: String,
    /// Per attempt, in order.
    pub(crate) attempts: Vec<WrittenAttempt>,
    /// The seal of the export a reader will make of the stored record (DESIGN §4.13).
    pub(crate) seal: String,
}

/// The JSON text of one attempt's columns.
#[derive(Debug)]
pub(crate) struct WrittenAttempt {
    /// Its verdict's reasons.
    pub(crate) reasons: String,
    /// The result kept: the one delivered, for the last attempt.
    pub(crate) result: Option<String>,
    /// Its verdict.
    pub(crate) verdict: Option<String>,
    /// Its diff, when it changed anything.
    pub(crate) diff: Option<String>,
}

/// `report` as the journal stores it.
///
/// # Errors
/// When a value has no JSON form (a map keyed by something other than text or numbers).
pub(crate) fn written(report: &Report, meta: &RecordMeta) -> Result<Written, canon::Error> {
    let last = report.attempts.len().saturating_sub(1);
    // The caller got the last attempt's result as `delegation.post` hooks delivered it (maybe
    // redacted): that is the one kept.
    let kept = |index: usize| match &report.delivered {
        Some(delivered) if index == last => Some(delivered),
        _ => report.attempts[index].result.as_ref(),
    };
    let mut attempts = Vec::with_capacity(report.attempts.len());
    for (index, attempt) in report.attempts.iter().enumerate() {
        attempts.push(WrittenAttempt {
            reasons: canon::to_string(&attempt.reasons())?,
            result: kept(index).map(canon::to_string).transpose()?,
            verdict: attempt.verdict.as_ref().map(canon::to_string).transpose()?,
            diff: (!attempt.diff.is_empty())
                .then(|| canon::to_string(&attempt.diff))
                .transpose()?,
        });
    }
    let request = report.request.as_ref().map(canon::to_string).transpose()?;
    let chain = Chain::of(&report.events)?;

    let first = chain.first.as_ref();
    let plan = first
        .and_then(|data| data.get("plan"))
        .filter(|steps| steps.first() == Some(&b'[') && *steps != b"[]")
        .map(|steps| Plan {
            required_steps: Json::Raw(utf8(steps)),
        });
    let citations = first.and_then(|data| data.get("citations")) == Some(&b"true"[..]);
    let parent_id = report.parent_id.as_deref().or_else(|| {
        (0..report.attempts.len())
            .rev()
            .find_map(|index| kept(index)?.parent_id.as_deref())
    });
    let children = (0..report.attempts.len())
        .filter_map(kept)
        .flat_map(|result| &result.tool_results)
        .filter(|r| r.name == "delegate" && !r.is_error)
        .map(|r| Child::returned(&r.content))
        .collect();
    let last_verdict = report
        .attempts
        .iter()
        .rev()
        .find_map(|a| a.verdict.as_ref());
    let warnings = canon::to_string(&report.warnings)?;
    let document = RunDocument {
        schema_version: RUN_SCHEMA,
        run: RunPart {
            id: &report.id,
            started_at: humantime::format_rfc3339_millis(from_unix_millis(unix_millis(
                report.started_at,
            )))
            .to_string(),
            duration_ms: millis(report.duration),
            delegate: DelegatePart {
                kind: &report.delegate_kind,
                model: report.model.as_deref(),
            },
            outcome: report.outcome.as_str(),
            error: report.error.as_ref().map(|e| RunError {
                kind: e.kind().as_str(),
                message: Some(e.message()),
            }),
            request: request.as_deref().map(Json::Raw),
            usage: Tokens::of(report.usage()),
            trace_id: report.trace_id.as_deref(),
            retry_template_version: RETRY_TEMPLATE_VERSION,
            source: meta.source.as_ref().map(|p| p.display().to_string()),
            workdir: meta.workdir.as_ref().map(|p| p.display().to_string()),
            warnings: Json::Raw(&warnings),
            parent_id,
            decision: None,
            citations: citations_of(citations),
        },
        attempts: report
            .attempts
            .iter()
            .zip(&attempts)
            .map(|(attempt, written)| AttemptPart {
                attempt: attempt.attempt,
                passed: attempt.passed(),
                reasons: Json::Raw(&written.reasons),
                duration_ms: millis(attempt.duration),
                usage: Tokens::of(attempt.usage),
                result: written.result.as_deref().map(Json::Raw),
                verdict: written.verdict.as_deref().map(Json::Raw),
                retry_prompt: attempt.retry_prompt.as_deref(),
                diff: written.diff.as_deref().map(Json::Raw),
            })
            .collect(),
        events: Json::Raw(utf8(&chain.exported)),
        evidence: evidence_files(last_verdict),
        plan,
        children,
        seal: None,
        signature: None,
    };
    let seal = document.seal();
    Ok(Written {
        request,
        warnings,
        events: String::from_utf8(chain.stored).map_err(serde::ser::Error::custom)?,
        attempts,
        seal,
    })
}

/// A run's events, each written once: the column's array, the export's chained array, and the
/// `data` of the first (what the run was held to).
struct Chain {
    stored: Vec<u8>,
    exported: Vec<u8>,
    first: Option<canon::Members>,
}

impl Chain {
    fn of(events: &[harness::EventRecord]) -> Result<Self, canon::Error> {
        let mut stored = Vec::with_capacity(events.len() * 256 + 2);
        let mut exported = Vec::with_capacity(events.len() * 384 + 2);
        let mut chained = Vec::with_capacity(1024);
        let mut data = Vec::with_capacity(1024);
        let mut previous = GENESIS.to_owned();
        let mut first = None;
        stored.push(b'[');
        exported.push(b'[');
        for (i, event) in events.iter().enumerate() {
            let members = canon::members(event)?;
            if i > 0 {
                stored.push(b',');
                exported.push(b',');
            }
            members.write_object(&mut stored, |_| true);
            data.clear();
            members.write_object(&mut data, |key| !ENVELOPE.contains(&key));
            let part = |key: &str| members.get(key).unwrap_or(b"null");
            // `hash = sha256(prev_hash ‖ canonical {at, attempt, data, seq, type})`, as
            // `export::event_hash` computes it from a read record.
            chained.clear();
            object(
                &mut chained,
                &[
                    ("at", part("at")),
                    ("attempt", part("attempt")),
                    ("data", &data),
                    ("seq", part("seq")),
                    ("type", part("type")),
                ],
            );
            let mut hash = Sha256::new();
            hash.update(previous.as_bytes());
            hash.update(&chained);
            let hash = hex(&hash.finalize());
            let quoted = |text: &str| format!("\"{text}\"");
            object(
                &mut exported,
                &[
                    ("at", part("at")),
                    ("attempt", part("attempt")),
                    ("data", &data),
                    ("hash", quoted(&hash).as_bytes()),
                    ("prev_hash", quoted(&previous).as_bytes()),
                    ("seq", part("seq")),
                    ("type", part("type")),
                ],
            );
            previous = hash;
            if i == 0 {
                first = Some(members);
            }
        }
        stored.push(b']');
        exported.push(b']');
        Ok(Chain {
            stored,
            exported,
            first,
        })
    }
}

/// Appends the object of `members`, given sorted by key, each value canonical JSON text.
fn object(out: &mut Vec<u8>, members: &[(&str, &[u8])]) {
    debug_assert!(members.is_sorted_by_key(|(key, _)| *key));
    out.push(b'{');
    for (i, (key, value)) in members.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.push(b'"');
        out.extend_from_slice(key.as_bytes());
        out.extend_from_slice(b"\":");
        out.extend_from_slice(value);
    }
    out.push(b'}');
}

/// Canonical JSON is UTF-8 (it is only ever written from `str`s).
fn utf8(bytes: &[u8]) -> &str {
    std::str::from_utf8(bytes).unwrap_or_default()
}
