#!/usr/bin/env bash
# The CPU plugin's environment knobs, through `mixrt info`:
# - the matmul speed probe runs once, is cached on disk, and is reused;
# - a corrupt cache is ignored (measured again), never a crash;
# - MIXRT_CPU_SKIP_PROBE=1 skips it;
# - MIXRT_NUM_THREADS sets the thread count; a bad value makes the plugin
#   refuse to initialize with a message, and the host goes on.
set -euo pipefail
mixrt="$1"
export MIXRT_CACHE_DIR="$TEST_TMPDIR/cache"
fail() { echo "FAIL: $*"; exit 1; }

out=$("$mixrt" info)
grep -q "matmul speeds measured at load" <<<"$out" || fail "first run did not measure: $out"
[ -s "$MIXRT_CACHE_DIR/cpu_matmul_speeds.json" ] || fail "no cache file written"
grep -q '"bf16_vs_f32"' "$MIXRT_CACHE_DIR/cpu_matmul_speeds.json" || fail "cache lacks ratios"

out=$("$mixrt" info)
grep -q "matmul speeds cached in $MIXRT_CACHE_DIR" <<<"$out" || fail "second run did not use the cache"

echo '{ not json' > "$MIXRT_CACHE_DIR/cpu_matmul_speeds.json"
out=$("$mixrt" info)
grep -q "matmul speeds measured at load" <<<"$out" || fail "corrupt cache not re-measured"

out=$(MIXRT_CPU_SKIP_PROBE=1 "$mixrt" info)
grep -q "skipped (MIXRT_CPU_SKIP_PROBE=1)" <<<"$out" || fail "skip knob ignored"

out=$(MIXRT_NUM_THREADS=1 "$mixrt" info)
grep -q "(1 threads;" <<<"$out" || fail "MIXRT_NUM_THREADS=1 not applied: $out"

out=$(MIXRT_NUM_THREADS=zero "$mixrt" info)
grep -q "MIXRT_NUM_THREADS='zero' is not a positive integer" <<<"$out" || fail "bad thread count not reported"
grep -q "selected: reference:0" <<<"$out" || fail "host did not fall back to another backend"
echo "1 passed, 0 failed"
