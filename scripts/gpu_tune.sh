#!/usr/bin/env bash
# The GPU suite (large shapes), then the config sweeps behind configs.py, in one device call.
#
#   OUT=out [SWEEPS="bwd-d64 dropout ..."] scripts/gpu_tune.sh [tests|sanitize|sweeps|all]
#
# sanitize: compute-sanitizer memcheck, then synccheck, on `scripts/sanitize.py --gluon-only`
# (the Gluon launches; memcheck took over 100 s in session 8), logs in $OUT/sanitizer-*.log.
# $SANITIZE_TOOLS (default "memcheck synccheck", e.g. "racecheck") and $SANITIZE_ARGS (default
# --gluon-only, e.g. --d256-only) choose the tools and the launches. racecheck prints every
# hazard (its log gzipped, $OUT/sanitizer-racecheck.log.gz), grouped by
# scripts/racecheck_summary.py into $OUT/sanitizer-racecheck-summary.txt; on the Gluon kernels
# it reports hazards on the bytes Triton's warp_specialize code starts the worker warps with
# (session 53), so read the summary, not the count. --d256-only took 68 s under racecheck.
#
# SWEEPS (default bwd-d64 fwd-d256 fwd-fp8 dropout): bwd-d128, bwd-d128-det, bwd-d64, bwd-d256,
# fwd-d256, fwd-fp8, fwd-fp8-gluon (float8: the Gluon forward's tiles against the tl kernel's,
# d64/d128/d256 at 16k), dropout, fwd-pp, fwd-pp-fp16, fwd-ws-short (the Gluon forward), bwd-gluon (d128), bwd-gluon-d64,
# bwd-gluon-fp16 / bwd-gluon-bf16 (the shipped backward config in each dtype), fwd-pers /
# fwd-pers-d64 (the persistent Gluon forward against the shipped one), fwd-pers-d64-causal (its
# causal tiles 128 or 64 keys wide), fwd-c3 (d64: two consumer warpgroups or three, block_m
# 192), fwd-c3-all (the same after consumers skip the causal tiles right of their rows),
# fwd-c3-2k (two or three at 2048 keys), fwd-c3-fp16 (the same in fp16), bwd-pers / bwd-pers-d64
# (the Gluon backward, persistent or one program per tile), bwd-defer (split dQ with each step's
# dQ product deferred to the next step, or not; both launches), fwd-c3-causal (d64 causal: two
# consumers or three, persistent tiles head- or row-block-major), fwd-row-d128 (d128 causal,
# persistent with the modeled order or one program per tile), fwd-c3-8k (d64 causal at 8192
# keys: two consumers or three), bwd-defer-d128c (d128 causal 4096, deferred dQ or not, twice),
# bwd-d128c-empty (d128 causal, deferred dQ on its own barriers or on `empty`, or not deferred;
# both launches; 1k-16k), bwd-d128c-2k (d128 causal at 2k and 4k keys: deferred dQ on `empty`
# or not, persistent), bwd-gluon-d256 (the d256 Gluon dK/dV and dQ kernels against the tl
# two-kernel config), fwd-gluon-d256-pers (d256 forward, persistent or not), bwd-d256-spills
# (d256, the tl configs that spill least, atomic dQ or two kernels), fwd-gluon-d256 (the
# Gluon forward at d256, 64- or 32-key tiles, with and without ping-pong, against the shipped
# tl config), bwd-after-fence (d64 and d128 backward at 4k and 16k: deferred dQ on its own
# barriers or on `empty`, persistent or not; d64 with two or three ring slots), fwd-c3-pp (the
# d64 persistent forward on three consumers, with and without ping-pong among them, 4k and 16k,
# causal or not), fwd-pp-d64 (ping-pong on two and three consumers at d64, 1k to 8k keys),
# fwd-c3-more (three consumers with ping-pong: 2 or 3 ring slots, 128- or 64-key tiles; and in
# float16), bwd-d64-m128 (the d64 backward with 128-query steps, split dQ not deferred, against
# the shipped 64-query launches), fwd-d64-short (the d64 two-consumer forward at 1k-4k with
# three ring slots or 64-key tiles), bwd-d64-kv-regs (the d64 backward's launches again once its
# K and V sit in registers: ring slots, persistent or not, dQ waiting on `empty` or not),
# bwd-d64-alt (the d64 backward's launches with the warpgroups taking turns at dQ, or not),
# bwd-d128-runs (the d128 backward's launches again once its dQ accumulator is kept in runs:
# persistent or not, the deferred dQ waiting on `empty` or on `ds_ready`, dQ not deferred).
# Results land in $OUT/tune.tgz (the per-sweep JSON and logs). The suite's time limit is
# $TESTS_LIMIT seconds (default 480; it took 295 s in session 17, 400 s in session 23); pytest
# is interrupted 30 s before it (SIGINT), so that a run cut short still prints its failures'
# tracebacks and its summary; pytest runs with -v, so each failure is named in the log as it
# happens (session 71's rest part, interrupted as it finished, printed neither). $TESTS_FILES
# (default: tests) runs part of the suite; on an H100 the whole suite does not fit one call
# (330 s + 300 s with eight workers, session 71), so $TESTS_PART splits it in two: `bwd` (the
# six files that reach the backward and the configs: $BWD_TEST_FILES below) and `rest` (every
# other tests/test_*.py); `all` (default) runs $TESTS_FILES.
#
# Each sweep checks every config's output before timing it (scripts/tune.py) and writes
# $OUT/tune-<name>.json; $OUT/steps.txt says how each step ended and how long it took.
set -u
source "$(dirname "$0")/gpu_env.sh"
WHAT="${1:-all}"
# The limits below were sized with do_bench's old 25 ms warm-up; tune.py now warms every timing
# (cuDNN's too) up for 1 s, so each limit is stretched by half.
sweep() { local name=$1 limit=$(( $2 * 3 / 2 )); shift 2
          step "tune-$name" "$limit" sh -c "python3 scripts/tune.py --out '$OUT/tune-$name.json' $* \
              > '$OUT/tune-$name.log' 2>&1"; tail -n 12 "$OUT/tune-$name.log"; }

