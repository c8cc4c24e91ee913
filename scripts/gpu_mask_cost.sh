#!/usr/bin/env bash
# Where a causal forward's extra cycles go: Nsight Compute at the locked base clock on our
# forward, with and without the causal mask, at one head dim and length.
#
#   OUT=out scripts/gpu_mask_cost.sh [HEADDIM] [SEQLEN]      (default 64 16384)
#
# For each mask: `ncu --set full --clock-control base` on scripts/profile_pass.py (the bench's
# problem: batch·seqlen = 16384 tokens, heads·headdim = 2048), plus each SM's active cycles
# (sm__cycles_active min / avg / max: how evenly the persistent launch loads the SMs). Written
# under $OUT: the details pages, each source page and `flashtriton stalls` over it (each
# partition's step loop against its per-tile work), the raw min/avg/max rows, and
# ncu_details_table.py's table of both launches (ncu-mask-cost-*.txt). The reports stay in
# /tmp (too large to return).
set -u
source "$(dirname "$0")/gpu_env.sh"
HEADDIM=${1:-64} SEQLEN=${2:-16384}
EXTRA=sm__cycles_active.min,sm__cycles_active.avg,sm__cycles_active.max,smsp__inst_executed.sum
FILES=()
for mask in full causal; do
  tag="fwd-d$HEADDIM-s$SEQLEN-$mask"
  rep="/tmp/ncu-$tag"
  flag=""; [ "$mask" = causal ] && flag=--causal
  step "ncu-$tag" 240 ncu --set full --metrics "$EXTRA" --clock-control base \
      --profile-from-start off -k regex:_attn_fwd -f -o "$rep" python3 scripts/profile_pass.py \
      --pass fwd --headdim "$HEADDIM" --seqlen "$SEQLEN" $flag > "$OUT/ncu-$tag.log" 2>&1
  ncu --import "$rep.ncu-rep" --page details > "$OUT/ncu-$tag-details.txt" 2>&1
  ncu --import "$rep.ncu-rep" --page raw --csv --metrics "$EXTRA,sm__cycles_elapsed.max" \
      > "$OUT/ncu-$tag-raw.csv" 2>&1
  ncu_stalls "$rep" "$OUT/ncu-$tag"
  FILES+=("$OUT/ncu-$tag-details.txt")
done
python3 scripts/ncu_details_table.py "${FILES[@]}" \
    --metrics "Duration,Elapsed Cycles,SM Active Cycles,Executed Instructions,Issue Slots Busy,Compute (SM) Throughput" \
    | tee "$OUT/ncu-mask-cost-d$HEADDIM-s$SEQLEN.txt"
for f in "$OUT"/ncu-fwd-d$HEADDIM-s$SEQLEN-*-raw.csv; do echo "$f"; cat "$f"; done
