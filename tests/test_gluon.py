"""The Gluon forward (kernels/fwd_gluon.py), on a Hopper GPU only: the Triton interpreter does not
run Gluon, so on CPU these tests are skipped with that reason, and the same cases go through the
portable ``tl`` kernel in the other test files.

Each case calls the Gluon launcher directly (so the test knows which kernel ran), then checks
out and lse against the float64 reference with the STYLE.md rule; a second test checks that the
public function dispatches to it where its config says so, and to the tl kernel elsewhere.
"""

import math

import pytest
import torch

from flashtriton import configs
from flashtriton.configs import KernelConfig, make_params
from flashtriton.reference import attention_ref
from helpers import (DEVICE, assert_close, assert_lse_close, check_attention, no_call_plans,
                     randn)

pytestmark = pytest.mark.skipif(
    DEVICE != "cuda" or torch.cuda.get_device_capability()[0] != 9,
    reason="Gluon kernels run on an sm_90 GPU only; the interpreter cannot run them")

BF16, F16 = torch.bfloat16, torch.float16


def lse_bound(d, dtype, rowsum=None):
    """How far the kernel's lse may be from the float64 one: 1e-3 where the kernel sums each row's
    P in float32; where it sums P as rounded to the input dtype (``ROWSUM_MMA_HEAD_DIMS``, or
    ``rowsum`` given), every term is within a relative u (2^-8 bfloat16, 2^-11 float16) of its
    float32 value, so the sum too, and log(sum) within log(1 + u), on top of that 1e-3."""
    from flashtriton.kernels.fwd_gluon import ROWSUM_MMA_HEAD_DIMS

    if not (d in ROWSUM_MMA_HEAD_DIMS if rowsum is None else rowsum):
        return 1e-3
    return 1e-3 + math.log1p(2.0 ** (-8 if dtype == BF16 else -11))


def check_forward(q, k, v, causal, out, lse, bound):
    """out against the float64 reference by the STYLE.md rule; lse with the reference's -inf
    pattern (rows that see no key) and within ``bound`` of it elsewhere."""
    ref, ref_lse = attention_ref(q, k, v, causal=causal, upcast=True)
    low, _ = attention_ref(q, k, v, causal=causal, upcast=False)
    assert_close(out, ref, low, name="out")
    assert_lse_close(lse, ref_lse, bound)


def check_launch(b, sq, sk, h, hk, d, causal, dtype, blocks, **options):
    """The Gluon launcher on fresh random q (b, sq, h, d) and k, v (b, sk, hk, d) with
    ``blocks`` (its positional order) and keyword ``options``, checked by ``check_forward``."""
    from flashtriton.kernels.fwd_gluon import attn_fwd_gluon, gluon_eligible

    q = randn(b, sq, h, d, dtype=dtype)
    k = randn(b, sk, hk, d, dtype=dtype)
    v = randn(b, sk, hk, d, dtype=dtype)
    params = make_params(d, causal=causal)
    assert gluon_eligible(q, k, v, params, None, None, False)
    out, lse = attn_fwd_gluon(q, k, v, params, *blocks, **options)
    check_forward(q, k, v, causal, out, lse, lse_bound(d, dtype))


def case(b, sq, sk, h, hk, d, causal, dtype, blocks):
    """blocks: (block_m, block_n, warps per consumer, stages, pingpong[, persistent[,
    tile_order]]), the launcher's order."""
    tag = (f"b{b}-sq{sq}-sk{sk}-h{h}/{hk}-d{d}-{str(dtype).split('.')[-1]}"
           f"{'-causal' if causal else ''}-m{blocks[0]}n{blocks[1]}w{blocks[2]}s{blocks[3]}"
           f"{'-pingpong' if blocks[4] else ''}{'-persistent' if blocks[5:6] == (True,) else ''}"
           f"{'-' + blocks[6] + '-major' if blocks[6:] else ''}")
    return pytest.param(b, sq, sk, h, hk, d, causal, dtype, blocks, id=tag)


