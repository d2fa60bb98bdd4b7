//! Gate integrity (DESIGN §4.8): what the gate judges with stays out of the delegate's reach.
//!
//! Two lists. **Always protected**, whatever the delegation says: any `.harness/` directory
//! below the workspace (a planted nested policy would govern later runs there) and git's
//! `config`, `hooks/` and `info/` (code git runs on the operator's next command). **Gate
//! inputs** (`protect:`): existing files the checks judge with — the tests, the script a check
//! runs, the `scripts` of a `package.json` that `npm test` reads. Tools refuse to modify,
//! delete or replace them; the observation stage turns an out-of-band change (a shell, an agent
//! CLI) into `gate_tampered`. New files under the globs are allowed: a task may add tests.

use std::path::Path;

use globset::GlobSet;
use serde_json::Value;

use crate::error::Result;
use crate::gates::checks::CheckSpec;

/// The common test locations, protected when a delegation has checks or command criteria and
/// does not say `protect:`.
pub const DEFAULT_PROTECT: [&str; 17] = [
    "tests/**",
    "test/**",
    "spec/**",
    "**/__tests__/**",
    "**/__snapshots__/**",
    "**/*.snap",
    "**/testdata/**",
    "**/fixtures/**",
    "**/golden/**",
    "**/*_test.*",
    "**/test_*.*",
    "**/*.test.*",
    "**/*.spec.*",
    "**/conftest.py",
    "**/pytest.ini",
    "**/jest.config.*",
    "**/vitest.config.*",
];

/// Files that configure how existing tests run (`conftest.py` can skip every test, a
/// `jest.config.js` can narrow what runs): with the default list, even a NEW one is tampering.
pub const TEST_CONFIG: [&str; 19] = [
    "**/conftest.py",
    "**/pytest.ini",
    "**/tox.ini",
    "**/setup.cfg",
    // A module of the runner's name beside the tests runs instead of it (`python -m pytest`
    // puts the working directory first on the import path).
    "**/pytest.py",
    "**/_pytest/**",
    "**/pluggy/**",
    "**/py.py",
    "**/jest.config.*",
    "**/vitest.config.*",
    "**/.mocharc*",
    "**/karma.conf.*",
    "**/phpunit.xml*",
    // What runs the runner: npm's shell and PATH, Python's start-up hooks.
    "**/.npmrc",
    "**/.yarnrc*",
    "**/node_modules/.bin/**",
    "**/sitecustomize.py",
    "**/usercustomize.py",
    "**/*.pth",
];

/// Whether `rel` (relative to the workspace, `/`-separated) is at one of the common test
/// locations ([`DEFAULT_PROTECT`]): a test file, not product code.
pub(crate) fn is_test_location(rel: &str) -> bool {
    static SET: std::sync::OnceLock<GlobSet> = std::sync::OnceLock::new();
    SET.get_or_init(|| {
        let globs: Vec<String> = DEFAULT_PROTECT.iter().map(|g| (*g).to_owned()).collect();
        crate::scope::globs(&globs, "the test locations", "protect")
            .expect("the default test locations compile (tested)")
    })
    .is_match(rel)
}

/// Whether `rel` (relative to the workspace, `/`-separated) is always out of a delegate's
/// reach: inside any `.harness/` directory, or git's `config`, `hooks/` or `info/` (of the
/// workspace's repository or one nested in it).
pub(crate) fn always_protected(rel: &str) -> Option<&'static str> {
    let parts: Vec<&str> = rel
        .split('/')
        .filter(|p| !p.is_empty() && *p != ".")
        .collect();
    for (i, part) in parts.iter().enumerate() {
        if *part == ".harness" {
            return Some("a `.harness/` policy directory");
        }
        if *part == ".git" {
            match parts.get(i + 1) {
                // A `.git` file points git at another directory (`gitdir: …`).
                None => return Some("a `.git` pointer git follows"),
                Some(&"config" | &"commondir") if parts.len() == i + 2 => {
                    return Some("git's configuration");
                }
                Some(&"hooks") => return Some("a git hook"),
                Some(&"info") => return Some("git's info/ (attributes, excludes)"),
                Some(&"modules" | &"worktrees")
                    if parts[i + 2..]
                        .iter()
                        .any(|p| matches!(*p, "config" | "hooks" | "commondir" | "info")) =>
                {
                    return Some("the configuration of a nested git repository");
                }
                _ => {}
            }
        }
    }
    None
}

