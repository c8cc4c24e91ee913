"""The backward's dK/dV kernel on Hopper in Gluon, with dQ added atomically: the plain path
(no mask, softcap, ALiBi, dropout or left window), 16-bit inputs, head dim 64 or 128, causal or
not, dense, for sm_90. Warp-specialized like the forward (kernels/fwd_gluon.py):

- a producer partition streams the query blocks' Q and dO tiles through ``STAGES``-deep rings
  by TMA (for grouped-query attention it walks every query head of the key head's group);
- two consumer warpgroups own BLOCK_N keys each of the program's 2·BLOCK_N keys, keep their K
  and V tiles in shared memory and their dK, dV accumulators in registers, and per query block

      Sᵀ = K Qᵀ, dPᵀ = V dOᵀ          (issued together)
      Pᵀ = exp2(Sᵀ·scale − lse)        dV += Pᵀ dO   (issued as soon as Pᵀ is ready)
      dSᵀ = Pᵀ ∘ (dPᵀ − δ)            dK += dSᵀ Q
      dS → shared memory              dQ_part = dS K, added into a float32 dQ with atomics

  with no warpgroup MMA left in flight across the loop's back edge (ptxas serializes every MMA
  of the kernel otherwise; see fwd_gluon.py).

The launcher (``attn_bwd_gluon``) returns dq (float32, to be cast by the caller), dk, dv; the
``tl`` kernels (kernels/bwd.py) remain the portable path and the deterministic one.
"""

from __future__ import annotations

import torch
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (fence_async_shared, mbarrier, tma,
                                                              warpgroup_mma, warpgroup_mma_wait)

_empty = torch.empty


@gluon.jit
def _bwd_producer(args):
    """The default partition: Q and dO tiles of every (query head of the group, query block)
    step into the rings, and each step's dQ from the consumers into global memory."""
    (Q, K, V, DO, LSE, DELTA, DQ, DK, DV, q_smem, do_smem, k_smem, v_smem, p_smem, ds_smem,
     dq_smem, kv_bar, ready, empty, dq_full, dq_empty, q_base, k_base, v_base, do_base, dq_base,
     dk_base, dv_base, l_base, stride_qm, stride_kn, stride_vn, stride_dom, stride_dqm,
     stride_dqh, stride_dkn, stride_dvn, stride_lh, nheads, seqlen_q, seqlen_k, n0, h_k, group,
     m_start, n_m, shift, qk_scale, scale_ds) = args
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
        if it > 0:  # the previous step's dQ, while the consumers compute this one
            _send_dq(DQ, dq_smem, dq_full, dq_empty, it - 1, dq_base, stride_dqm, stride_dqh,
                     seqlen_q, h_k, group, m_start, n_m)
    if group * n_m > 0:
        _send_dq(DQ, dq_smem, dq_full, dq_empty, group * n_m - 1, dq_base, stride_dqm, stride_dqh,
                 seqlen_q, h_k, group, m_start, n_m)


