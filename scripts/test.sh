#!/usr/bin/env bash
# Sets up, builds everything and runs every test. This is the README's test
# command and what CI runs (.ci/run).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
bazel build //...
log=$(mktemp)
status=0
bazel test //... --test_output=errors 2>&1 | tee "$log" || status=$?
# Bazel's summary ("Executed N out of M tests: K tests pass ...") as the plain
# closing line CI readers understand.
passed=$(grep -cE '^//.*PASSED' "$log" || true)
failed=$(grep -cE '^//.*(FAILED|TIMEOUT|NO STATUS)' "$log" || true)
if [ "$status" -eq 0 ] && [ "$passed" -eq 0 ]; then
  # All results were cached: count the test targets instead.
  passed=$(bazel query 'tests(//...)' 2>/dev/null | wc -l)
fi
rm -f "$log"
echo "$passed passed, $failed failed"
exit "$status"
