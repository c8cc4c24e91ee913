"""Where float8 row sums on the tensor cores went wrong (docs/perf-log.md, sessions 66 to 68):
one warpgroup's product of P (64 x 128, float32 in the scores' accumulator layout, made into a
register A operand as the Gluon forward does, ``_fp8_operand``) and a tile B ([N, 128],
keys-minor, 128-byte swizzle) in shared memory, against the product in float64 of P as rounded
to the operand's dtype. Variants: B a tile of ones written by the threads from 1.0 converted in
the kernel ("threads"), or as e4m3's bits, 0x38 ("bits", as the forward's ``_ones_tile`` now
does), ones copied in by TMA (as the forward's V), or random values by TMA (the whole product,
the probe's own check); the product's width N (8, 16, 64); P's operand made by
``_fp8_operand`` or by ``p.to`` and a layout conversion, converted to the product's parent
directly or through P·V's (parent [16, 64, 32]); bfloat16, with ones by the threads, as the
control. Each variant's largest error over the largest product, and whether a row's columns are
equal (they must be for a B of ones), are printed and written to --out as JSON.

    python3 scripts/fp8_rowsum_probe.py [--out rowsum.json] [--kernel]

``--kernel``: the Gluon forward itself, with and without ``rowsum_mma``, on one head of a few
shapes: each row's l with the row sums on the tensor cores over the float32 sums, as
exp(lse_rowsum - lse), summarized per 64 rows.

Session 67 (H100, "threads" only): every float8 variant wrong, bfloat16 exact. Session 68
(H100, bench/results/2026-12-07-s68-h100-fp8-rowsum-probe.json): "bits", "tma-ones" and
"tma-rand" right in every variant (largest error 1-4e-4 of the largest product, e4m3's P
against float64), "threads" wrong as before: ptxas kept a register's stale upper half in two of
the four bytes each thread stored. The forward with ``rowsum_mma`` then gave l within 1.1% at
1,024 keys, but outputs 32% off at 16k keys, until each step's sums started from zero
(``fwd_gluon_tile._sum_rows_async``: the float8 accumulation keeps about 14 bits).
"""

from __future__ import annotations

import argparse
import itertools
import json

import torch
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (fence_async_shared, mbarrier, tma,
                                                              warpgroup_mma, warpgroup_mma_wait)

from flashtriton.kernels.common import ensure_allocator
from flashtriton.kernels.fwd_gluon_tile import _fp8_operand

BLOCK_M = 64
BLOCK_N = 128


@gluon.jit
def _probe(p_ptr, b_ptr, out_ptr, BLOCK_N: gl.constexpr, WIDTH: gl.constexpr,
           TMA_B: gl.constexpr, BITS: gl.constexpr, RELABEL: gl.constexpr, VIA_O: gl.constexpr,
           HEAD_DIM: gl.constexpr, dtype: gl.constexpr):
    BM: gl.constexpr = 64
    KSTEP: gl.constexpr = 256 // dtype.primitive_bitwidth
    KW: gl.constexpr = 32 // dtype.primitive_bitwidth
    s_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                       instr_shape=[16, BLOCK_N, KSTEP])
    o_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                       instr_shape=[16, HEAD_DIM, KSTEP])
    l_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                       instr_shape=[16, WIDTH, KSTEP])
    rows = gl.arange(0, BM, layout=gl.SliceLayout(1, s_layout))
    cols = gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, s_layout))
    p = gl.load(p_ptr + gl.expand_dims(rows, 1) * BLOCK_N + gl.expand_dims(cols, 0))
    if RELABEL:
        p_op = _fp8_operand(p, dtype)
    else:
        p_op = p.to(dtype)
    if VIA_O:
        p_op = gl.convert_layout(p_op, gl.DotOperandLayout(operand_index=0, parent=o_layout,
                                                           k_width=KW))
    p_l = gl.convert_layout(p_op, gl.DotOperandLayout(operand_index=0, parent=l_layout,
                                                      k_width=KW))
    layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([WIDTH, BLOCK_N], dtype)
    if TMA_B:  # B ([WIDTH, BLOCK_N] at b_ptr) copied in by TMA, as the forward's V is
        tile = gl.allocate_shared_memory(dtype, [WIDTH, BLOCK_N], layout)
        bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
        mbarrier.init(bar, count=1)
        desc = tma.make_tensor_descriptor(b_ptr, shape=[WIDTH, BLOCK_N], strides=[BLOCK_N, 1],
                                          block_shape=[WIDTH, BLOCK_N], layout=layout)
        mbarrier.expect(bar, WIDTH * BLOCK_N * dtype.primitive_bitwidth // 8)
        tma.async_copy_global_to_shared(desc, [0, 0], bar, tile)
        mbarrier.wait(bar, 0)
    elif BITS:  # ones written by the threads as their bit pattern (no conversion)
        fill: gl.constexpr = gl.BlockedLayout([1, 8], [1, 32], [4, 1], [1, 0])
        tile = gl.allocate_shared_memory(dtype, [WIDTH, BLOCK_N], layout,
                                         gl.full([WIDTH, BLOCK_N], 0x38, gl.uint8,
                                                 layout=fill).to(dtype, bitcast=True))
    else:  # ones written by the threads, as the forward's _ones_tile does
        fill: gl.constexpr = gl.BlockedLayout([1, 8], [1, 32], [4, 1], [1, 0])
        tile = gl.allocate_shared_memory(dtype, [WIDTH, BLOCK_N], layout,
                                         gl.full([WIDTH, BLOCK_N], 1.0, gl.float32,
                                                 layout=fill).to(dtype))
    fence_async_shared()
    acc = gl.zeros([BM, WIDTH], gl.float32, layout=l_layout)
    acc = warpgroup_mma(p_l, tile.permute((1, 0)), acc, is_async=True)
    acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc,))
    orow = gl.arange(0, BM, layout=gl.SliceLayout(1, l_layout))
    ocol = gl.arange(0, WIDTH, layout=gl.SliceLayout(0, l_layout))
    gl.store(out_ptr + gl.expand_dims(orow, 1) * WIDTH + gl.expand_dims(ocol, 0), acc)


