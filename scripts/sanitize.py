"""Forward and backward on a few odd shapes, for `compute-sanitizer --tool memcheck`."""
import torch

from flashtriton import flash_attn_func, flash_attn_varlen_func, scaled_dot_product_attention

torch.manual_seed(0)
for b, sq, sk, h, hk, d, causal, dtype in [(2, 129, 65, 4, 2, 80, True, torch.bfloat16),
                                            (1, 63, 255, 2, 1, 128, False, torch.float16),
                                            (1, 100, 100, 2, 2, 256, True, torch.bfloat16),
                                            (1, 77, 33, 2, 2, 40, False, torch.float32)]:
    q = torch.randn(b, sq, h, d, device="cuda", dtype=dtype, requires_grad=True)
    k = torch.randn(b, sk, hk, d, device="cuda", dtype=dtype, requires_grad=True)
    v = torch.randn(b, sk, hk, d, device="cuda", dtype=dtype, requires_grad=True)
    out = flash_attn_func(q, k, v, causal=causal, window_size=(40, -1), softcap=3.0)
    out.backward(torch.randn_like(out))
    mask = torch.rand(b, 1, sq, sk, device="cuda") > 0.5
    o2 = scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                      attn_mask=mask, enable_gqa=True)
    o2.sum().backward()
cu = torch.tensor([0, 5, 5, 70], dtype=torch.int32, device="cuda")
q = torch.randn(70, 4, 64, device="cuda", dtype=torch.float16, requires_grad=True)
o3 = flash_attn_varlen_func(q, q, q, cu, cu, 65, 65, causal=True)
o3.sum().backward()
torch.cuda.synchronize()
print("sanitize script finished")
