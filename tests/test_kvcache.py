"""flash_attn_with_kvcache against the reference on the keys each sequence sees.

Every case builds a cache (contiguous or paged with a shuffled block table), fills the slots no
sequence may read with NaN (a read of an invisible key fails the test), runs the kernel, checks
the cache contents after the in-place append exactly, then compares out and lse per sequence with
the float64 reference and the torch low-precision one (STYLE.md's tolerance rule).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pytest
import torch
from helpers import DEVICE, LARGE, assert_close, compile_child, randn

from flashtriton.kernels.decode import num_splits_heuristic
from flashtriton.kvcache import flash_attn_with_kvcache
from flashtriton.reference import attention_ref


@dataclass(frozen=True)
class Case:
    batch: int
    seqlen_q: int
    nheads: int
    nheads_k: int
    head_dim: int
    capacity: int                  # cache length per sequence (rounded up to pages when paged)
    cache_seqlens: tuple | int     # lengths before the append; a tuple becomes an int32 tensor
    seqlen_new: int = 0
    head_dim_v: int | None = None
    page_size: int | None = None
    causal: bool = False
    window_size: tuple = (-1, -1)
    softcap: float = 0.0
    alibi: str | None = None       # None, "heads" (nheads,) or "batch" (batch, nheads)
    num_splits: int = 0
    dtype: torch.dtype = torch.float16
    strided: bool = False          # q and the caches are non-contiguous views


F16, BF16, F32 = torch.float16, torch.bfloat16, torch.float32

CASES = [
    pytest.param(Case(1, 1, 8, 1, 64, 130, 129, seqlen_new=1), id="mqa-b1-sq1-h8/1-d64-new1-auto"),
    pytest.param(Case(3, 1, 6, 2, 80, 150, (17, 0, 129), seqlen_new=1, page_size=16,
                      num_splits=3, dtype=BF16), id="gqa-b3-sq1-h6/2-d80-paged16-split3-bf16"),
    pytest.param(Case(2, 4, 4, 4, 128, 144, (63, 100), seqlen_new=4, page_size=48, causal=True,
                      num_splits=1, dtype=F32), id="mha-b2-sq4-d128-paged48-causal-split1-f32"),
    pytest.param(Case(2, 17, 4, 2, 40, 96, (65, 30), seqlen_new=17, causal=True,
                      window_size=(9, -1), num_splits=2),
                 id="b2-sq17-h4/2-d40-causal-window9-split2"),
    pytest.param(Case(2, 3, 4, 1, 72, 128, 61, seqlen_new=2, softcap=5.0, alibi="batch",
                      num_splits=4, dtype=BF16), id="b2-sq3-h4/1-d72-softcap-alibi-b-split4-bf16"),
    pytest.param(Case(2, 1, 2, 2, 64, 96, (0, 37), head_dim_v=32, alibi="heads", dtype=F32),
                 id="b2-sq1-d64-dv32-empty-seq-alibi-f32"),
    pytest.param(Case(1, 5, 4, 2, 8, 64, 2, causal=True, num_splits=7),
                 id="b1-sq5-d8-causal-sq>sk-split7"),
    pytest.param(Case(2, 1, 2, 1, 256, 80, (33, 64), seqlen_new=1, page_size=16, num_splits=2,
                      dtype=F32), id="b2-sq1-h2/1-d256-paged16-f32"),
    pytest.param(Case(2, 2, 4, 2, 48, 100, (50, 97), seqlen_new=2, window_size=(20, 3),
                      strided=True, num_splits=3, dtype=BF16),
                 id="b2-sq2-h4/2-d48-window20/3-strided-bf16"),
    pytest.param(Case(2, 1, 8, 2, 96, 200, (127, 190), seqlen_new=3, page_size=32, causal=True,
                      num_splits=0, dtype=F16), id="b2-sq1-h8/2-d96-paged32-new3-causal-auto"),
    pytest.param(Case(2, 33, 8, 2, 32, 128, (40, 90), seqlen_new=5, page_size=16, causal=True,
                      num_splits=2, dtype=BF16), id="b2-sq33-h8/2-d32-3-row-tiles-paged16-causal"),
    pytest.param(Case(3, 1, 4, 1, 64, 96, 50, seqlen_new=1, page_size=48, num_splits=2,
                      dtype=F32), id="mqa-b3-h4/1-d64-paged48-int-seqlens-f32"),
]
if LARGE:
    CASES += [
        pytest.param(Case(4, 1, 32, 8, 128, 8192, (8000, 1, 4095, 6000), seqlen_new=1,
                          page_size=256, dtype=BF16), id="large-b4-h32/8-d128-paged256-8k"),
        pytest.param(Case(2, 64, 16, 2, 64, 4096, (3000, 4000), seqlen_new=64, causal=True,
                          dtype=F16), id="large-b2-sq64-h16/2-d64-causal-4k"),
    ]


def _strided(shape, dtype):
    """A non-contiguous view of ``shape``: the middle of a wider last-but-one layout."""
    *lead, h, d = shape
    base = randn(*lead, h, 2 * d + 8, dtype=dtype)
    return base[..., 8:8 + d]


def _new(shape, dtype, strided):
    return _strided(shape, dtype) if strided else randn(*shape, dtype=dtype)


class Cache:
    """The K or V cache of a case: sequence b holds fresh values at positions < lens[b] and NaN
    everywhere else (also in blocks no sequence owns), so reading an invisible slot fails."""

    def __init__(self, case: Case, d: int, lens, block_table):
        b, hk = case.batch, case.nheads_k
        self.batch, self.block_table = b, block_table
        if block_table is None:
            shape = (b + 1, case.capacity, hk, d)
        else:
            shape = (int(block_table.max()) + 2, case.page_size, hk, d)
        self.data = _new(shape, case.dtype, case.strided).fill_(float("nan"))
        view = torch.full_like(self.logical(), float("nan"))
        fresh = randn(*view.shape, dtype=case.dtype)
        for i, n in enumerate(lens):
            view[i, :n] = fresh[i, :n]
        if block_table is None:
            self.data[:b] = view
        else:
            self.data[block_table.long()] = view.unflatten(1, (block_table.shape[1], -1))

    def logical(self) -> torch.Tensor:
        """(batch, capacity, nheads_k, d): what sequence b holds at positions 0..capacity-1."""
        if self.block_table is None:
            return self.data[: self.batch]
        return self.data[self.block_table.long()].flatten(1, 2)


def _block_table(case: Case):
    blocks = math.ceil(case.capacity / case.page_size)
    num_blocks = case.batch * blocks + 3
    perm = torch.randperm(num_blocks)[: case.batch * blocks]
    return perm.view(case.batch, blocks).to(torch.int32).to(DEVICE)


def _run(case: Case, *, seed: int = 0):
    torch.manual_seed(seed)
    dv = case.head_dim_v or case.head_dim
    lens = ([case.cache_seqlens] * case.batch if isinstance(case.cache_seqlens, int)
            else list(case.cache_seqlens))
    seqlen_k = [n + case.seqlen_new for n in lens]
    block_table = _block_table(case) if case.page_size else None
    kc, vc = Cache(case, case.head_dim, lens, block_table), Cache(case, dv, lens, block_table)
    q = _new((case.batch, case.seqlen_q, case.nheads, case.head_dim), case.dtype, case.strided)
    k = v = None
    if case.seqlen_new:
        k = _new((case.batch, case.seqlen_new, case.nheads_k, case.head_dim), case.dtype,
                 case.strided)
        v = _new((case.batch, case.seqlen_new, case.nheads_k, dv), case.dtype, case.strided)
    alibi = None
    if case.alibi == "heads":
        alibi = torch.rand(case.nheads, device=DEVICE) * 0.3
    elif case.alibi == "batch":
        alibi = torch.rand(case.batch, case.nheads, device=DEVICE) * 0.3
    expect_k, expect_v = kc.logical().clone(), vc.logical().clone()
    if k is not None:
        for i, n in enumerate(lens):
            expect_k[i, n:n + case.seqlen_new] = k[i]
            expect_v[i, n:n + case.seqlen_new] = v[i]
    seqlens_arg = (case.cache_seqlens if isinstance(case.cache_seqlens, int)
                   else torch.tensor(lens, dtype=torch.int32, device=DEVICE))
    out, lse = flash_attn_with_kvcache(
        q, kc.data, vc.data, k, v, cache_seqlens=seqlens_arg, block_table=block_table,
        causal=case.causal, window_size=case.window_size, softcap=case.softcap,
        alibi_slopes=alibi, num_splits=case.num_splits, return_softmax_lse=True)
    return q, kc, vc, expect_k, expect_v, seqlen_k, alibi, out, lse


@pytest.mark.parametrize("case", CASES)
def test_kvcache(case: Case):
    q, kc, vc, expect_k, expect_v, seqlen_k, alibi, out, lse = _run(case)
    # The append happened in place, and nothing else in the cache changed (NaN == NaN here).
    for name, c, expect in (("k_cache", kc, expect_k), ("v_cache", vc, expect_v)):
        got = c.logical()
        assert torch.equal(got.isnan(), expect.isnan()), f"{name}: NaN pattern changed"
        assert torch.equal(got.nan_to_num(0.0), expect.nan_to_num(0.0)), f"{name}: contents"
    dv = case.head_dim_v or case.head_dim
    assert out.shape == (case.batch, case.seqlen_q, case.nheads, dv) and out.dtype == case.dtype
    assert lse.shape == (case.batch, case.nheads, case.seqlen_q) and lse.dtype == torch.float32
    refs = {True: [], False: []}
    for i, n in enumerate(seqlen_k):
        for upcast in (True, False):
            refs[upcast].append(attention_ref(
                q[i:i + 1], expect_k[i:i + 1, :n], expect_v[i:i + 1, :n],
                causal=case.causal, window_size=case.window_size, softcap=case.softcap,
                alibi_slopes=None if alibi is None else (alibi if alibi.dim() == 1 else alibi[i]),
                upcast=upcast))
    ref64, lowp = ([torch.cat([r[j] for r in refs[u]]) for j in (0, 1)] for u in (True, False))
    assert_close(out, ref64[0], lowp[0], name="out")
    assert_close(lse, ref64[1], lowp[1], name="lse")


def test_kvcache_deterministic():
    case = Case(2, 1, 4, 2, 64, 160, (70, 150), page_size=32, num_splits=3)
    *_, out1, lse1 = _run(case, seed=3)
    *_, out2, lse2 = _run(case, seed=3)
    assert torch.equal(out1, out2) and torch.equal(lse1, lse2)


def test_kvcache_splits_agree():
    """Split-KV changes only the order of the sums: 1, 2 and many splits agree closely."""
    results = [_run(Case(2, 1, 4, 2, 64, 300, (250, 299), num_splits=s, dtype=F32), seed=5)[-2:]
               for s in (1, 2, 5)]
    for out, lse in results[1:]:
        torch.testing.assert_close(out, results[0][0], atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(lse, results[0][1], atol=1e-5, rtol=1e-5)


def test_kvcache_returns_out_only_by_default():
    q = randn(1, 1, 2, 32, dtype=F16)
    kc, vc = randn(1, 32, 2, 32, dtype=F16), randn(1, 32, 2, 32, dtype=F16)
    out = flash_attn_with_kvcache(q, kc, vc, cache_seqlens=20)
    assert isinstance(out, torch.Tensor) and out.shape == q.shape
    full = flash_attn_with_kvcache(q, kc, vc)  # cache_seqlens None: the whole cache
    ref, _ = attention_ref(q, kc, vc)
    torch.testing.assert_close(full, ref, atol=2e-3, rtol=2e-3)


def test_num_splits_heuristic():
    assert num_splits_heuristic(work=512, n_key_blocks=2048, num_sms=132) == 1  # grid is full
    assert num_splits_heuristic(work=8, n_key_blocks=1, num_sms=132) == 1       # nothing to split
    s = num_splits_heuristic(work=8, n_key_blocks=2048, num_sms=132)
    assert 8 <= s <= 128 and 8 * s / 132 >= 0.5, s  # fills most of a wave
    assert num_splits_heuristic(work=8, n_key_blocks=8, num_sms=132) <= 4  # >= 2 blocks a split


def _bad_inputs():
    q = randn(2, 1, 4, 64, dtype=F16)
    kc, vc = randn(2, 64, 2, 64, dtype=F16), randn(2, 64, 2, 64, dtype=F16)
    k, v = randn(2, 1, 2, 64, dtype=F16), randn(2, 1, 2, 64, dtype=F16)
    pc, pv = randn(6, 16, 2, 64, dtype=F16), randn(6, 16, 2, 64, dtype=F16)
    table = torch.arange(6, dtype=torch.int32, device=DEVICE).view(2, 3)
    lens = torch.tensor([3, 10], dtype=torch.int32, device=DEVICE)
    return [
        ("q-rank", dict(q=q[0]), ValueError, "q must have 4"),
        ("q-dtype", dict(q=q.double(), k_cache=kc.double(), v_cache=vc.double()), TypeError,
         "q must be"),
        ("kcache-dtype", dict(k_cache=kc.float()), TypeError, "k_cache"),
        ("v-dtype", dict(v=v.float()), TypeError, "v must have"),
        ("headdim", dict(q=randn(2, 1, 4, 12, dtype=F16)), ValueError, "head dim"),
        ("kcache-headdim", dict(k_cache=randn(2, 64, 2, 32, dtype=F16)), ValueError, "k_cache"),
        ("heads", dict(q=randn(2, 1, 3, 64, dtype=F16)), ValueError, "nheads"),
        ("k-without-v", dict(v=None), ValueError, "k and v"),
        ("k-shape", dict(k=randn(2, 1, 4, 64, dtype=F16)), ValueError, "k must have shape"),
        ("seqlens-dtype", dict(cache_seqlens=lens.long()), TypeError, "cache_seqlens"),
        ("seqlens-shape", dict(cache_seqlens=lens[:1]), ValueError, "cache_seqlens"),
        ("seqlens-type", dict(cache_seqlens=3.0), TypeError, "cache_seqlens"),
        ("seqlens-negative", dict(cache_seqlens=-1), ValueError, "cache_seqlens"),
        ("append-needs-seqlens", dict(cache_seqlens=None), ValueError, "cache_seqlens"),
        ("cache-too-small", dict(cache_seqlens=64), ValueError, "cache too small"),
        ("cache-too-small-tensor", dict(cache_seqlens=lens + 54), ValueError, "cache too small"),
        ("cache-batch", dict(k_cache=kc[:1], v_cache=vc[:1]), ValueError, "k_cache batch"),
        ("vcache-shape", dict(v_cache=randn(2, 32, 2, 64, dtype=F16)), ValueError, "v_cache"),
        ("table-dtype", dict(k_cache=pc, v_cache=pv, block_table=table.long()), TypeError,
         "block_table"),
        ("table-shape", dict(k_cache=pc, v_cache=pv, block_table=table[:1]), ValueError,
         "block_table"),
        ("table-ids", dict(k_cache=pc, v_cache=pv, block_table=table + 4), ValueError,
         "block_table"),
        ("page-size", dict(k_cache=randn(6, 24, 2, 64, dtype=F16),
                           v_cache=randn(6, 24, 2, 64, dtype=F16), block_table=table),
         ValueError, "multiple of 16"),
        ("alibi-shape", dict(alibi_slopes=torch.ones(3, device=DEVICE)), ValueError,
         "alibi_slopes"),
        ("window", dict(window_size=(1,)), TypeError, "window_size"),
        ("softcap", dict(softcap=-1.0), ValueError, "softcap"),
        ("num-splits", dict(num_splits=-1), ValueError, "num_splits"),
    ], dict(q=q, k_cache=kc, v_cache=vc, k=k, v=v, cache_seqlens=lens)


_BAD, _GOOD = _bad_inputs()


# Bounds held in device tensors are not read on the host (that would synchronise every call).
_HOST_ONLY = {"cache-too-small-tensor", "table-ids"}
_ON_GPU = pytest.mark.skipif(DEVICE != "cpu", reason="checked on the host only for CPU tensors")


@pytest.mark.parametrize("override,error,match", [
    pytest.param(*b[1:], id=b[0], marks=[_ON_GPU] if b[0] in _HOST_ONLY else [])
    for b in _BAD])
def test_kvcache_validation(override, error, match):
    kwargs = dict(_GOOD, **override)
    kwargs = {name: (t.clone() if isinstance(t, torch.Tensor) else t)
              for name, t in kwargs.items()}
    with pytest.raises(error, match=match):
        flash_attn_with_kvcache(**kwargs)


def test_kvcache_validation_baseline_passes():
    """The good arguments the validation cases start from really are good."""
    flash_attn_with_kvcache(**{n: (t.clone() if isinstance(t, torch.Tensor) else t)
                               for n, t in _GOOD.items()})


def test_kvcache_append_without_queries():
    """seqlen_q == 0 still appends (the cache update is not tied to the attention)."""
    q = randn(2, 0, 4, 32, dtype=F16)
    kc, vc = randn(2, 64, 2, 32, dtype=F16), randn(2, 64, 2, 32, dtype=F16)
    k, v = randn(2, 3, 2, 32, dtype=F16), randn(2, 3, 2, 32, dtype=F16)
    out, lse = flash_attn_with_kvcache(q, kc, vc, k, v, cache_seqlens=5, return_softmax_lse=True)
    assert out.shape == (2, 0, 4, 32) and lse.shape == (2, 4, 0)
    assert torch.equal(kc[:, 5:8], k) and torch.equal(vc[:, 5:8], v)


_COMPILE_CHILD = """
import json, torch
from flashtriton.analysis.sass import capture_launches, compile_launch
from flashtriton.kvcache import flash_attn_with_kvcache
report = []
for dtype, paged, splits, extra in [(torch.bfloat16, True, 4, dict(causal=True)),
                                    (torch.float32, False, 1, dict(window_size=(9, 0), softcap=2.0))]:
    q = torch.empty(2, 1, 8, 80, dtype=dtype)
    kc = torch.empty(8, 32, 2, 80, dtype=dtype) if paged else torch.empty(2, 96, 2, 80, dtype=dtype)
    table = torch.arange(6, dtype=torch.int32).view(2, 3) if paged else None
    k = torch.empty(2, 1, 2, 80, dtype=dtype)
    lens = torch.tensor([5, 9], dtype=torch.int32)
    call = lambda: flash_attn_with_kvcache(q, kc, kc, k, k, cache_seqlens=lens, block_table=table,
                                           num_splits=splits, **extra)
    report += [compile_launch(launch) for launch in capture_launches(call)]
