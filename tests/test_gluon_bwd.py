"""The Gluon backward (kernels/bwd_gluon.py: dK/dV, dQ added by TMA reductions), on a Hopper
GPU only: the Triton interpreter does not run Gluon, so on CPU these tests are skipped with that
reason, and the same cases go through the portable ``tl`` kernels in the other test files.

The shipped configs select it on sm_90 (configs._BWD_GLUON). Each case runs the public function
with the backward's config set to a Gluon one, checks that it ran (a spy on the launcher), and compares out, dq, dk, dv against the float64
reference with the STYLE.md rule (tests/helpers.check_attention).
"""

import pytest
import torch

import flashtriton.kernels.fwd as fwd
from flashtriton import flash_attn_func, ops
from flashtriton.configs import KernelConfig, make_params
from flashtriton.reference import attention_ref
from helpers import DEVICE, check_attention, no_call_plans, randn

pytestmark = pytest.mark.skipif(
    DEVICE != "cuda" or torch.cuda.get_device_capability()[0] != 9,
    reason="Gluon kernels run on an sm_90 GPU only; the interpreter cannot run them")

BF16, F16 = torch.bfloat16, torch.float16


def case(b, sq, sk, h, hk, d, causal, dtype=BF16):
    tag = (f"b{b}-sq{sq}-sk{sk}-h{h}/{hk}-d{d}-{str(dtype).split('.')[-1]}"
           f"{'-causal' if causal else ''}")
    return pytest.param(b, sq, sk, h, hk, d, causal, dtype, id=tag)


CASES = [
    case(2, 1000, 1000, 4, 4, 128, False),
    case(2, 1000, 1000, 4, 4, 128, True),
    case(1, 1, 1, 2, 2, 128, True),
    case(1, 129, 65, 4, 2, 128, True),       # seqlen_q > seqlen_k: rows that see no key
    case(1, 65, 300, 4, 1, 128, True, F16),   # seqlen_q < seqlen_k, MQA
    case(1, 257, 383, 2, 2, 64, False, F16),
    case(1, 513, 513, 2, 2, 64, True),
    case(2, 777, 901, 8, 2, 128, False),      # GQA: every query head of a group
    case(2, 777, 901, 8, 2, 128, True, F16),
    case(1, 2048, 2048, 2, 2, 128, True),
]


GLUON_BWD = KernelConfig(64, 128, 4, 2, gluon=True)


def run_case(monkeypatch, b, sq, sk, h, hk, d, causal, dtype, launcher="attn_bwd_gluon",
             config=GLUON_BWD, **launch_kw):
    """The public function on one case, its backward's config set to ``config`` (None: the
    shipped one), with ``launch_kw`` added to the Gluon launcher's arguments; checks that the
    launcher ``launcher`` of kernels/bwd.py ran once (and, at head dim 256, the dQ kernel's).
    Returns, for each dQ kernel launch, whether it was persistent."""
    import flashtriton.kernels.bwd as bwd

    calls, dq_calls = [], []
    real_launch, real_bwd = getattr(bwd, launcher), bwd.attn_bwd
    real_dq = bwd.attn_bwd_dq_gluon_d256

    def spy(*args, **kw):
        calls.append(1)
        return real_launch(*args, **{**kw, **launch_kw})

    monkeypatch.setattr(bwd, "attn_bwd_dq_gluon_d256",
                        lambda *a, **kw: dq_calls.append(kw.get("persistent", False))
                        or real_dq(*a, **kw))

    def with_gluon_config(*args, **kw):  # the public function's backward, Gluon config asked
        kw["config"] = config
        return real_bwd(*args, **kw)

    monkeypatch.setattr(bwd, launcher, spy)
    if config is not None:
        monkeypatch.setattr(ops, "attn_bwd", with_gluon_config)
    q = randn(b, sq, h, d, dtype=dtype)
    k = randn(b, sk, hk, d, dtype=dtype)
    v = randn(b, sk, hk, d, dtype=dtype)
    check_attention(lambda q, k, v: flash_attn_func(q, k, v, causal=causal),
                    lambda q, k, v, upcast: attention_ref(q, k, v, causal=causal,
                                                          upcast=upcast)[0], (q, k, v))
    assert calls == [1], f"the Gluon backward ({launcher}) did not run"
    assert len(dq_calls) == (d == 256), "the d256 Gluon dQ kernel (runs at d256 only)"
    return dq_calls


