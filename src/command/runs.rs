//! `harness runs list` and `harness runs show`: single records of the run journal.

use std::time::Duration;

use harness::Error;

use crate::exit::Failure;
use harness_records::Record;
use serde_json::json;

use crate::args::{
    AuditArgs, ExportFormat, KeysCommand, RunsCommand, RunsExportArgs, RunsListArgs, RunsShowArgs,
};
use crate::exit;
use crate::settings;

/// Runs the command and returns its exit code.
pub async fn run(command: RunsCommand) -> u8 {
    let (json_output, done) = match &command {
        RunsCommand::List(args) => (args.json, list(args).await),
        RunsCommand::Show(args) => (args.json, show(args).await),
        RunsCommand::Export(args) => (false, export(args).await),
    };
    match done {
        Ok(()) => exit::OK,
        Err(e) => exit::fail(&e, json_output),
    }
}

async fn list(args: &RunsListArgs) -> Result<(), Failure> {
    let filter = settings::journal_filter(&args.select, Some(args.limit))?;
    let journal = settings::journal_to_read(args.select.journal.as_deref())?;
    let records = settings::read_journal(&journal, move |j| j.list(&filter)).await?;
    if args.json {
        let runs: Vec<_> = records.iter().map(Record::to_json).collect();
        println!("{}", json!({"runs": runs}));
        return Ok(());
    }
    if records.is_empty() {
        eprintln!("no delegations recorded");
        return Ok(());
    }
    let mut rows = vec![[
        "ID".to_owned(),
        "STARTED (UTC)".to_owned(),
        "KIND".to_owned(),
        "OUTCOME".to_owned(),
        "ATTEMPTS".to_owned(),
        "DURATION".to_owned(),
        "MODEL".to_owned(),
    ]];
    for record in &records {
        rows.push([
            record.id.clone(),
            humantime::format_rfc3339_seconds(record.started_at).to_string(),
            record.delegate_kind.clone(),
            outcome(record),
            record.attempts.len().to_string(),
            duration(record.duration),
            record.model.clone().unwrap_or_else(|| "-".to_owned()),
        ]);
    }
    super::table::print(&rows);
    Ok(())
}

async fn show(args: &RunsShowArgs) -> Result<(), Failure> {
    let journal = settings::journal_to_read(args.journal.as_deref())?;
    let found = settings::read_run(&journal, &args.id).await?;
    let Some((record, decided, tree)) = found else {
        return Err(harness_records::Error::config(format!(
            "no delegation {} in the journal {journal} (`harness runs list` shows the recorded ids)",
            args.id,
        ))
        .into());
    };
    if args.json {
        let object = harness_records::reviewed_json(&record, decided.as_ref(), tree.as_ref());
        println!("{object}");
        return Ok(());
    }
    if args.sarif {
        let log = harness_records::sarif(std::slice::from_ref(&record), env!("CARGO_PKG_VERSION"));
        println!("{log:#}");
        return Ok(());
    }
    print_header(&record, decided.as_ref(), tree.as_ref());
    print_spend(&harness_records::Spend::of(&record, tree.as_ref()));
    println!("{:<10} {}", "attempts:", record.attempts.len());
    for attempt in &record.attempts {
        let verdict = match attempt.passed {
            Some(true) => "passed",
            Some(false) => "failed",
            None => "not verified",
        };
        println!(
            "  {}. {verdict} in {} ({} in{}, {} out tokens)",
            attempt.attempt + 1,
            duration(attempt.duration),
            attempt.usage.input_tokens,
            cached(attempt.usage.cached_input_tokens),
            attempt.usage.output_tokens
        );
        for reason in &attempt.reasons {
            let mut lines = reason.lines();
            println!("     {}", lines.next().unwrap_or_default());
            for line in lines {
                println!("       {line}");
            }
        }
        if let Some(changes) = attempt.result.as_ref().map(|r| &r["changes"]) {
            print_changes(changes);
        }
        print_evidence(attempt.evidence());
        if let Some(verdict) = &attempt.verdict {
            print_gaming(&verdict.findings);
        }
        print_holdouts(attempt.evidence());
    }
    Ok(())
}

