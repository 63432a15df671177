#!/usr/bin/env bash
# clang-format (the repository's .clang-format, Google style at 80 columns)
# over every C, C++, CUDA and HIP file git tracks or would track (new files
# not yet added are checked too).
#   scripts/format.sh          formats them in place
#   scripts/format.sh --check  changes nothing; lists the files that differ
#                              and exits 1 if any does (CI runs this)
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-}
if [ -n "$mode" ] && [ "$mode" != "--check" ]; then
  echo "usage: scripts/format.sh [--check]" >&2
  exit 2
fi
mapfile -t files < <(git ls-files --cached --others --exclude-standard -- '*.cc' '*.h' '*.cu' '*.cuh' '*.hip' '*.cpp' '*.c')
# A tracked file deleted in the working tree is not there to format.
existing=()
for f in "${files[@]}"; do [ -f "$f" ] && existing+=("$f"); done
files=("${existing[@]}")
if [ "$mode" != "--check" ]; then
  printf '%s\0' "${files[@]}" | xargs -0 -P 2 -n 32 clang-format -i --style=file
  exit 0
fi
unformatted=()
for f in "${files[@]}"; do
  if ! clang-format --style=file --dry-run -Werror "$f" > /dev/null 2>&1; then
    unformatted+=("$f")
  fi
done
if [ "${#unformatted[@]}" -gt 0 ]; then
  echo "not clang-formatted (run scripts/format.sh):"
  printf '  %s\n' "${unformatted[@]}"
  exit 1
fi
echo "clang-format: all ${#files[@]} files formatted"
