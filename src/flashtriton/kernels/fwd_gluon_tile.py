"""One consumer warpgroup's work in the Gluon forward (kernels/fwd_gluon.py): its rows of Q
against a tile of work's K/V tiles with the online softmax (``_attend_tile``), the softmax
step and its mask, O's rescale (skipped by a warp whose rows keep their max: the max moves
only by more than ``RESCALE_SLACK``), P's conversion for the P·V product, the optional row sums
on the tensor cores (``ROWSUM_MMA``), and the final normalization; and what both kernels'
partitions share (the K/V rings' barriers, the first ping-pong turn, a half last key tile).
The one-program-per-tile kernel, its partitions and the launcher are in fwd_gluon.py, the
persistent kernel in fwd_gluon_persistent.py.

The skipped rescale and the normalization by a reciprocal, in an A/B against the rescale of every
step and a division per value (docs/perf-log.md, session 27): +1.2 to +4.4% in the 12 forward
rows of d64 and d128 at 1k-16k keys, causal or not.
"""

from __future__ import annotations

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.ampere import async_copy
from triton.experimental.gluon.language.nvidia.hopper import (fence_async_shared, mbarrier,
                                                              warpgroup_mma, warpgroup_mma_wait)


# Ping-pong's turns run on hardware named barriers, ids TURN_BARRIER + consumer (Triton's own
# partitions use ids 0-4), as FlashAttention-3's scheduler barriers do. An mbarrier arrival is
# made by one thread after a warpgroup barrier (Triton puts one before every ``mbarrier.arrive``);
# on the turn's mbarrier that barrier held each consumer 3.5-5.7% of its samples. Named
# barriers, in an A/B: d128 +0.4 to +0.9% in 5 of 6 rows (-0.2% at 1k causal), d64 +0.0 to
# +0.4%, about the +-0.8% its rows without ping-pong moved (docs/perf-log.md, session 26). A
# program's last hand-over is never waited for; it ends with the program.
TURN_BARRIER = gl.constexpr(8)


@gluon.jit
def _release(empty, OWN: gl.constexpr):
    """A consumer's release of a K or V ring slot on its empty barrier (which
    ``_ring_barriers`` counts as the consumers arrive there). ``OWN``: each thread arrives
    once, after its own wait for the products that read the slot
    (``cp.async.mbarrier.arrive.noinc``, which counts once the thread's earlier ``cp.async``
    copies are done: the consumers issue none, so at once). Otherwise one thread arrives for
    the warpgroup (``mbarrier.arrive``), after the warpgroup barrier Triton puts before it so
    that every thread is past its reads. Each thread's own arrival needs no barrier: in the
    persistent kernel on two consumers, two warpgroup barriers fewer a step. In-process A/B
    against one thread's (docs/perf-log.md, session 39): persistent d64 1k +2.9% (paired
    +1.1..+6.4%), d128 4k +1.7% (+0.4..+3.8%); the one-program-per-tile kernel (d128 from 16k
    keys) -1.0% (-1.9..-0.4%), so it keeps one thread's (its K alone by each thread: -0.5%,
    -2.7..+1.0%, session 40). On three consumers V is released by
    one thread: with 160 registers a thread, ptxas spills more with each thread's V arrival
    there (632 against 484 bytes, d64 causal, sm_90a)."""
    if OWN:
        async_copy.mbarrier_arrive(empty, increment_count=False)
    else:
        mbarrier.arrive(empty)


@gluon.jit
def _turn(wg, ARRIVE: gl.constexpr):
    """Consumer ``wg``'s turn to issue its products on its named barrier: wait for it
    (``bar.sync``: this warpgroup's threads and the previous consumer's arrival, two
    warpgroups' threads in all), or, ``ARRIVE``, hand it over (``bar.arrive``: each warp
    counts itself and goes on, no warpgroup barrier first)."""
    WARPS: gl.constexpr = gl.num_warps()
    lanes: gl.constexpr = gl.BlockedLayout([1], [32], [WARPS], [0])  # one value per thread
    ids = gl.full([WARPS * 32], TURN_BARRIER + wg, gl.int32, layout=lanes)
    threads = gl.full([WARPS * 32], 2 * WARPS * 32, gl.int32, layout=lanes)
    if ARRIVE:
        gl.inline_asm_elementwise("bar.arrive $1, $2;\n\tmov.u32 $0, 0;", "=r,r,r",
                                  [ids, threads], dtype=gl.int32, is_pure=False, pack=1)
    else:
        gl.inline_asm_elementwise("bar.sync $1, $2;\n\tmov.u32 $0, 0;", "=r,r,r",
                                  [ids, threads], dtype=gl.int32, is_pure=False, pack=1)


@gluon.jit
def _mask_scores(s, offs_m, start_n, seqlen_k, shift, BLOCK_N: gl.constexpr,
                 s_layout: gl.constexpr):
    """Raw scores with the keys past the sequence or right of a row's diagonal (``key <= row +
    shift``) set to -inf, before ``_softmax_block``."""
    # one comparison per score: a row keeps the tile's columns up to its last visible key,
    # min(row + shift, seqlen_k - 1), counted from the tile's first key
    cols = gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, s_layout))
    last = gl.minimum(offs_m + shift, seqlen_k - 1) - start_n
    keep = gl.expand_dims(cols, 0) <= gl.expand_dims(last, 1)
    return gl.where(keep, s, float("-inf"))


# _row_max's halving levels from a tile's width down to 8 columns
MAX_LEVELS = gl.constexpr({n: n.bit_length() - 4 for n in (16, 32, 64, 128, 256)})


