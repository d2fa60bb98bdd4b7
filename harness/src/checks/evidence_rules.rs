//! Stage 2b: what the answer and the attempt must contain, beyond what the checks ran (DESIGN
//! §4.13): citations for every claim under `citations: required`, and the plan's required
//! steps. The same rules judge a recorded run in `harness audit`.

use serde_json::Value;

use super::{Check, Subject};
use crate::delegate::BoxFuture;
use crate::error::Result;
use crate::verdict::{Finding, Source};

/// `citations: required`: every claim line of the answer cites its evidence.
#[derive(Debug)]
pub(crate) struct CitationStage {
    pub(crate) workspace: harness_builtins::Workspace,
}

impl Check for CitationStage {
    fn check<'a>(&'a self, subject: &'a mut Subject<'_>) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            let response = subject.result.response.clone();
            let workspace = self.workspace.clone();
            // File reads: off the async workers.
            let report = tokio::task::spawn_blocking(move || {
                harness_builtins::citation::check_response(&response, &workspace)
            })
            .await
            .map_err(|e| {
                crate::error::Error::new(
                    crate::error::ErrorKind::Check,
                    format!("the citation check failed to run: {e}"),
                )
            })?;
            for failure in report.failures {
                subject.findings.push(Finding::blocking(
                    Source::Citation,
                    failure.code,
                    format!("answer line {}: {}", failure.line, failure.message),
                ));
            }
            Ok(())
        })
    }
}

/// One required step of `plan.required_steps`.
#[derive(Debug, Clone)]
pub enum PlanStep {
    /// A tool call of this name whose arguments match every pattern (the whole value).
    Tool {
        /// The tool's name.
        name: String,
        /// Argument name and pattern, as written and compiled.
        args: Vec<(String, String, regex::Regex)>,
    },
    /// A check or criterion of this name that ran.
    Check(String),
}

impl PartialEq for PlanStep {
    fn eq(&self, other: &Self) -> bool {
        self.describe() == other.describe()
    }
}

impl PlanStep {
    /// The step in words, for findings: `tool run_command with argv ~ "cargo test.*"`.
    pub fn describe(&self) -> String {
        match self {
            PlanStep::Tool { name, args } if args.is_empty() => format!("tool {name}"),
            PlanStep::Tool { name, args } => {
                let args: Vec<String> = args
                    .iter()
                    .map(|(key, pattern, _)| format!("{key} ~ {pattern:?}"))
                    .collect();
                format!("tool {name} with {}", args.join(", "))
            }
            PlanStep::Check(name) => format!("check {name}"),
        }
    }

    /// The step as the export records it.
    pub fn to_json(&self) -> Value {
        match self {
            PlanStep::Tool { name, args } => serde_json::json!({
                "tool": name,
                "args": args.iter().map(|(k, p, _)| (k.clone(), Value::String(p.clone()))).collect::<serde_json::Map<_, _>>(),
            }),
            PlanStep::Check(name) => serde_json::json!({"check": name}),
        }
    }

    /// Whether the attempt with these tool calls and evidence took this step.
    pub fn taken(&self, tool_calls: &[Value], evidence: &[Value]) -> bool {
        match self {
            PlanStep::Tool { name, args } => tool_calls.iter().any(|call| {
                call["name"].as_str() == Some(name.as_str())
                    && args.iter().all(|(key, _, pattern)| {
                        let value = &call["arguments"][key.as_str()];
                        let text = match value {
                            Value::String(s) => s.clone(),
                            Value::Array(items) => items
                                .iter()
                                .map(|i| i.as_str().map_or_else(|| i.to_string(), str::to_owned))
                                .collect::<Vec<_>>()
                                .join(" "),
                            Value::Null => return false,
                            other => other.to_string(),
                        };
                        pattern.is_match(&text)
                    })
            }),
            PlanStep::Check(name) => evidence
                .iter()
                .any(|e| e["criterion"].as_str() == Some(name.as_str())),
        }
    }
}

/// `plan.required_steps`: each must be taken in the attempt.
#[derive(Debug)]
pub(crate) struct PlanStage {
    pub(crate) steps: Vec<PlanStep>,
}

impl Check for PlanStage {
    fn check<'a>(&'a self, subject: &'a mut Subject<'_>) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            let calls = subject.value["tool_calls"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            for step in &self.steps {
                if !step.taken(&calls, &subject.evidence) {
                    subject.findings.push(Finding::blocking(
                        Source::Plan,
                        "required_step",
                        format!(
                            "a required step of the plan was not taken in this attempt: {}",
                            step.describe()
                        ),
                    ));
                }
            }
            Ok(())
        })
    }
}
