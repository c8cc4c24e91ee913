"""Helpers shared by every attention kernel: the dot product, the visible-key ranges, the score
transform (scale, softcap, ALiBi, masks, all in log2 units) and the online-softmax step.

Scores are carried in log2 units: ``s2 = s * log2(e)``, so that ``exp(s - m) == exp2(s2 - m2)``
and the kernels use the cheaper ``exp2``. On the plain path the softmax scale and log2(e) fold
into one multiply.
"""

from __future__ import annotations

import functools

import torch
import triton
import triton.language as tl
from triton.runtime import driver
from triton.runtime.jit import JITFunction

from flashtriton.configs import is_interpreting  # noqa: F401  (re-exported for kernels)

LOG2E = 1.4426950408889634
LN2 = 0.6931471805599453


def dot_flags(dtype, allow_tf32: bool) -> dict:
    """Compile-time flags for :func:`mma`.

    ``UPCAST_BF16``: the interpreter's ``tl.dot`` on bfloat16 tiles is wrong (Triton 3.6), so
    under the interpreter bfloat16 tiles are upcast to float32 first. That is exact: products of
    bfloat16 numbers are exact in float32. The GPU path never upcasts.
    ``PRECISION``: float32 inputs compute in true fp32 (``"ieee"``) unless the user allows tf32.
    """
    return {
        "UPCAST_BF16": is_interpreting() and dtype == torch.bfloat16,
        "PRECISION": "tf32" if (dtype == torch.float32 and allow_tf32) else "ieee",
    }


# ----------------------------------------------------------------------------- kernel launch
# Triton's ``kernel[grid](...)`` specialises every argument on every call (tensor alignment,
# integer divisibility, value ranges) to find the compiled kernel: tens of microseconds of host
# time for the Gluon kernels' ~30 arguments, as much as a short attention takes on the GPU.
# ``launch`` keys the compiled kernel by the arguments' exact values instead (a strictly finer
# key than Triton's specialisation, so it never picks a kernel that Triton would not) and, from
# the second call on, hands the arguments straight to the compiled kernel's C launcher
# (``_DirectLaunch``). Measured on the H200 machine's host (session 11): 35 µs for a Gluon
# forward launch through ``compiled[grid](...)``, of which 8.7 µs is the key, 5 µs the closure
# and launch-metadata layer that only launch hooks read, 5 µs the scratch allocation, 8 µs the
# C launcher.
_COMPILED: dict = {}
_COMPILED_MAX = 1024  # distinct (kernel, shape, stride, dtype) keys kept; cleared past that


