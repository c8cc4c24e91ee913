"""Where one attention pass's GPU time goes, kernel by kernel, for flashtriton and its peers.

    PYTHONPATH=src python3 scripts/kernel_breakdown.py --pass bwd --headdim 128 --seqlen 1024 \
        [--causal] [--providers flashtriton,sdpa_cudnn] [--iters 20] [--out breakdown.json]

The problem and the call are the benchmark's (`flashtriton.bench.providers`: batch·seqlen =
16384 tokens, heads·headdim = 2048, bf16; the backward is ``out.backward(dout)`` on a retained
graph, gradients reset between calls as `flashtriton bench` does). Each provider first runs
for the bench's GPU warm-up (``harness.GPU_WARMUP_MS``), then ``--iters`` calls under ``torch.profiler``; the table gives each kernel's mean
GPU time per call and their sum, next to the profiled window's span (the first kernel's start
to the last one's end) over the calls: the sum plus the gaps between kernels and calls. Each
gap (the GPU idle between one kernel's end and the next one's start) is charged to the kernel
that waited for it, so the ``idle before`` column says at which launch the time is lost.

``--host``: the host's side instead. The GPU is first held by a sleep kernel, so every call only
enqueues its work; the table gives the host µs per call (what the GPU waits for when its queue
runs dry, as in ``do_bench``, which clears the L2 before each call) and when, from the call's
start, each kernel launch or memset is issued on the host. A call that waits for the GPU (a
synchronizing copy, ``.item()``) shows up as a call as long as the sleep.
"""

import argparse
import json
import time
from collections import defaultdict

import torch
from torch.profiler import ProfilerActivity, profile, record_function

from flashtriton.bench.harness import GPU_WARMUP_MS, HIDDEN, TOKENS
from flashtriton.bench.providers import PROVIDERS, Problem, make_inputs


def breakdown(provider: str, problem: Problem, pass_name: str, iters: int,
              clear_l2: bool = False) -> dict:
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
            for _ in range(iters):
                call()
            torch.cuda.synchronize()
    kernels = [(e.name, e.time_range.start, e.time_range.end) for e in prof.events()
               if e.device_type == torch.autograd.DeviceType.CUDA]
    if not kernels:
        raise SystemExit(f"{provider}: the profiler recorded no GPU kernel")
    return {"provider": provider, **summarize(kernels, iters)}


def host_breakdown(provider: str, problem: Problem, pass_name: str, iters: int) -> dict:
    """Host µs per call, and each launch's host offset from its call's start (means over
    ``iters`` calls, issued while a sleep kernel holds the GPU)."""
    runner = PROVIDERS[provider].setup(problem, make_inputs(problem))
    with runner.context():
        fn = runner.callable_for(pass_name)
        for _ in range(3):  # compile, fill the caches
            runner.clear_grads()
            fn()
        torch.cuda.synchronize()
        torch.cuda._sleep(400_000_000)  # ~0.2 s of GPU time: the queue never runs dry
        walls = []
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for _ in range(iters):
                start = time.perf_counter()
                with record_function("call"):
                    runner.clear_grads()
                    fn()
                walls.append((time.perf_counter() - start) * 1e6)
            torch.cuda.synchronize()
    events = sorted(prof.events(), key=lambda e: e.time_range.start)
    calls = [e for e in events if e.name == "call"]
    launches = defaultdict(list)  # (index within the call, API name) -> offsets, µs
    for call in calls:
        inside = [e for e in events if call.time_range.start <= e.time_range.start
                  <= call.time_range.end and _is_launch(e.name)]
        for i, e in enumerate(inside):
            launches[(i, e.name)].append(e.time_range.start - call.time_range.start)
    return {"provider": provider, "host_us": sum(walls) / len(walls),
            "host_us_max": max(walls),
            "launches": [{"index": i, "api": name, "offset_us": sum(v) / len(v)}
                         for (i, name), v in sorted(launches.items())]}


def _is_launch(name: str) -> bool:
    return name.startswith(("cuLaunch", "cudaLaunch", "cudaMemset", "cuMemset", "cudaMemcpy"))


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
                         "as a kernel; the idle before the pass's first kernel is then the "
                         "host time the bench sees)")
    ap.add_argument("--host", action="store_true",
                    help="the host's time per call and launch offsets, not the GPU's")
    ap.add_argument("--out", default=None, help="JSON file for the table")
    args = ap.parse_args()
    if args.iters < 1:
        ap.error("--iters must be at least 1")
    problem = Problem(TOKENS // args.seqlen, HIDDEN // args.headdim, args.seqlen, args.headdim,
                      args.causal, torch.bfloat16)
    if args.host:
        rows = [host_breakdown(name, problem, args.pass_, args.iters)
                for name in args.providers.split(",")]
        print(f"{args.pass_} {problem.describe()}: host time per call, µs (GPU held busy)")
        for row in rows:
            print(f"  {row['provider']}: {row['host_us']:.1f} per call (max {row['host_us_max']:.1f})")
            for launch in row["launches"]:
                print(f"    launch {launch['index']} at {launch['offset_us']:7.1f}  {launch['api']}")
        _write(args, problem, rows)
        return
    rows = [breakdown(name, problem, args.pass_, args.iters, args.clear_l2)
            for name in args.providers.split(",")]
    print(f"{args.pass_} {problem.describe()}: mean GPU time per call, µs")
    for row in rows:
        print(f"  {row['provider']}: kernels {row['sum_us']:.1f}, first start to last end "
              f"{row['span_us']:.1f}")
        print(f"    {'GPU µs':>9} {'idle before':>11}  kernel")
        for name, us in sorted(row["kernels_us"].items(), key=lambda kv: -kv[1]):
            print(f"    {us:9.1f} {row['idle_before_us'].get(name, 0.0):11.1f}  {name[:80]}")
    _write(args, problem, rows)


def _write(args, problem: Problem, rows: list) -> None:
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
                       "pass": args.pass_, "problem": problem.describe(), "iters": args.iters,
                       "host": args.host, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
