//! `harness hooks list` and `harness hooks check`.

use std::path::PathBuf;

use harness::Error;
use harness_builtins::Surface;
use serde_json::json;

use crate::args::HooksCommand;
use crate::exit;
use crate::settings;

/// Runs the command and returns its exit code.
pub async fn run(command: HooksCommand) -> u8 {
    let (args, check) = match command {
        HooksCommand::List(args) => (args, false),
        HooksCommand::Check(args) => (args, true),
    };
    let paths = if args.paths.is_empty() {
        vec![PathBuf::from(".harness/hooks")]
    } else {
        args.paths.clone()
    };
    let loaded = match settings::sandbox(Surface::Hook, &args.sandbox) {
        Ok(sandbox) => settings::policy(sandbox, paths.clone()).await,
        Err(e) => Err(e),
    };
    let policy = match loaded {
        Ok(policy) => policy,
        Err(e) => {
            report_problems(&e, args.json);
            return exit::USAGE;
        }
    };
    let hooks = policy.hooks();
    if check {
        if args.json {
            println!(
                "{}",
                json!({"ok": true, "hooks": hooks.hooks().len(), "problems": []})
            );
        } else {
            println!(
                "ok: {} hook(s) load and compile cleanly",
                hooks.hooks().len()
            );
        }
        return exit::OK;
    }
    let rows: Vec<serde_json::Value> = hooks
        .hooks()
        .iter()
        .map(|h| {
            json!({
                "name": h.name,
                "event": h.event.as_str(),
                "priority": h.priority,
                "when": h.when_source,
                "tools": h.tools.as_ref().map(|m| m.patterns()),
                "delegates": h.delegates.as_ref().map(|m| m.patterns()),
                "file": h.path.display().to_string(),
            })
        })
        .collect();
    if args.json {
        println!("{}", serde_json::Value::Array(rows));
        return exit::OK;
    }
    if rows.is_empty() {
        println!(
            "no hooks in {}",
            paths
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        );
        return exit::OK;
    }
    println!(
        "{:<24} {:<24} {:>8}  {:<28} FILE",
        "EVENT", "HOOK", "PRIORITY", "MATCHES"
    );
    for h in hooks.hooks() {
        let mut matches = Vec::new();
        if let Some(m) = &h.tools {
            matches.push(format!("tools={}", m.patterns().join(",")));
        }
        if let Some(m) = &h.delegates {
            matches.push(format!("delegates={}", m.patterns().join(",")));
        }
        if h.when_source.is_some() {
            matches.push("when".to_owned());
        }
        let matches = if matches.is_empty() {
            "*".to_owned()
        } else {
            matches.join(" ")
        };
        println!(
            "{:<24} {:<24} {:>8}  {:<28} {}",
            h.event.as_str(),
            h.name,
            h.priority,
            matches,
            h.path.display()
        );
    }
    exit::OK
}

fn report_problems(error: &Error, json_output: bool) {
    if json_output {
        let problems: Vec<&str> = error.message().lines().skip(1).map(str::trim).collect();
        println!(
            "{}",
            json!({"ok": false, "problems": problems, "error": error.message()})
        );
    } else {
        eprintln!("error[{}]: {}", error.kind().as_str(), error.message());
    }
}
