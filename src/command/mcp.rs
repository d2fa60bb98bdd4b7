//! `harness mcp`: the Model Context Protocol over stdio (DESIGN §9), so that an agent people
//! already use — Claude Code, Codex, Gemini CLI, any MCP client — hands a sub-task to harness
//! and gets back the deliverable AND its verdict, each run recorded in the project's journal.
//!
//! Tools: `delegate` (a `task` for a profile of the project policy, or a delegation `file` of the
//! project; `wait: false` starts it and answers with its id), `run_status {id, wait_s}` (waits
//! up to `wait_s` for a run to end) and `review_list`. A verdict, passed or failed, is a result; a
//! request that cannot run (bad arguments, a path outside the project, a delegation that errs)
//! is a tool error carrying its typed kind. stdout carries the protocol only.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use harness::{Error, ErrorKind, EventRecord, Outcome, Report, RunEvent};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    JsonObject, ListToolsResult, PaginatedRequestParams, ProgressNotificationParam,
    ServerCapabilities, ServerConfig, Tool, ToolAnnotations,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt as _};
use serde_json::{Map, Value, json};

use crate::args::McpArgs;
use crate::exit;
use crate::settings;

/// The most runs `review_list` returns.
const MAX_LISTED: u64 = 200;
/// The longest `run_status` waits for a run to end, in seconds.
const MAX_WAIT_S: u64 = 3600;

/// Serves until the client closes stdin; returns the exit code.
pub async fn run(args: McpArgs) -> u8 {
    if let Some(socket) = &args.via {
        return relay(socket).await;
    }
    let server = match Server::new(&args) {
        Ok(server) => server,
        Err(e) => {
            eprintln!("error[{}]: {}", e.kind().as_str(), e.message());
            return exit::for_error(e.kind());
        }
    };
    eprintln!(
        "harness mcp: serving the project {} over stdio; runs are recorded in {}",
        server.root.display(),
        server.journal.display()
    );
    let background = Arc::clone(&server.background);
    let running = match server.serve(rmcp::transport::stdio()).await {
        Ok(running) => running,
        Err(e) => {
            eprintln!("error[config]: the MCP client did not start a session: {e}");
            return exit::USAGE;
        }
    };
    let ended = running.waiting().await;
    // Runs started with `wait: false` end with the session: cancelled, and recorded.
    background.stop().await;
    match ended {
        Ok(_) => exit::OK,
        Err(e) => {
            eprintln!("error: the MCP server stopped: {e}");
            exit::USAGE
        }
    }
}

/// `--via SOCKET`: copies standard input to the socket and the socket to standard output until
/// either side closes — the agent CLI's MCP client on one end, the server its run's process
/// serves on the other.
async fn relay(socket: &Path) -> u8 {
    let stream = match tokio::net::UnixStream::connect(socket).await {
        Ok(stream) => stream,
        Err(e) => {
            eprintln!(
                "error[config]: harness mcp --via {}: cannot connect: {e} (the run that serves it has ended, or this was started by hand: `--via` is for the agent CLIs harness runs)",
                socket.display()
            );
            return exit::USAGE;
        }
    };
    let (mut from_server, mut to_server) = stream.into_split();
    let mut stdout = tokio::io::stdout();
    let up = async {
        let _ = tokio::io::copy(&mut tokio::io::stdin(), &mut to_server).await;
    };
    let down = async {
        let _ = tokio::io::copy(&mut from_server, &mut stdout).await;
        let _ = tokio::io::AsyncWriteExt::flush(&mut stdout).await;
    };
    // The client closing its end, or the server its own, ends the relay.
    tokio::select! {
        () = up => {}
        () = down => {}
    }
    exit::OK
}

/// The runs started with `wait: false`: whether each has ended, and how to stop them all.
#[derive(Default)]
struct Background {
    /// Each run's id and whether it has ended (and been recorded).
    runs: std::sync::Mutex<std::collections::HashMap<String, tokio::sync::watch::Receiver<bool>>>,
    tasks: std::sync::Mutex<Vec<tokio::task::JoinHandle<()>>>,
    stop: tokio::sync::Notify,
    stopping: std::sync::atomic::AtomicBool,
}

impl Background {
    /// Whether run `id` was started here and has not ended: `Some(receiver)` to wait on.
    fn running(&self, id: &str) -> Option<tokio::sync::watch::Receiver<bool>> {
        self.runs
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(id)
            .filter(|done| !*done.borrow())
            .cloned()
    }

