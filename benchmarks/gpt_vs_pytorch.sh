#!/usr/bin/env bash
# The GPT train step in mixrt (examples/gpt), then the same model in
# PyTorch eager (benchmarks/pytorch_gpt.py), in the same run, with the same
# sizes; PyTorch from $PYTHON, else /root/torchvenv or Debian's python3:
#   bazel run -c opt //benchmarks:gpt_vs_pytorch -- --steps=6 --layers=6
set -euo pipefail
# shellcheck source=benchmarks/peer.sh
source "$(dirname "$0")/peer.sh" 2>/dev/null || source "$0.runfiles/mixrt/benchmarks/peer.sh"
gpt="$1"
shift
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
run_pytorch_peer pytorch_gpt.py --vocab="$vocab" --steps="$steps" "$@"
