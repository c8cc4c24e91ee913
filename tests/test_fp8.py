"""float8_e4m3fn forward with per-tensor descales: against the float64 reference on the
dequantised inputs, with the STYLE.md rule where the low-precision side is PyTorch running the
same algorithm at fp8 (probabilities rounded to e4m3 before the P·V product).

Under the interpreter the kernel keeps P in fp32 for P·V (the interpreter's fp32->fp8 conversion
does not round like the hardware); the fp8 Q·K product, the descales and the bf16 output are the
same code as on the GPU, where P is rounded to e4m3 too.

On an sm_90 GPU the public function runs the Gluon forward (kernels/fwd_gluon.py) at head dims
64, 128 and 256; its cases below call its launcher directly and are skipped elsewhere (the
interpreter cannot run Gluon). The copy of V it reads (``fp8_keys_minor``) is checked on CPU."""

import math

import pytest
import torch

from flashtriton import configs, flash_attn_func
from flashtriton.configs import make_params
from flashtriton.reference import attention_ref, visible_mask
from helpers import DEVICE, assert_close, assert_lse_close, no_call_plans, randn

from flashtriton.kernels.keys_minor import ORDER, keys_minor

try:  # Gluon is in Triton 3.5 and newer
    from flashtriton.kernels.fwd_gluon import FP8_ROWSUM_MMA_HEAD_DIMS, attn_fwd_gluon
except ImportError:
    attn_fwd_gluon, FP8_ROWSUM_MMA_HEAD_DIMS = None, ()

GLUON = DEVICE == "cuda" and torch.cuda.get_device_capability()[0] == 9
gluon_only = pytest.mark.skipif(
    not GLUON, reason="Gluon kernels run on an sm_90 GPU only; the interpreter cannot run them")

FP8 = torch.float8_e4m3fn


def quantize(x):
    """Per-tensor scaling to e4m3's range; returns (x8, descale) with x ≈ x8 * descale."""
    descale = x.abs().max().float() / 448.0
    return (x / descale).to(FP8), descale.reshape(1).to(torch.float32)


def torch_fp8_attention(q, k, v, causal):
    """PyTorch doing what an fp8 kernel does: scores in fp32, probabilities (scaled by the row
    max) rounded to e4m3, products accumulated in fp32, output rounded to bf16. K and V may have
    fewer heads (GQA); a row that sees no key gets 0."""
    b, sq, h, d = q.shape
    group = h // k.shape[2]
    k, v = k.repeat_interleave(group, dim=2), v.repeat_interleave(group, dim=2)
    s = torch.einsum("bqhd,bkhd->bhqk", q.float(), k.float()) / d ** 0.5
    keep = visible_mask(sq, k.shape[1], causal=causal, device=q.device)
    if keep is not None:
        s = s.masked_fill(~keep, float("-inf"))
    m = s.amax(-1, keepdim=True)
    p = torch.exp(s - torch.where(torch.isfinite(m), m, 0.0))
    l = p.sum(-1).transpose(1, 2)[..., None]
    out = torch.einsum("bhqk,bkhd->bqhd", p.to(FP8).float(), v.float()) / torch.where(l > 0, l, 1.0)
    return out.to(torch.bfloat16)


def quantized_inputs(b, sq, sk, h, hk, d, scale=1.0):
    """Fresh q, k, v (``scale`` times normal draws) quantized per tensor: ((q8, k8, v8),
    (qd, kd, vd), float64 dequantized)."""
    q = randn(b, sq, h, d, dtype=torch.float32, scale=scale)
    k = randn(b, sk, hk, d, dtype=torch.float32, scale=2.0 * scale)
    v = randn(b, sk, hk, d, dtype=torch.float32, scale=scale)
    (q8, qd), (k8, kd), (v8, vd) = quantize(q), quantize(k), quantize(v)
    deq = [x.to(torch.float64) * s.to(torch.float64) for x, s in ((q8, qd), (k8, kd), (v8, vd))]
    return (q8, k8, v8), (qd, kd, vd), deq


def lse_bound(q, k):
    """How far a float8 kernel's lse may be from the float64 one: 1e-3, plus what the float8
    tensor cores lose on the scores. The lse moves by a softmax-weighted mean of the scores'
    errors, and the tensor cores' float8 products (their sums kept to about 13 bits) were off
    by up to 7.6e-4 (2^-10.4) of the largest product sum at K = 256 through cuBLAS
    (scripts/fp8_errors.py, docs/perf-log.md, session 65): 2^-10 of the largest |score|, in
    natural-log units, from the dequantized float64 q and k."""
    d = q.shape[-1]
    group = q.shape[2] // k.shape[2]
    s = torch.einsum("bqhd,bkhd->bhqk", q, k.repeat_interleave(group, dim=2)) / d ** 0.5
    return 1e-3 + 2.0 ** -10 * s.abs().max().item()


