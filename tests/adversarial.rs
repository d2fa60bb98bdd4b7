//! Hostile delegates and scripts (issue 14): each test plays an adversary against the built
//! binary and asserts the typed error, that the process survived to report it, that the run is
//! recorded, and that nothing outside the workspace (or inside the policy) changed.

use std::path::Path;

use serde_json::{Value, json};

use crate::util::{Output, TempDir, harness, repo_root};

/// An agent that makes `calls` (a Starlark list literal) on its first turn of every attempt and
/// then answers "done".
fn calls_then_done(calls: &str) -> String {
    format!(
        "def respond(request):\n    if request[\"messages\"][-1][\"role\"] == \"tool\":\n        return {{\"content\": \"done\"}}\n    return {{\"tool_calls\": {calls}}}\n"
    )
}

/// A project: `ws/` the workspace (with `.harness/`), the delegation file and agent beside it
/// in `ws/` too, so the file and the scripts are inside the delegate's reach.
fn project(agent: &str, extra: &str) -> TempDir {
    let dir = TempDir::new();
    dir.write("ws/agent.star", agent);
    dir.write(
        "ws/verify.star",
        "def run(result):\n    return {\"verified\": fs.exists(\"hello.txt\"), \"reason\": \"hello.txt is missing\"}\n",
    );
    dir.write(
        "ws/.harness/hooks/gate.md",
        "---\nevent: delegation.post_verify\nscript: |\n  def handle(event, payload):\n      return allow()\n---\n",
    );
    dir.write(
        "ws/delegation.yaml",
        format!(
            "task: write hello.txt\ndelegate: {{kind: scripted, script: agent.star}}\nverify_file: verify.star\nmax_verify_retries: 0\nlimits: {{timeout_s: 30}}\n{extra}"
        ),
    );
    dir
}

/// A project policy that runs commands unconfined: the attacks the guards must catch after the
/// fact, as they would where bubblewrap is missing.
const UNCONFINED: &str = "commands: {isolation: none}\n";

/// Runs `harness run --json` on the project's delegation file with a journal in the project.
fn run(dir: &TempDir) -> (Output, Value) {
    let out = harness(["run", "--json", "--journal"])
        .args([dir.join("runs.db"), dir.join("ws/delegation.yaml")])
        .run();
    let report = out.json();
    (out, report)
}

/// The recorded run `id` in the project's journal, as `harness runs show --json` prints it.
fn recorded(dir: &TempDir, id: &str) -> Value {
    let out = harness(["runs", "show", "--json", "--journal"])
        .args([dir.join("runs.db").into_os_string(), id.into()])
        .run();
    out.expect_code(0);
    out.json()
}

fn tool_results(report: &Value) -> Vec<Value> {
    report["result"]["tool_results"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

fn snapshot(paths: &[&Path]) -> Vec<Option<String>> {
    paths
        .iter()
        .map(|p| std::fs::read_to_string(p).ok())
        .collect()
}

// --- class 1: policy tampering ------------------------------------------------------------------

#[test]
fn delegate_tools_cannot_rewrite_the_policy_that_judges_them() {
    let calls = r#"[
        {"name": "write_file", "arguments": {"path": "verify.star", "content": "def run(result):\n    return True\n"}},
        {"name": "write_file", "arguments": {"path": ".harness/hooks/gate.md", "content": "x"}},
        {"name": "write_file", "arguments": {"path": ".harness/hooks/new.md", "content": "x"}},
        {"name": "write_file", "arguments": {"path": ".harness/policy.yaml", "content": "max_verify_retries: 9\n"}},
        {"name": "write_file", "arguments": {"path": "./delegation.yaml", "content": "x"}},
        {"name": "write_file", "arguments": {"path": "agent.star", "content": "x"}},
        {"name": "write_file", "arguments": {"path": "sub/../.harness/runs.db", "content": "x"}},
    ]"#;
    let dir = project(&calls_then_done(calls), "tools: [write_file]\nworkdir: .\n");
    let guarded = [
        dir.join("ws/verify.star"),
        dir.join("ws/.harness/hooks/gate.md"),
        dir.join("ws/delegation.yaml"),
        dir.join("ws/agent.star"),
    ];
    let guarded: Vec<&Path> = guarded.iter().map(|p| p.as_path()).collect();
    let before = snapshot(&guarded);
    let (out, report) = run(&dir);
    // Every write was refused, so the verifier still judges: hello.txt was never written.
    out.expect_code(1);
    assert_eq!(report["outcome"], json!("failed"), "{out:?}");
    assert_eq!(report["kind"], json!("verification_failed"), "{out:?}");
    let results = tool_results(&report);
    assert_eq!(results.len(), 7, "{results:?}");
    for result in &results {
        assert_eq!(result["is_error"], json!(true), "{result}");
        assert!(
            result["content"]
                .as_str()
                .is_some_and(|c| c.contains("harness policy")),
            "{result}"
        );
    }
    assert_eq!(snapshot(&guarded), before);
    assert!(!dir.join("ws/.harness/hooks/new.md").exists());
    assert!(!dir.join("ws/.harness/policy.yaml").exists());
}

/// The per-tool verifier's file and the critic's script judge the delegate too: they are as
/// protected as the verifier (a rewrite would take effect on the next run).
#[test]
fn delegate_tools_cannot_rewrite_a_tool_verifier_or_the_critics_script() {
    let calls = r#"[
        {"name": "write_file", "arguments": {"path": "tool_check.star", "content": "def run(call, result):\n    return True\n"}},
        {"name": "write_file", "arguments": {"path": "reviewer.star", "content": "x"}},
    ]"#;
    let dir = project(
        &calls_then_done(calls),
        "tools:\n  - {name: write_file, verify_file: tool_check.star}\nworkdir: .\ncritic:\n  when: always\n  delegate: {kind: scripted, script: reviewer.star}\n",
    );
    dir.write(
        "ws/tool_check.star",
        "def run(call, result):\n    return {\"verified\": True}\n",
    );
    dir.write(
        "ws/reviewer.star",
        "def respond(request):\n    return '{\"outcome\": \"PASS\", \"reasoning\": \"fine\", \"findings\": []}'\n",
    );
    let guarded = [dir.join("ws/tool_check.star"), dir.join("ws/reviewer.star")];
    let guarded: Vec<&Path> = guarded.iter().map(|p| p.as_path()).collect();
    let before = snapshot(&guarded);
    let (out, report) = run(&dir);
    out.expect_code(1);
    let results = tool_results(&report);
    assert_eq!(results.len(), 2, "{out:?}");
    for result in &results {
        assert_eq!(result["is_error"], json!(true), "{result}");
        assert!(
            result["content"]
                .as_str()
                .is_some_and(|c| c.contains("harness policy")),
            "{result}"
        );
    }
    assert_eq!(snapshot(&guarded), before);
}

#[test]
fn a_policy_change_made_by_a_command_fails_the_run_as_gate_tampered() {
    // The verifier would fail (no hello.txt); the delegate rewrites it to pass instead.
    let calls = r#"[{"name": "run_command", "arguments": {"argv": ["sh", "-c", "printf 'def run(result):\\n    return True\\n' > verify.star"]}}]"#;
    let dir = project(
        &calls_then_done(calls),
        "tools: [run_command]\nworkdir: .\n",
    );
    // Unconfined (confined, the write is refused: see the bwrap tests below): the change is
    // made, and found.
    dir.write("ws/.harness/policy.yaml", UNCONFINED);
    let (out, report) = run(&dir);
    out.expect_code(1);
    assert_eq!(report["outcome"], json!("failed"), "{out:?}");
    assert_eq!(report["kind"], json!("gate_tampered"), "{out:?}");
    assert_eq!(report["verified"], json!(false));
    let message = report["error"]["message"].as_str().expect("message");
    assert!(message.contains("verify.star (modified)"), "{message}");
    let finding = &report["history"][0]["findings"][0];
    assert_eq!(finding["source"], json!("integrity"), "{report}");
    // The command did run: the change is real, and it was found.
    assert!(
        dir.read("ws/verify.star")
            .is_some_and(|s| s.contains("return True"))
    );
    let id = report["id"].as_str().expect("id");
    let record = recorded(&dir, id);
    assert_eq!(record["outcome"], json!("failed"), "{record}");
    assert_eq!(record["error"]["kind"], json!("gate_tampered"), "{record}");
}

