//! Stage 2b: what the answer and the attempt must contain, beyond what the checks ran (DESIGN
//! §4.13): citations for every claim under `citations: required`, and the plan's required
//! steps. The same rules judge a recorded run in `harness audit`. The `plan:` section is parsed
//! here too ([`PlanStep::parse_list`]).

use serde::Deserialize;
use serde_json::{Map, Value};

use super::{Check, Subject};
use crate::delegate::BoxFuture;
use crate::error::{Error, Result};
use crate::tools::Tool;
use crate::verdict::{Finding, Source};

/// `citations: required`: every claim line of the answer cites its evidence.
#[derive(Debug)]
pub(crate) struct CitationStage {
    workspace: harness_builtins::Workspace,
}

impl CitationStage {
    /// The stage for `citations: required` in `workspace`; `None` when citations are off.
    pub(crate) fn from_spec(
        required: bool,
        workspace: &harness_builtins::Workspace,
    ) -> Option<Self> {
        required.then(|| CitationStage {
            workspace: workspace.clone(),
        })
    }
}

/// `plan:` as written.
///
/// Steps every attempt must take; a step not taken is a blocking `plan` finding.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "plan")]
pub(crate) struct RawPlan {
    /// Each a tool call `{tool, args}` or a check or criterion that ran `{check}`.
    #[serde(default)]
    #[schemars(with = "Vec<StepForm>")]
    required_steps: Vec<Map<String, Value>>,
}

/// A `plan.required_steps` entry's shapes, declared for the schema (`harness schema`); the
/// parser reads each step as a mapping to name its fault.
#[derive(schemars::JsonSchema)]
#[serde(untagged)]
#[schemars(rename = "plan_step")]
#[expect(dead_code, reason = "declares the schema's shapes; never built")]
enum StepForm {
    /// A call of a built-in tool whose arguments match every pattern (anchored, whole value; a
    /// list is joined with spaces).
    #[schemars(extend("additionalProperties" = false))]
    Tool {
        /// The tool's name.
        tool: Tool,
        /// Argument name to a regular expression (Rust `regex` syntax) its value must match
        /// whole.
        #[serde(default)]
        args: std::collections::BTreeMap<String, String>,
    },
    /// A check or criterion (by name) that must have run in the attempt.
    #[schemars(extend("additionalProperties" = false))]
    Check {
        /// The check's or criterion's name.
        check: String,
    },
}

impl Check for CitationStage {
    fn name(&self) -> &'static str {
        "citations"
    }

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
    /// Validates `plan.required_steps` as written in `file`: each `{tool: NAME, args: {KEY:
    /// REGEX}}` or `{check: NAME}`.
    ///
    /// # Errors
    /// [`ErrorKind::Config`](crate::ErrorKind::Config) naming the step and what is wrong.
    pub(crate) fn parse_list(file: &str, raw: RawPlan) -> Result<Vec<PlanStep>> {
        let mut steps = Vec::new();
        for (i, step) in raw.required_steps.into_iter().enumerate() {
            let at = format!("{file}: `plan.required_steps[{i}]`");
            if let Some(key) = step
                .keys()
                .find(|k| !["tool", "args", "check"].contains(&k.as_str()))
            {
                return Err(Error::config(format!(
                    "{at}: unknown key `{key}`; a step is {{tool: NAME, args: {{ARG: REGEX}}}} or {{check: NAME}}"
                )));
            }
            match (step.get("tool"), step.get("check")) {
                (Some(Value::String(tool)), None) => {
                    if Tool::from_name(tool).is_none() {
                        return Err(Error::config(format!("{at}: unknown tool {tool:?}")));
                    }
                    let args = match step.get("args") {
                        None => Vec::new(),
                        Some(Value::Object(map)) => arg_patterns(&at, map)?,
                        Some(_) => {
                            return Err(Error::config(format!(
                                "{at}: `args` must map argument names to regular expressions"
                            )));
                        }
                    };
                    steps.push(PlanStep::Tool {
                        name: tool.clone(),
                        args,
                    });
                }
                (None, Some(Value::String(check))) if step.get("args").is_none() => {
                    steps.push(PlanStep::Check(check.clone()));
                }
                _ => {
                    return Err(Error::config(format!(
                        "{at}: give `tool` (with optional `args`) or `check`, as a name"
                    )));
                }
            }
        }
        Ok(steps)
    }

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

    /// Whether the attempt with these tool calls took this step, when the checks and criteria
    /// named `ran` ran in it.
    pub fn taken(&self, tool_calls: &[Value], ran: &[&str]) -> bool {
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
            PlanStep::Check(name) => ran.contains(&name.as_str()),
        }
    }
}

/// Compiles a step's `args` patterns, each anchored to the whole value.
fn arg_patterns(at: &str, map: &Map<String, Value>) -> Result<Vec<(String, String, regex::Regex)>> {
    let mut args = Vec::new();
    for (key, pattern) in map {
        let Value::String(pattern) = pattern else {
            return Err(Error::config(format!(
                "{at}: `args.{key}` must be a regular expression (a string)"
            )));
        };
        let compiled = regex::Regex::new(&format!("^(?:{pattern})$")).map_err(|e| {
            Error::config(format!(
                "{at}: `args.{key}` {pattern:?} does not compile: {e}"
            ))
        })?;
        args.push((key.clone(), pattern.clone(), compiled));
    }
    Ok(args)
}

/// `plan.required_steps`: each must be taken in the attempt.
#[derive(Debug)]
pub(crate) struct PlanStage {
    steps: Vec<PlanStep>,
}

impl PlanStage {
    /// The stage requiring `steps`; `None` when there are none.
    pub(crate) fn from_spec(steps: &[PlanStep]) -> Option<Self> {
        (!steps.is_empty()).then(|| PlanStage {
            steps: steps.to_vec(),
        })
    }
}

/// Builds the plan stage for [`STAGES`](crate::pipeline::STAGES).
///
/// # Errors
/// Never; the signature is every stage's.
pub(crate) fn plan(m: &mut crate::pipeline::Materials<'_>) -> Result<Option<Box<dyn Check>>> {
    Ok(PlanStage::from_spec(m.delegation.plan()).map(|c| Box::new(c) as Box<dyn Check>))
}

/// Builds the citation stage for [`STAGES`](crate::pipeline::STAGES).
///
/// # Errors
/// Never; the signature is every stage's.
pub(crate) fn citations(m: &mut crate::pipeline::Materials<'_>) -> Result<Option<Box<dyn Check>>> {
    Ok(
        CitationStage::from_spec(m.delegation.citations_required(), m.workspace)
            .map(|c| Box::new(c) as Box<dyn Check>),
    )
}

impl Check for PlanStage {
    fn name(&self) -> &'static str {
        "plan"
    }

    fn check<'a>(&'a self, subject: &'a mut Subject<'_>) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            let Subject {
                value,
                evidence,
                findings,
                ..
            } = subject;
            let calls: &[serde_json::Value] =
                value["tool_calls"].as_array().map_or(&[], Vec::as_slice);
            let ran: Vec<&str> = evidence.iter().map(|e| e.criterion.as_str()).collect();
            for step in &self.steps {
                if !step.taken(calls, &ran) {
                    findings.push(Finding::blocking(
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
