"""Ladder step v2_kt: v2 with K pre-transposed to (D, N) in HBM (the spec's fix for bank conflicts).

The spec found that loading row-major K and reading its columns for QKᵀ made 63.6% of the
shared-memory wavefronts conflict (6.3-way) on an RTX 2070, and that transposing K once, outside
the kernel, removed them. Here the launcher makes ``kt`` (batch, heads, D, N) contiguous, and
the kernel loads [BLOCK_D, BLOCK_N] tiles of it and multiplies without ``tl.trans``. Everything
else is v2. The transpose is a separate copy of K (one read and one write of K), not counted in
the kernel's bytes.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from flashtriton.kernels.common import LOG2E, dot_flags, mma, softmax_step
from flashtriton.ladder._common import (LadderConfig, check_inputs, head_offset, load_rows,
                                        softmax_scale_or_default, strides, tile_dim)
from flashtriton.ladder.v2 import default_config  # same blocks as v2


@triton.jit
def _ladder_v2_kt_fwd(Q, KT, V, O,
                      stride_qb, stride_qm, stride_qh, stride_qd,
                      stride_kb, stride_kh, stride_kd, stride_kn,
                      stride_vb, stride_vn, stride_vh, stride_vd,
                      stride_ob, stride_om, stride_oh, stride_od,
                      nheads, seqlen_q, seqlen_k, qk_scale,
                      HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr,
                      BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                      UPCAST_BF16: tl.constexpr, PRECISION: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_bh = tl.program_id(1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_nb = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, BLOCK_D)
    p_q = Q + head_offset(pid_bh, nheads, stride_qb, stride_qh)
    p_kt = KT + head_offset(pid_bh, nheads, stride_kb, stride_kh)
    p_v = V + head_offset(pid_bh, nheads, stride_vb, stride_vh)
    p_o = O + head_offset(pid_bh, nheads, stride_ob, stride_oh)

    q = load_rows(p_q, offs_m, offs_d, seqlen_q, stride_qm, stride_qd, HEAD_DIM)  # [BLOCK_M, BLOCK_D]
    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_D], dtype=tl.float32)
    for start_n in range(0, seqlen_k, BLOCK_N):
        offs_n = start_n + offs_nb
        mask_kt = (offs_d[:, None] < HEAD_DIM) & (offs_n[None, :] < seqlen_k)
        kt = tl.load(p_kt + offs_d[:, None] * stride_kd + offs_n[None, :] * stride_kn,
                     mask=mask_kt, other=0.0)  # [BLOCK_D, BLOCK_N]: already Kᵀ, no tl.trans
        qk = mma(q, kt, tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32),
                 UPCAST_BF16, PRECISION)  # [BLOCK_M, BLOCK_N]
        s = tl.where(offs_n[None, :] < seqlen_k, qk * qk_scale, float("-inf"))
        p, alpha, m_i, l_i = softmax_step(s, m_i, l_i, False)
        v = load_rows(p_v, offs_n, offs_d, seqlen_k, stride_vn, stride_vd, HEAD_DIM)  # [BLOCK_N, BLOCK_D]
        acc = mma(p.to(v.dtype), v, acc * alpha[:, None], UPCAST_BF16, PRECISION)
    out = acc / l_i[:, None]
    mask_o = (offs_m[:, None] < seqlen_q) & (offs_d[None, :] < HEAD_DIM)
    tl.store(p_o + offs_m[:, None] * stride_om + offs_d[None, :] * stride_od,
             out.to(O.dtype.element_ty), mask=mask_o)


def transpose_k(k: torch.Tensor) -> torch.Tensor:
    """K (batch, seqlen_k, heads, D) -> contiguous Kᵀ (batch, heads, D, seqlen_k)."""
    return k.permute(0, 2, 3, 1).contiguous()


def forward(q, k, v, softmax_scale=None, config: LadderConfig | None = None, allow_tf32: bool = False,
            kt: torch.Tensor | None = None, out: torch.Tensor | None = None):
    """v2 with pre-transposed K: ``out`` (batch, seqlen_q, heads, headdim) in q's dtype.

    ``kt``: Kᵀ already made by :func:`transpose_k` (benchmarks pass it so that the copy is not timed).
    ``out``: optional output tensor shaped like q (tests pass one filled with NaN).
    """
    check_inputs(q, k, v)
    cfg = config or default_config(q.dtype, q.shape[-1])
    batch, seqlen_q, nheads, head_dim = q.shape
    seqlen_k = k.shape[1]
    kt = transpose_k(k) if kt is None else kt
    if kt.shape != (batch, nheads, head_dim, seqlen_k):
        raise ValueError(f"kt: expected (batch, heads, headdim, seqlen_k) = "
                         f"{(batch, nheads, head_dim, seqlen_k)}, got {tuple(kt.shape)}")
    o = torch.empty_like(q, memory_format=torch.contiguous_format) if out is None else out
    scale = softmax_scale_or_default(softmax_scale, head_dim)
    grid = (triton.cdiv(seqlen_q, cfg.block_m), batch * nheads)
    _ladder_v2_kt_fwd[grid](
        q, kt, v, o, *strides(q), *kt.stride(), *strides(v), *strides(o),
        nheads, seqlen_q, seqlen_k, scale * LOG2E,
        HEAD_DIM=head_dim, BLOCK_D=tile_dim(head_dim), BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n,
        **dot_flags(q.dtype, allow_tf32), num_warps=cfg.num_warps, num_stages=cfg.num_stages,
    )
    return o
