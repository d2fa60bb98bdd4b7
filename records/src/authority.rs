//! Human authority over finished runs (DESIGN §4.11): the review queue, overrides, and the
//! hash-chained audit log that records every override and every refused attempt.
//!
//! An override never rewrites a run: the run keeps its outcome and gains a final state
//! (`approved` or `rejected`), a `HumanOverride` event and an audit row. The audit log is
//! append-only by convention and tamper-evident by construction: each row's hash covers the
//! previous row's hash and its own canonical JSON, so editing, deleting or reordering a row
//! breaks the chain at that row. It does not stop someone who can write the database from
//! rebuilding the whole chain: store the head hash elsewhere (`harness audit-log verify
//! --anchor`) and check against it later (`--check-anchor`).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use harness::OverridePolicy;
use harness::events::{EventRecord, RunEvent};

use crate::error::{Error, ErrorKind, Result};
use rusqlite::{OptionalExtension as _, TransactionBehavior, params};
use serde_json::{Value, json};
use sha2::{Digest as _, Sha256};

use crate::canon::{GENESIS, canonical};
use crate::journal::{Journal, Record, from_unix_millis, sql_error, unix_millis};

/// What an override covers (`--type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OverrideType {
    /// Failed checks, criteria, verifiers and hooks.
    Check,
    /// A critic's rejection, or the debt it left.
    Verifier,
    /// Whatever failed.
    Direct,
}

impl OverrideType {
    /// The type named `name` (`check`, `verifier` or `direct`).
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "check" => Some(OverrideType::Check),
            "verifier" => Some(OverrideType::Verifier),
            "direct" => Some(OverrideType::Direct),
            _ => None,
        }
    }

    /// `check`, `verifier` or `direct`.
    pub fn as_str(self) -> &'static str {
        match self {
            OverrideType::Check => "check",
            OverrideType::Verifier => "verifier",
            OverrideType::Direct => "direct",
        }
    }
}

/// A human's decision about a run awaiting review.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OverrideRequest {
    /// The run.
    pub run_id: String,
    /// True to approve (final state `approved`), false to reject (`rejected`).
    pub approve: bool,
    /// What the override covers.
    pub override_type: OverrideType,
    /// Why (required unless the policy lets a check override go without one).
    pub reason: Option<String>,
    /// Who decides; never guessed.
    pub user: String,
}

/// An override as the journal holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Override {
    /// The run.
    pub run_id: String,
    /// Who decided.
    pub user: String,
    /// `check`, `verifier` or `direct`.
    pub override_type: String,
    /// `approved` or `rejected`.
    pub decision: String,
    /// Why.
    pub reason: Option<String>,
    /// When.
    pub at: SystemTime,
    /// The run's outcome before: `failed` or `passed_with_debt`.
    pub previous_state: String,
    /// Its audit row.
    pub audit_seq: u64,
    /// Why it may not be a human's: its audit row says it was recorded while a delegate with
    /// unconfined commands ran against the journal.
    pub suspect: Option<String>,
}

impl Override {
    /// As JSON (`runs show --json`, `override --json`).
    pub fn to_json(&self) -> Value {
        json!({
            "run_id": self.run_id,
            "user": self.user,
            "override_type": self.override_type,
            "decision": self.decision,
            "reason": self.reason,
            "at": humantime::format_rfc3339_millis(self.at).to_string(),
            "previous_state": self.previous_state,
            "audit_seq": self.audit_seq,
            "suspect": self.suspect,
        })
    }
}

/// A run awaiting a human (`harness review`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pending {
    /// The run.
    pub id: String,
    /// `failed` or `passed_with_debt`.
    pub outcome: String,
    /// Its kind (`verification_failed`, `scope_violation`, …).
    pub kind: Option<String>,
    /// The delegate kind.
    pub delegate_kind: String,
    /// The first reason of its last attempt, or its error message.
    pub primary: Option<String>,
    /// When it started.
    pub started_at: SystemTime,
}

impl Pending {
    /// As JSON; `age_s` is measured from `now`.
    pub fn to_json(&self, now: SystemTime) -> Value {
        json!({
            "id": self.id,
            "outcome": self.outcome,
            "kind": self.kind,
            "delegate": self.delegate_kind,
            "primary": self.primary,
            "started_at": humantime::format_rfc3339_millis(self.started_at).to_string(),
            "age_s": now.duration_since(self.started_at).map_or(0, |d| d.as_secs()),
        })
    }
}

/// What `audit-log verify` found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditCheck {
    /// Rows read.
    pub rows: u64,
    /// The last row's seq and hash, when there are rows.
    pub head: Option<(u64, String)>,
    /// The first broken row and what is wrong with it; `None` when the chain is intact.
    pub broken: Option<Broken>,
    /// Overrides recorded while a delegate with unconfined commands ran against the journal
    /// (it could have made them): each row's seq, run and why.
    pub suspect: Vec<(u64, String, String)>,
}

