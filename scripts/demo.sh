#!/usr/bin/env bash
# Sets up, builds and runs the main demo: the backends this machine can load
# (`mixrt info`), then the AMP training recipe on the best one: default
# precision vs autocast vs autocast + GradScaler, with time per step and
# peak tensor memory.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
bazel build //tools:mixrt //examples:amp_recipe
bazel-bin/tools/mixrt info
bazel-bin/examples/amp_recipe "$@"
