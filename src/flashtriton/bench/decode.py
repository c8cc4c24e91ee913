"""`flashtriton bench --decode`: decode latency of ``flash_attn_with_kvcache`` against torch SDPA
and FlexAttention, with the HBM bandwidth it reaches.

One query token per sequence (seqlen_q = 1), Llama-3-8B-like heads by default (32 query heads
over 8 kv heads, GQA), head dim 128, bf16, every sequence holding ``context`` keys. Providers:
- ``flashtriton``        contiguous cache, int32 ``cache_seqlens``, ``num_splits=0`` (automatic)
- ``flashtriton_paged``  the same keys in a paged cache (page 64, shuffled block table)
- ``sdpa``               ``F.scaled_dot_product_attention(..., enable_gqa=True)`` on the visible
                         cache, a (batch, heads, context, dim) view of the same memory
- ``flex``               ``torch.compile(flex_attention)`` (its decoding kernel); CUDA only
Each provider is checked against an fp32 reference on the first sequence before it is timed.
Times on a GPU: median of ``triton.testing.do_bench`` (what a caller without CUDA graphs sees,
launch overhead included) and of ``do_bench_cudagraph`` (GPU time only). Bandwidth: the
compulsory bytes (K and V of the visible keys, plus q and out) over the CUDA-graph time, against
the 4.3 TB/s the H200 reaches on a device copy (SPEC.md §4). A split sweep times fixed
``num_splits`` on a few shapes, the evidence for ``kernels/decode.py``'s heuristic. On the CPU
(the interpreter: a dry run of the same code, for tests) times are wall-clock and no bandwidth
is reported.

Results JSON: ``{"meta": ..., "results": [...], "split_sweep": [...]}``; a row that was not
timed has ``ms`` null and a ``status`` (wrong, error, skipped) with a note.
"""

from __future__ import annotations

import datetime
import math
import os
import subprocess
import time
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from flashtriton.kvcache import flash_attn_with_kvcache

HBM_TBPS = 4.3  # device copy on our H200, SPEC.md §4 (2026-11-29)
# (batch, context): batch 1..64 against context 1k..128k, the corners and the middle.
SHAPES = [(1, 1024), (1, 16384), (1, 131072), (4, 4096), (4, 65536), (16, 1024), (16, 16384),
          (16, 65536), (64, 1024), (64, 4096), (64, 16384), (64, 32768)]
QUICK_SHAPES = [(1, 16384), (1, 131072), (16, 16384), (64, 4096)]
SWEEP_SHAPES = [(1, 131072), (4, 16384), (16, 4096)]
SWEEP_SPLITS = [1, 2, 4, 8, 16, 32, 64, 128]
TOLERANCE = 2e-2  # bf16 output against an fp32 reference


@dataclass(frozen=True)
class Geometry:
    """Heads and layout of the decode problems (the defaults are the benchmark's)."""
    heads: int = 32
    heads_k: int = 8
    head_dim: int = 128
    dtype: torch.dtype = torch.bfloat16
    page_size: int = 64


LLAMA = Geometry()


def setup(batch: int, context: int, device: str, geo: Geometry = LLAMA) -> dict:
    """The shared inputs of one shape: q, a contiguous cache and the same keys paged."""
    if context % geo.page_size:
        raise ValueError(f"context: {context} is not a multiple of the page size {geo.page_size}")
    g = torch.Generator(device=device).manual_seed(batch * 1_000_003 + context)
    q = torch.randn(batch, 1, geo.heads, geo.head_dim, device=device, dtype=geo.dtype, generator=g)
    k_cache = torch.randn(batch, context, geo.heads_k, geo.head_dim, device=device,
                          dtype=geo.dtype, generator=g)
    v_cache = torch.randn(k_cache.shape, device=device, dtype=geo.dtype, generator=g)
    seqlens = torch.full((batch,), context, dtype=torch.int32, device=device)
    blocks = batch * context // geo.page_size
    perm = torch.randperm(blocks, device=device, generator=g)
    # Physical block perm[i] holds logical block i (sequence i // per_seq, page i % per_seq).
    block_table = perm.view(batch, -1).to(torch.int32)
    paged = (blocks, geo.page_size, geo.heads_k, geo.head_dim)
    k_paged = torch.empty(paged, device=device, dtype=geo.dtype)
    v_paged = torch.empty(paged, device=device, dtype=geo.dtype)
    k_paged[perm] = k_cache.view(paged)
    v_paged[perm] = v_cache.view(paged)
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


_FLEX: dict = {}


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
CUDA_ONLY = {"flex"}


