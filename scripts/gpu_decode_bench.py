"""Decode latency of ``flash_attn_with_kvcache`` against torch SDPA and FlexAttention, on a GPU.

    PYTHONPATH=src python3 scripts/gpu_decode_bench.py [--quick] [--no-flex] [--no-sweep]

One query token per sequence (seqlen_q = 1), Llama-3-8B-like heads (32 query heads over 8 kv
heads, GQA), head dim 128, bf16, every sequence holding ``context`` keys. Providers:
- ``flashtriton``        contiguous cache, int32 ``cache_seqlens``, ``num_splits=0`` (automatic)
- ``flashtriton_paged``  the same keys in a paged cache (page 64, shuffled block table)
- ``sdpa``               ``F.scaled_dot_product_attention(..., enable_gqa=True)`` on the visible
                         (unpadded) cache, a (batch, heads, context, dim) view of the same memory
- ``flex``               ``torch.compile(flex_attention)`` (its decoding kernel), when it compiles
Each provider is checked against an fp32 reference on the first sequence before it is timed.
Times: median of ``triton.testing.do_bench`` (what a caller without CUDA graphs sees, launch
overhead included) and of ``do_bench_cudagraph`` (GPU time only). Bandwidth: the compulsory bytes
(K and V of the visible keys, plus q and out) over the CUDA-graph time, against the 4.3 TB/s the
H200 reaches on a device copy (SPEC.md §4). A split sweep times fixed ``num_splits`` on a few
shapes, the evidence for ``kernels/decode.py``'s heuristic.

Writes ``$OUT/decode.json`` (``{"meta": ..., "results": [...], "split_sweep": [...]}``; a row
that was not timed has ``ms`` null and a ``status``) and prints a table. About two minutes on an
H200, most of it FlexAttention compiling once per shape (``--no-flex`` skips it).
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import subprocess
import time

import torch
import torch.nn.functional as F
import triton
from triton.testing import do_bench, do_bench_cudagraph

from flashtriton.kernels.decode import num_splits_heuristic
from flashtriton.kvcache import flash_attn_with_kvcache

HBM_TBPS = 4.3  # device copy on our H200, SPEC.md §4 (2026-11-29)
HEADS, HEADS_K, HEAD_DIM, DTYPE = 32, 8, 128, torch.bfloat16
PAGE_SIZE = 64
DEVICE = "cuda"
# (batch, context): batch 1..64 against context 1k..128k, the corners and the middle.
SHAPES = [(1, 1024), (1, 16384), (1, 131072), (4, 4096), (4, 65536), (16, 1024), (16, 16384),
          (16, 65536), (64, 1024), (64, 4096), (64, 16384), (64, 32768)]
QUICK_SHAPES = [(1, 16384), (1, 131072), (16, 16384), (64, 4096)]
SWEEP_SHAPES = [(1, 131072), (4, 16384), (16, 4096)]
SWEEP_SPLITS = [1, 2, 4, 8, 16, 32, 64, 128]
TOLERANCE = 2e-2  # bf16 output against an fp32 reference


def setup(batch: int, context: int):
    """The shared inputs of one shape: q, a contiguous cache and the same keys paged."""
    g = torch.Generator(device=DEVICE).manual_seed(batch * 1_000_003 + context)
    q = torch.randn(batch, 1, HEADS, HEAD_DIM, device=DEVICE, dtype=DTYPE, generator=g)
    k_cache = torch.randn(batch, context, HEADS_K, HEAD_DIM, device=DEVICE, dtype=DTYPE,
                          generator=g)
    v_cache = torch.randn_like(k_cache)
    seqlens = torch.full((batch,), context, dtype=torch.int32, device=DEVICE)
    blocks = batch * context // PAGE_SIZE
    perm = torch.randperm(blocks, device=DEVICE, generator=g)
    # Physical block perm[i] holds logical block i (sequence i // per_seq, page i % per_seq).
    block_table = perm.view(batch, -1).to(torch.int32)
    k_paged = torch.empty_like(k_cache).view(blocks, PAGE_SIZE, HEADS_K, HEAD_DIM)
    v_paged = torch.empty_like(k_paged)
    k_paged[perm] = k_cache.view(blocks, PAGE_SIZE, HEADS_K, HEAD_DIM)
    v_paged[perm] = v_cache.view(blocks, PAGE_SIZE, HEADS_K, HEAD_DIM)
    return dict(q=q, k_cache=k_cache, v_cache=v_cache, seqlens=seqlens,
                block_table=block_table, k_paged=k_paged, v_paged=v_paged)


def _ours(x, num_splits=0):
    return lambda: flash_attn_with_kvcache(x["q"], x["k_cache"], x["v_cache"],
                                           cache_seqlens=x["seqlens"], num_splits=num_splits)


def _ours_paged(x):
    return lambda: flash_attn_with_kvcache(x["q"], x["k_paged"], x["v_paged"],
                                           cache_seqlens=x["seqlens"],
                                           block_table=x["block_table"])


def _sdpa(x):
    q = x["q"].transpose(1, 2)
    k, v = x["k_cache"].transpose(1, 2), x["v_cache"].transpose(1, 2)
    return lambda: F.scaled_dot_product_attention(q, k, v, enable_gqa=True).transpose(1, 2)


_FLEX = {}


def _flex(x):
    from torch.nn.attention.flex_attention import flex_attention

    if "fn" not in _FLEX:
        # One compile per shape: lift dynamo's recompile limit above the number of shapes.
        for knob in ("recompile_limit", "cache_size_limit"):
            if hasattr(torch._dynamo.config, knob):
                setattr(torch._dynamo.config, knob, 64)
        _FLEX["fn"] = torch.compile(flex_attention, dynamic=False)
    q = x["q"].transpose(1, 2)
    k, v = x["k_cache"].transpose(1, 2), x["v_cache"].transpose(1, 2)
    return lambda: _FLEX["fn"](q, k, v, enable_gqa=True).transpose(1, 2)


PROVIDERS = {"flashtriton": _ours, "flashtriton_paged": _ours_paged, "sdpa": _sdpa,
             "flex": _flex}


def reference(x) -> torch.Tensor:
    """fp32 attention of the first sequence, (1, 1, heads, dim)."""
    q = x["q"][:1].float().transpose(1, 2)
    k = x["k_cache"][:1].float().transpose(1, 2).repeat_interleave(HEADS // HEADS_K, dim=1)
    v = x["v_cache"][:1].float().transpose(1, 2).repeat_interleave(HEADS // HEADS_K, dim=1)
    p = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(HEAD_DIM), dim=-1)
    return (p @ v).transpose(1, 2)


def compulsory_bytes(batch: int, context: int) -> int:
    elt = torch.finfo(DTYPE).bits // 8
    kv = 2 * batch * context * HEADS_K * HEAD_DIM * elt
    return kv + 2 * batch * HEADS * HEAD_DIM * elt


def measure(name, fn, ref, batch, context):
    row = {"provider": name, "batch": batch, "context": context, "heads": HEADS,
           "heads_k": HEADS_K, "headdim": HEAD_DIM, "dtype": "bf16", "ms": None,
           "ms_graph": None, "tbps": None, "hbm_fraction": None}
    try:
        t0 = time.perf_counter()
        out = fn()
        torch.cuda.synchronize()
        row["first_call_s"] = round(time.perf_counter() - t0, 3)
        err = (out[:1].float() - ref).abs().max().item()
        row["max_err"] = err
        if not err <= TOLERANCE:
            row.update(status="wrong", note=f"max|out - ref| = {err:.3e} > {TOLERANCE}")
            return row
        row["ms"] = do_bench(fn, warmup=25, rep=100, return_mode="median")
        try:
            row["ms_graph"] = do_bench_cudagraph(fn, rep=100, return_mode="median")
        except Exception as e:  # noqa: BLE001 - a provider that cannot be graphed still has ms
            row["note"] = f"cudagraph: {type(e).__name__}: {str(e)[:120]}"
        t = row["ms_graph"] or row["ms"]
        row["tbps"] = compulsory_bytes(batch, context) / (t * 1e-3) / 1e12
        row["hbm_fraction"] = row["tbps"] / HBM_TBPS
        row["status"] = "ok"
    except Exception as e:  # noqa: BLE001 - recorded in the results, the run goes on
        row.update(status="error", note=f"{type(e).__name__}: {str(e)[:300]}")
    return row


def split_sweep(shapes):
    rows = []
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    for batch, context in shapes:
        x = setup(batch, context)
        ref = reference(x)
        auto = num_splits_heuristic(batch * HEADS_K, triton.cdiv(context, 64), sms)
        for splits in [0] + SWEEP_SPLITS:
            r = measure(f"flashtriton/splits={splits or 'auto'}", _ours(x, splits), ref,
                        batch, context)
            r["num_splits"] = splits or auto
            rows.append(r)
            print(f"  sweep b{batch:<3d} ctx {context:>6d} splits {splits or f'auto={auto}':>8}: "
                  f"{_fmt(r['ms_graph'])} ms (graph), {_fmt(r['tbps'])} TB/s", flush=True)
        del x
        torch.cuda.empty_cache()
    return rows


def _fmt(v, digits=4):
    return "-" if v is None else f"{v:.{digits}g}"


def meta():
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True,
                                text=True).stdout.strip()
    except OSError:
        commit = ""
    return {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
            "triton": triton.__version__, "cuda": torch.version.cuda,
            "date": datetime.date.today().isoformat(),
            "commit": os.environ.get("FLASHTRITON_COMMIT", commit),
            "hbm_tbps_reference": HBM_TBPS}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help=f"only {QUICK_SHAPES}")
    parser.add_argument("--no-flex", action="store_true", help="skip FlexAttention")
    parser.add_argument("--no-sweep", action="store_true", help="skip the num_splits sweep")
    parser.add_argument("--out", default=os.path.join(os.environ.get("OUT", "."), "decode.json"))
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        raise SystemExit("gpu_decode_bench: needs a CUDA GPU")
    providers = [p for p in PROVIDERS if not (args.no_flex and p == "flex")]
    results, sweep = [], []
    doc = {"meta": meta(), "results": results, "split_sweep": sweep}

    def save():
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        with open(args.out, "w") as f:
            json.dump(doc, f, indent=1)

    header = (f"{'batch':>5} {'context':>7} {'provider':>18} {'ms':>8} {'ms graph':>8} "
              f"{'TB/s':>6} {'% HBM':>6}  note")
    print(header)
    for batch, context in (QUICK_SHAPES if args.quick else SHAPES):
        x = setup(batch, context)
        ref = reference(x)
        for name in providers:
            row = measure(name, PROVIDERS[name](x), ref, batch, context)
            results.append(row)
            pct = None if row["hbm_fraction"] is None else 100 * row["hbm_fraction"]
            note = row.get("note", "") if row["status"] != "ok" else ""
            print(f"{batch:>5} {context:>7} {name:>18} {_fmt(row['ms']):>8} "
                  f"{_fmt(row['ms_graph']):>8} {_fmt(row['tbps'], 3):>6} {_fmt(pct, 3):>6}  "
                  f"{row['status']} {note}", flush=True)
            save()
        del x
        torch.cuda.empty_cache()
    if not args.no_sweep:
        print("num_splits sweep (flashtriton, contiguous cache):")
        sweep.extend(split_sweep(SWEEP_SHAPES))
        save()
    print(f"results: {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