S2, S3, S4_64 = (128, 128, 4, 2, False), (128, 128, 4, 3, False), (128, 64, 4, 4, False)
PP, PP64 = (128, 128, 4, 2, True), (128, 64, 4, 3, True)
CASES = [
    case(2, 1000, 1000, 4, 4, 128, False, BF16, S2),
    case(2, 1000, 1000, 4, 4, 128, True, BF16, S3),
    case(1, 1, 1, 2, 2, 128, True, BF16, S2),
    case(1, 129, 65, 4, 2, 128, True, BF16, S2),    # seqlen_q > seqlen_k: rows that see no key
    case(1, 65, 300, 4, 1, 128, True, F16, S3),      # seqlen_q < seqlen_k, MQA
    case(1, 257, 383, 2, 2, 64, False, F16, S2),
    case(1, 513, 513, 2, 2, 64, True, BF16, S4_64),
    case(2, 777, 901, 8, 2, 128, False, BF16, S3),   # GQA
    case(2, 777, 901, 8, 2, 128, True, F16, S2),
    case(1, 4096, 4096, 2, 2, 128, True, BF16, S3),
    case(1, 4096, 4096, 2, 2, 128, False, BF16, S2),
    # the consumers taking turns to issue (ping-pong)
    case(1, 1, 1, 2, 2, 128, True, BF16, PP),
    case(1, 129, 65, 4, 2, 128, True, BF16, PP),
    case(1, 65, 300, 4, 1, 128, True, F16, PP),
    case(1, 257, 383, 2, 2, 64, False, F16, PP),
    case(1, 513, 513, 2, 2, 64, True, BF16, PP64),
    case(2, 777, 901, 8, 2, 128, False, BF16, PP),
    case(2, 777, 901, 8, 2, 128, True, BF16, PP),
    case(1, 4096, 4096, 2, 2, 128, True, BF16, PP),
    case(1, 3000, 3000, 2, 2, 64, False, BF16, PP),
]
# the persistent kernel: one program per SM walks the tiles (more tiles than SMs in the larger
# cases, so programs carry the rings, Q buffers and ping-pong turns from tile to tile)
PERS, PPPERS, PERS64 = (*S2, True), (*PP, True), (128, 64, 4, 3, False, True)
CASES += [
    case(1, 1, 1, 2, 2, 128, True, BF16, PPPERS),
    case(1, 129, 65, 4, 2, 128, True, BF16, PPPERS),
    case(1, 65, 300, 4, 1, 128, True, F16, PERS),
    case(1, 257, 383, 2, 2, 64, False, F16, PERS64),
    case(4, 1000, 1000, 16, 16, 128, False, BF16, PPPERS),
    case(4, 1000, 1000, 16, 16, 128, True, BF16, PPPERS),
    case(3, 777, 901, 16, 4, 128, True, F16, PERS),
    case(4, 1000, 1000, 32, 32, 64, True, BF16, PERS),
    case(2, 2049, 2049, 24, 24, 64, False, BF16, PERS),
]
# three consumer warpgroups (block_m 192, 64 rows each): ring slots freed by three arrivals,
# ping-pong turns passed round a cycle of three; row counts that leave a program's last
# consumer, or its last two, without rows
C3, C3PP = (192, 128, 4, 2, False), (192, 128, 4, 2, True)
C3PERS, C3PPPERS = (*C3, True), (*C3PP, True)
CASES += [
    case(1, 1, 1, 2, 2, 64, True, BF16, C3),
    case(1, 129, 65, 4, 2, 64, True, BF16, C3),
    case(1, 65, 300, 4, 1, 64, True, F16, C3PP),
    case(2, 777, 901, 8, 2, 64, False, BF16, C3),
    case(2, 777, 901, 8, 2, 64, True, BF16, C3PP),
    case(1, 4096, 4096, 2, 2, 64, True, BF16, C3),
    case(1, 3000, 3000, 2, 2, 64, False, F16, (192, 128, 4, 3, False)),
    case(1, 500, 500, 2, 2, 128, True, BF16, C3),   # head dim 128: correct, not tuned for
    case(1, 1, 1, 2, 2, 64, True, BF16, C3PPPERS),
    case(1, 257, 383, 2, 2, 64, False, F16, C3PERS),
    case(4, 1000, 1000, 16, 16, 64, False, BF16, C3PPPERS),
    case(4, 1000, 1000, 32, 32, 64, True, BF16, C3PERS),
    case(3, 777, 901, 16, 4, 64, True, F16, C3PPPERS),
    case(2, 2049, 2049, 24, 24, 64, True, BF16, (192, 128, 4, 3, False, True)),
]
# persistent causal tiles listed row block by row block across the heads (the launcher picks
# this order where the head-by-head list balances badly, kernels/schedule.py), or head by
# head, named instead of modeled; more tiles than SMs, a single tile, GQA with the diagonal
# shifted (seqlen_q < seqlen_k), rows that see no key
CASES += [
    case(4, 1000, 1000, 32, 32, 64, True, BF16, (*C3PERS, "row")),
    case(3, 777, 901, 16, 4, 64, True, F16, (*C3PPPERS, "row")),
    case(1, 1, 1, 2, 2, 64, True, BF16, (*C3PERS, "row")),
    case(4, 1000, 1000, 16, 16, 128, True, BF16, (*PPPERS, "row")),
    case(2, 129, 65, 40, 20, 128, True, BF16, (*PERS, "row")),
    case(2, 2049, 2049, 24, 24, 64, True, BF16, (*PERS, "head")),
    case(1, 3000, 3000, 16, 16, 128, True, BF16, PPPERS),  # the model picks row-major on 132 SMs
]
# the host-made table of each program's tiles (kernels/schedule.py, greedy_table): groups the
# model chooses or named, two and three consumers, a single tile, GQA with the diagonal shifted
# both ways (rows that see no key), fp16; and a non-causal call, which keeps its plain order
CASES += [
    case(4, 1000, 1000, 32, 32, 64, True, BF16, (*PPPERS, "greedy")),
    case(3, 777, 901, 16, 4, 64, True, F16, (*C3PPPERS, "greedy")),
    case(1, 1, 1, 2, 2, 64, True, BF16, (*PPPERS, "greedy")),
    case(2, 129, 65, 40, 20, 128, True, BF16, (*PPPERS, "greedy2")),
    case(2, 2049, 2049, 24, 24, 128, True, F16, (*PPPERS, "greedy16")),
    case(2, 1000, 1000, 8, 8, 64, False, BF16, (*PPPERS, "greedy")),
]
# the persistent causal row blocks end at the last row, to within a consumer's rows
# (``tile_walk._pers_tile``'s row0), so the first block holds whole consumers of rows before
# row 0: one (1088 rows: 64 before), two with 24 rows of padding left at the end (1000: 128
# before), and with the diagonal shifted right (200 rows against 1000 keys: 128 before, 56 at
# the end) consumers before row 0 whose diagonal would reach keys; they must load, compute
# and store nothing
CASES += [
    case(2, 1088, 1088, 8, 8, 64, True, BF16, (*C3PPPERS, "greedy")),
    case(2, 1000, 1000, 8, 8, 64, True, F16, (*C3PERS, "row")),
    case(2, 200, 1000, 8, 2, 64, True, BF16, (*C3PPPERS, "greedy")),
    case(2, 200, 1000, 8, 2, 128, True, BF16, (*PPPERS, "greedy")),
]
# bottom-right causal with seqlen_q - seqlen_k past a whole tile of rows: the first tiles of
# every head see no key at all (no key tile to load; O = 0, lse = -inf), with the persistent
# programs walking on to tiles that do, on two and three consumers, and one program per tile
CASES += [
    case(2, 700, 300, 8, 4, 64, True, BF16, (*PPPERS, "greedy")),
    case(2, 700, 300, 8, 4, 128, True, F16, PPPERS),
    case(2, 700, 300, 8, 4, 64, True, BF16, (*C3PPPERS, "greedy")),
    case(1, 700, 300, 4, 4, 128, True, BF16, PP),
]

