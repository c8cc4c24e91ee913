"""Ladder top: the library's own forward, through the public API.

Everything v2 does, plus what the production kernel adds (see ``kernels/fwd.py``): masked and
unmasked key blocks split so that full blocks skip all comparisons, tuned block configs
(``flashtriton.configs``), the LSE output the backward needs. The public function is imported
when called, so that the ladder does not depend on the public API at import time.
"""

from __future__ import annotations

import torch

from flashtriton.ladder._common import LadderConfig, check_inputs


def default_config(dtype: torch.dtype, head_dim: int) -> LadderConfig:
    """The config the production forward picks for a non-causal problem (``configs.tuned_fwd_config``)."""
    from flashtriton.configs import tuned_fwd_config

    cfg = tuned_fwd_config(dtype, head_dim, False)
    return LadderConfig(block_m=cfg.block_m, block_n=cfg.block_n, num_warps=cfg.num_warps,
                        num_stages=cfg.num_stages)


def forward(q, k, v, softmax_scale=None, config: LadderConfig | None = None, allow_tf32: bool = False):
    """``flashtriton.flash_attn_func(q, k, v)``: ``out`` (batch, seqlen_q, heads, headdim)."""
    check_inputs(q, k, v)
    if config is not None:
        raise ValueError("config: the production forward chooses its own blocks (flashtriton.configs); "
                         "pass config=None")
    if allow_tf32 and q.dtype == torch.float32:
        raise NotImplementedError("allow_tf32: the public API takes tf32 from "
                                  "torch.backends.cuda.matmul.allow_tf32, not from an argument")
    from flashtriton import flash_attn_func

    return flash_attn_func(q, k, v, softmax_scale=softmax_scale)
