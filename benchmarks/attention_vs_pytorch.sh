#!/usr/bin/env bash
# Fused attention in mixrt, then in PyTorch, in the same run with the same
# sizes (PyTorch from $PYTHON, else /root/torchvenv or Debian's python3):
#   bazel run //benchmarks:attention_vs_pytorch -- --seqs=512,1024
set -euo pipefail
# shellcheck source=benchmarks/peer.sh
source "$(dirname "$0")/peer.sh" 2>/dev/null || source "$0.runfiles/mixrt/benchmarks/peer.sh"
bench="$1"
shift
"$bench" "$@"
run_pytorch_peer pytorch_attention.py "$@"
