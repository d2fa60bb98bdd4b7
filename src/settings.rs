//! Validated configuration built from raw arguments: every file read and every flag checked
//! before anything runs, each problem a configuration error naming the file or flag.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use harness::Error;
use harness_builtins::{Capabilities, HostAllowList, Sandbox, Surface, Workspace};
use serde_json::{Map, Value};

use crate::args::SandboxArgs;

/// The runtime every command that runs delegations uses: trace ids for the report, and the
/// run journals' review decisions watched while delegates run (a delegate recording an override
/// ends its delegation `gate_tampered`).
pub fn runtime() -> Result<harness::Runtime, Error> {
    let runtime = harness::Runtime::with_trace_ids(Some(harness_telemetry::trace_id))?;
    runtime.watch_reviews(Arc::new(harness_records::review_state));
    runtime.record_starts(Arc::new(record_start));
    runtime.record_children(Arc::new(record_child));
    bridge_mcp(&runtime);
    Ok(runtime)
}

/// Lets the agent CLIs `runtime` runs call `delegate`: their MCP server is this program, relaying
/// (`harness mcp --via SOCKET`) to the socket the run serves. Nothing when this program's path
/// cannot be known: such a delegation then says so when it runs.
pub fn bridge_mcp(runtime: &harness::Runtime) {
    if let Ok(program) = std::env::current_exe() {
        runtime.bridge_mcp(vec![
            program.display().to_string(),
            "mcp".to_owned(),
            "--via".to_owned(),
        ]);
    }
}

/// Records a child delegation (a `delegate` call) that has ended in `journal`, and returns the
/// seal of its record: its parent's tool result carries it, and `harness audit` checks it.
/// Through the journal's writer in this process when it has one (one connection writes, records
/// gathered into one transaction); else directly. Called on a blocking thread.
fn record_child(
    journal: &Path,
    delegation: &harness::Delegation,
    report: &harness::Report,
) -> Result<String, String> {
    let (told, stored) = std::sync::mpsc::channel();
    let queued = harness_records::JournalWriter::record_sealed(
        journal,
        report.clone(),
        meta(delegation),
        move |sealed| {
            let _ = told.send(sealed);
        },
    );
    if !queued {
        return record_run(journal, delegation, report).map_err(|e| e.message().to_owned());
    }
    stored
        .recv()
        .map_err(|_| "the journal writer stopped".to_owned())?
}

/// What the journal records beside a run of `delegation`: its file and workspace, absolute.
fn meta(delegation: &harness::Delegation) -> harness_records::RecordMeta {
    let absolute = |p: &Path| std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf());
    harness_records::RecordMeta {
        source: Some(absolute(delegation.source())),
        workdir: Some(absolute(delegation.recorded_workdir())),
    }
}

/// Records `report` of `delegation` in the run journal at `journal` (blocking), and returns the
/// seal of its record.
///
/// # Errors
/// The journal cannot be opened or written, or holds no seal after.
pub fn record_run(
    journal: &Path,
    delegation: &harness::Delegation,
    report: &harness::Report,
) -> harness_records::Result<String> {
    harness_records::Journal::open(journal)?.record(report, &meta(delegation))
}

/// Writes the row of a run that has started into `journal`, so that a run whose process dies is
/// found, shown as `error`/`interrupted`: through the journal's writer when this process has one
/// (a batch, a server: one connection writes), else on a blocking thread (SQLite blocks). The
/// run waits for the future, so its row is there before its delegate acts. A journal that cannot
/// be written is a warning here, and the run's error when it is recorded.
fn record_start(
    journal: &Path,
    run: &harness::RunStarted<'_>,
) -> std::pin::Pin<Box<dyn Future<Output = ()> + Send>> {
    let start = harness_records::Started::from(run);
    if let Some(written) = harness_records::JournalWriter::begin(journal, start.clone()) {
        return Box::pin(written);
    }
    let journal = journal.to_path_buf();
    let write = move || {
        let begun = harness_records::Journal::open(&journal)
            .and_then(|mut journal| journal.begin(std::slice::from_ref(&start)));
        if let Err(e) = begun {
            eprintln!(
                "warning: the start of {} was not written: {}",
                start.id,
                e.message()
            );
        }
    };
    match tokio::runtime::Handle::try_current() {
        Ok(runtime) => {
            let writing = runtime.spawn_blocking(write);
            Box::pin(async move {
                // A write that panicked said nothing; the run's record says the rest.
                let _ = writing.await;
            })
        }
        Err(_) => {
            write();
            Box::pin(std::future::ready(()))
        }
    }
}

/// The most bytes a command reads of a file it is given (a result to verify, a script).
const MAX_INPUT_BYTES: u64 = 64 * 1024 * 1024;

