#!/bin/sh
# Runs the three gate-integrity examples on a scratch copy (the first one rewrites a file of its
# workspace, which is the point of it), and prints each outcome:
#
#   sh examples/integrity/run.sh            # with `harness` on PATH, or:
#   HARNESS="cargo run --release --" sh examples/integrity/run.sh
set -u
here=$(cd "$(dirname "$0")" && pwd)
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
cp -R "$here/." "$scratch/"
harness=${HARNESS:-harness}
for example in weakened-test unwritten-claim flaky-check; do
  echo "== $example"
  $harness run --no-journal "$scratch/$example/delegation.yaml"
  echo "   (exit $?)"
done
