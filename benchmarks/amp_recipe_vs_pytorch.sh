#!/usr/bin/env bash
# The AMP recipe in mixrt and in PyTorch (Debian's python3-torch), one after
# the other in the same run, with the same sizes: bazel run
# //benchmarks:amp_recipe_vs_pytorch -- [--batch=N --width=N ...]
set -euo pipefail
amp_recipe="$1"
shift
"$amp_recipe" "$@"
if /usr/bin/python3 -c "import torch" 2>/dev/null; then
  /usr/bin/python3 "$(dirname "$0")/pytorch_amp_recipe.py" "$@"
else
  echo "PyTorch not installed (apt-get install python3-torch) - no comparison"
fi
