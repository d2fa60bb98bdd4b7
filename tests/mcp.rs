//! `harness mcp` with real clients (DESIGN §9): the official MCP Python SDK drives it over stdio
//! (lists the tools, delegates to a child that lies then fixes its work, reads the progress,
//! asks `run_status` and `review_list`, and is refused what it may not do), and the real Claude
//! Code, configured with `--mcp-config`, calls `delegate` when a loopback model asks it to — the
//! verified result comes back into its conversation. The real Codex and Gemini CLI start a
//! delegation with `wait: false` and poll `run_status` to its verified end, each naming the
//! tools its own way and passing results to its model its own way.
//!
//! Without the `mcp` package for the Python in `HARNESS_TEST_PYTHON` the SDK test says so and
//! skips, unless `HARNESS_REQUIRE_MCP` is set (`.ci/run` installs it and sets it).

use std::process::Command;

use harness_testkit::model::{ModelServer, after_tool, answer, messages, tool_call};
use serde_json::{Value, json};

use crate::util::{TempDir, harness_bin};

/// The Python with the MCP SDK, or `None` (the test skips, saying so).
fn python() -> Option<String> {
    let python = std::env::var("HARNESS_TEST_PYTHON").unwrap_or_else(|_| "python3".to_owned());
    let ready = Command::new(&python)
        .args(["-c", "import mcp"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !ready {
        assert!(
            std::env::var_os("HARNESS_REQUIRE_MCP").is_none(),
            "HARNESS_REQUIRE_MCP is set but {python} cannot import mcp"
        );
        eprintln!("skipped: {python} has no MCP SDK (pip install mcp)");
        return None;
    }
    Some(python)
}

/// A child that claims the file first, and writes it once caught.
const LIAR: &str = r#"
def respond(request):
    last = request["messages"][-1]
    if request["attempt"] == 0:
        return "Done, hello.txt is written."
    if last["role"] == "tool":
        return "Wrote it: %s" % last["content"]
    return {"tool_calls": [{"name": "write_file", "arguments": {"path": "hello.txt", "content": "hi\n"}}]}
"#;

/// A project whose policy names the delegate profiles `default` (the liar) and `quitter`.
fn project() -> TempDir {
    let dir = TempDir::new();
    dir.write(".harness/liar.star", LIAR);
    dir.write(
        ".harness/quitter.star",
        "def respond(request):\n    return \"All done, trust me.\"\n",
    );
    dir.write(
        ".harness/policy.yaml",
        "delegates:\n  default:\n    delegate: {kind: scripted, script: liar.star}\n    tools: [write_file]\n  quitter:\n    delegate: {kind: scripted, script: quitter.star}\n    max_verify_retries: 0\n  slow:\n    delegate: {kind: scripted, script: liar.star}\n    tools: [write_file]\n    checks: [{name: pause, run: \"sleep 1\"}]\n",
    );
    dir.write(
        "tasks/hello.yaml",
        "task: Create hello.txt containing hi\ndelegate: {kind: scripted, script: ../.harness/liar.star}\ntools: [write_file]\nworkdir: ..\ncriteria: [\"file_exists:hello.txt\"]\n",
    );
    dir
}

/// The client: every call's result as one JSON line, progress messages included.
const CLIENT: &str = r#"
import json, sys, anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

def show(name, result, progress=None):
    print(json.dumps({"call": name, "is_error": result.is_error, "text": result.content[0].text,
                      "texts": [c.text for c in result.content],
                      "structured": result.structured_content, "progress": progress}), flush=True)

async def main():
    params = StdioServerParameters(command=sys.argv[1], args=["mcp"], cwd=sys.argv[2],
                                   env={"HARNESS_PARENT_ID": "d-00000000000000aa"})
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            init = await session.initialize()
            tools = await session.list_tools()
            print(json.dumps({"server": init.server_info.name,
                              "tools": [t.name for t in tools.tools]}), flush=True)
            seen = []
            async def progress(value, total, message):
                seen.append(message)
            result = await session.call_tool(
                "delegate",
                {"task": "Create hello.txt containing hi", "criteria": ["file_exists:hello.txt"]},
                read_timeout_seconds=120, progress_callback=progress)
            show("delegate", result, seen)
            run = result.structured_content["id"]
            show("run_status", await session.call_tool("run_status", {"id": run}))
            show("quitter", await session.call_tool(
                "delegate", {"task": "Create bye.txt", "profile": "quitter",
                             "criteria": ["file_exists:bye.txt"]}))
            show("file", await session.call_tool("delegate", {"file": "tasks/hello.yaml"}))
            show("review_list", await session.call_tool("review_list", {}))
            started = await session.call_tool(
                "delegate", {"task": "Create hello.txt containing hi", "profile": "slow",
                             "criteria": ["file_exists:hello.txt"], "wait": False})
            show("started", started)
            later = started.structured_content["id"]
            show("status_now", await session.call_tool("run_status", {"id": later}))
            show("status_waited", await session.call_tool(
                "run_status", {"id": later, "wait_s": 60}, read_timeout_seconds=90))
            for name, arguments in [
                ("outside", {"task": "x", "workdir": ".."}),
                ("escape", {"file": "../elsewhere.yaml"}),
                ("misspelt", {"taks": "x"}),
                ("no_profile", {"task": "x", "profile": "wroker"}),
                ("both", {"file": "tasks/hello.yaml", "task": "x"}),
                ("unknown_run", {"id": "d-ffffffffffffffff"}),
                ("bad_wait_s", {"id": "d-ffffffffffffffff", "wait_s": -1}),
                ("bad_wait", {"task": "x", "wait": "no"}),
            ]:
                tool = "run_status" if name.startswith(("unknown_run", "bad_wait_s")) else "delegate"
                show(name, await session.call_tool(tool, arguments))
            # Left running when the session ends: cancelled, and recorded.
            show("abandoned", await session.call_tool(
                "delegate", {"task": "Create hello.txt containing hi", "profile": "slow",
                             "criteria": ["file_exists:hello.txt"], "wait": False}))

anyio.run(main)
"#;

#[test]
fn the_python_sdk_delegates_reads_progress_and_status_and_is_refused_bad_requests() {
    let Some(python) = python() else { return };
    let dir = project();
    let client = dir.write("client.py", CLIENT);
    let out = Command::new(&python)
        .arg(client)
        .arg(harness_bin())
        .arg(dir.path())
        .output()
        .expect("run the client");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    let call = |name: &str| {
        lines
            .iter()
            .find(|l| l["call"] == name)
            .unwrap_or_else(|| panic!("no {name} in {stdout}"))
    };
    assert_eq!(lines[0]["server"], json!("harness"));
    assert_eq!(
        lines[0]["tools"],
        json!(["delegate", "run_status", "review_list"])
    );

    // The liar was caught, retried and verified; the client read each attempt as progress.
    let delegated = call("delegate");
    assert_eq!(delegated["is_error"], json!(false), "{delegated}");
    let result = &delegated["structured"];
    assert_eq!(result["verified"], json!(true), "{result}");
    assert_eq!(result["attempts"], json!(2));
    assert_eq!(
        delegated["text"],
        json!("passed on attempt 2; evidence: hello.txt 3 bytes")
    );
    assert_eq!(result["summary"], delegated["text"]);
    // Then the whole object as text, for a client that shows its model only text (Gemini CLI).
    let as_text: Value = serde_json::from_str(delegated["texts"][1].as_str().unwrap_or_default())
        .unwrap_or_else(|e| {
            panic!("the second text block is the object as JSON: {e}: {delegated}")
        });
    assert_eq!(&as_text, result);
    assert_eq!(
        delegated["progress"],
        json!([
            "attempt 1/3",
            "attempt 1: not verified: criterion file_exists:hello.txt: hello.txt does not exist",
            "attempt 2/3",
            "attempt 2: verified"
        ])
    );
    assert_eq!(dir.read("hello.txt").as_deref(), Some("hi\n"));

    let status = &call("run_status")["structured"];
    assert_eq!(status["outcome"], json!("passed"), "{status}");
    assert_eq!(status["parent_id"], json!("d-00000000000000aa"));

    // A failed verdict is a result, not an error; it awaits review.
    let quitter = call("quitter");
    assert_eq!(quitter["is_error"], json!(false), "{quitter}");
    assert_eq!(quitter["structured"]["verified"], json!(false));
    assert!(
        quitter["text"]
            .as_str()
            .is_some_and(|t| t.starts_with("failed (verification_failed) after 1 attempt: ")),
        "{quitter}"
    );
    assert_eq!(call("file")["structured"]["outcome"], json!("passed"));
    let pending = &call("review_list")["structured"]["pending"];
    assert_eq!(pending.as_array().map(Vec::len), Some(1), "{pending}");
    assert_eq!(pending[0]["id"], quitter["structured"]["id"]);

    // `wait: false` answers at once with the id; run_status says `running` (its checks take a
    // second each), then, waiting, the outcome the run ended with.
    let started = &call("started")["structured"];
    assert_eq!(started["outcome"], json!("running"), "{started}");
    let now = &call("status_now")["structured"];
    assert_eq!(now["id"], started["id"]);
    assert_eq!(now["outcome"], json!("running"), "{now}");
    let waited = &call("status_waited")["structured"];
    assert_eq!(waited["outcome"], json!("passed"), "{waited}");
    assert_eq!(waited["parent_id"], json!("d-00000000000000aa"));

    // Refused with the kind and the fix; nothing recorded for them.
    for (name, expected) in [
        ("outside", "`workdir` \"..\" is outside the project"),
        ("escape", "`file` \"../elsewhere.yaml\""),
        ("misspelt", "unknown argument `taks` (did you mean `task`?)"),
        (
            "no_profile",
            "no profile \"wroker\"; the profiles are default, quitter",
        ),
        ("both", "`task` cannot be given with `file`"),
        ("unknown_run", "no run d-ffffffffffffffff in the journal"),
        (
            "bad_wait_s",
            "`wait_s` is -1; give a whole number of seconds from 0 to 3600",
        ),
        ("bad_wait", "`wait` is \"no\"; give true or false"),
    ] {
        let refused = call(name);
        assert_eq!(refused["is_error"], json!(true), "{refused}");
        let text = refused["text"].as_str().unwrap_or_default();
        assert!(text.starts_with("error[config]: "), "{name}: {text}");
        assert!(
            text.contains(expected),
            "{name}: expected {expected:?} in {text}"
        );
        assert_eq!(refused["structured"]["error"]["kind"], json!("config"));
    }
    let journal = harness_records::Journal::open(dir.join(".harness/runs.db")).expect("journal");
    let recorded = journal
        .list(&harness_records::Filter::default())
        .expect("runs");
    assert_eq!(
        recorded.len(),
        5,
        "the liar, the quitter, the file and the two that did not wait: {recorded:?}"
    );
    let abandoned = call("abandoned")["structured"]["id"].clone();
    let abandoned = journal
        .get(abandoned.as_str().expect("an id"))
        .expect("read")
        .expect("the abandoned run is recorded");
    assert_eq!(abandoned.outcome, "error", "{abandoned:?}");
    assert_eq!(
        abandoned.error_kind.as_deref(),
        Some("cancelled"),
        "{abandoned:?}"
    );
}

/// A real client CLI started in `dir` with nothing of this machine's environment but `PATH`,
/// `home` as its HOME, and no input.
fn client(program: &std::path::Path, dir: &TempDir, home: &TempDir) -> Command {
    let mut command = Command::new(program);
    command
        .current_dir(dir.path())
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", home.path())
        .stdin(std::process::Stdio::null());
    command
}

/// Runs a client to its end; its standard output, once it has exited 0.
fn ran(command: &mut Command) -> String {
    let out = command.output().expect("run the client");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// Claude Code, given `harness mcp` with `--mcp-config`, calls `delegate` when the model asks;
/// the verified result is what the model reads next.
#[test]
fn claude_code_calls_harness_mcp_and_its_model_reads_the_verified_result() {
    crate::real_clis::offline();
    let Some(claude) = crate::real_clis::real("claude") else {
        return;
    };
    let dir = project();
    let server = ModelServer::start(|_, body| {
        if after_tool(body) {
            let result = messages(body)
                .iter()
                .rev()
                .find(|m| m["role"] == "tool")
                .and_then(|m| m["content"].as_str())
                .unwrap_or_default()
                .to_owned();
            answer(body, &format!("The delegate said: {result}"))
        } else {
            tool_call(
                body,
                "toolu_01",
                "mcp__harness__delegate",
                &json!({"task": "Create hello.txt containing hi", "criteria": ["file_exists:hello.txt"]}),
            )
        }
    });
    let config = json!({"mcpServers": {"harness": {
        "type": "stdio", "command": harness_bin(), "args": ["mcp", "--root", dir.path()],
    }}});
    let home = TempDir::new();
    let stdout = ran(client(&claude, &dir, &home)
        .args(["-p", "Create hello.txt through the harness delegate tool"])
        .args(["--output-format", "stream-json", "--verbose"])
        .args(["--mcp-config", &config.to_string(), "--strict-mcp-config"])
        .args(["--allowedTools", "mcp__harness__delegate"])
        .env("ANTHROPIC_BASE_URL", server.anthropic_base_url())
        .env("ANTHROPIC_API_KEY", "sk-test")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1"));
    // The model's next request carries the tool result: the verdict and the deliverable.
    let bodies = server.bodies();
    let result = bodies
        .iter()
        .filter_map(|b| {
            messages(b)
                .iter()
                .find(|m| m["role"] == "tool")
                .and_then(|m| m["content"].as_str())
                .map(str::to_owned)
        })
        .next()
        .unwrap_or_else(|| panic!("no tool result reached the model: {bodies:?}"));
    let read: Value = serde_json::from_str(&result).expect("the structured result, as JSON");
    assert_eq!(read["verified"], json!(true), "{read}");
    assert_eq!(read["attempts"], json!(2), "{read}");
    assert_eq!(
        read["summary"],
        json!("passed on attempt 2; evidence: hello.txt 3 bytes")
    );
    assert!(stdout.contains("The delegate said:"), "{stdout}");
    assert_eq!(dir.read("hello.txt").as_deref(), Some("hi\n"));
    let journal = harness_records::Journal::open(dir.join(".harness/runs.db")).expect("journal");
    let recorded = journal.get(read["id"].as_str().expect("id")).expect("read");
    assert_eq!(recorded.map(|r| r.outcome), Some("passed".to_owned()));
}

/// The name a client gave the harness tool ending in `tool` (`delegate`, `run_status`), among
/// the tools its request offers the model: each client names MCP tools its own way.
fn offered(body: &Value, tool: &str) -> String {
    body["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["function"]["name"].as_str())
        .find(|name| name.ends_with(tool))
        .unwrap_or_else(|| panic!("the client offered no {tool} tool: {}", body["tools"]))
        .to_owned()
}

/// The last tool result in the request, read as the JSON object harness answered: the
/// structured content, or the object in the text a client passes on (Gemini CLI wraps the text
/// blocks — the summary, then the object — in words of its own).
fn last_result(body: &Value) -> Option<Value> {
    let text = messages(body)
        .iter()
        .rev()
        .find(|m| m["role"] == "tool")?
        .get("content")?
        .as_str()?
        .to_owned();
    let end = text.rfind('}')?;
    text.match_indices('{')
        .filter_map(|(start, _)| serde_json::from_str::<Value>(&text[start..=end]).ok())
        .find(|object| object.get("summary").is_some())
}

/// A loopback model driving a client's harness tools: it asks `delegate` with `wait: false`,
/// then `run_status` until the run has ended, then answers with what it read — the way a client
/// whose tool calls time out (Codex's 60 s) uses a long delegation.
fn polling_model() -> ModelServer {
    ModelServer::start(|index, body| {
        let task = json!({"task": "Create hello.txt containing hi",
            "criteria": ["file_exists:hello.txt"], "wait": false});
        if index >= 12 {
            // A client that never hands the results back ends here, not in an endless loop.
            return answer(body, "Giving up: no result came back.");
        }
        match last_result(body) {
            None => tool_call(body, "call_1", &offered(body, "delegate"), &task),
            Some(read) if read["outcome"].is_null() || read["outcome"] == "running" => {
                let id = read["id"].as_str().unwrap_or_default().to_owned();
                let n = messages(body)
                    .iter()
                    .filter(|m| m["role"] == "tool")
                    .count();
                tool_call(
                    body,
                    &format!("call_{}", n + 1),
                    &offered(body, "run_status"),
                    &json!({"id": id, "wait_s": 20}),
                )
            }
            Some(read) => answer(
                body,
                &format!(
                    "The delegate's run {} ended {}: {}",
                    read["id"].as_str().unwrap_or("?"),
                    read["outcome"],
                    read["summary"].as_str().unwrap_or("?")
                ),
            ),
        }
    })
}

/// What a real client's model read back from harness: the run's last `run_status`, checked
/// against the journal and the workspace.
fn read_back_verified(server: &ModelServer, dir: &TempDir, stdout: &str) {
    let bodies = server.bodies();
    let finals: Vec<Value> = bodies.iter().filter_map(last_result).collect();
    let last = finals.last().unwrap_or_else(|| {
        panic!(
            "no tool result reached the model: {:?}",
            bodies.last().map(messages)
        )
    });
    assert_eq!(last["verified"], json!(true), "{last}");
    assert_eq!(last["outcome"], json!("passed"), "{last}");
    assert_eq!(last["attempts"], json!(2), "{last}");
    // The first result was the id alone, before the run ended.
    assert!(
        finals.first().is_some_and(|f| f["id"] == last["id"]),
        "{finals:?}"
    );
    assert!(
        stdout.contains("The delegate's run") && stdout.contains("passed"),
        "{stdout}"
    );
    assert_eq!(dir.read("hello.txt").as_deref(), Some("hi\n"));
    let journal = harness_records::Journal::open(dir.join(".harness/runs.db")).expect("journal");
    let recorded = journal.get(last["id"].as_str().expect("id")).expect("read");
    assert_eq!(recorded.map(|r| r.outcome), Some("passed".to_owned()));
}

/// Codex (`codex exec`), given `harness mcp` as an MCP server (`-c mcp_servers.harness=…`),
/// starts a delegation with `wait: false` and polls `run_status` until it ends — its tool calls
/// time out at 60 s, a delegation need not — and its model reads the verified result.
#[test]
fn codex_starts_a_delegation_through_harness_mcp_and_polls_it_to_its_verified_end() {
    crate::real_clis::offline();
    let Some(codex) = crate::real_clis::real("codex") else {
        return;
    };
    let dir = project();
    let server = polling_model();
    let home = TempDir::new();
    std::fs::create_dir_all(home.join(".codex")).expect("CODEX_HOME");
    let catalog = home.join("catalog.json");
    std::fs::write(
        &catalog,
        harness_testkit::model::codex_model_catalog("local-model").to_string(),
    )
    .expect("the model catalogue");
    let mcp = format!(
        "mcp_servers.harness={{command={}, args=[\"mcp\", \"--root\", {}], default_tools_approval_mode=\"approve\"}}",
        json!(harness_bin()),
        json!(dir.path().display().to_string())
    );
    let provider = format!(
        r#"model_providers.local={{name="local", base_url="{}", env_key="LOCAL_KEY", wire_api="responses"}}"#,
        server.base_url()
    );
    let stdout = ran(client(&codex, &dir, &home)
        .args(["exec", "--json", "--skip-git-repo-check"])
        .args(["-c", "model_provider=local", "-c", &provider])
        .args([
            "-c",
            &format!(
                "model_catalog_json={}",
                json!(catalog.display().to_string())
            ),
        ])
        .args(["-c", "analytics.enabled=false", "--disable", "plugins"])
        .args(["-c", &mcp, "-m", "local-model"])
        .arg("Create hello.txt through the harness delegate tool")
        .env("CODEX_HOME", home.join(".codex"))
        .env("LOCAL_KEY", "sk-test"));
    read_back_verified(&server, &dir, &stdout);
}

/// Gemini CLI, given `harness mcp` in its settings' `mcpServers`, starts a delegation with
/// `wait: false`, polls `run_status`, and its model reads the verified result.
#[test]
fn gemini_cli_starts_a_delegation_through_harness_mcp_and_polls_it_to_its_verified_end() {
    crate::real_clis::offline();
    let Some(gemini) = crate::real_clis::real("gemini") else {
        return;
    };
    let dir = project();
    let server = polling_model();
    let home = TempDir::new();
    home.write(
        ".gemini/settings.json",
        json!({
            "security": {"auth": {"selectedType": "gemini-api-key"}},
            "mcpServers": {"harness": {
                "command": harness_bin(), "args": ["mcp", "--root", dir.path()], "trust": true,
            }},
        })
        .to_string(),
    );
    let stdout = ran(client(&gemini, &dir, &home)
        .args(["--output-format", "stream-json", "--approval-mode", "yolo"])
        .args(["-m", "gemini-2.5-pro"])
        .args(["-p", "Create hello.txt through the harness delegate tool"])
        .env("GEMINI_CLI_HOME", home.path())
        .env("GOOGLE_GEMINI_BASE_URL", server.gemini_base_url())
        .env("GEMINI_API_KEY", "test-key")
        // Headless, Gemini CLI runs MCP servers only in a folder it is told to trust.
        .env("GEMINI_CLI_TRUST_WORKSPACE", "true"));
    read_back_verified(&server, &dir, &stdout);
}
