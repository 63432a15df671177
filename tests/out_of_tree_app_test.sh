#!/usr/bin/env bash
# The application path end to end (examples/out_of_tree_app): install the
# runtime, check what an application links (libmixrt's SONAME and exports,
# headers that include only installed paths), build the installed app and
# plugin templates with CMake (and the app with pkg-config), then run the
# app on the CPU plugin and on the out-of-tree plugin, eagerly and
# compiled.
set -euo pipefail
install="$PWD/$1"
fail() { echo "FAIL: $*"; exit 1; }
export MIXRT_CACHE_DIR="$TEST_TMPDIR/cache" MIXRT_CPU_SKIP_PROBE=1

prefix="$TEST_TMPDIR/mixrt"
RUNFILES_DIR="${RUNFILES_DIR:-$PWD/..}" "$install" --prefix="$prefix" >"$TEST_TMPDIR/install.log" 2>&1 ||
  fail "install: $(cat "$TEST_TMPDIR/install.log")"

# The library, its links and its name, from the installed version header.
part() { sed -n "s/^#define MIXRT_VERSION_$1 \([0-9]*\)$/\1/p" "$prefix/include/mixrt/core/version.h"; }
version="$(part MAJOR).$(part MINOR).$(part PATCH)"
soname="libmixrt.so.$(part MAJOR).$(part MINOR)"
[ "$version" != ".." ] || fail "no version in the installed core/version.h"
[ "$(readlink "$prefix/lib/libmixrt.so")" = "$soname" ] || fail "lib/libmixrt.so does not link to $soname"
[ "$(readlink "$prefix/lib/$soname")" = "libmixrt.so.$version" ] || fail "lib/$soname does not link to libmixrt.so.$version"
readelf -d "$prefix/lib/libmixrt.so.$version" | grep -q "Library soname: \[$soname\]" ||
  fail "SONAME is not $soname: $(readelf -d "$prefix/lib/libmixrt.so.$version" | grep -i soname)"
# Exports are mixrt's API only: Abseil's and nlohmann::json's templates
# inside stay local, never standing in for an application's own.
foreign=$(nm -D --defined-only -C "$prefix/lib/libmixrt.so.$version" | grep -v "mixrt::" | head -5 || true)
[ -z "$foreign" ] || fail "libmixrt exports more than mixrt's API: $foreign"
for f in include/mixrt/mixrt.h include/mixrt/core/tensor/tensor.h lib/cmake/mixrt/mixrtConfig.cmake \
  lib/cmake/mixrt/mixrtConfigVersion.cmake lib/pkgconfig/mixrt.pc lib/libmixrt_cpu.so lib/libmixrt_reference.so \
  share/doc/mixrt/plugins.md share/doc/mixrt/CHANGELOG.md share/mixrt/templates/app/CMakeLists.txt \
  share/mixrt/templates/plugin/CMakeLists.txt share/mixrt/templates/plugin/README.md; do
  [ -e "$prefix/$f" ] || fail "the prefix lacks $f"
done
if grep -rqE '#include "(core|common|plugins)/' "$prefix/include"; then
  fail "installed headers include the source tree's paths: $(grep -rlE '#include "(core|common|plugins)/' "$prefix/include" | head -3)"
fi

# The templates, copied out of the prefix as a user would, built with CMake.
cp -r "$prefix/share/mixrt/templates/app" "$TEST_TMPDIR/app"
cp -r "$prefix/share/mixrt/templates/plugin" "$TEST_TMPDIR/plugin"
for what in app plugin; do
  cmake -S "$TEST_TMPDIR/$what" -B "$TEST_TMPDIR/$what/build" -DCMAKE_PREFIX_PATH="$prefix" \
    >"$TEST_TMPDIR/$what.log" 2>&1 && cmake --build "$TEST_TMPDIR/$what/build" >>"$TEST_TMPDIR/$what.log" 2>&1 ||
    fail "CMake build of the $what template: $(tail -30 "$TEST_TMPDIR/$what.log")"
done
app="$TEST_TMPDIR/app/build/train_app"
readelf -d "$app" | grep -q "Shared library: \[$soname\]" || fail "the app does not link $soname"
# pkg-config, for builds without CMake.
g++ -o "$TEST_TMPDIR/train_app_pc" "$TEST_TMPDIR/app/train_app.cc" \
  $(PKG_CONFIG_PATH="$prefix/lib/pkgconfig" pkg-config --cflags --libs mixrt) >"$TEST_TMPDIR/pc.log" 2>&1 ||
  fail "pkg-config build: $(cat "$TEST_TMPDIR/pc.log")"

