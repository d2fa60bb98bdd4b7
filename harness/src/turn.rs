//! One attempt's turns: the delegate answers, its tool calls run through `tool.pre`, the tool and
//! `tool.post`, and the results go back to it, until it answers without tool calls.

use harness_hooks::Event as HookEvent;
use tracing::Instrument;
use tracing::field::Empty;

use crate::conversation::{Message, Usage};
use crate::delegate::TurnRequest;
use crate::error::{Error, ErrorKind, Result};
use crate::events::{Emitter, RunEvent};
use crate::session::Session;
use crate::telemetry;
use crate::tools::ToolOutput;

/// Tool calls one turn may ask for; more is the delegate's error, named as this cap.
pub const MAX_TOOL_CALLS_PER_TURN: usize = 64;
use harness_hooks::{DelegationResult, ToolCall, ToolResult};

/// Runs the delegate's turns of one attempt until it answers without tool calls; returns the
/// attempt's Result. Tokens are added to `usage` as they are spent, so an attempt that fails
/// still accounts for them.
///
/// # Errors
/// [`ErrorKind::Delegate`] when the delegate fails, [`ErrorKind::Timeout`] when it runs out of
/// turns, [`ErrorKind::Hook`] when a tool hook is broken.
pub(crate) async fn attempt(
    session: &mut Session,
    attempt: u32,
    events: &Emitter<'_>,
    usage: &mut Usage,
) -> Result<DelegationResult> {
    let mut tool_calls = Vec::new();
    let mut tool_results = Vec::new();
    let max_turns = session.delegation.max_turns();
    for turn in 0..max_turns {
        // A tree whose tokens are spent starts no more turns, in any of its members.
        if let Some(why) = session.family.tree_exhausted() {
            return Err(Error::new(
                ErrorKind::Budget,
                format!(
                    "{why}; stopped before turn {} of attempt {}",
                    turn + 1,
                    attempt + 1
                ),
            ));
        }
        // Nothing may change the workspace before its baseline is recorded: a remote model's
        // request goes out meanwhile; anything that can act by itself waits.
        if !session.delegation.delegate().is_remote_model() {
            session.pipeline.baseline_ready().await?;
        }
        let mut answer = Box::pin(model_call(session, events.run_id(), attempt, turn)).await?;
        usage.add(answer.usage);
        session
            .family
            .spend(answer.usage.input_tokens + answer.usage.output_tokens);
        if let Some(id) = session.delegate.session()
            && session.delegate_session.as_deref() != Some(id)
        {
            events.emit(RunEvent::DelegateSession {
                session_id: id.to_owned(),
            });
            session.delegate_session = Some(id.to_owned());
        }
        let observed = std::mem::take(&mut answer.observed);
        if !observed.is_empty() {
            record_observed(
                session,
                observed,
                events,
                &mut tool_calls,
                &mut tool_results,
            )
            .await?;
        }
        if answer.tool_calls.is_empty() {
            let response = answer.content.unwrap_or_default();
            session.messages.push(Message::Assistant {
                content: Some(response.clone()),
                tool_calls: Vec::new(),
            });
            return Ok(DelegationResult {
                id: events.run_id().to_owned(),
                parent_id: session.delegation.parent_id().map(str::to_owned),
                attempt,
                response,
                tool_calls,
                tool_results,
                changes: None,
                evidence: Vec::new(),
            });
        }
        if answer.tool_calls.len() > MAX_TOOL_CALLS_PER_TURN {
            return Err(Error::new(
                ErrorKind::Delegate,
                format!(
                    "the delegate asked for {} tool calls in one turn of attempt {}; the cap is {MAX_TOOL_CALLS_PER_TURN} tool calls per turn",
                    answer.tool_calls.len(),
                    attempt + 1
                ),
            ));
        }
        let calls = named(session, answer.tool_calls);
        session.messages.push(Message::Assistant {
            content: answer.content,
            tool_calls: calls.clone(),
        });
        if !calls.is_empty() {
            session.pipeline.baseline_ready().await?;
        }
        run_calls(session, calls, events, (&mut tool_calls, &mut tool_results)).await?;
    }
    Err(Error::new(
        ErrorKind::Timeout,
        format!(
            "the delegate used all {max_turns} turns of attempt {} without a final answer (limits.max_turns)",
            attempt + 1
        ),
    ))
}

