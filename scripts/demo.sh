#!/usr/bin/env bash
# Sets up, builds and runs the main demo: the backends this machine can load
# (`mixrt info`), then the AMP training recipe on the best one: default
# precision vs autocast vs autocast + GradScaler, with time per step and
# peak tensor memory.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
bazel build //tools:mixrt //examples:amp_recipe
# The CPU plugin's oneDNN 3.x companion, where setup could install 3.x
# (mixrt info says whether this CPU uses it, and why).
if [ -f third_party/onednn3/lib/libdnnl.so.3 ]; then
  bazel build //backends/cpu:libmixrt_cpu_onednn3.so
fi
bazel-bin/tools/mixrt info
bazel-bin/examples/amp_recipe "$@"
