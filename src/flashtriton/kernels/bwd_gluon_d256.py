"""The backward's dK/dV kernel at head dim 256 on Hopper in Gluon; dQ is left to a kernel of
its own (kernels/bwd_gluon_d256_dq.py). The plain path of kernels/bwd_gluon.py (no mask,
softcap, ALiBi, dropout or left window), 16-bit inputs, causal or not, dense, for sm_90.

At head dim 256 the structure of kernels/bwd_gluon.py does not fit: a consumer warpgroup that
owns BLOCK_N keys would hold dK and dV, [BLOCK_N, 256] float32 each, in 256 registers a thread
at 64 keys, over the 240 it may take. Here the two consumer warpgroups share one tile of
BLOCK_N keys and split the head dim instead: warpgroup w keeps columns [w·128, w·128 + 128) of
dK and dV (64 + 64 registers a thread). The score products cannot be split that way (they sum
over the whole head dim), so warpgroup 0 computes Sᵀ and warpgroup 1 dPᵀ, each for all of the
step's BLOCK_M queries, and they hand Pᵀ and dSᵀ over through shared memory. Per query block
of BLOCK_M rows:

    warpgroup 0: Sᵀ = K Qᵀ, Pᵀ = exp2(Sᵀ·scale − lse)  → the shared Pᵀ tile
    warpgroup 1: dPᵀ = V dOᵀ; once Pᵀ is there, dSᵀ = Pᵀ ∘ (dPᵀ − δ)  → the shared dSᵀ tile
    both:        dV_w += Pᵀ dO[:, w's columns]   dK_w += dSᵀ Q[:, w's columns]

(warpgroup 0 issues its dV product before it waits for dSᵀ). Each score product is an MMA of
N = BLOCK_M: until session 51 each warpgroup computed both for half of the queries (N =
BLOCK_M / 2), and both read all of K and V from shared memory for it: 288 KB of operand
reads a step against 224 KB now, 2,250 cycles at 128 bytes a cycle against the step's 2,048
cycles of tensor work (an estimate). The kernel took 6% fewer cycles for it at the base clock
(docs/perf-log.md, session 51). dSᵀ is computed from the 16-bit Pᵀ that the dV product reads.
Each warpgroup also holds the first half of the head dim of its score product's A, K
(warpgroup 0) or V (warpgroup 1), in registers for the whole tile (32 a thread; all of it took
64 and spilled): that product's first 8 k-chunks read only Q or dO from shared memory, 96 KB
of operand reads a step against 112 KB (0.75x the tensor work's cycles against 0.88x), and
the kernel took 4.7% fewer cycles at 8k causal (session 52).

The producer is kernels/bwd_gluon.py's (Q, dO, lse and δ through ``STAGES``-deep rings by TMA;
K and V once per tile). Pᵀ and dSᵀ take two buffers each (step parity), each with an mbarrier
of one arrival per parity (``p_ready``, ``ds_ready``): warpgroup 0 writes step s + 2's Pᵀ
only after it has seen step s + 1's dSᵀ, which warpgroup 1 writes once its step s products,
the last to read step s's buffers, have completed; warpgroup 1 writes step s + 2's dSᵀ only
after step s + 2's Pᵀ, which warpgroup 0 writes once its step s + 1 products have completed.
With 64-key tiles, 64-query steps and two ring slots, Q, dO, K, V, Pᵀ and dSᵀ take 229,376
bytes of shared memory; at a tile's end dK and dV leave by TMA staged in the Pᵀ (warpgroup 0)
and dSᵀ (warpgroup 1) buffers, once both warpgroups are done with them.

Written in session 17, first run on the GPU in session 18; see docs/perf-log.md.
"""

from __future__ import annotations

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (fence_async_shared, mbarrier, tma,
                                                              warpgroup_mma, warpgroup_mma_wait)

from flashtriton.kernels.bwd_gluon import (_bwd_producer, _bwd_tile, _store_tile,
                                           launch_setup)
from flashtriton.kernels.tile_walk import _table_range, _table_tile
from flashtriton.kernels.common import ensure_allocator, grid3, launch


@gluon.jit
def _publish(bar):
    """This warpgroup's share of a shared tile is stored: publish it to the async proxy (the
    MMAs that read it) and to the other consumer warpgroup, by an arrival at ``bar``."""
    fence_async_shared()
    gl.thread_barrier()  # every thread's share is stored before the arrival publishes it
    mbarrier.arrive(bar)


