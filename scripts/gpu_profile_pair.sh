#!/usr/bin/env bash
# Nsight Compute on one pass of ours and of a peer, the bench's problem for each, then their
# details pages side by side: where the peer's kernel spends fewer cycles than ours.
#
#   OUT=out scripts/gpu_profile_pair.sh PASS HEADDIM SEQLEN [causal] [--dtype fp16] \
#       [--peer sdpa_cudnn] [--clock base|none]
#
# For each provider: `ncu --set full --profile-from-start off` on scripts/profile_pass.py (every
# kernel of the pass: ours has the main kernel and its small helpers, cuDNN its own), the
# report as $OUT/ncu-<provider>-<tag>.ncu-rep and its details page as text beside it; then
# scripts/ncu_details_table.py over both. For ours also the source page (per-instruction warp
# samples) as $OUT/ncu-flashtriton-<tag>-source.csv.gz and `flashtriton stalls` over it (where
# each Gluon partition's warps wait) as …-stalls.txt. --clock base locks the SM clock at its
# base for both (cycles comparable without the power cap's swings); the default, none, leaves
# it free, as the bench runs.
set -u
source "$(dirname "$0")/gpu_env.sh"
PASS=$1 HEADDIM=$2 SEQLEN=$3; shift 3
CAUSAL="" DTYPE=bf16 PEER=sdpa_cudnn CLOCK=none
while [ $# -gt 0 ]; do
  case "$1" in
    causal) CAUSAL=--causal ;;
    --dtype) DTYPE=$2; shift ;;
    --peer) PEER=$2; shift ;;
    --clock) CLOCK=$2; shift ;;
    *) echo "gpu_profile_pair.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done
TAG="$PASS-d$HEADDIM-s$SEQLEN${CAUSAL:+-causal}-$DTYPE-clock$CLOCK"
FILES=()
for provider in flashtriton "$PEER"; do
  rep="$OUT/ncu-$provider-$TAG"
  step "ncu-$provider-$TAG" 280 ncu --set full --clock-control "$CLOCK" --profile-from-start off \
      -f -o "$rep" python3 scripts/profile_pass.py --provider "$provider" --pass "$PASS" \
      --headdim "$HEADDIM" --seqlen "$SEQLEN" --dtype "$DTYPE" $CAUSAL > "$rep.log" 2>&1
  ncu --import "$rep.ncu-rep" --page details > "$rep-details.txt" 2>&1
  FILES+=("$rep-details.txt")
  [ "$provider" = flashtriton ] && ncu_stalls "$rep"
done
python3 scripts/ncu_details_table.py "${FILES[@]}" | tee "$OUT/ncu-pair-$TAG.txt"
