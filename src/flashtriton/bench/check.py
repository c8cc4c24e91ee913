"""The correctness gate of `flashtriton bench`: a provider is timed only after its output (and, when a
backward pass is timed, its gradients) match the reference on the benchmark's own problem.

The float64 reference materialises S for one head at a time, so it is checked on a few (batch, head)
slices (the first and the last: a wrong stride or offset shows there) at the full sequence length,
never on a shrunken problem. The tolerance is STYLE.md's rule: pass when
``max|ours - ref64| <= factor * max|torch_lowp - ref64| + floor`` with factor 2 for the output and 3
for gradients, where ``torch_lowp`` is the same reference computed by PyTorch in the input dtype.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from flashtriton.bench.providers import Inputs, Problem, Runner
from flashtriton.reference import attention_ref

OUT_FACTOR = 2.0
GRAD_FACTOR = 3.0
# Rounding floor per dtype: what one rounding of an O(1) result to that dtype can lose.
FLOOR = {torch.float16: 2e-3, torch.bfloat16: 1.6e-2, torch.float32: 2e-5, torch.float64: 1e-10}
GRAD_NAMES = ("dq", "dk", "dv")


def slice_pairs(problem: Problem) -> list[tuple[int, int]]:
    """The (batch, head) slices checked: the first and the last."""
    pairs = [(0, 0), (problem.batch - 1, problem.heads - 1)]
    return list(dict.fromkeys(pairs))


@dataclass
class SliceRef:
    """Reference results for one (batch, head) slice, float64 on the CPU, shape (seqlen, headdim)."""
    out64: torch.Tensor
    out_lowp: torch.Tensor
    grads64: dict[str, torch.Tensor] | None = None
    grads_lowp: dict[str, torch.Tensor] | None = None


@dataclass
class Reference:
    pairs: list[tuple[int, int]]
    slices: list[SliceRef]

    @property
    def has_grads(self) -> bool:
        return all(s.grads64 is not None for s in self.slices)


def _one_slice(problem: Problem, inputs: Inputs, b: int, h: int, dtype, *, grads: bool):
    """Output (and dq, dk, dv) of one (batch, head) slice, computed in ``dtype`` (float64 = truth)."""
    def take(t):
        return t[b:b + 1, :, h:h + 1, :].detach().to(dtype).requires_grad_(grads)

    q, k, v = take(inputs.q), take(inputs.k), take(inputs.v)
    with torch.set_grad_enabled(grads):
        out, _ = attention_ref(q, k, v, causal=problem.causal, upcast=(dtype == torch.float64))
        result = {"out": out}
        if grads:
            dout = inputs.dout[b:b + 1, :, h:h + 1, :].to(dtype)
            dq, dk, dv = torch.autograd.grad(out, (q, k, v), dout)
            result.update(dq=dq, dk=dk, dv=dv)
    return {name: t.detach()[0, :, 0, :].to("cpu", torch.float64) for name, t in result.items()}


def reference_slices(problem: Problem, inputs: Inputs, *, grads: bool) -> Reference:
    """The reference for :func:`slice_pairs`, in float64 and in the input dtype."""
    pairs = slice_pairs(problem)
    slices = []
    for b, h in pairs:
        truth = _one_slice(problem, inputs, b, h, torch.float64, grads=grads)
        lowp = _one_slice(problem, inputs, b, h, problem.dtype, grads=grads)
        slices.append(SliceRef(
            out64=truth["out"], out_lowp=lowp["out"],
            grads64={n: truth[n] for n in GRAD_NAMES} if grads else None,
            grads_lowp={n: lowp[n] for n in GRAD_NAMES} if grads else None))
    return Reference(pairs=pairs, slices=slices)


def compare(name: str, ours: torch.Tensor, ref64: torch.Tensor, lowp: torch.Tensor, *,
            dtype: torch.dtype, factor: float) -> str | None:
    """None when ``ours`` passes STYLE.md's rule, else a message carrying the three numbers."""
    ours = ours.detach().to("cpu", torch.float64)
    if ours.shape != ref64.shape:
        return f"{name}: shape {tuple(ours.shape)} != {tuple(ref64.shape)}"
    if torch.isnan(ours).any():
        return f"{name}: NaN in result"
    finite = torch.isfinite(ref64)
    if not torch.equal(torch.isfinite(ours), finite):
        return f"{name}: inf pattern differs from reference"
    if not finite.any():
        return None
    err = (ours - ref64)[finite].abs().max().item()
    torch_err = (lowp - ref64)[finite].abs().max().item()
    floor = FLOOR[dtype] * max(1.0, ref64[finite].abs().max().item())
    if err <= factor * torch_err + floor:
        return None
    return (f"{name}: max|ours-ref64|={err:.3e} > {factor:g}*max|torch_lowp-ref64|={torch_err:.3e}"
            f" + floor {floor:.3e}")


def check_output(runner: Runner, out: torch.Tensor, problem: Problem, ref: Reference) -> str | None:
    """Compare a provider's output (in its own layout) with the reference slices."""
    out_bshd = runner.to_bshd(out)
    expected = (problem.batch, problem.seqlen, problem.heads, problem.headdim)
    if tuple(out_bshd.shape) != expected:
        return f"out: shape {tuple(out_bshd.shape)} != {expected} (batch, seqlen, heads, headdim)"
    for (b, h), s in zip(ref.pairs, ref.slices):
        failure = compare(f"out[b={b},h={h}]", out_bshd[b, :, h, :], s.out64, s.out_lowp,
                          dtype=problem.dtype, factor=OUT_FACTOR)
        if failure:
            return failure
    return None


def check_grads(runner: Runner, problem: Problem, ref: Reference) -> str | None:
    """Compare the gradients the last backward left in the runner's leaves with the reference."""
    for name, leaf in zip(GRAD_NAMES, runner.leaves):
        if leaf.grad is None:
            return f"{name}: no gradient was produced"
        grad = runner.to_bshd(leaf.grad)
        for (b, h), s in zip(ref.pairs, ref.slices):
            failure = compare(f"{name}[b={b},h={h}]", grad[b, :, h, :], s.grads64[name],
                              s.grads_lowp[name], dtype=problem.dtype, factor=GRAD_FACTOR)
            if failure:
                return failure
    return None
