"""float8_e4m3fn forward with per-tensor descales: against the float64 reference on the
dequantised inputs, with the STYLE.md rule where the low-precision side is PyTorch running the
same algorithm at fp8 (probabilities rounded to e4m3 before the P·V product).

Under the interpreter the kernel keeps P in fp32 for P·V (the interpreter's fp32->fp8 conversion
does not round like the hardware); the fp8 Q·K product, the descales and the bf16 output are the
same code as on the GPU, where P is rounded to e4m3 too."""

import pytest
import torch

from flashtriton import flash_attn_func
from flashtriton.reference import attention_ref, visible_mask
from helpers import DEVICE, assert_close, randn

FP8 = torch.float8_e4m3fn


def quantize(x):
    """Per-tensor scaling to e4m3's range; returns (x8, descale) with x ≈ x8 * descale."""
    descale = x.abs().max().float() / 448.0
    return (x / descale).to(FP8), descale.reshape(1).to(torch.float32)


def torch_fp8_attention(q, k, v, causal):
    """PyTorch doing what an fp8 kernel does: scores in fp32, probabilities (scaled by the row
    max) rounded to e4m3, products accumulated in fp32, output rounded to bf16."""
    b, sq, h, d = q.shape
    s = torch.einsum("bqhd,bkhd->bhqk", q.float(), k.float()) / d ** 0.5
    keep = visible_mask(sq, k.shape[1], causal=causal, device=q.device)
    if keep is not None:
        s = s.masked_fill(~keep, float("-inf"))
    m = s.amax(-1, keepdim=True)
    p = torch.exp(s - m)
    out = torch.einsum("bhqk,bkhd->bqhd", p.to(FP8).float(), v.float()) / p.sum(-1).transpose(1, 2)[..., None]
    return out.to(torch.bfloat16)


@pytest.mark.parametrize("shape,causal", [((1, 65, 47, 2, 64), False), ((2, 33, 70, 2, 40), True),
                                          ((1, 17, 17, 1, 128), True)],
                         ids=["b1-sq65-sk47-h2-d64", "b2-sq33-sk70-h2-d40-causal", "b1-sq17-sk17-h1-d128-causal"])
def test_fp8_forward(shape, causal):
    b, sq, sk, h, d = shape
    q, k, v = randn(b, sq, h, d, dtype=torch.float32), randn(b, sk, h, d, dtype=torch.float32, scale=2.0), randn(b, sk, h, d, dtype=torch.float32)
    (q8, qd), (k8, kd), (v8, vd) = quantize(q), quantize(k), quantize(v)
    out, lse, _ = flash_attn_func(q8, k8, v8, causal=causal, q_descale=qd, k_descale=kd, v_descale=vd,
                                  return_attn_probs=True)
    assert out.dtype == torch.bfloat16
    deq = [x.to(torch.float64) * s.to(torch.float64) for x, s in ((q8, qd), (k8, kd), (v8, vd))]
    ref, ref_lse = attention_ref(*deq, causal=causal)
    lowp = torch_fp8_attention(*[x.float() for x in deq], causal=causal)
    assert_close(out, ref, lowp)
    assert torch.allclose(lse, ref_lse, rtol=1e-3, atol=1e-3), (lse - ref_lse).abs().max()


def test_fp8_rejects():
    q8 = torch.randn(1, 8, 2, 32, device=DEVICE).to(FP8)
    with pytest.raises(TypeError, match="q_descale"):
        flash_attn_func(q8, q8, q8, q_descale=torch.ones(2, device=DEVICE))
    with pytest.raises(NotImplementedError, match="dropout"):
        flash_attn_func(q8, q8, q8, dropout_p=0.1)
    with pytest.raises(ValueError, match="float8_e4m3fn inputs only"):
        x = torch.randn(1, 8, 2, 32, device=DEVICE, dtype=torch.float16)
        flash_attn_func(x, x, x, v_descale=torch.ones(1, device=DEVICE))
    with pytest.raises(TypeError, match="share a dtype"):
        flash_attn_func(q8, q8, torch.randn(1, 8, 2, 32, device=DEVICE, dtype=torch.bfloat16))
