#!/usr/bin/env bash
# Compiles the GPU kernels with the compilers' resource reports and fails if
# any function keeps data in per-thread local memory (CUDA stack frames and
# spills, AMD scratch). The first build had 300-1300 byte frames in almost
# every kernel: DeviceTensor's two stores called each other, so neither was
# inlined and each call forced the whole functor into local memory. The one
# allowed frame: the random kernel's double-precision sin/cos reduction.
set -euo pipefail
cd "${TEST_SRCDIR}/${TEST_WORKSPACE}"
out="${TEST_TMPDIR:-/tmp}"
status=0

/usr/local/cuda/bin/nvcc -std=c++17 -O3 --expt-relaxed-constexpr \
  -I. -Iinclude -gencode arch=compute_90,code=sm_90 -Xptxas -v \
  -c backends/cuda/cuda_kernels.cu -o "$out/cuda.o" 2> "$out/ptxas.txt"
# "Function properties for <kernel>" is followed by its frame and spills.
bad=$(awk '/Function properties for/ {name=$NF}
           /bytes stack frame/ {
             if (($1 != 0 && name !~ /RandomFunctor/) || $5 != 0 || $9 != 0)
               print name ": " $0
           }' "$out/ptxas.txt")
kernels=$(grep -c "Compiling entry function" "$out/ptxas.txt" || true)
if [ -n "$bad" ] || [ "$kernels" -lt 30 ]; then
  echo "CUDA kernels using local memory (of $kernels compiled):"
  echo "$bad"
  status=1
else
  echo "ok: $kernels CUDA kernels for sm_90, no local memory but the allowed one"
fi

hipcc -std=c++17 -O3 -x hip --offload-arch=gfx90a -I. -Iinclude \
  -Rpass-analysis=kernel-resource-usage -c backends/rocm/rocm_kernels.hip \
  -o "$out/rocm.o" 2> "$out/hip.txt"
scratch=$(grep -c "ScratchSize \[bytes/lane\]: [1-9]" "$out/hip.txt" || true)
hip_kernels=$(grep -c "ScratchSize" "$out/hip.txt" || true)
if [ "$scratch" -ne 0 ] || [ "$hip_kernels" -lt 30 ]; then
  echo "HIP kernels using scratch: $scratch of $hip_kernels"
  grep -B1 "ScratchSize \[bytes/lane\]: [1-9]" "$out/hip.txt" || true
  status=1
else
  echo "ok: $hip_kernels HIP kernels for gfx90a, no scratch"
fi
exit $status
