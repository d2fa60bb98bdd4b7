//! `harness batch`: every entry accounted for once, in any order; failures isolated; malformed
//! entries reported by line; the concurrency bound observed by a real HTTP server.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{Value, json};

use harness_testkit::model::{ModelServer, Reply, answer};

use crate::util::{TempDir, harness};

const AGENT: &str = r#"
def respond(request):
    task = request["messages"][0]["content"]
    if "lie" in task:
        return {"content": "Done, I created it"}
    if request["messages"][-1]["role"] == "tool":
        return {"content": "wrote it"}
    name = task.split(" ")[-1]
    return {"tool_calls": [{"name": "write_file", "arguments": {"path": name, "content": "x"}}]}
"#;

fn entry(task: &str, verify: &str) -> Value {
    json!({
        "task": task,
        "delegate": {"kind": "scripted", "script": "agent.star"},
        "tools": ["write_file"],
        "workdir": "ws",
        "verify": verify,
        "max_verify_retries": 0,
    })
}

fn outcomes(stdout: &str) -> BTreeMap<u64, Value> {
    let mut by_line = BTreeMap::new();
    for text in stdout.lines() {
        let object: Value = serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}: {text}"));
        let line = object["line"].as_u64().expect("every outcome has its line");
        assert!(
            by_line.insert(line, object).is_none(),
            "line {line} reported twice"
        );
    }
    by_line
}

#[test]
fn every_entry_is_accounted_for_once_and_failures_stay_isolated() {
    let dir = TempDir::new();
    dir.write("agent.star", AGENT);
    std::fs::create_dir_all(dir.join("ws")).expect("mkdir");
    let exists = "def run(result):\n    return fs.exists(result['tool_calls'][0]['arguments']['path']) if result['tool_calls'] else False\n";
    let broken = "def run(result):\n    return None\n";
    let mut lines = Vec::new();
    let mut expected = BTreeMap::new();
    for i in 1..=30u64 {
        let (text, outcome) = match i % 5 {
            0 => ("{\"task\": \"not closed\"".to_owned(), "malformed"),
            1 => (
                entry(&format!("lie about f{i}.txt"), exists).to_string(),
                "failed",
            ),
            2 => (
                entry(&format!("write f{i}.txt"), broken).to_string(),
                "error",
            ),
            _ => (
                entry(&format!("write f{i}.txt"), exists).to_string(),
                "passed",
            ),
        };
        lines.push(text);
        expected.insert(i, outcome);
    }
    // A blank line is skipped but still counts for line numbers.
    lines.insert(10, String::new());
    let expected: BTreeMap<u64, &str> = expected
        .into_iter()
        .map(|(i, o)| (if i > 10 { i + 1 } else { i }, o))
        .collect();
    dir.write("batch.jsonl", lines.join("\n") + "\n");

    let out = harness(["batch", "batch.jsonl", "--concurrency", "4", "--json"])
        .current_dir(dir.path())
        .run();
    out.expect_code(2);
    let got = outcomes(&out.stdout);
    assert_eq!(
        got.keys().copied().collect::<Vec<_>>(),
        expected.keys().copied().collect::<Vec<_>>(),
        "{out:?}"
    );
    for (line, outcome) in &expected {
        let object = &got[line];
        match *outcome {
            "malformed" => {
                assert_eq!(object["outcome"], "error", "line {line}");
                assert_eq!(object["error"]["kind"], "config", "line {line}");
                let message = object["error"]["message"].as_str().expect("message");
                assert!(
                    message.contains(&format!("batch.jsonl:{line}")),
                    "{message}"
                );
            }
            "error" => {
                assert_eq!(object["outcome"], "error", "line {line}");
                assert_eq!(object["error"]["kind"], "verifier", "line {line}");
            }
            other => assert_eq!(object["outcome"], other, "line {line}: {object}"),
        }
    }
    assert!(out.stderr.contains("6 malformed entries"), "{out:?}");
}