# head dim 256: two consumers, one program per tile; with ping-pong (as shipped) and
# without, 64-key tiles in two slots or 32-key ones in three (Q, K and V must fit in shared
# memory), both masks, rows that see no key, MQA and GQA, fp16
D256, D256N32 = (128, 64, 4, 2, True), (128, 32, 4, 3, False)
CASES += [
    case(1, 1, 1, 2, 2, 256, True, BF16, D256),
    case(1, 129, 65, 4, 2, 256, True, BF16, D256),
    case(1, 65, 300, 4, 1, 256, True, F16, D256),
    case(2, 777, 901, 8, 2, 256, False, BF16, D256),
    case(2, 777, 901, 8, 2, 256, True, BF16, D256N32),
    case(1, 1000, 1000, 2, 2, 256, False, F16, (128, 64, 4, 2, False)),
    case(1, 2049, 2049, 2, 2, 256, True, BF16, D256),
]
# persistent at head dim 256 (O leaves through Q's buffers): more tiles than SMs, so buffers
# are handed on from tile to tile; both masks, ping-pong or not, GQA, fp16, causal orders
D256PERS = (128, 64, 4, 2, True, True)
CASES += [
    case(1, 1, 1, 2, 2, 256, True, BF16, D256PERS),
    case(4, 1000, 1000, 16, 16, 256, False, BF16, D256PERS),
    case(4, 1000, 1000, 16, 16, 256, True, BF16, (*D256PERS, "row")),
    case(3, 777, 901, 16, 4, 256, True, F16, (*D256PERS, "head")),
    case(2, 129, 65, 40, 20, 256, True, BF16, (128, 64, 4, 2, False, True)),
    case(2, 2049, 2049, 16, 16, 256, True, BF16, D256PERS),
    case(2, 200, 1000, 8, 2, 256, True, BF16, D256PERS),  # rows before row 0 (see above)
]


