# Sourced by the scripts that build in an output base of their own
# (scripts/sanitizers.sh, scripts/fuzz.sh): `own_output_base NAME` prints
# ~/.cache/mixrt-NAME-bazel, emptied first when another checkout used it.
#
# Why: these output bases sit at fixed paths so that one checkout's reruns
# keep their cache, but Bazel keeps a test's runfiles (symlinks to the
# source files) across checkouts when nothing else changed. A CI clone in a
# new folder then ran a shell test whose scripts were links into a checkout
# that no longer existed ("tests/distributed/netns_hosts.sh: No such file").
own_output_base() {
  local base="${HOME}/.cache/mixrt-$1-bazel"
  local owner="${base}.checkout"
  if [ -d "$base" ] && [ "$(cat "$owner" 2>/dev/null)" != "$PWD" ]; then
    echo "output base $base was built for $(cat "$owner" 2>/dev/null || echo 'another checkout'); starting it anew for $PWD" >&2
    bazel --output_base="$base" shutdown >/dev/null 2>&1 || true
    chmod -R u+w "$base" 2>/dev/null || true
    rm -rf "$base"
  fi
  mkdir -p "$(dirname "$base")"
  printf '%s\n' "$PWD" > "$owner"
  printf '%s\n' "$base"
}
