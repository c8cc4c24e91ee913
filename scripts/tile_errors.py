"""Where the public function is wrong, tile by tile: its output and gradients against the
float64 reference (``flashtriton.reference.attention_ref``), each tensor cut into blocks of
``--block`` rows of a head (out and dQ: query rows; dK and dV: keys), each block's largest
error against the tensor's bound from STYLE.md (``factor · max|torch_lowp − ref64| + floor``;
the bench's gate's factors and floors, ``flashtriton.bench.check``: 2 for the output, 3 for
gradients, as the tests use).

    PYTHONPATH=src python3 scripts/tile_errors.py --batch 4 --seqlen-q 1000 --heads 16 \\
        --headdim 256 --causal

On a GPU it runs the shipped kernels; on a CPU under TRITON_INTERPRET=1 the interpreter's.
Prints, per tensor, its largest error and bound, how many tiles are above the bound, how many
per block index, and the first such tile's rows above it; exits 1 if any tile is. Written in
session 52, where it showed that a version of the d256 dQ kernel was wrong only on the
shortest causal tiles of programs that walked several (docs/perf-log.md).
"""
from __future__ import annotations

import argparse
import sys

import torch

from flashtriton import flash_attn_func
from flashtriton.bench.check import FLOOR, GRAD_FACTOR, OUT_FACTOR
from flashtriton.kernels.common import is_interpreting
from flashtriton.reference import attention_ref

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


def tile_max(err: torch.Tensor, block: int) -> torch.Tensor:
    """``err`` (batch, seqlen, heads) → (batch, blocks, heads): each block of ``block`` rows'
    largest value (a partial last block padded with zeros)."""
    b, s, h = err.shape
    n = -(-s // block)
    padded = torch.nn.functional.pad(err, (0, 0, 0, n * block - s))
    return padded.view(b, n, block, h).amax(2)


def wrong_tiles(ours, ref64, lowp, block: int, factor: float) -> dict:
    """Compare one tensor (batch, seqlen, heads, dim) tile by tile: the bound, the largest
    error, the tiles above the bound as (batch, block, head), and the first one's rows."""
    floor = FLOOR[lowp.dtype]
    ours, ref64, lowp = (x.detach().to(torch.float64).cpu() for x in (ours, ref64, lowp))
    err = (ours - ref64).abs().nan_to_num(float("inf")).amax(-1)
    floor *= max(1.0, ref64.abs().max().item())
    bound = factor * (lowp - ref64).abs().max().item() + floor
    tiles = tile_max(err, block)
    bad = [tuple(t) for t in (tiles > bound).nonzero().tolist()]
    rows = []
    if bad:
        b, i, h = bad[0]
        rows = (err[b, i * block:(i + 1) * block, h] > bound).nonzero().flatten().tolist()
    return {"bound": bound, "max": err.max().item(), "tiles": tiles.numel(), "bad": bad,
            "first_rows": rows}


def report(name: str, r: dict) -> str:
    per_block: dict[int, int] = {}
    for _, i, _ in r["bad"]:
        per_block[i] = per_block.get(i, 0) + 1
    line = (f"{name}: max error {r['max']:.3e}, bound {r['bound']:.3e}, "
            f"{len(r['bad'])} of {r['tiles']} tiles above")
    if r["bad"]:
        line += (f"; per block {dict(sorted(per_block.items()))}; first (batch, block, head) "
                 f"{r['bad'][0]}, its rows above: {r['first_rows']}")
    return line


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seqlen-q", type=int, default=1000)
    ap.add_argument("--seqlen-k", type=int, default=None, help="default: --seqlen-q")
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--heads-k", type=int, default=None, help="default: --heads")
    ap.add_argument("--headdim", type=int, default=256)
    ap.add_argument("--causal", action="store_true")
    ap.add_argument("--dtype", choices=sorted(DTYPES), default="bf16")
    ap.add_argument("--block", type=int, default=64, help="rows or keys a tile (default 64)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    seqlen_k = args.seqlen_k or args.seqlen_q
    heads_k = args.heads_k or args.heads
    if args.heads % heads_k:
        ap.error(f"--heads {args.heads} is not a multiple of --heads-k {heads_k}")
    device = "cuda" if torch.cuda.is_available() and not is_interpreting() else "cpu"
    torch.manual_seed(args.seed)
    dtype = DTYPES[args.dtype]

    def randn(*shape):
        return torch.randn(*shape, device=device, dtype=dtype, requires_grad=True)

    q = randn(args.batch, args.seqlen_q, args.heads, args.headdim)
    k = randn(args.batch, seqlen_k, heads_k, args.headdim)
    v = randn(args.batch, seqlen_k, heads_k, args.headdim)
    do = torch.randn_like(q)
    outs = {}
    for name, fn in (("ours", lambda q, k, v: flash_attn_func(q, k, v, causal=args.causal)),
                     ("ref64", lambda q, k, v: attention_ref(q, k, v, causal=args.causal)[0]),
                     ("lowp", lambda q, k, v: attention_ref(q, k, v, causal=args.causal,
                                                            upcast=False)[0])):
        # the truth's leaves in float64, so that its gradients are not rounded to 16 bits
        work = torch.float64 if name == "ref64" else dtype
        leaves = [x.detach().to(work).requires_grad_() for x in (q, k, v)]
        out = fn(*leaves)
        out.backward(do.to(out.dtype))
        outs[name] = (out, *(x.grad for x in leaves))
    print(f"batch {args.batch}, {args.seqlen_q} rows, {seqlen_k} keys, heads "
          f"{args.heads}/{heads_k}, head dim {args.headdim}, {args.dtype}, "
          f"{'causal' if args.causal else 'no mask'}, {args.block}-row tiles, on {device}")
    wrong = 0
    factors = (("out", OUT_FACTOR), ("dq", GRAD_FACTOR), ("dk", GRAD_FACTOR), ("dv", GRAD_FACTOR))
    for i, (name, factor) in enumerate(factors):
        r = wrong_tiles(outs["ours"][i], outs["ref64"][i], outs["lowp"][i], args.block, factor)
        print(report(name, r))
        wrong += len(r["bad"])
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
