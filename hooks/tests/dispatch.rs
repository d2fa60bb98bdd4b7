//! Hook files loaded from disk and events dispatched through them (DESIGN §4.4): dispatch order,
//! the first block wins, modify chains, fail-closed errors, `when`, matchers, and every problem a
//! hook file can have at load time.

use std::path::PathBuf;
use std::sync::Arc;

use harness_builtins::{Capabilities, Limits, Sandbox, Surface, Workspace};
use harness_hooks::{Dispatch, Event, HookError, HookRun, HookSet, Problem};
use serde_json::{Value, json};

/// A temporary directory of hook files; it is also the workspace root hooks run in.
struct HookDir {
    dir: tempfile::TempDir,
}

impl HookDir {
    fn new() -> Self {
        HookDir {
            dir: tempfile::tempdir().expect("create a temporary directory"),
        }
    }

    /// The directory, canonical (the workspace resolves symlinks, so paths compare equal).
    fn root(&self) -> PathBuf {
        self.dir
            .path()
            .canonicalize()
            .expect("the directory exists")
    }

    /// Writes `rel` (creating parent directories) with `text` and returns its path.
    fn raw(&self, rel: &str, text: &str) -> PathBuf {
        let path = self.root().join(rel);
        std::fs::create_dir_all(path.parent().expect("a parent")).expect("create directories");
        std::fs::write(&path, text).expect("write a hook file");
        path
    }

    /// Writes the hook `rel`: the front-matter lines `fields`, then `script` as `script: |`.
    fn hook(&self, rel: &str, fields: &str, script: &str) -> PathBuf {
        self.raw(rel, &hook_text(fields, script))
    }

    fn sandbox(&self, limits: Limits) -> Arc<Sandbox> {
        let workspace = Workspace::new(self.root()).expect("the workspace exists");
        Arc::new(Sandbox::new(
            Surface::Hook,
            workspace,
            Capabilities::read_only(),
            limits,
        ))
    }

    fn try_load(&self, paths: &[PathBuf]) -> Result<HookSet, Vec<Problem>> {
        HookSet::load(
            &harness_hooks::engine(),
            self.sandbox(Limits::default()),
            paths,
        )
    }

    /// Loads every hook in the directory, which must all be valid.
    fn load(&self) -> HookSet {
        self.load_with(Limits::default())
    }

    fn load_with(&self, limits: Limits) -> HookSet {
        HookSet::load(
            &harness_hooks::engine(),
            self.sandbox(limits),
            &[self.root()],
        )
        .unwrap_or_else(|problems| panic!("the hooks load: {problems:#?}"))
    }

    /// Loads the directory, which must have problems, and returns them.
    fn problems(&self) -> Vec<Problem> {
        match self.try_load(&[self.root()]) {
            Ok(set) => panic!("expected problems, loaded {} hooks", set.hooks().len()),
            Err(problems) => problems,
        }
    }
}

/// A hook file: front matter with `fields` (YAML lines, each ending in a newline) and `script`
/// (unindented Starlark) as its `script: |` block, then a Markdown body.
fn hook_text(fields: &str, script: &str) -> String {
    let indented: String = script
        .trim_matches('\n')
        .lines()
        .map(|line| format!("  {line}\n"))
        .collect();
    format!("---\n{fields}script: |\n{indented}---\n# A hook\n\nDocumentation.\n")
}

/// A `handle` returning `expr`.
fn returns(expr: &str) -> String {
    format!("def handle(event, payload):\n    return {expr}\n")
}

/// A `tool.pre` payload.
fn call() -> Value {
    json!({"id": "call_1", "name": "write_file", "arguments": {"path": "a.txt", "content": "hi"}})
}

/// A `tool.post` payload.
fn tool_result() -> Value {
    json!({"call_id": "call_1", "name": "write_file", "content": "wrote 2 bytes", "is_error": false})
}

/// A `delegation.post_verify` / `delegation.post` payload (the Result).
fn result() -> Value {
    json!({"id": "d-1", "parent_id": null, "attempt": 0, "response": "Done",
           "tool_calls": [], "tool_results": []})
}

