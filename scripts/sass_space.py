"""Compile every config of a tuning space for sm_90a on any machine (no GPU) and print what
ptxas makes of each: registers, shared memory, spill bytes, serialized warpgroup MMAs, and
warpgroup MMAs that read a descriptor some path leaves unwritten (`analysis/sass_flow.py`). It
prunes a `scripts/tune.py` sweep before device time is spent on it: a config that needs more
shared memory than an SM has (232,448 bytes on the H200) cannot launch, spills or serialized
MMAs are a cost the sweep would only find by timing, and an unwritten descriptor is a fault
that only some inputs reach.

    PYTHONPATH=src python3 scripts/sass_space.py --pass bwd --headdim 256 \\
        --space '64:64,64:32;4,8;1,2;tma,ptr' [--causal] [--json out.json]

The space is tune.py's ("blocks;warps;stages;loads", several joined by "|"). Each config is
launched as the library would launch it on the H200, through `flashtriton.analysis.sass`'s
registry entries with the config in place of the shipped one: the `tl` kernels through
kernels/fwd.py and kernels/bwd.py (the config's `tma` flag decides its loads), the Gluon
kernels (`gluon…` tokens) through their launchers; every attention kernel of the call is
compiled, so a two-kernel backward reports both. A config that fails to compile is reported
as such, not skipped. Run with TRITON_INTERPRET unset.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

from flashtriton.analysis.sass import KERNELS, Shape, capture_launches, compile_launch
from flashtriton.configs import KernelConfig

sys.path.insert(0, str(Path(__file__).resolve().parent))  # tune.py, beside this script
from tune import parse_space  # noqa: E402

SHARED_PER_SM = 232_448  # bytes a block may use on the H200 (sm_90)


def entries_for(pas: str, cfg: KernelConfig, head_dim: int) -> tuple[str, ...]:
    """The ``flashtriton.analysis.sass`` registry entries that launch ``cfg``'s kernels."""
    if pas == "fwd":
        return (("gluon_fwd_persistent" if cfg.persistent else "gluon_fwd") if cfg.gluon
                else "production_fwd",)
    if cfg.gluon and head_dim == 256:  # dK/dV, then dQ, by two kernels
        return ("gluon_bwd_d256", "gluon_bwd_d256_dq")
    return ("gluon_bwd" if cfg.gluon else "production_bwd_dkdv",)


# the attention kernels (not the backward's preprocess or a zero fill)
MAIN_KERNELS = ("_attn_fwd", "_attn_fwd_ws", "_attn_fwd_persistent", "_attn_bwd_dkdv",
                "_attn_bwd_dq", "_attn_bwd_ws", "_attn_bwd_dkdv_hs", "_attn_bwd_dq_hs")


def report(pas: str, cfg: KernelConfig, head_dim: int, causal: bool) -> list[dict]:
    """One row per attention kernel the call launches, or one row with the error."""
    label = {"pass": pas, "head_dim": head_dim, "causal": causal, **cfg.__dict__}
    try:
        shape = Shape(torch.bfloat16, head_dim, causal=causal, config=cfg)
        launches = [x for entry in entries_for(pas, cfg, head_dim)
                    for x in capture_launches(lambda entry=entry: KERNELS[entry].launch(shape))
                    if x["name"] in MAIN_KERNELS]
        rows = []
        for x in launches:
            r = compile_launch(x)
            rows.append({**label, "kernel": r["kernel"], "status": "ok",
                         "registers": r["registers"], "shared_bytes": r["shared_bytes"],
                         "fits": r["shared_bytes"] <= SHARED_PER_SM,
                         "spill_bytes": r["spill_bytes"],
                         "wgmma_serialized": r["wgmma_serialized"],
                         "unset_descriptors": len(r["unset_descriptors"]),
                         "stale_descriptors": len({m["address"] for m in r["stale_descriptors"]}),
                         "hgmma": r["instructions"]["HGMMA"]})
        return rows or [{**label, "status": "error", "note": "no attention kernel launched"}]
    except Exception as exc:  # a launcher's refusal or a compile failure: reported, not fatal
        note = " ".join(str(exc).split())[:160]  # one line (ptxas's messages run over several)
        return [{**label, "status": "error", "note": f"{type(exc).__name__}: {note}"}]


def _token(cfg: KernelConfig) -> str:
    flags = [k for k in ("gluon", "pingpong", "split_dq", "defer_dq", "dq_on_empty",
                         "dq_alternate", "persistent") if getattr(cfg, k)]
    loads = ("tma" if cfg.tma else "ptr") + ("" if cfg.fused_dq else "sep")
    if cfg.tile_order:
        flags.append(f"@{cfg.tile_order}")
    return (f"{cfg.block_m}:{cfg.block_n};{cfg.num_warps};{cfg.num_stages};{loads}"
            + (" " + ",".join(flags) if flags else ""))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pass", dest="pas", choices=["fwd", "bwd"], required=True)
    ap.add_argument("--headdim", type=int, required=True)
    ap.add_argument("--space", required=True, help="tune.py's: 'blocks;warps;stages;loads'|...")
    ap.add_argument("--causal", action="store_true")
    ap.add_argument("--json", default=None, help="also write the rows here")
    args = ap.parse_args(argv)
    from flashtriton.kernels.common import is_interpreting

    if is_interpreting():
        raise SystemExit("sass_space.py: unset TRITON_INTERPRET (the interpreter cannot compile)")
    rows = []
    for cfg in parse_space(args.space):
        for r in report(args.pas, cfg, args.headdim, args.causal):
            rows.append(r)
            if r["status"] == "ok":
                notes = "  serialized MMAs" if r["wgmma_serialized"] else ""
                if r["unset_descriptors"]:
                    notes += f"  {r['unset_descriptors']} MMAs read unwritten descriptors"
                if r["stale_descriptors"]:
                    notes += f"  {r['stale_descriptors']} MMAs read stale descriptors"
                print(f"{_token(cfg):40s} {r['kernel']:20s} regs {r['registers']:3d}  shared "
                      f"{r['shared_bytes']:7,d}{'' if r['fits'] else ' (too much)'}  spills "
                      f"{r['spill_bytes']:5d}{notes}", flush=True)
            else:
                print(f"{_token(cfg):40s} error: {r['note']}", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
