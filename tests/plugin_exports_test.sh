#!/usr/bin/env bash
# Every plugin built here exports only the ABI's entry points: anything more
# (std:: or absl symbols) could clash between plugins loaded in one process.
set -euo pipefail
status=0
for plugin in "$@"; do
  extra=$(nm -D --defined-only "$plugin" | awk '{print $3}' |
          grep -vE '^(mixrt_plugin_entry|mixrt_plugin_score)$' || true)
  if ! nm -D --defined-only "$plugin" | grep -q ' mixrt_plugin_entry$'; then
    echo "FAIL: $plugin does not export mixrt_plugin_entry"; status=1
  fi
  if [ -n "$extra" ]; then
    echo "FAIL: $plugin exports more than the ABI:"; echo "$extra" | head; status=1
  else
    echo "ok: $plugin"
  fi
done
exit $status
