//! Findings as SARIF 2.1.0 (`harness runs show ID --sarif`, `harness report --sarif`): one SARIF
//! run whose tool is harness, a rule for every finding source and name that occurs, and a result
//! for every finding of each run's final verdict, so code scanning shows what harness blocked on.
//!
//! A result's `ruleId` is `SOURCE/NAME` (`gaming/ends-the-process`, `check/tests`,
//! `claim/file`), or `SOURCE` for a finding with no name. Blocking findings are `error`,
//! advisory ones `warning`. A finding with a file is located there, relative to the run's
//! workspace (`uriBaseId: WORKSPACE`, or `WORKSPACE_N` when the runs of a report worked in more
//! than one); one without is located at the delegation file that asked for the run.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::{Value, json};

use crate::journal::Record;
use harness::{Finding, Source};

/// The SARIF version written.
pub const SARIF_VERSION: &str = "2.1.0";
/// The schema a SARIF log names.
pub const SARIF_SCHEMA: &str =
    "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json";
/// The `uriBaseId` a result's file is relative to: the run's workspace.
pub const WORKSPACE_BASE: &str = "WORKSPACE";

/// A SARIF 2.1.0 log of the final findings of `records`, made by harness `version`.
pub fn sarif(records: &[Record], version: &str) -> Value {
    let bases = Bases::of(records);
    let mut rules: BTreeMap<String, Value> = BTreeMap::new();
    let mut results = Vec::new();
    for record in records {
        let Some(verdict) = record
            .attempts
            .iter()
            .rev()
            .find_map(|a| a.verdict.as_ref())
        else {
            continue;
        };
        for finding in &verdict.findings {
            let id = rule_id(finding);
            rules
                .entry(id.clone())
                .or_insert_with(|| rule(&id, finding));
            results.push(result(record, &bases, verdict.attempt, finding, id));
        }
    }
    let rule_index: BTreeMap<&String, usize> =
        rules.keys().enumerate().map(|(i, id)| (id, i)).collect();
    for result in &mut results {
        let index = result["ruleId"]
            .as_str()
            .and_then(|id| rule_index.get(&id.to_owned()).copied());
        result["ruleIndex"] = json!(index);
    }
    let run = json!({
        "tool": {"driver": {
            "name": "harness",
            "version": version,
            "semanticVersion": version,
            "rules": rules.into_values().collect::<Vec<_>>(),
        }},
        "results": results,
        "columnKind": "unicodeCodePoints",
        "originalUriBaseIds": bases.to_json(),
    });
    json!({
        "$schema": SARIF_SCHEMA,
        "version": SARIF_VERSION,
        "runs": [run],
    })
}

/// `SOURCE/NAME`, or `SOURCE` alone; a claim's by the rule that read it (`claim/file-verb`).
fn rule_id(finding: &Finding) -> String {
    if let (Source::Claim, Some(rule)) = (finding.source, &finding.rule) {
        format!("{}/{rule}", finding.source.as_str())
    } else if finding.name.is_empty() {
        finding.source.as_str().to_owned()
    } else {
        format!("{}/{}", finding.source.as_str(), finding.name)
    }
}

/// What a finding of `source` means, and what to do about it.
fn source_text(source: Source) -> (&'static str, &'static str) {
    match source {
        Source::Integrity => (
            "the attempt touched what judges it",
            "A protected gate input (a check, a verifier, the project policy) or harness's own state was changed: the verdict cannot rest on it. Undo the change; gate inputs are the operator's.",
        ),
        Source::Scope => (
            "changes outside the delegation's scope",
            "The attempt changed files its scope does not allow, or more than it allows. Keep the change within `scope`, or widen the scope in the delegation file.",
        ),
        Source::Check => (
            "a deterministic check failed",
            "A command of the delegation's `checks` failed on the attempt's workspace. Its evidence (exit code, output tail) is in the run's record: `harness runs show ID`.",
        ),
        Source::Criterion => (
            "an acceptance criterion does not hold",
            "A criterion of the delegation (a file, a command, a pattern) did not hold on the attempt's workspace.",
        ),
        Source::Verify => (
            "the inline verifier refused the answer",
            "The delegation's Starlark `verify` returned false or a reason.",
        ),
        Source::Hook => (
            "a policy hook refused the attempt",
            "A Starlark policy hook (`.harness/hooks`) refused the attempt; its message says why.",
        ),
        Source::Critic => (
            "the independent critic objected",
            "The critic model reviewed the change and the answer and objected; its review is in the run's record.",
        ),
        Source::Plan => (
            "a required step was not taken",
            "The delegation's `plan.required_steps` names a step the attempt's tool log does not show.",
        ),
        Source::Citation => (
            "a claim cites no evidence",
            "`citations: required`: every claim of the answer must cite the tool result it rests on.",
        ),
        Source::Claim => (
            "the answer claims what did not happen",
            "The answer states work (a written file, passing tests, a command run, a commit) that the tool log and the workspace do not show.",
        ),
        Source::Budget => (
            "a limit was reached",
            "The attempt ran out of turns, tokens or time.",
        ),
        Source::Gaming => (
            "the code under test games its tests",
            "The changed code special-cases the tested inputs, reads its caller, ends the test process or patches the test framework: it passes the tests without doing the work.",
        ),
        Source::Holdout => (
            "a holdout check failed",
            "A check the delegate never saw (`holdout`) failed on the attempt's workspace: the change passes the tests it was shown but not the behaviour they stand for.",
        ),
    }
}

