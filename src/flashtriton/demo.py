"""`flashtriton demo`: correctness on a few shapes and, on a GPU, a short speed table against
torch's SDPA. Without a GPU the same check runs under the Triton interpreter on small shapes."""

from __future__ import annotations

import os
import sys
import time


def add_cli_arguments(parser) -> None:
    parser.add_argument("--no-speed", action="store_true", help="skip the speed table on a GPU")


def _max_err(a, b):
    return (a.double() - b.double()).abs().max().item()


def _check(shapes, device):
    """Forward and gradients vs the float64 reference; returns rows for the table."""
    import torch

    from flashtriton import flash_attn_func
    from flashtriton.reference import attention_ref

    rows = []
    for b, s, h, d, dtype, causal in shapes:
        torch.manual_seed(0)
        q, k, v = (torch.randn(b, s, h, d, device=device, dtype=dtype, requires_grad=True)
                   for _ in range(3))
        t0 = time.perf_counter()
        out = flash_attn_func(q, k, v, causal=causal)
        g = torch.randn_like(out)
        dq, dk, dv = torch.autograd.grad(out, (q, k, v), g)
        dt = time.perf_counter() - t0
        q64, k64, v64 = (t.detach().double().requires_grad_() for t in (q, k, v))
        ref, _ = attention_ref(q64, k64, v64, causal=causal)
        r = torch.autograd.grad(ref, (q64, k64, v64), g.double())
        lowp, _ = attention_ref(q.detach(), k.detach(), v.detach(), causal=causal, upcast=False)
        err = _max_err(out, ref)
        torch_err = _max_err(lowp, ref)
        grad_err = max(_max_err(a, b_) for a, b_ in zip((dq, dk, dv), r))
        ok = err <= 2 * torch_err + 2e-2 and grad_err < 0.1 and bool(torch.isfinite(out).all())
        rows.append((f"b{b} s{s} h{h} d{d} {str(dtype).split('.')[-1]}" + (" causal" if causal else ""),
                     f"{err:.2e}", f"{torch_err:.2e}", f"{grad_err:.2e}", f"{dt:.2f}s",
                     "ok" if ok else "FAIL"))
    return rows


def _speed(device):
    import torch
    import torch.nn.functional as F
    from triton.testing import do_bench

    from flashtriton import flash_attn_func

    rows = []
    for s, causal in ((1024, False), (4096, False), (4096, True), (16384, True)):
        b, h, d = 16384 // s, 16, 128
        q, k, v = (torch.randn(b, s, h, d, device=device, dtype=torch.bfloat16) for _ in range(3))
        qt, kt, vt = (t.transpose(1, 2) for t in (q, k, v))
        flops = 4 * b * h * s * s * d / (2 if causal else 1)
        ours = do_bench(lambda: flash_attn_func(q, k, v, causal=causal), return_mode="median")
        theirs = do_bench(lambda: F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal),
                          return_mode="median")
        rows.append((f"fwd bf16 b{b} s{s} h{h} d{d}" + (" causal" if causal else ""),
                     f"{flops / ours * 1e-9:.0f}", f"{flops / theirs * 1e-9:.0f}",
                     f"{theirs / ours:.2f}x"))
    return rows


def _print_table(title, header, rows):
    try:
        from rich.console import Console
        from rich.table import Table
    except ImportError:
        print(title)
        print("  ".join(header))
        for r in rows:
            print("  ".join(r))
        return
    table = Table(title=title)
    for h in header:
        table.add_column(h)
    for r in rows:
        table.add_row(*r)
    Console().print(table)


def run_cli(args) -> int:
    import torch

    gpu = torch.cuda.is_available() and os.environ.get("TRITON_INTERPRET", "0") in ("", "0")
    if gpu:
        device = "cuda"
        shapes = [(2, 1024, 8, 128, torch.bfloat16, True), (1, 2048, 4, 64, torch.float16, False),
                  (2, 777, 4, 80, torch.bfloat16, True), (1, 512, 2, 256, torch.bfloat16, False)]
    else:
        if os.environ.get("TRITON_INTERPRET", "0") in ("", "0"):
            # Triton picks the interpreter when a kernel is defined, at import: start afresh.
            env = dict(os.environ, TRITON_INTERPRET="1")
            argv = [sys.executable, "-m", "flashtriton.cli", "demo"] + sys.argv[2:]
            os.execve(sys.executable, argv, env)
        device = "cpu"
        shapes = [(1, 65, 2, 64, torch.float16, True), (2, 33, 2, 40, torch.bfloat16, False),
                  (1, 47, 1, 128, torch.float32, True)]
        print("No GPU: running the real Triton kernels under the interpreter on small shapes.")
    rows = _check(shapes, device)
    _print_table("correctness vs float64 reference (forward and gradients)",
                 ("shape", "max|out err|", "torch same dtype", "max|grad err|", "time", "status"),
                 rows)
    failed = any(r[-1] != "ok" for r in rows)
    if gpu and not args.no_speed:
        _print_table("forward TFLOP/s, median of triton.testing.do_bench",
                     ("problem", "flashtriton", "torch SDPA", "speed-up"), _speed(device))
    elif not gpu:
        print("Speed needs a CUDA GPU: run `flashtriton demo` (or `flashtriton bench --quick`) on one.")
    return 1 if failed else 0


if __name__ == "__main__":
    import argparse

    p = argparse.ArgumentParser()
    add_cli_arguments(p)
    sys.exit(run_cli(p.parse_args()))