print(json.dumps([[r["kernel"], r["spill_bytes"]] for r in report]))
"""


def test_decode_kernels_compile_for_sm90():
    """The GPU path compiles (sm_90a, no GPU needed): what the interpreter cannot check."""
    kernels = compile_child(_COMPILE_CHILD)
    assert [k for k, _ in kernels] == ["_kv_append", "_attn_decode", "_attn_combine",
                                       "_kv_append", "_attn_decode"], kernels
    assert all(spills == 0 for _, spills in kernels[:3]), kernels  # bf16: no spills


def test_compile_fullgraph_decode_step():
    """A decode step (append + attend) compiles with no graph break; the compiled step matches
    eager, output and cache contents."""
    torch._dynamo.reset()
    b, h, hk, d, cap = 2, 4, 2, 32, 64
    q = torch.randn(b, 1, h, d, device=DEVICE, dtype=torch.float16)
    k_new = torch.randn(b, 1, hk, d, device=DEVICE, dtype=torch.float16)
    v_new = torch.randn(b, 1, hk, d, device=DEVICE, dtype=torch.float16)
    caches = [(torch.randn(b, cap, hk, d, device=DEVICE, dtype=torch.float16),
               torch.randn(b, cap, hk, d, device=DEVICE, dtype=torch.float16))]
    caches.append(tuple(c.clone() for c in caches[0]))
    seqlens = torch.tensor([5, 17], dtype=torch.int32, device=DEVICE)

    def step(q, kc, vc, k, v):
        return flash_attn_with_kvcache(q, kc, vc, k=k, v=v, cache_seqlens=seqlens, causal=True)

    eager = step(q, *caches[0], k_new, v_new)
    compiled = torch.compile(step, fullgraph=True)(q, *caches[1], k_new, v_new)
    assert torch.equal(eager, compiled)
    assert torch.equal(caches[0][0], caches[1][0]) and torch.equal(caches[0][1], caches[1][1])