/// The rule `id` is reported under, described from its first finding.
fn rule(id: &str, finding: &Finding) -> Value {
    let (short, help) = source_text(finding.source);
    let claim_rule = finding.rule.as_deref().and_then(harness::claims_rule);
    let (short, help) = match (finding.source, claim_rule) {
        (Source::Gaming, _) => {
            let (short, help) = harness::gaming_rule(&finding.name).unwrap_or((short, help));
            (short.to_owned(), help.to_owned())
        }
        (Source::Claim, Some((title, reads))) => (
            format!("the answer {title} that did not happen"),
            format!("{help} The claim was read from the answer by: {reads}."),
        ),
        _ => (short.to_owned(), help.to_owned()),
    };
    let level = if finding.blocking { "error" } else { "warning" };
    json!({
        "id": id,
        "name": id.replace(['/', '-', ' '], "_"),
        "shortDescription": {"text": short},
        "fullDescription": {"text": help},
        "help": {"text": help},
        "defaultConfiguration": {"level": level},
        "properties": {"source": finding.source.as_str()},
    })
}

/// The workspaces results are relative to, each a `uriBaseId`: `WORKSPACE` when the log has one,
/// else `WORKSPACE_1`, `WORKSPACE_2`, … in the order the runs come.
struct Bases<'a> {
    workdirs: Vec<&'a str>,
}

impl<'a> Bases<'a> {
    fn of(records: &'a [Record]) -> Self {
        let mut workdirs: Vec<&str> = Vec::new();
        for workdir in records.iter().filter_map(|r| r.workdir.as_deref()) {
            if !workdirs.contains(&workdir) {
                workdirs.push(workdir);
            }
        }
        Bases { workdirs }
    }

    /// The base id of `workdir`.
    fn id(&self, workdir: &str) -> String {
        match self.workdirs.iter().position(|w| *w == workdir) {
            Some(_) if self.workdirs.len() == 1 => WORKSPACE_BASE.to_owned(),
            Some(index) => format!("{WORKSPACE_BASE}_{}", index + 1),
            None => WORKSPACE_BASE.to_owned(),
        }
    }

    fn to_json(&self) -> Value {
        self.workdirs
            .iter()
            .map(|workdir| {
                (
                    self.id(workdir),
                    json!({
                        "uri": directory_uri(workdir),
                        "description": {"text": "The workspace the delegate worked in."},
                    }),
                )
            })
            .collect::<serde_json::Map<_, _>>()
            .into()
    }
}

/// One finding of `record`'s attempt `attempt` as a SARIF result.
fn result(
    record: &Record,
    bases: &Bases<'_>,
    attempt: u32,
    finding: &Finding,
    rule_id: String,
) -> Value {
    let level = if finding.blocking { "error" } else { "warning" };
    let location = match &finding.path {
        Some(path) => Some(file_location(record, bases, path, finding.line)),
        None => record
            .source
            .as_deref()
            .map(|source| file_location(record, bases, source, None)),
    };
    let mut result = json!({
        "ruleId": rule_id,
        "level": level,
        "message": {"text": finding.message},
        "properties": {
            "run_id": record.id,
            "attempt": attempt,
            "source": finding.source.as_str(),
            "severity": finding.severity.as_str(),
            "outcome": record.outcome,
        },
    });
    if let Some(location) = location {
        result["locations"] = json!([location]);
    }
    result
}

/// A physical location at `path` (and `line`), relative to the run's workspace when it is in
/// it.
fn file_location(record: &Record, bases: &Bases<'_>, path: &str, line: Option<u32>) -> Value {
    let workdir = record.workdir.as_deref();
    let relative = workdir
        .and_then(|workdir| Path::new(path).strip_prefix(workdir).ok())
        .map(|p| p.to_string_lossy().into_owned());
    let base = bases.id(workdir.unwrap_or_default());
    let artifact = match (relative, Path::new(path).is_absolute(), workdir) {
        (Some(relative), _, _) => json!({"uri": uri_path(&relative), "uriBaseId": base}),
        (None, false, Some(_)) => json!({"uri": uri_path(path), "uriBaseId": base}),
        (None, true, _) => json!({"uri": file_uri(path)}),
        (None, false, None) => json!({"uri": uri_path(path)}),
    };
    let mut physical = json!({"artifactLocation": artifact});
    if let Some(line) = line.filter(|l| *l > 0) {
        physical["region"] = json!({"startLine": line});
    }
    json!({"physicalLocation": physical})
}

/// `file:///dir/`: a directory as the absolute URI SARIF's base ids need (ending in `/`).
fn directory_uri(dir: &str) -> String {
    let mut uri = file_uri(dir);
    if !uri.ends_with('/') {
        uri.push('/');
    }
    uri
}

fn file_uri(path: &str) -> String {
    format!("file://{}", uri_path(path))
}

/// A path as the path of a URI: every byte but the unreserved ones and `/` percent-encoded.
fn uri_path(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    for byte in path.bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' | b'/' => {
                out.push(byte as char);
            }
            _ => out.push_str(&format!("%{byte:02X}")),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_uri_paths() {
        assert_eq!(uri_path("src/a b#.py"), "src/a%20b%23.py");
        assert_eq!(directory_uri("/w/ws"), "file:///w/ws/");
    }
}
