"""`flashtriton bench --decode` (bench/decode.py): the check before timing, the rows, the JSON and
the CLI, as a dry run on the CPU (the interpreter; small heads unless the CLI's defaults are
exercised). The GPU figures come from the same code on the H200 (docs/performance.md)."""

import json

import pytest
import torch

from flashtriton.bench import decode, harness
from helpers import DEVICE

SMALL = decode.Geometry(heads=4, heads_k=2, head_dim=32, page_size=16)


def test_rows_pass_the_check_and_flex_is_skipped_on_cpu(tmp_path):
    out = tmp_path / "decode.json"
    doc = decode.run([(1, 32), (2, 48)], list(decode.PROVIDERS), DEVICE, out=out, geo=SMALL,
                     warmup_ms=1, rep_ms=1, print_fn=lambda s: None)
    rows = doc["results"]
    assert len(rows) == 2 * len(decode.PROVIDERS)
    for row in rows:
        if row["provider"] == "flex" and DEVICE == "cpu":
            assert row["status"] == "skipped" and row["note"] == "needs a CUDA device"
            continue
        assert row["status"] == "ok", row
        assert row["max_err"] <= decode.TOLERANCE and row["ms"] > 0
    assert json.loads(out.read_text())["results"] == json.loads(json.dumps(rows))


def test_a_wrong_provider_is_reported_not_timed(monkeypatch):
    def drops_the_cache(x):  # attends to nothing: output zeros
        return lambda: torch.zeros_like(x["q"])

    monkeypatch.setitem(decode.PROVIDERS, "broken", drops_the_cache)
    doc = decode.run([(1, 32)], ["broken", "flashtriton"], DEVICE, geo=SMALL, warmup_ms=1,
                     rep_ms=1, print_fn=lambda s: None)
    broken, ours = doc["results"]
    assert broken["status"] == "wrong" and broken["ms"] is None and "max|out - ref|" in broken["note"]
    assert ours["status"] == "ok"


def test_split_sweep_rows_name_their_split_count():
    rows = decode.split_sweep([(1, 64)], DEVICE, SMALL, print_fn=lambda s: None)
    assert [r["provider"] for r in rows] == (["flashtriton/splits=auto"]
                                             + [f"flashtriton/splits={s}" for s in decode.SWEEP_SPLITS])
    assert all(r["status"] == "ok" for r in rows), rows
    assert rows[1]["num_splits"] == 1


def test_compulsory_bytes_are_kv_plus_q_and_out():
    # Llama-3-8B heads: K and V of 1024 keys x 8 kv heads x 128 dims x 2 bytes, plus q and out
    assert decode.compulsory_bytes(1, 1024) == 2 * 1024 * 8 * 128 * 2 + 2 * 32 * 128 * 2


def test_shapes_and_providers_are_validated():
    assert decode.parse_shapes("1x16384, 64X4096") == [(1, 16384), (64, 4096)]
    for bad in ("1x", "0x64", "64"):
        with pytest.raises(ValueError, match="decode-shapes"):
            decode.parse_shapes(bad)
    with pytest.raises(ValueError, match="unknown decode providers"):
        decode.run([(1, 64)], ["cudnn"], DEVICE, print_fn=lambda s: None)
    with pytest.raises(ValueError, match="page size"):
        decode.setup(1, 40, DEVICE, SMALL)


def test_cli_decode_end_to_end(tmp_path, capsys):
    import argparse

    parser = argparse.ArgumentParser()
    harness.add_cli_arguments(parser)
    out = tmp_path / "d.json"
    args = parser.parse_args(["--decode", "--decode-shapes", "1x64", "--no-split-sweep",
                              "--providers", "flashtriton,sdpa", "--device", DEVICE,
                              "--warmup-ms", "1", "--rep-ms", "1", "--out", str(out)])
    assert harness.run_cli(args) == 0
    printed = capsys.readouterr().out
    assert ("not GPU figures" in printed) == (DEVICE == "cpu")
    data = json.loads(out.read_text())
    assert [r["provider"] for r in data["results"]] == ["flashtriton", "sdpa"]
    assert all(r["status"] == "ok" for r in data["results"])
    assert data["split_sweep"] == [] and data["meta"]["hbm_tbps_reference"] == decode.HBM_TBPS