@gluon.jit
def _row_max(s):
    """The row max of a tile of scores in an MMA accumulator layout (a thread holds a row's columns
    in pairs, eight columns apart). ``gl.max(s, 1)`` folds a thread's values of a row (32 at
    BLOCK_N 128) in one chain of dependent max instructions, which the exp2s wait for; here the
    columns are halved level by level (c against c + width/2) down to 8 wide, a tree 5 deep in
    place of a chain (session 22's four chains of 8, then the rest: 12 deep with the shuffles'
    maxes; now 7). As many instructions; the layouts only relabel registers
    (``assert_trivial``)."""
    BLOCK_M: gl.constexpr = s.type.shape[0]
    BLOCK_N: gl.constexpr = s.type.shape[1]
    x = s
    LEVELS: gl.constexpr = MAX_LEVELS[BLOCK_N]
    # halve down to 8 columns: each level pairs a thread's columns c and c + width/2 (8 apart
    # or more: in the same thread), one max per pair, no chain longer than one
    for i in gl.static_range(0, LEVELS):
        x = gl.max(gl.reshape(x, [BLOCK_M, 2, BLOCK_N >> (i + 1)]), 1)
    return gl.convert_layout(gl.max(x, 1), gl.SliceLayout(1, s.type.layout), assert_trivial=True)


# A row's running max moves only when a tile's scores pass it by more than this (log2 units):
# until then P is taken against the old max (its values up to 2^RESCALE_SLACK, within 16-bit
# range and exact in relative terms) and alpha is exactly 1, so that a warp whose rows all
# keep their max skips O's rescale (``_rescale``), as FlashAttention-4 does on Blackwell.
# float8 runs without slack (``_attend_tile``): with it, the largest output errors were 2-4x
# those of the same kernel without it (and of the tl kernel and PyTorch rounding P to e4m3
# against the row max), at head dims 64-256 (scripts/fp8_errors.py, docs/perf-log.md, session 65).
RESCALE_SLACK = gl.constexpr(8.0)

# float8 with ``ROWSUM_MMA``: P is taken against the running max less this (log2 units),
# P = 2^(s - m + 8) in [0, 256], before its rounding to e4m3 (largest finite 448), and the lse is
# corrected by it at the end (``_attend_tile`` returns the max P was taken against). (The float32
# sums, float8's path at d256, keep P against the max: with the shift, on an H100, their outputs
# were as far off as without it, and the d256 rows at 16k 0.7% / 2.0% lower in one bench run
# each, session 70.) A row's largest P stays a power of two (256, exact in e4m3, as 1 was), and
# the rest of the row keeps e4m3's normal range down to 2^-14 of it instead of 2^-6: against the
# row max, the terms below 2^-10 of it round to zero, and in long rows of spread scores they
# carry much of a row's sum (up to a tenth at 1,000 keys of tests/test_fp8.py's inputs, nearly a
# quarter at 4,096). Sums of the rounded P (``ROWSUM_MMA``) then lost it, and the outputs were
# 0.12 to 0.21 off at 1,000 to 4,096 keys on an H100 (the tests' bounds 0.05 to 0.09).
# scripts/fp8_shift_emulate.py (float64, P's rounding as here) gives 0.151 and 0.281 at 1,000
# keys (d128) and 4,096 (d64), 0.025 and 0.018 with the shift; the float32 sums' 0.027 and 0.025
# go to 0.025 and 0.0235 (docs/perf-log.md, session 69).
FP8_P_SHIFT = gl.constexpr(8.0)


@gluon.jit
def _softmax_block(s, m_i, l_i, qk_scale, NO_SUM: gl.constexpr = False,
                   SLACK: gl.constexpr = RESCALE_SLACK, P_SHIFT: gl.constexpr = 0.0):
    """One online-softmax step on raw scores ``s`` (log2 units after the scale, which must be
    positive: -inf scores stay -inf). Returns (p, alpha, m_new, l_new). The running max starts
    at -FLT_MAX, not -inf (``_attend_tile``), so a row that has seen no key yet keeps that finite
    max, gets p = exp2(-inf) = 0 and alpha = 1, and no guard is needed; its l stays 0. The
    max moves only by more than ``SLACK`` (``RESCALE_SLACK``); l and O are kept against the max
    it holds. ``NO_SUM``: l_new is l_i (the caller sums P on the tensor cores, ``_attend_tile``).
    ``P_SHIFT``: P against the max less it (``FP8_P_SHIFT``); m_new is still the max."""
    m_seen = _row_max(s) * qk_scale
    m_new = gl.where(m_seen > m_i + SLACK, m_seen, m_i)
    if P_SHIFT != 0.0:
        p = gl.exp2(s * qk_scale - gl.expand_dims(m_new - P_SHIFT, 1))
    else:
        p = gl.exp2(s * qk_scale - gl.expand_dims(m_new, 1))
    alpha = gl.exp2(m_i - m_new)
    if NO_SUM:
        l_new = l_i
    else:
        l_new = l_i * alpha + gl.sum(p, 1)
    return p, alpha, m_new, l_new


@gluon.jit
def _rescale(acc, alpha):
    """``acc * alpha`` (alpha per row, in ``acc``'s row layout) where any row of the warp has
    alpha != 1, else ``acc`` untouched: the warp votes (``vote.sync.any``) and branches around
    the multiplies, one asm block over all of a thread's accumulator values (a thread holds two
    rows, r and r + 8, in column pairs: its values' alphas alternate in pairs)."""
    BLOCK_M: gl.constexpr = acc.type.shape[0]
    HEAD_DIM: gl.constexpr = acc.type.shape[1]
    WARPS: gl.constexpr = gl.num_warps()
    N: gl.constexpr = BLOCK_M * HEAD_DIM // (WARPS * 32)  # values per thread
    acc, scale = gl.broadcast(acc, gl.expand_dims(alpha, 1))
    return gl.inline_asm_elementwise(_RESCALE_ASM[N], _RESCALE_CONSTRAINTS[N], [acc, scale],
                                     dtype=gl.float32, is_pure=True, pack=N)


