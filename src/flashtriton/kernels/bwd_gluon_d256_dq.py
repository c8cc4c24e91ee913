"""The backward's dQ kernel at head dim 256 on Hopper in Gluon, beside kernels/bwd_gluon_d256.py's
dK/dV kernel: the same plain path (no mask, softcap, ALiBi, dropout or left window), 16-bit
inputs, causal or not, dense, for sm_90. Deterministic: each program owns its query rows.

A tile is BLOCK_M query rows of a head: a producer partition loads their Q and dO (and lse,
δ) once, then streams the K and V tiles they see through ``STAGES``-deep rings by TMA. One
program per tile, or persistent: one program per SM walks the tiles, listed as the persistent
forward lists its own (``tile_walk._pers_tile``): head by head, so that the programs running
together read a few heads' K and V from L2 (listed row block by row block across every head,
as this kernel first did, 7.6% of its K/V reads hit L2 at 1k keys, 60% at 4k, and the kernel
ran DRAM-bound: docs/perf-log.md, session 19; head by head, 79.4% at 1k and the d256
backward +14.4% there, session 20); causal, longest first, in ``_snake`` order,
the next tile's Q and dO loaded once both consumers are done with the tile before
(``q_empty``), so they load under the dQ store; the rings and the P / dS hand-overs count
their steps across the program's tiles.
The two consumer warpgroups split dQ's head dim as the dK/dV kernel splits dK's and dV's:
warpgroup w keeps columns [w·128, w·128 + 128) of dQ (64 registers a thread). The score
products are split between them, one each over the whole key tile, with the tile-fixed A
(warpgroup 0's Q, warpgroup 1's dO) loaded into registers once a tile (64 registers), so a
step's products read only K or V from shared memory. Per key tile:

    warpgroup 0: S = Q Kᵀ, P = exp2(S·scale − lse) (masked) → shared P, an mbarrier
    warpgroup 1: dP = dO Vᵀ; waits for P; dS = P ∘ (dP − δ) → shared dS, an mbarrier
    both:        dQ_w += dS K[:, w's columns]

(Until session 53 each warpgroup computed both products for half of the tile's keys and the
two exchanged their halves of dS: 36 MMAs and 1.25x the tensor pipe's cycles of operand reads
a step each; now 20 and 0.58x. docs/perf-log.md, session 53.) Q and dO are released at the
tile's end: released right after their register load, with a plain arrival, the shortest
causal tiles of persistent programs came out wrong (session 52), and a release fenced
against the producer's TMA was correct and measured no faster (session 53).

Keys past seqlen_k need no mask: TMA fills their K and V rows with zeros, so their dS (−P·δ)
meets a zero row of K. dQ is written once, in the inputs' dtype, from the registers.

Written in session 17, first run on the GPU in session 18; see docs/perf-log.md.
"""

from __future__ import annotations

import torch
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (mbarrier, tma, warpgroup_mma,
                                                              warpgroup_mma_wait)

from flashtriton.configs import LOG2E
from flashtriton.kernels.bwd_gluon import bwd_table_group, launch_geometry
from flashtriton.kernels.bwd_gluon_d256 import _publish
from flashtriton.kernels.common import cdiv, ensure_allocator, grid3, launch
from flashtriton.kernels.tile_walk import _pers_tile, _table_range, _table_tile
from flashtriton.kernels.schedule import HEAD_MAJOR, causal_fwd_order, row_block_table

_empty = torch.empty


