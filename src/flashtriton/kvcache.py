"""``flash_attn_with_kvcache``: validation, layout handling and dispatch of KV-cache decoding.

Semantics follow flash-attn's function of the same name (forward only). The kernels are in
``kernels/decode.py``.
"""

from __future__ import annotations

import math
import operator

import torch

from flashtriton.ops import kvcache_attention

_DTYPES = (torch.float16, torch.bfloat16, torch.float32)


def _check_tensor(name: str, t, ndim: int) -> None:
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if t.dim() != ndim:
        raise ValueError(f"{name} must have {ndim} dimensions, got shape {tuple(t.shape)}")


def _check_head_dim(name: str, d: int) -> None:
    if not (8 <= d <= 256 and d % 8 == 0):
        raise ValueError(f"{name}: head dim must be a multiple of 8 in [8, 256], got {d}")


def _check_same(name: str, t: torch.Tensor, q: torch.Tensor, *, dtype: bool = True) -> None:
    if dtype and t.dtype != q.dtype:
        raise TypeError(f"{name} must have q's dtype {q.dtype}, got {t.dtype}")
    if t.device != q.device:
        raise ValueError(f"{name} must be on q's device {q.device}, got {t.device}")


def _cache_seqlens(cache_seqlens, batch: int, capacity: int, seqlen_new: int, q: torch.Tensor):
    """Normalise ``cache_seqlens`` to an int or an int32 tensor (batch,), and check the bound
    ``cache_seqlens + seqlen_new <= capacity`` wherever that costs no device synchronisation
    (ints and CPU tensors). On the GPU the kernels never write or read past the capacity."""
    if cache_seqlens is None:
        if seqlen_new > 0:
            raise ValueError("cache_seqlens is required when appending k/v to the cache "
                             "(None means the cache is full)")
        return capacity
    if isinstance(cache_seqlens, bool) or not isinstance(cache_seqlens, (int, torch.Tensor)):
        raise TypeError(f"cache_seqlens must be an int or an int32 tensor, "
                        f"got {type(cache_seqlens).__name__}")
    if isinstance(cache_seqlens, int):
        lengths = torch.tensor([cache_seqlens])
    else:
        if cache_seqlens.dtype != torch.int32:
            raise TypeError(f"cache_seqlens must be int32, got {cache_seqlens.dtype}")
        if tuple(cache_seqlens.shape) != (batch,):
            raise ValueError(f"cache_seqlens must have shape ({batch},), "
                             f"got {tuple(cache_seqlens.shape)}")
        _check_same("cache_seqlens", cache_seqlens, q, dtype=False)
        if cache_seqlens.device.type != "cpu" or torch.compiler.is_compiling():
            return cache_seqlens.contiguous()  # values unknown on the host (or while tracing)
        lengths = cache_seqlens
    if lengths.numel() and int(lengths.min()) < 0:
        raise ValueError(f"cache_seqlens must be >= 0, got {lengths.tolist()}")
    if lengths.numel() and int(lengths.max()) + seqlen_new > capacity:
        raise ValueError(f"cache too small: cache_seqlens ({int(lengths.max())}) + seqlen_new "
                         f"({seqlen_new}) > cache capacity ({capacity})")
    return cache_seqlens if isinstance(cache_seqlens, int) else cache_seqlens.contiguous()


def _check_block_table(block_table, batch: int, page_size: int, q: torch.Tensor) -> None:
    _check_tensor("block_table", block_table, 2)
    if block_table.dtype != torch.int32:
        raise TypeError(f"block_table must be int32, got {block_table.dtype}")
    if block_table.shape[0] != batch:
        raise ValueError(f"block_table must have shape ({batch}, max_blocks_per_seq), "
                         f"got {tuple(block_table.shape)}")
    _check_same("block_table", block_table, q, dtype=False)
    if page_size % 16 != 0 or page_size == 0:
        raise ValueError(f"k_cache: page size (dim 1 of a paged cache) must be a positive "
                         f"multiple of 16, got {page_size}")


