"""Bad input gets a ValueError/TypeError naming the argument; features not built raise
NotImplementedError."""

import pytest
import torch

from flashtriton import flash_attn_func, flash_attn_varlen_func, scaled_dot_product_attention
from helpers import DEVICE


def t(*shape, dtype=torch.float16):
    return torch.randn(*shape, device=DEVICE).to(dtype)


Q, K, V = (1, 8, 2, 32), (1, 8, 2, 32), (1, 8, 2, 32)


@pytest.mark.parametrize("args,kw,exc,match", [
    ((t(*Q, dtype=torch.int32), t(*K), t(*V)), {}, TypeError, "q: dtype"),
    ((t(*Q, dtype=torch.float64), t(*K, dtype=torch.float64), t(*V, dtype=torch.float64)), {}, TypeError, "float64"),
    ((t(*Q), t(*K, dtype=torch.bfloat16), t(*V)), {}, TypeError, "share a dtype"),
    ((t(8, 2, 32), t(*K), t(*V)), {}, ValueError, "q: expected a 4-D"),
    (("q", t(*K), t(*V)), {}, TypeError, "q: expected a torch.Tensor"),
    ((t(*Q), t(2, 8, 2, 32), t(2, 8, 2, 32)), {}, ValueError, "batch sizes differ"),
    ((t(*Q), t(1, 8, 2, 32), t(1, 9, 2, 32)), {}, ValueError, "k and v must agree"),
    ((t(1, 8, 3, 32), t(*K), t(*V)), {}, ValueError, "multiple of nheads_k"),
    ((t(*Q), t(1, 8, 2, 64), t(*V)), {}, ValueError, "head dims differ"),
    ((t(1, 8, 2, 12), t(1, 8, 2, 12), t(1, 8, 2, 12)), {}, ValueError, "head dim 12"),
    ((t(1, 8, 2, 264), t(1, 8, 2, 264), t(1, 8, 2, 264)), {}, ValueError, "head dim 264"),
    ((t(1, 0, 2, 32), t(*K), t(*V)), {}, ValueError, "seqlen must be"),
    ((t(*Q), t(*K), t(*V)), {"dropout_p": 1.5}, ValueError, "dropout_p"),
    ((t(*Q), t(*K), t(*V)), {"window_size": (-2, 3)}, ValueError, "window_size"),
    ((t(*Q), t(*K), t(*V)), {"window_size": 4}, ValueError, "window_size"),
    ((t(*Q), t(*K), t(*V)), {"softcap": -1.0}, ValueError, "softcap"),
    ((t(*Q), t(*K), t(*V)), {"softmax_scale": "x"}, TypeError, "softmax_scale"),
    ((t(*Q), t(*K), t(*V)), {"alibi_slopes": torch.ones(2, dtype=torch.float16)}, TypeError, "alibi_slopes: expected float32"),
    ((t(*Q), t(*K), t(*V)), {"alibi_slopes": torch.ones(3)}, ValueError, "alibi_slopes: expected shape"),
], ids=lambda x: None)
def test_flash_attn_func_rejects(args, kw, exc, match):
    with pytest.raises(exc, match=match):
        flash_attn_func(*args, **kw)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs two devices (CPU and CUDA)")
def test_different_devices():
    with pytest.raises(ValueError, match="one device"):
        flash_attn_func(t(*Q).cuda(), t(*K).cpu(), t(*V).cpu())


def test_different_devices_meta():
    """Without a GPU, the meta device stands in for the second device."""
    with pytest.raises(ValueError, match="one device"):
        flash_attn_func(t(*Q), t(*K).to("meta"), t(*V))


@pytest.mark.parametrize("kw,exc,match", [
    ({"attn_mask": torch.ones(8, 8, dtype=torch.int64)}, TypeError, "attn_mask: expected bool"),
    ({"attn_mask": torch.ones(3, 8, 8, dtype=torch.bool)}, ValueError, "does not broadcast"),
    ({"attn_mask": torch.ones(8, 8, dtype=torch.bool), "is_causal": True}, ValueError, "cannot both"),
    ({"attn_mask": "requires_grad"}, NotImplementedError, "mask"),
    ({"dropout_p": -0.2}, ValueError, "dropout_p"),
])
def test_sdpa_rejects(kw, exc, match):
    q, k, v = (t(1, 2, 8, 32) for _ in range(3))
    if isinstance(kw.get("attn_mask"), str):
        kw["attn_mask"] = torch.zeros(8, 8, device=DEVICE, requires_grad=True)
    elif "attn_mask" in kw:
        kw["attn_mask"] = kw["attn_mask"].to(DEVICE)
    with pytest.raises(exc, match=match):
        scaled_dot_product_attention(q, k, v, **kw)


