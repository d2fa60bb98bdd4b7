#!/usr/bin/env bash
# Where the batch benchmark's CPU goes, in instructions: the workload of bench/run.sh (2,000
# two-attempt openai delegations, an inline verifier, one post_verify hook, the journal on,
# telemetry off) under `valgrind --tool=callgrind`, once per binary given. Instructions do not
# move with the machine's load, so two builds compare exactly; seconds are in bench/run.sh.
#
#   bench/profile.sh [--no-build] [--top N] [--check BASELINE] [BINARY...]
#
# Without BINARY, the release build of this tree. Prints instructions per delegation and the
# functions with the most inclusive instructions; leaves callgrind.out files in the scratch
# directory it names for `callgrind_annotate` or kcachegrind.
#
# --check BASELINE: the guard `.ci/run` runs. Reads `delegations=N` and
# `instructions_per_delegation=M` from BASELINE (bench/profile.baseline), runs that workload on
# the first binary, prints both figures and fails (exit 1) when this build runs more than 10 %
# more instructions per delegation. Raising the baseline is a commit of its own that says why.
#
# BENCH_DELEGATIONS / BENCH_CONCURRENCY change the workload (default 2000 / 32).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=1
top=40
check=
binaries=()
while [[ $# -gt 0 ]]; do
    case $1 in
        --no-build) build=0 ;;
        --top) top=$2; shift ;;
        --check) check=$2; shift ;;
        -h|--help) sed -n '2,19p' "$0"; exit 0 ;;
        -*) echo "unknown argument: $1 (see --help)" >&2; exit 2 ;;
        *) binaries+=("$1") ;;
    esac
    shift
done
command -v valgrind >/dev/null || { echo "valgrind is not installed (apt-get install valgrind)" >&2; exit 1; }

cd "$root"
# What users run: no backtrace asked for (with one, every error value built walks the stack).
unset RUST_BACKTRACE RUST_LIB_BACKTRACE
if [[ $build == 1 ]]; then
    cargo build --release -p harness-cli -p harness-bench
fi
bin=${CARGO_TARGET_DIR:-$root/target}/release
[[ ${#binaries[@]} -gt 0 ]] || binaries=("$bin/harness")

work=$(mktemp -d "${TMPDIR:-/tmp}/harness-profile.XXXXXX")
server_pid=
cleanup() { if [[ -n $server_pid ]]; then kill "$server_pid" 2>/dev/null || true; fi; }
trap cleanup EXIT

# shellcheck source=bench/fake-server.sh
. "$root/bench/fake-server.sh"
start_fake_openai "$bin" "$work"

n=${BENCH_DELEGATIONS:-2000}
if [[ -n $check ]]; then
    [[ -r $check ]] || { echo "--check: cannot read the baseline $check" >&2; exit 2; }
    n=$(sed -n 's/^delegations=\([0-9]*\)$/\1/p' "$check")
    baseline=$(sed -n 's/^instructions_per_delegation=\([0-9]*\)$/\1/p' "$check")
    [[ -n $n && -n $baseline ]] || { echo "--check: $check needs delegations=N and instructions_per_delegation=M lines" >&2; exit 2; }
    binaries=("${binaries[0]}")
    top=0
fi
mkdir -p "$work/workspace"
python3 -c "
import sys; sys.path.insert(0, '$root/bench')
import driver
driver.write_batch('$work/batch.jsonl', $n, '$url', '$root/bench/hooks', '$work/workspace')
"

echo "workload: $n delegations, concurrency ${BENCH_CONCURRENCY:-32}, journal on, telemetry off; scratch $work"
index=0
for harness in "${binaries[@]}"; do
    index=$((index + 1))
    out="$work/callgrind.out.$index"
    valgrind --tool=callgrind --callgrind-out-file="$out" --dump-instr=no \
        "$harness" batch "$work/batch.jsonl" --concurrency "${BENCH_CONCURRENCY:-32}" --json \
        --journal "$work/runs-$index.db" >/dev/null 2>"$work/valgrind-$index.err" \
        || { echo "$harness failed under valgrind:" >&2; tail -20 "$work/valgrind-$index.err" >&2; exit 1; }
    total=$(callgrind_annotate "$out" 2>/dev/null | awk '/PROGRAM TOTALS/ && !seen { gsub(",", "", $1); print $1; seen = 1 }')
    echo
    echo "== $harness"
    echo "instructions: $total in all, $((total / n)) per delegation"
    if [[ -n $check ]]; then
        per=$((total / n))
        limit=$((baseline + baseline / 10))
        echo "baseline ($check): $baseline per delegation; this build: $per ($(( (per - baseline) * 1000 / baseline )) per mille); the limit is $limit (+10 %)"
        if (( per > limit )); then
            echo "this build runs more than 10 % more instructions per delegation than the baseline: find what costs them (bench/profile.sh --top 40), or raise the baseline in a commit that says why" >&2
            exit 1
        fi
        exit 0
    fi
    callgrind_annotate --inclusive=yes "$out" 2>/dev/null \
        | awk -v top="$top" '/file:function/ { found = 1; next } found && /^[ 0-9]/ && shown < top { print; shown++ }'
done
