#!/usr/bin/env bash
# A DDP checkpoint written by 2 ranks resumes on 1, and one written by 1
# rank resumes on 2, each ending where the uninterrupted run ended.
set -euo pipefail
worker=$1
runner=$2
for pair in "2 1" "1 2"; do
  read -r saved resumed <<<"$pair"
  dir=$(mktemp -d "${TEST_TMPDIR:-/tmp}/ckpt.XXXXXX")
  echo "--- saved on $saved rank(s), resumed on $resumed"
  "$runner" "$saved" "$worker" save "$dir"
  "$runner" "$resumed" "$worker" resume "$dir"
  grep -q "world_size" <(strings "$dir/ckpt") || {
    echo "FAIL: the checkpoint does not record the world size"
    exit 1
  }
done
