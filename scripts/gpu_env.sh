# Sourced by the scripts/gpu_*.sh drivers: run from the repository root with src/ importable,
# results under $OUT (default out/), and `step NAME LIMIT CMD...`, which runs CMD under a time
# limit and appends "== NAME rc=… …s" to $OUT/steps.txt.
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
OUT="${OUT:-out}"; mkdir -p "$OUT"
step() { local name=$1 limit=$2; shift 2; local t0=$SECONDS; timeout "$limit" "$@"; \
         echo "== $name rc=$? $((SECONDS - t0))s" | tee -a "$OUT/steps.txt"; }
