"""Plain PyTorch attention: the truth that tests, the CLI and the benchmarks compare against.

Materialises the full score matrix, so it is for small and medium shapes only. It never imports
the kernels it checks. Layout is flash-attn's: q (batch, seqlen_q, nheads, headdim),
k/v (batch, seqlen_k, nheads_k, headdim[_v]).
"""

from __future__ import annotations

import math

import torch


def visible_mask(seqlen_q: int, seqlen_k: int, *, causal: bool, window_size=(-1, -1),
                 offset: int | None = None, device=None) -> torch.Tensor | None:
    """Boolean (seqlen_q, seqlen_k): query i sees key j. ``offset`` defaults to bottom-right
    alignment (``seqlen_k - seqlen_q``); the SDPA drop-in passes 0 (top-left). None = all visible."""
    left, right = window_size
    if causal:
        right = 0 if right < 0 else min(right, 0)
    if left < 0 and right < 0:
        return None
    if offset is None:
        offset = seqlen_k - seqlen_q
    i = torch.arange(seqlen_q, device=device)[:, None] + offset
    j = torch.arange(seqlen_k, device=device)[None, :]
    keep = torch.ones(seqlen_q, seqlen_k, dtype=torch.bool, device=device)
    if right >= 0:
        keep &= j <= i + right
    if left >= 0:
        keep &= j >= i - left
    return keep


def attention_ref(q, k, v, *, softmax_scale=None, causal=False, window_size=(-1, -1),
                  softcap=0.0, alibi_slopes=None, attn_mask=None, causal_offset=None,
                  dropout_mask=None, dropout_p=0.0, upcast=True):
    """Reference attention. Returns ``(out, lse)``: out in q's layout, lse (batch, nheads, seqlen_q)
    in float32 natural log. ``upcast=True`` computes in float64 (the truth); ``False`` computes in
    the input dtype, which measures what PyTorch itself loses at that precision.

    ``attn_mask``: boolean (True keeps) or additive float, broadcastable to (B, H, Sq, Sk).
    ``dropout_mask``: boolean (B, H, Sq, Sk), True keeps; kept probabilities scale by 1/(1-p).
    A query row that sees no key gets output 0 and lse -inf.
    """
    dtype = q.dtype
    work = torch.float64 if upcast else dtype
    batch, seqlen_q, nheads, d = q.shape
    seqlen_k, nheads_k = k.shape[1], k.shape[2]
    scale = 1.0 / math.sqrt(d) if softmax_scale is None else softmax_scale
    qh = q.to(work).transpose(1, 2)
    kh = k.to(work).transpose(1, 2)
    vh = v.to(work).transpose(1, 2)
    if nheads_k != nheads:
        kh = kh.repeat_interleave(nheads // nheads_k, dim=1)
        vh = vh.repeat_interleave(nheads // nheads_k, dim=1)
    s = torch.matmul(qh, kh.transpose(-1, -2)) * scale
    if softcap > 0:
        s = softcap * torch.tanh(s / softcap)
    offset = seqlen_k - seqlen_q if causal_offset is None else causal_offset
    if alibi_slopes is not None:
        slopes = alibi_slopes.to(work)
        slopes = slopes.view(1, nheads, 1, 1) if slopes.dim() == 1 else slopes.view(batch, nheads, 1, 1)
        i = torch.arange(seqlen_q, device=q.device)[:, None] + offset
        j = torch.arange(seqlen_k, device=q.device)[None, :]
        s = s - slopes * (j - i).abs().to(work)
    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            s = s.masked_fill(~attn_mask, float("-inf"))
        else:
            s = s + attn_mask.to(work)
    keep = visible_mask(seqlen_q, seqlen_k, causal=causal, window_size=window_size,
                        offset=offset, device=q.device)
    if keep is not None:
        s = s.masked_fill(~keep, float("-inf"))
    lse = torch.logsumexp(s, dim=-1)
    p = torch.exp(s - torch.where(torch.isinf(lse), 0.0, lse)[..., None])
    p = torch.where(torch.isinf(lse)[..., None], 0.0, p)
    if dropout_mask is not None:
        p = p * dropout_mask.to(work) / (1.0 - dropout_p)
    out = torch.matmul(p.to(work), vh)
    return out.transpose(1, 2).to(dtype), lse.float()


def sdpa_ref(query, key, value, attn_mask=None, is_causal=False, scale=None, enable_gqa=False,
             upcast=True):
    """torch's SDPA semantics in (batch, heads, seq, dim) layout, causal aligned top-left."""
    out, _ = attention_ref(query.transpose(1, 2), key.transpose(1, 2), value.transpose(1, 2),
                           softmax_scale=scale, causal=is_causal, attn_mask=attn_mask,
                           causal_offset=0, upcast=upcast)
    return out.transpose(1, 2)
