#!/usr/bin/env bash
# Regenerates bench/hot.order, the order the linker lays out the release binary's functions in
# (build.rs passes it to lld as `--symbol-ordering-file`): every function of the binary that the
# batch workload of bench/run.sh (with telemetry off and exported over OTLP) and the offline
# quickstart run, most instructions first, so the
# code a delegation runs lies together in a few megabytes instead of scattered over the binary's
# twenty. A process's resident memory is mostly the code pages it touches (the kernel maps them
# 64 KiB at a time), so this is what the batch's peak RSS is made of; see BENCHMARKS.md.
#
#   bench/order.sh [--no-build] [--check]
#
# --check: only says how many of the file's names the release binary has (nm), and how much of
# its code lies in the ordered block; `.ci/run` prints it after the release build. It never
# fails: a stale file costs memory, not correctness.
#
# Run it after a dependency or the toolchain changes (symbol names carry a hash of the crate
# and its dependencies, so the file goes stale then; code changes alone keep most names). The
# binary is correct whatever the file says: a name it does not hold is skipped.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=1
check=0
while [[ $# -gt 0 ]]; do
    case $1 in
        --no-build) build=0 ;;
        --check) check=1; build=0 ;;
        -h|--help) sed -n '2,18p' "$0"; exit 0 ;;
        *) echo "unknown argument: $1 (see --help)" >&2; exit 2 ;;
    esac
    shift
done
bin=${CARGO_TARGET_DIR:-$root/target}/release
if [[ $check == 1 ]]; then
    command -v nm >/dev/null || { echo "bench/hot.order: not checked (nm, from binutils, is not installed)"; exit 0; }
    nm --defined-only "$bin/harness" | python3 -c '
import sys
order = [line.strip() for line in open(sys.argv[1]) if line.strip()]
wanted = set(order)
text = [line.split() for line in sys.stdin if len(line.split()) == 3 and line.split()[1] in "tTwW"]
found = sorted(int(a, 16) for a, _, name in text if name in wanted)
span = (found[-1] - found[0]) / 2**20 if found else 0
share = len(found) / len(order) if order else 0
print(f"bench/hot.order: {len(found)} of {len(order)} functions found in {sys.argv[2]} ({share:.0%}), laid out within {span:.1f} MiB")
if share < 0.75:
    print("bench/hot.order is stale (a dependency or the toolchain changed): run bench/order.sh and commit it", file=sys.stderr)
' "$root/bench/hot.order" "$bin/harness"
    exit 0
fi
command -v valgrind >/dev/null || { echo "valgrind is not installed (apt-get install valgrind)" >&2; exit 1; }

cd "$root"
# What users run: no backtrace asked for (with one, every error value built walks the stack).
unset RUST_BACKTRACE RUST_LIB_BACKTRACE
if [[ $build == 1 ]]; then
    cargo build --release -p harness-cli -p harness-bench
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/harness-order.XXXXXX")
server_pid=
cleanup() { if [[ -n $server_pid ]]; then kill "$server_pid" 2>/dev/null || true; fi; }
trap cleanup EXIT

# shellcheck source=bench/fake-server.sh
. "$root/bench/fake-server.sh"
start_fake_openai "$bin" "$work"
mkdir -p "$work/workspace"
python3 -c "
import sys; sys.path.insert(0, '$root/bench')
import driver
driver.write_batch('$work/batch.jsonl', 200, '$url', '$root/bench/hooks', '$work/workspace')
"
grind() {
    local out=$1
    shift
    valgrind --tool=callgrind --callgrind-out-file="$out" --dump-instr=no --demangle=no \
        --compress-strings=no "$@" >/dev/null 2>"$out.err" \
        || { echo "failed under valgrind: $*" >&2; tail -20 "$out.err" >&2; exit 1; }
}
grind "$work/batch.cg" "$bin/harness" batch "$work/batch.jsonl" --concurrency 32 --json \
    --journal "$work/runs.db"
# The same exporting its telemetry over OTLP (to the fake server's sink).
grind "$work/otlp.cg" "$bin/harness" batch "$work/batch.jsonl" --concurrency 32 --json \
    --journal "$work/runs-otlp.db" --otlp-endpoint "$url"
# The offline example: what it runs counts, whatever its exit code says.
valgrind --tool=callgrind --callgrind-out-file="$work/run.cg" --dump-instr=no --demangle=no \
    --compress-strings=no "$bin/harness" run --no-journal examples/quickstart/delegation.yaml \
    >/dev/null 2>"$work/run.cg.err" || true
[[ -s $work/run.cg ]] || { echo "the quickstart run left no profile:" >&2; tail -20 "$work/run.cg.err" >&2; exit 1; }

python3 - "$bin/harness" "$root/bench/hot.order" "$work/batch.cg" "$work/otlp.cg" "$work/run.cg" <<'EOF'
import collections, os, sys

binary, order, *outs = sys.argv[1:]
binary = os.path.realpath(binary)
cost = collections.Counter()
for path in outs:
    ob = fn = None
    after_call = False
    for line in open(path, encoding="utf-8", errors="replace"):
        line = line.rstrip("\n")
        if line.startswith("ob="):
            ob = os.path.realpath(line[3:]) if line[3:].startswith("/") else line[3:]
        elif line.startswith("fn="):
            fn = line[3:] if ob == binary else None
            if fn:
                cost[fn] += 0
        elif line.startswith("calls="):
            after_call = True
        elif fn and line[:1].isdigit():
            # The line after `calls=` is the callee's inclusive cost, not this function's.
            if after_call:
                after_call = False
                continue
            parts = line.split()
            if len(parts) >= 2 and parts[1].isdigit():
                cost[fn] += int(parts[1])
if not cost:
    sys.exit(f"no function of {binary} in the profiles")
with open(order, "w", encoding="utf-8") as f:
    for name, _ in sorted(cost.items(), key=lambda kv: (-kv[1], kv[0])):
        f.write(name + "\n")
print(f"{len(cost)} functions written to {order}")
EOF
