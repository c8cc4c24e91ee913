"""The kernels' launcher (``kernels/common.launch``) and the call plans: their cache keys, on any
device, and calls that go through the caches, on a GPU. Under the interpreter every launch takes
Triton's own path, so the cache itself is a GPU path: those tests are skipped on CPU.

A key that missed something Triton specialises on would launch a kernel compiled for other
arguments; the GPU tests change one such property at a time (data, strides, pointer alignment,
dtype) between calls of one shape and check every result against the float64 reference."""

import math

import pytest
import torch

from flashtriton import flash_attn_func
from flashtriton.kernels import common
from flashtriton.kernels.common import _arg_key, cdiv, tensor_key
from flashtriton.reference import attention_ref
from helpers import DEVICE, check_attention, randn

BF16, F16 = torch.bfloat16, torch.float16
on_gpu = pytest.mark.skipif(DEVICE != "cuda", reason="under the interpreter every launch takes "
                            "Triton's own path: the compiled-kernel cache runs on a GPU only")


def test_cdiv():
    for a in range(0, 70):
        for b in range(1, 20):
            assert cdiv(a, b) == math.ceil(a / b)


def test_key_separates_what_triton_specialises_on():
    buf = torch.empty(256, dtype=F16, device=DEVICE)
    assert buf.data_ptr() % 16 == 0
    assert _arg_key(buf[8:]) == _arg_key(buf)  # 16 bytes on: the same alignment class
    assert _arg_key(buf[1:]) != _arg_key(buf)  # 2 bytes on: not 16-byte aligned
    assert _arg_key(buf.to(BF16)) != _arg_key(buf)
    assert _arg_key(16) != _arg_key(17) and _arg_key(16) != _arg_key(32)
    assert _arg_key(1) != _arg_key(True) and _arg_key(0) != _arg_key(False)
    assert _arg_key(0.5) == _arg_key(3.0)  # floats are not specialised
    assert _arg_key(None) != _arg_key(0) and _arg_key("ieee") != _arg_key("tf32")


def test_plan_key_separates_what_the_recorded_arguments_depend_on():
    """A call plan replays launch arguments derived from its tensors' shapes, strides, dtypes
    and 16-byte alignment: two calls share a plan only if all of these agree (and the options
    and the current device, the rest of ``plan_key``)."""
    a = torch.empty(2, 64, 4, 32, dtype=F16, device=DEVICE)
    assert tensor_key(a) == tensor_key(torch.empty_like(a))  # fresh data, same layout
    assert tensor_key(a) != tensor_key(a.to(BF16))
    assert tensor_key(a) != tensor_key(torch.empty(2, 65, 4, 32, dtype=F16, device=DEVICE))
    assert tensor_key(a) != tensor_key(a.transpose(1, 2).contiguous().transpose(1, 2))  # strides
    flat = torch.empty(a.numel() + 8, dtype=F16, device=DEVICE)
    assert tensor_key(flat[8:].view(a.shape)) == tensor_key(a)  # 16 bytes on
    assert tensor_key(flat[1:][:a.numel()].view(a.shape)) != tensor_key(a)  # 2 bytes on
    assert tensor_key(a, a) != tensor_key(a, a.to(BF16))
    assert len(tensor_key(a, a, a)) == 3


def test_may_plan_spares_calls_that_cannot_have_a_plan(monkeypatch):
    """Only 16-bit and float8_e4m3fn calls on sm_90 without dropout or softcap, with plans
    enabled, compute a plan key (the Gluon kernels' calls); here the device is made to look like
    an sm_90 GPU."""
    from flashtriton.configs import make_params

    monkeypatch.setattr(common, "cuda_major", lambda device: 9)
    monkeypatch.setattr(common, "is_interpreting", lambda: False)
    q = torch.empty(1, 8, 2, 64, dtype=BF16)
    plain = make_params(64, causal=True)
    assert common.may_plan(q, plain) and common.may_plan(q.half(), plain)
    assert common.may_plan(q.to(torch.float8_e4m3fn), plain)
    assert not common.may_plan(q.float(), plain)
    assert not common.may_plan(q.to(torch.float8_e5m2), plain)
    assert not common.may_plan(q, make_params(64, dropout_p=0.1))
    assert not common.may_plan(q, make_params(64, softcap=5.0))
    monkeypatch.setattr(common, "cuda_major", lambda device: 8)
    assert not common.may_plan(q, plain)
    monkeypatch.setattr(common, "cuda_major", lambda device: 9)
    monkeypatch.setitem(common.PLANS, "enabled", False)
    assert not common.may_plan(q, plain)
    monkeypatch.setitem(common.PLANS, "enabled", True)
    monkeypatch.setattr(common, "is_interpreting", lambda: True)
    assert not common.may_plan(q, plain)


