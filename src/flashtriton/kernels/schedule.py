"""The order in which a persistent causal forward hands its tiles to the programs.

A persistent launch gives program p the tiles p, p + P, p + 2·P, … of a list (P programs), odd
rounds in reverse (``tile_walk._snake``). Causal tiles differ in cost (a tile of rows sees
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
kernel (``tile_walk._pers_tile``) takes the choice as a runtime argument. The head-dim-256
backward's dQ kernel (kernels/bwd_gluon_d256_dq.py), whose tiles are rows against the keys up to
their diagonal as the forward's are, lists its tiles with the same function and model.
"""

from __future__ import annotations

import functools
import heapq

import numpy as np
import torch

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
                      overhead: float = 1.0, lead: int = 0) -> np.ndarray:
    """One head's causal forward tiles, longest first: key tiles up to the tile's last row's
    diagonal (``key <= row + shift``), plus ``overhead`` tiles of fixed cost. The row blocks
    start ``lead`` rows before row 0 (the persistent forward's, ``tile_walk._pers_tile``'s
    ``row0``: the first block is the partial one), at row 0 by default (the last one)."""
    n_m = -(-seqlen_q // block_rows)
    if not 0 <= lead < block_rows or lead > n_m * block_rows - seqlen_q:
        raise ValueError(f"causal_tile_costs: lead={lead} for {seqlen_q} rows in blocks of "
                         f"{block_rows}: every block must hold a row")
    last_row = (np.arange(n_m)[::-1] + 1) * block_rows - 1 - lead
    keys = np.clip(last_row + shift + 1, 0, seqlen_k)
    return -(-keys // block_n) + overhead


def tile_lists(per_head: np.ndarray, heads: int) -> tuple[np.ndarray, np.ndarray]:
    """The costs of ``heads`` heads' tiles (each head's ``per_head``, longest first) listed
    head by head and row block by row block across the heads."""
    return np.tile(per_head, heads), np.repeat(per_head, heads)


@functools.lru_cache(maxsize=256)
def causal_fwd_order(seqlen_q: int, seqlen_k: int, shift: int, heads: int, block_rows: int,
                     block_n: int, programs: int, lead: int = 0) -> int:
    """``HEAD_MAJOR`` or ``ROW_MAJOR`` for a persistent causal forward of ``heads`` (batch ·
    heads) heads, ``block_rows``-row tiles, on ``programs`` programs (see the module
    docstring); ``lead`` as ``causal_tile_costs``'s."""
    head_major, row_major = tile_lists(
        causal_tile_costs(seqlen_q, seqlen_k, shift, block_rows, block_n, lead=lead), heads)
    if balance(row_major, programs) > balance(head_major, programs) * ROW_MAJOR_GAIN:
        return ROW_MAJOR
    return HEAD_MAJOR


# ----------------------------------------------------------------------------- greedy tables
# A greedy table: the host hands each tile to the program with the least modeled work so far, as the
# hardware hands a one-program-per-tile grid's next program to the first free SM, but with the
# whole list known in advance: heads in groups of ``group``, each group's tiles longest first
# across its heads. Within a group the list is sorted by cost (longest-processing-time first), so
# the last tiles, the shortest, fill the programs up evenly; across groups the programs running
# together stay within a few heads (their K and V, or Q and dO, shared in L2). The kernel reads
# its tiles from a table (``greedy_table``): program p runs entries starts[p] .. starts[p + 1]
# - 1 in order. Modeled balance (scripts/schedule_model.py, one step of fixed cost a tile, 132
# programs): d64 forward 4k 0.998 at groups of 4 (snake 0.970), 1k 0.987 at 16 (0.970); d128
# backward 16k 0.998 at 2 (snake 0.678, one program per tile 0.993).
GREEDY_GROUPS = (1, 2, 4, 8, 16)
# the smallest group whose modeled balance is within this of the best group's is chosen
GREEDY_SLACK = 0.003


def greedy_loads(costs: np.ndarray, programs: int) -> tuple[np.ndarray, np.ndarray]:
    """Each tile of ``costs`` (in list order) to the program with the least load so far (ties:
    the lowest program). Returns (program of each tile, each program's load)."""
    heap = [(0.0, p) for p in range(programs)]
    owner = np.empty(len(costs), dtype=np.int64)
    loads = np.zeros(programs)
    for i, cost in enumerate(costs):
        load, p = heapq.heappop(heap)
        owner[i] = p
        loads[p] = load + cost
        heapq.heappush(heap, (load + cost, p))
    return owner, loads


def grouped_order(per_head: np.ndarray, heads: int, group: int) -> np.ndarray:
    """Tile ids ``head · len(per_head) + rank`` (rank in ``per_head``, which is longest first)
    listed by groups of ``group`` heads, each group's tiles longest first (heads in order
    where costs tie)."""
    n = len(per_head)
    rank = np.argsort(-per_head, kind="stable")
    out = []
    for h0 in range(0, heads, group):
        hs = np.arange(h0, min(h0 + group, heads))
        out.append((hs[None, :] * n + rank[:, None]).reshape(-1))
    return np.concatenate(out) if out else np.zeros(0, dtype=np.int64)


def greedy_table(per_head: tuple, heads: int, programs: int, group: int = 0
                 ) -> tuple[np.ndarray, int, float]:
    """The table of a greedy launch (tile_order "greedy[N]") over ``heads`` heads whose tiles
    cost ``per_head`` each (longest first; ``device_table`` keeps one per launch shape): int32 [programs + 1 starts, then the tile ids], program p's tiles at
    ``programs + 1 + starts[p]`` up to ``programs + 1 + starts[p + 1]``. ``group`` 0: the
    smallest of ``GREEDY_GROUPS`` whose modeled balance is within ``GREEDY_SLACK`` of the best.
    Returns (table, group, modeled balance)."""
    if programs < 1 or heads < 1 or not per_head:
        raise ValueError(f"greedy_table: {programs} programs, {heads} heads, "
                         f"{len(per_head)} tiles a head")
    costs = np.asarray(per_head, dtype=np.float64)
    flat = np.tile(costs, heads)
    plans = {}
    for g in ([group] if group else [g for g in GREEDY_GROUPS if g <= heads] or [1]):
        order = grouped_order(costs, heads, g)
        owner, loads = greedy_loads(flat[order], programs)
        plans[g] = (order, owner, float(loads.mean() / loads.max()) if loads.max() > 0 else 1.0)
    best = max(p[2] for p in plans.values())
    g = min(k for k, p in plans.items() if p[2] >= best - GREEDY_SLACK)
    order, owner, bal = plans[g]
    by_program = np.argsort(owner, kind="stable")  # each program's tiles in list order
    starts = np.concatenate([[0], np.cumsum(np.bincount(owner, minlength=programs))])
    table = np.concatenate([starts, order[by_program]]).astype(np.int32)
    return table, g, bal


def bwd_tile_costs(seqlen_q: int, seqlen_k: int, shift: int, block_m: int, tile_keys: int,
                   group: int, causal: bool, overhead: float = 2.0) -> np.ndarray:
    """One key head's backward tiles of ``tile_keys`` keys in key order (the first, which sees
    the most queries, first when causal): the query steps of ``block_m`` rows each tile walks
    (``bwd_gluon._bwd_tile``) for every query head of the group, plus ``overhead`` steps."""
    n_kb = -(-seqlen_k // tile_keys)
    n0 = np.arange(n_kb) * tile_keys
    first = np.maximum(n0 - shift, 0) // block_m if causal else np.zeros(n_kb, dtype=np.int64)
    steps = np.maximum(-(-seqlen_q // block_m) - first, 0) * group
    return steps + overhead


def greedy_group(tile_order: str | None) -> int | None:
    """The group size a ``tile_order`` asks for: "greedy" 0 (the model chooses), "greedyN" N,
    any other order None. Raises on a malformed "greedy…"."""
    if tile_order is None or not tile_order.startswith("greedy"):
        return None
    rest = tile_order[len("greedy"):]
    if rest == "":
        return 0
    if not rest.isdigit() or int(rest) < 1:
        raise ValueError(f"tile_order={tile_order!r}: 'greedy' or 'greedyN' with N >= 1")
    return int(rest)


_DEVICE_TABLES: dict = {}


def device_table(per_head, heads: int, programs: int, group: int, device) -> torch.Tensor:
    """``greedy_table``'s table as an int32 tensor on ``device``, made once per launch shape."""
    key = (tuple(float(c) for c in per_head), heads, programs, group, str(device))
    tab = _DEVICE_TABLES.get(key)
    if tab is None:
        tab = torch.from_numpy(greedy_table(key[0], heads, programs, group)[0]).to(device)
        if len(_DEVICE_TABLES) >= 64:
            _DEVICE_TABLES.clear()
        _DEVICE_TABLES[key] = tab
    return tab


@functools.lru_cache(maxsize=64)
def row_block_table(seqlen_q: int, seqlen_k: int, shift: int, block_m: int, block_n: int,
                    heads: int, programs: int, group: int, device,
                    lead: int = 0) -> torch.Tensor:
    """The greedy table of a causal launch whose tiles are row blocks of ``block_m`` rows (the
    persistent forward's, whose first starts ``lead`` rows before row 0, and the head-dim-256
    dQ kernel's), costed by ``causal_tile_costs``; its tile ids are head-major
    (``HEAD_MAJOR``). Kept per launch shape: a call that replays no plan (a shape's first
    call, or plans turned off) would otherwise pay the costs' numpy and ``device_table``'s key
    on the host each time (about 35 µs of a 100 µs call, docs/perf-log.md, session 73)."""
    costs = causal_tile_costs(seqlen_q, seqlen_k, shift, block_m, block_n, lead=lead)
    return device_table(costs, heads, programs, group, device)
