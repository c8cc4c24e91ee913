"""The providers `flashtriton bench` times side by side, and the one problem setup they share.

A provider is a name in :data:`PROVIDERS` and a setup function ``setup(problem, inputs) -> Runner``.
The setup turns the shared inputs (flash-attn layout, (batch, seqlen, heads, headdim)) into the
provider's own leaf tensors and returns a :class:`Runner`, whose ``fwd``, ``fwd_bwd`` and ``make_bwd``
give the three timed passes. The harness, the tables and the plots all iterate over this registry,
so they cannot drift apart. Heavy or optional imports (flashtriton's kernels, flex attention) happen
inside the setups, so this module imports even while a provider is unavailable.

A setup raises :class:`Unsupported` when the provider cannot run the problem (the harness records
the row as skipped with the reason); any error it raises on the first call is treated the same way.
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass
from typing import Callable

import torch

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
DTYPE_NAMES = {v: k for k, v in DTYPES.items()}


class Unsupported(Exception):
    """The provider cannot run this problem (its backend refuses the shape, dtype or device)."""


@dataclass(frozen=True)
class Problem:
    """One benchmark configuration: self-attention, seqlen_q == seqlen_k, nheads_k == nheads."""
    batch: int
    heads: int
    seqlen: int
    headdim: int
    causal: bool
    dtype: torch.dtype
    device: str = "cuda"

    @property
    def dtype_name(self) -> str:
        return DTYPE_NAMES[self.dtype]

    def describe(self) -> str:
        mask = "causal" if self.causal else "full"
        return (f"{self.dtype_name} b{self.batch} h{self.heads} s{self.seqlen} d{self.headdim} {mask}")


@dataclass
class Inputs:
    """The shared tensors of one problem, flash-attn layout (batch, seqlen, heads, headdim).

    They do not require grad: every provider makes its own leaves from them (a view when its layout
    matches, a contiguous transposed copy otherwise), so gradients never mix between providers.
    """
    q: torch.Tensor
    k: torch.Tensor
    v: torch.Tensor
    dout: torch.Tensor


def make_inputs(problem: Problem, seed: int = 0) -> Inputs:
    """The one setup function for a problem, shared by the speed, memory and correctness runs."""
    gen = torch.Generator(device=problem.device).manual_seed(seed)
    shape = (problem.batch, problem.seqlen, problem.heads, problem.headdim)

    def draw():
        return torch.randn(shape, generator=gen, device=problem.device,
                           dtype=torch.float32).to(problem.dtype)

    return Inputs(q=draw(), k=draw(), v=draw(), dout=draw())


@dataclass
class Runner:
    """What a provider's setup returns: one attention call on the provider's own tensors.

    ``forward()`` returns the output in the provider's ``layout`` (``"bshd"``: flash-attn's,
    ``"bhsd"``: torch SDPA's). ``leaves`` are q, k, v in that layout with ``requires_grad``;
    ``dout`` is the output gradient in that layout. ``context`` is entered around the whole
    correctness check and timing of this provider (e.g. the SDPA backend selection), so that its cost
    stays out of the timed calls. ``note`` is recorded with every row of the provider.
    """
    forward: Callable[[], torch.Tensor]
    leaves: tuple[torch.Tensor, torch.Tensor, torch.Tensor]
    dout: torch.Tensor
    layout: str = "bshd"
    context: Callable[[], contextlib.AbstractContextManager] = contextlib.nullcontext
    note: str | None = None

    def fwd(self) -> torch.Tensor:
        return self.forward()

    def fwd_bwd(self) -> None:
        self.forward().backward(self.dout)

    def make_bwd(self) -> Callable[[], None]:
        """Run the forward once and return a callable that repeats only its backward."""
        out = self.forward()

        def bwd() -> None:
            out.backward(self.dout, retain_graph=True)

        return bwd

    def callable_for(self, pass_name: str) -> Callable[[], object]:
        if pass_name == "fwd":
            return self.fwd
        if pass_name == "bwd":
            return self.make_bwd()
        if pass_name == "fwd_bwd":
            return self.fwd_bwd
        raise ValueError(f"pass: expected one of fwd, bwd, fwd_bwd, got {pass_name!r}")

    def to_bshd(self, t: torch.Tensor) -> torch.Tensor:
        """A tensor in the provider's layout, seen in flash-attn's layout (a view, no copy)."""
        return t if self.layout == "bshd" else t.transpose(1, 2)

    def clear_grads(self) -> None:
        for t in self.leaves:
            t.grad = None


@dataclass(frozen=True)
class Provider:
    name: str
    label: str
    setup: Callable[[Problem, Inputs], Runner]
    needs_cuda: bool = False


PROVIDERS: dict[str, Provider] = {}


def register(name: str, label: str, *, needs_cuda: bool = False):
    """Add a provider to :data:`PROVIDERS` (tests register their own in a copy of the dict)."""
    def wrap(setup):
        PROVIDERS[name] = Provider(name=name, label=label, setup=setup, needs_cuda=needs_cuda)
        return setup
    return wrap


def _leaves(inputs: Inputs, layout: str):
    """q, k, v leaves and dout in ``layout``: views of the shared inputs for flash-attn's layout,
    contiguous copies for SDPA's (the layout those kernels are built for)."""
    tensors = (inputs.q, inputs.k, inputs.v, inputs.dout)
    if layout == "bhsd":
        tensors = tuple(t.transpose(1, 2).contiguous() for t in tensors)
    q, k, v, dout = tensors
    return (q.detach().requires_grad_(), k.detach().requires_grad_(),
            v.detach().requires_grad_()), dout


