#!/usr/bin/env bash
# Compiled and eager, mixrt (compile_benchmark's inference cases, then its
# bf16 + GradScaler train steps) then PyTorch (benchmarks/pytorch_compile.py:
# eager, torch.compile default and max-autotune), in the same run with the
# same sizes; PyTorch from $PYTHON, else /root/torchvenv or Debian's python3:
#   bazel run -c opt //benchmarks:compile_vs_pytorch -- --steps=200
set -euo pipefail
# shellcheck source=benchmarks/peer.sh
source "$(dirname "$0")/peer.sh" 2>/dev/null || source "$0.runfiles/mixrt/benchmarks/peer.sh"
bench="$1"
shift
steps=200
for arg in "$@"; do
  case "$arg" in --steps=*) steps=${arg#--steps=} ;; esac
done
modes=eager,default,reduce-overhead,max-autotune
"$bench" --cases=infer --steps="$((steps * 20))" --modes="$modes"
"$bench" --cases="bf16+scaler" --steps="$((steps * 20))" --modes="$modes"
run_pytorch_peer pytorch_compile.py --steps="$steps"
run_pytorch_peer pytorch_compile.py --steps="$steps" --train
