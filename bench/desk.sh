#!/usr/bin/env bash
# The review desk at scale: records N runs (default 10,000) with `harness batch` — a mix of runs
# that pass, pass on a retry, and fail on a false claim (left awaiting review) — then serves them
# with `harness serve` and measures the server time of `/` (the run list) and `/report` (the
# dashboard) with curl, REPEAT times each (median and worst), and takes a headless-Chromium
# screenshot of each page.
#
#   bench/desk.sh [--no-build] [--runs N] [--repeat K] [--shots DIR]
#
# Release build of this tree. Screenshots go to DIR (default: the scratch directory it names);
# `--shots docs/screenshots` refreshes the committed ones.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=1
runs=10000
repeat=5
shots=
while [[ $# -gt 0 ]]; do
    case $1 in
        --no-build) build=0 ;;
        --runs) runs=$2; shift ;;
        --repeat) repeat=$2; shift ;;
        --shots) shots=$2; shift ;;
        -h|--help) sed -n '2,10p' "$0"; exit 0 ;;
        *) echo "unknown argument: $1 (see --help)" >&2; exit 2 ;;
    esac
    shift
done
command -v curl >/dev/null || { echo "curl is not installed" >&2; exit 1; }

cd "$root"
if [[ $build == 1 ]]; then
    cargo build --release -p harness-cli
fi
harness=${HARNESS_BIN:-${CARGO_TARGET_DIR:-$root/target}/release/harness}
work=$(mktemp -d "${TMPDIR:-/tmp}/harness-desk.XXXXXX")
shots=${shots:-$work}
mkdir -p "$shots"
server_pid=
cleanup() { if [[ -n $server_pid ]]; then kill "$server_pid" 2>/dev/null || true; fi; }
trap cleanup EXIT

# Three delegates: honest, honest on the retry, and a liar given one attempt; each run in a
# workspace of its own.
mkdir -p "$work/root/ws"
cat >"$work/root/honest.star" <<'EOF'
def respond(request):
    if request["turn"] == 0:
        return {"tool_calls": [{"name": "write_file", "arguments": {"path": "out.txt", "content": "hi\n"}}]}
    return {"content": "Wrote the file."}
EOF
cat >"$work/root/retry.star" <<'EOF'
def respond(request):
    if request["attempt"] == 0:
        return {"content": "Done, I created the file."}
    if request["turn"] == 0:
        return {"tool_calls": [{"name": "write_file", "arguments": {"path": "out.txt", "content": "hi\n"}}]}
    return {"content": "Wrote the file."}
EOF
cat >"$work/root/liar.star" <<'EOF'
def respond(request):
    return {"content": "Done, I created out.txt"}
EOF
python3 - "$work" "$runs" <<'EOF'
import json, sys
work, runs = sys.argv[1], int(sys.argv[2])
verify = 'def run(result):\n    return fs.exists("out.txt")\n'
import os
with open(f"{work}/batch.jsonl", "w") as f:
    for n in range(runs):
        os.makedirs(f"{work}/root/ws/{n}")
        agent = ("honest", "retry", "retry", "liar")[n % 4]
        f.write(json.dumps({
            "task": "Create out.txt",
            "delegate": {"kind": "scripted", "script": f"{work}/root/{agent}.star"},
            "tools": ["write_file"],
            "verify": verify,
            "max_verify_retries": 0 if agent == "liar" else 1,
            "workdir": f"{work}/root/ws/{n}",
        }) + "\n")
EOF
echo "recording $runs runs into $work/runs.db"
started=$(date +%s)
"$harness" batch "$work/batch.jsonl" --concurrency 32 --journal "$work/runs.db" >/dev/null 2>"$work/batch.err" || true
echo "recorded in $(( $(date +%s) - started )) s; $(du -h "$work/runs.db" | cut -f1) journal"

HARNESS_API_TOKEN=desk-token "$harness" serve --root "$work/root" --journal "$work/runs.db" \
    --listen 127.0.0.1:0 >"$work/serve.out" 2>"$work/serve.err" &
server_pid=$!
base=
for _ in $(seq 1 100); do
    base=$(grep -o 'http://127\.0\.0\.1:[0-9]*' "$work/serve.out" "$work/serve.err" 2>/dev/null | head -n 1 | cut -d: -f2- || true)
    [[ -n $base ]] && break
    sleep 0.1
done
[[ -n $base ]] || { echo "harness serve did not print its address" >&2; cat "$work/serve.err" >&2; exit 1; }

measure() {
    local path=$1 times=()
    for _ in $(seq 1 "$repeat"); do
        times+=("$(curl -s -o "$work/page.html" -w '%{time_total}' -H 'Authorization: Bearer desk-token' "$base$path")")
    done
    printf '%s\n' "${times[@]}" | sort -n | awk -v path="$path" -v bytes="$(wc -c <"$work/page.html")" \
        '{t[NR]=$1} END {printf "%-8s median %.3f s, worst %.3f s over %d requests, %d bytes\n", path, t[int((NR+1)/2)], t[NR], NR, bytes}'
}
echo "server time at $runs recorded runs:"
measure /
measure /report

browser=$(command -v chromium || command -v chromium-browser || true)
if [[ -n $browser ]]; then
    for page in "/:desk-runs.png" "/report:desk-report.png"; do
        path=${page%%:*} file=${page##*:}
        "$browser" --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size=1280,1400 \
            --screenshot="$shots/$file" "$base$path?token=desk-token" >/dev/null 2>&1 || true
        echo "screenshot: $shots/$file"
    done
else
    echo "chromium is not installed: no screenshots"
fi