def _gluon():
    return torch.cuda.get_device_capability()[0] == 9


def _check(causal, softcap, q, k, v):
    def ours(q, k, v):
        return flash_attn_func(q, k, v, causal=causal, softcap=softcap)

    def ref(q, k, v, upcast):
        return attention_ref(q, k, v, causal=causal, softcap=softcap, upcast=upcast)[0]

    check_attention(ours, ref, (q, k, v))


@on_gpu
@pytest.mark.parametrize("softcap", [0.0, 5.0], ids=["plain", "softcap"])  # Gluon on sm_90; tl
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_repeated_calls_go_through_the_cache(causal, softcap):
    common.clear_launch_caches()
    b, s, h, d = 2, 300, 4, 64
    sizes = []
    for _ in range(3):  # fresh data each call; the first fills the cache, the others hit it
        _check(causal, softcap, *(randn(b, s, h, d, dtype=BF16) for _ in range(3)))
        sizes.append(len(common._COMPILED))
    # cached: the Gluon kernels and the backward's preprocessing (the tl attention kernels are
    # wrapped by triton.heuristics and take Triton's path every call)
    assert sizes[0] >= (3 if softcap == 0 and _gluon() else 1), sizes
    assert sizes[1] == sizes[2] == sizes[0], "a repeated call compiled or cached again"


@on_gpu
def test_strides_alignment_and_dtype_change_the_key():
    """One shape, then: q, k, v as views of a packed tensor (other strides); views whose data
    starts 2 bytes past a 16-byte boundary (Triton compiles pointers it knows to be aligned
    differently; these take the tl kernels); float16 instead of bfloat16. Every result and
    gradient is checked; on sm_90 the Gluon kernels, which take q, k, v directly, get new cache
    entries for the new strides and dtype."""
    common.clear_launch_caches()
    b, s, h, d = 1, 200, 2, 64
    n_el = b * s * h * d

    def packed_views(p):  # (b, s, 3, h, d) -> q, k, v with the packed row stride
        return p.unbind(2)

    def offset_views(flat):  # three (b, s, h, d) views, each 2 bytes past 16-byte alignment
        return [flat[1 + i * n_el:][:n_el].view(b, s, h, d) for i in range(3)]

    def check_views(views, source):
        def ours(x):
            return flash_attn_func(*views(x), causal=True)

        def ref(x, upcast):
            return attention_ref(*views(x), causal=True, upcast=upcast)[0]

        check_attention(ours, ref, (source,), names=("source",))

    _check(True, 0.0, *(randn(b, s, h, d, dtype=BF16) for _ in range(3)))
    n = len(common._COMPILED)
    check_views(packed_views, randn(b, s, 3, h, d, dtype=BF16))
    assert len(common._COMPILED) > n or not _gluon()
    flat = randn(3 * n_el + 1, dtype=BF16)
    assert all(t.data_ptr() % 16 == 2 for t in offset_views(flat))
    check_views(offset_views, flat)
    n = len(common._COMPILED)
    _check(True, 0.0, *(randn(b, s, h, d, dtype=F16) for _ in range(3)))
    assert len(common._COMPILED) > n or not _gluon()


@on_gpu
def test_cached_launches_call_the_c_launcher_directly():
    """With Triton 3.6's launcher, cached entries are ``_DirectLaunch``: the arguments go to the
    compiled kernel's C launcher, with scratch memory from Triton's allocator for the kernels
    that build tensor descriptors on the device (the Gluon kernels; checked by value above and
    in the other GPU tests, which all launch through this path from their second call on)."""
    common.clear_launch_caches()
    q, k, v = (randn(2, 256, 4, 64, dtype=BF16) for _ in range(3))
    _check(True, 0.0, q, k, v)
    entries = list(common._COMPILED.values())
    assert entries and all(isinstance(e, common._DirectLaunch) for e in entries), entries
    if _gluon():
        assert any(e.scratch[0] > 0 for e in entries), "no Gluon kernel with device descriptors"


