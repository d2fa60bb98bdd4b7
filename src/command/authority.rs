//! `harness review`, `harness override` and `harness audit-log verify`: the human layer over the
//! run journal (DESIGN §4.11).

use std::time::SystemTime;

use harness_records::{OverrideRequest, OverrideType, Pending};
use serde_json::json;

use crate::args::{AuditLogCommand, AuditVerifyArgs, OverrideArgs, ReviewArgs};
use crate::exit;
use crate::settings;

/// `harness review`.
pub async fn review(args: ReviewArgs) -> u8 {
    match pending(&args).await {
        Ok(()) => exit::OK,
        Err(e) => exit::fail(&e, args.json),
    }
}

async fn pending(args: &ReviewArgs) -> harness_records::Result<()> {
    let journal = settings::journal_to_read(args.journal.as_deref())?;
    let (queue, suspect) = settings::read_journal(&journal, |j| {
        Ok((j.review_queue()?, j.suspect_overrides()?))
    })
    .await?;
    let now = SystemTime::now();
    if args.json {
        let pending: Vec<_> = queue.iter().map(|p| p.to_json(now)).collect();
        let suspect: Vec<_> = suspect
            .iter()
            .map(harness_records::Override::to_json)
            .collect();
        println!("{}", json!({"pending": pending, "suspect": suspect}));
        return Ok(());
    }
    suspects(&suspect);
    if queue.is_empty() {
        eprintln!("no runs await review");
        return Ok(());
    }
    let mut rows = vec![[
        "ID".to_owned(),
        "AGE".to_owned(),
        "DELEGATE".to_owned(),
        "OUTCOME".to_owned(),
        "PRIMARY FINDING".to_owned(),
    ]];
    for p in &queue {
        rows.push([
            p.id.clone(),
            age(p, now),
            p.delegate_kind.clone(),
            match &p.kind {
                Some(kind) => format!("{} ({kind})", p.outcome),
                None => p.outcome.clone(),
            },
            p.primary
                .as_deref()
                .and_then(|r| r.lines().next())
                .unwrap_or("-")
                .chars()
                .take(100)
                .collect(),
        ]);
    }
    super::table::print(&rows);
    eprintln!(
        "{} run(s) await review; decide with `harness override ID --approve|--reject --type check|verifier|direct --reason TEXT`",
        queue.len()
    );
    Ok(())
}

/// Decisions that a delegate may have recorded itself, first: a reviewer must not take them as
/// settled.
fn suspects(suspect: &[harness_records::Override]) {
    if suspect.is_empty() {
        return;
    }
    let mut rows = vec![[
        "ID".to_owned(),
        "DECISION".to_owned(),
        "BY".to_owned(),
        "AUDIT ROW".to_owned(),
        "WHY SUSPECT".to_owned(),
    ]];
    for o in suspect {
        rows.push([
            o.run_id.clone(),
            o.decision.clone(),
            o.user.clone(),
            o.audit_seq.to_string(),
            o.suspect.clone().unwrap_or_default(),
        ]);
    }
    super::table::print(&rows);
    eprintln!(
        "{} override(s) are suspect: recorded while a delegate with unconfined commands could write the journal; confirm each with whoever it names before relying on it",
        suspect.len()
    );
}

/// How long ago `p` started, to the minute.
fn age(p: &Pending, now: SystemTime) -> String {
    let secs = now
        .duration_since(p.started_at)
        .map_or(0, |d| d.as_secs() / 60 * 60);
    if secs == 0 {
        "<1m".to_owned()
    } else {
        humantime::format_duration(std::time::Duration::from_secs(secs)).to_string()
    }
}

/// `harness override`.
pub async fn override_run(args: OverrideArgs) -> u8 {
    match decide(&args).await {
        Ok(()) => exit::OK,
        Err(e) => exit::fail(&e, args.json),
    }
}

async fn decide(args: &OverrideArgs) -> harness_records::Result<()> {
    // Attribution is never guessed.
    let user = args
        .user
        .clone()
        .or_else(|| std::env::var("HARNESS_USER").ok())
        .map(|u| u.trim().to_owned())
        .filter(|u| !u.is_empty())
        .ok_or_else(|| {
            harness_records::Error::config(
                "who decides? pass --user NAME or set HARNESS_USER: an override is attributed, never guessed",
            )
        })?;
    // Clap allows only the three names.
    let override_type =
        OverrideType::from_name(&args.override_type).unwrap_or(OverrideType::Direct);
    let request = OverrideRequest {
        run_id: args.id.clone(),
        approve: args.approve,
        override_type,
        reason: args.reason.clone(),
        user,
    };
    let located = settings::journal_to_read(args.journal.as_deref())?;
    let done = apply_override(located.path.clone(), request).await?;
    if args.json {
        println!("{}", json!({"override": done.to_json()}));
    } else {
        println!(
            "{} {}: {} override by {}, recorded in audit row {} of {}",
            done.decision,
            done.run_id,
            done.override_type,
            done.user,
            done.audit_seq,
            located.path.display()
        );
    }
    Ok(())
}

/// Applies `request` to the journal at `path` (see [`harness_records::apply_override`]) on a
/// blocking thread.
///
/// # Errors
/// As [`harness_records::apply_override`].
async fn apply_override(
    path: std::path::PathBuf,
    request: OverrideRequest,
) -> harness_records::Result<harness_records::Override> {
    tokio::task::spawn_blocking(move || harness_records::apply_override(&path, &request))
        .await
        .map_err(|e| harness_records::Error::journal(format!("writing the journal failed: {e}")))?
}

/// `harness audit-log ...`.
pub async fn audit_log(command: AuditLogCommand) -> u8 {
    match command {
        AuditLogCommand::Verify(args) => match verify(&args).await {
            Ok(code) => code,
            Err(e) => exit::fail(&e, args.json),
        },
    }
}

async fn verify(args: &AuditVerifyArgs) -> harness_records::Result<u8> {
    let journal = settings::journal_to_read(args.journal.as_deref())?;
    let anchor = args.check_anchor.clone();
    let check =
        settings::read_journal(&journal, move |j| j.verify_audit_log(anchor.as_deref())).await?;
    if args.json {
        println!("{}", check.to_json());
    } else {
        match (&check.broken, &check.head) {
            (Some(broken), _) => eprintln!("audit log BROKEN ({}): {}", broken.kind, broken.why),
            (None, Some((seq, hash))) => eprintln!(
                "audit log intact: {} row(s), head row {seq} {hash}",
                check.rows
            ),
            (None, None) => eprintln!("audit log intact: no rows yet"),
        }
        for (seq, run, why) in &check.suspect {
            eprintln!("suspect: row {seq}, the override of {run}: {why}");
        }
        if args.anchor
            && let (None, Some((seq, hash))) = (&check.broken, &check.head)
        {
            println!("{seq} {hash}");
        }
    }
    Ok(if check.broken.is_some() {
        exit::NOT_VERIFIED
    } else {
        exit::OK
    })
}
