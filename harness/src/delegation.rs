//! A delegation ready to run: a delegation file with the project policy's defaults and the
//! caller's overrides applied. Built only by the [`Assembler`](crate::Assembler); read through
//! accessors, so what a delegation means is decided in one place.

use std::path::{Path, PathBuf};
use std::time::Duration;

use harness_builtins::Limits;
use harness_hooks::{DelegateInfo, Request};
use serde_json::Value;

use crate::decision::{OnExhausted, Rules};
use crate::delegate::DelegateConfig;
use crate::error::{Error, Result};
use crate::gates::checks::CheckSpec;
use crate::gates::claims::ClaimsMode;
use crate::gates::criteria::Criterion;
use crate::gates::critic::CriticSpec;
use crate::gates::plan::PlanStep;
use crate::overrides::Overrides;
use crate::project::ProjectPolicy;
use crate::redact::Redactor;
use crate::scope::ScopeSpec;
use crate::spec::DelegationFile;
use crate::spec::{MAX_VERIFY_RETRIES, script_paths};
use crate::verifier::VerifySource;

/// Default `max_verify_retries`.
pub const DEFAULT_MAX_VERIFY_RETRIES: u32 = 2;
/// The default `stuck_after`.
pub const DEFAULT_STUCK_AFTER: u32 = 3;

/// A validated delegation, ready to run.
#[derive(Debug, Clone, PartialEq)]
pub struct Delegation {
    source: PathBuf,
    task: String,
    delegate: DelegateConfig,
    tools: Vec<String>,
    args: Value,
    verify: Option<VerifySource>,
    max_verify_retries: u32,
    hooks: Option<Vec<PathBuf>>,
    extra_hooks: Vec<PathBuf>,
    workdir: PathBuf,
    allow_hosts: Vec<String>,
    allow_exec: Vec<String>,
    allow_env: Vec<String>,
    limits: Limits,
    max_turns: u32,
    timeout: Option<Duration>,
    max_tokens: Option<u64>,
    redact: Redactor,
    trace_parent: Option<String>,
    journal: Option<PathBuf>,
    isolation: crate::project::CommandIsolation,
    checks: Vec<CheckSpec>,
    criteria: Vec<Criterion>,
    require_checks: bool,
    scope: Option<ScopeSpec>,
    stuck_after: u32,
    observe: bool,
    protect: Option<Vec<String>>,
    claims: ClaimsMode,
    gaming: crate::gates::gaming::GamingMode,
    holdouts: Vec<crate::gates::holdout::HoldoutSpec>,
    critic: Option<CriticSpec>,
    risk: bool,
    parent_id: Option<String>,
    citations_required: bool,
    plan: Vec<PlanStep>,
    tool_verifiers: Vec<(String, VerifySource)>,
    /// Its place in a delegation tree, when it offers `delegate` (DESIGN §9).
    tree: Option<crate::tree::place::Tree>,
    /// The workspace its record names, when it works in an isolated copy of it (a child that
    /// can change files): its changes land there.
    home: Option<PathBuf>,
}

