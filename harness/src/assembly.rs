//! One assembly path: a delegation file (or a batch entry) plus the workspace's project policy
//! plus the caller's overrides become one ready [`Delegation`]. `harness run`, `harness batch`
//! (and the service and workers after them) all build their delegations here, so a flag, a
//! default or a limit means the same thing everywhere.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use crate::delegation::Delegation;
use crate::error::{Error, Result};
use crate::overrides::Overrides;
use crate::project::ProjectPolicy;
use crate::spec::DelegationFile;

/// Builds ready [`Delegation`]s. Each workspace's project policy and each script file (verifier,
/// agent script) is read once, however many delegations use it: a delegate that rewrites a
/// script by any means cannot change what judges the delegations of the batch after it.
#[derive(Debug, Default)]
pub struct Assembler {
    overrides: Overrides,
    policies: Mutex<HashMap<PathBuf, Arc<ProjectPolicy>>>,
    scripts: Mutex<HashMap<PathBuf, std::result::Result<String, String>>>,
}

impl Assembler {
    /// Creates an assembler applying `overrides` to every delegation it builds.
    pub fn new(overrides: Overrides) -> Self {
        Assembler {
            overrides,
            ..Assembler::default()
        }
    }

    /// Reads and validates a delegation file; relative paths inside it are relative to its
    /// directory.
    ///
    /// # Errors
    /// [`ErrorKind::Config`](crate::ErrorKind::Config) naming the file (the delegation file or
    /// the project policy), the key and the fix.
    pub fn file(&self, path: &Path) -> Result<Delegation> {
        let text = harness_builtins::read_regular(path, harness_builtins::MAX_POLICY_BYTES)
            .map_err(|e| Error::config(format!("delegation file {}: {e}", path.display())))?;
        self.yaml(path, &text, base_of(path))
    }

    /// Validates delegation YAML named `source`, resolving relative paths against `base`.
    ///
    /// # Errors
    /// As [`Assembler::file`].
    pub fn yaml(&self, source: &Path, text: &str, base: &Path) -> Result<Delegation> {
        let label = source.display().to_string();
        let file = DelegationFile::from_yaml(source, text, base, &self.reader(&label, base))?;
        self.assemble(file)
    }

    /// Validates one delegation given as a JSON object (an entry of a batch file); `label`
    /// names it in messages (e.g. `batch.yaml: args[3]`).
    ///
    /// # Errors
    /// As [`Assembler::file`], naming the field.
    pub fn json(
        &self,
        source: &Path,
        label: &str,
        value: serde_json::Value,
        base: &Path,
    ) -> Result<Delegation> {
        let file =
            DelegationFile::from_json(source, label, value, base, &self.reader(label, base))?;
        self.assemble(file)
    }

    /// Like [`Assembler::json`], from the JSON text itself (a line of a JSONL batch), read
    /// without a JSON tree in between.
    ///
    /// # Errors
    /// As [`Assembler::json`]; text that is not JSON is reported as such.
    pub fn json_text(
        &self,
        source: &Path,
        label: &str,
        text: &str,
        base: &Path,
    ) -> Result<Delegation> {
        let file =
            DelegationFile::from_json_text(source, label, text, base, &self.reader(label, base))?;
        self.assemble(file)
    }

    /// Applies the project policy of the file's workspace (or the caller's `workdir`) and the
    /// caller's overrides.
    fn assemble(&self, file: DelegationFile) -> Result<Delegation> {
        let workdir = match &self.overrides.workdir {
            Some(dir) => dir.clone(),
            None => file.workdir.clone(),
        };
        let project = self.project_policy(&workdir)?;
        Delegation::assemble(file, &project, &self.overrides, workdir)
    }

    /// The script reader of the file `label`: paths relative to `base`, each file read once.
    fn reader<'a>(
        &'a self,
        label: &'a str,
        base: &'a Path,
    ) -> impl Fn(&str, &Path) -> Result<(PathBuf, String)> + 'a {
        move |key: &str, rel: &Path| {
            let full = base.join(rel);
            let text = self.script(&full).map_err(|e| {
                Error::config(format!(
                    "{label}: `{key}`: cannot read {}: {e}",
                    full.display()
                ))
            })?;
            Ok((full, text))
        }
    }

    /// Returns the text of the script file at `path`, read on first use (a failure to read is
    /// remembered too, so every delegation naming the file reports the same error).
    fn script(&self, path: &Path) -> std::result::Result<String, String> {
        let mut scripts = self
            .scripts
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        scripts
            .entry(path.to_path_buf())
            .or_insert_with(|| {
                harness_builtins::read_regular(path, harness_builtins::MAX_SCRIPT_BYTES)
                    .map_err(|e| e.to_string())
            })
            .clone()
    }

    /// Returns the project policy of the workspace at `workdir` (read on first use).
    fn project_policy(&self, workdir: &Path) -> Result<Arc<ProjectPolicy>> {
        let mut policies = self
            .policies
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(policy) = policies.get(workdir) {
            return Ok(Arc::clone(policy));
        }
        let policy = Arc::new(ProjectPolicy::load(workdir)?);
        policies.insert(workdir.to_path_buf(), Arc::clone(&policy));
        Ok(policy)
    }
}