    /// Resolves when the session ends.
    async fn stopped(&self) {
        let stop = self.stop.notified();
        tokio::pin!(stop);
        stop.as_mut().enable();
        if !self.stopping.load(std::sync::atomic::Ordering::SeqCst) {
            stop.await;
        }
    }

    /// Cancels every run still going and waits until each is recorded.
    async fn stop(&self) {
        self.stopping
            .store(true, std::sync::atomic::Ordering::SeqCst);
        self.stop.notify_waiters();
        let tasks = std::mem::take(
            &mut *self
                .tasks
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        );
        for task in tasks {
            let _ = task.await;
        }
    }
}

/// The server: the project it serves, where it records, and the runtime its runs share.
#[derive(Clone)]
struct Server {
    root: PathBuf,
    journal: PathBuf,
    runtime: harness::Runtime,
    /// The client's `HARNESS_PARENT_ID`: the run its work was delegated from.
    parent_id: Option<String>,
    /// The runs started with `wait: false`.
    background: Arc<Background>,
}

impl Server {
    fn new(args: &McpArgs) -> Result<Self, Error> {
        let root = args.root.canonicalize().map_err(|e| {
            Error::config(format!(
                "--root {}: {e} (give the project directory)",
                args.root.display()
            ))
        })?;
        let journal = harness_records::locate_from(
            args.journal.as_deref(),
            std::env::var_os(harness_records::JOURNAL_ENV),
            &root,
        )
        .path;
        let journal = if journal.is_absolute() {
            journal
        } else {
            root.join(journal)
        };
        Ok(Server {
            root,
            journal,
            runtime: settings::runtime()?,
            parent_id: std::env::var("HARNESS_PARENT_ID")
                .ok()
                .map(|p| p.trim().to_owned())
                .filter(|p| !p.is_empty()),
            background: Arc::default(),
        })
    }

    /// What every run of this server is assembled with.
    fn overrides(&self) -> harness::Overrides {
        harness::Overrides {
            journal: Some(self.journal.clone()),
            parent_id: self.parent_id.clone(),
            trace_parent: harness_telemetry::parent_from_env(),
            ..harness::Overrides::default()
        }
    }

    /// `path` (relative to the project) resolved, refused when it leaves the project.
    fn inside(&self, argument: &str, path: &str) -> Result<PathBuf, Error> {
        let full = self.root.join(path);
        let real = full.canonicalize().map_err(|e| {
            Error::config(format!(
                "`{argument}` {path:?}: {e} (give a path relative to the project {})",
                self.root.display()
            ))
        })?;
        if !real.starts_with(&self.root) {
            return Err(Error::config(format!(
                "`{argument}` {path:?} is outside the project {}: give a path inside it",
                self.root.display()
            )));
        }
        Ok(real)
    }

    /// The delegation a `delegate` call asks for.
    fn delegation(&self, mut arguments: Map<String, Value>) -> Result<harness::Delegation, Error> {
        let text = |arguments: &mut Map<String, Value>, key: &str| match arguments.remove(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(other) => Err(Error::config(format!("`{key}` is {other}; give a string"))),
        };
        let file = text(&mut arguments, "file")?;
        let workdir = text(&mut arguments, "workdir")?
            .map(|dir| self.inside("workdir", &dir))
            .transpose()?;
        let delegation = match file {
            Some(file) => {
                if let Some(key) = arguments.keys().next() {
                    return Err(Error::config(format!(
                        "`{key}` cannot be given with `file`: the delegation file says everything (give `task` and its gates instead of `file`)"
                    )));
                }
                let path = self.inside("file", &file)?;
                let mut overrides = self.overrides();
                overrides.workdir = workdir;
                harness::Assembler::new(overrides).file(&path)?
            }
            None => {
                let workdir = workdir.unwrap_or_else(|| self.root.clone());
                harness::delegation_for(&workdir, &arguments, &self.overrides())
                    .map_err(Error::config)?
            }
        };
        let real = delegation
            .workdir()
            .canonicalize()
            .unwrap_or_else(|_| delegation.workdir().to_path_buf());
        if !real.starts_with(&self.root) {
            return Err(Error::config(format!(
                "the delegation's workdir {} is outside the project {}: it may only run inside it",
                real.display(),
                self.root.display()
            )));
        }
        Ok(delegation)
    }