impl Delegation {
    /// `file` with the defaults of `project` (the policy of the workspace at `workdir`) and the
    /// caller's `overrides` applied, key by key: a flag over the file over the project.
    ///
    /// # Errors
    /// [`ErrorKind::Config`](crate::ErrorKind::Config): too many retries asked for, a check and
    /// a command criterion of one name.
    pub(crate) fn assemble(
        file: DelegationFile,
        project: &std::sync::Arc<ProjectPolicy>,
        overrides: &Overrides,
        workdir: PathBuf,
    ) -> Result<Self> {
        let tree = crate::tree::place::Tree::root(&file, project, overrides)?;
        let label = &file.label;
        let gates = file.gates.over(
            &project.defaults,
            label,
            &workdir
                .join(crate::project::PROJECT_POLICY)
                .display()
                .to_string(),
        )?;
        let (command_criteria, criteria) = gates.criteria.unwrap_or_default();
        let mut checks = gates.checks.unwrap_or_default();
        checks.extend(command_criteria);
        for check in &mut checks {
            check.confirm = check.confirm.or(gates.confirm);
            check.flaky = check.flaky.or(gates.flaky);
        }
        let holdouts = gates.holdout.unwrap_or_default();
        crate::gates::holdout::check_outside(label, &holdouts, &workdir)?;
        if !holdouts.is_empty() && !project.commands.confines() {
            return Err(Error::config(format!(
                "{label}: `holdout:` needs the programs a delegation runs confined by bubblewrap (commands.isolation is `none`, or bubblewrap is not installed or cannot make namespaces here): unconfined, the code under test could read the holdout's files during a visible check and leave them for the delegate; install bubblewrap, or leave `holdout:` out"
            )));
        }
        let observe = gates.observe.unwrap_or(true);
        if !observe {
            if gates.scope.is_some() {
                return Err(Error::config(format!(
                    "{label}: `observe: false` with `scope:`: a scope is judged on what changed, which only observation sees; remove `observe: false` or the scope"
                )));
            }
            if criteria
                .iter()
                .any(|c| matches!(c, Criterion::NoNewSkips(_)))
            {
                return Err(Error::config(format!(
                    "{label}: `observe: false` with the `no_new_skips` criterion: it reads the diff, which only observation makes; remove one of them"
                )));
            }
        }
        for (source, retries) in [
            ("--max-verify-retries", overrides.max_verify_retries),
            ("`max_verify_retries`", file.max_verify_retries),
        ] {
            if let Some(n) = retries.filter(|n| *n > MAX_VERIFY_RETRIES) {
                return Err(Error::config(format!(
                    "{label}: {source} is {n}; at most {MAX_VERIFY_RETRIES} retries are allowed"
                )));
            }
        }
        let mut allow_hosts = file.allow_hosts;
        allow_hosts.extend(overrides.allow_hosts.iter().cloned());
        Ok(Delegation {
            source: file.source,
            task: file.task,
            delegate: file.delegate,
            tools: file.tools,
            tool_verifiers: file.tool_verifiers,
            args: file.args,
            verify: file.verify,
            max_verify_retries: overrides
                .max_verify_retries
                .or(file.max_verify_retries)
                .or(project.max_verify_retries)
                .unwrap_or(DEFAULT_MAX_VERIFY_RETRIES),
            hooks: file.hooks,
            extra_hooks: overrides.hooks.clone(),
            workdir,
            allow_hosts,
            allow_exec: overrides.allow_exec.clone(),
            allow_env: overrides.allow_env.clone(),
            limits: project.limits.clone(),
            max_turns: file.max_turns,
            timeout: file.timeout,
            max_tokens: file.max_tokens,
            redact: project.redact.clone(),
            trace_parent: overrides.trace_parent.clone(),
            journal: overrides.journal.clone(),
            isolation: project.commands,
            checks,
            criteria,
            require_checks: gates.require_checks.unwrap_or(false),
            scope: gates.scope,
            stuck_after: gates.stuck_after.unwrap_or(DEFAULT_STUCK_AFTER),
            observe,
            protect: gates.protect,
            claims: gates.claims.unwrap_or_default(),
            gaming: gates.gaming.unwrap_or_default(),
            holdouts,
            critic: file.critic.or_else(|| project.critic.clone()),
            risk: file.risk,
            parent_id: file.parent_id.or_else(|| overrides.parent_id.clone()),
            citations_required: file.citations_required,
            plan: file.plan,
            tree,
            home: None,
        })
    }

    /// Its place in a delegation tree, when it offers `delegate`.
    pub(crate) fn tree(&self) -> Option<&crate::tree::place::Tree> {
        self.tree.as_ref()
    }

    /// Places a child in its parent's tree.
    pub(crate) fn set_tree(&mut self, tree: crate::tree::place::Tree) {
        self.tree = Some(tree);
    }

    /// True when it offers the `delegate` tool: its delegate may run child delegations.
    pub fn offers_delegate(&self) -> bool {
        self.tree.is_some()
    }

    /// How deep in a delegation tree it runs: 0 for a root (or a delegation that offers no
    /// `delegate`).
    pub fn depth(&self) -> u32 {
        self.tree
            .as_ref()
            .map_or(0, crate::tree::place::Tree::depth)
    }

    /// Where it was read from.
    pub fn source(&self) -> &Path {
        &self.source
    }

    /// What the delegate is asked to do.
    pub fn task(&self) -> &str {
        &self.task
    }

    /// Who does it.
    pub fn delegate(&self) -> &DelegateConfig {
        &self.delegate
    }

    /// Tools offered to the delegate.
    pub fn tools(&self) -> &[String] {
        &self.tools
    }

    /// The verifier's `args`.
    pub fn args(&self) -> &Value {
        &self.args
    }

    /// The inline verifier, if any.
    pub fn verify(&self) -> Option<&VerifySource> {
        self.verify.as_ref()
    }

