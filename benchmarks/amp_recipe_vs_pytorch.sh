#!/usr/bin/env bash
# The AMP recipe in mixrt and in PyTorch (Debian's python3-torch), one after
# the other in the same run, with the same sizes:
#   bazel run //benchmarks:amp_recipe_vs_pytorch -- [--batch=N --width=N ...]
set -euo pipefail
here=$(dirname "$0")
if [ $# -gt 0 ] && [ -x "$1" ]; then
  amp_recipe="$1"
  shift
else
  amp_recipe="$here/../examples/amp_recipe"
fi
script="$here/pytorch_amp_recipe.py"
[ -f "$script" ] || script="$0.runfiles/mixrt/benchmarks/pytorch_amp_recipe.py"
"$amp_recipe" "$@"
if /usr/bin/python3 -c "import torch" 2>/dev/null; then
  /usr/bin/python3 "$script" "$@"
else
  echo "PyTorch not installed (apt-get install python3-torch): no comparison"
fi
