#!/usr/bin/env bash
# Runs a test binary under mpirun: mpirun_test.sh RANKS BINARY [ARGS...].
# --oversubscribe lets 2 ranks share fewer cores; --allow-run-as-root is for
# CI containers; the vader single-copy mechanism is off because containers
# often forbid process_vm_readv (CMA) between processes.
set -euo pipefail
ranks=$1
binary=$2
shift 2
# One gtest per rank: they must not share the files Bazel names for one.
unset TEST_PREMATURE_EXIT_FILE XML_OUTPUT_FILE GTEST_OUTPUT
export OMPI_MCA_btl_vader_single_copy_mechanism=none
# Under ASan (scripts/sanitizers.sh): Open MPI never frees what it allocates
# at initialization, and most of it comes from components it dlclose()s at
# MPI_Finalize, which LeakSanitizer cannot name, so no suppression list can
# match them. Memory errors are still checked; leaks are not, in these tests.
export LSAN_OPTIONS="${LSAN_OPTIONS:+$LSAN_OPTIONS:}detect_leaks=0"
export OMPI_MCA_rmaps_base_oversubscribe=1
export MIXRT_DIST_TIMEOUT_S=${MIXRT_DIST_TIMEOUT_S:-60}
# Bazel runs tests side by side, each in its own PID namespace, so two
# mpiruns can get the same PID and with it the same Open MPI job id: they
# then share session directories and shared-memory segments, and corrupt
# each other (seen: a segfault in vader's fragment handling, a hang). Each
# job gets directories of its own; short, because PMIx puts a Unix socket
# there (108 bytes at most, and TEST_TMPDIR is longer).
session=$(mktemp -d /tmp/mixrt-mpi.XXXXXX)
trap 'rm -rf "$session"' EXIT
export OMPI_MCA_orte_tmpdir_base=$session
export OMPI_MCA_btl_vader_backing_directory=$session
forward=()
for name in MIXRT_DIST_TIMEOUT_S MIXRT_CPU_SKIP_PROBE MIXRT_NUM_THREADS \
            MIXRT_EXPECTED_WORLD_SIZE MIXRT_COMM_PLUGIN \
            MIXRT_MPI_ALLREDUCE_CHUNK_BYTES LSAN_OPTIONS \
            ASAN_OPTIONS UBSAN_OPTIONS \
            TEST_TMPDIR RUNFILES_DIR TEST_SRCDIR; do
  if [ -n "${!name+x}" ]; then forward+=(-x "$name"); fi
done
mpirun --oversubscribe --allow-run-as-root -np "$ranks" "${forward[@]}" \
  "$binary" "$@"