def flash_attn_runner(flash_attn_func, problem: Problem, inputs: Inputs,
                      note: str | None = None) -> Runner:
    """A ``flash_attn_func`` (this package's, or a baseline tree's: bench/baseline.py) on
    flash-attn-layout leaves."""
    (q, k, v), dout = _leaves(inputs, "bshd")
    causal = problem.causal

    def forward():
        return flash_attn_func(q, k, v, causal=causal)

    return Runner(forward=forward, leaves=(q, k, v), dout=dout, layout="bshd", note=note)


@register("flashtriton", "flashtriton (ours)")
def setup_flashtriton(problem: Problem, inputs: Inputs) -> Runner:
    import flashtriton

    return flash_attn_runner(flashtriton.flash_attn_func, problem, inputs)


def _sdpa_setup(backend_name: str):
    def setup(problem: Problem, inputs: Inputs) -> Runner:
        from torch.nn.attention import SDPBackend, sdpa_kernel

        backend = getattr(SDPBackend, backend_name)
        (q, k, v), dout = _leaves(inputs, "bhsd")
        causal = problem.causal
        sdpa = torch.nn.functional.scaled_dot_product_attention

        def forward():
            return sdpa(q, k, v, is_causal=causal)

        return Runner(forward=forward, leaves=(q, k, v), dout=dout, layout="bhsd",
                      context=lambda: sdpa_kernel(backend))
    return setup


register("sdpa_flash", "SDPA flash (FA2)", needs_cuda=True)(_sdpa_setup("FLASH_ATTENTION"))
register("sdpa_cudnn", "SDPA cuDNN", needs_cuda=True)(_sdpa_setup("CUDNN_ATTENTION"))
register("sdpa_efficient", "SDPA mem-efficient", needs_cuda=True)(_sdpa_setup("EFFICIENT_ATTENTION"))

# Each new shape (and mask / no mask) is a recompile of the one compiled flex_attention; the grid
# has 72 configurations. Dynamo's default limit (8) would make it fall back to eager silently.
FLEX_RECOMPILE_LIMIT = 4096
_flex_compiled = []


def configure_dynamo() -> dict:
    """Raise dynamo's recompile limits so flex never falls back to eager, and make a fallback an
    error instead of a silent slowdown. Returns the settings it made."""
    import torch._dynamo.config as dyn

    made = {}
    for name in ("cache_size_limit", "recompile_limit",
                 "accumulated_cache_size_limit", "accumulated_recompile_limit"):
        if hasattr(dyn, name):
            setattr(dyn, name, max(getattr(dyn, name), FLEX_RECOMPILE_LIMIT))
            made[name] = getattr(dyn, name)
    for name in ("suppress_errors",):  # an inductor error must not turn into eager execution
        if hasattr(dyn, name):
            setattr(dyn, name, False)
            made[name] = False
    # The timing loop calls backward repeatedly on one graph (retain_graph=True); compiled
    # backwards with donated buffers refuse that, so buffer donation is turned off.
    import torch._functorch.config as functorch_config

    if hasattr(functorch_config, "donated_buffer"):
        functorch_config.donated_buffer = False
        made["donated_buffer"] = False
    return made


def compiled_flex():
    """flex_attention compiled once for the whole run: static shapes (one specialised kernel per
    configuration, as a user with fixed shapes gets) and fullgraph, so that hitting the recompile
    limit raises (and is recorded) instead of running the eager fallback."""
    if not _flex_compiled:
        from torch.nn.attention.flex_attention import flex_attention

        configure_dynamo()
        _flex_compiled.append(torch.compile(flex_attention, dynamic=False, fullgraph=True))
    return _flex_compiled[0]


def is_dynamo_fallback(exc: BaseException) -> bool:
    """True when ``exc`` is dynamo refusing to compile again (what would otherwise be an eager
    fallback): the recompile/cache limit was hit."""
    text = f"{type(exc).__name__}: {exc}".lower()
    return ("recompilelimit" in text or "cachelimit" in text or "recompile limit" in text
            or "cache_size_limit" in text or "recompile_limit" in text)


@register("flex", "FlexAttention (compiled)", needs_cuda=True)
def setup_flex(problem: Problem, inputs: Inputs) -> Runner:
    flex = compiled_flex()
    (q, k, v), dout = _leaves(inputs, "bhsd")
    block_mask = None
    if problem.causal:
        from torch.nn.attention.flex_attention import create_block_mask

        def causal_mask(b, h, q_idx, kv_idx):
            return q_idx >= kv_idx

        block_mask = create_block_mask(causal_mask, B=None, H=None, Q_LEN=problem.seqlen,
                                       KV_LEN=problem.seqlen, device=problem.device)

    def forward():
        return flex(q, k, v, block_mask=block_mask)

    return Runner(forward=forward, leaves=(q, k, v), dout=dout, layout="bhsd",
                  note="torch.compile(flex_attention, dynamic=False, fullgraph=True)")


@register("naive", "naive PyTorch")
def setup_naive(problem: Problem, inputs: Inputs) -> Runner:
    """softmax(QK^T * scale) V in the input dtype, materialising S and P (what FlashAttention
    avoids). The causal mask is built inside the call, as plain code would."""
    (q, k, v), dout = _leaves(inputs, "bhsd")
    scale = 1.0 / math.sqrt(problem.headdim)
    causal, n = problem.causal, problem.seqlen

    def forward():
        s = torch.matmul(q, k.transpose(-1, -2)) * scale  # [b, h, n, n]
        if causal:
            hidden = torch.ones(n, n, dtype=torch.bool, device=q.device).triu_(1)
            s = s.masked_fill(hidden, float("-inf"))
        p = torch.softmax(s, dim=-1)
        return torch.matmul(p, v)

    return Runner(forward=forward, leaves=(q, k, v), dout=dout, layout="bhsd")
