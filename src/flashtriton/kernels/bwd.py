"""The backward: delta preprocess, then either one dK/dV kernel that also adds its share of dQ
atomically into a float32 buffer (the default, five matrix products per tile), or, with
``deterministic``, the dK/dV kernel plus a separate dQ kernel (seven products per tile, every
gradient element written by exactly one program, so gradients are bitwise deterministic).

P is recomputed block by block from Q, K and the stored LSE: ``p = exp2(s2 - lse * log2(e))``.
With ``delta = rowsum(dO * O)``: ``dV = Pᵀ dO``, ``dP = dO Vᵀ``, ``dS = P ∘ (dP − delta)``,
``dK = scale · dSᵀ Q``, ``dQ = scale · dS K`` (times ``1 − tanh²`` under softcap).
The dK/dV kernel owns one K/V block and walks the query blocks that see it, for every query head
of its group (GQA sums over the group inside the program); it works on transposed [keys, queries]
tiles so that no register tile is transposed for dK and dV. The dQ kernel owns one Q block and
walks the keys.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from flashtriton.configs import AttnParams, bwd_config, gluon_bwd_config, is_interpreting
from flashtriton.kernels.common import (LOG2E, cdiv, diagonal_shift, dot_flags, dropout_keep,
                                        ensure_allocator, find_plan, grid3, inner_ranges, launch,
                                        load_rows, may_plan, mma, plan_key, query_tile_program,
                                        scores_log2, sequence_bounds, store_plan, tanh,
                                        tma_ready)
from flashtriton.kernels.dq_runs import dq_runs_layout, dq_runs_numel

try:  # Gluon (triton.experimental.gluon) is in Triton 3.5 and newer
    from flashtriton.kernels.bwd_gluon import attn_bwd_gluon, gluon_bwd_eligible
    from flashtriton.kernels.bwd_gluon_d256 import attn_bwd_dkdv_gluon_d256
    from flashtriton.kernels.bwd_gluon_d256_dq import attn_bwd_dq_gluon_d256
except ImportError:  # older Triton: the tl kernels only
    def gluon_bwd_eligible(*args) -> bool:
        return False

    attn_bwd_gluon = attn_bwd_dkdv_gluon_d256 = attn_bwd_dq_gluon_d256 = None


# Every output buffer comes from here; tests replace it with a NaN-filling allocator so that
# an element the kernels fail to write shows up as NaN.
_empty = torch.empty

@triton.jit
def _bwd_preprocess(O, DO, DELTA, CU_Q, DQ, stride_ob, stride_om, stride_oh,
                    stride_dob, stride_dom, stride_doh, stride_lb, stride_lh,
                    stride_dqb, stride_dqm, stride_dqh,
                    nheads, seqlen_q_max, zero_rows, HEAD_DIM_V: tl.constexpr,
                    BLOCK_DV: tl.constexpr, BLOCK_M: tl.constexpr, IS_VARLEN: tl.constexpr,
                    ZERO_DQ: tl.constexpr, HEAD_DIM_QK: tl.constexpr, BLOCK_DQK: tl.constexpr):
    """delta[b, h, i] = sum_d dO[b, i, h, d] * O[b, i, h, d] (float32). ``ZERO_DQ``: also
    zero rows 0 … ``zero_rows`` − 1 of the float32 dQ accumulator ``DQ`` seen through its
    strides (dense layouts only: with varlen, rows past the last sequence would stay
    unwritten), one launch instead of a memset. For the Gluon backward's accumulator in runs
    (kernels/bwd_gluon.py ``_dq_add``) the caller passes strides of (batch, rows, heads,
    head_dim) over each head's whole runs, and ``zero_rows`` past ``seqlen_q_max``."""
    pid_m = tl.program_id(0)
    pid_bh = tl.program_id(1)
    b = pid_bh // nheads
    h = pid_bh % nheads
    if IS_VARLEN:
        q_start = tl.load(CU_Q + b)
        seqlen_q = tl.load(CU_Q + b + 1) - q_start
    else:
        q_start = 0
        seqlen_q = seqlen_q_max
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, BLOCK_DV)
    mask = (offs_m[:, None] < seqlen_q) & (offs_d[None, :] < HEAD_DIM_V)
    rows = (q_start + offs_m).to(tl.int64)
    b64 = b.to(tl.int64)
    o = tl.load(O + b64 * stride_ob + h * stride_oh + rows[:, None] * stride_om + offs_d[None, :],
                mask=mask, other=0.0).to(tl.float32)  # [BLOCK_M, BLOCK_DV]
    do = tl.load(DO + b64 * stride_dob + h * stride_doh + rows[:, None] * stride_dom
                 + offs_d[None, :], mask=mask, other=0.0).to(tl.float32)
    delta = tl.sum(o * do, 1)
    tl.store(DELTA + b64 * stride_lb + h * stride_lh + q_start + offs_m, delta,
             mask=offs_m < seqlen_q)
    if ZERO_DQ:
        offs_dq = tl.arange(0, BLOCK_DQK)
        tl.store(DQ + b64 * stride_dqb + h * stride_dqh + rows[:, None] * stride_dqm
                 + offs_dq[None, :], tl.zeros([BLOCK_M, BLOCK_DQK], dtype=tl.float32),
                 mask=(offs_m[:, None] < zero_rows) & (offs_dq[None, :] < HEAD_DIM_QK))


