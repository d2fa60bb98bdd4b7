//! The Ralph loop (DESIGN §4.5): run the delegate, verify what it claims, and on failure send the
//! SAME delegate the fixed retry prompt with the reasons, until it passes or the budget is spent.

use std::sync::Arc;

use harness_builtins::{
    Capabilities, Engine, HostAllowList, Limits, Sandbox, Script, Surface, Workspace, Workspaces,
};
use harness_hooks::Event as HookEvent;
use tracing::Instrument;
use tracing::field::Empty;

use crate::cache::Cache;
use crate::conversation::{Message, ToolSpec, Usage};
use crate::delegate::{CommandDelegate, Delegate, OpenAiDelegate, ScriptedDelegate, TurnRequest};
use crate::error::{Error, ErrorKind, Result};
use crate::pipeline::{Pipeline, Verdict};
use crate::policy::Policy;
use crate::prompt::{RETRY_TEMPLATE_VERSION, retry_prompt};
use crate::report::{AttemptRecord, Outcome, Report};
use crate::result::{DelegationResult, ToolCall, ToolResult};
use crate::spec::{DelegateConfig, Delegation};
use crate::telemetry::{self, attr};
use crate::tools::{ToolOutput, Toolbox};
use crate::verifier::Verifier;

/// What happened during a delegation, for progress displays. Delivered in order, synchronously.
#[derive(Debug)]
pub enum Event<'a> {
    /// The delegation began; `span` is its `delegation.execute` span (the binary reads the trace
    /// id from it).
    Started {
        /// The delegation id.
        id: &'a str,
        /// The delegation's span.
        span: &'a tracing::Span,
    },
    /// An attempt began.
    AttemptStarted {
        /// Attempt index, from 0.
        attempt: u32,
    },
    /// A tool call finished.
    ToolCalled {
        /// Attempt index.
        attempt: u32,
        /// The call.
        call: &'a ToolCall,
        /// Whether it failed or was refused.
        is_error: bool,
    },
    /// The delegate gave its final answer for the attempt.
    Responded {
        /// Attempt index.
        attempt: u32,
        /// The answer, as the delegate gave it.
        response: &'a str,
        /// True when `delegation.post` hooks will see (and may redact) the answer before the
        /// caller gets it: a progress display should not echo it.
        redacted_later: bool,
    },
    /// The attempt was judged.
    Judged {
        /// Attempt index.
        attempt: u32,
        /// The verdict.
        verdict: &'a Verdict,
    },
    /// The retry prompt is being sent.
    Retrying {
        /// The attempt that will follow, from 0.
        next_attempt: u32,
        /// The prompt text.
        prompt: &'a str,
    },
}

/// Receives [`Event`]s; any `Fn(&Event)` is an observer.
pub trait Observer: Sync {
    /// Called once per event.
    fn on_event(&self, event: &Event<'_>);
}

impl<F: Fn(&Event<'_>) + Sync> Observer for F {
    fn on_event(&self, event: &Event<'_>) {
        self(event);
    }
}

/// Capabilities for verifiers beyond reading the workspace and the file's `network.allow`.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    /// Extra hosts verifiers may reach.
    pub allow_hosts: Vec<String>,
    /// Programs verifiers may run with `exec.run`.
    pub allow_exec: Vec<String>,
    /// Environment variables verifiers may read with `env.get`.
    pub allow_env: Vec<String>,
    /// Hook files and directories added to the delegation's own (`--hooks`).
    pub hooks: Vec<std::path::PathBuf>,
}

/// Runs delegations. Holds what is shared between them: the Starlark globals and the HTTP
/// connection pool.
#[derive(Debug, Clone)]
pub struct Runtime {
    engine: Arc<Engine>,
    hook_engine: Arc<Engine>,
    http: reqwest::Client,
    hooks: Arc<Cache<Policy>>,
    verifiers: Arc<Cache<Verifier>>,
    scripts: Arc<Cache<(Arc<Script>, Arc<Sandbox>)>>,
    workspaces: Arc<Workspaces>,
}

struct Prepared {
    delegation: Delegation,
    delegate: Box<dyn Delegate>,
    toolbox: Toolbox,
    tool_specs: Vec<ToolSpec>,
    pipeline: Pipeline,
    policy: Option<Policy>,
    /// The delegate's kind and model, matched by hooks' `delegates:` globs.
    names: Vec<String>,
}

