"""Session 33's repro of the illegal shared-memory read on branch bwd-d64-k-double (dbde774):
the shipped backward on the shapes of test_selected_by_default_but_not_when_deterministic, one
sync after each. Run from the branch's tree: PYTHONPATH=src python3 REPRO [REPEATS] [--plans]
(also under `compute-sanitizer --tool memcheck`)."""
import sys

import torch

from flashtriton import flash_attn_func
from flashtriton.kernels import common

common.PLANS["enabled"] = "--plans" in sys.argv
cases = [(1, 300, 2, 128), (1, 300, 2, 64), (1, 2048, 1, 128), (1, 8192, 1, 64), (2, 300, 4, 64),
         (1, 513, 2, 64), (1, 1000, 2, 64), (4, 300, 2, 64)]
for rep in range(int(sys.argv[1]) if len(sys.argv) > 1 and sys.argv[1].isdigit() else 1):
    for b, s, h, d in cases:
        q, k, v = (torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16, requires_grad=True)
                   for _ in range(3))
        flash_attn_func(q, k, v, causal=True).sum().backward()
        torch.cuda.synchronize()
        print("ok", rep, b, s, h, d, flush=True)