@gluon.jit
def _dq_producer(rows, ring, schedule, Q, K, V, DO, LSE, DELTA, stride_qb, stride_qm,
                 stride_kb, stride_kn, stride_kh, stride_vb, stride_vn, stride_vh, stride_dob,
                 stride_dom, stride_lb, stride_lh):
    """The default partition: the program's Q and dO by TMA, with lse (as log2, +inf for rows
    past seqlen_q) and δ into shared memory beside them; then the K and V tiles its rows see
    through the rings."""
    q_smem, do_smem, lse_smem, delta_smem, q_ready, q_empty = rows
    k_smem, v_smem, kv_ready, kv_empty = ring
    batch, nheads, group, seqlen_q, seqlen_k, shift, n_m, total, order, table = schedule
    STAGES: gl.constexpr = k_smem.type.shape[0]
    BLOCK_M: gl.constexpr = q_smem.type.shape[2]
    HEAD_DIM: gl.constexpr = q_smem.type.shape[3]
    BLOCK_N: gl.constexpr = k_smem.type.shape[2]
    q_desc = tma.make_tensor_descriptor(Q, shape=[batch, seqlen_q, nheads * HEAD_DIM],
                                        strides=[stride_qb, stride_qm, 1],
                                        block_shape=[1, BLOCK_M, HEAD_DIM],
                                        layout=q_smem.type.layout)
    do_desc = tma.make_tensor_descriptor(DO, shape=[batch, seqlen_q, nheads * HEAD_DIM],
                                         strides=[stride_dob, stride_dom, 1],
                                         block_shape=[1, BLOCK_M, HEAD_DIM],
                                         layout=do_smem.type.layout)
    k_desc = tma.make_tensor_descriptor(K, shape=[batch, seqlen_k, nheads // group, HEAD_DIM],
                                        strides=[stride_kb, stride_kn, stride_kh, 1],
                                        block_shape=[1, BLOCK_N, 1, HEAD_DIM],
                                        layout=k_smem.type.layout)
    v_desc = tma.make_tensor_descriptor(V, shape=[batch, seqlen_k, nheads // group, HEAD_DIM],
                                        strides=[stride_vb, stride_vn, stride_vh, 1],
                                        block_shape=[1, BLOCK_N, 1, HEAD_DIM],
                                        layout=v_smem.type.layout)
    row_layout: gl.constexpr = gl.BlockedLayout([1], [32], [gl.num_warps()], [0])
    step = 0  # K/V steps of the program's earlier tiles
    local = 0  # the program's tiles so far
    lo, hi, stride = _table_range(table, total)
    for entry in range(lo, hi, stride):
        t = _table_tile(table, entry)
        b, h, h_k, m0, n_steps = _pers_tile(t, n_m, nheads, group, seqlen_k, shift, total,
                                            order, BLOCK_M, BLOCK_N, table.dtype.is_ptr())
        # both consumers are done with the last tile's Q, dO, lse and δ (fresh: passes phase 1)
        mbarrier.wait(q_empty, (local & 1) ^ 1)
        mbarrier.expect(q_ready, 2 * BLOCK_M * HEAD_DIM * 2)
        tma.async_copy_global_to_shared(q_desc, [b, m0, h * HEAD_DIM], q_ready, q_smem.index(0))
        tma.async_copy_global_to_shared(do_desc, [b, m0, h * HEAD_DIM], q_ready, do_smem.index(0))
        offs_m = m0 + gl.arange(0, BLOCK_M, layout=row_layout)
        l_base = b.to(gl.int64) * stride_lb + h * stride_lh
        lse = gl.load(LSE + l_base + offs_m, mask=offs_m < seqlen_q, other=float("-inf"))
        delta = gl.load(DELTA + l_base + offs_m, mask=offs_m < seqlen_q, other=0.0)
        lse_smem.store(gl.where(lse == float("-inf"), float("inf"), lse * 1.4426950408889634))
        delta_smem.store(delta)
        gl.thread_barrier()  # every thread's share is stored before the arrival publishes it
        mbarrier.arrive(q_ready)  # the second of its two arrivals
        for j in range(n_steps):
            g = step + j
            slot = g % STAGES
            mbarrier.wait(kv_empty.index(slot), ((g // STAGES) & 1) ^ 1)  # fresh: passes phase 1
            mbarrier.expect(kv_ready.index(slot), 2 * BLOCK_N * HEAD_DIM * 2)
            tma.async_copy_global_to_shared(k_desc, [b, j * BLOCK_N, h_k, 0],
                                            kv_ready.index(slot), k_smem.index(slot))
            tma.async_copy_global_to_shared(v_desc, [b, j * BLOCK_N, h_k, 0],
                                            kv_ready.index(slot), v_smem.index(slot))
        step += n_steps
        local += 1


@gluon.jit
def _dq_consumer(rows, ring, schedule, args, WG: gl.constexpr):
    """One consumer warpgroup: for each of the program's tiles, its half of dQ's columns over
    every key tile (see the module docstring), written at the tile's end."""
    q_smem, do_smem, lse_smem, delta_smem, q_ready, q_empty = rows
    k_smem, v_smem, kv_ready, kv_empty = ring
    batch, nheads, group, seqlen_q, seqlen_k, shift, n_m, total, order, table = schedule
    DQ, p_smem, ds_smem, p_ready, ds_ready, qk_scale, scale_ds, stride_dqb, stride_dqm, \
        stride_dqh = args
    STAGES: gl.constexpr = k_smem.type.shape[0]
    BLOCK_M: gl.constexpr = q_smem.type.shape[2]
    HEAD_DIM: gl.constexpr = q_smem.type.shape[3]
    BLOCK_N: gl.constexpr = k_smem.type.shape[2]
    HALF_D: gl.constexpr = HEAD_DIM // 2  # this warpgroup's columns of dQ
    dtype: gl.constexpr = DQ.dtype.element_ty
    WARPS: gl.constexpr = gl.num_warps()
    # S, dP: [BLOCK_M queries, BLOCK_N keys] (lse and δ one per row); dQ: [BLOCK_M, HALF_D]
    s_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[WARPS, 1],
                                                       instr_shape=[16, BLOCK_N, 16])
    acc_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[WARPS, 1],
                                                         instr_shape=[16, HALF_D, 16])
    # the tile's Q (warpgroup 0) or dO (warpgroup 1) in registers, the A of its score products
    op_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=s_layout, k_width=2)
    cols_n = gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, s_layout))
    cols_o = WG * HALF_D + gl.arange(0, HALF_D, layout=gl.SliceLayout(0, acc_layout))
    zero_s = gl.zeros([BLOCK_M, BLOCK_N], gl.float32, layout=s_layout)
    step = 0  # K/V steps of the program's earlier tiles
    local = 0  # the program's tiles so far
    lo, hi, stride = _table_range(table, total)
    for entry in range(lo, hi, stride):
        t = _table_tile(table, entry)
        b, h, h_k, m0, n_steps = _pers_tile(t, n_m, nheads, group, seqlen_k, shift, total,
                                            order, BLOCK_M, BLOCK_N, table.dtype.is_ptr())
        offs_m = m0 + gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, s_layout))
        dq = gl.zeros([BLOCK_M, HALF_D], gl.float32, layout=acc_layout)
        mbarrier.wait(q_ready, local & 1)
        if WG == 0:
            a_reg = q_smem.index(0).reshape([BLOCK_M, HEAD_DIM]).load(op_layout)
            row = gl.expand_dims(lse_smem.load(gl.SliceLayout(1, s_layout)), 1)
        else:
            a_reg = do_smem.index(0).reshape([BLOCK_M, HEAD_DIM]).load(op_layout)
            row = gl.expand_dims(delta_smem.load(gl.SliceLayout(1, s_layout)), 1)
        for j in range(n_steps):
            g = step + j
            slot = g % STAGES
            par = g % 2
            n0 = j * BLOCK_N
            k_s = k_smem.index(slot).reshape([BLOCK_N, HEAD_DIM])
            mbarrier.wait(kv_ready.index(slot), (g // STAGES) & 1)
            if WG == 0:  # S = Q Kᵀ, then P for warpgroup 1
                s = warpgroup_mma(a_reg, k_s.permute((1, 0)), zero_s, use_acc=False,
                                  is_async=True)
                s = warpgroup_mma_wait(num_outstanding=0, deps=(s,))
                p = gl.exp2(s * qk_scale - row)
                if n0 + BLOCK_N - 1 > m0 + shift:  # the causal diagonal cuts these keys
                    keep = gl.expand_dims(n0 + cols_n, 0) <= gl.expand_dims(offs_m, 1) + shift
                    p = gl.where(keep, p, 0.0)
                p_smem.index(par).store(p.to(dtype))
                _publish(p_ready.index(par))
                mbarrier.wait(ds_ready.index(par), (g // 2) & 1)
            else:  # dP = dO Vᵀ; once P is there, dS = P ∘ (dP − δ) for both warpgroups
                v_s = v_smem.index(slot).reshape([BLOCK_N, HEAD_DIM])
                dp = warpgroup_mma(a_reg, v_s.permute((1, 0)), zero_s, use_acc=False,
                                   is_async=True)
                dp = warpgroup_mma_wait(num_outstanding=0, deps=(dp,))
                dp = dp - row
                mbarrier.wait(p_ready.index(par), (g // 2) & 1)
                p = p_smem.index(par).load(s_layout).to(gl.float32)
                ds_smem.index(par).store((p * dp).to(dtype))
                _publish(ds_ready.index(par))
            dq = warpgroup_mma(ds_smem.index(par), k_s.slice(WG * HALF_D, HALF_D, dim=1), dq,
                               is_async=True)
            dq = warpgroup_mma_wait(num_outstanding=0, deps=(dq,))
            mbarrier.arrive(kv_empty.index(slot))  # K and V of this tile are no longer read
        # the tile's products are done (or it had none: rows that see no key, dQ = 0), so its
        # Q, dO, lse and δ may be overwritten
        gl.thread_barrier()
        mbarrier.arrive(q_empty)
        step += n_steps
        local += 1
        rows_o = m0 + gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, acc_layout))
        ptrs = (DQ + b.to(gl.int64) * stride_dqb + h.to(gl.int64) * stride_dqh
                + gl.expand_dims(rows_o, 1).to(gl.int64) * stride_dqm
                + gl.expand_dims(cols_o, 0))
        gl.store(ptrs, (dq * scale_ds).to(dtype), mask=gl.expand_dims(rows_o < seqlen_q, 1))


@gluon.jit
def _dq_consumer0(rows, ring, schedule, args):
    _dq_consumer(rows, ring, schedule, args, 0)


@gluon.jit
def _dq_consumer1(rows, ring, schedule, args):
    _dq_consumer(rows, ring, schedule, args, 1)


@gluon.jit
def _attn_bwd_dq_hs(Q, K, V, DO, LSE, DELTA, DQ,
                    stride_qb, stride_qm, stride_kb, stride_kn, stride_kh, stride_vb, stride_vn,
                    stride_vh, stride_dob, stride_dom, stride_dqb, stride_dqm, stride_dqh,
                    stride_lb, stride_lh, batch, nheads, group, seqlen_q, seqlen_k, shift,
                    qk_scale, scale_ds, order, table, HEAD_DIM: gl.constexpr,
                    BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, STAGES: gl.constexpr,
                    CAUSAL: gl.constexpr, CONSUMER_WARPS: gl.constexpr):
    """Tiles of BLOCK_M query rows of a head (see the module docstring), in ``_pers_tile``'s
    order (``order``: 0 not causal, else ``HEAD_MAJOR`` or ``ROW_MAJOR``, kernels/schedule.py):
    one tile per program, or persistent; a persistent launch with a ``table`` (a pointer,
    ``tile_walk._table_range``) takes each program's head-major tile ids from it."""
    dtype: gl.constexpr = Q.dtype.element_ty
    if not CAUSAL:
        shift = seqlen_k  # every key is left of every row's diagonal
    q_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([1, BLOCK_M, HEAD_DIM], dtype)
    kv_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([1, BLOCK_N, 1, HEAD_DIM],
                                                                   dtype)
    p_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BLOCK_M, BLOCK_N], dtype)
    q_smem = gl.allocate_shared_memory(dtype, [1, 1, BLOCK_M, HEAD_DIM], q_layout)
    do_smem = gl.allocate_shared_memory(dtype, [1, 1, BLOCK_M, HEAD_DIM], q_layout)
    k_smem = gl.allocate_shared_memory(dtype, [STAGES, 1, BLOCK_N, 1, HEAD_DIM], kv_layout)
    v_smem = gl.allocate_shared_memory(dtype, [STAGES, 1, BLOCK_N, 1, HEAD_DIM], kv_layout)
    p_smem = gl.allocate_shared_memory(dtype, [2, BLOCK_M, BLOCK_N], p_layout)
    ds_smem = gl.allocate_shared_memory(dtype, [2, BLOCK_M, BLOCK_N], p_layout)
    row_layout: gl.constexpr = gl.SwizzledSharedLayout(1, 1, 1, order=[0])
    lse_smem = gl.allocate_shared_memory(gl.float32, [BLOCK_M], row_layout)
    delta_smem = gl.allocate_shared_memory(gl.float32, [BLOCK_M], row_layout)
    q_ready = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    q_empty = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    kv_ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    kv_empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    p_ready = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    ds_ready = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    mbarrier.init(q_ready, count=2)  # the TMA bytes' and the lse / δ stores
    mbarrier.init(q_empty, count=2)  # one arrival per consumer
    for i in gl.static_range(STAGES):
        mbarrier.init(kv_ready.index(i), count=1)
        mbarrier.init(kv_empty.index(i), count=2)  # one arrival per consumer
    for i in gl.static_range(2):
        mbarrier.init(p_ready.index(i), count=1)  # warpgroup 0's P of a step parity
        mbarrier.init(ds_ready.index(i), count=1)  # warpgroup 1's dS

    rows = (q_smem, do_smem, lse_smem, delta_smem, q_ready, q_empty)
    ring = (k_smem, v_smem, kv_ready, kv_empty)
    n_m = gl.cdiv(seqlen_q, BLOCK_M)
    total = n_m * batch * nheads
    schedule = (batch, nheads, group, seqlen_q, seqlen_k, shift, n_m, total, order, table)
    loads = (rows, ring, schedule, Q, K, V, DO, LSE, DELTA, stride_qb, stride_qm, stride_kb,
             stride_kn, stride_kh, stride_vb, stride_vn, stride_vh, stride_dob, stride_dom,
             stride_lb, stride_lh)
    work = (rows, ring, schedule, (DQ, p_smem, ds_smem, p_ready, ds_ready, qk_scale, scale_ds,
                                   stride_dqb, stride_dqm, stride_dqh))
    gl.warp_specialize([(_dq_producer, loads), (_dq_consumer0, work), (_dq_consumer1, work)],
                       [CONSUMER_WARPS, CONSUMER_WARPS], [240, 240])


def dq_tile_order(causal: bool, persistent: bool, seqlen_q: int, seqlen_k: int, shift: int,
                  heads: int, block_m: int, block_n: int, programs: int) -> int:
    """The kernel's ``order``: 0 (head by head) when not causal; causal, each head's longest
    tiles first, listed head by head (``HEAD_MAJOR``) or, persistent, in whichever order the
    forward's model (``causal_fwd_order``) balances on the ``programs`` programs."""
    if not causal:
        return 0
    if not persistent:
        return HEAD_MAJOR
    return causal_fwd_order(seqlen_q, seqlen_k, shift, heads, block_m, block_n, programs)


def attn_bwd_dq_gluon_d256(do, q, k, v, delta, lse, params, block_m: int = 64,
                           block_n: int = 64, num_warps: int = 4, num_stages: int = 2,
                           persistent: bool = False, tile_order: str | None = None,
                           record=None):
    """Launch the head-dim-256 Gluon dQ kernel (the calls kernels/bwd_gluon.py's
    ``gluon_bwd_eligible`` covers, at head dim 256); ``delta`` is the preprocessed
    rowsum(dO ∘ O) (less dlse). One program per tile of ``block_m`` query rows of a head, or
    (``persistent``) one per SM walking the tiles. ``tile_order`` "greedy" or "greedyN"
    (persistent only): causal, each program's tiles from a table made on the host
    (``schedule.row_block_table``, as the persistent forward's);
    without a mask the tiles cost the same and the plain order stays. ``record``: as
    ``attn_bwd_gluon``'s. Returns dq in q's dtype."""
    ensure_allocator()  # the kernel builds its TMA descriptors on the device
    batch, seqlen_q, nheads, d = q.shape
    seqlen_k, nheads_k = k.shape[1], k.shape[2]
    if d != 256:
        raise ValueError(f"head dim: attn_bwd_dq_gluon_d256 covers 256, not {d}")
    if num_warps != 4 or block_m != 64 or block_n != 64:
        raise ValueError("attn_bwd_dq_gluon_d256: one warpgroup per consumer (num_warps=4), "
                         f"64-row blocks, 64-key tiles; got num_warps={num_warps}, "
                         f"block_m={block_m}, block_n={block_n}")
    group_size = bwd_table_group(tile_order, persistent, "attn_bwd_dq_gluon_d256")
    dq = _empty(q.shape, dtype=q.dtype, device=q.device)
    causal, shift, maxnreg, grid = launch_geometry(
        params, seqlen_q, seqlen_k, cdiv(seqlen_q, block_m) * batch * nheads, num_warps,
        persistent, q.device)
    table = 0  # (an integer: no table)
    if causal and group_size is not None:
        order = HEAD_MAJOR  # the table's ids are head-major
        table = row_block_table(seqlen_q, seqlen_k, shift, block_m, block_n, batch * nheads,
                                grid[0], group_size, q.device)
    else:
        order = dq_tile_order(causal, persistent, seqlen_q, seqlen_k, shift, batch * nheads,
                              block_m, block_n, grid[0])
    strides = (*q.stride()[:2], *k.stride()[:3], *v.stride()[:3], *do.stride()[:2],
               *dq.stride()[:3], *lse.stride()[:2])
    rest = (*strides, batch, nheads, nheads // nheads_k, seqlen_q, seqlen_k, shift,
            params.softmax_scale * LOG2E, params.softmax_scale, order, table)
    entry = launch(_attn_bwd_dq_hs, grid, q, k, v, do, lse, delta, dq, *rest,
                   HEAD_DIM=d, BLOCK_M=block_m, BLOCK_N=block_n, STAGES=num_stages,
                   CAUSAL=causal, CONSUMER_WARPS=num_warps, num_warps=4, maxnreg=maxnreg)
    if record is not None and entry is not None:
        record.append((entry, grid3(grid), rest))
    return dq
