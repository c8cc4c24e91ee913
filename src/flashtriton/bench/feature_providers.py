"""The providers of `flashtriton bench --feature ...`: for each feature, flashtriton and the peers that
offer it, in one registry per feature (:data:`FEATURE_PROVIDERS`). features.py runs them.

A setup has providers.py's shape, ``setup(problem, inputs) -> Runner``, where ``problem`` is a
``features.FeatureProblem`` and ``inputs`` the shared tensors in its ``input_shape`` (flash-attn
layout; varlen: one packed sequence (1, total, heads, headdim)). It returns a :class:`FeatureRunner`,
which maps the provider's tensors back to that layout for the correctness gate. Explicit masks and
block masks are built in the setup, so they are neither timed nor counted in peak memory (they are
resident before the call); what the call itself allocates from them is (e.g. SDPA converting a
boolean mask to an additive one).

The FlexAttention masks and score mods are module functions, so that tests can check them against
the reference without a GPU.

float8: flashtriton's provider quantizes the shared inputs per tensor to float8_e4m3fn in its setup
(:class:`Float8Inputs`, not timed) and names them in its runner (``FeatureRunner.quantized``), so
that the gate checks it against the reference on the dequantized values. Its peers run on the bf16
inputs: flashtriton's plain path and SDPA's cuDNN backend. All three are forward only, on inputs that
do not require grad (no autograd bookkeeping in any of the timed calls).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Callable

import torch

from flashtriton.bench.providers import (DTYPE_NAMES, Inputs, Provider, Runner, Unsupported, _leaves,
                                         compiled_flex)

# An explicit mask given to SDPA is converted to an additive mask in the query's dtype: refuse those
# whose additive form would pass 4 GiB (ALiBi's (heads, s, s) bias at s = 16384 would take 8 GiB).
MASK_BUDGET_BYTES = 4 << 30
# SDPA's padded batch is as wide as the longest document rounded up to this (the mem-efficient
# kernel wants mask rows aligned to 16 elements and would otherwise pad the mask on every call).
PAD_MULTIPLE = 16


FP8 = torch.float8_e4m3fn
FLOAT8_DESCALE = "per-tensor amax/448"  # 448: e4m3fn's largest finite value


def quantize_float8(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``x`` scaled into e4m3's range and rounded once (from float32): ``(x8, descale)`` with
    ``x ≈ x8 · descale``, descale = amax|x| / 448 as a float32 tensor of one element."""
    amax = x.abs().amax().float().clamp_min(torch.finfo(torch.float32).tiny)
    descale = (amax / torch.finfo(FP8).max).reshape(1)
    return (x.float() / descale).to(FP8), descale


@dataclass
class Float8Inputs:
    """q, k, v quantized per tensor (:func:`quantize_float8`) with their descales."""
    q: torch.Tensor
    k: torch.Tensor
    v: torch.Tensor
    descales: tuple[torch.Tensor, torch.Tensor, torch.Tensor]  # q, k, v: float32, one element each

    @classmethod
    def quantize(cls, inputs: Inputs) -> "Float8Inputs":
        (q, dq), (k, dk), (v, dv) = (quantize_float8(t) for t in (inputs.q, inputs.k, inputs.v))
        return cls(q, k, v, (dq, dk, dv))

    def dequantized(self, select=lambda t: t) -> tuple[torch.Tensor, ...]:
        """``select`` of q, k, v (e.g. one head's slice) as x8 · descale in float64 (exact)."""
        return tuple(select(x).to(torch.float64) * d.to(torch.float64)
                     for x, d in zip((self.q, self.k, self.v), self.descales))


@dataclass
class FeatureRunner(Runner):
    """A Runner whose tensors are seen in the shared inputs' layout through ``canonical`` (e.g.
    SDPA's padded batch gathered back to the packed documents), and whose correctness is checked on
    ``twin`` when its own output is random (dropout: the same call with ``dropout_p = 0``).
    ``quantized``: the float8 copies of the inputs the provider computes on, when it does; the gate's
    reference is then computed on their dequantized values instead of the shared inputs."""
    canonical: Callable[[torch.Tensor], torch.Tensor] | None = None
    twin: Runner | None = None
    quantized: Float8Inputs | None = None

    def to_bshd(self, t: torch.Tensor) -> torch.Tensor:
        return self.canonical(t) if self.canonical is not None else super().to_bshd(t)


FEATURE_PROVIDERS: dict[str, dict[str, Provider]] = {}


