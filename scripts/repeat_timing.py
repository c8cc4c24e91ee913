"""Time a few forward configs several times in one process (run-to-run spread of the median).

    PYTHONPATH=src python3 scripts/repeat_timing.py [--reps 5]

Prints one line per (config, shape) with every repetition's TFLOP/s and the spread; output is
checked against SDPA once per shape before timing. Each repetition's end time (unix seconds) is
printed too, to line the medians up with a clock and power log (``nvidia-smi -lms``).
"""
import argparse
import time

import torch
import torch.nn.functional as F
from triton.testing import do_bench

from flashtriton.configs import KernelConfig, make_params
from flashtriton.kernels.fwd import attn_fwd


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args()
    cfgs = {"tile": KernelConfig(128, 128, 4, 2, gluon=True, pingpong=True),
            "pers": KernelConfig(128, 128, 4, 2, gluon=True, pingpong=True, persistent=True)}
    for s, causal in ((1024, True), (4096, False), (1024, False), (4096, True)):
        b, h, d = 16384 // s, 16, 128
        q, k, v = (torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        params = make_params(d, causal=causal)
        ref = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2),
                                             v.transpose(1, 2), is_causal=causal).transpose(1, 2)
        flops = 4 * b * h * s * s * d / (2 if causal else 1)
        for name, cfg in cfgs.items():
            out, _ = attn_fwd(q, k, v, params, config=cfg)
            err = ((out.float() - ref.float()).abs().max()).item()
            assert err < 2e-2, (name, s, causal, err)
            tf, ends = [], []
            for _ in range(args.reps):
                tf.append(flops / do_bench(lambda: attn_fwd(q, k, v, params, config=cfg)) * 1e-9)
                ends.append(time.time())
            print(f"s{s} causal={causal} {name}: " + " ".join(f"{t:.1f}" for t in tf)
                  + f"  spread {max(tf) / min(tf) - 1:.1%}  (ends at unix "
                  + " ".join(f"{e:.2f}" for e in ends) + ")", flush=True)


if __name__ == "__main__":
    main()
