#!/usr/bin/env bash
# `mixrt bench` end to end: the --quick suite on the CPU plugin, its JSON
# valid against the schema, compare of a run with itself, a bad suite file's
# message, and the exit status for a regression.
set -euo pipefail
mixrt="$PWD/$1"
schema="$PWD/$2"
partial_plugin="$PWD/$3"  # Runs everything but relu's gradient.
fail() { echo "FAIL: $*"; exit 1; }
export MIXRT_CACHE_DIR="$TEST_TMPDIR/cache" MIXRT_CPU_SKIP_PROBE=1
out="$TEST_TMPDIR/quick.json"

"$mixrt" bench --quick --backend=cpu --json="$out" --md --csv="$TEST_TMPDIR/quick.csv" \
  >"$TEST_TMPDIR/md.txt" 2>"$TEST_TMPDIR/log.txt" ||
  fail "mixrt bench --quick: $(tail -20 "$TEST_TMPDIR/log.txt")"
/usr/bin/python3 - "$schema" "$out" <<'PY' || fail "the JSON does not validate"
import json, re, sys
import jsonschema
schema, run = (json.load(open(p)) for p in sys.argv[1:3])
# The commit the binary was built from (stamped), or "unknown".
assert re.fullmatch(r"[0-9a-f]{40}(-dirty)?|unknown", run["machine"]["mixrt_commit"]), run["machine"]
jsonschema.validate(run, schema)
results = run["results"]
kinds = {r["kind"] for r in results}
assert {"gemm", "conv", "sdpa", "mlp_train", "mlp_infer", "transformer_infer"} <= kinds, kinds
assert {r["precision"] for r in results} == {"f32", "bf16", "f16"}
for r in results:
    # The CPU plugin runs every precision: each case is checked, then timed.
    assert r["status"] == "ok", r
    assert r["check"]["error"] <= r["check"]["tolerance"], r
    t = r["timing"]
    assert t["min_ms"] <= t["median_ms"] <= t["max_ms"], t
    # Enough for `mixrt bench compare`, even when cut off by the timeout.
    assert t["count"] == len(t["samples"]) >= 3, t
    assert "--cases=" + r["case"] in r["reproduce"], r["reproduce"]
m = run["machine"]
assert m["cpu"] and m["logical_cpus"] >= 1 and "avx512_bf16" in m["isa"], m
assert any(p["name"] == "cpu" for p in m["plugins"]), m["plugins"]
assert "MIXRT_CPU_SKIP_PROBE" in m["environment"], m["environment"]
PY
grep -q "^| gemm_256 | cpu | bf16 | eager |" "$TEST_TMPDIR/md.txt" || fail "no Markdown row: $(cat "$TEST_TMPDIR/md.txt")"

# Run inside another repository, the record still names the commit the
# binary was built from, not that repository's (the bench once asked `git`
# in the current directory).
other="$TEST_TMPDIR/other_repo"
mkdir -p "$other"
(cd "$other" && git init -q && git -c user.name=t -c user.email=t@t commit -q --allow-empty -m x) ||
  fail "could not make a repository"
other_head=$(git -C "$other" rev-parse HEAD)
(cd "$other" && "$mixrt" bench --quick --cases=gemm_256 --dtype=f32 --backend=cpu \
  --json="$TEST_TMPDIR/other.json" >/dev/null 2>"$TEST_TMPDIR/other.log") ||
  fail "mixrt bench in another repository: $(tail -5 "$TEST_TMPDIR/other.log")"
/usr/bin/python3 - "$out" "$TEST_TMPDIR/other.json" "$other_head" <<'PY' || fail "the commit followed the directory"
import json, sys
first, second = (json.load(open(p))["machine"]["mixrt_commit"] for p in sys.argv[1:3])
assert first == second, (first, second)
assert not second.startswith(sys.argv[3]), (second, sys.argv[3])
PY
head -1 "$TEST_TMPDIR/quick.csv" | grep -q "^case,backend,precision,mode,status,median_ms" || fail "bad CSV header"

