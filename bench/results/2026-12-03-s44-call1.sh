#!/usr/bin/env bash
# Session 44, device call 1: the d256 backward's greedy tables checked on the GPU, then the
# d256 backward configurations (one program per tile, persistent, persistent with greedy tables)
# at 2k-16k against cuDNN, then the d128 2k forward's candidates, then interleaved rounds of the
# 2k forward rows.
source scripts/gpu_env.sh
step tests-d256 150 python3 -m pytest -q -x tests/test_gluon_bwd.py -k "d256 or refused" \
    > "$OUT/tests-d256.log" 2>&1; tail -n 3 "$OUT/tests-d256.log"
step tune-bwd-d256 240 python3 scripts/tune.py --out "$OUT/tune-bwd-d256.json" --pass bwd \
    --headdims 256 --seqlens 2048,4096,8192,16384 --causal 0,1 \
    --bwd-space "64:64;4;2;gluonsep,gluonseppers,gluonseppers@greedy" > "$OUT/tune-bwd-d256.log" 2>&1
tail -n 30 "$OUT/tune-bwd-d256.log"
step tune-fwd-d128 100 python3 scripts/tune.py --out "$OUT/tune-fwd-d128-2k.json" --pass fwd \
    --headdims 128 --seqlens 2048 --causal 0 \
    --fwd-space "128:128;4;2;gluonpppers|192:64;4;2;gluonpppers|128:64;4;2;gluonpppers|128:128;4;2;gluonpers" \
    > "$OUT/tune-fwd-d128-2k.log" 2>&1
tail -n 10 "$OUT/tune-fwd-d128-2k.log"
cat "$OUT/steps.txt"