/// Reads a text file (a regular file only, never waiting on a FIFO or device; capped), naming
/// it in the error.
pub fn read_file(what: &str, path: &Path) -> Result<String, Error> {
    harness_builtins::read_regular(path, MAX_INPUT_BYTES)
        .map_err(|e| Error::config(format!("{what} {}: {e}", path.display())))
}

/// Reads `-` (standard input) or a file.
pub fn read_input(what: &str, path: &str) -> Result<(String, String), Error> {
    if path == "-" {
        let mut text = String::new();
        std::io::Read::read_to_string(&mut std::io::stdin(), &mut text)
            .map_err(|e| Error::config(format!("{what} from standard input: {e}")))?;
        Ok(("<stdin>".to_owned(), text))
    } else {
        Ok((path.to_owned(), read_file(what, Path::new(path))?))
    }
}

/// Opens the workspace root (`--workdir`, default the current directory).
pub fn workspace(workdir: Option<&Path>) -> Result<Workspace, Error> {
    let dir = workdir.map_or_else(|| PathBuf::from("."), Path::to_path_buf);
    Workspace::new(&dir).map_err(|e| Error::config(format!("--workdir: {e}")))
}

/// Builds the capabilities of a checking surface (verifier or hook) from the sandbox flags.
pub fn capabilities(args: &SandboxArgs) -> Result<Capabilities, Error> {
    let hosts = HostAllowList::new(&args.allow_host)
        .map_err(|e| Error::config(format!("--allow-host: {e}")))?;
    Ok(Capabilities {
        hosts,
        programs: args.allow_exec.clone(),
        env: args.allow_env.clone(),
        ..Capabilities::read_only()
    })
}

/// Builds the sandbox scripts of `surface` run in, under the limits of the workspace's project
/// policy (`.harness/policy.yaml`), as `harness run` would: the programs `exec.run` starts
/// confined as that policy's `commands.isolation` says, the workspace writable but for its
/// `.harness/` and `.git/`.
pub fn sandbox(surface: Surface, args: &SandboxArgs) -> Result<Arc<Sandbox>, Error> {
    let workspace = workspace(args.workdir.as_deref())?;
    let policy = harness::ProjectPolicy::load(workspace.root())?;
    let isolation = if args.allow_exec.is_empty() {
        None
    } else if policy.commands.confines() {
        let root = workspace.root();
        Some(harness_builtins::Isolation::new(
            root,
            &[root.join(".harness"), root.join(".git")],
        ))
    } else {
        if let Some(warning) = policy.commands.warning() {
            eprintln!("warning: {warning}");
        }
        None
    };
    Ok(Arc::new(
        Sandbox::new(surface, workspace, capabilities(args)?, policy.limits)
            .with_isolation(isolation),
    ))
}

/// Returns what the command line sets over every delegation file (`run` and `batch`); `journal`
/// is the run journal the command writes (`None` with `--no-journal`), which delegate tools may
/// not write.
pub fn overrides(
    sandbox: &SandboxArgs,
    hooks: &[PathBuf],
    max_verify_retries: Option<u32>,
    journal: Option<&Path>,
) -> harness::Overrides {
    harness::Overrides {
        workdir: sandbox.workdir.clone(),
        max_verify_retries,
        allow_hosts: sandbox.allow_host.clone(),
        allow_exec: sandbox.allow_exec.clone(),
        allow_env: sandbox.allow_env.clone(),
        hooks: hooks.to_vec(),
        trace_parent: harness_telemetry::parent_from_env(),
        parent_id: std::env::var("HARNESS_PARENT_ID")
            .ok()
            .map(|p| p.trim().to_owned())
            .filter(|p| !p.is_empty()),
        journal: journal.map(Path::to_path_buf),
        keep_workspaces: false,
    }
}

/// Builds the `args` object from `--args-file` and then `--arg KEY=VALUE` pairs.
pub fn script_args(file: Option<&Path>, pairs: &[String]) -> Result<Value, Error> {
    let mut args = Map::new();
    if let Some(path) = file {
        let text = read_file("--args-file", path)?;
        match serde_json::from_str::<Value>(&text) {
            Ok(Value::Object(map)) => args = map,
            Ok(_) => {
                return Err(Error::config(format!(
                    "--args-file {}: expected a JSON object",
                    path.display()
                )));
            }
            Err(e) => {
                return Err(Error::config(format!(
                    "--args-file {}: {e}",
                    path.display()
                )));
            }
        }
    }
    for pair in pairs {
        let Some((key, value)) = pair.split_once('=') else {
            return Err(Error::config(format!("--arg {pair:?}: expected KEY=VALUE")));
        };
        if key.is_empty() {
            return Err(Error::config(format!("--arg {pair:?}: the key is empty")));
        }
        let value = serde_json::from_str(value).unwrap_or_else(|_| Value::String(value.to_owned()));
        args.insert(key.to_owned(), value);
    }
    Ok(Value::Object(args))
}