def reference(x) -> torch.Tensor:
    """fp32 attention of the first sequence, (1, 1, heads, dim)."""
    heads, heads_k, head_dim = x["q"].shape[2], x["k_cache"].shape[2], x["q"].shape[3]
    q = x["q"][:1].float().transpose(1, 2)
    k = x["k_cache"][:1].float().transpose(1, 2).repeat_interleave(heads // heads_k, dim=1)
    v = x["v_cache"][:1].float().transpose(1, 2).repeat_interleave(heads // heads_k, dim=1)
    p = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(head_dim), dim=-1)
    return (p @ v).transpose(1, 2)


def compulsory_bytes(batch: int, context: int, geo: Geometry = LLAMA) -> int:
    """K and V of the visible keys, plus q and out."""
    elt = torch.finfo(geo.dtype).bits // 8
    kv = 2 * batch * context * geo.heads_k * geo.head_dim * elt
    return kv + 2 * batch * geo.heads * geo.head_dim * elt


def _row(name: str, batch: int, context: int, geo: Geometry) -> dict:
    """A results row before timing: the problem, and the time fields empty."""
    return {"provider": name, "batch": batch, "context": context, "heads": geo.heads,
            "heads_k": geo.heads_k, "headdim": geo.head_dim,
            "dtype": str(geo.dtype).split(".")[-1],
            "ms": None, "ms_graph": None, "tbps": None, "hbm_fraction": None}


def measure(name, fn, ref, batch, context, device: str, geo: Geometry = LLAMA,
            warmup_ms: int = 25, rep_ms: int = 100) -> dict:
    """Check ``fn``'s first sequence against ``ref``, then time it (a row of the results)."""
    from flashtriton.bench.harness import wall_clock_ms

    row = _row(name, batch, context, geo)
    try:
        t0 = time.perf_counter()
        out = fn()
        if device == "cuda":
            torch.cuda.synchronize()
        row["first_call_s"] = round(time.perf_counter() - t0, 3)
        err = (out[:1].float() - ref).abs().max().item()
        row["max_err"] = err
        if not err <= TOLERANCE:
            row.update(status="wrong", note=f"max|out - ref| = {err:.3e} > {TOLERANCE}")
            return row
        if device != "cuda":  # a dry run: wall clock, no bandwidth
            row["ms"] = wall_clock_ms(fn, warmup_ms=warmup_ms, rep_ms=rep_ms)
            row["status"] = "ok"
            return row
        from triton.testing import do_bench, do_bench_cudagraph

        row["ms"] = do_bench(fn, warmup=warmup_ms, rep=rep_ms, return_mode="median")
        try:
            row["ms_graph"] = do_bench_cudagraph(fn, rep=rep_ms, return_mode="median")
        except Exception as e:  # noqa: BLE001 - a provider that cannot be graphed still has ms
            row["note"] = f"cudagraph: {type(e).__name__}: {str(e)[:120]}"
        t = row["ms_graph"] or row["ms"]
        row["tbps"] = compulsory_bytes(batch, context, geo) / (t * 1e-3) / 1e12
        row["hbm_fraction"] = row["tbps"] / HBM_TBPS
        row["status"] = "ok"
    except Exception as e:  # noqa: BLE001 - recorded in the results, the run goes on
        row.update(status="error", note=f"{type(e).__name__}: {str(e)[:300]}")
    return row


def split_sweep(shapes, device: str, geo: Geometry = LLAMA, print_fn=print) -> list[dict]:
    """flashtriton (contiguous cache) at fixed ``num_splits`` next to the automatic choice."""
    import triton

    from flashtriton.kernels.decode import num_splits_heuristic

    rows = []
    sms = torch.cuda.get_device_properties(0).multi_processor_count if device == "cuda" else 1
    for batch, context in shapes:
        x = setup(batch, context, device, geo)
        ref = reference(x)
        auto = num_splits_heuristic(batch * geo.heads_k, triton.cdiv(context, 64), sms)
        for splits in [0] + SWEEP_SPLITS:
            r = measure(f"flashtriton/splits={splits or 'auto'}", _ours(x, splits), ref,
                        batch, context, device, geo)
            r["num_splits"] = splits or auto
            rows.append(r)
            print_fn(f"  sweep b{batch:<3d} ctx {context:>6d} splits "
                     f"{splits or f'auto={auto}':>8}: {_fmt(r['ms_graph'])} ms (graph), "
                     f"{_fmt(r['tbps'])} TB/s")
        del x
    return rows


def _fmt(v, digits=4):
    return "-" if v is None else f"{v:.{digits}g}"


def meta(device: str) -> dict:
    import triton

    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True,
                                text=True).stdout.strip()
    except OSError:
        commit = ""
    return {"gpu": torch.cuda.get_device_name() if device == "cuda" else "cpu (interpreter)",
            "torch": torch.__version__, "triton": triton.__version__,
            "cuda": torch.version.cuda, "date": datetime.date.today().isoformat(),
            "commit": os.environ.get("FLASHTRITON_COMMIT", commit) or "unknown",
            "hbm_tbps_reference": HBM_TBPS}


