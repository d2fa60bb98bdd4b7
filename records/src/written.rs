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

use std::path::PathBuf;
use std::time::SystemTime;

use harness::{RETRY_TEMPLATE_VERSION, Report};
use harness_builtins::hex;
use rusqlite::{TransactionBehavior, params};
use sha2::{Digest as _, Sha256};

use crate::canon::{self, GENESIS};
use crate::error::{Error, Result};
use crate::export::{
    AttemptPart, Child, DelegatePart, ENVELOPE, Json, Plan, RUN_SCHEMA, RunDocument, RunError,
    RunPart, Tokens, citations_of, evidence_files,
};
use crate::journal::{
    Journal, RecordMeta, from_unix_millis, millis, sql_error, tokens, unix_millis,
};

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
pub(crate) fn written(
    report: &Report,
    meta: &RecordMeta,
) -> std::result::Result<Written, canon::Error> {
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

impl Journal {
    /// Records one finished delegation, with its attempts, in one transaction; returns the seal
    /// it was stored with (DESIGN §4.13).
    ///
    /// # Errors
    /// [`ErrorKind::Journal`](crate::ErrorKind::Journal) when the write fails (disk full, read-only
    /// file, a record with the same id already there); nothing of the delegation is written then.
    pub fn record(&mut self, report: &Report, meta: &RecordMeta) -> Result<String> {
        self.record_all([(report, meta)])?
            .pop()
            .unwrap_or_else(|| Err(Error::journal("nothing was recorded")))
    }

    /// Records many finished delegations in one transaction (far cheaper per record than
    /// [`Journal::record`]); each delegation is still all-or-nothing. Returns, per delegation
    /// and in order, the seal it was stored with or why it could not be written.
    ///
    /// # Errors
    /// [`ErrorKind::Journal`](crate::ErrorKind::Journal) when the transaction itself fails; then
    /// nothing of this call is written.
    pub fn record_all<'a>(
        &mut self,
        items: impl IntoIterator<Item = (&'a Report, &'a RecordMeta)>,
    ) -> Result<Vec<std::result::Result<String, Error>>> {
        let path = self.path.clone();
        let items: Vec<_> = items.into_iter().collect();
        // Usually every record goes in: one transaction and nothing else. A savepoint per record
        // would copy every page it touches aside first, in case it has to be undone.
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(|e| sql_error(&path, "cannot start writing to", &e))?;
        if let Ok(seals) = items
            .iter()
            .map(|(report, meta)| insert(&tx, report, meta))
            .collect::<rusqlite::Result<Vec<String>>>()
        {
            tx.commit()
                .map_err(|e| sql_error(&path, "cannot commit to", &e))?;
            return Ok(seals.into_iter().map(Ok).collect());
        }
        // Some record failed, and with it the transaction: write them again, a savepoint each,
        // so that only the failing ones are lost.
        tx.rollback()
            .map_err(|e| sql_error(&path, "cannot roll back", &e))?;
        let mut tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(|e| sql_error(&path, "cannot start writing to", &e))?;
        let mut outcomes = Vec::with_capacity(items.len());
        for (report, meta) in items {
            let fail = |e: rusqlite::Error| {
                sql_error(&path, &format!("cannot record {} in", report.id), &e)
            };
            // A savepoint per delegation: a failing one rolls back alone.
            let written = tx
                .savepoint()
                .and_then(|savepoint| {
                    let seal = insert(&savepoint, report, meta)?;
                    savepoint.commit()?;
                    Ok(seal)
                })
                .map_err(fail);
            outcomes.push(written);
        }
        tx.commit()
            .map_err(|e| sql_error(&path, "cannot commit to", &e))?;
        Ok(outcomes)
    }
}

/// The seal the record of `report` will have once it is recorded with `meta` (what a queue
/// worker tells the parent of a child run it carries to its submitter, see
/// [`harness::Runtime::carry_children`]).
///
/// # Errors
/// [`ErrorKind::Journal`](crate::ErrorKind::Journal) when a value of the report has no JSON form.
pub fn seal_of(report: &Report, meta: &RecordMeta) -> Result<String> {
    written(report, meta)
        .map(|written| written.seal)
        .map_err(|e| Error::journal(format!("{} cannot be sealed: {e}", report.id)))
}

/// Writes one delegation and its attempts with cached statements, sealed as written, after the
/// child runs it carries (see [`harness::Report::carried`]): all or none of them. Returns its
/// seal.
fn insert(
    conn: &rusqlite::Connection,
    report: &Report,
    meta: &RecordMeta,
) -> rusqlite::Result<String> {
    for run in &report.carried {
        insert(conn, &run.report, &RecordMeta::from(run))?;
    }
    // Each JSON column is written once, canonically, and the seal is the hash of the export a
    // reader will make of these very bytes (see `written`): nothing is read back to seal it.
    let written =
        written(report, meta).map_err(|e| rusqlite::Error::ToSqlConversionFailure(Box::new(e)))?;
    // The row its start wrote, replaced by the whole run.
    conn.prepare_cached("DELETE FROM delegations WHERE id = ?1 AND outcome = 'running'")?
        .execute(params![report.id])?;
    let usage = report.usage();
    let path_text = |p: &Option<PathBuf>| p.as_ref().map(|p| p.display().to_string());
    conn.prepare_cached(
        "INSERT INTO delegations (id, started_at_ms, duration_ms, delegate_kind, model, outcome,
            error_kind, error_message, attempts, input_tokens, output_tokens, requests,
            trace_id, retry_template_version, source, workdir, recorded_at_ms, request, warnings,
            events, parent_id, seal, cached_input_tokens)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17,
            ?18, ?19, ?20, ?21, ?22, ?23)",
    )?
    .execute(params![
        report.id,
        unix_millis(report.started_at),
        millis(report.duration),
        report.delegate_kind,
        report.model,
        report.outcome.as_str(),
        report.error.as_ref().map(|e| e.kind().as_str()),
        report.error.as_ref().map(harness::Error::message),
        i64::try_from(report.attempts.len()).unwrap_or(i64::MAX),
        tokens(usage.input_tokens),
        tokens(usage.output_tokens),
        tokens(usage.requests),
        report.trace_id,
        RETRY_TEMPLATE_VERSION,
        path_text(&meta.source),
        path_text(&meta.workdir),
        unix_millis(SystemTime::now()),
        written.request,
        written.warnings,
        written.events,
        report.parent_id,
        &written.seal,
        tokens(usage.cached_input_tokens),
    ])?;
    let mut statement = conn.prepare_cached(
        "INSERT INTO attempts (delegation_id, attempt, passed, reasons, duration_ms,
            input_tokens, output_tokens, requests, result, verdict, retry_prompt, diff,
            cached_input_tokens)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)",
    )?;
    for (attempt, text) in report.attempts.iter().zip(&written.attempts) {
        statement.execute(params![
            report.id,
            attempt.attempt,
            attempt.passed(),
            text.reasons,
            millis(attempt.duration),
            tokens(attempt.usage.input_tokens),
            tokens(attempt.usage.output_tokens),
            tokens(attempt.usage.requests),
            text.result,
            text.verdict,
            attempt.retry_prompt,
            text.diff,
            tokens(attempt.usage.cached_input_tokens),
        ])?;
    }
    Ok(written.seal)
}
