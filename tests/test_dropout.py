"""Dropout: keep rate, reproducibility under torch.manual_seed, and exact agreement (forward and
gradients) with the reference applying the kernels' own mask (from the debug mask kernel)."""

import pytest
import torch

from flashtriton import flash_attn_func, flash_attn_varlen_func, scaled_dot_product_attention
from flashtriton.kernels.dropout import draw_seed, dropout_mask
from flashtriton.reference import attention_ref
from helpers import DEVICE, check_attention, randn

F16, BF16, F32 = torch.float16, torch.bfloat16, torch.float32


def kernel_mask(seed_value, b, h, sq, sk, p):
    torch.manual_seed(seed_value)
    return dropout_mask(draw_seed(DEVICE), b, h, sq, sk, p)


@pytest.mark.parametrize("p", [0.1, 0.5])
def test_keep_rate(p):
    keep = kernel_mask(3, 2, 3, 64, 96, p)
    rate = keep.float().mean().item()
    assert abs(rate - (1 - p)) < 0.02, f"keep rate {rate:.3f}, expected {1 - p:.3f}"
    # heads, rows and columns get different streams
    assert not torch.equal(keep[0, 0], keep[0, 1]) and not torch.equal(keep[0, 0], keep[1, 0])
    assert not torch.equal(keep[0, 0, 0], keep[0, 0, 1])


def test_reproducible_with_manual_seed():
    q, k, v = (randn(1, 33, 2, 32, dtype=F16) for _ in range(3))
    runs = []
    for s in (7, 7, 8):
        torch.manual_seed(s)
        runs.append(flash_attn_func(q, k, v, dropout_p=0.2))
    assert torch.equal(runs[0], runs[1])
    assert not torch.equal(runs[0], runs[2])


@pytest.mark.parametrize("dtype,shape,causal", [
    (F16, (2, 37, 29, 4, 2, 32), False),
    (BF16, (1, 65, 65, 2, 1, 64), True),
    (F32, (1, 20, 47, 2, 2, 40), True),
], ids=["f16-b2-sq37-sk29-h4/2-d32", "bf16-b1-sq65-sk65-h2/1-d64-causal", "f32-b1-sq20-sk47-h2-d40-causal"])
def test_matches_reference_with_kernel_mask(dtype, shape, causal):
    b, sq, sk, h, hk, d = shape
    p, s = 0.25, 11
    mask = kernel_mask(s, b, h, sq, sk, p)
    q, k, v = randn(b, sq, h, d, dtype=dtype), randn(b, sk, hk, d, dtype=dtype), randn(b, sk, hk, d, dtype=dtype)

    def ours(q, k, v):  # lse is that of the undropped softmax
        torch.manual_seed(s)
        out, lse, _ = flash_attn_func(q, k, v, dropout_p=p, causal=causal, return_attn_probs=True)
        return out, lse

    def ref(q, k, v, upcast):
        return attention_ref(q, k, v, causal=causal, dropout_mask=mask, dropout_p=p, upcast=upcast)

    check_attention(ours, ref, (q, k, v))


def test_varlen_dropout_uses_per_sequence_mask():
    lens = [9, 0, 21]
    h, d, p, s = 2, 32, 0.3, 5
    cu = torch.tensor([0, 9, 9, 30], dtype=torch.int32, device=DEVICE)
    q, k, v = (randn(30, h, d, dtype=F16) for _ in range(3))
    mask = kernel_mask(s, len(lens), h, max(lens), max(lens), p)

    def ours(q, k, v):
        torch.manual_seed(s)
        return flash_attn_varlen_func(q, k, v, cu, cu, max(lens), max(lens), dropout_p=p, causal=True)

    def ref(q, k, v, upcast):
        outs = []
        for i, n in enumerate(lens):
            if n == 0:
                continue
            sl = slice(int(cu[i]), int(cu[i + 1]))
            o, _ = attention_ref(q[sl][None], k[sl][None], v[sl][None], causal=True,
                                 dropout_mask=mask[i:i + 1, :, :n, :n], dropout_p=p, upcast=upcast)
            outs.append(o[0])
        return torch.cat(outs)

    check_attention(ours, ref, (q, k, v))


def test_sdpa_dropin_dropout():
    b, h, s_, d, p, s = 1, 2, 24, 16, 0.2, 9
    mask = kernel_mask(s, b, h, s_, s_, p)
    q, k, v = (randn(b, h, s_, d, dtype=F32) for _ in range(3))

    def ours(q, k, v):
        torch.manual_seed(s)
        return scaled_dot_product_attention(q, k, v, dropout_p=p, is_causal=True)

    def ref(q, k, v, upcast):
        out, _ = attention_ref(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), causal=True,
                               causal_offset=0, dropout_mask=mask, dropout_p=p, upcast=upcast)
        return out.transpose(1, 2)

    check_attention(ours, ref, (q, k, v))


@pytest.mark.parametrize("opts", [dict(window_size=(6, 2)), dict(softcap=2.0, causal=True),
                                  dict(alibi=True), dict(deterministic=True, causal=True)],
                         ids=["window6-2", "softcap2-causal", "alibi", "deterministic-causal"])
def test_dropout_combines_with_the_other_features(opts):
    """Dropout paired with window, softcap, ALiBi and the deterministic backward (GQA shape)."""
    b, sq, sk, h, hk, d = 2, 33, 45, 4, 2, 32
    p, s = 0.2, 5
    mask = kernel_mask(s, b, h, sq, sk, p)
    opts = dict(opts)
    slopes = (torch.rand(h, device=DEVICE, dtype=torch.float32) * 0.5) if opts.pop("alibi", False) else None
    deterministic = opts.pop("deterministic", False)
    q, k, v = randn(b, sq, h, d, dtype=F16), randn(b, sk, hk, d, dtype=F16), randn(b, sk, hk, d, dtype=F16)

    def ours(q, k, v):
        torch.manual_seed(s)
        return flash_attn_func(q, k, v, dropout_p=p, alibi_slopes=slopes,
                               deterministic=deterministic, **opts)

    def ref(q, k, v, upcast):
        return attention_ref(q, k, v, alibi_slopes=slopes, dropout_mask=mask, dropout_p=p,
                             upcast=upcast, **opts)[0]

    check_attention(ours, ref, (q, k, v))
