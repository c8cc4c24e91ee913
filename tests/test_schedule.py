"""The persistent causal forward's tile-order model (kernels/schedule.py), on the CPU: the snake's
loads against a direct walk of the kernel's assignment, tile costs against a count of the keys
each tile's rows see, and the order chosen at the shapes the model was built for (and for the
d256 backward's dQ kernel, which lists its tiles the same way)."""

import numpy as np
import pytest

from flashtriton.kernels import schedule


def walk_snake(costs, programs):
    """The kernel's ``_snake`` one tile at a time: tile position t of round k goes to lane
    t - k·P, or, in odd rounds, to the mirrored lane among that round's tiles."""
    loads = [0.0] * programs
    total = len(costs)
    for t, cost in enumerate(costs):
        k, lane = t // programs, t % programs
        if k % 2 == 1:
            lane = min(programs, total - k * programs) - 1 - lane
        loads[lane] += cost
    return loads


@pytest.mark.parametrize("total,programs", [(1, 132), (131, 132), (132, 132), (133, 132),
                                            (1000, 132), (2752, 132), (17, 5)])
def test_snake_loads_match_a_walk_of_the_kernel_order(total, programs):
    costs = np.random.default_rng(total).integers(1, 100, total).astype(float)
    assert np.allclose(schedule.snake_loads(costs, programs), walk_snake(costs, programs))


def test_tile_costs_count_the_key_tiles_each_row_block_sees():
    rng = np.random.default_rng(7)
    for _ in range(20):
        sq, sk = (int(x) for x in rng.integers(1, 3000, 2))
        rows, bn = int(rng.choice([128, 192])), 128
        shift = sk - sq  # bottom-right diagonal: key <= row + shift
        costs = schedule.causal_tile_costs(sq, sk, shift, rows, bn, overhead=0.0)
        n_m = -(-sq // rows)
        expect = []
        for p in reversed(range(n_m)):  # longest (last) row block first
            seen = max(min(sk, r + shift + 1) for r in range(p * rows, (p + 1) * rows))
            expect.append(-(-max(seen, 0) // bn))
        assert costs.tolist() == expect, (sq, sk, rows)


def test_order_follows_the_balance():
    # bench grid, d64, three consumers (192-row tiles), 132 SMs: 16k keys on 32 heads is where
    # the head-major snake pairs long tiles with long ones (mean / max load 0.79)
    head16k = np.tile(schedule.causal_tile_costs(16384, 16384, 0, 192, 128), 32)
    row16k = np.repeat(schedule.causal_tile_costs(16384, 16384, 0, 192, 128), 32)
    assert schedule.balance(head16k, 132) < 0.8 < 0.99 < schedule.balance(row16k, 132)
    assert schedule.causal_fwd_order(16384, 16384, 0, 32, 192, 128, 132) == schedule.ROW_MAJOR
    # where row-major balances less than 10% better, head-major keeps its L2 reuse (at 4096
    # keys on 32 heads with 192-row tiles: 0.946 against 0.887, and head-major ran faster)
    for seqlen, heads, rows in ((1024, 32, 128), (4096, 64, 128), (4096, 128, 192),
                                (4096, 32, 192)):
        assert schedule.causal_fwd_order(seqlen, seqlen, 0, heads, rows, 128, 132) == \
            schedule.HEAD_MAJOR, (seqlen, heads, rows)


def test_balance_of_equal_tiles_is_perfect_when_rounds_are_full():
    assert schedule.balance(np.ones(264), 132) == 1.0
    assert schedule.balance(np.ones(133), 132) == pytest.approx((133 / 132) / 2)


def test_tile_lists_order_the_heads_tiles_both_ways():
    per_head = np.array([5.0, 3.0, 1.0])  # one head's tiles, longest first
    head_major, row_major = schedule.tile_lists(per_head, 2)
    assert head_major.tolist() == [5, 3, 1, 5, 3, 1]  # head 0's tiles, then head 1's
    assert row_major.tolist() == [5, 5, 3, 3, 1, 1]   # every head's longest, then the next


def test_d256_dq_tiles_listed_head_by_head():
    # the d256 Gluon dQ kernel lists its tiles as the persistent forward does: head by head
    # (0) when not causal; causal, one program per tile head by head, persistent in the order
    # the model balances (bench grid, 64-row tiles, 132 SMs)
    from flashtriton.kernels.bwd_gluon_d256_dq import dq_tile_order

    assert dq_tile_order(False, True, 1024, 1024, 1024, 128, 64, 64, 132) == 0
    assert dq_tile_order(False, False, 16384, 16384, 16384, 8, 64, 64, 2048) == 0
    assert dq_tile_order(True, False, 16384, 16384, 0, 8, 64, 64, 2048) == schedule.HEAD_MAJOR
    for seqlen, heads in ((1024, 128), (4096, 32)):  # the persistent bench rows
        assert dq_tile_order(True, True, seqlen, seqlen, 0, heads, 64, 64, 132) == \
            schedule.HEAD_MAJOR, seqlen
    # 320 rows on 64 heads: the head-major snake balances worse (a GPU test's case)
    assert dq_tile_order(True, True, 320, 320, 0, 64, 64, 64, 132) == schedule.ROW_MAJOR
