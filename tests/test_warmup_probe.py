"""scripts/warmup_probe.py's summary of a trace (the GPU part runs on the H200 only)."""

import pytest
from helpers import load_script


@pytest.fixture(scope="module")
def probe():
    return load_script("warmup_probe")


def test_windows_and_where_the_calls_settle(probe):
    # a call every 10 ms: 0.9 ms for the first 200 ms (boost), then 1.0 ms
    starts = [10.0 * i for i in range(200)]
    calls = [0.9 if t < 200 else 1.0 for t in starts]
    rows = probe.windows(starts, calls, edges=(0, 100, 200, 500, 1000, 2000))
    assert [r["calls"] for r in rows] == [10, 10, 30, 50, 100]
    assert [r["median_ms"] for r in rows] == [0.9, 0.9, 1.0, 1.0, 1.0]
    assert rows[0]["vs_steady"] == pytest.approx(0.9)
    assert probe.settled_from(rows) == 200
    assert probe.settled_from(rows, tolerance=0.2) == 0


def test_empty_windows_and_bad_targets(probe):
    rows = probe.windows([0.0, 1.0], [2.0, 2.0], edges=(0, 10, 20))
    assert rows[1]["median_ms"] is None and rows[1]["vs_steady"] is None
    assert rows[0]["vs_steady"] == 1.0 and probe.settled_from(rows) == 0
    assert probe.parse_target("flashtriton:bwd:64:4096:causal") == (
        "flashtriton", "bwd", 64, 4096, True)
    with pytest.raises(ValueError, match="provider:pass"):
        probe.parse_target("nobody:fwd:64:4096")
