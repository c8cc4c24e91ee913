"""scripts/queue_probe.py's clock table (its probes run on the H200 only; its --problems
parser is the harness's, tested in test_bench.py)."""

import pytest
from helpers import load_script


@pytest.fixture(scope="module")
def probe():
    return load_script("queue_probe")


def test_clock_per_mode_and_cycles(probe, capsys):
    """``--clock``'s table: each mode's median clock inside its window, cycles = µs × MHz, and
    a mode with no sample in its window says so."""
    row = {"provider": "flashtriton", "plans": True, "pass": "fwd", "headdim": 128,
           "causal": False, "do_bench_us": 300.0, "loop_gpu_us": 280.0, "ahead_gpu_us": 240.0,
           "windows": {"do_bench": (10.0, 10.1), "loop": (11.0, 11.3), "ahead": (12.0, 12.01)}}
    samples = [(10.05, 1700.0, 690.0), (11.1, 1750.0, 680.0), (11.2, 1650.0, 700.0)]
    probe.print_clock([row], samples)
    assert row["clock"]["do_bench"] == {"samples": 1, "sm_mhz": 1700.0, "watts": 690.0}
    assert row["clock"]["loop"]["sm_mhz"] == 1700.0 and row["clock"]["ahead"]["samples"] == 0
    line = capsys.readouterr().out.splitlines()[-1]
    assert line.split()[:5] == ["flashtriton", "plans", "on", "fwd", "d128"]
    assert "510.0" in line and "476.0" in line and "no sample" in line  # 300·1.7, 280·1.7