/// The first place the audit log does not hold together.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Broken {
    /// The row (its `seq`), when the problem is at one.
    pub seq: Option<u64>,
    /// What kind of break, for a script: `row_missing`, `row_out_of_order`, `chain_broken` (a
    /// row's `prev_hash` is not the row before's hash), `row_edited` (its hash does not cover
    /// its content), `row_moved`, `row_unreadable`, `anchor_missing`, `override_unaudited`,
    /// `override_missing`, `override_edited`.
    pub kind: &'static str,
    /// What is wrong, in words.
    pub why: String,
}

impl AuditCheck {
    /// As JSON (`audit-log verify --json`).
    pub fn to_json(&self) -> Value {
        json!({
            "intact": self.broken.is_none(),
            "rows": self.rows,
            "head": self.head.as_ref().map(|(seq, hash)| json!({"seq": seq, "hash": hash})),
            "broken": self.broken.as_ref().map(|b| json!({"seq": b.seq, "kind": b.kind, "why": b.why})),
            "suspect": self.suspect.iter().map(|(seq, run, why)| json!({"seq": seq, "run_id": run, "why": why})).collect::<Vec<_>>(),
        })
    }
}

/// `sha256(prev_hash ‖ entry)`, hex.
fn chain_hash(prev_hash: &str, entry: &str) -> String {
    let mut hasher = Sha256::new();
    hasher.update(prev_hash.as_bytes());
    hasher.update(entry.as_bytes());
    harness_builtins::hex(&hasher.finalize())
}

/// Review decisions this process recorded, per journal (its canonical path): overrides, audit
/// rows. [`review_state`] leaves them out, so that only someone else's show.
static RECORDED_HERE: std::sync::Mutex<Option<HashMap<PathBuf, (u64, u64)>>> =
    std::sync::Mutex::new(None);

fn journal_key(path: &Path) -> PathBuf {
    path.canonicalize().unwrap_or_else(|_| path.to_path_buf())
}

/// Counts `overrides` and `audit_rows` as recorded by this process in the journal at `path`.
fn recorded_here(path: &Path, overrides: u64, audit_rows: u64) {
    let mut counts = RECORDED_HERE
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let entry = counts
        .get_or_insert_with(HashMap::new)
        .entry(journal_key(path))
        .or_default();
    entry.0 += overrides;
    entry.1 += audit_rows;
}

/// Where the review of `record` stands: the decision of its override `decided`, else `pending`
/// for a run a human must look at (`failed`, `passed_with_debt`), else none.
pub fn review_status<'a>(record: &Record, decided: Option<&'a Override>) -> Option<&'a str> {
    match decided {
        Some(o) => Some(o.decision.as_str()),
        None if matches!(record.outcome.as_str(), "failed" | "passed_with_debt") => Some("pending"),
        None => None,
    }
}

/// `record` as `harness runs show --json` and `GET /v1/delegations/{id}` give it: its JSON with
/// its `override` (who decided what, when, why, and whether it is suspect) and its `review`
/// status beside the outcome, never in its place, and its `spend` ([`Spend`](crate::Spend)).
///
/// `tree` is the delegation tree it belongs to ([`Journal::tree`]), when it belongs to one.
pub fn reviewed_json(
    record: &Record,
    decided: Option<&Override>,
    tree: Option<&crate::TreeNode>,
) -> Value {
    let mut object = record.to_json();
    object["override"] = decided.map_or(Value::Null, Override::to_json);
    object["review"] = review_status(record, decided).map_or(Value::Null, |s| json!({"status": s}));
    object["tree"] = tree.map_or(Value::Null, crate::TreeNode::to_json);
    object["spend"] = crate::Spend::of(record, tree).to_json();
    object
}

/// The review decisions in the journal at `path` that this process did not record (DESIGN
/// §4.11): what [`harness::Runtime::watch_reviews`] compares before and after each attempt of a
/// delegate that can change files. `None` when there is no journal there, or it cannot be read.
pub fn review_state(path: &Path) -> Option<harness::ReviewState> {
    if !path.is_file() {
        return None;
    }
    let journal = Journal::open_read_only(path).ok()?;
    if journal.schema_version().ok()? < 4 {
        return Some(harness::ReviewState::default());
    }
    let count = |table: &str| -> Option<u64> {
        journal
            .conn
            .query_row(&format!("SELECT count(*) FROM {table}"), [], |row| {
                row.get::<_, i64>(0)
            })
            .ok()
            .map(|n| u64::try_from(n).unwrap_or(0))
    };
    let (overrides, audit_rows) = (count("overrides")?, count("audit_log")?);
    let here = RECORDED_HERE
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .as_ref()
        .and_then(|counts| counts.get(&journal_key(path)).copied())
        .unwrap_or_default();
    Some(harness::ReviewState {
        overrides: overrides.wrapping_sub(here.0),
        audit_rows: audit_rows.wrapping_sub(here.1),
    })
}

