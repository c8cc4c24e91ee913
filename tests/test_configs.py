"""The shipped config tables' selection rules (pure Python: runs on CPU and GPU alike)."""

import pytest
import torch

from flashtriton import configs


@pytest.fixture
def compiled(monkeypatch):
    """Select configs as on a GPU: the tables answer None under the interpreter."""
    monkeypatch.setenv("TRITON_INTERPRET", "0")


@pytest.mark.parametrize("head_dim,causal", [(128, False), (128, True)])
def test_gluon_forward_d128_is_persistent_at_every_length(compiled, head_dim, causal):
    """d128: persistent at every length (since session 59's measurements at 16k, configs.py;
    d64 too: the test below; d256 only below LONG_FWD_FROM keys)."""
    below = configs.LONG_FWD_FROM
    for seqlen_k in (1, 1024, 8192, below - 1, below, 16384, 65536):
        cfg = configs.gluon_fwd_config(torch.bfloat16, head_dim, causal, False, seqlen_k)
        assert cfg.gluon and cfg.persistent, seqlen_k
        assert configs.gluon_fwd_config(torch.float16, head_dim, causal, False,
                                        seqlen_k).persistent, seqlen_k
    # the rest of the config is the table's either way
    short = configs.gluon_fwd_config(torch.bfloat16, head_dim, causal, False, 1024)
    long = configs.gluon_fwd_config(torch.bfloat16, head_dim, causal, False, 16384)
    assert (short.block_m, short.block_n, short.num_stages, short.pingpong) == \
        (long.block_m, long.block_n, long.num_stages, long.pingpong)


def test_gluon_forward_d64_takes_three_consumers_from_the_threshold(compiled):
    """d64: two consumers (128 rows) below THREE_CONSUMERS_FWD_FROM[causal] keys (2048 with or
    without a causal mask), three (192 rows) from there, persistent at every length; d128
    keeps two."""
    assert configs.THREE_CONSUMERS_FWD_FROM == {False: 2048, True: 2048}
    for causal, start in configs.THREE_CONSUMERS_FWD_FROM.items():
        for seqlen_k in (1, 1024, start - 1):
            cfg = configs.gluon_fwd_config(torch.bfloat16, 64, causal, False, seqlen_k)
            assert (cfg.gluon, cfg.persistent, cfg.block_m) == (True, True, 128), seqlen_k
        for seqlen_k in (start, 16384, 65536):
            cfg = configs.gluon_fwd_config(torch.float16, 64, causal, False, seqlen_k)
            assert (cfg.gluon, cfg.persistent, cfg.block_m) == (True, True, 192), seqlen_k
    for causal in (False, True):
        cfg = configs.gluon_fwd_config(torch.bfloat16, 128, causal, False, 16384)
        assert cfg.block_m == 128, causal


@pytest.mark.parametrize("head_dim", [64, 128])
@pytest.mark.parametrize("causal", [False, True])
def test_gluon_backward_is_persistent_at_every_length(compiled, head_dim, causal):
    """One config at every length (since session 60; the d64 causal backward took three ring
    slots from 8192 keys before), persistent: d64 without a mask since session 28, causal calls
    (their tiles from a host-made table) since session 36, d128 without a mask since session
    59; but d128 causal below FEW_KEYS_BWD_BELOW keys, whose dQ is not deferred."""
    few = configs.FEW_KEYS_BWD_BELOW
    for seqlen_k in (1, 1024, few - 1, few, 4096, 8191, 8192, 16384, 65536):
        for dtype in (torch.bfloat16, torch.float16):
            cfg = configs.gluon_bwd_config(dtype, head_dim, causal, False, False, seqlen_k)
            assert cfg.gluon and cfg.split_dq and cfg.persistent, seqlen_k
            assert cfg.tile_order == ("greedy" if causal else None), seqlen_k
            # deferred dQ everywhere but d128 causal below `few` keys (perf-log, sessions 8 and
            # 17), its product waiting on the ring's `empty` (d128: sessions 16 and 17; d64:
            # session 30)
            plain = (head_dim, causal) == (128, True) and seqlen_k < few
            assert cfg.defer_dq == (not plain), seqlen_k
            assert cfg.dq_on_empty == (not plain), seqlen_k
            assert cfg.num_stages == 2, seqlen_k
    assert configs.gluon_bwd_config(torch.bfloat16, head_dim, causal, True, False, 1024) is None


