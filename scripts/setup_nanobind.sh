#!/usr/bin/env bash
# Fetches nanobind (the Python binding library, sources only) from PyPI
# into third_party/nanobind/ (ignored by git), for //python's extension
# module. Called by scripts/setup.sh; the build itself never downloads.
#
# Why nanobind from PyPI and not pybind11 from Debian: nanobind's wheel is
# its sources (one nb_combined.cpp, headers, robin_map), which Bazel builds
# like any library, and its calls cost a fraction of pybind11's (the
# per-op overhead is what a torch-shaped API pays on every small op).
set -euo pipefail
cd "$(dirname "$0")/.."
VERSION=2.9.2
dest=third_party/nanobind
if [ -f "$dest/VERSION" ] && [ "$(cat "$dest/VERSION")" = "$VERSION" ] &&
   [ -f "$dest/nanobind/src/nb_combined.cpp" ]; then
  echo "setup_nanobind: nanobind $VERSION already in $dest"
  exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# Any Python with pip downloads it (the wheel is pure sources); a time
# limit so a hung index never hangs the setup.
timeout 300 python3 -m pip download --no-deps -q -d "$tmp" "nanobind==$VERSION"
python3 -m zipfile -e "$tmp"/nanobind-"$VERSION"-*.whl "$tmp/x"
rm -rf "$dest/nanobind"
mkdir -p "$dest"
cp -r "$tmp/x/nanobind" "$dest/nanobind"
echo "$VERSION" > "$dest/VERSION"
echo "setup_nanobind: nanobind $VERSION in $dest"
