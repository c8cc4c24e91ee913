#!/usr/bin/env bash
# One H200 call that does everything a kernel change needs: the full test suite natively (large
# shapes), the benchmark against the peers, the ladder report with Nsight Compute, the decode
# benchmark. Each step has a time limit; results land in $OUT (the ladder as one tarball).
set -u
source "$(dirname "$0")/gpu_env.sh"
STAMP="$(date -u +%Y-%m-%d)"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
step tests 170 sh -c "FLASHTRITON_LARGE=1 python3 -m pytest -q -n 16 -p no:cacheprovider tests \
    -W ignore::DeprecationWarning > '$OUT/gpu-tests.log' 2>&1"
tail -3 "$OUT/gpu-tests.log"
step bench 170 python3 -m flashtriton.cli bench --plain --headdims 128 64 --seqlens 1024 4096 16384 \
    --dtypes bf16 --passes fwd bwd --causal both --providers flashtriton sdpa_cudnn sdpa_flash \
    --out "$OUT/$STAMP-bench-bf16.json"
step bench_extra 45 python3 -m flashtriton.cli bench --plain --headdims 256 128 --seqlens 4096 \
    --dtypes fp16 bf16 --passes fwd bwd --causal no --providers flashtriton sdpa_cudnn \
    --out "$OUT/$STAMP-bench-d256-fp16.json"
step ladder 140 python3 -m flashtriton.cli ladder --report "$OUT/ladder"
tar czf "$OUT/ladder.tgz" -C "$OUT" ladder && rm -rf "$OUT/ladder"
step decode 45 python3 scripts/gpu_decode_bench.py --quick --no-flex --no-sweep --out "$OUT/decode.json"
cat "$OUT/steps.txt"
