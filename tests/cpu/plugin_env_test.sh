#!/usr/bin/env bash
# The CPU plugin's environment knobs, through `mixrt info`:
# - the matmul speed probe runs once, is cached on disk, and is reused;
# - a corrupt cache is ignored (measured again), never a crash;
# - MIXRT_CPU_SKIP_PROBE=1 skips it;
# - MIXRT_NUM_THREADS sets the thread count; a bad value makes the plugin
#   refuse to initialize with a message, and the host goes on.
set -euo pipefail
mixrt="$PWD/$1"
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

# Out-of-range or malformed counts (100000 used to crash libgomp) are
# refused by the plugin with the accepted range, the host falls back, and
# the fallback is announced on stderr, never silent.
for bad in zero 0 -1 100000; do
  out=$(MIXRT_NUM_THREADS=$bad "$mixrt" info 2>"$TEST_TMPDIR/stderr")
  grep -q "MIXRT_NUM_THREADS='$bad' is not an integer from 1 to" <<<"$out" || fail "bad thread count $bad not reported: $out"
  grep -q "selected: reference:0" <<<"$out" || fail "host did not fall back to another backend"
  grep -q "warning: plugin .*libmixrt_cpu.so was not used (failed).*MIXRT_NUM_THREADS='$bad'.*selected backend 'reference' instead" "$TEST_TMPDIR/stderr" \
    || fail "fallback from the CPU plugin was silent: $(cat "$TEST_TMPDIR/stderr")"
done

# Under an address-space limit below 1 GiB (ulimit -v) the plugin refuses to
# start, saying so (it segfaulted or aborted in libgcc_s's unwinder), and
# the host falls back. Not under a sanitizer, whose shadow memory needs
# terabytes of address space.
if [ -z "${ASAN_OPTIONS:-}${TSAN_OPTIONS:-}" ] && ! (ldd "$mixrt" 2>/dev/null || true) | grep -qE 'lib[at]san'; then
  # 878 MiB: enough to map every plugin's libraries (below ~700 MiB the
  # loader already fails to map oneDNN, and says so), not enough to start.
  out=$(ulimit -v 900000 && "$mixrt" info 2>"$TEST_TMPDIR/stderr") || fail "mixrt info failed under ulimit -v 900000"
  grep -q "the address-space limit (ulimit -v) is 878 MiB; the CPU plugin needs at least 1024 MiB" <<<"$out" \
    || fail "the address-space limit was not reported: $out"
  grep -q "selected: reference:0" <<<"$out" || fail "host did not fall back under ulimit -v"
fi

# Asking for the failed backend by name is an error, not a fallback.
if MIXRT_NUM_THREADS=0 MIXRT_BACKEND=cpu "$mixrt" info >"$TEST_TMPDIR/out" 2>&1; then :; fi
grep -q "selected: no backend named 'cpu' is loaded.*MIXRT_NUM_THREADS='0'" "$TEST_TMPDIR/out" || fail "named failed backend not an error: $(cat "$TEST_TMPDIR/out")"

# The cache key holds the thread count actually applied.
MIXRT_NUM_THREADS=1 "$mixrt" info >/dev/null
grep -q '|1 threads|' "$MIXRT_CACHE_DIR/cpu_matmul_speeds.json" || fail "cache key lacks the applied thread count: $(cat "$MIXRT_CACHE_DIR/cpu_matmul_speeds.json")"

