"""How evenly a launch spreads causal attention work over the SMs: a cost model of the Gluon
kernels' tiles and of four ways to hand them out, behind the tile order in
kernels/tile_walk.py (``_pers_tile``, ``_snake``) and kernels/bwd_gluon.py (``_bwd_tile``).

    python3 scripts/schedule_model.py [--sms 132] [--overhead 1.0]

A tile's cost is its number of steps (forward: key tiles of 128 for 128 rows; backward: query
steps of 64 rows for 128 keys) plus ``--overhead`` steps of fixed cost. Tiles are listed head
by head, each head's longest first, as the kernels list them. Printed per shape: the balance
(mean load / largest load over the SMs; 1.00 is perfect) of
- one program per tile, each SM taking the next tile when it is free (how the hardware runs a
  grid with one program per tile; the greedy list-scheduling model of it),
- persistent, round-robin: program p takes tiles p, p + SMs, p + 2·SMs, ...,
- persistent, snake: as round-robin, but odd rounds in reverse (``_snake``),
- the snake over the same tiles listed row block by row block across the heads (the
  forward's ``schedule.ROW_MAJOR`` order, which its launcher picks where the head-by-head list
  balances badly, ``flashtriton.kernels.schedule.causal_fwd_order``),
- persistent, greedy table: the host hands the tiles, listed longest first within groups of
  heads, each to the program with the least work so far (tile_order "greedy",
  ``flashtriton.kernels.schedule.greedy_table``; the group it chooses in brackets).
The batch·seqlen = 16384 tokens, heads·headdim = 2048 grid of ``flashtriton bench``.
"""
import argparse
import heapq

import numpy as np

from flashtriton.kernels.schedule import (causal_tile_costs, greedy_table, snake_loads,
                                          tile_lists)


def head_costs(pass_: str, seqlen: int, overhead: float) -> np.ndarray:
    """One head's tile costs, longest first."""
    if pass_ == "fwd":  # 128-row tiles, 128-key steps, longest (last rows) first
        return causal_tile_costs(seqlen, seqlen, 0, 128, 128, overhead)
    # backward: 128-key tiles, 64-row steps, longest (first keys) first
    return np.array([seqlen // 64 - 2 * j for j in range(seqlen // 128)]) + overhead


def greedy(costs: list[float], sms: int) -> float:
    loads = [(0.0, p) for p in range(sms)]
    for c in costs:
        load, p = heapq.heappop(loads)
        heapq.heappush(loads, (load + c, p))
    return max(load for load, _ in loads)


def static(costs: list[float], sms: int, snake: bool) -> float:
    """The largest program load of a persistent launch: round-robin, or the kernel's snake
    (``flashtriton.kernels.schedule.snake_loads``)."""
    if snake:
        return float(snake_loads(np.asarray(costs, dtype=float), sms).max())
    loads = np.bincount(np.arange(len(costs)) % sms, weights=costs, minlength=sms)
    return float(loads.max())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sms", type=int, default=132)
    ap.add_argument("--overhead", type=float, default=1.0)
    args = ap.parse_args()
    print(f"{'pass':4} {'d':>3} {'seqlen':>6} {'tiles':>6}  one/tile  round-robin  snake"
          "  snake, row-major  greedy table [group]")
    for pass_ in ("fwd", "bwd"):
        for headdim in (128, 64):
            for seqlen in (512, 1024, 2048, 4096, 8192, 16384):
                heads = (16384 // seqlen) * (2048 // headdim)
                per_head = head_costs(pass_, seqlen, args.overhead)
                costs, row_major = tile_lists(per_head, heads)
                ideal = sum(costs) / args.sms
                _, group, table_balance = greedy_table(tuple(float(c) for c in per_head), heads,
                                                       min(args.sms, len(costs)))
                print(f"{pass_:4} {headdim:3} {seqlen:6} {len(costs):6}  "
                      f"{ideal / greedy(costs, args.sms):8.2f}  "
                      f"{ideal / static(costs, args.sms, False):11.2f}  "
                      f"{ideal / static(costs, args.sms, True):5.2f}  "
                      f"{ideal / static(row_major, args.sms, True):16.2f}  "
                      f"{table_balance:14.3f} [{group}]")


if __name__ == "__main__":
    main()