/// Appends `entry` (its `seq` filled in) to the audit log inside `tx`; returns its seq.
fn append(tx: &rusqlite::Transaction<'_>, mut entry: Value) -> rusqlite::Result<u64> {
    let last: Option<(i64, String)> = tx
        .query_row(
            "SELECT seq, hash FROM audit_log ORDER BY seq DESC LIMIT 1",
            [],
            |row| Ok((row.get(0)?, row.get(1)?)),
        )
        .optional()?;
    let (seq, prev_hash) = match last {
        Some((seq, hash)) => (seq + 1, hash),
        None => (1, GENESIS.to_owned()),
    };
    entry["seq"] = json!(seq);
    let text = canonical(&entry);
    let hash = chain_hash(&prev_hash, &text);
    tx.execute(
        "INSERT INTO audit_log (seq, entry, prev_hash, hash) VALUES (?1, ?2, ?3, ?4)",
        params![seq, text, prev_hash, hash],
    )?;
    Ok(u64::try_from(seq).unwrap_or(0))
}

/// Which override types fit a run, from its outcome, kind and last verdict's blocking findings.
fn fitting(outcome: &str, kind: Option<&str>, blocking: &[String]) -> (Vec<OverrideType>, String) {
    use OverrideType::{Check, Direct, Verifier};
    let judged_by_checks = |s: &String| {
        matches!(
            s.as_str(),
            "check" | "criterion" | "verify" | "hook" | "plan" | "citation" | "claim" | "budget"
        )
    };
    if outcome == "passed_with_debt" || kind == Some("critic_rejected") {
        return (vec![Verifier, Direct], "the critic".to_owned());
    }
    let what = if blocking.is_empty() {
        kind.unwrap_or("no finding").to_owned()
    } else {
        let mut sources = blocking.to_vec();
        sources.dedup();
        sources.join(", ")
    };
    if matches!(kind, Some("scope_violation" | "gate_tampered" | "no_gate")) || blocking.is_empty()
    {
        return (vec![Direct], what);
    }
    if blocking.iter().all(judged_by_checks) {
        (vec![Check, Direct], what)
    } else if blocking.iter().all(|s| s == "critic") {
        (vec![Verifier, Direct], what)
    } else {
        (vec![Direct], what)
    }
}

/// Applies `request` to the journal at `path` under the `override_policy` of the workspace the
/// run was judged in — the one override path of the CLI's `override`, the service's
/// `POST …/override` and the review page's forms — and counts the decision or the refusal in
/// the `harness.overrides` metric. Blocks: call it off the async workers.
///
/// # Errors
/// As [`Journal::override_run`]; [`ErrorKind::Config`] when the workspace's project policy
/// cannot be read.
pub fn apply_override(path: &Path, request: &OverrideRequest) -> Result<Override> {
    let done = (|| {
        let mut journal = Journal::open(path)?;
        // The policy of the workspace the run was judged in.
        let workdir = journal
            .get(&request.run_id)?
            .and_then(|record| record.workdir);
        let (policy, policy_at) = match &workdir {
            Some(dir) => {
                let file = Path::new(dir).join(harness::PROJECT_POLICY);
                let at = if file.is_file() {
                    format!("project policy {}", file.display())
                } else {
                    format!("the default override_policy; set it in {}", file.display())
                };
                (harness::ProjectPolicy::load(Path::new(dir))?.overrides, at)
            }
            None => (
                OverridePolicy::default(),
                "the default override_policy (the run recorded no workspace)".to_owned(),
            ),
        };
        journal.override_run(request, &policy, &policy_at)
    })();
    match &done {
        Ok(done) => harness::telemetry::record_override(&done.override_type, &done.decision),
        Err(e) if e.kind().is_refusal() => {
            harness::telemetry::record_override(request.override_type.as_str(), e.kind().as_str());
        }
        Err(_) => {}
    }
    done
}

impl Journal {
    /// Runs awaiting a human: `failed` and `passed_with_debt` runs without an override, newest
    /// first.
    ///
    /// # Errors
    /// [`ErrorKind::Journal`] when the journal cannot be read.
    pub fn review_queue(&self) -> Result<Vec<Pending>> {
        if self.schema_version()? < 4 {
            return self.pending_rows(
                "SELECT id, outcome, error_kind, delegate_kind, error_message, started_at_ms
                 FROM delegations WHERE outcome IN ('failed', 'passed_with_debt')
                 ORDER BY started_at_ms DESC",
            );
        }
        self.pending_rows(
            "SELECT d.id, d.outcome, d.error_kind, d.delegate_kind, d.error_message, d.started_at_ms
             FROM delegations d LEFT JOIN overrides o ON o.delegation_id = d.id
             WHERE d.outcome IN ('failed', 'passed_with_debt') AND o.delegation_id IS NULL
             ORDER BY d.started_at_ms DESC",
        )
    }

