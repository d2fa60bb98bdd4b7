#!/usr/bin/env bash
# The delegation-tree benchmark: what a parent fanning out to children costs, per child, against
# the same delegations run as a batch, in one command:
#
#   bench/fanout.sh [--no-build] [--repeat N] [--children N] [--concurrency N] [--keep]
#   bench/fanout.sh --writers [--no-build] [--repeat N] [--files N]
#
# With --writers it measures children that change files instead (bench/isolation.py): 8
# children that each write a file and hold a 2-second check, called in one turn (the parent's
# wall time against the slowest child's; goal <= 1.5x), and what each child's copy of the
# workspace costs on a workspace of N (default 10,000) files.
#
# Generates in a scratch directory a scripted parent offered `tools: [delegate]` that hands out
# N (default 100) `delegate` calls, 50 per turn, with `limits: {max_children: 16, max_depth: 1}`;
# every child is an instant scripted delegate (one text answer, no tools, so children run side by
# side and change no file) held to an inline verifier the call gives. Then the same N
# delegations (same script, same verifier) as a JSONL file for `harness batch --concurrency 16`,
# and a batch of one of them: the fixed cost of a process. Runs the three interleaved, each with
# a fresh journal, and prints CPU (user + sys of the whole process, from wait4) per child, wall
# time, their medians and the goal ratio. Telemetry is off.
#
#   --no-build       use the existing binary                                       [HARNESS_BIN]
#   --repeat N       rounds of the three runs; medians are reported (default 5)    [BENCH_REPEAT]
#   --children N     children of the parent, lines of the batch (default 100, at most 950)
#   --concurrency N  max_children and --concurrency (default 16, at most 64)
#   --keep           keep the scratch directory (it is kept anyway when a check fails)
#
# The binary is $HARNESS_BIN if set (then nothing is built), else target/release/harness after
# `cargo build --release -p harness-cli`. Before timing, a probe run of each workload whose
# children answer wrong first proves every child goes through its verifier (two attempts each).
# Goal: fan-out CPU per child <= 2x batch CPU per child. Speed is measured, never asserted: the
# script fails only when counts or outcomes are wrong (N+1 runs, N children of the parent, all
# passed; N batch runs, all passed).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=1
keep=0
writers=0
files=10000
repeat=${BENCH_REPEAT:-5}
children=${BENCH_CHILDREN:-100}
concurrency=${BENCH_CONCURRENCY:-16}
while [[ $# -gt 0 ]]; do
    case $1 in
        --no-build) build=0 ;;
        --keep) keep=1 ;;
        --repeat) repeat=${2:?--repeat needs a number}; shift ;;
        --children) children=${2:?--children needs a number}; shift ;;
        --concurrency) concurrency=${2:?--concurrency needs a number}; shift ;;
        --writers) writers=1 ;;
        --files) files=${2:?--files needs a number}; shift ;;
        -h|--help) sed -n '2,34p' "$0"; exit 0 ;;
        *) echo "unknown argument: $1 (see --help)" >&2; exit 2 ;;
    esac
    shift
done
number() { # name, value, min, max
    [[ $2 =~ ^[0-9]+$ ]] && (( $2 >= $3 && $2 <= $4 )) \
        || { echo "$1 must be a whole number from $3 to $4, got '$2'" >&2; exit 2; }
}
number --repeat "$repeat" 1 1000
# 50 calls a turn (a turn holds at most 64) and the answer in one more, within max_turns 20.
number --children "$children" 1 950
number --concurrency "$concurrency" 1 64

