#!/usr/bin/env bash
# Regenerates docs/plugins/: the plugin matrix (op x dtype x status x worst
# error against the reference x measured speed, JSON and Markdown) of each
# bundled host-memory plugin, from the conformance suite with --matrix.
#
#   scripts/plugin_matrix.sh            # reference, cpu, example
#   scripts/plugin_matrix.sh cpu        # one of them
#
# Speeds are this machine's (its CPU is named in docs/plugins/README.md's
# table by the run); a third-party plugin gets its own matrix with
#   conformance --plugin=/path/libmixrt_x.so --matrix=DIR
set -euo pipefail
cd "$(dirname "$0")/.."
plugins=("$@")
[ ${#plugins[@]} -gt 0 ] || plugins=(reference cpu example)
declare -A target=(
  [reference]=//plugins/reference:libmixrt_reference.so
  [cpu]=//backends/cpu:libmixrt_cpu.so
  [example]=//plugins/example:libmixrt_example.so
)
for p in "${plugins[@]}"; do
  [ -n "${target[$p]:-}" ] || { echo "plugin_matrix: unknown plugin '$p' (reference, cpu, example)" >&2; exit 2; }
done
targets=()
for p in "${plugins[@]}"; do targets+=("${target[$p]}"); done
bazel build //plugins/conformance "${targets[@]}"
mkdir -p docs/plugins
declare -A rows
log=$(mktemp)
trap 'rm -f "$log"' EXIT
cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)
isa=$(grep -o -w 'amx_tile\|avx512_fp16\|avx512_bf16\|avx512f\|avx2' /proc/cpuinfo | sort -u | tr '\n' ' ')
for p in "${plugins[@]}"; do
  so="bazel-bin/$(echo "${target[$p]}" | sed 's|^//||; s|:|/|')"
  # Failures are in the matrix; the run's exit status is not this script's.
  bazel-bin/plugins/conformance/conformance --plugin="$so" --matrix=docs/plugins \
    --gtest_brief=1 >"$log" 2>&1 || true
  grep -q "plugin matrix written" "$log" ||
    { tail -20 "$log"; echo "plugin_matrix: no matrix for $p" >&2; exit 1; }
  total=$(grep '^total:' "$log")
  echo "$p: $total -> docs/plugins/$p.md"
  rows[$p]="| [$p]($p.md) ([JSON]($p.json)) | ${total#total: } | $cpu (${isa% }) | $(date -u +%Y-%m-%d) |"
done
# The plugins not run this time keep their rows.
for p in reference cpu example; do
  if [ -z "${rows[$p]:-}" ] && [ -f docs/plugins/README.md ]; then
    rows[$p]=$(grep "^| \[$p\]" docs/plugins/README.md || true)
  fi
done
{
  echo "# Plugin matrices"
  echo
  echo "What each bundled plugin runs, per op and dtype, how far its results are"
  echo "from the reference plugin's (as a fraction of the conformance"
  echo "tolerance), and how fast it runs the suite's small cases. Regenerated"
  echo "by \`scripts/plugin_matrix.sh\` (a plugin of your own:"
  echo "\`conformance --plugin=PATH --matrix=DIR\`). Speeds are the machine's below."
  echo
  echo "| plugin | conformance cases | timed on | date |"
  echo "|---|---|---|---|"
  for p in reference cpu example; do
    [ -z "${rows[$p]:-}" ] || echo "${rows[$p]}"
  done
} >docs/plugins/README.md.new
mv docs/plugins/README.md.new docs/plugins/README.md
