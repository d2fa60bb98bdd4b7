//! One hook artifact: a Markdown file whose YAML front matter configures a Starlark policy.

use std::path::{Path, PathBuf};

use globset::{Glob, GlobSet, GlobSetBuilder};
use harness_builtins::{Engine, Sandbox, Script};
use serde::de::DeserializeOwned;

use crate::event::Event;

/// The front-matter keys a hook may have.
const KEYS: [&str; 7] = [
    "event",
    "priority",
    "when",
    "script",
    "script_file",
    "tools",
    "delegates",
];

#[derive(Debug, Default)]
struct FrontMatter {
    event: Option<String>,
    priority: Option<i64>,
    when: Option<String>,
    script: Option<String>,
    script_file: Option<PathBuf>,
    tools: Option<Vec<String>>,
    delegates: Option<Vec<String>>,
    /// Keys that were given with a value of the wrong type (already reported, so not "missing").
    broken: Vec<&'static str>,
}

impl FrontMatter {
    /// Reads the known keys of `mapping` one by one, so that every unknown key and every
    /// mistyped value is reported, each at its line (found by `line_of`).
    fn read(
        mapping: serde_norway::Mapping,
        line_of: impl Fn(&str) -> Option<usize>,
        problems: &mut Vec<(Option<usize>, String)>,
    ) -> FrontMatter {
        fn take<T: DeserializeOwned>(
            key: &'static str,
            value: serde_norway::Value,
            slot: &mut Option<T>,
            fm_broken: &mut Vec<&'static str>,
            problem: impl FnOnce(String),
        ) {
            match serde_norway::from_value(value) {
                Ok(v) => *slot = Some(v),
                Err(e) => {
                    fm_broken.push(key);
                    problem(format!(
                        "front matter: `{key}`: {}",
                        strip_location(&e.to_string())
                    ));
                }
            }
        }
        let mut fm = FrontMatter::default();
        for (key, value) in mapping {
            let Some(name) = key.as_str() else {
                problems.push((
                    None,
                    format!("front matter: the key {key:?} is not a string"),
                ));
                continue;
            };
            let Some(key) = KEYS.iter().copied().find(|k| *k == name) else {
                problems.push((
                    line_of(name),
                    format!(
                        "front matter: unknown key `{name}` (known keys: {})",
                        KEYS.join(", ")
                    ),
                ));
                continue;
            };
            let line = line_of(key);
            let mut report = |message: String| problems.push((line, message));
            let broken = &mut fm.broken;
            match key {
                "event" => take(key, value, &mut fm.event, broken, &mut report),
                "priority" => take(key, value, &mut fm.priority, broken, &mut report),
                "when" => take(key, value, &mut fm.when, broken, &mut report),
                "script" => take(key, value, &mut fm.script, broken, &mut report),
                "script_file" => take(key, value, &mut fm.script_file, broken, &mut report),
                "tools" => take(key, value, &mut fm.tools, broken, &mut report),
                _ => take(key, value, &mut fm.delegates, broken, &mut report),
            }
        }
        fm
    }
}

/// A problem found while loading hooks, with the file and (when known) the line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The hook file.
    pub path: PathBuf,
    /// The 1-based line in that file, when known.
    pub line: Option<usize>,
    /// What is wrong and how to fix it.
    pub message: String,
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.line {
            Some(line) => write!(f, "{}:{line}: {}", self.path.display(), self.message),
            None => write!(f, "{}: {}", self.path.display(), self.message),
        }
    }
}

/// A glob list matched against a tool name or a delegate kind.
#[derive(Debug, Clone)]
pub struct Matcher {
    patterns: Vec<String>,
    set: GlobSet,
}

impl Matcher {
    fn new(patterns: &[String]) -> Result<Matcher, String> {
        let mut builder = GlobSetBuilder::new();
        for pattern in patterns {
            builder.add(Glob::new(pattern).map_err(|e| format!("bad glob {pattern:?}: {e}"))?);
        }
        let set = builder.build().map_err(|e| e.to_string())?;
        Ok(Matcher {
            patterns: patterns.to_vec(),
            set,
        })
    }

