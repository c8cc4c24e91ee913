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


@pytest.mark.parametrize("aligned", [False, True], ids=["from-row-0", "to-last-row"])
def test_tile_costs_count_the_key_tiles_each_row_block_sees(aligned):
    rng = np.random.default_rng(7)
    for _ in range(20):
        sq, sk = (int(x) for x in rng.integers(1, 3000, 2))
        rows, bn = int(rng.choice([128, 192])), 128
        shift = sk - sq  # bottom-right diagonal: key <= row + shift
        n_m = -(-sq // rows)
        # the persistent forward's: whole consumers (64 rows) of padding before row 0
        lead = (n_m * rows - sq) // 64 * 64 if aligned else 0
        costs = schedule.causal_tile_costs(sq, sk, shift, rows, bn, overhead=0.0, lead=lead)
        expect = []
        for p in reversed(range(n_m)):  # longest (last) row block first
            block = [r for r in range(p * rows - lead, (p + 1) * rows - lead) if 0 <= r < sq]
            assert block, (sq, rows, p)  # every block holds rows of the sequence
            seen = max(min(sk, r + shift + 1) for r in block)
            expect.append(-(-max(seen, 0) // bn))
        assert costs.tolist() == expect, (sq, sk, rows)


def test_blocks_that_start_before_row_0_cost_less_where_the_rows_do_not_fill_them():
    # the d64 causal forward at 16k keys (192-row blocks, 128 rows short): with the padding
    # before row 0 the partial block sees one key tile instead of all 128
    for seqlen, lead, fewer in ((16384, 128, 85), (8192, 64, 21), (6144, 0, 0)):
        plain = schedule.causal_tile_costs(seqlen, seqlen, 0, 192, 128, overhead=0.0)
        aligned = schedule.causal_tile_costs(seqlen, seqlen, 0, 192, 128, overhead=0.0,
                                             lead=lead)
        assert plain.sum() - aligned.sum() == fewer, seqlen
        assert aligned[-1] == (1 if lead else 2) and aligned[0] == seqlen // 128
    for lead in (-1, 192, 129):  # 16384 rows in 192-row blocks leave 128 to place
        with pytest.raises(ValueError, match="every block must hold a row"):
            schedule.causal_tile_costs(16384, 16384, 0, 192, 128, lead=lead)


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


def walk_table(table, programs, per_head):
    """What each program of a greedy launch runs, read off the table as the kernel reads it
    (``tile_walk._table_range``): program p's tile ids and its summed cost."""
    starts = table[:programs + 1]
    runs = [table[programs + 1 + starts[p]:programs + 1 + starts[p + 1]].tolist()
            for p in range(programs)]
    n = len(per_head)
    loads = [sum(per_head[t % n] for t in run) for run in runs]
    return runs, loads


@pytest.mark.parametrize("per_head,heads,programs,group", [
    ((9.0, 7.0, 5.0, 3.0, 1.0), 7, 4, 0),  # more tiles than programs, the model's group
    ((9.0, 7.0, 5.0, 3.0, 1.0), 7, 4, 2),
    ((4.0,), 3, 132, 0),                     # fewer tiles than programs: some run none
    ((2.0, 2.0, 2.0), 5, 2, 16),             # a group larger than the heads
])
def test_greedy_table_runs_every_tile_once(per_head, heads, programs, group):
    table, g, bal = schedule.greedy_table(per_head, heads, programs, group)
    assert table.dtype == np.int32 and table[0] == 0
    runs, loads = walk_table(table, programs, per_head)
    ids = sorted(t for run in runs for t in run)
    assert ids == list(range(len(per_head) * heads))
    assert g == group or (group == 0 and g in schedule.GREEDY_GROUPS)
    assert bal == pytest.approx(np.mean(loads) / max(loads))


def test_greedy_table_lists_groups_of_heads_longest_first():
    # two heads a group, their tiles longest first across both: head 0's and head 1's first
    # tile, then their second ones; then the next group's
    order = schedule.grouped_order(np.array([3.0, 2.0, 1.0]), 3, 2)
    assert order.tolist() == [0, 3, 1, 4, 2, 5, 6, 7, 8]
    # every program takes the tile list in order, the next tile to the least loaded program
    table, _, _ = schedule.greedy_table((3.0, 2.0, 1.0), 3, 2, 2)
    runs, loads = walk_table(table, 2, (3.0, 2.0, 1.0))
    assert runs == [[0, 1, 2, 6], [3, 4, 5, 7, 8]] and loads == [9.0, 9.0]


@pytest.mark.parametrize("seqlen,heads,rows,snake_below", [
    (4096, 32, 128, 0.975),   # the d64 forward at 4k: the snake's 0.970, the table's 0.99+
    (1024, 512, 128, 0.975),  # d64 at 1k: 0.970, 0.98+
])
def test_greedy_table_balances_the_bench_grid_better_than_the_snake(seqlen, heads, rows,
                                                                    snake_below):
    per_head = schedule.causal_tile_costs(seqlen, seqlen, 0, rows, 128)
    snake = schedule.balance(np.tile(per_head, heads), 132)
    _, g, bal = schedule.greedy_table(tuple(per_head), heads, 132)
    assert snake < snake_below < 0.98 < bal
    # the d128 backward at 16k (persistent: the snake balances it to 0.68)
    per_head = schedule.bwd_tile_costs(16384, 16384, 0, 64, 128, 1, True)
    assert per_head[0] == 256 + 2 and per_head[-1] == 2 + 2
    assert schedule.greedy_table(tuple(per_head), 16, 132)[2] > 0.99


def test_bwd_tile_costs_count_the_steps_of_each_tile():
    # 300 queries, 64-row steps (5 a head), 128-key tiles, two query heads a key head: not
    # causal every tile walks all 10; causal with the diagonal shifted by 100 keys (seqlen_k
    # 400), tile 1 (keys 128..255) starts at query row 28 (step 0), tile 2 (256..383) at row
    # 156 (step 2), tile 3 (384..) at row 284 (step 4)
    assert schedule.bwd_tile_costs(300, 400, 100, 64, 128, 2, False, 0).tolist() == [10] * 4
    assert schedule.bwd_tile_costs(300, 400, 100, 64, 128, 2, True, 0).tolist() == [10, 10, 6, 2]


@pytest.mark.parametrize("order,want", [(None, None), ("row", None), ("greedy", 0),
                                        ("greedy4", 4)])
def test_greedy_group_reads_the_tile_order(order, want):
    assert schedule.greedy_group(order) == want


@pytest.mark.parametrize("order", ["greedy0", "greedyx", "greedy-2"])
def test_greedy_group_refuses_malformed_orders(order):
    with pytest.raises(ValueError, match="greedyN"):
        schedule.greedy_group(order)


def test_row_block_table_is_made_once_per_launch_shape():
    """``row_block_table``: the greedy table of ``causal_tile_costs``' tiles, the same tensor
    for a launch shape seen before (no host work on a call without a plan), a fresh one for
    another shape."""
    import torch

    sq, rows, heads = 1000, 128, 37
    lead = -(-sq // rows) * rows - sq  # 24: the partial block first, as the forward's
    first = schedule.row_block_table(sq, sq, 0, rows, 128, heads, 132, 4, "cpu", lead)
    costs = tuple(float(c) for c in schedule.causal_tile_costs(sq, sq, 0, rows, 128, lead=lead))
    want = schedule.greedy_table(costs, heads, 132, 4)[0]
    assert first.dtype == torch.int32 and np.array_equal(first.numpy(), want)
    assert schedule.row_block_table(sq, sq, 0, rows, 128, heads, 132, 4, "cpu", lead) is first
    other = schedule.row_block_table(sq, sq, 0, rows, 128, heads, 100, 4, "cpu", lead)
    assert np.array_equal(other.numpy(), schedule.greedy_table(costs, heads, 100, 4)[0])
    assert other.shape != first.shape  # (100 + 1 starts, not 133)
