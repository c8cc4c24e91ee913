#!/usr/bin/env bash
# Run `flashtriton bench` on the H200 and leave the JSON and plots under $OUT.
#
#   scripts/gpu_bench.sh [WHAT] [extra `flashtriton bench` options...]
#
# WHAT (default quick):
#   quick        the --quick subset (headdim 128,64; seqlen 1k,4k,16k; bf16; fwd,bwd; causal both)
#                with its default providers flashtriton, sdpa_cudnn and sdpa_flash: 154-181 s
#                on a fresh machine (our kernels compile), 95 s with warm caches (sessions 25-27)
#   quick-all    the same with all six providers (the README's table): 323 s on a fresh machine
#                (session 25; FlexAttention compiles once per configuration)
#   target       the issue's target grid in one run: every head dim (64, 128, 256), seqlen 1k..16k,
#                bf16, fwd and bwd, causal both, flashtriton against sdpa_cudnn (60 configurations,
#                120 timings; about 5.5 min on the H200: 201 s for d64+d128 and 120 s for d256 in
#                session 43, compiles included)
#   d64|d128|d256  the full grid for one head dim (seqlen 512..16k, bf16+fp16, fwd,bwd,fwd_bwd, causal both)
#   full         the whole grid in one command (longer than one 10-minute run: prefer d64, d128, d256)
#   features     `--feature all --quick`: varlen, window, softcap, ALiBi, dropout, float8 against their
#                peers (8 configurations, headdim 128, bf16, causal; 2 min 4 s on the H200 with the
#                old 25 ms warm-up, most of it FlexAttention compiling once per configuration);
#                JSON and tables, no plots
# Extra options pass through, e.g. `scripts/gpu_bench.sh d256 --dtypes fp16 --providers flashtriton,sdpa_cudnn`.
#
# Where nvidia-smi is on PATH the grid runs with --clock: each row also records the SM clock,
# the board power and the cycles per call while it was timed.
# Results: $OUT/<date>-<what>.json (rewritten after every configuration, so a run cut short keeps
# what it measured, with its rows' clock) and $OUT/plots-<what>/*.png. Copy the JSON to
# bench/results/ to commit it; `flashtriton bench --plot-only FILE... --plots DIR` regenerates
# the plots from it.
# The working tree on the GPU machine has no .git: pass the commit as FLASHTRITON_COMMIT=<sha>.
# Needs python3 with torch and triton; rich and matplotlib are optional (plain text / no plots).
set -euo pipefail
cd "$(dirname "$0")/.."

WHAT="${1:-quick}"
[ $# -gt 0 ] && shift
OUT="${OUT:-out}"
mkdir -p "$OUT"
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
PY="${PYTHON:-python3}"

PLOT_ARGS=()
case "$WHAT" in
  quick) GRID=(--quick) ;;
  quick-all) GRID=(--quick --providers flashtriton,sdpa_flash,sdpa_cudnn,sdpa_efficient,flex,naive) ;;
  target) GRID=(--dtypes bf16 --passes fwd bwd --seqlens 1024 2048 4096 8192 16384
                --providers flashtriton sdpa_cudnn) ;;
  d64|d128|d256) GRID=(--headdims "${WHAT#d}") ;;
  full) GRID=() ;;
  features) GRID=(--feature all --quick) ;;
  *) echo "gpu_bench.sh: unknown WHAT '$WHAT' (quick, quick-all, target, d64, d128, d256, full, features)" >&2
     exit 2 ;;
esac

# the SM clock and board power beside every timing (`flashtriton bench --clock`), so that a
# row that moved between sessions can be told apart from a clock that did
CLOCK=()
command -v nvidia-smi >/dev/null && [ "$WHAT" != features ] && CLOCK=(--clock)

STAMP="$(date -u +%Y-%m-%d)"
JSON="$OUT/$STAMP-$WHAT.json"
PLOTS="$OUT/plots-$WHAT"
[ "$WHAT" = features ] || PLOT_ARGS=(--plots "$PLOTS")

if command -v nvidia-smi >/dev/null; then
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader || true
fi
"$PY" - <<'PYEOF'
import importlib.util, torch, triton
print(f"torch {torch.__version__} (CUDA {torch.version.cuda}), triton {triton.__version__}, "
      f"device: {torch.cuda.get_device_name() if torch.cuda.is_available() else 'none'}")
for name in ("rich", "matplotlib"):
    print(f"{name}: {'yes' if importlib.util.find_spec(name) else 'missing (degrades gracefully)'}")
PYEOF

"$PY" -m flashtriton.cli bench "${GRID[@]}" "${CLOCK[@]}" --out "$JSON" "${PLOT_ARGS[@]}" "$@" 2>&1 \
    | tee "$OUT/$STAMP-$WHAT.log"
echo "results: $JSON"
