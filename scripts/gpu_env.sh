# Sourced by the scripts/gpu_*.sh drivers: run from the repository root with src/ importable,
# results under $OUT (default out/), and `step NAME LIMIT CMD...`, which runs CMD under a time
# limit and appends "== NAME rc=… …s" to $OUT/steps.txt; `ncu_stalls REP [DEST]`, which writes
# Nsight Compute report REP.ncu-rep's source page (DEST-source.csv.gz; DEST defaults to REP)
# and `flashtriton stalls` over it (DEST-stalls.txt: where each Gluon partition's warps wait);
# `ncu_pass NAME CSV METRICS PASS HEADDIM SEQLEN [--causal]`, a step NAME that runs
# scripts/profile_pass.py's call (the bench's problem) under `ncu --clock-control base` with
# only METRICS, one replay pass per kernel: the csv rows (and the step's line) in CSV, ncu's
# log beside it (CSV less .csv, plus .log). $NCU_CLOCK (default base) is passed to
# --clock-control: `none` profiles at the clock the GPU holds (then add
# smsp__cycles_elapsed.avg.per_second to METRICS to see it).
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
ncu_pass() { local name=$1 csv=$2 metrics=$3 pass=$4 headdim=$5 seqlen=$6; shift 6
  step "$name" 240 ncu --metrics "$metrics" --clock-control "${NCU_CLOCK:-base}" --csv \
      --profile-from-start off \
      -k "regex:_attn_$pass" python3 scripts/profile_pass.py --pass "$pass" \
      --headdim "$headdim" --seqlen "$seqlen" "$@" > "$csv" 2> "${csv%.csv}.log"; }