# A run against itself: every case present, nothing significant.
"$mixrt" bench compare "$out" "$out" --fail_above=0.05 >"$TEST_TMPDIR/cmp.txt" ||
  fail "compare of a run with itself failed: $(cat "$TEST_TMPDIR/cmp.txt")"
grep -q "| gemm_256 cpu f32 eager |" "$TEST_TMPDIR/cmp.txt" || fail "compare table: $(cat "$TEST_TMPDIR/cmp.txt")"
grep -q "geometric mean | | | 1.00x" "$TEST_TMPDIR/cmp.txt" || fail "geomean: $(cat "$TEST_TMPDIR/cmp.txt")"

# A slower copy is a regression: exit status 3.
/usr/bin/python3 - "$out" "$TEST_TMPDIR/slow.json" <<'PY'
import json, sys
run = json.load(open(sys.argv[1]))
for r in run["results"]:
    t = r["timing"]
    t["samples"] = [s * 3 + 1 for s in t["samples"]] + [s * 3 + 1.5 for s in t["samples"]]
    t["median_ms"] = t["median_ms"] * 3 + 1
json.dump(run, open(sys.argv[2], "w"))
PY
set +e
"$mixrt" bench compare "$out" "$TEST_TMPDIR/slow.json" --fail_above=0.05 >"$TEST_TMPDIR/cmp2.txt"
rc=$?
set -e
[ "$rc" = 3 ] || fail "a 3x slower run exited $rc, expected 3: $(cat "$TEST_TMPDIR/cmp2.txt")"
grep -q "^regression: gemm_256 cpu f32 eager (run 1)" "$TEST_TMPDIR/cmp2.txt" || fail "regression not named"

# A bad suite file: file:line and what was expected.
printf 'mixrt-bench-suite 1\ncase gemm g m=4 n=4\n' >"$TEST_TMPDIR/bad.suite"
if "$mixrt" bench --suite="$TEST_TMPDIR/bad.suite" >"$TEST_TMPDIR/bad.txt" 2>&1; then
  fail "a bad suite ran"
fi
grep -q "bad.suite:2: gemm needs k" "$TEST_TMPDIR/bad.txt" || fail "bad suite message: $(cat "$TEST_TMPDIR/bad.txt")"
# A FIFO in place of a result file is refused, not waited on.
mkfifo "$TEST_TMPDIR/result.fifo"
if timeout 20 "$mixrt" bench compare "$TEST_TMPDIR/result.fifo" "$out" >"$TEST_TMPDIR/fifo.txt" 2>&1; then
  fail "a FIFO was compared"
else
  rc=$?
fi
[ "$rc" != 124 ] || fail "mixrt bench compare waited on a FIFO"
grep -q "not a regular file" "$TEST_TMPDIR/fifo.txt" || fail "FIFO: $(cat "$TEST_TMPDIR/fifo.txt")"

# A peer that never returns is killed after its limit, and leaves nothing
# in TMPDIR (a Python that claims to have torch and then hangs).
fake="$TEST_TMPDIR/fake_python"
printf '#!/bin/sh
[ "$1" = -c ] && exit 0
exec sleep 600
' >"$fake"
chmod +x "$fake"
mkdir -p "$TEST_TMPDIR/tmp"
start=$SECONDS
PYTHON="$fake" TMPDIR="$TEST_TMPDIR/tmp" MIXRT_BENCH_PEER_TIMEOUT_S=2 timeout 120 \
  "$mixrt" bench --quick --cases=gemm_256 --backend=cpu --dtype=f32 --peers=pytorch \
  --min_time=0.01 --min_samples=2 >"$TEST_TMPDIR/peer.txt" 2>&1 ||
  fail "the run with a hanging peer failed: $(tail -5 "$TEST_TMPDIR/peer.txt")"
