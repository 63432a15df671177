#!/usr/bin/env bash
# Installs the mixrt runtime for applications and the plugin SDK for
# authors of out-of-tree plugins:
#
#   bazel run //plugins:install -- --prefix=DIR
#
# DIR/lib/libmixrt.so      the runtime (SONAME libmixrt.so.MAJOR.MINOR),
#                          with the bundled plugins beside it, which it
#                          loads: libmixrt_cpu.so, libmixrt_reference.so,
#                          and mixrt-plugin-host (out-of-process plugins)
# DIR/include/mixrt/       mixrt.h (the runtime's API), the C ABI
#                          (plugin_api.h, op_names.h, ...) and the C++ SDK
#                          under mixrt/sdk/
# DIR/lib/cmake/mixrt/, DIR/lib/pkgconfig/mixrt.pc   find_package(mixrt)
#                          (target mixrt::mixrt), pkg-config mixrt
# DIR/share/mixrt/templates/{app,plugin}/  an application and a plugin to
#                          start from (CMake); DIR/share/doc/mixrt/ the
#                          plugin guide and the ABI's CHANGELOG
# DIR/lib/libmixrt_plugin_sdk.a               the SDK (static, PIC), on
#                          the C++ standard library alone: a plugin built
#                          with it needs no Abseil (its own sdk::Status)
# DIR/lib/cmake/mixrt_plugin_sdk/             find_package(mixrt_plugin_sdk)
# DIR/lib/pkgconfig/mixrt_plugin_sdk.pc       pkg-config --cflags --libs
# DIR/share/mixrt/plugin_exports.lds          the export version script
# DIR/bin/mixrt, DIR/bin/conformance          the CLI (with mixrt bench) and the conformance
#                          suite, with libmixrt_reference.so (the oracle) and
#                          libmixrt_cpu.so (a fallback backend) beside them
#
# A relative DIR is taken from the directory the command was typed in
# (bazel run itself runs elsewhere).
set -euo pipefail

usage() { sed -n '2,30p' "$0" | sed 's/^# \{0,1\}//'; }

prefix=""
for arg in "$@"; do
  case "$arg" in
    --prefix=*) prefix="${arg#--prefix=}" ;;
    -h | --help) usage; exit 0 ;;
    *) echo "install: unknown argument '$arg'; expected --prefix=DIR" >&2; exit 2 ;;
  esac
done
if [ -z "$prefix" ]; then
  echo "install: --prefix=DIR is required (where the SDK goes)" >&2
  exit 2
