#!/usr/bin/env bash
# The pytest suite on the package assembled from this test's runfiles
# (the same layout the wheel installs). $1: the interpreter.
set -euo pipefail
python=$1
root=${TEST_SRCDIR:-$PWD/..}/${TEST_WORKSPACE:-mixrt}
pkg=$TEST_TMPDIR/site
bash "$root/python/assemble_package.sh" "$python" "$root" "$root" "$pkg"
cd "$root/python/tests"
export PYTHONPATH=$pkg
export PYTHONDONTWRITEBYTECODE=1
shift
exec "$python" -m pytest -q -p no:cacheprovider "$@" .
