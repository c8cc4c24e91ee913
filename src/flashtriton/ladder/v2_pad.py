"""Ladder step v2_pad: v2 with the head dim padded (the spec's second fix for bank conflicts).

The spec pads the head dim to ``compute_padded_headdim(D)``: the next power of two, doubled if D
already is one (32 -> 64), so that rows of K in shared memory no longer start on the same banks.
In Triton the compiler owns the shared-memory layout, so the padding that we control is the
tile: the v2 kernel runs unchanged with a head-dim tile of the padded width (columns past D are
masked on load, so HBM bytes do not change; the extra columns are multiplied by zero on chip).
That is the only difference from v2, hence this file is a launcher and nothing else.
The spec found the padding removed part of the conflicts but was slower: the extra work costs more.
"""

from __future__ import annotations

import torch

from flashtriton.kernels.common import is_interpreting
from flashtriton.ladder import v2
from flashtriton.ladder._common import INTERPRET_CONFIG, LadderConfig, compute_padded_headdim


def default_config(dtype: torch.dtype, head_dim: int) -> LadderConfig:
    """v2's blocks in float32; for 16-bit inputs BLOCK_M 64, since the padded tile doubles the
    accumulator's registers (128 x 256 fp32 at headdim 128 would spill)."""
    if is_interpreting():
        return INTERPRET_CONFIG
    if dtype == torch.float32:
        return LadderConfig(block_m=32, block_n=32, num_warps=4, num_stages=2)
    return LadderConfig(block_m=64, block_n=64, num_warps=4, num_stages=2)


def forward(q, k, v, softmax_scale=None, config: LadderConfig | None = None, allow_tf32: bool = False,
            out: torch.Tensor | None = None):
    """v2 with a padded head-dim tile: ``out`` (batch, seqlen_q, heads, headdim) in q's dtype."""
    cfg = config or default_config(q.dtype, q.shape[-1])
    return v2.launch(q, k, v, softmax_scale, cfg, compute_padded_headdim(q.shape[-1]), allow_tf32, out)