/// The gate inputs of one delegation: `protect` globs, and the `package.json` files whose
/// `scripts` a check runs.
#[derive(Debug, Clone, Default)]
pub struct GateInputs {
    globs: Vec<String>,
    set: GlobSet,
    /// Workspace files whose `scripts` object is protected (`npm test`, `yarn test`…).
    scripts: Vec<String>,
    /// Workspace files whose test-runner configuration is protected: `package.json`'s `jest`,
    /// `mocha`, `vitest`, `ava`, `c8`, `nyc` keys, `pyproject.toml`'s `[tool.pytest.ini_options]`,
    /// `setup.cfg`'s `[tool:pytest]`, `tox.ini`'s `[pytest]` (a `--deselect` or a `-p plugin`
    /// there changes what the existing tests run).
    runner_configs: Vec<String>,
    /// Test configuration no delegate may add ([`TEST_CONFIG`], with the default list only).
    configs: GlobSet,
}

impl GateInputs {
    /// Compiles `globs`; `at` names the file and key in messages.
    ///
    /// # Errors
    /// [`ErrorKind::Config`](crate::ErrorKind::Config) naming the glob that does not compile.
    pub fn compile(globs: &[String], at: &str) -> Result<Self> {
        let set = crate::scope::globs(globs, at, "protect")?;
        Ok(GateInputs {
            globs: globs.to_vec(),
            set,
            scripts: Vec::new(),
            runner_configs: Vec::new(),
            configs: GlobSet::empty(),
        })
    }

    /// The gate inputs of a delegation whose workspace is `root`: `protect` as written, or —
    /// when it is not written and `checks` is not empty — the common test locations plus every
    /// workspace file a check names as its program or script.
    pub(crate) fn for_checks(
        protect: Option<&[String]>,
        checks: &[CheckSpec],
        root: &Path,
    ) -> Result<Self> {
        if let Some(globs) = protect {
            return Self::compile(globs, "protect");
        }
        if checks.is_empty() {
            return Ok(GateInputs::default());
        }
        let mut globs: Vec<String> = DEFAULT_PROTECT.iter().map(|g| (*g).to_owned()).collect();
        let mut scripts = Vec::new();
        for check in checks {
            for (file, whole) in named_files(&check.argv, root) {
                let list = if whole { &mut globs } else { &mut scripts };
                if !list.contains(&file) {
                    list.push(file);
                }
            }
        }
        // A file name is a glob of itself once its metacharacters are escaped.
        let escaped: Vec<String> = globs
            .iter()
            .map(|g| {
                if DEFAULT_PROTECT.contains(&g.as_str()) {
                    g.clone()
                } else {
                    globset::escape(g)
                }
            })
            .collect();
        let mut inputs = Self::compile(&escaped, "protect")?;
        inputs.globs = globs;
        inputs.scripts = scripts;
        inputs.runner_configs = RUNNER_CONFIGS
            .iter()
            .filter(|name| root.join(name).is_file())
            .map(|name| (*name).to_owned())
            .collect();
        let configs: Vec<String> = TEST_CONFIG.iter().map(|g| (*g).to_owned()).collect();
        inputs.configs = crate::scope::globs(&configs, "the test configuration", "protect")?;
        Ok(inputs)
    }

    /// True when nothing is protected.
    pub fn is_empty(&self) -> bool {
        self.globs.is_empty() && self.scripts.is_empty()
    }

