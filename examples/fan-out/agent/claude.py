#!/usr/bin/env python3
"""A stand-in for Claude Code as a delegation tree's parent, so that agent-parent.yaml runs with
no model and no network: it does what `claude -p --output-format stream-json` does when its model
decides to hand the task to a child — starts the MCP servers its `--mcp-config` names, calls the
`delegate` tool of the one harness serves its run (`harness_tree`), and prints the stream-json
lines Claude Code prints: the tool call, its result, its answer.

A real CLI is configured the same way (see docs/reference.md, "An agent CLI as the parent"):
swap `binary:` for the real `claude` and give it a model.
"""

import json
import subprocess
import sys

SESSION = "6a1f0c55-2b8e-4d7a-9c31-0e5f4d3b2a19"


def emit(line):
    print(json.dumps(line), flush=True)


def rpc(server, message):
    """Sends a JSON-RPC message; for a request, reads lines until its response."""
    server.stdin.write(json.dumps(message) + "\n")
    server.stdin.flush()
    if "id" not in message:
        return None
    for line in server.stdout:
        answer = json.loads(line)
        if answer.get("id") == message["id"]:
            return answer
    raise SystemExit("the MCP server closed before answering")


def main(argv):
    if argv[:1] == ["--version"]:
        print("2.1.332 (Claude Code stand-in)")
        return 0
    config = json.loads(argv[argv.index("--mcp-config") + 1])
    entry = config["mcpServers"]["harness_tree"]
    prompt = argv[-1]
    emit({"type": "system", "subtype": "init", "session_id": SESSION, "tools": ["mcp__harness_tree__delegate"]})

    server = subprocess.Popen(
        [entry["command"], *entry["args"]], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    rpc(server, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "claude-stand-in", "version": "1"}}})
    rpc(server, {"jsonrpc": "2.0", "method": "notifications/initialized"})
    # "Have a child write north.txt containing the word cold" -> the child's task, held to the
    # file being there. (A retry prompt names no such task: the stand-in then gives up.)
    if " write " not in prompt:
        return answer(server, "I have no task to hand to a child here.")
    task = "Write " + prompt.split(" write ", 1)[1].split("\n")[0].rstrip(".")
    arguments = {"task": task, "profile": "writer", "criteria": ["file_exists:" + task.split(" ")[1]]}
    emit({"type": "assistant", "session_id": SESSION, "message": {"role": "assistant", "content": [
        {"type": "tool_use", "id": "toolu_01", "name": "mcp__harness_tree__delegate", "input": arguments}]}})
    called = rpc(server, {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                          "params": {"name": "delegate", "arguments": arguments}})
    text = "".join(block.get("text", "") for block in called["result"]["content"])
    emit({"type": "user", "session_id": SESSION, "message": {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_01", "content": text}]}})
    if called["result"].get("isError"):
        return answer(server, "FAILED: " + text)
    child = json.loads(text)
    if child["verified"]:
        return answer(server, "done: %s (%s)" % (child["id"], child["outcome"]))
    return answer(server, "FAILED: %s (%s)" % (child["id"], child["outcome"]))


def answer(server, said):
    """Ends the session: the MCP server stopped, the answer and the closing `result` line."""
    server.stdin.close()
    server.wait()
    emit({"type": "assistant", "session_id": SESSION, "message": {"role": "assistant", "content": [
        {"type": "text", "text": said}]}})
    emit({"type": "result", "subtype": "success", "is_error": False, "result": said, "session_id": SESSION,
          "usage": {"input_tokens": 0, "output_tokens": 0}})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