/// A `delegation.pre` payload (the request).
fn request() -> Value {
    json!({"id": "d-1", "task": "Create hello.txt", "delegate": {"kind": "scripted", "model": null},
           "tools": ["write_file"], "args": {}, "max_verify_retries": 2})
}

/// The hooks that ran, with what they decided.
fn runs(dispatch: &Dispatch) -> Vec<(&str, &str)> {
    dispatch
        .runs
        .iter()
        .map(|r| (r.hook.as_str(), r.action.as_str()))
        .collect()
}

fn names(set: &HookSet) -> Vec<&str> {
    set.hooks().iter().map(|h| h.name.as_str()).collect()
}

#[track_caller]
fn dispatch(set: &HookSet, event: Event, payload: Value, names: &[&str]) -> Dispatch {
    set.dispatch(event, payload, names)
        .unwrap_or_else(|e| panic!("dispatch fails: {e}"))
}

#[track_caller]
fn dispatch_err(set: &HookSet, event: Event, payload: Value, names: &[&str]) -> HookError {
    match set.dispatch(event, payload, names) {
        Ok(d) => panic!("expected a hook error, got {d:#?}"),
        Err(e) => e,
    }
}

// --- order ---------------------------------------------------------------------------------

#[test]
fn hooks_run_by_priority_then_file_name() {
    let dir = HookDir::new();
    let allow = returns("allow()");
    dir.hook("b-mid.md", "event: tool.pre\npriority: 5\n", &allow);
    dir.hook("a-mid.md", "event: tool.pre\npriority: 5\n", &allow);
    dir.hook("nested/late.md", "event: tool.pre\npriority: 100\n", &allow);
    dir.hook("early.md", "event: tool.pre\npriority: -3\n", &allow);
    dir.hook("zero.md", "event: tool.pre\n", &allow);
    dir.hook("also-zero.md", "event: tool.pre\npriority: 0\n", &allow);
    dir.hook(
        "other-event.md",
        "event: delegation.post_verify\npriority: -100\n",
        &returns("fail('a delegation.post_verify hook ran on tool.pre')"),
    );
    dir.raw("notes.txt", "not a hook: only *.md files are loaded");
    let set = dir.load();

    // Dispatch order: event (lifecycle order), then priority, then name.
    assert_eq!(
        names(&set),
        [
            "other-event",
            "early",
            "also-zero",
            "zero",
            "a-mid",
            "b-mid",
            "late"
        ]
    );
    let late = &set.hooks()[6];
    assert_eq!(late.path, dir.root().join("nested/late.md"));
    assert_eq!((late.event, late.priority), (Event::ToolPre, 100));
    assert_eq!(set.hooks()[3].priority, 0, "priority defaults to 0");

    let out = dispatch(&set, Event::ToolPre, call(), &["write_file"]);
    assert_eq!(
        runs(&out),
        [
            ("early", "allow"),
            ("also-zero", "allow"),
            ("zero", "allow"),
            ("a-mid", "allow"),
            ("b-mid", "allow"),
            ("late", "allow"),
        ]
    );
    assert_eq!(out.payload, call());
    assert_eq!(out.blocked, None);
}

#[test]
fn an_event_without_hooks_passes_the_payload_through() {
    let dir = HookDir::new();
    dir.hook("guard.md", "event: tool.pre\n", &returns("block('no')"));
    let set = dir.load();
    assert!(!set.applies(Event::ToolPost, &["write_file"]));
    let out = dispatch(&set, Event::ToolPost, tool_result(), &["write_file"]);
    assert_eq!(out.payload, tool_result());
    assert!(out.runs.is_empty());
    assert_eq!(out.blocked, None);
}

// --- block and modify ----------------------------------------------------------------------------