    /// The glob protecting `rel` as a whole, if any.
    pub fn matching(&self, rel: &str) -> Option<&str> {
        self.set
            .matches(rel)
            .first()
            .map(|&i| self.globs[i].as_str())
    }

    /// Whether a NEW file at `rel` would configure how the existing tests run
    /// ([`TEST_CONFIG`], protected with the default list).
    pub fn refuses_new(&self, rel: &str) -> bool {
        self.configs.is_match(rel)
    }

    /// True when `rel` holds something that runs the checks: a `package.json` whose `scripts`
    /// a check runs, or a file of the test runners' configuration.
    pub fn guards_scripts(&self, rel: &str) -> bool {
        self.scripts
            .iter()
            .chain(&self.runner_configs)
            .any(|s| s == rel)
    }

    /// Whether the parts of `rel` that run the checks differ between `before` and `after` (text
    /// that cannot be read counts as differing: what cannot be compared is not assumed equal).
    pub(crate) fn guarded_differ(&self, rel: &str, before: &[u8], after: &[u8]) -> bool {
        let scripts = self.scripts.iter().any(|s| s == rel);
        let config = self.runner_configs.iter().any(|s| s == rel);
        (scripts && scripts_differ(before, after))
            || (config && runner_config_differs(rel, before, after))
    }
}

/// Whether the `scripts` of two `package.json` texts differ (text that is not JSON counts as
/// differing: what cannot be compared is not assumed equal).
pub(crate) fn scripts_differ(before: &[u8], after: &[u8]) -> bool {
    let scripts = |bytes: &[u8]| {
        serde_json::from_slice::<Value>(bytes)
            .ok()
            .map(|v| v.get("scripts").cloned().unwrap_or(Value::Null))
    };
    match (scripts(before), scripts(after)) {
        (Some(a), Some(b)) => a != b,
        _ => true,
    }
}

/// Files at the workspace's root holding test-runner configuration, guarded like gate inputs.
const RUNNER_CONFIGS: [&str; 4] = ["package.json", "pyproject.toml", "setup.cfg", "tox.ini"];

/// Whether the test-runner configuration of the file `rel` differs between two texts.
pub(crate) fn runner_config_differs(rel: &str, before: &[u8], after: &[u8]) -> bool {
    let name = rel.rsplit('/').next().unwrap_or(rel);
    match name {
        "package.json" => {
            let keys = |bytes: &[u8]| {
                serde_json::from_slice::<Value>(bytes).ok().map(|v| {
                    ["jest", "mocha", "vitest", "ava", "c8", "nyc"]
                        .map(|k| v.get(k).cloned().unwrap_or(Value::Null))
                })
            };
            match (keys(before), keys(after)) {
                (Some(a), Some(b)) => a != b,
                _ => true,
            }
        }
        _ => {
            let headers: &[&str] = match name {
                "pyproject.toml" => &["[tool.pytest.ini_options]", "[tool.pytest]"],
                "setup.cfg" => &["[tool:pytest]"],
                _ => &["[pytest]"],
            };
            let section = |bytes: &[u8]| -> Option<String> {
                let text = std::str::from_utf8(bytes).ok()?;
                let mut inside = false;
                let mut kept = String::new();
                for line in text.lines() {
                    let trimmed = line.trim();
                    if trimmed.starts_with('[') {
                        inside = headers.iter().any(|h| trimmed.starts_with(h));
                    }
                    if inside {
                        kept.push_str(trimmed);
                        kept.push('\n');
                    }
                }
                Some(kept)
            };
            match (section(before), section(after)) {
                (Some(a), Some(b)) => a != b,
                _ => true,
            }
        }
    }
}

/// Programs that run a script named as their first argument that is not an option.
const INTERPRETERS: &[&str] = &[
    "sh", "bash", "dash", "zsh", "ksh", "python", "python2", "python3", "node", "deno", "bun",
    "ruby", "perl", "php", "Rscript", "tsx", "ts-node", "lua", "tclsh", "pwsh",
];

