"""torch.library custom ops for the forward and backward, with fake (meta) kernels and autograd,
so that autograd and ``torch.compile(fullgraph=True)`` see one opaque op each way.

Options travel as plain scalars (the op schema allows no dataclasses); ``_params`` rebuilds the
frozen ``AttnParams`` for the launchers.

``attention`` is the entry point: under ``torch.compile`` it is the custom op; in eager mode it
is a plain ``torch.autograd.Function`` around the same launchers, because the custom op's Python
dispatch (schema defaults, redispatch, the autograd wrapper) costs hundreds of microseconds a
call on the host, as much as the kernel itself at short sequence lengths.
"""

from __future__ import annotations

import functools
from typing import Optional

import torch
from torch import Tensor

from flashtriton.configs import AttnParams
from flashtriton.kernels.bwd import attn_bwd
from flashtriton.kernels.decode import attn_decode
from flashtriton.kernels.fwd import attn_fwd


@functools.lru_cache(maxsize=256)  # one frozen dataclass per option set, not one per call
def _params(softmax_scale, window_left, window_right, bottom_right, softcap, allow_tf32,
            dropout_p, deterministic):
    return AttnParams(softmax_scale=softmax_scale, window_left=window_left,
                      window_right=window_right, bottom_right=bottom_right, softcap=softcap,
                      allow_tf32=allow_tf32, dropout_p=dropout_p, deterministic=deterministic)


@torch.library.custom_op("flashtriton::attn_fwd", mutates_args=(), device_types=("cuda", "cpu"))
def attn_fwd_op(q: Tensor, k: Tensor, v: Tensor, attn_mask: Optional[Tensor],
                alibi_slopes: Optional[Tensor], cu_seqlens_q: Optional[Tensor],
                cu_seqlens_k: Optional[Tensor], max_seqlen_q: int, max_seqlen_k: int,
                softmax_scale: float, window_left: int, window_right: int, bottom_right: bool,
                softcap: float, allow_tf32: bool, dropout_p: float, deterministic: bool,
                seed: Optional[Tensor], descale: Optional[Tensor]) -> tuple[Tensor, Tensor]:
    return _fwd_impl(q, k, v, attn_mask, alibi_slopes, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                     max_seqlen_k, softmax_scale, window_left, window_right, bottom_right, softcap,
                     allow_tf32, dropout_p, deterministic, seed, descale)


def _fwd_impl(q, k, v, attn_mask, alibi_slopes, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
              max_seqlen_k, softmax_scale, window_left, window_right, bottom_right, softcap,
              allow_tf32, dropout_p, deterministic, seed, descale):
    params = _params(softmax_scale, window_left, window_right, bottom_right, softcap, allow_tf32,
                     dropout_p, deterministic)
    return attn_fwd(q, k, v, params, attn_mask=attn_mask, alibi_slopes=alibi_slopes,
                    cu_seqlens_q=cu_seqlens_q, cu_seqlens_k=cu_seqlens_k,
                    max_seqlen_q=max_seqlen_q, max_seqlen_k=max_seqlen_k, seed=seed,
                    descale=descale)


@attn_fwd_op.register_fake
def _(q, k, v, attn_mask, alibi_slopes, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
      softmax_scale, window_left, window_right, bottom_right, softcap, allow_tf32, dropout_p,
      deterministic, seed, descale):
    out_dtype = torch.bfloat16 if q.dtype == torch.float8_e4m3fn else q.dtype
    if cu_seqlens_q is not None:
        out = q.new_empty((q.shape[0], q.shape[1], v.shape[-1]), dtype=out_dtype)
        lse = q.new_empty((q.shape[1], q.shape[0]), dtype=torch.float32)
    else:
        out = q.new_empty((q.shape[0], q.shape[1], q.shape[2], v.shape[-1]), dtype=out_dtype)
        lse = q.new_empty((q.shape[0], q.shape[2], q.shape[1]), dtype=torch.float32)
    return out, lse