    async fn delegate(
        &self,
        mut arguments: JsonObject,
        context: RequestContext<RoleServer>,
    ) -> CallToolResult {
        let wait = match arguments.remove("wait") {
            None | Some(Value::Null) => true,
            Some(Value::Bool(wait)) => wait,
            Some(other) => {
                return failed(
                    &Error::config(format!("`wait` is {other}; give true or false")),
                    None,
                );
            }
        };
        let delegation = match self.delegation(arguments) {
            Ok(delegation) => delegation,
            Err(e) => return failed(&e, None),
        };
        if !wait {
            return self.start(delegation);
        }
        // Progress per attempt, as the client asked for it (a progress token).
        let (tell, mut told) = tokio::sync::mpsc::unbounded_channel::<String>();
        let forward = context.meta.get_progress_token().map(|token| {
            let peer = context.peer.clone();
            tokio::spawn(async move {
                let mut step = 0.0;
                while let Some(message) = told.recv().await {
                    step += 1.0;
                    let param =
                        ProgressNotificationParam::new(token.clone(), step).with_message(message);
                    if peer.notify_progress(param).await.is_err() {
                        break;
                    }
                }
            })
        });
        let total = delegation.max_attempts();
        let observer = |record: &EventRecord| {
            if let Some(message) = progress(record, total) {
                let _ = tell.send(message);
            }
        };
        let cancelled = context.ct.clone();
        let report = self
            .runtime
            .run_until(&delegation, &observer, async move {
                cancelled.cancelled().await;
                "cancelled by the MCP client".to_owned()
            })
            .await;
        drop(tell);
        if let Some(forward) = forward {
            let _ = forward.await;
        }
        self.finish(delegation, report).await
    }

    /// Records a run that ended, and says how it ended.
    async fn finish(&self, delegation: harness::Delegation, report: Report) -> CallToolResult {
        let journal = self.journal.clone();
        let (recorded, report) = tokio::task::spawn_blocking(move || {
            (settings::record_run(&journal, &delegation, &report), report)
        })
        .await
        .expect("recording a run does not panic");
        let mut object = outcome_json(&report);
        object["journal"] = json!(self.journal.display().to_string());
        match recorded {
            Ok(seal) => object["seal"] = json!(seal),
            Err(e) => {
                let message = format!(
                    "the run {} ({}) was not recorded in {}: {}",
                    report.id,
                    report.outcome.as_str(),
                    self.journal.display(),
                    e.message()
                );
                return error_result(e.kind().as_str(), &message, Some(object));
            }
        }
        match (&report.outcome, &report.error) {
            (Outcome::Error(_), Some(e)) => failed(e, Some(object)),
            _ => structured(object),
        }
    }

    /// Starts `delegation` in the background (`wait: false`) and says its id at once: the run is
    /// recorded when it ends, and cancelled when the session ends first.
    fn start(&self, delegation: harness::Delegation) -> CallToolResult {
        let id = harness::new_id();
        let (done, ended) = tokio::sync::watch::channel(false);
        self.background
            .runs
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(id.clone(), ended);
        let server = self.clone();
        let run = id.clone();
        let task = tokio::spawn(async move {
            let background = Arc::clone(&server.background);
            let report = server
                .runtime
                .run_as(run, &delegation, &harness::Nobody, async move {
                    background.stopped().await;
                    "the MCP session ended before the run did".to_owned()
                })
                .await;
            let _ = server.finish(delegation, report).await;
            let _ = done.send(true);
        });
        self.background
            .tasks
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(task);
        structured(json!({
            "id": id,
            "outcome": "running",
            "summary": format!("started {id}; call run_status with {{\"id\": \"{id}\", \"wait_s\": 50}} until it ends"),
        }))
    }

