#!/usr/bin/env bash
# Session 34: Nsight Compute on the d64 backward's main kernel at 16k without a mask, main's tree
# against the bwd-d64-k-pairs branch's (trees/ from scripts/branch_trees.sh), SM clock locked at
# base so that cycles compare; details pages side by side, and each side's per-instruction
# stalls (`flashtriton stalls`). Run from the repository root on the GPU machine:
#   OUT=out bash bench/results/2026-12-01-s34-ncu-k-pairs.sh
set -u
ROOT=$PWD; DEST=$(mkdir -p "${OUT:-out}" && cd "${OUT:-out}" && pwd); OUT=$DEST/ncu; mkdir -p "$OUT"
SITE=${PYTHONPATH:-}
FILES=()
for side in main bwd-d64-k-pairs; do
  tree=$ROOT; [ "$side" = main ] || tree=$ROOT/trees/$side
  rep=$OUT/ncu-$side
  t0=$SECONDS
  (cd "$tree" && PYTHONPATH="$tree/src${SITE:+:$SITE}" timeout 220 ncu --set full \
      --clock-control base --profile-from-start off -k regex:_attn_bwd_ws -f -o "$rep" \
      python3 scripts/profile_pass.py --provider flashtriton --pass bwd --headdim 64 \
      --seqlen 16384 --dtype bf16 > "$rep.log" 2>&1)
  echo "== ncu $side rc=$? $((SECONDS - t0))s"
  ncu --import "$rep.ncu-rep" --page details > "$rep-details.txt" 2>&1
  ncu --import "$rep.ncu-rep" --page source --print-source sass --csv 2> /dev/null \
      | gzip > "$rep-source.csv.gz"
  (cd "$tree" && PYTHONPATH="$tree/src${SITE:+:$SITE}" python3 -m flashtriton.cli stalls \
      "$rep-source.csv.gz" > "$rep-stalls.txt" 2>&1)
  FILES+=("$rep-details.txt")
done
python3 scripts/ncu_details_table.py "${FILES[@]}" --metrics "Duration,SM Frequency,Elapsed Cycles,Executed Instructions,Issue Slots Busy,L1/TEX Hit Rate,L2 Hit Rate,DRAM Throughput,Local Memory Spilling Requests,Registers Per Thread,Dynamic Shared Memory Per Block" | tee "$OUT/ncu-table.txt"
# the reports stay behind (too large to return); the rest in one archive
tar -czf "$DEST/ncu.tgz" -C "$DEST" --exclude="*.ncu-rep" ncu
