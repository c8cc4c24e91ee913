#!/usr/bin/env bash
# A/B on the GPU: another tree's kernels against this tree's, then a side-by-side table.
#
#   git worktree add /tmp/old REF && cp -r /tmp/old/src ab_old     # once, on the CPU machine
#   git rev-parse --short REF > ab_old/COMMIT
#   OUT=out scripts/gpu_ab.sh ab_old --pass fwd --headdims 64 --seqlens 1024,16384 --causal 1 \
#       --fwd-space "'128:128;4;2;gluonpers'"
#   OUT=out scripts/gpu_ab.sh ab_old bench --quick --passes bwd --headdims 64 \
#       --seqlens 1024 4096 16384 --providers flashtriton sdpa_cudnn --rounds 3
#
# The first argument is a folder holding the other tree's `flashtriton` package (a copy of its
# src/, e.g. inside this working tree so that it travels with it to the GPU machine; do not
# commit it). Then either
# - scripts/tune.py's arguments: the same sweep once per tree, one process each
#   ($OUT/ab-old.json, $OUT/ab-new.json and their logs; table by scripts/ab_compare.py), or
# - `bench` and `flashtriton bench`'s arguments: four bench runs, old / new / new / old, so
#   that a drift of the clock over the runs falls on both trees alike ($OUT/ab-1-old.json …
#   $OUT/ab-4-old.json and their logs; table by scripts/ab_bench.py).
# - `inproc` and `flashtriton bench`'s arguments: two bench runs of this tree, each timing the
#   other tree's package too (`--baseline-src`, provider flashtriton_base) round by round in one
#   process, so that both versions meet the same clock: the baseline first in each round in
#   the first run, ours first in the second ($OUT/inproc-1.json, $OUT/inproc-2.json; table by
#   scripts/ab_bench.py --inproc). The script names the providers: both trees, then those in
#   $AB_PROVIDERS (e.g. "sdpa_cudnn"); do not pass --providers. Give --rounds (5 or more).
#   The baseline's commit: $AB_OLD_COMMIT, else a COMMIT file in its folder.
#
#   OUT=out AB_PROVIDERS=sdpa_cudnn scripts/gpu_ab.sh ab_old inproc --quick --passes bwd \
#       --headdims 64 --seqlens 4096 16384 --rounds 6
#
# Each side's bench JSON names the commit it ran (meta.commit): the old side's from
# $AB_OLD_COMMIT, else a COMMIT file in its folder (as above), else "unknown"; the new side's
# from a COMMIT file beside its src/ (scripts/branch_trees.sh writes one), else
# $FLASHTRITON_COMMIT (the working tree on the GPU machine has no .git).
set -uo pipefail
OLD_SRC="$(cd "$1" && pwd)"; shift
source "$(dirname "$0")/gpu_env.sh"
NEW_SRC="$PWD/src"
path_for() { local src=$NEW_SRC; [ "$1" = old ] && src=$OLD_SRC; echo "$src${PYTHONPATH#$NEW_SRC}"; }
commit_in() { [ -f "$1/COMMIT" ] && cat "$1/COMMIT"; }
OLD_COMMIT="${AB_OLD_COMMIT:-$(commit_in "$OLD_SRC")}"
NEW_COMMIT="$(commit_in "$NEW_SRC/..")"
commit_for() {
  if [ "$1" = old ]; then echo "${OLD_COMMIT:-unknown}"
  else echo "${NEW_COMMIT:-${FLASHTRITON_COMMIT:-unknown}}"; fi
}
if [ "${1:-}" = bench ]; then
  shift
  i=0
  for side in old new new old; do
    i=$((i + 1))
    step "ab-$i-$side" 280 sh -c "PYTHONPATH='$(path_for $side)' \
        FLASHTRITON_COMMIT='$(commit_for $side)' python3 -m flashtriton.cli bench \
        --plain --out '$OUT/ab-$i-$side.json' $* > '$OUT/ab-$i-$side.log' 2>&1"
  done
  python3 scripts/ab_bench.py --old "$OUT/ab-1-old.json" "$OUT/ab-4-old.json" \
      --new "$OUT/ab-2-new.json" "$OUT/ab-3-new.json"
  exit 0
fi
if [ "${1:-}" = inproc ]; then
  shift
  CLOCK=""  # each side's SM clock beside its rows (ab_bench.py prints it)
  command -v nvidia-smi >/dev/null && CLOCK="--clock"
  i=0
  for order in "flashtriton_base flashtriton" "flashtriton flashtriton_base"; do
    i=$((i + 1))
    step "inproc-$i" 590 sh -c "FLASHTRITON_COMMIT='$(commit_for new)' \
        FLASHTRITON_BASELINE_COMMIT='${OLD_COMMIT:-}' python3 -m flashtriton.cli bench \
        --plain --baseline-src '$OLD_SRC' --out '$OUT/inproc-$i.json' $* $CLOCK \
        --providers $order ${AB_PROVIDERS:-} > '$OUT/inproc-$i.log' 2>&1"
  done
  python3 scripts/ab_bench.py --inproc "$OUT/inproc-1.json" "$OUT/inproc-2.json"
  exit 0
fi
for side in old new; do
  step "ab-$side" 280 sh -c "PYTHONPATH='$(path_for $side)' python3 scripts/tune.py \
      --out '$OUT/ab-$side.json' $* > '$OUT/ab-$side.log' 2>&1"
done
python3 scripts/ab_compare.py "$OUT/ab-old.json" "$OUT/ab-new.json"
