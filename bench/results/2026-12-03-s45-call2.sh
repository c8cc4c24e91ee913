#!/usr/bin/env bash
# Session 45, device calls 2-4 as run (each a `run` of the lines under its heading, from the
# repository root on the H200, at e61a2fc; call 1 is 2026-12-03-s45-call1.sh).
source scripts/gpu_env.sh
# call 2: the full suite again (call 1's stopped at its 460 s limit on a cold compile cache),
# then the d128 forward at 2k without a mask, ping-pong (shipped) or not, six interleaved rounds
step tests 480 sh -c "FLASHTRITON_LARGE=1 python3 -m pytest -q -n 16 -p no:cacheprovider tests \
    -W ignore::DeprecationWarning > '$OUT/gpu-tests.log' 2>&1"
grep -E "FAILED|ERROR|passed|failed" "$OUT/gpu-tests.log" | tail -n 15
step tune-fwd-d128-2k 85 python3 scripts/tune.py --out "$OUT/tune-fwd-d128-2k-rounds.json" \
    --pass fwd --headdims 128 --seqlens 2048 --causal 0 --rounds 6 \
    --fwd-space "128:128;4;2;gluonpppers,gluonpers" > "$OUT/tune-fwd-d128-2k-rounds.log" 2>&1
# call 3: the d256 causal backward at 8k, ten interleaved rounds with the clock (its JSON did not
# come back: too many files under $OUT), then Nsight Compute on both at the base clock
step rounds-d256-8k 100 python3 -m flashtriton.cli bench --plain --providers flashtriton \
    sdpa_cudnn --dtypes bf16 --passes bwd --headdims 256 --seqlens 8192 --causal yes \
    --rounds 10 --rep-ms 600 --clock --out "$OUT/rounds-d256-bwd-8k-causal.json" \
    > "$OUT/rounds-d256-bwd-8k-causal.log" 2>&1
timeout 360 scripts/gpu_profile_pair.sh bwd 256 8192 causal --clock base
# call 4: the d256 causal backward at 4k, 8k and 16k, ten interleaved rounds with the clock
step rounds-d256 150 python3 -m flashtriton.cli bench --plain --providers flashtriton \
    sdpa_cudnn --dtypes bf16 --passes bwd --headdims 256 --seqlens 4096 8192 16384 \
    --causal yes --rounds 10 --rep-ms 600 --clock --out "$OUT/rounds-d256-bwd-causal.json" \
    > "$OUT/rounds-d256-bwd-causal.log" 2>&1