    fn pending_rows(&self, sql: &str) -> Result<Vec<Pending>> {
        let read =
            |e: rusqlite::Error| sql_error(&self.path, "cannot read the review queue of", &e);
        let mut statement = self.conn.prepare(sql).map_err(read)?;
        let rows = statement
            .query_map([], |row| {
                Ok(Pending {
                    id: row.get(0)?,
                    outcome: row.get(1)?,
                    kind: row.get(2)?,
                    delegate_kind: row.get(3)?,
                    primary: row.get(4)?,
                    started_at: from_unix_millis(row.get(5)?),
                })
            })
            .map_err(read)?
            .collect::<rusqlite::Result<Vec<_>>>()
            .map_err(read)?;
        let mut reasons = self
            .conn
            .prepare(
                "SELECT reasons FROM attempts WHERE delegation_id = ?1 ORDER BY attempt DESC LIMIT 1",
            )
            .map_err(read)?;
        rows.into_iter()
            .map(|mut pending| {
                let last: Option<String> = reasons
                    .query_row([&pending.id], |row| row.get(0))
                    .optional()
                    .map_err(read)?;
                let first = last
                    .and_then(|text| serde_json::from_str::<Vec<String>>(&text).ok())
                    .and_then(|reasons| reasons.into_iter().next());
                if first.is_some() {
                    pending.primary = first;
                }
                Ok(pending)
            })
            .collect()
    }

    /// The override of run `id`, if it has one.
    ///
    /// # Errors
    /// [`ErrorKind::Journal`] when the journal cannot be read.
    pub fn override_of(&self, id: &str) -> Result<Option<Override>> {
        Ok(self.overrides("o.delegation_id = ?1", [id])?.pop())
    }

    /// The overrides whose audit row marks them suspect (recorded while a delegate with
    /// unconfined commands ran against this journal), newest first.
    ///
    /// # Errors
    /// [`ErrorKind::Journal`] when the journal cannot be read.
    pub fn suspect_overrides(&self) -> Result<Vec<Override>> {
        let mut all = self.overrides("a.entry LIKE '%\"suspect\":%'", [])?;
        all.retain(|o| o.suspect.is_some());
        all.sort_by_key(|o| std::cmp::Reverse(o.audit_seq));
        Ok(all)
    }

    /// The overrides matching `filter` (SQL over `overrides o` and its audit row `a`).
    fn overrides(&self, filter: &str, params: impl rusqlite::Params) -> Result<Vec<Override>> {
        if self.schema_version()? < 4 {
            return Ok(Vec::new());
        }
        let read = |e: rusqlite::Error| sql_error(&self.path, "cannot read the overrides of", &e);
        let mut statement = self
            .conn
            .prepare(&format!(
                "SELECT o.delegation_id, o.user, o.override_type, o.decision, o.reason, o.at_ms, o.previous_state, o.audit_seq, a.entry
                 FROM overrides o LEFT JOIN audit_log a ON a.seq = o.audit_seq WHERE {filter}"
            ))
            .map_err(read)?;
        let rows = statement
            .query_map(params, |row| {
                let entry: Option<String> = row.get(8)?;
                Ok(Override {
                    run_id: row.get(0)?,
                    user: row.get(1)?,
                    override_type: row.get(2)?,
                    decision: row.get(3)?,
                    reason: row.get(4)?,
                    at: from_unix_millis(row.get(5)?),
                    previous_state: row.get(6)?,
                    audit_seq: u64::try_from(row.get::<_, i64>(7)?).unwrap_or(0),
                    suspect: entry
                        .and_then(|e| serde_json::from_str::<Value>(&e).ok())
                        .and_then(|e| e["suspect"].as_str().map(str::to_owned)),
                })
            })
            .map_err(read)?;
        rows.collect::<rusqlite::Result<Vec<_>>>().map_err(read)
    }

