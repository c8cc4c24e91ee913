#!/usr/bin/env bash
# Session 45, device call 2: the d128 forward at 2k without a mask, ping-pong (shipped) against
# not, six interleaved rounds with cuDNN; the d256 causal backward at 8k against cuDNN in ten
# interleaved rounds with the clock; then Nsight Compute on both at the base clock.
source scripts/gpu_env.sh
step tune-fwd-d128-2k 120 python3 scripts/tune.py --out "$OUT/tune-fwd-d128-2k-rounds.json" \
    --pass fwd --headdims 128 --seqlens 2048 --causal 0 --rounds 6 \
    --fwd-space "128:128;4;2;gluonpppers,gluonpers" > "$OUT/tune-fwd-d128-2k-rounds.log" 2>&1
tail -n 6 "$OUT/tune-fwd-d128-2k-rounds.log"
step rounds-d256-8k 120 python3 -m flashtriton.cli bench --plain --providers flashtriton sdpa_cudnn \
    --dtypes bf16 --passes bwd --headdims 256 --seqlens 8192 --causal yes --rounds 10 \
    --rep-ms 600 --clock --out "$OUT/rounds-d256-bwd-8k-causal.json" \
    > "$OUT/rounds-d256-bwd-8k-causal.log" 2>&1
tail -n 12 "$OUT/rounds-d256-bwd-8k-causal.log"
timeout 340 scripts/gpu_profile_pair.sh bwd 256 8192 causal --clock base
cat "$OUT/steps.txt"