/// Commands that run the command after them (with their own options first).
const WRAPPERS: &[&str] = &[
    "env", "exec", "time", "nice", "nohup", "command", "timeout", "xvfb-run",
];

/// Workspace files a check's command *runs*: `(path, true)` for a file protected whole (a
/// program or script it runs, a script that one sources, a `Makefile`), `(path, false)` for a
/// `package.json` whose `scripts` it runs. A file a check only reads (`grep -q x src/app.py`) is
/// the work being judged, not the judge: it is not named here.
fn named_files(argv: &[String], root: &Path) -> Vec<(String, bool)> {
    let words: Vec<String> = match argv {
        [sh, c, script] if sh == "sh" && c == "-c" => shell_words(script),
        argv => argv.to_vec(),
    };
    let mut files = Vec::new();
    // Where the command runs, relative to the workspace: `cd ci && sh verify.sh`.
    let mut cwd = String::new();
    let within = |dir: &str, name: &str| -> Option<String> {
        let rel = if dir.is_empty() {
            name.trim_start_matches("./").to_owned()
        } else {
            format!("{dir}/{}", name.trim_start_matches("./"))
        };
        let ok = !rel.is_empty() && !rel.starts_with('/') && !rel.split('/').any(|p| p == "..");
        ok.then_some(rel)
    };
    let is_file = |rel: &str| root.join(rel).symlink_metadata().is_ok_and(|m| m.is_file());
    // A file the check runs, and the helpers a shell script of it sources.
    let runs = |rel: String, files: &mut Vec<(String, bool)>| {
        let full = root.join(&rel);
        for sourced in sourced_files(&full) {
            let dir = rel.rsplit_once('/').map_or("", |(d, _)| d);
            if let Some(helper) = within(dir, &sourced).filter(|h| is_file(h)) {
                files.push((helper, true));
            }
        }
        files.push((rel, true));
    };
    for command in words.split(|w| matches!(w.as_str(), "&&" | "||" | ";" | "|" | "&")) {
        let i = program_at(command);
        let Some(program) = command.get(i) else {
            continue;
        };
        let args = &command[i + 1..];
        let base = program.rsplit('/').next().unwrap_or(program);
        match base {
            "cd" => {
                if let Some(dir) = args
                    .first()
                    .and_then(|d| within(&cwd, d))
                    .filter(|d| root.join(d).is_dir())
                {
                    cwd = dir;
                }
            }
            "make" | "gmake" => {
                // `make -C backend` reads backend/Makefile.
                let dir = args
                    .iter()
                    .position(|a| a == "-C")
                    .and_then(|at| args.get(at + 1))
                    .and_then(|d| within(&cwd, d))
                    .unwrap_or_else(|| cwd.clone());
                for name in ["Makefile", "makefile", "GNUmakefile"] {
                    if let Some(rel) = within(&dir, name).filter(|r| is_file(r)) {
                        files.push((rel, true));
                    }
                }
            }
            "npm" | "yarn" | "pnpm" | "bun" => {
                if let Some(rel) = within(&cwd, "package.json").filter(|r| is_file(r)) {
                    files.push((rel, false));
                }
            }
            "." | "source" => {
                if let Some(rel) = args
                    .first()
                    .and_then(|a| within(&cwd, a))
                    .filter(|r| is_file(r))
                {
                    runs(rel, &mut files);
                }
            }
            _ => {
                // A program in the workspace (`./run-tests`, `ci/check.sh`).
                if program.contains('/')
                    && let Some(rel) = within(&cwd, program).filter(|r| is_file(r))
                {
                    runs(rel, &mut files);
                }
                // An interpreter's script: its first argument that is not an option (`-m
                // module` and `-c code` run no file).
                let interpreter = INTERPRETERS.contains(&base)
                    || base.starts_with("python3.")
                    || base.starts_with("python2.");
                if interpreter {
                    let mut k = 0;
                    while let Some(arg) = args.get(k) {
                        if matches!(
                            arg.as_str(),
                            "-m" | "-c" | "-e" | "--eval" | "-p" | "--print"
                        ) {
                            break;
                        }
                        if arg.starts_with('-') {
                            k += 1;
                            continue;
                        }
                        if let Some(rel) = within(&cwd, arg).filter(|r| is_file(r)) {
                            runs(rel, &mut files);
                        }
                        break;
                    }
                }
            }
        }
    }
    files
}

