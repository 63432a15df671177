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

# Help is an answer (status 0, on stdout); an argument nothing reads is an
# error naming it, never ignored.
for help in --help -h help; do
  "$mixrt" $help >"$TEST_TMPDIR/out" 2>&1 || fail "mixrt $help exits $?, expected 0"
  grep -q "commands:" "$TEST_TMPDIR/out" || fail "mixrt $help printed no usage: $(cat "$TEST_TMPDIR/out")"
done
"$mixrt" info --help >"$TEST_TMPDIR/out" 2>&1 || fail "mixrt info --help exits $?, expected 0"
if "$mixrt" info extra >"$TEST_TMPDIR/out" 2>&1; then fail "mixrt info extra accepted"; else rc=$?; fi
[ "$rc" = 2 ] || fail "mixrt info extra: exit $rc, expected 2"
grep -q "unexpected argument 'extra'" "$TEST_TMPDIR/out" || fail "no reason: $(cat "$TEST_TMPDIR/out")"

out=$("$mixrt" info --plugin=/nonexistent/libmixrt_missing.so)
grep -q "\[not found\] /nonexistent/libmixrt_missing.so" <<<"$out" || fail "missing --plugin not listed: $out"
grep -q "reason: not found: No such file or directory" <<<"$out" || fail "no reason for the missing plugin"

# A relative MIXRT_PLUGIN_PATH entry would load code from wherever mixrt
# runs: refused with the reason, even with a plugin there.
mkdir -p "$TEST_TMPDIR/cwd/plugins"
cp "$PWD/$3" "$TEST_TMPDIR/cwd/plugins/libmixrt_planted.so"
out=$(cd "$TEST_TMPDIR/cwd" && MIXRT_PLUGIN_PATH=plugins "$mixrt" info || true)
grep -q "plugins" <<<"$out" || fail "relative entry not listed: $out"
grep -q "a relative path in MIXRT_PLUGIN_PATH would load code from the current directory" <<<"$out" ||
  fail "relative MIXRT_PLUGIN_PATH entry not refused: $out"
grep -q "libmixrt_planted.so" <<<"$out" && fail "the planted plugin was looked at: $out"

out=$(MIXRT_PLUGIN_PATH=/nonexistent/plugin_dir "$mixrt" info)
grep -q "\[not found\] /nonexistent/plugin_dir" <<<"$out" || fail "missing MIXRT_PLUGIN_PATH entry not listed: $out"
grep -q "(listed in MIXRT_PLUGIN_PATH)" <<<"$out" || fail "no origin for the missing entry: $out"

# A conformance binary copied out of bazel-bin asks for the reference
# plugin, and finds one placed beside it.
conformance="$PWD/$2"
mkdir -p "$TEST_TMPDIR/sdk_bin"
cp "$conformance" "$TEST_TMPDIR/sdk_bin/conformance"
if env -i "$TEST_TMPDIR/sdk_bin/conformance" --plugin=/nonexistent.so >"$TEST_TMPDIR/out" 2>&1; then
  fail "conformance ran without a reference plugin"
fi
grep -q "name it with --reference=" "$TEST_TMPDIR/out" || fail "conformance did not ask for the reference: $(cat "$TEST_TMPDIR/out")"
cp "$PWD/$3" "$TEST_TMPDIR/sdk_bin/libmixrt_reference.so"
env -i "$TEST_TMPDIR/sdk_bin/conformance" --plugin="$TEST_TMPDIR/sdk_bin/libmixrt_reference.so" \
  --gtest_filter='binary.add*' >"$TEST_TMPDIR/out" 2>&1 || fail "conformance beside its reference failed: $(cat "$TEST_TMPDIR/out")"
grep -q "total: 21 ok, 0 failed, 0 not implemented" "$TEST_TMPDIR/out" || fail "no per-op table: $(cat "$TEST_TMPDIR/out")"

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