@triton.jit
def _dkdv_tiles(dk, dv, k, v, p_q, p_do, q_desc, do_desc, p_lse, p_delta, p_mask, p_dq, dq_desc,
                stride_qm, stride_dom, stride_mm, stride_dqm, m_start, m_end, n0, offs_n, offs_dqk,
                offs_dv, seqlen_q, seqlen_k, shift, left, right, qk_scale, softcap, slope,
                seed, bh, dropout_p, ds_scale,
                HEAD_DIM_QK: tl.constexpr, HEAD_DIM_V: tl.constexpr, BLOCK_M: tl.constexpr,
                MASKED: tl.constexpr, HAS_LEFT: tl.constexpr, HAS_RIGHT: tl.constexpr,
                HAS_SOFTCAP: tl.constexpr, HAS_ALIBI: tl.constexpr, MASK_KIND: tl.constexpr,
                USE_TMA: tl.constexpr, HAS_DROPOUT: tl.constexpr, FUSED_DQ: tl.constexpr,
                DQ_TMA: tl.constexpr, UPCAST_BF16: tl.constexpr, PRECISION: tl.constexpr):
    """Accumulate dK, dV ([BLOCK_N, D]) over query blocks ``[m_start, m_end)``; with
    ``FUSED_DQ`` also add ``scale · dS K`` for each query block into the float32 dQ buffer."""
    offs_mb = tl.arange(0, BLOCK_M)
    for start_m in range(m_start, m_end, BLOCK_M):
        offs_m = start_m + offs_mb
        mask_m = offs_m < seqlen_q
        q = load_rows(q_desc, p_q, start_m, offs_m, stride_qm, offs_dqk, seqlen_q,
                      HEAD_DIM_QK, USE_TMA)  # [BLOCK_M, BLOCK_DQK]
        do = load_rows(do_desc, p_do, start_m, offs_m, stride_dom, offs_dv, seqlen_q,
                       HEAD_DIM_V, USE_TMA)  # [BLOCK_M, BLOCK_DV]
        lse = tl.load(p_lse + offs_m, mask=mask_m, other=0.0)
        lse2 = tl.where(lse == float("-inf"), float("inf"), lse * 1.4426950408889634)
        delta = tl.load(p_delta + offs_m, mask=mask_m, other=0.0)
        qkt = mma(k, tl.trans(q), tl.zeros([k.shape[0], BLOCK_M], dtype=tl.float32),
                  UPCAST_BF16, PRECISION)  # [BLOCK_N, BLOCK_M]
        st = scores_log2(qkt, offs_m[None, :], offs_n[:, None], seqlen_q, seqlen_k, shift, left,
                         right, qk_scale, softcap, slope, p_mask + offs_m[None, :] * stride_mm,
                         MASKED, HAS_LEFT, HAS_RIGHT, HAS_SOFTCAP, HAS_ALIBI, MASK_KIND)
        pt = tl.exp2(st - lse2[None, :])  # [BLOCK_N, BLOCK_M]
        if HAS_DROPOUT:  # the forward's mask, regenerated: dV sees Z∘P/(1-p), dP becomes Z∘dP/(1-p)
            keep = tl.trans(dropout_keep(seed, bh, offs_m, n0, k.shape[0], dropout_p))
            dv = mma((tl.where(keep, pt, 0.0) * (1.0 / (1.0 - dropout_p))).to(do.dtype), do, dv,
                     UPCAST_BF16, PRECISION)
        else:
            dv = mma(pt.to(do.dtype), do, dv, UPCAST_BF16, PRECISION)
        dpt = mma(v, tl.trans(do), tl.zeros([k.shape[0], BLOCK_M], dtype=tl.float32),
                  UPCAST_BF16, PRECISION)  # [BLOCK_N, BLOCK_M]
        if HAS_DROPOUT:
            dpt = tl.where(keep, dpt * (1.0 / (1.0 - dropout_p)), 0.0)
        dst = pt * (dpt - delta[None, :])
        if HAS_SOFTCAP:
            t = tanh(qkt * qk_scale)
            dst = dst * (1.0 - t * t)
        dst = dst.to(q.dtype)
        dk = mma(dst, q, dk, UPCAST_BF16, PRECISION)
        if FUSED_DQ:
            dq = mma(tl.trans(dst), k, tl.zeros([BLOCK_M, k.shape[1]], dtype=tl.float32),
                     UPCAST_BF16, PRECISION) * ds_scale  # [BLOCK_M, BLOCK_DQK]
            if DQ_TMA:
                dq_desc.atomic_add([start_m, 0], dq)
            else:
                tl.atomic_add(p_dq + offs_m[:, None] * stride_dqm + offs_dqk[None, :], dq,
                              mask=mask_m[:, None] & (offs_dqk[None, :] < HEAD_DIM_QK),
                              sem="relaxed")
    return dk, dv