def register(feature: str, name: str, label: str, *, needs_cuda: bool = False):
    """Add a provider to ``FEATURE_PROVIDERS[feature]`` (tests register theirs in a copy)."""
    def wrap(setup):
        FEATURE_PROVIDERS.setdefault(feature, {})[name] = Provider(name, label, setup,
                                                                   needs_cuda=needs_cuda)
        return setup
    return wrap


def _runner(forward, leaves, dout, layout, **kw) -> FeatureRunner:
    return FeatureRunner(forward=forward, leaves=leaves, dout=dout, layout=layout, **kw)


def _check_mask_budget(elements: int, dtype: torch.dtype) -> None:
    size = elements * torch.finfo(dtype).bits // 8
    if size > MASK_BUDGET_BYTES:
        raise Unsupported(f"explicit mask of {elements} entries would take {size >> 20} MiB in "
                          f"{DTYPE_NAMES[dtype]}, over the {MASK_BUDGET_BYTES >> 20} MiB budget")


def alibi_slopes(heads: int, device=None) -> torch.Tensor:
    """The ALiBi paper's slopes, 2^(-8(h+1)/heads), float32 (heads,)."""
    return torch.tensor([2.0 ** (-8.0 * (h + 1) / heads) for h in range(heads)],
                        dtype=torch.float32, device=device)


def packing(problem):
    """cu_seqlens (int32), and each packed token's document and position in it."""
    device = problem.device
    lengths = torch.tensor(problem.doc_lengths, device=device)
    cu = torch.zeros(len(lengths) + 1, dtype=torch.int32, device=device)
    cu[1:] = lengths.cumsum(0)
    doc = torch.repeat_interleave(torch.arange(len(lengths), device=device), lengths)
    pos = torch.arange(int(cu[-1]), device=device) - cu[:-1].long()[doc]
    return cu, doc, pos


# ----------------------------------------------------------------------------- flex mods
def causal_mask_mod(b, h, q_idx, kv_idx):
    return q_idx >= kv_idx


def window_mask_mod(window: int):
    def mask_mod(b, h, q_idx, kv_idx):
        return (q_idx >= kv_idx) & (q_idx - kv_idx <= window)
    return mask_mod


def document_mask_mod(doc_id: torch.Tensor, causal: bool):
    """Query and key in the same document (``doc_id``: the document of each packed token)."""
    def mask_mod(b, h, q_idx, kv_idx):
        same = doc_id[q_idx] == doc_id[kv_idx]
        return same & (q_idx >= kv_idx) if causal else same
    return mask_mod


def softcap_score_mod(softcap: float):
    def score_mod(score, b, h, q_idx, kv_idx):
        return softcap * torch.tanh(score / softcap)
    return score_mod


def alibi_score_mod(slopes: torch.Tensor):
    def score_mod(score, b, h, q_idx, kv_idx):
        return score - slopes[h] * (q_idx - kv_idx).abs()
    return score_mod


# ----------------------------------------------------------------------------- shared setups
FLEX_NOTE = ("torch.compile(flex_attention, dynamic=False, fullgraph=True); {what}; block mask "
             "built in setup, not timed")


def _flex(problem, inputs: Inputs, *, what: str, mask_mod=None, score_mod=None) -> FeatureRunner:
    from torch.nn.attention.flex_attention import create_block_mask

    flex = compiled_flex()
    (q, k, v), dout = _leaves(inputs, "bhsd")
    n = q.shape[2]
    block_mask = None if mask_mod is None else create_block_mask(
        mask_mod, B=None, H=None, Q_LEN=n, KV_LEN=n, device=problem.device)

    def forward():
        return flex(q, k, v, score_mod=score_mod, block_mask=block_mask)

    return _runner(forward, (q, k, v), dout, "bhsd", note=FLEX_NOTE.format(what=what))


def _sdpa(inputs: Inputs, *, note: str, attn_mask=None, is_causal=False, dropout_p=0.0,
          backend: str | None = None, grad: bool = True) -> FeatureRunner:
    (q, k, v), dout = _leaves(inputs, "bhsd")
    if not grad:  # forward only: leaves without grad, so no autograd bookkeeping in the call
        q, k, v = (t.detach() for t in (q, k, v))
    sdpa = torch.nn.functional.scaled_dot_product_attention

    def call(p):
        return lambda: sdpa(q, k, v, attn_mask=attn_mask, is_causal=is_causal, dropout_p=p)

    def context():  # the forced backend, or SDPA's own selection
        if backend is None:
            return contextlib.nullcontext()
        from torch.nn.attention import SDPBackend, sdpa_kernel

        return sdpa_kernel(getattr(SDPBackend, backend))

    twin = None if not dropout_p else Runner(call(0.0), (q, k, v), dout, "bhsd")
    return _runner(call(dropout_p), (q, k, v), dout, "bhsd", context=context, note=note, twin=twin)


