#!/usr/bin/env bash
# Builds the compatibility window's prebuilt plugins once, as a vendor
# builds the .so it ships, from the frozen sources in
# tests/fixtures/abi_window/ (plain C, the frozen header of each ABI
# version, the system's C compiler; no mixrt code):
#
#   scripts/build_abi_window_fixtures.sh 1_2    # when ABI 1.2 is released
#
# writes tests/fixtures/abi_window/prebuilt/libmixrt_window_<v>_prebuilt.so.
# Run it once per released version, commit the binary, and never rebuild an
# existing one: the test is that hosts keep loading what was shipped.
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 1 ] || { echo "usage: $0 VERSION... (e.g. 1_0 1_1)" >&2; exit 2; }
dir=tests/fixtures/abi_window
mkdir -p "$dir/prebuilt"
for v in "$@"; do
  [ -f "$dir/v$v/mixrt/plugin_api.h" ] || { echo "no frozen header $dir/v$v/mixrt/plugin_api.h" >&2; exit 1; }
  out="$dir/prebuilt/libmixrt_window_${v}_prebuilt.so"
  if [ -e "$out" ]; then
    echo "$out exists: a shipped binary is never rebuilt" >&2
    exit 1
  fi
  cc -std=c11 -O2 -fPIC -shared -fvisibility=hidden -Wl,--no-undefined \
    "-DWINDOW_NAME=\"window_${v}_prebuilt\"" -I "$dir/v$v" \
    -o "$out" "$dir/window_plugin.c"
  strip --strip-unneeded "$out"
  echo "built $out"
done
