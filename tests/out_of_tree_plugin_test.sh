#!/usr/bin/env bash
# The plugin-author path end to end (examples/out_of_tree_plugin): install
# the SDK, build the example plugin with CMake and with pkg-config against
# it, load it through MIXRT_PLUGIN_PATH, grade it with the installed
# conformance suite, and train the AMP recipe on it with fallback.
set -euo pipefail
install_sdk="$PWD/$1"
example_dir="$PWD/$2"
recipe="$PWD/$3"
fail() { echo "FAIL: $*"; exit 1; }
export MIXRT_CACHE_DIR="$TEST_TMPDIR/cache" MIXRT_CPU_SKIP_PROBE=1

prefix="$TEST_TMPDIR/sdk"
RUNFILES_DIR="${RUNFILES_DIR:-$PWD/..}" "$install_sdk" --prefix="$prefix" >"$TEST_TMPDIR/install.log" 2>&1 ||
  fail "install: $(cat "$TEST_TMPDIR/install.log")"
for f in include/mixrt/plugin_api.h include/mixrt/sdk/plugin.h lib/libmixrt_plugin_sdk.a \
  lib/cmake/mixrt_plugin_sdk/mixrt_plugin_sdkConfig.cmake lib/pkgconfig/mixrt_plugin_sdk.pc \
  share/mixrt/plugin_exports.lds bin/mixrt bin/conformance bin/libmixrt_reference.so; do
  [ -e "$prefix/$f" ] || fail "the SDK lacks $f"
done
if grep -rq '#include "plugins/' "$prefix/include"; then
  fail "installed headers still include the source tree's paths"
fi

# Under scripts/sanitizers.sh the SDK archive is instrumented: the plugin
# must be linked with the same sanitizers (a user's build is not).
sanitize=()
if nm "$prefix/lib/libmixrt_plugin_sdk.a" 2>/dev/null | grep "__asan_" >/dev/null; then  # not -q: nm would die of SIGPIPE and pipefail say no
  sanitize=(-fsanitize=address,undefined)
fi

# CMake, as the example's README says.
build="$TEST_TMPDIR/build"
cmake -S "$example_dir" -B "$build" -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_CXX_FLAGS="${sanitize[*]:-}" -DCMAKE_MODULE_LINKER_FLAGS="${sanitize[*]:-}" \
  >"$TEST_TMPDIR/cmake.log" 2>&1 ||
  fail "cmake configure: $(cat "$TEST_TMPDIR/cmake.log")"
cmake --build "$build" >>"$TEST_TMPDIR/cmake.log" 2>&1 || fail "cmake build: $(cat "$TEST_TMPDIR/cmake.log")"
plugin="$build/libmixrt_partial.so"
[ -f "$plugin" ] || fail "no $plugin"
exported=$(nm -D --defined-only "$plugin" | awk '{print $3}' | sort | tr '\n' ' ')
[ "$exported" = "mixrt_plugin_entry " ] || fail "the plugin exports more than its entry: $exported"
# A plugin ships as one .so for many distributions: it may need the C++
# runtime and libc, never the build machine's Abseil (whose SONAMEs differ
# from one distribution to the next), and the SDK archive names none.
needed() { readelf -d "$1" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ' '; }
case "$(needed "$plugin")" in
  *absl*) fail "the plugin needs Abseil at run time: $(needed "$plugin")" ;;
esac
if nm -u "$prefix/lib/libmixrt_plugin_sdk.a" 2>/dev/null | grep "absl" >/dev/null; then
  fail "the SDK archive refers to Abseil: $(nm -u "$prefix/lib/libmixrt_plugin_sdk.a" | grep -m3 absl)"
fi

# pkg-config, for authors without CMake.
PKG_CONFIG_PATH="$prefix/lib/pkgconfig" g++ ${sanitize[@]+"${sanitize[@]}"} -o "$TEST_TMPDIR/libmixrt_partial_pc.so" \
  "$example_dir/partial_plugin.cc" "$example_dir/chain_fusion.cc" $(PKG_CONFIG_PATH="$prefix/lib/pkgconfig" pkg-config --cflags --libs mixrt_plugin_sdk) \
  >"$TEST_TMPDIR/pc.log" 2>&1 || fail "pkg-config build: $(cat "$TEST_TMPDIR/pc.log")"