@gluon.jit
def _each_step(smem, step):
    """The one buffer of ``smem`` (a leading dim of 1), addressed anew at step ``step``:
    ``step >> 31`` is 0 (steps count up from 0), which the compiler cannot know. Used for an
    operand that stays put for a whole tile, whose 16 k-chunk wgmma descriptors the compiler
    would otherwise compute once before the loop: two such operands' 32 descriptors (Q and dO
    in the dQ kernel until session 53, which holds them in registers now; K and V here until
    session 51) are more than the uniform registers hold, and the second consumer partition
    then kept them in ordinary registers and moved each to uniform ones at every use (60-70
    R2UR a step). Addressed in the step, each consumer derives them from one base
    (docs/perf-log.md, session 50). With one such operand hoisted (Q, dO addressed here) the
    dQ kernel then ran 4% fewer instructions but 1.5-6% more cycles (session 51)."""
    return smem.index(step >> 31)


@gluon.jit
def _score(a_reg, a_s, b_s, zero):
    """Issue a score product over the head dim, A·Bᵀ: A's first half of columns from registers
    (``a_reg``), its second from shared memory (``a_s``), B (``b_s``) from shared memory."""
    HALF: gl.constexpr = a_s.type.shape[1] // 2
    b_lo = b_s.slice(0, HALF, dim=1).permute((1, 0))
    b_hi = b_s.slice(HALF, HALF, dim=1).permute((1, 0))
    acc = warpgroup_mma(a_reg, b_lo, zero, use_acc=False, is_async=True)
    return warpgroup_mma(a_s.slice(HALF, HALF, dim=1), b_hi, acc, is_async=True)


@gluon.jit
def _sync(bar, count):
    """Both consumer warpgroups reach this point (``bar``: an mbarrier of two arrivals, used
    for the ``count``-th time); returns the next count."""
    mbarrier.arrive(bar)
    mbarrier.wait(bar, count & 1)
    return count + 1


