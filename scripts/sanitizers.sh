#!/usr/bin/env bash
# The whole test suite under AddressSanitizer + UndefinedBehaviorSanitizer
# (LeakSanitizer included), then the threaded tests under ThreadSanitizer.
# Each in its own output base so the normal build's cache survives, and
# without convenience symlinks so bazel-bin/ stays the normal build's.
#   scripts/sanitizers.sh [asan|tsan|all]
set -euo pipefail
cd "$(dirname "$0")/.."
which=${1:-all}
status=0
# Targets are listed by the normal output base: in the other output bases
# //... would also walk this one's bazel-* symlinks as if they were packages.
# The reference plugin's self-check is left out: every case of the CPU
# plugin's conformance runs the same inputs through the reference as its
# oracle, so ASan sees the reference's code there, and the self-check's
# double-precision attention was a third of the suite's ASan test time.
mapfile -t tests < <(bazel query 'tests(//...) except attr(tags, exhaustive, tests(//...))
                                  except //plugins/conformance:conformance_reference' 2>/dev/null)
if [ "$which" = asan ] || [ "$which" = all ]; then
  bazel --output_base="${HOME}/.cache/mixrt-asan-bazel" test --config=asan --symlink_prefix=/ \
    "${tests[@]}" || status=1
fi
if [ "$which" = tsan ] || [ "$which" = all ]; then
  # One OpenMP thread: libgomp is not built with TSan, so the CPU plugin's
  # parallel loops (a loss over 16 rows already forks) report races inside
  # OpenMP's own hand-off that TSan cannot see synchronized. The host
  # threads these tests start are what TSan checks.
  bazel --output_base="${HOME}/.cache/mixrt-tsan-bazel" test --config=tsan --symlink_prefix=/ \
    --test_env=OMP_NUM_THREADS=1 \
    //tests:concurrency_test //tests/plugin:registry_test \
    //tests/compiler:compile_test || status=1
fi
exit "$status"
