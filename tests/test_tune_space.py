"""scripts/tune.py's search spaces: each loads token gives the config it names, several spaces
join with '|', and an unknown token is refused (the sweep itself needs a GPU)."""

import pytest

from helpers import load_script


@pytest.fixture(scope="module")
def tune():
    return load_script("tune")


def test_backward_tokens(tune):
    split, defer, empty, empty_pers = tune.parse_space(
        "64:128;4;2;gluonsplit,gluonsplitdefer,gluonsplitdeferempty,gluonsplitdeferemptypers")
    assert (split.gluon, split.split_dq, split.defer_dq, split.dq_on_empty) == (True, True,
                                                                                False, False)
    assert defer.defer_dq and not defer.dq_on_empty and not defer.persistent
    assert empty.defer_dq and empty.dq_on_empty and not empty.persistent
    assert empty_pers.defer_dq and empty_pers.dq_on_empty and empty_pers.persistent
    assert (empty.block_m, empty.block_n, empty.num_warps, empty.num_stages) == (64, 128, 4, 2)
    alt, alt_pers = tune.parse_space(
        "64:128;4;2;gluonsplitdeferemptyalt,gluonsplitdeferemptyaltpers")
    assert alt.dq_on_empty and alt.dq_alternate and not alt.persistent
    assert alt_pers.dq_alternate and alt_pers.persistent and not empty_pers.dq_alternate


def test_two_kernel_backward_tokens(tune):
    sep, ptrsep, fused = tune.parse_space("64:64;8;2;tmasep,ptrsep,tma")
    assert not sep.fused_dq and sep.tma and not ptrsep.fused_dq and not ptrsep.tma
    # the head-dim-256 Gluon dK/dV kernel, then its Gluon dQ kernel, one program per tile or not
    hs, hs_pers = tune.parse_space("64:64;4;2;gluonsep,gluonseppers")
    assert hs.gluon and not hs.fused_dq and not hs.persistent and not hs.split_dq
    assert hs_pers.gluon and not hs_pers.fused_dq and hs_pers.persistent
    assert fused.fused_dq and fused.tma and not fused.gluon


def test_spaces_joined_and_products(tune):
    configs = tune.parse_space("128:64,128:128;4,8;2;tma|128:128;4;3;gluonpersrow")
    assert len(configs) == 5
    assert {(c.block_n, c.num_warps) for c in configs[:4]} == {(64, 4), (64, 8), (128, 4),
                                                               (128, 8)}
    last = configs[-1]
    assert last.gluon and last.persistent and last.tile_order == "row" and last.num_stages == 3


def test_unknown_token_refused(tune):
    with pytest.raises(SystemExit, match="unknown loads token 'gluonsplitempty'"):
        tune.parse_space("64:128;4;2;gluonsplitempty")


def test_consumer_registers_token(tune):
    """``+rN`` after a forward's loads token (and its tile order) sets the Gluon consumers'
    registers; without it the launcher's default (``regs`` None)."""
    plain, regs, ordered = tune.parse_space(
        "192:128;4;2;gluonpppers,gluonpppers+r152,gluonpppers@greedy+r144")
    assert plain.regs is None and plain.persistent and plain.pingpong
    assert regs.regs == 152 and regs.persistent and regs.tile_order is None
    assert ordered.regs == 144 and ordered.tile_order == "greedy"
    with pytest.raises(SystemExit, match="unknown loads token 'gluonpppers\\+'"):
        tune.parse_space("192:128;4;2;gluonpppers++r152")
    with pytest.raises(SystemExit, match="after '\\+r' a register count"):
        tune.parse_space("192:128;4;2;gluonpppers+rx")
