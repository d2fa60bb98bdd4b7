//! A session: what lives across the attempts of one delegation — the delegate and its
//! conversation, the tools, the hooks, the verification pipeline. Opening one loads the policy,
//! runs `delegation.pre`, and compiles every script once.

use std::path::PathBuf;
use std::sync::Arc;

use harness_builtins::{
    Capabilities, Engine, HostAllowList, Sandbox, Script, Surface, Workspace, Workspaces,
};
use harness_hooks::{Action, DelegateInfo, Event as HookEvent, Request};

use crate::cache::Cache;
use crate::conversation::{Message, ToolSpec};
use crate::delegate::{CommandDelegate, Delegate, OpenAiDelegate, ScriptedDelegate};
use crate::error::{Error, ErrorKind, Result};
use crate::guard::PolicyGuard;
use crate::pipeline::Pipeline;
use crate::policy::Policy;
use crate::spec::{DelegateConfig, Delegation};
use crate::tools::Toolbox;
use crate::verifier::Verifier;
use harness_hooks::DelegationResult;

/// What the runtime shares between delegations: the Starlark globals, the HTTP connection pool,
/// compiled scripts and resolved workspaces.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) engine: Arc<Engine>,
    pub(crate) hook_engine: Arc<Engine>,
    pub(crate) http: reqwest::Client,
    pub(crate) hooks: Cache<Policy>,
    pub(crate) verifiers: Cache<Verifier>,
    pub(crate) scripts: Cache<(Arc<Script>, Arc<Sandbox>)>,
    pub(crate) workspaces: Workspaces,
}

/// One delegation's state across its attempts.
pub(crate) struct Session {
    /// The delegation as `delegation.pre` hooks left it.
    pub(crate) delegation: Delegation,
    pub(crate) delegate: Box<dyn Delegate>,
    pub(crate) toolbox: Toolbox,
    pub(crate) tool_specs: Vec<ToolSpec>,
    pub(crate) pipeline: Pipeline,
    pub(crate) policy: Option<Policy>,
    /// The delegate's kind and model, matched by hooks' `delegates:` globs.
    pub(crate) names: Vec<String>,
    /// The conversation, continued across attempts: the same delegate hears its own claims.
    pub(crate) messages: Vec<Message>,
    /// Tool calls made so far, for ids of calls the delegate did not name.
    pub(crate) calls_made: u32,
    /// The delegate's own session (an agent CLI's), as last recorded in the events.
    pub(crate) delegate_session: Option<String>,
    /// The policy out of the delegate's reach, fingerprinted before attempt 0.
    pub(crate) guard: Arc<PolicyGuard>,
    /// What opening found worth telling the caller (a scope snapshot's unreadable entries).
    pub(crate) warnings: Vec<String>,
    /// The independent reviewer, with its own delegate and read-only tools.
    pub(crate) critic: Option<crate::critic::Critic>,
    /// Per-tool verifiers by tool name: `run(call, result)` on each call as it returns.
    pub(crate) tool_verifiers: std::collections::HashMap<String, Verifier>,
    /// What per-tool verifiers refused during the current attempt: advisory findings of its
    /// verdict (the delegate already heard them as tool errors).
    pub(crate) tool_findings: Vec<crate::verdict::Finding>,
}

/// The hook paths of a delegation: its `hooks:` list, or `.harness/hooks` in the workspace when
/// it has none and that directory exists; then the caller's.
fn hook_paths(delegation: &Delegation, workspace: &Workspace) -> Vec<PathBuf> {
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
    paths.extend(delegation.extra_hooks.iter().cloned());
    paths
}

/// The request as `delegation.pre` hooks see it.
pub(crate) fn request(id: &str, delegation: &Delegation, model: Option<&str>) -> Request {
    Request {
        id: id.to_owned(),
        task: delegation.task.clone(),
        delegate: DelegateInfo {
            kind: delegation.delegate.kind().to_owned(),
            model: model.map(str::to_owned),
        },
        tools: delegation.tools.clone(),
        args: delegation.args.as_object().cloned().unwrap_or_default(),
        max_verify_retries: delegation.max_verify_retries,
    }
}