def test_gluon_forward_not_selected_outside_its_cover(compiled):
    assert configs.gluon_fwd_config(torch.float32, 128, False, False, 1024) is None
    assert configs.gluon_fwd_config(torch.bfloat16, 128, False, True, 1024) is None  # dropout
    assert configs.gluon_fwd_config(torch.bfloat16, 96, False, False, 1024) is None


def test_gluon_backward_d256_config(compiled):
    """Head dim 256: the Gluon dK/dV kernel of kernels/bwd_gluon_d256.py, then the Gluon dQ
    kernel of kernels/bwd_gluon_d256_dq.py (fused_dq off), 64-key tiles, persistent at every
    length (session 44), causal on a greedy tile table; deterministic: the tl kernels."""
    for causal in (False, True):
        for seqlen_k in (1, 1024, 8191, 8192, 16384):
            cfg = configs.gluon_bwd_config(torch.bfloat16, 256, causal, False, False, seqlen_k)
            assert cfg.gluon and not cfg.fused_dq, (causal, seqlen_k)
            assert cfg.persistent, (causal, seqlen_k)
            assert cfg.tile_order == ("greedy" if causal else None), (causal, seqlen_k)
            assert (cfg.block_m, cfg.block_n, cfg.num_warps) == (64, 64, 4)
    assert configs.gluon_bwd_config(torch.bfloat16, 256, False, True) is None


@pytest.mark.parametrize("causal", [False, True])
def test_gluon_forward_d256_is_persistent_below_the_threshold(compiled, causal):
    """Head dim 256: two consumers, 64-key tiles; persistent below LONG_FWD_FROM keys
    (O leaves through Q's buffers), one program per tile from there."""
    below = configs.LONG_FWD_FROM
    for seqlen_k in (1, 1024, below - 1, below, 65536):
        cfg = configs.gluon_fwd_config(torch.bfloat16, 256, causal, False, seqlen_k)
        assert (cfg.gluon, cfg.block_m, cfg.block_n) == (True, 128, 64)
        assert cfg.persistent == (seqlen_k < below), seqlen_k


