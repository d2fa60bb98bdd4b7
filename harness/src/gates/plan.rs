//! `plan:` (DESIGN §4.13): the steps every attempt must take, as written and read.

use serde::Deserialize;
use serde_json::{Map, Value};

use crate::error::{Error, Result};
use crate::tools::Tool;

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
