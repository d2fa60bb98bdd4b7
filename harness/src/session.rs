//! A session: what lives across the attempts of one delegation — the delegate and its
//! conversation, the tools, the hooks, the verification pipeline. Opening one loads the policy,
//! runs `delegation.pre`, and compiles every script once.

use std::path::PathBuf;
use std::sync::Arc;

use harness_builtins::{Capabilities, HostAllowList, Sandbox, Surface, Workspace};
use harness_hooks::{Action, DelegationResult, Event as HookEvent, Request};

use crate::cache::Key;
use crate::checks::materials::Materials;
use crate::conversation::{Message, ToolSpec};
use crate::delegate::Delegate;
use crate::delegation::Delegation;
use crate::error::{Error, ErrorKind, Result};
use crate::guard::PolicyGuard;
use crate::pipeline::Pipeline;
use crate::policy::Policy;
use crate::shared::Shared;
use crate::tools::Toolbox;
use crate::verifier::Verifier;

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
    /// Per-tool verifiers by tool name: `run(call, result)` on each call as it returns.
    pub(crate) tool_verifiers: std::collections::HashMap<String, Verifier>,
    /// What per-tool verifiers refused during the current attempt: advisory findings of its
    /// verdict (the delegate already heard them as tool errors).
    pub(crate) tool_findings: Vec<crate::verdict::Finding>,
    /// What runs the children of its `delegate` calls (DESIGN §9).
    pub(crate) shared: Arc<Shared>,
    /// The children it started, their slots and budget.
    pub(crate) family: Arc<crate::tree::family::Family>,
}

