//! What a policy under test reaches instead of the world: canned HTTP answers and program runs
//! ([`Mocks`]), read from a test's `http=` and `exec=` arguments, and the [`Mocked`]
//! interceptor that answers with them and counts coverage. The sandbox's capability checks run
//! first: a mock never lets a policy reach what the real run would refuse.

use std::any::Any;
use std::collections::BTreeMap;
use std::sync::Arc;

use harness_builtins::starlark::eval::Evaluator;
use harness_builtins::starlark::syntax::AstModule;
use harness_builtins::{HttpReply, Interceptor, ProgramReply};
use serde_json::{Map, Value as Json};

use crate::coverage::Coverage;

/// What `http` and `exec` answer in a policy test instead of reaching the network or starting a
/// program. A sandbox with mocks never does either: a URL or program without a mock is an error.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Mocks {
    /// Responses by exact URL (`http={url: {status, body, headers}}`, or `{error: "…"}` for a
    /// network failure).
    pub http: BTreeMap<String, HttpReply>,
    /// Runs by program, `argv[0]` (`exec={program: {exit_code, stdout, stderr}}`).
    pub exec: BTreeMap<String, ProgramReply>,
}

impl Mocks {
    /// Reads the `http=` and `exec=` arguments of a policy call (either may be `null`).
    ///
    /// # Errors
    /// What is malformed, naming the URL or program and the key.
    pub fn from_json(http: Option<&Json>, exec: Option<&Json>) -> Result<Mocks, String> {
        let mut mocks = Mocks::default();
        for (url, spec) in entries("http", http)? {
            let spec = fields(
                &format!("http mock {url:?}"),
                spec,
                &["status", "body", "headers", "error", "error_kind"],
            )?;
            let error = match spec.get("error") {
                None | Some(Json::Null) => None,
                Some(Json::String(e)) if spec.keys().all(|k| k == "error" || k == "error_kind") => {
                    Some(e.clone())
                }
                Some(Json::String(_)) => {
                    return Err(format!(
                        "http mock {url:?}: `error` is a network failure; it has no status, body or headers"
                    ));
                }
                Some(other) => {
                    return Err(format!(
                        "http mock {url:?}: `error` must be a string, got {other}"
                    ));
                }
            };
            const KINDS: [&str; 5] = ["timeout", "connect", "body", "redirects", "request"];
            let error_kind = match spec.get("error_kind") {
                None | Some(Json::Null) => None,
                Some(Json::String(kind)) if error.is_none() => {
                    return Err(format!(
                        "http mock {url:?}: `error_kind` {kind:?} without `error`; give the failure's words in `error` too"
                    ));
                }
                Some(Json::String(kind)) if KINDS.contains(&kind.as_str()) => Some(kind.clone()),
                Some(other) => {
                    return Err(format!(
                        "http mock {url:?}: `error_kind` is {other}; use one of {}",
                        KINDS.join(", ")
                    ));
                }
            };
            let status = match spec.get("status") {
                None | Some(Json::Null) => 200,
                Some(v) => v
                    .as_u64()
                    .and_then(|n| u16::try_from(n).ok())
                    .filter(|n| (100..=599).contains(n))
                    .ok_or_else(|| {
                        format!("http mock {url:?}: `status` must be an HTTP status code (100-599), got {v}")
                    })?,
            };
            let body = text_field(&format!("http mock {url:?}"), spec, "body")?;
            let mut headers = BTreeMap::new();
            match spec.get("headers") {
                None | Some(Json::Null) => {}
                Some(Json::Object(map)) => {
                    for (name, value) in map {
                        let Json::String(value) = value else {
                            return Err(format!(
                                "http mock {url:?}: header {name:?} must be a string"
                            ));
                        };
                        headers.insert(name.to_ascii_lowercase(), value.clone());
                    }
                }
                Some(_) => {
                    return Err(format!(
                        "http mock {url:?}: `headers` must be a dict of strings"
                    ));
                }
            }
            mocks.http.insert(
                url.clone(),
                HttpReply {
                    error,
                    error_kind,
                    status,
                    body,
                    headers,
                },
            );
        }
        for (program, spec) in entries("exec", exec)? {
            let what = format!("exec mock {program:?}");
            let spec = fields(&what, spec, &["exit_code", "stdout", "stderr"])?;
            let exit_code = match spec.get("exit_code") {
                None | Some(Json::Null) => 0,
                Some(v) => v
                    .as_i64()
                    .and_then(|n| i32::try_from(n).ok())
                    .ok_or_else(|| format!("{what}: `exit_code` must be an int, got {v}"))?,
            };
            mocks.exec.insert(
                program.clone(),
                ProgramReply {
                    exit_code,
                    stdout: text_field(&what, spec, "stdout")?,
                    stderr: text_field(&what, spec, "stderr")?,
                },
            );
        }
        Ok(mocks)
    }
}