    /// Per-tool verifiers (`tools: [{name, verify | verify_file}]`): `run(call, result)` judges
    /// each call of that tool as it returns.
    pub fn tool_verifiers(&self) -> &[(String, VerifySource)] {
        &self.tool_verifiers
    }

    /// Retries after a failed verification; total attempts are this plus one.
    pub fn max_verify_retries(&self) -> u32 {
        self.max_verify_retries
    }

    /// Attempts allowed in all: the retries plus one.
    pub fn max_attempts(&self) -> u32 {
        self.max_verify_retries.saturating_add(1)
    }

    /// Hook files and directories: the file's `hooks:` list (`None` when it has none), then
    /// the caller's.
    pub fn hooks(&self) -> (Option<&[PathBuf]>, &[PathBuf]) {
        (self.hooks.as_deref(), &self.extra_hooks)
    }

    /// The workspace root.
    pub fn workdir(&self) -> &Path {
        &self.workdir
    }

    /// The workspace its record names: its own, or, for a child working in an isolated copy,
    /// the workspace the copy was made from (where its changes are applied).
    pub fn recorded_workdir(&self) -> &Path {
        self.home.as_deref().unwrap_or(&self.workdir)
    }

    /// Records that this delegation works in a copy of the workspace at `home`.
    pub(crate) fn set_home(&mut self, home: PathBuf) {
        self.home = Some(home);
    }

    /// Hosts verifiers and hooks may reach.
    pub fn allow_hosts(&self) -> &[String] {
        &self.allow_hosts
    }

    /// Programs verifiers and hooks may run with `exec.run`.
    pub fn allow_exec(&self) -> &[String] {
        &self.allow_exec
    }

    /// Environment variables verifiers and hooks may read with `env.get`.
    pub fn allow_env(&self) -> &[String] {
        &self.allow_env
    }

    /// The budgets every script of this delegation runs under (project policy `limits:`).
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// Turns allowed per attempt.
    pub fn max_turns(&self) -> u32 {
        self.max_turns
    }

    /// Wall-clock budget of the whole delegation.
    pub fn timeout(&self) -> Option<Duration> {
        self.timeout
    }

    /// Token budget (input + output, all attempts) of the whole delegation.
    pub fn max_tokens(&self) -> Option<u64> {
        self.max_tokens
    }

    /// The secret patterns scrubbed from what the run reports (project policy `redact:`).
    pub fn redact(&self) -> &Redactor {
        &self.redact
    }

    /// The caller's W3C `traceparent`, made the parent of the delegation's root span.
    pub fn trace_parent(&self) -> Option<&str> {
        self.trace_parent.as_deref()
    }

    /// Run the programs this delegation starts under bubblewrap (project policy
    /// `commands.isolation`: `bwrap`, or `auto` where bubblewrap works here).
    pub fn isolate_commands(&self) -> bool {
        self.isolation.confines()
    }

    /// The bubblewrap sandbox for every program started for this delegation in the workspace at
    /// `root` — its checks and command criteria, `exec.run`, `run_command`, a `command` or agent
    /// CLI delegate: only the workspace writable, its policy and journals read-only inside it;
    /// `None` when programs run unconfined.
    pub(crate) fn confinement(&self, root: &Path) -> Option<harness_builtins::Isolation> {
        if !self.isolate_commands() || !self.starts_programs() {
            return None;
        }
        let mut protected = Vec::new();
        for path in self
            .protected_paths(root)
            .into_iter()
            .chain(self.journals(root))
        {
            let path = std::path::absolute(&path).unwrap_or(path);
            // Bound at both names, so a link on the way cannot leave one writable.
            protected.extend(path.canonicalize().ok().filter(|real| *real != path));
            protected.push(path);
        }
        let mut isolation = harness_builtins::Isolation::new(root, &protected);
        // The holdouts' files: under an empty mount wherever they lie.
        for holdout in &self.holdouts {
            isolation = isolation.masked(&holdout.files);
        }
        // The run journal keeps every run's record for the operator, a holdout's output among
        // them: no program of a delegation reads it (nor SQLite's files beside it).
        for journal in self.journals(root) {
            let journal = std::path::absolute(&journal).unwrap_or(journal);
            for suffix in ["", "-wal", "-shm", "-journal", crate::scope::cache::SUFFIX] {
                let mut name = journal.clone().into_os_string();
                name.push(suffix);
                isolation = isolation.masked(Path::new(&name));
            }
        }
        // The project: scripts beside the delegation file (`command: [sh, ../agent.sh]`).
        let project = std::path::absolute(&self.source)
            .ok()
            .and_then(|file| file.parent().map(Path::to_path_buf));
        Some(match project {
            Some(dir) => isolation.visible(&dir),
            None => isolation,
        })
    }