/// The hook paths of a delegation: its `hooks:` list, or `.harness/hooks` in the workspace when
/// it has none and that directory exists; then `--hooks`.
fn hook_paths(
    delegation: &Delegation,
    workspace: &Workspace,
    extra: &[std::path::PathBuf],
) -> Vec<std::path::PathBuf> {
    let mut paths = match &delegation.hooks {
        Some(listed) => listed.clone(),
        None => {
            let default = workspace.root().join(".harness").join("hooks");
            if default.is_dir() {
                vec![default]
            } else {
                Vec::new()
            }
        }
    };
    paths.extend(extra.iter().cloned());
    paths
}

/// The request as `delegation.pre` hooks see it.
fn request_payload(id: &str, delegation: &Delegation, model: Option<&str>) -> serde_json::Value {
    serde_json::json!({
        "id": id,
        "task": delegation.task,
        "delegate": {"kind": delegation.delegate.kind(), "model": model},
        "tools": delegation.tools,
        "args": delegation.args,
        "max_verify_retries": delegation.max_verify_retries,
    })
}

/// Returns a fresh delegation id, `d-` and 16 hex digits.
fn new_id() -> String {
    format!("d-{:016x}", fastrand::u64(..))
}

impl Runtime {
    /// Creates a runtime.
    ///
    /// # Errors
    /// [`ErrorKind::Config`] when the HTTP client cannot be built.
    pub fn new() -> Result<Self> {
        let http = harness_builtins::http_client_builder()
            .build()
            .map_err(|e| Error::config(format!("cannot build the HTTP client: {e}")))?;
        Ok(Runtime {
            engine: Arc::new(Engine::new()),
            hook_engine: Arc::new(harness_hooks::engine()),
            http,
            hooks: Arc::new(Cache::new()),
            verifiers: Arc::new(Cache::new()),
            scripts: Arc::new(Cache::new()),
            workspaces: Arc::new(Workspaces::new()),
        })
    }

    /// Runs one delegation to its outcome. Never panics on bad input: every failure is in the
    /// report.
    pub async fn run(
        &self,
        delegation: &Delegation,
        options: &RunOptions,
        observer: &dyn Observer,
    ) -> Report {
        let id = new_id();
        let kind = delegation.delegate.kind();
        let span = tracing::info_span!(
            telemetry::SPAN_DELEGATION,
            { attr::DELEGATION_ID } = id.as_str(),
            { attr::DELEGATION_KIND } = kind,
            { attr::RETRY_TEMPLATE_VERSION } = RETRY_TEMPLATE_VERSION,
            { attr::VERIFY_ATTEMPTS } = Empty,
            { attr::VERIFY_PASSED } = Empty,
            { attr::VERIFY_OUTCOME } = Empty,
            { attr::OUTCOME } = Empty,
            { attr::ERROR_TYPE } = Empty,
            otel.status_code = Empty,
        );
        let mut report = Report {
            id,
            outcome: Outcome::Skipped,
            delegate_kind: kind.to_owned(),
            model: None,
            attempts: Vec::new(),
            error: None,
            delivered: None,
            started_at: std::time::SystemTime::now(),
            duration: std::time::Duration::ZERO,
        };
        let clock = std::time::Instant::now();
        observer.on_event(&Event::Started {
            id: &report.id,
            span: &span,
        });
        // Boxed here and at the other seams below: async state machines nest by value, so
        // without a box the delegation's future is tens of kilobytes, copied by every move (into
        // `instrument`, into `timeout`, into the spawned task) and held per running delegation.
        let ended = Box::pin(self.execute(delegation, options, observer, &mut report))
            .instrument(span.clone())
            .await;
        report.outcome = match ended {
            Ok(outcome) => outcome,
            Err(e) => {
                let outcome = if e.kind() == ErrorKind::VerificationFailed {
                    Outcome::Failed
                } else {
                    Outcome::Error(e.kind())
                };
                report.error = Some(e);
                outcome
            }
        };
        report.duration = clock.elapsed();
        telemetry::record_delegation(
            kind,
            report.outcome.as_str(),
            report.attempts.len() as u64,
            report.usage(),
        );
        // As i64: OTLP integers are signed, and a count is always one.
        span.record(
            attr::VERIFY_ATTEMPTS,
            i64::try_from(report.attempts.len()).unwrap_or(i64::MAX),
        );
        span.record(attr::VERIFY_PASSED, report.verified());
        span.record(attr::VERIFY_OUTCOME, report.outcome.verify_outcome());
        span.record(attr::OUTCOME, report.outcome.as_str());
        if let Some(error) = &report.error {
            span.record(attr::ERROR_TYPE, error.kind().as_str());
            span.record("otel.status_code", "ERROR");
        }
        report
    }