@pytest.mark.parametrize("b,sq,sk,h,hk,d,causal,dtype", CASES)
def test_gluon_backward_matches_reference(monkeypatch, b, sq, sk, h, hk, d, causal, dtype):
    run_case(monkeypatch, b, sq, sk, h, hk, d, causal, dtype)


@pytest.mark.parametrize("b,sq,sk,h,hk,d,causal,dtype", CASES)
def test_gluon_backward_split_dq(monkeypatch, b, sq, sk, h, hk, d, causal, dtype):
    """The other dQ layout: the consumers share dS, each computes half of dQ's columns (at head
    dim 64 from K kept with a 64-byte swizzle)."""
    run_case(monkeypatch, b, sq, sk, h, hk, d, causal, dtype, split_dq=True)


# persistent: one program per SM walks the tiles (more tiles than SMs in the larger cases, so
# programs carry the rings, dS buffers and K/V barriers from tile to tile; causal tiles run
# longest first in a snake)
PERSISTENT_CASES = CASES + [
    case(4, 1000, 1000, 16, 16, 128, False),
    case(4, 1000, 1000, 16, 16, 128, True),
    case(3, 777, 901, 16, 4, 128, True, F16),
    case(3, 1500, 1500, 32, 32, 64, True),
    case(2, 2049, 2049, 24, 24, 64, False),
]


@pytest.mark.parametrize("b,sq,sk,h,hk,d,causal,dtype", PERSISTENT_CASES)
def test_gluon_backward_persistent(monkeypatch, b, sq, sk, h, hk, d, causal, dtype):
    run_case(monkeypatch, b, sq, sk, h, hk, d, causal, dtype, split_dq=True, persistent=True)


# deferred dQ: each step's dQ product runs in the next step, on dSᵀ buffers of four step
# parities; one program per tile and persistent (the parities and the deferred product carried
# across tiles), tiles of one step, of many, GQA; the product waiting on dS barriers of its own
# or on the Q/dO ring's `empty` barriers (dq_on_empty)
@pytest.mark.parametrize("on_empty", [False, True], ids=["ds-ready", "on-empty"])
@pytest.mark.parametrize("persistent", [False, True], ids=["one-tile", "persistent"])
@pytest.mark.parametrize("b,sq,sk,h,hk,d,causal,dtype", PERSISTENT_CASES)
def test_gluon_backward_deferred_dq(monkeypatch, b, sq, sk, h, hk, d, causal, dtype, persistent,
                                    on_empty):
    run_case(monkeypatch, b, sq, sk, h, hk, d, causal, dtype, split_dq=True,
             persistent=persistent, defer_dq=True, dq_on_empty=on_empty)


# head dim 64, the warpgroups taking turns at a step's whole dQ product (dq_alternate): tiles
# of one step and of odd and even step counts (the last step's product by either warpgroup),
# GQA (a tile's steps over several query heads), persistent and not
ALT_CASES = [c for c in PERSISTENT_CASES if c.values[5] == 64] + [
    case(1, 1, 1, 2, 2, 64, False),
    case(1, 65, 300, 4, 1, 64, True),          # seqlen_q < seqlen_k, MQA: 2 steps a head
    case(2, 777, 901, 8, 2, 64, True, F16),   # GQA, 13 steps a head
    case(1, 129, 65, 4, 2, 64, True),          # seqlen_q > seqlen_k: rows that see no key
]


@pytest.mark.parametrize("persistent", [False, True], ids=["one-tile", "persistent"])
@pytest.mark.parametrize("b,sq,sk,h,hk,d,causal,dtype", ALT_CASES)
def test_gluon_backward_dq_alternate(monkeypatch, b, sq, sk, h, hk, d, causal, dtype,
                                     persistent):
    run_case(monkeypatch, b, sq, sk, h, hk, d, causal, dtype, split_dq=True,
             persistent=persistent, defer_dq=True, dq_on_empty=True, dq_alternate=True)


