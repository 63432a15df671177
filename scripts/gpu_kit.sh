#!/usr/bin/env bash
# The GPU proof kit: builds here and assembles one folder (at most 64 MiB)
# that proves the CUDA plugin on a machine that has a GPU, the NVIDIA driver
# and CUDA, and nothing else of ours (no Bazel, no registries):
#
#   scripts/gpu_kit.sh [DIR]        # default: gpu_kit/ (ignored by git), and
#                                   # DIR's parent/gpu_kit_pack/gpu_kit.tar.gz
#   # copy DIR (or the tarball) to the GPU machine, then there:
#   DIR/run.sh [OUT]                # -> OUT/summary.json, OUT/summary.md
#
# DIR holds bin/ (the mixrt CLI with mixrt bench, the CUDA, CPU and
# reference plugins, the conformance suite, the GPU GEMM benchmark, the AMP
# recipe and digits examples, the digits data) and lib/ (every shared
# library they load that is not glibc, the NVIDIA driver or the CUDA
# toolkit: Abseil, oneDNN, OpenMP, GoogleTest, libstdc++, ...), found with
# ldd. Last, it checks the bundle the way the GPU machine will see it: in a
# scrubbed environment every library resolves from lib/ or from glibc and
# CUDA, and run.sh --check reports the CUDA plugin's "no device" here.
set -euo pipefail
cd "$(dirname "$0")/.."
kit=${1:-gpu_kit}
case "$kit" in /*) ;; *) kit="$PWD/$kit" ;; esac
limit_mib=64

targets=(//tools:mixrt //tools/bench:mixrt_bench //backends/cuda:libmixrt_cuda.so
  //backends/cpu:libmixrt_cpu.so //plugins/reference:libmixrt_reference.so
  //plugins/conformance:conformance //benchmarks:gpu_gemm_benchmark
  //examples:amp_recipe //examples:digits)
bazel build "${targets[@]}"

rm -rf "$kit"
mkdir -p "$kit/bin" "$kit/lib"
for f in tools/mixrt tools/bench/mixrt_bench backends/cuda/libmixrt_cuda.so \
  backends/cpu/libmixrt_cpu.so plugins/reference/libmixrt_reference.so \
  plugins/conformance/conformance benchmarks/gpu_gemm_benchmark \
  examples/amp_recipe examples/digits; do
  install -m 755 "bazel-bin/$f" "$kit/bin/"
done
install -m 644 tools/bench/pytorch_peer.py tools/bench/plot_bench.py "$kit/bin/"
digits=/usr/lib/python3/dist-packages/sklearn/datasets/data/digits.csv.gz
[ -f "$digits" ] && install -m 644 "$digits" "$kit/bin/"
install -m 755 scripts/gpu_kit/run.sh "$kit/run.sh"
install -m 644 scripts/kit_runtime.sh "$kit/kit_runtime.sh"
install -m 644 scripts/gpu_kit/summarize.py "$kit/summarize.py"
install -m 644 scripts/gpu_kit/pytorch_gemm_peer.py "$kit/pytorch_gemm_peer.py"

source scripts/kit_libs.sh
kit_bundle_libs "$kit/lib" "$kit"/bin/*

size_mib=$(du -sm "$kit" | cut -f1)
echo "gpu_kit: $kit: ${size_mib} MiB ($(ls "$kit/lib" | wc -l) libraries in lib/)"
if [ "$size_mib" -gt "$limit_mib" ]; then
  echo "gpu_kit: larger than the ${limit_mib} MiB a device run can carry" >&2
  exit 1
fi

# The bundle as the GPU machine sees it: a scrubbed environment, libraries
# from lib/ or from what that machine has.
kit_check_scrubbed "$kit/lib" "$kit"/bin/*
env -i PATH=/usr/bin:/bin HOME="${HOME:-/root}" "$kit/run.sh" --check

kit_pack "$kit"
