#!/usr/bin/env bash
# Fused attention in mixrt, then in PyTorch, in the same run with the same
# sizes (PyTorch from $PYTHON, else /root/torchvenv or Debian's python3):
#   bazel run //benchmarks:attention_vs_pytorch -- --seqs=512,1024
set -euo pipefail
here=$(dirname "$0")
# The binary finds its plugins through this script's runfiles.
if [ -z "${RUNFILES_DIR:-}" ] && [ -d "$0.runfiles" ]; then
  export RUNFILES_DIR="$0.runfiles"
fi
bench="$1"
shift
script="$here/pytorch_attention.py"
[ -f "$script" ] || script="$0.runfiles/mixrt/benchmarks/pytorch_attention.py"
"$bench" "$@"
python=${PYTHON:-}
for candidate in /root/torchvenv/bin/python /usr/bin/python3; do
  if [ -z "$python" ] && "$candidate" -c "import torch" 2>/dev/null; then
    python=$candidate
  fi
done
if [ -n "$python" ]; then
  "$python" "$script" "$@"
else
  echo "PyTorch not installed (a virtualenv with pip install torch): no comparison"
fi