/// What `runs show` prints first: the run, its task and outcome, a human's decision, why it
/// ended, what it spent in all, and its place in a tree.
fn print_header(
    record: &harness_records::Record,
    decided: Option<&harness_records::Override>,
    tree: Option<&harness_records::TreeNode>,
) {
    // A human's decision stands beside the outcome, never in its place.
    let status = harness_records::review_status(record, decided);
    let field = |name: &str, value: &str| println!("{:<10} {value}", format!("{name}:"));
    field("id", &record.id);
    field(
        "started",
        &humantime::format_rfc3339_millis(record.started_at).to_string(),
    );
    field("duration", &duration(record.duration));
    let delegate = match &record.model {
        Some(model) => format!("{} ({model})", record.delegate_kind),
        None => record.delegate_kind.clone(),
    };
    field("delegate", &delegate);
    if let Some(task) = record.request.as_ref().and_then(|r| r["task"].as_str()) {
        let mut lines = task.lines();
        field("task", lines.next().unwrap_or_default());
        for line in lines.take(4) {
            println!("{:<10} {line}", "");
        }
    }
    field("outcome", &outcome(record));
    match (decided, status) {
        (Some(o), _) => {
            field(
                "review",
                &format!(
                    "{} by {} ({} override) at {}{}",
                    o.decision,
                    o.user,
                    o.override_type,
                    humantime::format_rfc3339_seconds(o.at),
                    o.reason
                        .as_deref()
                        .map_or(String::new(), |r| format!(": {r}"))
                ),
            );
            if let Some(why) = &o.suspect {
                field("SUSPECT", why);
            }
        }
        (None, Some(status)) => field("review", &format!("{status} (harness review)")),
        (None, None) => {}
    }
    if let Some(message) = &record.error_message {
        let mut lines = message.lines();
        field("error", lines.next().unwrap_or_default());
        for line in lines {
            println!("{:<10} {line}", "");
        }
    }
    field(
        "tokens",
        &format!(
            "{} in{}, {} out, {} requests",
            record.usage.input_tokens,
            cached(record.usage.cached_input_tokens),
            record.usage.output_tokens,
            record.usage.requests
        ),
    );
    field("trace id", record.trace_id.as_deref().unwrap_or("-"));
    if let Some(parent) = record.parent_id() {
        field("parent", parent);
    }
    if let Some(tree) = tree {
        let mut lines = tree.lines(&record.id).into_iter();
        field("tree", &lines.next().unwrap_or_default());
        for line in lines {
            println!("{:<10} {line}", "");
        }
    }
    field("template", &record.retry_template_version);
    field("source", record.source.as_deref().unwrap_or("-"));
    field("workdir", record.workdir.as_deref().unwrap_or("-"));
}

/// Prints what the run spent: tokens and time per attempt (with its checks' time), per child
/// (its whole subtree's tokens), the run alone and with everything under it.
/// ` (N cached)` after a count of input tokens, when the provider read some from its cache.
fn cached(tokens: u64) -> String {
    match tokens {
        0 => String::new(),
        n => format!(" ({n} cached)"),
    }
}