/// The calls a turn asked for, each with an id (`call_N` for those the delegate did not name).
fn named(session: &mut Session, requested: Vec<crate::delegate::RequestedCall>) -> Vec<ToolCall> {
    requested
        .into_iter()
        .map(|c| {
            session.calls_made += 1;
            ToolCall {
                id: c
                    .id
                    .unwrap_or_else(|| format!("call_{}", session.calls_made)),
                name: c.name,
                arguments: c.arguments,
            }
        })
        .collect()
}

/// Runs a turn's calls: consecutive `delegate` calls at once (up to `limits.max_children`),
/// every other call alone, in order; each result verified and logged in `log`.
async fn run_calls(
    session: &mut Session,
    calls: Vec<ToolCall>,
    events: &Emitter<'_>,
    log: (&mut Vec<ToolCall>, &mut Vec<ToolResult>),
) -> Result<()> {
    let (tool_calls, tool_results) = log;
    let mut calls = calls.into_iter().peekable();
    while let Some(call) = calls.next() {
        let mut group = vec![call];
        if is_delegate(&group[0]) {
            while let Some(next) = calls.next_if(is_delegate) {
                group.push(next);
            }
        }
        for call in &group {
            events.emit(RunEvent::ToolCalled {
                call_id: call.id.clone(),
                name: call.name.clone(),
                observed: false,
            });
        }
        if is_delegate(&group[0]) {
            // What the parent's budget has left is shared among the calls of this turn.
            session.family.expect_calls(group.len());
        }
        let made = {
            let session = &*session;
            let run = events.run_id();
            futures_util::future::join_all(
                group
                    .into_iter()
                    .map(|call| Box::pin(call_tool(Calls::of(session), run, call))),
            )
            .await
        };
        for made in made {
            let (call, output) = made?;
            let output = verify_tool(session, &call, output, events).await?;
            returned(
                session,
                call,
                output,
                events,
                (&mut *tool_calls, &mut *tool_results),
            );
        }
    }
    Ok(())
}

/// Records the tools an agent CLI ran itself during the turn: in the conversation, the attempt's
/// `tool_calls` and `tool_results`, the events and the progress, each judged by its tool's
/// verifier (which can only report what already happened).
///
/// # Errors
/// [`ErrorKind::Verifier`] when a tool's verifier is broken.
async fn record_observed(
    session: &mut Session,
    observed: Vec<crate::delegate::ObservedCall>,
    events: &Emitter<'_>,
    tool_calls: &mut Vec<ToolCall>,
    tool_results: &mut Vec<ToolResult>,
) -> Result<()> {
    let calls: Vec<ToolCall> = observed
        .iter()
        .map(|o| ToolCall {
            id: o.id.clone(),
            name: o.name.clone(),
            arguments: o.arguments.clone(),
        })
        .collect();
    session.calls_made += u32::try_from(calls.len()).unwrap_or(u32::MAX);
    session.messages.push(Message::Assistant {
        content: None,
        tool_calls: calls.clone(),
    });
    for (call, seen) in calls.into_iter().zip(observed) {
        events.emit(RunEvent::ToolCalled {
            call_id: call.id.clone(),
            name: call.name.clone(),
            observed: true,
        });
        let output = ToolOutput {
            content: seen.content,
            is_error: seen.is_error,
        };
        let output = verify_tool(session, &call, output, events).await?;
        let log = (&mut *tool_calls, &mut *tool_results);
        returned(session, call, output, events, log);
    }
    Ok(())
}

