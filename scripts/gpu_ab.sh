#!/usr/bin/env bash
# A/B on the GPU: the same scripts/tune.py sweep on another tree's kernels and on this tree's,
# one process each, then a side-by-side table (scripts/ab_compare.py).
#
#   git worktree add /tmp/old REF && cp -r /tmp/old/src ab_old     # once, on the CPU machine
#   OUT=out scripts/gpu_ab.sh ab_old --pass fwd --headdims 64 --seqlens 1024,16384 --causal 1 \
#       --fwd-space "'128:128;4;2;gluonpers'"
#
# The first argument is a folder holding the other tree's `flashtriton` package (a copy of its
# src/, e.g. inside this working tree so that it travels with it to the GPU machine; do not
# commit it); the rest go to scripts/tune.py for both runs. Writes $OUT/ab-old.json,
# $OUT/ab-new.json and their logs.
set -uo pipefail
OLD_SRC="$(cd "$1" && pwd)"; shift
source "$(dirname "$0")/gpu_env.sh"
NEW_SRC="$PWD/src"
for side in old new; do
  src=$NEW_SRC; [ $side = old ] && src=$OLD_SRC
  step "ab-$side" 280 sh -c "PYTHONPATH='$src${PYTHONPATH#$NEW_SRC}' python3 scripts/tune.py \
      --out '$OUT/ab-$side.json' $* > '$OUT/ab-$side.log' 2>&1"
done
python3 scripts/ab_compare.py "$OUT/ab-old.json" "$OUT/ab-new.json"
