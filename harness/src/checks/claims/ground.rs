//! Grounding: the attempt's tool log read as calls — the files each wrote, the commands it
//! ran, whether it succeeded — with the write tools of harness and of every agent CLI.

use std::collections::HashMap;

use harness_hooks::ToolResult;
use serde_json::Value;

use super::Ground;

/// Write tools besides the agent CLIs' (each declares its own: `Adapter::write_tools`):
/// harness's own `write_file`, and names models commonly give such tools — harness refuses a
/// call to one it does not offer, and the claim's finding names that failed write.
pub(super) const OWN_WRITE_TOOLS: &[&str] = &[
    "write_file",
    "create_file",
    "edit_file",
    "str_replace_editor",
    "str_replace_based_edit_tool",
    "patch",
];

/// The argument keys of a write call that hold its path, besides the agent CLIs'
/// (`Adapter::path_keys`).
pub(super) const OWN_PATH_KEYS: &[&str] = &["path", "filename", "target_file", "file"];

/// Every write tool and path key: harness's own and every agent CLI's, whichever delegate (or
/// critic, or child) made the call.
pub(super) static WRITES: std::sync::LazyLock<(Vec<&'static str>, Vec<&'static str>)> =
    std::sync::LazyLock::new(|| {
        let mut tools = OWN_WRITE_TOOLS.to_vec();
        let mut keys = OWN_PATH_KEYS.to_vec();
        for kind in crate::delegate::AgentKind::ALL {
            tools.extend(kind.write_tools());
            keys.extend(kind.path_keys());
        }
        tools.sort_unstable();
        tools.dedup();
        keys.sort_unstable();
        keys.dedup();
        (tools, keys)
    });

/// The simple commands of a command line: each a program and its arguments, with `sh -c`
/// scripts opened, environment assignments and `cd DIR` steps left out. `echo cargo test` is
/// the program `echo`, not a test run.
pub(super) fn simple_commands(text: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let mut words: Vec<String> = Vec::new();
    let flush = |words: &mut Vec<String>, out: &mut Vec<Vec<String>>| {
        let command: Vec<String> = std::mem::take(words)
            .into_iter()
            .skip_while(|w| w.contains('=') && !w.starts_with('-'))
            .collect();
        match command.first().map(|p| p.rsplit('/').next().unwrap_or(p)) {
            None | Some("cd") => {}
            Some("sh" | "bash" | "zsh") if command.get(1).is_some_and(|f| f == "-c") => {
                if let Some(script) = command.get(2) {
                    out.extend(simple_commands(script));
                }
            }
            Some(_) => out.push(command),
        }
    };
    for word in crate::integrity::shell_words(text) {
        if matches!(word.as_str(), "&&" | "||" | ";" | "|" | "&") {
            flush(&mut words, &mut out);
        } else {
            words.push(word);
        }
    }
    flush(&mut words, &mut out);
    out
}

/// Whether a command line runs tests: a test runner as its program (`pytest`, `jest`,
/// `./test.sh`), or a build tool with a test subcommand (`cargo test`, `go test`, `npm test`,
/// `make check`, `python -m pytest`).
pub(super) fn is_test_command(text: &str) -> bool {
    simple_commands(text).iter().any(|command| {
        // Wrappers run the program after them: `npx jest`, `bundle exec rspec`, `uv run pytest`.
        let mut at = 0;
        loop {
            let name = command[at].rsplit('/').next().unwrap_or(&command[at]);
            let skip = match name {
                "npx" | "bunx" | "pnpx" | "env" | "time" | "nice" | "xvfb-run" => 1,
                "bundle" | "poetry" | "uv" | "pipenv" | "hatch" | "pdm" | "rye"
                    if command
                        .get(at + 1)
                        .is_some_and(|w| matches!(w.as_str(), "exec" | "run")) =>
                {
                    2
                }
                "timeout" => 2,
                _ => 0,
            };
            if skip == 0 || at + skip >= command.len() {
                break;
            }
            at += skip;
        }
        let command = &command[at..];
        let program = command[0]
            .rsplit('/')
            .next()
            .unwrap_or(&command[0])
            .to_ascii_lowercase();
        let rest: Vec<&str> = command[1..].iter().map(String::as_str).collect();
        let sub = rest
            .iter()
            .find(|w| !w.starts_with('-'))
            .copied()
            .unwrap_or_default();
        match program.as_str() {
            "pytest" | "py.test" | "jest" | "vitest" | "mocha" | "rspec" | "phpunit" | "ctest"
            | "tox" | "nox" | "bats" | "karma" | "ava" | "tap" | "playwright" => true,
            "cargo" => matches!(sub, "test" | "nextest" | "t"),
            "go" | "deno" | "bun" | "dotnet" | "swift" | "mix" | "zig" => sub == "test",
            "npm" | "yarn" | "pnpm" => {
                sub == "test"
                    || sub == "t"
                    || (sub == "run" && rest.iter().any(|w| w.contains("test")))
            }
            "make" | "gmake" => rest
                .iter()
                .any(|w| matches!(*w, "test" | "tests" | "check")),
            "gradle" | "gradlew" | "mvn" | "mvnw" => rest
                .iter()
                .any(|w| w.contains("test") || *w == "check" || *w == "verify"),
            "python" | "python3" => rest
                .windows(2)
                .any(|w| w[0] == "-m" && matches!(w[1], "pytest" | "unittest" | "tox" | "nose2")),
            "sh" | "bash" => rest.first().is_some_and(|f| f.contains("test")),
            // `test -f x` and `[ … ]` are the shell's test, not a test run.
            "test" | "[" | "[[" => false,
            _ => program.contains("test"),
        }
    })
}