@torch.library.custom_op("flashtriton::attn_bwd", mutates_args=(), device_types=("cuda", "cpu"))
def attn_bwd_op(do: Tensor, q: Tensor, k: Tensor, v: Tensor, o: Tensor, lse: Tensor,
                dlse: Optional[Tensor], attn_mask: Optional[Tensor], alibi_slopes: Optional[Tensor],
                cu_seqlens_q: Optional[Tensor], cu_seqlens_k: Optional[Tensor],
                max_seqlen_q: int, max_seqlen_k: int, softmax_scale: float, window_left: int,
                window_right: int, bottom_right: bool, softcap: float,
                allow_tf32: bool, dropout_p: float, deterministic: bool,
                seed: Optional[Tensor]) -> tuple[Tensor, Tensor, Tensor]:
    return _bwd_impl(do, q, k, v, o, lse, dlse, attn_mask, alibi_slopes, cu_seqlens_q,
                     cu_seqlens_k, max_seqlen_q, max_seqlen_k, softmax_scale, window_left,
                     window_right, bottom_right, softcap, allow_tf32, dropout_p, deterministic,
                     seed)


def _bwd_impl(do, q, k, v, o, lse, dlse, attn_mask, alibi_slopes, cu_seqlens_q, cu_seqlens_k,
              max_seqlen_q, max_seqlen_k, softmax_scale, window_left, window_right, bottom_right,
              softcap, allow_tf32, dropout_p, deterministic, seed):
    params = _params(softmax_scale, window_left, window_right, bottom_right, softcap, allow_tf32,
                     dropout_p, deterministic)
    if do.stride(-1) != 1:
        do = do.contiguous()
    return attn_bwd(do, q, k, v, o, lse, params, dlse=dlse, attn_mask=attn_mask, alibi_slopes=alibi_slopes,
                    cu_seqlens_q=cu_seqlens_q, cu_seqlens_k=cu_seqlens_k,
                    max_seqlen_q=max_seqlen_q, max_seqlen_k=max_seqlen_k, seed=seed)


@attn_bwd_op.register_fake
def _(do, q, k, v, o, lse, dlse, attn_mask, alibi_slopes, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
      max_seqlen_k, softmax_scale, window_left, window_right, bottom_right, softcap, allow_tf32,
      dropout_p, deterministic, seed):
    # contiguous, like the launcher's buffers (strides must match the real op's)
    return q.new_empty(q.shape), k.new_empty(k.shape), v.new_empty(v.shape)


_FWD_ARGS = ("q", "k", "v", "attn_mask", "alibi_slopes", "cu_seqlens_q", "cu_seqlens_k",
             "max_seqlen_q", "max_seqlen_k", "softmax_scale", "window_left", "window_right",
             "bottom_right", "softcap", "allow_tf32", "dropout_p", "deterministic", "seed",
             "descale")


_SEED = _FWD_ARGS.index("seed")
_SCALARS = slice(_FWD_ARGS.index("max_seqlen_q"), _SEED)  # the backward's scalar arguments


def _setup_context(ctx, inputs, output):
    q, k, v, attn_mask, alibi_slopes, cu_q, cu_k = inputs[:_SCALARS.start]
    out, lse = output
    ctx.save_for_backward(q, k, v, out, lse, attn_mask, alibi_slopes, cu_q, cu_k, inputs[_SEED])
    ctx.scalars = inputs[_SCALARS]


def _grads(ctx, grad_out, grad_lse, bwd):
    """(dq, dk, dv) through ``bwd`` (the backward op, or its implementation in eager mode)."""
    q, k, v, out, lse, attn_mask, alibi_slopes, cu_q, cu_k, seed = ctx.saved_tensors
    if grad_out is None:  # only the lse was used
        grad_out = torch.zeros_like(out)
    # A gradient on the returned lse adds p * dlse to dS: folded into delta by the launcher.
    return bwd(grad_out, q, k, v, out, lse, grad_lse, attn_mask, alibi_slopes, cu_q, cu_k,
               *ctx.scalars, seed)


