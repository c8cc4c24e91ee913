"""Public attention functions: validation, layout and stride handling, dispatch to the ops.

Layouts follow the library each function imitates. Strides are honoured: a tensor is copied only
when its last dimension is not contiguous (the kernels need unit stride there), which is the one
documented copy.
"""

from __future__ import annotations

import torch

from flashtriton.configs import make_params
from flashtriton.kernels.dropout import draw_seed
from flashtriton.ops import attention

_DTYPES = (torch.float16, torch.bfloat16, torch.float32)


# ----------------------------------------------------------------------------- validation
def _check_tensor(name, t, ndim, dtypes=_DTYPES):
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name}: expected a torch.Tensor, got {type(t).__name__}")
    if t.dim() != ndim:
        raise ValueError(f"{name}: expected a {ndim}-D tensor, got shape {tuple(t.shape)}")
    if t.dtype not in dtypes:
        names = ", ".join(str(d).replace("torch.", "") for d in dtypes)
        raise TypeError(f"{name}: dtype {t.dtype} is not supported; expected one of {names}")


def _check_head_dim(name, d):
    if not (8 <= d <= 256 and d % 8 == 0):
        raise ValueError(f"{name}: head dim {d} is not supported; expected a multiple of 8 in "
                         "8..256")


def _check_qkv(q, k, v, ndim, names=("q", "k", "v"), dtypes=_DTYPES):
    """Checks shared by all layouts once in flash order: seq dim -3, heads -2, headdim -1."""
    for name, t in zip(names, (q, k, v)):
        _check_tensor(name, t, ndim, dtypes)
    if not (q.dtype == k.dtype == v.dtype):
        raise TypeError(f"q, k, v must share a dtype; got {q.dtype}, {k.dtype}, {v.dtype}")
    if not (q.device == k.device == v.device):
        raise ValueError(f"q, k, v must be on one device; got {q.device}, {k.device}, {v.device}")
    if k.shape[:-1] != v.shape[:-1]:
        raise ValueError(f"k and v must agree in all but the head dim; got {tuple(k.shape)} and "
                         f"{tuple(v.shape)}")
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"q and k head dims differ: {q.shape[-1]} vs {k.shape[-1]}")
    _check_head_dim("q", q.shape[-1])
    _check_head_dim("v", v.shape[-1])
    nheads, nheads_k = q.shape[-2], k.shape[-2]
    if nheads_k == 0 or nheads % nheads_k != 0:
        raise ValueError(f"nheads ({nheads}) must be a multiple of nheads_k ({nheads_k})")


def _check_options(dropout_p, window_size, softcap, softmax_scale):
    if not isinstance(dropout_p, (int, float)) or not 0.0 <= dropout_p < 1.0:
        raise ValueError(f"dropout_p: expected a float in [0, 1), got {dropout_p!r}")
    if (not isinstance(window_size, (tuple, list)) or len(window_size) != 2
            or any(not isinstance(w, int) or w < -1 for w in window_size)):
        raise ValueError(f"window_size: expected (left, right) ints >= -1, got {window_size!r}")
    if not isinstance(softcap, (int, float)) or softcap < 0:
        raise ValueError(f"softcap: expected a float >= 0, got {softcap!r}")
    if softmax_scale is not None and not isinstance(softmax_scale, (int, float)):
        raise TypeError(f"softmax_scale: expected a float or None, got {type(softmax_scale).__name__}")


def _check_alibi(alibi_slopes, batch, nheads, device):
    if alibi_slopes is None:
        return None
    if not isinstance(alibi_slopes, torch.Tensor):
        raise TypeError("alibi_slopes: expected a torch.Tensor of shape (nheads,) or (batch, nheads)")
    if alibi_slopes.dtype != torch.float32:
        raise TypeError(f"alibi_slopes: expected float32, got {alibi_slopes.dtype}")
    if tuple(alibi_slopes.shape) not in ((nheads,), (batch, nheads)):
        raise ValueError(f"alibi_slopes: expected shape ({nheads},) or ({batch}, {nheads}), got "
                         f"{tuple(alibi_slopes.shape)}")
    if alibi_slopes.device != device:
        raise ValueError(f"alibi_slopes: on {alibi_slopes.device}, q is on {device}")
    return alibi_slopes.contiguous()


def _unit_last(t):
    """The kernels need a contiguous last dim; any other stride pattern is used as is."""
    return t if t.stride(-1) == 1 else t.contiguous()


def _allow_tf32(dtype):
    return dtype == torch.float32 and torch.backends.cuda.matmul.allow_tf32


