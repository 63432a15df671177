#!/usr/bin/env bash
# The host kit's runner (built by scripts/host_kit.sh), on a lent machine
# with many cores (the device machines: 16):
#
#   ./run.sh [OUT]      # OUT defaults to $OUT, else ./results
#
# Each step under a time limit, the whole under 8 minutes, every log in OUT:
#   machine        lscpu, the CPU flags, the cores chosen (one thread of
#                  each physical core: P0, P1, ...);
#   info, info3    mixrt info --json with the CPU plugin on oneDNN 2.6.3
#                  and on 3.x;
#   bench          mixrt bench --peers=pytorch, the default suite, on P0,P1
#                  (2 threads, as on the 2-core machines);
#   bench_own_onednn  the GEMM and MLP cases again with the plugin's own
#                  oneDNN 2.6.3 alone (MIXRT_CPU_ONEDNN=2; same cores, same
#                  session): what the oneDNN 3.x companion's per-shape
#                  choice, on by default on AMX, gains over 2.6.3;
#   hosts_f32, hosts_bf16, hosts_bf16_hook
#                  benchmarks/ddp_two_hosts.sh: the recipe MLP on 1 rank x
#                  2 threads (P0,P1) against 2 hosts x 1 rank, each host
#                  with 2 cores of its own (P2,P3 and P4,P5), a 10 Gbit/s
#                  link; f32, bf16 autocast + GradScaler, and that with
#                  the bf16 compression hook.
#                  Where the machine cannot make network namespaces, the
#                  same 2 ranks on one host over TCP, each on its own
#                  cores (said so in the log);
#   hosts_f32_one_core  the f32 run with one core per host (P2 and P4).
# HOST_KIT_STEPS=hosts: the two-host steps alone.
# A trial on a small machine: HOST_KIT_CORES="0 1 0 1 0 1" (P0..P5 given;
# every step runs, its figures mean nothing), HOST_KIT_BENCH_CASES (the
# bench's --cases; default: the whole default suite).
set -uo pipefail
kit=$(cd "$(dirname "$0")" && pwd)
out="${1:-${OUT:-$PWD/results}}"
mkdir -p "$out"
source "$kit/kit_runtime.sh"
# The machine's own MPI settings (an image may set a default hostfile or
# transports) are logged and dropped: the kit's launches name their own.
foreign_mpi_env=$(env | grep -E '^(OMPI_|PMIX_|PRTE_|OPAL_|SLURM_|PBS_|PE_HOSTFILE|LSB_)' || true)
for name in $(compgen -e | grep -E '^(OMPI_MCA_|PMIX_MCA_|PRTE_MCA_|OPAL_)'); do unset "$name"; done
home=$(kit_private_copy "$kit" mixrt-host-kit ompi onednn3 benchmarks tests)
bin="$home/bin"
export PATH="$bin:$PATH"
export LD_LIBRARY_PATH="$home/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# Open MPI relocated (its installdirs "env" component reads these).
export OPAL_PREFIX="$home/ompi" OPAL_BINDIR="$bin" OPAL_LIBDIR="$home/lib" \
  OPAL_PKGLIBDIR="$home/ompi/components" OPAL_PKGDATADIR="$home/ompi/help" \
  OPAL_SYSCONFDIR="$home/ompi/etc" PMIX_MCA_mca_base_component_path="$home/ompi/pmix"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export MIXRT_CACHE_DIR="$out/cache" MIXRT_COMM_PLUGIN="$bin/libmixrtcomm_mpi.so"
export MIXRT_DDP_BENCHMARK="$bin/ddp_benchmark"
export PYTHON=${PYTHON:-$(command -v python3)}
kit_steps_begin "$out" host_kit
steps="$out/steps.jsonl"

# One logical CPU of each physical core, in order.
if [ -n "${HOST_KIT_CORES:-}" ]; then
  read -r -a cores <<<"$HOST_KIT_CORES"
else
  mapfile -t cores < <(lscpu -p=CPU,CORE,SOCKET | grep -v '^#' |
    sort -t, -k3,3n -k2,2n -k1,1n | awk -F, '!seen[$3 "," $2]++ {print $1}')
fi
if [ "${#cores[@]}" -lt 6 ]; then
  echo "host_kit: ${#cores[@]} physical cores; 6 are needed" >&2
  exit 1
fi
export MIXRT_BASELINE_CPUS="${cores[0]},${cores[1]}"
export MIXRT_HOST_A_CPUS="${cores[2]},${cores[3]}"
export MIXRT_HOST_B_CPUS="${cores[4]},${cores[5]}"
{
  lscpu
  grep -m1 '^flags' /proc/cpuinfo
  uname -r
  echo "MPI settings found in the environment (dropped): ${foreign_mpi_env:-none}"
  echo "cores: baseline $MIXRT_BASELINE_CPUS, host A $MIXRT_HOST_A_CPUS, host B $MIXRT_HOST_B_CPUS"
} >"$out/machine.log" 2>&1
echo "host_kit: $(grep 'Model name' "$out/machine.log" | sed 's/  */ /g'); $(grep -o 'cores:.*' "$out/machine.log")"

