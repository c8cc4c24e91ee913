"""The forward on Hopper in Gluon: the plain path (no softcap, ALiBi, mask or dropout), 16-bit
inputs, head dim 64, 128 or 256, causal or not, for sm_90; and float8_e4m3fn inputs in the
one-program-per-tile kernel (``_attn_fwd_ws``; configs.py ships it at head dims 64, 128 and
256) and the persistent one (``_attn_fwd_persistent``, in fwd_gluon_persistent.py; which of
the two a call runs: ``configs.FP8_BY_KEYS``, by head dim, mask and length).

Warp-specialized like FlashAttention-3's forward, which the ``tl`` kernel cannot express: a
producer partition fills ``STAGES``-deep K/V rings by TMA; two consumer warpgroups (three when
``block_m`` is 192: more independent MMA and exp chains per SM, FlashAttention-3's choice at head
dim 64) own a share of a program's rows each, share every tile, and per step issue the warpgroup
MMAs

    S[j+1] = Q K[j+1]ᵀ  and  O += P[j] V[j]     (async, back to back)
    wait for S[j+1]; softmax of S[j+1]          (CUDA cores, while P[j] V[j] runs)
    wait for P[j] V[j]

With ``pingpong`` the consumers also take turns to issue, so that one's softmax runs under
the other's products; the turns are handed on through hardware named barriers
(``fwd_gluon_tile._turn``), the first by the last consumer as the partitions start.

No product is left in flight across the loop's back edge: when one is (retiring P[j-1] V[j-1]
only after the next softmax), ptxas 12.8 serializes every warpgroup MMA of the kernel
(``C7514``/``C7512`` "wgmma.mma_async instructions are serialized"), a wait after each 16-deep
step; ``flashtriton sass`` reports it. The ``tl`` kernel (kernels/fwd.py) remains the portable
path: everything this file does not cover, and the Triton interpreter, use it.
"""

from __future__ import annotations

import torch
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import fence_async_shared, mbarrier, tma

from flashtriton.configs import LOG2E
from flashtriton.kernels.schedule import (HEAD_MAJOR, ROW_MAJOR, causal_fwd_order,
                                          greedy_group, row_block_table)
from flashtriton.kernels.common import (cdiv, cuda_major, ensure_allocator, grid3,
                                        is_interpreting, launch, num_sms, store_plan, tma_ready)
# one consumer's online softmax over a tile of work, and what both kernels' partitions share,
# in its own file; the persistent kernel in its own
from flashtriton.kernels.fwd_gluon_persistent import _attn_fwd_persistent
from flashtriton.kernels.fwd_gluon_tile import (_attend_tile, _first_turn, _half_last,
                                                _normalize, _ones_tile, _ring_barriers)
from flashtriton.kernels.keys_minor import keys_minor_recorded, replay_keys_minor
from flashtriton.kernels.tile_walk import fast_divisor

_empty = torch.empty


