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
    let policy = match load(&args.sandbox, paths.clone()).await {
        Ok(policy) => policy,
        Err((error, problems)) => {
            report_problems(&error, &problems, args.json);
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

/// The hooks under `paths`, or why not: the error, with each problem of each hook file when
/// that is why (none when the sandbox settings themselves are wrong).
async fn load(
    sandbox: &crate::args::SandboxArgs,
    paths: Vec<PathBuf>,
) -> Result<harness::Policy, (Error, Vec<harness_hooks::Problem>)> {
    let sandbox = settings::sandbox(Surface::Hook, sandbox).map_err(|e| (e, Vec::new()))?;
    let loaded = tokio::task::spawn_blocking(move || {
        harness_hooks::HookSet::load(&harness_hooks::engine(), sandbox, &paths)
    })
    .await
    .map_err(|e| {
        (
            Error::config(format!("loading hooks failed: {e}")),
            Vec::new(),
        )
    })?;
    loaded
        .map(harness::Policy::new)
        .map_err(|problems| (harness::Policy::refused(&problems), problems))
}

/// Says why the hooks did not load: on stderr, or as JSON — each problem as `{file, line,
/// message}` (`line` null when the file as a whole is wrong), and the error as `{kind,
/// message}` as every command's JSON gives it.
fn report_problems(error: &Error, problems: &[harness_hooks::Problem], json_output: bool) {
    if json_output {
        let problems: Vec<serde_json::Value> = problems
            .iter()
            .map(|p| json!({"file": p.path, "line": p.line, "message": p.message}))
            .collect();
        println!(
            "{}",
            json!({"ok": false, "problems": problems,
                "error": {"kind": error.kind().as_str(), "message": error.message()}})
        );
    } else {
        eprintln!("error[{}]: {}", error.kind().as_str(), error.message());
    }
}