@gluon.jit
def _hs_consumer(staged, kv, schedule, args, WG: gl.constexpr):
    """One consumer warpgroup: for each of the program's tiles, its half of dK's and dV's
    columns against every step of Q and dO (see the module docstring)."""
    q_smem, do_smem, lse_smem, delta_smem, ready, empty = staged
    k_smem, v_smem, kv_ready, kv_empty = kv
    batch, nheads, group, seqlen_q, seqlen_k, shift, n_kb, total, reverse, table = schedule
    (DK, DV, pt_smem, ds_smem, p_ready, ds_ready, tile_sync, qk_scale, scale_ds,
     stride_dkb, stride_dkn, stride_dkh, stride_dvb, stride_dvn, stride_dvh) = args
    STAGES: gl.constexpr = q_smem.type.shape[0]
    BLOCK_M: gl.constexpr = q_smem.type.shape[2]
    HEAD_DIM: gl.constexpr = q_smem.type.shape[3]
    BLOCK_N: gl.constexpr = k_smem.type.shape[2]
    HALF_D: gl.constexpr = HEAD_DIM // 2  # this warpgroup's columns of dK and dV
    dtype: gl.constexpr = DK.dtype.element_ty
    WARPS: gl.constexpr = gl.num_warps()
    # Sᵀ, dPᵀ: [BLOCK_N keys, BLOCK_M queries]; dK, dV: [BLOCK_N, HALF_D]
    st_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[WARPS, 1],
                                                        instr_shape=[16, BLOCK_M, 16])
    acc_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[WARPS, 1],
                                                         instr_shape=[16, HALF_D, 16])
    nheads_k = nheads // group
    # dK and dV leave through the Pᵀ (warpgroup 0) or dSᵀ (warpgroup 1) buffers: both parities'
    # [BLOCK_N, BLOCK_M] 16-bit tiles hold one [BLOCK_N, HALF_D] 16-bit tile
    out_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([1, BLOCK_N, 1, HALF_D], dtype)
    if WG == 0:
        out_s = pt_smem._reinterpret(dtype, [1, BLOCK_N, 1, HALF_D], out_layout)
    else:
        out_s = ds_smem._reinterpret(dtype, [1, BLOCK_N, 1, HALF_D], out_layout)
    dk_desc = tma.make_tensor_descriptor(DK, shape=[batch, seqlen_k, nheads_k, HEAD_DIM],
                                         strides=[stride_dkb, stride_dkn, stride_dkh, 1],
                                         block_shape=[1, BLOCK_N, 1, HALF_D], layout=out_layout)
    dv_desc = tma.make_tensor_descriptor(DV, shape=[batch, seqlen_k, nheads_k, HEAD_DIM],
                                         strides=[stride_dvb, stride_dvn, stride_dvh, 1],
                                         block_shape=[1, BLOCK_N, 1, HALF_D], layout=out_layout)
    # the first HALF_D columns of the tile's K (warpgroup 0) or V (warpgroup 1) in registers
    # (32 a thread), the A of the first half of the score product's k-chunks
    op_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=st_layout, k_width=2)
    offs_q = gl.arange(0, BLOCK_M, layout=gl.SliceLayout(0, st_layout))
    zero_st = gl.zeros([BLOCK_N, BLOCK_M], gl.float32, layout=st_layout)
    step = 0
    kv_count = 0
    syncs = 0  # uses of tile_sync
    lo, hi, stride = _table_range(table, total)
    for entry in range(lo, hi, stride):
        t = _table_tile(table, entry)
        b, h_k, n0, m_start, n_m = _bwd_tile(t, n_kb, nheads_k, seqlen_q, shift, total,
                                             reverse, BLOCK_M, BLOCK_N)
        offs_n = n0 + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(1, st_layout))
        dk = gl.zeros([BLOCK_N, HALF_D], gl.float32, layout=acc_layout)
        dv = gl.zeros([BLOCK_N, HALF_D], gl.float32, layout=acc_layout)
        n_steps = group * n_m
        mbarrier.wait(kv_ready, kv_count & 1, pred=n_steps > 0)
        if WG == 0:
            a_first = k_smem.index(0).reshape([BLOCK_N, HEAD_DIM]).slice(0, HALF_D, dim=1)
        else:
            a_first = v_smem.index(0).reshape([BLOCK_N, HEAD_DIM]).slice(0, HALF_D, dim=1)
        a_reg = a_first.load(op_layout)  # (unused, unwaited, when no query sees the tile)
        for it in range(n_steps):
            s = step + it
            slot = s % STAGES
            par = s % 2
            m0 = (m_start + it % n_m) * BLOCK_M
            q_s = q_smem.index(slot).reshape([BLOCK_M, HEAD_DIM])
            do_s = do_smem.index(slot).reshape([BLOCK_M, HEAD_DIM])
            mbarrier.wait(ready.index(slot), (s // STAGES) & 1)
            if WG == 0:  # Sᵀ = K Qᵀ, then Pᵀ for both warpgroups
                k_s = _each_step(k_smem, s).reshape([BLOCK_N, HEAD_DIM])
                st = _score(a_reg, k_s, q_s, zero_st)
                st = warpgroup_mma_wait(num_outstanding=0, deps=(st,))
                # rows past seqlen_q: lse +inf (P = 0); keys past seqlen_k: their dK, dV rows
                # are not stored (TMA clips them)
                lse2 = lse_smem.index(slot).load(gl.SliceLayout(0, st_layout))
                pt = gl.exp2(st * qk_scale - gl.expand_dims(lse2, 0))
                if n0 + BLOCK_N - 1 > m0 + shift:  # the causal diagonal cuts this block
                    keep = gl.expand_dims(offs_n, 1) <= gl.expand_dims(m0 + offs_q, 0) + shift
                    pt = gl.where(keep, pt, 0.0)
                pt_smem.index(par).store(pt.to(dtype))
                _publish(p_ready.index(par))
                dv = warpgroup_mma(pt_smem.index(par), do_s.slice(0, HALF_D, dim=1), dv,
                                   is_async=True)
                mbarrier.wait(ds_ready.index(par), (s // 2) & 1)
            else:  # dPᵀ = V dOᵀ, then dSᵀ = Pᵀ ∘ (dPᵀ − δ) for both warpgroups
                v_s = _each_step(v_smem, s).reshape([BLOCK_N, HEAD_DIM])
                dpt = _score(a_reg, v_s, do_s, zero_st)
                dpt = warpgroup_mma_wait(num_outstanding=0, deps=(dpt,))
                delta = delta_smem.index(slot).load(gl.SliceLayout(0, st_layout))
                dpt = dpt - gl.expand_dims(delta, 0)
                mbarrier.wait(p_ready.index(par), (s // 2) & 1)
                pt = pt_smem.index(par).load(st_layout).to(gl.float32)
                ds_smem.index(par).store((pt * dpt).to(dtype))
                _publish(ds_ready.index(par))
                dv = warpgroup_mma(pt_smem.index(par), do_s.slice(HALF_D, HALF_D, dim=1), dv,
                                   is_async=True)
            dk = warpgroup_mma(ds_smem.index(par), q_s.slice(WG * HALF_D, HALF_D, dim=1), dk,
                               is_async=True)
            dv, dk = warpgroup_mma_wait(num_outstanding=0, deps=(dv, dk))
            mbarrier.arrive(empty.index(slot))  # Q and dO of this step are no longer read
        # this warpgroup's last product that read K or V is done: the next tile's may load
        mbarrier.arrive(kv_empty, pred=n_steps > 0)
        step += n_steps
        kv_count += (n_steps > 0).to(gl.int32)
        # both warpgroups' last products, which read Pᵀ and dSᵀ, are done: stage dK and dV there
        syncs = _sync(tile_sync, syncs)
        _store_tile(out_s, dk_desc, (dk * scale_ds).to(dtype), b, n0, h_k, WG * HALF_D)
        _store_tile(out_s, dv_desc, dv.to(dtype), b, n0, h_k, WG * HALF_D)
        tma.store_wait(pendings=0)
        # both stores have read their buffers before the next tile's first step writes them
        syncs = _sync(tile_sync, syncs)


@gluon.jit
def _hs_consumer0(staged, kv, schedule, args):
    _hs_consumer(staged, kv, schedule, args, 0)


@gluon.jit
def _hs_consumer1(staged, kv, schedule, args):
    _hs_consumer(staged, kv, schedule, args, 1)


@gluon.jit
def _attn_bwd_dkdv_hs(Q, K, V, DO, LSE, DELTA, DK, DV,
                      stride_qb, stride_qm, stride_kb, stride_kn, stride_kh, stride_vb,
                      stride_vn, stride_vh, stride_dob, stride_dom,
                      stride_dkb, stride_dkn, stride_dkh, stride_dvb, stride_dvn, stride_dvh,
                      stride_lb, stride_lh, batch, nheads, group, seqlen_q, seqlen_k, shift,
                      qk_scale, scale_ds, reverse, table, HEAD_DIM: gl.constexpr,
                      BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, STAGES: gl.constexpr,
                      CAUSAL: gl.constexpr, CONSUMER_WARPS: gl.constexpr):
    """Tiles of BLOCK_N keys of a key head (see the module docstring), in
    kernels/bwd_gluon.py's ``_bwd_tile`` order: one tile per program, or persistent."""
    dtype: gl.constexpr = Q.dtype.element_ty
    n_kb = gl.cdiv(seqlen_k, BLOCK_N)
    total = n_kb * batch * (nheads // group)
    if not CAUSAL:
        shift = seqlen_k  # every key is left of every row's diagonal

    q_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([1, BLOCK_M, HEAD_DIM], dtype)
    kv_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([1, BLOCK_N, 1, HEAD_DIM],
                                                                   dtype)
    p_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BLOCK_N, BLOCK_M], dtype)
    q_smem = gl.allocate_shared_memory(dtype, [STAGES, 1, BLOCK_M, HEAD_DIM], q_layout)
    do_smem = gl.allocate_shared_memory(dtype, [STAGES, 1, BLOCK_M, HEAD_DIM], q_layout)
    k_smem = gl.allocate_shared_memory(dtype, [1, 1, BLOCK_N, 1, HEAD_DIM], kv_layout)
    v_smem = gl.allocate_shared_memory(dtype, [1, 1, BLOCK_N, 1, HEAD_DIM], kv_layout)
    pt_smem = gl.allocate_shared_memory(dtype, [2, BLOCK_N, BLOCK_M], p_layout)
    ds_smem = gl.allocate_shared_memory(dtype, [2, BLOCK_N, BLOCK_M], p_layout)
    row_layout: gl.constexpr = gl.SwizzledSharedLayout(1, 1, 1, order=[0])
    lse_smem = gl.allocate_shared_memory(gl.float32, [STAGES, BLOCK_M], row_layout)
    delta_smem = gl.allocate_shared_memory(gl.float32, [STAGES, BLOCK_M], row_layout)
    kv_ready = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    kv_empty = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    tile_sync = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    p_ready = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    ds_ready = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    mbarrier.init(kv_ready, count=1)
    mbarrier.init(kv_empty, count=2)  # one arrival per consumer
    mbarrier.init(tile_sync, count=2)
    for i in gl.static_range(2):
        mbarrier.init(p_ready.index(i), count=1)  # warpgroup 0's Pᵀ of a step parity
        mbarrier.init(ds_ready.index(i), count=1)  # warpgroup 1's dSᵀ
    for i in gl.static_range(STAGES):
        mbarrier.init(ready.index(i), count=2)  # the TMA bytes' and the lse / δ stores
        mbarrier.init(empty.index(i), count=2)  # one arrival per consumer

    staged = (q_smem, do_smem, lse_smem, delta_smem, ready, empty)
    kv = (k_smem, v_smem, kv_ready, kv_empty)
    schedule = (batch, nheads, group, seqlen_q, seqlen_k, shift, n_kb, total, reverse, table)
    loads = (staged, kv, schedule, Q, K, V, DO, LSE, DELTA, stride_qb, stride_qm, stride_kb,
             stride_kn, stride_kh, stride_vb, stride_vn, stride_vh, stride_dob, stride_dom,
             stride_lb, stride_lh)
    work = (staged, kv, schedule, (DK, DV, pt_smem, ds_smem, p_ready, ds_ready, tile_sync,
                                   qk_scale, scale_ds, stride_dkb, stride_dkn, stride_dkh,
                                   stride_dvb, stride_dvn, stride_dvh))
    gl.warp_specialize([(_bwd_producer, loads), (_hs_consumer0, work), (_hs_consumer1, work)],
                       [CONSUMER_WARPS, CONSUMER_WARPS], [240, 240])


def attn_bwd_dkdv_gluon_d256(do, q, k, v, delta, lse, params, block_m: int = 64,
                             block_n: int = 64, num_warps: int = 4, num_stages: int = 2,
                             persistent: bool = False, tile_order: str | None = None,
                             record=None):
    """Launch the head-dim-256 Gluon dK/dV kernel (the calls kernels/bwd_gluon.py's
    ``gluon_bwd_eligible`` covers, at head dim 256); ``delta`` is the preprocessed
    rowsum(dO ∘ O) (less dlse). dQ is not computed: the caller runs a dQ kernel.
    ``tile_order``: ``bwd_gluon.launch_setup``'s (a greedy table, persistent only).
    ``record``: as ``attn_bwd_gluon``'s. Returns (dk, dv)."""
    ensure_allocator()  # the kernel builds its TMA descriptors on the device
    d = q.shape[-1]
    if d != 256:
        raise ValueError(f"head dim: attn_bwd_dkdv_gluon_d256 covers 256, not {d}")
    # 64 queries a step: the Pᵀ and dSᵀ buffers (two [64, block_m] tiles each) stage dK and dV
    # ([64, 128] each) at a tile's end, and 128 would not fit in shared memory
    if num_warps != 4 or block_m != 64 or block_n != 64:
        raise ValueError("attn_bwd_dkdv_gluon_d256: one warpgroup per consumer (num_warps=4), "
                         f"64-key tiles, 64-query steps; got num_warps={num_warps}, "
                         f"block_n={block_n}, block_m={block_m}")
    dk, dv, grid, rest, causal, maxnreg = launch_setup(do, q, k, v, lse, params, block_n,
                                                       num_warps, persistent, block_m,
                                                       tile_order)
    entry = launch(_attn_bwd_dkdv_hs, grid, q, k, v, do, lse, delta, dk, dv, *rest,
                   HEAD_DIM=d, BLOCK_M=block_m, BLOCK_N=block_n, STAGES=num_stages,
                   CAUSAL=causal, CONSUMER_WARPS=num_warps, num_warps=4, maxnreg=maxnreg)
    if record is not None and entry is not None:
        record.append((entry, grid3(grid), rest))
    return dk, dv
