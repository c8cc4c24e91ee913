"""Is a pass's benchmark time its GPU work, or does the GPU wait for the host?

    PYTHONPATH=src python3 scripts/queue_probe.py [--seqlen 1024] [--iters 100] [--out FILE]

For each (provider, problem), with the benchmark's problem and call (batch·seqlen = 16384
tokens, 2048 hidden, bf16; ``flashtriton.bench.providers``), after the bench's 1 s GPU warm-up:

- ``do_bench``: the bench's own timing (median of ``triton.testing.do_bench``, 100 ms);
- ``loop``: do_bench's timed loop written out (gradients to None, L2 clear, event, call, event),
  ``--iters`` times: the median GPU time between the events, the median host time per
  iteration;
- ``ahead``: the same loop with a sleep kernel queued first, long enough that the host finishes
  enqueueing every iteration before the GPU reaches the first: GPU time only, however slow the
  host.

``loop`` above ``ahead`` by the GPU idle per iteration: the host is the bottleneck. flashtriton
runs with its call plans on and off (``kernels/common.py``).

``--rounds N``: instead, flashtriton and sdpa_cudnn set up side by side and warmed up once,
then timed in turn, N rounds of ``do_bench`` (``--round-ms`` each): how much one provider's
median moves between rounds, and whether the two move together.

``--problems pass:headdim:causal,...`` (causal 0 or 1) chooses the problems. ``--after-setup
NAMES``: before each problem is probed, those providers go through the bench's own set-up on
it (``harness.ProviderRun.open``: set-up, compiles, the correctness check against the float64
reference, peak memory) and stay alive while it is probed, as when the bench sets a
configuration's providers up together (session 25: our 1k forwards measured 12-13% below
session 24's figures after all six providers' set-up; docs/perf-log.md). Run once without and once with it, each in
a fresh process.

``--clock`` (with ``--iters 1000`` or more, so that each loop spans several samples): the SM
clock and board power sampled by ``nvidia-smi`` every 50 ms, and for each row and mode the
median clock of the samples inside its timed window, with the cycles per call it gives (µs ×
MHz). If two runs' per-call times differ while their cycles agree, the clock made the
difference (session 26: the 1k forwards' ``do_bench`` and ``loop`` times moved by up to 15%
with the set-up before them, their ``ahead`` times by under 1%; session 27, with ``--clock``:
where our d128 ``do_bench`` time rose 19% over its ``ahead`` time, the sampled clock fell from
1950 to 1575 MHz and the cycles per call stayed within 4%, docs/perf-log.md).
"""

import argparse
import contextlib
import json
import statistics
import time

import torch

from flashtriton.analysis.clock import clock_between, sample_clock
from flashtriton.bench.harness import GPU_WARMUP_MS, bench_problem, parse_problems
from flashtriton.bench.providers import PROVIDERS, Problem, make_inputs

PROBLEMS = [("bwd", 128, False), ("bwd", 64, False), ("fwd", 64, True), ("fwd", 128, False)]


def timed_loop(fn, leaves, cache, iters: int, ahead: bool) -> tuple[float, float, tuple]:
    """(median GPU µs between the events, median host µs per iteration, the wall-clock window
    in which the GPU ran the iterations: from the end of the final synchronize back by the
    GPU's span from the first iteration to the last)."""
    from triton.runtime import driver
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    torch.cuda.synchronize()
    if ahead:  # ~2 ms per iteration of sleep (1.98 GHz): the host never catches up
        torch.cuda._sleep(int(iters * 2e-3 * 1.98e9))
    host = []
    span = [torch.cuda.Event(enable_timing=True) for _ in range(2)]
    span[0].record()
    for i in range(iters):
        t0 = time.perf_counter()
        if leaves:
            for t in leaves:
                t.grad = None
        driver.active.clear_cache(cache)
        starts[i].record()
        fn()
        ends[i].record()
        host.append((time.perf_counter() - t0) * 1e6)
    span[1].record()
    torch.cuda.synchronize()
    t_end = time.time()
    gpu = [s.elapsed_time(e) * 1e3 for s, e in zip(starts, ends)]
    window = (t_end - span[0].elapsed_time(span[1]) / 1e3, t_end)
    return statistics.median(gpu), statistics.median(host), window


