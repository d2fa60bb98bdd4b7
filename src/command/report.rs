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
    let dashboard = Dashboard::build(&records);
    let scope = scope(args, &journal, records.len());
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
