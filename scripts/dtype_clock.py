"""Is fp16 slower than bf16 in the kernel, or in the clock?

    PYTHONPATH=src python3 scripts/dtype_clock.py [--problems fwd:128:0,bwd:128:0] \
        [--seqlen 16384] [--rounds 6] [--round-ms 200] [--out FILE]

For each problem (pass:headdim:causal, the bench's shape: batch·seqlen = 16384 tokens, 2048
hidden), flashtriton and sdpa_cudnn are set up in bf16 and in fp16 on the same random values,
warmed up once, then timed in turn, ``--rounds`` rounds of ``do_bench`` (``--round-ms`` each),
while ``nvidia-smi`` samples the SM clock and the board power every 50 ms. Each timing gets the
median clock and power of the samples taken during it, and its cycles per call (µs × MHz).

If fp16's cycles per call match bf16's while its clock is lower, the kernels do the same work
per cycle in both types and fp16 loses to the clock (at the 700 W cap, a type that draws more
power per operation runs at a lower clock); if the cycles differ, the kernel itself differs.
"""

import argparse
import json
import statistics
import time

import torch

from flashtriton.analysis.clock import attach_clock, sample_clock
from flashtriton.bench.harness import GPU_WARMUP_MS, bench_problem, parse_problems
from flashtriton.bench.providers import PROVIDERS, make_inputs

PROVIDER_NAMES = ("flashtriton", "sdpa_cudnn")
COMPARED = ("bf16", "fp16")


def time_problem(pass_name: str, headdim: int, causal: bool, seqlen: int, rounds: int,
                 round_ms: int) -> list[dict]:
    """One timing per (round, dtype, provider), in turn, with its time window."""
    import triton.testing
    sides = []
    for dtype_name in COMPARED:
        problem = bench_problem(headdim, seqlen, causal, dtype_name)
        inputs = make_inputs(problem)  # same seed: the same values in both types
        for name in PROVIDER_NAMES:
            runner = PROVIDERS[name].setup(problem, inputs)
            with runner.context():
                fn = runner.callable_for(pass_name)
            leaves = None if pass_name == "fwd" else list(runner.leaves)
            sides.append((dtype_name, name, runner, fn, leaves))
    out = []
    for r in range(rounds):
        for dtype_name, name, runner, fn, leaves in sides:
            with runner.context():
                t0 = time.time()
                ms = triton.testing.do_bench(fn, warmup=GPU_WARMUP_MS if r == 0 else 1,
                                             rep=round_ms, grad_to_none=leaves,
                                             return_mode="median")
                t1 = time.time()
            out.append({"pass": pass_name, "headdim": headdim, "causal": causal,
                        "seqlen": seqlen, "dtype": dtype_name, "provider": name, "round": r,
                        "us": 1e3 * ms, "t0": t0, "t1": t1})
    return out


def summary(rows: list[dict]) -> list[dict]:
    """Medians over rounds per (problem, provider, dtype), and fp16 against bf16; only timings
    with clock samples count, and a side with none is an error."""
    keys = sorted({(r["pass"], r["headdim"], r["causal"], r["provider"]) for r in rows})
    table = []
    for key in keys:
        per = {}
        for dtype_name in COMPARED:
            mine = [r for r in rows if (r["pass"], r["headdim"], r["causal"], r["provider"]) == key
                    and r["dtype"] == dtype_name and r["kcycles"] is not None]
            if not mine:
                raise SystemExit(f"dtype_clock: no timing of {key} in {dtype_name} has a clock "
                                 f"sample (is nvidia-smi sampling? lengthen --round-ms)")
            per[dtype_name] = {field: statistics.median(r[field] for r in mine)
                               for field in ("us", "sm_mhz", "watts", "kcycles")}
        table.append({"pass": key[0], "headdim": key[1], "causal": key[2], "provider": key[3],
                      **{f"{d}_{f}": v for d, vals in per.items() for f, v in vals.items()},
                      "fp16_time_ratio": per["fp16"]["us"] / per["bf16"]["us"],
                      "fp16_cycle_ratio": per["fp16"]["kcycles"] / per["bf16"]["kcycles"]})
    return table


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--problems", default="fwd:128:0,bwd:128:0",
                    help="comma-separated pass:headdim:causal (causal 0 or 1)")
    ap.add_argument("--seqlen", type=int, default=16384)
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--round-ms", type=int, default=200)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    try:
        problems = parse_problems(args.problems)
    except ValueError as exc:
        raise SystemExit(f"dtype_clock: {exc}") from None
    with sample_clock() as samples:
        rows = [row for p in problems
                for row in time_problem(*p, args.seqlen, args.rounds, args.round_ms)]
    attach_clock(rows, samples)
    table = summary(rows)
    print(f"{'problem':16s} {'provider':12s} {'bf16 µs':>8s} {'fp16 µs':>8s} {'MHz bf16':>9s} "
          f"{'fp16':>6s} {'W bf16':>7s} {'fp16':>5s} {'time fp16/bf16':>15s} {'cycles':>7s}")
    for t in table:
        problem = f"{t['pass']} d{t['headdim']}{' causal' if t['causal'] else ''}"
        print(f"{problem:16s} {t['provider']:12s} {t['bf16_us']:8.0f} {t['fp16_us']:8.0f} "
              f"{t['bf16_sm_mhz']:9.0f} {t['fp16_sm_mhz']:6.0f} {t['bf16_watts']:7.0f} "
              f"{t['fp16_watts']:5.0f} {t['fp16_time_ratio']:15.3f} {t['fp16_cycle_ratio']:7.3f}")
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"meta": {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
                                "seqlen": args.seqlen, "round_ms": args.round_ms},
                       "summary": table, "timings": rows, "smi_samples": samples}, f, indent=1)


if __name__ == "__main__":
    main()