fn print_spend(spend: &harness_records::Spend) {
    let ms = |ms: u64| duration(Duration::from_millis(ms));
    // The checks' CPU where there was some; a row that ran no check shows nothing.
    let cpu = |c: &harness_records::Cost| match c.check_cpu_ms {
        0 => String::new(),
        n => ms(n),
    };
    let mut rows = vec![[
        "SPENT BY".to_owned(),
        "IN".to_owned(),
        "OUT".to_owned(),
        "TIME".to_owned(),
        "CHECKS".to_owned(),
        "CHECK CPU".to_owned(),
        "SLOWEST STAGES".to_owned(),
    ]];
    for a in &spend.attempts {
        let slowest: Vec<String> = a
            .stages
            .iter()
            .take(3)
            .map(|(stage, us)| format!("{stage} {}", harness_records::human_us(*us)))
            .collect();
        rows.push([
            format!("attempt {}", a.attempt),
            a.cost.input(),
            a.cost.output_tokens.to_string(),
            ms(a.cost.duration_ms),
            match a.checks {
                0 => "-".to_owned(),
                1 => format!("1 check, {}", ms(a.checks_ms)),
                n => format!("{n} checks, {}", ms(a.checks_ms)),
            },
            cpu(&a.cost),
            slowest.join(", "),
        ]);
    }
    for c in &spend.children {
        let under = match c.descendants {
            0 => String::new(),
            1 => " and the run under it".to_owned(),
            n => format!(" and the {n} runs under it"),
        };
        let outcome = match &c.kind {
            Some(kind) => format!("{} ({kind})", c.outcome),
            None => c.outcome.clone(),
        };
        rows.push([
            format!("child {} {outcome}{under}", c.id),
            c.cost.input(),
            c.cost.output_tokens.to_string(),
            ms(c.cost.duration_ms),
            String::new(),
            cpu(&c.cost),
            String::new(),
        ]);
    }
    rows.push([
        "this run".to_owned(),
        spend.run.input(),
        spend.run.output_tokens.to_string(),
        ms(spend.run.duration_ms),
        String::new(),
        cpu(&spend.run),
        String::new(),
    ]);
    let (tree, runs) = spend.tree;
    if runs > 1 {
        rows.push([
            format!("with everything under it ({runs} runs)"),
            tree.input(),
            tree.output_tokens.to_string(),
            String::new(),
            String::new(),
            cpu(&tree),
            String::new(),
        ]);
    }
    let mut lines = super::table::lines(&rows).into_iter();
    println!("{:<10} {}", "spend:", lines.next().unwrap_or_default());
    for line in lines {
        println!("{:<10} {line}", "");
    }
}

/// Prints what the gaming stage flagged: each rule, where, and the added line.
fn print_gaming(findings: &[harness::Finding]) {
    let gaming: Vec<&harness::Finding> = findings
        .iter()
        .filter(|f| f.source == harness::Source::Gaming)
        .collect();
    if gaming.is_empty() {
        return;
    }
    println!("     gaming:");
    for finding in gaming {
        let advisory = if finding.blocking { "" } else { " (advisory)" };
        let first = finding.message.lines().next().unwrap_or_default();
        println!("       {} {first}{advisory}", finding.name);
    }
}

/// Prints each holdout that failed with the end of its output: the operator's to read (the
/// delegate was told only its counts).
fn print_holdouts(evidence: &[harness::Evidence]) {
    for record in evidence
        .iter()
        .filter(|e| e.source == harness::Source::Holdout.as_str() && !e.passed())
    {
        println!(
            "     holdout {} (its output, never shown to the delegate):",
            record.criterion
        );
        let tail = record.output_tail.as_deref().unwrap_or_default();
        let lines: Vec<&str> = tail.lines().collect();
        for line in &lines[lines.len().saturating_sub(12)..] {
            println!("       | {line}");
        }
    }
}

/// Prints what the attempt changed, as `+added ~modified -deleted: paths`.
fn print_changes(changes: &serde_json::Value) {
    let list = |key: &str| -> Vec<&str> {
        changes[key]
            .as_array()
            .map(|a| a.iter().filter_map(serde_json::Value::as_str).collect())
            .unwrap_or_default()
    };
    if !changes.is_object() {
        return;
    }
    let (added, modified, deleted) = (list("added"), list("modified"), list("deleted"));
    let mut paths: Vec<String> = Vec::new();
    paths.extend(added.iter().map(|p| format!("+{p}")));
    paths.extend(modified.iter().map(|p| format!("~{p}")));
    paths.extend(deleted.iter().map(|p| format!("-{p}")));
    let shown = paths.len().min(10);
    let more = if paths.len() > shown {
        format!(" and {} more", paths.len() - shown)
    } else {
        String::new()
    };
    println!(
        "     changes: {} added, {} modified, {} deleted{}{}{more}",
        added.len(),
        modified.len(),
        deleted.len(),
        if paths.is_empty() { "" } else { ": " },
        paths[..shown].join(" ")
    );
}