#[test]
fn a_yaml_template_fans_out_over_args() {
    let dir = TempDir::new();
    dir.write("agent.star", AGENT);
    std::fs::create_dir_all(dir.join("ws")).expect("mkdir");
    dir.write(
        "batch.yaml",
        r#"
template:
  task: "write {name}.txt"
  delegate: {kind: scripted, script: agent.star}
  tools: [write_file]
  workdir: ws
  args: {suffix: ".txt"}
  verify: |
    def run(result):
        return fs.exists(args["name"] + args["suffix"])
args:
  - {name: a}
  - {name: b}
  - {name: c}
"#,
    );
    let out = harness(["batch", "batch.yaml", "--json"])
        .current_dir(dir.path())
        .run();
    out.expect_code(0);
    let got = outcomes(&out.stdout);
    assert_eq!(got.len(), 3, "{out:?}");
    for object in got.values() {
        assert_eq!(object["outcome"], "passed", "{object}");
    }
    for name in ["a.txt", "b.txt", "c.txt"] {
        assert!(dir.join("ws").join(name).exists(), "{name} was not written");
    }
}

#[test]
fn bad_batch_files_are_configuration_errors() {
    let dir = TempDir::new();
    dir.write("batch.txt", "{}");
    dir.write("bad.yaml", "template: {task: x}\nargs: {a: 1}\n");
    for (file, needle) in [
        ("missing.jsonl", "missing.jsonl"),
        ("batch.txt", ".jsonl"),
        ("bad.yaml", "args"),
    ] {
        let out = harness(["batch", file]).current_dir(dir.path()).run();
        out.expect_code(2).expect_stderr_kind("config");
        assert!(out.stderr.contains(needle), "{file}: {out:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_concurrency_bound_holds_at_the_server() {
    // Each answer takes a while, so concurrent delegations overlap at the server.
    let server = ModelServer::start(|_, body| {
        Reply::After(
            Duration::from_millis(40),
            Box::new(answer(body, "{\"ok\": true}")),
        )
    });
    let base_url = server.base_url().to_owned();
    let dir = TempDir::new();
    let entry = json!({
        "task": "say ok",
        "delegate": {"kind": "openai", "model": "fake", "base_url": base_url, "max_retries": 0, "api_key_env": "none"},
        "verify": "def run(result):\n    return json.decode(result['response'], default = {}).get('ok') == True\n",
    })
    .to_string();
    dir.write("batch.jsonl", vec![entry; 12].join("\n"));
    let path = dir.path();
    let out = tokio::task::spawn_blocking(move || {
        harness(["batch", "batch.jsonl", "--concurrency", "3", "--json"])
            .current_dir(path)
            .run()
    })
    .await
    .expect("the batch runs");
    out.expect_code(0);
    assert_eq!(out.stdout.lines().count(), 12, "{out:?}");
    let most = server.peak_in_flight();
    assert!(
        (1..=3).contains(&most),
        "the server saw {most} requests in flight at once"
    );
}

#[test]
fn without_json_each_outcome_is_a_line_and_a_summary_follows() {
    let dir = TempDir::new();
    dir.write("agent.star", AGENT);
    std::fs::create_dir_all(dir.join("ws")).expect("mkdir");
    let exists = "def run(result):\n    return True\n";
    dir.write(
        "batch.jsonl",
        format!(
            "{}\n{}\n",
            entry("write x.txt", exists),
            entry("write y.txt", exists)
        ),
    );
    let out = harness(["batch", "batch.jsonl"])
        .current_dir(dir.path())
        .run();
    out.expect_code(0);
    assert_eq!(
        out.stdout
            .lines()
            .filter(|l| l.contains(": passed after 1 attempt"))
            .count(),
        2,
        "{out:?}"
    );
    assert!(out.stderr.contains("2 delegation(s): 2 passed"), "{out:?}");
}

#[test]
fn a_reader_that_goes_away_stops_the_printing_not_the_batch() {
    let dir = TempDir::new();
    dir.write("agent.star", AGENT);
    std::fs::create_dir_all(dir.join("ws")).expect("mkdir");
    let exists = "def run(result):\n    return True\n";
    let lines: String = (0..20)
        .map(|i| format!("{}\n", entry(&format!("write f{i}.txt"), exists)))
        .collect();
    dir.write("batch.jsonl", lines);
    // `harness batch --json … | head -0`: the reading end is closed before anything is printed.
    let mut child = std::process::Command::new(crate::util::harness_bin())
        .args(["batch", "--json", "--journal", "runs.db", "batch.jsonl"])
        .current_dir(dir.path())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("harness starts");
    drop(child.stdout.take());
    let out = child.wait_with_output().expect("harness ends");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("stdout was closed early"), "{stderr}");
    assert!(stderr.contains("recorded 20 delegation(s)"), "{stderr}");
}

#[cfg(unix)]
#[test]
fn ctrl_c_stops_dispatching_and_keeps_every_finished_outcome() {
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};

    let dir = TempDir::new();
    std::fs::create_dir_all(dir.join("ws")).expect("mkdir");
    let entry = json!({
        "task": "slow work",
        "delegate": {"kind": "command", "command": ["sh", "-c", "sleep 0.3; echo done"]},
        "workdir": "ws",
        "verify": "def run(result):\n    return result['response'] == 'done'\n",
    })
    .to_string();
    dir.write("batch.jsonl", vec![entry; 40].join("\n"));
    let mut child = Command::new(crate::util::harness_bin())
        .env_remove("HARNESS_JOURNAL")
        .args([
            "batch",
            "batch.jsonl",
            "--concurrency",
            "2",
            "--json",
            "--grace",
            "20",
        ])
        .current_dir(dir.path())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("harness starts");
    let mut stdout = BufReader::new(child.stdout.take().expect("piped"));
    let mut first = String::new();
    stdout
        .read_line(&mut first)
        .expect("a first outcome arrives");
    let status = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(status.success());
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stdout, &mut rest).expect("read the rest");
    let output = child.wait_with_output().expect("harness exits");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(130), "{stderr}");
    let lines: Vec<&str> = std::iter::once(first.trim_end())
        .chain(rest.lines())
        .collect();
    assert!(lines.len() < 40, "the interrupt did not stop dispatching");
    for line in &lines {
        let object: Value =
            serde_json::from_str(line).expect("every written outcome is whole JSON");
        assert_eq!(object["outcome"], "passed", "{line}");
    }
    assert!(stderr.contains("interrupted"), "{stderr}");
    assert!(
        stderr.contains(&format!("{} delegation(s)", lines.len())),
        "{stderr}"
    );
}

