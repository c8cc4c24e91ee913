"""How evenly a launch spreads causal attention work over the SMs: a cost model of the Gluon
kernels' tiles and of three ways to hand them out, behind the tile order in
kernels/fwd_gluon.py (``_pers_tile``, ``_snake``) and kernels/bwd_gluon.py (``_bwd_tile``).

    python3 scripts/schedule_model.py [--sms 132] [--overhead 1.0]

A tile's cost is its number of steps (forward: key tiles of 128 for 128 rows; backward: query
steps of 64 rows for 128 keys) plus ``--overhead`` steps of fixed cost. Tiles are listed head
by head, each head's longest first, as the kernels list them. Printed per shape: the balance
(mean load / largest load over the SMs; 1.00 is perfect) of
- one program per tile, each SM taking the next tile when it is free (how the hardware runs a
  grid with one program per tile; the greedy list-scheduling model of it),
- persistent, round-robin: program p takes tiles p, p + SMs, p + 2·SMs, ...,
- persistent, snake: as round-robin, but odd rounds in reverse (``_snake``).
The batch·seqlen = 16384 tokens, heads·headdim = 2048 grid of ``flashtriton bench``.
"""
import argparse
import heapq


def tile_costs(pass_: str, seqlen: int, headdim: int, overhead: float) -> list[float]:
    heads = (16384 // seqlen) * (2048 // headdim)
    if pass_ == "fwd":  # 128-row tiles, 128-key steps, longest (last rows) first
        per_head = [i + 1 for i in reversed(range(seqlen // 128))]
    else:  # 128-key tiles, 64-row steps, longest (first keys) first
        per_head = [seqlen // 64 - 2 * j for j in range(seqlen // 128)]
    return [c + overhead for _ in range(heads) for c in per_head]


def greedy(costs: list[float], sms: int) -> float:
    loads = [(0.0, p) for p in range(sms)]
    for c in costs:
        load, p = heapq.heappop(loads)
        heapq.heappush(loads, (load + c, p))
    return max(load for load, _ in loads)


def static(costs: list[float], sms: int, snake: bool) -> float:
    loads = [0.0] * sms
    total = len(costs)
    for t in range(total):
        k, lane = divmod(t, sms)  # round k, program `lane`
        if snake and k % 2:
            lane = min(sms, total - k * sms) - 1 - lane  # the kernel's _snake, inverted
        loads[lane] += costs[t]
    return max(loads)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sms", type=int, default=132)
    ap.add_argument("--overhead", type=float, default=1.0)
    args = ap.parse_args()
    print(f"{'pass':4} {'d':>3} {'seqlen':>6} {'tiles':>6}  one/tile  round-robin  snake")
    for pass_ in ("fwd", "bwd"):
        for headdim in (128, 64):
            for seqlen in (512, 1024, 2048, 4096, 8192, 16384):
                costs = tile_costs(pass_, seqlen, headdim, args.overhead)
                ideal = sum(costs) / args.sms
                print(f"{pass_:4} {headdim:3} {seqlen:6} {len(costs):6}  "
                      f"{ideal / greedy(costs, args.sms):8.2f}  "
                      f"{ideal / static(costs, args.sms, False):11.2f}  "
                      f"{ideal / static(costs, args.sms, True):5.2f}")


if __name__ == "__main__":
    main()
