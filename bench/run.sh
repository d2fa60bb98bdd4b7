#!/usr/bin/env bash
# The batch benchmark of issue 6, in one command:
#
#   bench/run.sh [--large] [--breakdown] [--micro] [--no-build] [--repeat N]
#
# Builds release binaries, starts the fake OpenAI server on 127.0.0.1, runs 2,000 two-attempt
# delegations (openai delegate, inline Starlark verifier, one delegation.post_verify hook) through
# `harness batch --concurrency 32 --json` once with telemetry off and once exporting OTLP to the
# fake server's sink, then the bare-reqwest floor, and prints delegations/s, client CPU µs per
# delegation (user+sys of the measured process), peak RSS and the server's request counts.
#
#   --large     also 10,000 delegations at concurrency 1,000 (peak RSS)   [BENCH_LARGE=1]
#   --breakdown also the workload without the journal, the hook, the verifier (telemetry off),
#               interleaved with the full runs: where the CPU goes       [BENCH_BREAKDOWN=1]
#   --micro     also the micro-benchmarks (cargo bench: verify, hooks)     [BENCH_MICRO=1]
#   --no-build  use the existing target/release binaries
#   --repeat N  runs of each workload; the median is reported (default 3)  [BENCH_REPEAT]
#
# BENCH_DELEGATIONS / BENCH_CONCURRENCY change the main workload (default 2000 / 32).
# Speed is measured, never asserted: the script fails only when counts or outcomes are wrong.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
large=${BENCH_LARGE:-0}
breakdown=${BENCH_BREAKDOWN:-0}
micro=${BENCH_MICRO:-0}
build=1
repeat=${BENCH_REPEAT:-3}
while [[ $# -gt 0 ]]; do
    case $1 in
        --large) large=1 ;;
        --breakdown) breakdown=1 ;;
        --micro) micro=1 ;;
        --no-build) build=0 ;;
        --repeat) repeat=$2; shift ;;
        -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
        *) echo "unknown argument: $1 (see --help)" >&2; exit 2 ;;
    esac
    shift
done

cd "$root"
if [[ $build == 1 ]]; then
    cargo build --release -p harness-cli -p harness-bench
fi
bin=${CARGO_TARGET_DIR:-$root/target}/release
for b in harness fake-openai bare-reqwest; do
    [[ -x $bin/$b ]] || { echo "missing $bin/$b (run without --no-build)" >&2; exit 1; }
done

# Concurrency 1,000 needs a thousand sockets on each side.
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

work=$(mktemp -d "${TMPDIR:-/tmp}/harness-bench.XXXXXX")
server_pid=
cleanup() {
    if [[ -n $server_pid ]]; then kill "$server_pid" 2>/dev/null || true; fi
    rm -rf "$work"
}
trap cleanup EXIT

# shellcheck source=bench/fake-server.sh
. "$root/bench/fake-server.sh"
start_fake_openai "$bin" "$work"

journal_flag=()
if "$bin/harness" batch --help | grep -q -- '--journal'; then
    journal_flag=(--journal)
    journal_state="on (--journal, one file per run)"
else
    journal_state="off: harness batch has no --journal flag yet"
fi

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), $(awk '/MemTotal/ {printf "%.1f GiB", $2/1048576}' /proc/meminfo)"
echo "harness: $("$bin/harness" --version); fake server at $url; journal $journal_state"
extra=()
[[ $large == 1 ]] && extra+=(--large)
[[ $breakdown == 1 ]] && extra+=(--breakdown)
python3 "$root/bench/driver.py" --url "$url" --harness "$bin/harness" --bare "$bin/bare-reqwest" \
    --hooks "$root/bench/hooks" --work "$work" \
    --delegations "${BENCH_DELEGATIONS:-2000}" --concurrency "${BENCH_CONCURRENCY:-32}" \
    --repeat "$repeat" ${journal_flag[@]+"${journal_flag[@]}"} ${extra[@]+"${extra[@]}"} \
    ${BENCH_RESULTS:+--results "$BENCH_RESULTS"}

if [[ $micro == 1 ]]; then
    echo
    cargo bench -p harness --bench verify --bench hooks
fi