@triton.heuristics({
    "EVEN_DQK": lambda a: a["HEAD_DIM_QK"] == a["BLOCK_DQK"],
})
@triton.jit
def _attn_bwd_dkdv(Q, K, V, DO, LSE, DELTA, DK, DV, DQ, MASK, SLOPES, CU_Q, CU_K, SEED,
                   stride_qb, stride_qm, stride_qh, stride_kb, stride_kn, stride_kh,
                   stride_vb, stride_vn, stride_vh, stride_dob, stride_dom, stride_doh,
                   stride_dkb, stride_dkn, stride_dkh, stride_dvb, stride_dvn, stride_dvh,
                   stride_dqb, stride_dqm, stride_dqh,
                   stride_lb, stride_lh, stride_mb, stride_mh, stride_mm, stride_mn, stride_sb,
                   nheads, nheads_k, group, seqlen_q_max, seqlen_k_max, shift_extra, left, right,
                   qk_scale, softcap, slope_scale, ds_scale, dropout_p,
                   HEAD_DIM_QK: tl.constexpr, HEAD_DIM_V: tl.constexpr,
                   BLOCK_DQK: tl.constexpr, BLOCK_DV: tl.constexpr,
                   BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                   HAS_LEFT: tl.constexpr, HAS_RIGHT: tl.constexpr, BOTTOM_RIGHT: tl.constexpr,
                   HAS_SOFTCAP: tl.constexpr, HAS_ALIBI: tl.constexpr, MASK_KIND: tl.constexpr,
                   IS_VARLEN: tl.constexpr, EVEN_DQK: tl.constexpr, USE_TMA: tl.constexpr,
                   HAS_DROPOUT: tl.constexpr, FUSED_DQ: tl.constexpr, DQ_TMA: tl.constexpr,
                   UPCAST_BF16: tl.constexpr, PRECISION: tl.constexpr):
    pid_n = tl.program_id(0)
    pid_bh = tl.program_id(1)
    b = pid_bh // nheads_k
    h_k = pid_bh % nheads_k
    q_start, seqlen_q, k_start, seqlen_k = sequence_bounds(CU_Q, CU_K, b, seqlen_q_max,
                                                           seqlen_k_max, IS_VARLEN)
    n0 = pid_n * BLOCK_N
    if n0 >= seqlen_k:
        return
    shift = diagonal_shift(shift_extra, seqlen_q, seqlen_k, BOTTOM_RIGHT)

    b64 = b.to(tl.int64)
    offs_n = n0 + tl.arange(0, BLOCK_N)
    offs_dqk = tl.arange(0, BLOCK_DQK)
    offs_dv = tl.arange(0, BLOCK_DV)
    rows_k = (k_start + offs_n).to(tl.int64)
    mask_n = offs_n < seqlen_k
    k = tl.load(K + b64 * stride_kb + h_k * stride_kh + rows_k[:, None] * stride_kn
                + offs_dqk[None, :], mask=mask_n[:, None] & (offs_dqk[None, :] < HEAD_DIM_QK),
                other=0.0)  # [BLOCK_N, BLOCK_DQK]
    v = tl.load(V + b64 * stride_vb + h_k * stride_vh + rows_k[:, None] * stride_vn
                + offs_dv[None, :], mask=mask_n[:, None] & (offs_dv[None, :] < HEAD_DIM_V),
                other=0.0)  # [BLOCK_N, BLOCK_DV]
    dk = tl.zeros([BLOCK_N, BLOCK_DQK], dtype=tl.float32)
    dv = tl.zeros([BLOCK_N, BLOCK_DV], dtype=tl.float32)

    # key j is seen by query i iff j - shift - right <= i <= j - shift + left
    lo, a, bb, hi = inner_ranges(n0, seqlen_k, seqlen_q, -shift, right, left,
                                 BLOCK_N, BLOCK_M, HAS_RIGHT, HAS_LEFT)
    seed = 0
    if HAS_DROPOUT:
        seed = tl.load(SEED)
    for g in range(0, group):
        h = h_k * group + g
        slope = 0.0
        if HAS_ALIBI:
            slope = tl.load(SLOPES + b * stride_sb + h).to(tl.float32) * slope_scale
        q_off = q_start.to(tl.int64)
        p_q = Q + b64 * stride_qb + h.to(tl.int64) * stride_qh + q_off * stride_qm
        p_do = DO + b64 * stride_dob + h.to(tl.int64) * stride_doh + q_off * stride_dom
        p_lse = LSE + b64 * stride_lb + h.to(tl.int64) * stride_lh + q_off
        p_delta = DELTA + b64 * stride_lb + h.to(tl.int64) * stride_lh + q_off
        p_mask = MASK + b64 * stride_mb + h.to(tl.int64) * stride_mh + offs_n[:, None] * stride_mn
        p_dq = DQ + b64 * stride_dqb + h.to(tl.int64) * stride_dqh + q_off * stride_dqm
        if DQ_TMA:
            dq_desc = tl.make_tensor_descriptor(p_dq, shape=[seqlen_q, HEAD_DIM_QK],
                                                strides=[stride_dqm, 1],
                                                block_shape=[BLOCK_M, BLOCK_DQK])
        else:
            dq_desc = p_dq
        if USE_TMA:
            q_desc = tl.make_tensor_descriptor(p_q, shape=[seqlen_q, HEAD_DIM_QK], strides=[stride_qm, 1],
                                               block_shape=[BLOCK_M, BLOCK_DQK])
            do_desc = tl.make_tensor_descriptor(p_do, shape=[seqlen_q, HEAD_DIM_V], strides=[stride_dom, 1],
                                                block_shape=[BLOCK_M, BLOCK_DV])
        else:
            q_desc = p_q
            do_desc = p_do
        dk, dv = _dkdv_tiles(dk, dv, k, v, p_q, p_do, q_desc, do_desc, p_lse, p_delta, p_mask,
                             p_dq, dq_desc, stride_qm, stride_dom, stride_mm, stride_dqm, a, bb,
                             n0, offs_n, offs_dqk, offs_dv,
                             seqlen_q, seqlen_k, shift, left, right, qk_scale, softcap, slope,
                             seed, b * nheads + h, dropout_p, ds_scale, HEAD_DIM_QK, HEAD_DIM_V,
                             BLOCK_M, False, HAS_LEFT, HAS_RIGHT, HAS_SOFTCAP, HAS_ALIBI, MASK_KIND, USE_TMA,
                             HAS_DROPOUT, FUSED_DQ, DQ_TMA, UPCAST_BF16, PRECISION)
        dk, dv = _dkdv_tiles(dk, dv, k, v, p_q, p_do, q_desc, do_desc, p_lse, p_delta, p_mask,
                             p_dq, dq_desc, stride_qm, stride_dom, stride_mm, stride_dqm, lo, a,
                             n0, offs_n, offs_dqk, offs_dv,
                             seqlen_q, seqlen_k, shift, left, right, qk_scale, softcap, slope,
                             seed, b * nheads + h, dropout_p, ds_scale, HEAD_DIM_QK, HEAD_DIM_V,
                             BLOCK_M, True, HAS_LEFT, HAS_RIGHT, HAS_SOFTCAP, HAS_ALIBI, MASK_KIND, USE_TMA,
                             HAS_DROPOUT, FUSED_DQ, DQ_TMA, UPCAST_BF16, PRECISION)
        dk, dv = _dkdv_tiles(dk, dv, k, v, p_q, p_do, q_desc, do_desc, p_lse, p_delta, p_mask,
                             p_dq, dq_desc, stride_qm, stride_dom, stride_mm, stride_dqm, bb, hi,
                             n0, offs_n, offs_dqk, offs_dv,
                             seqlen_q, seqlen_k, shift, left, right, qk_scale, softcap, slope,
                             seed, b * nheads + h, dropout_p, ds_scale, HEAD_DIM_QK, HEAD_DIM_V,
                             BLOCK_M, True, HAS_LEFT, HAS_RIGHT, HAS_SOFTCAP, HAS_ALIBI, MASK_KIND, USE_TMA,
                             HAS_DROPOUT, FUSED_DQ, DQ_TMA, UPCAST_BF16, PRECISION)

    dk = dk * ds_scale
    tl.store(DK + b64 * stride_dkb + h_k * stride_dkh + rows_k[:, None] * stride_dkn
             + offs_dqk[None, :], dk.to(DK.dtype.element_ty),
             mask=mask_n[:, None] & (offs_dqk[None, :] < HEAD_DIM_QK))
    tl.store(DV + b64 * stride_dvb + h_k * stride_dvh + rows_k[:, None] * stride_dvn
             + offs_dv[None, :], dv.to(DV.dtype.element_ty),
             mask=mask_n[:, None] & (offs_dv[None, :] < HEAD_DIM_V))


