"""The backward's dK/dV kernel on Hopper in Gluon, with dQ added into a float32 buffer by TMA
reductions: the plain path (no mask, softcap, ALiBi, dropout or left window), 16-bit inputs,
head dim 64 or 128, causal or not, dense, for sm_90. Warp-specialized like the forward
(kernels/fwd_gluon.py):

- a program takes tiles of 2·BLOCK_N keys of a key head: one per program, or, persistent, one
  program per SM walks them (causal: longest first; ``_bwd_tile``);
- a producer partition streams the query blocks' Q and dO tiles through ``STAGES``-deep rings
  by TMA, their lse and δ beside them (for grouped-query attention it walks every query head
  of the key head's group), and each tile's K and V once the consumers are done with the last;
- two consumer warpgroups own BLOCK_N keys each of the tile's 2·BLOCK_N keys, keep their K
  and V tiles in shared memory (at head dim 64 in registers too, as the A operands of Sᵀ and
  dPᵀ) and their dK, dV accumulators in registers (written at the tile's end by TMA, staged
  in the warpgroup's dQ buffer). Scores are computed transposed (keys are a warpgroup's MMA
  rows), so Pᵀ and dSᵀ stay in registers as the A operands of the dV and dK products. Per
  query block:

      Sᵀ = K Qᵀ, dPᵀ = V dOᵀ          (issued together)
      Pᵀ = exp2(Sᵀ·scale − lse)        dV += Pᵀ dO   (issued as soon as Pᵀ is ready)
      dSᵀ = Pᵀ ∘ (dPᵀ − δ)            dK += dSᵀ Q;  dSᵀ → shared memory
      dQ_part = dS K  → shared memory → TMA reduce-add into the float32 dQ

  Each warpgroup adds its own [BLOCK_M, HEAD_DIM] part of dQ; or, with SPLIT_DQ, the two share
  their dS tiles (an mbarrier per buffer) and each computes half of dQ's columns over all
  2·BLOCK_N keys, so a query block's dQ is added once per program (at head dim 64, K is kept
  with a 64-byte swizzle so that its 32-column halves start on a swizzle row). Computed in its
  own step, that product makes the warpgroup that finished its dS first wait for the other's;
  with DEFER_DQ it is issued in the next step (dS buffers of four step parities), so each
  waits only for the other's previous step, and a step's dSᵀ is published (fence, barrier,
  arrival: ``_publish_ds``) after its dK and dQ products are issued; with DQ_ON_EMPTY it
  waits for that step on the Q/dO ring's ``empty`` barrier, which both arrive on at the step's
  end anyway, instead of an mbarrier of its own (one arrival fewer per step); with DQ_ALT
  (head dim 64) the warpgroups take turns, step by step, at a step's whole dQ product, which
  then reads the step's dSᵀ once instead of twice (the step loop unrolled by two, so that each
  half knows statically whose turn it is). No warpgroup MMA
  stays in flight across the loop's back edge (ptxas serializes every MMA of the kernel
  otherwise; see fwd_gluon.py).

The launcher (``attn_bwd_gluon``) returns dq, dk, dv: dq is accumulated in float32 in runs of
the tiles' row blocks (``_dq_add``), then put in place and cast by a small ``tl`` kernel
(``kernels/dq_runs.py``). The ``tl`` kernels (kernels/bwd.py) remain the portable path and the
deterministic one.
"""

from __future__ import annotations

import torch
from triton._C.libtriton import ir
from triton.experimental import gluon
from triton.experimental.gluon.language import _core as gl_core
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (fence_async_shared, mbarrier, tma,
                                                              warpgroup_mma, warpgroup_mma_wait)

from flashtriton.configs import LOG2E
from flashtriton.kernels.common import (cdiv, ensure_allocator, grid3, launch, num_sms,
                                        tma_ready)
from flashtriton.kernels.dq_runs import dq_cast, dq_runs_numel
from flashtriton.kernels.fwd_gluon import gluon_eligible
from flashtriton.kernels.tile_walk import _snake, _table_range, _table_tile
from flashtriton.kernels.schedule import bwd_tile_costs, device_table, greedy_group

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
def _bwd_tile(t, n_kb, nheads_k, seqlen_q, shift, total, reverse, BLOCK_M: gl.constexpr,
              BLOCK_N2: gl.constexpr):
    """Tile ``t`` of the backward: (batch, key head, first key, first query block, query
    blocks). Head by head, a head's key blocks in order: the programs running together share
    the head's Q, dO and (L2-resident) float32 dQ (a key-block-major order across the heads,
    its dQ reductions spread over every head, measured 501.7 TFLOP/s at d128 16k causal with
    one tile per program, 221.1 at 1k; docs/perf-log.md, session 5). Causal (``reverse``), a head's longest tiles come
    first (key block 0 sees every query) and a persistent launch takes them in ``_snake``
    order (one program per tile: the identity). A launch with a table
    (``tile_walk._table_range``) passes its tile ids with ``reverse`` 0."""
    idx = t
    if reverse:
        idx = _snake(t, total)
    bh = idx // n_kb
    j = idx % n_kb
    n0 = j * BLOCK_N2
    # query blocks that see a key of this tile: from the one holding row n0 - shift
    m_start = gl.maximum(n0 - shift, 0) // BLOCK_M
    n_m = gl.maximum(gl.cdiv(seqlen_q, BLOCK_M) - m_start, 0)
    return bh // nheads_k, bh % nheads_k, n0, m_start, n_m


