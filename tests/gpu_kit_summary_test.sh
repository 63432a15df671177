#!/usr/bin/env bash
# The GPU proof kit's summary (scripts/gpu_kit/summarize.py) on a run's
# files as the GPU machine would write them: real recipe and conformance
# output from this machine, and a GEMM benchmark JSON and device name as an
# H100 would give, so the TFLOP/s, the % of the datasheet peak and the
# proof-table row can be checked before a GPU is ever lent.
set -euo pipefail
summarize="$PWD/$1"
recipe="$PWD/$2"
conformance="$PWD/$3"
example="$PWD/$4"
fail() { echo "FAIL: $*"; exit 1; }
export MIXRT_CACHE_DIR="$TEST_TMPDIR/cache" MIXRT_CPU_SKIP_PROBE=1
out="$TEST_TMPDIR/out"
mkdir -p "$out"
printf '{"step": "info", "rc": 0, "seconds": 1, "limit": 20}\n{"step": "conformance", "rc": 0, "seconds": 30, "limit": 150}\n' >"$out/steps.jsonl"
cat >"$out/info.json" <<'JSON'
{"plugins": [{"name": "cuda", "devices": [{"name": "NVIDIA H100 80GB HBM3"}]}]}
JSON
"$conformance" --plugin="$example" --gtest_brief=1 >"$out/conformance.log" 2>&1 || fail "conformance"
"$recipe" --backend=cpu --dtype=f16 --width=64 --batch=32 --batches=2 >"$out/recipe_f16.log" 2>&1 || fail "recipe"
# Google Benchmark's JSON: 4096^3 in f32 at 50 TFLOP/s, f16 at 700.
cat >"$out/gemm.json" <<'JSON'
{"benchmarks": [
 {"name": "4096x4096x4096/f32", "run_type": "iteration", "GFLOP/s": 50000.0},
 {"name": "4096x4096x4096/f16", "run_type": "iteration", "GFLOP/s": 700000.0}]}
JSON
cat >"$out/gemm_tf32.json" <<'JSON'
{"benchmarks": [{"name": "4096x4096x4096/f32", "run_type": "iteration", "GFLOP/s": 400000.0}]}
JSON
# PyTorch's rate for the same f16 case (pytorch_gemm_peer.py): 700/560.
cat >"$out/gemm_pytorch.json" <<'JSON'
{"torch": "2.x", "gemm": [{"shape": "4096x4096x4096", "dtype": "f16", "tflops": 560.0}]}
JSON
/usr/bin/python3 "$summarize" "$out" >"$TEST_TMPDIR/printed.md" || fail "summarize failed"
md="$out/summary.md"
grep -q "^# GPU proof kit on NVIDIA H100 80GB HBM3" "$md" || fail "no GPU name: $(cat "$md")"
# The example plugin runs 14 cases (f32 fill, copy and add; a same-dtype
# cast is no case since it launches nothing); the rest of the suite
# (however many cases it has today) is not implemented there.
cases=$("$conformance" --plugin="$example" --gtest_list_tests | grep -c '^  ')
grep -q "^Conformance: 14 ok, 0 failed, $((cases - 14)) not implemented" "$md" ||
  fail "conformance ($cases cases): $(cat "$md")"
# 50 of the H100 SXM's 66.9 f32 TFLOP/s is 75%; 700 of 989.4 (f16) 71%.
grep -q "| 4096x4096x4096 | f32 | 50.0 | 75% | - | - |" "$md" || fail "f32 row: $(cat "$md")"
grep -q "| 4096x4096x4096 | f16 | 700.0 | 71% | 560.0 | 1.25x |" "$md" || fail "f16 row: $(cat "$md")"
grep -q "| 4096x4096x4096 | tf32 | 400.0 | 81% | - | - |" "$md" || fail "tf32 row: $(cat "$md")"
grep -q "^- autocast + GradScaler f16: .* ms/step, final loss" "$md" || fail "recipe rows: $(cat "$md")"
grep -q "^| NVIDIA H100 80GB HBM3 | conformance 14 ok / 0 failed | GEMM 4096³ f32 50 TFLOP/s, TF32 400 TFLOP/s, f16 700 TFLOP/s, bf16 - |" "$md" ||
  fail "proof-table row: $(cat "$md")"
/usr/bin/python3 -c "import json,sys; s=json.load(open(sys.argv[1])); assert s['conformance']['ok']==14 and len(s['gemm'])==3, s" "$out/summary.json" ||
  fail "summary.json"
echo "gpu kit summary: rows, peaks and the proof-table line as expected"