def test_sdpa_gqa_needs_flag():
    with pytest.raises(ValueError, match="enable_gqa"):
        scaled_dot_product_attention(t(1, 4, 8, 32), t(1, 2, 8, 32), t(1, 2, 8, 32))


@pytest.mark.parametrize("cu_q,exc,match", [
    (torch.tensor([0, 4, 8], dtype=torch.int64), TypeError, "cu_seqlens_q: expected a 1-D int32"),
    (torch.tensor([0, 8], dtype=torch.int32), ValueError, "batch \\+ 1"),
])
def test_varlen_rejects(cu_q, exc, match):
    q, k, v = t(8, 2, 32), t(8, 2, 32), t(8, 2, 32)
    cu_k = torch.tensor([0, 4, 8], dtype=torch.int32, device=DEVICE)
    with pytest.raises(exc, match=match):
        flash_attn_varlen_func(q, k, v, cu_q.to(DEVICE), cu_k, 8, 8)


@pytest.mark.parametrize("block_m,warps", [(96, 4), (192, 8), (128, 8 * 2)])
def test_gluon_forward_rejects_consumer_rows(block_m, warps):
    """Each consumer warpgroup's rows (block_m over two consumers, three at 192) must fill its
    warps' 16-row MMA slices; the launcher says so before it touches the device."""
    from flashtriton.configs import make_params
    from flashtriton.kernels.fwd_gluon import attn_fwd_gluon

    q = t(1, 64, 2, 64)
    with pytest.raises(ValueError, match=f"block_m={block_m} with num_warps={warps}"):
        attn_fwd_gluon(q, q, q, make_params(64), block_m, 128, warps)


@pytest.mark.parametrize("block_m,regs", [(192, 168), (192, 156), (128, 256), (128, 16)])
def test_gluon_forward_rejects_consumer_regs(block_m, regs):
    """A consumer's registers (``regs``) are a multiple of 8 and leave the producer warpgroup
    its floor of 24 a thread: at most 160 on three consumers, 248 on two."""
    from flashtriton.configs import make_params
    from flashtriton.kernels.fwd_gluon import attn_fwd_gluon

    q = t(1, 64, 2, 64)
    with pytest.raises(ValueError, match=f"regs={regs} on {block_m // 64} consumers"):
        attn_fwd_gluon(q, q, q, make_params(64), block_m, 128, 4, regs=regs)


def test_consumer_regs_default():
    """Two consumers run on 240 registers a thread, three on 160, and each default leaves the
    producer warpgroup its floor."""
    from flashtriton.kernels.fwd_gluon import CONSUMER_REGS, PRODUCER_MIN_REGS, SM_REGISTERS

    assert CONSUMER_REGS == {2: 240, 3: 160}
    for n, regs in CONSUMER_REGS.items():
        assert SM_REGISTERS - n * 128 * regs >= 128 * PRODUCER_MIN_REGS


