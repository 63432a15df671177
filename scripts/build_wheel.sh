#!/usr/bin/env bash
# Builds dist/mixrt-<version>-<python tag>-<abi tag>-<platform>.whl from the
# Bazel outputs: the package directory python/assemble_package.sh lays out
# (Python sources, the extension module, the CPU and reference plugins and
# the command line), plus the wheel's metadata and RECORD.
#
# The wheel is for this interpreter's ABI (cp311 on Debian 12) and for
# linux_x86_64, not manylinux: the module links the distribution's shared
# Abseil and the CPU plugin its oneDNN (Debian packages libabsl20220623
# and libdnnl2.6). Importing it where they are missing fails with a message
# that names them (mixrt/__init__.py).
#   scripts/build_wheel.sh [PYTHON]   (default: @python's, /usr/bin/python3)
set -euo pipefail
cd "$(dirname "$0")/.."
python=${1:-${MIXRT_PYTHON:-/usr/bin/python3}}
scripts/setup.sh >/dev/null
bazel build //python:package_binaries
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
bash python/assemble_package.sh "$python" . bazel-bin "$stage"
# Type stubs for editors: nanobind's stub generator on the module as built
# (signatures and docstrings of every bound function), and PEP 561's marker.
PYTHONPATH="$stage:third_party/nanobind" timeout 300 "$python" -m nanobind.stubgen \
  -q -m mixrt._mixrt -o "$stage/mixrt/_mixrt.pyi"
touch "$stage/mixrt/py.typed"
version=$("$python" -c "import ast,sys; t=ast.parse(open('python/mixrt/__init__.py').read()); print(next(n.value.value for n in t.body if isinstance(n, ast.Assign) and getattr(n.targets[0], 'id', '') == '__version__'))")
mkdir -p dist
"$python" - "$stage" "$version" dist <<'PY'
import base64, hashlib, os, sys, sysconfig, zipfile

stage, version, out = sys.argv[1:4]
tag = f"cp{sys.version_info.major}{sys.version_info.minor}"
plat = sysconfig.get_platform().replace("-", "_").replace(".", "_")
name = f"mixrt-{version}-{tag}-{tag}-{plat}.whl"
info = f"mixrt-{version}.dist-info"
meta = {
    f"{info}/METADATA": (
        "Metadata-Version: 2.1\n"
        f"Name: mixrt\nVersion: {version}\n"
        "Summary: Mixed-precision ML runtime with swappable hardware "
        "backends, shaped as PyTorch\n"
        "Requires-Python: ==%d.%d.*\n" % sys.version_info[:2]
        + "Provides-Extra: numpy\nRequires-Dist: numpy; extra == 'numpy'\n"),
    f"{info}/WHEEL": (
        "Wheel-Version: 1.0\nGenerator: mixrt build_wheel.sh\n"
        f"Root-Is-Purelib: false\nTag: {tag}-{tag}-{plat}\n"),
    f"{info}/top_level.txt": "mixrt\n",
}


def digest(data):
    h = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
    return "sha256=" + h.decode()


records = []
tmp = os.path.join(out, name + ".tmp")
with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as whl:
    for root, dirs, files in os.walk(os.path.join(stage, "mixrt")):
        dirs.sort()
        for f in sorted(files):
            path = os.path.join(root, f)
            arc = os.path.relpath(path, stage)
            data = open(path, "rb").read()
            zi = zipfile.ZipInfo(arc, date_time=(2026, 1, 1, 0, 0, 0))
            zi.external_attr = (os.stat(path).st_mode & 0o777) << 16
            zi.compress_type = zipfile.ZIP_DEFLATED
            whl.writestr(zi, data)
            records.append(f"{arc},{digest(data)},{len(data)}")
    for arc, text in meta.items():
        data = text.encode()
        whl.writestr(arc, data)
        records.append(f"{arc},{digest(data)},{len(data)}")
    records.append(f"{info}/RECORD,,")
    whl.writestr(f"{info}/RECORD", "\n".join(records) + "\n")
os.replace(tmp, os.path.join(out, name))
print(os.path.join(out, name))
PY
