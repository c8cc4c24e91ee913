"""flash_attn_func: forward, lse and all three gradients against the float64 reference."""

import pytest
import torch

from flashtriton import flash_attn_func
from flashtriton.reference import attention_ref
from helpers import DEVICE, LARGE, check_attention, no_call_plans, randn

F16, BF16, F32 = torch.float16, torch.bfloat16, torch.float32


def case(b, sq, sk, h, hk, d, dv=None, dtype=F16, causal=False, **kw):
    dv = dv or d
    tag = f"b{b}-sq{sq}-sk{sk}-h{h}/{hk}-d{d}" + (f"-dv{dv}" if dv != d else "")
    tag += f"-{str(dtype).split('.')[-1]}" + ("-causal" if causal else "")
    tag += "".join(f"-{k}{v}" for k, v in kw.items())
    return pytest.param(b, sq, sk, h, hk, d, dv, dtype, causal, kw, id=tag)


CASES = [
    case(1, 1, 1, 1, 1, 8),
    case(2, 17, 17, 2, 2, 40, causal=True),
    case(1, 63, 65, 2, 1, 64, dtype=BF16),
    case(1, 65, 63, 4, 2, 80, dtype=F32, causal=True),
    case(2, 127, 129, 3, 1, 16, 32, causal=True),
    case(1, 129, 17, 2, 2, 64, dtype=BF16, causal=True),      # seqlen_q > seqlen_k: empty rows
    case(1, 17, 129, 2, 2, 64, dtype=F32, causal=True),       # seqlen_q < seqlen_k
    case(1, 33, 47, 2, 2, 128, 64, dtype=BF16),
    case(1, 20, 24, 1, 1, 256, dtype=F16, causal=True),
    case(1, 18, 21, 2, 2, 256, 128, dtype=F32),
    case(1, 31, 31, 4, 4, 24, dtype=F16, scale=0.0),
    case(1, 31, 40, 2, 1, 32, dtype=BF16, scale=-0.3),
]
if LARGE:
    CASES += [
        case(2, 239, 513, 4, 2, 128, dtype=BF16, causal=True),
        case(2, 513, 239, 8, 1, 64, dtype=F16, causal=True),
        case(1, 1024, 1024, 4, 4, 256, dtype=BF16),
        case(2, 700, 955, 4, 2, 256, dtype=BF16, causal=True),   # d256: two backward kernels
        case(2, 1000, 1531, 4, 2, 80, dtype=F16),
        case(1, 777, 777, 2, 2, 40, dtype=F32, causal=True),
    ]


@pytest.mark.parametrize("b,sq,sk,h,hk,d,dv,dtype,causal,kw", CASES)
def test_forward_backward(b, sq, sk, h, hk, d, dv, dtype, causal, kw):
    q = randn(b, sq, h, d, dtype=dtype)
    k = randn(b, sk, hk, d, dtype=dtype)
    v = randn(b, sk, hk, dv, dtype=dtype)
    scale = kw.get("scale")

    def ours(q, k, v):
        out, lse, probs = flash_attn_func(q, k, v, softmax_scale=scale, causal=causal,
                                          return_attn_probs=True)
        assert probs is None
        return out, lse

    def ref(q, k, v, upcast):
        return attention_ref(q, k, v, softmax_scale=scale, causal=causal, upcast=upcast)

    check_attention(ours, ref, (q, k, v))


@pytest.mark.parametrize("dtype", [F16, BF16, F32])
def test_noncontiguous_inputs_and_grad(dtype):
    """q, k, v as views into one packed (B, S, 3, H, D) tensor; grad_out a transposed view."""
    b, s, h, d = 2, 37, 3, 48
    qkv = randn(b, s, 3, h, d, dtype=dtype)
    q, k, v = qkv.unbind(2)
    assert not q.is_contiguous()
    g = randn(b, h, s, d, dtype=dtype).transpose(1, 2)
    assert not g.is_contiguous()
    check_attention(lambda q, k, v: flash_attn_func(q, k, v, causal=True),
                    lambda q, k, v, upcast: attention_ref(q, k, v, causal=True, upcast=upcast)[0],
                    (q, k, v), grad_out=g)


def test_last_dim_not_contiguous_is_copied():
    q = randn(1, 19, 2, 32, dtype=F16).transpose(1, 3).contiguous().transpose(1, 3)
    assert q.stride(-1) != 1
    k, v = randn(1, 23, 2, 32, dtype=F16), randn(1, 23, 2, 32, dtype=F16)
    check_attention(lambda q, k, v: flash_attn_func(q, k, v),
                    lambda q, k, v, upcast: attention_ref(q, k, v, upcast=upcast)[0], (q, k, v))


def test_overflow_prone_fp16():
    """Large logits (q x5, k x3) must not overflow: scores live in fp32, max-subtracted."""
    q = randn(1, 65, 2, 64, dtype=F16, scale=5.0)
    k = randn(1, 65, 2, 64, dtype=F16, scale=3.0)
    v = randn(1, 65, 2, 64, dtype=F16)
    check_attention(lambda q, k, v: flash_attn_func(q, k, v, causal=True),
                    lambda q, k, v, upcast: attention_ref(q, k, v, causal=True, upcast=upcast)[0],
                    (q, k, v))


