#!/usr/bin/env bash
# How evenly one pass's kernels load the SMs: Nsight Compute at the locked base clock, each
# kernel's sm__cycles_active min / avg / max against its elapsed cycles, per length and mask.
#
#   OUT=out scripts/gpu_sm_spread.sh PASS HEADDIM SEQLEN...      (e.g. bwd 256 2048 8192)
#
# For each length, with and without the causal mask: scripts/profile_pass.py's call (the
# bench's problem) under `ncu --clock-control base` with only those four metrics (one replay
# pass per kernel). Written under $OUT: the raw csv rows (sm-spread-*.csv) and
# scripts/sm_spread_table.py's table (sm-spread-PASS-dHEADDIM.txt): per kernel, the share of
# its SM-cycles with no program resident ("idle") and how far the last SM ends after the mean.
set -u
source "$(dirname "$0")/gpu_env.sh"
PASS=${1:?pass: fwd or bwd} HEADDIM=${2:?head dim}; shift 2
METRICS=sm__cycles_active.min,sm__cycles_active.avg,sm__cycles_active.max,sm__cycles_elapsed.max
CSVS=()
for seqlen in "$@"; do
  for mask in full causal; do
    tag="$PASS-d$HEADDIM-s$seqlen-$mask"
    flag=""; [ "$mask" = causal ] && flag=--causal
    ncu_pass "sm-spread-$tag" "$OUT/sm-spread-$tag.csv" "$METRICS" "$PASS" "$HEADDIM" \
        "$seqlen" $flag
    CSVS+=("$OUT/sm-spread-$tag.csv")
  done
done
python3 scripts/sm_spread_table.py "${CSVS[@]}" | tee "$OUT/sm-spread-$PASS-d$HEADDIM.txt"
