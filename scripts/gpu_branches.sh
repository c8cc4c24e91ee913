#!/usr/bin/env bash
# On the GPU machine: for each branch copied by scripts/branch_trees.sh, its GPU tests, then an
# A/B of its kernels against this tree's (scripts/gpu_ab.sh … bench: four runs, old / new / new
# / old), all in one call; everything under $OUT/branches.tgz (a call returns only 8 files),
# also what ran before a signal (a `timeout` around the script) stopped it.
#
#   OUT=out scripts/gpu_branches.sh trees \
#       "fwd-fewer-barriers|tests/test_gluon.py tests/test_validation.py|--passes fwd --headdims 64 128" \
#       "bwd-fewer-barriers|tests/test_gluon_bwd.py|--passes bwd --headdims 64 128"
#
# Each spec is BRANCH|TEST FILES|BENCH OPTIONS; TEST FILES "-" skips the tests (they passed in
# an earlier call) and runs the A/B only. The tests run with FLASHTRITON_LARGE=1 on
# $WORKERS workers (default 8: sixteen float64 references of the largest cases did not fit in
# the H200's memory, perf-log session 15); the A/B runs only if they pass, with
# `--quick --seqlens 1024 4096 16384 --providers flashtriton sdpa_cudnn --rounds 3` and the
# spec's options. $OUT/steps.txt says how each step ended. $TEST_TIMEOUT (default 400 s) bounds
# each branch's tests, so that a kernel that hangs costs no more than that.
# AB_MODE=inproc: each A/B instead times both trees in one process, round by round (gpu_ab.sh
# inproc, `--rounds ${AB_ROUNDS:-6} --rep-ms ${AB_REP_MS:-600}`: 100 ms a round, where the
# four-run A/B's rounds were 33 ms; providers: both trees and ${AB_PROVIDERS-sdpa_cudnn}; a
# --providers in the spec is overridden). The branch must have gpu_ab.sh's inproc mode (main
# from session 21 on). At 1k keys the same kernel's rounds moved by 10-20% in session 21's
# four-run A/Bs, more than the changes they measured.
# Name test files, not the whole `tests` folder: a tree has no git history, no bench/results
# and a COMMIT file of its own, so the tests of the scripts that read those fail there (nine in
# session 20: test_branch_trees, test_ab_bench, test_ab_compare, test_dtype_clock,
# test_ncu_details_table, test_gpu_ab). The full suite runs on the merged tree
# (scripts/gpu_tune.sh tests).
set -uo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 2 ] || { echo "usage: scripts/gpu_branches.sh DIR SPEC..." >&2; exit 2; }
DIR=$(cd "$1" && pwd); shift
ROOT=$PWD
OUT="${OUT:-out}"; mkdir -p "$OUT/branches"; OUT=$(cd "$OUT" && pwd)
WORKERS="${WORKERS:-8}"
# everything that ran goes into one archive, also when a limit (`timeout`) stops the script: the
# device tool returns no file nested as deep as branches/BRANCH/ab/ (session 30 lost an A/B so)
touch "$OUT/steps.txt"
pack() { [ -d "$OUT/branches" ] || return 0
         tar -czf "$OUT/branches.tgz" -C "$OUT" branches steps.txt && rm -rf "$OUT/branches"; }
trap 'echo "== stopped by a signal: what ran is in branches.tgz" | tee -a "$OUT/steps.txt"
      pack; exit 143' TERM INT
TEST_TIMEOUT="${TEST_TIMEOUT:-400}"
for spec in "$@"; do
  IFS='|' read -r branch tests bench <<< "$spec"
  tree="$DIR/$branch"; res="$OUT/branches/$branch"; mkdir -p "$res"
  [ -d "$tree/src" ] || { echo "== $branch: no $tree/src" | tee -a "$OUT/steps.txt"; continue; }
  t0=$SECONDS
  if [ "$tests" = "-" ]; then  # tests passed in an earlier call: the A/B only
    echo "== $branch tests skipped (-)" | tee -a "$OUT/steps.txt"
  else
    (cd "$tree" && PYTHONPATH="$tree/src${PYTHONPATH:+:$PYTHONPATH}" FLASHTRITON_LARGE=1 \
        timeout "$TEST_TIMEOUT" python3 -m pytest -q -n "$WORKERS" -p no:cacheprovider $tests \
        -W ignore::DeprecationWarning > "$res/gpu-tests.log" 2>&1)
    rc=$?
    echo "== $branch tests rc=$rc $((SECONDS - t0))s: $(tail -n 1 "$res/gpu-tests.log")" \
        | tee -a "$OUT/steps.txt"
    [ $rc -eq 0 ] || continue
  fi
  # the branch's own gpu_ab.sh, so that its tree is "new" and this one's src "old"
  # this tree is the old side: its commit is the one the call was given
  if [ "${AB_MODE:-bench}" = inproc ]; then
    OUT="$res/ab" AB_OLD_COMMIT="${FLASHTRITON_COMMIT:-unknown}" \
        AB_PROVIDERS="${AB_PROVIDERS-sdpa_cudnn}" bash "$tree/scripts/gpu_ab.sh" "$ROOT/src" \
        inproc --quick --seqlens 1024 4096 16384 --rounds "${AB_ROUNDS:-6}" \
        --rep-ms "${AB_REP_MS:-600}" $bench \
        | tee "$res/ab-table.txt"
  else
    OUT="$res/ab" AB_OLD_COMMIT="${FLASHTRITON_COMMIT:-unknown}" \
        bash "$tree/scripts/gpu_ab.sh" "$ROOT/src" bench --quick \
        --seqlens 1024 4096 16384 --providers flashtriton sdpa_cudnn --rounds 3 $bench \
        | tee "$res/ab-table.txt"
  fi
done
pack
