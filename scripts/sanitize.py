"""Forward and backward on a few odd shapes, for `compute-sanitizer --tool memcheck`:

    PYTHONPATH=src compute-sanitizer --tool memcheck python3 scripts/sanitize.py \
        [--gluon-only | --d256-only]

``--gluon-only``: just the Gluon kernels' launches (quick; also for ``--tool synccheck``).
``--d256-only``: just the head-dim-256 Gluon launches (``d256``), the quickest check of them.
"""
import sys

import torch

from flashtriton import flash_attn_func, flash_attn_varlen_func, scaled_dot_product_attention

torch.manual_seed(0)
GLUON_ONLY = "--gluon-only" in sys.argv[1:]
D256_ONLY = "--d256-only" in sys.argv[1:]
unknown = [a for a in sys.argv[1:] if a not in ("--gluon-only", "--d256-only")]
if unknown or (GLUON_ONLY and D256_ONLY):
    sys.exit(f"sanitize.py: takes --gluon-only or --d256-only, not {' '.join(sys.argv[1:])}")


def everything_else():
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
    # session-2 paths: atomic dQ (default at d128) and the deterministic two-kernel backward,
    # dropout's grouped lanes (forward and both backward paths), float8 with the keys-contiguous V,
    # and the Gluon forward
    for deterministic in (False, True):
        q, k, v = (torch.randn(2, 157, 4, 128, device="cuda", dtype=torch.bfloat16,
                               requires_grad=True) for _ in range(3))
        o4 = flash_attn_func(q, k, v, causal=True, dropout_p=0.2, deterministic=deterministic)
        o4.backward(torch.randn_like(o4))
    q8, k8, v8 = (torch.randn(1, 200, 2, 128, device="cuda").to(torch.float8_e4m3fn) for _ in range(3))
    flash_attn_func(q8, k8, v8, causal=True)


def d256():
    """The head-dim-256 Gluon kernels (session 18): the forward persistent (O through Q's
    buffers) and one program per tile; the backward's dK/dV kernel persistent and not, then
    its dQ kernel; GQA, odd lengths, causal and not; persistent with more tiles than SMs on the
    greedy tables (session 44: both kernels, the model's group and groups of 2 heads)."""
    from flashtriton.configs import KernelConfig, make_params
    from flashtriton.kernels.bwd import attn_bwd
    from flashtriton.kernels.fwd import attn_fwd
    from flashtriton.kernels.fwd_gluon import attn_fwd_gluon

    q2 = torch.randn(2, 333, 4, 256, device="cuda", dtype=torch.bfloat16)
    k2 = torch.randn(2, 301, 2, 256, device="cuda", dtype=torch.bfloat16)
    for causal in (False, True):
        params = make_params(256, causal=causal)
        for persistent in (True, False):
            attn_fwd_gluon(q2, k2, k2, params, 128, 64, 4, 2, True, persistent)
        o2, lse2 = attn_fwd(q2, k2, k2, params)
        for persistent in (True, False):
            attn_bwd(torch.randn_like(o2), q2, k2, k2, o2, lse2, params,
                     config=KernelConfig(64, 64, 4, 2, gluon=True, fused_dq=False,
                                         persistent=persistent))
    q3 = torch.randn(2, 1333, 8, 256, device="cuda", dtype=torch.bfloat16)  # 336 row blocks
    k3 = torch.randn(2, 1201, 4, 256, device="cuda", dtype=torch.bfloat16)
    params = make_params(256, causal=True)
    o3, lse3 = attn_fwd(q3, k3, k3, params)
    for order in ("greedy", "greedy2"):
        attn_bwd(torch.randn_like(o3), q3, k3, k3, o3, lse3, params,
                 config=KernelConfig(64, 64, 4, 2, gluon=True, fused_dq=False, persistent=True,
                                     tile_order=order))


if not (GLUON_ONLY or D256_ONLY):
    everything_else()