def open_like_the_bench(names: list[str], problem: Problem, inputs, passes) -> list:
    """The bench's set-up phase for ``names`` on ``problem``: the opened ProviderRuns (alive
    until released), each as the harness opens it."""
    from flashtriton.bench import check
    from flashtriton.bench.harness import ProviderRun, Timing

    cache: list = []

    def reference():
        if not cache:
            cache.append(check.reference_slices(problem, inputs,
                                                grads=any(p != "fwd" for p in passes)))
        return cache[0]

    runs = [ProviderRun(PROVIDERS[name], problem, inputs, reference, passes,
                        Timing(problem.device)) for name in names]
    for run in runs:
        run.open()
        print(f"  set up {run.provider.name}: {run.setup_s:.1f} s"
              + (f", not timed: {run.outcome}" if run.outcome else ""), flush=True)
    return runs


def probe(provider: str, pass_name: str, headdim: int, causal: bool, seqlen: int,
          iters: int, inputs=None) -> dict:
    import triton.testing
    from triton.runtime import driver
    problem = bench_problem(headdim, seqlen, causal)
    runner = PROVIDERS[provider].setup(problem, inputs or make_inputs(problem))
    cache = driver.active.get_empty_cache_for_benchmark()
    with runner.context():
        fn = runner.callable_for(pass_name)
        leaves = None if pass_name == "fwd" else list(runner.leaves)
        row = {"provider": provider, "pass": pass_name, "headdim": headdim, "causal": causal,
               "seqlen": seqlen}
        t0 = time.time()
        row["do_bench_us"] = 1e3 * triton.testing.do_bench(
            fn, warmup=GPU_WARMUP_MS, rep=100, grad_to_none=leaves, return_mode="median")
        t1 = time.time()  # do_bench's timed part: its last 100 ms, after the warm-up
        row["windows"] = {"do_bench": (max(t0, t1 - 0.1), t1)}
        row["loop_gpu_us"], row["loop_host_us"], row["windows"]["loop"] = timed_loop(
            fn, leaves, cache, iters, False)
        row["ahead_gpu_us"], row["ahead_host_us"], row["windows"]["ahead"] = timed_loop(
            fn, leaves, cache, iters, True)
    runner.clear_grads()
    return row


def rounds(pass_name: str, headdim: int, causal: bool, seqlen: int, n: int,
           round_ms: int) -> dict:
    """Per-round do_bench medians (µs) of flashtriton and sdpa_cudnn, timed in turn."""
    import triton.testing
    problem = bench_problem(headdim, seqlen, causal)
    inputs = make_inputs(problem)
    names = ["flashtriton", "sdpa_cudnn"]
    runners = [PROVIDERS[name].setup(problem, inputs) for name in names]
    calls = []
    for runner in runners:
        with runner.context():
            calls.append((runner.callable_for(pass_name),
                          None if pass_name == "fwd" else list(runner.leaves)))
    times: dict = {name: [] for name in names}
    for r in range(n):
        for name, runner, (fn, leaves) in zip(names, runners, calls):
            with runner.context():
                times[name].append(1e3 * triton.testing.do_bench(
                    fn, warmup=GPU_WARMUP_MS if r == 0 else 1, rep=round_ms,
                    grad_to_none=leaves, return_mode="median"))
    return {"pass": pass_name, "headdim": headdim, "causal": causal, "seqlen": seqlen,
            "round_ms": round_ms, "us": times}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seqlen", type=int, default=1024)
    ap.add_argument("--iters", type=int, default=100)
    ap.add_argument("--out", default=None)
    ap.add_argument("--rounds", type=int, default=0)
    ap.add_argument("--round-ms", type=int, default=20)
    ap.add_argument("--problems", type=parse_problems, default=PROBLEMS)
    ap.add_argument("--after-setup", default="", metavar="NAMES",
                    help="providers (comma-separated) set up as the bench does before each "
                         "problem is probed")
    ap.add_argument("--clock", action="store_true",
                    help="sample the SM clock and power (nvidia-smi, every 50 ms) and give each "
                         "mode's median clock and cycles per call; use --iters 1000 or more, "
                         "so that the loops span several samples")
    args = ap.parse_args()
    after = [n for n in args.after_setup.split(",") if n]
    unknown = [n for n in after if n not in PROVIDERS]
    if unknown:
        ap.error(f"--after-setup: unknown {unknown}; known: {list(PROVIDERS)}")
    if args.rounds:
        out = []
        for pass_name, headdim, causal in args.problems:
            row = rounds(pass_name, headdim, causal, args.seqlen, args.rounds, args.round_ms)
            out.append(row)
            ours, cudnn = row["us"]["flashtriton"], row["us"]["sdpa_cudnn"]
            ratios = [c / o for o, c in zip(ours, cudnn)]
            print(f"{pass_name} d{headdim} {'causal' if causal else 'full'}: flashtriton "
                  f"{min(ours):.0f}-{max(ours):.0f} (median {statistics.median(ours):.0f}), "
                  f"cuDNN {min(cudnn):.0f}-{max(cudnn):.0f} "
                  f"(median {statistics.median(cudnn):.0f}) µs; speed-up per round "
                  f"{min(ratios):.3f}-{max(ratios):.3f}, of the medians "
                  f"{statistics.median(cudnn) / statistics.median(ours):.3f}", flush=True)
        write_json(args.out, {"rounds": out})
        return
    sides = [("flashtriton", True), ("flashtriton", False), ("sdpa_cudnn", True)]
    rows = []
    print(f"{'provider':22s} {'problem':16s} {'do_bench':>9s} {'loop GPU':>9s} {'host':>7s} "
          f"{'ahead GPU':>9s} {'host':>7s}  (µs per call)")
    with sample_clock() if args.clock else contextlib.nullcontext() as samples:
        probe_all(args, after, sides, rows)
    if args.clock:
        print_clock(rows, samples)
    write_json(args.out, {"rows": rows, **({"smi_samples": samples} if args.clock else {})})


