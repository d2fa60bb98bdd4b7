//! `harness report`: the failure-mode dashboard over the run journal.

use harness::Error;

use crate::exit::Failure;
use harness_records::{Dashboard, Located};
use serde_json::json;

use crate::args::ReportArgs;
use crate::exit;
use crate::settings;

/// Runs the command and returns its exit code.
pub async fn run(args: ReportArgs) -> u8 {
    match report(&args).await {
        Ok(()) => exit::OK,
        Err(e) => exit::fail(&e, args.json),
    }
}

async fn report(args: &ReportArgs) -> Result<(), Failure> {
    let filter = settings::journal_filter(&args.select, None)?;
    let journal = settings::journal_to_read(args.select.journal.as_deref())?;
    let records = settings::read_journal(&journal, move |j| j.list(&filter)).await?;
    if args.sarif {
        let log = harness_records::sarif(&records, env!("CARGO_PKG_VERSION"));
        println!("{log:#}");
        return Ok(());
    }
    let scope = scope(args, &journal, records.len());
    if args.by_root {
        by_root(args, &journal, &records, &scope);
        return Ok(());
    }
    let dashboard = Dashboard::build(&records);
    if let Some(file) = &args.html {
        let generated = humantime::format_rfc3339_seconds(std::time::SystemTime::now());
        let page = dashboard.to_html(&format!("{scope} · generated {generated}"), None);
        std::fs::write(file, page).map_err(|e| {
            Error::config(format!(
                "--html {}: cannot write the page: {e}",
                file.display()
            ))
        })?;
        eprintln!("wrote {}", file.display());
    }
    if args.json {
        let mut object = dashboard.to_json();
        object["journal"] = json!(journal.path.display().to_string());
        object["filter"] = json!({"since": args.select.since, "kind": args.select.kind});
        println!("{object}");
    } else {
        println!("{scope}\n");
        print!("{}", dashboard.to_table());
    }
    Ok(())
}

/// `--by-root`: one line (or JSON object) per delegation tree, newest first.
fn by_root(args: &ReportArgs, journal: &Located, records: &[harness_records::Record], scope: &str) {
    let trees = harness_records::by_root(records);
    if args.json {
        let roots: Vec<_> = trees
            .iter()
            .map(harness_records::RootStats::to_json)
            .collect();
        println!(
            "{}",
            json!({"roots": roots, "journal": journal.path.display().to_string(),
                   "filter": {"since": args.select.since, "kind": args.select.kind}})
        );
        return;
    }
    println!("{scope}\n");
    let mut rows = vec![[
        "ROOT".to_owned(),
        "OUTCOME".to_owned(),
        "RUNS".to_owned(),
        "CHILDREN FAILED".to_owned(),
        "ATTEMPTS".to_owned(),
        "TOKENS".to_owned(),
        "TASK".to_owned(),
    ]];
    for tree in &trees {
        let task: String = tree
            .task
            .as_deref()
            .unwrap_or("-")
            .chars()
            .take(50)
            .collect();
        rows.push([
            tree.id.clone(),
            match &tree.kind {
                Some(kind) => format!("{} ({kind})", tree.outcome),
                None => tree.outcome.clone(),
            },
            tree.runs.to_string(),
            tree.children_failed.to_string(),
            tree.attempts.to_string(),
            tree.tokens.to_string(),
            task.split_whitespace().collect::<Vec<_>>().join(" "),
        ]);
    }
    super::table::print(&rows);
}

/// Says what the report covers: the journal, how many delegations, and the filter.
fn scope(args: &ReportArgs, journal: &Located, count: usize) -> String {
    let plural = if count == 1 { "" } else { "s" };
    let mut scope = format!("journal {journal} · {count} delegation{plural}");
    if let Some(since) = &args.select.since {
        scope.push_str(&format!(" · last {since}"));
    }
    if let Some(kind) = &args.select.kind {
        scope.push_str(&format!(" · kind {kind}"));
    }
    scope
}