def _fp8_descale(q, k, v, q_descale, k_descale, v_descale, dropout_p):
    """float8_e4m3fn inputs: checks, and the (q, k, v) descales as one float32 device tensor.
    Returns None for 16/32-bit inputs (where descales must not be given)."""
    descales = (("q_descale", q_descale), ("k_descale", k_descale), ("v_descale", v_descale))
    if q.dtype != torch.float8_e4m3fn:
        for name, d in descales:
            if d is not None:
                raise ValueError(f"{name}: descales apply to float8_e4m3fn inputs only (q is {q.dtype})")
        return None
    if any(t.requires_grad for t in (q, k, v)):
        raise NotImplementedError("float8 attention is forward only in flashtriton: no backward")
    if dropout_p > 0:
        raise NotImplementedError("dropout_p > 0 with float8 inputs is not built in flashtriton")
    values = []
    for name, d in descales:
        if d is None:
            values.append(torch.ones(1, device=q.device))
            continue
        if not isinstance(d, torch.Tensor) or d.dtype != torch.float32 or d.numel() != 1:
            raise TypeError(f"{name}: expected a float32 tensor with one element (per-tensor descale)")
        if d.device != q.device:
            raise ValueError(f"{name}: on {d.device}, q is on {q.device}")
        values.append(d if d.dim() == 1 else d.reshape(1))  # (a reshape costs µs a call)
    return torch.cat(values)


def _deterministic(requested) -> bool:
    """The backward's choice: the user's flag, or torch.use_deterministic_algorithms(True)."""
    if not isinstance(requested, bool):
        raise TypeError(f"deterministic: expected a bool, got {type(requested).__name__}")
    return requested or torch.are_deterministic_algorithms_enabled()


def _seed(dropout_p, device):
    return draw_seed(device) if dropout_p > 0 else None


# ----------------------------------------------------------------------------- flash-attn API
def flash_attn_func(q, k, v, dropout_p=0.0, softmax_scale=None, causal=False,
                    window_size=(-1, -1), softcap=0.0, alibi_slopes=None, deterministic=False,
                    return_attn_probs=False, *, q_descale=None, k_descale=None, v_descale=None):
    """Exact attention, flash-attn's interface.

    q: (batch, seqlen_q, nheads, headdim); k, v: (batch, seqlen_k, nheads_k, headdim[_v]), with
    nheads a multiple of nheads_k (GQA/MQA). Causal is aligned bottom-right (query i sees key j
    iff j <= i + seqlen_k - seqlen_q). ``window_size=(left, right)``: -1 is unlimited.
    ``softcap > 0`` computes ``softcap * tanh(s / softcap)``; ``alibi_slopes`` (nheads,) or
    (batch, nheads), float32, adds ``-slope * |j - (i + seqlen_k - seqlen_q)|``. The backward
    adds dQ with float32 atomics (fastest; the summation order varies from run to run);
    ``deterministic=True`` (or ``torch.use_deterministic_algorithms(True)``) computes dQ in a
    separate pass instead: bitwise reproducible, slower. ``dropout_p > 0`` drops
    probabilities with a counter-based mask drawn from torch's generator for q's device
    (``torch.manual_seed`` makes it reproducible; the backward regenerates the same mask).
    float8_e4m3fn q/k/v (forward only, Hopper tensor cores on sm_90): ``q_descale``, ``k_descale``,
    ``v_descale`` are per-tensor float32 descales (one element each, default 1); the output is
    bfloat16.
    Returns out (batch, seqlen_q, nheads, headdim_v), or (out, softmax_lse, None) when
    ``return_attn_probs`` (lse float32 (batch, nheads, seqlen_q); the probabilities themselves are
    not returned).
    """
    _check_qkv(q, k, v, 4, dtypes=_DTYPES + (torch.float8_e4m3fn,))
    if q.shape[0] != k.shape[0]:
        raise ValueError(f"batch sizes differ: q has {q.shape[0]}, k has {k.shape[0]}")
    if q.shape[1] == 0 or k.shape[1] == 0:
        raise ValueError(f"seqlen must be >= 1; got seqlen_q={q.shape[1]}, seqlen_k={k.shape[1]}")
    _check_options(dropout_p, window_size, softcap, softmax_scale)
    descale = _fp8_descale(q, k, v, q_descale, k_descale, v_descale, dropout_p)
    slopes = _check_alibi(alibi_slopes, q.shape[0], q.shape[2], q.device)
    params = make_params(q.shape[-1], softmax_scale, causal, window_size, True, softcap,
                         _allow_tf32(q.dtype))
    out, lse = attention(_unit_last(q), _unit_last(k), _unit_last(v), None, slopes, None, None,
                           q.shape[1], k.shape[1], params.softmax_scale, params.window_left,
                           params.window_right, True, params.softcap, params.allow_tf32,
                           float(dropout_p), _deterministic(deterministic),
                           _seed(dropout_p, q.device), descale)
    return (out, lse, None) if return_attn_probs else out


