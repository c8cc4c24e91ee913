"""The order in which a persistent causal forward hands its tiles to the programs.

A persistent launch gives program p the tiles p, p + P, p + 2·P, … of a list (P programs), odd
rounds in reverse (``fwd_gluon._snake``). Causal tiles differ in cost (a tile of rows sees
the keys up to its diagonal), so how evenly the programs' loads come out depends on the list:

- ``HEAD_MAJOR``: head by head, each head's longest tiles first. The programs running together
  share a few heads' K and V in L2 (at 1k–4k keys it measured +14% over the row-major order at
  head dim 128, docs/perf-log.md, session 5), but when a round of P tiles does not line up
  with the heads, the snake pairs long tiles with long ones: at 16384 keys with 192-row tiles
  the largest program load is 1.27× the mean.
- ``ROW_MAJOR``: row block by row block from the last, every head's at each: each round's tiles
  cost about the same, so the snake balances to within 1–3% at every length, at the price of
  the programs running together spreading over every head (at 4096 keys, d64, that cost 6%
  more than the balance gained).

:func:`causal_fwd_order` picks row-major only where the head-major list balances badly: the
kernel (``fwd_gluon._pers_tile``) takes the choice as a runtime argument. The head-dim-256
backward's dQ kernel (kernels/bwd_gluon_d256_dq.py), whose tiles are rows against the keys up to
their diagonal as the forward's are, lists its tiles with the same function and model.
"""

from __future__ import annotations

import functools

import numpy as np

HEAD_MAJOR = 1
ROW_MAJOR = 2
# row-major is chosen when its modeled balance is more than this many times head-major's: below
# it, head-major's L2 reuse is worth more. Measured (d64 causal, 192-row tiles, 32 heads,
# bench/results/2026-11-29-s8-tune-fwd-c3-causal.json): at 4096 keys the model gives 0.946 /
# 0.887 = 1.07 and head-major ran 391.1 TFLOP/s against row-major's 366.4; at 16384, 0.998 /
# 0.788 = 1.27 and row-major ran 467.1 against 386.4.
ROW_MAJOR_GAIN = 1.10


def snake_loads(costs: np.ndarray, programs: int) -> np.ndarray:
    """Each program's summed cost when tile t of ``costs`` (in list order) goes to program
    t mod P, odd rounds in reverse (the kernel's ``_snake``)."""
    total = len(costs)
    t = np.arange(total)
    rnd, lane = np.divmod(t, programs)
    in_round = np.minimum(programs, total - rnd * programs)
    lane = np.where(rnd % 2 == 1, in_round - 1 - lane, lane)
    return np.bincount(lane, weights=costs, minlength=programs)


def balance(costs: np.ndarray, programs: int) -> float:
    """Mean program load over the largest (1.0: perfect) of the snake over ``costs``."""
    loads = snake_loads(costs, programs)
    return float(loads.mean() / loads.max()) if loads.max() > 0 else 1.0


def causal_tile_costs(seqlen_q: int, seqlen_k: int, shift: int, block_rows: int, block_n: int,
                      overhead: float = 1.0) -> np.ndarray:
    """One head's causal forward tiles, longest first: key tiles up to the tile's last row's
    diagonal (``key <= row + shift``), plus ``overhead`` tiles of fixed cost."""
    n_m = -(-seqlen_q // block_rows)
    last_row = (np.arange(n_m)[::-1] + 1) * block_rows - 1
    keys = np.clip(last_row + shift + 1, 0, seqlen_k)
    return -(-keys // block_n) + overhead


def tile_lists(per_head: np.ndarray, heads: int) -> tuple[np.ndarray, np.ndarray]:
    """The costs of ``heads`` heads' tiles (each head's ``per_head``, longest first) listed
    head by head and row block by row block across the heads."""
    return np.tile(per_head, heads), np.repeat(per_head, heads)


@functools.lru_cache(maxsize=256)
def causal_fwd_order(seqlen_q: int, seqlen_k: int, shift: int, heads: int, block_rows: int,
                     block_n: int, programs: int) -> int:
    """``HEAD_MAJOR`` or ``ROW_MAJOR`` for a persistent causal forward of ``heads`` (batch ·
    heads) heads, ``block_rows``-row tiles, on ``programs`` programs (see the module
    docstring)."""
    head_major, row_major = tile_lists(
        causal_tile_costs(seqlen_q, seqlen_k, shift, block_rows, block_n), heads)
    if balance(row_major, programs) > balance(head_major, programs) * ROW_MAJOR_GAIN:
        return ROW_MAJOR
    return HEAD_MAJOR
