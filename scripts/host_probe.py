"""Host time per attention call, and when each flashtriton kernel launch is issued within it.

    PYTHONPATH=src python3 scripts/host_probe.py [--seqlen 1024] [--calls 200] [--repeats 1]

At short sequence lengths the GPU can finish a call's kernels before the host has issued them:
``do_bench`` clears the L2 before every timed call (a ~58 µs kernel on an H200), so any host
time before a call's first launch beyond that, and between launches beyond the previous
kernel's GPU time, is GPU idle time inside the measurement (``kernel_breakdown.py --clear-l2``
shows it on the GPU side). Here a sleep kernel holds the GPU first, so each call only enqueues
its work: the wall time per call is pure host time. The problems are the bench's (16384 tokens,
2048 hidden, bf16), the calls the bench's providers; flashtriton's ``launch`` is wrapped to
record the offsets (µs from the call's start) at which it is entered (L:name) and returns (E).
Prints medians over ``--calls`` calls, flashtriton next to sdpa_cudnn. (``launch_overhead.py``
times each layer of the forward call instead.) ``--compare-plans``: flashtriton only, with its
call plans (``kernels/common.py``) off and on, call by call.
"""

import argparse
import statistics
import time

import torch

from flashtriton.bench.harness import bench_problem
from flashtriton.bench.providers import PROVIDERS, make_inputs

PROBLEMS = [("bwd", 128, False), ("bwd", 128, True), ("bwd", 64, False), ("fwd", 64, True),
            ("fwd", 128, False)]
_stamps: list = []


def _wrap_launches():
    """Record entry and return of every flashtriton ``launch`` (the kernel modules import it by
    name, so each module's reference is wrapped)."""
    import flashtriton.kernels.bwd as bwd
    import flashtriton.kernels.bwd_gluon as bwd_gluon
    import flashtriton.kernels.fwd as fwd
    import flashtriton.kernels.fwd_gluon as fwd_gluon
    from flashtriton.kernels import common

    original = common.launch

    def timed(kernel, grid, *args, **kwargs):
        _stamps.append(("L:" + getattr(kernel, "__name__", str(kernel))[:22], time.perf_counter()))
        entry = original(kernel, grid, *args, **kwargs)
        _stamps.append(("E", time.perf_counter()))
        return entry  # what a call plan keeps (kernels/common.py)

    for module in (fwd, bwd, fwd_gluon, bwd_gluon):
        if hasattr(module, "launch"):
            module.launch = timed


def median_offsets(calls: list[tuple[float, list[tuple[str, float]]]]) -> list[tuple[str, float]]:
    """``calls``: (start time, [(label, time), ...]) per call. The median offset (µs) of each
    stamp position, in order, labelled as in the first call."""
    per_position: dict = {}
    for start, stamps in calls:
        for i, (label, t) in enumerate(stamps):
            per_position.setdefault((i, label), []).append((t - start) * 1e6)
    return [(label, statistics.median(v)) for (i, label), v in sorted(per_position.items())]


def measure(provider: str, pass_name: str, headdim: int, causal: bool, seqlen: int,
            calls: int, alternate_plans: bool = False) -> list[tuple[str, float, list]]:
    """[(label, median host µs per call, median launch offsets)]: one entry, or with
    ``alternate_plans`` two ("plans off", "plans on"), their calls interleaved one by one so
    that the host's drift affects both alike."""
    from flashtriton.kernels import common
    problem = bench_problem(headdim, seqlen, causal)
    runner = PROVIDERS[provider].setup(problem, make_inputs(problem))
    sides = ["plans off", "plans on"] if alternate_plans else [""]
    walls: dict = {side: [] for side in sides}
    stamped: dict = {side: [] for side in sides}
    with runner.context():
        fn = runner.callable_for(pass_name)
        for _ in range(5):  # compile, fill the caches (and store the plan)
            runner.clear_grads()
            fn()
        torch.cuda.synchronize()
        torch.cuda._sleep(1_000_000_000)  # ~0.5 s: the queue never runs dry
        for i in range(calls * len(sides)):
            side = sides[i % len(sides)]
            if alternate_plans:
                common.PLANS["enabled"] = side == "plans on"
            _stamps.clear()
            start = time.perf_counter()
            runner.clear_grads()
            fn()
            walls[side].append((time.perf_counter() - start) * 1e6)
            stamped[side].append((start, list(_stamps)))
        torch.cuda.synchronize()
    common.PLANS["enabled"] = True
    return [(side, statistics.median(walls[side]), median_offsets(stamped[side]))
            for side in sides]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seqlen", type=int, default=1024)
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--compare-plans", action="store_true")
    args = ap.parse_args()
    _wrap_launches()
    from flashtriton.kernels import common

    providers = ["flashtriton"] if args.compare_plans else ["flashtriton", "sdpa_cudnn"]
    for _ in range(args.repeats):
        for pass_name, headdim, causal in PROBLEMS:
            for provider in providers:
                common.clear_launch_caches()
                for label, host, offsets in measure(provider, pass_name, headdim, causal,
                                                    args.seqlen, args.calls,
                                                    args.compare_plans):
                    marks = " ".join(f"{mark}@{us:.0f}" for mark, us in offsets)
                    print(f"{provider:12s} {pass_name} d{headdim} "
                          f"{'causal' if causal else 'full  '}{' ' + label if label else ''}: "
                          f"host {host:6.1f} us/call  {marks}", flush=True)


if __name__ == "__main__":
    main()