def cdiv(a: int, b: int) -> int:
    """Host-side ceiling division (``triton.cdiv`` is a constexpr function: slower on the host)."""
    return -(-a // b)


def _arg_key(a):
    if type(a) is int:  # (not bool) ints by value
        return a
    if isinstance(a, torch.Tensor):  # Triton specialises pointers on dtype and 16-byte alignment
        return (a.dtype, a.data_ptr() % 16 == 0)
    if type(a) is float:  # not specialised
        return float
    return (type(a), a)  # bools, strings, None: by value


class _DirectLaunch:
    """The compiled kernel's C launcher, called with what ``CompiledKernel.__getitem__``'s runner
    would pass it: the current stream, scratch memory from Triton's allocator when the kernel
    needs it (device-side tensor descriptors), no launch metadata. While a launch hook is
    installed (a profiler such as proton reads the metadata), every call takes the runner."""

    def __init__(self, compiled, tail: tuple):
        self.compiled, self.tail = compiled, tail
        run = compiled.run  # a CudaLauncher: its attributes are checked by ``direct_launcher``
        self.c_launch, self.function = run.launch, compiled.function
        self.packed = compiled.packed_metadata
        self.flags = (run.launch_cooperative_grid, run.launch_pdl)
        self.scratch = (run.global_scratch_size * run.num_ctas, run.global_scratch_align)

    def __call__(self, grid: tuple, args: tuple, device: int) -> None:
        """Launch on ``device``'s current stream (``device``: the current device, which the
        caller has already looked up for its cache key)."""
        if _hooks_installed():
            self.compiled[grid](*args, *self.tail)
            return
        stream = driver.active.get_current_stream(device)
        size, align = self.scratch
        scratch = (_allocation._allocator.get()(size * grid[0] * grid[1] * grid[2], align, stream)
                   if size else None)
        self.c_launch(grid[0], grid[1], grid[2], stream, self.function, *self.flags, scratch,
                      None, self.packed, None, None, None, *args, *self.tail)


def _hooks_installed() -> bool:
    """Is a launch hook installed? (Triton 3.6 keeps them in ``HookChain`` lists; anything else
    assigned there counts as installed.)"""
    return bool(getattr(_hooks.launch_enter_hook, "calls", True)
                or getattr(_hooks.launch_exit_hook, "calls", True))


def direct_launcher(compiled, tail: tuple):
    """A ``_DirectLaunch`` for this compiled kernel, or its runner when this Triton's launcher
    is not the one ``_DirectLaunch`` knows (other attributes, profile scratch, hooks as plain
    callables)."""
    run = getattr(compiled, "run", None)
    known = (_hooks is not None and _allocation is not None and all(hasattr(run, a) for a in (
        "launch", "launch_cooperative_grid", "launch_pdl", "global_scratch_size",
        "global_scratch_align", "profile_scratch_size", "num_ctas"))
        and getattr(run, "profile_scratch_size", 1) == 0
        and hasattr(compiled, "packed_metadata") and hasattr(compiled, "function"))
    if not known:
        return lambda grid, args, device: compiled[grid](*args, *tail)
    return _DirectLaunch(compiled, tail)


def launch(kernel, grid: tuple, *args, **kwargs):
    """``kernel[grid](*args, **kwargs)`` (positional kernel arguments, keyword constexprs and
    launch options). The first call with a given key compiles or finds the kernel through
    Triton; later calls launch the compiled kernel without Triton's per-call dispatch (see
    ``_COMPILED``). Under the interpreter, for kernels wrapped by ``triton.heuristics`` or
    ``triton.autotune`` (whose wrappers add arguments per call), and whenever Triton returns no
    compiled kernel, every call takes Triton's own path.

    Returns the cached entry, ``entry(grid3, args, device)``, that launches this kernel for these
    argument keys (what a call plan keeps, see ``store_plan``), or None where calls take
    Triton's path."""
    if is_interpreting() or not isinstance(kernel, JITFunction):
        kernel[grid](*args, **kwargs)
        return None
    device = driver.active.get_current_device()
    key = (kernel, device, *[a if type(a) is int else _arg_key(a) for a in args],
           *kwargs.items())
    entry = _COMPILED.get(key)
    if entry is not None:
        entry(grid3(grid), args, device)
        return entry
    compiled = kernel[grid](*args, **kwargs)
    if compiled is None or not hasattr(compiled, "__getitem__"):
        return None
    if len(_COMPILED) >= _COMPILED_MAX:
        clear_launch_caches()
    # the compiled kernel takes every parameter in signature order, constexprs included
    names = kernel.arg_names[len(args):]
    defaults = {p.name: p.default for p in kernel.params}
    entry = direct_launcher(compiled, tuple(kwargs.get(n, defaults[n]) for n in names))
    _COMPILED[key] = entry
    return entry


def grid3(grid: tuple) -> tuple:
    """A launch grid with its three dimensions (the compiled kernel reads all three)."""
    return grid + (1, 1) if len(grid) == 1 else grid + (1,) if len(grid) == 2 else grid


# ----------------------------------------------------------------------------- call plans
# What ``launch`` saves per kernel, a plan saves per call: the dense Gluon forward and backward
# record, on a call's first run, the cached launch entries and every argument that is not one of
# the call's own tensors or a buffer allocated fresh for it. Later calls whose tensors agree in
# everything the recorded arguments were derived from (``tensor_key``: shapes, strides, dtypes,
# 16-byte alignment; plus the options and the current device) allocate their outputs and
# launch, skipping the configuration lookup, the eligibility checks, the argument lists and the
# launch keys. A float8 forward's plan also holds the launch of V's keys-minor copy, and takes
# each call's descales (keyed as one of the call's tensors). ``PLANS["enabled"] = False`` turns
# them off (``scripts/host_probe.py --compare-plans`` and ``scripts/fp8_host_probe.py
# --compare-plans`` measure the difference).
_PLANS: dict = {}
PLANS = {"enabled": True}
_PLAN_DTYPES = (torch.float16, torch.bfloat16, torch.float8_e4m3fn)


def may_plan(q, params) -> bool:
    """Can this call have a plan at all? Plans are stored for the Gluon kernels only (16-bit
    and float8_e4m3fn inputs on sm_90, no dropout or softcap: ``gluon_eligible``; float8 is a
    forward only) and while ``PLANS`` is enabled. Every other call (another GPU, float32,
    dropout, ...) is spared ``plan_key``, about 10 µs of host time that could never find a
    plan."""
    return (PLANS["enabled"] and q.dtype in _PLAN_DTYPES
            and params.dropout_p == 0 and params.softcap == 0 and not is_interpreting()
            and cuda_major(q.device) == 9)


def tensor_key(*tensors) -> tuple:
    """Everything a plan's recorded launch arguments can depend on, of each tensor: shape,
    strides, dtype, 16-byte alignment. (A fresh allocation of a given shape and dtype always has
    the same strides and is aligned, so only the call's own tensors are keyed; the device is
    the current one, in ``plan_key``.)"""
    return tuple([(t.shape, t.stride(), t.dtype, t.data_ptr() & 15 == 0) for t in tensors])


def plan_key(params, *tensors) -> tuple:
    """(options, current device, ``tensor_key``): the device is ``key[1]``, for the plan's
    launches."""
    return (params, driver.active.get_current_device(), tensor_key(*tensors))


def find_plan(key):
    return _PLANS.get(key) if PLANS["enabled"] else None


def store_plan(key, plan) -> None:
    """Keep ``plan`` for ``key`` (bounded like ``_COMPILED``)."""
    if not PLANS["enabled"]:
        return
    if len(_PLANS) >= _COMPILED_MAX:
        _PLANS.clear()
    _PLANS[key] = plan


def clear_launch_caches() -> None:
    """Forget every cached launch entry and call plan (the next call of each key goes through
    Triton again)."""
    _COMPILED.clear()
    _PLANS.clear()


def _torch_allocator(size: int, alignment: int, stream):
    return torch.empty(size, dtype=torch.int8, device="cpu" if is_interpreting() else "cuda")


@functools.lru_cache(maxsize=None)
def cuda_major(device) -> int:
    """Compute-capability major of a CUDA device (0 for other devices), looked up once."""
    return torch.cuda.get_device_capability(device)[0] if device.type == "cuda" else 0


@functools.lru_cache(maxsize=None)
def num_sms(device) -> int:
    """Streaming multiprocessors of a CUDA device, looked up once; 132 (an H200's) for other
    devices, where only the analysis tools ask (they compile for an H200 without one)."""
    if device.type != "cuda":
        return 132
    return torch.cuda.get_device_properties(device).multi_processor_count


def tma_ready(*tensors) -> bool:
    """Can these tensors be read through device-side tensor descriptors (TMA)?

    The copy engine needs 16-byte-aligned base addresses and 16-byte multiples for every stride
    but the last (which must be 1). Descriptors are built on the device, in a small scratch buffer
    that Triton obtains from the allocator: installed here (a torch allocation) unless the user
    has set one. False means the kernels fall back to ordinary pointer loads.
    """
    if not hasattr(tl, "make_tensor_descriptor"):
        return False
    if not is_interpreting() and cuda_major(tensors[0].device) < 9:
        return False
    for t in tensors:
        strides, size = t.stride(), t.element_size()
        if strides[-1] != 1 or t.data_ptr() % 16 or any(s * size % 16 for s in strides[:-1]):
            return False
    ensure_allocator()
    return True


try:
    from triton.runtime import _allocation
except ImportError:  # a Triton without the allocator's context variable
    _allocation = None
try:
    from triton.knobs import runtime as _hooks  # launch_enter_hook / launch_exit_hook
except ImportError:  # an older Triton: every launch takes the runner
    _hooks = None


def ensure_allocator() -> None:
    """Device-side tensor descriptors live in scratch memory that Triton obtains from its
    allocator: install a torch allocation unless the user has set an allocator."""
    current = getattr(_allocation, "_allocator", None)
    if current is None or isinstance(current.get(), _allocation.NullAllocator):
        triton.set_allocator(_torch_allocator)


@triton.jit
def mma(a, b, acc, UPCAST_BF16: tl.constexpr, PRECISION: tl.constexpr):
    """``acc + a @ b`` with float32 accumulation; every kernel's dot goes through here."""
    if UPCAST_BF16:
        return tl.dot(a.to(tl.float32), b.to(tl.float32), acc, input_precision="ieee")
    else:
        if a.dtype == tl.float32:
            return tl.dot(a, b, acc, input_precision=PRECISION)
        else:
            return tl.dot(a, b, acc)


@triton.jit
def query_tile_program(nheads, group, HAS_RIGHT: tl.constexpr):
    """``(pid_m, b, h, h_k)`` of a program that owns one query tile of one (batch, head).
    Longest-first: with a causal/right limit the last query tiles do the most work, so they
    are launched first."""
    pid_m = tl.program_id(0)
    if HAS_RIGHT:
        pid_m = tl.num_programs(0) - 1 - pid_m
    pid_bh = tl.program_id(1)
    h = pid_bh % nheads
    return pid_m, pid_bh // nheads, h, h // group


@triton.jit
def load_rows(desc, p_base, start, offs_rows, stride_row, offs_d, n_rows,
              HEAD_DIM: tl.constexpr, USE_TMA: tl.constexpr):
    """The tile of rows ``start + offs_rows`` ([BLOCK, BLOCK_D]) of one (sequence, head):
    through its tensor descriptor (bounds zero-fill), or through pointers with the row and
    head-dim masks."""
    if USE_TMA:
        tile = desc.load([start, 0])
    else:
        tile = tl.load(p_base + offs_rows[:, None] * stride_row + offs_d[None, :],
                       mask=(offs_rows[:, None] < n_rows) & (offs_d[None, :] < HEAD_DIM),
                       other=0.0)
    return tile


@triton.jit
def sequence_bounds(CU_Q, CU_K, b, seqlen_q_max, seqlen_k_max, IS_VARLEN: tl.constexpr):
    """``(q_start, seqlen_q, k_start, seqlen_k)`` of sequence ``b``: from the cumulative offsets
    for packed variable-length batches, else the dense lengths (starts 0)."""
    if IS_VARLEN:
        q_start = tl.load(CU_Q + b)
        seqlen_q = tl.load(CU_Q + b + 1) - q_start
        k_start = tl.load(CU_K + b)
        seqlen_k = tl.load(CU_K + b + 1) - k_start
    else:
        q_start = 0
        seqlen_q = seqlen_q_max
        k_start = 0
        seqlen_k = seqlen_k_max
    return q_start, seqlen_q, k_start, seqlen_k


@triton.jit
def diagonal_shift(shift_extra, seqlen_q, seqlen_k, BOTTOM_RIGHT: tl.constexpr):
    """Query i's diagonal key: ``i + shift``; bottom-right alignment (flash-attn) puts the last
    query on the last key, top-left (torch SDPA) the first on the first."""
    shift = shift_extra
    if BOTTOM_RIGHT:
        shift = shift + seqlen_k - seqlen_q
    return shift


@triton.jit
def inner_ranges(x0, x_len, n_inner, shift, left, right,
                 BLOCK_X: tl.constexpr, BLOCK: tl.constexpr,
                 HAS_LEFT: tl.constexpr, HAS_RIGHT: tl.constexpr):
    """Split the inner loop of an outer tile ``[x0, x0 + BLOCK_X)`` into three block-aligned parts.

    Outer index x sees inner index y iff ``x + shift - left <= y <= x + shift + right`` (each side
    only when its flag is set) and ``0 <= y < n_inner``. Returns ``(lo, a, b, hi)``: blocks in
    ``[lo, a)`` and ``[b, hi)`` need masking, blocks in ``[a, b)`` are visible to every outer row
    and lie wholly inside ``n_inner``. Blocks outside ``[lo, hi)`` are skipped, never loaded.
    The forward uses (rows, keys, shift=offset, left, right); the dK/dV pass uses the transpose
    (keys, rows, shift=-offset, left=right, right=left).
    """
    x_last = tl.minimum(x0 + BLOCK_X, x_len) - 1
    lo = 0
    hi = n_inner
    lo_full = 0
    hi_full = (n_inner // BLOCK) * BLOCK
    if HAS_LEFT:
        lo = tl.maximum(x0 + shift - left, 0)
        lo_full = tl.maximum(x_last + shift - left, 0)
    if HAS_RIGHT:
        hi = tl.minimum(x_last + shift + right + 1, n_inner)
        hi_full = tl.minimum(hi_full, tl.maximum(x0 + shift + right + 1, 0))
    lo = (lo // BLOCK) * BLOCK
    hi_up = tl.cdiv(hi, BLOCK) * BLOCK
    a = tl.minimum(tl.maximum(tl.cdiv(lo_full, BLOCK) * BLOCK, lo), hi_up)
    b = tl.minimum(tl.maximum((hi_full // BLOCK) * BLOCK, a), hi_up)
    return lo, a, b, hi


@triton.jit
def tanh(x):
    """tanh from exp2, exact enough in fp32 and available under the interpreter."""
    e = tl.exp2(x * (-2.0 * 1.4426950408889634))
    return 2.0 / (1.0 + e) - 1.0


@triton.jit
def scores_log2(qk, qi, kj, seqlen_q, seqlen_k, shift, left, right,
                qk_scale, softcap, slope, p_mask,
                MASKED: tl.constexpr, HAS_LEFT: tl.constexpr, HAS_RIGHT: tl.constexpr,
                HAS_SOFTCAP: tl.constexpr, HAS_ALIBI: tl.constexpr, MASK_KIND: tl.constexpr):
    """Raw ``q @ k^T`` tile (fp32) to scores in log2 units.

    ``qi`` and ``kj`` are the query and key indices, shaped to broadcast against the tile
    (``offs_m[:, None]``, ``offs_n[None, :]`` for a [queries, keys] tile, or the transpose for the
    [keys, queries] tiles of the dK/dV pass); ``p_mask`` is the attn_mask pointer tile likewise.
    ``qk_scale`` is ``scale * log2(e)``, or ``scale / softcap`` with softcap (then ``softcap``
    carries ``softcap * log2(e)``). ``slope`` is the ALiBi slope times log2(e). ``MASK_KIND``:
    0 no attn_mask, 1 boolean (True keeps), 2 additive float. ``MASKED`` applies the sequence
    bounds and the causal/window limits; unmasked tiles skip all comparisons.
    """
    if HAS_SOFTCAP:
        s = softcap * tanh(qk * qk_scale)
    else:
        s = qk * qk_scale
    if HAS_ALIBI:
        s = s - slope * tl.abs(kj - (qi + shift)).to(tl.float32)
    if MASK_KIND != 0:
        in_bounds = (qi < seqlen_q) & (kj < seqlen_k)
        if MASK_KIND == 1:
            keep = tl.load(p_mask, mask=in_bounds, other=0)
            s = tl.where(keep != 0, s, float("-inf"))
        else:
            bias = tl.load(p_mask, mask=in_bounds, other=0.0).to(tl.float32)
            s = s + bias * 1.4426950408889634
    if MASKED:
        valid = (kj < seqlen_k) & (qi < seqlen_q)
        if HAS_RIGHT:
            valid = valid & (kj <= qi + shift + right)
        if HAS_LEFT:
            valid = valid & (kj >= qi + shift - left)
        s = tl.where(valid, s, float("-inf"))
    return s


@triton.jit
def softmax_step(s, m_i, l_i, GUARD: tl.constexpr):
    """One online-softmax step on a tile of log2 scores ``s`` ([BLOCK_M, BLOCK_N]).

    Returns ``(p, alpha, m_new, l_new)``: unnormalised probabilities, the factor that rescales
    the running accumulator, the new running max and running sum. ``GUARD`` protects rows that
    have seen only ``-inf`` so far (fully masked): their max stays ``-inf`` and p is 0, not NaN.
    """
    m_new = tl.maximum(m_i, tl.max(s, 1))
    if GUARD:
        m_use = tl.where(m_new == float("-inf"), 0.0, m_new)
    else:
        m_use = m_new
    p = tl.exp2(s - m_use[:, None])
    alpha = tl.exp2(m_i - m_use)
    l_new = l_i * alpha + tl.sum(p, 1)
    return p, alpha, m_new, l_new


@triton.jit
def softmax_step_fused(qk, qk_scale, m_i, l_i):
    """``softmax_step`` for unmasked tiles on the plain path (no softcap, ALiBi or mask) with a
    non-negative scale: the row max is taken on raw ``q @ k^T`` and the scale is applied inside
    ``exp2(qk * scale - m)``, one fused multiply-add per score instead of a multiply and a
    subtract."""
    m_new = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
    p = tl.exp2(qk * qk_scale - m_new[:, None])
    alpha = tl.exp2(m_i - m_new)
    l_new = l_i * alpha + tl.sum(p, 1)
    return p, alpha, m_new, l_new


@triton.jit
def dropout_keep(seed, bh, offs_m, start_n, BLOCK_N: tl.constexpr, dropout_p):
    """Counter-based dropout mask [BLOCK_M, BLOCK_N]: True keeps score (query offs_m[i], key
    start_n + j) of program-head ``bh``. BLOCK_N and start_n are multiples of 32.

    One Philox-4x32-10 call, keyed by ``seed`` with counter (query, 4 * (key // 32) +
    (key % 8) // 2, batch*nheads + head, 0), gives four 32-bit words = eight 16-bit lanes: key
    ``32 g + 8 w + 2 t + s`` takes half ``s`` of word ``w``. A score is dropped when its lane is
    below ``round(p * 65536)``: the drop probability is p rounded to a multiple of 2^-16.
    The grouping follows the warpgroup-MMA accumulator, where a thread holds columns 8 w + 2 t
    and 8 w + 2 t + 1: the eight keys of one call are that thread's own, so the mask lands in
    the scores' registers without a shuffle through shared memory. The counter depends only on
    (query, key, head), never on block sizes, so the backward's kernels (other tiles, other
    layouts) regenerate exactly the forward's mask.
    """
    G: tl.constexpr = BLOCK_N // 32
    BM: tl.constexpr = offs_m.shape[0]
    tl.static_assert(BLOCK_N % 32 == 0, "dropout needs BLOCK_N to be a multiple of 32")
    cols = start_n // 8 + tl.arange(0, BLOCK_N // 8)  # [BLOCK_N // 8] = 4 * (key // 32) + t
    zero = (offs_m[:, None] * 0 + cols[None, :] * 0).to(tl.uint32)
    r0, r1, r2, r3 = tl.philox(seed, offs_m.to(tl.uint32)[:, None] + zero,
                               cols.to(tl.uint32)[None, :] + zero, zero + bh.to(tl.uint32), zero)
    t = tl.cast(dropout_p * 65536.0 + 0.5, tl.uint32)
    w0 = tl.reshape(tl.join((r0 & 0xFFFF) >= t, (r0 >> 16) >= t), [BM, G, 4, 2])  # [.., t, s]
    w1 = tl.reshape(tl.join((r1 & 0xFFFF) >= t, (r1 >> 16) >= t), [BM, G, 4, 2])
    w2 = tl.reshape(tl.join((r2 & 0xFFFF) >= t, (r2 >> 16) >= t), [BM, G, 4, 2])
    w3 = tl.reshape(tl.join((r3 & 0xFFFF) >= t, (r3 >> 16) >= t), [BM, G, 4, 2])
    x = tl.join(tl.join(w0, w1), tl.join(w2, w3))  # [BM, G, t, s, a, b]: word w = 2 b + a
    x = tl.permute(x, (0, 1, 5, 4, 2, 3))          # [BM, G, b, a, t, s]
    return tl.reshape(x, [BM, BLOCK_N])            # key 32 g + 8 w + 2 t + s