/// Prints the attempt's evidence records as a table: criterion, result, proof.
fn print_evidence(evidence: &[harness::Evidence]) {
    if evidence.is_empty() {
        return;
    }
    let cell = |text: &str| text.replace('\n', " ");
    let width = evidence
        .iter()
        .map(|r| r.criterion.chars().count())
        .max()
        .unwrap_or(0)
        .clamp(9, 40);
    println!("     {:<width$}  {:<7}  PROOF", "CRITERION", "RESULT");
    for record in evidence {
        let mut name = cell(&record.criterion);
        if name.chars().count() > width {
            name = name.chars().take(width - 1).collect::<String>() + "…";
        }
        let advisory = if record.required { "" } else { " (advisory)" };
        let advisory = if record.source == harness::Source::Holdout.as_str() {
            format!("{advisory} (holdout)")
        } else {
            advisory.to_owned()
        };
        println!(
            "     {name:<width$}  {:<7}  {}{advisory}",
            record.result.as_str(),
            cell(record.proof.as_deref().unwrap_or("-"))
        );
    }
}

/// `passed`, `failed (verification_failed)`, `error (verifier)`, ...
fn outcome(record: &Record) -> String {
    match &record.error_kind {
        Some(kind) => format!("{} ({kind})", record.outcome),
        None => record.outcome.clone(),
    }
}

fn duration(d: Duration) -> String {
    humantime::format_duration(Duration::from_millis(
        u64::try_from(d.as_millis()).unwrap_or(u64::MAX),
    ))
    .to_string()
}

/// The run `id` of the journal `flag` finds: its export, and the seal the journal stored.
async fn exported(
    flag: Option<&std::path::Path>,
    id: &str,
) -> Result<(serde_json::Value, Option<String>, String), Failure> {
    let journal = settings::journal_to_read(flag)?;
    let wanted = id.to_owned();
    let found = settings::read_journal(&journal, move |j| j.get(&wanted)).await?;
    let record = found.ok_or_else(|| {
        Error::config(format!(
            "no delegation {id} in the journal {journal} (`harness runs list` shows the recorded ids)"
        ))
    })?;
    Ok((
        harness_records::export(&record),
        record.seal,
        journal.to_string(),
    ))
}

async fn export(args: &RunsExportArgs) -> Result<(), Failure> {
    let (mut document, stored, journal) = exported(args.journal.as_deref(), &args.id).await?;
    // The export carries the seal stored when the run was recorded: a record edited since
    // (outside harness) is not exported as if it were the one sealed.
    if let Some(stored) = stored
        && document["seal"].as_str() != Some(stored.as_str())
    {
        return Err(harness_records::Error::journal(format!(
            "the journal {journal} holds run {} changed since it was recorded: its record seals {}, the journal stored {stored}; nothing was exported (`harness audit {}` says what does not hold)",
            args.id,
            document["seal"].as_str().unwrap_or("?"),
            args.id,
        ))
        .into());
    }
    let workdir = document["run"]["workdir"]
        .as_str()
        .map(std::path::PathBuf::from);
    let key = args
        .sign
        .as_ref()
        .map(|key| signing_key(key, workdir.as_deref()))
        .transpose()?;
    let (bytes, what) = match (args.format, &key) {
        (ExportFormat::Json, _) if args.url.is_some() => {
            return Err(Error::config(
                "runs export --url: the URL goes into an attestation; add --format dsse",
            )
            .into());
        }
        (ExportFormat::Json, key) => {
            if let Some(key) = key {
                harness_records::sign(&mut document, key);
            }
            let what = format!(
                "{}, seal {}",
                harness_records::RUN_SCHEMA,
                document["seal"].as_str().unwrap_or("?")
            );
            (harness_records::document_bytes(&document), what)
        }
        (ExportFormat::Dsse, None) => {
            return Err(Error::config(
                "runs export --format dsse: an envelope is signed: add --sign KEY.pem (an ed25519 private key, `openssl genpkey -algorithm ed25519 -out KEY.pem`)",
            )
            .into());
        }
        (ExportFormat::Dsse, Some(key)) => {
            let commit = workdir.as_deref().and_then(git_head);
            let attesting = harness_records::Attesting {
                git_commit: commit.as_deref(),
                url: args.url.as_deref(),
            };
            let statement = harness_records::statement(&document, &attesting);
            let envelope = harness_records::envelope(&statement, key);
            let what = format!(
                "DSSE envelope of an in-toto test-result statement ({}), keyid {}",
                statement["predicate"]["result"].as_str().unwrap_or("?"),
                harness_records::dsse_key_id(&key.verifying_key())
            );
            // One line: the `.intoto.jsonl` convention, one envelope a line.
            let mut bytes = envelope.to_string().into_bytes();
            bytes.push(b'\n');
            (bytes, what)
        }
    };
    match &args.output {
        Some(path) => {
            std::fs::write(path, bytes)
                .map_err(|e| Error::config(format!("runs export -o {}: {e}", path.display())))?;
            eprintln!("wrote {} ({what})", path.display());
        }
        None => {
            use std::io::Write as _;
            std::io::stdout()
                .write_all(&bytes)
                .map_err(|e| Error::config(format!("cannot write the export: {e}")))?;
        }
    }
    Ok(())
}