if [ "$WHAT" = sanitize ]; then
  for tool in ${SANITIZE_TOOLS:-memcheck synccheck}; do
    flags="--print-limit 20"
    [ "$tool" = racecheck ] && flags="--racecheck-report hazard --print-limit 0 --show-backtrace no"
    step "sanitize-$tool" 300 sh -c "compute-sanitizer --tool $tool $flags \
        python3 scripts/sanitize.py ${SANITIZE_ARGS:---gluon-only} > '$OUT/sanitizer-$tool.log' 2>&1"
    tail -n 2 "$OUT/sanitizer-$tool.log"
    if [ "$tool" = racecheck ]; then
      python3 scripts/racecheck_summary.py "$OUT/sanitizer-racecheck.log" \
          > "$OUT/sanitizer-racecheck-summary.txt" 2>&1
      head -n 12 "$OUT/sanitizer-racecheck-summary.txt"
      gzip -f "$OUT/sanitizer-racecheck.log"
    fi
  done
  exit 0
fi
if [ "$WHAT" != sweeps ]; then
  BWD_TEST_FILES="tests/test_gluon_bwd.py tests/test_configs.py tests/test_flash_attn.py \
tests/test_sdpa.py tests/test_compile.py tests/test_features.py"
  if [ "${TESTS_PART:-all}" != all ] && [ -n "${TESTS_FILES:-}" ]; then
    echo "gpu_tune.sh: set TESTS_FILES or TESTS_PART, not both" >&2; exit 2
  fi
  case "${TESTS_PART:-all}" in
    all) files=$(printf '%s' "${TESTS_FILES:-tests}" | tr '\n' ' ') ;;
    bwd) files=$BWD_TEST_FILES ;;
    rest) files=$(for f in tests/test_*.py; do
                    case " $BWD_TEST_FILES " in *" $f "*) ;; *) printf '%s ' "$f" ;; esac
                  done) ;;
    *) echo "gpu_tune.sh: TESTS_PART must be all, bwd or rest, not '$TESTS_PART'" >&2; exit 2 ;;
  esac
  # one pytest worker per 9 GiB of GPU memory, at most 16 (the large cases peak near 12 GiB a
  # process: 16 workers fit the H200's 141 GiB, not the H100's 80); TESTS_WORKERS overrides
  mib=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits 2>/dev/null | head -n 1)
  case "$mib" in ''|*[!0-9]*) mib="" ;; esac  # no nvidia-smi, or no number: the H200's count
  workers=${TESTS_WORKERS:-$(( ${mib:-147456} / 1024 / 9 ))}
  [ "$workers" -gt 16 ] && workers=16; [ "$workers" -lt 1 ] && workers=1
  echo "tests: $workers workers (${mib:-?} MiB GPU memory)"
  limit=${TESTS_LIMIT:-480}
  [ "$limit" -gt 30 ] || { echo "gpu_tune.sh: TESTS_LIMIT must be more than 30 s" >&2; exit 2; }
  step tests "$limit" sh -c "FLASHTRITON_LARGE=1 timeout -s INT -k 20 $(( limit - 30 )) \
      python3 -m pytest -v -n $workers -p no:cacheprovider $files \
      -W ignore::DeprecationWarning > '$OUT/gpu-tests.log' 2>&1"
  grep -E "FAILED|ERROR|passed|failed" "$OUT/gpu-tests.log" | tail -n 15