def parse_shapes(text: str) -> list[tuple[int, int]]:
    """``"1x16384,64x4096"`` -> [(1, 16384), (64, 4096)] (batch x context)."""
    shapes = []
    for part in text.split(","):
        try:
            batch, context = (int(v) for v in part.lower().split("x"))
        except ValueError:
            raise ValueError(f"--decode-shapes: expected BATCHxCONTEXT items, got {part!r}") from None
        if batch < 1 or context < 1:
            raise ValueError(f"--decode-shapes: batch and context must be >= 1, got {part!r}")
        shapes.append((batch, context))
    return shapes


def run(shapes, providers, device: str, *, out=None, sweep_shapes=(), geo: Geometry = LLAMA,
        warmup_ms: int = 25, rep_ms: int = 100, print_fn=print) -> dict:
    """Time ``providers`` on ``shapes``; writes ``out`` (JSON) after every row. Returns the doc."""
    import json

    unknown = [p for p in providers if p not in PROVIDERS]
    if unknown:
        raise ValueError(f"--providers: unknown decode providers {unknown}; "
                         f"known: {', '.join(PROVIDERS)}")
    results, sweep = [], []
    doc = {"meta": meta(device), "results": results, "split_sweep": sweep}

    def save():
        if out is not None:
            os.makedirs(os.path.dirname(os.path.abspath(out)) or ".", exist_ok=True)
            with open(out, "w") as f:
                json.dump(doc, f, indent=1)

    print_fn(f"{'batch':>5} {'context':>7} {'provider':>18} {'ms':>8} {'ms graph':>8} "
             f"{'TB/s':>6} {'% HBM':>6}  note")
    for batch, context in shapes:
        x = setup(batch, context, device, geo)
        ref = reference(x)
        for name in providers:
            if name in CUDA_ONLY and device != "cuda":
                row = dict(_row(name, batch, context, geo), status="skipped",
                           note="needs a CUDA device")
            else:
                row = measure(name, PROVIDERS[name](x), ref, batch, context, device, geo,
                              warmup_ms, rep_ms)
            results.append(row)
            pct = None if row["hbm_fraction"] is None else 100 * row["hbm_fraction"]
            note = row.get("note", "") if row["status"] != "ok" else ""
            print_fn(f"{batch:>5} {context:>7} {name:>18} {_fmt(row['ms']):>8} "
                     f"{_fmt(row['ms_graph']):>8} {_fmt(row['tbps'], 3):>6} {_fmt(pct, 3):>6}  "
                     f"{row['status']} {note}")
            save()
        del x
        if device == "cuda":
            torch.cuda.empty_cache()
    if sweep_shapes:
        print_fn("num_splits sweep (flashtriton, contiguous cache):")
        sweep.extend(split_sweep(sweep_shapes, device, geo, print_fn))
        save()
    if out is not None:
        print_fn(f"results: {out}")
    return doc


def run_cli(args) -> int:
    """``flashtriton bench --decode``: the shapes (``--quick``, ``--decode-shapes``), providers
    (``--providers``), the split sweep unless ``--no-split-sweep``, JSON to ``--out``."""
    from flashtriton.bench.harness import resolve_device

    try:
        device = resolve_device(args.device)
        if args.decode_shapes:
            shapes = parse_shapes(args.decode_shapes)
        else:
            shapes = QUICK_SHAPES if args.quick else SHAPES
        providers = ([p for group in args.providers for p in group] if args.providers
                     else list(PROVIDERS))
        sweep = () if args.no_split_sweep else SWEEP_SHAPES
        if device != "cuda":
            print("flashtriton bench --decode: no CUDA device, a dry run on the CPU "
                  "(wall-clock times, no bandwidth; not GPU figures)")
        run(shapes, providers, device, out=args.out, sweep_shapes=sweep,
            warmup_ms=args.warmup_ms, rep_ms=args.rep_ms, print_fn=lambda s: print(s, flush=True))
    except ValueError as exc:
        print(f"flashtriton bench --decode: {exc}")
        return 2
    return 0
