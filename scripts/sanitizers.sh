#!/usr/bin/env bash
# The whole test suite under AddressSanitizer + UndefinedBehaviorSanitizer
# (LeakSanitizer included), then the threaded tests under ThreadSanitizer.
# Each in its own output base so the normal build's cache survives, and
# without convenience symlinks so bazel-bin/ stays the normal build's.
#   scripts/sanitizers.sh [asan|tsan|all|asan-all]
# (all: the bounded ASan set and TSan, as CI runs them; asan-all: every
# test under ASan)
set -euo pipefail
cd "$(dirname "$0")/.."
which=${1:-all}
status=0
source scripts/output_base.sh
# Targets are listed by the normal output base: in the other output bases
# //... would also walk this one's bazel-* symlinks as if they were packages.
#
# Bounded to fit CI's hour on a two-core AVX2 machine (the whole suite under
# ASan was ~36 of a cold CI run's 82 minutes, nearly all of it compiling:
# UBSan and ASan make a compile 3.5 times slower; .bazelrc's asan config
# says which UBSan checks it keeps). Left out, each for a reason, and run
# with `scripts/sanitizers.sh asan-all`:
# - the reference plugin's self-check: every case of the CPU plugin's
#   conformance runs the same inputs through the reference as its oracle,
#   so ASan sees the reference's code there;
# - the CPU plugin's conformance with the ISA capped to AVX2: the same
#   source as the uncapped run (on an AVX2 machine the same code paths);
# - the examples' own tests: whole training runs of binaries whose parts the
#   unit tests cover, minutes each under ASan;
# - the GPU kernels' resource report, which reads compiler output and runs
#   no host code, and the GPU plugins' host-side tests: device code built
#   for the host, 2.5 minutes of the stage (nvcc and every functor); the
#   plain run still runs them, asan-all sanitizes them;
# - float_convert_test: a sweep of 70 million conversions through
#   arithmetic on registers (five minutes under ASan), which the kernel
#   tests also call.
# Never: the installed application's test (tests:out_of_tree_app_test): it
# builds a program with the system's compiler, outside Bazel, against
# libmixrt, which under ASan would need that program built with the same
# runtime first; what libmixrt holds is the core the suite tests here.
# Never: the Python package's pytest suite. Its extension module built with
# ASan cannot load into an interpreter that is not (the runtime must come
# first), and the interpreter's own allocations would fill LeakSanitizer's
# report; the core code it calls is the C++ suite's.
full_asan=0
if [ "$which" = asan-all ]; then
  which=asan
  full_asan=1
fi
mapfile -t tests < <(
  if [ "$full_asan" = 1 ]; then
    bazel query 'tests(//...) except attr(tags, exhaustive, tests(//...))
                 except attr(tags, manual, tests(//...))
                 except tests(//python/...)
                 except //tests:out_of_tree_app_test' 2>/dev/null
  else
    bazel query 'tests(//...) except attr(tags, exhaustive, tests(//...))
                 except attr(tags, manual, tests(//...))
                 except //plugins/conformance:conformance_reference
                 except //plugins/conformance:conformance_cpu_avx2
                 except tests(//examples/...)
                 except tests(//tests/gpu/...)
                 except //tests:float_convert_test
                 except tests(//python/...)
                 except //tests:out_of_tree_app_test' 2>/dev/null
  fi)
if [ "$which" = asan ] || [ "$which" = all ]; then
  bazel --output_base="$(own_output_base asan)" test --config=asan --symlink_prefix=/ \
    "${tests[@]}" || status=1
fi
if [ "$which" = tsan ] || [ "$which" = all ]; then
  # One OpenMP thread: libgomp is not built with TSan, so the CPU plugin's
  # parallel loops (a loss over 16 rows already forks) report races inside
  # OpenMP's own hand-off that TSan cannot see synchronized. The host
  # threads these tests start are what TSan checks.
  bazel --output_base="$(own_output_base tsan)" test --config=tsan --symlink_prefix=/ \
    --test_env=OMP_NUM_THREADS=1 \
    //tests:concurrency_test //tests/plugin:registry_test \
    //tests/plugin:isolated_plugin_threads_test \
    //tests/compiler:compile_test || status=1
fi
exit "$status"