    async fn run_status(&self, arguments: &JsonObject) -> CallToolResult {
        let read = only(arguments, &["id", "wait_s"]).and_then(|()| {
            let id = match arguments.get("id") {
                Some(Value::String(id)) if !id.trim().is_empty() => id.trim().to_owned(),
                _ => {
                    return Err(Error::config(
                        "`id` is missing; give the id of a run (`d-…`, as `delegate` returned it)",
                    ));
                }
            };
            let wait = match arguments.get("wait_s") {
                None | Some(Value::Null) => 0,
                Some(v) => v.as_u64().filter(|s| *s <= MAX_WAIT_S).ok_or_else(|| {
                    Error::config(format!(
                        "`wait_s` is {v}; give a whole number of seconds from 0 to {MAX_WAIT_S}"
                    ))
                })?,
            };
            Ok((id, wait))
        });
        let (id, wait) = match read {
            Ok(read) => read,
            Err(e) => return failed(&e, None),
        };
        if let Some(mut ended) = self.background.running(&id) {
            let waited = tokio::time::timeout(
                std::time::Duration::from_secs(wait),
                ended.wait_for(|done| *done),
            )
            .await;
            if !matches!(waited, Ok(Ok(_))) {
                return structured(json!({
                    "id": id,
                    "outcome": "running",
                    "verified": false,
                    "summary": format!("{id} is still running; ask again"),
                }));
            }
        }
        let found = settings::read_run(&self.located(), &id).await;
        match found {
            Ok(Some((record, decided, tree))) => {
                let status = harness_records::review_status(&record, decided.as_ref());
                let last = record.attempts.last();
                let answer = last
                    .and_then(|a| a.result.as_ref())
                    .and_then(|r| r["response"].as_str());
                let reasons = last.map(|a| a.reasons.clone()).unwrap_or_default();
                let summary = match record.outcome.as_str() {
                    "passed" | "passed_with_debt" => {
                        format!("{} on attempt {}", record.outcome, record.attempts.len())
                    }
                    "running" => "running".to_owned(),
                    other => format!(
                        "{other}{}: {}",
                        record
                            .error_kind
                            .as_deref()
                            .map(|k| format!(" ({k})"))
                            .unwrap_or_default(),
                        if reasons.is_empty() {
                            record.error_message.clone().unwrap_or_default()
                        } else {
                            reasons.join("; ")
                        }
                    ),
                };
                structured(json!({
                    "id": record.id,
                    "outcome": record.outcome,
                    "kind": record.error_kind,
                    "verified": matches!(record.outcome.as_str(), "passed" | "passed_with_debt"),
                    "attempts": record.attempts.len(),
                    "answer": answer,
                    "reasons": reasons,
                    "parent_id": record.parent_id(),
                    "review": status,
                    "tree": tree.as_ref().map(harness_records::TreeNode::to_json),
                    "summary": summary,
                }))
            }
            Ok(None) => failed(
                &Error::config(format!(
                    "no run {id} in the journal {} (`review_list` lists the runs awaiting review)",
                    self.journal.display()
                )),
                None,
            ),
            Err(e) => error_result(e.kind().as_str(), e.message(), None),
        }
    }

    async fn review_list(&self, arguments: &JsonObject) -> CallToolResult {
        let limit = match only(arguments, &["limit"]).and_then(|()| match arguments.get("limit") {
            None | Some(Value::Null) => Ok(20),
            Some(v) => v
                .as_u64()
                .filter(|n| (1..=MAX_LISTED).contains(n))
                .ok_or_else(|| {
                    Error::config(format!(
                        "`limit` is {v}; give a whole number from 1 to {MAX_LISTED}"
                    ))
                }),
        }) {
            Ok(limit) => limit,
            Err(e) => return failed(&e, None),
        };
        if !self.journal.is_file() {
            return structured(json!({"pending": [], "summary": "no runs await review"}));
        }
        match settings::read_journal(&self.located(), |j| j.review_queue()).await {
            Ok(queue) => {
                let now = std::time::SystemTime::now();
                let pending: Vec<Value> = queue
                    .iter()
                    .take(usize::try_from(limit).unwrap_or(usize::MAX))
                    .map(|p| p.to_json(now))
                    .collect();
                let summary = match queue.len() {
                    0 => "no runs await review".to_owned(),
                    n => format!("{n} run(s) await review (harness review; harness override ID)"),
                };
                structured(json!({"pending": pending, "summary": summary}))
            }
            Err(e) => error_result(e.kind().as_str(), e.message(), None),
        }
    }

    fn located(&self) -> harness_records::Located {
        harness_records::locate_from(Some(&self.journal), None, Path::new("."))
    }
}

impl ServerHandler for Server {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("harness", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "harness runs a sub-task as a verified delegation: `delegate` returns the deliverable (`answer`) and its verdict (`verified`, `findings`, `evidence`). Build on an answer only when `verified` is true; report a failed delegation as failed.",
            )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(tools()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let arguments = request.arguments.unwrap_or_default();
        let result = match request.name.as_ref() {
            "delegate" => self.delegate(arguments, context).await,
            "run_status" => self.run_status(&arguments).await,
            "review_list" => self.review_list(&arguments).await,
            other => {
                return Err(ErrorData::invalid_params(
                    format!(
                        "unknown tool {other:?}; the tools are delegate, run_status, review_list"
                    ),
                    None,
                ));
            }
        };
        Ok(result.into())
    }
}

