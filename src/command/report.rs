//! `harness report`: the failure-mode dashboard over the run journal.

use harness::{Dashboard, Error, Journal};
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

async fn report(args: &ReportArgs) -> Result<(), Error> {
    let filter = settings::journal_filter(&args.select, None)?;
    let path = args.select.journal.clone();
    let records = tokio::task::spawn_blocking(move || Journal::open_existing(&path)?.list(&filter))
        .await
        .map_err(|e| Error::config(format!("reading the journal failed: {e}")))??;
    let dashboard = Dashboard::build(&records);
    let scope = scope(args, records.len());
    if let Some(file) = &args.html {
        let generated = humantime::format_rfc3339_seconds(std::time::SystemTime::now());
        let page = dashboard.to_html(&format!("{scope} · generated {generated}"));
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
        object["journal"] = json!(args.select.journal.display().to_string());
        object["filter"] = json!({"since": args.select.since, "kind": args.select.kind});
        println!("{object}");
    } else {
        println!("{scope}\n");
        print!("{}", dashboard.to_table());
    }
    Ok(())
}

/// Says what the report covers: the journal, how many delegations, and the filter.
fn scope(args: &ReportArgs, count: usize) -> String {
    let plural = if count == 1 { "" } else { "s" };
    let mut scope = format!(
        "journal {} · {count} delegation{plural}",
        args.select.journal.display()
    );
    if let Some(since) = &args.select.since {
        scope.push_str(&format!(" · last {since}"));
    }
    if let Some(kind) = &args.select.kind {
        scope.push_str(&format!(" · kind {kind}"));
    }
    scope
}