def _op_backward(ctx, grad_out, grad_lse):
    return _grads(ctx, grad_out, grad_lse, attn_bwd_op) + (None,) * (len(_FWD_ARGS) - 3)


attn_fwd_op.register_autograd(_op_backward, setup_context=_setup_context)


class _EagerAttention(torch.autograd.Function):
    """The same forward/backward as the custom ops, without their dispatch cost (eager mode).
    Only q, k and v go through ``apply`` as arguments (the others, which take no gradient, in
    one tuple): autograd's per-argument bookkeeping is part of the host cost of a call."""

    @staticmethod
    def forward(ctx, q, k, v, rest):
        ctx.set_materialize_grads(False)  # an unused lse sends None, not a tensor of zeros
        inputs = (q, k, v) + rest
        out, lse = _fwd_impl(*inputs)
        _setup_context(ctx, inputs, (out, lse))
        return out, lse

    @staticmethod
    def backward(ctx, grad_out, grad_lse):
        return _grads(ctx, grad_out, grad_lse, _bwd_impl) + (None,)


def attention(*args):
    """``(out, lse)``; arguments as ``attn_fwd_op``. The custom op under torch.compile (one opaque
    node, fake tensors for tracing), the autograd.Function otherwise."""
    if torch.compiler.is_compiling():
        return attn_fwd_op(*args)
    return _EagerAttention.apply(args[0], args[1], args[2], args[3:])


# ----------------------------------------------------------------------------- KV-cache decoding
@torch.library.custom_op("flashtriton::kvcache_fwd", mutates_args=("k_cache", "v_cache"),
                         device_types=("cuda", "cpu"))
def kvcache_fwd_op(q: Tensor, k_cache: Tensor, v_cache: Tensor, k: Optional[Tensor],
                   v: Optional[Tensor], cache_seqlens: Optional[Tensor], cache_seqlen: int,
                   block_table: Optional[Tensor], alibi_slopes: Optional[Tensor],
                   softmax_scale: float, window_left: int, window_right: int, softcap: float,
                   num_splits: int) -> tuple[Tensor, Tensor]:
    """Forward only: appends k/v into the caches in place (declared as mutated), then attends.
    ``cache_seqlens`` per sequence, or None and the one length ``cache_seqlen``."""
    return _kvcache_eager(q, k_cache, v_cache, k, v, cache_seqlens, cache_seqlen, block_table,
                          alibi_slopes, softmax_scale, window_left, window_right, softcap,
                          num_splits)


@kvcache_fwd_op.register_fake
def _(q, k_cache, v_cache, k, v, cache_seqlens, cache_seqlen, block_table, alibi_slopes,
      softmax_scale, window_left, window_right, softcap, num_splits):
    batch, seqlen_q, nheads, _ = q.shape
    out = q.new_empty((batch, seqlen_q, nheads, v_cache.shape[-1]))
    return out, q.new_empty((batch, nheads, seqlen_q), dtype=torch.float32)


def kvcache_attention(*args):
    """``(out, lse)``; arguments as ``kvcache_fwd_op``. The custom op under torch.compile, the
    launcher itself in eager mode (decoding is latency-bound: no dispatch layers)."""
    if torch.compiler.is_compiling():
        return kvcache_fwd_op(*args)
    return _kvcache_eager(*args)


def _kvcache_eager(q, k_cache, v_cache, k, v, cache_seqlens, cache_seqlen, block_table,
                   alibi_slopes, softmax_scale, window_left, window_right, softcap, num_splits):
    return attn_decode(q, k_cache, v_cache, k, v,
                       cache_seqlens if cache_seqlens is not None else cache_seqlen, block_table,
                       alibi_slopes, softmax_scale=softmax_scale,
                       window_size=(window_left, window_right), softcap=softcap,
                       num_splits=num_splits)