/// One tool call as the checks read it: its command text (for shells), the files it wrote,
/// whether it succeeded.
pub(super) struct Call {
    pub(super) command: Option<String>,
    pub(super) wrote: Vec<(String, bool)>,
    pub(super) ok: bool,
    /// The first line of its result, for messages.
    pub(super) said: String,
}

/// Whether a command line runs `program` (and `sub`, when given) as a simple command.
pub(super) fn runs(text: &str, program: &str, sub: Option<&str>) -> bool {
    simple_commands(text).iter().any(|command| {
        let name = command[0].rsplit('/').next().unwrap_or(&command[0]);
        name == program
            && sub.is_none_or(|sub| {
                sub.split_whitespace()
                    .all(|part| command[1..].iter().any(|w| w == part))
            })
    })
}

pub(super) fn calls(ground: &Ground<'_>) -> Vec<Call> {
    let results: HashMap<&str, &ToolResult> = ground
        .results
        .iter()
        .map(|r| (r.call_id.as_str(), r))
        .collect();
    ground
        .calls
        .iter()
        .map(|call| {
            let result = results.get(call.id.as_str());
            let content = result.map_or("", |r| r.content.as_str());
            // `exit code 1` at the top of a `run_command` result is a failure whatever the flag.
            let exit_failed = content
                .strip_prefix("exit code ")
                .and_then(|r| r.split_whitespace().next())
                .is_some_and(|code| code != "0");
            let ok = result.is_some_and(|r| !r.is_error) && !exit_failed;
            let args = &call.arguments;
            let command = ["command", "argv", "cmd", "script"]
                .iter()
                .find_map(|k| args.get(*k))
                .map(|v| match v {
                    Value::Array(items) => items
                        .iter()
                        .filter_map(Value::as_str)
                        .collect::<Vec<_>>()
                        .join(" "),
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                });
            let mut wrote = Vec::new();
            let name = call.name.to_ascii_lowercase();
            let (write_tools, path_keys) = &*WRITES;
            if write_tools.contains(&name.as_str()) {
                for key in path_keys {
                    if let Some(Value::String(path)) = args.get(*key) {
                        wrote.push((path.clone(), false));
                    }
                }
                if let Some(Value::Array(changes)) = args.get("changes") {
                    for change in changes {
                        if let Some(path) = change.get("path").and_then(Value::as_str) {
                            let delete =
                                change.get("kind").and_then(Value::as_str) == Some("delete");
                            wrote.push((path.to_owned(), delete));
                        }
                    }
                }
                for key in ["input", "patch"] {
                    if let Some(Value::String(patch)) = args.get(key) {
                        for line in patch.lines() {
                            for (prefix, delete) in [
                                ("*** Add File: ", false),
                                ("*** Update File: ", false),
                                ("*** Delete File: ", true),
                                ("+++ b/", false),
                            ] {
                                if let Some(path) = line.strip_prefix(prefix) {
                                    wrote.push((path.trim().to_owned(), delete));
                                }
                            }
                        }
                    }
                }
            }
            Call {
                command,
                wrote,
                ok,
                said: content
                    .lines()
                    .next()
                    .unwrap_or_default()
                    .chars()
                    .take(160)
                    .collect(),
            }
        })
        .collect()
}

/// Path components, with the workspace root taken off an absolute path.
pub(super) fn components<'p>(path: &'p str, root: &str) -> Vec<&'p str> {
    let path = path.strip_prefix(root).unwrap_or(path);
    path.split('/')
        .filter(|p| !p.is_empty() && *p != ".")
        .collect()
}

/// Whether a claimed path names `actual` (a workspace path): the same path, the one a suffix
/// of the other by whole components, or `actual` inside a claimed directory.
pub(super) fn names(claimed: &str, actual: &str, root: &str) -> bool {
    let c = components(claimed, root);
    let a = components(actual, root);
    if c.is_empty() || a.is_empty() {
        return false;
    }
    // The claim may name less than the path (`parser.rs` for `src/parser.rs`), never more
    // (`tests/test_api.py` is not `test_api.py`); an absolute claim outside the root is
    // compared by what it ends with.
    if a.ends_with(&c) || (claimed.starts_with('/') && c.ends_with(&a)) {
        return true;
    }
    // A directory: `legacy/` names `legacy/a.py` and `pkg/legacy/b.py`.
    let directory = claimed.ends_with('/') || !c.last().is_some_and(|l| l.contains('.'));
    directory
        && a.windows(c.len())
            .take(a.len() - 1)
            .any(|w| w == c.as_slice())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The write tools and path keys the claims stage grounds file claims in come from harness
    /// and from each agent CLI's adapter; every CLI's write tool is among them, lowercase as
    /// calls are compared. (A CLI whose write tool were missing would have every honest file
    /// claim flagged.)
    #[test]
    fn write_tools_are_harness_own_and_each_agent_clis() {
        let (tools, keys) = &*WRITES;
        for kind in crate::delegate::AgentKind::ALL {
            for tool in kind.write_tools() {
                assert_eq!(*tool, tool.to_ascii_lowercase(), "{kind:?}");
                assert!(tools.contains(tool), "{kind:?}: {tool}");
            }
            for key in kind.path_keys() {
                assert!(keys.contains(key), "{kind:?}: {key}");
            }
        }
        // What Claude Code, Codex and Gemini CLI name their writes.
        for (kind, tool) in [
            (crate::delegate::AgentKind::Claude, "write"),
            (crate::delegate::AgentKind::Claude, "multiedit"),
            (crate::delegate::AgentKind::Codex, "file_change"),
            (crate::delegate::AgentKind::Gemini, "replace"),
        ] {
            assert!(kind.write_tools().contains(&tool), "{kind:?}: {tool}");
        }
        assert!(tools.contains(&"write_file") && keys.contains(&"path"));
    }
}
