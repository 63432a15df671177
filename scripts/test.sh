#!/usr/bin/env bash
# Sets up, builds everything and runs every test. This is the README's test
# command and what CI runs (.ci/run).
set -euo pipefail
cd "$(dirname "$0")/.."
# Each step's seconds are printed (the CI budget is an hour on the slowest
# CPU kind; these say where it goes).
scripts/setup.sh
echo "TIME: setup $SECONDS s"
started=$SECONDS
bazel build //...
echo "TIME: bazel build //... $((SECONDS - started)) s"
log=$(mktemp)
status=0
started=$SECONDS
bazel test //... --test_output=errors 2>&1 | tee "$log" || status=$?
echo "TIME: bazel test //... $((SECONDS - started)) s"
# The closing line counts one unit on both sides: each Bazel test target
# and each further check below is one pass or one failure, and every
# failure is named above it. Bazel's summary lists the targets that did not
# pass (it may leave passing and cached ones out), so the passing ones are
# the rest of the query's.
failures=()
while read -r target; do
  failures+=("$target")
done < <(grep -oE '^//[^ ]+ +(FAILED TO BUILD|FAILED|TIMEOUT|NO STATUS|INCOMPLETE)' "$log" |
  awk '{print $1}' | sort -u)
targets=$(bazel query 'tests(//...) except attr(tags, manual, tests(//...))' 2>/dev/null | wc -l)
failed=${#failures[@]}
if [ "$status" -ne 0 ] && [ "$failed" -eq 0 ]; then
  # Bazel failed without naming a test (the build broke): none passed.
  failures+=("bazel test //... (exit $status; no test ran to the end)")
  failed=1
  targets=1
fi
passed=$((targets - failed))

# One more check beyond Bazel's tests: its output goes to $log, shown (the
# last 60 lines) only when it fails.
check() {
  local label=$1 started=$SECONDS
  shift
  if "$@" > "$log" 2>&1; then
    passed=$((passed + 1))
    echo "PASSED: $label ($((SECONDS - started)) s)"
  else
    tail -60 "$log"
    failed=$((failed + 1))
    failures+=("$label")
    status=1
    echo "FAILED: $label ($((SECONDS - started)) s)"
  fi
}

conformance_on_onednn3() {
  bazel build --config=onednn3 //backends/cpu:libmixrt_cpu.so \
    //plugins/conformance:conformance &&
    MIXRT_CPU_SKIP_PROBE=1 bazel-bin/plugins/conformance/conformance \
      --plugin=bazel-bin/backends/cpu/libmixrt_cpu.so --gtest_brief=1
}

# The default plugin with its oneDNN 3.x companion beside it
# (backends/cpu/onednn/onednn3_companion.h): the companion's own tests, then
# the conformance suite's products (matmul, and the fused matmul epilogues)
# with every product the companion can take sent to it.
companion_on_onednn3() {
  bazel test --test_output=errors //tests/cpu:onednn3_companion_test \
    //tests/cpu:onednn3_companion_measured_test &&
    bazel build //backends/cpu:libmixrt_cpu.so \
      //backends/cpu:libmixrt_cpu_onednn3.so //plugins/conformance:conformance &&
    MIXRT_CPU_ONEDNN=3 MIXRT_CPU_SKIP_PROBE=1 bazel-bin/plugins/conformance/conformance \
      --plugin=bazel-bin/backends/cpu/libmixrt_cpu.so --gtest_brief=1 \
      --gtest_filter='matmul.*:fusion.*'
}

# The compiler and CPU-plugin tests again with the ISA capped to AVX2
# (ONEDNN_MAX_CPU_ISA caps oneDNN and the plugin's own kernels alike), so
# a machine with AVX-512 or AMX catches what only an AVX2 CPU would show:
# emulated bf16, unfused GEMMs, packed weights on gemm:jit. Tests that set
# their own cap keep it. Same build; the capped results cache apart.
isa_capped_to_avx2() {
  local targets
  # Without AVX-512 the cap changes nothing: the suite above was this run.
  if ! grep -qw avx512f /proc/cpuinfo; then
    echo "no AVX-512 on this CPU: the uncapped run above covered it"
    return 0
  fi
  targets=$(bazel query 'tests(//tests/compiler:all) + tests(//tests/cpu:all)
    - attr(env, "ONEDNN_MAX_CPU_ISA", tests(//...))' 2>/dev/null)
  # shellcheck disable=SC2086  # one target per word
  bazel test --test_env=ONEDNN_MAX_CPU_ISA=AVX2 --test_output=errors $targets
}
check "compiler and CPU plugin tests with the ISA capped to AVX2" isa_capped_to_avx2

# Every C++ file as clang-format leaves it (.clang-format: Google, 80
# columns); scripts/format.sh formats them.
check "clang-format (scripts/format.sh --check)" scripts/format.sh --check

# The conformance suite against each GPU plugin: with a device it must pass;
# without one the suite exits 77 and the run says "skipped", never "passed".
skipped=0
gpu_conformance() {
  local plugin=$1
  local code=0
  bazel-bin/plugins/conformance/conformance --gtest_brief=1 \
    --plugin="bazel-bin/backends/$plugin/libmixrt_$plugin.so" > "$log" 2>&1 ||
    code=$?
  if [ "$code" -eq 77 ]; then
    skipped=$((skipped + 1))
    echo "SKIPPED: conformance of the $plugin plugin: $(grep -m1 -o 'no device.*' "$log")"
  elif [ "$code" -eq 0 ]; then
    passed=$((passed + 1))
    echo "PASSED: conformance of the $plugin plugin on a real device"
  else
    tail -60 "$log"
    failed=$((failed + 1))
    failures+=("conformance of the $plugin plugin")
    status=1
    echo "FAILED: conformance of the $plugin plugin"
  fi
}
gpu_conformance cuda
gpu_conformance rocm

# The CPU plugin built against oneDNN 3.x from PyPI must pass the same
# conformance suite (after the default build, which stays cached).
if scripts/setup_onednn3.sh; then
  check "conformance of the cpu plugin on oneDNN 3.x" conformance_on_onednn3
  check "the cpu plugin's oneDNN 3.x companion" companion_on_onednn3
else
  echo "NOTE: PyPI unreachable; the oneDNN 3.x build was not checked"
fi

# Without a CUDA toolkit everything but the CUDA plugin still builds and
# passes: the plugin is a stub that says why, and its tests are skipped.
# (Only the affected targets are rebuilt; the real plugin is rebuilt after.)
no_cuda_toolkit() {
  MIXRT_CUDA_ROOT=/nonexistent bazel test //tests/gpu:all //tests:plugin_exports_test &&
    MIXRT_CUDA_ROOT=/nonexistent bazel build //tools:mixrt &&
    bazel-bin/tools/mixrt info | grep "reason: no device: not built: no CUDA toolkit at /nonexistent"
  local code=$?
  bazel build //tools:mixrt //backends/cuda:libmixrt_cuda.so >/dev/null 2>&1 || code=1
  return $code
}
check "builds and tests without a CUDA toolkit (MIXRT_CUDA_ROOT=/nonexistent)" no_cuda_toolkit

# The Python package as a user gets it: the wheel built from the build
# above, installed into a fresh virtualenv (no NumPy, nothing else), then
# imported, asked for its backends, and the Python AMP recipe run small.
# Under /tmp, where users make virtualenvs: the registry loads plugins from
# a directory of this user's inside a sticky one (common/trusted_path.h).
wheel_in_fresh_venv() {
  local dir repo=$PWD
  dir=$(mktemp -d /tmp/mixrt-wheel-check.XXXXXX) || return 1
  scripts/build_wheel.sh &&
    /usr/bin/python3 -m venv "$dir/venv" &&
    "$dir/venv/bin/pip" install --no-index --quiet dist/mixrt-*.whl &&
    (cd "$dir" && timeout 300 "$dir/venv/bin/python" -c \
      "import mixrt, os; i = mixrt.backends.info(); print(mixrt.backends.list()); assert 'cpu' in mixrt.backends.list(); assert os.path.exists(os.path.join(os.path.dirname(mixrt.__file__), '_mixrt.pyi'))" &&
      timeout 300 "$dir/venv/bin/python" "$repo/examples/python/amp_recipe.py" --width 256 --batch 64 --steps 3)
  local code=$?
  rm -rf "$dir"
  return $code
}
if [ -f third_party/nanobind/nanobind/src/nb_combined.cpp ]; then
  check "the wheel installs and runs in a fresh virtualenv" wheel_in_fresh_venv
else
  echo "NOTE: no nanobind sources (PyPI unreachable at setup): the Python package was skipped"
fi

# The GPU proof kit: assembled from the build above and loaded in a scrubbed
# environment (every library from the kit, glibc or CUDA; "no device" here).
kit_dir=$(mktemp -d)
check "GPU proof kit builds and loads scrubbed" scripts/gpu_kit.sh "$kit_dir/gpu_kit"
rm -rf "$kit_dir"

# The suite under ASan+UBSan (leaks included) and the threaded tests under
# TSan, each in its own output base: zero reports or the run fails.
check "sanitizers (ASan+UBSan suite, TSan threaded tests)" \
  scripts/sanitizers.sh all

# Each fuzz target for a bounded time (MIXRT_FUZZ_SECONDS, default 60) with
# clang, ASan and UBSan; the corpus replay tests above ran with gcc.
check "fuzzing (crashing inputs go to fuzz/crashes/)" \
  scripts/fuzz.sh "${MIXRT_FUZZ_SECONDS:-60}"
grep '^fuzz ' "$log" || true
rm -f "$log"
if [ "$failed" -gt 0 ]; then
  echo "failed:"
  printf '  %s\n' "${failures[@]}"
fi
echo "$passed passed, $failed failed, $skipped skipped ($SECONDS s in all)"
exit "$status"
