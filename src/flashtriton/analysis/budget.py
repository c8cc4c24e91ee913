"""Shared-memory and register budget of a forward block choice, against a GPU's limits.

For the Q-block-outer forward (v2 and the production kernel) with BLOCK_M x BLOCK_N tiles:

- shared memory: Q tile once plus ``stages`` buffers of K and V tiles, in the input dtype
  (``elem * (BM*D + stages*BN*(D + Dv))``). Triton adds barriers and layout-conversion
  scratch, so this is a lower bound: ``flashtriton sass`` reports the compiled figure.
- registers per thread: the float32 accumulator (BM x Dv) and score tile (BM x BN; P is
  converted from it in place), spread over ``warps * 32`` threads, plus a fixed allowance for
  addresses, m, l and loop state. Above 255 the compiler spills. A first-order estimate: small
  tiles need relatively more address registers (v2 at 32x32 fp32 compiles to 106 on the H200,
  SPEC.md §2), so read the compiled count from ``flashtriton sass``.
- programs per SM: the least of what registers, shared memory and warps allow.

Beside it, the spec's rule of thumb, ``Bc = min(SRAM / (4·D + Bc), max threads)``, ``Br = min(Bc, D)``.
Bc appears on both sides, so we take its fixed point ``Bc = sqrt(4·D² + M) - 2·D`` with M the
shared memory per block in elements of the dtype (FlashAttention-1's convention), rounded down
to a power of two (tile sizes must be one), and the tuned config that the library chose.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass

from flashtriton.analysis.gpus import GPUS, GPU, get_gpu
from flashtriton.analysis.traffic import DTYPE_BYTES

MAX_REGS_PER_THREAD = 255
REG_OVERHEAD = 32  # addresses, offsets, m, l, loop counters (a round allowance, not measured)


@dataclass(frozen=True)
class Budget:
    gpu: str
    block_m: int
    block_n: int
    head_dim: int
    dtype: str
    stages: int
    warps: int
    smem_bytes: int
    smem_limit: int
    smem_ok: bool
    regs_per_thread: int
    regs_limit: int
    spills_expected: bool
    programs_per_sm: int
    limited_by: str
    occupancy_pct: float
    spec_bc: int
    spec_br: int
    tuned_block_m: int | None
    tuned_block_n: int | None


def spec_rule(gpu: GPU, head_dim: int, dtype: str) -> tuple[int, int]:
    """The spec's ``(Bc, Br)`` for this GPU, head dim and dtype (fixed point, power of two)."""
    m = gpu.smem_per_block // DTYPE_BYTES[dtype]
    bc = math.sqrt(4 * head_dim * head_dim + m) - 2 * head_dim
    bc = min(1 << int(math.floor(math.log2(max(bc, 1)))), gpu.max_threads_per_block)
    return bc, min(bc, head_dim)


def smem_bytes(block_m, block_n, head_dim, head_dim_v, dtype, stages) -> int:
    e = DTYPE_BYTES[dtype]
    return e * (block_m * head_dim + stages * block_n * (head_dim + head_dim_v))


def regs_per_thread(block_m, block_n, head_dim_v, warps) -> int:
    acc = block_m * head_dim_v  # fp32: one register per element
    scores = block_m * block_n
    return int(math.ceil((acc + scores) / (warps * 32))) + REG_OVERHEAD


def _tuned(dtype: str, head_dim: int):
    """The production forward's config for this dtype and head dim (None if unavailable)."""
    try:
        import torch

        from flashtriton.configs import tuned_fwd_config
    except ImportError:
        return None, None
    cfg = tuned_fwd_config(getattr(torch, dtype), head_dim, False)
    return cfg.block_m, cfg.block_n


def budget(gpu: GPU | str, block_m: int, block_n: int, head_dim: int, dtype: str = "bfloat16",
           stages: int = 2, warps: int = 4, head_dim_v: int | None = None) -> Budget:
    gpu = get_gpu(gpu) if isinstance(gpu, str) else gpu
    if dtype not in DTYPE_BYTES:
        raise ValueError(f"dtype: expected one of {sorted(DTYPE_BYTES)}, got {dtype!r}")
    dv = head_dim if head_dim_v is None else head_dim_v
    smem = smem_bytes(block_m, block_n, head_dim, dv, dtype, stages)
    regs = regs_per_thread(block_m, block_n, dv, warps)
    regs_used = min(regs, MAX_REGS_PER_THREAD)
    limits = {
        "registers": gpu.regs_per_sm // (regs_used * warps * 32),
        "shared memory": gpu.smem_per_sm // smem if smem else gpu.max_warps_per_sm,
        "warps": gpu.max_warps_per_sm // warps,
    }
    limited_by = min(limits, key=limits.get)
    programs = limits[limited_by] if smem <= gpu.smem_per_block else 0
    bc, br = spec_rule(gpu, head_dim, dtype)
    tuned_m, tuned_n = _tuned(dtype, head_dim)
    return Budget(gpu.name, block_m, block_n, head_dim, dtype, stages, warps, smem, gpu.smem_per_block,
                  smem <= gpu.smem_per_block, regs, MAX_REGS_PER_THREAD, regs > MAX_REGS_PER_THREAD,
                  programs, limited_by, round(100.0 * programs * warps / gpu.max_warps_per_sm, 1),
                  bc, br, tuned_m, tuned_n)


def add_cli_arguments(parser) -> None:
    parser.add_argument("--gpu", default="h200", choices=sorted(GPUS))
    parser.add_argument("--block-m", type=int, default=128)
    parser.add_argument("--block-n", type=int, default=64)
    parser.add_argument("--headdim", type=int, default=128)
    parser.add_argument("--headdim-v", type=int, default=None)
    parser.add_argument("--dtype", default="bfloat16", choices=sorted(DTYPE_BYTES))
    parser.add_argument("--stages", type=int, default=2)
    parser.add_argument("--warps", type=int, default=4)
    parser.add_argument("--json", action="store_true", help="print one JSON object")


def run_cli(args) -> int:
    b = budget(args.gpu, args.block_m, args.block_n, args.headdim, args.dtype, args.stages, args.warps,
               args.headdim_v)
    if args.json:
        print(json.dumps(asdict(b), indent=2))
        return 0
    print(f"{b.gpu}: BLOCK_M {b.block_m}, BLOCK_N {b.block_n}, head dim {b.head_dim}, {b.dtype}, "
          f"{b.stages} stages, {b.warps} warps")
    print(f"  shared memory  {b.smem_bytes:>8,} of {b.smem_limit:,} bytes per block "
          f"({'fits' if b.smem_ok else 'DOES NOT FIT'}; lower bound)")
    print(f"  registers      {b.regs_per_thread:>8} per thread (limit {b.regs_limit}"
          f"{', spills expected' if b.spills_expected else ''}; estimate)")
    print(f"  programs/SM    {b.programs_per_sm:>8} (limited by {b.limited_by}), occupancy {b.occupancy_pct}%")
    print(f"  spec's rule    Bc = {b.spec_bc}, Br = {b.spec_br}; tuned config: "
          f"BLOCK_M {b.tuned_block_m}, BLOCK_N {b.tuned_block_n}")
    return 0