# Run from another directory with a scrubbed environment: the app finds
# libmixrt by its RUNPATH and the plugins beside libmixrt.
run() { (cd "$TEST_TMPDIR" && env -u LD_LIBRARY_PATH "$@"); }
losses() { sed -n 's/^step [0-9]* loss //p' "$1" | tr '\n' ' '; }
run "$app" cpu eager 4 >"$TEST_TMPDIR/cpu_eager.txt" 2>&1 || fail "app on cpu: $(cat "$TEST_TMPDIR/cpu_eager.txt")"
grep -q "^backend cpu \[usable\] $prefix/lib/libmixrt_cpu.so$" "$TEST_TMPDIR/cpu_eager.txt" &&
  grep -q "^backend reference \[usable\] $prefix/lib/libmixrt_reference.so$" "$TEST_TMPDIR/cpu_eager.txt" ||
  fail "the app did not list the plugins beside libmixrt: $(cat "$TEST_TMPDIR/cpu_eager.txt")"
grep -q "^mixrt $version on cpu:0" "$TEST_TMPDIR/cpu_eager.txt" || fail "no runtime version: $(cat "$TEST_TMPDIR/cpu_eager.txt")"
eager=$(losses "$TEST_TMPDIR/cpu_eager.txt")
[ "$(echo "$eager" | wc -w)" = 4 ] || fail "4 steps expected: $(cat "$TEST_TMPDIR/cpu_eager.txt")"
# Compiled training computes what eager computes: the same losses exactly
# (compile_test holds the compiler to bit-for-bit agreement on this MLP).
for mode in default reduce-overhead; do
  run "$app" cpu "$mode" 4 >"$TEST_TMPDIR/cpu_$mode.txt" 2>&1 || fail "app on cpu, $mode: $(cat "$TEST_TMPDIR/cpu_$mode.txt")"
  [ "$(losses "$TEST_TMPDIR/cpu_$mode.txt")" = "$eager" ] ||
    fail "compiled ($mode) losses $(losses "$TEST_TMPDIR/cpu_$mode.txt") differ from eager's $eager"
done
run "$TEST_TMPDIR/train_app_pc" reference eager 4 >"$TEST_TMPDIR/pc_reference.txt" 2>&1 ||
  fail "pkg-config app on reference: $(cat "$TEST_TMPDIR/pc_reference.txt")"

# On the out-of-tree plugin (MIXRT_PLUGIN_PATH): what it lacks falls back
# to the CPU plugin, and the losses are the CPU plugin's within f32
# summation order (its matmul sums K = 64 terms in another order).
for mode in eager default; do
  out="$TEST_TMPDIR/partial_$mode.txt"
  MIXRT_PLUGIN_PATH="$TEST_TMPDIR/plugin/build" run "$app" partial "$mode" 4 >"$out" 2>&1 ||
    fail "app on the out-of-tree plugin ($mode): $(cat "$out")"
  grep -q "^fallback: [1-9][0-9]* launches" "$out" && grep -q "partial: .* ran on cpu:0" "$out" ||
    fail "no fallback listed ($mode): $(cat "$out")"
  if [ "$mode" != eager ]; then
    # Inference runs whole on the plugin, which fuses each Linear's matmul
    # with its bias and the ReLU after it (chain_fusion.cc); the host checks
    # the fused kernels against the launches they replace, and the result
    # is eager's.
    grep -q "fused\[partial chain: matmul + relu" "$out" && grep -q "2 fused kernels for 4 of 5 launches offered" "$out" &&
      grep -q "\[checked against its launches\]" "$out" ||
      fail "the plugin's fusion is not in Explain ($mode): $(cat "$out")"
    eager_inference=$(sed -n 's/^inference eager loss //p' "$out")
    [ -n "$eager_inference" ] && [ "$(sed -n 's/^inference [01] loss //p' "$out" | sort -u)" = "$eager_inference" ] ||
      fail "compiled inference differs from eager ($mode): $(grep '^inference' "$out")"
  fi
  python3 - "$(losses "$out")" "$eager" <<'PY' || fail "losses on the out-of-tree plugin ($mode): $(cat "$out")"
import sys
partial, cpu = ([float(v) for v in s.split()] for s in sys.argv[1:])
assert len(partial) == len(cpu) == 4, (partial, cpu)
for p, c in zip(partial, cpu):
    assert abs(p - c) <= 1e-4 * abs(c), (partial, cpu)
PY
done

# A backend that is not there: an error naming it, exit 1.
if run "$app" no_such_backend >"$TEST_TMPDIR/missing.txt" 2>&1; then fail "an unknown backend was accepted"; fi
grep -q "no_such_backend" "$TEST_TMPDIR/missing.txt" || fail "the error does not name the backend: $(cat "$TEST_TMPDIR/missing.txt")"
echo "out-of-tree app: installed, built (CMake and pkg-config), run eager and compiled on cpu and an out-of-tree plugin"
