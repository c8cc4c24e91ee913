"""How long must a timing's warm-up be? Per-call times of a pass traced from the first call on,
after an idle gap or right after another pass's load.

    PYTHONPATH=src python3 scripts/warmup_probe.py [--cases CASE ...] [--trace-ms 2000] \
        [--idle-s 3] [--lead-ms 1000] [--out FILE]

A CASE is ``TARGET@LEAD``: TARGET is ``provider:pass:headdim:seqlen[:causal]`` (the bench's
problem: batch·seqlen = 16384 tokens, 2048 hidden, bf16); LEAD is ``idle`` (``--idle-s`` of
sleep), another TARGET, run back to back for ``--lead-ms`` just before, or ``compile:TARGET``:
that target set up and called once just before (for FlexAttention a compile; give each such
lead a shape of its own, or it is not compiled again). The target's calls
are then issued back to back for about ``--trace-ms``, each as `do_bench` times it (the L2
cleared before the call, CUDA events around it), and each call's start is placed on the GPU's
own time axis (event to event from the first call). The table gives the median call time in
windows of that axis, relative to the last window (the steady state): the first window at
which every later one is within 1% is the warm-up that case needs.

The H200's clock settles under its power cap at a level that depends on the load (session 9:
boost for the first ~0.1-0.2 s, then 1650-1965 MHz), so a pass timed right after a lighter or
heavier load starts at that load's clock.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

import torch

from flashtriton.bench.harness import bench_problem
from flashtriton.bench.providers import PROVIDERS, make_inputs

WINDOWS_MS = (0, 50, 100, 200, 300, 500, 750, 1000, 1500, 2000)
DEFAULT_CASES = (
    "flashtriton:fwd:128:1024@idle", "flashtriton:fwd:128:1024@sdpa_flash:fwd:128:1024",
    "sdpa_cudnn:fwd:128:1024@idle", "sdpa_cudnn:fwd:128:1024@sdpa_flash:fwd:128:1024",
    "flashtriton:bwd:128:1024@idle", "flashtriton:bwd:128:1024@flashtriton:fwd:128:1024",
    "sdpa_cudnn:bwd:128:1024@sdpa_cudnn:fwd:128:1024",
    "flashtriton:fwd:64:16384@idle", "sdpa_cudnn:fwd:64:16384@flashtriton:fwd:64:16384",
)


def parse_target(text: str) -> tuple[str, str, int, int, bool]:
    parts = text.split(":")
    if len(parts) not in (4, 5) or parts[0] not in PROVIDERS or parts[1] not in ("fwd", "bwd"):
        raise ValueError(f"expected provider:pass:headdim:seqlen[:causal], got {text!r}")
    return parts[0], parts[1], int(parts[2]), int(parts[3]), len(parts) == 5 and parts[4] == "causal"


def windows(starts_ms: list[float], calls_ms: list[float], edges=WINDOWS_MS) -> list[dict]:
    """Median call time per window of start times [edges[i], edges[i+1]), and each relative to
    the last non-empty window's."""
    rows = []
    for lo, hi in zip(edges, edges[1:]):
        inside = [d for t, d in zip(starts_ms, calls_ms) if lo <= t < hi]
        rows.append({"from_ms": lo, "to_ms": hi, "calls": len(inside),
                     "median_ms": statistics.median(inside) if inside else None})
    steady = next((r["median_ms"] for r in reversed(rows) if r["median_ms"]), None)
    for r in rows:
        r["vs_steady"] = r["median_ms"] / steady if r["median_ms"] and steady else None
    return rows


def settled_from(rows: list[dict], tolerance: float = 0.01) -> float | None:
    """The first window start from which every window is within ``tolerance`` of the steady
    state."""
    for i, r in enumerate(rows):
        if all(x["vs_steady"] is None or abs(x["vs_steady"] - 1) <= tolerance for x in rows[i:]):
            return r["from_ms"]
    return None


class Calls:
    """Runners and timed calls of the targets, set up once and checked to run."""

    def __init__(self):
        self.cache: dict = {}

    def get(self, target: str):
        if target not in self.cache:
            name, pass_name, headdim, seqlen, causal = parse_target(target)
            problem = bench_problem(headdim, seqlen, causal)
            runner = PROVIDERS[name].setup(problem, make_inputs(problem))
            with runner.context():
                fn = runner.callable_for(pass_name)
                fn()  # compiles and first-call set-up stay out of the estimate
                torch.cuda.synchronize()
                start = time.perf_counter()
                for _ in range(5):
                    runner.clear_grads()
                    fn()
                torch.cuda.synchronize()
            estimate = (time.perf_counter() - start) / 5 * 1e3
            self.cache[target] = (runner, fn, estimate)
        return self.cache[target]

    def run_for(self, target: str, ms: float) -> None:
        runner, fn, estimate = self.get(target)
        with runner.context():
            for _ in range(max(1, int(ms / estimate))):
                runner.clear_grads()
                fn()

    def trace(self, target: str, ms: float) -> tuple[list[float], list[float]]:
        runner, fn, estimate = self.get(target)
        cache = torch.empty(256 * 2**20, dtype=torch.int8, device="cuda")
        n = max(5, int(ms / estimate))
        begin = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
        end = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
        with runner.context():
            for i in range(n):
                runner.clear_grads()
                cache.zero_()
                begin[i].record()
                fn()
                end[i].record()
        torch.cuda.synchronize()
        return ([begin[0].elapsed_time(b) for b in begin],
                [b.elapsed_time(e) for b, e in zip(begin, end)])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", nargs="+", default=list(DEFAULT_CASES))
    ap.add_argument("--trace-ms", type=float, default=2000)
    ap.add_argument("--idle-s", type=float, default=3.0)
    ap.add_argument("--lead-ms", type=float, default=1000)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    calls = Calls()
    for case in args.cases:  # set everything up (compiles) before any trace
        target, lead = case.split("@")
        calls.get(target)
        if lead != "idle" and not lead.startswith("compile:"):
            calls.get(lead)
    report = []
    for case in args.cases:
        target, lead = case.split("@")
        torch.cuda.synchronize()
        if lead == "idle":
            time.sleep(args.idle_s)
        elif lead.startswith("compile:"):
            calls.get(lead[len("compile:"):])
        else:
            calls.run_for(lead, args.lead_ms)
        start = time.perf_counter()
        starts, durations = calls.trace(target, args.trace_ms)
        host_ms = (time.perf_counter() - start) * 1e3  # enqueue and wait: the whole trace's wall time
        rows = windows(starts, durations)
        report.append({"case": case, "windows": rows, "settled_from_ms": settled_from(rows),
                       "wall_ms": host_ms, "gpu_span_ms": starts[-1] + durations[-1],
                       "load": list(os.getloadavg())})
        cells = " ".join("   -  " if r["vs_steady"] is None else f"{r['vs_steady']:6.3f}"
                         for r in rows)
        last = report[-1]
        print(f"{case:<55} {cells}  settled from {last['settled_from_ms']} ms; median "
              f"{statistics.median(durations):.4f} ms, GPU span {last['gpu_span_ms']:.0f} ms in "
              f"{last['wall_ms']:.0f} ms of wall time", flush=True)
    print("windows (ms from the first call): "
          + " ".join(f"{a}-{b}" for a, b in zip(WINDOWS_MS, WINDOWS_MS[1:])))
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"gpu": torch.cuda.get_device_name(), "cases": report}, f, indent=1)


if __name__ == "__main__":
    main()
