#!/usr/bin/env bash
# The GPT train step in mixrt (examples/gpt), then the same model in
# PyTorch eager (benchmarks/pytorch_gpt.py), in the same run, with the same
# sizes; PyTorch from $PYTHON, else /root/torchvenv or Debian's python3:
#   bazel run -c opt //benchmarks:gpt_vs_pytorch -- --steps=6 --layers=6
set -euo pipefail
here=$(dirname "$0")
# The binary finds its plugins through this script's runfiles.
if [ -z "${RUNFILES_DIR:-}" ] && [ -d "$0.runfiles" ]; then
  export RUNFILES_DIR="$0.runfiles"
fi
gpt="$1"
shift
script="$here/pytorch_gpt.py"
[ -f "$script" ] || script="$0.runfiles/mixrt/benchmarks/pytorch_gpt.py"
steps=6
for arg in "$@"; do
  case "$arg" in --steps=*) steps=${arg#--steps=} ;; esac
done
log="${TMPDIR:-/tmp}/gpt_vs_pytorch.$$.log"
"$gpt" --steps="$steps" --eval_every="$steps" --plot= --sample_chars=0 \
  --checkpointing=both "$@" >"$log"
cat "$log"
vocab=$(grep -o 'vocabulary [0-9]*' "$log" | head -1 | awk '{print $2}')
rm -f "$log"
python=${PYTHON:-}
for candidate in /root/torchvenv/bin/python /usr/bin/python3; do
  if [ -z "$python" ] && "$candidate" -c "import torch" 2>/dev/null; then
    python=$candidate
  fi
done
if [ -n "$python" ]; then
  "$python" "$script" --vocab="$vocab" --steps="$steps" "$@"
else
  echo "PyTorch not installed (a virtualenv with pip install torch): no comparison"
fi
