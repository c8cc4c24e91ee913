"""Ladder step v2: Q blocks in the outer loop (the spec's loop inversion).

One program owns BLOCK_M query rows of one (batch, head). Its Q tile is loaded once; the
accumulator, running max m and running sum l stay in registers while every K/V block of the head
streams through; O is divided by l once, after the loop, and stored once. HBM traffic drops to
Q + O once plus K/V once per Q block (and K/V re-reads mostly hit L2: see analysis/traffic.py).
K is loaded row-major as [BLOCK_N, D] and transposed on chip for QKᵀ (what v2_kt changes).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from flashtriton.kernels.common import LOG2E, dot_flags, is_interpreting, mma, softmax_step
from flashtriton.ladder._common import (INTERPRET_CONFIG, LadderConfig, check_inputs, head_offset,
                                        load_rows, softmax_scale_or_default, strides, tile_dim)


@triton.jit
def _ladder_v2_fwd(Q, K, V, O,
                   stride_qb, stride_qm, stride_qh, stride_qd,
                   stride_kb, stride_kn, stride_kh, stride_kd,
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
    p_k = K + head_offset(pid_bh, nheads, stride_kb, stride_kh)
    p_v = V + head_offset(pid_bh, nheads, stride_vb, stride_vh)
    p_o = O + head_offset(pid_bh, nheads, stride_ob, stride_oh)

    q = load_rows(p_q, offs_m, offs_d, seqlen_q, stride_qm, stride_qd, HEAD_DIM)  # [BLOCK_M, BLOCK_D], once
    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_D], dtype=tl.float32)
    for start_n in range(0, seqlen_k, BLOCK_N):
        offs_n = start_n + offs_nb
        k = load_rows(p_k, offs_n, offs_d, seqlen_k, stride_kn, stride_kd, HEAD_DIM)  # [BLOCK_N, BLOCK_D]
        qk = mma(q, tl.trans(k), tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32),
                 UPCAST_BF16, PRECISION)  # [BLOCK_M, BLOCK_N]
        s = tl.where(offs_n[None, :] < seqlen_k, qk * qk_scale, float("-inf"))
        p, alpha, m_i, l_i = softmax_step(s, m_i, l_i, False)
        v = load_rows(p_v, offs_n, offs_d, seqlen_k, stride_vn, stride_vd, HEAD_DIM)  # [BLOCK_N, BLOCK_D]
        acc = mma(p.to(v.dtype), v, acc * alpha[:, None], UPCAST_BF16, PRECISION)
    out = acc / l_i[:, None]  # the one division
    mask_o = (offs_m[:, None] < seqlen_q) & (offs_d[None, :] < HEAD_DIM)
    tl.store(p_o + offs_m[:, None] * stride_om + offs_d[None, :] * stride_od,
             out.to(O.dtype.element_ty), mask=mask_o)


def launch(q, k, v, softmax_scale, config: LadderConfig, block_d: int, allow_tf32: bool = False,
           out: torch.Tensor | None = None):
    """Launch ``_ladder_v2_fwd`` with a head-dim tile of ``block_d`` (v2_pad passes a wider one).
    ``out``: optional output tensor shaped like q (tests pass one filled with NaN)."""
    check_inputs(q, k, v)
    batch, seqlen_q, nheads, head_dim = q.shape
    seqlen_k = k.shape[1]
    o = torch.empty_like(q, memory_format=torch.contiguous_format) if out is None else out
    scale = softmax_scale_or_default(softmax_scale, head_dim)
    grid = (triton.cdiv(seqlen_q, config.block_m), batch * nheads)
    _ladder_v2_fwd[grid](
        q, k, v, o, *strides(q), *strides(k), *strides(v), *strides(o),
        nheads, seqlen_q, seqlen_k, scale * LOG2E,
        HEAD_DIM=head_dim, BLOCK_D=block_d, BLOCK_M=config.block_m, BLOCK_N=config.block_n,
        **dot_flags(q.dtype, allow_tf32), num_warps=config.num_warps, num_stages=config.num_stages,
    )
    return o


def default_config(dtype: torch.dtype, head_dim: int) -> LadderConfig:
    """The spec's 32x32 blocks in float32; for 16-bit inputs SPEC.md §4's best plain-Triton
    headdim-128 shape (BLOCK_M 128, BLOCK_N 64, 4 warps, 2 stages); tiny tiles under the interpreter."""
    if is_interpreting():
        return INTERPRET_CONFIG
    if dtype == torch.float32:
        return LadderConfig(block_m=32, block_n=32, num_warps=4, num_stages=2)
    return LadderConfig(block_m=128, block_n=64, num_warps=4, num_stages=2)


def forward(q, k, v, softmax_scale=None, config: LadderConfig | None = None, allow_tf32: bool = False,
            out: torch.Tensor | None = None):
    """v2 forward: ``out`` (batch, seqlen_q, heads, headdim) in q's dtype."""
    cfg = config or default_config(q.dtype, q.shape[-1])
    return launch(q, k, v, softmax_scale, cfg, tile_dim(q.shape[-1]), allow_tf32, out)
