#!/usr/bin/env bash
# Sets up, builds and runs the main demo: `mixrt info` on every backend this
# machine can load, then the backend-selection example on the best one.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
bazel build //tools:mixrt //examples:select_backend
bazel-bin/tools/mixrt info
bazel-bin/examples/select_backend