/// The commit `HEAD` names in `workdir`, when it is a git repository with a commit (asked of
/// `git` itself; no git, no commit).
///
/// The workspace is the delegate's, and so is its repository's config: `rev-parse` runs no hook,
/// pager or fsmonitor, the machine's and the user's config are left out, and git that has not
/// answered in [`GIT_TIME`] (a `HEAD` that is a FIFO, say) is killed and no commit named.
fn git_head(workdir: &std::path::Path) -> Option<String> {
    use std::io::Read as _;
    use std::process::{Command, Stdio};
    let mut child = Command::new("git")
        .args([
            "-c",
            "core.fsmonitor=false",
            "rev-parse",
            "--verify",
            "--quiet",
            "HEAD^{commit}",
        ])
        .current_dir(workdir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_TERMINAL_PROMPT", "0")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let deadline = std::time::Instant::now() + GIT_TIME;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if std::time::Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(10));
            }
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
        }
    };
    let mut commit = String::new();
    child.stdout.take()?.read_to_string(&mut commit).ok()?;
    let commit = commit.trim();
    (status.success() && commit.len() >= 40 && commit.bytes().all(|b| b.is_ascii_hexdigit()))
        .then(|| commit.to_owned())
}

/// How long `runs export --format dsse` waits for git to name the workspace's commit.
const GIT_TIME: Duration = Duration::from_secs(5);

/// `harness keys …`.
pub fn keys(command: KeysCommand) -> u8 {
    let KeysCommand::Id(args) = command;
    let refuse = |why: String| Error::config(format!("{}: {why}", args.key.display()));
    let key = key_text(&args.key).map_err(refuse).and_then(|pem| {
        harness_records::verifying_key(&pem)
            .or_else(|public| {
                harness_records::signing_key(&pem)
                    .map(|key| key.verifying_key())
                    .map_err(|_| public)
            })
            .map_err(refuse)
    });
    match key {
        Ok(key) => {
            println!("{}", harness_records::dsse_key_id(&key));
            exit::OK
        }
        Err(e) => exit::fail(&e, false),
    }
}

/// Key files larger than this are not keys.
const MAX_KEY_BYTES: u64 = 16 * 1024;

/// Reads the operator's signing key, refusing one inside the run's workspace (the delegate
/// could have written it).
fn signing_key(
    path: &std::path::Path,
    workdir: Option<&std::path::Path>,
) -> Result<harness_records::SigningKey, Error> {
    let refuse = |why: String| Error::config(format!("--sign {}: {why}", path.display()));
    let resolved = path.canonicalize().map_err(|e| refuse(e.to_string()))?;
    if let Some(workdir) = workdir.and_then(|w| w.canonicalize().ok())
        && resolved.starts_with(&workdir)
    {
        return Err(refuse(format!(
            "the key is inside the run's workspace {}, where the delegate could have written it; keep it elsewhere",
            workdir.display()
        )));
    }
    let pem = key_text(path).map_err(refuse)?;
    harness_records::signing_key(&pem).map_err(refuse)
}

