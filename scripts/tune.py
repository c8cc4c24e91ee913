"""Sweep block configs of the forward and backward kernels on the GPU; check each config's output
before timing it; print a table and write JSON.

    PYTHONPATH=src python3 scripts/tune.py --out $OUT/tune.json [--pass fwd,bwd] [--headdims 64,128]
        [--dtype bf16|fp16|fp8] [--deterministic] [--dropout 0.1] [--rounds 5]

``--rounds N`` times every checked config and cuDNN once a round, in turn, N rounds, so that
all of them meet the same swings of the power-capped clock; a row's time is the median of its
rounds (listed as ``rounds_ms``). Compare configs by their paired rounds, not one timing each.

float8 (forward only) is checked against SDPA on the dequantized inputs; with ``--dropout`` the
reference is our own launcher with its default config (the same mask), since no peer draws it.

The chosen entries go to src/flashtriton/configs.py with the JSON file named as their source.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import statistics
import sys
import time

import torch
from triton.testing import do_bench

from flashtriton.bench.harness import GPU_WARMUP_MS
from flashtriton.configs import KernelConfig, make_params
from flashtriton.kernels.bwd import attn_bwd
from flashtriton.kernels.fwd import attn_fwd


LOADS = ("tma", "ws", "ptr", "dqtma", "ptrdq", "tmasep", "ptrsep", "gluon", "gluonpp",
         "gluonsplit", "gluonpers", "gluonpppers", "gluonsplitpers", "gluonsplitdefer",
         "gluonsplitdeferpers", "gluonsplitdeferempty", "gluonsplitdeferemptypers",
         "gluonsplitdeferemptyalt", "gluonsplitdeferemptyaltpers",
         "gluonpershead", "gluonpersrow", "gluonsep", "gluonseppers")  # see --fwd-space


def parse_space(spec: str) -> list[KernelConfig]:
    """The configs of a space, "blocks;warps;stages;loads", several joined by "|"."""
    configs = []
    for part in spec.split("|"):
        blocks, warps, stages, loads = part.split(";")
        for bl, w, st, token in itertools.product(blocks.split(","), warps.split(","),
                                                  stages.split(","), loads.split(",")):
            token, _, regs = token.partition("+r")  # "+rN": a Gluon consumer's registers
            if regs and not regs.isdigit():
                raise SystemExit(f"tune.py: '+r{regs}': after '+r' a register count")
            ld, _, order = token.partition("@")  # "@greedy[N]": tile_order
            if order and not order.startswith("greedy"):
                raise SystemExit(f"tune.py: {token!r}: after '@' only greedy or greedyN")
            if ld not in LOADS:
                raise SystemExit(f"tune.py: unknown loads token {ld!r} (one of {', '.join(LOADS)})")
            bm, bn = bl.split(":")
            configs.append(KernelConfig(
                int(bm), int(bn), int(w), int(st), tma=ld not in ("ptr", "ptrdq", "ptrsep"),
                warp_specialize=ld == "ws", dq_tma=ld in ("dqtma", "ptrdq"),
                fused_dq="sep" not in ld,
                gluon=ld.startswith("gluon"), pingpong=ld in ("gluonpp", "gluonpppers"),
                split_dq=ld.startswith("gluonsplit"), defer_dq="defer" in ld,
                dq_on_empty="empty" in ld, dq_alternate="alt" in ld, persistent="pers" in ld,
                tile_order=(order or ("row" if ld.endswith("row") else
                                      "head" if ld.endswith("head") else None)),
                regs=int(regs) if regs else None))
    return configs


def flops(b, h, s, d, causal, pas):
    f = 4 * b * h * s * s * d / (2 if causal else 1)
    return f * (2.5 if pas == "bwd" else 1.0)


def rel_err(a, b):
    return ((a.float() - b.float()).norm() / b.float().norm()).item()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="tune.json")
    ap.add_argument("--pass", dest="passes", default="fwd,bwd")
    ap.add_argument("--headdims", default="64,128")
    ap.add_argument("--seqlens", default="4096,16384")
    ap.add_argument("--causal", default="0,1")
    ap.add_argument("--dtype", default="bf16", choices=["bf16", "fp16", "fp8"])
    ap.add_argument("--deterministic", action="store_true", help="backward: the two-kernel path")
    ap.add_argument("--dropout", type=float, default=0.0)
    ap.add_argument("--rounds", type=int, default=1,
                    help="time every checked config (and cuDNN) once a round, interleaved, "
                         "this many rounds; a row's ms is the median of its rounds "
                         "(rounds_ms in the JSON)")
    ap.add_argument("--warmup-ms", type=int, default=GPU_WARMUP_MS,
                    help="do_bench warmup for every timing, cuDNN's included (default: the "
                         "bench's, so that the GPU is at its power-capped clock first; before "
                         "session 9 it was 25)")
    # blocks; warps; stages; loads (tma, ws = tma + warp specialization, ptr = pointer loads,
    # dqtma / ptrdq = tma / pointer loads with the backward's dQ reduced through a descriptor,
    # tmasep / ptrsep = the backward's two-kernel path (dK/dV, then dQ in a kernel of its own),
    # gluon = the Gluon kernel where it applies: forward, a TMA producer and two consumer
    # warpgroups of `warps` warps each, block_m rows split between them, `stages`-deep K/V rings;
    # backward, the dK/dV kernel; gluonpp = the forward's with the consumers taking turns;
    # gluonsplit = the backward's with dQ's columns split between the consumers;
    # gluonpers / gluonpppers = the forward's persistent kernel, without / with ping-pong;
    # gluonsplitpers = the backward's split-dQ kernel, persistent; gluonsplitdefer[pers] = the
    # same with each step's dQ product deferred to the next step; gluonsplitdeferempty[pers] =
    # that product waiting on the Q/dO ring's empty barriers; gluonpershead / gluonpersrow =
    # the persistent forward with its causal tiles listed head- or row-block-major (any
    # persistent token + "@greedy" or "@greedyN": kernels/schedule.py's host-made table);
    # gluonsep[pers] = the head-dim-256 Gluon dK/dV kernel, then its Gluon dQ kernel, both
    # persistent with pers; a Gluon forward token + "+rN": N registers a consumer thread,
    # fwd_gluon.attn_fwd_gluon's regs)
    space_help = ("'blocks;warps;stages;loads', several joined by '|'; blocks as M:N, each field "
                  "a comma list; loads: " + ", ".join(LOADS))
    ap.add_argument("--fwd-space", default="128:64,128:128;4,8;2,3,4;tma,ws", help=space_help)
    ap.add_argument("--bwd-space", default="64:64,64:128,128:64,32:64;4,8;1,2,3;tma",
                    help=space_help)
    args = ap.parse_args()
    if args.rounds < 1:
        ap.error("--rounds must be at least 1")
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp8": torch.float8_e4m3fn}[args.dtype]
    fp8 = dtype == torch.float8_e4m3fn
    results = []

    spaces = {"fwd": parse_space(args.fwd_space), "bwd": parse_space(args.bwd_space)}  # checked
    for pas in args.passes.split(","):
        for d, s, causal in itertools.product(map(int, args.headdims.split(",")),
                                              map(int, args.seqlens.split(",")),
                                              [c == "1" for c in args.causal.split(",")]):
            b, h = 16384 // s, 2048 // d
            torch.manual_seed(0)
            q, k, v = (torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16).to(dtype)
                       for _ in range(3))
            do = torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16 if fp8 else dtype)
            params = make_params(d, causal=causal, dropout_p=args.dropout,
                                 deterministic=args.deterministic)
            extra = dict(seed=torch.tensor([1234], device="cuda") if args.dropout else None,
                         descale=torch.ones(3, device="cuda") if fp8 else None)
            peer_in = [t.to(torch.bfloat16) if fp8 else t for t in (q, k, v)]
            qr, kr, vr = (t.detach().transpose(1, 2).requires_grad_() for t in peer_in)
            ref = torch.nn.functional.scaled_dot_product_attention(qr, kr, vr, is_causal=causal)
            ref = ref.transpose(1, 2)
            if not fp8:
                ref_grads = torch.autograd.grad(ref, (qr, kr, vr), do)
                ref_grads = [g.transpose(1, 2) for g in ref_grads]
            o_ref, lse_ref = attn_fwd(q, k, v, params, **extra)
            if args.dropout:
                ref = o_ref
                if pas == "bwd":
                    ref_grads = attn_bwd(do, q, k, v, o_ref, lse_ref, params, seed=extra["seed"])
            timed, first = [], len(results)  # (row, fn): the checked configs, then the peer
            for cfg in spaces["fwd" if pas == "fwd" else "bwd"]:
                row = dict(pass_=pas, headdim=d, seqlen=s, causal=causal, batch=b, heads=h,
                           **cfg.__dict__)
                t0 = time.time()
                try:
                    if pas == "fwd":
                        out, _ = attn_fwd(q, k, v, params, config=cfg, **extra)
                        err = rel_err(out, ref)
                        fn = lambda cfg=cfg: attn_fwd(q, k, v, params, config=cfg, **extra)  # noqa: E731
                    else:
                        grads = attn_bwd(do, q, k, v, o_ref, lse_ref, params, config=cfg,
                                         seed=extra["seed"])
                        err = max(rel_err(a, r) for a, r in zip(grads, ref_grads))
                        fn = lambda cfg=cfg: attn_bwd(do, q, k, v, o_ref, lse_ref, params,  # noqa: E731
                                                      config=cfg, seed=extra["seed"])
                    if not err < (6e-2 if fp8 else 2e-2):
                        row.update(status="wrong", err=err)
                    else:
                        row.update(status="ok", err=err)
                        timed.append((row, fn))
                except Exception as exc:  # out of shared memory and such: recorded, not fatal
                    row.update(status="error", note=f"{type(exc).__name__}: {str(exc)[:120]}")
                row["wall_s"] = round(time.time() - t0, 1)
                results.append(row)
            # the peer for context: cuDNN through SDPA
            try:
                from torch.nn.attention import SDPBackend, sdpa_kernel
                with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                    o2 = torch.nn.functional.scaled_dot_product_attention(qr, kr, vr, is_causal=causal)
                g2 = do.transpose(1, 2).to(o2.dtype)

                def peer(pas=pas, causal=causal, o2=o2, g2=g2):  # inside the cuDNN context
                    if pas == "fwd":
                        return torch.nn.functional.scaled_dot_product_attention(
                            qr, kr, vr, is_causal=causal)
                    return torch.autograd.grad(o2, (qr, kr, vr), g2, retain_graph=True)
                with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                    peer()
                row = dict(pass_=pas, headdim=d, seqlen=s, causal=causal, provider="sdpa_cudnn")
                results.append(row)
                timed.append((row, peer))
                backend = sdpa_kernel(SDPBackend.CUDNN_ATTENTION)
            except Exception as exc:
                print("cudnn failed:", exc)
                backend = contextlib.nullcontext()
            # interleaved: every config once a round; SDPA held to cuDNN for the whole loop (our
            # kernels do not call it), not entered again inside each timed call
            with backend:
                for rnd in range(args.rounds):
                    for row, fn in timed:
                        try:
                            ms = do_bench(fn, warmup=args.warmup_ms, rep=100,
                                          return_mode="median")
                        except Exception as exc:  # a launch that fails only when timed
                            row.update(status="error",
                                       note=f"{type(exc).__name__}: {str(exc)[:120]}")
                            continue
                        row.setdefault("rounds_ms", []).append(ms)
            for row in results[first:]:
                if row.get("rounds_ms"):
                    row["ms"] = statistics.median(row["rounds_ms"])
                    row["tflops"] = flops(b, h, s, d, causal, pas) / row["ms"] * 1e-9
                    if args.rounds == 1:
                        del row["rounds_ms"]
                print(json.dumps(row), flush=True)
    with open(args.out, "w") as f:
        json.dump({"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
                   "dtype": args.dtype, "deterministic": args.deterministic,
                   "dropout": args.dropout,
                   "date": time.strftime("%Y-%m-%d"), "results": results}, f, indent=1)
    # summary: best config per problem next to cuDNN
    print(f"{'pass':4} {'d':>4} {'seq':>6} {'causal':>6} {'best cfg':>22} {'TFLOP/s':>8} {'cudnn':>7}")
    keys = sorted({(r["pass_"], r["headdim"], r["seqlen"], r["causal"]) for r in results})
    for key in keys:
        rows = [r for r in results if (r["pass_"], r["headdim"], r["seqlen"], r["causal"]) == key]
        ok = [r for r in rows if r.get("status") == "ok"]
        peer = [r for r in rows if r.get("provider") == "sdpa_cudnn"]
        best = max(ok, key=lambda r: r["tflops"]) if ok else None
        cfg = (f"{best['block_m']}x{best['block_n']} w{best['num_warps']} s{best['num_stages']}"
               f"{' ws' if best['warp_specialize'] else (' tma' if best['tma'] else ' ptr')}"
               f"{' dqtma' if best['dq_tma'] else ''}{' gluon' if best.get('gluon') else ''}"
               f"{' split' if best.get('split_dq') else ''}{' pp' if best.get('pingpong') else ''}"
               f"{' pers' if best.get('persistent') else ''}"
               f"{' ' + best['tile_order'] if best.get('tile_order') else ''}"
               if best else "none")
        print(f"{key[0]:4} {key[1]:>4} {key[2]:>6} {str(key[3]):>6} {cfg:>22} "
              f"{best['tflops'] if best else 0:8.0f} {peer[0].get('tflops', 0) if peer else 0:7.0f}")
    bad = [r for r in results if r.get("status") == "wrong"]
    print(f"{len(bad)} configs gave wrong results" + (f": {bad}" if bad else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