#[test]
fn the_first_block_wins_and_later_hooks_do_not_run() {
    let dir = HookDir::new();
    dir.hook("1-allow.md", "event: tool.pre\n", &returns("allow()"));
    let blocker = dir.hook(
        "2-block.md",
        "event: tool.pre\npriority: 1\n",
        &returns("block('no writes today')"),
    );
    dir.hook(
        "3-crash.md",
        "event: tool.pre\npriority: 2\n",
        &returns("fail('reached a hook after a block')"),
    );
    dir.hook(
        "4-block.md",
        "event: tool.pre\npriority: 3\n",
        &returns("{'action': 'block', 'reason': 'a second block'}"),
    );
    let out = dispatch(&dir.load(), Event::ToolPre, call(), &["write_file"]);
    let block = HookRun {
        hook: "2-block".to_owned(),
        action: harness_hooks::Action::Block,
        reason: "no writes today".to_owned(),
    };
    assert_eq!(out.blocked.as_ref(), Some(&block));
    assert_eq!(runs(&out), [("1-allow", "allow"), ("2-block", "block")]);
    assert_eq!(out.payload, call());

    // Without the block, the crashing hook is reached and fails: it really was skipped above.
    std::fs::remove_file(blocker).expect("remove the blocking hook");
    let err = dispatch_err(&dir.load(), Event::ToolPre, call(), &["write_file"]);
    assert_eq!(err.name, "3-crash");
}