@pytest.mark.parametrize("b,sq,sk,h,hk,d,causal,dtype,blocks", CASES)
def test_gluon_forward_matches_reference(b, sq, sk, h, hk, d, causal, dtype, blocks):
    check_launch(b, sq, sk, h, hk, d, causal, dtype, blocks)


@pytest.mark.parametrize("regs", [152])
@pytest.mark.parametrize("b,sq,sk,h,hk,d,causal,dtype,blocks", [
    case(2, 1000, 1000, 8, 8, 64, True, BF16, (*C3PPPERS, "greedy")),
    case(2, 777, 901, 8, 2, 64, False, F16, C3PPPERS),
    case(1, 700, 300, 4, 4, 64, True, BF16, C3PP),
])
def test_gluon_forward_three_consumers_on_fewer_registers(b, sq, sk, h, hk, d, causal, dtype,
                                                          blocks, regs):
    """Three consumers on fewer registers a thread than ``CONSUMER_REGS``' 160
    (``attn_fwd_gluon``'s ``regs``; at 152 ptxas spills differently and serializes 16-bit
    MMAs, session 76): the same results, persistent and one program per tile, both masks."""
    check_launch(b, sq, sk, h, hk, d, causal, dtype, blocks, regs=regs)


@pytest.mark.parametrize("d,causal,dtype,blocks", [
    pytest.param(64, False, BF16, (128, 128, 4, 2, False, True), id="d64-persistent"),
    pytest.param(64, True, F16, (128, 128, 4, 2, False, True), id="d64-causal-fp16-persistent"),
    pytest.param(128, True, BF16, (128, 128, 4, 2, True, True), id="d128-causal-pingpong-persistent"),
    pytest.param(128, False, BF16, S2, id="d128-one-program-per-tile"),
    pytest.param(256, True, BF16, D256PERS, id="d256-causal-persistent"),
])
def test_gluon_forward_peaked_scores(d, causal, dtype, blocks):
    """Scores spread over hundreds of log2 units, each row's largest at a random key: a row max
    that missed any of a thread's values (``_row_max`` folds them in groups) would leave some
    exp2 arguments above 128, and the output would hold inf or NaN."""
    b, s, h = 1, 700, 4
    q = randn(b, s, h, d, dtype=dtype) * 40
    k = randn(b, s, h, d, dtype=dtype)
    v = randn(b, s, h, d, dtype=dtype)
    params = make_params(d, causal=causal)
    from flashtriton.kernels.fwd_gluon import attn_fwd_gluon

    out, lse = attn_fwd_gluon(q, k, v, params, *blocks)
    ref, ref_lse = attention_ref(q, k, v, causal=causal, upcast=True)
    low, _ = attention_ref(q, k, v, causal=causal, upcast=False)
    scores = torch.einsum("bqhd,bkhd->bhqk", q.double(), k.double()) * params.softmax_scale
    spread = (scores.amax(-1) - scores.amin(-1)) / torch.log(torch.tensor(2.0, dtype=torch.float64))
    assert spread.median() > 300, "the case must spread the scores beyond exp2's range"
    assert torch.isfinite(out).all()
    assert_close(out, ref, low, name="out")
    assert (lse.double() - ref_lse.double()).abs().max() < lse_bound(d, dtype)


