#!/usr/bin/env bash
# Data-parallel figures on this machine, in one run (not a test):
#   bazel build -c opt //benchmarks:ddp_benchmark //benchmarks:mpi_allreduce_baseline
#   benchmarks/ddp_benchmark.sh [--amp]
# 1. the recipe MLP train step: 1 rank x 2 threads vs 2 ranks x 1 thread;
# 2. all-reduce bandwidth: mixrt's ProcessGroup vs MPI_Allreduce itself.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=bazel-bin/benchmarks
mpi=(mpirun --oversubscribe --allow-run-as-root)
echo "== train step, recipe MLP (3 x Linear 4096; global batch: --global_batch, default 512)"
one=$("${mpi[@]}" -np 1 --bind-to none -x MIXRT_NUM_THREADS=2 \
  "$bin/ddp_benchmark" --mode=train "$@" | tee -a /dev/stderr)
two=$("${mpi[@]}" -np 2 --bind-to core -x MIXRT_NUM_THREADS=1 \
  "$bin/ddp_benchmark" --mode=train "$@" | tee -a /dev/stderr)
# The job runs at the pace of its slowest rank.
rate() { sed -n 's/.* \([0-9.]*\) samples\/s.*/\1/p' <<<"$1" | sort -g | head -1; }
awk -v a="$(rate "$one")" -v b="$(rate "$two")" \
  'BEGIN { printf "throughput 2 ranks x 1 thread / 1 rank x 2 threads: %.2f\n", b / a }'
echo "== all-reduce, 2 ranks"
"${mpi[@]}" -np 2 "$bin/ddp_benchmark" --mode=allreduce
"${mpi[@]}" -np 2 "$bin/mpi_allreduce_baseline"
