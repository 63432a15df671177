#!/usr/bin/env bash
# Optional: fetches oneDNN 3.x from PyPI for `bazel ... --config=onednn3`
# (the CPU plugin built against it; the default build uses Debian's 2.6.3).
# Installs into third_party/onednn3/{include,lib} (ignored by git).
#
# Why the gomp wheels of 2023.2 (oneDNN 3.2): the newest `onednn` /
# `onednn-devel` wheels are SYCL builds (DNNL_CPU_RUNTIME SYCL) that need
# Intel's SYCL, SVML and compiler runtimes (libsycl.so.9, libsvml.so,
# libimf.so, libintlc.so.5) and TBB; the `-cpu-gomp` variant uses GNU OpenMP,
# which this project already links.
set -euo pipefail
cd "$(dirname "$0")/.."
VERSION=2023.2.0
dest=third_party/onednn3
if [ -f "$dest/lib/libdnnl.so.3" ] && [ -f "$dest/include/oneapi/dnnl/dnnl.hpp" ]; then
  echo "setup_onednn3: already installed in $dest"
  exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 -m pip download --no-deps -q -d "$tmp" \
  "onednn-cpu-gomp==$VERSION" "onednn-devel-cpu-gomp==$VERSION"
mkdir -p "$tmp/x" "$dest"
for wheel in "$tmp"/*.whl; do
  python3 -m zipfile -e "$wheel" "$tmp/x"
done
rm -rf "$dest/include" "$dest/lib"
cp -r "$tmp/x/onednn_devel_cpu_gomp-$VERSION.data/data/include" "$dest/include"
cp -r "$tmp/x/onednn_cpu_gomp-$VERSION.data/data/lib" "$dest/lib"
echo "setup_onednn3: oneDNN $(grep -h 'define DNNL_VERSION_M' "$dest"/include/oneapi/dnnl/dnnl_version.h | awk '{print $3}' | paste -sd.) in $dest"
