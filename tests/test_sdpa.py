"""scaled_dot_product_attention drop-in: torch's semantics (layout, top-left causal, masks, GQA,
scale), checked against float64 and against torch's own SDPA in the input dtype."""

import pytest
import torch
import torch.nn.functional as F

from flashtriton import scaled_dot_product_attention
from flashtriton.reference import sdpa_ref
from helpers import DEVICE, assert_close, check_attention, randn

F16, BF16, F32 = torch.float16, torch.bfloat16, torch.float32


def torch_sdpa(q, k, v, upcast, **kw):
    """torch's own SDPA; float64 upcast is the truth, input dtype is what torch itself loses."""
    if upcast:
        return sdpa_ref(q, k, v, **kw)
    return F.scaled_dot_product_attention(q, k, v, **kw)


def bool_mask(*shape):
    m = torch.rand(*shape, device=DEVICE) > 0.3
    return m


@pytest.mark.parametrize("dtype", [F16, BF16, F32])
@pytest.mark.parametrize("mask_kind", ["none", "causal", "bool-b1sqsk", "float-sqsk", "bool-1h1sk"])
def test_sdpa(dtype, mask_kind):
    b, h, sq, sk, d = 2, 3, 33, 47, 40
    q, k, v = randn(b, h, sq, d, dtype=dtype), randn(b, h, sk, d, dtype=dtype), randn(b, h, sk, d, dtype=dtype)
    kw = {}
    if mask_kind == "causal":
        kw["is_causal"] = True
    elif mask_kind == "bool-b1sqsk":
        kw["attn_mask"] = bool_mask(b, 1, sq, sk)
    elif mask_kind == "float-sqsk":
        kw["attn_mask"] = randn(sq, sk, dtype=dtype)
    elif mask_kind == "bool-1h1sk":
        kw["attn_mask"] = bool_mask(1, h, 1, sk)
        kw["attn_mask"][..., 0] = True  # every row keeps a key, so torch has no NaN rows
    check_attention(lambda q, k, v: scaled_dot_product_attention(q, k, v, **kw),
                    lambda q, k, v, upcast: torch_sdpa(q, k, v, upcast, **kw), (q, k, v))


def test_sdpa_causal_is_top_left():
    """seq_q < seq_k with is_causal: torch aligns top-left (query i sees keys 0..i)."""
    q, k, v = randn(1, 2, 5, 16, dtype=F32), randn(1, 2, 9, 16, dtype=F32), randn(1, 2, 9, 16, dtype=F32)
    out = scaled_dot_product_attention(q, k, v, is_causal=True)
    expected = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    assert_close(out, sdpa_ref(q, k, v, is_causal=True), expected)
    # and it is not bottom-right: the first row sees exactly key 0
    assert torch.allclose(out[:, :, 0], v[:, :, 0], atol=1e-6)


@pytest.mark.parametrize("dtype", [F16, BF16])
def test_sdpa_gqa_and_scale(dtype):
    q = randn(2, 6, 29, 64, dtype=dtype)
    k, v = randn(2, 2, 31, 64, dtype=dtype), randn(2, 2, 31, 32, dtype=dtype)
    kw = dict(enable_gqa=True, scale=0.07, is_causal=True)
    check_attention(lambda q, k, v: scaled_dot_product_attention(q, k, v, **kw),
                    lambda q, k, v, upcast: torch_sdpa(q, k, v, upcast, **kw), (q, k, v))


def test_sdpa_fully_masked_row_is_zero():
    q, k, v = (randn(1, 2, 8, 16, dtype=F16, requires_grad=True) for _ in range(3))
    mask = torch.ones(1, 1, 8, 8, dtype=torch.bool, device=DEVICE)
    mask[..., 3, :] = False
    out = scaled_dot_product_attention(q, k, v, attn_mask=mask)
    assert torch.equal(out[:, :, 3], torch.zeros_like(out[:, :, 3]))
    out.backward(torch.randn_like(out))
    assert torch.equal(q.grad[:, :, 3], torch.zeros_like(q.grad[:, :, 3]))
    assert all(torch.isfinite(t.grad).all() for t in (q, k, v))


def test_sdpa_float_mask_with_neg_inf():
    q, k, v = (randn(1, 1, 16, 16, dtype=F32) for _ in range(3))
    mask = torch.zeros(16, 16, device=DEVICE)
    mask[:, 5:] = float("-inf")
    out = scaled_dot_product_attention(q, k, v, attn_mask=mask)
    assert_close(out, sdpa_ref(q, k, v, attn_mask=mask), F.scaled_dot_product_attention(q, k, v, attn_mask=mask))


def test_sdpa_mask_is_not_materialised(monkeypatch):
    """The broadcast mask reaches the kernel as a stride-0 view of the user's tensor."""
    import flashtriton.kernels.fwd as fwd
    seen = {}
    real = fwd._mask_args

    def spy(mask, like):
        seen["mask"] = mask
        return real(mask, like)

    monkeypatch.setattr(fwd, "_mask_args", spy)
    q, k, v = (randn(2, 4, 16, 16, dtype=F16) for _ in range(3))
    mask = bool_mask(16, 16)
    scaled_dot_product_attention(q, k, v, attn_mask=mask)
    m = seen["mask"]
    assert m.shape == (2, 4, 16, 16) and m.stride()[:2] == (0, 0)
    assert m.untyped_storage().data_ptr() == mask.untyped_storage().data_ptr()
