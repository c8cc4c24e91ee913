"""V copied keys-minor for the float8 forwards: (B, Sk, Hk, D) -> (B, Hk, D, Sk padded), keys
contiguous, in one Triton kernel. Hopper's float8 tensor cores take the P·V product's V operand
only with the key (reduction) dimension contiguous. The Gluon forward also wants each group of
32 keys in the order its P operand's registers hold them (``ORDER``, fwd_gluon_tile._fp8_operand).

A program reads BLOCK_K keys' rows of one (batch, head) (D contiguous bytes each) and writes
them transposed (BLOCK_K contiguous bytes per head-dim row); positions past the keys get 0.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from flashtriton.kernels.common import cdiv, grid3, launch

# the key each position of a 32-key group holds in the Gluon forward's copy: position
# [h][t][a][e] (bits 4, 3-2, 1, 0) holds key [h][a][t][e]
ORDER = tuple((k & 16) | ((k >> 1) & 1) << 3 | ((k >> 2) & 3) << 1 | (k & 1) for k in range(32))


@triton.jit
def _keys_minor(V, VT, stride_vb, stride_vn, stride_vh, stride_tb, stride_th, stride_td,
                nheads_k, seqlen_k, padded, D: tl.constexpr, BLOCK_D: tl.constexpr,
                BLOCK_K: tl.constexpr, GROUP_ORDER: tl.constexpr):
    pid_k = tl.program_id(0)
    bh = tl.program_id(1)
    b = (bh // nheads_k).to(tl.int64)
    h = (bh % nheads_k).to(tl.int64)
    pos = pid_k * BLOCK_K + tl.arange(0, BLOCK_K)
    key = pos
    if GROUP_ORDER:  # ORDER within each 32 positions, by its bit relabelling
        i = pos % 32
        key = pos - i + ((i & 16) | (((i >> 1) & 1) << 3) | (((i >> 2) & 3) << 1) | (i & 1))
    offs_d = tl.arange(0, BLOCK_D)
    src = (V + b * stride_vb + h * stride_vh + key[:, None].to(tl.int64) * stride_vn
           + offs_d[None, :])
    x = tl.load(src, mask=(key[:, None] < seqlen_k) & (offs_d[None, :] < D), other=0.0)
    dst = (VT + b * stride_tb + h * stride_th + offs_d[:, None].to(tl.int64) * stride_td
           + pos[None, :])
    tl.store(dst, tl.trans(x), mask=(offs_d[:, None] < D) & (pos[None, :] < padded))


def keys_minor(v: torch.Tensor, pad_to: int, group_order: bool = False) -> torch.Tensor:
    """V (B, Sk, Hk, D), last dim contiguous, copied to (B, Hk, D, Sk padded to a multiple of
    ``pad_to``), zeros past Sk; with ``group_order`` each 32 positions hold keys in ``ORDER``
    (``pad_to`` must then be a multiple of 32)."""
    return keys_minor_recorded(v, pad_to, group_order)[0]


def keys_minor_recorded(v: torch.Tensor, pad_to: int, group_order: bool = False):
    """``keys_minor``, and what a call plan keeps to make the same copy of another V of this
    layout (``replay_keys_minor``): ``(vt, record)``, record None where the launch took
    Triton's own path (``common.launch``)."""
    if group_order and pad_to % 32:
        raise ValueError(f"keys_minor: group_order needs pad_to a multiple of 32, got {pad_to}")
    if v.stride(-1) != 1:
        raise ValueError("keys_minor: V's last dim must be contiguous")
    batch, seqlen_k, nheads_k, d = v.shape
    padded = cdiv(seqlen_k, pad_to) * pad_to
    vt = torch.empty((batch, nheads_k, d, padded), dtype=v.dtype, device=v.device)
    block_k = 64
    grid = (cdiv(padded, block_k), batch * nheads_k)
    tail = (v.stride(0), v.stride(1), v.stride(2), vt.stride(0), vt.stride(1), vt.stride(2),
            nheads_k, seqlen_k, padded)
    entry = launch(_keys_minor, grid, *_as_bytes(v, vt), *tail, D=d,
                   BLOCK_D=triton.next_power_of_2(d), BLOCK_K=block_k, GROUP_ORDER=group_order,
                   num_warps=4)
    return vt, None if entry is None else (entry, grid3(grid), vt.shape, tail)


def replay_keys_minor(record, v: torch.Tensor, device: int) -> torch.Tensor:
    """The copy ``record`` (from ``keys_minor_recorded``) made of this V, which has the recorded
    V's shape, strides, dtype and alignment (a call plan's key): one launch."""
    entry, grid, shape, tail = record
    vt = torch.empty(shape, dtype=v.dtype, device=v.device)
    entry(grid, (*_as_bytes(v, vt), *tail), device)
    return vt


def _as_bytes(v, vt):
    """8-bit values moved as bytes (the kernel only copies them)."""
    return (v.view(torch.uint8), vt.view(torch.uint8)) if v.element_size() == 1 else (v, vt)
