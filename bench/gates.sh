#!/usr/bin/env bash
# The evidence-gate benchmarks of issue 15, in one command:
#
#   bench/gates.sh
#
# - scope: snapshot + diff of a generated git repository of 100,000 files / 1 GiB against
#   `git status --porcelain` on the same tree, timed side by side, and the bytes a snapshot holds
#   per entry (harness/benches/scope.rs; BENCH_SCOPE_FILES, BENCH_SCOPE_MB, BENCH_SCOPE_REPEAT,
#   BENCH_SCOPE_DIR to keep the tree);
# - checks: what a check costs over a bare `sh -c true` spawn, measured interleaved
#   (harness/benches/checks.rs; BENCH_CHECKS_N, BENCH_CHECKS_K, BENCH_CHECKS_R);
# - gaming: what the gaming stage adds to a delegation, and the test runner's own report to a
#   pytest check, with the base collection's time (harness/benches/gaming.rs; BENCH_GAMING_R;
#   BENCH_PYTHON_BIN: a directory with a python3 that has pytest, put first on PATH).
#
# Needs git and about 1.2 GiB free under $TMPDIR. Speed is measured, never asserted.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
if [[ ${1:-} == -h || ${1:-} == --help ]]; then sed -n '2,16p' "$0"; exit 0; fi
cargo bench -p harness --bench scope
cargo bench -p harness --bench checks
PATH="${BENCH_PYTHON_BIN:+$BENCH_PYTHON_BIN:}$PATH" cargo bench -p harness --bench gaming