@on_gpu
def test_launch_hooks_see_cached_launches():
    """A launch hook (what profilers such as proton install) is called for every launch,
    cached ones included: while one is installed, cached entries take Triton's runner."""
    from triton import knobs

    seen = []

    def hook(metadata):
        seen.append(metadata.get()["name"])

    q, k, v = (randn(1, 128, 2, 64, dtype=BF16) for _ in range(3))
    flash_attn_func(q, k, v, causal=True)  # fills the cache
    knobs.runtime.launch_enter_hook.add(hook)
    try:
        for _ in range(2):
            _check(True, 0.0, *(randn(1, 128, 2, 64, dtype=BF16) for _ in range(3)))
    finally:
        knobs.runtime.launch_enter_hook.remove(hook)
    assert len(seen) >= 4 and all(isinstance(n, str) and n for n in seen), seen
    n = len(seen)
    flash_attn_func(q, k, v, causal=True)
    assert len(seen) == n, "the hook was called after its removal"


@on_gpu
def test_plain_calls_replay_their_plan():
    """On sm_90 a plain dense call stores a plan for its forward and one for its backward; the
    next calls with fresh data of the same layout take them (no new launch-cache entries, no
    new plans) and stay exact; other options, or another layout, get plans of their own."""
    if not _gluon():
        pytest.skip("plans are stored for the Gluon kernels (sm_90)")
    common.clear_launch_caches()
    b, s, h, d = 2, 200, 4, 64
    _check(True, 0.0, *(randn(b, s, h, d, dtype=BF16) for _ in range(3)))
    assert len(common._PLANS) == 2, list(common._PLANS)  # forward and backward
    n = len(common._COMPILED)
    for _ in range(2):
        _check(True, 0.0, *(randn(b, s, h, d, dtype=BF16) for _ in range(3)))
    assert len(common._PLANS) == 2 and len(common._COMPILED) == n
    _check(False, 0.0, *(randn(b, s, h, d, dtype=BF16) for _ in range(3)))  # not causal
    assert len(common._PLANS) == 4
    _check(True, 0.0, *(randn(b, s + 1, h, d, dtype=BF16) for _ in range(3)))  # another length
    assert len(common._PLANS) == 6
    packed = randn(b, s, 3, h, d, dtype=BF16)  # q, k, v with the packed row stride
    check_attention(lambda x: flash_attn_func(*x.unbind(2), causal=True),
                    lambda x, upcast: attention_ref(*x.unbind(2), causal=True, upcast=upcast)[0],
                    (packed,), names=("packed",))
    assert len(common._PLANS) == 8


@on_gpu
@pytest.mark.parametrize("causal", [False, True])
def test_d256_calls_replay_their_plan(causal):
    """Head dim 256, whose backward runs two Gluon kernels (dK/dV, then dQ): the backward's plan
    holds both launches, and the next calls with fresh data take it and stay exact, GQA and an
    odd length included."""
    if not _gluon():
        pytest.skip("plans are stored for the Gluon kernels (sm_90)")
    common.clear_launch_caches()
    b, sq, sk, h, hk, d = 2, 333, 301, 4, 2, 256

    def inputs():
        return randn(b, sq, h, d, dtype=BF16), *(randn(b, sk, hk, d, dtype=BF16) for _ in range(2))
    _check(causal, 0.0, *inputs())
    assert len(common._PLANS) == 2, list(common._PLANS)  # forward and backward
    # the forward's plan: one launch (6 items, no V copy); the backward's: δ, dK/dV and dQ (9)
    assert sorted(len(plan) for plan in common._PLANS.values()) == [6, 9], \
        "the backward's plan does not hold its two kernels' launches"
    n = len(common._COMPILED)
    for _ in range(2):
        _check(causal, 0.0, *inputs())
    assert len(common._PLANS) == 2 and len(common._COMPILED) == n
