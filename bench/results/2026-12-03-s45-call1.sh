#!/usr/bin/env bash
# Session 45, device call 1: the full GPU suite at the review commit (never run on the GPU),
# then the d256 causal backward at 8k kernel by kernel (with the L2 cleared before each call,
# then not), each provider's profiled window with its clock.
source scripts/gpu_env.sh
step tests 460 sh -c "FLASHTRITON_LARGE=1 python3 -m pytest -q -n 16 -p no:cacheprovider tests \
    -W ignore::DeprecationWarning > '$OUT/gpu-tests.log' 2>&1"
grep -E "FAILED|ERROR|passed|failed" "$OUT/gpu-tests.log" | tail -n 15
step breakdown-l2 60 python3 scripts/kernel_breakdown.py --pass bwd --headdim 256 --seqlen 8192 \
    --causal --providers flashtriton,sdpa_cudnn --iters 60 --clear-l2 --clock \
    --out "$OUT/breakdown-d256-bwd-8k-causal-l2.json" > "$OUT/breakdown-l2.log" 2>&1
tail -n 25 "$OUT/breakdown-l2.log"
step breakdown 60 python3 scripts/kernel_breakdown.py --pass bwd --headdim 256 --seqlen 8192 \
    --causal --providers flashtriton,sdpa_cudnn --iters 60 --clock \
    --out "$OUT/breakdown-d256-bwd-8k-causal.json" > "$OUT/breakdown.log" 2>&1
tail -n 25 "$OUT/breakdown.log"
cat "$OUT/steps.txt"
