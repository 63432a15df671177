#!/usr/bin/env bash
# Runs an example with its arguments (@TMP@ becomes the test's scratch
# directory); the example's own exit status decides.
set -euo pipefail
args=()
for a in "$@"; do args+=("${a//@TMP@/${TEST_TMPDIR:-/tmp}}"); done
"${args[@]}"
echo "1 passed, 0 failed"