/// Returns the directory relative paths in the file at `path` are resolved against.
pub(crate) fn base_of(path: &Path) -> &Path {
    match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn workspace(policy: Option<&str>) -> tempfile::TempDir {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(
            dir.path().join("agent.star"),
            "def respond(r):\n    return 'ok'\n",
        )
        .expect("write");
        if let Some(text) = policy {
            std::fs::create_dir(dir.path().join(".harness")).expect("mkdir");
            std::fs::write(dir.path().join(".harness/policy.yaml"), text).expect("write");
        }
        dir
    }

    const FILE: &str = "task: t\ndelegate: {kind: scripted, script: agent.star}\n";

    #[test]
    fn retries_come_from_the_flag_then_the_file_then_the_project() {
        let dir = workspace(Some(
            "verification_defaults: {max_verify_retries: 5}\nlimits: {steps: 2000}\n",
        ));
        let assemble = |overrides: Overrides, text: &str| {
            Assembler::new(overrides)
                .yaml(Path::new("d.yaml"), text, dir.path())
                .expect("valid")
        };
        let project = assemble(Overrides::default(), FILE);
        assert_eq!(project.max_verify_retries(), 5);
        assert_eq!(project.limits().max_steps, 2000);
        let file = assemble(
            Overrides::default(),
            &format!("{FILE}max_verify_retries: 1\n"),
        );
        assert_eq!(file.max_verify_retries(), 1);
        let flag = assemble(
            Overrides {
                max_verify_retries: Some(0),
                allow_hosts: vec!["example.com".to_owned()],
                ..Overrides::default()
            },
            &format!("{FILE}max_verify_retries: 1\nnetwork: {{allow: [a.test]}}\n"),
        );
        assert_eq!(flag.max_verify_retries(), 0);
        assert_eq!(flag.allow_hosts(), ["a.test", "example.com"]);
    }

    #[test]
    fn a_broken_project_policy_is_a_config_error_naming_it() {
        let dir = workspace(Some("limits: {steps: many}\n"));
        let err = Assembler::default()
            .yaml(Path::new("d.yaml"), FILE, dir.path())
            .expect_err("invalid policy");
        assert_eq!(err.kind(), crate::ErrorKind::Config);
        assert!(err.message().contains("policy.yaml"), "{}", err.message());
        assert!(err.message().contains("steps"), "{}", err.message());
    }

    #[test]
    fn the_workdir_override_picks_the_project_policy() {
        let plain = workspace(None);
        let strict = workspace(Some("limits: {wall_ms: 500}\n"));
        let delegation = Assembler::new(Overrides {
            workdir: Some(strict.path().to_path_buf()),
            ..Overrides::default()
        })
        .yaml(Path::new("d.yaml"), FILE, plain.path())
        .expect("valid");
        assert_eq!(
            delegation.limits().timeout,
            std::time::Duration::from_millis(500)
        );
    }

    fn parse(text: &str) -> Result<Delegation> {
        let dir = workspace(None);
        Assembler::default().yaml(Path::new("d.yaml"), text, dir.path())
    }

    #[test]
    fn minimal_file_gets_defaults() {
        let d =
            parse("task: do it\ndelegate: {kind: scripted, script: agent.star}\n").expect("valid");
        assert_eq!(d.max_verify_retries(), 2);
        assert_eq!(d.max_turns(), 20);
        assert!(d.verify().is_none());
        assert_eq!(d.args(), &serde_json::json!({}));
    }

    #[test]
    fn malformed_files_are_config_errors_naming_the_key() {
        let cases = [
            ("delegate: {kind: scripted, script: agent.star}\n", "task"),
            ("task: x\n", "delegate"),
            (
                "task: x\ndelegate: {kind: scripted, script: agent.star}\nbogus: 1\n",
                "bogus",
            ),
            (
                "task: x\ndelegate: {kind: scripted, script: agent.star, extra: 1}\n",
                "extra",
            ),
            ("task: x\ndelegate: {kind: wizard}\n", "wizard"),
            (
                "task: x\ndelegate: {kind: scripted, script: missing.star}\n",
                "missing.star",
            ),
            (
                "task: x\ndelegate: {kind: scripted, script: agent.star}\nverify: 'x'\nverify_file: v.star\n",
                "not both",
            ),
            (
                "task: x\ndelegate: {kind: scripted, script: agent.star}\nverify_file: nope.star\n",
                "nope.star",
            ),
            (
                "task: x\ndelegate: {kind: scripted, script: agent.star}\nmax_verify_retries: many\n",
                "max_verify_retries",
            ),
            (
                "task: x\ndelegate: {kind: scripted, script: agent.star}\ntools: [teleport]\n",
                "teleport",
            ),
            (
                "task: [1]\ndelegate: {kind: scripted, script: agent.star}\n",
                "task",
            ),
            (
                "task: x\ndelegate: {kind: scripted, script: agent.star}\nlimits: {max_turns: 0}\n",
                "max_turns",
            ),
            (
                "task: x\ndelegate: {kind: command, command: []}\n",
                "delegate.command",
            ),
            ("task: x\ndelegate: {kind: openai}\n", "model"),
            (
                "task: '  '\ndelegate: {kind: scripted, script: agent.star}\n",
                "task",
            ),
        ];
        for (text, needle) in cases {
            let err = parse(text).expect_err(text);
            assert_eq!(err.kind(), crate::ErrorKind::Config, "{text}");
            assert!(err.message().contains(needle), "{text}: {}", err.message());
            assert!(
                err.message().contains("d.yaml"),
                "{text}: {}",
                err.message()
            );
        }
    }
}
