"""The optimization ladder of the spec as runnable, tested forward kernels.

``VARIANTS[name]`` gives a :class:`Variant`: its launcher ``forward(q, k, v, softmax_scale=None,
config=None) -> out`` (flash layout (batch, seqlen, heads, headdim)), its default blocks, the name
of its Triton kernel (what Nsight Compute and ``flashtriton sass`` see) and the traffic model that
describes it (``flashtriton.analysis.traffic``).

- ``v1``: K/V blocks outer; O, l, m round-trip through HBM for every K/V block; division in the loop.
- ``v2``: Q blocks outer; Q loaded once; acc, m, l in registers; one division; one store of O.
- ``v2_kt``: v2 with K pre-transposed to (D, N) in HBM.
- ``v2_pad``: v2 with the head-dim tile padded by the spec's ``compute_padded_headdim``.
- ``production``: the library's forward (``flashtriton.flash_attn_func``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from flashtriton.ladder import production, v1, v2, v2_kt, v2_pad
from flashtriton.ladder._common import LadderConfig, compute_padded_headdim, tile_dim


@dataclass(frozen=True)
class Variant:
    """One rung of the ladder."""

    name: str
    summary: str
    forward: Callable  # (q, k, v, softmax_scale=None, config=None, allow_tf32=False) -> out
    default_config: Callable  # (dtype, head_dim) -> LadderConfig
    kernel_name: str  # the @triton.jit function that runs: the name ncu and the SASS show
    traffic_model: str  # key of flashtriton.analysis.traffic.MODELS
    head_dim_tile: Callable[[int], int]  # head dim -> width of the head-dim tile in the kernel
    grid: str  # programs launched, in words


VARIANTS: dict[str, Variant] = {
    "v1": Variant("v1", "K/V blocks outer; O, l, m round-trip HBM; division inside the loop",
                  v1.forward, v1.default_config, "_ladder_v1_fwd", "v1", tile_dim, "batch*heads"),
    "v2": Variant("v2", "Q blocks outer; acc, m, l in registers; one division at the end",
                  v2.forward, v2.default_config, "_ladder_v2_fwd", "v2", tile_dim,
                  "cdiv(seqlen_q, BLOCK_M) x batch*heads"),
    "v2_kt": Variant("v2_kt", "v2 with K pre-transposed to (D, N) in HBM",
                     v2_kt.forward, v2_kt.default_config, "_ladder_v2_kt_fwd", "v2", tile_dim,
                     "cdiv(seqlen_q, BLOCK_M) x batch*heads"),
    "v2_pad": Variant("v2_pad", "v2 with the head-dim tile padded (next power of two, doubled if one)",
                      v2_pad.forward, v2_pad.default_config, "_ladder_v2_fwd", "v2",
                      compute_padded_headdim, "cdiv(seqlen_q, BLOCK_M) x batch*heads"),
    "production": Variant("production", "the library's forward (flashtriton.flash_attn_func)",
                          production.forward, production.default_config, "_attn_fwd", "production",
                          tile_dim, "cdiv(seqlen_q, BLOCK_M) x batch*heads"),
}

__all__ = ["VARIANTS", "Variant", "LadderConfig", "compute_padded_headdim"]