/// The text of a key file: a regular file, at most [`MAX_KEY_BYTES`].
fn key_text(path: &std::path::Path) -> Result<String, String> {
    use std::io::Read as _;
    let mut text = String::new();
    harness_builtins::open_regular(path)
        .and_then(|file| file.take(MAX_KEY_BYTES).read_to_string(&mut text))
        .map_err(|e| e.to_string())?;
    Ok(text)
}

/// Exported documents larger than this are refused as unreadable, not read.
const MAX_AUDITED_BYTES: u64 = 256 * 1024 * 1024;

/// `harness audit`: exit 0 valid, 1 invalid, 2 unreadable.
pub async fn audit(args: AuditArgs) -> u8 {
    match audited(&args).await {
        Ok(report) => {
            if args.json {
                println!("{}", report.to_json());
            } else if report.valid()
                && report.schema_version.as_deref() == Some(harness_records::ENVELOPE_SCHEMA)
            {
                let m = &report.metrics;
                let document = if m.contains_key("events") {
                    format!(
                        "; the run document is its subject, {} events, {} evidence files, sealed",
                        m["events"], m["evidence_files"]
                    )
                } else {
                    String::new()
                };
                println!(
                    "valid: DSSE envelope of an in-toto test-result statement ({}), signature verified{document}",
                    m["result"].as_str().unwrap_or("?")
                );
            } else if report.valid() {
                let m = &report.metrics;
                println!(
                    "valid: {}, {} events, {} tool calls, {} evidence files; {}",
                    report.schema_version.as_deref().unwrap_or("?"),
                    m["events"],
                    m["tool_calls"],
                    m["evidence_files"],
                    report
                        .checks
                        .iter()
                        .filter(|(name, _)| *name == "seal" || *name == "signature")
                        .map(|(name, _)| match *name {
                            "signature" => "signature verified",
                            _ => "sealed",
                        })
                        .collect::<Vec<_>>()
                        .join(", ")
                );
            } else {
                println!("INVALID: {} failure(s)", report.failures.len());
                for failure in &report.failures {
                    println!("  {} at {}: {}", failure.code, failure.at, failure.message);
                }
            }
            if report.valid() {
                exit::OK
            } else {
                exit::NOT_VERIFIED
            }
        }
        Err(e) => exit::fail(&e, args.json),
    }
}

async fn audited(args: &AuditArgs) -> Result<harness_records::VerificationReport, Failure> {
    let mut expected = Vec::new();
    let mut children = None;
    let document = if std::path::Path::new(&args.target).is_file() {
        let (document, _) = read_document(std::path::Path::new(&args.target))?;
        if harness_records::is_envelope(&document) {
            return audited_envelope(args, &document);
        }
        if let Some(path) = &args.document {
            return Err(Error::config(format!(
                "--document {}: only an envelope is audited with its run document; {} is a run document itself",
                path.display(),
                args.target
            ))
            .into());
        }
        if args.journal.is_some() {
            let id = document["run"]["id"].as_str().ok_or_else(|| {
                Error::config(format!(
                    "{}: the export names no run (`run.id`) to look up in --journal",
                    args.target
                ))
            })?;
            let (_, seal, journal) = exported(args.journal.as_deref(), id).await?;
            expected.push(stored_seal(seal, &journal));
            children = Some(children_exported(args.journal.as_deref(), id).await?);
        }
        document
    } else {
        if let Some(path) = &args.document {
            return Err(Error::config(format!(
                "--document {}: only a DSSE envelope (a file) is audited with its run document",
                path.display()
            ))
            .into());
        }
        let (document, seal, journal) = exported(args.journal.as_deref(), &args.target).await?;
        expected.push(stored_seal(seal, &journal));
        children = Some(children_exported(args.journal.as_deref(), &args.target).await?);
        document
    };
    if let Some(seal) = &args.expect_seal {
        expected.push(("--expect-seal".to_owned(), Some(seal.trim().to_owned())));
    }
    let public_key = args.pubkey.as_deref().map(public_key).transpose()?;
    let workdir = args.workdir.clone();
    tokio::task::spawn_blocking(move || {
        let options = harness_records::AuditOptions {
            workdir: workdir.as_deref(),
            expected_seals: expected,
            public_key,
            children,
        };
        harness_records::audit(&document, &options)
    })
    .await
    .map_err(|e| Error::config(format!("the audit failed to run: {e}")).into())
}