# A cached ratio that is implausible, or old, or has no timestamp is
# measured again.
cache="$MIXRT_CACHE_DIR/cpu_matmul_speeds.json"
# set_in_cache FIELD VALUE: sets FIELD of every cached entry.
set_in_cache() {
  python3 - "$cache" "$1" "$2" <<'PY'
import json, sys
path, field, value = sys.argv[1], sys.argv[2], float(sys.argv[3])
j = json.load(open(path))
for k in j: j[k][field] = value
json.dump(j, open(path, "w"))
PY
}
set_in_cache bf16_vs_f32 1000
out=$("$mixrt" info)
grep -q "matmul speeds measured at load" <<<"$out" || fail "implausible cached ratio trusted: $out"
set_in_cache measured_at 0
out=$("$mixrt" info)
grep -q "matmul speeds measured at load" <<<"$out" || fail "a 50-year-old measurement was trusted: $out"
out=$("$mixrt" info)
grep -q "matmul speeds cached in" <<<"$out" || fail "fresh measurement not cached"
grep -q '"f16_as_bf16_pairs": ' "$cache" || fail "cache lacks the f16 way chosen: $(cat "$cache")"
# An entry without the f16 way (written before it was measured) is measured
# again; so is one that chose three bf16 products where this machine has no
# AMX to run them.
python3 - "$cache" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
for k in j: del j[k]["f16_as_bf16_pairs"]
json.dump(j, open(sys.argv[1], "w"))
PY
out=$("$mixrt" info)
grep -q "matmul speeds measured at load" <<<"$out" || fail "an entry without the f16 way was trusted: $out"
if ! grep -q amx_bf16 /proc/cpuinfo; then
  python3 - "$cache" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
for k in j: j[k]["f16_as_bf16_pairs"] = True
json.dump(j, open(sys.argv[1], "w"))
PY
  out=$("$mixrt" info)
  grep -q "matmul speeds measured at load" <<<"$out" || fail "three bf16 products trusted without AMX: $out"
fi
# A dtype converted to f32 to be multiplied (f16 with the ISA capped to
# AVX2) cannot run 1.8x f32: such a cached ratio is measured again.
ONEDNN_MAX_CPU_ISA=AVX2 "$mixrt" info >/dev/null
set_in_cache f16_vs_f32 1.8
out=$(ONEDNN_MAX_CPU_ISA=AVX2 "$mixrt" info)
grep -q "matmul speeds measured at load" <<<"$out" || fail "an emulated f16 cached at 1.8x f32 was trusted: $out"
grep -q "measured 1.80x" <<<"$out" && fail "the implausible ratio was shown: $out"

# A FIFO or a directory at the cache path: no hang, no failure, measured.
rm -f "$cache"; mkfifo "$cache"
out=$(timeout 60 "$mixrt" info) || fail "mixrt info hung or failed with a FIFO at the cache path"
grep -q "selected: cpu:0" <<<"$out" || fail "CPU plugin failed with a FIFO at the cache path: $out"
[ -p "$cache" ] || fail "the FIFO was replaced"
rm -f "$cache"; mkdir "$cache"
out=$(timeout 60 "$mixrt" info) || fail "mixrt info failed with a directory at the cache path"
grep -q "selected: cpu:0" <<<"$out" || fail "CPU plugin failed with a directory at the cache path: $out"
rmdir "$cache"

# A symlink planted at the cache's temporary names is never written through.
victim="$TEST_TMPDIR/victim"; echo precious > "$victim"
for i in $(seq 0 5); do ln -sf "$victim" "$cache.tmp.$$.$i"; done
"$mixrt" info >/dev/null
[ "$(cat "$victim")" = precious ] || fail "a planted symlink was written through"

# XDG rules: an empty HOME or a relative XDG_CACHE_HOME is ignored, never
# resolved against / or the current directory.
# (HOME must exist: mixrt never creates a home.)
work="$TEST_TMPDIR/cwd"; mkdir -p "$work" "$TEST_TMPDIR/home"
(cd "$work" && env -u MIXRT_CACHE_DIR HOME="$TEST_TMPDIR/home" XDG_CACHE_HOME=relative "$mixrt" info >/dev/null)
[ -s "$TEST_TMPDIR/home/.cache/mixrt/cpu_matmul_speeds.json" ] || fail "relative XDG_CACHE_HOME not ignored in favour of HOME"
[ ! -e "$work/relative" ] || fail "cache written under the current directory"
(cd "$work" && env -u MIXRT_CACHE_DIR -u XDG_CACHE_HOME HOME= "$mixrt" info >"$TEST_TMPDIR/out")
grep -q "matmul speeds measured at load" "$TEST_TMPDIR/out" || fail "HOME='' broke the probe"
[ ! -e "$work/.cache" ] && [ ! -e "/.cache/mixrt/cpu_matmul_speeds.json" ] || fail "HOME='' wrote a cache"
echo "1 passed, 0 failed"