# persistent with each program's tiles from a host-made table (kernels/schedule.py,
# greedy_table): the shipped flags of each head dim (d64 with the alternating dQ), the group
# the model chooses or named, causal or not, GQA (a tile's steps over a group's heads)
@pytest.mark.parametrize("order", ["greedy", "greedy2"])
@pytest.mark.parametrize("b,sq,sk,h,hk,d,causal,dtype", PERSISTENT_CASES)
def test_gluon_backward_greedy_table(monkeypatch, b, sq, sk, h, hk, d, causal, dtype, order):
    run_case(monkeypatch, b, sq, sk, h, hk, d, causal, dtype, split_dq=True, persistent=True,
             defer_dq=True, dq_on_empty=True, dq_alternate=d == 64, tile_order=order)


def test_gluon_backward_tile_order_refused():
    """A table needs a persistent launch, at every head dim."""
    from flashtriton.kernels.bwd import attn_bwd
    from flashtriton.kernels.bwd_gluon import attn_bwd_gluon

    q, k, v = (randn(1, 64, 2, 128, dtype=BF16) for _ in range(3))
    lse = torch.zeros(1, 2, 64, device=q.device)
    params = make_params(128, causal=True)
    with pytest.raises(ValueError, match="persistent"):
        attn_bwd_gluon(q, q, k, v, lse, lse, params, split_dq=True, tile_order="greedy")
    with pytest.raises(ValueError, match="greedy"):
        attn_bwd_gluon(q, q, k, v, lse, lse, params, split_dq=True, persistent=True,
                       tile_order="greedy0")
    q, k, v = (randn(1, 64, 2, 256, dtype=BF16) for _ in range(3))
    cfg = KernelConfig(64, 64, 4, 2, gluon=True, fused_dq=False, tile_order="greedy")
    with pytest.raises(ValueError, match="persistent"):
        attn_bwd(q, q, k, v, q, lse, make_params(256, causal=True), config=cfg)
    from flashtriton.kernels.bwd_gluon_d256_dq import attn_bwd_dq_gluon_d256
    with pytest.raises(ValueError, match="persistent"):
        attn_bwd_dq_gluon_d256(q, q, k, v, lse, lse, make_params(256, causal=True),
                               tile_order="greedy")
    with pytest.raises(ValueError, match="greedy"):
        attn_bwd_dq_gluon_d256(q, q, k, v, lse, lse, make_params(256, causal=True),
                               persistent=True, tile_order="snake")


# head dim 256 (kernels/bwd_gluon_d256.py): the two consumers split dK's and dV's columns over one
# 64-key tile, one computes Pᵀ and the other dSᵀ, handed over in shared memory; then dQ by
# kernels/bwd_gluon_d256_dq.py's kernel, whose consumers split dQ's columns and hand P and dS over.
# The shipped config (persistent, causal on greedy tile tables; with these few tiles, one tile per
# program), and persistent with more tiles than SMs (programs walk several tiles: the buffers that
# stage dK and dV are Pᵀ's and dSᵀ's, handed back between tiles; the dQ kernel's Q and dO buffers
# are handed back too, and some of its tiles have rows that see no key)
D256_CASES = [
    case(2, 1000, 1000, 4, 4, 256, False),
    case(2, 1000, 1000, 4, 4, 256, True),
    case(1, 1, 1, 2, 2, 256, True),
    case(1, 129, 65, 4, 2, 256, True),        # rows that see no key
    case(1, 65, 300, 4, 1, 256, True, F16),   # MQA
    case(2, 777, 901, 8, 2, 256, True, F16),  # GQA: every query head of a group
    case(1, 2049, 2049, 2, 2, 256, False),
]
D256_LAUNCHER = "attn_bwd_dkdv_gluon_d256"
D256_PERSISTENT_CASES = [
    case(4, 1000, 1000, 16, 16, 256, True),
    case(3, 777, 901, 16, 4, 256, False, F16),
    case(4, 700, 300, 16, 4, 256, True),  # the first 400 rows see no key
    case(4, 320, 320, 16, 4, 256, True),  # dQ tiles row block by row block (132 SMs)
]


