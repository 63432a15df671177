#!/usr/bin/env bash
# The plugin matrix (conformance --matrix=DIR) on the example plugin: JSON
# and Markdown per op and dtype, with status, worst error against the
# reference and measured speed.
set -euo pipefail
conformance="$PWD/$1"
plugin="$PWD/$2"
fail() { echo "FAIL: $*"; exit 1; }
out="$TEST_TMPDIR/matrix"
mkdir -p "$out"
"$conformance" --plugin="$plugin" --matrix="$out" --gtest_brief=1 >"$TEST_TMPDIR/run.txt" 2>&1 ||
  fail "conformance: $(tail -20 "$TEST_TMPDIR/run.txt")"
[ -f "$out/example.json" ] && [ -f "$out/example.md" ] || fail "no matrix files: $(ls "$out")"
python3 - "$out/example.json" <<'PY' || fail "matrix JSON: $(head -c 2000 "$out/example.json")"
import json, sys
m = json.load(open(sys.argv[1]))
assert m["plugin"] == "example" and m["reference"] == "reference", m
cells = {(c["op"], c["dtype"]): c for c in m["cells"]}
add = cells[("binary/add", "f32")]
# The example's add is f32 x + y, as the reference rounds it: bit for bit.
assert add["status"] == "ok" and add["ok"] == 7, add
assert add["worst_error_of_tolerance"] == 0 and add["worst_absolute_error"] == 0, add
assert add["plugin_us"] > 0 and add["reference_us"] > 0, add
assert abs(add["speed_vs_reference"] - add["reference_us"] / add["plugin_us"]) < 1e-9, add
# What it does not run: not implemented, not failed (the one case that
# passes has 0 elements: no launch).
sub = cells[("binary/sub", "f32")]
assert sub["status"] == "1 ok, 6 n/i" and sub["not_implemented"] == 6, sub
assert sub["failed"] == 0, sub
gelu = cells[("unary/gelu", "f32")]
assert gelu["status"] == "n/i" and "plugin_us" not in gelu, gelu
assert cells[("binary/add", "f16")]["status"] == "n/i"
assert sum(c["failed"] for c in m["cells"]) == 0
PY
grep -q "^| binary/add | f32 | ok | 7 | 0 | 0 | [0-9.]* | [0-9.]*x |$" "$out/example.md" ||
  fail "Markdown row: $(grep binary/add "$out/example.md")"
grep -q "^| matmul/[a-z0-9_]* | f32 | n/i |" "$out/example.md" || fail "no n/i row"
echo "plugin matrix: JSON and Markdown with status, worst error and speed"
