"""The GPU's SM clock and board power while something runs, from ``nvidia-smi``.

Under the H200's 700 W cap the clock depends on the load and on what ran before, so a timing
means little without the clock it ran at (docs/performance.md, "Run-to-run spread: the clock").
``sample_clock()`` runs ``nvidia-smi`` beside the caller's work, one sample every 50 ms;
``clock_between`` gives the median clock and power of the samples inside a time window (wall
clock, ``time.time()``), and ``attach_clock`` does that for rows that carry their window as
``t0`` / ``t1``, with the cycles per call (µs × MHz) beside.
Used by ``flashtriton bench --clock`` (``clock_within``: a row's rounds), scripts/dtype_clock.py
and scripts/queue_probe.py.
"""

from __future__ import annotations

import contextlib
import shutil
import statistics
import subprocess
import tempfile
from datetime import datetime

SAMPLE_MS = 50


def read_samples(path: str) -> list[tuple[float, float, float]]:
    """(unix time, SM MHz, watts) for each line ``nvidia-smi --query-gpu=timestamp,clocks.sm,
    power.draw --format=csv,noheader`` wrote; headers and partly written lines are skipped."""
    samples = []
    with open(path) as f:
        for line in f:
            parts = [p.strip() for p in line.split(",")]
            if len(parts) != 3:
                continue
            try:
                when = datetime.strptime(parts[0], "%Y/%m/%d %H:%M:%S.%f").timestamp()
                samples.append((when, float(parts[1].split()[0]), float(parts[2].split()[0])))
            except ValueError:
                continue
    return samples


class ClockSamples(list):
    """``sample_clock``'s (unix time, MHz, W) samples: the list is filled once the block has
    ended; ``so_far()`` reads those nvidia-smi has written until now (a run that saves its
    rows as it goes, and may be cut short, attaches their clock from it)."""

    def __init__(self, path: str):
        super().__init__()
        self.path = path
        self.done = False

    def so_far(self) -> list[tuple[float, float, float]]:
        # (nvidia-smi writes to a file through a buffer: the last few samples may not be
        # there yet, and a partly written line is skipped)
        return list(self) if self.done else read_samples(self.path)


@contextlib.contextmanager
def sample_clock(interval_ms: int = SAMPLE_MS):
    """Sample the SM clock and board power every ``interval_ms`` while the block runs; the
    list it yields (a ``ClockSamples``) holds the (unix time, MHz, W) samples once the block
    has ended, and its ``so_far()`` those written until a moment within the block."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        raise RuntimeError("sample_clock: nvidia-smi is not on PATH (it comes with the NVIDIA "
                           "driver)")
    with tempfile.NamedTemporaryFile("w+", suffix=".csv") as log:
        samples = ClockSamples(log.name)
        proc = subprocess.Popen([smi, "--query-gpu=timestamp,clocks.sm,power.draw",
                                 "--format=csv,noheader", "-lms", str(interval_ms)], stdout=log)
        try:
            yield samples
        finally:
            proc.terminate()
            proc.wait()
            samples.extend(read_samples(log.name))
            samples.done = True


def clock_between(samples, t0: float, t1: float) -> dict:
    """The samples taken between ``t0`` and ``t1``: their count and median MHz and W (None
    when there are none)."""
    inside = [(mhz, w) for when, mhz, w in samples if t0 <= when <= t1]
    return {"samples": len(inside),
            "sm_mhz": statistics.median(m for m, _ in inside) if inside else None,
            "watts": statistics.median(w for _, w in inside) if inside else None}


def clock_within(samples, windows) -> dict:
    """As ``clock_between``, over the samples inside any of ``windows`` ((t0, t1) pairs: a
    bench row's rounds, which other providers' timings may separate)."""
    inside = [s for s in samples if any(t0 <= s[0] <= t1 for t0, t1 in windows)]
    return clock_between(inside, float("-inf"), float("inf"))


def attach_clock(rows: list[dict], samples) -> None:
    """For each row with a window ``t0`` / ``t1`` and a time per call ``us``: its samples'
    count, median ``sm_mhz`` and ``watts``, and ``kcycles`` per call (None without samples)."""
    for row in rows:
        row.update(clock_between(samples, row["t0"], row["t1"]))
        row["kcycles"] = row["us"] * row["sm_mhz"] / 1e3 if row["samples"] else None