#[test]
fn a_modify_chain_hands_the_merged_payload_to_the_next_hook() {
    let dir = HookDir::new();
    dir.hook(
        "1-prefix.md",
        "event: tool.pre\n",
        &returns(r#"modify({"arguments": {"path": "src/" + payload["arguments"]["path"], "mode": {"append": True}}})"#),
    );
    dir.hook(
        "2-backup.md",
        "event: tool.pre\npriority: 1\n",
        r#"
def handle(event, payload):
    args = payload["arguments"]
    if args["path"] != "src/a.txt" or args["mode"] != {"append": True}:
        fail("the first hook's fields are missing: %r" % args)
    return {"action": "modify", "payload": {"arguments": {"mode": {"backup": args["path"] + ".bak"}}}}
"#,
    );
    dir.hook(
        "3-check.md",
        "event: tool.pre\npriority: 2\n",
        r#"
def handle(event, payload):
    if payload["arguments"]["mode"] != {"append": True, "backup": "src/a.txt.bak"}:
        fail("the second hook's fields are missing: %r" % payload)
    return None
"#,
    );
    let out = dispatch(&dir.load(), Event::ToolPre, call(), &["write_file"]);
    assert_eq!(
        runs(&out),
        [
            ("1-prefix", "modify"),
            ("2-backup", "modify"),
            ("3-check", "allow")
        ]
    );
    // Objects merged key by key: the untouched `content` and the first `mode` key survive.
    assert_eq!(
        out.payload,
        json!({"id": "call_1", "name": "write_file", "arguments": {
            "path": "src/a.txt", "content": "hi", "mode": {"append": true, "backup": "src/a.txt.bak"}}})
    );
    assert_eq!(out.blocked, None);
}

#[test]
fn a_block_after_a_modify_keeps_the_modified_payload() {
    let dir = HookDir::new();
    dir.hook(
        "1-modify.md",
        "event: delegation.post_verify\n",
        &returns(r#"modify({"response": "canonical"})"#),
    );
    dir.hook(
        "2-block.md",
        "event: delegation.post_verify\npriority: 1\n",
        &returns(r#"block("saw " + payload["response"])"#),
    );
    let out = dispatch(&dir.load(), Event::DelegationPostVerify, result(), &[]);
    assert_eq!(
        out.blocked.map(|b| (b.hook, b.reason)),
        Some(("2-block".to_owned(), "saw canonical".to_owned()))
    );
    assert_eq!(out.payload["response"], json!("canonical"));
}

#[test]
fn a_modify_that_breaks_the_events_shape_is_a_hook_error() {
    let cases = [
        (Event::ToolPre, call(), r#"modify({"name": 3})"#),
        (
            Event::ToolPre,
            call(),
            r#"modify({"arguments": "rm -rf /"})"#,
        ),
        (Event::ToolPre, call(), r#"modify({"extra": True})"#),
        (
            Event::ToolPost,
            tool_result(),
            r#"modify({"is_error": "yes"})"#,
        ),
        (
            Event::ToolPost,
            tool_result(),
            r#"modify({"content": None})"#,
        ),
        (
            Event::DelegationPostVerify,
            result(),
            r#"modify({"attempt": -1})"#,
        ),
        (
            Event::DelegationPostVerify,
            result(),
            r#"modify({"tool_calls": {}})"#,
        ),
        (
            Event::DelegationPostVerify,
            result(),
            r#"modify({"tool_calls": [1]})"#,
        ),
        (
            Event::DelegationPost,
            result(),
            r#"modify({"tool_results": [{"call_id": "c1", "name": "read_file"}]})"#,
        ),
        (Event::DelegationPre, request(), r#"modify({"tools": [3]})"#),
        (
            Event::DelegationPost,
            result(),
            r#"modify({"response": 42})"#,
        ),
        (
            Event::DelegationPre,
            request(),
            r#"modify({"task": ["a"]})"#,
        ),
        (
            Event::DelegationPre,
            request(),
            r#"modify({"delegate": "openai"})"#,
        ),
    ];
    for (event, payload, decision) in cases {
        let dir = HookDir::new();
        let breaker = dir.hook(
            "breaker.md",
            &format!("event: {event}\n"),
            &returns(decision),
        );
        dir.hook(
            "later.md",
            &format!("event: {event}\npriority: 1\n"),
            &returns("allow()"),
        );
        let err = dispatch_err(&dir.load(), event, payload, &["write_file"]);
        assert_eq!(
            (err.name.as_str(), err.path.as_path()),
            ("breaker", breaker.as_path()),
            "{event} {decision}"
        );
    }
}

#[test]
fn every_decision_form_is_read() {
    // (what `handle` returns, the action recorded, the payload's `response` afterwards)
    let cases = [
        ("None", "allow", "Done"),
        ("allow()", "allow", "Done"),
        (r#"{"action": "allow"}"#, "allow", "Done"),
        (r#"{"action": "allow", "reason": None}"#, "allow", "Done"),
        (r#"modify({"response": "x"})"#, "modify", "x"),
        (
            r#"{"action": "modify", "payload": {"response": "y"}}"#,
            "modify",
            "y",
        ),
        ("block('because')", "block", "Done"),
        (
            r#"{"action": "block", "reason": "because"}"#,
            "block",
            "Done",
        ),
        // A block without a reason still gives the delegate one.
        ("block('')", "block", "Done"),
        (r#"{"action": "block"}"#, "block", "Done"),
    ];
    for (decision, action, response) in cases {
        let dir = HookDir::new();
        dir.hook(
            "decide.md",
            "event: delegation.post_verify\n",
            &returns(decision),
        );
        let out = dispatch(&dir.load(), Event::DelegationPostVerify, result(), &[]);
        assert_eq!(runs(&out), [("decide", action)], "{decision}");
        assert_eq!(out.payload["response"], json!(response), "{decision}");
        if action == "block" {
            let block = out.blocked.expect("blocked");
            assert!(!block.reason.trim().is_empty(), "{decision}");
        } else {
            assert_eq!(out.blocked, None, "{decision}");
        }
    }
}

// --- fail-closed ---------------------------------------------------------------------------------

#[test]
fn a_broken_hook_is_an_error_never_an_allow() {
    let cases = [
        "fail('policy bug')",
        "1 // 0",
        "payload['no such key']",
        "True",
        "'allow'",
        "[allow()]",
        "{}",
        r#"{"action": "permit"}"#,
        r#"{"action": "modify"}"#,
        r#"{"action": "modify", "payload": [1]}"#,
        r#"{"action": "block", "reason": 3}"#,
        r#"{"action": "allow", "because": "extra key"}"#,
        "modify('not a dict')",
        // The sandbox: reads stay in the workspace.
        "fs.read('../outside.txt')",
        // The step budget.
        "allow() if len([i for i in range(1000000)]) else None",
    ];
    let limits = Limits {
        max_steps: 10_000,
        ..Limits::default()
    };
    for expr in cases {
        let dir = HookDir::new();
        let broken = dir.hook("broken.md", "event: tool.pre\n", &returns(expr));
        dir.hook(
            "after.md",
            "event: tool.pre\npriority: 1\n",
            &returns("allow()"),
        );
        let err = dispatch_err(
            &dir.load_with(limits.clone()),
            Event::ToolPre,
            call(),
            &["write_file"],
        );
        assert_eq!(err.name, "broken", "{expr}");
        assert_eq!(err.path, broken, "{expr}");
        assert!(
            err.to_string().contains("broken.md"),
            "the error names the hook file: {err}"
        );
    }
}

// --- when ------------------------------------------------------------------------------------------

#[test]
fn when_decides_whether_a_hook_runs() {
    let dir = HookDir::new();
    dir.hook(
        "reads-only.md",
        "event: tool.pre\nwhen: payload[\"name\"] == \"read_file\"\n",
        &returns("fail('a hook whose `when` is False ran')"),
    );
    dir.hook(
        "txt.md",
        "event: tool.pre\npriority: 1\nwhen: event == \"tool.pre\" and payload[\"arguments\"][\"path\"].endswith(\".txt\")\n",
        &returns("block('no .txt files')"),
    );
    let set = dir.load();
    assert_eq!(
        set.hooks()[0].when_source.as_deref(),
        Some(r#"payload["name"] == "read_file""#)
    );

    let out = dispatch(&set, Event::ToolPre, call(), &["write_file"]);
    assert_eq!(runs(&out), [("txt", "block")]);

    let md = json!({"id": "c", "name": "write_file", "arguments": {"path": "a.md"}});
    let out = dispatch(&set, Event::ToolPre, md.clone(), &["write_file"]);
    assert!(out.runs.is_empty(), "both hooks skipped: {out:#?}");
    assert_eq!(out.payload, md);
}

#[test]
fn a_when_that_fails_or_is_not_a_bool_is_a_hook_error() {
    for when in [
        r#"payload["no such key"]"#,
        "1 // 0",
        r#"payload["name"]"#,
        "None",
        "1",
        "[True]",
    ] {
        let dir = HookDir::new();
        dir.hook(
            "guard.md",
            &format!("event: tool.pre\nwhen: '{when}'\n"),
            &returns("allow()"),
        );
        let err = dispatch_err(&dir.load(), Event::ToolPre, call(), &["write_file"]);
        assert_eq!(err.name, "guard", "when: {when}");
    }
}

// --- matchers ----------------------------------------------------------------------------------

#[test]
fn tools_globs_pick_the_tool_hooks_that_run() {
    let dir = HookDir::new();
    dir.hook(
        "writes.md",
        "event: tool.pre\ntools: [\"write_*\"]\n",
        &returns(r#"modify({"arguments": {"checked": True}})"#),
    );
    dir.hook(
        "commands.md",
        "event: tool.pre\ntools: [run_command, \"exec_*\"]\n",
        &returns("block('no commands')"),
    );
    dir.hook("any-tool.md", "event: tool.pre\n", &returns("allow()"));
    let set = dir.load();
    assert_eq!(
        set.hooks()
            .iter()
            .map(|h| h.tools.as_ref().map(|m| m.patterns().to_vec()))
            .collect::<Vec<_>>(),
        [
            None,
            Some(vec!["run_command".to_owned(), "exec_*".to_owned()]),
            Some(vec!["write_*".to_owned()])
        ]
    );

    let out = dispatch(&set, Event::ToolPre, call(), &["write_file"]);
    assert_eq!(runs(&out), [("any-tool", "allow"), ("writes", "modify")]);
    assert_eq!(out.payload["arguments"]["checked"], json!(true));

    let run = json!({"id": "c", "name": "run_command", "arguments": {"argv": ["ls"]}});
    let out = dispatch(&set, Event::ToolPre, run, &["run_command"]);
    assert_eq!(runs(&out), [("any-tool", "allow"), ("commands", "block")]);

    let read = json!({"id": "c", "name": "read_file", "arguments": {"path": "a"}});
    let out = dispatch(&set, Event::ToolPre, read, &["read_file"]);
    assert_eq!(runs(&out), [("any-tool", "allow")]);
    assert!(set.applies(Event::ToolPre, &["read_file"]));
}

#[test]
fn delegates_globs_pick_the_delegation_hooks_that_run() {
    let dir = HookDir::new();
    dir.hook(
        "openai-only.md",
        "event: delegation.pre\ndelegates: [openai]\n",
        &returns("block('no remote models')"),
    );
    dir.hook(
        "gpt.md",
        "event: delegation.pre\ndelegates: [\"gpt-4*\"]\n",
        &returns(r#"modify({"task": payload["task"] + " (be brief)"})"#),
    );
    dir.hook(
        "scripted.md",
        "event: delegation.post_verify\ndelegates: [scripted]\n",
        &returns("block('scripted results are never trusted')"),
    );
    dir.hook("any.md", "event: delegation.pre\n", &returns("allow()"));
    let set = dir.load();

    let out = dispatch(&set, Event::DelegationPre, request(), &["scripted"]);
    assert_eq!(runs(&out), [("any", "allow")]);
    assert!(set.applies(Event::DelegationPostVerify, &["scripted"]));
    assert!(!set.applies(Event::DelegationPostVerify, &["openai", "gpt-4o"]));

    let out = dispatch(&set, Event::DelegationPre, request(), &["openai", "gpt-4o"]);
    assert_eq!(
        runs(&out),
        [
            ("any", "allow"),
            ("gpt", "modify"),
            ("openai-only", "block")
        ]
    );
    assert_eq!(out.payload["task"], json!("Create hello.txt (be brief)"));
}

// --- loading -----------------------------------------------------------------------------------

/// Returns `(file name, line)` of each problem, sorted.
fn locations(problems: &[Problem]) -> Vec<(String, Option<usize>)> {
    let mut found: Vec<(String, Option<usize>)> = problems
        .iter()
        .map(|p| {
            let name = p.path.file_name().expect("a file name");
            (name.to_string_lossy().into_owned(), p.line)
        })
        .collect();
    found.sort();
    found
}

#[test]
fn every_load_problem_is_reported_at_once_with_file_and_line() {
    let dir = HookDir::new();
    let ok = returns("allow()");
    dir.hook("good.md", "event: tool.pre\n", &ok);
    // Line 3: the unknown key.
    dir.hook("unknown-key.md", "event: tool.pre\nprio: 1\n", &ok);
    // Line 2: the `event` line.
    dir.hook("unknown-event.md", "event: tool.done\n", &ok);
    // No line to point at.
    dir.hook("missing-event.md", "priority: 1\n", &ok);
    // The script starts on line 5; its second line (file line 6) does not parse.
    dir.hook(
        "no-parse.md",
        "event: tool.pre\npriority: 1\n",
        "def handle(event, payload):\n    return )\n",
    );
    // Line 4: the script's first line.
    dir.hook(
        "no-handle.md",
        "event: tool.pre\n",
        "def handler(event, payload):\n    return None\n",
    );
    // Line 3: `script_file`.
    dir.raw("policy.star", &ok);
    dir.hook(
        "both-scripts.md",
        "event: tool.pre\nscript_file: policy.star\n",
        &ok,
    );
    // Line 3: `tools`.
    dir.hook("bad-glob.md", "event: tool.pre\ntools: [\"a[b\"]\n", &ok);
    // Line 2: `priority`.
    dir.hook("priority-word.md", "priority: high\nevent: tool.pre\n", &ok);
    dir.hook("priority-float.md", "event: tool.pre\npriority: 1.5\n", &ok);
    dir.raw(
        "no-front-matter.md",
        "# Just documentation\n\nevent: tool.pre\n",
    );
    dir.raw(
        "unclosed.md",
        "---\nevent: tool.pre\nscript: |\n  def handle(e, p):\n    return None\n",
    );
    // Line 3: `when`.
    dir.hook("bad-when.md", "event: tool.pre\nwhen: payload[\n", &ok);
    // Line 3: `script_file`.
    dir.raw(
        "missing-script-file.md",
        "---\nevent: tool.pre\nscript_file: nowhere.star\n---\n",
    );
    dir.raw("no-script.md", "---\nevent: tool.pre\n---\n");
    // Line 3: `tools` on a delegation event.
    dir.hook(
        "tools-on-delegation.md",
        "event: delegation.pre\ntools: [x]\n",
        &ok,
    );

    let problems = dir.problems();
    assert_eq!(
        locations(&problems),
        [
            ("bad-glob.md".to_owned(), Some(3)),
            ("bad-when.md".to_owned(), Some(3)),
            ("both-scripts.md".to_owned(), Some(3)),
            ("missing-event.md".to_owned(), None),
            ("missing-script-file.md".to_owned(), Some(3)),
            ("no-front-matter.md".to_owned(), Some(1)),
            ("no-handle.md".to_owned(), Some(4)),
            ("no-parse.md".to_owned(), Some(6)),
            ("no-script.md".to_owned(), None),
            ("priority-float.md".to_owned(), Some(3)),
            ("priority-word.md".to_owned(), Some(2)),
            ("tools-on-delegation.md".to_owned(), Some(3)),
            ("unclosed.md".to_owned(), Some(1)),
            ("unknown-event.md".to_owned(), Some(2)),
            ("unknown-key.md".to_owned(), Some(3)),
        ],
        "{problems:#?}"
    );
    for problem in &problems {
        let shown = problem.to_string();
        assert!(
            shown.starts_with(&problem.path.display().to_string()),
            "{shown}"
        );
        if let Some(line) = problem.line {
            assert!(shown.contains(&format!(":{line}: ")), "{shown}");
        }
        assert!(!problem.message.is_empty());
    }
}

#[test]
fn all_problems_of_one_file_are_reported() {
    let dir = HookDir::new();
    dir.hook(
        "many.md",
        "event: tool.finished\nprio: 1\npriority: high\ndelegates: [\"{a,b\"]\ntools: write_file\n",
        "def handler(event, payload):\n    return None\n",
    );
    let problems = dir.problems();
    assert_eq!(
        locations(&problems),
        [
            ("many.md".to_owned(), Some(2)),
            ("many.md".to_owned(), Some(3)),
            ("many.md".to_owned(), Some(4)),
            ("many.md".to_owned(), Some(5)),
            ("many.md".to_owned(), Some(6)),
            ("many.md".to_owned(), Some(8)),
        ],
        "{problems:#?}"
    );
}

#[test]
fn a_script_that_fails_at_load_is_a_problem() {
    let dir = HookDir::new();
    dir.hook(
        "top-level.md",
        "event: tool.pre\n",
        "LIMIT = 1 // 0\ndef handle(event, payload):\n    return None\n",
    );
    let problems = dir.problems();
    assert_eq!(problems.len(), 1, "{problems:#?}");
    assert_eq!(problems[0].path, dir.root().join("top-level.md"));
}

#[test]
fn script_file_is_relative_to_the_hook_and_its_problems_point_into_it() {
    let dir = HookDir::new();
    dir.raw(
        "policies/guard.star",
        "def handle(event, payload):\n    return block('from the script file')\n",
    );
    dir.raw(
        "hooks/guard.md",
        "---\nevent: tool.pre\nscript_file: ../policies/guard.star\n---\n",
    );
    let set = dir.load();
    let out = dispatch(&set, Event::ToolPre, call(), &["write_file"]);
    assert_eq!(
        out.blocked.map(|b| (b.hook, b.reason)),
        Some(("guard".to_owned(), "from the script file".to_owned()))
    );

    // A syntax error on line 3 of the script file is reported at that file and line.
    let broken = dir.raw(
        "policies/guard.star",
        "def handle(event, payload):\n    x = 1\n    return )\n",
    );
    let problems = dir.problems();
    assert_eq!(problems.len(), 1, "{problems:#?}");
    assert_eq!(problems[0].path.canonicalize().ok(), Some(broken));
    assert_eq!(problems[0].line, Some(3));
}

#[test]
fn a_missing_path_is_a_problem() {
    let dir = HookDir::new();
    dir.hook("good.md", "event: tool.pre\n", &returns("allow()"));
    let missing = dir.root().join("no-such-dir");
    let problems = dir
        .try_load(&[dir.root(), missing.clone()])
        .expect_err("a missing path is a problem");
    assert_eq!(problems.len(), 1);
    assert_eq!(
        (problems[0].path.clone(), problems[0].line),
        (missing, None)
    );
}

#[test]
fn a_file_named_twice_is_loaded_once() {
    let dir = HookDir::new();
    let guard = dir.hook("hooks/guard.md", "event: tool.pre\n", &returns("allow()"));
    dir.hook("hooks/audit.md", "event: tool.post\n", &returns("allow()"));
    let hooks = dir.root().join("hooks");
    let set = dir
        .try_load(&[hooks.clone(), guard, hooks.join("../hooks"), hooks])
        .expect("the hooks load");
    assert_eq!(names(&set), ["guard", "audit"]);
    let out = dispatch(&set, Event::ToolPre, call(), &["write_file"]);
    assert_eq!(runs(&out), [("guard", "allow")]);
}

#[test]
fn single_files_and_directories_load_together() {
    let dir = HookDir::new();
    dir.hook("a/one.md", "event: tool.pre\n", &returns("allow()"));
    let two = dir.hook("b/two.md", "event: tool.pre\n", &returns("allow()"));
    dir.hook(
        "b/three.md",
        "event: tool.pre\n",
        &returns("fail('not asked for')"),
    );
    let set = dir
        .try_load(&[dir.root().join("a"), two])
        .expect("the hooks load");
    assert_eq!(names(&set), ["one", "two"]);
    assert!(set.hooks()[1].path.ends_with("b/two.md"));
}

#[test]
fn inline_dispatch_stops_before_a_hook_that_needs_a_thread_and_resume_runs_each_hook_once() {
    let dir = HookDir::new();
    dir.raw("marker.txt", "present");
    dir.hook(
        "a.md",
        "event: tool.pre\npriority: 1\n",
        &returns(r#"modify({"arguments": {"path": "src/a.txt"}})"#),
    );
    dir.hook(
        "b.md",
        "event: tool.pre\npriority: 2\n",
        "def handle(event, payload):\n    return allow() if fs.exists('marker.txt') else block('no marker')\n",
    );
    dir.hook(
        "c.md",
        "event: tool.pre\npriority: 3\n",
        "def handle(event, payload):\n    return allow() if payload['arguments']['path'] == 'src/a.txt' else block('unmodified')\n",
    );
    let set = dir.load();
    let step = set
        .dispatch_inline(Event::ToolPre, call(), &["write_file"])
        .expect("no hook is broken");
    let harness_hooks::Step::Deferred(from) = step else {
        panic!("the fs hook must defer the dispatch to a blocking thread");
    };
    let done = set
        .resume(Event::ToolPre, from, &["write_file"])
        .expect("resumes");
    assert_eq!(
        runs(&done),
        vec![("a", "modify"), ("b", "allow"), ("c", "allow")]
    );
    assert_eq!(done.payload["arguments"]["path"], "src/a.txt");
    assert!(done.blocked.is_none());
    // The same hooks through the blocking dispatch decide exactly the same.
    assert_eq!(
        dispatch(&set, Event::ToolPre, call(), &["write_file"]),
        done
    );
}

#[test]
fn inline_dispatch_of_pure_hooks_finishes_on_the_calling_thread() {
    let dir = HookDir::new();
    dir.hook("a.md", "event: tool.pre\n", &returns("allow()"));
    dir.hook("b.md", "event: tool.pre\n", &returns(r#"block("no")"#));
    let set = dir.load();
    match set
        .dispatch_inline(Event::ToolPre, call(), &["write_file"])
        .expect("no hook is broken")
    {
        harness_hooks::Step::Done(done) => {
            assert_eq!(runs(&done), vec![("a", "allow"), ("b", "block")]);
        }
        harness_hooks::Step::Deferred(_) => panic!("pure hooks need no thread"),
    }
}