def _rescale_asm(n: int) -> tuple[str, str]:
    """The asm and constraints of ``_rescale`` for ``n`` values per thread: outputs $0..n-1 tied
    to the values $n..2n-1, alphas $2n..3n-1 (the thread's two rows' alphas at 2n and 2n + 2)."""
    head = ("{\n\t.reg .pred p, q;\n\t"
            f"setp.neu.f32 p, ${2 * n}, 0f3F800000;\n\t"
            f"setp.neu.f32 q, ${2 * n + 2}, 0f3F800000;\n\t"
            "or.pred p, p, q;\n\tvote.sync.any.pred p, p, 0xffffffff;\n\t"
            "@!p bra.uni RESCALE_DONE_${:uid};\n\t")
    body = "".join(f"mul.f32 ${i}, ${i}, ${2 * n + i};\n\t" for i in range(n))
    asm = head + body + "RESCALE_DONE_${:uid}:\n\t}"
    constraints = ",".join(["=r"] * n + [str(i) for i in range(n)] + ["r"] * n)
    return asm, constraints


_RESCALE_ASM = gl.constexpr({n: _rescale_asm(n)[0] for n in (32, 64, 128)})
_RESCALE_CONSTRAINTS = gl.constexpr({n: _rescale_asm(n)[1] for n in (32, 64, 128)})


@gluon.jit
def _to_operand(p, dtype: gl.constexpr, PACKED: gl.constexpr, HALF: gl.constexpr = False):
    """``p.to(dtype)`` for the P·V product's register operand. 16-bit, two values per instruction
    into one 32-bit register in operand order. (``p.to`` is lowered to one conversion per value,
    and ptxas then packs each pair with its halves swapped and swaps them back with a ``PRMT``
    before the product: 32 instructions per consumer and step at d64.) ``PACKED`` false: ``p.to``
    (d256, where the persistent kernel spills more with the packed form: 116 bytes against 68).
    float8_e4m3fn: P unchanged (float32), converted at the product by ``_p_operand``
    (``_fp8_operand``): a float8 P carried across the step loop's back edge is held one byte a
    register (docs/perf-log.md, session 66). ``HALF`` (float8 only): P as float16 pairs instead,
    half the registers of float32 across the back edge, for ``_fp8_operand`` to convert from
    (the three-consumer kernel, whose 160 registers a thread the float32 P overflowed: 3,120
    bytes spilled at d64, 144 so, docs/perf-log.md, session 71; and the persistent kernel,
    ``_attend_tile``'s ``LATE_CVT``). Rounding to float16 first changes an e4m3 value only
    where the float16 value lands exactly on the midpoint of two e4m3 values."""
    if dtype.is_fp8():
        if HALF:
            return _to_operand(p, gl.float16, True)
        else:
            return p  # (converted by _p_operand)
    elif not PACKED:
        return p.to(dtype)
    elif dtype == gl.bfloat16:
        return gl.inline_asm_elementwise("cvt.rn.bf16x2.f32 $0, $2, $1;", "=r,r,r", [p],
                                         dtype=dtype.value, is_pure=True, pack=2)
    else:
        return gl.inline_asm_elementwise("cvt.rn.f16x2.f32 $0, $2, $1;", "=r,r,r", [p],
                                         dtype=dtype.value, is_pure=True, pack=2)


# four float32 values into one register of e4m3 bytes, the first in the lowest byte
_E4M3X4_ASM = gl.constexpr("{\n\t.reg .b16 lo, hi;\n\t"
                           "cvt.rn.satfinite.e4m3x2.f32 lo, $2, $1;\n\t"
                           "cvt.rn.satfinite.e4m3x2.f32 hi, $4, $3;\n\t"
                           "mov.b32 $0, {lo, hi};\n\t}")


# the same from two registers of float16 pairs, the first value in each low half
_E4M3X4_F16_ASM = gl.constexpr("{\n\t.reg .b16 lo, hi;\n\t"
                               "cvt.rn.satfinite.e4m3x2.f16x2 lo, $1;\n\t"
                               "cvt.rn.satfinite.e4m3x2.f16x2 hi, $2;\n\t"
                               "mov.b32 $0, {lo, hi};\n\t}")