    async fn execute(
        &self,
        delegation: &Delegation,
        options: &RunOptions,
        observer: &dyn Observer,
        report: &mut Report,
    ) -> Result<Outcome> {
        let mut prepared = Box::pin(self.prepare(delegation, options, &report.id)).await?;
        report.model = prepared.delegate.model().map(str::to_owned);
        let work = Box::pin(self.attempts(&mut prepared, observer, report));
        match delegation.timeout {
            None => work.await,
            Some(limit) => tokio::time::timeout(limit, work).await.unwrap_or_else(|_| {
                Err(Error::new(
                    ErrorKind::Timeout,
                    format!(
                        "{}: the delegation ran longer than limits.timeout_s = {}s and was stopped",
                        delegation.source.display(),
                        limit.as_secs_f64()
                    ),
                ))
            }),
        }
    }

    async fn prepare(
        &self,
        delegation: &Delegation,
        options: &RunOptions,
        id: &str,
    ) -> Result<Prepared> {
        let file = delegation.source.display().to_string();
        let workspace = self
            .workspaces
            .open(&delegation.workdir)
            .map_err(|e| Error::config(format!("{file}: workdir: {e}")))?;
        let hosts = HostAllowList::new(delegation.allow_hosts.iter().chain(&options.allow_hosts))
            .map_err(|e| Error::config(format!("{file}: network.allow: {e}")))?;
        let checking = Capabilities {
            hosts,
            programs: options.allow_exec.clone(),
            env: options.allow_env.clone(),
            ..Capabilities::read_only()
        };
        let model = match &delegation.delegate {
            DelegateConfig::OpenAi(spec) => Some(spec.model.clone()),
            _ => None,
        };
        // Everything besides name, source and args that shapes a compiled script.
        let shape = format!(
            "{}\n{:?}\n{:?}\n{:?}\n{:?}",
            workspace.root().display(),
            delegation.allow_hosts,
            options.allow_hosts,
            options.allow_exec,
            options.allow_env
        );
        let mut names = vec![delegation.delegate.kind().to_owned()];
        names.extend(model.clone());

        // Hooks load first: delegation.pre may change what the rest is built from.
        let paths = hook_paths(delegation, &workspace, &options.hooks);
        let policy = if paths.is_empty() {
            None
        } else {
            let sandbox = Arc::new(Sandbox::new(
                Surface::Hook,
                workspace.clone(),
                checking.clone(),
                Limits::default(),
            ));
            let engine = Arc::clone(&self.hook_engine);
            let key = format!("{shape}\n{paths:?}");
            let policy = self
                .hooks
                .get_or_compile(key, move || Policy::load(&engine, sandbox, &paths))
                .await?;
            Some(policy)
        };
        let mut delegation = delegation.clone();
        // Only build the request payload when some delegation.pre hook will read it.
        if let Some(policy) = policy
            .as_ref()
            .filter(|p| p.applies(HookEvent::DelegationPre, &names))
        {
            let dispatch = policy
                .dispatch(
                    HookEvent::DelegationPre,
                    request_payload(id, &delegation, model.as_deref()),
                    &names,
                )
                .await?;
            if let Some(block) = dispatch.blocked {
                return Err(Error::new(
                    ErrorKind::Blocked,
                    format!(
                        "blocked by hook {} (delegation.pre): {}",
                        block.hook, block.reason
                    ),
                ));
            }
            let modifier = dispatch
                .runs
                .iter()
                .rev()
                .find(|r| r.action == "modify")
                .map(|r| r.hook.clone());
            apply_request_patch(&mut delegation, dispatch.payload, id, model.as_deref()).map_err(
                |e| {
                    Error::new(
                        e.kind(),
                        format!(
                            "hook {}: {}",
                            modifier.as_deref().unwrap_or("?"),
                            e.message()
                        ),
                    )
                },
            )?;
        }

        let verifier = match &delegation.verify {
            None => None,
            Some(verify) => {
                let sandbox = Arc::new(Sandbox::new(
                    Surface::Verifier,
                    workspace.clone(),
                    checking,
                    Limits::default(),
                ));
                let engine = Arc::clone(&self.engine);
                let (name, source, args) = (
                    verify.name.clone(),
                    verify.source.clone(),
                    delegation.args.clone(),
                );
                let key = format!("{shape}\n{name}\n{args}\n{source}");
                Some(
                    self.verifiers
                        .get_or_compile(key, move || {
                            Verifier::compile(&engine, sandbox, &name, &source, &args)
                        })
                        .await?,
                )
            }
        };
        let delegate: Box<dyn Delegate> = match &delegation.delegate {
            DelegateConfig::Scripted { path, source } => {
                let sandbox = Arc::new(Sandbox::new(
                    Surface::Delegate,
                    workspace.clone(),
                    Capabilities::default(),
                    Limits::default(),
                ));
                let engine = Arc::clone(&self.engine);
                let (name, source) = (path.display().to_string(), source.clone());
                let key = format!("{}\n{name}\n{source}", workspace.root().display());
                let (script, sandbox) = self
                    .scripts
                    .get_or_compile(key, move || {
                        let script = Script::compile(&engine, &sandbox, &name, &source, &[])
                            .map_err(|e| {
                                Error::config(format!(
                                    "delegate script {e} [{}]",
                                    e.kind().as_str()
                                ))
                            })?;
                        Ok((Arc::new(script), sandbox))
                    })
                    .await?;
                Box::new(ScriptedDelegate::new(script, sandbox)?)
            }
            DelegateConfig::OpenAi(spec) => {
                Box::new(OpenAiDelegate::new(spec.clone(), self.http.clone()))
            }
            DelegateConfig::Command(spec) => {
                let mut spec = spec.clone();
                spec.workdir = workspace.root().to_path_buf();
                Box::new(CommandDelegate::new(spec))
            }
        };
        let toolbox = Toolbox::new(workspace, &delegation.tools)?;
        Ok(Prepared {
            tool_specs: toolbox.specs(),
            toolbox,
            pipeline: Pipeline::new(verifier, policy.clone(), names.clone()),
            policy,
            names,
            delegate,
            delegation,
        })
    }

