"""Compile launcher configs for sm_90a on this machine (no GPU) and print registers, spills and
shared memory: a screen before spending GPU time on a config sweep.

    python scripts/compile_check.py fwd  --headdim 128 --configs "128,128,8,2;128,64,4,2"
    python scripts/compile_check.py bwd  --headdim 128 --configs "64,128,8,2" [--deterministic]
    python scripts/compile_check.py fp8  --headdim 128 --configs "128,128,8,2"
    python scripts/compile_check.py dropout-fwd|dropout-bwd --headdim 128 --configs ...
A config is ``block_m,block_n,warps,stages[,ptr|ws|dqtma|sep]`` (sep: dQ by its own kernel).
"""

from __future__ import annotations

import argparse
import os

os.environ["TRITON_INTERPRET"] = "0"


def parse(cfg: str):
    from flashtriton.configs import KernelConfig

    parts = cfg.split(",")
    bm, bn, w, s = (int(x) for x in parts[:4])
    flags = set(parts[4:])
    return KernelConfig(bm, bn, w, s, tma="ptr" not in flags, warp_specialize="ws" in flags,
                        dq_tma="dqtma" in flags, fused_dq="sep" not in flags)


def main():
    import torch

    from flashtriton.analysis.sass import capture_launches, compile_launch
    from flashtriton.configs import make_params
    from flashtriton.kernels.bwd import attn_bwd
    from flashtriton.kernels.fwd import attn_fwd

    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=["fwd", "bwd", "fp8", "dropout-fwd", "dropout-bwd"])
    ap.add_argument("--headdim", type=int, default=128)
    ap.add_argument("--configs", required=True)
    ap.add_argument("--causal", action="store_true")
    ap.add_argument("--deterministic", action="store_true")
    ap.add_argument("--dtype", default="bfloat16")
    a = ap.parse_args()
    dtype = torch.float8_e4m3fn if a.what == "fp8" else getattr(torch, a.dtype)
    shape = (1, 256, 2, a.headdim)
    q, k, v = (torch.empty(shape, dtype=dtype) for _ in range(3))
    p_drop = 0.1 if a.what.startswith("dropout") else 0.0
    params = make_params(a.headdim, causal=a.causal, dropout_p=p_drop,
                         deterministic=a.deterministic)
    seed = torch.zeros(1, dtype=torch.int64) if p_drop else None
    for text in a.configs.split(";"):
        cfg = parse(text)
        if a.what in ("fwd", "fp8", "dropout-fwd"):
            descale = torch.ones(3) if a.what == "fp8" else None
            call = lambda: attn_fwd(q, k, v, params, seed=seed, descale=descale, config=cfg)  # noqa: E731
        else:
            lse = torch.empty((1, 2, 256), dtype=torch.float32)
            call = lambda: attn_bwd(torch.empty_like(q), q, k, v, torch.empty_like(q), lse,  # noqa: E731
                                    params, seed=seed, config=cfg)
        for launch in capture_launches(call):
            if "preprocess" in launch["name"]:
                continue
            try:
                r = compile_launch(launch)
                print(f"{text:24s} {r['kernel']:18s} regs {r['registers']:3d} spill "
                      f"{r['spill_bytes']:5d} smem {r['shared_bytes']:6d} "
                      f"gmma {r['instructions']['HGMMA'] + r['instructions']['QGMMA']} "
                      f"tmared {r['instructions']['UTMAREDG']}", flush=True)
            except Exception as exc:  # a config that does not compile is a result too
                print(f"{text:24s} {launch['name']:18s} FAILED {str(exc).splitlines()[-1][:120]}",
                      flush=True)


if __name__ == "__main__":
    main()
