#!/usr/bin/env bash
# On the H200: the full test suite natively (large shapes on), compute-sanitizer memcheck on a
# few shapes, then (optional) a config sweep. Logs under $OUT.
set -uo pipefail
source "$(dirname "$0")/gpu_env.sh"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"
if [ "${SKIP_TESTS:-0}" = 0 ]; then
  FLASHTRITON_LARGE=1 timeout "${TEST_TIMEOUT:-420}" python3 -m pytest -q -n 8 -p no:cacheprovider tests \
    -W ignore::DeprecationWarning 2>&1 | tee "$OUT/gpu-tests.log" | tail -25
fi
if [ "${SKIP_SANITIZER:-0}" = 0 ]; then
  compute-sanitizer --tool memcheck --print-limit 20 python3 scripts/sanitize.py 2>&1 \
    | tee "$OUT/sanitizer.log" | tail -6
fi
if [ -n "${TUNE_ARGS:-}" ]; then
  python3 scripts/tune.py --out "$OUT/tune.json" $TUNE_ARGS 2>&1 | tee "$OUT/tune.log" | tail -30
fi
