"""Sliding window, softcap, ALiBi and variable-length sequences, alone and combined, forward and
backward, against the float64 reference."""

import pytest
import torch

from flashtriton import flash_attn_func, flash_attn_varlen_func
from flashtriton.reference import attention_ref
from helpers import DEVICE, check_attention, randn

F16, BF16, F32 = torch.float16, torch.bfloat16, torch.float32


def opts_id(o):
    return "-".join(f"{k}{v}" for k, v in o.items()) or "plain"


FEATURES = [
    dict(window_size=(7, -1)),
    dict(window_size=(-1, 5)),
    dict(window_size=(9, 3)),
    dict(window_size=(6, -1), causal=True),
    dict(window_size=(0, 0)),
    dict(softcap=2.5),
    dict(softcap=1.0, causal=True),
    dict(alibi="h"),
    dict(alibi="bh", causal=True),
    dict(alibi="h", window_size=(8, 2), softcap=3.0),
    dict(softcap=4.0, window_size=(5, 5)),
]


def _slopes(kind, b, h):
    if kind is None:
        return None
    shape = (h,) if kind == "h" else (b, h)
    return torch.rand(*shape, device=DEVICE, dtype=torch.float32) * 0.5


@pytest.mark.parametrize("opts", FEATURES, ids=opts_id)
@pytest.mark.parametrize("dtype,shape", [
    (F16, (2, 37, 53, 4, 2, 32)),
    (BF16, (1, 65, 29, 2, 1, 64)),
    (F32, (1, 33, 33, 2, 2, 40)),
], ids=["f16-b2-sq37-sk53-h4/2-d32", "bf16-b1-sq65-sk29-h2/1-d64", "f32-b1-sq33-sk33-h2-d40"])
def test_feature(opts, dtype, shape):
    b, sq, sk, h, hk, d = shape
    opts = dict(opts)
    slopes = _slopes(opts.pop("alibi", None), b, h)
    q, k, v = randn(b, sq, h, d, dtype=dtype), randn(b, sk, hk, d, dtype=dtype), randn(b, sk, hk, d, dtype=dtype)
    check_attention(lambda q, k, v: flash_attn_func(q, k, v, alibi_slopes=slopes, **opts),
                    lambda q, k, v, upcast: attention_ref(q, k, v, alibi_slopes=slopes,
                                                          upcast=upcast, **opts)[0], (q, k, v))


def _pack(lengths, h, d, dtype):
    total = sum(lengths)
    cu = torch.tensor([0] + list(torch.tensor(lengths).cumsum(0)), dtype=torch.int32, device=DEVICE)
    return randn(total, h, d, dtype=dtype), cu


@pytest.mark.parametrize("opts", [dict(), dict(causal=True), dict(window_size=(5, 2)),
                                  dict(alibi="bh", softcap=2.0, causal=True)], ids=opts_id)
@pytest.mark.parametrize("dtype", [F16, BF16, F32])
def test_varlen(opts, dtype):
    """Packed sequences, with empty ones on either side; each matches dense attention alone."""
    lens_q = [5, 0, 33, 17, 1]
    lens_k = [9, 4, 21, 0, 16]
    h, hk, d = 4, 2, 32
    opts = dict(opts)
    slopes = _slopes(opts.pop("alibi", None), len(lens_q), h)
    q, cu_q = _pack(lens_q, h, d, dtype)
    k, cu_k = _pack(lens_k, hk, d, dtype)
    v, _ = _pack(lens_k, hk, d, dtype)

    def ours(q, k, v):
        out, lse, _ = flash_attn_varlen_func(q, k, v, cu_q, cu_k, max(lens_q), max(lens_k),
                                             alibi_slopes=slopes, return_attn_probs=True, **opts)
        return out, lse

    def ref(q, k, v, upcast):
        outs, lses = [], []
        for i in range(len(lens_q)):
            qs = q[cu_q[i]:cu_q[i + 1]][None]
            ks, vs = k[cu_k[i]:cu_k[i + 1]][None], v[cu_k[i]:cu_k[i + 1]][None]
            if qs.shape[1] == 0:
                continue
            if ks.shape[1] == 0:  # no keys: out 0, lse -inf
                outs.append(torch.zeros_like(qs[0]) + 0 * qs[0])
                lses.append(torch.full((h, qs.shape[1]), float("-inf"), device=q.device))
                continue
            o, l = attention_ref(qs, ks, vs, alibi_slopes=None if slopes is None else slopes[i:i + 1],
                                 upcast=upcast, **opts)
            outs.append(o[0])
            lses.append(l[0])
        return torch.cat(outs), torch.cat(lses, dim=1)

    check_attention(ours, ref, (q, k, v))