#[test]
fn the_batch_examples_run_as_documented() {
    let dir = TempDir::new();
    crate::util::copy_tree(
        &crate::util::repo_root().join("examples/batch"),
        &dir.join("batch"),
    );
    let out = harness(["batch", "batch/batch.yaml", "--concurrency", "4", "--json"])
        .current_dir(dir.path())
        .journal_by_rule()
        .run();
    out.expect_code(0);
    let got = outcomes(&out.stdout);
    assert_eq!(got.len(), 4, "{out:?}");
    assert!(
        got.values()
            .all(|o| o["outcome"] == "passed" && o["attempts"] == 2),
        "{out:?}"
    );
    // The JSONL example carries one malformed line on purpose (line 3).
    let out = harness(["batch", "batch/batch.jsonl", "--json"])
        .current_dir(dir.path())
        .journal_by_rule()
        .run();
    assert!(
        out.stderr
            .contains("recorded 3 delegation(s) in .harness/runs.db"),
        "batch says where it recorded: {out:?}"
    );
    out.expect_code(2);
    let got = outcomes(&out.stdout);
    assert_eq!(
        got.keys().copied().collect::<Vec<_>>(),
        vec![1, 2, 3, 4],
        "{out:?}"
    );
    assert_eq!(got[&3]["error"]["kind"], "config");
    assert_eq!(got[&4]["outcome"], "failed");
    // Both runs were recorded in the default journal of the directory they ran in.
    let report = harness(["report", "--json"])
        .current_dir(dir.path())
        .journal_by_rule()
        .run();
    report.expect_code(0);
    assert_eq!(report.json()["delegations"], 7, "{report:?}");
}