/// Loads hooks from `paths` for a command, every problem listed in one configuration error.
pub async fn policy(
    sandbox: std::sync::Arc<harness_builtins::Sandbox>,
    paths: Vec<PathBuf>,
) -> Result<harness::Policy, Error> {
    tokio::task::spawn_blocking(move || {
        harness::Policy::load(&harness_hooks::engine(), sandbox, &paths)
    })
    .await
    .map_err(|e| Error::config(format!("loading hooks failed: {e}")))?
}

/// Turns `--since` and `--kind` into a journal filter.
/// Finds the journal a reading command (`report`, `runs`) opens, read-only: by the one rule of
/// [`harness_records::locate`]. A journal that is not there is an error naming where it looked.
pub fn journal_to_read(
    flag: Option<&std::path::Path>,
) -> harness_records::Result<harness_records::Located> {
    let located = harness_records::locate(flag)?;
    if located.path.is_file() {
        return Ok(located);
    }
    let looked = match located.found {
        harness_records::Found::Default => format!(
            "no run journal at {} and none in any directory above (`harness run` and `harness batch` record one there; pass --journal PATH or set HARNESS_JOURNAL to read another)",
            located.path.display()
        ),
        _ => format!(
            "no run journal at {} ({})",
            located.path.display(),
            located.how()
        ),
    };
    Err(harness_records::Error::journal(looked))
}

/// A recorded run as `runs show`, the MCP server's `run_status` and the API give it: the record,
/// a human's decision on it, and the delegation tree it belongs to (when that tree has
/// children).
pub type ShownRun = (
    harness_records::Record,
    Option<harness_records::Override>,
    Option<harness_records::TreeNode>,
);

/// Reads run `id` of the journal at `located` with its decision and tree; `None` when the
/// journal holds no such run.
///
/// # Errors
/// The journal cannot be read.
pub async fn read_run(
    located: &harness_records::Located,
    id: &str,
) -> harness_records::Result<Option<ShownRun>> {
    let id = id.to_owned();
    read_journal(located, move |j| {
        Ok(match j.get(&id)? {
            Some(record) => {
                let decided = j.override_of(&id)?;
                let tree = j.tree(&id)?.filter(|t| !t.children.is_empty());
                Some((record, decided, tree))
            }
            None => None,
        })
    })
    .await
}

/// Opens the journal at `located` read-only on a blocking thread and runs `read` on it.
pub async fn read_journal<T: Send + 'static>(
    located: &harness_records::Located,
    read: impl FnOnce(&harness_records::Journal) -> harness_records::Result<T> + Send + 'static,
) -> harness_records::Result<T> {
    let path = located.path.clone();
    tokio::task::spawn_blocking(move || read(&harness_records::Journal::open_read_only(&path)?))
        .await
        .map_err(|e| harness_records::Error::journal(format!("reading the journal failed: {e}")))?
}

pub fn journal_filter(
    select: &crate::args::JournalArgs,
    limit: Option<usize>,
) -> Result<harness_records::Filter, Error> {
    let since = match &select.since {
        None => None,
        Some(text) => {
            let ago = humantime::parse_duration(text).map_err(|e| {
                Error::config(format!(
                    "--since {text:?}: {e} (give a duration such as 30m, 24h or 7d)"
                ))
            })?;
            Some(
                std::time::SystemTime::now()
                    .checked_sub(ago)
                    .unwrap_or(std::time::UNIX_EPOCH),
            )
        }
    };
    Ok(harness_records::Filter {
        since,
        kind_glob: select.kind.clone(),
        limit,
    })
}

/// Resolves when the process is asked to stop — SIGINT (Ctrl-C) or SIGTERM — to the words for
/// it ("interrupted by SIGINT"). Never resolves when no handler can be installed.
pub async fn shutdown_signal() -> String {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match (
            signal(SignalKind::interrupt()),
            signal(SignalKind::terminate()),
        ) {
            (Ok(mut interrupt), Ok(mut terminate)) => tokio::select! {
                _ = interrupt.recv() => "interrupted by SIGINT".to_owned(),
                _ = terminate.recv() => "terminated by SIGTERM".to_owned(),
            },
            _ => std::future::pending().await,
        }
    }
    #[cfg(not(unix))]
    {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
        "interrupted by Ctrl-C".to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn arg_values_parse_as_json_else_string() {
        let pairs = ["n=3", "s=hello", "b=true", "o={\"a\":1}", "e=", "eq=a=b"].map(String::from);
        let args = script_args(None, &pairs).expect("valid");
        assert_eq!(
            args,
            json!({"n": 3, "s": "hello", "b": true, "o": {"a": 1}, "e": "", "eq": "a=b"})
        );
        assert!(script_args(None, &["novalue".to_owned()]).is_err());
        assert!(script_args(None, &["=x".to_owned()]).is_err());
    }
}
