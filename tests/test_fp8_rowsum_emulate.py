"""scripts/fp8_rowsum_emulate.py: the model of the float8 tensor cores' truncated accumulation
behind session 68's per-step row sums (docs/perf-log.md)."""

from __future__ import annotations

import random

from helpers import load_script

emu = load_script("fp8_rowsum_emulate")


def test_truncated_add_keeps_what_fits_and_cuts_the_rest_toward_zero():
    # 2^10 + 2^-3: 14 bits below 2^10 reach down to 2^-3, 10 bits only to 2^1
    assert emu.truncated_add(1024.0, [0.125], 14) == 1024.125
    assert emu.truncated_add(1024.0, [0.125], 10) == 1024.0
    # 3 bits below 2^1 reach 2^-1: 3.75 is cut to 3.5 (toward zero), -1.5 kept
    assert emu.truncated_add(0.0, [3.75, -1.5], 3) == 3.5 - 1.5
    assert emu.truncated_add(0.0, [-3.75], 3) == -3.5
    assert emu.truncated_add(0.0, [0.0, 0.0], 14) == 0.0


def test_row_sums_lose_small_terms_across_steps_not_per_step():
    rnd = random.Random(1)
    p = [1.0] + [rnd.choice([2.0 ** -9, 2.0 ** -7, 2.0 ** -5]) for _ in range(16383)]
    exact = sum(p)
    across = emu.row_sums(p, 14, None)
    per_step = emu.row_sums(p, 14, 128)
    assert per_step == exact  # a step's sum stays small: every term keeps its bits
    assert across < exact * 0.9  # one running sum drops the terms below its 14th bit (0.88)
    assert emu.row_sums(p, 40, None) == exact
