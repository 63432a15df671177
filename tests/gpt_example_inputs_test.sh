#!/usr/bin/env bash
# examples/gpt on hostile and careless input (issue 43): a validation split
# shorter than the context is an error (was SIGSEGV: an unsigned
# underflow), a text file over the read limit is refused with its size (was
# skipped without a word), and a --plot path with quotes runs no shell
# command (the plotter is spawned with its arguments, never through sh).
set -euo pipefail
gpt="$PWD/$1"
fail() { echo "FAIL: $*"; exit 1; }
export MIXRT_CPU_SKIP_PROBE=1 MIXRT_CACHE_DIR="$TEST_TMPDIR/cache"
tiny=(--modes=f32 --steps=1 --layers=1 --width=8 --heads=1 --batch=2 --eval_every=1
  --sample_chars=0 --dropout=0)

# 12 000 characters: a validation split of 1 200, shorter than the context.
data="$TEST_TMPDIR/data"
mkdir -p "$data"
python3 -c "import sys; sys.stdout.write(('the quick brown fox jumps over the lazy dog. ' * 300)[:12000])" >"$data/text"
if "$gpt" --data="$data" "${tiny[@]}" --context=2000 >"$TEST_TMPDIR/out" 2>&1; then
  fail "a context longer than the validation split was accepted"
else
  rc=$?
fi
[ "$rc" -lt 128 ] || fail "killed by signal $((rc - 128)): $(tail -5 "$TEST_TMPDIR/out")"
grep -q "is too short for --context=2000" "$TEST_TMPDIR/out" || fail "no reason: $(cat "$TEST_TMPDIR/out")"

# A --plot path that would run commands through a shell.
# Run from TEST_TMPDIR: a shell would create PWNED there.
plot="x'; touch PWNED; echo '.png"
(cd "$TEST_TMPDIR" && "$gpt" --data="$data" "${tiny[@]}" --context=8 --plot="$plot") \
  >"$TEST_TMPDIR/out" 2>&1 || fail "the run failed: $(cat "$TEST_TMPDIR/out")"
[ ! -e "$TEST_TMPDIR/PWNED" ] || fail "--plot ran a shell command"
[ -f "$TEST_TMPDIR/${plot%.png}.csv" ] || fail "no CSV beside the plot: $(cat "$TEST_TMPDIR/out")"

# A file over the 64 MiB this example reads (sparse: no disk used).
truncate -s 70M "$data/huge"
if "$gpt" --data="$data" "${tiny[@]}" --context=8 >"$TEST_TMPDIR/out" 2>&1; then
  fail "a 70 MiB file was read or skipped silently"
fi
grep -q "huge is 73400320 bytes; this example reads files of up to 64 MiB" "$TEST_TMPDIR/out" ||
  fail "no size in the refusal: $(cat "$TEST_TMPDIR/out")"
echo "gpt example: short splits, oversized files and quoted plot paths are handled"
