#!/usr/bin/env bash
# Session 34, one GPU call: (1) bf16 against fp16 in one bench run, with the clock and power
# beside every timing; (2) Nsight Compute at the base SM clock on the d64 backward at 16k with a
# causal mask (ours), and on cuDNN's with and without one, to set beside
# 2026-12-01-s34-ncu-bwd-d64-s16384-main-details.txt (ours without a mask, same settings).
# From the repository root on the GPU machine: OUT=out bash bench/results/2026-12-01-s34-dtypes-causal.sh
set -u
ROOT=$PWD; DEST=$(mkdir -p "${OUT:-out}" && cd "${OUT:-out}" && pwd); OUT=$DEST/run; mkdir -p "$OUT"
export PYTHONPATH="$ROOT/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
t0=$SECONDS
timeout 330 python3 -m flashtriton.cli bench --passes fwd bwd --headdims 64 128 \
    --seqlens 4096 16384 --dtypes bf16 fp16 --providers flashtriton sdpa_cudnn --rounds 3 \
    --clock --plain --out "$OUT/dtypes.json" > "$OUT/dtypes.log" 2>&1
echo "== bench dtypes rc=$? $((SECONDS - t0))s"
FILES=()
for spec in "flashtriton --causal" "sdpa_cudnn --causal" "sdpa_cudnn"; do
  set -- $spec; provider=$1; causal=${2:-}
  rep=$OUT/ncu-$provider${causal:+-causal}
  t0=$SECONDS
  timeout 150 ncu --set full --clock-control base --profile-from-start off -f -o "$rep" \
      python3 scripts/profile_pass.py --provider "$provider" --pass bwd --headdim 64 \
      --seqlen 16384 --dtype bf16 $causal > "$rep.log" 2>&1
  echo "== ncu $provider $causal rc=$? $((SECONDS - t0))s"
  ncu --import "$rep.ncu-rep" --page details > "$rep-details.txt" 2>&1
  FILES+=("$rep-details.txt")
done
python3 scripts/ncu_details_table.py "${FILES[@]}" --metrics "Duration,SM Frequency,Elapsed Cycles,SM Active Cycles,Executed Instructions,Issue Slots Busy,L2 Hit Rate,DRAM Throughput,Registers Per Thread" | tee "$OUT/ncu-table.txt"
tar -czf "$DEST/run.tgz" -C "$DEST" --exclude="*.ncu-rep" run
