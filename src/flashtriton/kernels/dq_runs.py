"""The Gluon backward's float32 dQ accumulator in runs (kernels/bwd_gluon.py, ``_dq_add``): its
size, and the small ``tl`` kernel that puts it in place, scaled and cast to q's dtype. A
``tl`` kernel, so it runs under the interpreter too (tests/test_dq_runs.py)."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from flashtriton.kernels.common import cdiv, launch

_empty = torch.empty


def dq_runs_layout(q, block_m: int) -> tuple[tuple[int, int, int], int]:
    """The Gluon backward's dQ runs seen as rows of head_dim values, for kernels/bwd.py's
    preprocess kernel to zero: the (batch, row, head) strides that walk them and the rows of a
    head (its seqlen_q rounded up to whole blocks of ``block_m``; each head's runs are
    contiguous, the order of values inside them is ``_dq_add``'s)."""
    _, seqlen_q, nheads, d = q.shape
    rows = cdiv(seqlen_q, block_m) * block_m
    return (nheads * rows * d, d, rows * d), rows


def dq_runs_numel(q, block_m: int) -> int:
    """Values in the Gluon backward's float32 dQ accumulator (see ``_dq_add``): every head's
    rows rounded up to whole blocks of ``block_m`` (``dq_runs_layout``)."""
    (batch_stride, _, _), _ = dq_runs_layout(q, block_m)
    return q.shape[0] * batch_stride


@triton.jit
def _dq_from_runs(DQ_RUNS, DQ, stride_dqb, stride_dqm, stride_dqh, nheads, seqlen_q, n_qb,
                  scale, HEAD_DIM: tl.constexpr, RUN_ROWS: tl.constexpr,
                  RUN_COLS: tl.constexpr):
    """dq[b, rows, h, :] = ``scale`` · the float32 accumulator in runs (``_dq_add``: the
    consumers add dS·K unscaled, one multiply a value fewer on their steps), in q's dtype: for
    each (batch, head, part of RUN_COLS columns, block of RUN_ROWS rows) one run of RUN_ROWS ·
    RUN_COLS values, 8-column blocks one after another, each block's rows of 8 values in
    order. One program per block of rows of a (batch, head). The runs are read as [8-column
    block, row, 8] tiles, whose 8 values sit together in memory (vector loads), and turned into
    [row, column] in registers for dq's rows (vector stores). A ``tl`` kernel: it runs under
    the interpreter too (tests/test_dq_runs.py)."""
    qb = tl.program_id(0)
    bh = tl.program_id(1)
    BLOCKS: tl.constexpr = HEAD_DIM // 8  # 8-column blocks of a head, part after part
    PART_BLOCKS: tl.constexpr = RUN_COLS // 8
    j = tl.arange(0, BLOCKS)[:, None, None]
    r = tl.arange(0, RUN_ROWS)[None, :, None]
    e = tl.arange(0, 8)[None, None, :]
    run = (bh.to(tl.int64) * (HEAD_DIM // RUN_COLS) + j // PART_BLOCKS) * n_qb + qb
    offs = run * (RUN_ROWS * RUN_COLS) + (j % PART_BLOCKS) * (RUN_ROWS * 8) + r * 8 + e
    vals = tl.load(DQ_RUNS + offs, mask=qb * RUN_ROWS + r < seqlen_q, other=0.0)
    vals = tl.reshape(tl.permute(vals, (1, 0, 2)), [RUN_ROWS, HEAD_DIM])  # column j · 8 + e
    rows = qb * RUN_ROWS + tl.arange(0, RUN_ROWS)
    c = tl.arange(0, HEAD_DIM)
    p_dq = (DQ + (bh // nheads).to(tl.int64) * stride_dqb + (bh % nheads) * stride_dqh
            + rows[:, None].to(tl.int64) * stride_dqm + c[None, :])
    tl.store(p_dq, (vals * scale).to(DQ.dtype.element_ty, fp_downcast_rounding="rtne"),
             mask=rows[:, None] < seqlen_q)


def dq_cast(dq_runs, q, block_m: int, run_cols: int, scale: float):
    """dq = ``scale`` · the runs of ``block_m`` rows and ``run_cols`` columns, in q's shape and
    dtype: the launch's cache entry, its grid and its arguments after the two tensors (for a
    call plan), and the tensor."""
    batch, seqlen_q, nheads, d = q.shape
    dq = _empty(q.shape, dtype=q.dtype, device=q.device)
    grid = (cdiv(max(seqlen_q, 1), block_m), batch * nheads)
    rest = (*dq.stride()[:3], nheads, seqlen_q, cdiv(seqlen_q, block_m), scale)
    entry = launch(_dq_from_runs, grid, dq_runs, dq, *rest, HEAD_DIM=d, RUN_ROWS=block_m,
                   RUN_COLS=run_cols)
    return entry, grid, rest, dq