/// The hook paths of a delegation: its `hooks:` list, or `.harness/hooks` in the workspace when
/// it has none and that directory exists; then the caller's.
fn hook_paths(delegation: &Delegation, workspace: &Workspace) -> Vec<PathBuf> {
    let (listed, extra) = delegation.hooks();
    let mut paths = match listed {
        Some(listed) => listed.to_vec(),
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

impl Session {
    /// Opens a session for `delegation`: loads its hooks, runs `delegation.pre`, compiles the
    /// verifiers and the delegate, builds the pipeline and opens the toolbox.
    ///
    /// # Errors
    /// [`ErrorKind::Config`] for a bad workspace, host list, hook file or delegate script;
    /// [`ErrorKind::Blocked`] when a `delegation.pre` hook blocks; [`ErrorKind::Hook`] or
    /// [`ErrorKind::Verifier`] when one is broken.
    pub(crate) async fn open(
        shared: &Arc<Shared>,
        delegation: &Delegation,
        id: &str,
        family: Arc<crate::tree::family::Family>,
    ) -> Result<Self> {
        let mut setting = Setting::new(shared, delegation)?;
        // Hooks load first: delegation.pre may change what the rest is built from.
        let policy = setting.hooks(shared, delegation).await?;
        let mut delegation = delegation.clone();
        // Only build the request payload when some delegation.pre hook will read it.
        if let Some(policy) = policy
            .as_ref()
            .filter(|p| p.applies(HookEvent::DelegationPre, &setting.names))
        {
            let model = delegation.delegate().model().map(str::to_owned);
            pre_hooks(
                policy,
                &mut delegation,
                id,
                model.as_deref(),
                &setting.names,
            )
            .await?;
            // A hook may have offered `run_command`: the sandbox is made for what now runs.
            let after = delegation.confinement(setting.workspace.root());
            if after != setting.confinement {
                setting.shape = setting.shape.with(format!("{after:?}"));
                setting.confinement = after;
            }
        }
        // Each checked for the arguments it is called with before the delegate spends anything.
        let verifier = match delegation.verify() {
            None => None,
            Some(verify) => Some(
                setting
                    .verifier(shared, &delegation, verify)
                    .await?
                    .expecting(&["result"])?,
            ),
        };
        let mut tool_verifiers = std::collections::HashMap::new();
        for (tool, verify) in delegation.tool_verifiers() {
            let verifier = setting.verifier(shared, &delegation, verify).await?;
            tool_verifiers.insert(tool.clone(), verifier.expecting(&["call", "result"])?);
        }
        let Setting {
            workspace,
            confinement,
            shape,
            names,
            ..
        } = setting;
        let made = crate::delegate::Materials {
            engine: &shared.engine,
            scripts: &shared.scripts,
            http: &shared.http,
            workspace: &workspace,
            limits: delegation.limits(),
            shape: &shape,
            isolation: confinement.as_ref(),
        };
        let delegate = delegation.delegate().build(&made).await?;
        let protected = delegation.protected_paths(workspace.root());
        let gate = Arc::new(crate::integrity::GateInputs::for_checks(
            delegation.protect(),
            delegation.checks(),
            workspace.root(),
        )?);
        let critic = critic(&delegation, &made, &protected, &gate).await?;
        let (pipeline, mut warnings) = Pipeline::for_delegation(Materials {
            delegation: &delegation,
            workspace: &workspace,
            verifier,
            policy: policy.as_ref(),
            names: &names,
            critic,
            gate: Arc::clone(&gate),
            isolation: confinement.as_ref(),
            baseline: None,
            observed: false,
            collection: None,
            holdouts: None,
            warnings: Vec::new(),
        })
        .await?;
        let guard = Arc::new(PolicyGuard::new(
            protected,
            delegation.journals(workspace.root()),
            delegation.changes_files_itself(),
            gate,
            shared.review.get().cloned(),
        ));
        let toolbox = Toolbox::new(
            workspace,
            delegation.tools(),
            Arc::clone(&guard),
            confinement.clone(),
        )?;
        warnings.extend(delegation.unconfined_warning().map(str::to_owned));
        Ok(Session {
            tool_specs: tool_specs(&toolbox, &delegation),
            shared: Arc::clone(shared),
            family,
            toolbox,
            pipeline,
            policy,
            names,
            delegate,
            messages: vec![Message::User(delegation.task().to_owned())],
            calls_made: 0,
            delegate_session: None,
            guard,
            warnings,
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

/// Runs `delegation.pre` hooks: a block stops the delegation; a modify may change the task,
/// tools, args and retry budget, never the id or the delegate.
async fn pre_hooks(
    policy: &Policy,
    delegation: &mut Delegation,
    id: &str,
    model: Option<&str>,
    names: &[String],
) -> Result<()> {
    let before = delegation.request(id, model);
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
    delegation.apply(after);
    Ok(())
}

/// What every script and program of one session is made for: its workspace, what scripts may
/// reach, the sandbox of the programs it starts, and the cache key of that shape.
struct Setting {
    workspace: Workspace,
    /// What hooks and verifiers may reach.
    checking: Capabilities,
    /// One sandbox for every program started for this delegation, from hooks to checks.
    confinement: Option<harness_builtins::Isolation>,
    /// Everything besides name, source and args that shapes a compiled script.
    shape: Key,
    /// The delegate's kind and model, matched by hooks' `delegates:` globs.
    names: Vec<String>,
}

impl Setting {
    fn new(shared: &Shared, delegation: &Delegation) -> Result<Setting> {
        let file = delegation.source().display().to_string();
        let workspace = shared
            .workspaces
            .open(delegation.workdir())
            .map_err(|e| Error::config(format!("{file}: workdir: {e}")))?;
        let hosts = HostAllowList::new(delegation.allow_hosts())
            .map_err(|e| Error::config(format!("{file}: network.allow: {e}")))?;
        let checking = Capabilities {
            hosts,
            programs: delegation.allow_exec().to_vec(),
            env: delegation.allow_env().to_vec(),
            ..Capabilities::read_only()
        };
        let confinement = delegation.confinement(workspace.root());
        let shape = Key::default()
            .with_path(workspace.root())
            .with(format!("{confinement:?}"))
            .with_all(delegation.allow_hosts())
            .with_all(delegation.allow_exec())
            .with_all(delegation.allow_env())
            .with(delegation.limits().key());
        let mut names = vec![delegation.delegate().kind().to_owned()];
        names.extend(delegation.delegate().model().map(str::to_owned));
        Ok(Setting {
            workspace,
            checking,
            confinement,
            shape,
            names,
        })
    }

    /// A sandbox for scripts of `surface`.
    fn sandbox(&self, surface: Surface, delegation: &Delegation) -> Arc<Sandbox> {
        Arc::new(
            Sandbox::new(
                surface,
                self.workspace.clone(),
                self.checking.clone(),
                delegation.limits().clone(),
            )
            .with_isolation(self.confinement.clone()),
        )
    }

    /// The delegation's hooks, loaded (and compiled once per shape); `None` when it has none.
    async fn hooks(&self, shared: &Shared, delegation: &Delegation) -> Result<Option<Policy>> {
        let paths = hook_paths(delegation, &self.workspace);
        if paths.is_empty() {
            return Ok(None);
        }
        let sandbox = self.sandbox(Surface::Hook, delegation);
        let engine = Arc::clone(&shared.hook_engine);
        let key = paths.iter().fold(
            self.shape.clone().with(paths.len().to_string()),
            |key, path| key.with_path(path),
        );
        let policy = shared
            .hooks
            .get_or_compile(key, move || Policy::load(&engine, sandbox, &paths))
            .await?;
        Ok(Some(policy))
    }

    /// A verifier — the inline one or a per-tool one, compiled alike (and once per shape).
    async fn verifier(
        &self,
        shared: &Shared,
        delegation: &Delegation,
        verify: &crate::verifier::VerifySource,
    ) -> Result<Verifier> {
        let sandbox = self.sandbox(Surface::Verifier, delegation);
        let engine = Arc::clone(&shared.engine);
        let (name, source, args) = (
            verify.name.clone(),
            verify.source.clone(),
            delegation.args().clone(),
        );
        let key = self
            .shape
            .clone()
            .with(&name)
            .with(args.to_string())
            .with(&source);
        shared
            .verifiers
            .get_or_compile(key, move || {
                Verifier::compile(&engine, sandbox, &name, &source, &args)
            })
            .await
    }
}

/// The critic's delegate and the read-only tools it reviews with, when the delegation has a
/// critic that reviews: its own delegate, else the delegation's.
async fn critic(
    delegation: &Delegation,
    made: &crate::delegate::Materials<'_>,
    protected: &[PathBuf],
    gate: &Arc<crate::integrity::GateInputs>,
) -> Result<Option<(Box<dyn Delegate>, Toolbox)>> {
    let Some(spec) = delegation.critic().filter(|spec| spec.reviews()) else {
        return Ok(None);
    };
    let reviewer = spec.delegate.as_ref().unwrap_or(delegation.delegate());
    let reads = Toolbox::new(
        made.workspace.clone(),
        &["read_file".to_owned(), "list_files".to_owned()],
        Arc::new(PolicyGuard::new(
            protected.to_vec(),
            Vec::new(),
            false,
            Arc::clone(gate),
            None,
        )),
        None,
    )?;
    Ok(Some((reviewer.build(made).await?, reads)))
}

/// The tools as the delegate is told of them: `delegate` with the tree's profiles.
fn tool_specs(toolbox: &Toolbox, delegation: &Delegation) -> Vec<ToolSpec> {
    let mut specs = toolbox.specs();
    if let Some(tree) = delegation.tree() {
        for spec in &mut specs {
            if spec.name == crate::tools::Tool::Delegate.name() {
                *spec = tree.spec();
            }
        }
    }
    specs
}