[ $((SECONDS - start)) -lt 100 ] || fail "the hanging peer held the run"
grep -q "peer pytorch: .* did not finish within 2 s; killed" "$TEST_TMPDIR/peer.txt" ||
  fail "no timeout named: $(cat "$TEST_TMPDIR/peer.txt")"
[ -z "$(ls -A "$TEST_TMPDIR/tmp")" ] || fail "left behind: $(ls -A "$TEST_TMPDIR/tmp")"
# A case with two busy processes beside it, threads following the load:
# checked against the reference plugin under that load, then timed.
printf 'mixrt-bench-suite 1\ncase mlp_train busy_mlp batch=8 width=32 layers=2 busy_cores=2\n' \
  >"$TEST_TMPDIR/busy.suite"
MIXRT_CPU_LOAD_AWARE_THREADS=1 timeout 120 "$mixrt" bench --suite="$TEST_TMPDIR/busy.suite" \
  --backend=cpu --dtype=f32,bf16 --min_time=0.05 --min_samples=3 --timeout=1 \
  --json="$TEST_TMPDIR/busy.json" >"$TEST_TMPDIR/busy.txt" 2>&1 ||
  fail "the busy case failed: $(tail -5 "$TEST_TMPDIR/busy.txt")"
/usr/bin/python3 - "$TEST_TMPDIR/busy.json" <<'PY' || fail "busy case: $(cat "$TEST_TMPDIR/busy.txt")"
import json, sys
results = json.load(open(sys.argv[1]))["results"]
assert [r["status"] for r in results] == ["ok", "ok"], results
assert all(r["params"]["busy_cores"] == 2 for r in results), results
PY
if pgrep -af "busy.suite"; then fail "busy processes outlived the run: $(pgrep -af busy.suite)"; fi

# A peer that cuts a case off (pytorch_peer.py's watchdog: status cut_off,
# exit 75) is run again for the cases left, and the cut-off case is
# reported with the least slowdown it proves.
cutter="$TEST_TMPDIR/cutting_python"
cat >"$cutter" <<'SH'
#!/bin/sh
[ "$1" = -c ] && exit 0
exec /usr/bin/python3 - "$@" <<'PY'
import json, sys
spec = json.load(open(sys.argv[2]))
if not spec["done"]:
    json.dump([{"case": "gemm_256", "kind": "gemm", "params": {}, "backend": "pytorch",
                "precision": "f32", "mode": "eager", "status": "cut_off",
                "reason": "peer slower than 3 s", "cut_off_s": 3,
                "cut_off_min_step_ms": 1500.0}], open(sys.argv[3], "w"))
    sys.exit(75)
assert spec["done"] == [["gemm_256", "f32", "eager"]], spec["done"]
json.dump([{"case": "gemm_256", "kind": "gemm", "params": {}, "backend": "pytorch",
            "precision": "bf16", "mode": "eager", "status": "error",
            "reason": "second run"}], open(sys.argv[3], "w"))
PY
SH
chmod +x "$cutter"
PYTHON="$cutter" TMPDIR="$TEST_TMPDIR/tmp" timeout 120 \
  "$mixrt" bench --quick --cases=gemm_256 --backend=cpu --dtype=f32,bf16 --peers=pytorch \
  --min_time=0.01 --min_samples=2 --md --json="$TEST_TMPDIR/cut.json" \
  >"$TEST_TMPDIR/cut.txt" 2>&1 || fail "the run with a cutting peer failed: $(tail -5 "$TEST_TMPDIR/cut.txt")"
/usr/bin/python3 - "$schema" "$TEST_TMPDIR/cut.json" <<'PY' || fail "cut-off results: $(cat "$TEST_TMPDIR/cut.txt")"
import json, re, sys
import jsonschema
schema, run = (json.load(open(p)) for p in sys.argv[1:3])
# The commit the binary was built from (stamped), or "unknown".
assert re.fullmatch(r"[0-9a-f]{40}(-dirty)?|unknown", run["machine"]["mixrt_commit"]), run["machine"]
jsonschema.validate(run, schema)
peers = {(p["precision"], p["status"]) for p in run["peers"]}
assert peers == {("f32", "cut_off"), ("bf16", "error")}, peers
PY
grep -qE '^\| gemm_256 \| cpu \| f32 \| eager \|.*\| >[0-9]+x \|' "$TEST_TMPDIR/cut.txt" ||
  fail "no lower bound against the cut-off peer: $(cat "$TEST_TMPDIR/cut.txt")"
