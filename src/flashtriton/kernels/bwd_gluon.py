"""The backward's dK/dV kernel on Hopper in Gluon, with dQ added into a float32 buffer by TMA
reductions: the plain path (no mask, softcap, ALiBi, dropout or left window), 16-bit inputs,
head dim 64 or 128, causal or not, dense, for sm_90. Warp-specialized like the forward
(kernels/fwd_gluon.py):

- a producer partition streams the query blocks' Q and dO tiles through ``STAGES``-deep rings
  by TMA, their lse and δ beside them (for grouped-query attention it walks every query head
  of the key head's group);
- two consumer warpgroups own BLOCK_N keys each of the program's 2·BLOCK_N keys, keep their K
  and V tiles in shared memory and their dK, dV accumulators in registers. Scores are computed
  transposed (keys are a warpgroup's MMA rows), so Pᵀ and dSᵀ stay in registers as the A
  operands of the dV and dK products. Per query block:

      Sᵀ = K Qᵀ, dPᵀ = V dOᵀ          (issued together)
      Pᵀ = exp2(Sᵀ·scale − lse)        dV += Pᵀ dO   (issued as soon as Pᵀ is ready)
      dSᵀ = Pᵀ ∘ (dPᵀ − δ)            dK += dSᵀ Q;  dSᵀ → shared memory
      dQ_part = dS K  → shared memory → TMA reduce-add into the float32 dQ

  Each warpgroup adds its own [BLOCK_M, HEAD_DIM] part of dQ; or, with SPLIT_DQ, the two share
  their dS tiles (an mbarrier per buffer, which keeps them in step) and each computes half of
  dQ's columns over all 2·BLOCK_N keys, so a query block's dQ is added once per program (at
  head dim 64, K is kept with a 64-byte swizzle so that its 32-column halves start on a
  swizzle row). No warpgroup MMA stays in flight across the loop's back edge
  (ptxas serializes every MMA of the kernel otherwise; see fwd_gluon.py).

The launcher (``attn_bwd_gluon``) returns dq (float32, to be cast by the caller), dk, dv; the
``tl`` kernels (kernels/bwd.py) remain the portable path and the deterministic one.
"""

from __future__ import annotations

import torch
import triton
from triton._C.libtriton import ir
from triton.experimental import gluon
from triton.experimental.gluon.language import _core as gl_core
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (fence_async_shared, mbarrier, tma,
                                                              warpgroup_mma, warpgroup_mma_wait)

_empty = torch.empty
try:  # the TMA reduction's builder call (Triton 3.6 has it; see _tma_add)
    from triton._C.libtriton import gluon_ir as _gluon_ir

    HAS_TMA_REDUCE = hasattr(_gluon_ir.GluonOpBuilder, "create_async_tma_reduce")
except ImportError:
    HAS_TMA_REDUCE = False


@gl_core.builtin
def _tma_add(tensor_desc, coord, src, _semantic=None):
    """Add the shared-memory tile ``src`` into the global tile of ``tensor_desc`` at ``coord``
    (cp.reduce.async.bulk.tensor .add: one instruction for the tile, atomic per element in L2,
    completed like a TMA store, see ``tma.store_wait``). Triton 3.6 builds the operation but
    Gluon's hopper ``tma`` module does not name it."""
    coord = _semantic._convert_to_ir_values(coord, require_i64=False)
    _semantic.builder.create_async_tma_reduce(ir.DESCRIPTOR_REDUCE_KIND.ADD, tensor_desc.handle,
                                              coord, src.handle)