if torch.cuda.get_device_capability()[0] == 9 and not D256_ONLY:
    from flashtriton.configs import make_params
    from flashtriton.kernels.fwd_gluon import attn_fwd_gluon

    qg, kg, vg = (torch.randn(1, 333, 2, 128, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    for causal in (False, True):  # with and without ping-pong, two- and three-slot rings
        for pingpong in (False, True):
            attn_fwd_gluon(qg, kg, vg, make_params(128, causal=causal), 128, 128, 4, 3, pingpong)
            attn_fwd_gluon(qg, kg, vg, make_params(128, causal=causal), 128, 128, 4, 2, pingpong)
    q64 = torch.randn(2, 700, 2, 64, device="cuda", dtype=torch.float16)
    attn_fwd_gluon(q64, q64, q64, make_params(64, causal=True), 128, 128, 4, 2, True)
    # the persistent forward: more tiles than SMs, GQA, causal and not, ping-pong
    qp = torch.randn(3, 777, 16, 128, device="cuda", dtype=torch.bfloat16)
    kp = torch.randn(3, 901, 4, 128, device="cuda", dtype=torch.bfloat16)
    for causal in (False, True):
        attn_fwd_gluon(qp, kp, kp, make_params(128, causal=causal), 128, 128, 4, 2, True, True)
    # three consumers (block_m 192), one program per tile and persistent, ping-pong or not;
    # causal, so consumers skip tiles right of their rows
    q3 = torch.randn(3, 777, 16, 64, device="cuda", dtype=torch.bfloat16)
    k3 = torch.randn(3, 901, 4, 64, device="cuda", dtype=torch.bfloat16)
    for causal in (False, True):
        for pingpong in (False, True):
            for persistent in (False, True):
                attn_fwd_gluon(q3, k3, k3, make_params(64, causal=causal), 192, 128, 4, 2,
                               pingpong, persistent)
    # persistent causal tiles listed row block by row block across the heads
    for block_m in (128, 192):
        attn_fwd_gluon(q3, k3, k3, make_params(64, causal=True), block_m, 128, 4, 2, False, True,
                       "row")
    # persistent causal tiles from a greedy table (the model's group, and groups of 2 heads)
    for order in ("greedy", "greedy2"):
        for block_m in (128, 192):
            attn_fwd_gluon(q3, k3, k3, make_params(64, causal=True), block_m, 128, 4, 2, True,
                           True, order)
        attn_fwd_gluon(qp, kp, kp, make_params(128, causal=True), 128, 128, 4, 2, True, True,
                       order)
    # the half-width last key step (half_tail; on by default in the causal calls above) without
    # a mask, where 901 keys leave a last tile of 5: persistent and one program per tile, two
    # and three consumers; and rows that see no key at all (700 queries against 300 keys)
    for block_m in (128, 192):
        for persistent in (False, True):
            attn_fwd_gluon(q3, k3, k3, make_params(64), block_m, 128, 4, 2, True, persistent,
                           half_tail=True)
    attn_fwd_gluon(qp, kp, kp, make_params(128), 128, 128, 4, 2, True, True, half_tail=True)
    qn = torch.randn(2, 700, 8, 64, device="cuda", dtype=torch.bfloat16)
    kn = torch.randn(2, 300, 4, 64, device="cuda", dtype=torch.bfloat16)
    for block_m in (128, 192):
        attn_fwd_gluon(qn, kn, kn, make_params(64, causal=True), block_m, 128, 4, 2, True, True,
                       "greedy")
    # the Gluon backward as shipped (split dQ, GQA at 128), odd lengths
    for d, hk, dtype in ((128, 2, torch.bfloat16), (64, 1, torch.float16)):
        q = torch.randn(1, 333, 4, d, device="cuda", dtype=dtype, requires_grad=True)
        k, v = (torch.randn(1, 301, hk, d, device="cuda", dtype=dtype, requires_grad=True)
                for _ in range(2))
        for causal in (False, True, True):  # the repeated call replays its call plans
            o5 = flash_attn_func(q, k, v, causal=causal)  # persistent (short)
            o5.backward(torch.randn_like(o5))
    # the backward's persistent launch with more tiles than SMs, and its one-program-per-tile
    # launch (the d128 default from 8192 keys until session 59), causal also on greedy
    # tile tables: at d128 dQ's product in its own step
    # or the next, waiting on its own barriers or `empty`; at d64 (GQA, an odd step count) the
    # warpgroups taking turns at dQ (dq_alternate) or not
    from flashtriton.configs import KernelConfig
    from flashtriton.kernels.bwd import attn_bwd
    from flashtriton.kernels.fwd import attn_fwd

    variants = {128: [dict(defer_dq=d, dq_on_empty=e)
                      for d, e in ((False, False), (True, False), (True, True))],
                64: [dict(defer_dq=True, dq_on_empty=True, dq_alternate=a) for a in (True, False)]}
    for d, (b, sq, h, sk, hk) in ((128, (3, 777, 32, 901, 16)), (64, (2, 333, 8, 301, 2))):
        qb = torch.randn(b, sq, h, d, device="cuda", dtype=torch.bfloat16)
        kb = torch.randn(b, sk, hk, d, device="cuda", dtype=torch.bfloat16)
        for causal in (False, True):
            params = make_params(d, causal=causal)
            ob, lseb = attn_fwd(qb, kb, kb, params)
            for persistent, order in ((True, None), (False, None), (True, "greedy"),
                                      (True, "greedy2")):
                if order and not causal:
                    continue  # the tables are for causal launches
                for kw in variants[d]:
                    attn_bwd(torch.randn_like(ob), qb, kb, kb, ob, lseb, params,
                             config=KernelConfig(64, 128, 4, 2, gluon=True, split_dq=True,
                                                 persistent=persistent, tile_order=order, **kw))
if torch.cuda.get_device_capability()[0] == 9:
    d256()
torch.cuda.synchronize()
print("sanitize script finished")
