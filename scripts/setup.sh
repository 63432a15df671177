#!/usr/bin/env bash
# Installs every Debian package mixrt's build and tests need. Idempotent:
# packages already present are not fetched again, and `apt-get update` runs
# at most once (only when something is missing).
set -euo pipefail

PACKAGES=(
  bazel-bootstrap      # Bazel 4.2.3 (with a JDK); the build runs offline
  g++ clang            # C++17 compilers (clang for fuzzing and sanitizers)
  libclang-rt-dev      # libFuzzer and the sanitizer runtimes for clang
  clang-format
  libabsl-dev          # Abseil: status, strings, flags, containers
  libgtest-dev libgmock-dev
  libbenchmark-dev     # Google Benchmark
  libdnnl-dev          # oneDNN 2.6.3, the CPU backend
  nlohmann-json3-dev   # JSON for `mixrt info --json` and checkpoints
  zlib1g-dev           # CRC-32 of checkpoints, gzip of the digits data set
  python3-sklearn      # ships the handwritten digits data set (examples/digits)
  fortunes             # the text examples/gpt trains on (/usr/share/games/fortunes)
  python3-matplotlib   # examples/gpt's loss-curve plot
  python3-pip          # fetches oneDNN 3.x from PyPI (scripts/setup_onednn3.sh)
  cmake pkgconf        # build the out-of-tree plugin and app against the install
  python3-jsonschema   # validates mixrt bench's JSON against its schema
  python3-scipy        # reference Mann-Whitney U for mixrt bench's tests
  hipcc libamdhip64-dev  # HIP, the ROCm backend (compiles without a GPU)
  libopenmpi-dev openmpi-bin  # Open MPI 4.1, the CPU collectives (core/distributed)
  iproute2             # ip and tc: the two hosts of tests/distributed/netns_hosts.sh
  python3-dev python3-numpy python3-pytest python3-venv  # the Python package (python/)
)

missing=()
for pkg in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$pkg")
  fi
done

if ((${#missing[@]} > 0)); then
  echo "setup: installing ${missing[*]}"
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -q
  $SUDO apt-get install -y -q "${missing[@]}"
else
  echo "setup: all packages present"
fi

# The CUDA toolkit (nvcc, cudart, cuBLASLt) is not a Debian package here: it
# comes with the machine image ($MIXRT_CUDA_ROOT, else /usr/local/cuda).
# Without it everything else still builds: the CUDA plugin becomes a stub
# that reports why (third_party/cuda_configure.bzl), and its tests are
# skipped. Say so now rather than let it pass unnoticed.
cuda_root=${MIXRT_CUDA_ROOT:-/usr/local/cuda}
if [ ! -x "$cuda_root/bin/nvcc" ] || [ ! -e "$cuda_root/lib64/libcublasLt.so" ]; then
  echo "setup: note: no CUDA toolkit at $cuda_root (bin/nvcc, lib64/libcublasLt.so):" \
       "the CUDA plugin will be built as a stub that says so; set MIXRT_CUDA_ROOT" \
       "to a toolkit's root to build the real one" >&2
fi

# nanobind's sources from PyPI, for the Python package's extension module
# (the one dependency that is not a Debian package; see the script).
# Without them everything else builds and passes; //python is skipped
# (third_party/python_configure.bzl's nanobind_configure).
# oneDNN 3.x from PyPI, for the CPU plugin's companion library
# (libmixrt_cpu_onednn3.so: products where 3.x is faster, chosen per shape
# on AMX and avx512_fp16 CPUs). Without it the plugin runs on Debian's
# oneDNN alone.
if ! "$(dirname "$0")/setup_onednn3.sh"; then
  echo "setup: note: oneDNN 3.x could not be fetched from PyPI:" \
       "the CPU plugin runs on Debian's oneDNN alone" >&2
fi

if ! "$(dirname "$0")/setup_nanobind.sh"; then
  echo "setup: note: nanobind's sources could not be fetched from PyPI:" \
       "the Python package (//python) will be skipped" >&2
fi