impl Session {
    /// Opens a session for `delegation`: loads its hooks, runs `delegation.pre`, compiles the
    /// verifier and the delegate, and opens the toolbox.
    ///
    /// # Errors
    /// [`ErrorKind::Config`] for a bad workspace, host list, hook file or delegate script;
    /// [`ErrorKind::Blocked`] when a `delegation.pre` hook blocks; [`ErrorKind::Hook`] or
    /// [`ErrorKind::Verifier`] when one is broken.
    pub(crate) async fn open(shared: &Shared, delegation: &Delegation, id: &str) -> Result<Self> {
        let file = delegation.source.display().to_string();
        let workspace = shared
            .workspaces
            .open(&delegation.workdir)
            .map_err(|e| Error::config(format!("{file}: workdir: {e}")))?;
        let hosts = HostAllowList::new(&delegation.allow_hosts)
            .map_err(|e| Error::config(format!("{file}: network.allow: {e}")))?;
        let checking = Capabilities {
            hosts,
            programs: delegation.allow_exec.clone(),
            env: delegation.allow_env.clone(),
            ..Capabilities::read_only()
        };
        let model = match &delegation.delegate {
            DelegateConfig::OpenAi(spec) => Some(spec.model.clone()),
            DelegateConfig::Anthropic(spec) => Some(spec.model.clone()),
            DelegateConfig::Agent(spec) => spec.model.clone(),
            _ => None,
        };
        // Everything besides name, source and args that shapes a compiled script.
        let shape = format!(
            "{}\n{:?}\n{:?}\n{:?}\n{:?}",
            workspace.root().display(),
            delegation.allow_hosts,
            delegation.allow_exec,
            delegation.allow_env,
            delegation.limits,
        );
        let mut names = vec![delegation.delegate.kind().to_owned()];
        names.extend(model.clone());

        // Hooks load first: delegation.pre may change what the rest is built from.
        let paths = hook_paths(delegation, &workspace);
        let policy = if paths.is_empty() {
            None
        } else {
            let sandbox = Arc::new(Sandbox::new(
                Surface::Hook,
                workspace.clone(),
                checking.clone(),
                delegation.limits.clone(),
            ));
            let engine = Arc::clone(&shared.hook_engine);
            let key = format!("{shape}\n{paths:?}");
            let policy = shared
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
            pre_hooks(policy, &mut delegation, id, model.as_deref(), &names).await?;
        }

        // The inline verifier and the per-tool ones, compiled alike (and once per shape).
        let compile = |verify: &crate::spec::VerifySource| {
            let sandbox = Arc::new(Sandbox::new(
                Surface::Verifier,
                workspace.clone(),
                checking.clone(),
                delegation.limits.clone(),
            ));
            let engine = Arc::clone(&shared.engine);
            let (name, source, args) = (
                verify.name.clone(),
                verify.source.clone(),
                delegation.args.clone(),
            );
            let key = format!("{shape}\n{name}\n{args}\n{source}");
            shared.verifiers.get_or_compile(key, move || {
                Verifier::compile(&engine, sandbox, &name, &source, &args)
            })
        };
        let verifier = match &delegation.verify {
            None => None,
            Some(verify) => Some(compile(verify).await?),
        };
        let mut tool_verifiers = std::collections::HashMap::new();
        for (tool, verify) in &delegation.tool_verifiers {
            tool_verifiers.insert(tool.clone(), compile(verify).await?);
        }
        let delegate = build_delegate(
            shared,
            &delegation.delegate,
            &workspace,
            &delegation.limits,
            &shape,
        )
        .await?;
        let critic = match &delegation.critic {
            None => None,
            Some(spec) => Some(crate::critic::Critic::new(
                spec.clone(),
                build_delegate(
                    shared,
                    spec.delegate.as_ref().unwrap_or(&delegation.delegate),
                    &workspace,
                    &delegation.limits,
                    &shape,
                )
                .await?,
                Toolbox::new(
                    workspace.clone(),
                    &["read_file".to_owned(), "list_files".to_owned()],
                    Arc::new(PolicyGuard::new(workspace.root(), &delegation, &[])),
                    false,
                )?,
                delegation.redact.clone(),
            )),
        };
        let checks = if delegation.checks.is_empty() {
            None
        } else {
            // Not the HOME `run_command` children get: a delegate could plant configuration there
            // (`.gitconfig`, `.cargo/config.toml`, `.npmrc`) that changes what its judges do.
            let home = tempfile::Builder::new()
                .prefix("harness-check-home-")
                .tempdir()
                .map_err(|e| {
                    Error::new(
                        ErrorKind::Check,
                        format!("cannot make the private HOME for checks: {e}"),
                    )
                })?;
            Some(crate::checks::CommandChecks {
                checks: delegation.checks.clone(),
                root: workspace.root().to_path_buf(),
                home: Arc::new(home),
                redact: delegation.redact.clone(),
            })
        };
        let criteria = (!delegation.criteria.is_empty()).then(|| {
            crate::checks::CriteriaStage::new(delegation.criteria.clone(), workspace.clone())
        });
        let mut warnings = Vec::new();
        let scope = match &delegation.scope {
            None => None,
            Some(spec) => {
                let scope = Arc::new(crate::scope::Scope::compile(spec, workspace.root(), &file)?);
                let walker = Arc::clone(&scope);
                // The baseline, before attempt 0: a walk of the workspace, on a blocking thread.
                let baseline = tokio::task::spawn_blocking(move || walker.snapshot())
                    .await
                    .map_err(|e| {
                        Error::new(
                            ErrorKind::Check,
                            format!("the scope snapshot failed to run: {e}"),
                        )
                    })?;
                warnings.extend(baseline.warnings.iter().cloned());
                Some(crate::checks::ScopeStage {
                    scope,
                    baseline: Arc::new(baseline),
                })
            }
        };
        let guard = Arc::new(PolicyGuard::new(
            workspace.root(),
            &delegation,
            delegation.journal.as_slice(),
        ));
        let toolbox_workspace = workspace.clone();
        let toolbox = Toolbox::new(
            workspace,
            &delegation.tools,
            Arc::clone(&guard),
            delegation.isolate_commands,
        )?;
        Ok(Session {
            tool_specs: toolbox.specs(),
            toolbox,
            pipeline: Pipeline::with_checks(
                crate::pipeline::Stages {
                    scope,
                    checks,
                    criteria,
                    plan: (!delegation.plan.is_empty()).then(|| crate::checks::PlanStage {
                        steps: delegation.plan.clone(),
                    }),
                    citations: delegation.citations_required.then(|| {
                        crate::checks::CitationStage {
                            workspace: toolbox_workspace.clone(),
                        }
                    }),
                    verifier,
                },
                policy.clone(),
                names.clone(),
            ),
            policy,
            names,
            delegate,
            messages: vec![Message::User(delegation.task.clone())],
            calls_made: 0,
            delegate_session: None,
            guard,
            warnings,
            critic,
            tool_verifiers,
            tool_findings: Vec::new(),
            delegation,
        })
    }

