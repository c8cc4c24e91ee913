"""The forward kernel: Q-block outer loop, online softmax in exp2, deferred normalisation, LSE out.

One program owns BLOCK_M query rows of one (batch, head). Its Q tile is loaded once; the running
max ``m``, running sum ``l`` and the output accumulator stay in registers while K/V tiles stream
through; O is divided by ``l`` once and stored once, with the row log-sum-exp for the backward.
The key loop is split (see ``common.inner_ranges``) into blocks that need masking (sequence end,
causal diagonal, window edges) and blocks that do not, which run without any comparisons.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from flashtriton.configs import AttnParams, fwd_config, gluon_fwd_config

try:  # Gluon (triton.experimental.gluon) is in Triton 3.5 and newer
    from flashtriton.kernels.fwd_gluon import attn_fwd_gluon, gluon_eligible, run_fwd_plan
except ImportError:  # an older Triton: the tl kernel everywhere
    def gluon_eligible(*args) -> bool:
        return False

    attn_fwd_gluon = run_fwd_plan = None
from flashtriton.kernels.common import (LOG2E, cdiv, diagonal_shift, dot_flags, dropout_keep,
                                        find_plan, inner_ranges, is_interpreting, launch,
                                        may_plan, mma, plan_key, query_tile_program, scores_log2,
                                        sequence_bounds, softmax_step, softmax_step_fused,
                                        tma_ready)
from flashtriton.kernels.keys_minor import keys_minor


# Every output buffer comes from here; tests replace it with a NaN-filling allocator so that
# an element the kernels fail to write shows up as NaN.
_empty = torch.empty

@triton.jit
def _fwd_tiles(acc, m_i, l_i, q, p_k, p_v, k_desc, v_desc, p_mask, stride_kn, stride_vn, stride_vd,
               stride_mn,
               n_start, n_end, offs_m, offs_dqk, offs_dv, seqlen_q, seqlen_k,
               shift, left, right, qk_scale, softcap, slope, seed, bh, dropout_p,
               HEAD_DIM_QK: tl.constexpr, HEAD_DIM_V: tl.constexpr,
               BLOCK_N: tl.constexpr, MASKED: tl.constexpr,
               HAS_LEFT: tl.constexpr, HAS_RIGHT: tl.constexpr, HAS_SOFTCAP: tl.constexpr,
               HAS_ALIBI: tl.constexpr, MASK_KIND: tl.constexpr,
               EVEN_DQK: tl.constexpr, EVEN_DV: tl.constexpr, USE_TMA: tl.constexpr,
               WARP_SPEC: tl.constexpr, FUSED_SCALE: tl.constexpr, HAS_DROPOUT: tl.constexpr,
               IS_FP8: tl.constexpr, QUANT_P: tl.constexpr, V_T: tl.constexpr,
               UPCAST_BF16: tl.constexpr, PRECISION: tl.constexpr):
    """Stream K/V blocks ``[n_start, n_end)`` through the accumulator (masked or not).

    With ``USE_TMA`` the tiles come through tensor descriptors (Hopper's copy engine), whose
    bounds (this sequence's keys, the true head dims) zero-fill whatever lies outside.
    With float8 inputs P is rounded to e4m3 for the P·V product (``QUANT_P``); the interpreter's
    fp32->fp8 conversion does not round like the hardware, so there P stays fp32.
    ``V_T``: V is stored (D, keys) with keys contiguous (stride_vd between rows): float8
    products on Hopper take the P·V operand only with the reduction (key) dimension contiguous.
    """
    offs_nb = tl.arange(0, BLOCK_N)
    for start_n in tl.range(n_start, n_end, BLOCK_N, warp_specialize=WARP_SPEC and not MASKED):
        offs_n = start_n + offs_nb
        p_kt = p_k + offs_n[None, :] * stride_kn + offs_dqk[:, None]  # [BLOCK_DQK, BLOCK_N]
        p_vt = p_v + offs_n[:, None] * stride_vn + offs_dv[None, :] * stride_vd  # [BLOCK_N, BLOCK_DV]
        if USE_TMA:
            kt = tl.trans(k_desc.load([start_n, 0]))
        elif MASKED or not EVEN_DQK:
            kt = tl.load(p_kt, mask=(offs_n[None, :] < seqlen_k) & (offs_dqk[:, None] < HEAD_DIM_QK),
                         other=0.0)
        else:
            kt = tl.load(p_kt)
        qk = mma(q, kt, tl.zeros([q.shape[0], BLOCK_N], dtype=tl.float32),
                 UPCAST_BF16, PRECISION)  # [BLOCK_M, BLOCK_N]
        if FUSED_SCALE and not MASKED:
            p, alpha, m_i, l_i = softmax_step_fused(qk, qk_scale, m_i, l_i)
        else:
            s = scores_log2(qk, offs_m[:, None], offs_n[None, :], seqlen_q, seqlen_k, shift, left,
                            right, qk_scale, softcap, slope, p_mask + offs_n[None, :] * stride_mn,
                            MASKED, HAS_LEFT, HAS_RIGHT, HAS_SOFTCAP, HAS_ALIBI, MASK_KIND)
            p, alpha, m_i, l_i = softmax_step(s, m_i, l_i, MASKED or MASK_KIND != 0)
        if USE_TMA and V_T:
            v = tl.trans(v_desc.load([0, start_n]))
        elif USE_TMA:
            v = v_desc.load([start_n, 0])
        elif MASKED or not EVEN_DV:
            v = tl.load(p_vt, mask=(offs_n[:, None] < seqlen_k) & (offs_dv[None, :] < HEAD_DIM_V),
                        other=0.0)
        else:
            v = tl.load(p_vt)
        if HAS_DROPOUT:  # l keeps the undropped sum; 1/(1-p) is applied once at the end
            p = tl.where(dropout_keep(seed, bh, offs_m, start_n, BLOCK_N, dropout_p), p, 0.0)
        if IS_FP8 and not QUANT_P:
            acc = mma(p, v.to(tl.float32), acc * alpha[:, None], False, "ieee")
        else:
            acc = mma(p.to(v.dtype), v, acc * alpha[:, None], UPCAST_BF16, PRECISION)
    return acc, m_i, l_i


@triton.heuristics({
    "EVEN_DQK": lambda a: a["HEAD_DIM_QK"] == a["BLOCK_DQK"],
    "EVEN_DV": lambda a: a["HEAD_DIM_V"] == a["BLOCK_DV"],
})
@triton.jit
def _attn_fwd(Q, K, V, O, LSE, MASK, SLOPES, CU_Q, CU_K, SEED, DESCALE,
              stride_qb, stride_qm, stride_qh, stride_kb, stride_kn, stride_kh,
              stride_vb, stride_vn, stride_vh, stride_vd, stride_ob, stride_om, stride_oh,
              stride_lb, stride_lh, stride_mb, stride_mh, stride_mm, stride_mn, stride_sb,
              nheads, group, seqlen_q_max, seqlen_k_max, shift_extra, left, right,
              qk_scale, softcap, slope_scale, dropout_p,
              HEAD_DIM_QK: tl.constexpr, HEAD_DIM_V: tl.constexpr,
              BLOCK_DQK: tl.constexpr, BLOCK_DV: tl.constexpr,
              BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
              HAS_LEFT: tl.constexpr, HAS_RIGHT: tl.constexpr, BOTTOM_RIGHT: tl.constexpr,
              HAS_SOFTCAP: tl.constexpr, HAS_ALIBI: tl.constexpr, MASK_KIND: tl.constexpr,
              IS_VARLEN: tl.constexpr, EVEN_DQK: tl.constexpr, EVEN_DV: tl.constexpr,
              USE_TMA: tl.constexpr, WARP_SPEC: tl.constexpr, FUSED_SCALE: tl.constexpr,
              HAS_DROPOUT: tl.constexpr, IS_FP8: tl.constexpr, QUANT_P: tl.constexpr,
              V_T: tl.constexpr, UPCAST_BF16: tl.constexpr, PRECISION: tl.constexpr):
    pid_m, b, h, h_k = query_tile_program(nheads, group, HAS_RIGHT)
    q_start, seqlen_q, k_start, seqlen_k = sequence_bounds(CU_Q, CU_K, b, seqlen_q_max,
                                                           seqlen_k_max, IS_VARLEN)
    m0 = pid_m * BLOCK_M
    if m0 >= seqlen_q:
        return
    # query i sees key j iff i + shift - left <= j <= i + shift + right
    shift = diagonal_shift(shift_extra, seqlen_q, seqlen_k, BOTTOM_RIGHT)

    b64 = b.to(tl.int64)
    offs_m = m0 + tl.arange(0, BLOCK_M)
    offs_dqk = tl.arange(0, BLOCK_DQK)
    offs_dv = tl.arange(0, BLOCK_DV)
    p_q = Q + b64 * stride_qb + h.to(tl.int64) * stride_qh + q_start.to(tl.int64) * stride_qm
    p_k = K + b64 * stride_kb + h_k.to(tl.int64) * stride_kh + k_start.to(tl.int64) * stride_kn
    p_v = V + b64 * stride_vb + h_k.to(tl.int64) * stride_vh + k_start.to(tl.int64) * stride_vn
    p_mask = MASK + b64 * stride_mb + h.to(tl.int64) * stride_mh + offs_m[:, None] * stride_mm

    if USE_TMA:
        # one descriptor per (sequence, head): its bounds are this sequence's rows
        k_desc = tl.make_tensor_descriptor(p_k, shape=[seqlen_k, HEAD_DIM_QK], strides=[stride_kn, 1],
                                           block_shape=[BLOCK_N, BLOCK_DQK])
        if V_T:
            v_desc = tl.make_tensor_descriptor(p_v, shape=[HEAD_DIM_V, seqlen_k],
                                               strides=[stride_vd, 1],
                                               block_shape=[BLOCK_DV, BLOCK_N])
        else:
            v_desc = tl.make_tensor_descriptor(p_v, shape=[seqlen_k, HEAD_DIM_V],
                                               strides=[stride_vn, 1],
                                               block_shape=[BLOCK_N, BLOCK_DV])
        q_desc = tl.make_tensor_descriptor(p_q, shape=[seqlen_q, HEAD_DIM_QK], strides=[stride_qm, 1],
                                           block_shape=[BLOCK_M, BLOCK_DQK])
        q = q_desc.load([m0, 0])  # [BLOCK_M, BLOCK_DQK]
    else:
        k_desc = p_k
        v_desc = p_v
        mask_q = (offs_m[:, None] < seqlen_q) & (offs_dqk[None, :] < HEAD_DIM_QK)
        q = tl.load(p_q + offs_m[:, None] * stride_qm + offs_dqk[None, :], mask=mask_q, other=0.0)

    slope = 0.0
    if HAS_ALIBI:
        slope = tl.load(SLOPES + b * stride_sb + h).to(tl.float32) * slope_scale

    seed = 0
    if HAS_DROPOUT:
        seed = tl.load(SEED)
    if IS_FP8:  # per-tensor descales (q, k, v): q·k is rescaled inside the score multiplier
        qk_scale = qk_scale * tl.load(DESCALE) * tl.load(DESCALE + 1)
    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_DV], dtype=tl.float32)

    lo, a, bb, hi = inner_ranges(m0, seqlen_q, seqlen_k, shift, left, right,
                                 BLOCK_M, BLOCK_N, HAS_LEFT, HAS_RIGHT)
    acc, m_i, l_i = _fwd_tiles(acc, m_i, l_i, q, p_k, p_v, k_desc, v_desc, p_mask, stride_kn, stride_vn,
                               stride_vd, stride_mn,
                               a, bb, offs_m, offs_dqk, offs_dv, seqlen_q, seqlen_k,
                               shift, left, right, qk_scale, softcap, slope, seed, b * nheads + h,
                               dropout_p, HEAD_DIM_QK, HEAD_DIM_V, BLOCK_N, False, HAS_LEFT, HAS_RIGHT,
                               HAS_SOFTCAP, HAS_ALIBI, MASK_KIND, EVEN_DQK, EVEN_DV, USE_TMA,
                               WARP_SPEC, FUSED_SCALE, HAS_DROPOUT, IS_FP8, QUANT_P, V_T,
                               UPCAST_BF16, PRECISION)
    acc, m_i, l_i = _fwd_tiles(acc, m_i, l_i, q, p_k, p_v, k_desc, v_desc, p_mask, stride_kn, stride_vn,
                               stride_vd, stride_mn,
                               lo, a, offs_m, offs_dqk, offs_dv, seqlen_q, seqlen_k,
                               shift, left, right, qk_scale, softcap, slope, seed, b * nheads + h,
                               dropout_p, HEAD_DIM_QK, HEAD_DIM_V, BLOCK_N, True, HAS_LEFT, HAS_RIGHT,
                               HAS_SOFTCAP, HAS_ALIBI, MASK_KIND, EVEN_DQK, EVEN_DV, USE_TMA,
                               WARP_SPEC, FUSED_SCALE, HAS_DROPOUT, IS_FP8, QUANT_P, V_T,
                               UPCAST_BF16, PRECISION)
    acc, m_i, l_i = _fwd_tiles(acc, m_i, l_i, q, p_k, p_v, k_desc, v_desc, p_mask, stride_kn, stride_vn,
                               stride_vd, stride_mn,
                               bb, hi, offs_m, offs_dqk, offs_dv, seqlen_q, seqlen_k,
                               shift, left, right, qk_scale, softcap, slope, seed, b * nheads + h,
                               dropout_p, HEAD_DIM_QK, HEAD_DIM_V, BLOCK_N, True, HAS_LEFT, HAS_RIGHT,
                               HAS_SOFTCAP, HAS_ALIBI, MASK_KIND, EVEN_DQK, EVEN_DV, USE_TMA,
                               WARP_SPEC, FUSED_SCALE, HAS_DROPOUT, IS_FP8, QUANT_P, V_T,
                               UPCAST_BF16, PRECISION)

    # Rows that saw no key: l == 0 -> output 0, lse -inf.
    seen = l_i > 0.0
    l_safe = tl.where(seen, l_i, 1.0)
    lse = tl.where(seen, (m_i + tl.log2(l_safe)) * 0.6931471805599453, float("-inf"))
    if HAS_DROPOUT:  # kept probabilities scale by 1/(1-p); the lse stays that of P
        l_safe = l_safe * (1.0 - dropout_p)
    out = acc / l_safe[:, None]
    if IS_FP8:
        out = out * tl.load(DESCALE + 2)

    p_o = O + b64 * stride_ob + h.to(tl.int64) * stride_oh + q_start.to(tl.int64) * stride_om
    if USE_TMA:
        o_desc = tl.make_tensor_descriptor(p_o, shape=[seqlen_q, HEAD_DIM_V], strides=[stride_om, 1],
                                           block_shape=[BLOCK_M, BLOCK_DV])
        o_desc.store([m0, 0], out.to(O.dtype.element_ty))
    else:
        tl.store(p_o + offs_m[:, None] * stride_om + offs_dv[None, :], out.to(O.dtype.element_ty),
                 mask=(offs_m[:, None] < seqlen_q) & (offs_dv[None, :] < HEAD_DIM_V))
    p_lse = LSE + b64 * stride_lb + h.to(tl.int64) * stride_lh + q_start + offs_m
    tl.store(p_lse, lse, mask=offs_m < seqlen_q)


def _pow2_dim(d: int, dtype=None) -> int:
    # fp8 tensor-core products take K in steps of 32
    return max(32 if dtype == torch.float8_e4m3fn else 16, triton.next_power_of_2(d))


def attn_fwd(q, k, v, params: AttnParams, attn_mask=None, alibi_slopes=None,
             cu_seqlens_q=None, cu_seqlens_k=None, max_seqlen_q=None, max_seqlen_k=None,
             seed=None, descale=None, config=None):
    """Launch the forward. Dense: q (B, Sq, H, D), k/v (B, Sk, Hk, D[v]); varlen: (total, H, D)
    with ``cu_seqlens_*``. Last dims contiguous. Returns ``(o, lse)``: o like q with headdim_v,
    lse float32 (B, H, Sq) or (H, total_q). ``seed``: int64 tensor of one element on q's device,
    needed when ``params.dropout_p > 0``. float8_e4m3fn inputs: ``descale`` is a float32 tensor
    (q, k, v descales) on q's device, and o is bfloat16."""
    key = None
    if (config is None and attn_mask is None and alibi_slopes is None and cu_seqlens_q is None
            and run_fwd_plan is not None and may_plan(q, params)):
        # a plain dense call: the plan stored by the first call like it, if any (common.py;
        # float8 calls key their descales' tensor too, whose pointer the plan's launch takes)
        key = (plan_key(params, q, k, v) if descale is None
               else plan_key(params, q, k, v, descale))
        plan = find_plan(key)
        if plan is not None:
            return run_fwd_plan(plan, q, k, v, key[1], descale)
    out_dtype = torch.bfloat16 if q.dtype == torch.float8_e4m3fn else q.dtype
    varlen = cu_seqlens_q is not None
    head_dim = max(q.shape[-1], v.shape[-1])
    dropout = params.dropout_p > 0
    cfg = config or gluon_fwd_config(q.dtype, head_dim, params.has_right, dropout, k.shape[-3])
    if cfg is not None and cfg.gluon and gluon_eligible(q, k, v, params, attn_mask, alibi_slopes,
                                                        varlen):
        return attn_fwd_gluon(q, k, v, params, cfg.block_m, cfg.block_n, cfg.num_warps,
                              cfg.num_stages, cfg.pingpong, cfg.persistent, cfg.tile_order,
                              plan_key=key, descale=descale, regs=cfg.regs)
    if cfg is None or cfg.gluon:  # a call the Gluon kernel does not cover: the tuned tl config
        cfg = fwd_config(q.dtype, head_dim, params.has_right, dropout)
    if varlen:
        total_q, nheads, d = q.shape
        nheads_k = k.shape[1]
        batch = cu_seqlens_q.numel() - 1
        seqlen_q, seqlen_k = max_seqlen_q, max_seqlen_k
        o = _empty((total_q, nheads, v.shape[-1]), dtype=out_dtype, device=q.device)
        lse = _empty((nheads, total_q), dtype=torch.float32, device=q.device)
        sq = (0, q.stride(0), q.stride(1))
        sk = (0, k.stride(0), k.stride(1))
        sv = (0, v.stride(0), v.stride(1), 1)
        so = (0, o.stride(0), o.stride(1))
        sl = (0, lse.stride(0))
    else:
        batch, seqlen_q, nheads, d = q.shape
        seqlen_k, nheads_k = k.shape[1], k.shape[2]
        o = _empty((batch, seqlen_q, nheads, v.shape[-1]), dtype=out_dtype, device=q.device)
        lse = _empty((batch, nheads, seqlen_q), dtype=torch.float32, device=q.device)
        sq = (q.stride(0), q.stride(1), q.stride(2))
        sk = (k.stride(0), k.stride(1), k.stride(2))
        sv = (v.stride(0), v.stride(1), v.stride(2), 1)
        so = (o.stride(0), o.stride(1), o.stride(2))
        sl = (lse.stride(0), lse.stride(1))
    dv = v.shape[-1]
    v_t = q.dtype == torch.float8_e4m3fn
    if v_t:
        if varlen:
            raise NotImplementedError("float8 with cu_seqlens is not built in flashtriton")
        v, sv = _keys_minor(v)
    if params.dropout_p > 0 and cfg.block_n % 32:
        raise ValueError(f"config: dropout needs block_n to be a multiple of 32, got {cfg.block_n}")
    mask_kind, mask, sm = _mask_args(attn_mask, q)
    slopes, s_sb = _slope_args(alibi_slopes, q)
    cu_q = cu_seqlens_q if varlen else q
    cu_k = cu_seqlens_k if varlen else q
    use_tma = cfg.tma and tma_ready(q, k, v, o)
    grid = (cdiv(max(seqlen_q, 1), cfg.block_m), batch * nheads)
    launch(_attn_fwd, grid,
        q, k, v, o, lse, mask, slopes, cu_q, cu_k, seed if seed is not None else q,
        descale if descale is not None else q,
        *sq, *sk, *sv, *so, *sl, *sm, s_sb,
        nheads, nheads // nheads_k, seqlen_q, seqlen_k, params.shift_extra,
        params.window_left, params.window_right,
        params.qk_scale_log2, params.softcap_log2, LOG2E, params.dropout_p,
        HEAD_DIM_QK=d, HEAD_DIM_V=dv, BLOCK_DQK=_pow2_dim(d, q.dtype), BLOCK_DV=_pow2_dim(dv, q.dtype),
        BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n,
        HAS_LEFT=params.has_left, HAS_RIGHT=params.has_right, BOTTOM_RIGHT=params.bottom_right,
        HAS_SOFTCAP=params.softcap > 0, HAS_ALIBI=alibi_slopes is not None, MASK_KIND=mask_kind,
        IS_VARLEN=varlen, USE_TMA=use_tma,
        WARP_SPEC=cfg.warp_specialize and use_tma,
        FUSED_SCALE=(params.softcap == 0 and alibi_slopes is None and mask_kind == 0
                     and params.softmax_scale >= 0),
        HAS_DROPOUT=params.dropout_p > 0, IS_FP8=q.dtype == torch.float8_e4m3fn,
        QUANT_P=not is_interpreting(), V_T=v_t,
        **dot_flags(q.dtype, params.allow_tf32),
        num_warps=cfg.num_warps, num_stages=cfg.num_stages,
    )
    return o, lse


def _keys_minor(v):
    """V (B, Sk, Hk, Dv) copied to a (B, Hk, Dv, Sk) layout, keys contiguous, the key stride
    padded to 16 bytes (tensor descriptors need 16-byte row strides; ``keys_minor``, one pass
    over V, small next to the attention itself). Returns the copy and the kernel's (b, n, h, d)
    strides."""
    vt = keys_minor(v, 16)
    return vt, (vt.stride(0), 1, vt.stride(1), vt.stride(2))


def _mask_args(attn_mask, like):
    """(kind, tensor, 4 strides) for the kernel. The mask is already broadcast (expand, stride 0)
    to (B, H, Sq, Sk) by the caller; booleans are read as bytes, never copied."""
    if attn_mask is None:
        return 0, like, (0, 0, 0, 0)
    if attn_mask.dtype == torch.bool:
        return 1, attn_mask.view(torch.uint8), attn_mask.stride()
    return 2, attn_mask, attn_mask.stride()


def _slope_args(alibi_slopes, like):
    if alibi_slopes is None:
        return like, 0
    return alibi_slopes, (alibi_slopes.stride(0) if alibi_slopes.dim() == 2 else 0)