# the float8 Gluon kernel's row sums on the tensor cores are of P as rounded to e4m3 (the
# weights P·V gives V), each term within a relative 2^-4 of its float32 value, so log(l) is within
# log(1 + 2^-4) of the float32 sums' on top of ``lse_bound``
ROWSUM_MMA_EXTRA = math.log1p(2.0 ** -4)


def rowsum_extra(d):
    """The lse's extra slack for the Gluon float8 kernel's default at head dim d."""
    return ROWSUM_MMA_EXTRA if d in FP8_ROWSUM_MMA_HEAD_DIMS else 0.0


def check_fp8(out, lse, deq, causal, extra=0.0):
    """out against the float64 reference by the STYLE.md rule (the low-precision side:
    ``torch_fp8_attention``); lse with the reference's -inf pattern and within ``lse_bound``
    (plus ``extra``) elsewhere."""
    assert out.dtype == torch.bfloat16
    ref, ref_lse = attention_ref(*deq, causal=causal)
    lowp = torch_fp8_attention(*[x.float() for x in deq], causal=causal)
    assert_close(out, ref, lowp)
    assert_lse_close(lse, ref_lse, lse_bound(deq[0], deq[1]) + extra)


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
    # (on sm_90 the Gluon kernel runs where it is built, its row sums as it sums them by default)
    extra = rowsum_extra(d) if GLUON and (d, causal) in configs.FP8_BY_KEYS else 0.0
    assert torch.allclose(lse, ref_lse, rtol=1e-3, atol=1e-3 + extra), (lse - ref_lse).abs().max()


# (b, sq, sk, h, hk, d, causal, (block_m, block_n, warps, stages, pingpong[, persistent[,
# tile_order]]))
PP, PP3, PP_D256 = (128, 128, 4, 2, True), (128, 128, 4, 3, True), (128, 64, 4, 2, True)
THREE = (192, 128, 4, 2, True)  # three consumers (P carried as float16 pairs)
THREE_N64 = (192, 64, 4, 3, True)  # ... on 64-key tiles, three slots (d128: not shipped)
PERS = (*PP, True)  # persistent: one program per SM walks the tiles (P as float16 pairs)
GLUON_FP8_CASES = [
    (2, 1000, 1000, 4, 4, 128, False, PP),
    (2, 1000, 1000, 4, 4, 128, True, PP),
    (1, 1, 1, 2, 2, 128, True, PP),
    (1, 129, 65, 4, 2, 128, True, PP),        # seqlen_q > seqlen_k: rows that see no key
    (1, 65, 300, 4, 1, 64, True, PP),         # seqlen_q < seqlen_k, MQA
    (1, 257, 383, 2, 2, 64, False, PP),       # keys not a multiple of 32 (V's copy padded)
    (2, 777, 901, 8, 2, 128, False, PP3),     # GQA, three ring slots
    (1, 300, 777, 2, 2, 256, True, PP_D256),
    (1, 513, 259, 2, 2, 256, False, PP_D256),
    (1, 4096, 4096, 2, 2, 128, True, (128, 128, 4, 2, False)),  # no ping-pong
    (1, 2048, 2048, 2, 2, 64, False, (128, 64, 4, 3, True)),    # 64-key tiles
    (1, 4096, 4096, 2, 2, 64, True, THREE),
    (2, 777, 901, 4, 2, 64, False, THREE),    # GQA, a last row block of 9 rows
    (1, 65, 300, 4, 1, 64, True, THREE),      # the third consumer's rows all past the last
    (2, 1000, 1000, 4, 4, 128, True, THREE_N64),
    (1, 777, 901, 4, 2, 128, False, THREE_N64),
    # persistent; 288 and 256 tiles: every program walks more than one on a 132-SM GPU
    (3, 1500, 1500, 8, 8, 64, True, PERS),
    (3, 1500, 1500, 8, 4, 64, True, (*PERS, "greedy")),   # the host's tile table, GQA
    (4, 1024, 1024, 8, 8, 128, False, PERS),
    (2, 1000, 1000, 4, 4, 128, True, PERS),
    (2, 1000, 1000, 4, 4, 128, True, (*PERS, "greedy")),
    (2, 777, 901, 8, 2, 128, False, PERS),    # GQA
    (1, 65, 300, 4, 1, 64, True, PERS),       # seqlen_q < seqlen_k, MQA
    (1, 129, 65, 4, 2, 64, True, PERS),       # rows that see no key
    (1, 257, 383, 2, 2, 64, False, PERS),     # keys not a multiple of 32
    (2, 2048, 2048, 4, 2, 64, True, (*THREE, True)),  # three consumers persistent
    (2, 2048, 2048, 4, 2, 64, True, (*THREE_N64, True, "greedy")),  # ... on 64-key tiles
    (2, 777, 901, 4, 2, 64, False, (*THREE_N64, True)),
    # d256 persistent (O in bfloat16 buffers of its own; not shipped, session 72)
    (3, 1024, 1024, 8, 8, 256, False, (*PP_D256, True)),
    (3, 1024, 1024, 8, 4, 256, True, (*PP_D256, True, "greedy")),
    (1, 300, 777, 2, 2, 256, True, (*PP_D256, True)),
]