# The binary, absolute: the script works from the repository root.
if [[ -n ${HARNESS_BIN:-} ]]; then
    harness=$HARNESS_BIN
    [[ $harness == */* && $harness != /* ]] && harness=$PWD/$harness
    build=0
else
    harness=${CARGO_TARGET_DIR:-$root/target}/release/harness
fi
cd "$root"
if [[ $build == 1 ]]; then
    cargo build --release -p harness-cli
fi
[[ -x $harness ]] || { echo "missing $harness (run without --no-build, or set HARNESS_BIN)" >&2; exit 1; }

# Nothing of the caller's may reach the runs: a parent id would make the root a child, a journal
# would gather every run in one file, an OTLP endpoint would turn telemetry on.
unset HARNESS_PARENT_ID HARNESS_JOURNAL HARNESS_LOG OTEL_EXPORTER_OTLP_ENDPOINT \
    OTEL_EXPORTER_OTLP_TRACES_ENDPOINT

work=$(mktemp -d "${TMPDIR:-/tmp}/harness-fanout.XXXXXX")
cleanup() {
    local status=$?
    if [[ $keep == 1 || $status != 0 ]]; then
        echo "scratch directory kept: $work" >&2
    else
        rm -rf "$work"
    fi
}
trap cleanup EXIT
die() { echo "BENCHMARK FAILED: $*" >&2; exit 1; }

if [[ $writers == 1 ]]; then
    number --files "$files" 0 1000000
    echo "harness: $("$harness" --version) ($harness)"
    python3 "$root/bench/isolation.py" "$harness" "$work" --files "$files" --repeat "$repeat"
    exit 0
fi

# The workloads. Each child is asked to square a number and answers at once; its verifier checks
# the arithmetic (a wrong answer fails the attempt; a right one passes with no note). `probe`
# children answer wrong on their first attempt, so each takes exactly two: proof that the
# verifier runs for every child.
mkdir -p "$work/ws" "$work/journals" "$work/out"
python3 - "$work" "$children" "$concurrency" <<'PY'
import json, sys

work, n, concurrency = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
per_turn = 50

verify = (
    "def run(result):\n"
    "    words = result[\"response\"].split(\" \")\n"
    "    n = int(words[1])\n"
    "    if int(words[-1]) != n * n:\n"
    "        return {\"verified\": False, \"reason\": \"%d squared is not %s\" % (n, words[-1])}\n"
    "    return True\n"
)

child = {
    "child": (
        "# Answers at once, with no tool: \"answer: N squared is N*N\".\n\n"
        "def respond(request):\n"
        "    n = int(request[\"messages\"][0][\"content\"].split(\" \")[-1])\n"
        "    return \"answer: %d squared is %d\" % (n, n * n)\n"
    ),
    "probe": (
        "# Answers wrong on its first attempt, right on its retry.\n\n"
        "def respond(request):\n"
        "    n = int(request[\"messages\"][0][\"content\"].split(\" \")[-1])\n"
        "    wrong = 1 if request[\"attempt\"] == 0 else 0\n"
        "    return \"answer: %d squared is %d\" % (n, n * n + wrong)\n"
    ),
}

def task(i):
    return f"Square the number {i}"

done = f"children verified: {n} of {n}"
parent = f'''# Hands out {n} `delegate` calls, {per_turn} a turn (a turn holds at most 64), then says how many
# children were verified, as their tool results say.

N = {n}
PER_TURN = {per_turn}
VERIFY = {json.dumps(verify)}

def respond(request):
    results = [m for m in request["messages"] if m["role"] == "tool"]
    sent = len(results)
    if sent < N:
        return {{"tool_calls": [
            {{"name": "delegate", "arguments": {{
                "task": "Square the number %d" % i,
                "profile": "child",
                "verify": VERIFY,
            }}}}
            for i in range(sent, min(sent + PER_TURN, N))
        ]}}
    verified = 0
    for message in results:
        child = json.decode(message["content"], default = None)
        if type(child) == "dict" and child["verified"]:
            verified += 1
    return "children verified: %d of %d" % (verified, N)
'''
parent_verify = (
    "def run(result):\n"
    f"    if result[\"response\"] != {json.dumps(done)}:\n"
    "        return {\"verified\": False, \"reason\": \"not every child was verified: \" + result[\"response\"]}\n"
    "    return True\n"
)

with open(f"{work}/parent.star", "w") as f:
    f.write(parent)
for name, script in child.items():
    with open(f"{work}/{name}.star", "w") as f:
        f.write(script)
    # The parent: its own verifier checks its report; it is not retried (a retry would run every
    # child again). Its children take the default retries, as the batch's delegations do.
    with open(f"{work}/fanout-{name}.yaml", "w") as f:
        f.write(
            f"task: {json.dumps(f'Square the numbers 0 to {n - 1}, one child per number, and say how many were verified')}\n"
            "delegate: {kind: scripted, script: parent.star}\n"
            "tools: [delegate]\n"
            "delegates:\n"
            f"  child: {{delegate: {{kind: scripted, script: {name}.star}}}}\n"
            f"limits: {{max_children: {concurrency}, max_depth: 1}}\n"
            "max_verify_retries: 0\n"
            f"verify: {json.dumps(parent_verify)}\n"
            "workdir: ws\n"
        )
    with open(f"{work}/batch-{name}.jsonl", "w") as f:
        for i in range(n):
            entry = {
                "task": task(i),
                "delegate": {"kind": "scripted", "script": f"{name}.star"},
                "verify": verify,
                "workdir": "ws",
            }
            f.write(json.dumps(entry) + "\n")
PY
head -n 1 "$work/batch-child.jsonl" > "$work/floor-child.jsonl"

# Runs argv with stdout and stderr to files; prints "user sys wall exit" in seconds: the rusage
# of that process and everything it waited for, from wait4 (microseconds; GNU time's %U %S are
# hundredths, too coarse for runs of a few tens of milliseconds).
measure() { # stdout-file stderr-file argv...
    python3 -c '
import os, subprocess, sys, time
out, err, argv = sys.argv[1], sys.argv[2], sys.argv[3:]
with open(out, "wb") as o, open(err, "wb") as e:
    started = time.perf_counter()
    process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=o, stderr=e)
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - started
print(f"{usage.ru_utime:.6f} {usage.ru_stime:.6f} {wall:.6f} {os.waitstatus_to_exitcode(status)}")
' "$@"
}

# Checks what a run printed and recorded. fanout: one root that passed, N+1 runs, N children of
# the root; batch: N lines and N runs, no parent. Every run passed; every child made `attempts`
# attempts (the probe's first failed) and never waited for a sibling (they run side by side).
check() { # kind (fanout|batch|floor) label stdout-file journal attempts
    local kind=$1 label=$2 out=$3 journal=$4 attempts=$5 expected=$children
    [[ $kind == floor ]] && expected=1
    "$harness" runs list --journal "$journal" --json --limit 100000 > "$work/out/runs.json" \
        || die "$label: harness runs list --journal $journal failed"
    python3 - "$kind" "$label" "$expected" "$attempts" "$out" "$work/out/runs.json" <<'PY'
import json, sys

kind, label, n, attempts, out_path, runs_path = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5], sys.argv[6]

def fail(message):
    print(f"BENCHMARK FAILED: {label}: {message}", file=sys.stderr)
    sys.exit(1)

with open(runs_path, encoding="utf-8") as f:
    runs = json.load(f)["runs"]
outcomes = {}
for run in runs:
    outcomes[run["outcome"]] = outcomes.get(run["outcome"], 0) + 1
if kind == "fanout":
    with open(out_path, encoding="utf-8") as f:
        root = json.load(f)
    if root.get("outcome") != "passed":
        fail(f"the parent ended {root.get('outcome')} ({root.get('error')}; reasons {root.get('reasons')})")
    if len(runs) != n + 1:
        fail(f"the journal holds {len(runs)} runs, expected {n + 1} (the parent and {n} children)")
    roots = [r["id"] for r in runs if r.get("parent_id") is None]
    if roots != [root["id"]]:
        fail(f"runs without a parent: {roots}, expected only the parent {root['id']}")
    kids = [r for r in runs if r.get("parent_id") == root["id"]]
    if len(kids) != n:
        fail(f"{len(kids)} runs have parent_id {root['id']}, expected {n}")
else:
    with open(out_path, encoding="utf-8") as f:
        lines = [json.loads(line) for line in f if line.strip()]
    if len(lines) != n:
        fail(f"harness batch --json printed {len(lines)} lines, expected {n}")
    unverified = [l.get("line") for l in lines if not l.get("verified")]
    if unverified:
        fail(f"{len(unverified)} delegations were not verified (lines {unverified[:10]})")
    if len(runs) != n:
        fail(f"the journal holds {len(runs)} runs, expected {n}")
    if any(r.get("parent_id") for r in runs):
        fail("a batch run has a parent_id")
    kids = runs
if outcomes != {"passed": len(runs)}:
    fail(f"outcomes {outcomes}, expected every run passed")
for kid in kids:
    made = kid["attempts"]
    if len(made) != attempts or made[-1].get("passed") is not True \
            or any(a.get("passed") is not False for a in made[:-1]):
        fail(f"run {kid['id']} made attempts {[a.get('passed') for a in made]}, "
             f"expected {attempts} with only the last passing")
    if any("waited for another delegation" in w for w in kid.get("warnings", [])):
        fail(f"run {kid['id']} waited for a sibling: children are meant to run side by side")
PY
}

# One run of one workload: measured, checked, appended to results.
run_one() { # kind script round
    local kind=$1 script=$2 round=$3 args
    local label="$kind ($script, round $round)"
    local journal="$work/journals/$kind-$script-$round.db"
    local out="$work/out/$kind-$script-$round.stdout" err="$work/out/$kind-$script-$round.stderr"
    case $kind in
        fanout) args=(run "$work/fanout-$script.yaml" --json --journal "$journal") ;;
        batch) args=(batch "$work/batch-$script.jsonl" --concurrency "$concurrency" --json --journal "$journal") ;;
        floor) args=(batch "$work/floor-$script.jsonl" --concurrency "$concurrency" --json --journal "$journal") ;;
    esac
    local measured user sys wall code
    measured=$(measure "$out" "$err" "$harness" "${args[@]}")
    read -r user sys wall code <<< "$measured"
    if [[ $code != 0 ]]; then
        echo "--- stderr tail of: $harness ${args[*]}" >&2
        tail -n 20 "$err" >&2 || true
        die "$label: harness exited $code (expected 0: every delegation passes)"
    fi
    local attempts=1
    [[ $script == probe ]] && attempts=2
    check "$kind" "$label" "$out" "$journal" "$attempts"
    [[ $script == child ]] && echo "$kind $round $user $sys $wall" >> "$work/results"
    return 0
}

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), $(awk '/MemTotal/ {printf "%.1f GiB", $2/1048576}' /proc/meminfo)"
echo "harness: $("$harness" --version) ($harness)"
echo "workload: a scripted parent fanning out to $children instant scripted children (depth 1, max_children $concurrency, 50 calls a turn)"
echo "          against the same $children delegations as harness batch --concurrency $concurrency; journal on, telemetry off"

# The probes (not timed; they also warm the page cache): every child is judged by its verifier.
run_one fanout probe 0
run_one batch probe 0
echo "probe: every child and every batch delegation failed its verifier once, then passed: verified, checked"

# Interleaved rounds, the order rotating, so a noisy spell falls on every workload alike.
: > "$work/results"
orders=("fanout batch floor" "batch floor fanout" "floor fanout batch")
for round in $(seq 1 "$repeat"); do
    for kind in ${orders[$(( (round - 1) % 3 ))]}; do
        run_one "$kind" child "$round"
    done
done

python3 - "$work/results" "$children" "$repeat" <<'PY'
import sys

path, n, repeat = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
runs = {}
with open(path, encoding="utf-8") as f:
    for line in f:
        kind, rnd, user, sys_, wall = line.split()
        runs.setdefault(kind, {})[int(rnd)] = (float(user), float(sys_), float(wall))

def median(values):
    values = sorted(values)
    mid = len(values) // 2
    return values[mid] if len(values) % 2 else (values[mid - 1] + values[mid]) / 2

def cpu(kind, rnd):
    user, sys_, _ = runs[kind][rnd]
    return user + sys_

rounds = sorted(runs["fanout"])
print()
print(f"CPU = user + sys of the whole process; per child = CPU / {n}; floor = a harness batch of 1 delegation.")
print("The median row holds each column's median; its ratio is median fan-out / median batch.")
header = f"{'round':>7}  {'fan-out CPU/child':>17}  {'batch CPU/child':>15}  {'ratio':>6}  {'fan-out wall':>12}  {'batch wall':>10}  {'floor CPU':>9}"
print(header)
print("-" * len(header))
for rnd in rounds:
    f, b, fl = cpu("fanout", rnd), cpu("batch", rnd), cpu("floor", rnd)
    print(f"{rnd:>7}  {f / n * 1e6:>14.0f} µs  {b / n * 1e6:>12.0f} µs  {f / b:>5.2f}x"
          f"  {runs['fanout'][rnd][2] * 1e3:>9.1f} ms  {runs['batch'][rnd][2] * 1e3:>7.1f} ms  {fl * 1e3:>6.1f} ms")
mf = median([cpu("fanout", r) for r in rounds])
mb = median([cpu("batch", r) for r in rounds])
mfl = median([cpu("floor", r) for r in rounds])
wf = median([runs["fanout"][r][2] for r in rounds])
wb = median([runs["batch"][r][2] for r in rounds])
ratios = [cpu("fanout", r) / cpu("batch", r) for r in rounds]
print("-" * len(header))
print(f"{'median':>7}  {mf / n * 1e6:>14.0f} µs  {mb / n * 1e6:>12.0f} µs  {mf / mb:>5.2f}x"
      f"  {wf * 1e3:>9.1f} ms  {wb * 1e3:>7.1f} ms  {mfl * 1e3:>6.1f} ms")
print()
for kind, label in (("fanout", "fan-out"), ("batch", "batch"), ("floor", "floor")):
    users = median([runs[kind][r][0] for r in rounds])
    syss = median([runs[kind][r][1] for r in rounds])
    print(f"{label:>8}: median user {users * 1e3:.1f} ms, sys {syss * 1e3:.1f} ms, "
          f"CPU range {min(cpu(kind, r) for r in rounds) * 1e3:.1f} – {max(cpu(kind, r) for r in rounds) * 1e3:.1f} ms over {len(rounds)} rounds")
print(f"   ratio: per round {min(ratios):.2f}x – {max(ratios):.2f}x")
if mb > mfl:
    print(f"  beyond the floor (the process's fixed cost, about): fan-out {(mf - mfl) / n * 1e6:.0f} µs/child, "
          f"batch {(mb - mfl) / n * 1e6:.0f} µs/child, ratio {(mf - mfl) / (mb - mfl):.2f}x")
print()
print(f"fan-out CPU per child / batch CPU per child = {mf / mb:.2f} (goal <= 2)")
print("goal met" if mf / mb <= 2 else "goal MISSED")
PY
