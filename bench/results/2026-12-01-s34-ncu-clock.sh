#!/usr/bin/env bash
# Session 34: cycles per call at the base SM clock against the free clock (Nsight Compute, one
# launch each, `--set basic`): do the backward's cycles grow with the clock (time spent waiting
# on memory, whose latency is fixed in ns), or stay (compute-bound)? Ours at d64 (with and without
# a causal mask) and d128, cuDNN at d128; 16k keys, bf16. From the repository root on the GPU
# machine: OUT=out bash bench/results/2026-12-01-s34-ncu-clock.sh
set -u
ROOT=$PWD; DEST=$(mkdir -p "${OUT:-out}" && cd "${OUT:-out}" && pwd); OUT=$DEST/clk; mkdir -p "$OUT"
export PYTHONPATH="$ROOT/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
FILES=()
for spec in "flashtriton 64 --causal" "flashtriton 64" "flashtriton 128" "sdpa_cudnn 128"; do
  set -- $spec; provider=$1 d=$2 causal=${3:-}
  kernel=regex:_attn_bwd_ws; [ "$provider" = flashtriton ] || kernel=regex:cudnn_generated
  for clock in base none; do
    rep=$OUT/ncu-$provider-d$d${causal:+-causal}-clock$clock
    t0=$SECONDS
    timeout 100 ncu --set basic --clock-control $clock --profile-from-start off -k $kernel -f \
        -o "$rep" python3 scripts/profile_pass.py --provider "$provider" --pass bwd \
        --headdim "$d" --seqlen 16384 --dtype bf16 $causal > "$rep.log" 2>&1
    echo "== ncu $provider d$d $causal clock $clock rc=$? $((SECONDS - t0))s"
    ncu --import "$rep.ncu-rep" --page details > "$rep-details.txt" 2>&1
    FILES+=("$rep-details.txt")
  done
done
python3 scripts/ncu_details_table.py "${FILES[@]}" --metrics "Duration,SM Frequency,Elapsed Cycles,SM Active Cycles,DRAM Throughput,Memory Throughput" | tee "$OUT/ncu-table.txt"
tar -czf "$DEST/clk.tgz" -C "$DEST" --exclude="*.ncu-rep" clk
