"""Launch parameters: the attention options as one frozen dataclass, and the tuned block configs.

Every tuned entry says which benchmark run chose it. Users override a config through the
``config=`` argument of the launchers, never by editing these tables at run time.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

import torch

LOG2E = 1.4426950408889634


def is_interpreting() -> bool:
    """True when Triton kernels run under the CPU interpreter (``TRITON_INTERPRET=1``)."""
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


@dataclass(frozen=True)
class AttnParams:
    """What the kernels need to know besides the tensors.

    Query i sees key j iff ``i + shift - window_left <= j <= i + shift + window_right`` (a side
    is unlimited when its window is -1), where ``shift = seqlen_k - seqlen_q`` when
    ``bottom_right`` (flash-attn's alignment, per sequence for varlen) else 0 (torch SDPA's).
    Causal is ``window_right = 0``.
    """

    softmax_scale: float
    window_left: int = -1
    window_right: int = -1
    bottom_right: bool = True
    softcap: float = 0.0
    allow_tf32: bool = False
    shift_extra: int = 0
    dropout_p: float = 0.0
    deterministic: bool = False  # backward: dQ by its own kernel instead of atomic adds

    @property
    def has_left(self) -> bool:
        return self.window_left >= 0

    @property
    def has_right(self) -> bool:
        return self.window_right >= 0

    @property
    def qk_scale_log2(self) -> float:
        """Multiplier from raw q·k to the kernels' score: log2 units, or tanh's argument."""
        if self.softcap > 0:
            return self.softmax_scale / self.softcap
        return self.softmax_scale * LOG2E

    @property
    def softcap_log2(self) -> float:
        return self.softcap * LOG2E

    @property
    def scale_ds(self) -> float:
        """dS (natural units) to dQ/dK multiplier."""
        return self.softmax_scale


def make_params(head_dim: int, softmax_scale=None, causal=False, window_size=(-1, -1),
                bottom_right=True, softcap=0.0, allow_tf32=False, dropout_p=0.0,
                deterministic=False) -> AttnParams:
    left, right = (int(window_size[0]), int(window_size[1]))
    if causal:
        right = 0 if right < 0 else min(right, 0)
    scale = 1.0 / math.sqrt(head_dim) if softmax_scale is None else float(softmax_scale)
    return AttnParams(softmax_scale=scale, window_left=left, window_right=right,
                      bottom_right=bottom_right, softcap=float(softcap), allow_tf32=allow_tf32,
                      dropout_p=float(dropout_p), deterministic=bool(deterministic))


@dataclass(frozen=True)
class KernelConfig:
    block_m: int
    block_n: int
    num_warps: int
    num_stages: int
    tma: bool = True  # tensor-descriptor loads where the layout allows
    warp_specialize: bool = False  # tl.range(..., warp_specialize=True) on the unmasked loop
    dq_tma: bool = False  # backward, atomic dQ: tensor-descriptor reduce-add instead of red.add


# Tuned on the H200 (bf16, batch*seqlen 16k tokens, heads*headdim 2048, seqlen 16384), keyed by
# (head-dim bucket, causal). Source: bench/results/2026-11-29-tune-tma.json (forward; tensor
# descriptors beat pointer loads: 531 vs 486 TFLOP/s at d128) and 2026-11-29-tune-d128-initial.json
# (backward d128: pointer loads 385 vs 362 with descriptors). d256 entries are untuned first choices
# that fit shared memory (checked by the GPU test suite, not timed).
_FWD = {
    (64, False): KernelConfig(128, 128, 4, 3),   # 424 TFLOP/s
    (64, True): KernelConfig(128, 128, 4, 3),    # 404
    (128, False): KernelConfig(128, 64, 4, 2),   # 531
    (128, True): KernelConfig(128, 128, 8, 3),   # 485
    (256, False): KernelConfig(128, 32, 8, 2),
    (256, True): KernelConfig(128, 32, 8, 2),
}
_FWD_FP32 = KernelConfig(64, 32, 4, 2, tma=False)  # fp32 tiles are twice the bytes; untuned
_BWD_DETERMINISTIC = {
    (64, False): KernelConfig(64, 64, 4, 3),              # 359 (descriptors)
    (64, True): KernelConfig(64, 64, 4, 3),               # 357
    (128, False): KernelConfig(64, 64, 4, 2, tma=False),  # 385 (pointer loads)
    (128, True): KernelConfig(64, 64, 4, 2, tma=False),   # 373
    (256, False): KernelConfig(32, 32, 4, 1, tma=False),
    (256, True): KernelConfig(32, 32, 4, 1, tma=False),
}
# The default backward (one dK/dV kernel with atomic dQ): first choices, to be tuned.
_BWD = {
    (64, False): KernelConfig(64, 128, 8, 2),
    (64, True): KernelConfig(64, 128, 8, 2),
    (128, False): KernelConfig(64, 128, 8, 2, tma=False),
    (128, True): KernelConfig(64, 128, 8, 2, tma=False),
    (256, False): KernelConfig(32, 64, 4, 1, tma=False),
    (256, True): KernelConfig(32, 64, 4, 1, tma=False),
}
# Small tiles under the interpreter: each program is simulated element by element on the CPU.
_INTERPRET = KernelConfig(16, 16, 4, 1)


def _bucket(head_dim: int) -> int:
    return 64 if head_dim <= 64 else (128 if head_dim <= 128 else 256)


def tuned_fwd_config(dtype: torch.dtype, head_dim: int, causal: bool) -> KernelConfig:
    """The GPU forward config, whatever the process runs on (the analysis tools model the GPU)."""
    if dtype == torch.float32:
        return _FWD_FP32
    return _FWD[(_bucket(head_dim), bool(causal))]


def fwd_config(dtype: torch.dtype, head_dim: int, causal: bool) -> KernelConfig:
    """The config a forward launch uses: the tuned one, or small tiles under the interpreter."""
    if is_interpreting():
        return _INTERPRET
    return tuned_fwd_config(dtype, head_dim, causal)


def bwd_config(dtype: torch.dtype, head_dim: int, causal: bool,
               deterministic: bool = False) -> KernelConfig:
    """The backward config: ``deterministic`` selects the two-kernel (dK/dV + dQ) tables."""
    if is_interpreting():
        return _INTERPRET
    if dtype == torch.float32:
        return KernelConfig(32, 32, 4, 1, tma=False)
    table = _BWD_DETERMINISTIC if deterministic else _BWD
    return table[(_bucket(head_dim), bool(causal))]