@gluon.jit
def _bwd_producer(args):
    """The default partition: Q and dO tiles of every (query head of the group, query block)
    step into the rings by TMA, and the block's lse (as log2, +inf for empty rows) and δ into
    shared memory beside them (the consumers read them there when they need them: held in
    registers from the step's start they would spill)."""
    (Q, K, V, DO, LSE, DELTA, DQ, DK, DV, q_smem, do_smem, k_smem, v_smem, ds_smem, dq_smem,
     lse_smem, delta_smem, kv_bar, ready, empty, ds_ready, q_base, k_base, v_base, do_base, dq_base, dk_base, dv_base,
     l_base, stride_qm, stride_kn, stride_vn, stride_dom, stride_dqm, stride_dkn, stride_dvn,
     stride_lh, nheads, seqlen_q, seqlen_k, n0, h_k, group, m_start, n_m, shift, qk_scale,
     scale_ds) = args
    STAGES: gl.constexpr = q_smem.type.shape[0]
    BLOCK_M: gl.constexpr = q_smem.type.shape[1]
    HEAD_DIM: gl.constexpr = q_smem.type.shape[2]
    dtype: gl.constexpr = Q.dtype.element_ty
    layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BLOCK_M, HEAD_DIM], dtype)
    # (seqlen_q, nheads · head_dim) views: a head is a column offset (heads contiguous in a row)
    q_desc = tma.make_tensor_descriptor(Q + q_base, shape=[seqlen_q, nheads * HEAD_DIM],
                                        strides=[stride_qm, 1], block_shape=[BLOCK_M, HEAD_DIM],
                                        layout=layout)
    do_desc = tma.make_tensor_descriptor(DO + do_base, shape=[seqlen_q, nheads * HEAD_DIM],
                                         strides=[stride_dom, 1], block_shape=[BLOCK_M, HEAD_DIM],
                                         layout=layout)
    row_layout: gl.constexpr = gl.BlockedLayout([1], [32], [gl.num_warps()], [0])
    rows = gl.arange(0, BLOCK_M, layout=row_layout)
    for it in range(group * n_m):
        slot = it % STAGES
        phase = (it // STAGES) & 1
        head = h_k * group + it // n_m
        m0 = (m_start + it % n_m) * BLOCK_M
        mbarrier.wait(empty.index(slot), phase ^ 1)
        mbarrier.expect(ready.index(slot), 2 * BLOCK_M * HEAD_DIM * 2)
        tma.async_copy_global_to_shared(q_desc, [m0, head * HEAD_DIM], ready.index(slot),
                                        q_smem.index(slot))
        tma.async_copy_global_to_shared(do_desc, [m0, head * HEAD_DIM], ready.index(slot),
                                        do_smem.index(slot))
        offs_m = m0 + rows
        lse = gl.load(LSE + l_base + head * stride_lh + offs_m, mask=offs_m < seqlen_q,
                      other=float("-inf"))
        delta = gl.load(DELTA + l_base + head * stride_lh + offs_m, mask=offs_m < seqlen_q,
                        other=0.0)
        lse_smem.index(slot).store(gl.where(lse == float("-inf"), float("inf"),
                                            lse * 1.4426950408889634))
        delta_smem.index(slot).store(delta)
        gl.thread_barrier()  # every thread's share is stored before the arrival publishes it
        mbarrier.arrive(ready.index(slot))  # the second of the slot's two arrivals


@gluon.jit
def _bwd_consumer(args, WG: gl.constexpr):
    (Q, K, V, DO, LSE, DELTA, DQ, DK, DV, q_smem, do_smem, k_smem, v_smem, ds_smem, dq_smem,
     lse_smem, delta_smem, kv_bar, ready, empty, ds_ready, q_base, k_base, v_base, do_base, dq_base, dk_base, dv_base,
     l_base, stride_qm, stride_kn, stride_vn, stride_dom, stride_dqm, stride_dkn, stride_dvn,
     stride_lh, nheads, seqlen_q, seqlen_k, n0, h_k, group, m_start, n_m, shift, qk_scale,
     scale_ds) = args
    STAGES: gl.constexpr = q_smem.type.shape[0]
    BLOCK_M: gl.constexpr = q_smem.type.shape[1]
    HEAD_DIM: gl.constexpr = q_smem.type.shape[2]
    BLOCK_N: gl.constexpr = k_smem.type.shape[1]
    DQ_COLS: gl.constexpr = dq_smem.type.shape[2]
    SPLIT_DQ: gl.constexpr = DQ_COLS < HEAD_DIM  # each warpgroup: DQ_COLS columns, all keys
    dtype: gl.constexpr = Q.dtype.element_ty
    WARPS: gl.constexpr = gl.num_warps()
    # Sᵀ, dPᵀ: [BLOCK_N keys, BLOCK_M queries] (lse and δ one per column); dK, dV:
    # [BLOCK_N, HEAD_DIM]; dQ: [BLOCK_M, DQ_COLS]
    st_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[WARPS, 1],
                                                        instr_shape=[16, BLOCK_M, 16])
    acc_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[WARPS, 1],
                                                         instr_shape=[16, HEAD_DIM, 16])
    dq_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[WARPS, 1],
                                                        instr_shape=[16, DQ_COLS, 16])
    op_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=acc_layout, k_width=2)
    keys0 = n0 + WG * BLOCK_N
    k_s = k_smem.index(WG)
    v_s = v_smem.index(WG)
    dq_s = dq_smem.index(WG)
    kb = kv_bar.index(WG)
    k_desc = tma.make_tensor_descriptor(K + k_base, shape=[seqlen_k, HEAD_DIM],
                                        strides=[stride_kn, 1], block_shape=[BLOCK_N, HEAD_DIM],
                                        layout=k_smem.type.layout)
    v_desc = tma.make_tensor_descriptor(V + v_base, shape=[seqlen_k, HEAD_DIM],
                                        strides=[stride_vn, 1], block_shape=[BLOCK_N, HEAD_DIM],
                                        layout=v_smem.type.layout)
    dq_desc = tma.make_tensor_descriptor(DQ + dq_base, shape=[seqlen_q, nheads * HEAD_DIM],
                                         strides=[stride_dqm, 1],
                                         block_shape=[BLOCK_M, DQ_COLS],
                                         layout=dq_smem.type.layout)
    mbarrier.expect(kb, 2 * BLOCK_N * HEAD_DIM * 2)
    tma.async_copy_global_to_shared(k_desc, [keys0, 0], kb, k_s)
    tma.async_copy_global_to_shared(v_desc, [keys0, 0], kb, v_s)

    offs_n = keys0 + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(1, st_layout))
    cols_m = gl.arange(0, BLOCK_M, layout=gl.SliceLayout(0, st_layout))
    zero_st = gl.zeros([BLOCK_N, BLOCK_M], gl.float32, layout=st_layout)
    zero_dq = gl.zeros([BLOCK_M, DQ_COLS], gl.float32, layout=dq_layout)
    dk = gl.zeros([BLOCK_N, HEAD_DIM], gl.float32, layout=acc_layout)
    dv = gl.zeros([BLOCK_N, HEAD_DIM], gl.float32, layout=acc_layout)
    mbarrier.wait(kb, 0)
    for it in range(group * n_m):
        slot = it % STAGES
        head = h_k * group + it // n_m
        m0 = (m_start + it % n_m) * BLOCK_M
        offs_m = m0 + cols_m
        q_s = q_smem.index(slot)
        do_s = do_smem.index(slot)
        mbarrier.wait(ready.index(slot), (it // STAGES) & 1)
        st = warpgroup_mma(k_s, q_s.permute((1, 0)), zero_st, use_acc=False, is_async=True)
        dpt = warpgroup_mma(v_s, do_s.permute((1, 0)), zero_st, use_acc=False, is_async=True)
        st = warpgroup_mma_wait(num_outstanding=1, deps=(st,))
        # rows and keys past the sequences need no mask: their lse is +inf (P = 0), their K,
        # V and dO rows are zero (no dQ, dK rows not stored)
        lse2 = lse_smem.index(slot).load(gl.SliceLayout(0, st_layout))
        pt = gl.exp2(st * qk_scale - gl.expand_dims(lse2, 0))
        if keys0 + BLOCK_N - 1 > m0 + shift:  # the causal diagonal cuts this block
            keep = gl.expand_dims(offs_n, 1) <= gl.expand_dims(offs_m, 0) + shift
            pt = gl.where(keep, pt, 0.0)
        dv = warpgroup_mma(gl.convert_layout(pt.to(dtype), op_layout), do_s, dv, is_async=True)
        dpt = warpgroup_mma_wait(num_outstanding=1, deps=(dpt,))
        delta = delta_smem.index(slot).load(gl.SliceLayout(0, st_layout))
        dst = (pt * (dpt - gl.expand_dims(delta, 0))).to(dtype)
        # dSᵀ tiles: two buffers of both warpgroups' [BLOCK_N, BLOCK_M], by step parity
        buf = (it % 2) * 2
        ds_smem.index(buf + WG).store(dst)
        fence_async_shared()
        gl.thread_barrier()  # every thread's share of dSᵀ is in place before an MMA reads it
        if SPLIT_DQ:
            mbarrier.arrive(ds_ready.index(it % 2))
        dk = warpgroup_mma(gl.convert_layout(dst, op_layout), q_s, dk, is_async=True)
        if SPLIT_DQ:  # dQ[:, WG's columns] = Σ over both warpgroups' keys of dS K
            mbarrier.wait(ds_ready.index(it % 2), (it // 2) & 1)
            dq = warpgroup_mma(ds_smem.index(buf).permute((1, 0)),
                               k_smem.index(0).slice(WG * DQ_COLS, DQ_COLS, dim=1), zero_dq,
                               use_acc=False, is_async=True)
            dq = warpgroup_mma(ds_smem.index(buf + 1).permute((1, 0)),
                               k_smem.index(1).slice(WG * DQ_COLS, DQ_COLS, dim=1), dq,
                               is_async=True)
        else:
            dq = warpgroup_mma(ds_smem.index(buf + WG).permute((1, 0)), k_s, zero_dq,
                               use_acc=False, is_async=True)
        dv, dk, dq = warpgroup_mma_wait(num_outstanding=0, deps=(dv, dk, dq))
        mbarrier.arrive(empty.index(slot))  # Q and dO of this step are no longer read
        tma.store_wait(pendings=0)  # the previous step's reduction has read dq_s
        dq_s.store(dq * scale_ds)
        fence_async_shared()
        gl.thread_barrier()  # every thread's share is stored before the reduction reads it
        if SPLIT_DQ:
            _tma_add(dq_desc, [m0, head * HEAD_DIM + WG * DQ_COLS], dq_s)
        else:
            _tma_add(dq_desc, [m0, head * HEAD_DIM], dq_s)
    tma.store_wait(pendings=0)

    rows_k = keys0 + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(1, acc_layout))
    cols_d = gl.arange(0, HEAD_DIM, layout=gl.SliceLayout(0, acc_layout))
    keep = gl.expand_dims(rows_k < seqlen_k, 1)
    rows_k64 = gl.expand_dims(rows_k.to(gl.int64), 1)
    gl.store(DK + dk_base + rows_k64 * stride_dkn + gl.expand_dims(cols_d, 0),
             (dk * scale_ds).to(dtype), mask=keep)
    gl.store(DV + dv_base + rows_k64 * stride_dvn + gl.expand_dims(cols_d, 0), dv.to(dtype),
             mask=keep)


@gluon.jit
def _bwd_consumer0(args):
    _bwd_consumer(args, 0)


@gluon.jit
def _bwd_consumer1(args):
    _bwd_consumer(args, 1)


@gluon.jit
def _attn_bwd_ws(Q, K, V, DO, LSE, DELTA, DQ, DK, DV,
                 stride_qb, stride_qm, stride_kb, stride_kn, stride_kh, stride_vb, stride_vn,
                 stride_vh, stride_dob, stride_dom, stride_dqb, stride_dqm,
                 stride_dkb, stride_dkn, stride_dkh, stride_dvb, stride_dvn, stride_dvh,
                 stride_lb, stride_lh, nheads, group, seqlen_q, seqlen_k, shift, qk_scale,
                 scale_ds, HEAD_DIM: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr,
                 STAGES: gl.constexpr, CAUSAL: gl.constexpr, SPLIT_DQ: gl.constexpr,
                 CONSUMER_WARPS: gl.constexpr):
    """One program per 2·BLOCK_N keys of a key head (see the module docstring)."""
    dtype: gl.constexpr = Q.dtype.element_ty
    n0 = gl.program_id(0) * 2 * BLOCK_N
    pid_bh = gl.program_id(1)
    nheads_k = nheads // group
    b = pid_bh // nheads_k
    h_k = pid_bh % nheads_k
    b64 = b.to(gl.int64)
    hk64 = h_k.to(gl.int64)
    if not CAUSAL:
        shift = seqlen_k  # every key is left of every row's diagonal
    # query blocks that see a key of this program: from the one holding row n0 - shift
    m_start = gl.maximum(n0 - shift, 0) // BLOCK_M
    n_m = gl.maximum(gl.cdiv(seqlen_q, BLOCK_M) - m_start, 0)

    DQ_COLS: gl.constexpr = HEAD_DIM // 2 if SPLIT_DQ else HEAD_DIM
    q_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BLOCK_M, HEAD_DIM], dtype)
    kv_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BLOCK_N, HEAD_DIM], dtype)
    # split dQ reads K in DQ_COLS-column slices, which must start on a swizzle row: at head dim
    # 64 (32-column halves) K is stored with a 64-byte swizzle
    k_layout: gl.constexpr = (gl.NVMMASharedLayout(swizzle_byte_width=DQ_COLS * 2,
                                                   element_bitwidth=16, rank=2)
                              if SPLIT_DQ and DQ_COLS * 2 < 128 else kv_layout)
    ds_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BLOCK_N, BLOCK_M], dtype)
    dq_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BLOCK_M, DQ_COLS],
                                                                   gl.float32)
    q_smem = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_M, HEAD_DIM], q_layout)
    do_smem = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_M, HEAD_DIM], q_layout)
    k_smem = gl.allocate_shared_memory(dtype, [2, BLOCK_N, HEAD_DIM], k_layout)
    v_smem = gl.allocate_shared_memory(dtype, [2, BLOCK_N, HEAD_DIM], kv_layout)
    ds_smem = gl.allocate_shared_memory(dtype, [4, BLOCK_N, BLOCK_M], ds_layout)
    dq_smem = gl.allocate_shared_memory(gl.float32, [2, BLOCK_M, DQ_COLS], dq_layout)
    row_layout: gl.constexpr = gl.SwizzledSharedLayout(1, 1, 1, order=[0])
    lse_smem = gl.allocate_shared_memory(gl.float32, [STAGES, BLOCK_M], row_layout)
    delta_smem = gl.allocate_shared_memory(gl.float32, [STAGES, BLOCK_M], row_layout)
    kv_bar = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    ds_ready = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(2):
        mbarrier.init(kv_bar.index(i), count=1)
        mbarrier.init(ds_ready.index(i), count=2)  # one arrival per consumer
    for i in gl.static_range(STAGES):
        mbarrier.init(ready.index(i), count=2)  # the TMA bytes' and the lse / δ stores
        mbarrier.init(empty.index(i), count=2)  # one arrival per consumer

    args = (Q, K, V, DO, LSE, DELTA, DQ, DK, DV, q_smem, do_smem, k_smem, v_smem, ds_smem,
            dq_smem, lse_smem, delta_smem, kv_bar, ready, empty, ds_ready, b64 * stride_qb,
            b64 * stride_kb + hk64 * stride_kh,
            b64 * stride_vb + hk64 * stride_vh, b64 * stride_dob, b64 * stride_dqb,
            b64 * stride_dkb + hk64 * stride_dkh, b64 * stride_dvb + hk64 * stride_dvh,
            b64 * stride_lb, stride_qm, stride_kn, stride_vn, stride_dom, stride_dqm,
            stride_dkn, stride_dvn, stride_lh, nheads, seqlen_q, seqlen_k, n0, h_k, group,
            m_start, n_m, shift, qk_scale, scale_ds)
    # the producer needs few registers: the consumers take 240 each (4·24 + 8·240 ≤ 512 per lane)
    gl.warp_specialize([(_bwd_producer, (args,)), (_bwd_consumer0, (args,)),
                        (_bwd_consumer1, (args,))], [CONSUMER_WARPS, CONSUMER_WARPS], [240, 240])


