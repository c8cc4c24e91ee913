"""scripts/dtype_clock.py's bookkeeping on session 15's committed run: each timing's clock and
cycles, and the fp16-against-bf16 ratios, recomputed here from the timings (the clock samples'
own bookkeeping: tests/test_clock.py)."""

import json
import statistics
from pathlib import Path

import pytest

from helpers import load_script

ROOT = Path(__file__).resolve().parents[1]
RUN = ROOT / "bench/results/2026-11-30-s15-dtype-clock.json"


@pytest.fixture(scope="module")
def dtype_clock():
    return load_script("dtype_clock")


def test_a_side_without_samples_is_an_error(dtype_clock):
    rows = [{"pass": "fwd", "headdim": 64, "causal": False, "provider": "flashtriton",
             "dtype": dtype, "t0": t0, "t1": t0 + 0.2, "us": 50.0}
            for dtype, t0 in (("bf16", 10.0), ("fp16", 11.0))]
    dtype_clock.attach_clock(rows, [(10.1, 1800.0, 650.0)])  # only bf16's window has one
    with pytest.raises(SystemExit, match="in fp16 has a clock sample"):
        dtype_clock.summary(rows)


def test_committed_run_recomputed(dtype_clock):
    run = json.loads(RUN.read_text())
    rows = [{k: v for k, v in r.items() if k not in ("samples", "sm_mhz", "watts", "kcycles")}
            for r in run["timings"]]
    dtype_clock.attach_clock(rows, [tuple(s) for s in run["smi_samples"]])
    assert all(r["samples"] >= 2 for r in rows), "a timing without clock samples"
    for mine, theirs in zip(rows, run["timings"]):
        assert mine["sm_mhz"] == theirs["sm_mhz"] and mine["kcycles"] == theirs["kcycles"]
    table = dtype_clock.summary(rows)
    assert len(table) == len(run["summary"]) == 4  # fwd and bwd d128, two providers
    for t in table:
        def median_us(dtype):
            return statistics.median(r["us"] for r in rows if r["dtype"] == dtype and
                                     (r["pass"], r["headdim"], r["provider"]) ==
                                     (t["pass"], t["headdim"], t["provider"]))
        assert t["fp16_time_ratio"] == pytest.approx(median_us("fp16") / median_us("bf16"))
    assert table == run["summary"]
