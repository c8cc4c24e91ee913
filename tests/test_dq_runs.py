"""The Gluon backward's float32 dQ accumulator in runs (kernels/bwd_gluon.py ``_dq_add``) and
the two ``tl`` kernels around it: kernels/bwd.py's preprocess kernel, which zeroes the runs,
and kernels/dq_runs.py's ``_dq_from_runs`` (launched by ``dq_cast``), which puts dQ back in
(batch, seqlen, heads, head_dim) and casts it. Both run under the interpreter on CPU; the Gluon kernel that fills the runs is tested on
the GPU (tests/test_gluon_bwd.py).

The layout, written out here independently of the kernels: for each (batch, head, part of
``run_cols`` columns, block of ``block_m`` rows), in that order, the run's 8-column blocks one
after another, each block's rows of 8 values in order.
"""

import pytest
import torch

from flashtriton.kernels import bwd
from flashtriton.kernels.dq_runs import dq_cast, dq_runs_layout, dq_runs_numel
from flashtriton.kernels.common import launch
from helpers import DEVICE, assert_close


def to_runs(dq: torch.Tensor, block_m: int, run_cols: int, fill: float) -> torch.Tensor:
    """dq (batch, seqlen, heads, head_dim) as runs, the rows past seqlen filled with ``fill``."""
    b, s, h, d = dq.shape
    n_qb = -(-s // block_m)
    padded = torch.full((b, n_qb * block_m, h, d), fill, dtype=dq.dtype, device=dq.device)
    padded[:, :s] = dq
    runs = padded.view(b, n_qb, block_m, h, d // run_cols, run_cols // 8, 8)
    # → (batch, head, part, row block, 8-column block, row, column)
    return runs.permute(0, 3, 4, 1, 5, 2, 6).contiguous().view(-1)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("b,s,h,d,split", [(2, 77, 3, 64, True), (1, 130, 2, 128, True),
                                           (2, 64, 1, 128, False), (1, 5, 2, 64, False)])
def test_dq_from_runs_puts_every_value_in_place(b, s, h, d, split, dtype):
    """Fresh random dQ through the runs layout and back, scaled by the cast: every value lands
    in its (batch, row, head, column), and the padding rows' values (NaN here) reach no output.
    float32 out, scaled by a power of two: the values exactly; 16-bit, scaled by 1/sqrt(d):
    within STYLE.md's rule against torch's cast of the float64 product (the interpreter rounds
    float32 to bfloat16 toward zero, the GPU to nearest)."""
    torch.manual_seed(s * d + b)
    block_m, run_cols = 64, d // 2 if split else d
    scale = 0.125 if dtype == torch.float32 else d ** -0.5
    acc64 = torch.randn(b, s, h, d, dtype=torch.float64, device=DEVICE)
    runs = to_runs(acc64.float(), block_m, run_cols, float("nan"))
    q = torch.empty(b, s, h, d, dtype=dtype, device=DEVICE)
    assert runs.numel() == dq_runs_numel(q, block_m)
    *_, dq = dq_cast(runs, q, block_m, run_cols, scale)
    assert dq.shape == q.shape and dq.dtype == dtype
    ref64 = acc64.float().double() * scale
    if dtype == torch.float32:
        assert torch.equal(dq, ref64.float())
    else:
        assert_close(dq, ref64, ref64.to(dtype), name="dq")


def test_preprocess_zeroes_every_run():
    """The preprocess kernel, given the runs' strides and rows (what ``attn_bwd`` passes on the
    Gluon path), zeroes all of them, the rows past seqlen included (seqlen 77: 128 rows a head),
    and still computes δ = rowsum(dO ∘ O) for the real rows only."""
    b, s, h, d, block_m, pre_block = 2, 77, 3, 64, 64, 16
    torch.manual_seed(7)
    o = torch.randn(b, s, h, d, device=DEVICE)
    do = torch.randn(b, s, h, d, device=DEVICE)
    delta = torch.full((b, h, s), float("nan"), device=DEVICE)
    runs = torch.full((dq_runs_numel(o, block_m),), float("nan"), device=DEVICE)
    run_strides, rows = dq_runs_layout(o, block_m)
    assert rows == 128
    strides = lambda t: (t.stride(0), t.stride(1), t.stride(2))  # noqa: E731
    launch(bwd._bwd_preprocess, (-(-rows // pre_block), b * h), o, do, delta, o, runs,
           *strides(o), *strides(do), delta.stride(0), delta.stride(1),
           *run_strides, h, s, rows, HEAD_DIM_V=d, BLOCK_DV=d,
           BLOCK_M=pre_block, IS_VARLEN=False, ZERO_DQ=True, HEAD_DIM_QK=d, BLOCK_DQK=d)
    assert torch.equal(runs, torch.zeros_like(runs))
    ref = (o.double() * do.double()).sum(-1).transpose(1, 2)
    torch.testing.assert_close(delta.double(), ref, rtol=1e-5, atol=1e-5)
