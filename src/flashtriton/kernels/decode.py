"""KV-cache decoding (flash-decoding): the in-place append, the split-KV attention kernel and the
log-sum-exp combine, with :func:`attn_decode`, the one launcher that owns their grids.

Layouts are flash-attn's: q (batch, seqlen_q, nheads, headdim); the cache is either contiguous
(batch_cache, seqlen_cache, nheads_k, headdim) or paged (num_blocks, page_size, nheads_k, headdim)
with a block table (batch, max_blocks_per_seq) mapping a sequence's page p to a physical block.

Decoding has few query rows and many keys, so the work is spread differently from the forward:
- GQA packing: the ``group = nheads // nheads_k`` query heads that share a kv head, times the
  seqlen_q queries, form the rows of one tile (row ``r`` is query ``r // group`` of head
  ``kvh * group + r % group``), so each K/V block is read once per kv head, not once per query head.
- Split-KV: the visible keys of one (sequence, kv head, row tile) are cut into ``num_splits``
  block-aligned chunks, one program each; every program writes its partial output (normalised
  over its own keys) and their log-sum-exp, and :func:`_attn_combine` merges them with weights
  ``exp(lse_s - lse)``. With one split the kernel writes the output directly.
Scores are in log2 units throughout (see ``common``); the returned lse is in natural log.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from flashtriton.kernels.common import (
    LOG2E,
    cdiv,
    dot_flags,
    inner_ranges,
    is_interpreting,
    launch,
    mma,
    num_sms,
    scores_log2,
    softmax_step,
)

# Allocator of the outputs and split buffers; tests swap in a NaN-filling one (poisoning).
_empty = torch.empty


@dataclass(frozen=True)
class DecodeConfig:
    """Tile sizes of the decode kernel.

    Not tuned on the GPU yet: chosen for no register spills (see :func:`decode_config`); 16 rows
    is the smallest ``tl.dot`` tile. ``scripts/gpu_decode_bench.py`` is the run that should
    replace these numbers.
    """

    block_m: int
    block_n: int
    num_warps: int
    num_stages: int


def decode_config(rows: int, head_dim_pad: int, dtype) -> DecodeConfig:
    """Tiles for ``rows`` packed query rows, chosen so that ptxas (sm_90a, Triton 3.6) reports
    no spills. 16-bit inputs: 64-key blocks up to head dim 128, 32 beyond; 8 warps once the
    tile has more than 16 rows (bf16 d128: 118 registers at 16 x 64 / 4 warps, 184 at
    64 x 64 / 8 warps; d256 64 x 32 spills at 4 warps, 207 registers at 8). fp32 (FMA dots)
    spills at 4 warps and takes 16 x 32 tiles at 8 warps (64-99 registers; ptxas still
    reports 16 spill bytes in some fp32 variants, not a path anyone decodes fast on)."""
    block_m = min(64, max(16, triton.next_power_of_2(rows)))
    if dtype == torch.float32:
        return DecodeConfig(16, 32, num_warps=8, num_stages=2)
    block_n = 32 if head_dim_pad > 128 else 64
    return DecodeConfig(block_m, block_n, num_warps=4 if block_m == 16 else 8, num_stages=2)


# Split-count heuristic, after flash-attn's ``num_splits_heuristic``: a decode program is one
# CTA of ``num_warps`` warps streaming K/V, and several fit on one SM, so the grid is measured in
# slots = SMs x PROGRAMS_PER_SM. Pick the smallest split count whose wave efficiency
# (waves / ceil(waves)) is within 85% of the best, with at least MIN_BLOCKS_PER_SPLIT key blocks
# per split; no split once the unsplit grid fills 80% of the slots. PROGRAMS_PER_SM is an
# estimate for 4-warp programs, to be checked with scripts/gpu_decode_bench.py's split sweep.
MAX_SPLITS = 128
MIN_BLOCKS_PER_SPLIT = 2
PROGRAMS_PER_SM = 4
INTERPRETER_SPLITS = 2  # no SMs to fill on CPU: a small fixed count still exercises the combine


def num_splits_heuristic(work: int, n_key_blocks: int, num_sms: int,
                         programs_per_sm: int = PROGRAMS_PER_SM) -> int:
    """Splits for ``work`` = batch * nheads_k * row tiles programs over ``n_key_blocks`` blocks."""
    slots = num_sms * programs_per_sm
    max_splits = min(MAX_SPLITS, max(1, n_key_blocks // MIN_BLOCKS_PER_SPLIT))
    if work >= 0.8 * slots or max_splits <= 1:
        return 1

    def efficiency(splits: int) -> float:
        waves = work * splits / slots
        return waves / math.ceil(waves)

    best = max(efficiency(s) for s in range(1, max_splits + 1))
    return next(s for s in range(1, max_splits + 1) if efficiency(s) >= 0.85 * best)


@triton.jit
def _kv_offsets(p_table_row, offs_n, mask_n, stride_kb, stride_kn, stride_vb, stride_vn,
                PAGED: tl.constexpr, PAGE_SIZE: tl.constexpr, MASK_N: tl.constexpr):
    """Element offsets of keys ``offs_n`` of one sequence in the K and V caches ([BLOCK_N] each,
    int64). Contiguous caches: the batch offset is already in the base pointer. Paged caches:
    key n lives in row ``n % PAGE_SIZE`` of physical block ``block_table[b, n // PAGE_SIZE]``."""
    if PAGED:
        if MASK_N:
            page = tl.load(p_table_row + offs_n // PAGE_SIZE, mask=mask_n, other=0)
        else:
            page = tl.load(p_table_row + offs_n // PAGE_SIZE)
        page = page.to(tl.int64)
        row = (offs_n % PAGE_SIZE).to(tl.int64)
        off_k = page * stride_kb + row * stride_kn
        off_v = page * stride_vb + row * stride_vn
    else:
        row = offs_n.to(tl.int64)
        off_k = row * stride_kn
        off_v = row * stride_vn
    return off_k, off_v


@triton.jit
def _kv_append(K_NEW, V_NEW, K, V, SEQLENS, TABLE, seqlen_cache, seqlen_new, capacity,
               stride_knb, stride_knn, stride_knh, stride_knd,
               stride_vnb, stride_vnn, stride_vnh, stride_vnd,
               stride_kb, stride_kn, stride_kh, stride_kd,
               stride_vb, stride_vn, stride_vh, stride_vd, stride_tb,
               HEAD_DIM: tl.constexpr, HEAD_DIM_V: tl.constexpr,
               HEAD_DIM_PAD: tl.constexpr, HEAD_DIM_V_PAD: tl.constexpr, BLOCK_N: tl.constexpr,
               VAR_SEQLENS: tl.constexpr, PAGED: tl.constexpr, PAGE_SIZE: tl.constexpr):
    """Copy new keys/values (batch, seqlen_new, nheads_k, d) into the cache at cache_seqlens[b].
    Grid: (key blocks of seqlen_new, batch, nheads_k). Rows past the capacity are never written."""
    pid_n = tl.program_id(0)
    b = tl.program_id(1).to(tl.int64)
    h = tl.program_id(2).to(tl.int64)
    if VAR_SEQLENS:
        start = tl.load(SEQLENS + b)
    else:
        start = seqlen_cache
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    pos = start + offs_n
    mask_n = (offs_n < seqlen_new) & (pos < capacity) & (pos >= 0)
    offs_d = tl.arange(0, HEAD_DIM_PAD)
    offs_dv = tl.arange(0, HEAD_DIM_V_PAD)
    mask_k = mask_n[:, None] & (offs_d[None, :] < HEAD_DIM)
    mask_v = mask_n[:, None] & (offs_dv[None, :] < HEAD_DIM_V)
    if PAGED:
        p_table_row = TABLE + b * stride_tb
    else:
        p_table_row = TABLE
        K += b * stride_kb
        V += b * stride_vb
    off_k, off_v = _kv_offsets(p_table_row, pos, mask_n, stride_kb, stride_kn,
                               stride_vb, stride_vn, PAGED, PAGE_SIZE, True)
    p_kn = (K_NEW + b * stride_knb + h * stride_knh
            + offs_n[:, None] * stride_knn + offs_d[None, :] * stride_knd)
    p_vn = (V_NEW + b * stride_vnb + h * stride_vnh
            + offs_n[:, None] * stride_vnn + offs_dv[None, :] * stride_vnd)
    k = tl.load(p_kn, mask=mask_k)  # [BLOCK_N, HEAD_DIM_PAD]
    v = tl.load(p_vn, mask=mask_v)  # [BLOCK_N, HEAD_DIM_V_PAD]
    tl.store(K + h * stride_kh + off_k[:, None] + offs_d[None, :] * stride_kd, k, mask=mask_k)
    tl.store(V + h * stride_vh + off_v[:, None] + offs_dv[None, :] * stride_vd, v, mask=mask_v)


@triton.jit
def _decode_inner(acc, m_i, l_i, q, K, V, p_table_row, start, end,
                  offs_i, offs_d, offs_dv, seqlen_q, seqlen_k, shift, left, right,
                  qk_scale, softcap, slope,
                  stride_kb, stride_kn, stride_kd, stride_vb, stride_vn, stride_vd,
                  HEAD_DIM: tl.constexpr, HEAD_DIM_V: tl.constexpr,
                  HEAD_DIM_PAD: tl.constexpr, HEAD_DIM_V_PAD: tl.constexpr,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, MASKED: tl.constexpr,
                  PAGED: tl.constexpr, PAGE_SIZE: tl.constexpr,
                  HAS_LEFT: tl.constexpr, HAS_RIGHT: tl.constexpr, HAS_SOFTCAP: tl.constexpr,
                  HAS_ALIBI: tl.constexpr, GUARD: tl.constexpr,
                  UPCAST_BF16: tl.constexpr, PRECISION: tl.constexpr):
    """Online softmax over key blocks ``[start, end)``. ``MASKED`` blocks may hold keys past
    seqlen_k or outside some row's causal/window range; the others are visible to every row."""
    for start_n in range(start, end, BLOCK_N):
        offs_n = start_n + tl.arange(0, BLOCK_N)
        mask_n = offs_n < seqlen_k
        off_k, off_v = _kv_offsets(p_table_row, offs_n, mask_n, stride_kb, stride_kn,
                                   stride_vb, stride_vn, PAGED, PAGE_SIZE, MASKED)
        p_kt = K + off_k[None, :] + offs_d[:, None] * stride_kd
        p_v = V + off_v[:, None] + offs_dv[None, :] * stride_vd
        if MASKED:
            kt = tl.load(p_kt, mask=mask_n[None, :] & (offs_d[:, None] < HEAD_DIM), other=0.0)
            v = tl.load(p_v, mask=mask_n[:, None] & (offs_dv[None, :] < HEAD_DIM_V), other=0.0)
        else:
            if HEAD_DIM == HEAD_DIM_PAD:
                kt = tl.load(p_kt)
            else:
                kt = tl.load(p_kt, mask=offs_d[:, None] < HEAD_DIM, other=0.0)
            if HEAD_DIM_V == HEAD_DIM_V_PAD:
                v = tl.load(p_v)
            else:
                v = tl.load(p_v, mask=offs_dv[None, :] < HEAD_DIM_V, other=0.0)
        # kt: [HEAD_DIM_PAD, BLOCK_N], v: [BLOCK_N, HEAD_DIM_V_PAD]
        qk = mma(q, kt, tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32), UPCAST_BF16, PRECISION)
        s = scores_log2(qk, offs_i[:, None], offs_n[None, :], seqlen_q, seqlen_k, shift,
                        left, right, qk_scale, softcap, slope, None,
                        MASKED, HAS_LEFT, HAS_RIGHT, HAS_SOFTCAP, HAS_ALIBI, 0)
        p, alpha, m_i, l_i = softmax_step(s, m_i, l_i, GUARD)  # p: [BLOCK_M, BLOCK_N]
        acc = acc * alpha[:, None]
        acc = mma(p.to(v.dtype), v, acc, UPCAST_BF16, PRECISION)  # [BLOCK_M, HEAD_DIM_V_PAD]
    return acc, m_i, l_i


@triton.jit
def _attn_decode(Q, K, V, SEQLENS, TABLE, SLOPES, O, LSE, O_PART, LSE_PART,
                 stride_qb, stride_qm, stride_qh, stride_qd,
                 stride_kb, stride_kn, stride_kh, stride_kd,
                 stride_vb, stride_vn, stride_vh, stride_vd,
                 stride_ob, stride_om, stride_oh, stride_od,
                 stride_os, stride_lb, stride_lh, stride_ls, stride_tb, stride_sb,
                 nheads_k, group, seqlen_q, seqlen_cache, seqlen_new, capacity,
                 left, right, qk_scale, softcap,
                 HEAD_DIM: tl.constexpr, HEAD_DIM_V: tl.constexpr,
                 HEAD_DIM_PAD: tl.constexpr, HEAD_DIM_V_PAD: tl.constexpr,
                 BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                 VAR_SEQLENS: tl.constexpr, PAGED: tl.constexpr, PAGE_SIZE: tl.constexpr,
                 HAS_LEFT: tl.constexpr, HAS_RIGHT: tl.constexpr, HAS_SOFTCAP: tl.constexpr,
                 HAS_ALIBI: tl.constexpr, GUARD: tl.constexpr, SPLIT: tl.constexpr,
                 UPCAST_BF16: tl.constexpr, PRECISION: tl.constexpr):
    """One (sequence, kv head, row tile, split). Grid: (batch * nheads_k, row tiles, num_splits).

    With ``SPLIT`` the program writes fp32 ``acc / l`` to ``O_PART[split]`` and the log2 lse to
    ``LSE_PART[split]`` (0 and -inf when it saw no key); otherwise the final output and lse.
    """
    pid_bh = tl.program_id(0)
    pid_m = tl.program_id(1)
    split = tl.program_id(2)
    num_splits = tl.num_programs(2)
    b = (pid_bh // nheads_k).to(tl.int64)
    kvh = (pid_bh % nheads_k).to(tl.int64)

    if VAR_SEQLENS:
        seqlen_k = tl.load(SEQLENS + b) + seqlen_new
    else:
        seqlen_k = seqlen_cache + seqlen_new
    seqlen_k = tl.minimum(seqlen_k, capacity)
    shift = seqlen_k - seqlen_q  # bottom-right alignment: query i sits at key i + shift

    # Packed rows: query i = r // group of head kvh * group + r % group.
    rows = seqlen_q * group
    row0 = pid_m * BLOCK_M
    offs_r = row0 + tl.arange(0, BLOCK_M)
    mask_r = offs_r < rows
    offs_i = tl.minimum(offs_r // group, seqlen_q - 1)  # padding rows copy the last query
    offs_h = kvh * group + offs_r % group
    offs_d = tl.arange(0, HEAD_DIM_PAD)
    offs_dv = tl.arange(0, HEAD_DIM_V_PAD)

    p_q = (Q + b * stride_qb + offs_i[:, None] * stride_qm + offs_h[:, None] * stride_qh
           + offs_d[None, :] * stride_qd)
    q = tl.load(p_q, mask=mask_r[:, None] & (offs_d[None, :] < HEAD_DIM), other=0.0)
    # q: [BLOCK_M, HEAD_DIM_PAD]
    if HAS_ALIBI:
        slope = tl.load(SLOPES + b * stride_sb + offs_h, mask=mask_r, other=0.0).to(tl.float32)
        slope = (slope * 1.4426950408889634)[:, None]  # [BLOCK_M, 1], log2 units
    else:
        slope = 0.0

    # Visible key blocks of this tile, then this split's share of them.
    i_first = row0 // group
    i_last = (tl.minimum(row0 + BLOCK_M, rows) - 1) // group
    lo, a, c, hi = inner_ranges(i_first, i_last + 1, seqlen_k, shift, left, right,
                                BLOCK_M, BLOCK_N, HAS_LEFT, HAS_RIGHT)
    n_blocks = tl.cdiv(tl.maximum(hi - lo, 0), BLOCK_N)
    per_split = tl.cdiv(n_blocks, num_splits) * BLOCK_N
    s_lo = lo + split * per_split
    s_hi = tl.minimum(s_lo + per_split, hi)

    if PAGED:
        p_table_row = TABLE + b * stride_tb
        K += kvh * stride_kh
        V += kvh * stride_vh
    else:
        p_table_row = TABLE
        K += b * stride_kb + kvh * stride_kh
        V += b * stride_vb + kvh * stride_vh
    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM_V_PAD], dtype=tl.float32)
    # Masked head [lo, a), full middle [a, c), masked tail [c, hi), each cut to [s_lo, s_hi).
    acc, m_i, l_i = _decode_inner(
        acc, m_i, l_i, q, K, V, p_table_row, tl.maximum(lo, s_lo), tl.minimum(a, s_hi),
        offs_i, offs_d, offs_dv, seqlen_q, seqlen_k, shift, left, right, qk_scale, softcap, slope,
        stride_kb, stride_kn, stride_kd, stride_vb, stride_vn, stride_vd,
        HEAD_DIM, HEAD_DIM_V, HEAD_DIM_PAD, HEAD_DIM_V_PAD, BLOCK_M, BLOCK_N, True,
        PAGED, PAGE_SIZE, HAS_LEFT, HAS_RIGHT, HAS_SOFTCAP, HAS_ALIBI, GUARD,
        UPCAST_BF16, PRECISION)
    acc, m_i, l_i = _decode_inner(
        acc, m_i, l_i, q, K, V, p_table_row, tl.maximum(a, s_lo), tl.minimum(c, s_hi),
        offs_i, offs_d, offs_dv, seqlen_q, seqlen_k, shift, left, right, qk_scale, softcap, slope,
        stride_kb, stride_kn, stride_kd, stride_vb, stride_vn, stride_vd,
        HEAD_DIM, HEAD_DIM_V, HEAD_DIM_PAD, HEAD_DIM_V_PAD, BLOCK_M, BLOCK_N, False,
        PAGED, PAGE_SIZE, HAS_LEFT, HAS_RIGHT, HAS_SOFTCAP, HAS_ALIBI, GUARD,
        UPCAST_BF16, PRECISION)
    acc, m_i, l_i = _decode_inner(
        acc, m_i, l_i, q, K, V, p_table_row, tl.maximum(c, s_lo), tl.minimum(hi, s_hi),
        offs_i, offs_d, offs_dv, seqlen_q, seqlen_k, shift, left, right, qk_scale, softcap, slope,
        stride_kb, stride_kn, stride_kd, stride_vb, stride_vn, stride_vd,
        HEAD_DIM, HEAD_DIM_V, HEAD_DIM_PAD, HEAD_DIM_V_PAD, BLOCK_M, BLOCK_N, True,
        PAGED, PAGE_SIZE, HAS_LEFT, HAS_RIGHT, HAS_SOFTCAP, HAS_ALIBI, GUARD,
        UPCAST_BF16, PRECISION)

    seen = l_i > 0.0  # a row that saw no key: output 0, lse -inf
    out = acc / tl.where(seen, l_i, 1.0)[:, None]  # [BLOCK_M, HEAD_DIM_V_PAD]
    lse2 = tl.where(seen, m_i + tl.log2(tl.where(seen, l_i, 1.0)), float("-inf"))
    p_o = (b * stride_ob + offs_i[:, None] * stride_om + offs_h[:, None] * stride_oh
           + offs_dv[None, :] * stride_od)
    p_lse = b * stride_lb + offs_h * stride_lh + offs_i
    mask_o = mask_r[:, None] & (offs_dv[None, :] < HEAD_DIM_V)
    if SPLIT:
        tl.store(O_PART + split.to(tl.int64) * stride_os + p_o, out, mask=mask_o)
        tl.store(LSE_PART + split.to(tl.int64) * stride_ls + p_lse, lse2, mask=mask_r)
    else:
        tl.store(O + p_o, out.to(O.dtype.element_ty), mask=mask_o)
        tl.store(LSE + p_lse, lse2 * 0.6931471805599453, mask=mask_r)


@triton.jit
def _attn_combine(O_PART, LSE_PART, O, LSE, num_splits,
                  stride_os, stride_ob, stride_om, stride_oh, stride_od,
                  stride_ls, stride_lb, stride_lh,
                  HEAD_DIM_V: tl.constexpr, HEAD_DIM_V_PAD: tl.constexpr,
                  SPLITS_PAD: tl.constexpr):
    """Merge the splits of one (query, head, sequence): out = sum_s w_s * o_s / sum_s w_s with
    w_s = exp2(lse_s - max lse). Grid: (seqlen_q, nheads, batch). Partials share O's strides."""
    i = tl.program_id(0).to(tl.int64)
    h = tl.program_id(1).to(tl.int64)
    b = tl.program_id(2).to(tl.int64)
    offs_s = tl.arange(0, SPLITS_PAD)
    offs_dv = tl.arange(0, HEAD_DIM_V_PAD)
    mask_dv = offs_dv < HEAD_DIM_V
    p_lse = b * stride_lb + h * stride_lh + i
    lse_s = tl.load(LSE_PART + offs_s * stride_ls + p_lse, mask=offs_s < num_splits,
                    other=float("-inf"))  # [SPLITS_PAD]
    m = tl.max(lse_s, 0)
    m_use = tl.where(m == float("-inf"), 0.0, m)
    total = tl.sum(tl.exp2(lse_s - m_use), 0)
    p_o = b * stride_ob + i * stride_om + h * stride_oh + offs_dv * stride_od
    acc = tl.zeros([HEAD_DIM_V_PAD], dtype=tl.float32)
    for s in range(0, num_splits):
        w = tl.exp2(tl.load(LSE_PART + s * stride_ls + p_lse) - m_use)
        o = tl.load(O_PART + s * stride_os + p_o, mask=mask_dv, other=0.0)  # [HEAD_DIM_V_PAD]
        acc += w * o
    seen = total > 0.0
    out = acc / tl.where(seen, total, 1.0)
    lse = tl.where(seen, m_use + tl.log2(tl.where(seen, total, 1.0)), float("-inf"))
    tl.store(O + p_o, out.to(O.dtype.element_ty), mask=mask_dv)
    tl.store(LSE + p_lse, lse * 0.6931471805599453)


def _pad_dim(d: int) -> int:
    return max(16, triton.next_power_of_2(d))


def attn_decode(q, k_cache, v_cache, k_new, v_new, cache_seqlens, block_table, alibi_slopes, *,
                softmax_scale: float, window_size: tuple[int, int], softcap: float,
                num_splits: int, config: DecodeConfig | None = None):
    """Append ``k_new``/``v_new`` (or None) into the cache in place, then attend.

    Inputs are validated by the caller. ``cache_seqlens``: int or int32 tensor (batch,), the
    cache length before the append. ``window_size``: (left, right) with causal already folded
    into ``right`` (-1 = unbounded). ``num_splits``: 0 picks from the occupancy.
    Returns ``(out, lse)``: out like q with headdim_v, lse float32 (batch, nheads, seqlen_q).
    """
    batch, seqlen_q, nheads, head_dim = q.shape
    nheads_k, head_dim_v = k_cache.shape[2], v_cache.shape[3]
    group = nheads // nheads_k
    paged = block_table is not None
    page_size = k_cache.shape[1]
    capacity = block_table.shape[1] * page_size if paged else k_cache.shape[1]
    seqlen_new = 0 if k_new is None else k_new.shape[1]
    var_seqlens = isinstance(cache_seqlens, torch.Tensor)
    seqlen_cache = 0 if var_seqlens else int(cache_seqlens)
    d_pad, dv_pad = _pad_dim(head_dim), _pad_dim(head_dim_v)
    out = _empty(batch, seqlen_q, nheads, head_dim_v, dtype=q.dtype, device=q.device)
    lse = _empty(batch, nheads, seqlen_q, dtype=torch.float32, device=q.device)
    seqlens_arg = cache_seqlens if var_seqlens else None
    stride_tb = block_table.stride(0) if paged else 0

    if seqlen_new > 0 and batch > 0 and nheads_k > 0:
        block_append = 16  # new tokens are few; small tiles keep registers low
        grid = (cdiv(seqlen_new, block_append), batch, nheads_k)
        launch(_kv_append, grid,
            k_new, v_new, k_cache, v_cache, seqlens_arg, block_table,
            seqlen_cache, seqlen_new, capacity,
            *k_new.stride(), *v_new.stride(), *k_cache.stride(), *v_cache.stride(), stride_tb,
            HEAD_DIM=head_dim, HEAD_DIM_V=head_dim_v, HEAD_DIM_PAD=d_pad, HEAD_DIM_V_PAD=dv_pad,
            BLOCK_N=block_append, VAR_SEQLENS=var_seqlens, PAGED=paged, PAGE_SIZE=page_size)
    if out.numel() == 0:
        return out, lse

    rows = seqlen_q * group
    cfg = config or decode_config(rows, max(d_pad, dv_pad), q.dtype)
    m_tiles = cdiv(rows, cfg.block_m)
    n_key_blocks = cdiv(capacity, cfg.block_n)
    if num_splits <= 0:
        if is_interpreting() or q.device.type != "cuda":
            num_splits = INTERPRETER_SPLITS
        else:
            num_splits = num_splits_heuristic(batch * nheads_k * m_tiles, n_key_blocks,
                                              num_sms(q.device))
    num_splits = max(1, min(num_splits, n_key_blocks, MAX_SPLITS))
    split = num_splits > 1
    if split:
        # Each split's slice has out's (lse's) shape and contiguous strides, hence the same.
        o_part = _empty((num_splits,) + tuple(out.shape), dtype=torch.float32, device=q.device)
        lse_part = _empty((num_splits,) + tuple(lse.shape), dtype=torch.float32, device=q.device)
    else:
        o_part, lse_part = out, lse  # unused: the kernel writes the output directly

    left, right = window_size
    if softcap > 0.0:
        qk_scale, softcap_arg = softmax_scale / softcap, softcap * LOG2E
    else:
        qk_scale, softcap_arg = softmax_scale * LOG2E, 0.0
    stride_sb = 0
    if alibi_slopes is not None and alibi_slopes.dim() == 2:
        stride_sb = alibi_slopes.stride(0)
    flags = dot_flags(q.dtype, torch.backends.cuda.matmul.allow_tf32)
    grid = (batch * nheads_k, m_tiles, num_splits)
    launch(_attn_decode, grid,
        q, k_cache, v_cache, seqlens_arg, block_table, alibi_slopes, out, lse, o_part, lse_part,
        *q.stride(), *k_cache.stride(), *v_cache.stride(), *out.stride(),
        o_part.stride(0) if split else 0, lse.stride(0), lse.stride(1),
        lse_part.stride(0) if split else 0, stride_tb, stride_sb,
        nheads_k, group, seqlen_q, seqlen_cache, seqlen_new, capacity,
        max(left, 0), max(right, 0), qk_scale, softcap_arg,
        HEAD_DIM=head_dim, HEAD_DIM_V=head_dim_v, HEAD_DIM_PAD=d_pad, HEAD_DIM_V_PAD=dv_pad,
        BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n,
        VAR_SEQLENS=var_seqlens, PAGED=paged, PAGE_SIZE=page_size,
        HAS_LEFT=left >= 0, HAS_RIGHT=right >= 0, HAS_SOFTCAP=softcap > 0.0,
        HAS_ALIBI=alibi_slopes is not None, GUARD=left >= 0 or right >= 0, SPLIT=split,
        num_warps=cfg.num_warps, num_stages=cfg.num_stages, **flags)
    if split:
        launch(_attn_combine, (seqlen_q, nheads, batch),
            o_part, lse_part, out, lse, num_splits,
            o_part.stride(0), *out.stride(), lse_part.stride(0), lse.stride(0), lse.stride(1),
            HEAD_DIM_V=head_dim_v, HEAD_DIM_V_PAD=dv_pad,
            SPLITS_PAD=triton.next_power_of_2(num_splits), num_warps=1)
    return out, lse