[ -z "$(ls -A "$TEST_TMPDIR/tmp")" ] || fail "left behind: $(ls -A "$TEST_TMPDIR/tmp")"

# Peers interleave by default: each case runs in the peer right after
# mixrt ran it (a drifting machine skews ratios whose sides are minutes
# apart); --interleave_peers=false runs the peer once, after every case.
logger="$TEST_TMPDIR/logging_python"
cat >"$logger" <<'SH'
#!/bin/sh
[ "$1" = -c ] && exit 0
exec /usr/bin/python3 - "$@" <<'PY'
import json, os, sys
spec = json.load(open(sys.argv[2]))
names = [c["case"] for c in spec["cases"]]
print("fake peer ran " + ",".join(names), file=sys.stderr, flush=True)
json.dump([{"case": n, "kind": "gemm", "params": {}, "backend": "pytorch",
            "precision": "f32", "mode": "eager", "status": "error",
            "reason": "fake"} for n in names], open(sys.argv[3], "w"))
PY
SH
chmod +x "$logger"
for order in interleaved after; do
  flag=$([ $order = after ] && echo --interleave_peers=false || true)
  PYTHON="$logger" TMPDIR="$TEST_TMPDIR/tmp" timeout 120 \
    "$mixrt" bench --quick --cases=gemm_256,conv_small --backend=cpu --dtype=f32 \
    --peers=pytorch --min_time=0.01 --min_samples=2 $flag \
    >"$TEST_TMPDIR/$order.txt" 2>&1 || fail "$order peers: $(tail -5 "$TEST_TMPDIR/$order.txt")"
  grep -oE '^\[[0-9]+/[0-9]+\] [a-z_0-9]+|^fake peer ran .*' "$TEST_TMPDIR/$order.txt" |
    sed 's/^\[[0-9]*\/[0-9]*\] //' | paste -sd' ' >"$TEST_TMPDIR/$order.seen"
done
[ "$(cat "$TEST_TMPDIR/interleaved.seen")" = \
  "gemm_256 fake peer ran gemm_256 conv_small fake peer ran conv_small" ] ||
  fail "interleaved order: $(cat "$TEST_TMPDIR/interleaved.seen")"
[ "$(cat "$TEST_TMPDIR/after.seen")" = \
  "gemm_256 conv_small fake peer ran gemm_256,conv_small" ] ||
  fail "peer-after order: $(cat "$TEST_TMPDIR/after.seen")"

# --rounds=2: every case and its peer twice, each row tagged with its
# round, each ratio of one round's pair, and their median and range.
timer="$TEST_TMPDIR/timing_python"
cat >"$timer" <<'SH'
#!/bin/sh
[ "$1" = -c ] && exit 0
exec /usr/bin/python3 - "$@" <<'PY'
import json, sys
spec = json.load(open(sys.argv[2]))
t = {"unit": "ms", "samples": [900.0, 1000.0, 1100.0], "count": 3, "median_ms": 1000.0,
     "min_ms": 900.0, "max_ms": 1100.0, "mean_ms": 1000.0, "stddev_ms": 100.0, "cv": 0.1,
     "p90_ms": 1100.0, "median_ci95_ms": [900.0, 1100.0], "noise_met": True}
json.dump([{"case": c["case"], "kind": "gemm", "params": {}, "backend": "pytorch",
            "precision": "f32", "mode": "eager", "status": "ok", "reason": "",
            "timing": t} for c in spec["cases"]], open(sys.argv[3], "w"))