    async fn attempts(
        &self,
        prepared: &mut Prepared,
        observer: &dyn Observer,
        report: &mut Report,
    ) -> Result<Outcome> {
        let delegation = prepared.delegation.clone();
        let delegation = &delegation;
        let mut messages = vec![Message::User(delegation.task.clone())];
        let mut calls_made = 0u32;
        let total = delegation.max_verify_retries.saturating_add(1);
        for attempt in 0..total {
            observer.on_event(&Event::AttemptStarted { attempt });
            let span = tracing::info_span!(
                telemetry::SPAN_ATTEMPT,
                attempt = i64::from(attempt),
                verify.passed = Empty,
                verify.reasons = Empty,
            );
            report.attempts.push(AttemptRecord {
                attempt,
                result: None,
                passed: None,
                reasons: Vec::new(),
                usage: Usage::default(),
                duration: std::time::Duration::ZERO,
            });
            let clock = std::time::Instant::now();
            let record = report.attempts.last_mut().expect("pushed above");
            let produced = Box::pin(self.attempt(
                delegation,
                prepared,
                &mut messages,
                &mut calls_made,
                attempt,
                &report.id,
                observer,
                &mut record.usage,
            ))
            .instrument(span.clone())
            .await;
            record.duration = clock.elapsed();
            let mut result = produced?;
            observer.on_event(&Event::Responded {
                attempt,
                response: &result.response,
                redacted_later: prepared
                    .policy
                    .as_ref()
                    .is_some_and(|p| p.applies(HookEvent::DelegationPost, &prepared.names)),
            });
            let verdict = prepared
                .pipeline
                .check(&mut result)
                .instrument(span.clone())
                .await;
            record.result = Some(result);
            record.duration = clock.elapsed();
            let Some(verdict) = verdict? else {
                Box::pin(self.deliver(prepared, report)).await?;
                return Ok(Outcome::Skipped);
            };
            span.record("verify.passed", verdict.passed);
            record.passed = Some(verdict.passed);
            record.reasons.clone_from(&verdict.reasons);
            observer.on_event(&Event::Judged {
                attempt,
                verdict: &verdict,
            });
            if verdict.passed {
                Box::pin(self.deliver(prepared, report)).await?;
                return Ok(Outcome::Passed);
            }
            span.record("verify.reasons", verdict.reasons.join("\n").as_str());
            if attempt + 1 < total {
                let prompt = retry_prompt(attempt, &verdict.reasons);
                span.in_scope(|| {
                    tracing::info!(template.version = RETRY_TEMPLATE_VERSION, "retry prompt sent");
                    tracing::debug!(template.version = RETRY_TEMPLATE_VERSION, prompt = %prompt, "retry prompt text");
                });
                observer.on_event(&Event::Retrying {
                    next_attempt: attempt + 1,
                    prompt: &prompt,
                });
                messages.push(Message::User(prompt));
            }
        }
        let mut message = format!("verification failed on all {total} attempts");
        for record in &report.attempts {
            message.push_str(&format!("\nattempt {}:", record.attempt + 1));
            for reason in &record.reasons {
                message.push_str(&format!("\n  {reason}"));
            }
        }
        Err(Error::new(ErrorKind::VerificationFailed, message))
    }