    /// True when anything started for this delegation is a program: `run_command`, checks and
    /// command criteria, `exec.run` (allowed programs), a `command` or agent CLI delegate or
    /// critic. Only then is a sandbox made (its paths cost a few dozen system calls).
    fn starts_programs(&self) -> bool {
        self.changes_files_itself()
            || !self.checks.is_empty()
            || !self.holdouts.is_empty()
            || !self.allow_exec.is_empty()
            || self
                .critic
                .as_ref()
                .and_then(|c| c.delegate.as_ref())
                .is_some_and(DelegateConfig::runs_its_own_tools)
    }

    /// True when the delegate can run programs outside bubblewrap: an agent CLI, a `command`
    /// delegate or `run_command`, where programs run unconfined.
    pub fn runs_unconfined(&self) -> bool {
        self.changes_files_itself() && !self.isolate_commands()
    }

    /// The warning a run that starts programs (checks, `run_command`, an agent CLI or `command`
    /// delegate) gives when `auto` confinement fell back to none.
    pub(crate) fn unconfined_warning(&self) -> Option<&'static str> {
        (self.changes_files_itself() || !self.checks.is_empty())
            .then(|| self.isolation.warning())
            .flatten()
    }

    /// Commands that judge every attempt by exit code, before the verifier (`checks:`, then the
    /// command criteria of `criteria:`).
    pub fn checks(&self) -> &[CheckSpec] {
        &self.checks
    }

    /// Facts about the workspace every attempt must make true (`criteria:`).
    pub fn criteria(&self) -> &[Criterion] {
        &self.criteria
    }

    /// Without checks and criteria the delegation fails as `no_gate` (`require_checks: true`).
    pub fn require_checks(&self) -> bool {
        self.require_checks
    }

    /// What the delegate may change (`scope:`); `None`: no baseline is taken.
    pub fn scope(&self) -> Option<&ScopeSpec> {
        self.scope.as_ref()
    }

    /// The same blocking finding on this many consecutive attempts ends the loop as `stuck`
    /// (0: never).
    pub fn stuck_after(&self) -> u32 {
        self.stuck_after
    }

    /// The independent reviewer (`critic:`), after the deterministic stages.
    pub fn critic(&self) -> Option<&CriticSpec> {
        self.critic.as_ref()
    }

    /// The caller marked the work risky (`risk: true`): a `when: risky` critic reviews it.
    pub fn risk(&self) -> bool {
        self.risk
    }

    /// Every claim of the answer must cite its evidence (`citations: required`).
    pub fn citations_required(&self) -> bool {
        self.citations_required
    }

    /// Steps every attempt must take (`plan.required_steps`).
    pub fn plan(&self) -> &[PlanStep] {
        &self.plan
    }

    /// What the decision step reads: the critic's `on_exhausted`, `stuck_after`, the token
    /// budget.
    pub(crate) fn rules(&self) -> Rules {
        Rules {
            on_exhausted: self
                .critic
                .as_ref()
                .map_or(OnExhausted::Fail, |c| c.on_exhausted),
            on_unavailable: self
                .critic
                .as_ref()
                .map_or_else(Default::default, |c| c.on_unavailable),
            stuck_after: self.stuck_after,
            max_tokens: self.max_tokens,
        }
    }

    /// True when the workspace is snapshotted before attempt 0 and diffed after each attempt
    /// (`observe:`, default true).
    pub fn observe(&self) -> bool {
        self.observe
    }

    /// `protect:` as written (or from the project); `None` for the default.
    pub fn protect(&self) -> Option<&[String]> {
        self.protect.as_deref()
    }

    /// What an unsupported claim in the answer does (`claims:`).
    pub fn claims(&self) -> ClaimsMode {
        self.claims
    }

    /// Checks whose tests the delegate never sees (`holdout:`).
    pub fn holdouts(&self) -> &[crate::gates::holdout::HoldoutSpec] {
        &self.holdouts
    }

    /// What the gaming stage's findings do (`gaming:`).
    pub fn gaming(&self) -> crate::gates::gaming::GamingMode {
        self.gaming
    }

    /// The run this work was delegated from (`parent_id:` or `HARNESS_PARENT_ID`).
    pub fn parent_id(&self) -> Option<&str> {
        self.parent_id.as_deref()
    }

    /// The harness's own files this delegation must not change (DESIGN §4.8): the delegation
    /// file, the verifier, the per-tool verifiers, the agent's and the critic's scripts, the hook
    /// files, and the `.harness/` of the workspace at `root` (its resolved workdir).
    pub(crate) fn protected_paths(&self, root: &Path) -> Vec<PathBuf> {
        let git = root.join(".git");
        let mut protected = vec![root.join(".harness"), self.source.clone()];
        if git.is_dir() {
            // What git runs or follows on the operator's next command; the rest (objects,
            // refs, the index) is the delegate's to change with its commits.
            for part in [
                "config",
                "hooks",
                "info",
                "commondir",
                "modules",
                "worktrees",
            ] {
                protected.push(git.join(part));
            }
        } else {
            // No repository, or a `.git` file pointing elsewhere: none may appear or change.
            protected.push(git);
        }
        protected.extend(script_paths(
            self.verify.as_ref(),
            &self.tool_verifiers,
            &self.delegate,
            self.critic.as_ref(),
        ));
        protected.extend(self.hooks.iter().flatten().cloned());
        protected.extend(self.extra_hooks.iter().cloned());
        protected.extend(self.tree.iter().flat_map(crate::tree::place::Tree::scripts));
        protected
    }

    /// The run journal this delegation is recorded in, when the command records it.
    pub fn journal(&self) -> Option<&Path> {
        self.journal.as_deref()
    }

    /// The journals written beside the workspace at `root`: the caller's and the workspace's
    /// own; refused to tools, never fingerprinted.
    pub(crate) fn journals(&self, root: &Path) -> Vec<PathBuf> {
        let mut journals: Vec<PathBuf> = self.journal.iter().cloned().collect();
        journals.push(root.join(".harness").join("runs.db"));
        journals
    }

    /// The observation cache of the workspace at `root` ([`crate::scope::cache`]): the
    /// journal's companion, when this delegation is recorded in a journal the delegate cannot
    /// write — outside the workspace, or in its protected `.harness/` — and works in the
    /// workspace itself (a child's isolated copy is gone when the child is).
    pub(crate) fn observe_cache(&self, root: &Path) -> Option<PathBuf> {
        if self.home.is_some() {
            return None;
        }
        // The journal may not be written yet: its directory is resolved.
        let journal = self.journal.as_deref()?;
        let journal = std::path::absolute(journal)
            .ok()?
            .parent()?
            .canonicalize()
            .ok()?
            .join(journal.file_name()?);
        let root = root.canonicalize().ok()?;
        (!journal.starts_with(&root) || journal.starts_with(root.join(".harness")))
            .then(|| crate::scope::cache::path_of(&journal))
    }

    /// Returns true when the delegate can change files by other means than the harness's
    /// refusing tools (a `run_command` child, an agent CLI): the policy is fingerprinted.
    pub(crate) fn changes_files_itself(&self) -> bool {
        self.delegate.runs_its_own_tools()
            || self.tools.iter().any(|t| t == "run_command")
            || self
                .tree
                .as_ref()
                .is_some_and(crate::tree::place::Tree::children_run_programs)
    }

    /// Returns true when the delegate can change the workspace at all (a writing tool, a
    /// command, an agent CLI): such delegations observe one workspace one at a time.
    pub(crate) fn changes_files(&self) -> bool {
        self.changes_files_itself()
            || self
                .tools
                .iter()
                .any(|t| t == "write_file" || t == "delegate")
    }

    /// The request as `delegation.pre` hooks see it.
    pub(crate) fn request(&self, id: &str, model: Option<&str>) -> Request {
        Request {
            id: id.to_owned(),
            task: self.task.clone(),
            delegate: DelegateInfo {
                kind: self.delegate.kind().to_owned(),
                model: model.map(str::to_owned),
            },
            tools: self.tools.clone(),
            args: self.args.as_object().cloned().unwrap_or_default(),
            max_verify_retries: self.max_verify_retries,
        }
    }

    /// Takes what a `delegation.pre` modify may change: the task, tools, args and retries.
    pub(crate) fn apply(&mut self, request: Request) {
        self.task = request.task;
        self.tools = request.tools;
        self.args = Value::Object(request.args);
        self.max_verify_retries = request.max_verify_retries;
    }
}