@triton.jit
def _dq_tiles(dq, q, do, lse2, delta, p_k, p_v, k_desc, v_desc, p_mask, stride_kn, stride_vn, stride_mn,
              n_start, n_end, offs_m, offs_dqk, offs_dv, seqlen_q, seqlen_k,
              shift, left, right, qk_scale, softcap, slope, seed, bh, dropout_p,
              HEAD_DIM_QK: tl.constexpr, HEAD_DIM_V: tl.constexpr, BLOCK_N: tl.constexpr,
              MASKED: tl.constexpr, HAS_LEFT: tl.constexpr, HAS_RIGHT: tl.constexpr,
              HAS_SOFTCAP: tl.constexpr, HAS_ALIBI: tl.constexpr, MASK_KIND: tl.constexpr,
              USE_TMA: tl.constexpr, HAS_DROPOUT: tl.constexpr,
              UPCAST_BF16: tl.constexpr, PRECISION: tl.constexpr):
    """Accumulate dQ ([BLOCK_M, D]) over key blocks ``[n_start, n_end)``."""
    offs_nb = tl.arange(0, BLOCK_N)
    for start_n in range(n_start, n_end, BLOCK_N):
        offs_n = start_n + offs_nb
        k = load_rows(k_desc, p_k, start_n, offs_n, stride_kn, offs_dqk, seqlen_k,
                      HEAD_DIM_QK, USE_TMA)  # [BLOCK_N, BLOCK_DQK]
        v = load_rows(v_desc, p_v, start_n, offs_n, stride_vn, offs_dv, seqlen_k,
                      HEAD_DIM_V, USE_TMA)  # [BLOCK_N, BLOCK_DV]
        qk = mma(q, tl.trans(k), tl.zeros([q.shape[0], BLOCK_N], dtype=tl.float32),
                 UPCAST_BF16, PRECISION)  # [BLOCK_M, BLOCK_N]
        s = scores_log2(qk, offs_m[:, None], offs_n[None, :], seqlen_q, seqlen_k, shift, left,
                        right, qk_scale, softcap, slope, p_mask + offs_n[None, :] * stride_mn,
                        MASKED, HAS_LEFT, HAS_RIGHT, HAS_SOFTCAP, HAS_ALIBI, MASK_KIND)
        p = tl.exp2(s - lse2[:, None])
        dp = mma(do, tl.trans(v), tl.zeros([q.shape[0], BLOCK_N], dtype=tl.float32),
                 UPCAST_BF16, PRECISION)
        if HAS_DROPOUT:
            keep = dropout_keep(seed, bh, offs_m, start_n, BLOCK_N, dropout_p)
            dp = tl.where(keep, dp * (1.0 / (1.0 - dropout_p)), 0.0)
        ds = p * (dp - delta[:, None])
        if HAS_SOFTCAP:
            t = tanh(qk * qk_scale)
            ds = ds * (1.0 - t * t)
        dq = mma(ds.to(k.dtype), k, dq, UPCAST_BF16, PRECISION)
    return dq