@gluon.jit
def _send_dq(DQ, dq_smem, dq_full, dq_empty, step, dq_base, stride_dqm, stride_dqh, seqlen_q,
             h_k, group, m_start, n_m):
    """Add both consumers' dQ of ``step`` (staged in shared memory, already scaled) into the
    float32 dQ: 4-wide atomics, a few rows at a time."""
    BLOCK_M: gl.constexpr = dq_smem.type.shape[1]
    HEAD_DIM: gl.constexpr = dq_smem.type.shape[2]
    WARPS: gl.constexpr = gl.num_warps()
    LANES_N: gl.constexpr = HEAD_DIM // 4
    # at least 8 rows per chunk: the buffer's swizzle pattern repeats every 8 rows
    ROWS: gl.constexpr = max(1, 8 // (WARPS * (32 // LANES_N)))
    layout: gl.constexpr = gl.BlockedLayout([ROWS, 4], [32 // LANES_N, LANES_N], [WARPS, 1],
                                            [1, 0])
    CHUNK: gl.constexpr = ROWS * WARPS * (32 // LANES_N)
    rows_c = gl.arange(0, CHUNK, layout=gl.SliceLayout(1, layout))
    cols_c = gl.arange(0, HEAD_DIM, layout=gl.SliceLayout(0, layout))
    head = h_k * group + step // n_m
    m0 = (m_start + step % n_m) * BLOCK_M
    dq_ptr = DQ + dq_base + head.to(gl.int64) * stride_dqh
    for w in gl.static_range(2):
        mbarrier.wait(dq_full.index(w), step & 1)
        for r in gl.static_range(0, BLOCK_M, CHUNK):
            rows = m0 + r + rows_c
            part = dq_smem.index(w).slice(r, CHUNK, dim=0).load(layout)
            gl.atomic_add(dq_ptr + gl.expand_dims(rows.to(gl.int64) * stride_dqm, 1)
                          + gl.expand_dims(cols_c, 0), part,
                          mask=gl.expand_dims(rows < seqlen_q, 1), sem="relaxed")
        gl.thread_barrier()  # every thread has read the buffer before the consumer reuses it
        mbarrier.arrive(dq_empty.index(w))


@gluon.jit
def _probabilities(s, lse2, offs_n, offs_m, shift, qk_scale, MASKED: gl.constexpr):
    """P [queries, keys] from raw scores; MASKED: the causal diagonal cuts this block (rows and
    keys past the sequences need no mask: their lse is +inf, their K and dO rows are zero)."""
    p = gl.exp2(s * qk_scale - gl.expand_dims(lse2, 1))
    if MASKED:
        keep = gl.expand_dims(offs_n, 0) <= gl.expand_dims(offs_m, 1) + shift
        p = gl.where(keep, p, 0.0)
    return p


@gluon.jit
def _bwd_consumer(args, WG: gl.constexpr):
    (Q, K, V, DO, LSE, DELTA, DQ, DK, DV, q_smem, do_smem, k_smem, v_smem, p_smem, ds_smem,
     dq_smem, kv_bar, ready, empty, dq_full, dq_empty, q_base, k_base, v_base, do_base, dq_base,
     dk_base, dv_base, l_base, stride_qm, stride_kn, stride_vn, stride_dom, stride_dqm,
     stride_dqh, stride_dkn, stride_dvn, stride_lh, nheads, seqlen_q, seqlen_k, n0, h_k, group,
     m_start, n_m, shift, qk_scale, scale_ds) = args
    STAGES: gl.constexpr = q_smem.type.shape[0]
    BLOCK_M: gl.constexpr = q_smem.type.shape[1]
    HEAD_DIM: gl.constexpr = q_smem.type.shape[2]
    BLOCK_N: gl.constexpr = k_smem.type.shape[1]
    dtype: gl.constexpr = Q.dtype.element_ty
    WARPS: gl.constexpr = gl.num_warps()
    # S, dP: [BLOCK_M queries, BLOCK_N keys] (lse and δ one per row); dK, dV: [BLOCK_N, HEAD_DIM];
    # dQ: [BLOCK_M, HEAD_DIM]. P and dS go through shared memory, where the products that need
    # them transposed (dV += Pᵀ dO, dK += dSᵀ Q) read them as MN-major operands.
    s_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[WARPS, 1],
                                                       instr_shape=[16, BLOCK_N, 16])
    acc_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[WARPS, 1],
                                                         instr_shape=[16, HEAD_DIM, 16])
    kv_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BLOCK_N, HEAD_DIM], dtype)

    keys0 = n0 + WG * BLOCK_N
    k_s = k_smem.index(WG)
    v_s = v_smem.index(WG)
    p_s = p_smem.index(WG)
    ds_s = ds_smem.index(WG)
    dq_s = dq_smem.index(WG)
    kb = kv_bar.index(WG)
    k_desc = tma.make_tensor_descriptor(K + k_base, shape=[seqlen_k, HEAD_DIM],
                                        strides=[stride_kn, 1], block_shape=[BLOCK_N, HEAD_DIM],
                                        layout=kv_layout)
    v_desc = tma.make_tensor_descriptor(V + v_base, shape=[seqlen_k, HEAD_DIM],
                                        strides=[stride_vn, 1], block_shape=[BLOCK_N, HEAD_DIM],
                                        layout=kv_layout)
    mbarrier.expect(kb, 2 * BLOCK_N * HEAD_DIM * 2)
    tma.async_copy_global_to_shared(k_desc, [keys0, 0], kb, k_s)
    tma.async_copy_global_to_shared(v_desc, [keys0, 0], kb, v_s)

    offs_n = keys0 + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, s_layout))
    rows_m = gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, s_layout))
    cols_d = gl.arange(0, HEAD_DIM, layout=gl.SliceLayout(0, acc_layout))
    dk = gl.zeros([BLOCK_N, HEAD_DIM], gl.float32, layout=acc_layout)
    dv = gl.zeros([BLOCK_N, HEAD_DIM], gl.float32, layout=acc_layout)
    mbarrier.wait(kb, 0)
    for it in range(group * n_m):
        slot = it % STAGES
        phase = (it // STAGES) & 1
        head = h_k * group + it // n_m
        m0 = (m_start + it % n_m) * BLOCK_M
        offs_m = m0 + rows_m
        lse = gl.load(LSE + l_base + head * stride_lh + offs_m, mask=offs_m < seqlen_q,
                      other=float("-inf"))
        lse2 = gl.where(lse == float("-inf"), float("inf"), lse * 1.4426950408889634)
        delta = gl.load(DELTA + l_base + head * stride_lh + offs_m, mask=offs_m < seqlen_q,
                        other=0.0)
        q_s = q_smem.index(slot)
        do_s = do_smem.index(slot)
        mbarrier.wait(ready.index(slot), phase)
        zero_s = gl.zeros([BLOCK_M, BLOCK_N], gl.float32, layout=s_layout)
        st = warpgroup_mma(q_s, k_s.permute((1, 0)), zero_s, use_acc=False, is_async=True)
        dpt = warpgroup_mma(do_s, v_s.permute((1, 0)), zero_s, use_acc=False, is_async=True)
        st = warpgroup_mma_wait(num_outstanding=1, deps=(st,))
        if keys0 + BLOCK_N - 1 > m0 + shift:  # the causal diagonal cuts this block
            p = _probabilities(st, lse2, offs_n, offs_m, shift, qk_scale, True)
        else:
            p = _probabilities(st, lse2, offs_n, offs_m, shift, qk_scale, False)
        p_s.store(p.to(dtype))
        fence_async_shared()
        gl.thread_barrier()  # every thread's share of P is in place before the MMA reads it
        dv = warpgroup_mma(p_s.permute((1, 0)), do_s, dv, is_async=True)
        dpt = warpgroup_mma_wait(num_outstanding=1, deps=(dpt,))
        ds_s.store((p * (dpt - gl.expand_dims(delta, 1))).to(dtype))
        fence_async_shared()
        gl.thread_barrier()
        dk = warpgroup_mma(ds_s.permute((1, 0)), q_s, dk, is_async=True)
        dv, dk = warpgroup_mma_wait(num_outstanding=0, deps=(dv, dk))
        mbarrier.arrive(empty.index(slot))  # Q and dO of this step are no longer read
        zero_q = gl.zeros([BLOCK_M, HEAD_DIM], gl.float32, layout=acc_layout)
        dq = warpgroup_mma(ds_s, k_s, zero_q, use_acc=False, is_async=True)
        dq = warpgroup_mma_wait(num_outstanding=0, deps=(dq,))
        # dQ goes to the producer partition through shared memory, which adds it to the float32
        # dQ with atomics while this warpgroup computes the next step
        mbarrier.wait(dq_empty.index(WG), (it & 1) ^ 1)
        dq_s.store(dq * scale_ds)
        gl.thread_barrier()  # every thread's share is stored before the writer is told
        mbarrier.arrive(dq_full.index(WG))

    rows_k = keys0 + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(1, acc_layout))
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
                 stride_vh, stride_dob, stride_dom, stride_dqb, stride_dqm, stride_dqh,
                 stride_dkb, stride_dkn, stride_dkh, stride_dvb, stride_dvn, stride_dvh,
                 stride_lb, stride_lh, nheads, group, seqlen_q, seqlen_k, shift, qk_scale,
                 scale_ds, HEAD_DIM: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr,
                 STAGES: gl.constexpr, CAUSAL: gl.constexpr, CONSUMER_WARPS: gl.constexpr):
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

    q_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BLOCK_M, HEAD_DIM], dtype)
    kv_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BLOCK_N, HEAD_DIM], dtype)
    ds_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BLOCK_M, BLOCK_N], dtype)
    q_smem = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_M, HEAD_DIM], q_layout)
    do_smem = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_M, HEAD_DIM], q_layout)
    k_smem = gl.allocate_shared_memory(dtype, [2, BLOCK_N, HEAD_DIM], kv_layout)
    v_smem = gl.allocate_shared_memory(dtype, [2, BLOCK_N, HEAD_DIM], kv_layout)
    p_smem = gl.allocate_shared_memory(dtype, [2, BLOCK_M, BLOCK_N], ds_layout)
    ds_smem = gl.allocate_shared_memory(dtype, [2, BLOCK_M, BLOCK_N], ds_layout)
    # 16-byte groups XOR-swizzled by row: the MMA layout's stores of 8 rows land in 8 banks
    dq_smem = gl.allocate_shared_memory(gl.float32, [2, BLOCK_M, HEAD_DIM],
                                        gl.SwizzledSharedLayout(4, 1, 8, order=[1, 0]))
    kv_bar = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    dq_full = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    dq_empty = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(2):
        mbarrier.init(kv_bar.index(i), count=1)
        mbarrier.init(dq_full.index(i), count=1)
        mbarrier.init(dq_empty.index(i), count=1)
    for i in gl.static_range(STAGES):
        mbarrier.init(ready.index(i), count=1)
        mbarrier.init(empty.index(i), count=2)  # one arrival per consumer

    args = (Q, K, V, DO, LSE, DELTA, DQ, DK, DV, q_smem, do_smem, k_smem, v_smem, p_smem,
            ds_smem, dq_smem, kv_bar, ready, empty, dq_full, dq_empty, b64 * stride_qb,
            b64 * stride_kb + hk64 * stride_kh,
            b64 * stride_vb + hk64 * stride_vh, b64 * stride_dob, b64 * stride_dqb,
            b64 * stride_dkb + hk64 * stride_dkh, b64 * stride_dvb + hk64 * stride_dvh,
            b64 * stride_lb, stride_qm, stride_kn, stride_vn, stride_dom, stride_dqm, stride_dqh,
            stride_dkn, stride_dvn, stride_lh, nheads, seqlen_q, seqlen_k, n0, h_k, group,
            m_start, n_m, shift, qk_scale, scale_ds)
    gl.warp_specialize([(_bwd_producer, (args,)), (_bwd_consumer0, (args,)),
                        (_bwd_consumer1, (args,))], [CONSUMER_WARPS, CONSUMER_WARPS], [232, 232])