impl Mocks {
    /// The response mocked for `url` (as the script wrote it, or as parsed: `http://h` and
    /// `http://h/` are one URL).
    pub fn response(&self, written: &str, parsed: &str) -> Result<&HttpReply, String> {
        self.http
            .get(written)
            .or_else(|| self.http.get(parsed))
            .ok_or_else(|| {
                let known: Vec<&str> = self.http.keys().map(String::as_str).collect();
                format!(
                    "no mock for {written} in this test; add it to `http = {{...}}` (mocked: {})",
                    if known.is_empty() {
                        "none".to_owned()
                    } else {
                        known.join(", ")
                    }
                )
            })
    }

    /// The run mocked for `program`.
    pub fn run(&self, program: &str) -> Result<&ProgramReply, String> {
        self.exec.get(program).ok_or_else(|| {
            let known: Vec<&str> = self.exec.keys().map(String::as_str).collect();
            format!(
                "no mock for program {program:?} in this test; add it to `exec = {{...}}` (mocked: {})",
                if known.is_empty() { "none".to_owned() } else { known.join(", ") }
            )
        })
    }
}

fn entries<'a>(name: &str, value: Option<&'a Json>) -> Result<Vec<(&'a String, &'a Json)>, String> {
    match value {
        None | Some(Json::Null) => Ok(Vec::new()),
        Some(Json::Object(map)) => Ok(map.iter().collect()),
        Some(other) => Err(format!(
            "`{name}=` must be a dict keyed by {}, got {other}",
            if name == "http" { "URL" } else { "program" }
        )),
    }
}

fn fields<'a>(what: &str, spec: &'a Json, known: &[&str]) -> Result<&'a Map<String, Json>, String> {
    let Json::Object(map) = spec else {
        return Err(format!("{what} must be a dict with {}", known.join(", ")));
    };
    if let Some(key) = map.keys().find(|k| !known.contains(&k.as_str())) {
        return Err(format!(
            "{what}: unknown key {key:?} (known: {})",
            known.join(", ")
        ));
    }
    Ok(map)
}

fn text_field(what: &str, spec: &Map<String, Json>, key: &str) -> Result<String, String> {
    match spec.get(key) {
        None | Some(Json::Null) => Ok(String::new()),
        Some(Json::String(s)) => Ok(s.clone()),
        Some(other) => Err(format!("{what}: `{key}` must be a string, got {other}")),
    }
}

/// The interceptor of one policy call: answers `http` and `exec` from its mocks (a URL or program
/// without one is the policy's error, never a real request) and adds what ran to the run's
/// coverage.
#[derive(Debug, Default)]
pub struct Mocked {
    /// The canned answers.
    pub mocks: Mocks,
    /// Where the statements that ran are counted, when the run counts them.
    pub coverage: Option<Arc<Coverage>>,
}

impl Interceptor for Mocked {
    fn http(&self, written: &str, parsed: &str) -> Option<Result<HttpReply, String>> {
        Some(self.mocks.response(written, parsed).cloned())
    }

    fn exec(&self, program: &str) -> Option<Result<ProgramReply, String>> {
        Some(self.mocks.run(program).cloned())
    }

    fn watches(&self) -> bool {
        self.coverage.is_some()
    }

    fn parsed(&self, name: &str, ast: &AstModule) {
        if let Some(coverage) = &self.coverage {
            coverage.register(name, ast);
        }
    }

    fn evaluated(&self, eval: &Evaluator<'_, '_, '_>) {
        if let Some(coverage) = &self.coverage {
            coverage.collect(eval);
        }
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}