@triton.heuristics({
    "EVEN_DQK": lambda a: a["HEAD_DIM_QK"] == a["BLOCK_DQK"],
})
@triton.jit
def _attn_bwd_dq(Q, K, V, DO, LSE, DELTA, DQ, MASK, SLOPES, CU_Q, CU_K, SEED,
                 stride_qb, stride_qm, stride_qh, stride_kb, stride_kn, stride_kh,
                 stride_vb, stride_vn, stride_vh, stride_dob, stride_dom, stride_doh,
                 stride_dqb, stride_dqm, stride_dqh,
                 stride_lb, stride_lh, stride_mb, stride_mh, stride_mm, stride_mn, stride_sb,
                 nheads, group, seqlen_q_max, seqlen_k_max, shift_extra, left, right,
                 qk_scale, softcap, slope_scale, ds_scale, dropout_p,
                 HEAD_DIM_QK: tl.constexpr, HEAD_DIM_V: tl.constexpr,
                 BLOCK_DQK: tl.constexpr, BLOCK_DV: tl.constexpr,
                 BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                 HAS_LEFT: tl.constexpr, HAS_RIGHT: tl.constexpr, BOTTOM_RIGHT: tl.constexpr,
                 HAS_SOFTCAP: tl.constexpr, HAS_ALIBI: tl.constexpr, MASK_KIND: tl.constexpr,
                 IS_VARLEN: tl.constexpr, EVEN_DQK: tl.constexpr, USE_TMA: tl.constexpr,
                 HAS_DROPOUT: tl.constexpr, UPCAST_BF16: tl.constexpr, PRECISION: tl.constexpr):
    pid_m, b, h, h_k = query_tile_program(nheads, group, HAS_RIGHT)
    q_start, seqlen_q, k_start, seqlen_k = sequence_bounds(CU_Q, CU_K, b, seqlen_q_max,
                                                           seqlen_k_max, IS_VARLEN)
    m0 = pid_m * BLOCK_M
    if m0 >= seqlen_q:
        return
    shift = diagonal_shift(shift_extra, seqlen_q, seqlen_k, BOTTOM_RIGHT)

    b64 = b.to(tl.int64)
    offs_m = m0 + tl.arange(0, BLOCK_M)
    offs_dqk = tl.arange(0, BLOCK_DQK)
    offs_dv = tl.arange(0, BLOCK_DV)
    rows = (q_start + offs_m).to(tl.int64)
    mask_m = offs_m < seqlen_q
    q = tl.load(Q + b64 * stride_qb + h * stride_qh + rows[:, None] * stride_qm + offs_dqk[None, :],
                mask=mask_m[:, None] & (offs_dqk[None, :] < HEAD_DIM_QK), other=0.0)  # [BLOCK_M, BLOCK_DQK]
    do = tl.load(DO + b64 * stride_dob + h * stride_doh + rows[:, None] * stride_dom
                 + offs_dv[None, :], mask=mask_m[:, None] & (offs_dv[None, :] < HEAD_DIM_V),
                 other=0.0)  # [BLOCK_M, BLOCK_DV]
    lse = tl.load(LSE + b64 * stride_lb + h * stride_lh + q_start + offs_m, mask=mask_m, other=0.0)
    lse2 = tl.where(lse == float("-inf"), float("inf"), lse * 1.4426950408889634)
    delta = tl.load(DELTA + b64 * stride_lb + h * stride_lh + q_start + offs_m, mask=mask_m,
                    other=0.0)
    slope = 0.0
    if HAS_ALIBI:
        slope = tl.load(SLOPES + b * stride_sb + h).to(tl.float32) * slope_scale
    p_k = K + b64 * stride_kb + h_k.to(tl.int64) * stride_kh + k_start.to(tl.int64) * stride_kn
    p_v = V + b64 * stride_vb + h_k.to(tl.int64) * stride_vh + k_start.to(tl.int64) * stride_vn
    p_mask = MASK + b64 * stride_mb + h.to(tl.int64) * stride_mh + offs_m[:, None] * stride_mm
    dq = tl.zeros([BLOCK_M, BLOCK_DQK], dtype=tl.float32)
    seed = 0
    if HAS_DROPOUT:
        seed = tl.load(SEED)
    if USE_TMA:
        k_desc = tl.make_tensor_descriptor(p_k, shape=[seqlen_k, HEAD_DIM_QK], strides=[stride_kn, 1],
                                           block_shape=[BLOCK_N, BLOCK_DQK])
        v_desc = tl.make_tensor_descriptor(p_v, shape=[seqlen_k, HEAD_DIM_V], strides=[stride_vn, 1],
                                           block_shape=[BLOCK_N, BLOCK_DV])
    else:
        k_desc = p_k
        v_desc = p_v

    lo, a, bb, hi = inner_ranges(m0, seqlen_q, seqlen_k, shift, left, right,
                                 BLOCK_M, BLOCK_N, HAS_LEFT, HAS_RIGHT)
    dq = _dq_tiles(dq, q, do, lse2, delta, p_k, p_v, k_desc, v_desc, p_mask, stride_kn, stride_vn, stride_mn,
                   a, bb, offs_m, offs_dqk, offs_dv, seqlen_q, seqlen_k, shift, left, right,
                   qk_scale, softcap, slope, seed, b * nheads + h, dropout_p, HEAD_DIM_QK, HEAD_DIM_V, BLOCK_N, False,
                   HAS_LEFT, HAS_RIGHT, HAS_SOFTCAP, HAS_ALIBI, MASK_KIND, USE_TMA, HAS_DROPOUT,
                   UPCAST_BF16, PRECISION)
    dq = _dq_tiles(dq, q, do, lse2, delta, p_k, p_v, k_desc, v_desc, p_mask, stride_kn, stride_vn, stride_mn,
                   lo, a, offs_m, offs_dqk, offs_dv, seqlen_q, seqlen_k, shift, left, right,
                   qk_scale, softcap, slope, seed, b * nheads + h, dropout_p, HEAD_DIM_QK, HEAD_DIM_V, BLOCK_N, True,
                   HAS_LEFT, HAS_RIGHT, HAS_SOFTCAP, HAS_ALIBI, MASK_KIND, USE_TMA, HAS_DROPOUT,
                   UPCAST_BF16, PRECISION)
    dq = _dq_tiles(dq, q, do, lse2, delta, p_k, p_v, k_desc, v_desc, p_mask, stride_kn, stride_vn, stride_mn,
                   bb, hi, offs_m, offs_dqk, offs_dv, seqlen_q, seqlen_k, shift, left, right,
                   qk_scale, softcap, slope, seed, b * nheads + h, dropout_p, HEAD_DIM_QK, HEAD_DIM_V, BLOCK_N, True,
                   HAS_LEFT, HAS_RIGHT, HAS_SOFTCAP, HAS_ALIBI, MASK_KIND, USE_TMA, HAS_DROPOUT,
                   UPCAST_BF16, PRECISION)
    dq = dq * ds_scale
    tl.store(DQ + b64 * stride_dqb + h * stride_dqh + rows[:, None] * stride_dqm + offs_dqk[None, :],
             dq.to(DQ.dtype.element_ty), mask=mask_m[:, None] & (offs_dqk[None, :] < HEAD_DIM_QK))


