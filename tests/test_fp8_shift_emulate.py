"""scripts/fp8_shift_emulate.py: the float64 emulation behind the float8 forward's P shift
(``fwd_gluon_tile.FP8_P_SHIFT``, docs/perf-log.md, session 69)."""

from __future__ import annotations

import torch

from helpers import load_script

emu = load_script("fp8_shift_emulate")


def test_emulate_without_rounding_is_attention(monkeypatch):
    """With e4m3's rounding left out (a float64 'rounding'), the emulated online softmax is
    attention: the tiles, the running max and the shift cancel."""
    from flashtriton.reference import attention_ref

    q, k, v = (torch.randn(1, n, 2, 32, dtype=torch.float64) for n in (37, 300, 300))
    ref, _ = attention_ref(q, k, v, causal=False)
    monkeypatch.setattr(emu, "round_p", lambda p: p)
    for shift in (0.0, 8.0):
        out = emu.emulate(q, k, v, shift, rounded_sums=True, block_n=128)
        assert (out - ref).abs().max().item() < 1e-12


def test_long_rows_need_the_shift_for_rounded_sums():
    """4096 keys of tests/test_fp8.py's inputs (fresh each run): a sixth or more of a row's
    softmax lies below 2^-10 of its max, which e4m3 rounds to zero against the max. Summing the
    rounded P (``rowsum_mma``) then drops it, several times the test's error; with P against
    the max less 8 both sums are within the test's bound, the float32 sums no worse."""
    row = emu.errors((1, 128, 4096, 2, 2, 64), [0.0, 8.0])
    assert row["share_below_2^-10"] > 0.1, row
    assert row["shift 0, rounded sums"] > 2 * row["shift 8, rounded sums"], row
    assert row["shift 8, rounded sums"] < row["bound"] / 2, row
    assert row["shift 8, float32 sums"] < row["bound"] / 2, row
    assert row["shift 8, float32 sums"] <= 1.1 * row["shift 0, float32 sums"], row