    /// Approves or rejects run `request.run_id` under `policy` (`policy_at` names where the
    /// policy came from, for messages), in one transaction: the override row, the run's
    /// `HumanOverride` event and its audit row. A refusal is audited too, then returned.
    ///
    /// # Errors
    /// [`ErrorKind::IllegalTransition`] (the run does not await review, was overridden already,
    /// or failed on something this type does not cover), [`ErrorKind::OverrideNotAllowed`],
    /// [`ErrorKind::ReasonRequired`]; [`ErrorKind::Config`] for an unknown run,
    /// [`ErrorKind::Journal`] for a journal that cannot be written.
    pub fn override_run(
        &mut self,
        request: &OverrideRequest,
        policy: &OverridePolicy,
        policy_at: &str,
    ) -> Result<Override> {
        let path = self.path.clone();
        let sql = |what: &str, e: rusqlite::Error| sql_error(&path, what, &e);
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(|e| sql("cannot lock", e))?;
        let id = request.run_id.as_str();
        let standing = Standing::read(&tx, id).map_err(|e| sql("cannot read", e))?;
        let Some(standing) = standing else {
            return Err(Error::config(format!(
                "no run {id} in the journal {} (`harness review` lists the runs awaiting review)",
                path.display()
            )));
        };
        let reason = request
            .reason
            .as_deref()
            .map(str::trim)
            .filter(|r| !r.is_empty());
        let ty = request.override_type;
        let decision = if request.approve {
            "approved"
        } else {
            "rejected"
        };
        let now = SystemTime::now();
        let at = humantime::format_rfc3339_millis(now).to_string();
        let mut entry = json!({
            "at": at,
            "run_id": id,
            "user": request.user,
            "override_type": ty.as_str(),
            "decision": decision,
            "reason": reason,
            "previous_state": standing.outcome,
        });
        if let Some(refused) = standing.refusal(request, reason.is_some(), policy, policy_at) {
            entry["action"] = json!("override_refused");
            entry["refusal"] =
                json!({"kind": refused.kind().as_str(), "message": refused.message()});
            append(&tx, entry).map_err(|e| sql("cannot append to the audit log of", e))?;
            tx.commit().map_err(|e| sql("cannot commit", e))?;
            recorded_here(&path, 0, 1);
            return Err(refused);
        }
        entry["action"] = json!("override");
        // Made while a delegate that runs programs unconfined was running against this journal:
        // that delegate could have made it. Said in the hash-chained row, for review and audit.
        let running = crate::journal::unconfined_running(&tx)
            .map_err(|e| sql("cannot read the running runs of", e))?;
        let suspect = (!running.is_empty()).then(|| {
            format!(
                "recorded while {} ran with unconfined commands against this journal; it may have recorded this itself",
                running.join(", ")
            )
        });
        if let Some(why) = &suspect {
            entry["suspect"] = json!(why);
        }
        let audit_seq =
            append(&tx, entry).map_err(|e| sql("cannot append to the audit log of", e))?;
        let done = Override {
            run_id: id.to_owned(),
            user: request.user.clone(),
            override_type: ty.as_str().to_owned(),
            decision: decision.to_owned(),
            reason: reason.map(str::to_owned),
            at: from_unix_millis(unix_millis(now)),
            previous_state: standing.outcome.clone(),
            audit_seq,
            suspect,
        };
        standing
            .overridden(&tx, &done, at)
            .map_err(|e| sql("cannot record the override in", e))?;
        tx.commit().map_err(|e| sql("cannot commit", e))?;
        recorded_here(&path, 1, 1);
        Ok(done)
    }

