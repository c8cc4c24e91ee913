"""flashtriton.analysis.clock: nvidia-smi's lines read back, and which samples fall inside a
timing's window (its clock, power and cycles per call)."""

import shutil
import time

import pytest

from flashtriton.analysis import clock
from helpers import stub_tool_env


def test_samples_read_from_nvidia_smi_lines(tmp_path):
    log = tmp_path / "smi.csv"
    log.write_text("timestamp, clocks.current.sm [MHz], power.draw [W]\n"
                   "2026/11/30 06:10:01.250, 1980 MHz, 412.37 W\n"
                   "2026/11/30 06:10:01.300, 1755 MHz, 699.02 W\n"
                   "2026/11/30 06:10:01.35")  # cut off mid-line when the sampler stopped
    samples = clock.read_samples(str(log))
    assert [(mhz, w) for _, mhz, w in samples] == [(1980.0, 412.37), (1755.0, 699.02)]
    assert samples[1][0] - samples[0][0] == pytest.approx(0.05, abs=1e-6)


SAMPLES = [(10.0, 1900.0, 500.0), (10.1, 1700.0, 690.0), (10.2, 1800.0, 600.0),
           (10.3, 1500.0, 700.0)]


def test_clock_of_a_window_is_the_median_of_its_samples():
    assert clock.clock_between(SAMPLES, 10.05, 10.25) == {"samples": 2, "sm_mhz": 1750.0,
                                                          "watts": 645.0}
    assert clock.clock_between(SAMPLES, 9.0, 9.5) == {"samples": 0, "sm_mhz": None,
                                                      "watts": None}


def test_clock_of_a_timing_and_its_cycles():
    rows = [{"t0": 10.05, "t1": 10.25, "us": 100.0}, {"t0": 11.0, "t1": 12.0, "us": 100.0}]
    clock.attach_clock(rows, SAMPLES)
    assert (rows[0]["samples"], rows[0]["sm_mhz"], rows[0]["watts"]) == (2, 1750.0, 645.0)
    assert rows[0]["kcycles"] == pytest.approx(175.0)
    assert rows[1]["samples"] == 0 and rows[1]["kcycles"] is None  # no sample: no clock


@pytest.mark.skipif(shutil.which("nvidia-smi") is not None,
                    reason="this machine has nvidia-smi: the error path is for machines without")
def test_sampling_without_nvidia_smi_says_so():
    with pytest.raises(RuntimeError, match="nvidia-smi is not on PATH"):
        with clock.sample_clock():
            pass


def test_samples_so_far_while_the_sampler_runs(tmp_path, monkeypatch):
    # a stand-in nvidia-smi on PATH that writes one line every 10 ms until it is stopped
    env = stub_tool_env(tmp_path, "nvidia-smi",
                        "while true; do\n"
                        "  echo \"$(date '+%Y/%m/%d %H:%M:%S.%3N'), 1755 MHz, 690.00 W\"\n"
                        "  sleep 0.01\n"
                        "done")
    monkeypatch.setenv("PATH", env["PATH"])
    with clock.sample_clock(10) as samples:
        deadline = time.time() + 10
        while not samples.so_far() and time.time() < deadline:
            time.sleep(0.02)
        early = samples.so_far()
        assert early and samples == []  # read from the log; the list fills at the end
        assert {(mhz, w) for _, mhz, w in early} == {(1755.0, 690.0)}
    assert len(samples) >= len(early)
    assert samples[:len(early)] == early
    assert samples.so_far() == list(samples)  # the log is gone: the list itself
