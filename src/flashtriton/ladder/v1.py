"""Ladder step v1: K/V blocks in the outer loop, HBM used as the accumulator (the spec's start).

One program per (batch, head) (the spec's grid). For every K/V block j it walks all Q blocks i
and, for each, reads Q_i and the running O_i, l_i, m_i from HBM, updates them with the FA1
formula, *divides by the new l inside the loop*, and writes O_i, l_i, m_i back. Every K/V block
therefore re-reads Q and O and re-writes O: with 64 K/V blocks at the spec's sizes that is about
64 x (Q + O) read and 64 x O written (11.6 GB and 5.5 GB on the RTX 2070). O, l and m live in
float32 HBM workspaces (O is cast to the input dtype after the kernel).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from flashtriton.kernels.common import LOG2E, dot_flags, is_interpreting, mma
from flashtriton.ladder._common import (INTERPRET_CONFIG, LadderConfig, check_inputs, head_offset,
                                        load_rows, softmax_scale_or_default, strides, tile_dim)


@triton.jit
def _ladder_v1_fwd(Q, K, V, O, L, M,
                   stride_qb, stride_qm, stride_qh, stride_qd,
                   stride_kb, stride_kn, stride_kh, stride_kd,
                   stride_vb, stride_vn, stride_vh, stride_vd,
                   stride_ob, stride_om, stride_oh, stride_od,
                   stride_lb, stride_lh,
                   nheads, seqlen_q, seqlen_k, qk_scale,
                   HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr,
                   BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                   UPCAST_BF16: tl.constexpr, PRECISION: tl.constexpr):
    pid_bh = tl.program_id(0)
    offs_mb = tl.arange(0, BLOCK_M)
    offs_nb = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, BLOCK_D)
    p_q = Q + head_offset(pid_bh, nheads, stride_qb, stride_qh)
    p_k = K + head_offset(pid_bh, nheads, stride_kb, stride_kh)
    p_v = V + head_offset(pid_bh, nheads, stride_vb, stride_vh)
    p_o = O + head_offset(pid_bh, nheads, stride_ob, stride_oh)
    p_l = L + head_offset(pid_bh, nheads, stride_lb, stride_lh)  # l and m share one layout
    p_m = M + head_offset(pid_bh, nheads, stride_lb, stride_lh)

    for start_n in range(0, seqlen_k, BLOCK_N):  # outer: K/V blocks
        offs_n = start_n + offs_nb
        k = load_rows(p_k, offs_n, offs_d, seqlen_k, stride_kn, stride_kd, HEAD_DIM)  # [BLOCK_N, BLOCK_D]
        v = load_rows(p_v, offs_n, offs_d, seqlen_k, stride_vn, stride_vd, HEAD_DIM)  # [BLOCK_N, BLOCK_D]
        for start_m in range(0, seqlen_q, BLOCK_M):  # inner: Q blocks, state round-trips HBM
            offs_m = start_m + offs_mb
            mask_m = offs_m < seqlen_q
            q = load_rows(p_q, offs_m, offs_d, seqlen_q, stride_qm, stride_qd, HEAD_DIM)  # [BLOCK_M, BLOCK_D]
            o = load_rows(p_o, offs_m, offs_d, seqlen_q, stride_om, stride_od, HEAD_DIM)  # [BLOCK_M, BLOCK_D] fp32
            l_i = tl.load(p_l + offs_m, mask=mask_m, other=0.0)  # [BLOCK_M]
            m_i = tl.load(p_m + offs_m, mask=mask_m, other=float("-inf"))  # [BLOCK_M], log2 units

            qk = mma(q, tl.trans(k), tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32),
                     UPCAST_BF16, PRECISION)  # [BLOCK_M, BLOCK_N]
            s = tl.where(offs_n[None, :] < seqlen_k, qk * qk_scale, float("-inf"))
            m_ij = tl.max(s, 1)
            p = tl.exp2(s - m_ij[:, None])
            l_ij = tl.sum(p, 1)
            m_new = tl.maximum(m_i, m_ij)
            alpha = tl.exp2(m_i - m_new)
            beta = tl.exp2(m_ij - m_new)
            l_new = alpha * l_i + beta * l_ij
            pv = mma(p.to(v.dtype), v, tl.zeros([BLOCK_M, BLOCK_D], dtype=tl.float32),
                     UPCAST_BF16, PRECISION)  # [BLOCK_M, BLOCK_D]
            o = ((alpha * l_i)[:, None] * o + beta[:, None] * pv) / l_new[:, None]  # division in the loop

            mask_o = mask_m[:, None] & (offs_d[None, :] < HEAD_DIM)
            tl.store(p_o + offs_m[:, None] * stride_om + offs_d[None, :] * stride_od, o, mask=mask_o)
            tl.store(p_l + offs_m, l_new, mask=mask_m)
            tl.store(p_m + offs_m, m_new, mask=mask_m)
        # The next K/V block re-reads what this one wrote, possibly from other threads.
        tl.debug_barrier()


def default_config(dtype: torch.dtype, head_dim: int) -> LadderConfig:
    """The spec's 32x32 blocks in float32; 64x64 for 16-bit inputs; tiny tiles under the interpreter."""
    if is_interpreting():
        return INTERPRET_CONFIG
    if dtype == torch.float32:
        return LadderConfig(block_m=32, block_n=32, num_warps=4, num_stages=1)
    return LadderConfig(block_m=64, block_n=64, num_warps=4, num_stages=1)


def forward(q, k, v, softmax_scale=None, config: LadderConfig | None = None, allow_tf32: bool = False):
    """v1 forward: ``out`` (batch, seqlen_q, heads, headdim) in q's dtype."""
    check_inputs(q, k, v)
    cfg = config or default_config(q.dtype, q.shape[-1])
    batch, seqlen_q, nheads, head_dim = q.shape
    seqlen_k = k.shape[1]
    # HBM workspaces: O starts at 0, l at 0, m at -inf (the kernel reads them at every K/V block).
    o = torch.zeros(q.shape, dtype=torch.float32, device=q.device)
    l = torch.zeros((batch, nheads, seqlen_q), dtype=torch.float32, device=q.device)
    m = torch.full((batch, nheads, seqlen_q), float("-inf"), dtype=torch.float32, device=q.device)
    scale = softmax_scale_or_default(softmax_scale, head_dim)
    _ladder_v1_fwd[(batch * nheads,)](
        q, k, v, o, l, m, *strides(q), *strides(k), *strides(v), *strides(o),
        l.stride(0), l.stride(1), nheads, seqlen_q, seqlen_k, scale * LOG2E,
        HEAD_DIM=head_dim, BLOCK_D=tile_dim(head_dim), BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n,
        **dot_flags(q.dtype, allow_tf32), num_warps=cfg.num_warps, num_stages=cfg.num_stages,
    )
    return o if q.dtype == torch.float32 else o.to(q.dtype)