@pytest.mark.parametrize("b,sq,sk,h,hk,d,causal,dtype", D256_CASES)
def test_gluon_backward_d256(monkeypatch, b, sq, sk, h, hk, d, causal, dtype):
    run_case(monkeypatch, b, sq, sk, h, hk, d, causal, dtype, D256_LAUNCHER, None)


@pytest.mark.parametrize("b,sq,sk,h,hk,d,causal,dtype", D256_PERSISTENT_CASES)
def test_gluon_backward_d256_persistent(monkeypatch, b, sq, sk, h, hk, d, causal, dtype):
    dq_calls = run_case(monkeypatch, b, sq, sk, h, hk, d, causal, dtype, D256_LAUNCHER, None,
                        persistent=True)
    assert dq_calls == [True], "the dQ kernel did not run persistent (shipped so)"


# persistent with each program's tiles from a host-made table (schedule.greedy_table), in both
# kernels: the dK/dV kernel's tiles are key blocks (schedule.bwd_tile_costs), the dQ kernel's
# row blocks (schedule.row_block_table, as the forward's; without a mask its tiles cost the
# same and it keeps its plain order)
@pytest.mark.parametrize("order", ["greedy", "greedy2"])
@pytest.mark.parametrize("b,sq,sk,h,hk,d,causal,dtype", D256_PERSISTENT_CASES)
def test_gluon_backward_d256_greedy_table(monkeypatch, b, sq, sk, h, hk, d, causal, dtype,
                                          order):
    import flashtriton.kernels.bwd_gluon as bwd_gluon
    import flashtriton.kernels.bwd_gluon_d256_dq as dq_kernel

    tables = []
    for module, attr, name in ((bwd_gluon, "device_table", "dkdv"),
                               (dq_kernel, "row_block_table", "dq")):
        real = getattr(module, attr)
        monkeypatch.setattr(module, attr, lambda *a, real=real, name=name:
                            tables.append(name) or real(*a))
    no_call_plans(monkeypatch)
    cfg = KernelConfig(64, 64, 4, 2, gluon=True, fused_dq=False, persistent=True,
                       tile_order=order)
    dq_calls = run_case(monkeypatch, b, sq, sk, h, hk, d, causal, dtype, D256_LAUNCHER, cfg)
    assert dq_calls == [True]
    assert tables == (["dkdv", "dq"] if causal else ["dkdv"]), tables


def test_gluon_backward_d256_not_when_deterministic(monkeypatch):
    """deterministic=True at head dim 256 keeps the tl kernels."""
    import flashtriton.kernels.bwd as bwd

    calls = []
    real_launch = bwd.attn_bwd_dkdv_gluon_d256
    monkeypatch.setattr(bwd, "attn_bwd_dkdv_gluon_d256",
                        lambda *a, **kw: calls.append(1) or real_launch(*a, **kw))
    q, k, v = (randn(1, 300, 2, 256, dtype=BF16, requires_grad=True) for _ in range(3))
    flash_attn_func(q, k, v, causal=True, deterministic=True).sum().backward()
    assert not calls, "the deterministic mode ran the Gluon backward"


def test_other_head_dims_refused():
    from flashtriton.kernels.bwd_gluon import attn_bwd_gluon

    q, k, v, do = (randn(1, 64, 2, 96, dtype=BF16) for _ in range(4))
    lse = torch.zeros(1, 2, 64, device=q.device)
    with pytest.raises(ValueError, match="covers 64 and 128, not 96"):
        attn_bwd_gluon(do, q, k, v, lse, lse, make_params(96))