def _check_block_ids(block_table: torch.Tensor, num_blocks: int, page_size: int,
                     cache_seqlens, seqlen_new: int) -> torch.Tensor:
    """Block ids of the pages in use must lie in [0, num_blocks) (checked on CPU only, where
    it costs no synchronisation). Returns the table with unit stride along its pages."""
    if block_table.device.type == "cpu" and block_table.numel() and not torch.compiler.is_compiling():
        # Only the pages a sequence uses must be valid; the rest may hold any padding value.
        seqlen_k = torch.as_tensor(cache_seqlens).to(torch.int64) + seqlen_new
        used = (torch.arange(block_table.shape[1])[None, :]
                < ((seqlen_k + page_size - 1) // page_size).reshape(-1, 1))
        bad = used & ((block_table < 0) | (block_table >= num_blocks))
        if bad.any():
            raise ValueError(f"block_table holds block ids outside [0, {num_blocks}) "
                             f"for pages in use")
    return block_table if block_table.stride(1) == 1 else block_table.contiguous()


def flash_attn_with_kvcache(q, k_cache, v_cache, k=None, v=None, cache_seqlens=None,
                            block_table=None, softmax_scale=None, causal=False,
                            window_size=(-1, -1), softcap=0.0, alibi_slopes=None,
                            num_splits=0, return_softmax_lse=False):
    """Attention of ``q`` over a KV cache, appending ``k``/``v`` to the cache in place first.

    Args:
        q: (batch, seqlen_q, nheads, headdim).
        k_cache, v_cache: (batch_cache, seqlen_cache, nheads_k, headdim[_v]) with
            batch_cache >= batch (sequence b uses row b), or paged (num_blocks, page_size,
            nheads_k, headdim[_v]) when ``block_table`` is given; page_size a multiple of 16.
        k, v: optional (batch, seqlen_new, nheads_k, headdim[_v]), written into the cache at
            positions ``cache_seqlens[b] ... cache_seqlens[b] + seqlen_new - 1``.
        cache_seqlens: int or int32 tensor (batch,): cache length of each sequence before the
            append; None means the whole cache (then k/v cannot be given). Attention covers
            ``cache_seqlens + seqlen_new`` keys. The bound against the cache size is checked for
            ints and CPU tensors; a GPU tensor is not read on the host (that would synchronise),
            and the kernels never access the cache past its size.
        block_table: int32 (batch, max_blocks_per_seq) for a paged cache.
        softmax_scale: default 1 / sqrt(headdim).
        causal: bottom-right aligned: query i sees key j iff j <= i + seqlen_k - seqlen_q.
        window_size: (left, right), -1 for unbounded; causal sets right to 0.
        softcap: > 0 applies ``softcap * tanh(s / softcap)`` to the scaled scores.
        alibi_slopes: float (nheads,) or (batch, nheads); bias -slope * |j - (i + seqlen_k -
            seqlen_q)|.
        num_splits: split-KV programs per (sequence, kv head); 0 chooses from the occupancy.
        return_softmax_lse: also return the float32 lse (batch, nheads, seqlen_q).

    Returns:
        out (batch, seqlen_q, nheads, headdim_v), or (out, softmax_lse). A query row that sees
        no key gets output 0 and lse -inf.
    """
    _check_tensor("q", q, 4)
    _check_tensor("k_cache", k_cache, 4)
    _check_tensor("v_cache", v_cache, 4)
    if q.dtype not in _DTYPES:
        raise TypeError(f"q must be float16, bfloat16 or float32, got {q.dtype}")
    _check_same("k_cache", k_cache, q)
    _check_same("v_cache", v_cache, q)
    batch, seqlen_q, nheads, head_dim = q.shape
    _check_head_dim("q", head_dim)
    _check_head_dim("v_cache", v_cache.shape[3])
    if k_cache.shape[3] != head_dim:
        raise ValueError(f"k_cache head dim {k_cache.shape[3]} must equal q's {head_dim}")
    if tuple(v_cache.shape[:3]) != tuple(k_cache.shape[:3]):
        raise ValueError(f"v_cache shape {tuple(v_cache.shape)} must match k_cache "
                         f"{tuple(k_cache.shape)} in all but the last dim")
    nheads_k = k_cache.shape[2]
    if nheads_k == 0 or nheads % nheads_k != 0:
        raise ValueError(f"q's nheads ({nheads}) must be a multiple of k_cache's nheads_k "
                         f"({nheads_k})")
    head_dim_v = v_cache.shape[3]

    seqlen_new = 0
    if (k is None) != (v is None):
        raise ValueError("k and v must be given together (or neither)")
    if k is not None:
        _check_tensor("k", k, 4)
        _check_tensor("v", v, 4)
        _check_same("k", k, q)
        _check_same("v", v, q)
        seqlen_new = k.shape[1]
        if tuple(k.shape) != (batch, seqlen_new, nheads_k, head_dim):
            raise ValueError(f"k must have shape {(batch, seqlen_new, nheads_k, head_dim)}, "
                             f"got {tuple(k.shape)}")
        if tuple(v.shape) != (batch, seqlen_new, nheads_k, head_dim_v):
            raise ValueError(f"v must have shape {(batch, seqlen_new, nheads_k, head_dim_v)}, "
                             f"got {tuple(v.shape)}")

    if block_table is not None:
        _check_block_table(block_table, batch, k_cache.shape[1], q)
        capacity = block_table.shape[1] * k_cache.shape[1]
    else:
        capacity = k_cache.shape[1]
        if k_cache.shape[0] < batch:
            raise ValueError(f"k_cache batch ({k_cache.shape[0]}) must be >= q's batch ({batch})")
    cache_seqlens = _cache_seqlens(cache_seqlens, batch, capacity, seqlen_new, q)
    if block_table is not None:
        block_table = _check_block_ids(block_table, k_cache.shape[0], k_cache.shape[1],
                                       cache_seqlens, seqlen_new)

    if softmax_scale is None:
        softmax_scale = 1.0 / math.sqrt(head_dim)
    try:
        left, right = (operator.index(w) for w in window_size)
    except (TypeError, ValueError):
        raise TypeError(f"window_size must be a pair of ints, got {window_size!r}") from None
    left, right = (w if w >= 0 else -1 for w in (left, right))
    if causal:
        right = 0 if right < 0 else min(right, 0)
    if softcap < 0:
        raise ValueError(f"softcap must be >= 0, got {softcap}")
    if alibi_slopes is not None:
        if not isinstance(alibi_slopes, torch.Tensor):
            raise TypeError(f"alibi_slopes must be a tensor, got {type(alibi_slopes).__name__}")
        if tuple(alibi_slopes.shape) not in ((nheads,), (batch, nheads)):
            raise ValueError(f"alibi_slopes must have shape ({nheads},) or ({batch}, {nheads}), "
                             f"got {tuple(alibi_slopes.shape)}")
        if not alibi_slopes.is_floating_point():
            raise TypeError(f"alibi_slopes must be floating point, got {alibi_slopes.dtype}")
        _check_same("alibi_slopes", alibi_slopes, q, dtype=False)
        alibi_slopes = alibi_slopes.to(torch.float32).contiguous()
    if isinstance(num_splits, bool) or not isinstance(num_splits, int):
        raise TypeError(f"num_splits must be an int, got {type(num_splits).__name__}")
    if num_splits < 0:
        raise ValueError(f"num_splits must be >= 0 (0 = automatic), got {num_splits}")

    per_seq = isinstance(cache_seqlens, torch.Tensor)
    out, lse = kvcache_attention(q, k_cache, v_cache, k, v, cache_seqlens if per_seq else None,
                                 0 if per_seq else int(cache_seqlens), block_table, alibi_slopes,
                                 float(softmax_scale), left, right, float(softcap), num_splits)
    return (out, lse) if return_softmax_lse else out
