"""The custom ops under torch.library.opcheck and a real torch.compile(fullgraph=True)."""

import torch

import flashtriton.ops as ops
from flashtriton import flash_attn_func, scaled_dot_product_attention
from flashtriton.reference import attention_ref
from helpers import check_attention, randn


def _fwd_args(q, k, v):
    return (q, k, v, None, None, None, None, q.shape[1], k.shape[1], 0.125, -1, 0, True, 0.0, False,
            0.0, False, None, None)


def test_opcheck_forward():
    q, k, v = (randn(1, 19, 2, 32, dtype=torch.float16, requires_grad=True) for _ in range(3))
    torch.library.opcheck(ops.attn_fwd_op, _fwd_args(q, k, v),
                          test_utils=("test_schema", "test_faketensor", "test_autograd_registration"))


def test_compile_fullgraph_forward_backward():
    """A function calling flash_attn_func compiles with no graph break, forward and backward."""
    torch._dynamo.reset()

    def block(q, k, v, w):
        out = flash_attn_func(q * w, k, v, causal=True)
        return (out.float() ** 2).mean()

    compiled = torch.compile(block, fullgraph=True)
    q, k, v = (randn(2, 23, 2, 32, dtype=torch.float16) for _ in range(3))
    w = torch.tensor(1.5, device=q.device, dtype=torch.float16)

    def ours(q, k, v):
        return compiled(q, k, v, w)

    def ref(q, k, v, upcast):
        out = attention_ref(q * w.to(q.dtype), k, v, causal=True, upcast=upcast)[0]
        return (out.to(torch.float64 if upcast else torch.float32) ** 2).mean()

    check_attention(ours, ref, (q, k, v), grad_out=torch.tensor(1.0, device=q.device))


def test_compile_sdpa_dropin():
    torch._dynamo.reset()
    f = torch.compile(lambda q, k, v: scaled_dot_product_attention(q, k, v, is_causal=True),
                      fullgraph=True)
    q, k, v = (randn(1, 2, 17, 16, dtype=torch.float32) for _ in range(3))
    from flashtriton.reference import sdpa_ref
    import torch.nn.functional as F
    check_attention(f, lambda q, k, v, upcast: (sdpa_ref(q, k, v, is_causal=True) if upcast else
                                                 F.scaled_dot_product_attention(q, k, v, is_causal=True)),
                    (q, k, v))