/// The operator's public key at `path` (`--pubkey`).
fn public_key(path: &std::path::Path) -> Result<harness_records::VerifyingKey, Error> {
    let refuse = |why: String| Error::config(format!("--pubkey {}: {why}", path.display()));
    let pem = key_text(path).map_err(refuse)?;
    harness_records::verifying_key(&pem).map_err(refuse)
}

/// `harness audit ENVELOPE --pubkey KEY [--document RUN.json]`.
fn audited_envelope(
    args: &AuditArgs,
    envelope: &serde_json::Value,
) -> Result<harness_records::VerificationReport, Failure> {
    let Some(path) = &args.pubkey else {
        return Err(Error::config(format!(
            "{}: a DSSE envelope is verified with the key that signed it: add --pubkey KEY.pub.pem",
            args.target
        ))
        .into());
    };
    let key = public_key(path)?;
    let beside = args.document.as_deref().map(read_document).transpose()?;
    let mut expected = Vec::new();
    if let Some(seal) = &args.expect_seal {
        expected.push(("--expect-seal".to_owned(), Some(seal.trim().to_owned())));
    }
    let options = harness_records::AuditOptions {
        workdir: args.workdir.as_deref(),
        expected_seals: expected,
        public_key: None,
        children: None,
    };
    Ok(harness_records::audit_envelope(
        envelope,
        &key,
        beside
            .as_ref()
            .map(|(document, bytes)| harness_records::Beside { document, bytes }),
        &options,
    ))
}

/// The exports of every run the journal `flag` finds records as delegated from `id`.
async fn children_exported(
    flag: Option<&std::path::Path>,
    id: &str,
) -> Result<Vec<serde_json::Value>, Failure> {
    let journal = settings::journal_to_read(flag)?;
    let parent = id.to_owned();
    let records = settings::read_journal(&journal, move |j| {
        j.children(&parent)?
            .into_iter()
            .filter_map(|(child, _)| j.get(&child).transpose())
            .collect::<harness_records::Result<Vec<_>>>()
    })
    .await?;
    Ok(records.iter().map(harness_records::export).collect())
}

/// The seal a journal stored, as an expected seal (`None` when it holds none, which fails
/// closed rather than passing unchecked).
fn stored_seal(seal: Option<String>, journal: &str) -> (String, Option<String>) {
    (format!("the journal {journal}"), seal)
}

/// Reads an exported document (and the bytes it was read from), refusing one too large or not
/// JSON.
fn read_document(path: &std::path::Path) -> Result<(serde_json::Value, Vec<u8>), Error> {
    let unreadable = |why: String| Error::config(format!("{}: unreadable: {why}", path.display()));
    let size = std::fs::metadata(path)
        .map_err(|e| unreadable(e.to_string()))?
        .len();
    if size > MAX_AUDITED_BYTES {
        return Err(unreadable(format!(
            "{size} bytes is more than the {MAX_AUDITED_BYTES} an export may have"
        )));
    }
    let mut bytes = Vec::new();
    harness_builtins::open_regular(path)
        .and_then(|mut file| std::io::Read::read_to_end(&mut file, &mut bytes))
        .map_err(|e| unreadable(e.to_string()))?;
    let document = serde_json::from_slice(&bytes)
        .map_err(|e| unreadable(format!("not a JSON document ({e})")))?;
    Ok((document, bytes))
}