    /// Returns true when any of `names` matches a pattern.
    pub fn matches_any(&self, names: &[&str]) -> bool {
        names.iter().any(|n| self.set.is_match(n))
    }

    /// Returns the patterns as written.
    pub fn patterns(&self) -> &[String] {
        &self.patterns
    }
}

/// A loaded, compiled hook.
#[derive(Debug)]
pub struct Hook {
    /// The file name without `.md`.
    pub name: String,
    /// The file it came from.
    pub path: PathBuf,
    /// The event it handles.
    pub event: Event,
    /// Lower runs first; ties go by name.
    pub priority: i64,
    /// The `when` expression as written.
    pub when_source: Option<String>,
    /// Tool-name globs (tool events).
    pub tools: Option<Matcher>,
    /// Delegate-kind globs (delegation events).
    pub delegates: Option<Matcher>,
    /// The file holding the Starlark: the hook file for `script`, the named file for
    /// `script_file`.
    pub script_path: PathBuf,
    /// The line of `script_path` on which the script's line 1 sits.
    pub script_line: usize,
    pub(crate) script: Script,
    pub(crate) when: Option<Script>,
}

impl Hook {
    /// Returns true when the hook's `handle` or `when` uses builtins that wait on the outside
    /// world, so it only runs on a blocking thread.
    pub fn needs_thread(&self) -> bool {
        self.script.needs_thread() || self.when.as_ref().is_some_and(Script::needs_thread)
    }
}

/// Splits `---` front matter from the body; returns the YAML and the 1-based line it starts on.
fn front_matter(text: &str) -> Option<(&str, usize)> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut lines = text.split_inclusive('\n');
    let first = lines.next()?;
    if first.trim_end() != "---" {
        return None;
    }
    let start = first.len();
    let mut offset = start;
    for line in lines {
        if matches!(line.trim_end(), "---" | "...") {
            return Some((&text[start..offset], 2));
        }
        offset += line.len();
    }
    None
}

/// Finds the file line on which a `script: |` block's first line sits.
fn script_first_line(yaml: &str, yaml_line: usize) -> Option<usize> {
    yaml.lines()
        .position(|l| {
            let l = l.trim_end();
            l.starts_with("script:")
                && (l.ends_with('|') || l.ends_with('>') || l.ends_with("|-") || l.ends_with("|+"))
        })
        .map(|i| yaml_line + i + 1)
}

/// Finds the file line of the top-level front-matter key `key`, so problems with its value can
/// point at it.
fn key_line(yaml: &str, yaml_line: usize, key: &str) -> Option<usize> {
    yaml.lines()
        .position(|l| {
            l.strip_prefix(key)
                .is_some_and(|rest| rest.starts_with(':'))
        })
        .map(|i| yaml_line + i)
}

/// Drops serde's trailing ` at line L column C`, which counts from the front matter, not the file.
fn strip_location(message: &str) -> &str {
    match message.rfind(" at line ") {
        Some(i) => &message[..i],
        None => message,
    }
}