@gluon_only
@pytest.mark.parametrize("b,sq,sk,h,hk,d,causal,blocks", GLUON_FP8_CASES,
                         ids=[f"b{c[0]}-sq{c[1]}-sk{c[2]}-h{c[3]}/{c[4]}-d{c[5]}"
                              f"{'-causal' if c[6] else ''}-m{c[7][0]}n{c[7][1]}s{c[7][3]}"
                              f"{'-pingpong' if c[7][4] else ''}"
                              f"{'-persistent' if c[7][5:6] == (True,) else ''}"
                              f"{'-' + c[7][6] if c[7][6:] else ''}" for c in GLUON_FP8_CASES])
def test_gluon_fp8_forward(b, sq, sk, h, hk, d, causal, blocks):
    (q8, k8, v8), descales, deq = quantized_inputs(b, sq, sk, h, hk, d)
    out, lse = attn_fwd_gluon(q8, k8, v8, make_params(d, causal=causal), *blocks,
                              descale=torch.cat(descales))
    check_fp8(out, lse, deq, causal, extra=rowsum_extra(d))


@gluon_only
@pytest.mark.parametrize("regs", [152])
@pytest.mark.parametrize("b,sq,sk,h,hk,d,causal,blocks", [
    (2, 2048, 2048, 4, 2, 64, True, (*THREE, True, "greedy")),   # persistent, the host's table
    (2, 777, 901, 4, 2, 64, False, (*THREE, True)),              # persistent, GQA
    (2, 777, 901, 4, 2, 64, False, THREE),                       # one program per tile
], ids=["b2-sq2048-d64-causal-persistent-greedy", "b2-sq777-sk901-d64-persistent",
        "b2-sq777-sk901-d64"])
def test_gluon_fp8_three_consumers_on_fewer_registers(b, sq, sk, h, hk, d, causal, blocks,
                                                      regs):
    """Three float8 consumers on fewer registers a thread than ``CONSUMER_REGS``' 160
    (``attn_fwd_gluon``'s ``regs``; at 152 ptxas spills less a step, session 76): the same
    results, persistent and one program per tile."""
    (q8, k8, v8), descales, deq = quantized_inputs(b, sq, sk, h, hk, d)
    out, lse = attn_fwd_gluon(q8, k8, v8, make_params(d, causal=causal), *blocks,
                              descale=torch.cat(descales), regs=regs)
    check_fp8(out, lse, deq, causal, extra=rowsum_extra(d))


@gluon_only
@pytest.mark.parametrize("rowsum_mma", [True, False], ids=["mma", "float32"])
@pytest.mark.parametrize("b,sq,sk,h,hk,d,causal", [
    (2, 1000, 1000, 4, 4, 128, False),
    (1, 129, 65, 4, 2, 128, True),           # rows that see no key
    (1, 333, 419, 4, 2, 64, True),           # shifted diagonal, GQA
    (1, 257, 383, 2, 2, 64, False),          # keys not a multiple of 32
    (1, 4096, 4096, 2, 2, 64, False),        # long rows: the sums across 32 key tiles
    (1, 2048, 2048, 2, 2, 128, True),
], ids=["b2-sq1000-d128", "b1-sq129-sk65-d128-causal", "b1-sq333-sk419-d64-causal",
        "b1-sq257-sk383-d64", "b1-sq4096-d64", "b1-sq2048-d128-causal"])