/// The tools, their arguments as JSON Schema.
fn tools() -> Vec<Tool> {
    let schema = |value: Value| match value {
        Value::Object(map) => Arc::new(map),
        _ => Arc::new(JsonObject::new()),
    };
    vec![
        Tool::new(
            "delegate",
            "Hand a sub-task to a verified delegation. It runs in this project, held to the checks, criteria and verifier you give (and the project's), retried with the reasons when it fails, and recorded. Give `task` (and optionally `profile`, one of the project's delegate profiles) or `file` (a delegation file of the project). Returns {id, outcome, verified, attempts, answer, findings, evidence, summary}: trust `answer` only when `verified` is true. With `wait: false` it returns {id} at once; then call run_status {id, wait_s} until the outcome is not `running`.",
            schema(json!({
                "type": "object",
                "properties": {
                    "task": {"type": "string", "description": "What the delegate should do"},
                    "profile": {"type": "string", "description": "A delegate profile of .harness/policy.yaml `delegates:` (default: `default`, or the only one)"},
                    "checks": {"type": "array", "items": {"type": "object"}, "description": "Commands that must exit 0: {\"name\": \"tests\", \"run\": \"cargo test\"}"},
                    "criteria": {"type": "array", "description": "Facts the workspace must show, e.g. \"file_exists:hello.txt\""},
                    "verify": {"type": "string", "description": "A Starlark verifier: def run(result): return {\"verified\": ..., \"reason\": ...}"},
                    "max_verify_retries": {"type": "integer", "minimum": 0},
                    "file": {"type": "string", "description": "A delegation file (YAML) of the project, instead of `task`"},
                    "workdir": {"type": "string", "description": "The workspace, relative to the project (default: the project root)"},
                    "wait": {"type": "boolean", "description": "false: return {id} at once and let the run go on; ask run_status {id, wait_s} for its outcome (for clients whose tool calls time out, e.g. Codex's 60 s)"}
                },
                "additionalProperties": false
            })),
        )
        .with_annotations(ToolAnnotations::new().read_only(false).destructive(false).open_world(true)),
        Tool::new(
            "run_status",
            "The outcome of a run: {id, outcome, verified, attempts, answer, reasons, review, tree, summary}; `outcome` is `running` while it runs. With `wait_s`, waits up to that many seconds for it to end first.",
            schema(json!({
                "type": "object",
                "properties": {
                    "id": {"type": "string", "description": "The run's id (d-…)"},
                    "wait_s": {"type": "integer", "minimum": 0, "maximum": MAX_WAIT_S, "description": "Seconds to wait for the run to end before answering (default 0); keep it under your client's tool timeout"}
                },
                "required": ["id"],
                "additionalProperties": false
            })),
        )
        .with_annotations(ToolAnnotations::new().read_only(true)),
        Tool::new(
            "review_list",
            "The runs awaiting a human's review (failed, or passed with debt, and not yet decided), oldest first.",
            schema(json!({
                "type": "object",
                "properties": {"limit": {"type": "integer", "minimum": 1, "maximum": MAX_LISTED}},
                "additionalProperties": false
            })),
        )
        .with_annotations(ToolAnnotations::new().read_only(true)),
    ]
}

/// Refuses an argument not in `known`.
fn only(arguments: &JsonObject, known: &[&str]) -> Result<(), Error> {
    match arguments.keys().find(|k| !known.contains(&k.as_str())) {
        Some(key) => Err(Error::config(format!(
            "unknown argument `{key}`; the arguments are {}",
            known.join(", ")
        ))),
        None => Ok(()),
    }
}

/// What a run's progress says to the client, for the events worth a line.
fn progress(record: &EventRecord, total: u32) -> Option<String> {
    let attempt = record.attempt + 1;
    match &record.event {
        RunEvent::AttemptStarted => Some(format!("attempt {attempt}/{total}")),
        RunEvent::VerificationCompleted { outcome, reasoning } => Some(if outcome == "pass" {
            format!("attempt {attempt}: verified")
        } else {
            format!(
                "attempt {attempt}: not verified: {}",
                reasoning.lines().next().unwrap_or_default()
            )
        }),
        RunEvent::ToolFinished {
            child: Some(child), ..
        } => Some(format!(
            "child {} {}",
            child["id"].as_str().unwrap_or("?"),
            child["outcome"].as_str().unwrap_or("?")
        )),
        _ => None,
    }
}

