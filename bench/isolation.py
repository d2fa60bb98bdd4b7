#!/usr/bin/env python3
"""Children that change files, side by side (`bench/fanout.sh --writers`).

    isolation.py HARNESS WORK [--files N] [--children N] [--check-s S] [--repeat N]

1. Concurrency: a scripted parent hands CHILDREN (default 8) `delegate` calls in one turn; each
   child writes its own file and is held to a check that sleeps CHECK_S (default 2) seconds and
   finds the file. Prints the parent's wall time against the slowest child's (from the journal)
   and the goal ratio (<= 1.5x; one at a time would be CHILDREN x). Fails when the parent is not
   verified or a child's file is missing from the parent's workspace.
2. The copy's cost: the same fan-out with an instant check, on an empty workspace and on one of
   FILES (default 10,000) small files in 100 directories; the difference per child, in wall and
   CPU time (user + sys from wait4), is what making, diffing and removing each child's copy
   costs. Rounds are interleaved; medians are reported.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import time

WRITER = r'''
def respond(request):
    last = request["messages"][-1]
    if last["role"] == "tool":
        return "wrote it"
    words = request["messages"][0]["content"].split(" ")
    return {"tool_calls": [{"name": "write_file", "arguments": {"path": words[1], "content": words[3] + "\n"}}]}
'''

PARENT = r'''
N = %d

def respond(request):
    made = [m for m in request["messages"] if m["role"] == "tool"]
    if not made:
        return {"tool_calls": [{"name": "delegate", "arguments": {"task": "Write out/f%%d.txt with word%%d" %% (i, i), "profile": "writer"}} for i in range(N)]}
    verified = len([m for m in made if json.decode(m["content"])["verified"]])
    return "children verified: %%d of %%d" %% (verified, N)
'''


def fail(message):
    print(f"BENCHMARK FAILED: {message}", file=sys.stderr)
    sys.exit(1)


def project(work, name, children, check, files):
    """A project directory: the parent, the writer profile, a workspace of `files` files."""
    root = os.path.join(work, name)
    ws = os.path.join(root, "ws")
    os.makedirs(os.path.join(ws, "out"), exist_ok=True)
    for i in range(files):
        d = os.path.join(ws, "src", f"d{i % 100:02d}")
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, f"f{i}.txt"), "w") as f:
            f.write(f"file {i}\n" * 8)
    with open(os.path.join(root, "parent.star"), "w") as f:
        f.write(PARENT % children)
    with open(os.path.join(root, "writer.star"), "w") as f:
        f.write(WRITER)
    done = f"children verified: {children} of {children}"
    with open(os.path.join(root, "delegation.yaml"), "w") as f:
        f.write(
            "task: \"Write one file per child\"\n"
            "delegate: {kind: scripted, script: parent.star}\n"
            "tools: [delegate]\n"
            f"limits: {{max_children: {children}, max_depth: 1}}\n"
            "delegates:\n"
            "  writer:\n"
            "    delegate: {kind: scripted, script: writer.star}\n"
            "    tools: [write_file]\n"
            f"    checks: [{{name: check, run: {json.dumps(check)}}}]\n"
            "max_verify_retries: 0\n"
            f"verify: {json.dumps('def run(result):' + chr(10) + '    return result[' + chr(34) + 'response' + chr(34) + '] == ' + json.dumps(done))}\n"
            "workdir: ws\n"
        )
    return root


def run(harness, root, children):
    """Runs the project once with a fresh journal; (wall s, cpu s, children's durations s)."""
    journal = os.path.join(root, "runs.db")
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(journal + suffix):
            os.remove(journal + suffix)
    shutil.rmtree(os.path.join(root, "ws", "out"), ignore_errors=True)
    os.makedirs(os.path.join(root, "ws", "out"))
    started = time.perf_counter()
    with open(os.path.join(root, "stdout"), "wb") as out, open(os.path.join(root, "stderr"), "wb") as err:
        process = subprocess.Popen(
            [harness, "run", os.path.join(root, "delegation.yaml"), "--json", "--journal", journal],
            stdin=subprocess.DEVNULL, stdout=out, stderr=err)
        _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - started
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        with open(os.path.join(root, "stderr")) as f:
            tail = f.read()[-2000:]
        fail(f"{root}: harness exited {code}: {tail}")
    for i in range(children):
        path = os.path.join(root, "ws", "out", f"f{i}.txt")
        if not os.path.isfile(path):
            fail(f"{path} is missing: a verified child's change was not applied")
    listed = subprocess.run([harness, "runs", "list", "--json", "--limit", "1000", "--journal", journal],
                            check=True, capture_output=True, text=True)
    runs = json.loads(listed.stdout)["runs"]
    kids = [r for r in runs if r.get("parent_id")]
    if len(kids) != children or any(r["outcome"] != "passed" for r in runs):
        fail(f"{root}: expected {children} children and every run passed: {[(r['id'], r['outcome']) for r in runs]}")
    return wall, usage.ru_utime + usage.ru_stime, [r["duration_ms"] / 1000 for r in kids]


def median(values):
    values = sorted(values)
    mid = len(values) // 2
    return values[mid] if len(values) % 2 else (values[mid - 1] + values[mid]) / 2


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("harness")
    parser.add_argument("work")
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--children", type=int, default=8)
    parser.add_argument("--check-s", type=float, default=2.0)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    n = args.children

    slow = project(args.work, "slow", n, f"sleep {args.check_s} && ls out | grep -q txt", 0)
    print(f"1. {n} children, each writing a file and held to a {args.check_s:g}-second check, called in one turn")
    ratios = []
    for rnd in range(1, args.repeat + 1):
        wall, cpu, durations = run(args.harness, slow, n)
        ratio = wall / max(durations)
        ratios.append(ratio)
        print(f"   round {rnd}: parent {wall:.2f} s wall; slowest child {max(durations):.2f} s, fastest {min(durations):.2f} s;"
              f" parent / slowest = {ratio:.2f}x (one at a time: {sum(durations):.2f} s)")
    print(f"   median parent / slowest child = {median(ratios):.2f}x (goal <= 1.5x): {'goal met' if median(ratios) <= 1.5 else 'goal MISSED'}")

    print(f"2. the copy's cost: {n} children with an instant check, on an empty workspace and on {args.files:,} files")
    empty = project(args.work, "empty", n, "test -n x", 0)
    big = project(args.work, "big", n, "test -n x", args.files)
    size = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(os.path.join(big, "ws")) for f in fs)
    rows = {"empty": [], "big": []}
    for rnd in range(args.repeat):
        for name, root in (("empty", empty), ("big", big)) if rnd % 2 == 0 else (("big", big), ("empty", empty)):
            rows[name].append(run(args.harness, root, n)[:2])
    we, ce = median([w for w, _ in rows["empty"]]), median([c for _, c in rows["empty"]])
    wb, cb = median([w for w, _ in rows["big"]]), median([c for _, c in rows["big"]])
    print(f"   empty workspace: {we * 1e3:.0f} ms wall, {ce * 1e3:.0f} ms CPU; {args.files:,} files ({size / 1e6:.1f} MB):"
          f" {wb * 1e3:.0f} ms wall, {cb * 1e3:.0f} ms CPU (medians of {args.repeat})")
    print(f"   per child, the copy of {args.files:,} files made, diffed and removed (with the child's own"
          f" snapshot of them): {(wb - we) / n * 1e3:.0f} ms wall, {(cb - ce) / n * 1e3:.0f} ms CPU")
    # For scale: what coreutils take to copy and remove the same tree on this file system.
    copy = os.path.join(args.work, "cp-a")
    for label, argv in (("cp -a", ["cp", "-a", os.path.join(big, "ws"), copy]), ("rm -rf", ["rm", "-rf", copy])):
        started = time.perf_counter()
        process = subprocess.Popen(argv)
        _, status, usage = os.wait4(process.pid, 0)
        if os.waitstatus_to_exitcode(status) != 0:
            fail(f"{label} failed")
        print(f"   for scale, {label} of the same tree: {(time.perf_counter() - started) * 1e3:.0f} ms wall,"
              f" {(usage.ru_utime + usage.ru_stime) * 1e3:.0f} ms CPU")


if __name__ == "__main__":
    main()