def test_gluon_fp8_forward_rowsum_mma(b, sq, sk, h, hk, d, causal, rowsum_mma):
    """``rowsum_mma`` chosen both ways on float8 inputs, whatever the default: on the tensor
    cores the lse within ``ROWSUM_MMA_EXTRA`` more, in float32 within ``lse_bound``; the
    output by the STYLE.md rule."""
    (q8, k8, v8), descales, deq = quantized_inputs(b, sq, sk, h, hk, d)
    out, lse = attn_fwd_gluon(q8, k8, v8, make_params(d, causal=causal), *PP,
                              descale=torch.cat(descales), rowsum_mma=rowsum_mma)
    check_fp8(out, lse, deq, causal, extra=ROWSUM_MMA_EXTRA if rowsum_mma else 0.0)


@gluon_only
def test_public_fp8_runs_gluon_where_it_applies(monkeypatch):
    """flash_attn_func on float8 inputs: the Gluon kernel at the head dims it builds (d64, d128,
    d256; its descales passed on, its tiling ``configs.gluon_fp8_config``'s for the call's keys,
    ``FP8_BY_KEYS``: here two consumers persistent at 333 keys, d64 three persistent at 4096
    causal and 8192), the tl kernel elsewhere (d40); all right."""
    import flashtriton.kernels.fwd as fwd

    calls = []
    real = fwd.attn_fwd_gluon

    def spy(*args, **kw):  # records the dispatch; the real kernel still runs
        calls.append((args[4], args[9], kw.get("descale")))  # block_m, persistent
        return real(*args, **kw)

    monkeypatch.setattr(fwd, "attn_fwd_gluon", spy)
    no_call_plans(monkeypatch)
    for d, causal, seqlen, want in ((128, True, 333, (128, True)), (256, False, 333, (128, True)),
                                    (256, True, 333, (128, True)), (128, False, 333, (128, True)),
                                    (64, True, 333, (128, True)), (64, False, 333, (128, True)),
                                    (64, True, 4096, (192, True)), (64, False, 8192, (192, True)),
                                    (40, True, 333, None)):
        (q8, k8, v8), (qd, kd, vd), deq = quantized_inputs(1, seqlen, seqlen, 2, 2, d)
        before = len(calls)
        out, lse, _ = flash_attn_func(q8, k8, v8, causal=causal, q_descale=qd, k_descale=kd,
                                      v_descale=vd, return_attn_probs=True)
        expect_gluon = (d, causal) in configs.FP8_BY_KEYS
        assert len(calls) == before + expect_gluon == before + (want is not None), (d, causal)
        if expect_gluon:
            block_m, persistent, descale = calls[-1]
            assert torch.equal(descale, torch.cat([qd, kd, vd])), "descales not passed on"
            cfg = configs.gluon_fp8_config(d, causal, seqlen)
            assert (block_m, persistent) == (cfg.block_m, cfg.persistent) == want, (
                d, causal, seqlen)
        check_fp8(out, lse, deq, causal, extra=rowsum_extra(d) if expect_gluon else 0.0)


@gluon_only
@pytest.mark.parametrize("d,causal", [(64, True), (128, False), (256, True)])
def test_public_fp8_calls_replay_their_plan(monkeypatch, d, causal):
    """A plain float8 call stores a call plan (V's copy, then the kernel; common.py); the next
    calls with fresh data and other descales, the default descales of 1 among them, take it
    (no new plan, no new launch-cache entry) and stay right; a bfloat16 call of the same shape
    gets a plan of its own."""
    import flashtriton.kernels.fwd as fwd
    from flashtriton.kernels import common

    common.clear_launch_caches()
    replays = []
    real = fwd.run_fwd_plan

    def spy(*args):
        replays.append(args[-1])  # the descales passed on
        return real(*args)

    monkeypatch.setattr(fwd, "run_fwd_plan", spy)
    b, sq, sk, h, hk = 2, 333, 301, 4, 2
    for i, scale in enumerate((1.0, 0.25, 3.0, None)):
        (q8, k8, v8), (qd, kd, vd), deq = quantized_inputs(b, sq, sk, h, hk, d, scale or 1.0)
        if scale is None:  # no descales given, each 1: normal draws cast to float8
            q8, k8, v8 = (randn(b, s, n, d, dtype=torch.float32).to(FP8)
                          for s, n in ((sq, h), (sk, hk), (sk, hk)))
            deq = [x.to(torch.float64) for x in (q8, k8, v8)]
            out, lse, _ = flash_attn_func(q8, k8, v8, causal=causal, return_attn_probs=True)
        else:
            out, lse, _ = flash_attn_func(q8, k8, v8, causal=causal, q_descale=qd,
                                          k_descale=kd, v_descale=vd, return_attn_probs=True)
        check_fp8(out, lse, deq, causal, extra=rowsum_extra(d))
        assert len(common._PLANS) == 1, list(common._PLANS)
        if i == 0:
            compiled = len(common._COMPILED)
            assert not replays
        else:
            assert len(replays) == i and len(common._COMPILED) == compiled
            want = torch.ones(3, device=DEVICE) if scale is None else torch.cat([qd, kd, vd])
            assert torch.equal(replays[-1], want), "the call's descales were not passed on"
    flash_attn_func(*(randn(b, s, n, d, dtype=torch.bfloat16)
                      for s, n in ((sq, h), (sk, hk), (sk, hk))), causal=causal)
    assert len(common._PLANS) == 2 and len(replays) == 3


