"""The Gluon backward (kernels/bwd_gluon.py: dK/dV, dQ added by TMA reductions), on a Hopper GPU only: the
Triton interpreter does not run Gluon, so on CPU these tests are skipped with that reason, and
the same cases go through the portable ``tl`` kernels in the other test files.

The kernel is opt-in (a config with ``gluon=True``; no shipped config selects it, it is slower
than the tl kernels). Each case runs the public function with the backward's config set to it,
checks that it ran (a spy on the launcher), and compares out, dq, dk, dv against the float64
reference with the STYLE.md rule (tests/helpers.check_attention).
"""

import pytest
import torch

import flashtriton.kernels.fwd as fwd
from flashtriton import flash_attn_func, ops
from flashtriton.configs import KernelConfig, make_params
from flashtriton.reference import attention_ref
from helpers import DEVICE, check_attention, randn

pytestmark = pytest.mark.skipif(
    DEVICE != "cuda" or torch.cuda.get_device_capability()[0] != 9,
    reason="Gluon kernels run on an sm_90 GPU only; the interpreter cannot run them")

BF16, F16 = torch.bfloat16, torch.float16


def case(b, sq, sk, h, hk, d, causal, dtype=BF16):
    tag = (f"b{b}-sq{sq}-sk{sk}-h{h}/{hk}-d{d}-{str(dtype).split('.')[-1]}"
           f"{'-causal' if causal else ''}")
    return pytest.param(b, sq, sk, h, hk, d, causal, dtype, id=tag)


CASES = [
    case(2, 1000, 1000, 4, 4, 128, False),
    case(2, 1000, 1000, 4, 4, 128, True),
    case(1, 1, 1, 2, 2, 128, True),
    case(1, 129, 65, 4, 2, 128, True),       # seqlen_q > seqlen_k: rows that see no key
    case(1, 65, 300, 4, 1, 128, True, F16),   # seqlen_q < seqlen_k, MQA
    case(1, 257, 383, 2, 2, 64, False, F16),
    case(1, 513, 513, 2, 2, 64, True),
    case(2, 777, 901, 8, 2, 128, False),      # GQA: every query head of a group
    case(2, 777, 901, 8, 2, 128, True, F16),
    case(1, 2048, 2048, 2, 2, 128, True),
]


GLUON_BWD = KernelConfig(64, 128, 4, 2, gluon=True)


def run_case(monkeypatch, b, sq, sk, h, hk, d, causal, dtype, **launch_kw):
    import flashtriton.kernels.bwd as bwd

    calls = []
    real_launch, real_bwd = bwd.attn_bwd_gluon, bwd.attn_bwd

    def spy(*args, **kw):
        calls.append(1)
        return real_launch(*args, **kw, **launch_kw)

    def with_gluon_config(*args, **kw):  # the public function's backward, Gluon config asked
        kw["config"] = GLUON_BWD
        return real_bwd(*args, **kw)

    monkeypatch.setattr(bwd, "attn_bwd_gluon", spy)
    monkeypatch.setattr(ops, "attn_bwd", with_gluon_config)
    q = randn(b, sq, h, d, dtype=dtype)
    k = randn(b, sk, hk, d, dtype=dtype)
    v = randn(b, sk, hk, d, dtype=dtype)
    check_attention(lambda q, k, v: flash_attn_func(q, k, v, causal=causal),
                    lambda q, k, v, upcast: attention_ref(q, k, v, causal=causal,
                                                          upcast=upcast)[0], (q, k, v))
    assert calls == [1], "the Gluon backward did not run"


@pytest.mark.parametrize("b,sq,sk,h,hk,d,causal,dtype", CASES)
def test_gluon_backward_matches_reference(monkeypatch, b, sq, sk, h, hk, d, causal, dtype):
    """Head dim 128 shares dS between the consumers (split dQ columns), 64 does not."""
    run_case(monkeypatch, b, sq, sk, h, hk, d, causal, dtype)


@pytest.mark.parametrize("b,sq,sk,h,hk,d,causal,dtype", [
    case(1, 257, 383, 4, 2, 128, True),
    case(2, 500, 500, 2, 2, 128, False, F16),
])
def test_gluon_backward_unsplit_dq_at_d128(monkeypatch, b, sq, sk, h, hk, d, causal, dtype):
    """The other dQ layout at head dim 128: each consumer adds its own [64, 128] part."""
    run_case(monkeypatch, b, sq, sk, h, hk, d, causal, dtype, split_dq=False)


def test_split_dq_needs_head_dim_128():
    from flashtriton.kernels.bwd_gluon import attn_bwd_gluon

    q, k, v, do = (randn(1, 64, 2, 64, dtype=BF16) for _ in range(4))
    lse = torch.zeros(1, 2, 64, device=q.device)
    with pytest.raises(ValueError, match="split_dq needs head dim 128"):
        attn_bwd_gluon(do, q, k, v, lse, lse, make_params(64), split_dq=True)


def test_not_selected_by_default(monkeypatch):
    """No shipped config selects it (slower than the tl kernels), nor the deterministic mode."""
    import flashtriton.kernels.bwd as bwd

    monkeypatch.setattr(bwd, "attn_bwd_gluon", None)  # calling it would raise
    q, k, v = (randn(1, 300, 2, 128, dtype=BF16, requires_grad=True) for _ in range(3))
    flash_attn_func(q, k, v, causal=True).sum().backward()
    params = make_params(128, causal=True, deterministic=True)  # even when asked for
    o, lse = fwd.attn_fwd(q.detach(), k.detach(), v.detach(), params)
    bwd.attn_bwd(torch.ones_like(o), q.detach(), k.detach(), v.detach(), o, lse, params,
                 config=GLUON_BWD)