def _run_bwd_plan(plan, do, q, k, v, o, lse, device: int):
    """A call with a stored plan (see ``common.store_plan``), on fresh buffers, as the call that
    stored the plan launched them. At head dim 64 and 128 ("dq runs"): δ with the dQ runs
    zeroed, the Gluon kernel, then dq put back in place and cast. At head dim 256 (a plan of
    two kernels): δ alone, then the dK/dV kernel, then the dQ kernel."""
    delta = _empty(lse.shape, dtype=torch.float32, device=lse.device)
    if plan[0] == "dq runs":
        (pre_entry, pre_grid, pre_rest, entry, grid, rest, cast_entry, cast_grid,
         cast_rest) = plan[1:]
        batch, _, nheads, d = q.shape  # every head's rows rounded up: pre_rest's last
        dq_runs = _empty(batch * nheads * pre_rest[-1] * d, dtype=torch.float32, device=q.device)
        pre_entry(pre_grid, (o, do, delta, q, dq_runs, *pre_rest), device)
        ensure_allocator()  # the Gluon kernel builds its TMA descriptors on the device
        dk = _empty(k.shape, dtype=k.dtype, device=k.device)
        dv = _empty(v.shape, dtype=v.dtype, device=v.device)
        entry(grid, (q, k, v, do, lse, delta, dq_runs, dk, dv, *rest), device)
        dq = _empty(q.shape, dtype=q.dtype, device=q.device)
        cast_entry(cast_grid, (dq_runs, dq, *cast_rest), device)
        return dq, dk, dv
    pre_entry, pre_grid, pre_rest, entry, grid, rest, dq_entry, dq_grid, dq_rest = plan
    pre_entry(pre_grid, (o, do, delta, q, delta, *pre_rest), device)
    ensure_allocator()  # the Gluon kernels build their TMA descriptors on the device
    dk = _empty(k.shape, dtype=k.dtype, device=k.device)
    dv = _empty(v.shape, dtype=v.dtype, device=v.device)
    entry(grid, (q, k, v, do, lse, delta, dk, dv, *rest), device)
    dq = _empty(q.shape, dtype=q.dtype, device=q.device)
    dq_entry(dq_grid, (q, k, v, do, lse, delta, dq, *dq_rest), device)
    return dq, dk, dv


