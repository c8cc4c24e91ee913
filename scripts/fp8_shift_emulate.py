"""Why the float8 forward takes P against the running max less 8 (``fwd_gluon_tile.FP8_P_SHIFT``,
docs/perf-log.md, session 69), on the CPU: the Gluon float8 forward's online softmax emulated in
float64 on tests/test_fp8.py's inputs (q, k, v quantized per tensor, k's scores twice as
spread), 128-key tiles, the running max without slack, P = 2^(s - m + shift) rounded to e4m3 for
``P V``, and the row sums either of P before the rounding (float32 in the kernel) or of P after
it (``rowsum_mma``: the tensor cores' sums). Prints each way's largest output error against
float64 attention, with the test's bound beside it (twice PyTorch's float8 emulation's error,
``tests/test_fp8.py``'s ``torch_fp8_attention``, plus bfloat16's floor), and the largest share of
a row's softmax below 2^-10 of its max: e4m3 rounds those numerators to zero against the max
(its smallest subnormal is 2^-9). ``--slack S``: also the float32 sums with the running max
moved only once a tile's scores pass it by more than S (log2 units) and no shift, as session
65's float8 kernel with the 16-bit kernels' slack of 8 (its outputs 2-4x further off).

    PYTHONPATH=src:tests python3 scripts/fp8_shift_emulate.py [--shifts 0 8] [--seed 1]
        [--slack 8]
"""

from __future__ import annotations

import argparse
import math

import torch

FP8 = torch.float8_e4m3fn
SHAPES = [(2, 1000, 1000, 4, 4, 128), (1, 4096, 4096, 2, 2, 64), (1, 257, 383, 2, 2, 64)]


def round_p(p):
    """P as the kernel rounds it for ``P V``: float32, then e4m3 (to nearest, saturating)."""
    return p.float().to(FP8).double()


def emulate(q, k, v, shift: float, rounded_sums: bool, block_n: int = 128, slack: float = 0.0):
    """The forward without a mask as the kernel computes it, in float64 but for P's rounding to
    e4m3: (batch, seqlen_q, heads, d). q, k, v dequantized, (batch, seqlen, heads, d), as many
    heads in k and v as in q; ``slack``: the running max's (``fwd_gluon_tile.RESCALE_SLACK``)."""
    d = q.shape[-1]
    s = torch.einsum("bqhd,bkhd->bhqk", q, k) / (d ** 0.5 * math.log(2.0))  # log2 units
    m = torch.full(s.shape[:-1], float("-inf"), dtype=torch.float64, device=s.device)
    l = torch.zeros_like(m)
    o = torch.zeros(*s.shape[:-1], v.shape[-1], dtype=torch.float64, device=s.device)
    vt = v.transpose(1, 2)
    for j in range(0, s.shape[-1], block_n):
        tile = s[..., j:j + block_n]
        seen = tile.amax(-1)
        m_new = torch.where(seen > m + slack, seen, m)
        p = torch.exp2(tile - (m_new - shift)[..., None])
        rounded = round_p(p)
        alpha = torch.exp2(m - m_new)
        o = o * alpha[..., None] + rounded @ vt[:, :, j:j + block_n]
        l = l * alpha + (rounded if rounded_sums else p).sum(-1)
        m = m_new
    return (o / l[..., None]).transpose(1, 2)


def share_below(q, k, below: float = 2.0 ** -10) -> float:
    """The largest share, over the rows, of a row's softmax in terms below ``below`` of its max."""
    s = torch.einsum("bqhd,bkhd->bhqk", q, k) / q.shape[-1] ** 0.5
    p = torch.exp(s - s.amax(-1, keepdim=True))
    return ((p * (p < below)).sum(-1) / p.sum(-1)).max().item()


def errors(shape, shifts, seed: int | None = None, slack: float | None = None) -> dict:
    """The largest output errors of each (shift, sums) way on one shape (fresh inputs after
    ``torch.manual_seed(seed)``, or from the generator's state with None), the test's bound,
    and ``share_below``; with ``slack``, the float32 sums with that slack too."""
    from flashtriton.reference import attention_ref
    from helpers import FLOOR
    from test_fp8 import quantized_inputs, torch_fp8_attention

    if seed is not None:
        torch.manual_seed(seed)
    _, _, deq = quantized_inputs(*shape)
    q, k, v = deq
    ref, _ = attention_ref(q, k, v, causal=False)
    lowp = torch_fp8_attention(q.float(), k.float(), v.float(), causal=False)
    bound = (2 * (lowp.double() - ref).abs().max().item()
             + FLOOR[torch.bfloat16] * max(1.0, ref.abs().max().item()))
    row = {"shape": list(shape), "bound": bound, "share_below_2^-10": share_below(q, k)}
    for shift in shifts:
        for rounded in (False, True):
            out = emulate(q, k, v, shift, rounded)
            row[f"shift {shift:g}, {'rounded' if rounded else 'float32'} sums"] = (
                (out - ref).abs().max().item())
    if slack is not None:
        out = emulate(q, k, v, 0.0, False, slack=slack)
        row[f"slack {slack:g}, float32 sums"] = (out - ref).abs().max().item()
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shifts", type=float, nargs="+", default=[0.0, 8.0])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--slack", type=float, default=None)
    args = ap.parse_args()
    for shape in SHAPES:
        row = errors(shape, args.shifts, args.seed, args.slack)
        print("b{} sq{} sk{} h{}/{} d{}".format(*row.pop("shape")) + "  "
              + "  ".join(f"{name} {value:.3e}" for name, value in row.items()), flush=True)


if __name__ == "__main__":
    main()
