"""The persistent Gluon kernels' walk over their tiles, shared by the forward
(kernels/fwd_gluon.py) and the backward (kernels/bwd_gluon.py, bwd_gluon_d256.py,
bwd_gluon_d256_dq.py): which tile a program takes next (``_table_range``, ``_table_tile``,
``_snake``), what a forward tile is (``_pers_tile``: batch, head, rows, key tiles), and
divisions by a runtime value as a multiply and a shift (``_divide``, with the host's
``fast_divisor``). The host-side tile orders and tables are in kernels/schedule.py.
"""

from __future__ import annotations

from triton.experimental import gluon
from triton.experimental.gluon import language as gl


@gluon.jit
def _snake(t, total):
    """Position of a persistent program's tile ``t`` (t = program_id + k·num_programs) in the
    tile list (head by head, each head's longest tiles first): round k's tiles go to the
    programs in order when k is even and in reverse when odd, so the program that took a
    round's longest tiles takes the next round's shortest. On the causal tile costs
    (scripts/schedule_model.py) this balances the programs' work to 0.97 of perfect at
    512-8k tokens (plain round-robin: 0.65-0.93), but 0.68 at d128 16k, where one program per
    tile is used instead."""
    P = gl.num_programs(0)
    k = t // P
    lane = t - k * P
    if k % 2 == 1:
        lane = gl.minimum(P, total - k * P) - 1 - lane
    return k * P + lane


@gluon.jit
def _divide(n, d, by, FAST: gl.constexpr):
    """``n // d`` for 0 <= n < 2^31: with ``FAST`` by the multiply and shift of ``by`` =
    ``fast_divisor(d)`` (a wide multiply and a shift in place of the ~15 instructions of a
    division by a runtime value), else by ``d``."""
    if FAST:
        q = ((n.to(gl.int64) * (by & 0xFFFFFFFF)) >> (by >> 32)).to(gl.int32)
    else:
        q = n // d
    return q


@gluon.jit
def _pers_tile(t, n_m, nheads, group, seqlen_k, shift, total, order,
               BLOCK_M2: gl.constexpr, BLOCK_N: gl.constexpr, FROM_TABLE: gl.constexpr = False,
               divs=0, FAST: gl.constexpr = False, row0=0):
    """Tile ``t`` of the persistent forward (and of the d256 backward's dQ kernel, whose
    tiles are rows too): (batch, head, key head, first row, key tiles). Row block ``i`` starts
    at row ``row0 + i · BLOCK_M2``: ``row0`` 0, or (the causal forward) a multiple of the
    consumers' rows ≤ 0, so that the partial block is the first, the shortest.
    ``order`` 0 (not causal): head by head, a head's row blocks in order, so the programs
    running together share K and V in L2. Causal, the longest row blocks (the last) first and
    the tiles taken in ``_snake`` order, listed head by head (1, ``HEAD_MAJOR``:
    measured 391 TFLOP/s at d128 1k causal against 342.1 row-major, docs/perf-log.md, session
    5) or row block by row block across the heads (2, ``ROW_MAJOR``: balanced where the
    head-major list's rounds do not line up with the heads; the launcher chooses,
    ``causal_fwd_order``, kernels/schedule.py). ``FROM_TABLE``: ``t`` is already a
    head-major tile id, from the launch's table (``_table_range``; ``order`` 1). With
    ``FAST``, ``divs`` holds ``fast_divisor`` of ``n_m``, ``nheads`` and ``group`` (the
    kernel's int64 arguments), and the tile's divisions use them (``_divide``)."""
    if FAST:
        n_m_by, nheads_by, group_by = divs
    else:
        n_m_by = 0
        nheads_by = 0
        group_by = 0
    idx = t
    if not FROM_TABLE:
        if order > 0:
            idx = _snake(t, total)
    if order == 2:
        heads_total = total // n_m
        bh = idx % heads_total
        pid_m = idx // heads_total
    else:
        bh = _divide(idx, n_m, n_m_by, FAST)
        pid_m = idx - bh * n_m
    if order > 0:
        pid_m = n_m - 1 - pid_m
    b = _divide(bh, nheads, nheads_by, FAST)
    h = bh - b * nheads
    m0 = pid_m * BLOCK_M2 + row0
    n_tiles = gl.cdiv(gl.minimum(seqlen_k, gl.maximum(m0 + BLOCK_M2 + shift, 0)), BLOCK_N)
    return b, h, _divide(h, group, group_by, FAST), m0, n_tiles


@gluon.jit
def _table_range(table, total):
    """A persistent program's walk over its tiles: ``for e in range(lo, hi, stride)``, then
    ``_table_tile(table, e)``. ``table`` a pointer (tile_order "greedy[N]", kernels/schedule.py,
    ``greedy_table``): entries ``starts[p]`` up to ``starts[p + 1]`` of the tile ids that follow
    the programs + 1 starts, those the host assigned to program p; an integer (a launch without
    a table, which then compiles as if it had no such argument): t = p, p + programs, … below
    ``total``."""
    pid = gl.program_id(0)
    if table.dtype.is_ptr():
        lo = gl.load(table + pid)
        hi = gl.load(table + pid + 1)
        stride: gl.constexpr = 1
    else:
        lo = pid
        hi = total
        stride = gl.num_programs(0)
    return lo, hi, stride


@gluon.jit
def _table_tile(table, e):
    """Entry ``e`` of ``_table_range``'s walk: the tile id."""
    if table.dtype.is_ptr():
        t = gl.load(table + gl.num_programs(0) + 1 + e)
    else:
        t = e
    return t


def fast_divisor(d: int) -> int:
    """``d`` (1 <= d < 2^31) as the kernels' ``_divide`` takes it: a multiplier m and shift
    p packed as ``m | p << 32``, with p = 31 + ceil(log2 d) and m = ceil(2^p / d) < 2^32, so
    that ``(n * m) >> p == n // d`` for every 0 <= n < 2^31 (m·d - 2^p < d <= 2^(p - 31))."""
    if not 1 <= d < 2**31:
        raise ValueError(f"fast_divisor: {d} outside [1, 2^31)")
    p = 31 + (d - 1).bit_length()
    m = -(-(1 << p) // d)
    return m | p << 32