def gluon_bwd_eligible(q, k, v, do, params, attn_mask, alibi_slopes, varlen: bool) -> bool:
    """Does the Gluon backward cover this call? As the forward's ``gluon_eligible``, plus: no
    dropout, q and dO with their heads contiguous in a row (stride(2) == head_dim), since the
    kernel reads them through (seqlen, heads · head_dim) descriptors, and a Triton whose Gluon
    builder has the TMA reduction (``HAS_TMA_REDUCE``)."""
    from flashtriton.kernels.common import tma_ready
    from flashtriton.kernels.fwd_gluon import gluon_eligible

    d = q.shape[-1]
    return (HAS_TMA_REDUCE and gluon_eligible(q, k, v, params, attn_mask, alibi_slopes, varlen)
            and do.dtype == q.dtype and tma_ready(do) and q.stride(2) == d and do.stride(2) == d)


def attn_bwd_gluon(do, q, k, v, delta, lse, params, block_m: int = 64, block_n: int = 128,
                   num_warps: int = 4, num_stages: int = 2, split_dq: bool = False):
    """Launch the Gluon dK/dV kernel with dQ added by TMA reductions (see
    :func:`gluon_bwd_eligible`); ``delta`` is the preprocessed rowsum(dO ∘ O) (less dlse).
    ``split_dq``: the consumers share dS and each computes half of dQ's columns. Returns
    (dq float32, dk, dv)."""
    from flashtriton.configs import LOG2E
    from flashtriton.kernels.common import ensure_allocator

    ensure_allocator()  # the kernel builds its TMA descriptors on the device
    batch, seqlen_q, nheads, d = q.shape
    seqlen_k, nheads_k = k.shape[1], k.shape[2]
    if d not in (64, 128):
        raise ValueError(f"head dim: the Gluon backward covers 64 and 128, not {d}")
    # (batch, seqlen, heads · head_dim) rows for the reduction's descriptor
    dq = torch.zeros(q.shape, dtype=torch.float32, device=q.device)
    dk = _empty(k.shape, dtype=k.dtype, device=k.device)
    dv = _empty(v.shape, dtype=v.dtype, device=v.device)
    causal = params.window_right == 0
    shift = params.shift_extra + (seqlen_k - seqlen_q if params.bottom_right else 0)
    warps_total = 2 * num_warps + 4
    maxnreg = (65536 // (warps_total * 32)) // 8 * 8
    grid = (triton.cdiv(seqlen_k, block_n), batch * nheads_k)
    _attn_bwd_ws[grid](
        q, k, v, do, lse, delta, dq, dk, dv,
        q.stride(0), q.stride(1), k.stride(0), k.stride(1), k.stride(2), v.stride(0), v.stride(1),
        v.stride(2), do.stride(0), do.stride(1), dq.stride(0), dq.stride(1),
        dk.stride(0), dk.stride(1), dk.stride(2), dv.stride(0), dv.stride(1), dv.stride(2),
        lse.stride(0), lse.stride(1), nheads, nheads // nheads_k, seqlen_q, seqlen_k, shift,
        params.softmax_scale * LOG2E, params.softmax_scale,
        HEAD_DIM=d, BLOCK_M=block_m, BLOCK_N=block_n // 2, STAGES=num_stages, CAUSAL=causal,
        SPLIT_DQ=split_dq, CONSUMER_WARPS=num_warps, num_warps=4, maxnreg=maxnreg)
    return dq, dk, dv
