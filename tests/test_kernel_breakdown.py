"""scripts/kernel_breakdown.py's per-call summary of a profiled window (the profiling itself
needs a GPU; the arithmetic is checked here on a hand-made timeline)."""

import pytest

from helpers import load_script


@pytest.fixture(scope="module")
def breakdown():
    return load_script("kernel_breakdown")


def test_times_and_idle_gaps_per_call(breakdown):
    # two calls of [prep 0-10, main 15-40] then [prep 47-57, main 57-82], listed out of order
    timeline = [("main", 57.0, 82.0), ("prep", 0.0, 10.0), ("main", 15.0, 40.0),
                ("prep", 47.0, 57.0)]
    out = breakdown.summarize(timeline, iters=2)
    assert out["kernels_us"] == {"prep": 10.0, "main": 25.0}
    # main waited 5 µs in the first call, none in the second; the second prep waited 7
    assert out["idle_before_us"] == {"main": 2.5, "prep": 3.5}
    assert out["sum_us"] == 35.0
    assert out["span_us"] == 41.0  # (82 - 0) / 2 = the sum plus the idle time
    assert out["span_us"] == out["sum_us"] + sum(out["idle_before_us"].values())


def test_overlapping_kernels_are_not_charged_idle_time(breakdown):
    # a kernel that starts before the previous one ends (another stream) waited for nothing
    out = breakdown.summarize([("a", 0.0, 10.0), ("b", 5.0, 8.0), ("c", 12.0, 20.0)], iters=1)
    assert out["idle_before_us"] == {"b": 0.0, "c": 2.0}
    assert out["span_us"] == 20.0


def test_window_clock_in_cycles(breakdown):
    # nvidia-smi samples (unix time, MHz, W); the first row's window holds three of them
    samples = [(99.0, 1980.0, 400.0), (100.1, 1800.0, 690.0), (100.2, 1700.0, 700.0),
               (100.3, 1750.0, 695.0), (101.5, 1900.0, 500.0)]
    rows = [{"sum_us": 3400.0, "t0": 100.0, "t1": 100.4},
            {"sum_us": 3600.0, "t0": 102.0, "t1": 102.5}]
    breakdown.attach_window_clock(rows, samples)
    assert rows[0]["clock_samples"] == 3 and rows[0]["sm_mhz"] == 1750.0
    assert rows[0]["watts"] == 695.0
    assert rows[0]["kcycles"] == 5950.0  # 3400 µs at 1750 MHz
    assert rows[1]["clock_samples"] == 0 and rows[1]["kcycles"] is None


def test_host_probe_median_offsets():
    """scripts/host_probe.py's per-position medians of the launch stamps (µs from each call's
    start)."""
    probe = load_script("host_probe")
    calls = [(10.0, [("L:pre", 10.000100), ("E", 10.000130), ("L:main", 10.000200)]),
             (20.0, [("L:pre", 20.000300), ("E", 20.000320), ("L:main", 20.000400)]),
             (30.0, [("L:pre", 30.000200), ("E", 30.000350), ("L:main", 30.000900)])]
    out = probe.median_offsets(calls)
    assert [label for label, _ in out] == ["L:pre", "E", "L:main"]
    assert [round(us, 3) for _, us in out] == [200.0, 320.0, 400.0]
