#!/usr/bin/env bash
# The Trainer template on 2 ranks with a checkpoint, resumed on 1 rank.
set -euo pipefail
template=$1
runner=$2
dir=$(mktemp -d "${TEST_TMPDIR:-/tmp}/template.XXXXXX")
export MIXRT_NUM_THREADS=1
out=$("$runner" 2 "$template" --distributed --epochs=2 --checkpoint="$dir/run.ckpt")
echo "$out"
grep -q "2 ranks over mpi" <<<"$out"
[ "$(grep -o 'val accuracy' <<<"$out" | wc -l)" -eq 2 ]  # Rank 0 speaks.
out=$("$template" --epochs=3 --checkpoint="$dir/run.ckpt" --resume)
echo "$out"
# 1437 training images in batches of 64: 23 steps per epoch.
grep -q "resumed from $dir/run.ckpt at step 46" <<<"$out"
grep -q "epoch  3" <<<"$out"
echo "1 passed, 0 failed"