    /// Re-walks the audit log and names the first row that does not hold: a gap in `seq` (a
    /// deleted row), a row whose entry names another seq (moved), whose `prev_hash` is not the
    /// previous row's hash, or whose hash does not cover its content (edited); then checks that
    /// every override matches the audit row it points at and every audited override still exists.
    /// With `anchor` (a hash stored elsewhere earlier), the chain must still contain it: a log
    /// rebuilt or cut back past it is broken.
    ///
    /// # Errors
    /// [`ErrorKind::Journal`] when the journal cannot be read.
    pub fn verify_audit_log(&self, anchor: Option<&str>) -> Result<AuditCheck> {
        let read = |e: rusqlite::Error| sql_error(&self.path, "cannot read the audit log of", &e);
        let mut check = AuditCheck {
            rows: 0,
            head: None,
            broken: None,
            suspect: Vec::new(),
        };
        if self.schema_version()? < 4 {
            if let Some(anchor) = anchor {
                check.broken = Some(Broken {
                    seq: None,
                    kind: "anchor_missing",
                    why: format!(
                        "the anchor {anchor} is not in the chain: this journal has no audit log"
                    ),
                });
            }
            return Ok(check);
        }
        let mut statement = self
            .conn
            .prepare("SELECT seq, entry, prev_hash, hash FROM audit_log ORDER BY seq")
            .map_err(read)?;
        let rows = statement
            .query_map([], |row| {
                Ok((
                    row.get::<_, i64>(0)?,
                    row.get::<_, String>(1)?,
                    row.get::<_, String>(2)?,
                    row.get::<_, String>(3)?,
                ))
            })
            .map_err(read)?;
        let mut anchored = anchor.is_none();
        let mut previous = GENESIS.to_owned();
        let mut overrides_audited: Vec<(u64, Value)> = Vec::new();
        for (expected, row) in (1i64..).zip(rows) {
            let (seq, entry, prev_hash, hash) = row.map_err(read)?;
            let at = u64::try_from(seq).unwrap_or(0);
            check.rows += 1;
            let why = match row_fault(expected, seq, &entry, &prev_hash, &hash, &previous) {
                Err(fault) => Some(fault),
                Ok(value) => {
                    if value["action"] == json!("override") {
                        if let Some(why) = value["suspect"].as_str() {
                            check.suspect.push((
                                at,
                                value["run_id"].as_str().unwrap_or("?").to_owned(),
                                why.to_owned(),
                            ));
                        }
                        overrides_audited.push((at, value));
                    }
                    None
                }
            };
            if let Some((kind, why)) = why {
                check.broken = Some(Broken {
                    seq: Some(at.min(u64::try_from(expected).unwrap_or(at))),
                    kind,
                    why,
                });
                return Ok(check);
            }
            anchored |= anchor == Some(hash.as_str());
            previous = hash.clone();
            check.head = Some((at, hash));
        }
        if !anchored {
            check.broken = Some(Broken {
                seq: None,
                kind: "anchor_missing",
                why: format!(
                    "the anchor {} is not in the chain: the log was rebuilt or cut back since it was taken",
                    anchor.unwrap_or_default()
                ),
            });
            return Ok(check);
        }
        // The overrides table must say what the audit log says, row for row.
        check.broken = self.unmatched(&overrides_audited)?;
        if check.broken.is_some() {
            return Ok(check);
        }
        let unaudited: Option<String> = self
            .conn
            .query_row(
                "SELECT delegation_id FROM overrides WHERE audit_seq NOT IN (SELECT seq FROM audit_log) LIMIT 1",
                [],
                |row| row.get(0),
            )
            .optional()
            .map_err(read)?;
        if let Some(id) = unaudited {
            check.broken = Some(Broken {
                seq: None,
                kind: "override_unaudited",
                why: format!(
                    "the override of run {id} has no audit row: it was added behind the log's back"
                ),
            });
        }
        Ok(check)
    }

    /// The first override the overrides table does not hold as `audited` (the audit log's
    /// override rows, with their seqs) says it was made, if one is.
    fn unmatched(&self, audited: &[(u64, Value)]) -> Result<Option<Broken>> {
        for (seq, entry) in audited {
            let id = entry["run_id"].as_str().unwrap_or_default();
            let (kind, why) = match self.override_of(id)? {
                None => (
                    "override_missing",
                    format!(
                        "the override of run {id} recorded in audit row {seq} is missing from the overrides table"
                    ),
                ),
                Some(o)
                    if o.audit_seq != *seq
                        || entry["user"] != json!(o.user)
                        || entry["decision"] != json!(o.decision)
                        || entry["override_type"] != json!(o.override_type)
                        || entry["reason"] != json!(o.reason)
                        || entry["previous_state"] != json!(o.previous_state) =>
                {
                    (
                        "override_edited",
                        format!(
                            "the override of run {id} does not match audit row {seq}: the overrides table was edited"
                        ),
                    )
                }
                Some(_) => continue,
            };
            return Ok(Some(Broken {
                seq: Some(*seq),
                kind,
                why,
            }));
        }
        Ok(None)
    }
}

/// Why audit row `seq` (the `expected`th) does not hold after the row whose hash is `previous`,
/// if it does not: a gap (deleted rows), a repeat, a `prev_hash` that is not the previous row's
/// hash, a hash that does not cover the entry, an entry naming another seq (moved) or not JSON.
/// Else its entry.
fn row_fault(
    expected: i64,
    seq: i64,
    entry: &str,
    prev_hash: &str,
    hash: &str,
    previous: &str,
) -> std::result::Result<Value, (&'static str, String)> {
    if seq > expected {
        let to = if seq > expected + 1 {
            format!(" to {}", seq - 1)
        } else {
            String::new()
        };
        return Err((
            "row_missing",
            format!("row {expected}{to} is missing: deleted"),
        ));
    }
    if seq < expected {
        return Err((
            "row_out_of_order",
            format!("row {seq} appears twice or out of order"),
        ));
    }
    if prev_hash != previous {
        return Err((
            "chain_broken",
            format!(
                "row {seq} does not follow row {}: its prev_hash is not that row's hash (row {} was rewritten, or this one was)",
                seq - 1,
                seq - 1
            ),
        ));
    }
    if chain_hash(prev_hash, entry) != hash {
        return Err((
            "row_edited",
            format!("row {seq} was edited: its hash does not cover its content"),
        ));
    }
    match serde_json::from_str::<Value>(entry) {
        Ok(value) if value["seq"] == json!(seq) => Ok(value),
        Ok(value) => Err((
            "row_moved",
            format!("row {seq} was moved: its entry says seq {}", value["seq"]),
        )),
        Err(e) => Err(("row_unreadable", format!("row {seq} is not JSON: {e}"))),
    }
}