PY
SH
chmod +x "$timer"
PYTHON="$timer" TMPDIR="$TEST_TMPDIR/tmp" timeout 120 \
  "$mixrt" bench --quick --cases=gemm_256 --backend=cpu --dtype=f32 --peers=pytorch \
  --min_time=0.01 --min_samples=3 --rounds=2 --md --json="$TEST_TMPDIR/rounds.json" \
  >"$TEST_TMPDIR/rounds.txt" 2>&1 || fail "two rounds: $(tail -5 "$TEST_TMPDIR/rounds.txt")"
/usr/bin/python3 - "$schema" "$TEST_TMPDIR/rounds.json" <<'PY' || fail "rounds: $(cat "$TEST_TMPDIR/rounds.txt")"
import json, sys
import jsonschema
schema, run = (json.load(open(p)) for p in sys.argv[1:3])
jsonschema.validate(run, schema)
assert [r["round"] for r in run["results"]] == [1, 2], run["results"]
assert [p["round"] for p in run["peers"]] == [1, 2], run["peers"]
PY
grep -qE '^\| gemm_256 \| cpu \| f32 \| eager \| pytorch \| 2 \| [0-9.]+x \| [0-9.]+-[0-9.]+x \|' \
  "$TEST_TMPDIR/rounds.txt" || fail "no ratio over two rounds: $(cat "$TEST_TMPDIR/rounds.txt")"
grep -q '^f32: geometric mean of the medians' "$TEST_TMPDIR/rounds.txt" ||
  fail "no geometric mean: $(cat "$TEST_TMPDIR/rounds.txt")"
"$mixrt" bench --quick --rounds=0 >"$TEST_TMPDIR/rounds0.txt" 2>&1 && fail "--rounds=0 ran"
grep -q -- "--rounds=0; expected 1 to 100" "$TEST_TMPDIR/rounds0.txt" ||
  fail "--rounds=0: $(cat "$TEST_TMPDIR/rounds0.txt")"

# A backend that lacks an op the case needs: the row says how much of each
# step fell back (launches and bytes), and is labelled "fallback", never
# the class's "native".
"$mixrt" bench --quick --cases=mlp_train_small --dtype=f32 --plugin="$partial_plugin" \
  --backend=partial_no_relu_backward --json="$TEST_TMPDIR/fallback.json" --md \
  >"$TEST_TMPDIR/fallback_md.txt" 2>"$TEST_TMPDIR/fallback_log.txt" ||
  fail "the run on a partial plugin failed: $(tail -5 "$TEST_TMPDIR/fallback_log.txt")"
/usr/bin/python3 - "$TEST_TMPDIR/fallback.json" <<'PY' || fail "fallback row: $(cat "$TEST_TMPDIR/fallback.json")"
import json, sys
[row] = [r for r in json.load(open(sys.argv[1]))["results"] if r["mode"] == "eager"]
assert row["status"] == "ok", row
assert row["support"] == "fallback", row["support"]
# Three ReLU layers' gradients per step (batch 32 x width 128 f32, both
# devices host memory: nothing copied).
assert row["fallback_launches_per_step"] >= 2, row
assert row["fallback_bytes_per_step"] == 0, row
assert "launches per step ran on another backend" in row["reason"], row["reason"]
PY
grep -qE '^\| mlp_train_small \| partial_no_relu_backward \| f32 \| eager \|.*\| ok, fallback: [0-9]+ launches per step' \
  "$TEST_TMPDIR/fallback_md.txt" || fail "Markdown fallback row: $(cat "$TEST_TMPDIR/fallback_md.txt")"
grep -q "fallback: [0-9]* launches and 0.00 MiB copied per step" "$TEST_TMPDIR/fallback_log.txt" ||
  fail "progress line: $(cat "$TEST_TMPDIR/fallback_log.txt")"

echo "mixrt bench: quick run valid, compare and regressions, suite errors, FIFOs, hanging, cut-off and interleaved peers, rounds, fallback rows"