@gluon.jit
def _fp8_operand(p, dtype: gl.constexpr):
    """Float32 P (the scores' accumulator layout) as float8 in the layout of an A operand, each
    32-bit register four keys of a row. A thread's accumulator holds, in each 32 keys, columns
    {2t, 2t+1, 2t+8, 2t+9} + 16h (t = lane % 4, h = 0, 1), and the operand wants keys
    {4t .. 4t+3} + 16h: the columns are relabelled (bits [h][a][t][e] of a column, a its 8s
    bit and e its 1s bit, read as key [h][t][a][e]) so that the conversion moves nothing
    between threads, and V's keys are stored in the same order by the launcher (V keys-minor,
    each 32 keys in ``keys_minor.ORDER``). The layouts only relabel registers
    (``assert_trivial``). The relabelling is done on the float32 values (or float16 ones,
    ``_to_operand``'s ``HALF``: each pair already in one register), and the four values of
    each register are then converted by one inline asm, rounded to nearest and saturated at
    e4m3's largest finite value (448; P is at most 256 there: no slack, ``FP8_P_SHIFT``). Converted
    at the end of the step before (``p.to``) and carried across the loop's back edge, the bytes
    were unpacked one a register and packed again: the d64 loop 1,100 instructions against 908
    (docs/perf-log.md, session 66)."""
    BLOCK_M: gl.constexpr = p.type.shape[0]
    BLOCK_N: gl.constexpr = p.type.shape[1]
    layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=p.type.layout, k_width=4)
    x = gl.permute(gl.reshape(p, [BLOCK_M, BLOCK_N // 32, 2, 2, 4, 2]), (0, 1, 2, 4, 3, 5))
    x = gl.convert_layout(gl.reshape(x, [BLOCK_M, BLOCK_N]), layout, assert_trivial=True)
    if p.dtype == gl.float16:
        return gl.inline_asm_elementwise(_E4M3X4_F16_ASM, "=r,r,r", [x], dtype=dtype.value,
                                         is_pure=True, pack=4)
    else:
        return gl.inline_asm_elementwise(_E4M3X4_ASM, "=r,r,r,r,r", [x], dtype=dtype.value,
                                         is_pure=True, pack=4)


@gluon.jit
def _p_operand(p, p_layout: gl.constexpr, dtype: gl.constexpr):
    """P as ``_to_operand`` left it, as the register A operand of ``P V`` in ``dtype``. 16-bit
    (P already cast): a layout conversion from the scores' accumulator layout (each thread
    already holds its operand values). float8 (P still float32): converted by ``_fp8_operand``,
    whose operand layout over the scores' tile is the same registers (``assert_trivial``)."""
    if dtype.is_fp8():
        return gl.convert_layout(_fp8_operand(p, dtype), p_layout, assert_trivial=True)
    else:
        return gl.convert_layout(p, p_layout)


@gluon.jit
def _masked_softmax(s, m_i, l_i, masked, offs_m, start_n, seqlen_k, shift, qk_scale,
                    BLOCK_N: gl.constexpr, s_layout: gl.constexpr, ONE_PATH: gl.constexpr,
                    NO_SUM: gl.constexpr, SLACK: gl.constexpr = RESCALE_SLACK,
                    P_SHIFT: gl.constexpr = 0.0):
    """``_softmax_block`` on the scores of the key tile at ``start_n``, masked first where the
    runtime flag ``masked`` says the tile has keys a row must not see. ``ONE_PATH``: one softmax
    after an optional mask (less code); otherwise the softmax is written out in both branches
    (the one-program-per-tile kernel always, 5% faster so at d128, 16k keys: docs/perf-log.md,
    session 9). In the one-path form the softmax and the loop's wait for ``P[j] V[j]`` share a
    basic block, and ptxas's scheduler moves that wait up into the softmax, so the softmax of
    S[j+1] does not run under the product; the branches' join keeps the wait after it. The
    persistent kernel's choice is made per call (``one_softmax_path``, session 22). ``NO_SUM``,
    ``SLACK``, ``P_SHIFT``: ``_softmax_block``'s."""
    if ONE_PATH:
        if masked:
            s = _mask_scores(s, offs_m, start_n, seqlen_k, shift, BLOCK_N, s_layout)
        p, alpha, m_new, l_new = _softmax_block(s, m_i, l_i, qk_scale, NO_SUM, SLACK, P_SHIFT)
    else:
        if masked:
            p, alpha, m_new, l_new = _softmax_block(
                _mask_scores(s, offs_m, start_n, seqlen_k, shift, BLOCK_N, s_layout), m_i, l_i,
                qk_scale, NO_SUM, SLACK, P_SHIFT)
        else:
            p, alpha, m_new, l_new = _softmax_block(s, m_i, l_i, qk_scale, NO_SUM, SLACK,
                                                    P_SHIFT)
    return p, alpha, m_new, l_new


@gluon.jit
def _sum_rows_async(l_acc, alpha, p_op, ones):
    """``ROWSUM_MMA``'s step: the row-sum accumulator (an [BLOCK_M, 8] MMA tile whose columns
    all hold the sums) rescaled by ``alpha`` like O, then ``P · ones`` issued on the same P
    operand as the step's ``P V`` (waited for with it, ``_retire_pv``). Returns (the product
    in flight, the rescaled sums). 16 bits: the product accumulates into the rescaled sums,
    and both values are it. Float8: the product starts from zero (one step's sums, 128 keys)
    and ``_retire_pv`` adds it to the rescaled sums in float32. The float8 tensor cores keep
    about 14 bits of an accumulation, truncated: sums carried across a row's steps in them
    dropped the small terms, and at 16k keys the outputs were 32% off (an emulation of that
    accumulation puts l 23-27% low; docs/perf-log.md, session 68)."""
    l_layout: gl.constexpr = l_acc.type.layout
    l_acc = l_acc * gl.expand_dims(gl.convert_layout(alpha, gl.SliceLayout(1, l_layout)), 1)
    p_l = gl.convert_layout(p_op, gl.DotOperandLayout(
        operand_index=0, parent=l_layout, k_width=32 // p_op.dtype.primitive_bitwidth))
    if p_op.dtype.is_fp8():
        step = warpgroup_mma(p_l, ones.permute((1, 0)), gl.zeros_like(l_acc), use_acc=False,
                             is_async=True)
        return step, l_acc
    else:
        l_acc = warpgroup_mma(p_l, ones.permute((1, 0)), l_acc, is_async=True)
        return l_acc, l_acc


@gluon.jit
def _retire_pv(acc, p_op, l_acc, l_base, v_free, ROWSUM_MMA: gl.constexpr,
               OWN_V: gl.constexpr):
    """A step's end: wait for its ``P V`` (and, with ``ROWSUM_MMA``, its row-sum product
    ``l_acc`` on the same P operand; float8: then added to ``l_base``, see
    ``_sum_rows_async``), then release the V slot (``v_free``, its empty barrier; ``OWN_V``:
    ``_release``'s ``OWN``). Returns (acc, l_acc). A float8 P is not among the wait's
    dependencies: Triton's wait takes 16-, 32- and 64-bit values only. (In the shipped d64,
    d128 and d256 kernels no instruction writes P's operand registers between the products that
    read them and this wait: ``analysis.sass_flow.register_operand_writes``, which
    tests/test_sass.py runs on each; the GPU tests check the outputs.)"""
    if ROWSUM_MMA and p_op.dtype.is_fp8():
        acc, l_acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc, l_acc))
        l_acc = l_base + l_acc
    elif ROWSUM_MMA:
        acc, p_op, l_acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc, p_op, l_acc))
    elif p_op.dtype.is_fp8():
        acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc,))
    else:
        acc, p_op = warpgroup_mma_wait(num_outstanding=0, deps=(acc, p_op))
    _release(v_free, OWN_V)
    return acc, l_acc


