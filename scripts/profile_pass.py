"""Run one attention pass once inside a profiler window, for Nsight Compute:

    ncu --clock-control none --set full --profile-from-start off -k regex:_attn_bwd_ws -o out/bwd \\
        python3 scripts/profile_pass.py --pass bwd --headdim 128 --seqlen 16384

The pass runs three times first (compilation, warm caches) outside the window; then once
between cudaProfilerStart and cudaProfilerStop. Shapes as the benchmark's grid: batch·seqlen =
16384 tokens, heads·headdim = 2048, bf16, through the public flash_attn_func.
"""

import argparse

import torch

from flashtriton import flash_attn_func


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pass", dest="pass_", choices=["fwd", "bwd"], default="bwd")
    ap.add_argument("--headdim", type=int, default=128)
    ap.add_argument("--seqlen", type=int, default=16384)
    ap.add_argument("--causal", action="store_true")
    args = ap.parse_args()
    b, h, s, d = 16384 // args.seqlen, 2048 // args.headdim, args.seqlen, args.headdim
    q, k, v = (torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16, requires_grad=True)
               for _ in range(3))
    do = torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16)

    def step():
        out = flash_attn_func(q, k, v, causal=args.causal)
        if args.pass_ == "bwd":
            torch.autograd.grad(out, (q, k, v), do)

    for _ in range(3):
        step()
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStart()
    step()
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStop()


if __name__ == "__main__":
    main()