#[test]
fn a_batch_judges_every_line_by_the_scripts_it_read_before_the_first_ran() {
    let dir = TempDir::new();
    // Line 1 rewrites the verifier to pass everything and appends a line to the batch file;
    // line 2 does nothing and must still be judged by the verifier as it was.
    dir.write(
        "ws/tamper.star",
        calls_then_done(
            r#"[{"name": "run_command", "arguments": {"argv": ["sh", "-c", "printf 'def run(result):\\n    return True\\n' > verify.star; echo '{\"task\": \"appended\", \"delegate\": {\"kind\": \"scripted\", \"script\": \"idle.star\"}}' >> batch.jsonl"]}}]"#,
        ),
    );
    dir.write(
        "ws/idle.star",
        "def respond(request):\n    return {\"content\": \"done\"}\n",
    );
    dir.write("ws/.harness/policy.yaml", UNCONFINED);
    dir.write(
        "ws/verify.star",
        "def run(result):\n    return {\"verified\": fs.exists(\"hello.txt\"), \"reason\": \"hello.txt is missing\"}\n",
    );
    let line = |agent: &str, tools: &str| {
        json!({"task": "write hello.txt", "delegate": {"kind": "scripted", "script": agent},
            "tools": [tools], "verify_file": "verify.star", "max_verify_retries": 0})
        .to_string()
    };
    dir.write(
        "ws/batch.jsonl",
        format!(
            "{}\n{}\n",
            line("tamper.star", "run_command"),
            line("idle.star", "read_file")
        ),
    );
    let out = harness(["batch", "--json", "--concurrency", "1", "--journal"])
        .args([dir.join("runs.db"), dir.join("ws/batch.jsonl")])
        .run();
    let lines: Vec<Value> = out
        .stdout
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .filter(|v: &Value| v.get("line").is_some())
        .collect();
    assert_eq!(lines.len(), 2, "the appended line must not run: {out:?}");
    let by_line = |n: u64| {
        lines
            .iter()
            .find(|l| l["line"] == json!(n))
            .unwrap_or_else(|| panic!("line {n}: {out:?}"))
    };
    assert_eq!(by_line(1)["kind"], json!("gate_tampered"), "{out:?}");
    assert_eq!(by_line(2)["outcome"], json!("failed"), "{out:?}");
    assert_eq!(by_line(2)["kind"], json!("verification_failed"), "{out:?}");
}

// --- class 2: writes through links, special files --------------------------------------------

#[cfg(unix)]
#[test]
fn writes_through_dangling_links_are_refused_and_land_nowhere() {
    let outside = TempDir::new();
    let target = outside.join("planted.txt");
    let target_dir = outside.join("made");
    let calls = r#"[
        {"name": "write_file", "arguments": {"path": "link.txt", "content": "escaped"}},
        {"name": "write_file", "arguments": {"path": "dirlink/x.txt", "content": "escaped"}},
        {"name": "write_file", "arguments": {"path": "hard.txt", "content": "escaped"}},
        {"name": "write_file", "arguments": {"path": "fine.txt", "content": "ok"}},
    ]"#;
    let dir = project(&calls_then_done(calls), "tools: [write_file]\nworkdir: .\n");
    std::os::unix::fs::symlink(&target, dir.join("ws/link.txt")).expect("symlink");
    std::os::unix::fs::symlink(&target_dir, dir.join("ws/dirlink")).expect("symlink");
    // A hard link to a file outside (as a command could have made it on the same file system).
    let linked = outside.write("linked.txt", "untouched");
    std::fs::hard_link(&linked, dir.join("ws/hard.txt")).expect("hard link");
    let (out, report) = run(&dir);
    out.expect_code(1);
    let results = tool_results(&report);
    assert_eq!(results.len(), 4, "{out:?}");
    assert_eq!(results[2]["is_error"], json!(true), "{:?}", results[2]);
    assert!(
        results[2]["content"]
            .as_str()
            .is_some_and(|c| c.contains("hard links")),
        "{:?}",
        results[2]
    );
    assert_eq!(
        std::fs::read_to_string(&linked).ok().as_deref(),
        Some("untouched")
    );
    for result in &results[..2] {
        assert_eq!(result["is_error"], json!(true), "{result}");
        assert!(
            result["content"]
                .as_str()
                .is_some_and(|c| c.contains("dangling symbolic link")),
            "{result}"
        );
    }
    assert_eq!(results[3]["is_error"], json!(false), "{:?}", results[3]);
    assert!(!target.exists(), "a write escaped through a dangling link");
    assert!(
        !target_dir.exists(),
        "a directory was made outside the workspace"
    );
}

// --- class 4: hangs -----------------------------------------------------------------------------

