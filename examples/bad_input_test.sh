#!/usr/bin/env bash
# Every example refuses bad flags and bad data with a message and exit
# status 1: never an abort (length_error, SIGFPE, bad_alloc), a hang, an
# unbounded allocation, or a silent success (issue 16, item 17).
set -euo pipefail
amp_recipe="$1" gpt="$2" train_template="$3" digits="$4" grad_clipping="$5"
grad_accumulation="$6" select_backend="$7"
export MIXRT_CPU_SKIP_PROBE=1
t="$TEST_TMPDIR"
failures=0 passed=0

# expect_refusal "<text the message must hold>" command args...
expect_refusal() {
  local want="$1"; shift
  local rc=0
  timeout 120 "$@" >"$t/out" 2>&1 || rc=$?
  if [ "$rc" != 1 ] || ! grep -qF -- "$want" "$t/out"; then
    echo "FAIL: $(basename "$1") ${*:2}: exit $rc, expected 1 with '$want':"
    sed 's/^/    /' "$t/out" | tail -5
    failures=$((failures + 1))
  else
    passed=$((passed + 1))
  fi
}

expect_refusal "--layers=-2 is out of range" "$amp_recipe" --layers=-2
expect_refusal "--batch=0 is out of range" "$amp_recipe" --batch=0
expect_refusal "--width=1000000 is out of range" "$amp_recipe" --width=1000000
expect_refusal "--batch=-1 is out of range" "$train_template" --batch=-1
expect_refusal "--batch=0 is out of range" "$train_template" --batch=0
expect_refusal "--log_every=0 is out of range" "$train_template" --log_every=0
expect_refusal "--epochs=0 is out of range" "$digits" --epochs=0
expect_refusal "--max_norm=nan is out of range" "$grad_clipping" --max_norm=nan
expect_refusal "--accumulate=0 is out of range" "$grad_accumulation" --accumulate=0
expect_refusal "--n=0 is out of range" "$select_backend" --n=0
expect_refusal "--context=1 is out of range" "$gpt" --context=1
expect_refusal "--checkpointing=maybe; expected off, on or both" "$gpt" --checkpointing=maybe
expect_refusal "no fortune files under $t" "$gpt" --data="$t"

# Checkpoint paths that cannot work are found before training starts.
expect_refusal "no/such/dir" "$train_template" --epochs=1 --checkpoint="$t/no/such/dir/run.ckpt"
mkfifo "$t/fifo.ckpt"
expect_refusal "it is a FIFO" "$train_template" --epochs=1 --resume --checkpoint="$t/fifo.ckpt"

# Data: a gzip bomb, NaN pixels, an empty file, a FIFO.
head -c 200000000 /dev/zero | gzip -1 > "$t/bomb.csv.gz"
expect_refusal "unpacks to more than 64 MiB" "$digits" --data="$t/bomb.csv.gz"
python3 - "$t" <<'PY'
import gzip, sys
row = ",".join(["0"] * 64 + ["3"])
nan_row = ",".join(["nan"] + ["0"] * 63 + ["3"])
with gzip.open(sys.argv[1] + "/nan.csv.gz", "wt") as f:
    f.write("\n".join([row] * 20 + [nan_row]) + "\n")
with gzip.open(sys.argv[1] + "/empty.csv.gz", "wt") as f:
    pass
PY
expect_refusal "bad pixel 'nan'" "$digits" --check --data="$t/nan.csv.gz"
expect_refusal "holds 0 images" "$digits" --data="$t/empty.csv.gz"
: > "$t/empty_plain"
expect_refusal "holds 0 images" "$digits" --data="$t/empty_plain"
mkfifo "$t/fifo.csv.gz"
expect_refusal "not a regular file" "$digits" --data="$t/fifo.csv.gz"

echo "$passed passed, $failures failed"
[ "$failures" = 0 ]
