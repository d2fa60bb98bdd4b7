//! `criteria:` entries (DESIGN §4.7): facts every attempt must make true, as written and read.

use std::time::Duration;

use serde_json::{Map, Value};

use super::checks::CheckSpec;
use crate::error::{Error, Result};

/// The criterion kinds, for messages.
const CRITERIA_HINT: &str = "\"file_exists:PATH\", \"no_placeholders:GLOB\", \"endpoint:URL\" or {endpoint: URL, status: 200, body_contains: \"…\", timeout_s: 5}, or {command: \"…\", name: compiles | lint_passes | tests_pass | …}";

/// One criterion of a delegation file's `criteria:` that is not a command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Criterion {
    /// `file_exists:PATH` — a regular file of at least one byte.
    FileExists(String),
    /// `no_placeholders:GLOB` — no placeholder marker in any file the glob matches.
    NoPlaceholders(String),
    /// `no_new_skips` or `no_new_skips:GLOB` — the attempt's diff adds no test-skip marker to
    /// a test file (the glob, or the common test locations of `protect`'s default).
    NoNewSkips(Option<String>),
    /// `endpoint: URL` — a GET of the URL answers `status` (and its body holds `body_contains`).
    /// The host is the policy author's, named exactly, so a local address is allowed; redirects
    /// are not followed (a hop elsewhere would leave what the author named).
    Endpoint {
        /// An `http` or `https` URL.
        url: String,
        /// The status expected (default 200).
        status: u16,
        /// A substring the body must hold.
        body_contains: Option<String>,
        /// How long the request may take (default 5 s).
        timeout: std::time::Duration,
    },
}

/// The shapes a `criteria:` entry may take, declared for the schema (`harness schema`): the
/// parser below reads each entry as a JSON value so that its message can name the entry's fault.
/// A criterion kind is one variant of [`Criterion`], its parsing in [`Criterion::parse_list`] and
/// its shape here.
#[derive(schemars::JsonSchema)]
#[serde(untagged)]
#[schemars(
    description = "A fact every attempt must make true: `file_exists:PATH`, `no_placeholders:GLOB`, `no_new_skips[:GLOB]`, `endpoint:URL`, or a mapping."
)]
#[schemars(rename = "criterion")]
#[expect(dead_code, reason = "declares the schema's shapes; never built")]
pub(crate) enum CriterionForm {
    /// `no_new_skips`: the attempt's diff adds no test-skip marker to a test file.
    #[schemars(extend("pattern" = r"^\s*no_new_skips\s*$"))]
    NoNewSkips(String),
    /// `KIND:TARGET` with KIND file_exists, no_placeholders, no_new_skips or endpoint.
    #[schemars(extend(
        "pattern" = r"^\s*(file_exists|no_placeholders|no_new_skips|endpoint)\s*:\s*\S"
    ))]
    Short(String),
    /// A command criterion: a shell command run as a check is, judged by its exit code.
    #[schemars(extend("additionalProperties" = false))]
    Command {
        /// The shell command (`sh -c`).
        #[schemars(regex(pattern = r"\S"))]
        command: String,
        /// Its name, unique among checks and command criteria.
        #[schemars(regex(pattern = r"\S"))]
        name: String,
        /// Seconds before it is killed, more than 0, at most 86400 (default 300).
        #[schemars(extend("exclusiveMinimum" = 0, "maximum" = 86400))]
        #[serde(default)]
        #[schemars(with = "f64")]
        timeout_s: Option<f64>,
    },
    /// An endpoint criterion: a GET (no redirects, no proxy) that must answer `status` and,
    /// optionally, contain `body_contains`.
    #[schemars(extend("additionalProperties" = false))]
    Endpoint {
        /// An http(s) URL with a host.
        #[schemars(regex(pattern = r"^\s*[Hh][Tt][Tt][Pp][Ss]?://"))]
        endpoint: String,
        /// The status expected, 100 to 599 (default 200).
        #[schemars(range(min = 100, max = 599))]
        #[serde(default)]
        #[schemars(with = "u16")]
        status: Option<u16>,
        /// A substring the body (its first MiB) must contain.
        #[schemars(length(min = 1))]
        body_contains: Option<String>,
        /// Seconds the request may take, more than 0, at most 3600 (default 5).
        #[schemars(extend("exclusiveMinimum" = 0, "maximum" = 3600))]
        #[serde(default)]
        #[schemars(with = "f64")]
        timeout_s: Option<f64>,
    },
    /// A criterion as a one-key mapping, `{file_exists: PATH}` and the like.
    #[schemars(extend("additionalProperties" = false, "minProperties" = 1, "maxProperties" = 1))]
    Keyed {
        /// A regular file of at least one byte, relative to the workspace.
        #[schemars(regex(pattern = r"\S"))]
        #[serde(default)]
        #[schemars(with = "String")]
        file_exists: Option<String>,
        /// A glob: no TODO, TBD, FIXME, XXX, [INSERT], [IMPLEMENT], todo!(), unimplemented!()
        /// in the files it matches.
        #[schemars(regex(pattern = r"\S"))]
        #[serde(default)]
        #[schemars(with = "String")]
        no_placeholders: Option<String>,
        /// A glob of test files the diff may add no skip marker to.
        #[schemars(regex(pattern = r"\S"))]
        #[serde(default)]
        #[schemars(with = "String")]
        no_new_skips: Option<String>,
    },
}