    /// Returns true when `delegation.post` hooks will see (and may redact) the answer.
    pub(crate) fn redacts_later(&self) -> bool {
        self.policy
            .as_ref()
            .is_some_and(|p| p.applies(HookEvent::DelegationPost, &self.names))
    }

    /// Runs `delegation.post` hooks on the verified result: what the caller gets, when a hook
    /// changed it. A modify never changes what the verifiers saw.
    ///
    /// # Errors
    /// [`ErrorKind::Blocked`] when a hook blocks; [`ErrorKind::Hook`] when one is broken.
    pub(crate) async fn deliver(
        &self,
        result: &DelegationResult,
    ) -> Result<Option<DelegationResult>> {
        let Some(policy) = &self.policy else {
            return Ok(None);
        };
        let dispatch = policy
            .dispatch(HookEvent::DelegationPost, result.to_value(), &self.names)
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
        if !dispatch.runs.iter().any(|r| r.action == Action::Modify) {
            return Ok(None);
        }
        serde_json::from_value(dispatch.payload)
            .map(Some)
            .map_err(|e| {
                Error::new(
                    ErrorKind::Hook,
                    format!("a delegation.post modify produced an invalid Result: {e}"),
                )
            })
    }
}

/// Builds the delegate `config` names, in `workspace`, its script (if scripted) compiled once
/// per `shape` (see [`Session::open`]).
async fn build_delegate(
    shared: &Shared,
    config: &DelegateConfig,
    workspace: &Workspace,
    limits: &harness_builtins::Limits,
    shape: &str,
) -> Result<Box<dyn Delegate>> {
    Ok(match config {
        DelegateConfig::Scripted { path, source } => {
            let sandbox = Arc::new(Sandbox::new(
                Surface::Delegate,
                workspace.clone(),
                Capabilities::default(),
                limits.clone(),
            ));
            let engine = Arc::clone(&shared.engine);
            let (name, source) = (path.display().to_string(), source.clone());
            let key = format!("{shape}\n{name}\n{source}");
            let (script, sandbox) = shared
                .scripts
                .get_or_compile(key, move || {
                    let script =
                        Script::compile(&engine, &sandbox, &name, &source, &[]).map_err(|e| {
                            Error::config(format!("delegate script {e} [{}]", e.kind().as_str()))
                        })?;
                    Ok((Arc::new(script), sandbox))
                })
                .await?;
            Box::new(ScriptedDelegate::new(script, sandbox)?)
        }
        DelegateConfig::OpenAi(spec) => {
            Box::new(OpenAiDelegate::new(spec.clone(), shared.http.clone()))
        }
        DelegateConfig::Anthropic(spec) => Box::new(crate::delegate::AnthropicDelegate::new(
            spec.clone(),
            shared.http.clone(),
        )),
        DelegateConfig::Command(spec) => {
            let mut spec = spec.clone();
            spec.workdir = workspace.root().to_path_buf();
            Box::new(CommandDelegate::new(spec))
        }
        DelegateConfig::Agent(spec) => {
            let mut spec = spec.clone();
            spec.workdir = workspace.root().to_path_buf();
            Box::new(crate::delegate::AgentDelegate::new(spec)?)
        }
    })
}

