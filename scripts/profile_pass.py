"""Run one attention pass once inside a profiler window, for Nsight Compute:

    ncu --clock-control none --set full --profile-from-start off -k regex:_attn_bwd_ws -o out/bwd \\
        python3 scripts/profile_pass.py --pass bwd --headdim 128 --seqlen 16384

The call is the benchmark's (``flashtriton.bench.providers``): the same problem (batch·seqlen =
16384 tokens, heads·headdim = 2048), inputs and provider setup as ``flashtriton bench``, so a
peer's kernels can be profiled beside ours (``--provider sdpa_cudnn``; its kernel names differ,
so leave out ``-k`` or match them). ``--pass bwd`` profiles the backward alone: the forward
runs once before the window, as in the bench's timing of the backward.

The pass runs three times first (compilation, warm caches) outside the window; then once
between cudaProfilerStart and cudaProfilerStop.
"""

import argparse
from typing import Callable

import torch

from flashtriton.bench.harness import bench_problem
from flashtriton.bench.providers import PROVIDERS, Problem, Runner, make_inputs


def build_pass(provider: str, pass_name: str,
               problem: Problem) -> tuple[Callable[[], object], Runner]:
    """The provider's call for ``pass_name`` on the problem's benchmark inputs, with its
    context (e.g. SDPA's backend choice) entered around every call, and the provider's runner
    (its leaves hold the gradients after a backward)."""
    if provider not in PROVIDERS:
        raise SystemExit(f"--provider: unknown {provider!r}; known: {', '.join(PROVIDERS)}")
    runner = PROVIDERS[provider].setup(problem, make_inputs(problem))
    with runner.context():
        fn = runner.callable_for(pass_name)

    def call():
        if pass_name == "bwd":
            runner.clear_grads()  # no gradient accumulation kernels in the window
        with runner.context():
            return fn()

    return call, runner


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pass", dest="pass_", choices=["fwd", "bwd"], default="bwd")
    ap.add_argument("--provider", default="flashtriton",
                    help="a bench provider (flashtriton, sdpa_cudnn, sdpa_flash, ...)")
    ap.add_argument("--headdim", type=int, default=128)
    ap.add_argument("--seqlen", type=int, default=16384)
    ap.add_argument("--dtype", choices=["bf16", "fp16"], default="bf16")
    ap.add_argument("--causal", action="store_true")
    args = ap.parse_args()
    problem = bench_problem(args.headdim, args.seqlen, args.causal, args.dtype)
    step, _ = build_pass(args.provider, args.pass_, problem)
    for _ in range(3):
        step()
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStart()
    step()
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStop()


if __name__ == "__main__":
    main()