impl Criterion {
    /// Validates `criteria:` entries as written in `file`: the command criteria (run as checks)
    /// and the others.
    ///
    /// # Errors
    /// [`ErrorKind::Config`](crate::ErrorKind::Config) naming the entry, what is wrong and the kinds there are.
    pub(crate) fn parse_list(file: &str, raw: Vec<Value>) -> Result<(Vec<CheckSpec>, Vec<Self>)> {
        let mut out = Vec::new();
        let mut checks: Vec<CheckSpec> = Vec::new();
        for (i, entry) in raw.into_iter().enumerate() {
            let at = format!("{file}: `criteria[{i}]`");
            let bad = |why: String| {
                Error::config(format!("{at}: {why} (a criterion is {CRITERIA_HINT})"))
            };
            let (kind, target) = match &entry {
                Value::String(text) if text.trim() == "no_new_skips" => {
                    out.push(Criterion::NoNewSkips(None));
                    continue;
                }
                Value::String(text) => match text.split_once(':') {
                    Some((kind, target)) => (
                        kind.trim().to_owned(),
                        Value::String(target.trim().to_owned()),
                    ),
                    None => return Err(bad(format!("{text:?} has no `kind:target` form"))),
                },
                Value::Object(map) if map.contains_key("command") => {
                    let check = command(map).map_err(bad)?;
                    if checks.iter().any(|c| c.name == check.name) {
                        return Err(bad(format!(
                            "a criterion named {:?} is already defined",
                            check.name
                        )));
                    }
                    checks.push(check);
                    continue;
                }
                Value::Object(map) if map.contains_key("endpoint") => {
                    out.push(endpoint_spec(map).map_err(bad)?);
                    continue;
                }
                Value::Object(map) if map.len() == 1 => {
                    let (kind, target) = map.iter().next().expect("one entry");
                    (kind.clone(), target.clone())
                }
                other => return Err(bad(format!("{other} is not a criterion"))),
            };
            let Some(target) = target
                .as_str()
                .map(str::trim)
                .filter(|t| !t.is_empty())
                .map(str::to_owned)
            else {
                return Err(bad(format!("`{kind}` needs a path or glob")));
            };
            out.push(match kind.as_str() {
                "file_exists" => Criterion::FileExists(target),
                "endpoint" => {
                    let mut map = Map::new();
                    map.insert("endpoint".to_owned(), Value::String(target));
                    endpoint_spec(&map).map_err(bad)?
                }
                "no_placeholders" => {
                    globset::Glob::new(&target)
                        .map_err(|e| bad(format!("the glob {target:?} does not compile: {e}")))?;
                    Criterion::NoPlaceholders(target)
                }
                "no_new_skips" => {
                    globset::Glob::new(&target)
                        .map_err(|e| bad(format!("the glob {target:?} does not compile: {e}")))?;
                    Criterion::NoNewSkips(Some(target))
                }
                other => return Err(bad(format!("unknown criterion kind {other:?}"))),
            });
        }
        Ok((checks, out))
    }