/// Runs `delegation.pre` hooks: a block stops the delegation; a modify may change the task,
/// tools, args and retry budget, never the id or the delegate.
async fn pre_hooks(
    policy: &Policy,
    delegation: &mut Delegation,
    id: &str,
    model: Option<&str>,
    names: &[String],
) -> Result<()> {
    let before = request(id, delegation, model);
    let payload = serde_json::to_value(&before).expect("a request always serialises");
    let dispatch = policy
        .dispatch(HookEvent::DelegationPre, payload, names)
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
    let Some(modifier) = dispatch
        .runs
        .iter()
        .rev()
        .find(|r| r.action == Action::Modify)
    else {
        return Ok(());
    };
    let bad = |what: String| {
        Error::new(
            ErrorKind::Hook,
            format!("hook {}: a delegation.pre modify {what}", modifier.hook),
        )
    };
    let after: Request = serde_json::from_value(dispatch.payload)
        .map_err(|e| bad(format!("produced an invalid request: {e}")))?;
    if after.id != before.id || after.delegate != before.delegate {
        return Err(bad(
            "may change task, tools, args and max_verify_retries, not id or delegate".to_owned(),
        ));
    }
    if after.max_verify_retries > crate::spec::MAX_VERIFY_RETRIES {
        return Err(bad(format!(
            "set max_verify_retries to {}; at most {} are allowed",
            after.max_verify_retries,
            crate::spec::MAX_VERIFY_RETRIES
        )));
    }
    delegation.task = after.task;
    delegation.tools = after.tools;
    delegation.args = serde_json::Value::Object(after.args);
    delegation.max_verify_retries = after.max_verify_retries;
    Ok(())
}