    /// Runs the delegate's turns of one attempt until it answers without tool calls.
    #[allow(clippy::too_many_arguments)]
    async fn attempt(
        &self,
        delegation: &Delegation,
        prepared: &mut Prepared,
        messages: &mut Vec<Message>,
        calls_made: &mut u32,
        attempt: u32,
        id: &str,
        observer: &dyn Observer,
        usage: &mut Usage,
    ) -> Result<DelegationResult> {
        let mut tool_calls = Vec::new();
        let mut tool_results = Vec::new();
        for turn in 0..delegation.max_turns {
            let request = TurnRequest {
                messages,
                attempt,
                turn,
                tools: &prepared.tool_specs,
            };
            let answer = if prepared.delegate.kind() == "openai" {
                // The OpenAI delegate records its own gen_ai span per model call.
                prepared.delegate.turn(request).await?
            } else {
                let span = tracing::info_span!(
                    telemetry::SPAN_MODEL_CALL,
                    gen_ai.operation.name = "chat",
                    gen_ai.provider.name = prepared.delegate.kind(),
                    gen_ai.response.finish_reasons = Empty,
                    error.type = Empty,
                );
                let answer = prepared
                    .delegate
                    .turn(request)
                    .instrument(span.clone())
                    .await;
                match &answer {
                    Ok(turn) => {
                        if let Some(reason) = &turn.finish_reason {
                            span.record("gen_ai.response.finish_reasons", reason.as_str());
                        }
                    }
                    Err(e) => {
                        span.record("error.type", e.kind().as_str());
                    }
                }
                answer?
            };
            usage.add(answer.usage);
            if answer.tool_calls.is_empty() {
                let response = answer.content.unwrap_or_default();
                messages.push(Message::Assistant {
                    content: Some(response.clone()),
                    tool_calls: Vec::new(),
                });
                return Ok(DelegationResult {
                    id: id.to_owned(),
                    parent_id: None,
                    attempt,
                    response,
                    tool_calls,
                    tool_results,
                });
            }
            let calls: Vec<ToolCall> = answer
                .tool_calls
                .into_iter()
                .map(|c| {
                    *calls_made += 1;
                    ToolCall {
                        id: c.id.unwrap_or_else(|| format!("call_{calls_made}")),
                        name: c.name,
                        arguments: c.arguments,
                    }
                })
                .collect();
            messages.push(Message::Assistant {
                content: answer.content,
                tool_calls: calls.clone(),
            });
            for call in calls {
                let (call, output) = Box::pin(self.call_tool(prepared, call)).await?;
                observer.on_event(&Event::ToolCalled {
                    attempt,
                    call: &call,
                    is_error: output.is_error,
                });
                messages.push(Message::Tool {
                    call_id: call.id.clone(),
                    name: call.name.clone(),
                    content: output.content.clone(),
                });
                tool_results.push(ToolResult {
                    call_id: call.id.clone(),
                    name: call.name.clone(),
                    content: output.content,
                    is_error: output.is_error,
                });
                tool_calls.push(call);
            }
        }
        Err(Error::new(
            ErrorKind::Timeout,
            format!(
                "the delegate used all {} turns of attempt {} without a final answer (limits.max_turns)",
                delegation.max_turns,
                attempt + 1
            ),
        ))
    }