/// What an override of a run is decided on: the run as the journal holds it.
struct Standing {
    id: String,
    outcome: String,
    /// The error kind it ended with.
    kind: Option<String>,
    /// Its events as stored (JSON).
    events: Option<String>,
    /// Its last attempt.
    attempt: u32,
    /// The sources of the last attempt's blocking findings.
    blocking: Vec<String>,
    /// Who decided it before, what, and when (Unix milliseconds).
    earlier: Option<(String, String, i64)>,
}

impl Standing {
    /// Reads run `id`; `None` when the journal holds no such run.
    fn read(tx: &rusqlite::Transaction<'_>, id: &str) -> rusqlite::Result<Option<Standing>> {
        let run: Option<(String, Option<String>, Option<String>)> = tx
            .query_row(
                "SELECT outcome, error_kind, events FROM delegations WHERE id = ?1",
                [id],
                |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)),
            )
            .optional()?;
        let Some((outcome, kind, events)) = run else {
            return Ok(None);
        };
        let last: Option<(i64, Option<String>)> = tx
            .query_row(
                "SELECT attempt, verdict FROM attempts WHERE delegation_id = ?1 ORDER BY attempt DESC LIMIT 1",
                [id],
                |row| Ok((row.get(0)?, row.get(1)?)),
            )
            .optional()?;
        let blocking: Vec<String> = last
            .as_ref()
            .and_then(|(_, verdict)| verdict.as_deref())
            .and_then(|text| serde_json::from_str::<Value>(text).ok())
            .and_then(|verdict| verdict["findings"].as_array().cloned())
            .unwrap_or_default()
            .iter()
            .filter(|f| f["blocking"] == json!(true))
            .filter_map(|f| f["source"].as_str().map(str::to_owned))
            .collect();
        let earlier = tx
            .query_row(
                "SELECT user, decision, at_ms FROM overrides WHERE delegation_id = ?1",
                [id],
                |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)),
            )
            .optional()?;
        Ok(Some(Standing {
            id: id.to_owned(),
            outcome,
            kind,
            events,
            attempt: last.map_or(0, |(attempt, _)| u32::try_from(attempt).unwrap_or(0)),
            blocking,
            earlier,
        }))
    }

    /// Why `request` may not stand under `policy` (`policy_at` names where the policy came
    /// from), if it may not: a run is overridden once, only runs awaiting review are, an
    /// approval must be of a type that covers what the run failed on and that the policy
    /// allows, and every type but `check` (unless the policy says) needs a reason.
    fn refusal(
        &self,
        request: &OverrideRequest,
        reasoned: bool,
        policy: &OverridePolicy,
        policy_at: &str,
    ) -> Option<Error> {
        let (id, outcome, ty) = (&self.id, &self.outcome, request.override_type);
        let refused = |kind, message| Some(Error::new(kind, message));
        if let Some((user, decision, at)) = &self.earlier {
            return refused(
                ErrorKind::IllegalTransition,
                format!(
                    "run {id} was already {decision} by {user} at {}; a run is overridden once (the audit log keeps it)",
                    humantime::format_rfc3339_millis(from_unix_millis(*at))
                ),
            );
        }
        if !matches!(outcome.as_str(), "failed" | "passed_with_debt") {
            return refused(
                ErrorKind::IllegalTransition,
                format!(
                    "run {id} is {outcome}{}: only failed and passed_with_debt runs await review",
                    self.kind
                        .as_deref()
                        .map_or(String::new(), |k| format!(" ({k})"))
                ),
            );
        }
        let (fits, what) = fitting(outcome, self.kind.as_deref(), &self.blocking);
        // Rejecting needs no approval right (DESIGN §4.11): any type may reject.
        if request.approve && !fits.contains(&ty) {
            let names: Vec<String> = fits.iter().map(|t| format!("`{}`", t.as_str())).collect();
            return refused(
                ErrorKind::IllegalTransition,
                format!(
                    "run {id} failed on {what}, which a `{}` override does not cover; use --type {}",
                    ty.as_str(),
                    names.join(" or ")
                ),
            );
        }
        let (allowed, key) = match ty {
            OverrideType::Check => (policy.check_override_allowed, "check_override_allowed"),
            OverrideType::Verifier => (
                policy.verifier_override_allowed,
                "verifier_override_allowed",
            ),
            OverrideType::Direct => (policy.direct_approval_allowed, "direct_approval_allowed"),
        };
        if request.approve && !allowed {
            return refused(
                ErrorKind::OverrideNotAllowed,
                format!(
                    "a `{}` override is not allowed: `override_policy.{key}` is false ({policy_at})",
                    ty.as_str()
                ),
            );
        }
        let needs_reason = ty != OverrideType::Check || policy.check_override_requires_reason;
        if needs_reason && !reasoned {
            return refused(
                ErrorKind::ReasonRequired,
                format!(
                    "a `{}` override needs a reason: pass --reason TEXT (what you checked, and why the run may stand or not)",
                    ty.as_str()
                ),
            );
        }
        None
    }

    /// Records `done` (its audit row already appended): the override row, and the run's
    /// `HumanOverride` event, its last; the run's outcome stays as it was, its seal is renewed.
    fn overridden(
        self,
        tx: &rusqlite::Transaction<'_>,
        done: &Override,
        at: String,
    ) -> rusqlite::Result<()> {
        tx.execute(
            "INSERT INTO overrides (delegation_id, user, override_type, decision, reason, at_ms, previous_state, audit_seq)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
            params![
                self.id,
                done.user,
                done.override_type,
                done.decision,
                done.reason,
                unix_millis(done.at),
                self.outcome,
                i64::try_from(done.audit_seq).unwrap_or(i64::MAX)
            ],
        )?;
        let mut events: Vec<Value> = self
            .events
            .as_deref()
            .and_then(|text| serde_json::from_str(text).ok())
            .unwrap_or_default();
        let record = EventRecord {
            run_id: self.id.clone(),
            attempt: self.attempt,
            seq: events.len() as u64,
            at,
            event: RunEvent::HumanOverride {
                user: done.user.clone(),
                override_type: done.override_type.clone(),
                decision: done.decision.clone(),
                reason: done.reason.clone(),
                previous_state: self.outcome,
            },
        };
        events.push(serde_json::to_value(&record).unwrap_or(Value::Null));
        tx.execute(
            "UPDATE delegations SET events = ?2 WHERE id = ?1",
            params![self.id, Value::Array(events).to_string()],
        )?;
        crate::journal::reseal(tx, &self.id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::canon::{Hashing, write_canonical};

    /// Canonical JSON is compact with every object's keys in byte order, whatever order the
    /// value holds them in: the text every chained hash and seal already written was made of.
    #[test]
    fn canonical_json_sorts_keys_by_byte_and_writes_compact() {
        let value = json!({
            "é": "\u{1F600}\n\"",
            "b": [1, {"d": "x", "c": 1.5, "a": [true, null]}, -0.0, 1e300],
            "a": null,
            "B": {},
            "": [],
        });
        assert_eq!(
            canonical(&value),
            "{\"\":[],\"B\":{},\"a\":null,\"b\":[1,{\"a\":[true,null],\"c\":1.5,\"d\":\"x\"},-0.0,1e+300],\"é\":\"\u{1F600}\\n\\\"\"}"
        );
        // As a sorted copy printed by serde_json says, which is how it was made before it was
        // streamed.
        fn sorted(value: &Value) -> Value {
            match value {
                Value::Object(map) => {
                    let mut keys: Vec<&String> = map.keys().collect();
                    keys.sort_unstable();
                    Value::Object(
                        keys.into_iter()
                            .map(|k| (k.clone(), sorted(&map[k])))
                            .collect(),
                    )
                }
                Value::Array(items) => Value::Array(items.iter().map(sorted).collect()),
                other => other.clone(),
            }
        }
        assert_eq!(canonical(&value), sorted(&value).to_string());
        let mut hash = Hashing(Sha256::new());
        write_canonical(&value, &mut hash);
        assert_eq!(
            harness_builtins::hex(&hash.0.finalize()),
            harness_builtins::hex(&Sha256::digest(canonical(&value).as_bytes()))
        );
    }

    #[test]
    fn canonical_json_sorts_keys_at_every_level() {
        let value = json!({"b": 1, "a": {"d": [{"z": 1, "y": 2}], "c": null}});
        assert_eq!(
            canonical(&value),
            r#"{"a":{"c":null,"d":[{"y":2,"z":1}]},"b":1}"#
        );
    }

    #[test]
    fn types_fit_what_failed() {
        use OverrideType::{Check, Direct, Verifier};
        let s = |v: &[&str]| v.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        let fit = |outcome, kind, blocking: &[&str]| fitting(outcome, kind, &s(blocking)).0;
        assert_eq!(
            fit("failed", Some("verification_failed"), &["check", "verify"]),
            [Check, Direct]
        );
        assert_eq!(fit("failed", Some("stuck"), &["check"]), [Check, Direct]);
        assert_eq!(fit("failed", Some("scope_violation"), &["scope"]), [Direct]);
        assert_eq!(fit("failed", Some("no_gate"), &[]), [Direct]);
        assert_eq!(
            fit("failed", Some("critic_rejected"), &["critic"]),
            [Verifier, Direct]
        );
        assert_eq!(fit("passed_with_debt", None, &[]), [Verifier, Direct]);
        assert_eq!(
            fit("failed", Some("verification_failed"), &["check", "critic"]),
            [Direct]
        );
    }
}