/// Where the program of a simple command is: past variable assignments and wrappers (`env`,
/// `timeout 60`, `nice -n 5`…).
fn program_at(command: &[String]) -> usize {
    let mut i = 0;
    while let Some(word) = command.get(i) {
        let base = word.rsplit('/').next().unwrap_or(word);
        if word.contains('=') && !word.starts_with('-') {
            i += 1;
        } else if WRAPPERS.contains(&base) {
            i += 1;
            while command.get(i).is_some_and(|w| w.starts_with('-')) {
                i += 1;
            }
            if base == "timeout" {
                i += 1;
            }
        } else {
            break;
        }
    }
    i
}

/// The files a shell script sources (`. ./x.sh`, `source lib.sh`), as written.
fn sourced_files(script: &Path) -> Vec<String> {
    let Ok(mut file) = harness_builtins::open_regular(script) else {
        return Vec::new();
    };
    let mut text = String::new();
    if std::io::Read::read_to_string(&mut std::io::Read::take(&mut file, 256 * 1024), &mut text)
        .is_err()
    {
        return Vec::new();
    }
    text.lines()
        .filter_map(|line| {
            let line = line.trim();
            let rest = line
                .strip_prefix(". ")
                .or_else(|| line.strip_prefix("source "))?;
            let name = rest.split_whitespace().next()?;
            let name = name.trim_matches(|c| c == '"' || c == '\'');
            (!name.contains('$')).then(|| name.to_owned())
        })
        .collect()
}