@gluon.jit
def _attend_tile(q_s, k_smem, v_smem, k_ready, k_empty, v_ready, v_empty, turn, zero_s, kv,
                 n_tiles, n_own, n_full, n_half, offs_m, seqlen_k, shift, qk_scale,
                 WG: gl.constexpr, BLOCK_N: gl.constexpr, LATE_CVT: gl.constexpr,
                 OWN_K: gl.constexpr, OWN_V: gl.constexpr, ONE_PATH: gl.constexpr, ones):
    """One consumer's rows against the first ``n_own`` of the ``n_tiles`` key tiles of a tile of
    work (causal: the tiles right of this consumer's last row's diagonal are not its own): per
    step it issues ``S[j+1] = Q Kⱼ₊₁ᵀ`` and ``O += P[j] V[j]`` back to back, then computes the softmax
    of S[j+1] while ``P[j] V[j]`` runs, O rescaled by the step's alpha before its product
    (``_rescale``) (FlashAttention-3's order; with ping-pong the consumers
    also take turns to issue, so that one's softmax runs under the other's products: ``_turn``;
    ``turn``'s shape says how many consumers take turns, 1 without ping-pong). Ring positions
    start at ``kv`` (the persistent kernel carries them across tiles; its producer reloads Q
    once every consumer has released the tile's last K slot). ``ONE_PATH``:
    ``_masked_softmax``'s.
    ``LATE_CVT`` (three consumers, 160 registers each; and the persistent kernel): P is cast
    to 16 bits only after ``P[j] V[j]`` has retired, so the two register copies of P are never
    live together (with each thread's own V release, a cast before the wait made ptxas copy P
    into the operand registers by 35 more moves a step: d64, sm_90a); float8 with ``LATE_CVT``
    (three consumers, and the persistent kernel) carries P across the loop as float16 pairs
    (``_to_operand``'s ``HALF``). ``OWN_K`` / ``OWN_V``: the K / V slots released by each
    thread's own arrival (``_release``): both in the persistent kernel on two consumers, K only
    on three, neither in the one-program-per-tile kernel.
    The tiles past ``n_own`` are only waited for and released, and with ping-pong their turns
    passed on, so that every consumer keeps the same step count on the shared barriers.
    ``ones``: an [8, BLOCK_N] tile of ones (``_ones_tile``), then P's row sums come from the
    tensor cores (``ROWSUM_MMA``): ``P[j] · ones`` issued after each ``P[j] V[j]`` into a
    [BLOCK_M, 8] accumulator rescaled like O, instead of a thread's adds and shuffles in the
    softmax (about 100 instructions a softmax copy at d64). The sums are then of P as rounded
    to 16 bits, the weights P·V gives V. Any other buffer (an mbarrier's): sums in float32.
    ``n_half`` 1: the last own tile's rows see only its first BLOCK_N / 2 keys (the causal
    diagonal of the first consumer of a 128-row tile against 128-key tiles), and that step
    runs on half the keys (``_half_tail``); 0 otherwise (the launchers pass the constant 0
    where no tile can be half, and the branch is compiled away).
    Returns (acc, m_i, l_i), O unnormalized, m_i the max P and l were taken against (float8:
    the running max less ``FP8_P_SHIFT``)."""
    BLOCK_M: gl.constexpr = q_s.type.shape[0]
    HEAD_DIM: gl.constexpr = q_s.type.shape[1]
    STAGES: gl.constexpr = k_smem.type.shape[0]
    CONSUMERS: gl.constexpr = turn.type.shape[0]  # 1 without ping-pong
    PINGPONG: gl.constexpr = CONSUMERS > 1
    dtype: gl.constexpr = q_s.dtype
    s_layout: gl.constexpr = zero_s.type.layout
    WARPS: gl.constexpr = gl.num_warps()
    o_layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[WARPS, 1],
        instr_shape=[16, HEAD_DIM, 256 // dtype.primitive_bitwidth])  # K steps of 32 bytes
    # (a 32-bit register holds two 16-bit operand values or four float8 ones)
    p_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=o_layout,
                                                 k_width=32 // dtype.primitive_bitwidth)
    row_s: gl.constexpr = gl.SliceLayout(1, s_layout)
    row_o: gl.constexpr = gl.SliceLayout(1, o_layout)
    l_layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[WARPS, 1],
        instr_shape=[16, 8, 256 // dtype.primitive_bitwidth])
    # the choice is read off the buffer's shape (the mbarrier buffer passed instead is [2 or 3,
    # 1]): a constexpr in a partition's args arrives as an i1 value, which cannot choose types
    ROWSUM_MMA: gl.constexpr = ones.type.shape[0] == 8
    # the running max's slack: RESCALE_SLACK in 16 bits, none for float8 (see there)
    SLACK: gl.constexpr = RESCALE_SLACK * (dtype.primitive_bitwidth // 16)
    # float8 with its row sums on the tensor cores: P against the max less FP8_P_SHIFT (see
    # there); otherwise against the max
    P_SHIFT: gl.constexpr = (FP8_P_SHIFT if ROWSUM_MMA else 0.0) if dtype.is_fp8() else 0.0
    FP8_HALF: gl.constexpr = dtype.is_fp8() and LATE_CVT
    m_i = gl.full([BLOCK_M], -3.4028234663852886e38, gl.float32, layout=row_s)  # -FLT_MAX
    l_i = gl.zeros([BLOCK_M], gl.float32, layout=row_s)
    acc = gl.zeros([BLOCK_M, HEAD_DIM], gl.float32, layout=o_layout)
    l_acc = gl.zeros([BLOCK_M, 8], gl.float32, layout=l_layout)
    if n_own > 0:
        slot0 = kv % STAGES
        mbarrier.wait(k_ready.index(slot0), (kv // STAGES) & 1)
        s = warpgroup_mma(q_s, k_smem.index(slot0).reshape([BLOCK_N, HEAD_DIM]).permute((1, 0)),
                          zero_s, use_acc=False, is_async=True)
        s = warpgroup_mma_wait(num_outstanding=0, deps=(s,))
        _release(k_empty.index(slot0), OWN_K)
        p, alpha, m_i, l_i = _masked_softmax(s, m_i, l_i, 0 >= n_full, offs_m, 0, seqlen_k,
                                             shift, qk_scale, BLOCK_N, s_layout, ONE_PATH,
                                             ROWSUM_MMA, SLACK, P_SHIFT)
        p16 = _to_operand(p, dtype, HEAD_DIM <= 128, FP8_HALF)
        for j in range(0, n_own - 1 - n_half):
            slot = (kv + j) % STAGES
            nslot = (kv + j + 1) % STAGES
            if PINGPONG:
                _turn(WG, False)
            mbarrier.wait(k_ready.index(nslot), ((kv + j + 1) // STAGES) & 1)
            s_next = warpgroup_mma(
                q_s, k_smem.index(nslot).reshape([BLOCK_N, HEAD_DIM]).permute((1, 0)),
                zero_s, use_acc=False, is_async=True)
            acc = _rescale(acc, gl.convert_layout(alpha, row_o))
            p_op = _p_operand(p16, p_layout, dtype)
            mbarrier.wait(v_ready.index(slot), ((kv + j) // STAGES) & 1)
            if dtype.is_fp8():  # keys-minor, [HEAD_DIM, BLOCK_N]: read transposed
                v_op = v_smem.index(slot).permute((1, 0))
            else:
                v_op = v_smem.index(slot).reshape([BLOCK_N, HEAD_DIM])
            acc = warpgroup_mma(p_op, v_op, acc, is_async=True)
            l_base = l_acc
            if ROWSUM_MMA:
                l_acc, l_base = _sum_rows_async(l_acc, alpha, p_op, ones)
            if PINGPONG:
                _turn((WG + 1) % CONSUMERS, True)  # the next one's turn
            s = warpgroup_mma_wait(num_outstanding=2 if ROWSUM_MMA else 1, deps=(s_next,))
            _release(k_empty.index(nslot), OWN_K)
            p, alpha, m_i, l_i = _masked_softmax(s, m_i, l_i, j + 1 >= n_full, offs_m,
                                                 (j + 1) * BLOCK_N, seqlen_k, shift, qk_scale,
                                                 BLOCK_N, s_layout, ONE_PATH, ROWSUM_MMA,
                                                 SLACK, P_SHIFT)
            if not LATE_CVT:
                p16 = _to_operand(p, dtype, HEAD_DIM <= 128, FP8_HALF)
            acc, l_acc = _retire_pv(acc, p_op, l_acc, l_base, v_empty.index(slot),
                                    ROWSUM_MMA, OWN_V)
            if LATE_CVT:
                p16 = _to_operand(p, dtype, HEAD_DIM <= 128, FP8_HALF)
        # (float8 runs whole tiles: the constant False keeps the half step out of its code)
        if not dtype.is_fp8() and n_half > 0:
            acc, m_i, l_i = _half_tail(q_s, k_smem, v_smem, k_ready, k_empty, v_ready, v_empty,
                                       acc, l_acc, p16, alpha, m_i, l_i, kv + n_own - 1,
                                       offs_m, (n_own - 1) * BLOCK_N, seqlen_k, shift,
                                       qk_scale, WG, CONSUMERS, BLOCK_N, LATE_CVT, OWN_K, OWN_V,
                                       ONE_PATH, ones)
        else:
            slot = (kv + n_own - 1) % STAGES
            acc = _rescale(acc, gl.convert_layout(alpha, row_o))
            p_op = _p_operand(p16, p_layout, dtype)
            mbarrier.wait(v_ready.index(slot), ((kv + n_own - 1) // STAGES) & 1)
            if dtype.is_fp8():  # keys-minor, [HEAD_DIM, BLOCK_N]: read transposed
                v_op = v_smem.index(slot).permute((1, 0))
            else:
                v_op = v_smem.index(slot).reshape([BLOCK_N, HEAD_DIM])
            acc = warpgroup_mma(p_op, v_op, acc, is_async=True)
            if ROWSUM_MMA:
                l_acc, l_base = _sum_rows_async(l_acc, alpha, p_op, ones)
                acc, l_acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc, l_acc))
                if dtype.is_fp8():  # (the step's sums, started from zero)
                    l_acc = l_base + l_acc
                # the 8 columns hold the same sums: any one is the row's l
                l_i = gl.convert_layout(gl.max(l_acc, 1), row_s)
            else:
                acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc,))
            _release(v_empty.index(slot), OWN_V)
    # tiles past this consumer's own: release each slot once it is filled (an arrival before
    # the fill could count towards the slot's previous use); tile i stands for step i - 1,
    # whose turn is taken and passed on around it, as a computed step would
    for i in range(n_own, n_tiles):
        slot = (kv + i) % STAGES
        if PINGPONG:
            if i > 0:
                _turn(WG, False)
        mbarrier.wait(k_ready.index(slot), ((kv + i) // STAGES) & 1)
        _release(k_empty.index(slot), OWN_K)
        mbarrier.wait(v_ready.index(slot), ((kv + i) // STAGES) & 1)
        _release(v_empty.index(slot), OWN_V)
        if PINGPONG:
            if i > 0:
                _turn((WG + 1) % CONSUMERS, True)
    if P_SHIFT != 0.0:
        m_i = m_i - P_SHIFT
    return acc, m_i, l_i


@gluon.jit
def _half_tail(q_s, k_smem, v_smem, k_ready, k_empty, v_ready, v_empty, acc, l_acc, p16,
               alpha, m_i, l_i, last, offs_m, start_n, seqlen_k, shift, qk_scale,
               WG: gl.constexpr, CONSUMERS: gl.constexpr, BLOCK_N: gl.constexpr,
               LATE_CVT: gl.constexpr, OWN_K: gl.constexpr, OWN_V: gl.constexpr,
               ONE_PATH: gl.constexpr, ones):
    """``_attend_tile``'s last two steps when the last own key tile (ring position ``last``,
    keys from ``start_n``) is visible to this consumer's rows only in its first half: the step
    issues ``S = Q K[last][:BLOCK_N/2]ᵀ`` beside ``P[last-1] V[last-1]`` (whose P, ``p16``, and
    alpha the loop left), then the softmax of those half-width scores (masked), then
    ``P V[last][:BLOCK_N/2]``: the keys right of the rows' diagonal are neither multiplied nor
    exponentiated (at 1k causal keys, a quarter of the first consumer's diagonal work, 1/18 of
    all its steps' work). The producer still loads whole tiles, and the slots are released as
    in a full step. With ``ROWSUM_MMA`` (``ones`` an [8, BLOCK_N] tile) the half step's row sums
    are those of P as rounded to 16 bits, added in float32 to the tensor cores' sums so far.
    In-process A/B against whole tiles (docs/perf-log.md, session 38; two runs, causal 1k / 2k
    / 4k / 16k): d128 +0.1..+0.6% / +1.6..+2.2% / +1.5..+1.6% / +0.9..+1.3%, d64 -0.5..-0.3% /
    -0.1..+0.7% / +0.6..+0.7% / +1.1..+1.3%, every paired range across zero.
    Returns (acc, m_i, l_i) as ``_attend_tile`` does."""
    BLOCK_M: gl.constexpr = q_s.type.shape[0]
    HEAD_DIM: gl.constexpr = q_s.type.shape[1]
    STAGES: gl.constexpr = k_smem.type.shape[0]
    HALF: gl.constexpr = BLOCK_N // 2
    dtype: gl.constexpr = q_s.dtype
    WARPS: gl.constexpr = gl.num_warps()
    ROWSUM_MMA: gl.constexpr = ones.type.shape[0] == 8
    h_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[WARPS, 1],
                                                       instr_shape=[16, HALF, 16])
    o_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[WARPS, 1],
                                                       instr_shape=[16, HEAD_DIM, 16])
    p_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=o_layout, k_width=2)
    row_h: gl.constexpr = gl.SliceLayout(1, h_layout)
    row_o: gl.constexpr = gl.SliceLayout(1, o_layout)
    row_s: gl.constexpr = m_i.type.layout
    slot = (last - 1) % STAGES
    hslot = last % STAGES
    # the step: S on the first half of the last K tile beside the previous tile's P V
    if CONSUMERS > 1:
        _turn(WG, False)
    mbarrier.wait(k_ready.index(hslot), (last // STAGES) & 1)
    k_half = k_smem.index(hslot).reshape([BLOCK_N, HEAD_DIM]).slice(0, HALF)
    s = warpgroup_mma(q_s, k_half.permute((1, 0)),
                      gl.zeros([BLOCK_M, HALF], gl.float32, layout=h_layout), use_acc=False,
                      is_async=True)
    acc = _rescale(acc, gl.convert_layout(alpha, row_o))
    p_op = _p_operand(p16, p_layout, dtype)
    mbarrier.wait(v_ready.index(slot), ((last - 1) // STAGES) & 1)
    acc = warpgroup_mma(p_op, v_smem.index(slot).reshape([BLOCK_N, HEAD_DIM]), acc,
                        is_async=True)
    l_base = l_acc
    if ROWSUM_MMA:
        l_acc, l_base = _sum_rows_async(l_acc, alpha, p_op, ones)
    if CONSUMERS > 1:
        _turn((WG + 1) % CONSUMERS, True)
    s = warpgroup_mma_wait(num_outstanding=2 if ROWSUM_MMA else 1, deps=(s,))
    _release(k_empty.index(hslot), OWN_K)
    p, alpha, m_h, l_h = _masked_softmax(s, gl.convert_layout(m_i, row_h),
                                         gl.convert_layout(l_i, row_h), True,
                                         gl.convert_layout(offs_m, row_h), start_n, seqlen_k,
                                         shift, qk_scale, HALF, h_layout, ONE_PATH, ROWSUM_MMA)
    if not LATE_CVT:
        p16 = _to_operand(p, dtype, True)
    acc, l_acc = _retire_pv(acc, p_op, l_acc, l_base, v_empty.index(slot), ROWSUM_MMA, OWN_V)
    if LATE_CVT:
        p16 = _to_operand(p, dtype, True)
    if ROWSUM_MMA:
        # the sums so far (any of the 8 columns), rescaled, plus the half step's
        l_h = gl.convert_layout(gl.max(l_acc, 1), row_h) * alpha + gl.sum(p16.to(gl.float32), 1)
    # the last product: P on the first half of the last V tile
    acc = _rescale(acc, gl.convert_layout(alpha, row_o))
    p_op = _p_operand(p16, p_layout, dtype)
    mbarrier.wait(v_ready.index(hslot), (last // STAGES) & 1)
    acc = warpgroup_mma(p_op, v_smem.index(hslot).reshape([BLOCK_N, HEAD_DIM]).slice(0, HALF),
                        acc, is_async=True)
    acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc,))
    _release(v_empty.index(hslot), OWN_V)
    return acc, gl.convert_layout(m_h, row_s), gl.convert_layout(l_h, row_s)


@gluon.jit
def _normalize(acc, m_i, l_i):
    """O = acc / l and lse (natural log) for a consumer's rows; a row that saw no key gets O = 0
    and lse = -inf. The row's log2 and reciprocal by the special-function unit's approximate
    instructions (``lg2.approx``, ``rcp.approx``: errors of a few units in float32's last
    place, far below the 16-bit output's), where ``gl.log2`` and ``1.0 / l`` compile to
    float32-exact sequences of about 25 and 12 instructions a row with range handling, which
    every tile pays in its epilogue. l is at least 1 for a row that saw a key (its max scores
    an exp2 of 0 or more), so flushing subnormals changes nothing."""
    seen = l_i > 0.0
    l_safe = gl.where(seen, l_i, 1.0)
    log2_l = gl.inline_asm_elementwise("lg2.approx.ftz.f32 $0, $1;", "=r,r", [l_safe],
                                       dtype=gl.float32, is_pure=True, pack=1)
    lse = gl.where(seen, (m_i + log2_l) * 0.6931471805599453, float("-inf"))
    # one reciprocal per row and a multiply per value
    inv = gl.inline_asm_elementwise("rcp.approx.ftz.f32 $0, $1;", "=r,r", [l_safe],
                                    dtype=gl.float32, is_pure=True, pack=1)
    out = acc * gl.expand_dims(gl.convert_layout(inv, gl.SliceLayout(1, acc.type.layout)), 1)
    return out, lse


@gluon.jit
def _ones_tile(ROWSUM_MMA: gl.constexpr, dtype: gl.constexpr, BLOCK_N: gl.constexpr, stand_in):
    """With ``ROWSUM_MMA``, an [8, BLOCK_N] tile of ones in shared memory, the B operand (K-major)
    of the consumers' row-sum products (``_attend_tile``), written by the default partition's
    4 warps before the partitions start; else ``stand_in`` (an mbarrier buffer, never read),
    whose other shape tells ``_attend_tile`` to sum in float32."""
    if ROWSUM_MMA:
        layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([8, BLOCK_N], dtype)
        fill: gl.constexpr = gl.BlockedLayout([1, 8], [1, 32], [4, 1], [1, 0])
        if dtype.is_fp8():  # e4m3's 1.0 as its bits: converted, two bytes of the four a thread
            # stored were a register's stale upper half (ptxas; docs/perf-log.md, session 68)
            one = gl.full([8, BLOCK_N], 0x38, gl.uint8, layout=fill).to(dtype, bitcast=True)
        else:
            one = gl.full([8, BLOCK_N], 1.0, dtype, layout=fill)
        ones = gl.allocate_shared_memory(dtype, [8, BLOCK_N], layout, one)
        fence_async_shared()
        return ones
    else:
        return stand_in


# What both forward kernels' partitions share (fwd_gluon.py's and fwd_gluon_persistent.py's)

@gluon.jit
def _first_turn(turn, WG: gl.constexpr):
    """With ping-pong (``turn``'s shape: one entry per consumer), the last consumer hands the
    first consumer its first turn as the partitions start."""
    CONSUMERS: gl.constexpr = turn.type.shape[0]
    if CONSUMERS > 1:
        if WG == CONSUMERS - 1:
            _turn(0, True)


@gluon.jit
def _half_last(n_own, rows_end, seqlen_k, shift, BLOCK_N: gl.constexpr, HALF_TAIL):
    """``_attend_tile``'s ``n_half``: 1 where a consumer's rows (up to ``rows_end``) see only
    the first half of their last own key tile and it is not their only one, else 0; the
    constant 0 without ``HALF_TAIL`` (the launch's constexpr, which arrives here as a
    constant i1: the branch, and with it the half step, are compiled away)."""
    n_half = n_own * 0
    if HALF_TAIL:
        visible = gl.minimum(seqlen_k, gl.maximum(rows_end + shift, 0)) - (n_own - 1) * BLOCK_N
        n_half = ((n_own > 1) & (visible <= BLOCK_N // 2)).to(gl.int32)
    return n_half


@gluon.jit
def _ring_barriers(STAGES: gl.constexpr, PINGPONG: gl.constexpr, CONSUMERS: gl.constexpr,
                   K_ARRIVALS: gl.constexpr, V_ARRIVALS: gl.constexpr):
    """The K/V rings' ready / empty mbarriers (empty: K_ARRIVALS / V_ARRIVALS per consumer, 1
    or its thread count: ``_release``), and ``turn``:
    a buffer never read, [consumers, 1] with ping-pong and [1, 1] without, whose shape tells
    the consumers how many take turns (constexprs do not reach the partitions, a buffer's
    shape does; the turns themselves run on named barriers, ``_turn``)."""
    k_ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    k_empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    v_ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    v_empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(STAGES):
        mbarrier.init(k_ready.index(i), count=1)
        mbarrier.init(v_ready.index(i), count=1)
        mbarrier.init(k_empty.index(i), count=CONSUMERS * K_ARRIVALS)
        mbarrier.init(v_empty.index(i), count=CONSUMERS * V_ARRIVALS)
    TURNS: gl.constexpr = CONSUMERS if PINGPONG else 1
    turn = gl.allocate_shared_memory(gl.int64, [TURNS, 1], mbarrier.MBarrierLayout())
    return k_ready, k_empty, v_ready, v_empty, turn