/// Loads and compiles one hook file, returning every problem found in it.
pub(crate) fn load(engine: &Engine, sandbox: &Sandbox, path: &Path) -> Result<Hook, Vec<Problem>> {
    let problem = |line: Option<usize>, message: String| {
        vec![Problem {
            path: path.to_path_buf(),
            line,
            message,
        }]
    };
    let text = harness_builtins::read_regular(path, harness_builtins::MAX_POLICY_BYTES)
        .map_err(|e| problem(None, format!("cannot read: {e}")))?;
    let Some((yaml, yaml_line)) = front_matter(&text) else {
        return Err(problem(
            Some(1),
            "no YAML front matter: start the file with a `---` line, then `event: ...` and `script: |`, then a closing `---` line".to_owned(),
        ));
    };
    let mapping = serde_norway::from_str::<Option<serde_norway::Mapping>>(yaml).map_err(|e| {
        problem(
            e.location().map(|l| yaml_line + l.line() - 1),
            format!("front matter: {}", strip_location(&e.to_string())),
        )
    })?;
    let mut loading = Loading {
        path,
        yaml,
        yaml_line,
        problems: Vec::new(),
    };
    let mut found = Vec::new();
    let fm = FrontMatter::read(
        mapping.unwrap_or_default(),
        |k| loading.line_of(k),
        &mut found,
    );
    for (line, message) in found {
        loading.problem(line, message);
    }
    let event = loading.event(&fm);
    let (tools, delegates) = loading.matchers(&fm, event);
    let (script_path, source, first_line) = loading.script_source(&fm);
    let script = source
        .and_then(|source| loading.handle(engine, sandbox, &script_path, &source, first_line));
    let when = loading.when(engine, sandbox, &fm);
    match (event, script) {
        (Some(event), Some(script)) if loading.problems.is_empty() => Ok(Hook {
            name: path
                .file_stem()
                .map_or_else(String::new, |s| s.to_string_lossy().into_owned()),
            path: path.to_path_buf(),
            event,
            priority: fm.priority.unwrap_or(0),
            when_source: fm.when,
            tools,
            delegates,
            script_line: first_line.unwrap_or(1),
            script_path,
            script,
            when,
        }),
        _ => Err(loading.problems),
    }
}

/// One hook file being loaded: where it is, its front matter, and every problem found so far.
struct Loading<'a> {
    path: &'a Path,
    yaml: &'a str,
    /// The file line the front matter starts on.
    yaml_line: usize,
    problems: Vec<Problem>,
}

