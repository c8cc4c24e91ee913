#!/usr/bin/env bash
# After feature changes: the full suite natively (large shapes), the demo, and the feature timings.
set -u
source "$(dirname "$0")/gpu_env.sh"
step tests 160 sh -c "FLASHTRITON_LARGE=1 python3 -m pytest -q -n 16 -p no:cacheprovider tests \
    -W ignore::DeprecationWarning > '$OUT/gpu-tests.log' 2>&1"
tail -4 "$OUT/gpu-tests.log"
step demo 45 sh -c "python3 -m flashtriton.cli demo > '$OUT/demo.log' 2>&1"
cat "$OUT/demo.log"
step features 50 python3 scripts/gpu_features.py
cat "$OUT/steps.txt"