# 2 ranks on this one host over TCP, each on its own cores: what is left
# to measure where network namespaces cannot be made.
one_host_two_ranks() {
  echo "== one host (no network namespaces here: $1): 2 ranks over TCP on loopback"
  shift
  taskset -c "$MIXRT_BASELINE_CPUS" mpirun --mca plm isolated -np 1 --bind-to none -x MIXRT_NUM_THREADS=2 \
    "$MIXRT_DDP_BENCHMARK" --mode=train "$@"
  mpirun --mca plm isolated -np 2 --bind-to none --mca btl tcp,self -x MIXRT_NUM_THREADS=1 \
    -x MIXRT_HOST_A_CPUS -x MIXRT_HOST_B_CPUS sh -c \
    'if [ "$OMPI_COMM_WORLD_RANK" = 0 ]; then c=$MIXRT_HOST_A_CPUS; else c=$MIXRT_HOST_B_CPUS; fi; exec taskset -c "$c" "$0" "$@"' \
    "$MIXRT_DDP_BENCHMARK" --mode=train "$@"
}
export -f one_host_two_ranks
why=$(source "$home/tests/distributed/netns_hosts.sh" && hosts_available)
# Where each rank lands: one on each host, or the measurement is not one.
if [ -z "$why" ]; then
  kit_step hosts_check 40 bash -c 'source "$0" && hosts_up 10gbit &&
    hosts_mpirun --display-allocation --display-map hostname' \
    "$home/tests/distributed/netns_hosts.sh"
  grep -q mixrt-host-a "$out/hosts_check.log" && grep -q mixrt-host-b "$out/hosts_check.log" ||
    why="two hosts were made, but Open MPI did not start a rank on each (hosts_check.log)"
fi
for run in "hosts_f32:" "hosts_bf16:--amp" "hosts_bf16_hook:--amp --comm_hook=bf16"; do
  name=${run%%:*} flags=${run#*:}
  if [ -z "$why" ]; then
    # shellcheck disable=SC2086
    kit_step "$name" 100 "$home/benchmarks/ddp_two_hosts.sh" 10gbit $flags
  else
    # shellcheck disable=SC2086
    kit_step "$name" 100 bash -c 'one_host_two_ranks "$@"' bash "$why" $flags
  fi
done

# Honesty check: the hosts with one core each (the rank's compute,
# its MPI progress and the kernel's TCP work share it), f32.
if [ -z "$why" ]; then
  kit_step hosts_f32_one_core 70 env MIXRT_HOST_A_CPUS="${cores[2]}" MIXRT_HOST_B_CPUS="${cores[4]}" \
    "$home/benchmarks/ddp_two_hosts.sh" 10gbit
fi

# What a reader wants first, on stdout: the steps and the two-host lines.
print_hosts_summary() {
  echo "== steps"; cat "$steps"
  for name in hosts_check hosts_f32 hosts_bf16 hosts_bf16_hook hosts_f32_one_core; do
    [ -f "$out/$name.log" ] || continue
    echo "== $name"
    grep -aE '^==|samples/s|throughput|overlap|GB/s|mixrt-host|slots|cannot|rror' "$out/$name.log" | head -20
  done
}

if [ "${HOST_KIT_STEPS:-hosts bench}" = hosts ]; then
  print_hosts_summary
  exit 0
fi
two_cores=(taskset -c "$MIXRT_BASELINE_CPUS" env OMP_NUM_THREADS=2 MIXRT_NUM_THREADS=2)
kit_step info 20 sh -c "'$bin/mixrt' info --json --plugin='$bin/libmixrt_cpu.so' > '$out/info.json'"
if [ -f "$home/onednn3/libmixrt_cpu.so" ]; then
  kit_step info3 20 sh -c "'$bin/mixrt' info --json --plugin='$home/onednn3/libmixrt_cpu.so' > '$out/info3.json'"
fi
kit_step bench 230 "${two_cores[@]}" "$bin/mixrt" bench --peers=pytorch --backend=cpu \
  --min_time=0.3 --timeout=4 \
  --plugin="$bin/libmixrt_cpu.so,$bin/libmixrt_reference.so" --json="$out/bench.json" --md \
  ${HOST_KIT_BENCH_CASES:+--cases=$HOST_KIT_BENCH_CASES}
if [ -f "$bin/libmixrt_cpu_onednn3.so" ]; then
  kit_step bench_own_onednn 80 "${two_cores[@]}" env MIXRT_CPU_ONEDNN=2 "$bin/mixrt" bench --backend=cpu \
    --min_time=0.3 --timeout=4 \
    --plugin="$bin/libmixrt_cpu.so,$bin/libmixrt_reference.so" --json="$out/bench_own_onednn.json" --md \
    --cases=gemm_1024,gemm_recipe_layer,gemm_skinny_513,gemm_batched,mlp_recipe_train
fi

print_hosts_summary
echo "== bench (oneDNN 2.6.3 and the 3.x companion per shape, PyTorch peer)"; sed -n '/^|/p' "$out/bench.log" | head -60
[ -f "$out/bench_own_onednn.log" ] && { echo "== bench on oneDNN 2.6.3 alone (MIXRT_CPU_ONEDNN=2)"; sed -n '/^|/p' "$out/bench_own_onednn.log"; }