    /// The criterion's name in findings and evidence, e.g. `file_exists:src/lib.rs`.
    pub fn name(&self) -> String {
        match self {
            Criterion::FileExists(path) => format!("file_exists:{path}"),
            Criterion::NoPlaceholders(glob) => format!("no_placeholders:{glob}"),
            Criterion::NoNewSkips(None) => "no_new_skips".to_owned(),
            Criterion::NoNewSkips(Some(glob)) => format!("no_new_skips:{glob}"),
            Criterion::Endpoint { url, .. } => format!("endpoint:{url}"),
        }
    }

    /// The kind and what it looks at, for evidence records.
    pub(crate) fn method_and_target(&self) -> (&'static str, &str) {
        match self {
            Criterion::FileExists(path) => ("file_exists", path),
            Criterion::NoPlaceholders(glob) => ("no_placeholders", glob),
            Criterion::NoNewSkips(glob) => {
                ("no_new_skips", glob.as_deref().unwrap_or("test files"))
            }
            Criterion::Endpoint { url, .. } => ("endpoint", url),
        }
    }
}

/// Validates a command criterion, `{command, name, timeout_s}`.
fn command(map: &Map<String, Value>) -> std::result::Result<CheckSpec, String> {
    let command = map
        .get("command")
        .and_then(Value::as_str)
        .filter(|c| !c.trim().is_empty());
    let name = map
        .get("name")
        .and_then(Value::as_str)
        .filter(|n| !n.trim().is_empty());
    let (Some(command), Some(name)) = (command, name) else {
        return Err("a command criterion needs `command` (a shell command) and `name`".to_owned());
    };
    if let Some(key) = map
        .keys()
        .find(|k| !["command", "name", "timeout_s"].contains(&k.as_str()))
    {
        return Err(format!("unknown key `{key}` in a command criterion"));
    }
    let timeout = timeout_s(map, 300.0, 86_400.0)?;
    Ok(CheckSpec::shell(name, command, timeout, true))
}

/// A criterion's `timeout_s`: `default` seconds when absent, else more than 0 and at most `max`.
fn timeout_s(
    map: &Map<String, Value>,
    default: f64,
    max: f64,
) -> std::result::Result<Duration, String> {
    let Some(value) = map.get("timeout_s") else {
        return Ok(Duration::from_secs_f64(default));
    };
    value
        .as_f64()
        .filter(|s| s.is_finite() && *s > 0.0 && *s <= max)
        .map(Duration::from_secs_f64)
        .ok_or_else(|| {
            format!("`timeout_s` is {value}; give seconds, more than 0 and at most {max}")
        })
}

/// Validates the mapping form of an `endpoint` criterion.
fn endpoint_spec(map: &Map<String, Value>) -> std::result::Result<Criterion, String> {
    if let Some(key) = map
        .keys()
        .find(|k| !["endpoint", "status", "body_contains", "timeout_s"].contains(&k.as_str()))
    {
        return Err(format!("unknown key `{key}` in an endpoint criterion"));
    }
    let url = map
        .get("endpoint")
        .and_then(Value::as_str)
        .map(str::trim)
        .unwrap_or_default();
    match reqwest::Url::parse(url) {
        Ok(parsed) if matches!(parsed.scheme(), "http" | "https") && parsed.host().is_some() => {}
        Ok(_) => {
            return Err(format!(
                "the endpoint {url:?} is not an http(s) URL with a host"
            ));
        }
        Err(e) => return Err(format!("the endpoint {url:?} is not a URL: {e}")),
    }
    let status = match map.get("status") {
        None => 200,
        Some(value) => match value.as_u64().and_then(|n| u16::try_from(n).ok()) {
            Some(n) if (100..=599).contains(&n) => n,
            _ => {
                return Err(format!(
                    "`status` is {value}; give an HTTP status, 100 to 599"
                ));
            }
        },
    };
    let body_contains = match map.get("body_contains") {
        None | Some(Value::Null) => None,
        Some(Value::String(text)) if !text.is_empty() => Some(text.clone()),
        Some(other) => {
            return Err(format!(
                "`body_contains` is {other}; give a non-empty string"
            ));
        }
    };
    let timeout = timeout_s(map, 5.0, 3600.0)?;
    Ok(Criterion::Endpoint {
        url: url.to_owned(),
        status,
        body_contains,
        timeout,
    })
}
