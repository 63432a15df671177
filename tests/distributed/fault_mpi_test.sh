#!/usr/bin/env bash
# A rank that is killed, hangs or is stopped ends the 2-rank job within the
# collective timeout, with a message naming it; no rank waits forever.
set -uo pipefail
worker=$1
runner=$2
export MIXRT_DIST_TIMEOUT_S=3
fail=0

run() {  # run FAULT: sets out, rc, seconds
  local start=$SECONDS
  out=$(timeout 60 "$runner" 2 "$worker" "$1" 2>&1)
  rc=$?
  seconds=$((SECONDS - start))
}

expect() {  # expect FAULT TEXT...
  local fault=$1
  shift
  if [ "$rc" -eq 0 ] || [ "$rc" -eq 124 ] || [ "$seconds" -gt 20 ]; then
    echo "FAIL ($fault): rc=$rc after ${seconds}s (want a failure within 20s)"
    fail=1
  fi
  for text in "$@"; do
    if ! grep -qF -- "$text" <<<"$out"; then
      echo "FAIL ($fault): the output does not say: $text"
      fail=1
    fi
  done
  echo "--- $fault: rc=$rc in ${seconds}s"
  echo "$out" | grep -v '^\s*$' | head -30
}

run none
if [ "$rc" -ne 0 ] || [ "$(grep -c ': done' <<<"$out")" -ne 2 ]; then
  echo "FAIL (none): a clean run must end with both ranks done, rc=$rc"
  echo "$out"
  fail=1
fi

# mpirun sees the dead process and ends the job, naming its rank.
run kill
expect kill "rank 1"

# Rank 1 is alive but never reaches the all-reduce: rank 0 times out, asks
# it where it is, names it and aborts the job.
run hang
expect hang "did not complete within" "rank 1 (on $(hostname)) has not reached it"

# Rank 1's whole process is stopped: it cannot answer.
run stop
expect stop "did not complete within" "rank 1 (on $(hostname)) does not answer"

# Rank 1 never joins (stuck before its process group): rank 0's join
# times out with its own rank and host.
run nojoin
expect nojoin "rank 0 (on $(hostname)) waited 3.0 s for the 2 ranks of the job to join"

# Bad launches: every rank refuses with the reason, nobody hangs.
out=$(MIXRT_EXPECTED_WORLD_SIZE=4 timeout 60 "$runner" 2 "$worker" none 2>&1)
rc=$?
seconds=0
expect "world size" "launched with 2 ranks but expects 4"

out=$(MIXRT_COMM_PLUGIN=/nonexistent/libmixrtcomm_mpi.so timeout 60 \
      "$runner" 2 "$worker" none 2>&1)
rc=$?
expect "missing plugin" "cannot load /nonexistent/libmixrtcomm_mpi.so"

# Settings every rank must share are compared at start: a value that is
# not a byte count, or that differs between ranks, ends the job at once
# with the reason (was read as 4 MiB or as a wrapped huge number, and
# differing ranks ran mismatched calls).
for bad in abc -1 1e9 99999999999; do
  out=$(MIXRT_MPI_ALLREDUCE_CHUNK_BYTES=$bad timeout 60 "$runner" 2 "$worker" none 2>&1)
  rc=$?
  seconds=0
  expect "chunk bytes $bad" "MIXRT_MPI_ALLREDUCE_CHUNK_BYTES is not a byte count from 0 to 1073741824"
done
rank1_differs="$TEST_TMPDIR/rank1_differs.sh"
cat >"$rank1_differs" <<SH
#!/bin/sh
if [ "\$OMPI_COMM_WORLD_RANK" = 1 ]; then export MIXRT_MPI_ALLREDUCE_CHUNK_BYTES=12; fi
exec "$PWD/$worker" "\$@"
SH
chmod +x "$rank1_differs"
out=$(timeout 60 "$runner" 2 "$rank1_differs" none 2>&1)
rc=$?
seconds=0
expect "chunk bytes differ" "MIXRT_MPI_ALLREDUCE_CHUNK_BYTES differ: rank 1 has 12, rank 0 4194304"

exit $fail
