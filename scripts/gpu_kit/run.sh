#!/usr/bin/env bash
# The GPU proof kit's runner (built by scripts/gpu_kit.sh). On a machine with
# an NVIDIA GPU, the driver and CUDA:
#
#   ./run.sh [OUT]      # OUT defaults to $OUT, else ./results
#
# runs, each under a time limit so the whole stays under 8 minutes:
#   mixrt info; the conformance suite on the cuda plugin; the GPU GEMM
#   benchmark in f32, TF32 (MIXRT_FLOAT32_MATMUL_PRECISION=high), f16 and
#   bf16, and the same GEMMs on PyTorch when the machine has it (the ratio
#   column); the AMP recipe on cuda (f32, f16 autocast + GradScaler, bf16,
#   and bf16 compiled with reduce-overhead: CUDA graphs);
#   digits on cuda; mixrt bench --quick on cuda and cpu.
# and writes OUT/summary.json and OUT/summary.md (with the rows for the
# proof table in plugins/README.md), plus every step's log.
#
#   ./run.sh --check    # here or there: the bundle loads; prints the cuda
#                       # plugin's state ("no device" without a GPU)
set -uo pipefail
kit=$(cd "$(dirname "$0")" && pwd)

source "$kit/kit_runtime.sh"
home=$(kit_private_copy "$kit" mixrt-gpu-kit)
bin="$home/bin"
export LD_LIBRARY_PATH="$home/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
plugins="--plugin=$bin/libmixrt_cuda.so,$bin/libmixrt_cpu.so,$bin/libmixrt_reference.so"

if [ "${1:-}" = "--check" ]; then
  info=$("$bin/mixrt" info "$plugins" 2>&1)
  line=$(grep "^cuda \[" <<<"$info")
  echo "gpu_kit: $line"
  grep -A1 "^cuda \[" <<<"$info" | grep "reason:" || true
  case "$line" in
    "cuda [usable]"* | "cuda [no device]"*) exit 0 ;;
    *) echo "$info"; exit 1 ;;
  esac
fi

out="${1:-${OUT:-$PWD/results}}"
mkdir -p "$out"
export MIXRT_CACHE_DIR="$out/cache"
kit_steps_begin "$out" gpu_kit


kit_step info 20 sh -c "'$bin/mixrt' info --json '$plugins' > '$out/info.json'"
kit_step conformance 150 "$bin/conformance" --gtest_brief=1 --plugin="$bin/libmixrt_cuda.so" \
  --reference="$bin/libmixrt_reference.so"
kit_step gemm 60 "$bin/gpu_gemm_benchmark" --benchmark_min_time=0.2 \
  --benchmark_out="$out/gemm.json" --benchmark_out_format=json
kit_step gemm_tf32 30 env MIXRT_FLOAT32_MATMUL_PRECISION=high "$bin/gpu_gemm_benchmark" \
  --benchmark_min_time=0.2 --benchmark_filter=/f32 \
  --benchmark_out="$out/gemm_tf32.json" --benchmark_out_format=json
# The same GEMMs on PyTorch where the machine has it: a peer in the same run.
kit_step gemm_pytorch 60 python3 "$kit/pytorch_gemm_peer.py" "$out/gemm_pytorch.json"
kit_step recipe_f16 45 "$bin/amp_recipe" --backend=cuda --dtype=f16
kit_step recipe_bf16 45 "$bin/amp_recipe" --backend=cuda --dtype=bf16
# Compiled with reduce-overhead: kernel graphs replayed as CUDA graphs; its
# losses must match recipe_bf16's.
kit_step recipe_compiled 60 "$bin/amp_recipe" --backend=cuda --dtype=bf16 \
  --compile=reduce-overhead
kit_step digits 60 "$bin/digits" --backend=cuda --data="$bin/digits.csv.gz" --seeds=5 --check
kit_step bench 60 "$bin/mixrt" bench --quick --backend=cuda,cpu --json="$out/bench.json" --md

python3 "$kit/summarize.py" "$out"
