//! The builtins' documented examples run, as starlark-rust runs its standard library's: each
//! ```` ```python ```` block of a builtin's doc comment ([`harness_builtins::examples`], the
//! reference's examples too) is a script, run in a workspace holding the files the examples
//! name, with the names they assume (`out`, `result`, `args`, …) defined. Its network and
//! programs are answered by an interceptor (tests never reach the internet). An example that
//! ends in a comparison must come out true; every other must run without error.

use std::any::Any;
use std::sync::Arc;

use harness_builtins::{
    Capabilities, Engine, HostAllowList, HttpReply, Interceptor, Limits, ProgramReply, Sandbox,
    Script, Surface, Workspace, sha256_hex,
};
use serde_json::Value;

/// Answers every request with `201 {"ok": true}` and every program with a passing test run.
#[derive(Debug)]
struct Canned;

impl Interceptor for Canned {
    fn http(&self, _: &str, _: &str) -> Option<Result<HttpReply, String>> {
        Some(Ok(HttpReply {
            error: None,
            error_kind: None,
            status: 201,
            body: r#"{"ok": true}"#.to_owned(),
            headers: Default::default(),
        }))
    }

    fn exec(&self, _: &str) -> Option<Result<ProgramReply, String>> {
        Some(Ok(ProgramReply {
            exit_code: 0,
            stdout: "test result: ok. 14 passed; 0 failed\n".to_owned(),
            stderr: String::new(),
        }))
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// `code` as the body of `def example()`, its last line returned: an expression's value, or
/// the name its last assignment bound.
fn as_function(code: &str) -> String {
    let lines: Vec<&str> = code.lines().collect();
    let last = lines.len() - 1;
    let mut body: Vec<String> = lines[..last].iter().map(|l| format!("    {l}")).collect();
    let tail = lines[last];
    let assigned = tail
        .split_once('=')
        .filter(|(name, rest)| {
            !rest.starts_with('=')
                && !name.ends_with(['!', '<', '>'])
                && name
                    .trim()
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_')
        })
        .map(|(name, _)| name.trim());
    let statement = tail.starts_with(' ') || tail.starts_with("return ");
    match assigned {
        Some(name) => {
            body.push(format!("    {tail}"));
            body.push(format!("    return {name}"));
        }
        None if statement => body.push(format!("    {tail}")),
        None => body.push(format!("    return {tail}")),
    }
    format!("def example():\n{}\n", body.join("\n"))
}

#[test]
fn every_documented_example_runs_and_what_it_compares_holds() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    std::fs::create_dir_all(root.join("src")).expect("src");
    std::fs::create_dir_all(root.join("dist")).expect("dist");
    std::fs::write(root.join("hello.txt"), "hi there\n").expect("write");
    std::fs::write(root.join("src/main.rs"), "fn main() {}\n").expect("write");
    let lib: String = (1..=20).map(|i| format!("// line {i}\n")).collect();
    std::fs::write(root.join("src/lib.rs"), lib).expect("write");
    let archive = b"not really a tarball";
    std::fs::write(root.join("dist/app.tar.gz"), archive).expect("write");
    let prelude = format!(
        "args = {{\"expected_sha256\": \"{}\"}}\n\
         result = {{\"response\": '{{\"verified\": true}}'}}\n\
         out = \"14 passed in src/lib.rs and src/main.rs\"\n\
         text = \"the key sk-abcdefghijklmnopqrstuvwx leaked\"\n\
         files = [\"src/lib.rs\", \"src/main.rs\"]\n",
        sha256_hex(archive)
    );
    let capabilities = Capabilities {
        fs_read: true,
        hosts: HostAllowList::new(["api.example.com", "localhost"]).expect("hosts"),
        programs: vec!["cargo".to_owned()],
        env: vec!["CI_TOKEN".to_owned()],
    };
    let sandbox = Sandbox::new(
        Surface::Verifier,
        Workspace::new(root).expect("workspace"),
        capabilities,
        Limits::default(),
    )
    .with_interceptor(Arc::new(Canned));
    let engine = Engine::new();
    let examples = harness_builtins::examples();
    let mut named: Vec<&str> = examples.iter().map(|e| e.name.as_str()).collect();
    named.dedup();
    for builtin in [
        "fs.exists",
        "fs.read",
        "fs.cite",
        "http.get",
        "exec.run",
        "json.decode",
        "re.search",
        "time.now",
        "log",
        "str",
    ] {
        assert!(
            named.contains(&builtin),
            "{builtin} has no example: {named:?}"
        );
    }
    for example in &examples {
        let source = format!("{prelude}{}", as_function(&example.code));
        let script = Script::compile(&engine, &sandbox, "example.star", &source, &[])
            .unwrap_or_else(|e| panic!("{}: does not compile: {e}\n{source}", example.name));
        let value = script
            .call(&sandbox, "example", &[])
            .unwrap_or_else(|e| panic!("{}: fails: {e}\n{source}", example.name))
            .value;
        if let Value::Bool(held) = value {
            assert!(
                held,
                "{}: what it compares is false\n{source}",
                example.name
            );
        }
    }
}

/// The rewriting the runner does: a last expression is returned, a last assignment's name is.
#[test]
fn an_example_returns_its_last_expression_or_what_it_last_bound() {
    assert_eq!(
        as_function("fs.exists(\"a\")"),
        "def example():\n    return fs.exists(\"a\")\n"
    );
    assert_eq!(
        as_function("r = f()\nok = r == 1"),
        "def example():\n    r = f()\n    ok = r == 1\n    return ok\n"
    );
    assert_eq!(
        as_function("x != None"),
        "def example():\n    return x != None\n"
    );
    assert_eq!(
        as_function("if a:\n    return b"),
        "def example():\n    if a:\n        return b\n"
    );
}
