"""The persistent Gluon forward (``_attn_fwd_persistent``): one program per SM walks the
tiles of work in ``tile_walk._pers_tile``'s order, its partitions as the one-program-per-tile
kernel's (kernels/fwd_gluon.py, whose launcher ``attn_fwd_gluon`` launches both), with the
K/V rings' positions and the Q buffers handed on from tile to tile. A consumer's work on a
tile is ``fwd_gluon_tile._attend_tile``.
"""

from __future__ import annotations

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import fence_async_shared, mbarrier, tma

from flashtriton.kernels.fwd_gluon_tile import (_attend_tile, _first_turn, _half_last,
                                                _normalize, _ones_tile, _ring_barriers)
# the persistent kernels' walk over their tiles (shared with the backward), in its own file
from flashtriton.kernels.tile_walk import _divide, _pers_tile, _table_range, _table_tile


@gluon.jit
def _load_q(q_desc, q_bar, q_smem, b, m0, h, w: gl.constexpr):
    """The persistent producer's load of consumer ``w``'s Q block of a tile (no TMA coordinate
    below 0: the consumer of rows before row 0 gets an arrival instead, and computes nothing)."""
    BLOCK_M: gl.constexpr = q_smem.type.shape[2]
    HEAD_DIM: gl.constexpr = q_smem.type.shape[4]
    if m0 + w * BLOCK_M >= 0:
        mbarrier.expect(q_bar.index(w), BLOCK_M * HEAD_DIM * q_smem.dtype.primitive_bitwidth // 8)
        tma.async_copy_global_to_shared(q_desc, [b, m0 + w * BLOCK_M, h, 0], q_bar.index(w),
                                        q_smem.index(w))
    else:  # rows before row 0 (``_pers_tile``'s row0): no load, the barrier passes
        mbarrier.arrive(q_bar.index(w))


@gluon.jit
def _pers_producer(ring, queue, schedule, Q, K, V, seqlen_q, stride_qb, stride_qm, stride_qh,
                   stride_kb, stride_kn, stride_kh, stride_vb, stride_vn, stride_vh):
    """Persistent forward, the default partition: for each of the program's tiles, every
    consumer's Q block (once its buffer is free) and the K/V tiles through the rings; one set
    of rank-4 descriptors over (batch, seqlen, heads, head_dim) serves every tile.
    Q's buffers are free once every consumer has released the last K tile issued (the
    previous tile's): each consumer arrives there after its last S product, the last read of
    its Q. So the consumers' steps carry no arrival for Q (a warpgroup barrier a step, with
    Triton's arrivals), and a tile without keys loads no Q. At head dim 256, where O leaves
    through Q's buffer, the consumers release it on ``q_empty`` after that store.
    float8: V is the launcher's keys-minor copy, (batch, heads, HEAD_DIM, keys padded to 32)
    contiguous (``fp8_keys_minor``), read as one matrix of batch·heads·HEAD_DIM rows whose
    [HEAD_DIM, BLOCK_N] tiles are ``_ws_producer``'s."""
    k_smem, v_smem, k_ready, k_empty, v_ready, v_empty = ring
    q_smem, q_bar, q_empty = queue
    batch, nheads, group, seqlen_k, shift, n_m, total, order, table, divs, row0 = schedule
    CONSUMERS: gl.constexpr = q_smem.type.shape[0]
    BLOCK_M: gl.constexpr = q_smem.type.shape[2]
    HEAD_DIM: gl.constexpr = q_smem.type.shape[4]
    STAGES: gl.constexpr = k_smem.type.shape[0]
    nheads_k = _divide(nheads, group, divs[2], True)
    BLOCK_N: gl.constexpr = k_smem.type.shape[2]
    q_desc = tma.make_tensor_descriptor(Q, shape=[batch, seqlen_q, nheads, HEAD_DIM],
                                        strides=[stride_qb, stride_qm, stride_qh, 1],
                                        block_shape=[1, BLOCK_M, 1, HEAD_DIM],
                                        layout=q_smem.type.layout)
    k_desc = tma.make_tensor_descriptor(K, shape=[batch, seqlen_k, nheads_k, HEAD_DIM],
                                        strides=[stride_kb, stride_kn, stride_kh, 1],
                                        block_shape=[1, BLOCK_N, 1, HEAD_DIM],
                                        layout=k_smem.type.layout)
    FP8: gl.constexpr = k_smem.dtype.is_fp8()
    if FP8:  # (stride_vn: between the copy's head-dim rows)
        v_desc = tma.make_tensor_descriptor(V, shape=[batch * nheads_k * HEAD_DIM,
                                                      gl.cdiv(seqlen_k, 32) * 32],
                                            strides=[stride_vn, 1],
                                            block_shape=[HEAD_DIM, BLOCK_N],
                                            layout=v_smem.type.layout)
    else:
        v_desc = tma.make_tensor_descriptor(V, shape=[batch, seqlen_k, nheads_k, HEAD_DIM],
                                            strides=[stride_vb, stride_vn, stride_vh, 1],
                                            block_shape=[1, BLOCK_N, 1, HEAD_DIM],
                                            layout=v_smem.type.layout)
    kv_bytes: gl.constexpr = BLOCK_N * HEAD_DIM * k_smem.dtype.primitive_bitwidth // 8
    O_IN_Q: gl.constexpr = HEAD_DIM == 256 and not FP8  # as _pers_consumer's
    kv = 0  # K/V tiles issued so far: the rings' slots and phases run on across tiles
    local = 0
    lo, hi, stride = _table_range(table, total)
    for entry in range(lo, hi, stride):
        t = _table_tile(table, entry)
        b, h, h_k, m0, n_tiles = _pers_tile(t, n_m, nheads, group, seqlen_k, shift, total,
                                            order, CONSUMERS * BLOCK_M, BLOCK_N,
                                            table.dtype.is_ptr(), divs, True, row0)
        if O_IN_Q:
            for w in gl.static_range(CONSUMERS):
                mbarrier.wait(q_empty.index(w), (local & 1) ^ 1)  # a fresh barrier passes phase 1
                _load_q(q_desc, q_bar, q_smem, b, m0, h, w)
        elif n_tiles > 0:
            if kv > 0:  # every consumer is done with the last K tile issued, and with its Q
                mbarrier.wait(k_empty.index((kv - 1) % STAGES), ((kv - 1) // STAGES) & 1)
            for w in gl.static_range(CONSUMERS):
                _load_q(q_desc, q_bar, q_smem, b, m0, h, w)
        for i in range(n_tiles):
            slot = (kv + i) % STAGES
            phase = ((kv + i) // STAGES) & 1
            mbarrier.wait(k_empty.index(slot), phase ^ 1)
            mbarrier.expect(k_ready.index(slot), kv_bytes)
            tma.async_copy_global_to_shared(k_desc, [b, i * BLOCK_N, h_k, 0], k_ready.index(slot),
                                            k_smem.index(slot))
            mbarrier.wait(v_empty.index(slot), phase ^ 1)
            mbarrier.expect(v_ready.index(slot), kv_bytes)
            if FP8:
                tma.async_copy_global_to_shared(v_desc, [(b * nheads_k + h_k) * HEAD_DIM,
                                                         i * BLOCK_N],
                                                v_ready.index(slot), v_smem.index(slot))
            else:
                tma.async_copy_global_to_shared(v_desc, [b, i * BLOCK_N, h_k, 0],
                                                v_ready.index(slot), v_smem.index(slot))
        kv += n_tiles
        local += 1


@gluon.jit
def _pers_consumer(ring, queue, schedule, args, WG: gl.constexpr):
    """Persistent forward, one consumer warpgroup: for each tile, ``_attend_tile`` on ring
    positions that run on across tiles; Q's buffer is free for the next tile's Q once every
    consumer has released the tile's last K slot (``_pers_producer``: the next Q loads under
    this tile's last P V and epilogue); a tile without keys has no Q to wait for. O leaves
    through its own buffer by TMA. At head dim 256 there is no room for O buffers: O leaves
    through Q's, which is released on ``q_empty`` once that store has read it (the next
    tile's K/V loads still run under the epilogue). ``ONE_PATH`` (the kernel's
    constexpr, in ``args``): ``fwd_gluon_tile._masked_softmax``'s, chosen per call by the launcher
    (``one_softmax_path``); ``ones``: ``_attend_tile``'s."""
    k_smem, v_smem, k_ready, k_empty, v_ready, v_empty = ring
    q_smem, q_bar, q_empty = queue
    batch, nheads, group, seqlen_k, shift, n_m, total, order, table, divs, row0 = schedule
    (Q, O, LSE, o_smem, turn, seqlen_q, qk_scale, stride_ob, stride_om, stride_oh, stride_lb,
     stride_lh, ONE_PATH, ones, HALF_TAIL, DESCALE) = args
    CONSUMERS: gl.constexpr = q_smem.type.shape[0]
    BLOCK_M: gl.constexpr = q_smem.type.shape[2]
    HEAD_DIM: gl.constexpr = q_smem.type.shape[4]
    BLOCK_N: gl.constexpr = k_smem.type.shape[2]
    dtype: gl.constexpr = Q.dtype.element_ty
    FP8: gl.constexpr = dtype.is_fp8()
    O_IN_Q: gl.constexpr = HEAD_DIM == 256 and not FP8  # o_smem is q_smem (_attn_fwd_persistent)
    WARPS: gl.constexpr = gl.num_warps()
    s_layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[WARPS, 1],
        instr_shape=[16, BLOCK_N, 256 // dtype.primitive_bitwidth])  # K steps of 32 bytes
    row_s: gl.constexpr = gl.SliceLayout(1, s_layout)
    if FP8:  # (as _ws_consumer's)
        qk_scale = qk_scale * gl.load(DESCALE) * gl.load(DESCALE + 1)
    o_desc = tma.make_tensor_descriptor(O, shape=[batch, seqlen_q, nheads, HEAD_DIM],
                                        strides=[stride_ob, stride_om, stride_oh, 1],
                                        block_shape=[1, BLOCK_M, 1, HEAD_DIM],
                                        layout=o_smem.type.layout)
    q_s = q_smem.index(WG).reshape([BLOCK_M, HEAD_DIM])
    o_s = o_smem.index(WG)
    qb = q_bar.index(WG)
    qe = q_empty.index(WG)
    zero_s = gl.zeros([BLOCK_M, BLOCK_N], gl.float32, layout=s_layout)
    _first_turn(turn, WG)
    kv = 0
    local = 0
    loaded = 0  # Q blocks loaded into this consumer's buffer (not O_IN_Q)
    lo, hi, stride = _table_range(table, total)
    for entry in range(lo, hi, stride):
        t = _table_tile(table, entry)
        b, h, h_k, m0, n_tiles = _pers_tile(t, n_m, nheads, group, seqlen_k, shift, total,
                                            order, CONSUMERS * BLOCK_M, BLOCK_N,
                                            table.dtype.is_ptr(), divs, True, row0)
        rows0 = m0 + WG * BLOCK_M
        n_full = gl.minimum(seqlen_k, gl.maximum(rows0 + shift + 1, 0)) // BLOCK_N
        n_own = gl.cdiv(gl.minimum(seqlen_k, gl.maximum(rows0 + BLOCK_M + shift, 0)), BLOCK_N)
        # a consumer of rows before row 0 (the causal first block's, see row0) computes and
        # stores nothing, whatever keys its diagonal would reach
        n_own = gl.where(rows0 >= 0, n_own, 0)
        n_half = _half_last(n_own, rows0 + BLOCK_M, seqlen_k, shift, BLOCK_N, HALF_TAIL)
        offs_m = rows0 + gl.arange(0, BLOCK_M, layout=row_s)
        if O_IN_Q:
            mbarrier.wait(qb, local & 1)
        elif n_tiles > 0:  # (the producer loads no Q for a tile without keys)
            mbarrier.wait(qb, loaded & 1)
            loaded += 1
        acc, m_i, l_i = _attend_tile(q_s, k_smem, v_smem, k_ready, k_empty, v_ready, v_empty,
                                     turn, zero_s, kv, n_tiles, n_own, n_full, n_half, offs_m,
                                     seqlen_k, shift, qk_scale, WG, BLOCK_N, True,
                                     True, CONSUMERS == 2, ONE_PATH, ones)
        out, lse = _normalize(acc, m_i, l_i)
        if FP8:
            out = out * gl.load(DESCALE + 2)
        if not O_IN_Q:
            tma.store_wait(pendings=0)  # the previous tile's O has left this buffer
        # (O_IN_Q: every product that read Q has completed in _attend_tile)
        if rows0 >= 0:
            o_s.reshape([BLOCK_M, HEAD_DIM]).store(out.to(O.dtype.element_ty))
            fence_async_shared()
            tma.async_copy_shared_to_global(o_desc, [b, rows0, h, 0], o_s)
            gl.store(LSE + b.to(gl.int64) * stride_lb + h.to(gl.int64) * stride_lh + offs_m,
                     lse, mask=offs_m < seqlen_q)
        if O_IN_Q:
            tma.store_wait(pendings=0)  # O has left Q's buffer: the next tile's Q may load
            mbarrier.arrive(qe)
        kv += n_tiles
        local += 1
    tma.store_wait(pendings=0)


@gluon.jit
def _pers_consumer0(ring, queue, schedule, args):
    _pers_consumer(ring, queue, schedule, args, 0)


@gluon.jit
def _pers_consumer1(ring, queue, schedule, args):
    _pers_consumer(ring, queue, schedule, args, 1)


@gluon.jit
def _pers_consumer2(ring, queue, schedule, args):
    _pers_consumer(ring, queue, schedule, args, 2)


# (the packed divisors are not specialized on: a new value's divisibility by 16 would compile
# the kernel again)
@gluon.jit(do_not_specialize=["n_m_by", "nheads_by", "group_by"])
def _attn_fwd_persistent(Q, K, V, O, LSE,
                         stride_qb, stride_qm, stride_qh, stride_kb, stride_kn, stride_kh,
                         stride_vb, stride_vn, stride_vh, stride_ob, stride_om, stride_oh,
                         stride_lb, stride_lh, batch, nheads, group, seqlen_q, seqlen_k, shift,
                         qk_scale, order, table, n_m_by, nheads_by, group_by, DESCALE,
                         HEAD_DIM: gl.constexpr, BLOCK_M: gl.constexpr,
                         BLOCK_N: gl.constexpr, STAGES: gl.constexpr, CAUSAL: gl.constexpr,
                         CONSUMER_WARPS: gl.constexpr, PINGPONG: gl.constexpr,
                         CONSUMERS: gl.constexpr, ONE_PATH: gl.constexpr,
                         ROWSUM_MMA: gl.constexpr, HALF_TAIL: gl.constexpr,
                         CONSUMER_REGS: gl.constexpr):
    """The warp-specialized forward as a persistent kernel: one program per SM walks the tiles
    (CONSUMERS·BLOCK_M rows of a head) t = program_id, + num_programs, …, in ``_pers_tile``'s order
    (``order``: causal, longest first, in a snake); partitions as
    ``fwd_gluon._attn_fwd_ws``, with the K/V rings' positions and the Q buffers handed on across tiles,
    so the next tile's loads run under the current one's last products and epilogue.
    float8_e4m3fn inputs: V keys-minor (``_pers_producer``), O bfloat16 in buffers of its own
    (d256 too), ``DESCALE`` the q, k, v descales (16-bit launches pass 0, never read)."""
    dtype: gl.constexpr = Q.dtype.element_ty
    n_m = gl.cdiv(seqlen_q, CONSUMERS * BLOCK_M)
    total = n_m * batch * nheads
    row0 = seqlen_q * 0
    if not CAUSAL:
        shift = seqlen_k  # every key is left of every row's diagonal
    else:
        # the row blocks end at the last row, to within a consumer's rows: the first block
        # holds the whole consumers' worth of padding, which see the fewest keys, where at
        # the end they would see the most. A consumer of rows before row 0 loads, computes
        # and stores nothing (no TMA coordinate is below 0: a TMA store at a negative row
        # raised an illegal instruction); under BLOCK_M rows of padding stay at the end.
        # d64 causal (192-row blocks), in-process A/B against the blocks from row 0
        # (docs/perf-log.md, session 47): 8k +1.2%, 16k +1.0%; cycles at the base clock
        # -1.4% and -1.1% (the model: 1.4% and 1.5% fewer key tiles).
        row0 = -((n_m * (CONSUMERS * BLOCK_M) - seqlen_q) // BLOCK_M) * BLOCK_M
    q_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([1, BLOCK_M, 1, HEAD_DIM], dtype)
    kv_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([1, BLOCK_N, 1, HEAD_DIM],
                                                                   dtype)
    q_smem = gl.allocate_shared_memory(dtype, [CONSUMERS, 1, BLOCK_M, 1, HEAD_DIM], q_layout)
    o_dtype: gl.constexpr = O.dtype.element_ty
    if HEAD_DIM == 256 and not dtype.is_fp8():
        # 16 bits: Q and the K/V rings fill the shared memory, and O leaves through Q's buffer
        # (float8's Q and K/V take half the bytes: 96 KiB at two slots, O 64 KiB beside them)
        o_smem = q_smem
    else:
        o_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([1, BLOCK_M, 1, HEAD_DIM],
                                                                      o_dtype)
        o_smem = gl.allocate_shared_memory(o_dtype, [CONSUMERS, 1, BLOCK_M, 1, HEAD_DIM],
                                           o_layout)
    k_smem = gl.allocate_shared_memory(dtype, [STAGES, 1, BLOCK_N, 1, HEAD_DIM], kv_layout)
    if dtype.is_fp8():  # V keys-minor, [HEAD_DIM, BLOCK_N] tiles (as _attn_fwd_ws's)
        vt_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([HEAD_DIM, BLOCK_N], dtype)
        v_smem = gl.allocate_shared_memory(dtype, [STAGES, HEAD_DIM, BLOCK_N], vt_layout)
    else:
        v_smem = gl.allocate_shared_memory(dtype, [STAGES, 1, BLOCK_N, 1, HEAD_DIM], kv_layout)
    q_bar = gl.allocate_shared_memory(gl.int64, [CONSUMERS, 1], mbarrier.MBarrierLayout())
    q_empty = gl.allocate_shared_memory(gl.int64, [CONSUMERS, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(CONSUMERS):
        mbarrier.init(q_bar.index(i), count=1)
        mbarrier.init(q_empty.index(i), count=1)
    # (_pers_consumer releases K by each thread's arrival, V too on two consumers)
    k_ready, k_empty, v_ready, v_empty, turn = _ring_barriers(
        STAGES, PINGPONG, CONSUMERS, CONSUMER_WARPS * 32,
        CONSUMER_WARPS * 32 if CONSUMERS == 2 else 1)
    ones = _ones_tile(ROWSUM_MMA, dtype, BLOCK_N, q_bar)

    ring = (k_smem, v_smem, k_ready, k_empty, v_ready, v_empty)
    queue = (q_smem, q_bar, q_empty)
    schedule = (batch, nheads, group, seqlen_k, shift, n_m, total, order, table,
                (n_m_by, nheads_by, group_by), row0)
    loads = (ring, queue, schedule, Q, K, V, seqlen_q, stride_qb, stride_qm, stride_qh,
             stride_kb, stride_kn, stride_kh, stride_vb, stride_vn, stride_vh)
    work = (ring, queue, schedule, (Q, O, LSE, o_smem, turn, seqlen_q, qk_scale, stride_ob,
                                    stride_om, stride_oh, stride_lb, stride_lh, ONE_PATH, ones,
                                    HALF_TAIL, DESCALE))
    if CONSUMERS == 3:
        gl.warp_specialize([(_pers_producer, loads), (_pers_consumer0, work),
                            (_pers_consumer1, work), (_pers_consumer2, work)],
                           [CONSUMER_WARPS, CONSUMER_WARPS, CONSUMER_WARPS],
                           [CONSUMER_REGS, CONSUMER_REGS, CONSUMER_REGS])
    else:
        gl.warp_specialize([(_pers_producer, loads), (_pers_consumer0, work),
                            (_pers_consumer1, work)], [CONSUMER_WARPS, CONSUMER_WARPS],
                           [CONSUMER_REGS, CONSUMER_REGS])
