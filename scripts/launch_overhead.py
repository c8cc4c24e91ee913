"""Host (Python) cost of one public forward call against its GPU time.

    PYTHONPATH=src python3 scripts/launch_overhead.py [--seqlen 1024] [--causal] [--headdim 128]

Prints: the GPU time of the forward (replayed from a CUDA graph), do_bench of the public call
as `flashtriton bench` times it (inputs requiring grad), the host time per call issued
back to back without synchronizing, and the top of a cProfile of 200 calls.
"""
import argparse
import cProfile
import pstats
import time

import torch
from triton.testing import do_bench

import flashtriton


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seqlen", type=int, default=1024)
    ap.add_argument("--headdim", type=int, default=128)
    ap.add_argument("--causal", action="store_true")
    args = ap.parse_args()
    s, d = args.seqlen, args.headdim
    b, h = 16384 // s, 2048 // d
    q, k, v = (torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16, requires_grad=True)
               for _ in range(3))

    def call():
        return flashtriton.flash_attn_func(q, k, v, causal=args.causal)

    with torch.no_grad():
        call()
        stream = torch.cuda.Stream()
        with torch.cuda.stream(stream):
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph, stream=stream):
                call()
    torch.cuda.synchronize()
    gpu_ms = do_bench(graph.replay)
    bench_ms = do_bench(call)
    torch.cuda.synchronize()
    n = 200
    t0 = time.perf_counter()
    for _ in range(n):
        call()
    host_ms = (time.perf_counter() - t0) / n * 1e3
    torch.cuda.synchronize()
    print(f"s{s} d{d} causal={args.causal}: GPU (graph replay) {gpu_ms * 1e3:.1f} us, "
          f"do_bench of the call {bench_ms * 1e3:.1f} us, host per call {host_ms * 1e3:.1f} us")
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(n):
        call()
    prof.disable()
    torch.cuda.synchronize()
    pstats.Stats(prof).sort_stats("tottime").print_stats(14)


if __name__ == "__main__":
    main()