/// Splits a shell command into words and the operators between commands. Quotes group;
/// anything cleverer (substitutions, redirections) is left as words, which at worst protects a
/// file that exists and is named.
pub(crate) fn shell_words(script: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut quote: Option<char> = None;
    let mut chars = script.chars().peekable();
    let flush = |word: &mut String, words: &mut Vec<String>| {
        if !word.is_empty() {
            words.push(std::mem::take(word));
        }
    };
    while let Some(c) = chars.next() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => word.push(c),
            (None, '\'' | '"') => quote = Some(c),
            (None, c) if c.is_whitespace() => flush(&mut word, &mut words),
            (None, ';' | '|' | '&' | '\n' | '(' | ')') => {
                flush(&mut word, &mut words);
                let mut op = c.to_string();
                if matches!(c, '|' | '&') && chars.peek() == Some(&c) {
                    chars.next();
                    op.push(c);
                }
                words.push(if op == "\n" || op == "(" || op == ")" {
                    ";".to_owned()
                } else {
                    op
                });
            }
            (None, c) => word.push(c),
        }
    }
    flush(&mut word, &mut words);
    words
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(run: &str) -> CheckSpec {
        CheckSpec::shell("tests", run, std::time::Duration::from_secs(1), false)
    }

    #[test]
    fn nested_policy_and_git_internals_are_always_protected() {
        for path in [
            ".harness/policy.yaml",
            "sub/.harness/policy.yaml",
            "a/b/.harness/hooks/x.md",
            ".git/config",
            ".git/hooks/pre-commit",
            "vendor/lib/.git/hooks/post-checkout",
            ".git/info/attributes",
        ] {
            assert!(always_protected(path).is_some(), "{path}");
        }
        for path in [
            "src/harness.rs",
            ".github/workflows/ci.yml",
            ".gitignore",
            "git/config",
        ] {
            assert!(always_protected(path).is_none(), "{path}");
        }
    }

    #[test]
    fn defaults_cover_test_locations_and_the_files_checks_run() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path();
        for file in [
            "test.sh",
            "scripts/lint.py",
            "Makefile",
            "package.json",
            "README.md",
        ] {
            let path = root.join(file);
            std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
            std::fs::write(path, "x").expect("write");
        }
        let checks = [
            check("sh test.sh && python3 scripts/lint.py --strict"),
            check("make check"),
            check("npm test"),
            check("cat README.md.missing"),
        ];
        let inputs = GateInputs::for_checks(None, &checks, root).expect("compiles");
        for (path, glob) in [
            ("tests/test_parser.py", "tests/**"),
            ("src/parser_test.go", "**/*_test.*"),
            ("web/src/__tests__/a.js", "**/__tests__/**"),
            ("pkg/test_util.py", "**/test_*.*"),
            ("test.sh", "test.sh"),
            ("scripts/lint.py", "scripts/lint.py"),
            ("Makefile", "Makefile"),
        ] {
            assert_eq!(inputs.matching(path), Some(glob), "{path}");
        }
        assert_eq!(inputs.matching("src/parser.rs"), None);
        assert_eq!(inputs.matching("README.md"), None);
        // A file a check only reads is the work, not the judge.
        std::fs::create_dir_all(root.join("src")).expect("mkdir");
        std::fs::write(root.join("src/app.py"), "value = 3\n").expect("write");
        let reads = GateInputs::for_checks(
            None,
            &[
                check("grep -q 'value = 3' src/app.py || exit 1"),
                check("cat src/app.py | wc -l"),
            ],
            root,
        )
        .expect("compiles");
        assert_eq!(reads.matching("src/app.py"), None);
        // What a check runs, through wrappers and `cd`, is.
        std::fs::create_dir_all(root.join("ci")).expect("mkdir");
        std::fs::write(root.join("ci/verify.sh"), ". ./helpers.sh\n").expect("write");
        std::fs::write(root.join("ci/helpers.sh"), "true\n").expect("write");
        let runs = GateInputs::for_checks(
            None,
            &[check("cd ci && timeout 60 env CI=1 bash verify.sh")],
            root,
        )
        .expect("compiles");
        assert_eq!(runs.matching("ci/verify.sh"), Some("ci/verify.sh"));
        assert_eq!(runs.matching("ci/helpers.sh"), Some("ci/helpers.sh"));
        assert!(inputs.guards_scripts("package.json"));
        assert!(inputs.refuses_new("sub/conftest.py"));
        assert!(!inputs.refuses_new("tests/test_new.py"));
        assert_eq!(inputs.matching("package.json"), None);

        // Written `protect:` replaces the default; `[]` turns it off; no checks, no default.
        let written = GateInputs::for_checks(Some(&["golden/**".to_owned()]), &checks, root)
            .expect("compiles");
        assert_eq!(written.matching("golden/a.txt"), Some("golden/**"));
        assert_eq!(written.matching("tests/a.py"), None);
        assert!(
            GateInputs::for_checks(Some(&[]), &checks, root)
                .expect("ok")
                .is_empty()
        );
        assert!(
            GateInputs::for_checks(None, &[], root)
                .expect("ok")
                .is_empty()
        );
    }

    #[test]
    fn a_bad_glob_names_the_key_and_package_scripts_are_compared_as_json() {
        let error = GateInputs::compile(&["src/**".to_owned(), "a[".to_owned()], "d.yaml")
            .expect_err("refused");
        assert!(
            error.message().starts_with("d.yaml: `protect[1]`"),
            "{error}"
        );
        assert!(!scripts_differ(
            br#"{"scripts": {"test": "jest"}, "version": "1"}"#,
            br#"{"version": "2", "scripts": {"test": "jest"}}"#
        ));
        assert!(scripts_differ(
            br#"{"scripts": {"test": "jest"}}"#,
            br#"{"scripts": {"test": "true"}}"#
        ));
        assert!(scripts_differ(br#"{"scripts": {}}"#, b"not json"));
    }
}
