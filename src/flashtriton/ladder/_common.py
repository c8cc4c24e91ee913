"""What the ladder kernels share: input checks, the block configuration, masked tile loads.

The ladder kernels are study kernels: plain forward attention (no causal mask, no LSE output),
flash-attn layout (batch, seqlen, heads, headdim) with strides honoured, float16, bfloat16 or
float32. Each variant's file holds its kernel and launcher and shows only what differs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import triton
import triton.language as tl

_DTYPES = (torch.float16, torch.bfloat16, torch.float32)


@dataclass(frozen=True)
class LadderConfig:
    """Launch parameters of one ladder kernel."""

    block_m: int
    block_n: int
    num_warps: int = 4
    num_stages: int = 2


def check_inputs(q, k, v) -> None:
    """Raise ``ValueError``/``TypeError`` naming the argument when the inputs do not fit."""
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name}: expected a torch.Tensor, got {type(t).__name__}")
        if t.dim() != 4:
            raise ValueError(f"{name}: expected 4 dims (batch, seqlen, heads, headdim), got {tuple(t.shape)}")
        if t.dtype not in _DTYPES:
            raise TypeError(f"{name}: expected float16, bfloat16 or float32, got {t.dtype}")
    if not (q.dtype == k.dtype == v.dtype):
        raise TypeError(f"q, k, v: dtypes differ ({q.dtype}, {k.dtype}, {v.dtype})")
    if k.shape != v.shape:
        raise ValueError(f"v: expected the shape of k {tuple(k.shape)}, got {tuple(v.shape)}")
    if k.shape[0] != q.shape[0] or k.shape[2] != q.shape[2] or k.shape[3] != q.shape[3]:
        raise ValueError(f"k: expected (batch, seqlen_k, heads, headdim) = ({q.shape[0]}, *, {q.shape[2]}, "
                         f"{q.shape[3]}) like q (the ladder has no GQA), got {tuple(k.shape)}")
    if q.shape[1] < 1 or k.shape[1] < 1:
        raise ValueError(f"q, k: sequence lengths must be >= 1, got {q.shape[1]} and {k.shape[1]}")


def softmax_scale_or_default(softmax_scale, head_dim: int) -> float:
    return 1.0 / math.sqrt(head_dim) if softmax_scale is None else float(softmax_scale)


def tile_dim(head_dim: int) -> int:
    """Head-dim tile of the unpadded kernels: the next power of two (tl.arange needs one), >= 16."""
    return max(16, triton.next_power_of_2(head_dim))


def compute_padded_headdim(head_dim: int) -> int:
    """The spec's padding rule: the next power of two, doubled if ``head_dim`` already is one."""
    if head_dim <= 0:
        return 1
    if head_dim & (head_dim - 1) == 0:
        return head_dim * 2
    return 1 << (head_dim - 1).bit_length()


def strides(t: torch.Tensor):
    """(batch, seq, head, dim) strides of a flash-layout tensor."""
    return t.stride(0), t.stride(1), t.stride(2), t.stride(3)


@triton.jit
def load_rows(p_base, offs_r, offs_d, n_rows, stride_r, stride_d, HEAD_DIM: tl.constexpr):
    """Load rows ``offs_r`` (< n_rows) and columns ``offs_d`` (< HEAD_DIM) as a [R, D] tile, zeros outside."""
    mask = (offs_r[:, None] < n_rows) & (offs_d[None, :] < HEAD_DIM)
    return tl.load(p_base + offs_r[:, None] * stride_r + offs_d[None, :] * stride_d, mask=mask, other=0.0)


@triton.jit
def head_offset(pid_bh, nheads, stride_b, stride_h):
    """Offset (int64) of head ``pid_bh % nheads`` of batch ``pid_bh // nheads``."""
    b = (pid_bh // nheads).to(tl.int64)
    h = (pid_bh % nheads).to(tl.int64)
    return b * stride_b + h * stride_h


# Under the interpreter every program is simulated on the CPU: the smallest tiles tl.dot takes.
INTERPRET_CONFIG = LadderConfig(block_m=16, block_n=16, num_warps=4, num_stages=1)
