#!/usr/bin/env bash
# The AMP recipe in mixrt (examples/amp_recipe), then in PyTorch
# (benchmarks/pytorch_amp_recipe.py), in the same run, with the same sizes;
# PyTorch from $PYTHON, else /root/torchvenv or Debian's python3:
#   bazel run -c opt //benchmarks:amp_recipe_vs_pytorch -- [--batch=N --width=N ...]
set -euo pipefail
# shellcheck source=benchmarks/peer.sh
source "$(dirname "$0")/peer.sh" 2>/dev/null || source "$0.runfiles/mixrt/benchmarks/peer.sh"
amp_recipe="$1"
shift
"$amp_recipe" "$@"
run_pytorch_peer pytorch_amp_recipe.py "$@"