def test_selected_by_default_but_not_when_deterministic(monkeypatch):
    """On sm_90 the public backward runs the Gluon kernel for the calls it covers (the shipped
    configs, configs._BWD_GLUON); the deterministic mode keeps the tl kernels even when a
    Gluon config is asked for."""
    import flashtriton.kernels.bwd as bwd

    calls = []
    real_launch = bwd.attn_bwd_gluon

    def spy(*args, **kw):
        calls.append((kw.get("split_dq"), kw.get("persistent"), kw.get("defer_dq"),
                      kw.get("dq_on_empty"), kw.get("tile_order")))
        return real_launch(*args, **kw)

    monkeypatch.setattr(bwd, "attn_bwd_gluon", spy)
    no_call_plans(monkeypatch)
    for d in (128, 64):  # short: split dQ, persistent; dQ deferred (waiting on the ring's empty
        # barriers) but at d128 causal
        q, k, v = (randn(1, 300, 2, d, dtype=BF16, requires_grad=True) for _ in range(3))
        flash_attn_func(q, k, v, causal=True).sum().backward()
        assert calls[-1] == (True, True, d == 64, d == 64, "greedy"), f"d{d}: the Gluon " \
            "backward did not run as configured"
    q, k, v = (randn(1, 2048, 1, 128, dtype=BF16, requires_grad=True) for _ in range(3))
    flash_attn_func(q, k, v, causal=True).sum().backward()  # d128 causal from 2048 keys
    assert calls[-1] == (True, True, True, True, "greedy")
    q, k, v = (randn(1, 8192, 1, 64, dtype=BF16, requires_grad=True) for _ in range(3))
    # at 8192 keys causal calls stay persistent, their tiles from a table
    flash_attn_func(q, k, v, causal=True).sum().backward()
    assert calls[-1] == (True, True, True, True, "greedy")
    q, k, v = (randn(1, 8192, 1, 128, dtype=BF16, requires_grad=True) for _ in range(3))
    flash_attn_func(q, k, v).sum().backward()  # d128 without a mask: persistent (session 59)
    assert calls[-1] == (True, True, True, True, None)
    q, k, v = (randn(1, 300, 2, 128, dtype=BF16, requires_grad=True) for _ in range(3))
    flash_attn_func(q, k, v).sum().backward()  # d128 without a mask: its dQ waits on `empty`
    assert calls[-1] == (True, True, True, True, None)
    n = len(calls)
    q, k, v = (randn(1, 300, 2, 128, dtype=BF16) for _ in range(3))
    params = make_params(128, causal=True, deterministic=True)
    o, lse = fwd.attn_fwd(q, k, v, params)
    bwd.attn_bwd(torch.ones_like(o), q, k, v, o, lse, params, config=GLUON_BWD)
    assert len(calls) == n, "the deterministic mode ran the Gluon backward"


@pytest.mark.parametrize("d", [64, 128, 256])
def test_gluon_backward_key_tiles_no_query_sees(monkeypatch, d):
    """SDPA's causal alignment (top-left) with more keys than queries: the key tiles past the
    last query are seen by no row, and their dK and dV (zero) are written by TMA like any
    other tile's. The tensors are (batch, seq, heads, dim) in storage, seen as SDPA's (batch,
    heads, seq, dim), the layout the Gluon backward reads."""
    import torch.nn.functional as F

    import flashtriton.kernels.bwd as bwd
    from flashtriton import scaled_dot_product_attention
    from flashtriton.reference import sdpa_ref

    no_call_plans(monkeypatch)
    calls = []
    launcher = "attn_bwd_dkdv_gluon_d256" if d == 256 else "attn_bwd_gluon"
    real_launch = getattr(bwd, launcher)

    def spy(*args, **kw):
        calls.append(1)
        return real_launch(*args, **kw)

    monkeypatch.setattr(bwd, launcher, spy)
    q = randn(2, 100, 4, d, dtype=BF16).transpose(1, 2)
    k, v = (randn(2, 300, 4, d, dtype=BF16).transpose(1, 2) for _ in range(2))
    check_attention(lambda q, k, v: scaled_dot_product_attention(q, k, v, is_causal=True),
                    lambda q, k, v, upcast: (sdpa_ref(q, k, v, is_causal=True) if upcast else
                                             F.scaled_dot_product_attention(q, k, v,
                                                                            is_causal=True)),
                    (q, k, v))
    assert calls == [1], "the Gluon backward did not run"
