"""The Gluon backward (kernels/bwd_gluon.py: dK/dV with atomic dQ), on a Hopper GPU only: the
Triton interpreter does not run Gluon, so on CPU these tests are skipped with that reason, and
the same cases go through the portable ``tl`` kernels in the other test files.

Each case runs the public function's forward and backward with the shipped configs, checks that
the Gluon backward ran (a spy on the launcher), and compares out, dq, dk, dv against the float64
reference with the STYLE.md rule (tests/helpers.check_attention).
"""

import pytest
import torch

from flashtriton import flash_attn_func
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


@pytest.mark.parametrize("b,sq,sk,h,hk,d,causal,dtype", CASES)
def test_gluon_backward_matches_reference(monkeypatch, b, sq, sk, h, hk, d, causal, dtype):
    import flashtriton.kernels.bwd as bwd

    calls = []
    real = bwd.attn_bwd_gluon

    def spy(*args, **kw):
        calls.append(1)
        return real(*args, **kw)

    monkeypatch.setattr(bwd, "attn_bwd_gluon", spy)
    q = randn(b, sq, h, d, dtype=dtype)
    k = randn(b, sk, hk, d, dtype=dtype)
    v = randn(b, sk, hk, d, dtype=dtype)
    check_attention(lambda q, k, v: flash_attn_func(q, k, v, causal=causal),
                    lambda q, k, v, upcast: attention_ref(q, k, v, causal=causal,
                                                          upcast=upcast)[0], (q, k, v))
    assert calls == [1], "the Gluon backward did not run"


def test_deterministic_backward_does_not_use_it(monkeypatch):
    import flashtriton.kernels.bwd as bwd

    monkeypatch.setattr(bwd, "attn_bwd_gluon", None)  # calling it would raise
    q, k, v = (randn(1, 300, 2, 128, dtype=BF16, requires_grad=True) for _ in range(3))
    out = flash_attn_func(q, k, v, causal=True, deterministic=True)
    out.sum().backward()
    assert torch.isfinite(q.grad).all()
