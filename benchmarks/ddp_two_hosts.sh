#!/usr/bin/env bash
# Data parallelism across two hosts made on this machine
# (tests/distributed/netns_hosts.sh: network namespaces, a veth shaped to
# RATE, Open MPI over TCP), in one run against the single-process baseline
# (not a test; needs root):
#   bazel build -c opt //benchmarks:ddp_benchmark
#   benchmarks/ddp_two_hosts.sh [RATE] [ddp_benchmark flags]   # RATE: 10gbit
# 1. the recipe MLP train step: 2 hosts x 1 rank vs 1 rank x 2 threads;
# 2. the ProcessGroup's f32 all-reduce bandwidth over the link.
# On a machine with cores to spare (scripts/host_kit.sh), each side gets
# its own: MIXRT_BASELINE_CPUS for the 1-rank baseline, MIXRT_HOST_A_CPUS
# and MIXRT_HOST_B_CPUS for the hosts (taskset lists; netns_hosts.sh).
# MIXRT_DDP_BENCHMARK names the binary (default: this build's).
set -euo pipefail
cd "$(dirname "$0")/.."
rate=${1:-10gbit}
shift || true
benchmark=${MIXRT_DDP_BENCHMARK:-$PWD/bazel-bin/benchmarks/ddp_benchmark}
source tests/distributed/netns_hosts.sh
why=$(hosts_available)
[ -z "$why" ] || { echo "two hosts cannot be made here: $why"; exit 1; }
echo "== train step, recipe MLP, 1 rank x 2 threads"
# plm isolated: one local rank needs no launch agent (a machine without
# ssh has none, and Open MPI's rsh launcher then refuses to start).
one=$(taskset -c "${MIXRT_BASELINE_CPUS:-0-$(($(nproc --all) - 1))}" \
  mpirun --allow-run-as-root --mca plm isolated -np 1 --bind-to none \
  -x MIXRT_NUM_THREADS=2 "$benchmark" --mode=train "$@" |
  tee -a /dev/stderr)
hosts_up "$rate"
# Unbound: each host's mpirun would bind its rank to "its" first core,
# the same core of this machine for both.
echo "== two hosts: $HOSTS_SHAPING, $HOSTS_SHAPER; 1 rank x 1 thread each"
export MIXRT_NUM_THREADS=1
two=$(hosts_mpirun --bind-to none "$benchmark" --mode=train "$@" |
  tee -a /dev/stderr)
rate_of() { sed -n 's/.* \([0-9.]*\) samples\/s.*/\1/p' <<<"$1" | sort -g | head -1; }
awk -v a="$(rate_of "$one")" -v b="$(rate_of "$two")" \
  'BEGIN { printf "throughput 2 hosts x 1 rank / 1 rank x 2 threads: %.2f\n", b / a }'
echo "== all-reduce over the link"
hosts_mpirun --bind-to none "$benchmark" --mode=allreduce