@pytest.mark.parametrize("d,causal,dtype,blocks", [
    pytest.param(128, False, BF16, S2, id="d128-one-program-per-tile"),
    pytest.param(128, True, F16, (128, 128, 4, 2, True, True), id="d128-causal-fp16-persistent"),
    pytest.param(64, False, BF16, (192, 128, 4, 2, True, True), id="d64-three-consumers"),
    pytest.param(256, False, BF16, D256PERS, id="d256-persistent"),
])
def test_gluon_forward_max_rising_along_the_keys(d, causal, dtype, blocks):
    """Scores that rise along the keys, per head by about 0.5, 5 and 12 log2 units per 128-key
    tile, and falling in the fourth: each row's running max moves by less than
    ``fwd_gluon_tile.RESCALE_SLACK`` (8) per tile in the first two heads (O and l kept against
    a stale max, P up to 2^8), by more in the third (O rescaled, mid-sequence), and never after
    the first tile in the fourth; out and lse as the float64 reference's."""
    from flashtriton.kernels.fwd_gluon import attn_fwd_gluon

    b, s, h = 1, 1000, 4
    params = make_params(d, causal=causal)
    q = randn(b, s, h, d, dtype=torch.float32, scale=0.3)
    k = randn(b, s, h, d, dtype=torch.float32, scale=0.3)
    v = randn(b, s, h, d, dtype=dtype)
    # the score's rise per key, in log2 units: q[..., 0] * slope * scale * log2(e) per key
    rise = torch.tensor([0.5, 5.0, 12.0, -5.0]) / 128
    q[..., 0] = 4.0
    per_unit = 4.0 * params.softmax_scale * math.log2(math.e)  # log2 units per unit of k[..., 0]
    k[..., 0] = torch.arange(s).view(1, s, 1) * rise / per_unit
    q, k = q.to(dtype), k.to(dtype)
    out, lse = attn_fwd_gluon(q, k, v, params, *blocks)
    ref, ref_lse = attention_ref(q, k, v, causal=causal, upcast=True)
    low, _ = attention_ref(q, k, v, causal=causal, upcast=False)
    scores = torch.einsum("bqhd,bkhd->bhqk", q.double(), k.double()) * params.softmax_scale
    top = scores[0, :, -1].max(-1).values / math.log(2.0)  # the last row's max, log2 units
    assert top[2] - top[0] > 60, "the third head's max must rise far beyond the slack"
    assert_close(out, ref, low, name="out")
    assert (lse.double() - ref_lse.double()).abs().max() < lse_bound(d, dtype)


@pytest.mark.parametrize("d,causal,dtype,blocks,rowsum", [
    pytest.param(64, True, BF16, (128, 128, 4, 2, False, True), False, id="d64-causal-fp32-sums"),
    pytest.param(64, False, BF16, (192, 128, 4, 2, False, True), False, id="d64-c3-fp32-sums"),
    pytest.param(128, True, BF16, (128, 128, 4, 2, True, True), True, id="d128-causal-mma-sums"),
    pytest.param(128, False, F16, (128, 128, 4, 2, True), True, id="d128-fp16-mma-sums"),
])
def test_gluon_forward_row_sums_either_way(d, causal, dtype, blocks, rowsum):
    """``rowsum_mma`` against its default (on at d64, off at d128): both ways the output passes
    the STYLE.md rule and the lse its bound; float32 sums keep the lse within 1e-3, and rows
    that see few keys (causal, shifted diagonal) are where 16-bit sums stray most."""
    from flashtriton.kernels.fwd_gluon import attn_fwd_gluon

    q = randn(2, 333, 4, d, dtype=dtype)
    k = randn(2, 419, 2, d, dtype=dtype)
    v = randn(2, 419, 2, d, dtype=dtype)
    params = make_params(d, causal=causal)
    out, lse = attn_fwd_gluon(q, k, v, params, *blocks, rowsum_mma=rowsum)
    check_forward(q, k, v, causal, out, lse, lse_bound(d, dtype, rowsum))


