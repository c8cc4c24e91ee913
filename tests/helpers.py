"""Shared test helpers: the tolerance rule of STYLE.md, case ids, devices and poisoning."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import torch

from flashtriton.kernels.common import is_interpreting

# Tests run on the GPU natively, or on CPU tensors under the Triton interpreter.
DEVICE = "cuda" if (torch.cuda.is_available() and not is_interpreting()) else "cpu"
# FLASHTRITON_LARGE=1 turns on the larger shapes (meant for the GPU).
LARGE = os.environ.get("FLASHTRITON_LARGE", "0") not in ("", "0")

# Rounding floor per dtype: what one rounding of an O(1) result to that dtype can lose.
FLOOR = {torch.float16: 2e-3, torch.bfloat16: 1.6e-2, torch.float32: 2e-5, torch.float64: 1e-10}


def assert_close(ours, ref64, lowp, *, factor=2.0, name="out"):
    """Pass when ``max|ours - ref64| <= factor * max|lowp - ref64| + floor`` (STYLE.md).

    ``ref64`` is the float64 truth, ``lowp`` the same computation by PyTorch in the input dtype.
    Use ``factor=3`` for gradients. NaN anywhere in ``ours`` fails.
    """
    assert ours.shape == ref64.shape, f"{name}: shape {tuple(ours.shape)} != {tuple(ref64.shape)}"
    ours64 = ours.detach().to(torch.float64).cpu()
    ref = ref64.detach().to(torch.float64).cpu()
    low = lowp.detach().to(torch.float64).cpu()
    assert not torch.isnan(ours64).any(), f"{name}: NaN in result"
    finite = torch.isfinite(ref)
    assert torch.equal(torch.isfinite(ours64), finite), f"{name}: inf pattern differs from reference"
    err = (ours64 - ref)[finite].abs().max().item() if finite.any() else 0.0
    torch_err = (low - ref)[finite].abs().max().item() if finite.any() else 0.0
    floor = FLOOR[ours.dtype] * max(1.0, ref[finite].abs().max().item() if finite.any() else 1.0)
    bound = factor * torch_err + floor
    assert err <= bound, (f"{name}: max|ours-ref64|={err:.3e} > {factor}*max|torch_lowp-ref64|"
                          f"={torch_err:.3e} (x{factor}) + floor {floor:.3e}")


def assert_lse_close(lse, ref_lse, bound):
    """A kernel's lse against the float64 one: the same -inf pattern (rows that see no key), and
    within ``bound`` elsewhere."""
    finite = torch.isfinite(ref_lse)
    assert torch.equal(torch.isfinite(lse), finite), "lse: -inf pattern differs"
    err = (lse[finite].double() - ref_lse[finite].double()).abs().max()
    assert err < bound, err


def compile_child(code: str):
    """Run ``code`` in a child Python without TRITON_INTERPRET (compiling for sm_90a, e.g. through
    ``flashtriton.analysis.sass``, needs no GPU but not the interpreter) and return the JSON of
    its last printed line."""
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=dict(os.environ, TRITON_INTERPRET="0"))
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout.strip().splitlines()[-1])


def load_script(name: str):
    """``scripts/<name>.py`` as a module (the scripts are not a package), for testing its
    functions without running its ``main``."""
    path = Path(__file__).resolve().parents[1] / "scripts" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def poison_like(t: torch.Tensor) -> torch.Tensor:
    """A tensor shaped like ``t`` filled with NaN, so that an unwritten element fails a test."""
    return torch.full_like(t, float("nan"))


def randn(*shape, dtype, scale=1.0, device=None, requires_grad=False):
    x = torch.randn(*shape, dtype=torch.float32, device=device or DEVICE) * scale
    return x.to(dtype).requires_grad_(requires_grad)


def grads_of(out, inputs, grad_out):
    return torch.autograd.grad(out, inputs, grad_out, allow_unused=True)


def check_attention(fn_ours, fn_ref, inputs, *, grad=True, grad_out=None, names=("q", "k", "v")):
    """Run ours and the reference (float64 truth and low-precision torch) on ``inputs``, compare
    outputs (and gradients w.r.t. ``inputs`` when ``grad``) with the STYLE.md rule.

    ``fn_ours(*inputs) -> out`` or a tuple whose first element is out; ``fn_ref(*inputs, upcast)``
    likewise. Extra tuple elements (e.g. lse) are compared too (first-output gradient only).
    """
    ins = [t.detach().clone().requires_grad_(grad) for t in inputs]
    ins64 = [t.detach().to(torch.float64).requires_grad_(grad) for t in inputs]
    insl = [t.detach().clone().requires_grad_(grad) for t in inputs]

    def as_tuple(x):
        return x if isinstance(x, tuple) else (x,)

    ours = as_tuple(fn_ours(*ins))
    ref = as_tuple(fn_ref(*ins64, upcast=True))
    low = as_tuple(fn_ref(*insl, upcast=False))
    for i, (a, r, lo) in enumerate(zip(ours, ref, low)):
        if a is None:
            continue
        assert_close(a, r, lo, name="out" if i == 0 else f"output[{i}]")
    if not grad:
        return ours
    g = grad_out if grad_out is not None else torch.randn_like(ours[0])
    g_ours = grads_of(ours[0], ins, g)
    g_ref = grads_of(ref[0], ins64, g.to(torch.float64))
    g_low = grads_of(low[0], insl, g)
    for name, a, r, lo in zip(names, g_ours, g_ref, g_low):
        assert a is not None, f"d{name}: no gradient"
        assert_close(a, r, lo, factor=3.0, name=f"d{name}")
    return ours


def no_call_plans(monkeypatch) -> None:
    """Turn the call plans (kernels/common.py) off for one test and forget the stored ones: for
    tests that patch the dispatch (a spy on a launcher, a forced config), which a stored plan
    would skip."""
    from flashtriton.kernels import common

    monkeypatch.setitem(common.PLANS, "enabled", False)
    common.clear_launch_caches()


def python_first_path(*dirs) -> str:
    """A PATH that finds ``dirs`` first, then this Python's folder (the driver scripts call
    ``python3``), then the current PATH."""
    return os.pathsep.join([*map(str, dirs), str(Path(sys.executable).parent),
                            os.environ["PATH"]])


def stub_tool_env(tmp_path: Path, name: str, body: str, **extra) -> dict:
    """An environment whose PATH finds first an executable ``name`` in tmp_path/bin running
    the bash lines ``body`` (a stand-in for a GPU-only tool such as ``ncu``, to test a driver
    script on a CPU), then this Python's folder; ``extra`` variables are added."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    tool = bin_dir / name
    tool.write_text(f"#!/usr/bin/env bash\n{body}\n")
    tool.chmod(0o755)
    return {**os.environ, "PATH": python_first_path(bin_dir), **extra}