impl Loading<'_> {
    fn problem(&mut self, line: Option<usize>, message: String) {
        self.problems.push(Problem {
            path: self.path.to_path_buf(),
            line,
            message,
        });
    }

    /// The file line of front-matter key `key`.
    fn line_of(&self, key: &str) -> Option<usize> {
        key_line(self.yaml, self.yaml_line, key)
    }

    /// The event the hook names, if it names one that exists.
    fn event(&mut self, fm: &FrontMatter) -> Option<Event> {
        let Some(name) = fm.event.as_deref() else {
            if !fm.broken.contains(&"event") {
                self.problem(None, "missing `event` (one of delegation.pre, delegation.post_verify, delegation.post, tool.pre, tool.post)".to_owned());
            }
            return None;
        };
        let event = Event::from_name(name);
        if event.is_none() {
            let known: Vec<&str> = Event::ALL.iter().map(|e| e.as_str()).collect();
            self.problem(
                self.line_of("event"),
                format!(
                    "unknown event {name:?} (known events: {})",
                    known.join(", ")
                ),
            );
        }
        event
    }

    /// `tools` and `delegates`, compiled, each only where `event` is one it applies to.
    fn matchers(
        &mut self,
        fm: &FrontMatter,
        event: Option<Event>,
    ) -> (Option<Matcher>, Option<Matcher>) {
        let mut compiled = |key: &str, globs: Option<&[String]>| {
            globs.map(Matcher::new).transpose().unwrap_or_else(|e| {
                self.problem(self.line_of(key), format!("`{key}`: {e}"));
                None
            })
        };
        let tools = compiled("tools", fm.tools.as_deref());
        let delegates = compiled("delegates", fm.delegates.as_deref());
        if let Some(event) = event {
            if tools.is_some() && !event.is_tool_event() {
                self.problem(
                    self.line_of("tools"),
                    format!("`tools` only applies to tool.pre and tool.post hooks, not {event}"),
                );
            }
            if delegates.is_some() && event.is_tool_event() {
                self.problem(
                    self.line_of("delegates"),
                    format!("`delegates` only applies to delegation events, not {event}"),
                );
            }
        }
        (tools, delegates)
    }

    /// Where the script's lines are — the hook file for `script`, the script file for
    /// `script_file` — its source, and the line of that file its line 1 is.
    fn script_source(&mut self, fm: &FrontMatter) -> (PathBuf, Option<String>, Option<usize>) {
        let here = self.path.to_path_buf();
        match (&fm.script, &fm.script_file) {
            (Some(_), Some(_)) => {
                self.problem(
                    self.line_of("script_file"),
                    "give `script` or `script_file`, not both".to_owned(),
                );
                (here, None, None)
            }
            (None, None) if fm.broken.contains(&"script") || fm.broken.contains(&"script_file") => {
                (here, None, None)
            }
            (None, None) => {
                self.problem(None, "missing `script` (Starlark defining `def handle(event, payload):`) or `script_file`".to_owned());
                (here, None, None)
            }
            (Some(source), None) => (
                here,
                Some(source.clone()),
                script_first_line(self.yaml, self.yaml_line),
            ),
            (None, Some(file)) => {
                let base = self.path.parent().unwrap_or(Path::new("."));
                let full = base.join(file);
                match harness_builtins::read_named(base, file, harness_builtins::MAX_SCRIPT_BYTES) {
                    Ok(source) => (full, Some(source), Some(1)),
                    Err(e) => {
                        self.problem(
                            self.line_of("script_file"),
                            format!("`script_file`: cannot read {}: {e}", full.display()),
                        );
                        (here, None, None)
                    }
                }
            }
        }
    }

    /// The script compiled, if it compiles and defines `handle(event, payload)`; its problems
    /// name `script_path` and the line in it (`first_line` is the script's line 1).
    fn handle(
        &mut self,
        engine: &Engine,
        sandbox: &Sandbox,
        script_path: &Path,
        source: &str,
        first_line: Option<usize>,
    ) -> Option<Script> {
        let name = script_path.display().to_string();
        let why = match Script::compile(engine, sandbox, &name, source, &[]) {
            Ok(script) if script.defines("handle") => match script.takes("handle", 2) {
                Ok(()) => return Some(script),
                Err(declared) => (
                    first_line,
                    format!(
                        "`def {declared}` takes the wrong arguments: a hook is called as `handle(event, payload)` (write `def handle(event, payload):`)"
                    ),
                ),
            },
            Ok(_) => (
                first_line,
                "the script does not define `handle` (add `def handle(event, payload):`)"
                    .to_owned(),
            ),
            Err(e) => {
                let line = match (e.location(), first_line) {
                    (Some(at), Some(first)) => Some(first + at.line - 1),
                    _ => first_line,
                };
                let at = e
                    .location()
                    .map(|l| format!(" (script line {}, column {})", l.line, l.column))
                    .unwrap_or_default();
                (
                    line,
                    format!("script: {}{at} [{}]", e.message(), e.kind().as_str()),
                )
            }
        };
        self.problems.push(Problem {
            path: script_path.to_path_buf(),
            line: why.0,
            message: why.1,
        });
        None
    }

    /// `when`, compiled as the body of `def when(event, payload)`.
    fn when(&mut self, engine: &Engine, sandbox: &Sandbox, fm: &FrontMatter) -> Option<Script> {
        let expr = fm.when.as_ref()?;
        let source = format!(
            "def when(event, payload):\n    return ({})\n",
            expr.replace('\n', " ")
        );
        let name = format!("{}: when", self.path.display());
        match Script::compile(engine, sandbox, &name, &source, &[]) {
            Ok(script) => Some(script),
            Err(e) => {
                self.problem(
                    self.line_of("when"),
                    format!(
                        "`when: {expr}` is not a valid Starlark expression: {}",
                        e.message()
                    ),
                );
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn front_matter_split() {
        let text =
            "---\nevent: tool.pre\nscript: |\n  def handle(e, p):\n    return None\n---\n# Docs\n";
        let (yaml, line) = front_matter(text).expect("front matter");
        assert_eq!(line, 2);
        assert!(yaml.starts_with("event: tool.pre\n"));
        assert!(yaml.ends_with("return None\n"));
        assert_eq!(script_first_line(yaml, line), Some(4));
        assert_eq!(key_line(yaml, line, "event"), Some(2));
        assert_eq!(key_line(yaml, line, "script"), Some(3));
        assert_eq!(key_line(yaml, line, "tools"), None);
        assert!(front_matter("no front matter").is_none());
        assert!(front_matter("---\nevent: x\n").is_none());
    }
}