def test_public_function_dispatches_to_gluon_where_configured(monkeypatch):
    import flashtriton.kernels.fwd as fwd
    from flashtriton import flash_attn_func

    calls = []
    real = fwd.attn_fwd_gluon

    def spy(*args, **kw):  # records the dispatch; the real kernel still runs
        calls.append(args[4:])
        return real(*args, **kw)

    monkeypatch.setattr(fwd, "attn_fwd_gluon", spy)
    no_call_plans(monkeypatch)
    q, k, v = (randn(2, 600, 4, 128, dtype=BF16) for _ in range(3))
    params = make_params(128, causal=True)
    fwd.attn_fwd(q, k, v, params, config=KernelConfig(128, 64, 4, 3, gluon=True))
    assert calls == [(128, 64, 4, 3, False, False, None)]
    fwd.attn_fwd(q, k, v, params, config=KernelConfig(128, 128, 4, 2, gluon=True, pingpong=True))
    assert calls[-1] == (128, 128, 4, 2, True, False, None)
    fwd.attn_fwd(q, k, v, params, config=KernelConfig(128, 128, 4, 2, gluon=True, persistent=True))
    assert calls[-1] == (128, 128, 4, 2, False, True, None)
    fwd.attn_fwd(q, k, v, params, config=KernelConfig(128, 128, 4, 2, gluon=True, persistent=True,
                                                      tile_order="row"))
    assert calls[-1] == (128, 128, 4, 2, False, True, "row")
    fwd.attn_fwd(q, k, v, params, config=KernelConfig(128, 64, 8, 2))
    assert len(calls) == 4, "gluon=False must run the tl kernel"
    out = flash_attn_func(q, k, v, causal=True)  # the shipped config: the Gluon kernel
    assert len(calls) == 5 and calls[-1] == (128, 128, 4, 2, True, True, "greedy")
    flash_attn_func(q, k, v, causal=True, softcap=10.0)  # not covered: the tl kernel
    assert len(calls) == 5
    q64, k64, v64 = (randn(1, 4096, 2, 64, dtype=BF16) for _ in range(3))
    out64 = flash_attn_func(q64, k64, v64)  # d64 from 4096 keys: three consumers, persistent
    assert len(calls) == 6 and calls[-1] == (192, 128, 4, 2, True, True, None)
    ref64, _ = attention_ref(q64, k64, v64, upcast=True)
    low64, _ = attention_ref(q64, k64, v64, upcast=False)
    assert_close(out64, ref64, low64, name="out (d64)")
    # d64 causal: two consumers, persistent at every length, below THREE_CONSUMERS_FWD_FROM
    # keys (2048); three from there, with ping-pong among them, as between the two (session 26)
    three = configs.THREE_CONSUMERS_FWD_FROM[True]
    for seqlen, block_m in ((three // 2, 128), (three, 192)):
        qc, kc, vc = (randn(1, seqlen, 1, 64, dtype=BF16) for _ in range(3))
        out_c = flash_attn_func(qc, kc, vc, causal=True)
        assert calls[-1] == (block_m, 128, 4, 2, True, True, "greedy"), seqlen
        ref_c, _ = attention_ref(qc, kc, vc, causal=True, upcast=True)
        low_c, _ = attention_ref(qc, kc, vc, causal=True, upcast=False)
        assert_close(out_c, ref_c, low_c, name=f"out (d64 causal {seqlen})")
    ref, _ = attention_ref(q, k, v, causal=True, upcast=True)
    low, _ = attention_ref(q, k, v, causal=True, upcast=False)
    assert_close(out, ref, low, name="out")


def test_d256_forward_and_backward_are_gluon(monkeypatch):
    """Head dim 256: the public forward runs the Gluon kernel (persistent at 700 keys); the
    backward the head-dim-256 Gluon dK/dV kernel (kernels/bwd_gluon_d256.py), not the d64/d128
    one, then its Gluon dQ kernel, on that forward's lse."""
    import flashtriton.kernels.bwd as bwd
    import flashtriton.kernels.fwd as fwd
    from flashtriton import flash_attn_func

    calls, bwd_calls, d256_calls = [], [], []
    real_fwd, real_bwd = fwd.attn_fwd_gluon, bwd.attn_bwd_gluon
    real_d256 = bwd.attn_bwd_dkdv_gluon_d256
    monkeypatch.setattr(fwd, "attn_fwd_gluon",
                        lambda *a, **kw: calls.append(a[4:]) or real_fwd(*a, **kw))
    monkeypatch.setattr(bwd, "attn_bwd_gluon",
                        lambda *a, **kw: bwd_calls.append(1) or real_bwd(*a, **kw))
    monkeypatch.setattr(bwd, "attn_bwd_dkdv_gluon_d256",
                        lambda *a, **kw: d256_calls.append(1) or real_d256(*a, **kw))
    no_call_plans(monkeypatch)
    q, k, v = (randn(1, 700, 2, 256, dtype=BF16, requires_grad=True) for _ in range(3))
    check_attention(lambda q, k, v: flash_attn_func(q, k, v, causal=True),
                    lambda q, k, v, upcast: attention_ref(q, k, v, causal=True,
                                                          upcast=upcast)[0], (q, k, v))
    assert calls and all(c == (128, 64, 4, 2, True, True, None) for c in calls), calls
    assert not bwd_calls, "the d64/d128 Gluon backward ran at head dim 256"
    assert d256_calls, "the head-dim-256 Gluon backward did not run"


def test_not_eligible_outside_the_plain_path():
    from flashtriton.kernels.fwd_gluon import gluon_eligible

    q, k, v = (randn(1, 64, 2, 128, dtype=BF16) for _ in range(3))
    plain = make_params(128)
    assert gluon_eligible(q, k, v, plain, None, None, False)
    assert not gluon_eligible(q, k, v, make_params(128, softcap=5.0), None, None, False)
    assert not gluon_eligible(q, k, v, make_params(128, window_size=(8, 0)), None, None, False)
    assert not gluon_eligible(q, k, v, make_params(128, dropout_p=0.1), None, None, False)
    assert not gluon_eligible(q.float(), k.float(), v.float(), plain, None, None, False)
    q80, k80, v80 = (randn(1, 64, 2, 80, dtype=BF16) for _ in range(3))
    assert not gluon_eligible(q80, k80, v80, make_params(80), None, None, False)
    # the kernel scales the masked (-inf) scores, so it needs a positive scale (-inf · 0 = NaN)
    assert not gluon_eligible(q, k, v, make_params(128, softmax_scale=0.0), None, None, False)
    assert not gluon_eligible(q, k, v, make_params(128, softmax_scale=-0.1), None, None, False)


@pytest.mark.parametrize("scale", [0.0, -0.09])
def test_non_positive_scale_runs_the_tl_kernel_and_is_right(scale):
    from flashtriton import flash_attn_func

    q, k, v = (randn(1, 333, 2, 128, dtype=BF16) for _ in range(3))
    out = flash_attn_func(q, k, v, causal=True, softmax_scale=scale)
    ref, _ = attention_ref(q, k, v, causal=True, softmax_scale=scale, upcast=True)
    low, _ = attention_ref(q, k, v, causal=True, softmax_scale=scale, upcast=False)
    assert_close(out, ref, low, name=f"out (scale {scale})")


HALF_CASES = [
    # (b, sq, sk, h, hk, d, causal, dtype, blocks): the first consumer's diagonal (128-row tiles
    # against 128-key tiles) with the diagonal shifted both ways, a single row, GQA, fp16; three
    # consumers (whose rows start at 0 or 64 in a key tile); one program per tile; and without
    # a mask, key counts whose last tile is at most half full (901, 300) or more (1000)
    (4, 1000, 1000, 16, 16, 64, True, BF16, (*PPPERS, "greedy")),
    (2, 129, 65, 8, 4, 128, True, BF16, PPPERS),
    (2, 65, 300, 8, 2, 128, True, F16, PPPERS),
    (1, 1, 1, 2, 2, 64, True, BF16, PPPERS),
    (3, 777, 901, 16, 4, 64, True, F16, (*C3PPPERS, "greedy")),
    (2, 1000, 1000, 4, 4, 64, True, BF16, C3PP),
    (2, 1000, 1000, 4, 4, 128, True, BF16, PP),
    (2, 777, 901, 8, 2, 128, False, BF16, PPPERS),
    (2, 333, 300, 4, 4, 64, False, F16, (*S2, True)),
    (2, 1000, 1000, 4, 4, 64, False, BF16, PP),
]


@pytest.mark.parametrize("half", [False, True], ids=["whole-tiles", "half-tail"])
@pytest.mark.parametrize("b,sq,sk,h,hk,d,causal,dtype,blocks",
                         [case(*c) for c in HALF_CASES])
def test_gluon_forward_half_last_key_tile(b, sq, sk, h, hk, d, causal, dtype, blocks, half):
    """``half_tail`` on and off (on by default with a causal mask at d64/d128): where a
    consumer's rows see only the first half of their last key tile, that step multiplies and
    exponentiates half the keys (``fwd_gluon_tile._half_tail``); out and lse as the float64
    reference's either way, also without a mask, where only a last tile at most half full
    takes the half step."""
    check_launch(b, sq, sk, h, hk, d, causal, dtype, blocks, half_tail=half)