    /// Runs `delegation.post` hooks on the verified result; a modify changes what the caller
    /// gets, never what the verifiers saw.
    async fn deliver(&self, prepared: &Prepared, report: &mut Report) -> Result<()> {
        let Some(policy) = &prepared.policy else {
            return Ok(());
        };
        let Some(result) = report.result() else {
            return Ok(());
        };
        let dispatch = policy
            .dispatch(
                HookEvent::DelegationPost,
                result.to_value(),
                &prepared.names,
            )
            .await?;
        if let Some(block) = dispatch.blocked {
            return Err(Error::new(
                ErrorKind::Blocked,
                format!(
                    "blocked by hook {} (delegation.post): {}",
                    block.hook, block.reason
                ),
            ));
        }
        if dispatch.runs.iter().any(|r| r.action == "modify") {
            let delivered = serde_json::from_value(dispatch.payload).map_err(|e| {
                Error::new(
                    ErrorKind::Hook,
                    format!("a delegation.post modify produced an invalid Result: {e}"),
                )
            })?;
            report.delivered = Some(delivered);
        }
        Ok(())
    }

    /// Runs one tool call through `tool.pre`, the tool, and `tool.post`. Returns the call as it
    /// was actually made (after any modify) and what the delegate reads.
    async fn call_tool(
        &self,
        prepared: &Prepared,
        call: ToolCall,
    ) -> Result<(ToolCall, ToolOutput)> {
        let span = tracing::info_span!(
            telemetry::SPAN_TOOL,
            gen_ai.operation.name = "execute_tool",
            gen_ai.tool.name = call.name.as_str(),
            gen_ai.tool.call.id = call.id.as_str(),
            tool.is_error = Empty,
        );
        let work = async {
            let Some(policy) = &prepared.policy else {
                return Ok((
                    call.clone(),
                    prepared.toolbox.call(&call.name, &call.arguments).await,
                ));
            };
            let names = vec![call.name.clone()];
            let payload =
                serde_json::json!({"id": call.id, "name": call.name, "arguments": call.arguments});
            let pre = policy.dispatch(HookEvent::ToolPre, payload, &names).await?;
            if let Some(block) = pre.blocked {
                return Ok((
                    call.clone(),
                    ToolOutput::error(format!("blocked by hook {}: {}", block.hook, block.reason)),
                ));
            }
            let call: ToolCall = serde_json::from_value(pre.payload).map_err(|e| {
                Error::new(
                    ErrorKind::Hook,
                    format!("a tool.pre modify produced an invalid call: {e}"),
                )
            })?;
            let output = prepared.toolbox.call(&call.name, &call.arguments).await;
            let payload = serde_json::json!({
                "call_id": call.id, "name": call.name, "content": output.content, "is_error": output.is_error,
            });
            let post = policy
                .dispatch(HookEvent::ToolPost, payload, &names)
                .await?;
            if let Some(block) = post.blocked {
                return Ok((
                    call,
                    ToolOutput::error(format!(
                        "result blocked by hook {}: {}",
                        block.hook, block.reason
                    )),
                ));
            }
            let result: crate::result::ToolResult =
                serde_json::from_value(post.payload).map_err(|e| {
                    Error::new(
                        ErrorKind::Hook,
                        format!("a tool.post modify produced an invalid result: {e}"),
                    )
                })?;
            let output = if result.is_error {
                ToolOutput::error(result.content)
            } else {
                ToolOutput::ok(result.content)
            };
            Ok((call, output))
        };
        let (call, output) = work.instrument(span.clone()).await?;
        span.record("tool.is_error", output.is_error);
        Ok((call, output))
    }
}

/// Applies a `delegation.pre` modify: hooks may change the task, tools, args and retry budget.
fn apply_request_patch(
    delegation: &mut Delegation,
    payload: serde_json::Value,
    id: &str,
    model: Option<&str>,
) -> Result<()> {
    let before = request_payload(id, delegation, model);
    if payload == before {
        return Ok(());
    }
    let bad = |what: String| Error::new(ErrorKind::Hook, format!("a delegation.pre modify {what}"));
    if payload["id"] != before["id"] || payload["delegate"] != before["delegate"] {
        return Err(bad(
            "may change task, tools, args and max_verify_retries, not id or delegate".to_owned(),
        ));
    }
    delegation.task = payload["task"].as_str().unwrap_or_default().to_owned();
    delegation.tools = serde_json::from_value(payload["tools"].clone()).map_err(|e| {
        bad(format!(
            "set tools to something that is not a list of names: {e}"
        ))
    })?;
    delegation.args = payload["args"].clone();
    delegation.max_verify_retries = payload["max_verify_retries"]
        .as_u64()
        .and_then(|n| u32::try_from(n).ok())
        .ok_or_else(|| bad("set max_verify_retries out of range".to_owned()))?;
    Ok(())
}
