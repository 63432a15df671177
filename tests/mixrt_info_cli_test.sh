#!/usr/bin/env bash
# `mixrt info` on bad input (issue 16): probe timeouts that would refuse
# every plugin, named plugins that do not exist, paths that are not UTF-8
# in JSON, and the exit status when no backend is usable.
set -euo pipefail
mixrt="$PWD/$1"
export MIXRT_CACHE_DIR="$TEST_TMPDIR/cache" MIXRT_CPU_SKIP_PROBE=1
fail() { echo "FAIL: $*"; exit 1; }

for bad in 0 -5 100000; do
  if "$mixrt" info --isolate --probe_timeout_s=$bad >"$TEST_TMPDIR/out" 2>&1; then
    fail "--probe_timeout_s=$bad accepted"
  else
    rc=$?
  fi
  [ "$rc" = 2 ] || fail "--probe_timeout_s=$bad: exit $rc, expected 2"
  grep -q "expected 1 to 3600 seconds" "$TEST_TMPDIR/out" || fail "no reason for --probe_timeout_s=$bad: $(cat "$TEST_TMPDIR/out")"
done

out=$("$mixrt" info --plugin=/nonexistent/libmixrt_missing.so)
grep -q "\[not found\] /nonexistent/libmixrt_missing.so" <<<"$out" || fail "missing --plugin not listed: $out"
grep -q "reason: not found: No such file or directory" <<<"$out" || fail "no reason for the missing plugin"

# A path with bytes that are not UTF-8: the JSON stays valid.
bad_path="$TEST_TMPDIR/$(printf 'bad\xff\xfename')/libmixrt_x.so"
"$mixrt" info --json --plugin="$bad_path" >"$TEST_TMPDIR/info.json" || fail "mixrt info --json failed on a non-UTF-8 path"
python3 - "$TEST_TMPDIR/info.json" <<'PY' || fail "invalid JSON for a non-UTF-8 path"
import json, sys
j = json.load(open(sys.argv[1], encoding="utf-8"))
states = {p["path"]: p["state"] for p in j["plugins"]}
assert any("bad" in p and s == "not found" for p, s in states.items()), states
PY

# No usable backend: the binary alone, away from its bundled plugins (and
# from the runfiles variables that would lead it back to them).
cp "$mixrt" "$TEST_TMPDIR/lonely_mixrt"
if env -i MIXRT_CPU_SKIP_PROBE=1 "$TEST_TMPDIR/lonely_mixrt" info >"$TEST_TMPDIR/out" 2>&1; then
  fail "mixrt info exited 0 with no usable backend: $(cat "$TEST_TMPDIR/out")"
fi
grep -q "no usable mixrt backend found" "$TEST_TMPDIR/out" || fail "no reason given: $(cat "$TEST_TMPDIR/out")"
"$mixrt" info >/dev/null || fail "mixrt info failed with usable backends"
echo "1 passed, 0 failed"