def test_rows_without_keys_are_zero_never_nan():
    """Bottom-right causal with seqlen_q > seqlen_k: the first rows see no key."""
    q = randn(1, 40, 2, 32, dtype=BF16, requires_grad=True)
    k = randn(1, 9, 2, 32, dtype=BF16, requires_grad=True)
    v = randn(1, 9, 2, 32, dtype=BF16, requires_grad=True)
    out, lse, _ = flash_attn_func(q, k, v, causal=True, return_attn_probs=True)
    empty = 40 - 9
    assert torch.equal(out[:, :empty], torch.zeros_like(out[:, :empty]))
    assert torch.isneginf(lse[:, :, :empty]).all()
    assert torch.isfinite(lse[:, :, empty:]).all()
    out.backward(torch.randn_like(out))
    assert torch.equal(q.grad[:, :empty], torch.zeros_like(q.grad[:, :empty]))
    for t in (q, k, v):
        assert torch.isfinite(t.grad).all()


@pytest.mark.parametrize("how", ["flag", "torch_global"])
def test_deterministic_backward_is_bitwise_reproducible(how):
    q = randn(2, 45, 4, 64, dtype=BF16, requires_grad=True)
    k = randn(2, 51, 1, 64, dtype=BF16, requires_grad=True)
    v = randn(2, 51, 1, 64, dtype=BF16, requires_grad=True)
    g = torch.randn(2, 45, 4, 64, dtype=BF16, device=DEVICE)
    runs = []
    before = torch.are_deterministic_algorithms_enabled()
    try:
        if how == "torch_global":
            torch.use_deterministic_algorithms(True, warn_only=True)
        for _ in range(2):
            out = flash_attn_func(q, k, v, causal=True, deterministic=how == "flag")
            runs.append(torch.autograd.grad(out, (q, k, v), g))
    finally:
        torch.use_deterministic_algorithms(before)
    for a, b in zip(*runs):
        assert torch.equal(a, b)


@pytest.mark.parametrize("deterministic", [False, True], ids=["atomic-dq", "separate-dq"])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_both_backward_paths_match_the_reference(deterministic, causal):
    q = randn(2, 37, 6, 40, dtype=BF16, requires_grad=True)
    k = randn(2, 65, 2, 40, dtype=BF16, requires_grad=True)
    v = randn(2, 65, 2, 40, dtype=BF16, requires_grad=True)
    check_attention(lambda q, k, v: flash_attn_func(q, k, v, causal=causal,
                                                    deterministic=deterministic),
                    lambda q, k, v, upcast: attention_ref(q, k, v, causal=causal, upcast=upcast)[0],
                    (q, k, v))


def test_deterministic_must_be_a_bool():
    q = randn(1, 8, 2, 16, dtype=BF16)
    with pytest.raises(TypeError, match="deterministic"):
        flash_attn_func(q, q, q, deterministic="yes")


def test_lse_gradient():
    """A loss that uses softmax_lse gets its gradient too (dS gains P * dlse)."""
    q, k, v = (randn(1, 21, 2, 32, dtype=F32) for _ in range(3))

    def ours(q, k, v):
        out, lse, _ = flash_attn_func(q, k, v, causal=True, return_attn_probs=True)
        return out.sum(-1) + lse.transpose(1, 2).exp().log()

    def ref(q, k, v, upcast):
        out, lse = attention_ref(q, k, v, causal=True, upcast=upcast)
        return out.sum(-1) + lse.to(out.dtype).transpose(1, 2)

    check_attention(ours, ref, (q, k, v))


@pytest.fixture
def pointer_loads(monkeypatch):
    """Force the tl kernels' pointer-load path (what layouts the copy engine cannot read use);
    on sm_90 the Gluon kernels, which load by TMA only, are switched off for it."""
    import dataclasses

    import flashtriton.kernels.bwd as bwd
    import flashtriton.kernels.fwd as fwd

    for mod, name in ((fwd, "fwd_config"), (bwd, "bwd_config")):
        real = getattr(mod, name)
        monkeypatch.setattr(mod, name, lambda *a, real=real: dataclasses.replace(real(*a), tma=False))
    monkeypatch.setattr(fwd, "gluon_fwd_config", lambda *a: None)
    monkeypatch.setattr(bwd, "gluon_bwd_config", lambda *a: None)
    no_call_plans(monkeypatch)


@pytest.mark.parametrize("b,sq,sk,h,hk,d,dv,dtype,causal,kw", [CASES[i] for i in (1, 4, 5, 9)])
def test_pointer_load_path(pointer_loads, b, sq, sk, h, hk, d, dv, dtype, causal, kw):
    test_forward_backward(b, sq, sk, h, hk, d, dv, dtype, causal, kw)


def test_gradient_through_lse_alone():
    """A loss on softmax_lse only: dq and dk from P * dlse; dv is zero (lse does not see v)."""
    q, k, v = (randn(1, 19, 2, 32, dtype=F32) for _ in range(3))

    def ours(q, k):
        return flash_attn_func(q, k, v, causal=True, return_attn_probs=True)[1]

    def ref(q, k, upcast):
        return attention_ref(q, k, v.to(q.dtype), causal=True, upcast=upcast)[1].to(q.dtype)

    check_attention(ours, ref, (q, k), names=("q", "k"))
    vg = v.detach().requires_grad_()
    _, lse, _ = flash_attn_func(q, k, vg, causal=True, return_attn_probs=True)
    (dv,) = torch.autograd.grad(lse.sum(), (vg,), allow_unused=True)
    assert dv is None or torch.equal(dv, torch.zeros_like(dv))