/// Records a call as it returned: the event, the progress, the conversation, the attempt's
/// `tool_calls` and `tool_results`.
fn returned(
    session: &mut Session,
    call: ToolCall,
    output: ToolOutput,
    events: &Emitter<'_>,
    (tool_calls, tool_results): (&mut Vec<ToolCall>, &mut Vec<ToolResult>),
) {
    events.emit(RunEvent::ToolReturned {
        call_id: call.id.clone(),
        name: call.name.clone(),
        is_error: output.is_error,
    });
    events.progress(|| RunEvent::ToolFinished {
        call: call.clone(),
        is_error: output.is_error,
        error: output.is_error.then(|| output.content.clone()),
        child: (is_delegate(&call) && !output.is_error)
            .then(|| serde_json::from_str::<serde_json::Value>(&output.content).ok())
            .flatten()
            .map(|child| {
                serde_json::json!({"id": child["id"], "outcome": child["outcome"],
                    "verified": child["verified"], "attempts": child["attempts"]})
            }),
    });
    session.messages.push(Message::Tool {
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

/// Asks the delegate for its next message, as one `chat` span whatever the delegate's kind.
async fn model_call(
    session: &mut Session,
    run_id: &str,
    attempt: u32,
    turn: u32,
) -> Result<crate::delegate::Turn> {
    let kind = session.delegate.kind();
    let model = session.delegate.model().map(str::to_owned);
    let name = match &model {
        Some(model) => format!("{} {model}", telemetry::SPAN_MODEL_CALL),
        None => telemetry::SPAN_MODEL_CALL.to_owned(),
    };
    let span = tracing::info_span!(
        telemetry::SPAN_MODEL_CALL,
        otel.name = name.as_str(),
        gen_ai.operation.name = telemetry::SPAN_MODEL_CALL,
        gen_ai.provider.name = kind,
        gen_ai.request.model = model.as_deref(),
        gen_ai.usage.input_tokens = Empty,
        gen_ai.usage.output_tokens = Empty,
        gen_ai.usage.cache_read.input_tokens = Empty,
        gen_ai.response.finish_reasons = Empty,
        gen_ai.conversation.id = Empty,
        error.type = Empty,
    );
    // An agent CLI offered `delegate` reaches it through the MCP server this process serves it.
    let bridge = session.shared.mcp_bridge.get();
    let host = TreeHost {
        calls: Calls {
            toolbox: &session.toolbox,
            policy: session.policy.as_ref(),
            delegation: &session.delegation,
            shared: &session.shared,
            family: &session.family,
        },
        run: run_id,
        bridge: bridge.map_or(&[][..], Vec::as_slice),
    };
    let hosts = bridge.is_some()
        && session.delegation.tree().is_some()
        && session.delegation.delegate().runs_its_own_tools();
    let request = TurnRequest {
        run_id,
        messages: &session.messages,
        attempt,
        turn,
        tools: &session.tool_specs,
        host: hosts.then_some(&host as &dyn crate::delegate::Host),
    };
    let answer = session
        .delegate
        .turn(request)
        .instrument(span.clone())
        .await;
    match &answer {
        Ok(turn) => {
            if turn.usage.requests > 0 {
                // OTLP integers are signed; a token count past i64::MAX saturates.
                let count = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
                span.record("gen_ai.usage.input_tokens", count(turn.usage.input_tokens));
                span.record(
                    "gen_ai.usage.output_tokens",
                    count(turn.usage.output_tokens),
                );
                if turn.usage.cached_input_tokens > 0 {
                    span.record(
                        "gen_ai.usage.cache_read.input_tokens",
                        count(turn.usage.cached_input_tokens),
                    );
                }
            }
            if let Some(reason) = &turn.finish_reason {
                span.record("gen_ai.response.finish_reasons", reason.as_str());
            }
            if let Some(id) = session.delegate.session() {
                span.record("gen_ai.conversation.id", id);
            }
        }
        Err(e) => {
            span.record("error.type", e.kind().as_str());
        }
    }
    answer
}

/// Judges a returned call with its tool's verifier, if it has one: a refusal turns the output into
/// an error the delegate reads in the same turn, and becomes an advisory finding of the attempt
/// (the attempt is judged on what it ends with, not on a step it corrected).
///
/// # Errors
/// [`ErrorKind::Verifier`] when the tool's verifier is broken: nothing it says counts.
async fn verify_tool(
    session: &mut Session,
    call: &ToolCall,
    output: ToolOutput,
    events: &Emitter<'_>,
) -> Result<ToolOutput> {
    let Some(verifier) = session.tool_verifiers.get(&call.name) else {
        return Ok(output);
    };
    let call_value = serde_json::to_value(call).expect("a tool call always serialises");
    let result_value = serde_json::json!({
        "call_id": call.id,
        "name": call.name,
        "content": output.content,
        "is_error": output.is_error,
    });
    let (outcome, _logs) = verifier.verify_call(&call_value, &result_value).await?;
    if outcome.verified {
        return Ok(output);
    }
    events.emit(RunEvent::ToolVerificationFailed {
        call_id: call.id.clone(),
        name: call.name.clone(),
        reason: outcome.reason.clone(),
    });
    session
        .tool_findings
        .push(crate::verdict::Finding::advisory(
            crate::verdict::Source::Verify,
            format!("tool {}", call.name),
            format!("{} ({}): {}", call.name, call.id, outcome.reason),
        ));
    Ok(ToolOutput::error(format!(
        "verify: {}\n(the call was made; its output was: {})",
        outcome.reason, output.content
    )))
}

/// The tools a run serves its agent CLI over MCP: `delegate`, each call through `tool.pre`,
/// the tool and `tool.post` as a model's call is ([`call_tool`]) — a child of the run `run`.
struct TreeHost<'a> {
    calls: Calls<'a>,
    run: &'a str,
    bridge: &'a [String],
}

impl std::fmt::Debug for TreeHost<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TreeHost")
            .field("run", &self.run)
            .field("bridge", &self.bridge)
            .finish_non_exhaustive()
    }
}

