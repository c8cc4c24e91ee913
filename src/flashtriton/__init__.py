"""flashtriton: FlashAttention in Triton. Public API only (see README.md)."""

from flashtriton.interface import (
    flash_attn_func,
    flash_attn_varlen_func,
    scaled_dot_product_attention,
)
from flashtriton.kvcache import flash_attn_with_kvcache

__all__ = [
    "flash_attn_func",
    "flash_attn_varlen_func",
    "flash_attn_with_kvcache",
    "scaled_dot_product_attention",
]
__version__ = "0.1.0"