MODES = (("do_bench", "do_bench_us"), ("loop", "loop_gpu_us"), ("ahead", "ahead_gpu_us"))


def print_clock(rows: list[dict], samples) -> None:
    """Each row's median clock per mode (``row["clock"]``) and the cycles per call they give."""
    print(f"{'provider':22s} {'problem':16s} " + " ".join(f"{m + ' MHz':>13s} {'kcycles':>8s}"
                                                       for m, _ in MODES))
    for row in rows:
        row["clock"] = {mode: clock_between(samples, *row["windows"][mode]) for mode, _ in MODES}
        cells = []
        for mode, key in MODES:
            mhz = row["clock"][mode]["sm_mhz"]
            cells.append(f"{mhz:13.0f} {row[key] * mhz / 1e3:8.1f}" if mhz else
                         f"{'no sample':>13s} {'':8s}")
        problem = f"{row['pass']} d{row['headdim']} {'causal' if row['causal'] else 'full'}"
        print(f"{side_name(row):22s} {problem:16s} " + " ".join(cells), flush=True)


def side_name(row: dict) -> str:
    """The provider, and for flashtriton whether its call plans were on."""
    return row["provider"] + ("" if row["provider"] != "flashtriton" else
                              " plans " + ("on" if row["plans"] else "off"))


def probe_all(args, after: list[str], sides, rows: list[dict]) -> None:
    """The probe of each problem and side (after ``after``'s set-up), appended to ``rows``
    and printed as it comes."""
    from flashtriton.kernels import common
    for pass_name, headdim, causal in args.problems:
        problem = bench_problem(headdim, args.seqlen, causal)
        inputs = make_inputs(problem)
        opened = open_like_the_bench(after, problem, inputs, (pass_name,)) if after else []
        for provider, plans in sides:
            if hasattr(common, "PLANS"):
                common.PLANS["enabled"] = plans
            row = probe(provider, pass_name, headdim, causal, args.seqlen, args.iters, inputs)
            row["plans"] = plans
            row["after_setup"] = after
            rows.append(row)
            mask = "causal" if causal else "full"
            print(f"{side_name(row):22s} {pass_name} d{headdim} {mask:6s}   "
                  f"{row['do_bench_us']:9.1f} {row['loop_gpu_us']:9.1f} "
                  f"{row['loop_host_us']:7.1f} {row['ahead_gpu_us']:9.1f} "
                  f"{row['ahead_host_us']:7.1f}", flush=True)
        for run in opened:
            run.release()


def write_json(path: str | None, payload: dict) -> None:
    if path:
        with open(path, "w") as f:
            json.dump(payload, f, indent=1)


if __name__ == "__main__":
    main()
