"""Dropout's random stream, outside the attention kernels: drawing the seed, and a debug kernel
that writes the keep mask the attention kernels use, so that tests (and curious users) can
check the forward and backward against a reference applying exactly that mask. Small shapes
only: the mask is materialised."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from flashtriton.kernels.common import dropout_keep


def draw_seed(device) -> torch.Tensor:
    """One int64 seed on ``device`` from torch's generator for that device (seeded by
    ``torch.manual_seed``). Stays on the device: no host sync, capturable in CUDA graphs."""
    return torch.randint(0, 2**62, (1,), device=device, dtype=torch.int64)


@triton.jit
def _dropout_mask(SEED, OUT, nheads, seqlen_q, seqlen_k, dropout_p,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    bh = tl.program_id(2)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    keep = dropout_keep(tl.load(SEED), bh, offs_m, pid_n * BLOCK_N, BLOCK_N, dropout_p)
    p_out = OUT + bh.to(tl.int64) * seqlen_q * seqlen_k + offs_m[:, None] * seqlen_k + offs_n[None, :]
    tl.store(p_out, keep.to(tl.int8), mask=(offs_m[:, None] < seqlen_q) & (offs_n[None, :] < seqlen_k))


def dropout_mask(seed: torch.Tensor, batch: int, nheads: int, seqlen_q: int, seqlen_k: int,
                 dropout_p: float) -> torch.Tensor:
    """The boolean keep mask (batch, nheads, seqlen_q, seqlen_k) that the attention kernels
    apply for ``seed`` (dense layout; for varlen, sequence b's block is [b, :, :len_q, :len_k])."""
    out = torch.empty((batch, nheads, seqlen_q, seqlen_k), dtype=torch.int8, device=seed.device)
    grid = (triton.cdiv(seqlen_q, 16), triton.cdiv(seqlen_k, 32), batch * nheads)
    _dropout_mask[grid](seed, out, nheads, seqlen_q, seqlen_k, float(dropout_p),
                        BLOCK_M=16, BLOCK_N=32)
    return out.bool()