/// A run's result for the client: the deliverable, the verdict and a summary a model reads well.
fn outcome_json(report: &Report) -> Value {
    let verdict = report
        .attempts
        .iter()
        .rev()
        .find_map(|a| a.verdict.as_ref());
    let findings: Vec<&harness::Finding> = verdict
        .map(|v| v.findings.iter().filter(|f| f.blocking).collect())
        .unwrap_or_default();
    let evidence = verdict
        .map(|v| harness::shareable_evidence(&v.evidence))
        .unwrap_or_default();
    let attempts = report.attempts.len();
    let summary = match report.outcome {
        Outcome::Passed | Outcome::PassedWithDebt => {
            let proof: Vec<String> = evidence.iter().map(evidence_words).collect();
            format!(
                "{} on attempt {attempts}{}",
                report.outcome.as_str(),
                if proof.is_empty() {
                    String::new()
                } else {
                    format!("; evidence: {}", proof.join(", "))
                }
            )
        }
        Outcome::Skipped => "skipped: nothing verified it".to_owned(),
        Outcome::Failed(kind) => format!(
            "failed ({}) after {attempts} attempt{}: {}",
            kind.as_str(),
            if attempts == 1 { "" } else { "s" },
            findings
                .iter()
                .map(|f| f.to_string())
                .collect::<Vec<_>>()
                .join("; ")
        ),
        Outcome::Error(kind) => format!(
            "error[{}]: {}",
            kind.as_str(),
            report.error.as_ref().map_or("", Error::message)
        ),
    };
    json!({
        "id": report.id,
        "outcome": report.outcome.as_str(),
        "kind": report.outcome.kind().map(ErrorKind::as_str),
        "verified": report.verified(),
        "attempts": attempts,
        "answer": report.result().map(|r| r.response.as_str()),
        "findings": findings,
        "evidence": evidence,
        "children": report.children(),
        "summary": summary,
    })
}

/// One piece of evidence in a few words: `tests exit 0`, `hello.txt 3 bytes`.
fn evidence_words(evidence: &harness::Evidence) -> String {
    match (
        evidence.method.as_deref(),
        evidence.exit_code,
        evidence.subject_bytes,
    ) {
        (Some("file_exists"), _, Some(bytes)) => format!(
            "{} {bytes} bytes",
            evidence.target.as_deref().unwrap_or(&evidence.criterion)
        ),
        (_, Some(code), _) => format!("{} exit {code}", evidence.criterion),
        _ => format!("{} {}", evidence.criterion, evidence.result.as_str()),
    }
}

/// A result as structured content, and as text: its summary, then the object as JSON (the
/// MCP specification asks a structured result to carry its JSON as text too). Claude Code and
/// Codex show a model the structured content; Gemini CLI shows it only the text, so without the
/// JSON there its model would read the summary and never the answer, findings or evidence.
fn structured(object: Value) -> CallToolResult {
    let text = object["summary"].as_str().unwrap_or_default().to_owned();
    as_text(CallToolResult::structured(object), text)
}

/// `result`'s text: `summary`, then its structured content as JSON.
fn as_text(mut result: CallToolResult, summary: String) -> CallToolResult {
    let json = result
        .structured_content
        .as_ref()
        .map(Value::to_string)
        .unwrap_or_default();
    result.content = vec![ContentBlock::text(summary), ContentBlock::text(json)];
    result
}

/// A tool error of `error`'s typed kind, with the run's object when it ran.
fn failed(error: &Error, run: Option<Value>) -> CallToolResult {
    error_result(error.kind().as_str(), error.message(), run)
}

/// A tool error: `error[kind]: message`, and the run's object when it ran.
fn error_result(kind: &str, message: &str, run: Option<Value>) -> CallToolResult {
    let text = format!("error[{kind}]: {message}");
    let mut object = run.unwrap_or_else(|| json!({}));
    object["error"] = json!({"kind": kind, "message": message});
    object["summary"] = json!(text);
    as_text(CallToolResult::structured_error(object), text)
}
