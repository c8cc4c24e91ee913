# Sourced by the scripts/gpu_*.sh drivers: run from the repository root with src/ importable,
# results under $OUT (default out/), and `step NAME LIMIT CMD...`, which runs CMD under a time
# limit and appends "== NAME rc=… …s" to $OUT/steps.txt; `ncu_stalls REP [DEST]`, which writes
# Nsight Compute report REP.ncu-rep's source page (DEST-source.csv.gz; DEST defaults to REP)
# and `flashtriton stalls` over it (DEST-stalls.txt: where each Gluon partition's warps wait).
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
OUT="${OUT:-out}"; mkdir -p "$OUT"
step() { local name=$1 limit=$2; shift 2; local t0=$SECONDS; timeout "$limit" "$@"; \
         echo "== $name rc=$? $((SECONDS - t0))s" | tee -a "$OUT/steps.txt"; }
ncu_stalls() { local rep=$1 dest=${2:-$1}
  ncu --import "$rep.ncu-rep" --page source --print-source sass --csv 2> "$dest-source.log" \
      | gzip > "$dest-source.csv.gz"
  python3 -m flashtriton.cli stalls "$dest-source.csv.gz" > "$dest-stalls.txt" 2>&1 \
      || echo "flashtriton stalls failed, see $dest-stalls.txt" >&2; }
