"""Where one attention pass's GPU time goes, kernel by kernel, for flashtriton and its peers.

    PYTHONPATH=src python3 scripts/kernel_breakdown.py --pass bwd --headdim 128 --seqlen 1024 \
        [--causal] [--providers flashtriton,sdpa_cudnn] [--iters 20] [--clear-l2] [--clock] \
        [--out breakdown.json]

The problem and the call are the benchmark's (`flashtriton.bench.providers`: batch·seqlen =
16384 tokens, heads·headdim = 2048, bf16; the backward is ``out.backward(dout)`` on a retained
graph, gradients reset between calls as `flashtriton bench` does). Each provider first runs
for the bench's GPU warm-up (``harness.GPU_WARMUP_MS``), then ``--iters`` calls under
``torch.profiler``; the table gives each kernel's mean GPU time per call and their sum, next to
the profiled window's span (the first kernel's start to the last one's end) over the calls:
the sum plus the gaps between kernels and calls. Each gap (the GPU idle between one kernel's
end and the next one's start) is charged to the kernel that waited for it, so the ``idle
before`` column says at which launch the time is lost.

``--clear-l2``: clear the L2 before every call, as ``do_bench`` does. The clear is then listed as
a kernel. The idle before the pass's first kernel is NOT the bench's: torch.profiler slows the
host 1.5-3x, enough to leave the GPU waiting for it, where in ``do_bench``'s loop the host runs
ahead (``scripts/queue_probe.py`` measures that loop; ``scripts/host_probe.py`` the host side
itself). Read the kernel times here, and the idle only between one call's kernels.

``--clock``: sample the SM clock and board power with nvidia-smi (every 50 ms,
``analysis.clock``) and give each provider's profiled window its median clock, and the kernels'
sum in cycles (kcycles per call), to set beside a bench row's ``kcycles`` (``flashtriton bench
--clock``): under the H200's power cap a profiled window and a ``do_bench`` timing need not run at
the same clock. Use ``--iters`` large enough for a few samples (the window must last 150 ms or
more).
"""

import argparse
import contextlib
import json
import time
from collections import defaultdict

import torch
from torch.profiler import ProfilerActivity, profile

from flashtriton.analysis.clock import clock_between, sample_clock
from flashtriton.bench.harness import GPU_WARMUP_MS, bench_problem
from flashtriton.bench.providers import PROVIDERS, Problem, make_inputs


def breakdown(provider: str, problem: Problem, pass_name: str, iters: int,
              clear_l2: bool = False) -> dict:
    """One provider's profiled calls, summarized (``summarize``), with the profiled window's
    wall-clock start and end (``t0``, ``t1``, for ``--clock``)."""
    runner = PROVIDERS[provider].setup(problem, make_inputs(problem))
    if clear_l2:
        from triton.runtime import driver
        cache = driver.active.get_empty_cache_for_benchmark()
    with runner.context():
        fn = runner.callable_for(pass_name)

        def call():
            runner.clear_grads()
            if clear_l2:  # as do_bench does before every timed call
                driver.active.clear_cache(cache)
            fn()

        end = time.time() + GPU_WARMUP_MS / 1000  # the clock at its power cap, as in the bench
        while time.time() < end:
            call()
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            t0 = time.time()
            for _ in range(iters):
                call()
            torch.cuda.synchronize()
            t1 = time.time()
    kernels = [(e.name, e.time_range.start, e.time_range.end) for e in prof.events()
               if e.device_type == torch.autograd.DeviceType.CUDA]
    if not kernels:
        raise SystemExit(f"{provider}: the profiler recorded no GPU kernel")
    return {"provider": provider, **summarize(kernels, iters), "t0": t0, "t1": t1}


def summarize(kernels: list[tuple[str, float, float]], iters: int) -> dict:
    """Per-call means (µs) from ``kernels``, (name, start, end) of every GPU kernel that ``iters``
    calls launched: each name's time, the idle time charged to the kernel that waited for it
    (from the previous kernel's end to its start; the window's first kernel is charged
    nothing), their sum and the window's span."""
    kernels = sorted(kernels, key=lambda k: k[1])
    per_name, idle_before = defaultdict(float), defaultdict(float)
    prev_end = None
    for name, start, end in kernels:
        per_name[name] += (end - start) / iters
        if prev_end is not None:
            idle_before[name] += max(0.0, start - prev_end) / iters
        prev_end = end if prev_end is None else max(prev_end, end)
    return {"kernels_us": dict(per_name), "idle_before_us": dict(idle_before),
            "sum_us": sum(per_name.values()), "span_us": (prev_end - kernels[0][1]) / iters}


def attach_window_clock(rows: list[dict], samples) -> None:
    """Each row's clock over its profiled window (``t0``..``t1``): ``clock_samples``, median
    ``sm_mhz`` and ``watts``, and ``kcycles``, its kernels' sum per call in thousands of cycles
    (None without a sample in the window)."""
    for row in rows:
        c = clock_between(samples, row["t0"], row["t1"])
        row["clock_samples"], row["sm_mhz"], row["watts"] = c["samples"], c["sm_mhz"], c["watts"]
        row["kcycles"] = (round(row["sum_us"] * c["sm_mhz"] / 1e3, 1) if c["samples"]
                          else None)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pass", dest="pass_", choices=["fwd", "bwd"], default="bwd")
    ap.add_argument("--headdim", type=int, default=128)
    ap.add_argument("--seqlen", type=int, default=1024)
    ap.add_argument("--causal", action="store_true")
    ap.add_argument("--providers", default="flashtriton,sdpa_cudnn")
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--clear-l2", action="store_true",
                    help="clear the L2 before each call, as do_bench does (the clear is listed "
                         "as a kernel; the profiler's own host overhead shows as idle before "
                         "the pass's first kernel)")
    ap.add_argument("--clock", action="store_true",
                    help="sample the SM clock and board power with nvidia-smi during each "
                         "provider's profiled window; report its median MHz and the kernels' "
                         "sum in kcycles per call")
    ap.add_argument("--out", default=None, help="JSON file for the table")
    args = ap.parse_args()
    if args.iters < 1:
        ap.error("--iters must be at least 1")
    problem = bench_problem(args.headdim, args.seqlen, args.causal)
    with contextlib.ExitStack() as stack:
        samples = stack.enter_context(sample_clock()) if args.clock else None
        rows = [breakdown(name, problem, args.pass_, args.iters, args.clear_l2)
                for name in args.providers.split(",")]
    if args.clock:
        attach_window_clock(rows, samples)
    print(f"{args.pass_} {problem.describe()}: mean GPU time per call, µs")
    for row in rows:
        clock = (f"; {row['sm_mhz']:.0f} MHz, {row['watts']:.0f} W ({row['clock_samples']} "
                 f"samples), {row['kcycles']:.1f} kcycles" if row.get("kcycles") is not None
                 else ("; no clock sample in the window" if args.clock else ""))
        print(f"  {row['provider']}: kernels {row['sum_us']:.1f}, first start to last end "
              f"{row['span_us']:.1f}{clock}")
        print(f"    {'GPU µs':>9} {'idle before':>11}  kernel")
        for name, us in sorted(row["kernels_us"].items(), key=lambda kv: -kv[1]):
            print(f"    {us:9.1f} {row['idle_before_us'].get(name, 0.0):11.1f}  {name[:80]}")
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
                       "pass": args.pass_, "problem": problem.describe(), "iters": args.iters,
                       "clear_l2": args.clear_l2, "clock": args.clock, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