def gluon_bwd_eligible(q, k, v, do, params, attn_mask, alibi_slopes, varlen: bool) -> bool:
    """Does the Gluon backward cover this call? As the forward's ``gluon_eligible``, plus: no
    dropout, and q and dO with their heads contiguous in a row (stride(2) == head_dim), since
    the kernel reads them through (seqlen, heads · head_dim) descriptors."""
    from flashtriton.kernels.common import tma_ready
    from flashtriton.kernels.fwd_gluon import gluon_eligible

    d = q.shape[-1]
    return (gluon_eligible(q, k, v, params, attn_mask, alibi_slopes, varlen)
            and do.dtype == q.dtype and tma_ready(do) and q.stride(2) == d and do.stride(2) == d)


def attn_bwd_gluon(do, q, k, v, delta, lse, params, block_m: int = 64, block_n: int = 128,
                   num_warps: int = 4, num_stages: int = 2):
    """Launch the Gluon dK/dV kernel with atomic dQ (see :func:`gluon_bwd_eligible`); ``delta``
    is the preprocessed rowsum(dO ∘ O) (less dlse). Returns (dq float32, dk, dv)."""
    from flashtriton.configs import LOG2E
    from flashtriton.kernels.common import ensure_allocator

    ensure_allocator()  # the kernel builds its TMA descriptors on the device
    batch, seqlen_q, nheads, d = q.shape
    seqlen_k, nheads_k = k.shape[1], k.shape[2]
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
        v.stride(2), do.stride(0), do.stride(1), dq.stride(0), dq.stride(1), dq.stride(2),
        dk.stride(0), dk.stride(1), dk.stride(2), dv.stride(0), dv.stride(1), dv.stride(2),
        lse.stride(0), lse.stride(1), nheads, nheads // nheads_k, seqlen_q, seqlen_k, shift,
        params.softmax_scale * LOG2E, params.softmax_scale,
        HEAD_DIM=d, BLOCK_M=block_m, BLOCK_N=block_n // 2, STAGES=num_stages, CAUSAL=causal,
        CONSUMER_WARPS=num_warps, num_warps=4, maxnreg=maxnreg)
    return dq, dk, dv