def _pow2_dim(d: int) -> int:
    return max(16, triton.next_power_of_2(d))


def _dq_tma(cfg, dq) -> bool:
    """Reduce dQ through a tensor descriptor (TMA ``cp.reduce``)? GPU only: the interpreter of
    Triton 3.6 has no descriptor reductions."""
    return cfg.dq_tma and not is_interpreting() and tma_ready(dq)


def attn_bwd(do, q, k, v, o, lse, params: AttnParams, dlse=None, attn_mask=None, alibi_slopes=None,
             cu_seqlens_q=None, cu_seqlens_k=None, max_seqlen_q=None, max_seqlen_k=None,
             seed=None, config=None):
    """Launch the three backward kernels. Layouts as ``attn_fwd``; returns ``(dq, dk, dv)``
    shaped like q, k, v. ``dlse``: gradient of the returned lse, if any (dS gains ``P * dlse``,
    which is the same as subtracting it from delta)."""
    key = None
    if (config is None and dlse is None and attn_mask is None and alibi_slopes is None
            and cu_seqlens_q is None and seed is None and attn_bwd_gluon is not None
            and may_plan(q, params)):
        # a plain dense call: the plan stored by the first call like it, if any (common.py)
        key = plan_key(params, do, q, k, v, o, lse)
        plan = find_plan(key)
        if plan is not None:
            return _run_bwd_plan(plan, do, q, k, v, o, lse, key[1])
    from flashtriton.kernels.fwd import _mask_args, _slope_args

    varlen = cu_seqlens_q is not None
    d, d_v = q.shape[-1], v.shape[-1]
    dropout = params.dropout_p > 0
    # on sm_90 the Gluon dK/dV kernel (kernels/bwd_gluon.py, adding dQ by TMA reductions; at
    # head dim 256 kernels/bwd_gluon_d256.py, then the dQ kernel of bwd_gluon_d256_dq.py) takes
    # the calls it covers; the deterministic mode and everything else use the tl kernels below
    cfg = config or gluon_bwd_config(q.dtype, d, params.has_right, params.deterministic, dropout,
                                     k.shape[-3])
    gluon = (cfg is not None and cfg.gluon and not params.deterministic
             and gluon_bwd_eligible(q, k, v, do, params, attn_mask, alibi_slopes, varlen))
    if cfg is None or (cfg.gluon and not gluon):  # the tuned tl config
        cfg = bwd_config(q.dtype, max(d, d_v), params.has_right, params.deterministic, dropout)
    gluon_dq = gluon and cfg.fused_dq  # the Gluon kernel adds dQ (at d256 its own kernel does)
    if dropout and cfg.block_n % 32:
        raise ValueError(f"config: dropout needs block_n to be a multiple of 32, got {cfg.block_n}")
    if varlen:
        _, nheads, d = q.shape
        nheads_k = k.shape[1]
        batch = cu_seqlens_q.numel() - 1
        seqlen_q, seqlen_k = max_seqlen_q, max_seqlen_k

        def strides(t):
            return (0, t.stride(0), t.stride(1))
        sl = (0, lse.stride(0))
    else:
        batch, seqlen_q, nheads, d = q.shape
        seqlen_k, nheads_k = k.shape[1], k.shape[2]

        def strides(t):
            return (t.stride(0), t.stride(1), t.stride(2))
        sl = (lse.stride(0), lse.stride(1))
    delta = _empty(lse.shape, dtype=torch.float32, device=lse.device)
    # the float32 dQ accumulator that the Gluon kernel and the fused tl kernel add into: zeroed
    # by the preprocess kernel (dense layouts) or by a memset (varlen). The Gluon kernel's is
    # kept in runs of its row blocks (kernels/bwd_gluon.py, _dq_add), every head's rows rounded
    # up to whole blocks, which the preprocess zeroes as rows of head_dim values.
    fused = cfg.fused_dq and not params.deterministic and not gluon
    dq_acc = None
    dq_strides, zero_rows = (0, 0, 0), seqlen_q
    if gluon_dq:
        dq_strides, zero_rows = dq_runs_layout(q, cfg.block_m)
        dq_acc = _empty(dq_runs_numel(q, cfg.block_m), dtype=torch.float32, device=q.device)
    elif fused:
        dq_acc = (torch.zeros(q.shape, dtype=torch.float32, device=q.device) if varlen
                  else _empty(q.shape, dtype=torch.float32, device=q.device))
        dq_strides = strides(dq_acc)
    zero_dq = dq_acc is not None and not varlen
    mask_kind, mask, sm = _mask_args(attn_mask, q)
    slopes, s_sb = _slope_args(alibi_slopes, q)
    cu_q = cu_seqlens_q if varlen else q
    cu_k = cu_seqlens_k if varlen else q
    flags = dot_flags(q.dtype, params.allow_tf32)
    pre_block = 64 if not flags["UPCAST_BF16"] and q.is_cuda else 16
    pre_grid = (cdiv(max(zero_rows, 1), pre_block), batch * nheads)  # zero_rows >= seqlen_q
    pre_rest = (*strides(o), *strides(do), *sl, *(dq_strides if zero_dq else (0, 0, 0)),
                nheads, seqlen_q, zero_rows)
    pre_entry = launch(_bwd_preprocess, pre_grid, o, do, delta, cu_q,
                       dq_acc if zero_dq else delta, *pre_rest,
                       HEAD_DIM_V=d_v, BLOCK_DV=_pow2_dim(d_v), BLOCK_M=pre_block,
                       IS_VARLEN=varlen, ZERO_DQ=zero_dq, HEAD_DIM_QK=d, BLOCK_DQK=_pow2_dim(d))
    if dlse is not None:
        delta = delta - torch.where(torch.isinf(lse), 0.0, dlse.float())
    if gluon_dq:
        record = [] if key is not None and pre_entry is not None else None
        dq, dk, dv = attn_bwd_gluon(do, q, k, v, delta, lse, params, cfg.block_m, cfg.block_n,
                                    cfg.num_warps, cfg.num_stages, split_dq=cfg.split_dq,
                                    persistent=cfg.persistent, defer_dq=cfg.defer_dq,
                                    dq_on_empty=cfg.dq_on_empty, dq_alternate=cfg.dq_alternate,
                                    tile_order=cfg.tile_order, dq=dq_acc, record=record)
        if record and len(record) == 2:
            store_plan(key, ("dq runs", pre_entry, grid3(pre_grid), pre_rest, *record[0],
                             *record[1]))
        return dq, dk, dv
    if gluon:  # head dim 256: dK and dV, then dQ, by the Gluon kernels
        record = [] if key is not None and pre_entry is not None else None
        dk, dv = attn_bwd_dkdv_gluon_d256(do, q, k, v, delta, lse, params, cfg.block_m,
                                          cfg.block_n, cfg.num_warps, cfg.num_stages,
                                          persistent=cfg.persistent,
                                          tile_order=cfg.tile_order, record=record)
        dq = attn_bwd_dq_gluon_d256(do, q, k, v, delta, lse, params, cfg.block_m, cfg.block_n,
                                    cfg.num_warps, cfg.num_stages, persistent=cfg.persistent,
                                    tile_order=cfg.tile_order, record=record)
        if record is not None and len(record) == 2:
            store_plan(key, (pre_entry, grid3(pre_grid), pre_rest, *record[0], *record[1]))
        return dq, dk, dv
    # fused: every dK/dV program adds its dQ share atomically; float32 so the sum rounds once
    dq = dq_acc if fused else _empty(q.shape, dtype=q.dtype, device=q.device)
    dk = _empty(k.shape, dtype=k.dtype, device=k.device)
    dv = _empty(v.shape, dtype=v.dtype, device=v.device)
    common = dict(
        HEAD_DIM_QK=d, HEAD_DIM_V=d_v, BLOCK_DQK=_pow2_dim(d), BLOCK_DV=_pow2_dim(d_v),
        BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n,
        HAS_LEFT=params.has_left, HAS_RIGHT=params.has_right, BOTTOM_RIGHT=params.bottom_right,
        HAS_SOFTCAP=params.softcap > 0, HAS_ALIBI=alibi_slopes is not None, MASK_KIND=mask_kind,
        # ptxas 12.x (Triton 3.6) segfaults compiling the dQ kernel with descriptors and an
        # additive float mask in 16-bit dtypes (reproduced on CPU by compiling for sm_90a):
        # that combination uses pointer loads.
        IS_VARLEN=varlen, USE_TMA=cfg.tma and mask_kind != 2 and tma_ready(q, k, v, do),
        HAS_DROPOUT=params.dropout_p > 0,
        num_warps=cfg.num_warps, num_stages=cfg.num_stages, **flags)
    scalars = (params.shift_extra, params.window_left, params.window_right,
               params.qk_scale_log2, params.softcap_log2, LOG2E, params.scale_ds, params.dropout_p)
    launch(_attn_bwd_dkdv, (cdiv(max(seqlen_k, 1), cfg.block_n), batch * nheads_k),
           q, k, v, do, lse, delta, dk, dv, dq, mask, slopes, cu_q, cu_k,
           seed if seed is not None else q,
           *strides(q), *strides(k), *strides(v), *strides(do), *strides(dk), *strides(dv),
           *strides(dq), *sl, *sm, s_sb, nheads, nheads_k, nheads // nheads_k, seqlen_q,
           seqlen_k, *scalars, FUSED_DQ=fused, DQ_TMA=fused and _dq_tma(cfg, dq), **common)
    if fused:
        return (dq if q.dtype == torch.float32 else dq.to(q.dtype)), dk, dv
    launch(_attn_bwd_dq, (cdiv(max(seqlen_q, 1), cfg.block_m), batch * nheads),
        q, k, v, do, lse, delta, dq, mask, slopes, cu_q, cu_k, seed if seed is not None else q,
        *strides(q), *strides(k), *strides(v), *strides(do), *strides(dq),
        *sl, *sm, s_sb, nheads, nheads // nheads_k, seqlen_q, seqlen_k, *scalars, **common)
    return dq, dk, dv
