#!/usr/bin/env bash
# Inference compiled and eager, mixrt (compile_benchmark's inference cases)
# then PyTorch (benchmarks/pytorch_compile.py: eager, torch.compile default
# and max-autotune), in the same run with the same sizes; PyTorch from
# $PYTHON, else /root/torchvenv or Debian's python3:
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
"$bench" --cases=infer --steps="$((steps * 20))" --modes=eager,default,reduce-overhead,max-autotune
run_pytorch_peer pytorch_compile.py --steps="$steps"
