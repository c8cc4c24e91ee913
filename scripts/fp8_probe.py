"""Where the float8 forward's time goes, on the GPU: V's keys-minor copy alone, the Gluon
launch with it (what a caller pays), the Gluon kernel on a copy made beforehand, the portable
tl kernel (its own copy included) and our bf16 forward, at the bench's 16k problem (batch·seqlen
16384 tokens, heads·headdim 2048) for each head dim and mask, in interleaved rounds (each
provider once a round; a row's time is the median of its rounds). Every output is checked
first against SDPA on the same values in bf16 (relative error below 6e-2, as scripts/tune.py).
``fp8_gluon``: the public launcher with the config a call of that length runs
(``gluon_fp8_config``). ``fp8_gluon_kernel``: the kernel-only launch, one program per tile, on
the tiling of ``gluon_fp8_config``'s long-call entry (at d128, persistent since session 73, the
same 128 x 128 tiling), with float32 row sums; ``fp8_gluon_rowsum``: the same with the row sums on
the tensor cores (``rowsum_mma``, the shipped choice at head dims 64 and 128).
``fp8_gluon_three``: the kernel-only launch with three consumers (block_m 192, the row sums as
the head dim's default; ``THREE``'s key tiles and ring slots: at d128 64-key tiles, since
128-key ones spill 1,596 bytes there; not at d256).
``fp8_gluon_two``: the kernel-only launch with two consumers (128 x 128, two slots, the row sums
as the head dim's default; d256: its shipped 128 x 64), whatever the shipped config is;
``fp8_gluon_pers``: the same persistent (causal on the host's greedy tile table, as our bf16
forward), ``fp8_gluon_pers3``: three consumers persistent (d64 only; 128-key tiles, two
slots, spilling 488 bytes; shipped from 2k keys, causal 4k, since session 75),
``fp8_gluon_pers3_n64``: the same on 64-key tiles with three slots (no spill offline, 447
instructions a step; slower than ``fp8_gluon_pers3`` in session 75).

    PYTHONPATH=src python3 scripts/fp8_probe.py --out $OUT/fp8-probe.json [--rounds 3]
        [--headdims 64,128,256] [--seqlen 16384[,4096,...]] [--providers fp8_gluon_kernel,...]
        [--three-stages 2,3,4] [--regs 160,152]

``--three-stages``: time ``fp8_gluon_three`` at each of these ring depths (rows
``fp8_gluon_three@sN``) instead of ``THREE``'s. ``--regs 160,152``: time each three-consumer
kernel-only provider (block_m 192) at each of these registers a consumer thread (rows
``NAME@rN``; ``fwd_gluon.attn_fwd_gluon``'s ``regs``) instead of ``fwd_gluon.CONSUMER_REGS``'s.
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics

import torch
from triton.testing import do_bench

from flashtriton.configs import KernelConfig, gluon_fp8_config, make_params, tuned_fwd_config
from flashtriton.kernels import fwd_gluon
from flashtriton.kernels.fwd import attn_fwd


# fp8_gluon_three's (block_n, num_stages) by head dim (d128's three slots: untimed, a guess that
# half-size tiles need more loads in flight)
THREE = {64: (128, 2), 128: (64, 3)}
PROVIDERS = ("v_copy", "fp8_gluon", "fp8_gluon_kernel", "fp8_gluon_rowsum", "fp8_gluon_two",
             "fp8_gluon_pers", "fp8_gluon_pers3", "fp8_gluon_pers3_n64", "fp8_gluon_three",
             "fp8_tl", "bf16")
TWO = KernelConfig(128, 128, 4, 2, gluon=True, pingpong=True)  # fp8_gluon_two's


def rel_err(a, b):
    return ((a.float() - b.float()).norm() / b.float().norm()).item()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--headdims", default="64,128,256")
    ap.add_argument("--seqlen", default="16384", help="comma-separated key lengths")
    ap.add_argument("--warmup-ms", type=int, default=1000)
    ap.add_argument("--providers", default=None,
                    help="comma-separated subset (default: all that apply)")
    ap.add_argument("--three-stages", default=None,
                    help="comma-separated ring depths for fp8_gluon_three (default: THREE's)")
    ap.add_argument("--regs", default=None,
                    help="comma-separated registers a consumer thread for the three-consumer "
                         "kernel-only providers (default: fwd_gluon.CONSUMER_REGS's)")
    args = ap.parse_args(argv)
    regs = [int(x) for x in args.regs.split(",")] if args.regs else None
    three_stages = [int(x) for x in args.three_stages.split(",")] if args.three_stages else None
    wanted = args.providers.split(",") if args.providers else None
    unknown = sorted(set(wanted or ()) - set(PROVIDERS))
    if unknown:
        ap.error(f"--providers: unknown {', '.join(unknown)} (known: {', '.join(PROVIDERS)})")
    fp8 = torch.float8_e4m3fn
    rows = []
    for s, d, causal in itertools.product(map(int, args.seqlen.split(",")),
                                          map(int, args.headdims.split(",")), (False, True)):
        b, h = 16384 // s, 2048 // d
        torch.manual_seed(0)
        q, k, v = (torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16).to(fp8)
                   for _ in range(3))
        q16, k16, v16 = (t.to(torch.bfloat16) for t in (q, k, v))
        ref = torch.nn.functional.scaled_dot_product_attention(
            *(t.transpose(1, 2) for t in (q16, k16, v16)), is_causal=causal).transpose(1, 2)
        params = make_params(d, causal=causal)
        descale = torch.ones(3, device="cuda")
        cfg = gluon_fp8_config(d, causal)
        call_cfg = gluon_fp8_config(d, causal, s)  # what a call of s keys runs (fp8_gluon)
        tl_cfg = tuned_fwd_config(fp8, d, causal)
        copy = fwd_gluon.fp8_keys_minor(v)[0]
        made = fwd_gluon.fp8_keys_minor

        def three_config(stages=None):
            return KernelConfig(192, THREE[d][0], cfg.num_warps, stages or THREE[d][1],
                                gluon=True, pingpong=cfg.pingpong)

        two_cfg = TWO if d < 256 else cfg
        # each kernel-only provider's (tiling, rowsum_mma, persistent)
        gluon = {"fp8_gluon_kernel": (cfg, False, False),
                 "fp8_gluon_rowsum": (cfg, True, False),
                 "fp8_gluon_two": (two_cfg, None, False),
                 "fp8_gluon_pers": (two_cfg, None, True)}
        if d == 64:
            gluon["fp8_gluon_pers3"] = (three_config(2), None, True)
            gluon["fp8_gluon_pers3_n64"] = (
                KernelConfig(192, 64, cfg.num_warps, 3, gluon=True, pingpong=cfg.pingpong), None,
                True)
        if d in THREE:
            gluon.update({f"fp8_gluon_three@s{n}": (three_config(n), None, False)
                          for n in three_stages} if three_stages else
                         {"fp8_gluon_three": (three_config(), None, False)})

        if regs:  # each three-consumer entry at each register count
            gluon = {**{n: a for n, a in gluon.items() if a[0].block_m != 192},
                     **{f"{n}@r{r}": (*a, r) for n, a in gluon.items() if a[0].block_m == 192
                        for r in regs}}

        def kernel_only(tiles, rowsum_mma, persistent, consumer_regs=None):
            fwd_gluon.fp8_keys_minor = lambda _v: (copy, None)  # the copy made beforehand
            try:
                return fwd_gluon.attn_fwd_gluon(q, k, v, params, tiles.block_m, tiles.block_n,
                                                tiles.num_warps, tiles.num_stages,
                                                tiles.pingpong, persistent,
                                                "greedy" if persistent and causal else None,
                                                descale=descale, rowsum_mma=rowsum_mma,
                                                regs=consumer_regs)
            finally:
                fwd_gluon.fp8_keys_minor = made

        providers = {
            "v_copy": lambda: made(v)[0],
            "fp8_gluon": lambda: attn_fwd(q, k, v, params, descale=descale, config=call_cfg),
            **{name: (lambda a=args: kernel_only(*a)) for name, args in gluon.items()},
            "fp8_tl": lambda: attn_fwd(q, k, v, params, descale=descale,
                                       config=KernelConfig(**{**tl_cfg.__dict__,
                                                              "gluon": False})),
            "bf16": lambda: attn_fwd(q16, k16, v16, params),
        }
        if d == 256:
            del providers["fp8_gluon_rowsum"]
        if wanted:
            providers = {n: f for n, f in providers.items() if n.split("@")[0] in wanted}
        checked = {}
        for name, fn in providers.items():
            if name == "v_copy":
                ok = torch.equal(fn().view(torch.uint8), copy.view(torch.uint8))
                err = 0.0 if ok else float("nan")
            else:
                err = rel_err(fn()[0], ref)
                ok = err < 6e-2
            checked[name] = (ok, err)
        times = {name: [] for name, (ok, _) in checked.items() if ok}
        for _ in range(args.rounds):
            for name in times:
                times[name].append(do_bench(providers[name], warmup=args.warmup_ms, rep=100))
        flop = 4 * b * h * s * s * d / (2 if causal else 1)
        for name, (ok, err) in checked.items():
            ms = statistics.median(times[name]) if ok else None
            rows.append(dict(headdim=d, causal=causal, seqlen=s, batch=b, heads=h,
                             provider=name, status="ok" if ok else "wrong", err=err, ms=ms,
                             rounds_ms=times.get(name),
                             tflops=None if ms is None or name == "v_copy"
                             else flop / ms / 1e9,
                             config=(f"{gluon[name][0]}{' persistent' if gluon[name][2] else ''}"
                                     f"{f' regs {gluon[name][3]}' if len(gluon[name]) > 3 else ''}"
                                     if name in gluon else str(call_cfg) if name == "fp8_gluon" else
                                     str(tl_cfg) if name == "fp8_tl" else None)))
        line = "  ".join(f"{r['provider']} {r['ms']:.3f} ms" + (
            f" {r['tflops']:.1f}" if r['tflops'] else "") if r["ms"] else
            f"{r['provider']} WRONG {r['err']:.2e}" for r in rows[-len(checked):])
        print(f"{s:>5} d{d} {'causal' if causal else 'full  '}: {line}", flush=True)
        with open(args.out, "w") as f:
            json.dump({"meta": {"gpu": torch.cuda.get_device_name(),
                                "torch": torch.__version__}, "results": rows}, f, indent=1)


if __name__ == "__main__":
    main()
