"""Where a short float8 call's time goes, on the GPU: the public call (``flash_attn_func`` with
descales) against the same kernel launched directly (``fwd_gluon.attn_fwd_gluon`` with the
call's config, V's keys-minor copy included), and our bf16 call, at the bench's problem
(batch·seqlen 16384 tokens, heads·headdim 2048). Each row: do_bench's median (GPU time per
call) and the host's time per call (50 calls without a synchronize: what Python and the
launches cost the CPU). Where the host time reaches the GPU time, the call is host-bound: the
GPU waits for the next launch. ``--compare-plans`` adds the public calls with the call plans off
(kernels/common.py). Inputs: ``bench`` quantized per tensor as the bench does
(amax/448 descales), ``randn`` cast to float8 with descales of 1.

    PYTHONPATH=src python scripts/fp8_host_probe.py --out host.json --headdims 64,128,256 \
        --seqlen 1024 --causal both [--compare-plans]
"""

from __future__ import annotations

import argparse
import json
import time

import torch
import triton
from triton.testing import do_bench

import flashtriton
from flashtriton.bench.feature_providers import quantize_float8
from flashtriton.configs import gluon_fp8_config, make_params
from flashtriton.kernels import common, fwd_gluon

FP8 = torch.float8_e4m3fn
HOST_CALLS = 50


def host_us(fn) -> float:
    """Host time per call, µs: ``HOST_CALLS`` calls queued without waiting for the GPU."""
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(HOST_CALLS):
        fn()
    us = (time.perf_counter() - t0) / HOST_CALLS * 1e6
    torch.cuda.synchronize()
    return us


def cases(d: int, seqlen: int, causal: bool, compare_plans: bool = False) -> dict:
    """The calls timed at one (head dim, length, mask): name -> a function of no arguments;
    ``compare_plans``: the public calls with the call plans off too (``*_no_plan``)."""
    batch, heads = 16384 // seqlen, 2048 // d
    x = [torch.randn(batch, seqlen, heads, d, device="cuda", dtype=torch.bfloat16)
         for _ in range(3)]
    quant = [quantize_float8(t) for t in x]
    bench = [t for t, _ in quant]
    descales = [s for _, s in quant]
    ones = [torch.ones(1, device="cuda") for _ in range(3)]
    randn = [t.to(FP8) for t in x]
    cfg = gluon_fp8_config(d, causal, seqlen)
    params = make_params(d, causal=causal)

    def public(qkv, ds):
        return lambda: flashtriton.flash_attn_func(*qkv, causal=causal, q_descale=ds[0],
                                                   k_descale=ds[1], v_descale=ds[2])

    def direct(qkv, ds):
        descale = torch.cat(ds)
        return lambda: fwd_gluon.attn_fwd_gluon(
            *qkv, params, cfg.block_m, cfg.block_n, cfg.num_warps, cfg.num_stages, cfg.pingpong,
            cfg.persistent, cfg.tile_order, descale=descale)

    def no_plans(fn):  # the call with the call plans turned off (kernels/common.py)
        def call():
            common.PLANS["enabled"] = False
            try:
                return fn()
            finally:
                common.PLANS["enabled"] = True
        return call

    calls = {"public_bench": public(bench, descales), "public_ones": public(bench, ones),
             "public_randn": public(randn, ones), "direct_bench": direct(bench, descales),
             "direct_randn": direct(randn, ones),
             "bf16": lambda: flashtriton.flash_attn_func(*x, causal=causal)}
    if compare_plans:
        calls["public_bench_no_plan"] = no_plans(calls["public_bench"])
        calls["bf16_no_plan"] = no_plans(calls["bf16"])
    return cfg, calls


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--headdims", default="64,128,256")
    ap.add_argument("--seqlen", default="1024", help="comma-separated key lengths")
    ap.add_argument("--causal", choices=("no", "yes", "both"), default="both")
    ap.add_argument("--rep-ms", type=int, default=300)
    ap.add_argument("--compare-plans", action="store_true",
                    help="also time the public calls with the call plans turned off")
    args = ap.parse_args(argv)
    masks = {"no": (False,), "yes": (True,), "both": (False, True)}[args.causal]
    rows = []
    for d in (int(x) for x in args.headdims.split(",")):
        for seqlen in (int(x) for x in args.seqlen.split(",")):
            for causal in masks:
                cfg, calls = cases(d, seqlen, causal, args.compare_plans)
                flops = 4 * 16384 * seqlen * 2048 / (2 if causal else 1)
                line = []
                for name, fn in calls.items():
                    fn()
                    ms = do_bench(fn, warmup=200, rep=args.rep_ms)
                    host = host_us(fn)
                    rows.append({"headdim": d, "seqlen": seqlen, "causal": causal, "case": name,
                                 "ms": ms, "tflops": flops / ms / 1e9, "host_us": host,
                                 "persistent": cfg.persistent})
                    line.append(f"{name} {ms:.3f} ms {flops / ms / 1e9:.1f} host {host:.0f} us")
                print(f"d{d} {seqlen} {'causal' if causal else 'full'} "
                      f"({'persistent' if cfg.persistent else 'one program per tile'}): "
                      + "; ".join(line), flush=True)
    with open(args.out, "w") as f:
        json.dump({"meta": {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
                            "triton": triton.__version__}, "results": rows}, f, indent=1)


if __name__ == "__main__":
    main()