impl crate::delegate::Host for TreeHost<'_> {
    fn bridge(&self) -> &[String] {
        self.bridge
    }

    fn call(
        &self,
        call: ToolCall,
    ) -> crate::delegate::BoxFuture<'_, Result<(ToolCall, ToolOutput)>> {
        Box::pin(async move {
            if !is_delegate(&call) {
                let output = ToolOutput::error(format!(
                    "{}: not a tool this run serves (it serves `delegate`)",
                    call.name
                ));
                return Ok((call, output));
            }
            call_tool(self.calls, self.run, call).await
        })
    }
}

/// True for a call of the `delegate` tool.
fn is_delegate(call: &ToolCall) -> bool {
    call.name == crate::tools::Tool::Delegate.name()
}

/// What running a tool call needs of the session: all of it but the delegate, which an agent
/// CLI's turn holds while the calls it makes over MCP are served ([`TreeHost`]).
#[derive(Clone, Copy)]
struct Calls<'a> {
    toolbox: &'a crate::tools::Toolbox,
    policy: Option<&'a crate::policy::Policy>,
    delegation: &'a crate::delegation::Delegation,
    shared: &'a std::sync::Arc<crate::shared::Shared>,
    family: &'a std::sync::Arc<crate::tree::family::Family>,
}

impl<'a> Calls<'a> {
    /// `session`'s, borrowed field by field (so its delegate stays free to lend).
    fn of(session: &'a Session) -> Self {
        Calls {
            toolbox: &session.toolbox,
            policy: session.policy.as_ref(),
            delegation: &session.delegation,
            shared: &session.shared,
            family: &session.family,
        }
    }
}

/// Runs one call of the run `run` by name: a `delegate` call as a child delegation (when this
/// delegation offers it), any other with the toolbox.
async fn execute(session: Calls<'_>, run: &str, call: &ToolCall) -> ToolOutput {
    if is_delegate(call) && session.delegation.tree().is_some() {
        crate::tree::family::call(
            session.shared,
            session.delegation,
            run,
            session.family,
            &call.arguments,
        )
        .await
    } else {
        session.toolbox.call(&call.name, &call.arguments).await
    }
}

/// Runs one tool call through `tool.pre`, the tool, and `tool.post`. Returns the call as it was
/// actually made (after any modify) and what the delegate reads.
async fn call_tool(
    session: Calls<'_>,
    run: &str,
    call: ToolCall,
) -> Result<(ToolCall, ToolOutput)> {
    // Hooks, the tool and the record all see the path as it resolves: relative to the
    // workspace, normalised (`./src/../x` is `x`), a link inside followed.
    let call = session.toolbox.normalise(call);
    let span = tracing::info_span!(
        telemetry::SPAN_TOOL,
        otel.name = format!("{} {}", telemetry::SPAN_TOOL, call.name).as_str(),
        gen_ai.operation.name = telemetry::SPAN_TOOL,
        gen_ai.tool.name = call.name.as_str(),
        gen_ai.tool.call.id = call.id.as_str(),
        tool.is_error = Empty,
    );
    let work = async {
        let Some(policy) = session.policy else {
            let output = execute(session, run, &call).await;
            return Ok((call.clone(), output));
        };
        let names = vec![call.name.clone()];
        let payload = serde_json::to_value(&call).expect("a tool call always serialises");
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
        let output = execute(session, run, &call).await;
        let result = ToolResult {
            call_id: call.id.clone(),
            name: call.name.clone(),
            content: output.content,
            is_error: output.is_error,
        };
        let payload = serde_json::to_value(&result).expect("a tool result always serialises");
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
        let result: ToolResult = serde_json::from_value(post.payload).map_err(|e| {
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