#[cfg(unix)]
#[test]
fn a_fifo_in_the_workspace_is_refused_not_waited_on() {
    let calls = r#"[{"name": "read_file", "arguments": {"path": "pipe"}}, {"name": "write_file", "arguments": {"path": "pipe", "content": "x"}}]"#;
    let dir = project(
        &calls_then_done(calls),
        "tools: [read_file, write_file]\nworkdir: .\n",
    );
    // The verifier reads the FIFO too.
    dir.write(
        "ws/verify.star",
        "def run(result):\n    return fs.read(\"pipe\") == \"\"\n",
    );
    let made = std::process::Command::new("mkfifo")
        .arg(dir.join("ws/pipe"))
        .status()
        .expect("mkfifo runs");
    assert!(made.success());
    let (out, report) = run(&dir);
    // Before: both blocked until limits.timeout_s, then `timeout`.
    assert_eq!(report["error"]["kind"], json!("verifier"), "{out:?}");
    assert!(
        report["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("FIFO")),
        "{report}"
    );
    let results = tool_results(&report);
    assert_eq!(results.len(), 2, "{out:?}");
    for result in &results {
        assert_eq!(result["is_error"], json!(true), "{result}");
        assert!(
            result["content"]
                .as_str()
                .is_some_and(|c| c.contains("FIFO")),
            "{result}"
        );
    }
}

#[cfg(unix)]
#[test]
fn run_command_ends_with_its_process_group() {
    // The command returns at once but leaves a background child holding its output open, which
    // would write a file two seconds later.
    let calls = r#"[{"name": "run_command", "arguments": {"argv": ["sh", "-c", "(sleep 2.01; touch late.txt) & echo started"], "timeout_s": 20}}]"#;
    let dir = project(
        &calls_then_done(calls),
        "tools: [run_command]\nworkdir: .\n",
    );
    let (out, report) = run(&dir);
    // Before: the pipe stayed open until the command's timeout, then the delegation's.
    out.expect_code(1);
    assert_eq!(report["kind"], json!("verification_failed"), "{out:?}");
    let results = tool_results(&report);
    assert!(
        results[0]["content"]
            .as_str()
            .is_some_and(|c| c.contains("exit code 0") && c.contains("started")),
        "{results:?}"
    );
    assert!(
        crate::util::gone("sleep 2.01; touch late.txt"),
        "a background child outlived its command"
    );
    assert!(!dir.join("ws/late.txt").exists());
}

/// Starts `harness ARGS`, waits until every file of `started` exists (its commands are running),
/// then kills it with SIGKILL: no chance to clean up.
#[cfg(target_os = "linux")]
fn kill_once_started(args: &[&std::ffi::OsStr], started: &[std::path::PathBuf]) {
    let mut child = std::process::Command::new(crate::util::harness_bin())
        .args(args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("harness starts");
    assert!(
        crate::util::eventually(|| started.iter().all(|f| f.exists())),
        "the commands never started"
    );
    child.kill().expect("SIGKILL");
    child.wait().expect("reaped");
}

/// `harness batch` killed with SIGKILL while two delegations run: both are in the journal from
/// their start, and are shown as interrupted, not lost.
#[cfg(target_os = "linux")]
#[test]
fn a_killed_batch_leaves_its_running_delegations_on_record_as_interrupted() {
    let dir = TempDir::new();
    for n in 0..2 {
        std::fs::create_dir_all(dir.join(format!("ws/w{n}"))).expect("workspace");
        dir.write(
            format!("ws/agent{n}.star"),
            format!(
                "def respond(request):\n    if request[\"turn\"] == 0:\n        return {{\"tool_calls\": [{{\"name\": \"run_command\", \"arguments\": {{\"argv\": [\"sh\", \"-c\", \"touch started{n}; sleep 5\"]}}}}]}}\n    return \"done\"\n"
            ),
        );
    }
    dir.write(
        "ws/batch.jsonl",
        (0..2)
            .map(|n| {
                json!({"task": "t", "delegate": {"kind": "scripted", "script": format!("agent{n}.star")},
                    "tools": ["run_command"], "workdir": format!("w{n}")})
                .to_string()
                    + "\n"
            })
            .collect::<String>(),
    );
    kill_once_started(
        &[
            "batch".as_ref(),
            "--concurrency".as_ref(),
            "2".as_ref(),
            "--journal".as_ref(),
            dir.join("runs.db").as_os_str(),
            dir.join("ws/batch.jsonl").as_os_str(),
        ],
        &[dir.join("ws/w0/started0"), dir.join("ws/w1/started1")],
    );
    let listed = harness(["runs", "list", "--json", "--journal"])
        .args([dir.join("runs.db")])
        .run()
        .json();
    let runs = listed["runs"].as_array().expect("runs");
    assert_eq!(runs.len(), 2, "{listed}");
    for run in runs {
        assert_eq!(run["error"]["kind"], json!("interrupted"), "{listed}");
    }
}

/// A child that detaches itself (`setsid`: a session and group of its own) escaped the
/// process-group kill; harness is a child subreaper, so it comes back to harness when its
/// parent exits and is killed when its command ends. Unconfined, where this is all there is.
#[cfg(target_os = "linux")]
#[test]
fn a_detached_child_is_killed_when_its_command_ends() {
    let calls = r#"[{"name": "run_command", "arguments": {"argv": ["sh", "-c", "setsid sh -c 'sleep 1.51; touch late.txt' >/dev/null 2>&1 </dev/null & sleep 0.3; echo started"]}}]"#;
    let dir = project(
        &calls_then_done(calls),
        "tools: [run_command]\nworkdir: .\n",
    );
    dir.write("ws/.harness/policy.yaml", UNCONFINED);
    let (out, report) = run(&dir);
    assert_eq!(report["kind"], json!("verification_failed"), "{out:?}");
    assert!(
        crate::util::gone("sleep 1.51; touch late.txt"),
        "a detached child outlived its command"
    );
    assert!(!dir.join("ws/late.txt").exists());
}

/// `harness run` killed with SIGKILL (no chance to clean up): its running command dies with it
/// (a parent-death signal unconfined; bubblewrap's `--die-with-parent` confined).
#[cfg(target_os = "linux")]
#[test]
fn a_killed_harness_leaves_its_command_not_running() {
    for policy in [Some(UNCONFINED), None] {
        let calls = r#"[{"name": "run_command", "arguments": {"argv": ["sh", "-c", "touch started; sleep 2.02; echo survived > late.txt"]}}]"#;
        let dir = project(
            &calls_then_done(calls),
            "tools: [run_command]\nworkdir: .\n",
        );
        if let Some(policy) = policy {
            dir.write("ws/.harness/policy.yaml", policy);
        }
        kill_once_started(
            &[
                "run".as_ref(),
                "--journal".as_ref(),
                dir.join("runs.db").as_os_str(),
                dir.join("ws/delegation.yaml").as_os_str(),
            ],
            &[dir.join("ws/started")],
        );
        assert!(
            crate::util::gone("sleep 2.02; echo survived"),
            "{policy:?}: the command outlived a killed harness"
        );
        assert!(!dir.join("ws/late.txt").exists());
        // Its row was written when it started: the run is found, as interrupted, and its
        // record does not audit as a whole run.
        let listed = harness(["runs", "list", "--json", "--journal"])
            .args([dir.join("runs.db")])
            .run()
            .json();
        let run = &listed["runs"][0];
        assert_eq!(run["outcome"], json!("error"), "{listed}");
        assert_eq!(run["error"]["kind"], json!("interrupted"), "{listed}");
        let id = run["id"].as_str().expect("an id");
        let audit = harness(["audit", "--json", id, "--journal"])
            .args([dir.join("runs.db")])
            .run();
        audit.expect_code(1);
        let failures = audit.json()["failures"].to_string();
        assert!(
            failures.contains("truncated") && failures.contains("never completed"),
            "{failures}"
        );
    }
}

#[cfg(unix)]
#[test]
fn a_command_delegate_ends_with_its_process_group() {
    // The agent CLI answers at once but leaves a background child holding its output open, which
    // would write a file two seconds later.
    let dir = TempDir::new();
    std::fs::create_dir_all(dir.join("ws")).expect("workspace");
    dir.write(
        "delegation.yaml",
        "task: answer\ndelegate: {kind: command, command: [sh, -c, '(sleep 2.03; touch late.txt) & echo Done']}\nworkdir: ws\nverify: |\n  def run(result):\n      return result[\"response\"] == \"Done\"\n",
    );
    let out = harness(["run", "--json", "--no-journal"])
        .args([dir.join("delegation.yaml")])
        .run();
    out.expect_code(0);
    assert!(
        crate::util::gone("sleep 2.03; touch late.txt"),
        "a background child outlived the delegate"
    );
    assert!(!dir.join("ws/late.txt").exists());
}

// --- class 5: run_command confinement ----------------------------------------------------------

#[cfg(unix)]
#[test]
fn run_command_gets_a_scrubbed_environment_a_private_home_and_no_workspace_programs() {
    let calls = r#"[
        {"name": "run_command", "arguments": {"argv": ["sh", "-c", "echo HOME=$HOME; echo TOKEN=$HARNESS_TEST_SECRET; echo PWD=$(pwd); touch \"$HOME/home-was-writable\""]}},
        {"name": "run_command", "arguments": {"argv": ["planted"]}},
    ]"#;
    let dir = project(
        &calls_then_done(calls),
        "tools: [run_command]\nworkdir: .\n",
    );
    // A program planted in the workspace, which a PATH holding `.` would find first.
    let planted = dir.write("ws/planted", "#!/bin/sh\ntouch pwned\n");
    let mode = std::os::unix::fs::PermissionsExt::from_mode(0o755);
    std::fs::set_permissions(&planted, mode).expect("chmod");
    let path = format!(
        ".:{}:{}",
        dir.join("ws").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let user_home = TempDir::new();
    let out = harness(["run", "--json", "--journal"])
        .args([dir.join("runs.db"), dir.join("ws/delegation.yaml")])
        .current_dir(dir.join("ws"))
        .env("PATH", &path)
        .env("HOME", user_home.path().to_str().expect("utf-8"))
        .env("HARNESS_TEST_SECRET", "s3cr3t-value")
        .run();
    let report = out.json();
    let results = tool_results(&report);
    assert_eq!(results.len(), 2, "{out:?}");
    let shown = results[0]["content"].as_str().expect("content");
    assert!(!shown.contains("s3cr3t-value"), "{shown}");
    assert!(
        shown.contains(&format!("PWD={}", dir.join("ws").display())),
        "{shown}"
    );
    let home = shown
        .lines()
        .find_map(|l| l.strip_prefix("HOME="))
        .expect("HOME printed");
    assert!(!home.is_empty());
    assert_ne!(Path::new(home), user_home.path(), "{shown}");
    assert!(!Path::new(home).starts_with(dir.path()), "{shown}");
    assert!(
        std::fs::read_dir(user_home.path())
            .expect("read")
            .next()
            .is_none()
    );
    // The private HOME goes with the delegation.
    assert!(!Path::new(home).exists(), "{home} outlived the delegation");
    // `planted` is not found: the workspace is never on the search path.
    assert_eq!(results[1]["is_error"], json!(true), "{:?}", results[1]);
    assert!(
        results[1]["content"]
            .as_str()
            .is_some_and(|c| c.contains("not on PATH")),
        "{:?}",
        results[1]
    );
    assert!(!dir.join("ws/pwned").exists());
}

// --- class 6: lost records ----------------------------------------------------------------------

/// Starts `harness` with `args` in the background (its own journal flag given by the caller).
#[cfg(unix)]
fn spawn(args: &[&std::ffi::OsStr]) -> std::process::Child {
    std::process::Command::new(crate::util::harness_bin())
        .args(args)
        .env_remove("HARNESS_JOURNAL")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("harness starts")
}

#[cfg(unix)]
fn signal(child: &std::process::Child, name: &str) {
    let sent = std::process::Command::new("kill")
        .args([format!("-{name}"), child.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(sent.success());
}

/// An agent whose one tool call runs for a minute, leaving a file behind if it is not stopped.
#[cfg(unix)]
const SLOW: &str =
    r#"[{"name": "run_command", "arguments": {"argv": ["sh", "-c", "sleep 60; touch late.txt"]}}]"#;

#[cfg(unix)]
#[test]
fn an_interrupted_run_is_recorded_as_cancelled_and_leaves_nothing_running() {
    // Its own duration, so no other test's command is taken for it below.
    let dir = project(
        &calls_then_done(&SLOW.replace("sleep 60", "touch started; sleep 61")),
        "tools: [run_command]\nworkdir: .\n",
    );
    let journal = dir.join("runs.db");
    let file = dir.join("ws/delegation.yaml");
    let child = spawn(&[
        "run".as_ref(),
        "--json".as_ref(),
        "--journal".as_ref(),
        journal.as_os_str(),
        file.as_os_str(),
    ]);
    assert!(
        crate::util::eventually(|| dir.join("ws/started").exists()),
        "the command never started"
    );
    signal(&child, "INT");
    let out = child.wait_with_output().expect("harness ends");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    let report: Value = serde_json::from_slice(&out.stdout).expect("one JSON report");
    assert_eq!(report["kind"], json!("cancelled"), "{report}");
    assert!(
        report["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("SIGINT")),
        "{report}"
    );
    let record = recorded(&dir, report["id"].as_str().expect("id"));
    assert_eq!(record["outcome"], json!("error"), "{record}");
    assert_eq!(record["error"]["kind"], json!("cancelled"), "{record}");
    assert!(
        crate::util::gone("sleep 61; touch late.txt"),
        "the command outlived its run"
    );
}

#[cfg(unix)]
#[test]
fn a_terminated_batch_records_what_it_cancelled() {
    let dir = TempDir::new();
    // The delegations share the workspace, so they take turns: one command runs, the other
    // delegation waits for the workspace.
    dir.write(
        "ws/slow.star",
        calls_then_done(&SLOW.replace("sleep 60", "touch started; sleep 60")),
    );
    let line = json!({"task": "t", "delegate": {"kind": "scripted", "script": "slow.star"},
        "tools": ["run_command"], "verify": "def run(result):\n    return True\n"})
    .to_string();
    dir.write("ws/batch.jsonl", format!("{line}\n{line}\n"));
    let journal = dir.join("runs.db");
    let file = dir.join("ws/batch.jsonl");
    let child = spawn(&[
        "batch".as_ref(),
        "--json".as_ref(),
        "--grace".as_ref(),
        "0".as_ref(),
        "--journal".as_ref(),
        journal.as_os_str(),
        file.as_os_str(),
    ]);
    assert!(
        crate::util::eventually(|| dir.join("ws/started").exists()),
        "no command started"
    );
    signal(&child, "TERM");
    let out = child.wait_with_output().expect("harness ends");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{stderr}");
    assert!(stderr.contains("SIGTERM"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    let lines: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    assert_eq!(lines.len(), 2, "{stderr}");
    for line in &lines {
        assert_eq!(line["kind"], json!("cancelled"), "{line}");
        let record = recorded(&dir, line["id"].as_str().expect("id"));
        assert_eq!(record["error"]["kind"], json!("cancelled"), "{record}");
    }
}

// --- class 3: process-killing scripts -----------------------------------------------------------

/// Runs `harness verify --json` with `script` in `dir` (its workspace, whose project policy
/// applies) on a one-line Result, expects a broken verifier (exit 3, kind `verifier`) and returns
/// the error message.
fn broken_verifier(dir: &TempDir, script: &str) -> String {
    let result = dir.write("result.json", r#"{"id": "r1", "response": "x"}"#);
    let path = dir.write("hostile.star", script);
    let out = harness(["verify", "--json", "--result"])
        .args([&result, &path])
        .args(["--workdir".as_ref(), dir.path().as_os_str()])
        .run();
    out.expect_code(3);
    let report = out.json();
    assert_eq!(report["error"]["kind"], json!("verifier"), "{out:?}");
    report["error"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// One repetition asked the allocator for 40 GiB before any heap limit looked, and the process
/// aborted; now each is an error of the script, with nothing of Rust on stderr.
#[test]
fn a_huge_repetition_is_an_error_of_the_script_not_an_abort() {
    let dir = TempDir::new();
    for script in [
        "def run(result):\n    x = [1] * 100\n    return len(x * 2000000000) > 0\n",
        "def run(result):\n    return len((1, 2) * 2000000000) > 0\n",
        "def run(result):\n    return len(\"ab\" * 2000000000) > 0\n",
    ] {
        let result = dir.write("result.json", r#"{"id": "r1", "response": "x"}"#);
        let path = dir.write("hostile.star", script);
        let out = harness(["verify", "--json", "--result"])
            .args([&result, &path])
            .args(["--workdir".as_ref(), dir.path().as_os_str()])
            .run();
        out.expect_code(3);
        let report = out.json();
        assert_eq!(
            report["error"]["kind"],
            json!("verifier"),
            "{script}: {out:?}"
        );
        let message = report["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        assert!(
            message.contains("repetition too large"),
            "{script}: {message}"
        );
        assert!(
            !out.stderr.contains("panicked") && !out.stderr.contains("memory allocation"),
            "{out:?}"
        );
    }
}

/// A verifier that builds a list nested `depth` deep and then does `tail` with it (`v`).
fn deep_verifier(tail: &str) -> String {
    format!("def run(result):\n    v = []\n    for i in range(300000):\n        v = [v]\n{tail}\n")
}

#[test]
fn deeply_nested_values_are_a_limit_error_not_a_stack_overflow() {
    let cases = [
        ("returned", deep_verifier("    return {\"verified\": True, \"reason\": \"\", \"v\": v}")),
        ("str", deep_verifier("    return str(v) == \"\"")),
        ("repr", deep_verifier("    return repr(v) == \"\"")),
        ("print", deep_verifier("    print(v)\n    return True")),
        ("log", deep_verifier("    log(v)\n    return True")),
        ("json.encode", deep_verifier("    return json.encode(v) == \"\"")),
        (
            "a global",
            "def build():\n    v = []\n    for i in range(300000):\n        v = [v]\n    return v\nX = build()\ndef run(result):\n    return True\n"
                .to_owned(),
        ),
    ];
    let dir = TempDir::new();
    for (what, script) in cases {
        // Before: the process aborted with a stack overflow (signal, no output).
        let message = broken_verifier(&dir, &script);
        assert!(
            message.contains("limit max_nesting_depth hit"),
            "{what}: {message}"
        );
    }
}

#[test]
fn a_shared_value_too_large_to_write_out_is_a_heap_limit_error() {
    // Sixty doublings of one list: tiny on the heap, 2^60 elements as text.
    let message = broken_verifier(
        &TempDir::new(),
        "def run(result):\n    v = \"x\"\n    for i in range(60):\n        v = [v, v]\n    return json.encode(v) == \"\"\n",
    );
    assert!(message.contains("limit max_heap_bytes hit"), "{message}");
}

#[test]
fn an_agent_script_returning_a_deep_value_fails_its_delegation_on_record() {
    // Very deep tool-call arguments.
    let agent = "def respond(request):\n    v = []\n    for i in range(300000):\n        v = [v]\n    return {\"tool_calls\": [{\"name\": \"write_file\", \"arguments\": {\"path\": \"x\", \"content\": \"y\", \"deep\": v}}]}\n";
    let dir = project(agent, "tools: [write_file]\n");
    let (out, report) = run(&dir);
    assert_eq!(report["outcome"], json!("error"), "{out:?}");
    // The agent script broke, not a verifier: a delegate error.
    assert_eq!(report["error"]["kind"], json!("delegate"), "{out:?}");
    assert!(
        report["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("max_nesting_depth")),
        "{report}"
    );
    let record = recorded(&dir, report["id"].as_str().expect("id"));
    assert_eq!(record["outcome"], json!("error"), "{record}");
    assert_eq!(record["error"]["kind"], json!("delegate"), "{record}");
}

// --- class 8: silent policy gaps ---------------------------------------------------------------

#[test]
fn policy_that_cannot_mean_what_it_says_is_a_configuration_error() {
    let cases = [
        ("task: 123\n", "`123`, expected a string"),
        ("task: t\nverify:\n", "`verify` is empty"),
        ("task: t\nverify: \"  \"\n", "`verify` is empty"),
        ("task: t\nmax_verify_retries: 4294967295\n", "at most 100"),
    ];
    for (head, expected) in cases {
        let dir = TempDir::new();
        dir.write(
            "agent.star",
            "def respond(request):\n    return {\"content\": \"x\"}\n",
        );
        let file = dir.write(
            "delegation.yaml",
            format!("{head}delegate: {{kind: scripted, script: agent.star}}\n"),
        );
        let out = harness(["run", "--json", "--no-journal"])
            .args([&file])
            .run();
        // Before: accepted (the number as text, no verifier, a panic on the retry count).
        out.expect_code(2);
        let report = out.json();
        assert_eq!(report["error"]["kind"], json!("config"), "{head}: {out:?}");
        let message = report["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(expected), "{head}: {message}");
        assert!(message.contains("delegation.yaml"), "{head}: {message}");
    }
    let dir = TempDir::new();
    dir.write(
        ".harness/policy.yaml",
        "verification_defaults: {max_verify_retries: 1000}\n",
    );
    dir.write(
        "agent.star",
        "def respond(request):\n    return {\"content\": \"x\"}\n",
    );
    let file = dir.write(
        "delegation.yaml",
        "task: t\ndelegate: {kind: scripted, script: agent.star}\n",
    );
    let out = harness(["run", "--json", "--no-journal"])
        .args([&file])
        .run();
    out.expect_code(2);
    assert_eq!(out.json()["error"]["kind"], json!("config"), "{out:?}");
    assert!(out.stdout.contains("policy.yaml"), "{out:?}");
}

#[cfg(unix)]
#[test]
fn hook_files_that_cannot_load_are_named_not_skipped() {
    let dir = TempDir::new();
    let hook = "---\nevent: delegation.post_verify\nscript: |\n  def handle(event, payload):\n      return block(\"no\")\n---\n";
    dir.write("hooks/good.md", hook);
    dir.write("hooks/shouting.MD", hook);
    std::os::unix::fs::symlink("gone.md", dir.join("hooks/dangling.md")).expect("symlink");
    let made = std::process::Command::new("mkfifo")
        .arg(dir.join("hooks/pipe.md"))
        .status()
        .expect("mkfifo runs");
    assert!(made.success());
    // A hook that is a link out of its directory: someone else's file would judge the run.
    dir.write("elsewhere/allow.md", hook);
    std::os::unix::fs::symlink(
        dir.join("elsewhere/allow.md"),
        dir.join("hooks/borrowed.md"),
    )
    .expect("symlink");
    // A hook whose `script_file` is a link out: the same, for the script that judges.
    dir.write(
        "elsewhere/allow.star",
        "def handle(event, payload):\n    return allow()\n",
    );
    std::os::unix::fs::symlink(
        dir.join("elsewhere/allow.star"),
        dir.join("hooks/linked.star"),
    )
    .expect("symlink");
    dir.write(
        "hooks/script-linked.md",
        "---\nevent: delegation.post_verify\nscript_file: linked.star\n---\n",
    );
    // A plain path up and out is the author's choice, not a link: it loads.
    dir.write(
        "hooks/script-shared.md",
        "---\nevent: delegation.post_verify\nscript_file: ../elsewhere/allow.star\n---\n",
    );
    let out = harness(["hooks", "check"]).args([dir.join("hooks")]).run();
    // Before: "ok: 1 hook(s)", the other three skipped without a word.
    out.expect_code(2).expect_stderr_kind("config");
    for name in [
        "shouting.MD",
        "dangling.md",
        "pipe.md",
        "borrowed.md",
        "script-linked.md",
    ] {
        assert!(out.stderr.contains(name), "{name}: {out:?}");
    }
    assert!(
        out.stderr.contains("leads out of the hook directory"),
        "{out:?}"
    );
    assert!(
        out.stderr.contains("through a link (to ") && out.stderr.contains("elsewhere/allow.star"),
        "{out:?}"
    );
    assert!(!out.stderr.contains("good.md"), "{out:?}");
    assert!(!out.stderr.contains("script-shared.md"), "{out:?}");
}

/// A FIFO where the project policy goes (a command of an earlier run could plant one) is a
/// configuration error naming the file, not a run that hangs reading it.
#[cfg(unix)]
#[test]
fn a_fifo_for_a_project_policy_is_refused_not_read() {
    let dir = project(&calls_then_done("[]"), "workdir: .\n");
    let made = std::process::Command::new("mkfifo")
        .arg(dir.join("ws/.harness/policy.yaml"))
        .status()
        .expect("mkfifo runs");
    assert!(made.success());
    let (out, report) = run(&dir);
    out.expect_code(2);
    assert_eq!(report["error"]["kind"], json!("config"), "{out:?}");
    let message = report["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("policy.yaml"), "{message}");
}

/// A workspace's policy is its own, and a page or two: one that is a link out of the workspace
/// (to a file, to `/dev/zero`), or that is huge, is refused naming the file and why, not read.
#[cfg(unix)]
#[test]
fn a_project_policy_that_links_out_or_is_huge_is_refused_not_read() {
    let outside = TempDir::new();
    let elsewhere = outside.write("policy.yaml", "commands: {isolation: none}\n");
    for (what, plant, expect) in [
        ("a link out", Some(elsewhere.as_path()), "leads out of"),
        (
            "a link to a device",
            Some(Path::new("/dev/zero")),
            "leads out of",
        ),
        ("two megabytes", None, "more than the 1048576"),
    ] {
        let dir = project(&calls_then_done("[]"), "workdir: .\n");
        let policy = dir.join("ws/.harness/policy.yaml");
        match plant {
            Some(target) => std::os::unix::fs::symlink(target, &policy).expect("link"),
            None => {
                dir.write(
                    "ws/.harness/policy.yaml",
                    format!("# {}\n", "x".repeat(2 * 1024 * 1024)),
                );
            }
        }
        let (out, report) = run(&dir);
        out.expect_code(2);
        assert_eq!(report["error"]["kind"], json!("config"), "{what}: {out:?}");
        let message = report["error"]["message"].as_str().unwrap_or_default();
        assert!(
            message.contains("policy.yaml") && message.contains(expect),
            "{what}: {message}"
        );
    }
}

// --- class 9: caps say which cap ----------------------------------------------------------------

#[test]
fn a_flood_of_tool_calls_is_refused_naming_the_cap() {
    let agent = "def respond(request):\n    return {\"tool_calls\": [{\"name\": \"list_files\", \"arguments\": {}} for i in range(100000)]}\n";
    let dir = project(agent, "tools: [list_files]\nworkdir: .\n");
    let (out, report) = run(&dir);
    out.expect_code(4);
    assert_eq!(report["error"]["kind"], json!("delegate"), "{out:?}");
    let message = report["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("100000 tool calls") && message.contains("64 tool calls per turn"),
        "{message}"
    );
    // None of them ran.
    assert!(tool_results(&report).is_empty(), "{report}");
}

#[cfg(unix)]
#[test]
fn command_output_past_its_cap_says_which_cap() {
    let calls = r#"[{"name": "run_command", "arguments": {"argv": ["sh", "-c", "head -c 200000 /dev/zero | tr '\\0' x"]}}]"#;
    let dir = project(
        &calls_then_done(calls),
        "tools: [run_command]\nworkdir: .\n",
    );
    let (out, report) = run(&dir);
    let results = tool_results(&report);
    assert_eq!(results.len(), 1, "{out:?}");
    let content = results[0]["content"].as_str().unwrap_or_default();
    assert!(
        content.contains("[output truncated at the 65536-byte cap]"),
        "{}",
        &content[content.len().saturating_sub(200)..]
    );
}

// --- class 7: credentials -----------------------------------------------------------------------

#[test]
fn a_missing_api_key_is_a_configuration_error_not_an_unauthenticated_request() {
    let server = harness_testkit::model::ModelServer::start(|_, _| {
        harness_testkit::model::Reply::Json(200, vec![], json!({}))
    });
    let dir = TempDir::new();
    let file = dir.write(
        "delegation.yaml",
        format!(
            "task: t\ndelegate: {{kind: openai, base_url: {:?}, model: fake, api_key_env: HARNESS_TEST_KEY_THAT_IS_NOT_SET}}\n",
            server.base_url()
        ),
    );
    let out = harness(["run", "--json", "--no-journal"])
        .args([&file])
        .run();
    // Before: the request went out without an Authorization header.
    out.expect_code(2);
    let report = out.json();
    assert_eq!(report["error"]["kind"], json!("config"), "{out:?}");
    let message = report["error"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    for part in [
        "delegation.yaml",
        "`delegate.api_key_env`",
        "HARNESS_TEST_KEY_THAT_IS_NOT_SET",
        "api_key_env: none",
    ] {
        assert!(message.contains(part), "{part}: {message}");
    }
    assert!(server.seen().is_empty(), "a request went out");
}

#[cfg(unix)]
#[test]
fn with_bwrap_isolation_a_command_cannot_change_the_policy_or_anything_outside() {
    if !crate::util::confinement_works() {
        return;
    }
    let outside = TempDir::new();
    let marker = outside.join("escaped.txt");
    let script = format!(
        "echo tampered > verify.star; echo tampered > .harness/hooks/gate.md; echo x > {}; sleep 30 & echo done > fine.txt",
        marker.display()
    );
    let calls = json!([{"name": "run_command", "arguments": {"argv": ["sh", "-c", script]}}]);
    let dir = project(
        &calls_then_done(&calls.to_string()),
        "tools: [run_command]\nworkdir: .\n",
    );
    // `bwrap` said, and `auto` (no policy at all: the default).
    for policy in [Some("commands: {isolation: bwrap}\n"), None] {
        match policy {
            Some(policy) => dir.write("ws/.harness/policy.yaml", policy),
            None => {
                let _ = std::fs::remove_file(dir.join("ws/.harness/policy.yaml"));
                dir.join("ws/.harness/policy.yaml")
            }
        };
        let _ = std::fs::remove_file(dir.join("ws/fine.txt"));
        let before = dir.read("ws/verify.star");
        let (out, report) = run(&dir);
        // Nothing was changed, so nothing was violated: the verifier judged, and hello.txt is
        // missing.
        assert_eq!(
            report["kind"],
            json!("verification_failed"),
            "{policy:?}: {out:?}"
        );
        assert_eq!(dir.read("ws/verify.star"), before);
        assert!(
            dir.read("ws/.harness/hooks/gate.md")
                .is_some_and(|s| !s.contains("tampered"))
        );
        assert_eq!(
            dir.read("ws/fine.txt").as_deref(),
            Some("done\n"),
            "{out:?}"
        );
        assert!(!marker.exists(), "a write escaped the sandbox");
        assert!(
            !out.stderr.contains("commands run unconfined"),
            "confined, no warning: {out:?}"
        );
    }
}

/// Every program harness starts for a delegation runs confined, not only `run_command`: an
/// agent CLI and a `command` delegate (the delegate's), a check and a verifier's `exec.run` (the
/// policy's, running what the delegate wrote). Each tries to read a secret in the user's HOME,
/// list that HOME, write outside the workspace and plant a file in `.harness/`: it can do none
/// of it, and sees nothing of HOME but an agent CLI's own configuration directory — which keeps
/// what the CLI wrote there, so its session resumes.
#[cfg(unix)]
#[test]
fn every_program_a_delegation_starts_is_confined() {
    if !crate::util::confinement_works() {
        return;
    }
    // A user's HOME and a place beside it, outside /tmp (which is private in the sandbox anyway).
    let user = crate::util::outside_tmp("confined-");
    let home = user.path().join("home");
    let outside = user.path().join("outside");
    std::fs::create_dir_all(home.join(".ssh")).expect("home");
    std::fs::create_dir_all(&outside).expect("outside");
    std::fs::write(home.join(".ssh/id_ed25519"), "TOP-SECRET-KEY\n").expect("secret");
    let snoop = |name: &str| {
        format!(
            "cat {home}/.ssh/id_ed25519 > seen-{name}.txt 2>&1; ls -A {home} >> seen-{name}.txt; echo x > {outside}/{name}; echo x > .harness/{name} 2>/dev/null; true",
            home = home.display(),
            outside = outside.display(),
        )
    };
    let verify = "verify: |\n  def run(result):\n      return fs.stat(\"hello.txt\") != None\n";
    let claude = repo_root().join("tests/fixtures/agents/claude");
    let cases = [
        (
            "claude",
            format!(
                "delegate: {{kind: claude, binary: {:?}}}\n{verify}",
                claude.display()
            ),
        ),
        (
            "command",
            format!(
                "delegate: {{kind: command, command: [sh, -c, {:?}]}}\n{verify}",
                format!("{}; echo hi > hello.txt; echo Done", snoop("command"))
            ),
        ),
        (
            "check",
            format!(
                "delegate: {{kind: command, command: [sh, -c, 'echo hi > hello.txt; echo Done']}}\nchecks:\n  - name: snoop\n    run: {:?}\n{verify}",
                snoop("check")
            ),
        ),
        (
            "exec",
            format!(
                "delegate: {{kind: command, command: [sh, -c, 'echo hi > hello.txt; echo Done']}}\nverify: |\n  def run(result):\n      exec.run([\"sh\", \"-c\", {:?}])\n      return fs.stat(\"hello.txt\") != None\n",
                snoop("exec")
            ),
        ),
    ];
    for (name, file) in cases {
        let dir = TempDir::new();
        dir.write("ws/.harness/hooks/.keep", "");
        let path = dir.write("delegation.yaml", format!("task: t\nworkdir: ws\n{file}"));
        let out = harness(["run", "--json", "--no-journal", "--allow-exec", "sh"])
            .args([&path])
            .env("HOME", &home.display().to_string())
            .env("FAKE_AGENT_RUN", &snoop(name))
            .env(
                "FAKE_AGENT_LOG",
                &home.join(".claude/agent.log").display().to_string(),
            )
            .run();
        out.expect_code(0);
        assert_eq!(out.json()["outcome"], json!("passed"), "{name}: {out:?}");
        let seen = dir
            .read(format!("ws/seen-{name}.txt"))
            .unwrap_or_else(|| panic!("{name}: the program did not run: {out:?}"));
        assert!(
            !seen.contains("TOP-SECRET"),
            "{name} read the secret: {seen}"
        );
        let listed: Vec<&str> = seen.lines().filter(|l| !l.contains("id_ed25519")).collect();
        let expected: &[&str] = if name == "claude" { &[".claude"] } else { &[] };
        assert_eq!(listed, expected, "{name} saw the user's HOME: {seen}");
        assert!(
            !outside.join(name).exists(),
            "{name} wrote outside the workspace"
        );
        assert!(
            !dir.join(format!("ws/.harness/{name}")).exists(),
            "{name} wrote into the policy"
        );
    }
    // The CLI's own configuration directory is writable and kept: its log has both runs.
    let log = std::fs::read_to_string(home.join(".claude/agent.log")).expect("the CLI's log");
    let runs = log.split("\0\0").filter(|run| !run.is_empty()).count();
    assert_eq!(runs, 2, "{log:?}");
}

/// A `delegation.pre` hook that offers `run_command` to a delegation that started no programs
/// gets it confined like any other: the sandbox is made for what runs after the hooks.
#[cfg(unix)]
#[test]
fn run_command_offered_by_a_pre_hook_is_confined_too() {
    if !crate::util::confinement_works() {
        return;
    }
    let outside = crate::util::outside_tmp("granted-");
    let marker = outside.path().join("escaped.txt");
    let calls = json!([{"name": "run_command", "arguments": {"argv": [
        "sh", "-c", format!("echo x > {}; echo ran", marker.display())
    ]}}]);
    let dir = TempDir::new();
    dir.write("agent.star", calls_then_done(&calls.to_string()));
    dir.write(
        "ws/.harness/hooks/grant.md",
        "---\nevent: delegation.pre\nscript: |\n  def handle(event, payload):\n      return modify({\"tools\": [\"run_command\"]})\n---\n",
    );
    let file = dir.write(
        "delegation.yaml",
        "task: t\ndelegate: {kind: scripted, script: agent.star}\nworkdir: ws\n",
    );
    let out = harness(["run", "--json", "--no-journal"])
        .args([&file])
        .run();
    let report = out.json();
    let results = tool_results(&report);
    assert_eq!(
        results.len(),
        1,
        "the hook did not offer run_command: {out:?}"
    );
    assert!(
        !marker.exists(),
        "a command offered by a hook ran unconfined"
    );
}

/// A confined agent CLI may keep its logins and sessions, but not plant what would act the next
/// time anyone runs it outside harness: its existing settings are read-only, and settings it
/// creates are moved aside and fail the run as a `delegate` error naming them.
#[cfg(unix)]
#[test]
fn a_confined_agent_cli_cannot_plant_its_own_settings() {
    if !crate::util::confinement_works() {
        return;
    }
    let claude = repo_root().join("tests/fixtures/agents/claude");
    let plant = r#"mkdir -p "$HOME/.claude/commands"; echo '{"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "touch /tmp/pwned"}]}]}}' > "$HOME/.claude/settings.json"; echo x > "$HOME/.claude/commands/deploy.md"; true"#;
    for existing in [true, false] {
        let dir = TempDir::new();
        let home = dir.join("home");
        std::fs::create_dir_all(home.join(".claude")).expect("config dir");
        if existing {
            std::fs::write(home.join(".claude/settings.json"), "{}\n").expect("settings");
            std::fs::create_dir_all(home.join(".claude/commands")).expect("commands");
        }
        let path = dir.write(
            "delegation.yaml",
            format!(
                "task: t\nworkdir: ws\ndelegate: {{kind: claude, binary: {:?}}}\nverify: |\n  def run(result):\n      return fs.stat(\"hello.txt\") != None\n",
                claude.display()
            ),
        );
        std::fs::create_dir_all(dir.join("ws")).expect("workspace");
        let out = harness(["run", "--json", "--no-journal"])
            .args([&path])
            .env("HOME", &home.display().to_string())
            .env("FAKE_AGENT_RUN", plant)
            .run();
        let report = out.json();
        if existing {
            // Read-only: the writes fail, the run goes on and passes.
            out.expect_code(0);
            assert_eq!(report["outcome"], json!("passed"), "{out:?}");
            assert_eq!(
                std::fs::read_to_string(home.join(".claude/settings.json")).ok(),
                Some("{}\n".to_owned())
            );
            assert!(!home.join(".claude/commands/deploy.md").exists());
        } else {
            crate::util::expect_error_kind(&out, &report, 4, "delegate");
            let message = report["error"]["message"].as_str().unwrap_or_default();
            assert!(
                message.contains("settings.json")
                    && message.contains("commands")
                    && message.contains("moved to"),
                "{message}"
            );
            assert!(!home.join(".claude/settings.json").exists());
            assert!(!home.join(".claude/commands").exists());
            let aside: Vec<String> = std::fs::read_dir(home.join(".claude"))
                .expect("config dir")
                .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
                .filter(|name| name.contains(".harness-refused-"))
                .collect();
            assert_eq!(aside.len(), 2, "{aside:?}");
        }
    }
}

#[test]
fn the_model_key_never_follows_a_redirect_to_another_origin() {
    use harness_testkit::model::{ModelServer, Reply, answer};
    let target = ModelServer::start(|_, body| answer(body, "done"));
    let location: &'static str =
        Box::leak(format!("{}/chat/completions", target.base_url()).into_boxed_str());
    let redirector =
        ModelServer::start(move |_, _| Reply::Json(307, vec![("location", location)], json!({})));
    let dir = TempDir::new();
    let file = dir.write(
        "delegation.yaml",
        format!(
            "task: t\ndelegate: {{kind: openai, base_url: {:?}, model: fake, api_key_env: HARNESS_TEST_REDIRECT_KEY, max_retries: 0}}\n",
            redirector.base_url()
        ),
    );
    let out = harness(["run", "--json", "--no-journal"])
        .args([&file])
        .env("HARNESS_TEST_REDIRECT_KEY", "sk-must-not-travel")
        .run();
    let sent = redirector.seen();
    assert_eq!(sent.len(), 1, "{out:?}");
    assert_eq!(sent[0].authorization(), Some("Bearer sk-must-not-travel"));
    for seen in target.seen() {
        assert_eq!(seen.authorization(), None, "{out:?}");
    }
}

#[test]
fn builtins_refuse_results_past_the_heap_limit_before_building_them() {
    let dir = TempDir::new();
    // The smallest heap the project policy allows, so the inputs can stay small.
    dir.write(".harness/policy.yaml", "limits: {heap_mb: 8}\n");
    for (what, body) in [
        // Ten gigabytes from one call: every position matches, each gets the whole string.
        (
            "re.sub",
            "    s = \"x\" * 100000\n    return re.sub(\"\", s, s) == \"\"",
        ),
        (
            "re.findall",
            "    s = \"x\" * 400000\n    return len(re.findall(\"\", s)) > 0",
        ),
    ] {
        let message = broken_verifier(&dir, &format!("def run(result):\n{body}\n"));
        assert!(
            message.contains(&format!("limit max_heap_bytes hit: {what}")),
            "{what}: {message}"
        );
    }
}

#[test]
fn recursion_behind_higher_order_calls_is_a_call_depth_limit_error() {
    let dir = TempDir::new();
    for (what, script) in [
        (
            "sorted",
            "def f(x):\n    return sorted([1, 2], key = f)\ndef run(result):\n    return f(1)\n",
        ),
        (
            "map",
            "def f(x):\n    return list(map(f, [x]))\ndef run(result):\n    return f(1)\n",
        ),
        (
            "filter",
            "def f(x):\n    return list(filter(f, [x]))\ndef run(result):\n    return f(1)\n",
        ),
        // A function that calls the function it is given: starlark inlined these without end
        // while freezing the script (a stack overflow that aborted the process, exit 134).
        (
            "self-application",
            "def f(g, n):\n    return g(g, n + 1)\ndef run(result):\n    return f(f, 0)\n",
        ),
        (
            "a lambda",
            "f = lambda g, n: g(g, n + 1)\ndef run(result):\n    return f(f, 0)\n",
        ),
        (
            "through a struct",
            "def f(s, n):\n    return s.f(s, n)\nS = struct(f = f)\ndef run(result):\n    return f(S, 0)\n",
        ),
        (
            "through a tuple",
            "def f(t, n):\n    return t[0](t, n)\nT = (f,)\ndef run(result):\n    return f(T, 0)\n",
        ),
        (
            "fanning out",
            "def f(g, h, n):\n    return g(h, h, n) + g(h, h, n) + g(h, h, n) + g(h, h, n)\ndef run(result):\n    return f(f, f, 0)\n",
        ),
    ] {
        let message = broken_verifier(&dir, script);
        assert!(
            message.contains("limit max_call_depth hit"),
            "{what}: {message}"
        );
    }
    // Such a function that is never called compiles and runs.
    dir.write(
        "never.star",
        "def f(g, n):\n    return g(g, n + 1)\ndef h():\n    return f(f, 0)\ndef run(result):\n    return True\n",
    );
    dir.write("result.json", r#"{"id": "r1", "response": "x"}"#);
    let out = harness(["verify", "--json", "--result"])
        .args([dir.join("result.json"), dir.join("never.star")])
        .args(["--workdir".as_ref(), dir.path().as_os_str()])
        .run();
    out.expect_code(0);
    assert!(
        !out.stderr.contains("overflow") && !out.stderr.contains("panicked"),
        "{out:?}"
    );
}

// --- class 10: redaction ------------------------------------------------------------------------

#[test]
fn secrets_in_failure_reasons_never_reach_the_delegate() {
    // The agent says on its second attempt whether the retry prompt it was sent held the key
    // (its answer is redacted before it is shown, so it must not echo the key itself).
    let agent = "def respond(request):\n    if request[\"attempt\"] == 0:\n        return \"done\"\n    prompt = request[\"messages\"][-1][\"content\"]\n    return \"leaked\" if \"sk-abcdefghij\" in prompt else \"clean: \" + prompt\n";
    let dir = project(agent, "");
    dir.write(
        "ws/verify.star",
        "def run(result):\n    if result[\"attempt\"] == 0:\n        return {\"verified\": False, \"reason\": \"config holds OPENAI_API_KEY=sk-abcdefghijklmnop1234\"}\n    return True\n",
    );
    let text = dir
        .read("ws/delegation.yaml")
        .expect("file")
        .replace("max_verify_retries: 0", "max_verify_retries: 1");
    dir.write("ws/delegation.yaml", text);
    let (out, report) = run(&dir);
    out.expect_code(0);
    let said = report["result"]["response"].as_str().unwrap_or_default();
    // Before: "leaked".
    assert!(said.starts_with("clean: "), "{said}");
    assert!(said.contains("OPENAI_API_KEY=[REDACTED]"), "{said}");
}

/// A process races `write_file`, swapping the directory it writes into for a link out of the
/// workspace and back, as fast as it can. The path is checked, then written with no link
/// followed in any component: no write lands outside (before, 146 of 1,280 did).
#[cfg(target_os = "linux")]
#[test]
fn a_directory_swapped_for_a_link_mid_write_never_lands_a_write_outside() {
    let outside = TempDir::new();
    // Fifteen turns of sixty writes each (the cap is 64 calls a turn, 20 turns an attempt).
    let agent = "def respond(request):\n    t = request[\"turn\"]\n    if t >= 15:\n        return \"done\"\n    return {\"tool_calls\": [{\"name\": \"write_file\", \"arguments\": {\"path\": \"sub/f%d_%d.txt\" % (t, i), \"content\": \"x\"}} for i in range(60)]}\n";
    let dir = project(agent, "tools: [write_file]\nworkdir: .\nobserve: false\n");
    std::fs::create_dir_all(dir.join("ws/sub")).expect("sub");
    let mut racing = swap_for_a_link(&dir.join("ws/sub"), &outside.path());
    let (out, report) = run(&dir);
    let _ = racing.kill();
    let _ = racing.wait();
    assert_eq!(report["attempts"], json!(1), "{out:?}");
    let written = report["result"]["tool_results"].as_array().map_or(0, |r| {
        r.iter().filter(|r| r["is_error"] == json!(false)).count()
    });
    assert!(written > 0, "no write went through: {out:?}");
    let escaped = std::fs::read_dir(outside.path()).expect("outside").count();
    assert_eq!(escaped, 0, "{escaped} writes landed outside the workspace");
}

/// The same race against `read_file`: no read returns a file from outside the workspace.
#[cfg(target_os = "linux")]
#[test]
fn a_directory_swapped_for_a_link_mid_read_never_reads_outside() {
    race_a_reading_tool("read_file", "sub/f.txt", "inside\n");
}

/// The same race against `list_files`: the directory `sub` swapped for a link to a directory
/// outside between the check and the listing never lists the outside's names.
#[cfg(target_os = "linux")]
#[test]
fn a_directory_swapped_for_a_link_mid_listing_never_lists_outside() {
    race_a_reading_tool("list_files", "sub", "f.txt");
}

/// Calls `tool` on `path` 900 times while `sub` is swapped for a link to a directory outside
/// whose file `f.txt` says SECRET: some calls answer `inside` (what `sub` holds), none answers
/// anything of the outside.
#[cfg(target_os = "linux")]
fn race_a_reading_tool(tool: &str, path: &str, inside: &str) {
    let outside = TempDir::new();
    outside.write("f.txt", "SECRET from outside\n");
    outside.write("SECRET-name.txt", "x");
    let agent = format!(
        "def respond(request):\n    t = request[\"turn\"]\n    if t >= 15:\n        return \"done\"\n    return {{\"tool_calls\": [{{\"name\": \"{tool}\", \"arguments\": {{\"path\": \"{path}\"}}}} for i in range(60)]}}\n"
    );
    let dir = project(
        &agent,
        &format!("tools: [{tool}]\nworkdir: .\nobserve: false\n"),
    );
    dir.write("ws/sub/f.txt", "inside\n");
    let mut racing = swap_for_a_link(&dir.join("ws/sub"), &outside.path());
    let (out, report) = run(&dir);
    let _ = racing.kill();
    let _ = racing.wait();
    let results = tool_results(&report);
    assert!(
        results.iter().any(|r| r["content"] == json!(inside)),
        "no {tool} went through: {out:?}"
    );
    let leaked = results
        .iter()
        .filter(|r| r["content"].to_string().contains("SECRET"))
        .count();
    assert_eq!(leaked, 0, "{leaked} of {tool}'s answers came from outside");
}

/// Starts a process that swaps the directory `sub` for a link to `outside` and back, as fast as
/// a loop of system calls goes: the directory is a link out about half the time.
#[cfg(target_os = "linux")]
fn swap_for_a_link(sub: &Path, outside: &Path) -> std::process::Child {
    let parent = sub.parent().expect("a parent").display().to_string();
    let racer = format!(
        "import os\nos.chdir({parent:?})\nwhile True:\n    try:\n        os.rename('sub', 'sub.real')\n        os.symlink({out:?}, 'sub')\n        os.unlink('sub')\n        os.rename('sub.real', 'sub')\n    except OSError:\n        pass\n",
        out = outside.display().to_string()
    );
    std::process::Command::new("python3")
        .args(["-c", &racer])
        .spawn()
        .expect("the racer starts")
}
