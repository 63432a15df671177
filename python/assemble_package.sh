#!/usr/bin/env bash
# Lays out the installable package directory DEST/mixrt from the Bazel
# outputs: the Python sources, the extension module named for this
# interpreter (mixrt/_mixrt<EXT_SUFFIX>), the plugins and the command
# line beside it. Used by the pytest target and by scripts/build_wheel.sh.
#   assemble_package.sh PYTHON SOURCE_ROOT BINARY_ROOT DEST
# SOURCE_ROOT holds python/mixrt; BINARY_ROOT holds python/_mixrt.so,
# backends/cpu/..., tools/mixrt (bazel-bin, or a test's runfiles).
set -euo pipefail
python=$1 src=$2 bin=$3 dest=$4
suffix=$("$python" -c "import sysconfig; print(sysconfig.get_config_var('EXT_SUFFIX'))")
rm -rf "$dest/mixrt"
mkdir -p "$dest"
# Only this user may write where code is loaded from (the registry refuses
# plugins others could replace).
chmod 755 "$dest"
cp -r "$src/python/mixrt" "$dest/mixrt"
find "$dest/mixrt" -name __pycache__ -prune -exec rm -rf {} +
install -m 755 "$bin/python/_mixrt.so" "$dest/mixrt/_mixrt$suffix"
install -m 755 "$bin/backends/cpu/libmixrt_cpu.so" "$dest/mixrt/"
install -m 755 "$bin/plugins/reference/libmixrt_reference.so" "$dest/mixrt/"
install -m 755 "$bin/backends/mpi/libmixrtcomm_mpi.so" "$dest/mixrt/"
install -m 755 "$bin/tools/mixrt" "$dest/mixrt/mixrt-cli"
install -m 755 "$bin/tools/bench/mixrt_bench" "$dest/mixrt/mixrt_bench"
# Out-of-process plugins (MIXRT_PLUGIN_ISOLATION) run in it: found beside
# the module, as the core looks beside the object that holds it.
install -m 755 "$bin/tools/plugin_host/mixrt-plugin-host" "$dest/mixrt/"
chmod -R go-w "$dest/mixrt"
