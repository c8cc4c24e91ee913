"""scripts/tile_errors.py: the per-tile maxima, the tiles it flags (exactly the one given a
wrong value, with its row), and the whole run on the public function (the interpreter's
kernels on the CPU, the shipped ones on a GPU), which passes on correct kernels."""

import pytest
import torch

from helpers import load_script


@pytest.fixture(scope="module")
def tile_errors():
    return load_script("tile_errors")


def test_tile_max_takes_each_blocks_largest(tile_errors):
    err = torch.zeros(2, 37, 3, dtype=torch.float64)
    err[1, 20, 2] = 5.0   # block 1 of 16 rows
    err[0, 36, 0] = 7.0   # the partial last block (rows 32-36)
    tiles = tile_errors.tile_max(err, 16)
    assert tiles.shape == (2, 3, 3)
    assert tiles[1, 1, 2] == 5.0 and tiles[0, 2, 0] == 7.0
    assert tiles.sum() == 12.0


def test_wrong_tiles_flags_the_one_broken_tile(tile_errors):
    torch.manual_seed(1)
    ref64 = torch.randn(2, 50, 3, 8, dtype=torch.float64)
    lowp = ref64.to(torch.bfloat16)
    ours = lowp.clone()
    good = tile_errors.wrong_tiles(ours, ref64, lowp, 16, 3.0)
    assert good["bad"] == [] and good["tiles"] == 2 * 4 * 3
    ours[1, 37, 2, 5] += 4.0  # batch 1, block 2 (rows 32-47), head 2, its row 5
    bad = tile_errors.wrong_tiles(ours, ref64, lowp, 16, 3.0)
    assert bad["bad"] == [(1, 2, 2)] and bad["first_rows"] == [5]
    assert bad["max"] > bad["bound"] == good["bound"]
    assert "1 of 24 tiles above; per block {2: 1}" in tile_errors.report("dq", bad)


def test_nan_counts_as_wrong(tile_errors):
    ref64 = torch.ones(1, 8, 1, 4, dtype=torch.float64)
    ours = ref64.to(torch.float16)
    ours[0, 3, 0, 0] = float("nan")
    r = tile_errors.wrong_tiles(ours, ref64, ref64.to(torch.float16), 4, 3.0)
    assert r["bad"] == [(0, 0, 0)] and r["first_rows"] == [3]


def test_the_public_function_passes(tile_errors, capsys):
    args = ["--batch", "1", "--seqlen-q", "70", "--seqlen-k", "90", "--heads", "2",
            "--heads-k", "1", "--headdim", "32", "--causal", "--block", "16", "--seed", "3"]
    assert tile_errors.main(args) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("batch 1, 70 rows, 90 keys, heads 2/1, head dim 32, bf16, causal")
    assert [line.split(":")[0] for line in out[1:]] == ["out", "dq", "dk", "dv"]
    assert all(", 0 of " in line for line in out[1:])


def test_heads_must_group(tile_errors):
    with pytest.raises(SystemExit):
        tile_errors.main(["--heads", "3", "--heads-k", "2"])