fi
case "$prefix" in
  /*) ;;
  *) prefix="${BUILD_WORKING_DIRECTORY:-$PWD}/$prefix" ;;
esac

# The files this script ships, from its runfiles.
root="${RUNFILES_DIR:-$0.runfiles}/mixrt"
[ -d "$root" ] || root="$PWD"
[ -f "$root/include/mixrt/plugin_api.h" ] || {
  echo "install: cannot find the SDK files (looked in $root); run it with bazel run //plugins:install" >&2
  exit 1
}

major=$(sed -n 's/^#define MIXRT_PLUGIN_API_MAJOR \([0-9]*\)$/\1/p' "$root/include/mixrt/plugin_api.h")
minor=$(sed -n 's/^#define MIXRT_PLUGIN_API_MINOR \([0-9]*\)$/\1/p' "$root/include/mixrt/plugin_api.h")

# A CMake package version file: compatible with a request of the same
# major (and with `same_minor`, the same minor too) no newer than VERSION.
write_config_version() {
  local file=$1 version=$2 comment=$3 rule=$4
  local major=${version%%.*} rest=${version#*.}
  local minor=${rest%%.*}
  {
    echo "# $comment"
    echo "set(PACKAGE_VERSION \"$version\")"
    echo "if(PACKAGE_FIND_VERSION AND NOT PACKAGE_FIND_VERSION_MAJOR EQUAL $major)"
    echo "  set(PACKAGE_VERSION_COMPATIBLE FALSE)"
    if [ "$rule" = same_minor ]; then
      echo "elseif(PACKAGE_FIND_VERSION_COUNT GREATER 1 AND NOT PACKAGE_FIND_VERSION_MINOR EQUAL $minor)"
      echo "  set(PACKAGE_VERSION_COMPATIBLE FALSE)"
    fi
    cat <<'CMAKE'
elseif(PACKAGE_FIND_VERSION VERSION_GREATER PACKAGE_VERSION)
  set(PACKAGE_VERSION_COMPATIBLE FALSE)
else()
  set(PACKAGE_VERSION_COMPATIBLE TRUE)
  if(PACKAGE_FIND_VERSION STREQUAL PACKAGE_VERSION)
    set(PACKAGE_VERSION_EXACT TRUE)
  endif()
endif()
CMAKE
  } >"$file"
}

# A pkg-config file's first lines: paths relative to where it is installed.
write_pc_paths() {
  cat >"$1" <<'PC'
prefix=${pcfiledir}/../..
includedir=${prefix}/include
libdir=${prefix}/lib
PC
}

version_part() { sed -n "s/^#define MIXRT_VERSION_$1 \\([0-9]*\\)$/\\1/p" "$root/core/version.h"; }
version="$(version_part MAJOR).$(version_part MINOR).$(version_part PATCH)"
soname="libmixrt.so.$(version_part MAJOR).$(version_part MINOR)"

# The runtime: libmixrt.so and the headers mixrt/mixrt.h includes. In the
# tree they include each other as core/..., common/...; installed they live
# under mixrt/ (mixrt/core/..., mixrt/common/...).
install_runtime() {
  install -d "$prefix/lib/cmake/mixrt" "$prefix/share/doc/mixrt" \
    "$prefix/share/mixrt/templates/app" "$prefix/share/mixrt/templates/plugin"
  install -m 755 "$root/core/libmixrt.so" "$prefix/lib/libmixrt.so.$version"
  ln -sf "libmixrt.so.$version" "$prefix/lib/$soname"
  ln -sf "$soname" "$prefix/lib/libmixrt.so"
  install -m 755 "$root/plugins/reference/libmixrt_reference.so" "$prefix/lib/"
  install -m 755 "$root/backends/cpu/libmixrt_cpu.so" "$prefix/lib/"
  # What out-of-process plugins run in (MIXRT_PLUGIN_ISOLATION), found
  # beside the runtime.
  install -m 755 "$root/tools/plugin_host/mixrt-plugin-host" "$prefix/lib/"
  local header dest
  while read -r header; do
    case "$header" in
      core/_virtual_includes/core/mixrt/mixrt.h) dest=mixrt.h ;;
      include/mixrt/*) dest=${header#include/mixrt/} ;;
      core/* | common/*) dest=$header ;;
      *) echo "install: a header of the runtime outside core/, common/, include/: $header" >&2; return 1 ;;
    esac
    install -d "$(dirname "$prefix/include/mixrt/$dest")"
    sed -e 's|#include "core/|#include "mixrt/core/|' -e 's|#include "common/|#include "mixrt/common/|' \
      "$root/$header" >"$prefix/include/mixrt/$dest"
    chmod 644 "$prefix/include/mixrt/$dest"
  done <"$root/plugins/runtime_headers.txt"
  install -m 644 "$root/plugins/sdk_package/mixrtConfig.cmake" "$prefix/lib/cmake/mixrt/"
  write_config_version "$prefix/lib/cmake/mixrt/mixrtConfigVersion.cmake" "$version" \
    "mixrt $version: before 1.0 a minor release may change the C++ API, so only the same major.minor is compatible (as the SONAME, $soname, says)." \
    same_minor
  write_pc_paths "$prefix/lib/pkgconfig/mixrt.pc"
  cat >>"$prefix/lib/pkgconfig/mixrt.pc" <<PC
Name: mixrt
Description: mixed-precision ML runtime with run-time selected backends
Version: $version
Requires: absl_status absl_statusor absl_strings absl_str_format absl_synchronization absl_flat_hash_map absl_node_hash_map absl_time absl_span
Cflags: -I\${includedir} -std=c++17
Libs: -L\${libdir} -lmixrt -Wl,-rpath,\${libdir}
PC
  install -m 644 "$root/plugins/README.md" "$prefix/share/doc/mixrt/plugins.md"
  install -m 644 "$root/plugins/CHANGELOG.md" "$prefix/share/doc/mixrt/CHANGELOG.md"
  install -m 644 "$root"/examples/out_of_tree_app/* "$prefix/share/mixrt/templates/app/"
  install -m 644 "$root"/examples/out_of_tree_plugin/* "$prefix/share/mixrt/templates/plugin/"
}

install -d "$prefix/include/mixrt/sdk" "$prefix/lib/cmake/mixrt_plugin_sdk" \
  "$prefix/lib/pkgconfig" "$prefix/share/mixrt" "$prefix/bin"
for h in "$root"/include/mixrt/*.h; do
  install -m 644 "$h" "$prefix/include/mixrt/"
done
# In the tree the SDK headers include each other as plugins/sdk/...;
# installed they live under mixrt/sdk/.
for h in "$root"/plugins/sdk/*.h; do
  sed 's|#include "plugins/sdk/|#include "mixrt/sdk/|' "$h" >"$prefix/include/mixrt/sdk/$(basename "$h")"
  chmod 644 "$prefix/include/mixrt/sdk/$(basename "$h")"
done
install -m 644 "$root/plugins/libmixrt_plugin_sdk.a" "$prefix/lib/"
install -m 644 "$root/plugins/sdk/plugin_exports.lds" "$prefix/share/mixrt/"
install -m 644 "$root/plugins/sdk_package/mixrt_plugin_sdkConfig.cmake" \
  "$prefix/lib/cmake/mixrt_plugin_sdk/"
write_config_version "$prefix/lib/cmake/mixrt_plugin_sdk/mixrt_plugin_sdkConfigVersion.cmake" \
  "$major.$minor" "ABI $major.$minor: a plugin built for 1.x loads on every 1.y host." any_minor
write_pc_paths "$prefix/lib/pkgconfig/mixrt_plugin_sdk.pc"
cat >>"$prefix/lib/pkgconfig/mixrt_plugin_sdk.pc" <<PC
Name: mixrt_plugin_sdk
Description: SDK for mixrt backend plugins (plugin ABI $major.$minor)
Version: $major.$minor
Cflags: -I\${includedir} -std=c++17 -fPIC -fvisibility=hidden
Libs: -shared \${libdir}/libmixrt_plugin_sdk.a -Wl,--version-script=\${prefix}/share/mixrt/plugin_exports.lds -Wl,--no-undefined
PC

install_runtime

install -m 755 "$root/tools/mixrt" "$prefix/bin/mixrt"
install -m 755 "$root/tools/bench/mixrt_bench" "$prefix/bin/mixrt_bench"
install -m 644 "$root/tools/bench/pytorch_peer.py" "$root/tools/bench/plot_bench.py" "$prefix/bin/"
install -m 755 "$root/plugins/conformance/conformance" "$prefix/bin/conformance"
# The tools find plugins beside themselves, as libmixrt does in lib/.
ln -sf ../lib/libmixrt_reference.so "$prefix/bin/libmixrt_reference.so"
ln -sf ../lib/libmixrt_cpu.so "$prefix/bin/libmixrt_cpu.so"
ln -sf ../lib/mixrt-plugin-host "$prefix/bin/mixrt-plugin-host"

echo "install: mixrt $version (plugin ABI $major.$minor) installed in $prefix"
echo "  application: find_package(mixrt) / pkg-config mixrt; template in $prefix/share/mixrt/templates/app"
echo "  CMake:      find_package(mixrt_plugin_sdk) with -DCMAKE_PREFIX_PATH=$prefix"
echo "  pkg-config: PKG_CONFIG_PATH=$prefix/lib/pkgconfig pkg-config --cflags --libs mixrt_plugin_sdk"
echo "  check:      $prefix/bin/conformance --plugin=/path/libmixrt_yours.so"