def flash_attn_varlen_func(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                           dropout_p=0.0, softmax_scale=None, causal=False, window_size=(-1, -1),
                           softcap=0.0, alibi_slopes=None, deterministic=False,
                           return_attn_probs=False):
    """Attention over packed variable-length sequences, flash-attn's interface.

    q: (total_q, nheads, headdim); k, v: (total_k, nheads_k, headdim[_v]); ``cu_seqlens_*``:
    int32 (batch + 1,) cumulative offsets starting at 0; sequences of length 0 are allowed.
    Causal/window/ALiBi align bottom-right per sequence. lse is (nheads, total_q).
    """
    _check_qkv(q, k, v, 3)
    for name, cu in (("cu_seqlens_q", cu_seqlens_q), ("cu_seqlens_k", cu_seqlens_k)):
        if not isinstance(cu, torch.Tensor) or cu.dtype != torch.int32 or cu.dim() != 1:
            raise TypeError(f"{name}: expected a 1-D int32 tensor")
        if cu.device != q.device:
            raise ValueError(f"{name}: on {cu.device}, q is on {q.device}")
    if cu_seqlens_q.numel() != cu_seqlens_k.numel() or cu_seqlens_q.numel() < 2:
        raise ValueError("cu_seqlens_q and cu_seqlens_k must both have batch + 1 >= 2 entries")
    for name, m in (("max_seqlen_q", max_seqlen_q), ("max_seqlen_k", max_seqlen_k)):
        if not isinstance(m, int) or m < 0:
            raise ValueError(f"{name}: expected an int >= 0, got {m!r}")
    _check_options(dropout_p, window_size, softcap, softmax_scale)
    batch = cu_seqlens_q.numel() - 1
    slopes = _check_alibi(alibi_slopes, batch, q.shape[1], q.device)
    params = make_params(q.shape[-1], softmax_scale, causal, window_size, True, softcap,
                         _allow_tf32(q.dtype))
    out, lse = attention(_unit_last(q), _unit_last(k), _unit_last(v), None, slopes,
                           cu_seqlens_q.contiguous(), cu_seqlens_k.contiguous(),
                           max_seqlen_q, max_seqlen_k, params.softmax_scale, params.window_left,
                           params.window_right, True, params.softcap, params.allow_tf32,
                           float(dropout_p), _deterministic(deterministic),
                           _seed(dropout_p, q.device), None)
    return (out, lse, None) if return_attn_probs else out


# ----------------------------------------------------------------------------- SDPA drop-in
def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0,
                                 is_causal=False, scale=None, enable_gqa=False):
    """Drop-in for ``torch.nn.functional.scaled_dot_product_attention``.

    (batch, heads, seq, dim) tensors; ``is_causal`` is aligned top-left, as in torch.
    ``attn_mask``: boolean (True takes part) or additive float, broadcastable to
    (batch, heads, seq_q, seq_k); it is read block by block in the kernels, never expanded in
    memory. A query row whose keys are all masked gets output 0 (torch may give NaN there).
    The backward is bitwise deterministic when ``torch.use_deterministic_algorithms(True)``.
    """
    for name, t in (("query", query), ("key", key), ("value", value)):
        _check_tensor(name, t, 4)
    _check_qkv(query.transpose(1, 2), key.transpose(1, 2), value.transpose(1, 2), 4,
               ("query", "key", "value"))
    batch, nheads, seqlen_q, _ = query.shape
    nheads_k, seqlen_k = key.shape[1], key.shape[2]
    if key.shape[0] != batch:
        raise ValueError(f"batch sizes differ: query has {batch}, key has {key.shape[0]}")
    if nheads_k != nheads and not enable_gqa:
        raise ValueError(f"query has {nheads} heads and key {nheads_k}: pass enable_gqa=True for "
                         "grouped-query attention")
    if seqlen_q == 0 or seqlen_k == 0:
        raise ValueError(f"seq lengths must be >= 1; got {seqlen_q} and {seqlen_k}")
    if is_causal and attn_mask is not None:
        raise ValueError("attn_mask and is_causal cannot both be set (torch's rule)")
    _check_options(dropout_p, (-1, -1), 0.0, scale)
    mask = None
    if attn_mask is not None:
        if not isinstance(attn_mask, torch.Tensor):
            raise TypeError("attn_mask: expected a torch.Tensor or None")
        if attn_mask.dtype != torch.bool and not attn_mask.is_floating_point():
            raise TypeError(f"attn_mask: expected bool or a float dtype, got {attn_mask.dtype}")
        if attn_mask.device != query.device:
            raise ValueError(f"attn_mask: on {attn_mask.device}, query is on {query.device}")
        if attn_mask.requires_grad:
            raise NotImplementedError("attn_mask.requires_grad: gradients with respect to the "
                                      "mask are not built in flashtriton")
        try:
            mask = attn_mask.expand(batch, nheads, seqlen_q, seqlen_k)
        except RuntimeError as exc:
            raise ValueError(f"attn_mask: shape {tuple(attn_mask.shape)} does not broadcast to "
                             f"{(batch, nheads, seqlen_q, seqlen_k)}") from exc
    params = make_params(query.shape[-1], scale, is_causal, (-1, -1), False, 0.0,
                         _allow_tf32(query.dtype))
    q, k, v = (_unit_last(t.transpose(1, 2)) for t in (query, key, value))
    out, _ = attention(q, k, v, mask, None, None, None, seqlen_q, seqlen_k,
                         params.softmax_scale, params.window_left, params.window_right, False,
                         0.0, params.allow_tf32, float(dropout_p), _deterministic(False),
                         _seed(dropout_p, query.device), None)
    return out.transpose(1, 2)
