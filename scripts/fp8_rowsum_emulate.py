"""What the float8 tensor cores' accumulation does to a row sum (docs/perf-log.md, session 68),
on the CPU: P (softmax numerators of random e4m3 q and k, rounded to e4m3) summed over the keys
in 32-key products, each added to the accumulator with only ``bits`` bits kept below the
largest exponent among the accumulator and the products, truncated (about 14 is what Hopper's
float8 MMAs are reported to keep). Two ways: one accumulator across all of a row's keys (what
``rowsum_mma`` did before session 68), and one per 128-key step, started from zero, the steps
added in float64 (``fwd_gluon_tile._sum_rows_async`` since). Prints each row's sum over the
exact sum of the rounded P.

    python3 scripts/fp8_rowsum_emulate.py [--keys 1024 16384] [--bits 13 14 22] [--rows 4]
"""

from __future__ import annotations

import argparse
import math

import torch


def truncated_add(acc: float, products: list[float], bits: int) -> float:
    """acc plus the products, each value cut (toward zero) to ``bits`` bits below the largest
    exponent among them all."""
    top = max([abs(acc)] + [abs(p) for p in products])
    if top == 0.0:
        return acc
    ulp = 2.0 ** (math.floor(math.log2(top)) - bits + 1)
    return sum(math.trunc(x / ulp) * ulp for x in [acc] + products)


def row_sums(p: list[float], bits: int, step: int | None) -> float:
    """Sum p in 32-term products: one accumulator (step None) or one per ``step`` terms."""
    if step is None:
        step = len(p)
    total = 0.0
    for s in range(0, len(p), step):
        acc = 0.0
        for k in range(s, min(s + step, len(p)), 32):
            acc = truncated_add(acc, p[k:k + 32], bits)
        total += acc
    return total


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--keys", type=int, nargs="+", default=[1024, 16384])
    ap.add_argument("--bits", type=int, nargs="+", default=[13, 14, 22])
    ap.add_argument("--rows", type=int, default=4)
    ap.add_argument("--headdim", type=int, default=128)
    args = ap.parse_args()
    torch.manual_seed(0)
    fp8, d = torch.float8_e4m3fn, args.headdim
    for keys in args.keys:
        q = torch.randn(args.rows, d).to(fp8).double()
        k = torch.randn(keys, d).to(fp8).double()
        s = q @ k.T / math.sqrt(d)
        p = torch.exp(s - s.max(1, keepdim=True).values).float().to(fp8).double()
        for bits in args.bits:
            for name, step in (("across steps", None), ("per 128-key step", 128)):
                ratios = [row_sums(p[r].tolist(), bits, step) / p[r].sum().item()
                          for r in range(args.rows)]
                print(f"keys {keys:6d}  bits {bits:2d}  {name:16s}  sum / exact: "
                      + " ".join(f"{x:.4f}" for x in ratios), flush=True)


if __name__ == "__main__":
    main()