case "$(needed "$TEST_TMPDIR/libmixrt_partial_pc.so")" in
  *absl*) fail "the pkg-config build needs Abseil: $(needed "$TEST_TMPDIR/libmixrt_partial_pc.so")" ;;
esac

# Loaded through MIXRT_PLUGIN_PATH by the installed CLI.
MIXRT_PLUGIN_PATH="$build" "$prefix/bin/mixrt" info >"$TEST_TMPDIR/info.txt" 2>&1 || true
grep -q "^partial \[usable\] $plugin" "$TEST_TMPDIR/info.txt" || fail "mixrt info: $(cat "$TEST_TMPDIR/info.txt")"
grep -q "f32: 6 of [0-9]*: fill, copy, binary/add, binary/mul, unary/relu, matmul" "$TEST_TMPDIR/info.txt" ||
  fail "mixrt info does not list the plugin's ops: $(cat "$TEST_TMPDIR/info.txt")"

# Graded by the installed conformance suite, which finds the reference
# plugin beside itself: its six ops pass, the rest are not implemented.
"$prefix/bin/conformance" --plugin="$plugin" --gtest_brief=1 >"$TEST_TMPDIR/conformance.txt" 2>&1 ||
  fail "conformance: $(tail -40 "$TEST_TMPDIR/conformance.txt")"
for row in "binary/add  *7 ok " "binary/mul  *7 ok " "matmul/batched  *1 ok " "copy/strided_to_dense  *1 ok " \
  "unary/relu  *3 ok " "unary_backward/relu  *[0-9]* n/i" "total: [0-9]* ok, 0 failed, [0-9]* not implemented"; do
  grep -q "$row" "$TEST_TMPDIR/conformance.txt" || fail "conformance table lacks '$row': $(sed -n '/conformance table/,$p' "$TEST_TMPDIR/conformance.txt")"
done

# The AMP recipe trains on it, everything it lacks on the CPU plugin, to
# the CPU plugin's f32 loss: eagerly, and compiled in every mode (relu's
# gradient, which it lacks, makes the training graph fall back to eager,
# and the losses must be eager's).
recipe_flags=(--width=64 --batch=32 --batches=3)
loss() { sed -n 's/^default precision .*final loss \([0-9.]*\)$/\1/p' "$1"; }
"$recipe" --backend=cpu "${recipe_flags[@]}" >"$TEST_TMPDIR/recipe_cpu.txt" 2>&1 || fail "recipe on cpu"
for compile in "" default reduce-overhead max-autotune max-autotune-no-cudagraphs; do
  out="$TEST_TMPDIR/recipe_${compile:-eager}.txt"
  MIXRT_PLUGIN_PATH="$build" "$recipe" --backend=partial --compile="$compile" "${recipe_flags[@]}" >"$out" 2>&1 ||
    fail "recipe on the partial plugin (compile '${compile}'): $(cat "$out")"
  grep -q "partial: unary_backward/relu f32 ran on cpu:0 (declared unsupported" "$out" ||
    fail "no fallback listed (compile '${compile}'): $(cat "$out")"
  grep -q "^fallback: [0-9]* launches ran on another backend" "$out" || fail "no fallback count"
  python3 - "$(loss "$out")" "$(loss "$TEST_TMPDIR/recipe_cpu.txt")" "$(loss "$TEST_TMPDIR/recipe_eager.txt")" <<'PY' ||
import sys
partial, cpu, eager = (float(v) for v in sys.argv[1:])
# f32 throughout; only the matmuls' summation order differs (K = 64).
assert abs(partial - cpu) <= 1e-4 * abs(cpu), (partial, cpu)
# Compiled runs what eager runs on this plugin: the same loss exactly.
assert partial == eager, (partial, eager)
PY
    fail "losses differ (compile '${compile}'): $(cat "$out")"
done
echo "out-of-tree plugin: installed, built (CMake and pkg-config), loaded, graded and trained"