def test_gluon_launchers_reject_unknown_options():
    """The persistent forward's tile order is 'head', 'row', 'greedy[N]' or None (a greedy table
    in either pass only with a persistent launch), and head dim 256 does not run
    on three consumers nor sum P on the tensor cores (nor does the half-width last key step
    run there, or on tiles that do not halve into 16-key steps); the backward defers dQ only when it is
    split (and waits for it on `empty` only when deferred), and adds into a dQ accumulator only
    if it is float32, contiguous and holds the runs of q's rows (``dq_runs_numel``); the head-dim-256 dK/dV and dQ kernels take
    head dim 256, one warpgroup per consumer, 64-key tiles and 64-query blocks. Refused before
    the device is touched."""
    from flashtriton.configs import make_params
    from flashtriton.kernels.bwd_gluon import attn_bwd_gluon
    from flashtriton.kernels.fwd_gluon import attn_fwd_gluon

    q = t(1, 64, 2, 64)
    with pytest.raises(ValueError, match="tile_order='diagonal'"):
        attn_fwd_gluon(q, q, q, make_params(64, causal=True), 128, 128, 4, 2, False, True,
                       "diagonal")
    # a greedy tile table ('greedy' or 'greedyN', N >= 1) lists a persistent launch's tiles
    with pytest.raises(ValueError, match="'greedy' or 'greedyN'"):
        attn_fwd_gluon(q, q, q, make_params(64, causal=True), 128, 128, 4, 2, False, True,
                       "greedy0")
    with pytest.raises(ValueError, match="needs persistent=True"):
        attn_fwd_gluon(q, q, q, make_params(64, causal=True), 128, 128, 4, 2, False, False,
                       "greedy")
    with pytest.raises(ValueError, match="with a persistent launch"):
        attn_bwd_gluon(q, q, q, q, q, q, make_params(64, causal=True), split_dq=True,
                       tile_order="greedy")
    q256 = t(1, 64, 2, 256)  # head dim 256: two consumers only
    for blocks in ((192, 64, 4, 2, False, True), (192, 64, 4, 2, False, False)):
        with pytest.raises(ValueError, match="head dim 256 runs two consumers"):
            attn_fwd_gluon(q256, q256, q256, make_params(256), *blocks)
    with pytest.raises(ValueError, match="rowsum_mma at head dim 256"):
        attn_fwd_gluon(q256, q256, q256, make_params(256), 128, 64, 4, 2, True, True,
                       rowsum_mma=True)
    # the half-width last step: head dims 64 and 128, key tiles that halve into 16-key steps
    with pytest.raises(ValueError, match="half_tail with head dim 256"):
        attn_fwd_gluon(q256, q256, q256, make_params(256, causal=True), 128, 64, 4, 2, True,
                       True, half_tail=True)
    with pytest.raises(ValueError, match="half_tail with head dim 64 and block_n=16"):
        attn_fwd_gluon(q, q, q, make_params(64, causal=True), 128, 16, 4, 2, True,
                       half_tail=True)
    with pytest.raises(ValueError, match="defer_dq needs split_dq"):
        attn_bwd_gluon(q, q, q, q, q, q, make_params(64), defer_dq=True)
    with pytest.raises(ValueError, match="dq_on_empty needs defer_dq"):
        attn_bwd_gluon(q, q, q, q, q, q, make_params(64), split_dq=True, dq_on_empty=True)
    with pytest.raises(ValueError, match="dq_alternate needs dq_on_empty"):
        attn_bwd_gluon(q, q, q, q, q, q, make_params(64), split_dq=True, defer_dq=True,
                       dq_alternate=True)
    q128 = t(1, 64, 2, 128)
    with pytest.raises(ValueError, match="dq_alternate at head dim 64 only"):
        attn_bwd_gluon(q128, q128, q128, q128, q128, q128, make_params(128), split_dq=True,
                       defer_dq=True, dq_on_empty=True, dq_alternate=True)
    # dq: the float32 runs (dq_runs_numel(q, 64) = 1 · 2 · 64 · 64 values), contiguous
    for dq in (torch.zeros(q.shape, dtype=torch.bfloat16), torch.zeros(1, 64, 2, 32),
               torch.zeros(1, 2, 64, 64).transpose(1, 2), torch.zeros(8193)):
        with pytest.raises(ValueError, match="dq must be a contiguous float32 tensor of 8192"):
            attn_bwd_gluon(q, q, q, q, q, q, make_params(64), dq=dq.to(q.device))
    # the head-dim-256 dK/dV kernel: head dim 256, one warpgroup per consumer, 64 x 64 blocks
    from flashtriton.kernels.bwd_gluon_d256 import attn_bwd_dkdv_gluon_d256

    with pytest.raises(ValueError, match="covers 256, not 64"):
        attn_bwd_dkdv_gluon_d256(q, q, q, q, q, q, make_params(64))
    for kw in ({"num_warps": 8}, {"block_n": 128}, {"block_m": 32}):
        with pytest.raises(ValueError, match="one warpgroup per consumer"):
            attn_bwd_dkdv_gluon_d256(q256, q256, q256, q256, q256, q256, make_params(256), **kw)
    from flashtriton.kernels.bwd_gluon_d256_dq import attn_bwd_dq_gluon_d256

    with pytest.raises(ValueError, match="covers 256, not 64"):
        attn_bwd_dq_gluon_d256(q, q, q, q, q, q, make_params(64))
    for kw in ({"num_warps": 8}, {"block_n": 128}, {"block_m": 32}):
        with pytest.raises(ValueError, match="one warpgroup per consumer"):
            attn_bwd_dq_gluon_d256(q256, q256, q256, q256, q256, q256, make_params(256), **kw)
