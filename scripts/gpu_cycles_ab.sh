#!/usr/bin/env bash
# Two versions of our kernels at the locked base clock: Nsight Compute's per-kernel cycles and
# instruction counts for this tree and for another version's src/, on the same call, so that
# an A/B's change in time can be set against its change in cycles and instructions.
#
#   OUT=out scripts/gpu_cycles_ab.sh OLD_TREE PASS HEADDIM SEQLEN...
#   (e.g. scripts/branch_trees.sh trees 56a1075, then trees/56a1075 bwd 256 8192)
#
# OLD_TREE: a folder holding the other version's src/ (scripts/branch_trees.sh writes one for
# a branch or commit). For each length, and each mask of $MASKS (default "full causal"):
# scripts/profile_pass.py's call (the bench's problem) under `ncu --clock-control base` with
# $METRICS (default: SM active cycles, elapsed cycles, warp instructions executed, those on
# the uniform pipe), once with OLD_TREE/src on PYTHONPATH ("old") and once with this tree's
# ("new"). Written under $OUT: the csv rows (cycles-{old,new}-PASS-dD-sS-MASK.csv) and
# scripts/cycles_ab_table.py's table (cycles-ab-PASS-dD.txt). NCU_CLOCK=none profiles at the
# clock the GPU holds instead of the base clock (scripts/gpu_env.sh's ncu_pass).
set -u
source "$(dirname "$0")/gpu_env.sh"
OLD=${1:?old tree (a folder with src/)} PASS=${2:?pass: fwd or bwd} HEADDIM=${3:?head dim}
shift 3
[ -d "$OLD/src/flashtriton" ] || { echo "gpu_cycles_ab.sh: no $OLD/src/flashtriton" >&2; exit 2; }
OLD_SRC=$(cd "$OLD/src" && pwd)
DEFAULT=sm__cycles_active.avg,sm__cycles_elapsed.max,smsp__inst_executed.sum
METRICS=${METRICS:-$DEFAULT,smsp__inst_executed_pipe_uniform.sum}
PAIRS=()
for seqlen in "$@"; do
  for mask in ${MASKS:-full causal}; do
    tag="$PASS-d$HEADDIM-s$seqlen-$mask"
    flag=""; [ "$mask" = causal ] && flag=--causal
    for side in old new; do
      src="$PWD/src"; [ "$side" = old ] && src="$OLD_SRC"
      PYTHONPATH="$src" ncu_pass "cycles-$side-$tag" "$OUT/cycles-$side-$tag.csv" \
          "$METRICS" "$PASS" "$HEADDIM" "$seqlen" $flag
    done
    PAIRS+=("$OUT/cycles-old-$tag.csv" "$OUT/cycles-new-$tag.csv")
  done
done
python3 scripts/cycles_ab_table.py "${PAIRS[@]}" | tee "$OUT/cycles-ab-$PASS-d$HEADDIM.txt"
