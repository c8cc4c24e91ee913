#!/usr/bin/env bash
# The ladder on the H200: report (correctness, times, traffic model, Nsight Compute counters),
# the production kernels' sm_90a resources, and the ladder tests run natively with large shapes.
#
# Run from the repository root on the GPU machine (python3 with torch + triton 3.6, ncu on PATH):
#     OUT=/some/dir bash scripts/gpu_ladder.sh
# Writes $OUT/ladder/{report.md,report.json,*.png,ncu_*.csv,sass_*.json,bwd_profile.md,tests.log,status.txt}.
# Every step has its own time limit and the script goes on after a failure; status.txt lists the
# exit code of each step. About 4-5 minutes in all (at most 9 if every step hits its limit).
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-out}
DIR="$OUT/ladder"
mkdir -p "$DIR"
export PYTHONPATH="src${PYTHONPATH:+:$PYTHONPATH}"
PY=${PYTHON:-python3}
STATUS="$DIR/status.txt"
: > "$STATUS"

step() {  # step NAME SECONDS CMD...
    local name=$1 limit=$2
    shift 2
    local t0=$SECONDS
    timeout "$limit" "$@"
    local rc=$?
    echo "$name rc=$rc $((SECONDS - t0))s" | tee -a "$STATUS"
}

{
    date -u
    nvidia-smi -L
    $PY -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"
    ncu --version | tail -1
} > "$DIR/env.txt" 2>&1

# 1. The report: both problems, all variants, ncu profiles (one child process per variant).
step report 270 $PY -m flashtriton.cli ladder --report "$DIR"

# 2. sm_90a resources of the production kernels (compiled without running them).
for k in production_fwd production_bwd_dkdv production_bwd_dq; do
    step "sass_$k" 40 sh -c "$PY -m flashtriton.cli sass --kernel $k --json > '$DIR/sass_$k.json'"
done

# 3. Counters of the production backward (bf16, d128, the report's second problem).
step bwd_profile 60 sh -c "$PY -m flashtriton.cli profile --variants production --pass bwd --batch 4 \
    --heads 16 --seqlen 4096 --headdim 128 --dtype bfloat16 > '$DIR/bwd_profile.md'"

# 4. The ladder tests natively on the GPU, with the large shapes.
if $PY -c "import pytest" 2>/dev/null; then
    step tests 90 sh -c "FLASHTRITON_LARGE=1 $PY -m pytest -q -p no:cacheprovider tests/test_ladder.py \
        tests/test_traffic.py tests/test_budget.py tests/test_profile_parse.py > '$DIR/tests.log' 2>&1"
else
    echo "tests skipped: pytest is not installed for $PY" | tee -a "$STATUS"
fi

cat "$STATUS"
