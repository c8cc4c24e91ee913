#!/usr/bin/env bash
# How much the last partial wave of tiles costs: each case times the bench grid's shape and a
# shape of the same sequence length and head dim whose tile count is a whole number of waves
# on the H200's 132 SMs, flashtriton and cuDNN side by side (`flashtriton bench --rounds 4`,
# no causal mask, forward and backward). The tiles are the same size in both shapes, so a
# kernel that loses the last wave's idle SMs runs faster per FLOP in the whole-wave shape.
#
#   OUT=out scripts/waves_probe.sh
#
# Cases (tiles: 128 query rows in the forward, 128 keys in the backward):
#   d64 1k: the grid's b16 h32 (4,096 tiles, 31.03 waves) against b15 h33 (3,960, 30 waves)
#   d64 2k: b8 h32 (4,096, 31.03) against b8 h33 (4,224, 32)
#   d128 1k: b16 h16 (2,048, 15.52) against b11 h24 (2,112, 16)
#   d128 4k: b4 h16 (2,048, 15.52) against b2 h33 (2,112, 16)
#   d64 4k (three consumers, 192 rows a tile in the forward): b4 h32 (2,816 forward tiles, 21.33
#     waves) against b4 h33 (2,904, 22)
#   d128 16k (one program per tile, at the power cap): b1 h16 (2,048, 15.52) against b1 h33
#     (4,224, 32)
# Writes $OUT/waves-<case>.json per case and prints the rows last.
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
OUT="${OUT:-out}"; mkdir -p "$OUT"
# name, head dim, seqlen, tokens (batch·seqlen), hidden (heads·head dim); each bench run's
# stdin is /dev/null, so that it cannot read the case list
while read -r name d s tokens hidden; do
  python3 -m flashtriton bench --plain --providers flashtriton sdpa_cudnn --dtypes bf16 \
      --passes fwd bwd --causal no --headdims "$d" --seqlens "$s" --tokens "$tokens" \
      --hidden "$hidden" --rounds 4 --out "$OUT/waves-$name.json" < /dev/null \
      > "$OUT/waves-$name.log" 2>&1
  echo "== $name rc=$?"
done <<'CASES'
d64-1k-grid 64 1024 16384 2048
d64-1k-whole 64 1024 15360 2112
d64-2k-grid 64 2048 16384 2048
d64-2k-whole 64 2048 16384 2112
d128-1k-grid 128 1024 16384 2048
d128-1k-whole 128 1024 11264 3072
d128-4k-grid 128 4096 16384 2048
d128-4k-whole 128 4096 8192 4224
d64-4k-grid 64 4096 16384 2048
d64-4k-whole 64 4096 16384 2112
d128-16k-grid 128 16384 16384 2048
d128-16k-whole 128 16384 16384 4224
CASES
python3 - "$OUT" <<'EOF'
import glob, json, os, sys
print(f"{'case':16} {'pass':4} {'b':>3} {'h':>3} {'ours':>7} {'cuDNN':>7} {'ratio':>6}")
for path in sorted(glob.glob(os.path.join(sys.argv[1], "waves-*.json"))):
    rows = json.load(open(path))["results"]
    for p in ("fwd", "bwd"):
        by = {r["provider"]: r for r in rows if r["pass"] == p}
        if {"flashtriton", "sdpa_cudnn"} <= set(by):
            a, c = by["flashtriton"], by["sdpa_cudnn"]
            print(f"{os.path.basename(path)[6:-5]:16} {p:4} {a['batch']:3} {a['heads']:3} "
                  f"{a['tflops']:7.1f} {c['tflops']:7.1f} {a['tflops'] / c['tflops']:6.3f}")
EOF
