"""Whether a float8 call plan changes what an extreme float8 call returns (docs/perf-log.md,
session 74, Next 1), on an sm_90 GPU: quantized values (up to 448) passed with the default
descales of 1, so the scores reach thousands of nats, run (a) with call plans off
(``common.PLANS``), a first call; (b) as the replay of a plan made by a call with other data.
Prints per (head dim, causal): whether (a) and (b) are bitwise equal, the largest |score|,
each's output error against float64 attention with tests/test_fp8.py's bound (the STYLE.md
rule against ``torch_fp8_attention``) and each's lse error with ``lse_bound`` (+ the row-sum
slack the Gluon default takes). JSON to --out.

    PYTHONPATH=src:tests python3 scripts/fp8_extreme_probe.py --out extreme.json
"""

from __future__ import annotations

import argparse
import json

import torch

from flashtriton import flash_attn_func
from flashtriton.kernels import common
from flashtriton.reference import attention_ref
from helpers import FLOOR
from test_fp8 import lse_bound, quantized_inputs, rowsum_extra, torch_fp8_attention

SHAPE = (2, 333, 301, 4, 2)  # b, sq, sk, h, hk: tests/test_fp8.py's plan test


def errors(results, deq, causal, d):
    """Each (out, lse) of ``results`` against float64 attention on deq: ([(output error, lse
    error), ...], output bound, lse bound)."""
    ref, ref_lse = attention_ref(*deq, causal=causal)
    low = torch_fp8_attention(*[x.float() for x in deq], causal=causal).double()
    fin, lfin = torch.isfinite(ref), torch.isfinite(ref_lse)
    bound = 2.0 * (low - ref)[fin].abs().max().item() + FLOOR[torch.bfloat16] * max(
        1.0, ref[fin].abs().max().item())
    errs = [((out.cpu().double() - ref)[fin].abs().max().item(),
             (lse.cpu()[lfin].double() - ref_lse[lfin]).abs().max().item())
            for out, lse in results]
    return errs, bound, lse_bound(deq[0], deq[1]) + rowsum_extra(d)


def one(d, causal, seed):
    b, sq, sk, h, hk = SHAPE
    torch.manual_seed(seed)
    (q8, k8, v8), _, _ = quantized_inputs(b, sq, sk, h, hk, d)
    deq = [x.to(torch.float64) for x in (q8, k8, v8)]  # the descales are 1
    common.clear_launch_caches()
    common.PLANS["enabled"] = False
    out_a, lse_a, _ = flash_attn_func(q8, k8, v8, causal=causal, return_attn_probs=True)
    common.PLANS["enabled"] = True
    common.clear_launch_caches()
    (p8, pk8, pv8), ds, _ = quantized_inputs(b, sq, sk, h, hk, d)  # makes the plan
    flash_attn_func(p8, pk8, pv8, causal=causal, q_descale=ds[0], k_descale=ds[1], v_descale=ds[2])
    assert len(common._PLANS) == (1 if q8.is_cuda else 0)  # plans are made on a GPU only
    out_b, lse_b, _ = flash_attn_func(q8, k8, v8, causal=causal, return_attn_probs=True)
    s = torch.einsum("bqhd,bkhd->bhqk", deq[0], deq[1].repeat_interleave(h // hk, 2)) / d ** 0.5
    equal = torch.equal(out_a, out_b) and torch.equal(lse_a, lse_b)
    row = {"d": d, "causal": causal, "equal": bool(equal), "max_score": s.abs().max().item()}
    errs, row["out_bound"], row["lse_bound"] = errors(((out_a, lse_a), (out_b, lse_b)),
                                                      [x.cpu() for x in deq], causal, d)
    for tag, (e, le) in zip(("noplan", "plan"), errs):
        row.update({f"{tag}_out_err": e, f"{tag}_lse_err": le})
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--headdims", default="64,128,256")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    rows = [one(int(d), causal, args.seed)
            for d in args.headdims.split(",") for causal in (False, True)]
    with open(args.out, "w") as f:
        gpu = torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu (interpreter)"
        json.dump({"gpu": gpu, "rows": rows}, f, indent=1)
    print(f"{'d':>4} {'causal':>6} {'equal':>5} {'max|s|':>9} {'out a':>8} {'out b':>8}"
          f" {'bound':>8} {'lse a':>8} {'lse b':>8} {'bound':>8}")
    for r in rows:
        print(f"{r['d']:>4} {r['causal']!s:>6} {r['equal']!s:>5} {r['max_score']:>9.1f}"
              f" {r['noplan_out_err']:>8.3g} {r['plan_out_err']:>8.3g} {r['out_bound']:>8.3g}"
              f" {r['noplan_lse_err']:>8.3g} {r['plan_lse_err']:>8.3g} {r['lse_bound']:>8.3g}")


if __name__ == "__main__":
    main()