def kernel_rows() -> list[dict]:
    """The forward with and without rowsum_mma on float8 inputs: per-row l ratios."""
    from flashtriton.configs import gluon_fp8_config, make_params
    from flashtriton.kernels.fwd_gluon import attn_fwd_gluon

    rows = []
    for d, causal, sk, pingpong in itertools.product((64, 128), (False, True), (128, 1024),
                                                     (True,)):
        cfg = gluon_fp8_config(d, causal)
        q, k, v = (torch.randn(1, n, 1, d, device="cuda").to(torch.float8_e4m3fn)
                   for n in (256, sk, sk))
        desc = torch.ones(3, device="cuda")
        args = (q, k, v, make_params(d, causal=causal), cfg.block_m, cfg.block_n, cfg.num_warps,
                cfg.num_stages, pingpong)
        name = f"d{d} causal={int(causal)} sk={sk} pingpong={int(pingpong)}"
        try:
            o0, lse0 = attn_fwd_gluon(*args, descale=desc)
            o1, lse1 = attn_fwd_gluon(*args, descale=desc, rowsum_mma=True)
            torch.cuda.synchronize()
            ratio = torch.exp((lse1 - lse0).double())[0, 0]  # l_rowsum / l, per row
            halves = ratio.view(-1, 64)  # 64-row consumer halves of the 128-row tiles
            row = {"case": name, "o_err": (o1.float() - o0.float()).abs().max().item(),
                   "ratio_by_64_rows": [[round(x, 4) for x in (h.min().item(), h.median().item(),
                                                               h.max().item())] for h in halves],
                   "ratio_rows_0_8": [round(x, 4) for x in ratio[:8].tolist()]}
        except Exception as exc:
            row = {"case": name, "error": f"{type(exc).__name__}: {str(exc)[:300]}"}
        rows.append(row)
        print(json.dumps(row), flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=None, help="JSON file for the results")
    parser.add_argument("--kernel", action="store_true", help="the forward kernel too")
    args = parser.parse_args()
    torch.manual_seed(0)
    rows = []
    ensure_allocator()  # (the TMA descriptor is made on the device)
    # B: "threads" (ones written by the threads), "tma-ones", or "tma-rand" (random B by TMA,
    # against the whole product P·B^T: the probe's own check, P's operand by p.to only)
    cases = itertools.product(("threads", "bits", "tma-ones", "tma-rand"),
                              (torch.float8_e4m3fn, torch.bfloat16), (8, 16, 64), (True, False),
                              (False, True))
    for fill, dtype, n_out, relabel, via_o in cases:
        fp8 = dtype == torch.float8_e4m3fn
        # (bfloat16 by threads only: a 128-wide bfloat16 row is 256 bytes, past the 128-byte
        # swizzle's span, which a TMA box may not exceed)
        if (relabel and (not fp8 or fill == "tma-rand")) or (fill != "threads" and not fp8):
            continue
        p = torch.rand(BLOCK_M, BLOCK_N, device="cuda", dtype=torch.float32)
        if fill == "tma-rand":
            b = torch.randn(n_out, BLOCK_N, device="cuda").to(dtype)
        else:
            b = torch.ones(n_out, BLOCK_N, device="cuda").to(dtype)
        want = p.to(dtype).double() @ b.double().T
        out = torch.full((BLOCK_M, n_out), float("nan"), device="cuda", dtype=torch.float32)
        gdtype = gl.float8e4nv if dtype == torch.float8_e4m3fn else gl.bfloat16
        name = f"{fill} {str(dtype)[6:]} N={n_out} relabel={int(relabel)} via_o={int(via_o)}"
        try:
            _probe[(1,)](p, b, out, BLOCK_N, n_out, fill.startswith("tma"), fill == "bits",
                         relabel, via_o, 64,
                         gdtype, num_warps=4)
            torch.cuda.synchronize()
            got = out.double()
            err = ((got - want).abs().max() / want.abs().max()).item()
            row = {"case": name, "max_err_over_max": err, "row0": got[0, :4].tolist(),
                   "want0": want[0, :4].tolist(),
                   "columns_equal": bool((got == got[:, :1]).all().item())}
        except Exception as exc:  # a variant that does not compile is a result too
            row = {"case": name, "error": f"{type(exc).__name__}: {str(exc)[:300]}"}
        rows.append(row)
        print(json.dumps(row), flush=True)
    if args.kernel:
        rows += kernel_rows()
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"gpu": torch.cuda.get_device_name(), "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