def test_interpreter_selects_no_gluon_config(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    assert configs.gluon_fwd_config(torch.bfloat16, 128, False, False, 1024) is None
    assert configs.gluon_bwd_config(torch.bfloat16, 128, False) is None


def test_gluon_fp8_config_is_the_table():
    """``gluon_fp8_config``: the shipped float8 Gluon entries, two consumers persistent (128 x
    128, d256 128 x 64; two slots, ping-pong; causal on the greedy tile table), d64 three
    consumers persistent (192 x 128) and one program per tile (d64 three consumers, d256 two);
    ``FP8_BY_KEYS`` lists each (head dim, mask)'s in rising bounds ending with None; a clear
    error at other head dims."""
    from flashtriton import configs

    for (d, causal), cfg in configs._FWD_GLUON_FP8_PERSISTENT.items():
        assert cfg.gluon and cfg.pingpong and cfg.persistent
        assert (cfg.block_m, cfg.block_n, cfg.num_stages) == (128, 64 if d == 256 else 128, 2)
        assert cfg.tile_order == ("greedy" if causal else None)
    for (d, causal), cfg in configs._FWD_GLUON_FP8_PERSISTENT3.items():
        assert d == 64 and cfg.gluon and cfg.pingpong and cfg.persistent
        assert (cfg.block_m, cfg.block_n, cfg.num_stages) == (192, 128, 2)
        assert cfg.tile_order == ("greedy" if causal else None)
    for (d, causal), cfg in configs._FWD_GLUON_FP8.items():
        assert cfg.gluon and cfg.pingpong and not cfg.persistent
        assert cfg.block_m == (192 if d == 64 else 128)  # (192 rows: three consumers)
    assert sorted(configs.FP8_BY_KEYS) == [(d, c) for d in (64, 128, 256) for c in (False, True)]
    for key, steps in configs.FP8_BY_KEYS.items():
        bounds = [below for below, _ in steps]
        assert bounds[-1] is None and None not in bounds[:-1], (key, bounds)
        assert bounds[:-1] == sorted(set(bounds[:-1])), (key, bounds)
        for _, cfg in steps:
            assert cfg.block_n % 32 == 0  # the launcher's float8 rule
            assert cfg in (configs._FWD_GLUON_FP8.get(key), configs._FWD_GLUON_FP8_PERSISTENT[key],
                           configs._FWD_GLUON_FP8_PERSISTENT3.get(key)), (key, cfg)
    for causal in (False, True):
        with pytest.raises(ValueError, match="built for head dims"):
            configs.gluon_fp8_config(96, causal)


def test_gluon_fp8_forward_config_by_keys(compiled):
    """float8 by length (``FP8_BY_KEYS``): d64 two consumers persistent below 2048 keys (causal
    4096), three persistent from there (without a mask below 16384, one program per tile from
    there); d128 two persistent at every length; d256 two persistent below 16384, one program
    per tile from there. A call of unknown length (``seqlen_k`` None) counts as long; the
    forward's selection (``gluon_fwd_config``) is ``gluon_fp8_config``'s for the call's keys."""
    fp8 = torch.float8_e4m3fn
    two, three, tile = (configs._FWD_GLUON_FP8_PERSISTENT, configs._FWD_GLUON_FP8_PERSISTENT3,
                        configs._FWD_GLUON_FP8)
    want = {  # (head dim, causal): [(seqlen_k, the config), ...]
        (64, False): [(1, two), (2047, two), (2048, three), (16383, three), (16384, tile),
                      (65536, tile), (None, tile)],
        (64, True): [(1, two), (2048, two), (4095, two), (4096, three), (16384, three),
                     (None, three)],
        (128, False): [(1, two), (16384, two), (65536, two), (None, two)],
        (128, True): [(1, two), (65536, two), (None, two)],
        (256, False): [(1, two), (16383, two), (16384, tile), (None, tile)],
        (256, True): [(1000, two), (16383, two), (16384, tile), (None, tile)],
    }
    assert sorted(want) == sorted(configs.FP8_BY_KEYS)
    for (d, causal), rows in want.items():
        for seqlen_k, table in rows:
            cfg = configs.gluon_fp8_config(d, causal, seqlen_k)
            assert cfg is table[(d, causal)], (d, causal, seqlen_k)
            if seqlen_k is not None:
                assert configs.gluon_fwd_config(fp8, d, causal, False, seqlen_k) is cfg
    assert configs.gluon_fwd_config(fp8, 96, True, False, 1024) is None  # not built: tl kernel


def test_gluon_fp8_forward_config_is_none_under_the_interpreter(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    assert configs.gluon_fwd_config(torch.float8_e4m3fn, 64, True, False, 1024) is None


def test_fast_divisor_divides_exactly():
    """``tile_walk.fast_divisor``: (n · m) >> p == n // d for every n below 2^31, checked at
    the ends of the range and on random values, for divisors 1, powers of two, the largest,
    and random ones; the product stays below 2^63 (the kernel's int64 multiply)."""
    import random

    from flashtriton.kernels.tile_walk import fast_divisor

    rng = random.Random(41)
    divisors = [1, 2, 3, 7, 8, 64, 100, 127, 128, 1000, 2**16 + 1, 2**30, 2**31 - 1]
    divisors += [rng.randrange(1, 2**31) for _ in range(200)]
    for d in divisors:
        packed = fast_divisor(d)
        m, p = packed & 0xFFFFFFFF, packed >> 32
        ns = [0, 1, d - 1, d, d + 1, 2**31 - 1] + [rng.randrange(0, 2**31) for _ in range(200)]
        for n in ns:
            if 0 <= n < 2**31:
                assert n * m < 2**63 and (n * m) >> p == n // d, (n, d)
    for bad in (0, -3, 2**31):
        with pytest.raises(ValueError, match="outside"):
            fast_divisor(bad)