@gluon_only
def test_gluon_fp8_launcher_rejects():
    (q8, k8, v8), descales, _ = quantized_inputs(1, 64, 64, 2, 2, 128)
    params = make_params(128)
    with pytest.raises(ValueError, match="need descale"):
        attn_fwd_gluon(q8, k8, v8, params)
    with pytest.raises(ValueError, match="half_tail"):
        attn_fwd_gluon(q8, k8, v8, params, half_tail=True, descale=torch.cat(descales))
    with pytest.raises(ValueError, match="multiple of 32"):
        attn_fwd_gluon(q8, k8, v8, params, block_n=16, descale=torch.cat(descales))
    with pytest.raises(ValueError, match="rowsum_mma at head dim 256"):
        attn_fwd_gluon(*quantized_inputs(1, 64, 64, 2, 2, 256)[0], make_params(256), 128, 64,
                       descale=torch.cat(descales), rowsum_mma=True)
    x = randn(1, 64, 2, 128, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match="float8 inputs only"):
        attn_fwd_gluon(x, x, x, params, descale=torch.ones(3, device=DEVICE))


@pytest.mark.parametrize("seqlen_k,pad_to,group_order",
                         [(64, 32, True), (70, 32, True), (1, 32, True), (70, 16, False),
                          (33, 16, False)])
def test_keys_minor_copy(seqlen_k, pad_to, group_order):
    """V's keys-minor copy for the float8 forwards (the Triton kernel kernels/keys_minor.py):
    (B, Hk, D, keys padded), zeros past the keys; with ``group_order`` (the Gluon forward's)
    position 32c + i holds key 32c + ORDER[i], ORDER mapping bits [h][t][a][e] (4, 3-2, 1, 0)
    to [h][a][t][e] (fwd_gluon_tile._fp8_operand's relabelling); without, key i at i."""
    assert sorted(ORDER) == list(range(32))
    for pos in range(32):
        h, t, a, e = pos >> 4, (pos >> 2) & 3, (pos >> 1) & 1, pos & 1
        assert ORDER[pos] == 16 * h + 8 * a + 2 * t + e
    v = randn(2, seqlen_k, 3, 40, dtype=torch.float32).to(FP8)
    vt = keys_minor(v, pad_to, group_order=group_order)
    padded = -(-seqlen_k // pad_to) * pad_to
    assert vt.shape == (2, 3, 40, padded) and vt.dtype == FP8 and vt.is_contiguous()
    want = torch.zeros(2, 3, 40, padded)
    for pos in range(padded):
        key = pos // 32 * 32 + ORDER[pos % 32] if group_order else pos
        if key < seqlen_k:
            want[..., pos] = v[:, key].float().cpu()
    assert torch.equal(vt.float().cpu(), want)


def test_keys_minor_rejects():
    v = torch.zeros(1, 8, 1, 16, dtype=FP8, device=DEVICE)
    with pytest.raises(ValueError, match="multiple of 32"):
        keys_minor(v, 16, group_order=True)
    with pytest.raises(ValueError, match="contiguous"):
        keys_minor(v.transpose(1, 3), 16)


def test_fp8_descales_of_any_one_element_shape():
    """A descale is any float32 tensor of one element: 0-d, (1,) or (1, 1) give the same
    output."""
    (q8, k8, v8), (qd, kd, vd), deq = quantized_inputs(1, 19, 23, 2, 2, 40)
    outs = [flash_attn_func(q8, k8, v8, causal=True, q_descale=qd.reshape(shape),
                            k_descale=kd.reshape(shape), v_descale=vd.reshape(shape))
            for shape in ((1,), (), (1, 1))]
    assert all(torch.equal(o, outs[0]) for o in outs[1:])
    ref, _ = attention_ref(*deq, causal=True)
    assert_close(outs[0], ref, torch_fp8_attention(*[x.float() for x in deq], causal=True))


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
