#!/usr/bin/env bash
# Runs an example with its arguments; the example's own exit status decides.
set -euo pipefail
"$@"
echo "1 passed, 0 failed"