fi
[ "$WHAT" = tests ] && exit 0
SWEEPS="${SWEEPS:-bwd-d64 fwd-d256 fwd-fp8 dropout}"
for name in $SWEEPS; do
  case "$name" in
    # backward, atomic dQ (the default) next to the deterministic two-kernel path's config
    bwd-d128) sweep bwd-d128 70 --pass bwd --headdims 128 --seqlens 16384 \
        --bwd-space "'64:128;8;2;ptr,ptrdq,tma,dqtma|64:128;8;3;ptr|32:128;8;2;ptr'" ;;
    bwd-d128-det) sweep bwd-d128-det 30 --pass bwd --headdims 128 --seqlens 16384 --deterministic \
        --bwd-space "'64:64;4;2;ptr'" ;;
    bwd-d64) sweep bwd-d64 60 --pass bwd --headdims 64 --seqlens 16384 \
        --bwd-space "'64:128;8;2;tma,ptr,dqtma|64:64;4;3;tma|128:128;8;2;dqtma'" ;;
    bwd-d256) sweep bwd-d256 45 --pass bwd --headdims 256 --seqlens 4096 \
        --bwd-space "'32:64;8;1;ptr|64:64;8;1;ptr|32:32;4;1;ptr'" ;;
    fwd-d256) sweep fwd-d256 40 --pass fwd --headdims 256 --seqlens 4096 \
        --fwd-space "'128:32;8;2;tma|128:64;8;1,2;tma|64:64;4;2;tma'" ;;
    fwd-fp8) sweep fwd-fp8 45 --pass fwd --headdims 128 --seqlens 16384 --dtype fp8 \
        --fwd-space "'128:128;8;2,3,4;tma|128:64;4,8;2;tma|128:256;8;2;tma'" ;;
    fwd-fp8-gluon) sweep fwd-fp8-gluon 120 --pass fwd --headdims 64,128,256 --seqlens 16384 --dtype fp8 \
        --fwd-space "'128:128;4;2,3;gluonpp|128:64;4;2,3;gluonpp|128:128;4;2;gluon|128:128;8;2;tma|128:64;4;2;tma'" ;;
    dropout) sweep dropout 75 --pass fwd,bwd --headdims 128 --seqlens 16384 --causal 0 --dropout 0.1 \
        --fwd-space "'128:128;8;2,3;tma|128:64;8;2;tma|128:64;4;2;tma'" \
        --bwd-space "'64:128;8;2,3;ptr,ptrdq|64:64;4;2;ptr'" ;;
    fwd-pp) sweep fwd-pp 170 --pass fwd --headdims 128,64 --seqlens 16384 \
        --fwd-space "'128:128;4;2;gluon,gluonpp|128:128;4;3;gluonpp|128:64;4;2;tma'" ;;
    fwd-pp-fp16) sweep fwd-pp-fp16 60 --pass fwd --headdims 128 --seqlens 16384 --dtype fp16 \
        --fwd-space "'128:128;4;2;gluon,gluonpp|128:64;4;2;tma'" ;;
    bwd-gluon) sweep bwd-gluon 90 --pass bwd --headdims 128 --seqlens 16384 \
        --bwd-space "'64:128;4;2,3;gluonsplit|64:128;8;3;ptr'" ;;
    bwd-gluon-d64) sweep bwd-gluon-d64 90 --pass bwd --headdims 64 --seqlens 16384 \
        --bwd-space "'64:128;4;2,3;gluon,gluonsplit|64:64;4;3;tma'" ;;
    bwd-gluon-fp16) sweep bwd-gluon-fp16 90 --pass bwd --headdims 128,64 --seqlens 16384 \
        --dtype fp16 --bwd-space "'64:128;4;2;gluonsplit'" ;;
    bwd-gluon-bf16) sweep bwd-gluon-bf16 90 --pass bwd --headdims 128,64 --seqlens 16384 \
        --bwd-space "'64:128;4;2;gluonsplit'" ;;
    fwd-pers) sweep fwd-pers 150 --pass fwd --headdims 128 --seqlens 1024,4096,16384 \
        --fwd-space "'128:128;4;2;gluonpp,gluonpppers'" ;;
    bwd-pers) sweep bwd-pers 200 --pass bwd --headdims 128 --seqlens 1024,4096,16384 \
        --bwd-space "'64:128;4;2;gluonsplit,gluonsplitpers'" ;;
    bwd-pers-d64) sweep bwd-pers-d64 200 --pass bwd --headdims 64 --seqlens 1024,4096,16384 \
        --bwd-space "'64:128;4;2;gluonsplit,gluonsplitpers'" ;;
    fwd-pers-d64) sweep fwd-pers-d64 150 --pass fwd --headdims 64 --seqlens 1024,4096,16384 \
        --fwd-space "'128:128;4;2;gluon,gluonpers'" ;;
    fwd-pers-d64-causal) sweep fwd-pers-d64-causal 150 --pass fwd --headdims 64 --seqlens 1024,4096 \
        --causal 1 --fwd-space "'128:128;4;2,3;gluonpers|128:64;4;2,3;gluonpers|128:64;4;3;gluonpppers'" ;;
    fwd-c3) sweep fwd-c3 240 --pass fwd --headdims 64 --seqlens 1024,4096,16384 --causal 0,1 \
        --fwd-space "'128:128;4;2;gluon,gluonpers|192:128;4;2,3;gluon,gluonpp,gluonpers,gluonpppers'" ;;
    fwd-c3-all) sweep fwd-c3-all 240 --pass fwd --headdims 64 --seqlens 1024,4096,16384 --causal 0,1 \
        --fwd-space "'128:128;4;2;gluon,gluonpers|192:128;4;2;gluon,gluonpp,gluonpers,gluonpppers'" ;;
    fwd-c3-2k) sweep fwd-c3-2k 60 --pass fwd --headdims 64 --seqlens 2048 --causal 0 \
        --fwd-space "'128:128;4;2;gluonpers|192:128;4;2;gluonpers'" ;;
    fwd-c3-fp16) sweep fwd-c3-fp16 60 --pass fwd --headdims 64 --seqlens 4096,16384 --causal 0 \
        --dtype fp16 --fwd-space "'128:128;4;2;gluonpers|192:128;4;2;gluonpers'" ;;
    bwd-defer) sweep bwd-defer 240 --pass bwd --headdims 64,128 --seqlens 1024,4096,16384 \
        --bwd-space "'64:128;4;2;gluonsplit,gluonsplitdefer,gluonsplitpers,gluonsplitdeferpers'" ;;
    fwd-c3-causal) sweep fwd-c3-causal 200 --pass fwd --headdims 64 --seqlens 1024,4096,16384 \
        --causal 1 \
        --fwd-space "'128:128;4;2;gluon,gluonpershead|192:128;4;2;gluon,gluonpershead,gluonpersrow'" ;;
    fwd-c3-8k) sweep fwd-c3-8k 60 --pass fwd --headdims 64 --seqlens 8192 --causal 1 \
        --fwd-space "'128:128;4;2;gluon,gluonpers|192:128;4;2;gluonpershead,gluonpersrow'" ;;
    bwd-defer-d128c) sweep bwd-defer-d128c 60 --pass bwd --headdims 128 --seqlens 4096 --causal 1 \
        --bwd-space "'64:128;4;2;gluonsplitpers,gluonsplitdeferpers|64:128;4;2;gluonsplitpers,gluonsplitdeferpers'" ;;
    # session 16: the d128 causal backward with deferred dQ waiting on `empty`, both launches
    bwd-d128c-empty) sweep bwd-d128c-empty 120 --pass bwd --headdims 128 \
        --seqlens 1024,4096,16384 --causal 1 --bwd-space \
        "'64:128;4;2;gluonsplitpers,gluonsplitdeferpers,gluonsplitdeferemptypers,gluonsplit,gluonsplitdefer,gluonsplitdeferempty'" ;;
    # session 17 (branch bwd-d128c-defer): d128 causal at 2k keys, where the branch starts to
    # defer dQ (FEW_KEYS_BWD_BELOW), deferred on `empty` or not; 4k beside it
    bwd-d128c-2k) sweep bwd-d128c-2k 60 --pass bwd --headdims 128 --seqlens 2048,4096 \
        --causal 1 --bwd-space "'64:128;4;2;gluonsplitpers,gluonsplitdeferemptypers'" ;;
    # session 17 (branch bwd-gluon-d256): the d256 Gluon dK/dV kernel (one or two ring slots,
    # one program per tile or persistent) against the tl two-kernel config shipped
    bwd-gluon-d256) sweep bwd-gluon-d256 120 --pass bwd --headdims 256 \
        --seqlens 1024,4096,16384 --causal 0,1 \
        --bwd-space "'64:64;4;1,2;gluonsep|64:64;4;2;gluonseppers|64:64;8;2;ptrsep'" ;;
    # session 17 (branch fwd-gluon-d256-pers): the d256 Gluon forward persistent (O through
    # Q's buffers) or one program per tile, with ping-pong or without
    fwd-gluon-d256-pers) sweep fwd-gluon-d256-pers 120 --pass fwd --headdims 256 \
        --seqlens 1024,4096,16384 --causal 0,1 \
        --fwd-space "'128:64;4;2;gluonpp,gluonpppers,gluon,gluonpers'" ;;
    # session 16 (branch fwd-gluon-d256): the Gluon forward at d256 against the tl one
    fwd-gluon-d256) sweep fwd-gluon-d256 150 --pass fwd --headdims 256 \
        --seqlens 1024,4096,16384 --causal 0,1 --fwd-space \
        "'128:64;4;2;gluon,gluonpp|128:32;4;2,3,4;gluon,gluonpp|128:64;8;2;tma'" ;;
    # session 16: the d256 tl backward's configs that spill least (scripts/sass_space.py)
    bwd-d256-spills) sweep bwd-d256-spills 90 --pass bwd --headdims 256 --seqlens 4096 \
        --causal 0,1 --bwd-space \
        "'64:64;8;1;ptr|64:32;8;2;ptr|64:16;8;1;tma|64:64;8;2;tmasep,ptrsep|32:64;8;2;tmasep|64:32;8;2;ptrsep'" ;;
    fwd-row-d128) sweep fwd-row-d128 90 --pass fwd --headdims 128 --seqlens 4096,16384 --causal 1 \
        --fwd-space "'128:128;4;2;gluonpp,gluonpppers'" ;;
    fwd-ws-short) sweep fwd-ws-short 90 --pass fwd --headdims 128,64 --seqlens 1024,4096 \
        --fwd-space "'128:128;4;2;gluon,gluonpp|128:64;4;2;tma|128:128;8;3;tma'" ;;
    # session 21: the d64/d128 backward's ring slots and dq_on_empty again, after 7de1754 moved
    # the deferred path's dS fence (the launches as shipped: persistent below 8192 keys)
    # (d128 has no room for a third slot)
    # session 23: three consumers' softmaxes may line up instead of running under each other's
    # products (docs/perf-log.md, session 23, step 4); ping-pong orders their issue
    fwd-c3-pp) sweep fwd-c3-pp 120 --pass fwd --headdims 64 --seqlens 4096,16384 --causal 0,1 \
        --fwd-space "'192:128;4;2;gluonpers,gluonpppers'" ;;
    # session 24: ping-pong on two and three consumers at d64 below 16k keys (three with it
    # gained 3-5% at 16k in fwd-c3-pp), and three against two at 8k causal
    fwd-pp-d64) sweep fwd-pp-d64 150 --pass fwd --headdims 64 --seqlens 1024,4096,8192 \
        --causal 0,1 \
        --fwd-space "'128:128;4;2;gluonpers,gluonpppers|192:128;4;2;gluonpers,gluonpppers'" ;;
    # prepared in session 28: the d64 two-consumer forward in ping-pong (shipped below 4096
    # keys, 8192 causal) with three ring slots or 64-key tiles, at 1k and 2k, where the d64
    # forward trails cuDNN (0.94-0.99x in session 28's runs); session 29 added 4k, where the
    # causal forward runs two consumers too. Run in session 30 (…-s30-tune-fwd-d64-short.json):
    # the shipped launches best or within 1.1%; cuDNN ahead at 1k and 2k by 2-7%
    fwd-d64-short) sweep fwd-d64-short 150 --pass fwd --headdims 64 --seqlens 1024,2048,4096 \
        --causal 0,1 --fwd-space "'128:128;4;2,3;gluonpppers|128:64;4;2,3;gluonpppers'" ;;
    # session 29: the d64 backward holds K and V in registers (Sᵀ and dPᵀ read only Q and dO
    # from shared memory), so its launches are timed again: two or three ring slots, persistent
    # or one program per tile, the deferred dQ waiting on ds_ready or on `empty`. Run in
    # session 30 (…-s30-tune-bwd-d64-kv-regs.json): no launch beyond the timings' spread
    bwd-d64-kv-regs) sweep bwd-d64-kv-regs 200 --pass bwd --headdims 64 \
        --seqlens 1024,4096,16384 --causal 0,1 --bwd-space \
        "'64:128;4;2,3;gluonsplitdeferpers,gluonsplitdeferemptypers,gluonsplitdefer'" ;;
    # session 30: the d128 backward's dQ accumulator in runs (each step's reduction of
    # contiguous rows) changed the step's tail, so its launches are timed again: persistent or
    # one program per tile, the deferred dQ product waiting on `empty` or on `ds_ready`, and dQ
    # not deferred (what d128 causal runs below FEW_KEYS_BWD_BELOW)
    # session 31 (offline): the d64 backward with the warpgroups taking turns at a step's whole
    # dQ product (dq_alternate), two or three ring slots, persistent or not, against the
    # launches without it
    bwd-d64-alt) sweep bwd-d64-alt 200 --pass bwd --headdims 64 \
        --seqlens 1024,4096,16384 --causal 0,1 --bwd-space \
        "'64:128;4;2,3;gluonsplitdeferemptyaltpers,gluonsplitdeferemptyalt,gluonsplitdeferemptypers,gluonsplitdeferempty'" ;;
    bwd-d128-runs) sweep bwd-d128-runs 160 --pass bwd --headdims 128 \
        --seqlens 1024,4096,16384 --causal 0,1 --bwd-space \
        "'64:128;4;2;gluonsplitdeferemptypers,gluonsplitdeferpers,gluonsplitdeferempty,gluonsplitdefer,gluonsplitpers'" ;;
    # session 28: the d64 backward with 128-query steps (split dQ, not deferred: the deferred
    # dS buffers of four step parities do not fit; 200,136 bytes of shared memory, 480 bytes
    # of spills, no serialized MMAs offline) against the shipped 64-query launches; measured
    # 1.5-6.0% slower than the best 64-query launch in every row (…-s28-tune-bwd-d64-m128.json)
    bwd-d64-m128) sweep bwd-d64-m128 200 --pass bwd --headdims 64 --seqlens 1024,4096,16384 \
        --causal 0,1 --bwd-space \
        "'64:128;4;2,3;gluonsplitdeferpers|64:128;4;2;gluonsplitdefer|128:128;4;2;gluonsplit,gluonsplitpers'" ;;
    # session 24, after three consumers took ping-pong: their ring depth and key-tile width, and
    # the shipped config in float16
    fwd-c3-more) sweep fwd-c3-more 120 --pass fwd --headdims 64 --seqlens 4096,16384 \
        --causal 0,1 --fwd-space "'192:128;4;2,3;gluonpppers|192:64;4;2,3;gluonpppers'"
        sweep fwd-c3-fp16-pp 60 --pass fwd --headdims 64 --seqlens 4096,16384 --causal 0,1 \
        --dtype fp16 --fwd-space "'192:128;4;2;gluonpppers'" ;;
    bwd-after-fence) sweep bwd-after-fence-d64 150 --pass bwd --headdims 64 \
        --seqlens 4096,16384 --causal 0,1 --bwd-space \
        "'64:128;4;2,3;gluonsplitdeferpers,gluonsplitdeferemptypers,gluonsplitdefer,gluonsplitdeferempty'"
        sweep bwd-after-fence-d128 100 --pass bwd --headdims 128 --seqlens 4096,16384 \
        --causal 0,1 --bwd-space \
        "'64:128;4;2;gluonsplitdeferpers,gluonsplitdeferemptypers,gluonsplitdefer,gluonsplitdeferempty'" ;;
    *) echo "unknown sweep $name" ;;
  esac
done
# one archive: fewer files to copy back from the GPU machine
tar -C "$OUT" -czf "$OUT/tune.tgz" $(cd "$OUT" && ls tune-*.json tune-*.log 2>/dev/null) \
    && rm -f "$OUT"/tune-*.json "$OUT"/tune-*.log
cat "$OUT/steps.txt"