# ----------------------------------------------------------------------------- varlen
@register("varlen", "flashtriton", "flashtriton varlen (packed)")
def _varlen_flashtriton(problem, inputs: Inputs) -> FeatureRunner:
    import flashtriton

    q, k, v = (t[0].detach().requires_grad_() for t in (inputs.q, inputs.k, inputs.v))
    cu, _, _ = packing(problem)
    longest, causal = problem.seqlen, problem.causal

    def forward():
        return flashtriton.flash_attn_varlen_func(q, k, v, cu, cu, longest, longest, causal=causal)

    return _runner(forward, (q, k, v), inputs.dout[0], "packed", canonical=lambda t: t[None])


@register("varlen", "sdpa_padded", "SDPA, padded batch + mask")
def _varlen_sdpa(problem, inputs: Inputs) -> FeatureRunner:
    n, width = problem.batch, -(-problem.seqlen // PAD_MULTIPLE) * PAD_MULTIPLE
    if problem.causal:
        _check_mask_budget(n * width * width, problem.dtype)
    _, doc, pos = packing(problem)

    def pad(t):  # (1, total, h, d) -> (docs, width, h, d), zeros past each document's end
        out = t.new_zeros(n, width, problem.heads, problem.headdim)
        out[doc, pos] = t[0]
        return out

    padded = Inputs(*(pad(t) for t in (inputs.q, inputs.k, inputs.v, inputs.dout)))
    lengths = torch.tensor(problem.doc_lengths, device=problem.device)
    mask = (torch.arange(width, device=problem.device) < lengths[:, None])[:, None, None, :]
    if problem.causal:
        mask = mask & torch.ones(width, width, dtype=torch.bool, device=problem.device).tril()
    runner = _sdpa(padded, attn_mask=mask, note=f"default SDPA backend; padded to the longest "
                   f"document rounded up to {PAD_MULTIPLE} ({width}), padding/causal boolean "
                   "mask; pad and unpad not timed")
    runner.canonical = lambda t: t.transpose(1, 2)[doc, pos][None]
    return runner


@register("varlen", "flex", "FlexAttention, document mask", needs_cuda=True)
def _varlen_flex(problem, inputs: Inputs) -> FeatureRunner:
    _, doc, _ = packing(problem)
    return _flex(problem, inputs, what="document mask on the packed sequence",
                 mask_mod=document_mask_mod(doc, problem.causal))


# ----------------------------------------------------------------------------- window, softcap, alibi
def _flashtriton(**options):
    def setup(problem, inputs: Inputs) -> FeatureRunner:
        import flashtriton

        (q, k, v), dout = _leaves(inputs, "bshd")
        kw = {name: get(problem) for name, get in options.items()}

        def forward():
            return flashtriton.flash_attn_func(q, k, v, causal=problem.causal, **kw)

        return _runner(forward, (q, k, v), dout, "bshd")
    return setup


register("window", "flashtriton", "flashtriton window")(
    _flashtriton(window_size=lambda p: p.window_size))
register("softcap", "flashtriton", "flashtriton softcap")(_flashtriton(softcap=lambda p: p.softcap))
register("alibi", "flashtriton", "flashtriton ALiBi")(
    _flashtriton(alibi_slopes=lambda p: alibi_slopes(p.heads, p.device)))


@register("window", "flex", "FlexAttention, sliding-window mask", needs_cuda=True)
def _window_flex(problem, inputs: Inputs) -> FeatureRunner:
    return _flex(problem, inputs, what=f"sliding-window mask_mod (left {problem.window})",
                 mask_mod=window_mask_mod(problem.window))


@register("window", "sdpa_mask", "SDPA, boolean window mask")
def _window_sdpa(problem, inputs: Inputs) -> FeatureRunner:
    from flashtriton.reference import visible_mask

    s = problem.seqlen
    _check_mask_budget(s * s, problem.dtype)
    mask = visible_mask(s, s, causal=True, window_size=problem.window_size, device=problem.device)
    return _sdpa(inputs, attn_mask=mask, note="default SDPA backend; explicit (s, s) boolean "
                 "window mask built in setup")


@register("softcap", "flex", "FlexAttention, tanh score_mod", needs_cuda=True)
def _softcap_flex(problem, inputs: Inputs) -> FeatureRunner:
    return _flex(problem, inputs, what=f"score_mod softcap*tanh(s/softcap), softcap {problem.softcap:g}",
                 score_mod=softcap_score_mod(problem.softcap),
                 mask_mod=causal_mask_mod if problem.causal else None)


@register("alibi", "flex", "FlexAttention, ALiBi score_mod", needs_cuda=True)
def _alibi_flex(problem, inputs: Inputs) -> FeatureRunner:
    slopes = alibi_slopes(problem.heads, problem.device)
    return _flex(problem, inputs, what="score_mod s - slope[h]*|i-j|",
                 score_mod=alibi_score_mod(slopes), mask_mod=causal_mask_mod if problem.causal else None)


@register("alibi", "sdpa_mask", "SDPA, float bias mask")
def _alibi_sdpa(problem, inputs: Inputs) -> FeatureRunner:
    s, h = problem.seqlen, problem.heads
    _check_mask_budget(h * s * s, problem.dtype)
    idx = torch.arange(s, device=problem.device)
    slopes = alibi_slopes(h, problem.device)[:, None, None]
    bias = -slopes * (idx[None, :] - idx[:, None]).abs()  # float32 (h, s, s)
    if problem.causal:
        bias = bias.masked_fill(idx[None, :] > idx[:, None], float("-inf"))
    bias = bias.to(problem.dtype)[None]
    return _sdpa(inputs, attn_mask=bias, note="default SDPA backend; explicit (1, heads, s, s) "
                 f"{problem.dtype_name} bias mask (causal as -inf) built in setup")


# ----------------------------------------------------------------------------- dropout
DROPOUT_NOTE = ("gate: the dropout_p=0 path against the reference; with dropout, output and "
                "gradients finite and different from dropout_p=0")


@register("dropout", "flashtriton", "flashtriton dropout")
def _dropout_flashtriton(problem, inputs: Inputs) -> FeatureRunner:
    import flashtriton

    (q, k, v), dout = _leaves(inputs, "bshd")

    def call(p):
        return lambda: flashtriton.flash_attn_func(q, k, v, dropout_p=p, causal=problem.causal)

    return _runner(call(problem.dropout_p), (q, k, v), dout, "bshd", note=DROPOUT_NOTE,
                   twin=Runner(call(0.0), (q, k, v), dout, "bshd"))


def _dropout_sdpa(backend: str):
    def setup(problem, inputs: Inputs) -> FeatureRunner:
        return _sdpa(inputs, is_causal=problem.causal, dropout_p=problem.dropout_p, backend=backend,
                     note=f"SDPBackend.{backend}; {DROPOUT_NOTE}")
    return setup


register("dropout", "sdpa_flash", "SDPA flash (FA2), dropout", needs_cuda=True)(
    _dropout_sdpa("FLASH_ATTENTION"))
register("dropout", "sdpa_efficient", "SDPA mem-efficient, dropout", needs_cuda=True)(
    _dropout_sdpa("EFFICIENT_ATTENTION"))


# ----------------------------------------------------------------------------- float8
FLOAT8_NOTE = (f"q, k, v quantized to float8_e4m3fn in setup ({FLOAT8_DESCALE} descales, not "
               "timed); output bf16; gate: the reference on the dequantized inputs")


@register("float8", "flashtriton", "flashtriton float8_e4m3fn, per-tensor descales")
def _float8_flashtriton(problem, inputs: Inputs) -> FeatureRunner:
    import flashtriton

    x = Float8Inputs.quantize(inputs)
    q_descale, k_descale, v_descale = x.descales

    def forward():
        return flashtriton.flash_attn_func(x.q, x.k, x.v, causal=problem.causal, q_descale=q_descale,
                                           k_descale=k_descale, v_descale=v_descale)

    return _runner(forward, (x.q, x.k, x.v), inputs.dout, "bshd", note=FLOAT8_NOTE, quantized=x)


@register("float8", "flashtriton_bf16", "flashtriton on the bf16 inputs (the plain path)")
def _float8_plain(problem, inputs: Inputs) -> FeatureRunner:
    import flashtriton

    q, k, v = inputs.q, inputs.k, inputs.v  # no grad: forward only, as the float8 call

    def forward():
        return flashtriton.flash_attn_func(q, k, v, causal=problem.causal)

    return _runner(forward, (q, k, v), inputs.dout, "bshd", note="forward only, inputs without grad")


@register("float8", "sdpa_cudnn", "SDPA cuDNN on the bf16 inputs", needs_cuda=True)
def _float8_sdpa_cudnn(problem, inputs: Inputs) -> FeatureRunner:
    return _sdpa(inputs, is_causal=problem.causal, backend="CUDNN_ATTENTION", grad=False,
                 note="SDPBackend.CUDNN_ATTENTION; forward only, inputs without grad")
