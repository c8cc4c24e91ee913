"""Host (Python) cost of one public call against its GPU time, forward and backward.

    PYTHONPATH=src python3 scripts/launch_overhead.py [--seqlen 1024] [--causal] [--headdim 128]
        [--profile]

For the forward: the GPU time (replayed from a CUDA graph), do_bench of the public call as
`flashtriton bench` times it (inputs requiring grad), and the host time per call issued back to
back without synchronizing, at each layer of the call (the kernel launcher alone, the Gluon
launcher, the dispatcher, the public function without and with autograd). For the backward
(``out.backward(dout, retain_graph=True)``, as the bench times it): do_bench and the host time
per call. SDPA's cuDNN and flash backends are measured the same way for comparison.
``--profile``: the top of a cProfile of 200 forward calls.
"""
import argparse
import cProfile
import pstats
import time

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from triton.testing import do_bench

import flashtriton
from flashtriton.configs import gluon_fwd_config, make_params
from flashtriton.kernels.fwd import attn_fwd
from flashtriton.kernels.fwd_gluon import attn_fwd_gluon


def host_us(fn, n=300):
    """Host microseconds per call, calls issued back to back (best of 3 runs of n)."""
    fn()
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        best = min(best, (time.perf_counter() - t0) / n * 1e6)
        torch.cuda.synchronize()
    return best


def graph_us(fn):
    with torch.no_grad():
        fn()
        stream = torch.cuda.Stream()
        with torch.cuda.stream(stream):
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph, stream=stream):
                fn()
    torch.cuda.synchronize()
    return do_bench(graph.replay) * 1e3


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seqlen", type=int, default=1024)
    ap.add_argument("--headdim", type=int, default=128)
    ap.add_argument("--causal", action="store_true")
    ap.add_argument("--profile", action="store_true")
    args = ap.parse_args()
    s, d, causal = args.seqlen, args.headdim, args.causal
    b, h = 16384 // s, 2048 // d
    q, k, v = (torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16, requires_grad=True)
               for _ in range(3))
    dout = torch.randn_like(q)
    params = make_params(d, causal=causal)
    cfg = gluon_fwd_config(q.dtype, d, causal, False, s)
    qd, kd, vd = (t.detach() for t in (q, k, v))

    def public():
        return flashtriton.flash_attn_func(q, k, v, causal=causal)

    def public_nograd():
        return flashtriton.flash_attn_func(qd, kd, vd, causal=causal)

    layers = {
        "attn_fwd_gluon": lambda: attn_fwd_gluon(qd, kd, vd, params, cfg.block_m, cfg.block_n,
                                                 cfg.num_warps, cfg.num_stages, cfg.pingpong,
                                                 cfg.persistent),
        "attn_fwd": lambda: attn_fwd(qd, kd, vd, params),
        "flash_attn_func, no grad": public_nograd,
        "flash_attn_func": public,
    }
    gpu = graph_us(public_nograd)
    tag = f"s{s} d{d} causal={causal}"
    print(f"{tag} fwd: GPU (graph replay) {gpu:.1f} us, do_bench of the call "
          f"{do_bench(public) * 1e3:.1f} us")
    for name, fn in layers.items():
        print(f"{tag} fwd host per call, {name}: {host_us(fn):.1f} us")
    out = public()

    def backward():
        out.backward(dout, retain_graph=True)

    print(f"{tag} bwd: do_bench {do_bench(backward) * 1e3:.1f} us, host per call "
          f"{host_us(backward, 100):.1f} us")
    qt, kt, vt = (t.detach().transpose(1, 2).requires_grad_() for t in (q, k, v))
    for name, backend in (("sdpa_cudnn", SDPBackend.CUDNN_ATTENTION),
                          ("sdpa_flash", SDPBackend.FLASH_ATTENTION)):
        with sdpa_kernel(backend):
            def sdpa():
                return F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal)
            o2 = sdpa()

            def sdpa_bwd():
                o2.backward(dout.transpose(1, 2), retain_graph=True)
            print(f"{tag} {name}: fwd do_bench {do_bench(sdpa) * 1e3:.1f} us, host per call "
                  f"{host_us(sdpa):.1f} us; bwd do_bench {do_bench(sdpa_bwd) * 1e3:.1f} us, "
                  f"host per call {host_us(sdpa_bwd, 100):.1f} us")
    if args.profile:
        prof = cProfile.Profile()
        prof.enable()
        for _ in range(200):
            public()
        prof.disable()
        torch.cuda.synchronize()
        pstats.Stats(prof).sort_stats("tottime").print_stats(14)


if __name__ == "__main__":
    main()