@gluon.jit
def _ring(s, N: gl.constexpr, BITS: gl.constexpr):
    """Position ``s`` (a count of steps, at least -N) in a ring of N slots: its slot, s mod N,
    and the phase of its barrier, the parity of s // N. With ``BITS`` and a power-of-two N by
    bit operations: the compiler cannot know s >= 0, and a signed % or // costs three or four
    integer instructions, on every step of every warp. (At head dim 64 ptxas then moves the
    step's descriptor arithmetic from the uniform registers to the vector ones, 828 -> 910
    instructions a loop: callers pass BITS = HEAD_DIM > 64; docs/perf-log.md, session 34.)"""
    if BITS and (N & (N - 1)) == 0:
        SHIFT: gl.constexpr = (N > 1) + (N > 2) + (N > 4) + (N > 8)
        slot = s & (N - 1)
        phase = (s >> SHIFT) & 1
    else:
        slot = (s + N) % N
        phase = (s // N) & 1
    return slot, phase


@gluon.jit
def _step_rows(h_k, group, n_m, m_start, it, BLOCK_M: gl.constexpr):
    """Step ``it`` of a tile: its query head and first row. A tile's steps walk the group's
    query heads, n_m query blocks each; without grouping the launch passes group as the
    constant 1 (Triton makes an integer argument equal to 1 a constexpr), and the step needs
    no division by n_m (an integer division on every step of every warp otherwise)."""
    if group == 1:
        head = h_k
        m0 = (m_start + it) * BLOCK_M
    else:
        head = h_k * group + it // n_m
        m0 = (m_start + it % n_m) * BLOCK_M
    return head, m0


@gluon.jit
def _bwd_producer(staged, kv, schedule, Q, K, V, DO, LSE, DELTA, stride_qb, stride_qm,
                  stride_kb, stride_kn, stride_kh, stride_vb, stride_vn, stride_vh, stride_dob,
                  stride_dom, stride_lb, stride_lh):
    """The default partition: for each of the program's tiles, the Q and dO tiles of every
    (query head of the group, query block) step into the rings by TMA, with the block's lse (as
    log2, +inf for empty rows) and δ into shared memory beside them (held in the consumers'
    registers from the step's start they would spill); and, after the tile's first step, the
    tile's K and V, once the consumers are done with the previous tile's. A tile is
    KV_PARTS·BLOCK_N keys: two BLOCK_N halves here, one block for kernels/bwd_gluon_d256.py."""
    q_smem, do_smem, lse_smem, delta_smem, ready, empty = staged
    k_smem, v_smem, kv_ready, kv_empty = kv
    batch, nheads, group, seqlen_q, seqlen_k, shift, n_kb, total, reverse, table = schedule
    STAGES: gl.constexpr = q_smem.type.shape[0]
    BLOCK_M: gl.constexpr = q_smem.type.shape[2]
    HEAD_DIM: gl.constexpr = q_smem.type.shape[3]
    KV_PARTS: gl.constexpr = k_smem.type.shape[0]
    BLOCK_N: gl.constexpr = k_smem.type.shape[2]
    nheads_k = nheads // group
    # (batch, seqlen, heads · head_dim) views of Q and dO: a head is a column offset
    q_desc = tma.make_tensor_descriptor(Q, shape=[batch, seqlen_q, nheads * HEAD_DIM],
                                        strides=[stride_qb, stride_qm, 1],
                                        block_shape=[1, BLOCK_M, HEAD_DIM],
                                        layout=q_smem.type.layout)
    do_desc = tma.make_tensor_descriptor(DO, shape=[batch, seqlen_q, nheads * HEAD_DIM],
                                         strides=[stride_dob, stride_dom, 1],
                                         block_shape=[1, BLOCK_M, HEAD_DIM],
                                         layout=do_smem.type.layout)
    k_desc = tma.make_tensor_descriptor(K, shape=[batch, seqlen_k, nheads_k, HEAD_DIM],
                                        strides=[stride_kb, stride_kn, stride_kh, 1],
                                        block_shape=[1, BLOCK_N, 1, HEAD_DIM],
                                        layout=k_smem.type.layout)
    v_desc = tma.make_tensor_descriptor(V, shape=[batch, seqlen_k, nheads_k, HEAD_DIM],
                                        strides=[stride_vb, stride_vn, stride_vh, 1],
                                        block_shape=[1, BLOCK_N, 1, HEAD_DIM],
                                        layout=v_smem.type.layout)
    row_layout: gl.constexpr = gl.BlockedLayout([1], [32], [gl.num_warps()], [0])
    rows = gl.arange(0, BLOCK_M, layout=row_layout)
    step = 0  # ring position: runs on across tiles
    kv_count = 0  # tiles whose K and V were loaded
    lo, hi, stride = _table_range(table, total)
    for entry in range(lo, hi, stride):
        t = _table_tile(table, entry)
        b, h_k, n0, m_start, n_m = _bwd_tile(t, n_kb, nheads_k, seqlen_q, shift, total,
                                             reverse, BLOCK_M, KV_PARTS * BLOCK_N)
        l_base = b.to(gl.int64) * stride_lb
        for it in range(group * n_m):
            slot, phase = _ring(step + it, STAGES, HEAD_DIM > 64)
            head, m0 = _step_rows(h_k, group, n_m, m_start, it, BLOCK_M)
            mbarrier.wait(empty.index(slot), phase ^ 1)  # a fresh barrier passes phase 1
            mbarrier.expect(ready.index(slot), 2 * BLOCK_M * HEAD_DIM * 2)
            tma.async_copy_global_to_shared(q_desc, [b, m0, head * HEAD_DIM], ready.index(slot),
                                            q_smem.index(slot))
            tma.async_copy_global_to_shared(do_desc, [b, m0, head * HEAD_DIM],
                                            ready.index(slot), do_smem.index(slot))
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
            if it == 0:  # K and V, once both consumers are done with the previous tile's
                mbarrier.wait(kv_empty, (kv_count & 1) ^ 1)
                mbarrier.expect(kv_ready, 2 * KV_PARTS * BLOCK_N * HEAD_DIM * 2)
                for w in gl.static_range(KV_PARTS):
                    tma.async_copy_global_to_shared(k_desc, [b, n0 + w * BLOCK_N, h_k, 0],
                                                    kv_ready, k_smem.index(w))
                    tma.async_copy_global_to_shared(v_desc, [b, n0 + w * BLOCK_N, h_k, 0],
                                                    kv_ready, v_smem.index(w))
        step += group * n_m
        kv_count += (n_m > 0).to(gl.int32)


@gluon.jit
def _dq_product(ds_smem, bars, k_both, k_s, zero_dq, s, WG: gl.constexpr, wait,
                BOTH: gl.constexpr):
    """Issue step ``s``'s dQ product for warpgroup WG (asynchronous; the caller waits): with
    ``BOTH`` (split dQ) it waits (if ``wait``) for both warpgroups' dSᵀ of the step and takes
    WG's columns (``zero_dq`` narrower than the head dim) or all of them (the warpgroups taking
    turns) over both key halves; otherwise its own dSᵀ against its own K.
    ``bars``: what it waits on, ds_ready (one barrier per step parity, which both arrive on
    once their dSᵀ is stored) or, deferred with ``dq_on_empty``, the Q/dO ring's ``empty``
    barriers (one per slot, which both arrive on later in the step, once its products are
    done)."""
    PARITIES: gl.constexpr = ds_smem.type.shape[0] // 2
    DQ_COLS: gl.constexpr = zero_dq.type.shape[1]
    BARRIERS: gl.constexpr = bars.type.shape[0]
    BITS: gl.constexpr = k_s.type.shape[1] > 64  # the head dim (see _ring)
    par, _ = _ring(s, PARITIES, BITS)  # s may be -1 (not waited for): a valid buffer still
    buf = par * 2
    if BOTH:
        bar, phase = _ring(s, BARRIERS, BITS)
        mbarrier.wait(bars.index(bar), phase, pred=wait)
        if DQ_COLS < k_s.type.shape[1]:
            k0 = k_both[0].slice(WG * DQ_COLS, DQ_COLS, dim=1)
            k1 = k_both[1].slice(WG * DQ_COLS, DQ_COLS, dim=1)
        else:
            k0 = k_both[0]
            k1 = k_both[1]
        dq = warpgroup_mma(ds_smem.index(buf).permute((1, 0)), k0, zero_dq, use_acc=False,
                           is_async=True)
        dq = warpgroup_mma(ds_smem.index(buf + 1).permute((1, 0)), k1, dq, is_async=True)
    else:
        dq = warpgroup_mma(ds_smem.index(buf + WG).permute((1, 0)), k_s, zero_dq,
                           use_acc=False, is_async=True)
    return dq


@gluon.jit
def _publish_ds(ds_ready, par, arrive: gl.constexpr):
    """Make this warpgroup's stored dSᵀ tile visible to warpgroup MMAs: fenced for the async
    proxy, every thread's share in place (a warpgroup barrier), and, if ``arrive``, announced
    on ``ds_ready`` (index ``par``) to the other warpgroup's split dQ product."""
    fence_async_shared()
    gl.thread_barrier()
    if arrive:
        mbarrier.arrive(ds_ready.index(par))


@gluon.jit
def _stage(buf, tile):
    """Put a register tile into ``buf`` for a TMA operation to read: once the previous TMA
    operation on the buffer has read it, and with every thread's share stored and visible to
    the TMA unit before this returns."""
    tma.store_wait(pendings=0)
    buf.reshape(tile.type.shape).store(tile)  # (the buffer's leading 1s dropped)
    fence_async_shared()
    gl.thread_barrier()


@gluon.jit
def _dq_add(dq_desc, dq_s, dq, run):
    """Add a finished dQ part (dS·K, not yet scaled by the softmax scale: the launcher's cast
    scales it) into run ``run`` of the float32 dQ accumulator by one
    TMA reduction of contiguous bytes. The accumulator is kept in runs (``dq_runs_numel``
    values): for each (batch, head, part of DQ_COLS columns, block of BLOCK_M rows), in that
    order, BLOCK_M · DQ_COLS values, its 8-column blocks one after another, each block's rows
    of 8 values in order; the launcher's cast (kernels/dq_runs.py) puts them back
    in (batch, seqlen, heads, head_dim). The staging buffer ``dq_s`` holds the same run: the
    accumulator layout gives each thread two adjacent columns of a row in each 8-column
    block, so a half-warp's 8-byte stores (4 rows × 4 threads) fill 128 contiguous bytes
    without bank conflicts, and the reduction reads the buffer as rows of 256 values. (A
    [rows, columns] tile under the 128-byte swizzle took two wavefronts per half-warp store;
    a reduction in 32-byte rows spread over the heads' rows cost more than that saved:
    perf-log session 29.)"""
    ROWS: gl.constexpr = dq.type.shape[0]
    COLS: gl.constexpr = dq.type.shape[1]
    _stage(dq_s, gl.permute(gl.reshape(dq, [ROWS, COLS // 8, 8]), (1, 0, 2)))
    flat = dq_s._reinterpret(gl.float32, dq_desc.block_shape, dq_desc.layout)
    _tma_add(dq_desc, [run * dq_desc.block_shape[0], 0], flat)


@gluon.jit
def _store_tile(out_s, desc, tile, b, row, h, col):
    """Write a finished tile at (b, row, h, col) of a (batch, seqlen, heads, head_dim)
    descriptor by TMA, staged in ``out_s``."""
    _stage(out_s, tile)
    tma.async_copy_shared_to_global(desc, [b, row, h, col], out_s)


@gluon.jit
def _bwd_step(staged, ds_smem, dq_bars, dq_desc, dq_s, ops, tile, dk, dv, step, it, prev_run,
              WG: gl.constexpr, DQ_HERE: gl.constexpr, BOTH: gl.constexpr,
              DQ_ON_EMPTY: gl.constexpr):
    """Step ``it`` of a tile for consumer warpgroup WG (see the module docstring): its Sᵀ and
    dPᵀ, dV and dK, its dSᵀ stored, and a dQ product if ``DQ_HERE``: this step's, or with
    deferred dQ the previous step's; then that dQ added into its run (``_dq_add``): this
    step's, or ``prev_run``, the previous step's. ``tile``: (b, nheads, h_k, group, n_m,
    m_start, n_qb, part), where the tile's steps are; ``step``: the program's steps before the
    tile's (for the ring's slots and phases). Returns dk, dv and this step's run of dQ."""
    q_smem, do_smem, lse_smem, delta_smem, ready, empty = staged
    k_a, v_a, k_both, k_s, offs_n, cols_m, zero_st, zero_dq, keys0, shift, qk_scale = ops
    STAGES: gl.constexpr = q_smem.type.shape[0]
    BLOCK_M: gl.constexpr = q_smem.type.shape[2]
    HEAD_DIM: gl.constexpr = q_smem.type.shape[3]
    BLOCK_N: gl.constexpr = zero_st.type.shape[0]
    DQ_COLS: gl.constexpr = zero_dq.type.shape[1]
    SPLIT_DQ: gl.constexpr = DQ_COLS < HEAD_DIM
    PARITIES: gl.constexpr = ds_smem.type.shape[0] // 2
    DEFER_DQ: gl.constexpr = PARITIES > 2
    dtype: gl.constexpr = q_smem.dtype
    st_layout: gl.constexpr = zero_st.type.layout
    op_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=dk.type.layout,
                                                  k_width=2)
    PARTS: gl.constexpr = HEAD_DIM // DQ_COLS
    b, nheads, h_k, group, n_m, m_start, n_qb, part = tile
    s = step + it
    slot, phase = _ring(s, STAGES, HEAD_DIM > 64)
    par, _ = _ring(s, PARITIES, HEAD_DIM > 64)
    head, m0 = _step_rows(h_k, group, n_m, m_start, it, BLOCK_M)
    offs_m = m0 + cols_m
    q_s = q_smem.index(slot).reshape([BLOCK_M, HEAD_DIM])
    do_s = do_smem.index(slot).reshape([BLOCK_M, HEAD_DIM])
    mbarrier.wait(ready.index(slot), phase)
    st = warpgroup_mma(k_a, q_s.permute((1, 0)), zero_st, use_acc=False, is_async=True)
    dpt = warpgroup_mma(v_a, do_s.permute((1, 0)), zero_st, use_acc=False, is_async=True)
    st = warpgroup_mma_wait(num_outstanding=1, deps=(st,))
    # rows and keys past the sequences need no mask: their lse is +inf (P = 0), their K, V and
    # dO rows are zero (no dQ, dK rows not stored)
    lse2 = lse_smem.index(slot).load(gl.SliceLayout(0, st_layout))
    pt = gl.exp2(st * qk_scale - gl.expand_dims(lse2, 0))
    if keys0 + BLOCK_N - 1 > m0 + shift:  # the causal diagonal cuts this block
        keep = gl.expand_dims(offs_n, 1) <= gl.expand_dims(offs_m, 0) + shift
        pt = gl.where(keep, pt, 0.0)
    dv = warpgroup_mma(gl.convert_layout(pt.to(dtype), op_layout), do_s, dv, is_async=True)
    dpt = warpgroup_mma_wait(num_outstanding=1, deps=(dpt,))
    delta = delta_smem.index(slot).load(gl.SliceLayout(0, st_layout))
    dst = (pt * (dpt - gl.expand_dims(delta, 0))).to(dtype)
    # dSᵀ tiles: PARITIES buffers of both warpgroups' [BLOCK_N, BLOCK_M], by step
    buf = par * 2
    ds_smem.index(buf + WG).store(dst)
    if not DEFER_DQ:  # this step's dQ product reads it
        _publish_ds(dq_bars, par, SPLIT_DQ and not DQ_ON_EMPTY)
    dk = warpgroup_mma(gl.convert_layout(dst, op_layout), q_s, dk, is_async=True)
    # dQ of the previous step with DEFER_DQ (a tile's first step has none: its product, on a
    # stale dSᵀ buffer no one writes before this step ends, is dropped, since an MMA in flight
    # cannot enter a branch), else of this step
    if DEFER_DQ:
        if DQ_HERE:
            dq = _dq_product(ds_smem, dq_bars, k_both, k_s, zero_dq, s - 1, WG, it > 0, BOTH)
        # the next step's dQ product is the first to read this step's dSᵀ: its fence waits for
        # the stores while the products run (before them it held a d64 consumer ~7% of its
        # samples; moved here, d64 +1.8-2.4% from 4k keys: perf-log sessions 20 and 21)
        _publish_ds(dq_bars, par, not DQ_ON_EMPTY)
    else:
        dq = _dq_product(ds_smem, dq_bars, k_both, k_s, zero_dq, s, WG, True, BOTH)
    if DQ_HERE:
        dv, dk, dq = warpgroup_mma_wait(num_outstanding=0, deps=(dv, dk, dq))
    else:
        dv, dk = warpgroup_mma_wait(num_outstanding=0, deps=(dv, dk))
    mbarrier.arrive(empty.index(slot))  # Q and dO of this step are no longer read
    run = ((b * nheads + head) * PARTS + part) * n_qb + m0 // BLOCK_M
    if DEFER_DQ:
        # (a barrier on every path from the arrival on `empty` to the next step's wait on
        # `ready`: Triton's shared-memory analysis puts one at the loop's top otherwise, on
        # every step; _dq_add has one)
        if DQ_HERE:
            if it > 0:
                _dq_add(dq_desc, dq_s, dq, prev_run)
            else:
                gl.thread_barrier()
        else:
            gl.thread_barrier()
    else:
        _dq_add(dq_desc, dq_s, dq, run)
    return dk, dv, run


@gluon.jit
def _bwd_consumer(staged, kv, schedule, args, WG: gl.constexpr):
    """One consumer warpgroup: for each of the program's tiles, its BLOCK_N keys against every
    step of Q and dO (see the module docstring); dK and dV written by TMA at the tile's end."""
    q_smem, do_smem, lse_smem, delta_smem, ready, empty = staged
    k_smem, v_smem, kv_ready, kv_empty = kv
    batch, nheads, group, seqlen_q, seqlen_k, shift, n_kb, total, reverse, table = schedule
    (Q, DQ, DK, DV, ds_smem, dq_smem, ds_sync, qk_scale, scale_ds,
     stride_dkb, stride_dkn, stride_dkh, stride_dvb, stride_dvn, stride_dvh) = args
    STAGES: gl.constexpr = q_smem.type.shape[0]
    BLOCK_M: gl.constexpr = q_smem.type.shape[2]
    HEAD_DIM: gl.constexpr = q_smem.type.shape[3]
    BLOCK_N: gl.constexpr = k_smem.type.shape[2]
    DQ_COLS: gl.constexpr = dq_smem.type.shape[2] * dq_smem.type.shape[4]  # blocks of 8
    SPLIT_DQ: gl.constexpr = DQ_COLS < HEAD_DIM  # each warpgroup: DQ_COLS columns, all keys
    PARITIES: gl.constexpr = ds_smem.type.shape[0] // 2
    DEFER_DQ: gl.constexpr = PARITIES > 2  # a step's dQ product in the next step
    # what a split dQ product waits on for the step's two dSᵀ: ds_ready, one barrier per step
    # parity, arrived on as soon as dSᵀ is stored; or, if the kernel passes no ds_ready
    # (DQ_ON_EMPTY, deferred dQ), the Q/dO ring's `empty`, which both consumers arrive on once
    # the step's products are done, so its dSᵀ is stored: one arrival, and the warpgroup
    # barrier Triton puts before it, fewer per step
    DQ_ON_EMPTY: gl.constexpr = len(ds_sync) == 0
    # DQ_ALT, read off the buffers (a constexpr handed through warp_specialize's arguments
    # arrives as a value): DQ_ON_EMPTY comes only with split dQ (attn_bwd_gluon), so dQ
    # staged whole there means the warpgroups take turns at it
    ALT: gl.constexpr = DQ_ON_EMPTY and not SPLIT_DQ
    BOTH: gl.constexpr = SPLIT_DQ or ALT  # a dQ product over both warpgroups' dSᵀ
    if DQ_ON_EMPTY:
        dq_bars = empty
    else:
        dq_bars = ds_sync[0]
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
    # head dim 64: the warpgroup's K and V tiles, the A operands of Sᵀ and dPᵀ, are held in
    # registers for the whole tile (16 registers a thread each), so that those products read
    # only Q and dO from shared memory, whose bandwidth the d64 step's products nearly fill
    KV_IN_REGS: gl.constexpr = HEAD_DIM <= 64
    kv_op_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=st_layout,
                                                     k_width=2)
    nheads_k = nheads // group
    k_s = k_smem.index(WG).reshape([BLOCK_N, HEAD_DIM])
    v_s = v_smem.index(WG).reshape([BLOCK_N, HEAD_DIM])
    k_both = (k_smem.index(0).reshape([BLOCK_N, HEAD_DIM]),
              k_smem.index(1).reshape([BLOCK_N, HEAD_DIM]))
    dq_s = dq_smem.index(WG)
    PARTS: gl.constexpr = HEAD_DIM // DQ_COLS  # parts of DQ_COLS columns in a head
    part: gl.constexpr = WG if SPLIT_DQ else 0  # this warpgroup's
    # the float32 dQ accumulator in runs of BLOCK_M · DQ_COLS values (see _dq_add), seen as
    # rows of 256 values: a reduction adds one run, DQ_RUN_ROWS rows
    DQ_RUN_ROWS: gl.constexpr = BLOCK_M * DQ_COLS // 256
    n_qb = gl.cdiv(seqlen_q, BLOCK_M)
    dq_desc = tma.make_tensor_descriptor(DQ, shape=[batch * nheads * PARTS * n_qb * DQ_RUN_ROWS,
                                                    256],
                                         strides=[256, 1], block_shape=[DQ_RUN_ROWS, 256],
                                         layout=gl.NVMMASharedLayout(swizzle_byte_width=0,
                                                                     element_bitwidth=32,
                                                                     rank=2))
    # dK, dV: staged in dq_s (BLOCK_M · DQ_COLS float32 ≥ BLOCK_N · HEAD_DIM 16-bit values)
    out_layout: gl.constexpr = v_smem.type.layout
    out_s = dq_s._reinterpret(dtype, [1, BLOCK_N, 1, HEAD_DIM], out_layout)
    dk_desc = tma.make_tensor_descriptor(DK, shape=[batch, seqlen_k, nheads_k, HEAD_DIM],
                                         strides=[stride_dkb, stride_dkn, stride_dkh, 1],
                                         block_shape=[1, BLOCK_N, 1, HEAD_DIM], layout=out_layout)
    dv_desc = tma.make_tensor_descriptor(DV, shape=[batch, seqlen_k, nheads_k, HEAD_DIM],
                                         strides=[stride_dvb, stride_dvn, stride_dvh, 1],
                                         block_shape=[1, BLOCK_N, 1, HEAD_DIM], layout=out_layout)
    cols_m = gl.arange(0, BLOCK_M, layout=gl.SliceLayout(0, st_layout))
    zero_st = gl.zeros([BLOCK_N, BLOCK_M], gl.float32, layout=st_layout)
    zero_dq = gl.zeros([BLOCK_M, DQ_COLS], gl.float32, layout=dq_layout)
    step = 0
    kv_count = 0
    lo, hi, stride = _table_range(table, total)
    for entry in range(lo, hi, stride):
        t = _table_tile(table, entry)
        b, h_k, n0, m_start, n_m = _bwd_tile(t, n_kb, nheads_k, seqlen_q, shift, total,
                                             reverse, BLOCK_M, 2 * BLOCK_N)
        keys0 = n0 + WG * BLOCK_N
        offs_n = keys0 + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(1, st_layout))
        dk = gl.zeros([BLOCK_N, HEAD_DIM], gl.float32, layout=acc_layout)
        dv = gl.zeros([BLOCK_N, HEAD_DIM], gl.float32, layout=acc_layout)
        n_steps = group * n_m
        mbarrier.wait(kv_ready, kv_count & 1, pred=n_steps > 0)
        if KV_IN_REGS:  # (a tile without steps loads stale values it never uses)
            k_a = k_s.load(kv_op_layout)
            v_a = v_s.load(kv_op_layout)
        else:
            k_a = k_s
            v_a = v_s
        ops = (k_a, v_a, k_both, k_s, offs_n, cols_m, zero_st, zero_dq, keys0, shift, qk_scale)
        tile = (b, nheads, h_k, group, n_m, m_start, n_qb, part)
        prev_run = 0  # the previous step's run of dQ (DEFER_DQ)
        if ALT:  # two steps an iteration: the first's dQ product (of the step before it) is
            # the second warpgroup's, the second's the first's; an odd count's last step is
            # an iteration's first
            for i in range(n_steps // 2):
                for half in gl.static_range(2):
                    dk, dv, prev_run = _bwd_step(staged, ds_smem, dq_bars, dq_desc, dq_s, ops,
                                                 tile, dk, dv, step, 2 * i + half, prev_run,
                                                 WG, WG != half, BOTH, DQ_ON_EMPTY)
            if n_steps % 2 == 1:
                dk, dv, prev_run = _bwd_step(staged, ds_smem, dq_bars, dq_desc, dq_s, ops, tile,
                                             dk, dv, step, n_steps - 1, prev_run, WG, WG == 1,
                                             BOTH, DQ_ON_EMPTY)
        else:
            for it in range(n_steps):
                dk, dv, prev_run = _bwd_step(staged, ds_smem, dq_bars, dq_desc, dq_s, ops, tile,
                                             dk, dv, step, it, prev_run, WG, True, BOTH,
                                             DQ_ON_EMPTY)
        if DEFER_DQ:  # the tile's last step's dQ (with ALT: step j's is warpgroup j % 2's),
            # before K may be replaced
            if n_steps > 0 and (not ALT or (n_steps - 1) % 2 == WG):
                dq = _dq_product(ds_smem, dq_bars, k_both, k_s, zero_dq, step + n_steps - 1, WG,
                                 True, BOTH)
                dq = warpgroup_mma_wait(num_outstanding=0, deps=(dq,))
                _dq_add(dq_desc, dq_s, dq, prev_run)
        # this warpgroup's last product that read K or V is done: the next tile's may load
        mbarrier.arrive(kv_empty, pred=n_steps > 0)
        step += n_steps
        kv_count += (n_steps > 0).to(gl.int32)

        # dK and dV leave by TMA (rows past seqlen_k clipped) through this warpgroup's dQ
        # staging buffer, whose bytes hold a [BLOCK_N, HEAD_DIM] 16-bit tile: per-thread global
        # stores from the MMA layout held the consumers ~9% of their time at 1k keys
        _store_tile(out_s, dk_desc, (dk * scale_ds).to(dtype), b, keys0, h_k, 0)
        _store_tile(out_s, dv_desc, dv.to(dtype), b, keys0, h_k, 0)
    tma.store_wait(pendings=0)


@gluon.jit
def _bwd_consumer0(staged, kv, schedule, args):
    _bwd_consumer(staged, kv, schedule, args, 0)


@gluon.jit
def _bwd_consumer1(staged, kv, schedule, args):
    _bwd_consumer(staged, kv, schedule, args, 1)


@gluon.jit
def _attn_bwd_ws(Q, K, V, DO, LSE, DELTA, DQ, DK, DV,
                 stride_qb, stride_qm, stride_kb, stride_kn, stride_kh, stride_vb, stride_vn,
                 stride_vh, stride_dob, stride_dom,
                 stride_dkb, stride_dkn, stride_dkh, stride_dvb, stride_dvn, stride_dvh,
                 stride_lb, stride_lh, batch, nheads, group, seqlen_q, seqlen_k, shift, qk_scale,
                 scale_ds, reverse, table, HEAD_DIM: gl.constexpr, BLOCK_M: gl.constexpr,
                 BLOCK_N: gl.constexpr, STAGES: gl.constexpr, CAUSAL: gl.constexpr,
                 SPLIT_DQ: gl.constexpr, DEFER_DQ: gl.constexpr, DQ_ON_EMPTY: gl.constexpr,
                 DQ_ALT: gl.constexpr, CONSUMER_WARPS: gl.constexpr):
    """Tiles of 2·BLOCK_N keys of a key head (see the module docstring), t = program_id,
    + num_programs, … in ``_bwd_tile``'s order: one tile per program when the grid has one
    program per tile, or persistent (one program per SM) with the Q/dO ring's positions, the
    dS buffers' parity and the K/V barriers' phases handed on from tile to tile."""
    dtype: gl.constexpr = Q.dtype.element_ty
    n_kb = gl.cdiv(seqlen_k, 2 * BLOCK_N)
    total = n_kb * batch * (nheads // group)
    if not CAUSAL:
        shift = seqlen_k  # every key is left of every row's diagonal

    # split dQ: each warpgroup half of dQ's columns every step; or (DQ_ALT) all of them every
    # other step
    DQ_COLS: gl.constexpr = HEAD_DIM // 2 if SPLIT_DQ and not DQ_ALT else HEAD_DIM
    q_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([1, BLOCK_M, HEAD_DIM], dtype)
    kv_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([1, BLOCK_N, 1, HEAD_DIM],
                                                                   dtype)
    # split dQ reads K in DQ_COLS-column slices, which must start on a swizzle row: at head dim
    # 64 (32-column halves) K is stored with a 64-byte swizzle
    k_layout: gl.constexpr = (gl.NVMMASharedLayout(swizzle_byte_width=DQ_COLS * 2,
                                                   element_bitwidth=16, rank=4)
                              if DQ_COLS < HEAD_DIM and DQ_COLS * 2 < 128 else kv_layout)
    ds_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BLOCK_N, BLOCK_M], dtype)
    # dQ staging: a run of 8-column blocks of 32-byte rows, unswizzled (_dq_add)
    dq_layout: gl.constexpr = gl.NVMMASharedLayout(swizzle_byte_width=0, element_bitwidth=32,
                                                   rank=4)
    q_smem = gl.allocate_shared_memory(dtype, [STAGES, 1, BLOCK_M, HEAD_DIM], q_layout)
    do_smem = gl.allocate_shared_memory(dtype, [STAGES, 1, BLOCK_M, HEAD_DIM], q_layout)
    k_smem = gl.allocate_shared_memory(dtype, [2, 1, BLOCK_N, 1, HEAD_DIM], k_layout)
    v_smem = gl.allocate_shared_memory(dtype, [2, 1, BLOCK_N, 1, HEAD_DIM], kv_layout)
    # dSᵀ by step parity, both warpgroups': deferred dQ reads a step's tiles during the next
    # step, while the other warpgroup may be a step ahead, so four parities instead of two
    PARITIES: gl.constexpr = 4 if DEFER_DQ else 2
    ds_smem = gl.allocate_shared_memory(dtype, [2 * PARITIES, BLOCK_N, BLOCK_M], ds_layout)
    dq_smem = gl.allocate_shared_memory(gl.float32, [2, 1, DQ_COLS // 8, BLOCK_M, 8], dq_layout)
    row_layout: gl.constexpr = gl.SwizzledSharedLayout(1, 1, 1, order=[0])
    lse_smem = gl.allocate_shared_memory(gl.float32, [STAGES, BLOCK_M], row_layout)
    delta_smem = gl.allocate_shared_memory(gl.float32, [STAGES, BLOCK_M], row_layout)
    kv_ready = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    kv_empty = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    ds_ready = gl.allocate_shared_memory(gl.int64, [PARITIES, 1], mbarrier.MBarrierLayout())
    mbarrier.init(kv_ready, count=1)
    mbarrier.init(kv_empty, count=2)  # one arrival per consumer
    for i in gl.static_range(PARITIES):
        mbarrier.init(ds_ready.index(i), count=2)  # one arrival per consumer
    for i in gl.static_range(STAGES):
        mbarrier.init(ready.index(i), count=2)  # the TMA bytes' and the lse / δ stores
        mbarrier.init(empty.index(i), count=2)  # one arrival per consumer

    # what the producer fills and the consumers read: the Q / dO ring with lse and δ, K and V
    staged = (q_smem, do_smem, lse_smem, delta_smem, ready, empty)
    kv = (k_smem, v_smem, kv_ready, kv_empty)
    schedule = (batch, nheads, group, seqlen_q, seqlen_k, shift, n_kb, total, reverse, table)
    loads = (staged, kv, schedule, Q, K, V, DO, LSE, DELTA, stride_qb, stride_qm, stride_kb,
             stride_kn, stride_kh, stride_vb, stride_vn, stride_vh, stride_dob, stride_dom,
             stride_lb, stride_lh)
    # ds_ready for the consumers, or none: a deferred dQ product may wait on `empty` instead
    # (ds_ready is allocated either way: the layout the GPU suite ran in session 16)
    if DQ_ON_EMPTY:
        ds_sync = ()
    else:
        ds_sync = (ds_ready,)
    work = (staged, kv, schedule, (Q, DQ, DK, DV, ds_smem, dq_smem, ds_sync, qk_scale, scale_ds,
                                   stride_dkb, stride_dkn, stride_dkh,
                                   stride_dvb, stride_dvn, stride_dvh))
    # the producer needs few registers: the consumers take 240 each (4·24 + 8·240 ≤ 512 per lane)
    gl.warp_specialize([(_bwd_producer, loads), (_bwd_consumer0, work), (_bwd_consumer1, work)],
                       [CONSUMER_WARPS, CONSUMER_WARPS], [240, 240])


def gluon_bwd_eligible(q, k, v, do, params, attn_mask, alibi_slopes, varlen: bool) -> bool:
    """Does a Gluon backward cover this call? As the forward's ``gluon_eligible`` (head dim 64,
    128 or 256; 256 runs kernels/bwd_gluon_d256.py), plus: no dropout, q and dO with their heads
    contiguous in a row (stride(2) == head_dim), since the kernels read them through (seqlen,
    heads · head_dim) descriptors, and a Triton whose Gluon builder has the TMA reduction
    (``HAS_TMA_REDUCE``)."""
    d = q.shape[-1]
    return (HAS_TMA_REDUCE and gluon_eligible(q, k, v, params, attn_mask, alibi_slopes, varlen)
            and do.dtype == q.dtype and tma_ready(do) and q.stride(2) == d and do.stride(2) == d)


def launch_geometry(params, seqlen_q: int, seqlen_k: int, tiles: int, num_warps: int,
                    persistent: bool, device):
    """What every Gluon backward launch works out the same way: whether the mask is causal,
    the diagonal's shift (``key <= row + shift``), the register cap for two consumer
    warpgroups of ``num_warps`` warps beside the producer's four, and the grid (a program per
    tile, or per SM when ``persistent``)."""
    causal = params.window_right == 0
    shift = params.shift_extra + (seqlen_k - seqlen_q if params.bottom_right else 0)
    maxnreg = (65536 // ((2 * num_warps + 4) * 32)) // 8 * 8
    grid = (max(1, min(tiles, num_sms(device))) if persistent else tiles,)
    return causal, shift, maxnreg, grid


def bwd_table_group(tile_order: str | None, persistent: bool,
                    who: str = "the backward") -> int | None:
    """The group size of the greedy table a Gluon backward launch's ``tile_order`` asks for
    (``schedule.greedy_group``; None: no table). A ValueError for any other order, or for a
    table without a persistent launch (the table lists each program's tiles)."""
    group_size = greedy_group(tile_order)
    if tile_order is not None and (group_size is None or not persistent):
        raise ValueError(f"{who}: tile_order={tile_order!r}: None, or 'greedy' / 'greedyN' "
                         "with a persistent launch")
    return group_size


def launch_setup(do, q, k, v, lse, params, tile_keys: int, num_warps: int, persistent: bool,
                 block_m: int = 64, tile_order: str | None = None):
    """What the Gluon backward launchers (this one's and kernels/bwd_gluon_d256.py's) share:
    empty dk and dv, the grid (a program per tile of ``tile_keys`` keys of a key head, or one
    per SM), the arguments after the tensors (strides, then the sizes and scales, the tile
    order and its table), whether the mask is causal, and the register cap for two consumer
    warpgroups of ``num_warps`` warps beside the producer's four. ``tile_order`` "greedy" or
    "greedyN" (persistent only): each program's tiles from a table made on the host
    (``schedule.greedy_table``, tiles of ``block_m``-row steps); None: causal tiles longest
    first, a persistent launch in ``_snake`` order."""
    group_size = bwd_table_group(tile_order, persistent)
    batch, seqlen_q, nheads, _ = q.shape
    seqlen_k, nheads_k = k.shape[1], k.shape[2]
    dk = _empty(k.shape, dtype=k.dtype, device=k.device)
    dv = _empty(v.shape, dtype=v.dtype, device=v.device)
    causal, shift, maxnreg, grid = launch_geometry(
        params, seqlen_q, seqlen_k, cdiv(seqlen_k, tile_keys) * batch * nheads_k, num_warps,
        persistent, q.device)
    strides = (*q.stride()[:2], *k.stride()[:3], *v.stride()[:3], *do.stride()[:2],
               *dk.stride()[:3], *dv.stride()[:3], *lse.stride()[:2])
    order, table = (1 if causal else 0), 0  # (an integer: no table)
    if group_size is not None:
        order = 0  # the table lists the tiles in the order they run
        group = nheads // nheads_k
        table = device_table(bwd_tile_costs(seqlen_q, seqlen_k, shift, block_m, tile_keys,
                                            group, causal), batch * nheads_k, grid[0],
                             group_size, q.device)
    rest = (*strides, batch, nheads, nheads // nheads_k, seqlen_q, seqlen_k, shift,
            params.softmax_scale * LOG2E, params.softmax_scale, order, table)
    return dk, dv, grid, rest, causal, maxnreg


def attn_bwd_gluon(do, q, k, v, delta, lse, params, block_m: int = 64, block_n: int = 128,
                   num_warps: int = 4, num_stages: int = 2, split_dq: bool = False,
                   persistent: bool = False, defer_dq: bool = False, dq_on_empty: bool = False,
                   dq_alternate: bool = False, tile_order: str | None = None, dq=None,
                   record=None):
    """Launch the Gluon dK/dV kernel with dQ added by TMA reductions (see
    :func:`gluon_bwd_eligible`); ``delta`` is the preprocessed rowsum(dO ∘ O) (less dlse).
    ``split_dq``: the consumers share dS and each computes half of dQ's columns;
    ``persistent``: one program per SM walks the tiles (else one program per tile);
    ``defer_dq`` (split dQ only): a step's dQ product is issued in the next step, so neither
    warpgroup waits for the other's dSᵀ of the step it has just computed; ``dq_on_empty``
    (deferred dQ only): that product waits on the Q/dO ring's ``empty`` barriers instead of
    barriers of its own (one arrival fewer per step); ``dq_alternate`` (deferred on ``empty``
    only): the warpgroups take turns, step by step, at the whole of a step's dQ product
    instead of each taking half its columns every step (the product reads dS once instead of
    twice, in wider products). ``tile_order``: ``launch_setup``'s. ``dq``: the float32
    accumulator in runs (``dq_runs_numel`` values, see ``_dq_add``), already zeroed
    (``kernels.bwd`` zeroes it in its preprocess launch); by default a fresh zeroed one.
    ``record``: a list to append two launches to, each as its cached entry, its grid and the
    arguments after its tensors (for a call plan, see ``common.store_plan``): the kernel's
    (after its nine tensors) and the cast's (``dq_cast``, after the runs and dq). Returns (dq,
    dk, dv) in q's dtype: dq put in place from the runs and cast, by the column parts this
    launch used (``split_dq``)."""
    if defer_dq and not split_dq:
        raise ValueError("attn_bwd_gluon: defer_dq needs split_dq (only split dQ waits for the "
                         "other warpgroup's dS)")
    if dq_on_empty and not defer_dq:
        raise ValueError("attn_bwd_gluon: dq_on_empty needs defer_dq (only a deferred dQ "
                         "product can wait for the step's end)")
    if dq_alternate and not dq_on_empty:
        raise ValueError("attn_bwd_gluon: dq_alternate needs dq_on_empty (the turns' products "
                         "wait for both warpgroups' step on the ring's empty barriers)")
    ensure_allocator()  # the kernel builds its TMA descriptors on the device
    d = q.shape[-1]
    if d not in (64, 128):
        raise ValueError(f"head dim: the Gluon backward covers 64 and 128, not {d}")
    if dq_alternate and d != 64:
        raise ValueError("attn_bwd_gluon: dq_alternate at head dim 64 only (at 128 the whole "
                         "dQ's staging buffers take 264,632 bytes of shared memory)")
    numel = dq_runs_numel(q, block_m)
    if dq is None:
        dq = torch.zeros(numel, dtype=torch.float32, device=q.device)
    elif dq.numel() != numel or dq.dtype != torch.float32 or not dq.is_contiguous():
        raise ValueError(f"attn_bwd_gluon: dq must be a contiguous float32 tensor of {numel} "
                         f"values (dq_runs_numel), got {dq.dtype} {tuple(dq.shape)}")
    dk, dv, grid, rest, causal, maxnreg = launch_setup(do, q, k, v, lse, params, block_n,
                                                       num_warps, persistent, block_m,
                                                       tile_order)
    entry = launch(_attn_bwd_ws, grid, q, k, v, do, lse, delta, dq, dk, dv, *rest,
                   HEAD_DIM=d, BLOCK_M=block_m, BLOCK_N=block_n // 2, STAGES=num_stages,
                   CAUSAL=causal, SPLIT_DQ=split_dq, DEFER_DQ=defer_dq,
                   DQ_ON_EMPTY=dq_on_empty, DQ_ALT=dq_alternate,
                   CONSUMER_WARPS=num_warps, num_warps=4, maxnreg=maxnreg)
    # dq in place and cast, by the column parts this launch used
    run_cols = d // 2 if split_dq and not dq_alternate else d
    cast_entry, cast_grid, cast_rest, dq_out = dq_cast(dq, q, block_m, run_cols,
                                                       params.softmax_scale)
    if record is not None and entry is not None and cast_entry is not None:
        record.append((entry, grid3(grid), rest))
        record.append((cast_entry, grid3(cast_grid), cast_rest))
    return dq_out, dk, dv