@gluon.jit
def _ws_producer(ring, K, V, k_base, v_base, stride_kn, stride_vn, seqlen_k, n_tiles):
    """The default partition (4 warps, 24 registers): streams K and V tiles through the
    STAGES-slot rings. A slot is refilled once every consumer has arrived on its ``empty``
    barrier (their product that read it is done). float8: V is keys-minor, (D, keys padded to
    32) rows ``stride_vn`` apart, each 32 keys in ``keys_minor.ORDER`` (the launcher's copy), and
    its tiles are [HEAD_DIM, BLOCK_N]."""
    k_smem, v_smem, k_ready, k_empty, v_ready, v_empty = ring
    # the sizes, read off the buffers' shapes (a constexpr in the args tuple arrives as an i1
    # value: a branch on it is folded away, but it cannot size or type anything)
    STAGES: gl.constexpr = k_smem.type.shape[0]
    BLOCK_N: gl.constexpr = k_smem.type.shape[1]
    HEAD_DIM: gl.constexpr = k_smem.type.shape[2]
    kv_layout: gl.constexpr = k_smem.type.layout
    FP8: gl.constexpr = k_smem.dtype.is_fp8()
    k_desc = tma.make_tensor_descriptor(K + k_base, shape=[seqlen_k, HEAD_DIM],
                                        strides=[stride_kn, 1], block_shape=[BLOCK_N, HEAD_DIM],
                                        layout=kv_layout)
    if FP8:
        v_desc = tma.make_tensor_descriptor(V + v_base,
                                            shape=[HEAD_DIM, gl.cdiv(seqlen_k, 32) * 32],
                                            strides=[stride_vn, 1],
                                            block_shape=[HEAD_DIM, BLOCK_N],
                                            layout=v_smem.type.layout)
    else:
        v_desc = tma.make_tensor_descriptor(V + v_base, shape=[seqlen_k, HEAD_DIM],
                                            strides=[stride_vn, 1],
                                            block_shape=[BLOCK_N, HEAD_DIM], layout=kv_layout)
    kv_bytes: gl.constexpr = BLOCK_N * HEAD_DIM * k_smem.dtype.primitive_bitwidth // 8
    for i in range(n_tiles):
        slot = i % STAGES
        phase = (i // STAGES) & 1
        mbarrier.wait(k_empty.index(slot), phase ^ 1)  # a fresh barrier passes phase 1
        mbarrier.expect(k_ready.index(slot), kv_bytes)
        tma.async_copy_global_to_shared(k_desc, [i * BLOCK_N, 0], k_ready.index(slot),
                                        k_smem.index(slot))
        mbarrier.wait(v_empty.index(slot), phase ^ 1)
        mbarrier.expect(v_ready.index(slot), kv_bytes)
        if FP8:
            tma.async_copy_global_to_shared(v_desc, [0, i * BLOCK_N], v_ready.index(slot),
                                            v_smem.index(slot))
        else:
            tma.async_copy_global_to_shared(v_desc, [i * BLOCK_N, 0], v_ready.index(slot),
                                            v_smem.index(slot))


@gluon.jit
def _ws_consumer(ring, args, WG: gl.constexpr):
    """One warpgroup: BLOCK_M query rows (rows m0 + WG·BLOCK_M …) against every key tile of the
    rings (``_attend_tile``). Writes its rows of O (through ``o_smem``: its Q buffer in 16 bits,
    its own bfloat16 buffer for float8 inputs) and LSE. float8: the scores' scale takes the q and
    k descales and O the v descale (``DESCALE``, three float32s on the device; 16-bit launches
    pass 0, never read)."""
    k_smem, v_smem, k_ready, k_empty, v_ready, v_empty = ring
    (Q, O, LSE, q_smem, o_smem, q_bar, turn, q_base, o_base, l_base, stride_qm, stride_om,
     seqlen_q, seqlen_k, m0, n_tiles, shift, qk_scale, ones, HALF_TAIL, DESCALE) = args
    # the sizes, read off the buffers' shapes (a constexpr in the args tuple arrives as an i1
    # value: a branch on it is folded away, but it cannot size or type anything)
    BLOCK_M: gl.constexpr = q_smem.type.shape[1]
    HEAD_DIM: gl.constexpr = q_smem.type.shape[2]
    BLOCK_N: gl.constexpr = k_smem.type.shape[1]
    dtype: gl.constexpr = Q.dtype.element_ty
    WARPS: gl.constexpr = gl.num_warps()
    MMA_K: gl.constexpr = 256 // dtype.primitive_bitwidth  # a product's K step: 32 bytes
    s_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[WARPS, 1],
                                                       instr_shape=[16, BLOCK_N, MMA_K])
    row_s: gl.constexpr = gl.SliceLayout(1, s_layout)
    q_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BLOCK_M, HEAD_DIM], dtype)

    FP8: gl.constexpr = dtype.is_fp8()
    rows0 = m0 + WG * BLOCK_M
    q_s = q_smem.index(WG)
    qb = q_bar.index(WG)
    q_desc = tma.make_tensor_descriptor(Q + q_base, shape=[seqlen_q, HEAD_DIM],
                                        strides=[stride_qm, 1], block_shape=[BLOCK_M, HEAD_DIM],
                                        layout=q_layout)
    if FP8:
        qk_scale = qk_scale * gl.load(DESCALE) * gl.load(DESCALE + 1)
    mbarrier.expect(qb, BLOCK_M * HEAD_DIM * dtype.primitive_bitwidth // 8)
    tma.async_copy_global_to_shared(q_desc, [rows0, 0], qb, q_s)
    _first_turn(turn, WG)
    # tiles [0, n_full) are visible to every row of this warpgroup (without a causal mask the
    # launcher passes shift = seqlen_k, so the diagonal never cuts a tile)
    n_full = gl.minimum(seqlen_k, gl.maximum(rows0 + shift + 1, 0)) // BLOCK_N
    n_own = gl.cdiv(gl.minimum(seqlen_k, gl.maximum(rows0 + BLOCK_M + shift, 0)), BLOCK_N)
    n_half = _half_last(n_own, rows0 + BLOCK_M, seqlen_k, shift, BLOCK_N, HALF_TAIL)

    offs_m = rows0 + gl.arange(0, BLOCK_M, layout=row_s)
    zero_s = gl.zeros([BLOCK_M, BLOCK_N], gl.float32, layout=s_layout)
    mbarrier.wait(qb, 0)
    acc, m_i, l_i = _attend_tile(q_s, k_smem, v_smem, k_ready, k_empty, v_ready, v_empty, turn,
                                 zero_s, 0, n_tiles, n_own, n_full, n_half, offs_m, seqlen_k,
                                 shift, qk_scale, WG, BLOCK_N, q_smem.type.shape[0] > 2,
                                 False, False, False, ones)

    out, lse = _normalize(acc, m_i, l_i)
    if FP8:
        out = out * gl.load(DESCALE + 2)
    o_s = o_smem.index(WG)
    o_desc = tma.make_tensor_descriptor(O + o_base, shape=[seqlen_q, HEAD_DIM],
                                        strides=[stride_om, 1], block_shape=[BLOCK_M, HEAD_DIM],
                                        layout=o_smem.type.layout)
    # (16-bit: this warpgroup's Q buffer, free now: its products have completed)
    o_s.store(out.to(O.dtype.element_ty))
    fence_async_shared()
    tma.async_copy_shared_to_global(o_desc, [rows0, 0], o_s)
    gl.store(LSE + l_base + offs_m, lse, mask=offs_m < seqlen_q)
    tma.store_wait(pendings=0)


@gluon.jit
def _ws_consumer0(ring, args):
    _ws_consumer(ring, args, 0)


@gluon.jit
def _ws_consumer1(ring, args):
    _ws_consumer(ring, args, 1)


@gluon.jit
def _ws_consumer2(ring, args):
    _ws_consumer(ring, args, 2)


@gluon.jit
def _attn_fwd_ws(Q, K, V, O, LSE,
                 stride_qb, stride_qm, stride_qh, stride_kb, stride_kn, stride_kh,
                 stride_vb, stride_vn, stride_vh, stride_ob, stride_om, stride_oh,
                 stride_lb, stride_lh, nheads, group, seqlen_q, seqlen_k, shift, qk_scale,
                 DESCALE, HEAD_DIM: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr,
                 STAGES: gl.constexpr, CAUSAL: gl.constexpr, CONSUMER_WARPS: gl.constexpr,
                 PINGPONG: gl.constexpr, CONSUMERS: gl.constexpr, ROWSUM_MMA: gl.constexpr,
                 HALF_TAIL: gl.constexpr, CONSUMER_REGS: gl.constexpr):
    """One program per CONSUMERS·BLOCK_M query rows of a head: the default partition (the
    producer) fills the K/V rings by TMA; CONSUMERS (2 or 3) worker partitions of
    CONSUMER_WARPS warps (the consumers, CONSUMER_REGS registers a thread)
    own BLOCK_M rows each and share every K/V tile (see the module docstring). float8_e4m3fn
    inputs: V keys-minor (``_ws_producer``), O bfloat16, ``DESCALE`` the q, k, v descales
    (``_ws_consumer``)."""
    dtype: gl.constexpr = Q.dtype.element_ty
    n_m = gl.cdiv(seqlen_q, CONSUMERS * BLOCK_M)
    pid_m = gl.program_id(0)
    if CAUSAL:  # longest rows first
        pid_m = n_m - 1 - pid_m
    pid_bh = gl.program_id(1)
    b = pid_bh // nheads
    h = pid_bh % nheads
    h_k = h // group
    m0 = pid_m * CONSUMERS * BLOCK_M
    b64 = b.to(gl.int64)
    q_base = b64 * stride_qb + h.to(gl.int64) * stride_qh
    k_base = b64 * stride_kb + h_k.to(gl.int64) * stride_kh
    v_base = b64 * stride_vb + h_k.to(gl.int64) * stride_vh
    o_base = b64 * stride_ob + h.to(gl.int64) * stride_oh
    l_base = b64 * stride_lb + h.to(gl.int64) * stride_lh

    if not CAUSAL:
        shift = seqlen_k  # every key is left of every row's diagonal
    n_tiles = gl.cdiv(gl.minimum(seqlen_k, gl.maximum(m0 + CONSUMERS * BLOCK_M + shift, 0)),
                      BLOCK_N)

    q_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BLOCK_M, HEAD_DIM], dtype)
    kv_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BLOCK_N, HEAD_DIM], dtype)
    q_smem = gl.allocate_shared_memory(dtype, [CONSUMERS, BLOCK_M, HEAD_DIM], q_layout)
    k_smem = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_N, HEAD_DIM], kv_layout)
    if dtype.is_fp8():  # V keys-minor; O (bfloat16) in buffers of its own
        vt_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([HEAD_DIM, BLOCK_N], dtype)
        v_smem = gl.allocate_shared_memory(dtype, [STAGES, HEAD_DIM, BLOCK_N], vt_layout)
        o_dtype: gl.constexpr = O.dtype.element_ty
        o_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BLOCK_M, HEAD_DIM],
                                                                      o_dtype)
        o_smem = gl.allocate_shared_memory(o_dtype, [CONSUMERS, BLOCK_M, HEAD_DIM], o_layout)
    else:
        v_smem = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_N, HEAD_DIM], kv_layout)
        o_smem = q_smem
    q_bar = gl.allocate_shared_memory(gl.int64, [CONSUMERS, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(CONSUMERS):
        mbarrier.init(q_bar.index(i), count=1)
    # (one arrival a consumer: _ws_consumer's releases are one thread's)
    k_ready, k_empty, v_ready, v_empty, turn = _ring_barriers(STAGES, PINGPONG, CONSUMERS, 1, 1)
    ones = _ones_tile(ROWSUM_MMA, dtype, BLOCK_N, q_bar)

    ring = (k_smem, v_smem, k_ready, k_empty, v_ready, v_empty)
    loads = (ring, K, V, k_base, v_base, stride_kn, stride_vn, seqlen_k, n_tiles)
    work = (ring, (Q, O, LSE, q_smem, o_smem, q_bar, turn, q_base, o_base, l_base, stride_qm,
                   stride_om, seqlen_q, seqlen_k, m0, n_tiles, shift, qk_scale, ones, HALF_TAIL,
                   DESCALE))
    # the default partition (4 warps: Gluon's minimum) is the producer; the consumers are workers
    if CONSUMERS == 3:
        gl.warp_specialize([(_ws_producer, loads), (_ws_consumer0, work),
                            (_ws_consumer1, work), (_ws_consumer2, work)],
                           [CONSUMER_WARPS, CONSUMER_WARPS, CONSUMER_WARPS],
                           [CONSUMER_REGS, CONSUMER_REGS, CONSUMER_REGS])
    else:
        gl.warp_specialize([(_ws_producer, loads), (_ws_consumer0, work), (_ws_consumer1, work)],
                           [CONSUMER_WARPS, CONSUMER_WARPS], [CONSUMER_REGS, CONSUMER_REGS])


def gluon_eligible(q, k, v, params, attn_mask, alibi_slopes, varlen: bool) -> bool:
    """Does the Gluon kernel cover this call? 16-bit or float8_e4m3fn, head dims equal and 64,
    128 or 256, no mask, softcap, ALiBi, dropout or left window, causal or not, dense layout, a
    Hopper GPU (sm_90: the kernel uses warpgroup MMAs), tensor-descriptor-ready strides."""
    return (not is_interpreting()
            and q.dtype in (torch.float16, torch.bfloat16, torch.float8_e4m3fn)
            and cuda_major(q.device) == 9
            and not varlen and attn_mask is None and alibi_slopes is None
            and params.softcap == 0 and params.dropout_p == 0 and not params.has_left
            and params.window_right in (-1, 0) and params.softmax_scale > 0
            and q.shape[-1] == k.shape[-1] == v.shape[-1] and q.shape[-1] in (64, 128, 256)
            and tma_ready(q, k, v))


def fp8_keys_minor(v):
    """float8 V (B, Sk, Hk, D) copied keys-minor for the Gluon forward: (B, Hk, D, Sk padded to
    32, zeros past Sk), each 32 keys in ``keys_minor.ORDER`` (one Triton kernel, one pass).
    Returns ``(copy, record)``: the record, for a call plan, as ``keys_minor_recorded``'s."""
    return keys_minor_recorded(v, 32, group_order=True)


# Below this many keys a causal call's persistent forward takes one softmax path (see below).
ONE_PATH_CAUSAL_BELOW = 2048


def one_softmax_path(head_dim: int, consumers: int, causal: bool, seqlen_k: int) -> bool:
    """Whether the persistent forward's consumers mask and then run one softmax (``ONE_PATH``,
    less code) or write the softmax out in both mask branches. In the one-path form ptxas's
    scheduler moves the wait for the step's P·V product up into the softmax
    (``fwd_gluon_tile._masked_softmax``).
    Session 22's A/Bs (docs/perf-log.md; TFLOP/s change with both branches): two consumers
    +1.5-2.4% at 4096 keys (d128 with and without a mask, d64 causal) and -0.1 to +1.7% at 1024
    without a mask, but -3.8 to -5.4% at 1024 causal; three consumers (d64 from 4096 keys)
    -0.3 to +0.2% at 4096 and -2.9% at 16384. So one path with three consumers and for causal
    calls below ONE_PATH_CAUSAL_BELOW keys, both branches elsewhere. At 2048 causal (session
    55, branch s55-fwd-one-path-2k, in-process A/B) one path was -3.3% at d128 and -2.0% at d64
    (two consumers; d64 causal takes three from 2048 since). Head dim 256 writes both (its O
    leaves through Q's buffers; never measured with one path)."""
    if head_dim == 256:
        return False
    return consumers == 3 or (causal and seqlen_k < ONE_PATH_CAUSAL_BELOW)


# Head dims whose forward sums P on the tensor cores by default (session 23's A/B, 29ce7d3
# against d6c2cca, docs/perf-log.md: d64 +1.0 to +2.2% from 1024 keys, level at 1024 causal; d128
# -2.0 to -3.6%). The row sums are then of P rounded to the input dtype, as P·V weighs V: O is
# as accurate, the lse off by at most log(1 + u) (u = 2^-8 in bfloat16, 2^-11 in float16).
ROWSUM_MMA_HEAD_DIMS = (64,)
# float8: the head dims whose row sums are by default on the tensor cores (``rowsum_mma``), each
# step's P·ones from zero, added in float32 (``fwd_gluon_tile._sum_rows_async``), P taken
# against the max less ``fwd_gluon_tile.FP8_P_SHIFT`` (without it e4m3 rounds a long row's small
# terms to zero and the sums lose them). On an H100 (docs/perf-log.md, session 70): every
# float8 test passed, the outputs as close to float64 as with float32 sums, and the kernel
# +5.1% / +1.3% at d64 (causal second) and +5.3% / +3.1% at d128 at 16k. Not built at 256.
FP8_ROWSUM_MMA_HEAD_DIMS: tuple[int, ...] = (64, 128)


# The SM's registers and the least a warp-specialized partition runs on (PTX setmaxnreg's
# floor): the producer warpgroup takes what the consumers leave, and needs this much.
SM_REGISTERS = 65536
PRODUCER_MIN_REGS = 24
# A thread's registers on each consumer warpgroup (4 warps), by the number of consumers: on
# three, 160 is the most that leaves the producer its floor. Offline at d64 (sm_90a,
# docs/perf-log.md, session 76), local loads / stores a step at 160 against 152: float8
# persistent 9 / 9 against 4 / 4 (both masks), float8 one program per tile 3 / 3 against
# 3 / 1; bf16 persistent 13 / 13 against 10 / 10 causal, 5 / 5 against 10 / 10 without a mask,
# but at 152 ptxas serializes bf16's warpgroup MMAs (both masks); at 144 every one spills
# more. float8 at 152 is not yet run on a GPU: a candidate (``attn_fwd_gluon``'s ``regs``,
# ``scripts/fp8_probe.py --regs``).
CONSUMER_REGS = {2: 240, 3: 160}


def attn_fwd_gluon(q, k, v, params, block_m: int = 128, block_n: int = 128, num_warps: int = 4,
                   num_stages: int = 2, pingpong: bool = False, persistent: bool = False,
                   tile_order: str | None = None, plan_key=None, rowsum_mma: bool | None = None,
                   half_tail: bool | None = None, descale=None, regs: int | None = None):
    """Launch the Gluon forward (see :func:`gluon_eligible`): block_m rows per program, split
    between consumer warpgroups of num_warps warps, two of them, or three when block_m is 192
    (64 rows each); block_n keys per tile, num_stages-deep K/V rings (head dim 256: two
    consumers, since Q, K and V alone take most of the shared memory there; persistent, O
    leaves through Q's buffers). ``persistent``: one
    program per SM walks the tiles (``_attn_fwd_persistent``); causal, in the order
    ``tile_order`` names ("head" or "row" major, see kernels/schedule.py; "greedy" or
    "greedyN": a table of each program's tiles made on the host, ``schedule.greedy_table``, in
    head groups of N or of the size its model chooses), by default the one
    ``causal_fwd_order`` models as balanced. ``plan_key``: store this call's launch as a plan
    under that key (``common.plan_key``; the caller checks that the call is plain enough).
    ``rowsum_mma``: the softmax's row sums by the tensor cores (``_attend_tile``), by default at
    the head dims in ``ROWSUM_MMA_HEAD_DIMS``; not at 256. ``half_tail``: a consumer whose
    rows see only the first half of their last key tile runs that step on half the keys
    (``fwd_gluon_tile._half_tail``); by default with a causal mask where a consumer's rows are
    half a key tile (block_n = 2 · block_m / consumers: the d64 and d128 configs); head dims 64
    and 128 only.
    float8_e4m3fn q, k, v: ``descale`` the (q, k, v) descales, a float32 tensor of three on the
    device, and o bfloat16 (persistent at d256 too: O in buffers of its own), whole key tiles, row
    sums on the tensor cores with ``rowsum_mma`` (by default at the head dims in
    ``FP8_ROWSUM_MMA_HEAD_DIMS``: 64 and 128; not built at 256), else in float32. On the tensor
    cores they are of P as rounded to e4m3, the weights P·V gives V, so the lse is within
    log(1 + 2^-4) more, and P is taken against the max less ``fwd_gluon_tile.FP8_P_SHIFT``.
    V is copied keys-minor (``fp8_keys_minor``).
    ``regs``: a thread's registers on each consumer, by default ``CONSUMER_REGS``'s; a
    multiple of 8 that leaves the producer warpgroup ``PRODUCER_MIN_REGS``.
    q (B, Sq, H, D), k/v (B, Sk, Hk, D); returns (o, lse) like ``kernels.fwd.attn_fwd``."""
    consumers = 3 if block_m == 192 else 2
    rows = block_m // consumers
    if rows % (16 * num_warps) or (consumers == 3 and num_warps != 4):
        raise ValueError(f"attn_fwd_gluon: block_m={block_m} with num_warps={num_warps}: each "
                         f"consumer's {rows} rows must be a multiple of 16·num_warps (three "
                         f"consumers: 4 warps each)")
    d = q.shape[-1]
    fp8 = q.dtype == torch.float8_e4m3fn
    causal = params.window_right == 0
    if regs is None:
        regs = CONSUMER_REGS[consumers]
    elif (regs % 8 or regs < PRODUCER_MIN_REGS
          or consumers * num_warps * 32 * regs > SM_REGISTERS - 4 * 32 * PRODUCER_MIN_REGS):
        raise ValueError(f"attn_fwd_gluon: regs={regs} on {consumers} consumers of {num_warps} "
                         f"warps: a multiple of 8 from {PRODUCER_MIN_REGS} that leaves the "
                         f"producer warpgroup {PRODUCER_MIN_REGS} registers a thread")
    if fp8:
        if descale is None:
            raise ValueError("attn_fwd_gluon: float8 inputs need descale (q, k, v descales)")
        if half_tail:
            raise ValueError("attn_fwd_gluon: float8 runs whole key tiles: half_tail is not "
                             "built for it")
        if block_n % 32:
            raise ValueError(f"attn_fwd_gluon: float8 needs block_n a multiple of 32 (the "
                             f"products' key steps), got {block_n}")
        if rowsum_mma is None:
            rowsum_mma = d in FP8_ROWSUM_MMA_HEAD_DIMS
        half_tail = False
    elif descale is not None:
        raise ValueError(f"attn_fwd_gluon: descale applies to float8 inputs only (q is {q.dtype})")
    if d == 256 and consumers == 3:
        raise ValueError("attn_fwd_gluon: head dim 256 runs two consumers (a third Q buffer "
                         "does not fit in shared memory)")
    if rowsum_mma is None:
        rowsum_mma = d in ROWSUM_MMA_HEAD_DIMS
    elif rowsum_mma and d == 256:
        raise ValueError("attn_fwd_gluon: rowsum_mma at head dim 256 is not built (its "
                         "persistent kernel spills already; never tested)")
    if half_tail is None:
        half_tail = causal and block_n == 2 * rows and d <= 128
    elif half_tail and (d > 128 or block_n % 32):
        raise ValueError(f"attn_fwd_gluon: half_tail with head dim {d} and block_n={block_n}: "
                         "built for head dims 64 and 128, with key tiles of a multiple of 32 "
                         "(half a tile is a product's 16-key steps)")
    group_size = greedy_group(tile_order)
    if tile_order not in (None, "head", "row") and group_size is None:
        raise ValueError(f"attn_fwd_gluon: tile_order={tile_order!r}: 'head', 'row', "
                         "'greedy[N]' or None")
    if group_size is not None and not persistent:
        raise ValueError(f"attn_fwd_gluon: tile_order={tile_order!r} needs persistent=True "
                         "(the table lists each program's tiles)")
    ensure_allocator()  # the kernel builds its TMA descriptors on the device
    batch, seqlen_q, nheads, d = q.shape
    seqlen_k, nheads_k = k.shape[1], k.shape[2]
    o = _empty((batch, seqlen_q, nheads, d), dtype=torch.bfloat16 if fp8 else q.dtype,
               device=q.device)
    lse = _empty((batch, nheads, seqlen_q), dtype=torch.float32, device=q.device)
    shift = params.shift_extra + (seqlen_k - seqlen_q if params.bottom_right else 0)
    # the consumers and a producer warpgroup share the SM's 64K registers
    maxnreg = (65536 // ((consumers * num_warps + 4) * 32)) // 8 * 8
    copy = None
    if fp8:  # the kernel's stride_vn: between the copy's head-dim rows
        v, copy = fp8_keys_minor(v)
        v_strides = (v.stride(0), v.stride(2), v.stride(1))
    else:
        v_strides = v.stride()[:3]
    strides = (*q.stride()[:3], *k.stride()[:3], *v_strides, *o.stride()[:3],
               *lse.stride()[:2])
    meta = dict(HEAD_DIM=d, BLOCK_M=rows, BLOCK_N=block_n, STAGES=num_stages,
                CAUSAL=causal, CONSUMER_WARPS=num_warps, PINGPONG=pingpong, CONSUMERS=consumers,
                ROWSUM_MMA=rowsum_mma, HALF_TAIL=bool(half_tail), CONSUMER_REGS=regs,
                num_warps=4, maxnreg=None if consumers == 3 else maxnreg)
    if persistent:
        tiles = cdiv(seqlen_q, block_m) * batch * nheads
        programs = max(1, min(tiles, num_sms(q.device)))
        order, table = 0, 0  # (an integer: no table)
        # rows before row 0 in the first causal block (the kernel's row0, negated)
        lead = (tiles // (batch * nheads) * block_m - seqlen_q) // rows * rows
        if causal and group_size is not None:
            order = HEAD_MAJOR  # the table's ids are head-major
            table = row_block_table(seqlen_q, seqlen_k, shift, block_m, block_n,
                                    batch * nheads, programs, group_size, q.device,
                                    lead=lead)
        elif causal:
            order = (causal_fwd_order(seqlen_q, seqlen_k, shift, batch * nheads, block_m,
                                      block_n, programs, lead=lead)
                     if tile_order is None else ROW_MAJOR if tile_order == "row" else HEAD_MAJOR)
        kernel, grid = _attn_fwd_persistent, (programs,)
        group = nheads // nheads_k
        rest = (*strides, batch, nheads, group, seqlen_q, seqlen_k, shift,
                params.softmax_scale * LOG2E, order, table,
                fast_divisor(max(1, cdiv(seqlen_q, block_m))), fast_divisor(nheads),
                fast_divisor(group), 0 if descale is None else descale)
        # (float8: both mask branches, as the one-program-per-tile kernel's)
        meta["ONE_PATH"] = not fp8 and one_softmax_path(d, consumers, causal, seqlen_k)
    else:
        kernel, grid = _attn_fwd_ws, (cdiv(seqlen_q, block_m), batch * nheads)
        rest = (*strides, nheads, nheads // nheads_k, seqlen_q, seqlen_k, shift,
                params.softmax_scale * LOG2E, 0 if descale is None else descale)
    entry = launch(kernel, grid, q, k, v, o, lse, *rest, **meta)
    if plan_key is not None and entry is not None and (copy is not None or not fp8):
        # float8: the plan makes V's copy and takes the call's descales (rest's last argument)
        store_plan(plan_key, (entry, grid3(grid), o.shape, lse.shape,
                              rest[:-1] if fp8 else rest, copy))
    return o, lse


def run_fwd_plan(plan, q, k, v, device: int, descale=None):
    """A call with a stored plan (see ``common.store_plan``): fresh o and lse, one launch;
    float8 (the plan holds V's copy): the copy's launch first, ``descale`` (this call's
    descales) passed on, o bfloat16."""
    entry, grid, o_shape, lse_shape, rest, copy = plan
    ensure_allocator()
    if copy is None:
        o = _empty(o_shape, dtype=q.dtype, device=q.device)
    else:
        v = replay_keys_minor(copy, v, device)
        rest = (*rest, descale)
        o = _empty(o_shape, dtype=torch.bfloat16, device=q.device)
    lse = _empty(lse_shape, dtype=torch.float32, device=q.device)
    entry(grid, (q, k, v, o, lse, *rest), device)
    return o, lse
