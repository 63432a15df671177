#!/usr/bin/env bash
# The host kit: what a lent device machine's CPU side can measure that a
# 2-core development machine cannot, in one folder that needs nothing of
# ours there (no Bazel, no Debian packages, no registries):
#   - data parallelism across two emulated hosts with cores of their own
#     (benchmarks/ddp_two_hosts.sh; network namespaces, Open MPI over TCP),
#   - the CPU bench against PyTorch on that machine's CPU (the lent
#     machines are Intel Xeons with AMX and avx512_fp16: issue 44's AMX
#     rows), with the CPU plugin on Debian's oneDNN 2.6.3 and on oneDNN 3.x.
#
#   scripts/host_kit.sh [DIR]     # default host_kit/ (ignored by git), and
#                                 # DIR's parent/host_kit_pack/host_kit.tar.gz
#   # on the lent machine (the device tool: carry ["host_kit_pack"]):
#   tar xzf host_kit_pack/host_kit.tar.gz -C /tmp && /tmp/host_kit/run.sh OUT
#
# DIR holds bin/ (ddp_benchmark, the MPI collectives plugin, the CPU plugin,
# the reference plugin (the bench's oracle), mixrt with
# mixrt bench and its PyTorch peer, Open MPI's mpirun and orted,
# iproute2's ip and tc), onednn3/ (the CPU plugin built against oneDNN 3.x,
# when scripts/setup_onednn3.sh has installed it), ompi/ (Open MPI's
# components, help texts and settings, relocated by OPAL_* variables),
# lib/ (every library those load that glibc and the driver do not give,
# libdnnl.so.3 included), and the scripts they run from.
#
# Building the 3.x plugin switches Bazel's configuration; the default
# plugin is built again last, so bazel-bin is left as it was (each switch
# recompiles the plugin: minutes on 2 cores).
set -euo pipefail
cd "$(dirname "$0")/.."
kit=${1:-host_kit}
case "$kit" in /*) ;; *) kit="$PWD/$kit" ;; esac
source scripts/kit_libs.sh

targets=(//benchmarks:ddp_benchmark //backends/mpi:libmixrtcomm_mpi.so
  //backends/cpu:libmixrt_cpu.so //plugins/reference:libmixrt_reference.so
  //tools:mixrt //tools/bench:mixrt_bench)
bazel build "${targets[@]}"
rm -rf "$kit"
mkdir -p "$kit/bin" "$kit/lib" "$kit/ompi/etc" "$kit/onednn3"
for f in benchmarks/ddp_benchmark backends/mpi/libmixrtcomm_mpi.so \
  backends/cpu/libmixrt_cpu.so plugins/reference/libmixrt_reference.so \
  tools/mixrt tools/bench/mixrt_bench; do
  install -m 755 "bazel-bin/$f" "$kit/bin/"
done
install -m 644 tools/bench/pytorch_peer.py "$kit/bin/"

if [ -f third_party/onednn3/lib/libdnnl.so.3 ]; then
  bazel build --config=onednn3 //backends/cpu:libmixrt_cpu.so
  install -m 755 bazel-bin/backends/cpu/libmixrt_cpu.so "$kit/onednn3/"
  install -m 644 third_party/onednn3/lib/libdnnl.so.3 "$kit/lib/"
  bazel build //backends/cpu:libmixrt_cpu.so //backends/cpu:libmixrt_cpu_onednn3.so
  # The companion beside the plugin (found there; libdnnl.so.3 from lib/).
  install -m 755 bazel-bin/backends/cpu/libmixrt_cpu_onednn3.so "$kit/bin/"
else
  echo "host_kit: no oneDNN 3.x (scripts/setup_onednn3.sh): onednn3/ left empty"
fi

# Open MPI: its launcher and daemon, and every component (the rsh launcher
# and TCP transport among them), found through OPAL_* at run time.
ompi_components=$(ompi_info --path pkglibdir --parsable | cut -d: -f3)
install -m 755 "$(readlink -f "$(command -v orterun)")" "$kit/bin/mpirun"
install -m 755 "$(readlink -f "$(command -v orted)")" "$kit/bin/orted"
cp -R "$ompi_components" "$kit/ompi/components"
cp -R "$(ompi_info --path pkgdatadir --parsable | cut -d: -f3)" "$kit/ompi/help"
cp "$(ompi_info --path sysconfdir --parsable | cut -d: -f3)/openmpi-mca-params.conf" \
  "$kit/ompi/etc/"
# PMIx (Debian's external one) and its few components.
pmix_components=$(dirname "$(readlink -f "$(ldconfig -p | awk '/libpmix.so.2 / {print $NF; exit}')")")/pmix
[ -d "$pmix_components" ] && cp -R "$pmix_components" "$kit/ompi/pmix"
install -m 755 "$(command -v ip)" "$(command -v tc)" "$kit/bin/"

install -m 755 scripts/host_kit/run.sh "$kit/run.sh"
install -m 644 scripts/kit_runtime.sh "$kit/kit_runtime.sh"
mkdir -p "$kit/benchmarks" "$kit/tests/distributed"
install -m 755 benchmarks/ddp_two_hosts.sh "$kit/benchmarks/"
install -m 755 tests/distributed/netns_hosts.sh tests/distributed/netns_agent.sh \
  "$kit/tests/distributed/"

kit_bundle_libs "$kit/lib" "$kit"/bin/* "$kit"/onednn3/*.so "$kit"/ompi/components/*.so \
  "$kit"/ompi/pmix/*.so
kit_check_scrubbed "$kit/lib" "$kit"/bin/* "$kit"/onednn3/*.so "$kit"/ompi/components/*.so
echo "host_kit: $kit: $(du -sm "$kit" | cut -f1) MiB ($(ls "$kit/lib" | wc -l) libraries in lib/)"
kit_pack "$kit"
