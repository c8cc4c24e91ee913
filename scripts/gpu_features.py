"""Time the features against the plain path on the GPU: float8 forward vs bf16, dropout vs none,
each checked first. Prints a table; writes JSON to $OUT/features.json.

    PYTHONPATH=src python3 scripts/gpu_features.py
"""

import json
import os
import time

import torch
from triton.testing import do_bench

from flashtriton import flash_attn_func

FP8 = torch.float8_e4m3fn


def tflops(b, h, s, d, ms, factor=1.0):
    return 4 * b * h * s * s * d * factor / ms * 1e-9


def quant(x):
    ds = x.abs().amax().float() / 448.0
    return (x / ds).to(FP8), ds.reshape(1)


def main():
    rows = []
    for s in (4096, 16384):
        b, h, d = 16384 // s, 16, 128
        torch.manual_seed(0)
        q, k, v = (torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        (q8, qd), (k8, kd), (v8, vd) = quant(q), quant(k), quant(v)
        ref = flash_attn_func(q, k, v)
        out8 = flash_attn_func(q8, k8, v8, q_descale=qd, k_descale=kd, v_descale=vd)
        err = ((out8.float() - ref.float()).norm() / ref.float().norm()).item()
        ms_bf16 = do_bench(lambda: flash_attn_func(q, k, v), return_mode="median")
        ms_fp8 = do_bench(lambda: flash_attn_func(q8, k8, v8, q_descale=qd, k_descale=kd, v_descale=vd),
                          return_mode="median")
        rows.append(dict(what="fwd bf16", seqlen=s, ms=ms_bf16, tflops=tflops(b, h, s, d, ms_bf16)))
        rows.append(dict(what="fwd fp8", seqlen=s, ms=ms_fp8, tflops=tflops(b, h, s, d, ms_fp8),
                         rel_err_vs_bf16=err, status="ok" if err < 0.05 else "wrong"))
        # dropout: forward + backward against the plain path
        qg, kg, vg = (t.detach().requires_grad_() for t in (q, k, v))
        g = torch.randn_like(q)

        def step(p):
            out = flash_attn_func(qg, kg, vg, dropout_p=p)
            return torch.autograd.grad(out, (qg, kg, vg), g)

        finite = all(torch.isfinite(x).all().item() for x in step(0.1))
        for p in (0.0, 0.1):
            ms = do_bench(lambda: step(p), return_mode="median")
            rows.append(dict(what=f"fwd+bwd dropout {p}", seqlen=s, ms=ms,
                             tflops=tflops(b, h, s, d, ms, 3.5), status="ok" if finite else "non-finite"))
    out = dict(gpu=torch.cuda.get_device_name(), torch=torch.__version__,
               date=time.strftime("%Y-%m-%d"), rows=rows)
    with open(os.path.join(os.environ.get("OUT", "."), "features.json"), "w") as f:
        json.dump(out, f, indent=1)
    print(f"{'what':24} {'seqlen':>6} {'ms':>8} {'TFLOP/s':>8}  note")
    for r in rows:
        note = r.get("status", "") + (f" rel err {r['rel_err_vs_bf16']:.3f}" if "rel_err_vs_bf16" in r else "")
        print(f"{r['what']:24} {r['seqlen']:>6} {r['ms']:8.3f} {r['tflops']:8.1f}  {note}")


if __name__ == "__main__":
    main()
