#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (ASan+UBSan) and runs each for a
# bounded time on a copy of its seed corpus; prints executions and coverage.
# A crash fails the run and leaves the input in fuzz/crashes/: copy it into
# fuzz/corpus/<target>/ so the replay test keeps it, then fix the bug.
#   scripts/fuzz.sh [seconds per target, default 60] [target...]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(checkpoint plugin_table plugin_wire shape compile_diff compile_cache_entry bench_input)
# Own output base: switching the C compiler would otherwise throw away the
# gcc build's cache.
source scripts/output_base.sh
bazel_fuzz=(bazel --output_base="$(own_output_base fuzz)")
"${bazel_fuzz[@]}" build --config=fuzz --symlink_prefix=/ \
  $(printf '//fuzz:%s_fuzzer ' "${targets[@]}")
bin=$("${bazel_fuzz[@]}" info --config=fuzz bazel-bin 2>/dev/null)
# The checkpoint target needs a device: the reference plugin from the normal
# gcc build (plugins link with -z defs, which an ASan-instrumented shared
# object built by clang cannot satisfy; the host side is what is fuzzed).
# compile_diff runs programs on the CPU plugin and the partial plugins
# against the reference, all from the gcc build too.
diff_plugins=(plugins/reference/libmixrt_reference.so backends/cpu/libmixrt_cpu.so
  tests/fixtures/libmixrt_partial_no_relu_backward.so
  tests/fixtures/libmixrt_partial_no_backward.so
  tests/fixtures/libmixrt_partial_no_reduce_unary.so)
bazel build $(printf '//%s ' "${diff_plugins[@]}" | sed -E 's#/(lib[^/ ]*\.so)#:\1#g')
export MIXRT_FUZZ_PLUGIN="$PWD/bazel-bin/plugins/reference/libmixrt_reference.so"
MIXRT_FUZZ_PLUGINS=$(printf "$PWD/bazel-bin/%s:" "${diff_plugins[@]}")
export MIXRT_FUZZ_PLUGINS
# Its fused loops compile in a cache of its own, not the user's.
MIXRT_CACHE_DIR=$(mktemp -d)
export MIXRT_CACHE_DIR
trap 'rm -rf "$MIXRT_CACHE_DIR"' EXIT
export ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1
mkdir -p fuzz/crashes
# One target: runs it on a copy of its corpus and prints one summary line
# (the log's tail first if it crashed); its exit status is the verdict.
fuzz_one() {
  local t=$1 work log leaks result=ok code=0
  work=$(mktemp -d)
  cp fuzz/corpus/"$t"/* "$work"/
  log=$(mktemp)
  # compile_diff runs the CPU plugin, whose oneDNN primitive caches, OpenMP
  # pool and compiled loops live for the process: per-input leak checks
  # would report every cache fill, and LeakSanitizer's stop-the-world
  # crashed among its threads. Memory errors are still checked.
  leaks=1
  [ "$t" = compile_diff ] && leaks=0
  if ! ASAN_OPTIONS="$ASAN_OPTIONS:detect_leaks=$leaks" "$bin/fuzz/${t}_fuzzer" \
       -detect_leaks="$leaks" -max_total_time="$seconds" -rss_limit_mb=4096 \
       -artifact_prefix=fuzz/crashes/"$t"- -print_final_stats=1 \
       "$work" > "$log" 2>&1; then
    result=CRASH
    code=1
    tail -60 "$log"
  fi
  local execs cov ft corpus
  execs=$(grep -oE 'stat::number_of_executed_units: *[0-9]+' "$log" | grep -oE '[0-9]+$' || echo 0)
  cov=$(grep -oE 'cov: [0-9]+' "$log" | tail -1 | grep -oE '[0-9]+' || echo 0)
  ft=$(grep -oE 'ft: [0-9]+' "$log" | tail -1 | grep -oE '[0-9]+' || echo 0)
  corpus=$(ls "$work" | wc -l)
  echo "fuzz $t: $result, ${seconds}s, $execs executions, coverage $cov edges ($ft features), corpus $corpus"
  rm -rf "$work" "$log"
  return "$code"
}
# As many targets at once as there are cores (each fuzzer is one thread):
# on CI's two cores the six targets take three rounds of $seconds. Each
# target's output is printed whole when it ends.
jobs=${MIXRT_FUZZ_JOBS:-$(nproc)}
status=0
outputs=$(mktemp -d)
trap 'rm -rf "$MIXRT_CACHE_DIR" "$outputs"' EXIT
pids=()
names=()
finish_oldest() {
  if ! wait "${pids[0]}"; then status=1; fi
  cat "$outputs/${names[0]}"
  pids=("${pids[@]:1}")
  names=("${names[@]:1}")
}
for t in "${targets[@]}"; do
  [ "${#pids[@]}" -lt "$jobs" ] || finish_oldest
  fuzz_one "$t" > "$outputs/$t" 2>&1 &
  pids+=($!)
  names+=("$t")
done
while [ "${#pids[@]}" -gt 0 ]; do finish_oldest; done
exit "$status"
