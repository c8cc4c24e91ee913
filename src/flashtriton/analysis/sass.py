"""Compile a kernel for sm_90a on any machine (no GPU needed) and read its resources and SASS.

A registry entry names a launcher call on small CPU tensors. The call runs with a stand-in
Triton driver that reports an sm_90 target, and a compile hook that records each launch's
kernel, signature, constexprs and alignment attributes instead of compiling and launching.
So the kernel is specialised exactly as its launcher would specialise it on the GPU (block sizes,
heuristics, 16-byte alignment), whatever its signature. Each recorded launch is then compiled
with ``triton.compile(..., target=GPUTarget("cuda", 90, 32))`` and read with the tools that
Triton's wheel carries (``backends/nvidia/bin``): ``cuobjdump -res-usage`` (registers, local
memory), ``ptxas -v`` (spill bytes) and ``cuobjdump -sass`` (instruction counts).

The production launchers choose tensor-descriptor (TMA) loads with ``kernels.common.tma_ready``,
which answers False for CPU tensors. So that the compiled kernel is the one the H200 runs, the
capture replaces the launchers' ``tma_ready`` by the answer an sm_90 GPU gives for the same
tensors (``--loads tma``, the default), or by False (``--loads pointer``: the fallback kernel).
Either way the launcher's config still decides (a config with ``tma=False`` uses pointer loads);
the report's ``loads`` field says which variant was compiled (its ``USE_TMA`` constexpr).

The compile runs in a child process with ``TRITON_INTERPRET=0``: under the interpreter
``@triton.jit`` makes interpreter objects that cannot be compiled.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Callable

# HGMMA: 16-bit warpgroup MMA; QGMMA: its float8 form; UTMAREDG: tensor-descriptor reductions.
# MUFU: the special-function unit (exp2, log2, reciprocal): per softmax copy in a kernel's code;
# I2F: integer-to-float conversions, as in a division by a runtime integer (I2F.RP; the float
# conversions of values are I2FP)
COUNTED = ("HGMMA", "QGMMA", "HMMA", "LDS", "LDSM", "STS", "LDGSTS", "UTMALDG", "UTMAREDG",
           "MUFU", "I2F")
LOADS = ("tma", "pointer")
# Launcher modules whose ``tma_ready`` the capture answers for an sm_90 GPU.
TMA_LAUNCHERS = ("flashtriton.kernels.fwd", "flashtriton.kernels.bwd")


@dataclass(frozen=True)
class Shape:
    """What a registry entry's launcher is called with: dtype (a torch dtype), head dim, block
    sizes (None: the launcher's own), whether float32 dots may use tf32, a causal mask, and a
    whole ``KernelConfig`` in place of the entry's table config (None: the table's; the block
    sizes still override it)."""

    dtype: object
    head_dim: int
    block_m: int | None = None
    block_n: int | None = None
    allow_tf32: bool = False
    causal: bool = False
    config: object = None
    regs: int | None = None  # the Gluon forward's registers a consumer thread (None: its own)


@dataclass(frozen=True)
class SassEntry:
    """``launch(shape)`` calls a launcher on CPU tensors; the launches of ``kernel`` are
    compiled (the first one unless ``index`` says otherwise); ``head_dim``: the head dim the
    CLI compiles when ``--headdim`` is not given; ``dtype``: the inputs' dtype where the entry
    takes only one (``--dtype`` is then not read); ``takes_regs``: the launcher takes a
    consumer's registers (the Gluon forward's ``regs``, ``--regs``); ``takes_causal``: the
    launcher builds a causal kernel (``--causal``; the ladder's forwards have no mask)."""

    description: str
    launch: Callable
    kernel: str
    index: int = 0
    head_dim: int = 128
    dtype: str | None = None
    takes_regs: bool = False
    takes_causal: bool = True


def _qkv(dtype, head_dim, seqlen=256, heads=2):
    import torch

    shape = (1, seqlen, heads, head_dim)
    return tuple(torch.empty(shape, dtype=dtype) for _ in range(3))


def _ladder_launch(name):
    def launch(shape: Shape):
        from flashtriton.ladder import VARIANTS

        cfg = VARIANTS[name].default_config(shape.dtype, shape.head_dim)
        cfg = replace(cfg, block_m=shape.block_m or cfg.block_m, block_n=shape.block_n or cfg.block_n)
        VARIANTS[name].forward(*_qkv(shape.dtype, shape.head_dim), config=cfg, allow_tf32=shape.allow_tf32)
    return launch


def _production_fwd(shape: Shape):
    from flashtriton.configs import fwd_config, make_params
    from flashtriton.kernels.fwd import attn_fwd

    cfg = shape.config or fwd_config(shape.dtype, shape.head_dim, shape.causal)
    cfg = replace(cfg, block_m=shape.block_m or cfg.block_m, block_n=shape.block_n or cfg.block_n)
    attn_fwd(*_qkv(shape.dtype, shape.head_dim),
             make_params(shape.head_dim, causal=shape.causal, allow_tf32=shape.allow_tf32),
             config=cfg)


def _gluon_fwd(persistent: bool):
    def launch(shape: Shape):
        from flashtriton.configs import _FWD_GLUON, make_params
        from flashtriton.kernels import fwd_gluon

        cfg = shape.config or _FWD_GLUON[(shape.head_dim, shape.causal)]
        # the launcher installs Triton's allocator for device-side descriptors (setting it needs
        # no GPU; a captured launch allocates nothing)
        fwd_gluon.attn_fwd_gluon(*_qkv(shape.dtype, shape.head_dim),
                                 make_params(shape.head_dim, causal=shape.causal),
                                 shape.block_m or cfg.block_m, shape.block_n or cfg.block_n,
                                 cfg.num_warps, cfg.num_stages, cfg.pingpong, persistent,
                                 cfg.tile_order if persistent else None, regs=shape.regs)
    return launch


def _gluon_fwd_fp8(persistent: bool):
    def launch(shape: Shape):
        """The Gluon forward on float8_e4m3fn inputs, one program per tile (its config
        ``configs.gluon_fp8_config``'s for a long call) or ``persistent`` (a short call's
        entry, two consumers; ``--block-m 192`` gives d64's three from 2k keys)."""
        import torch

        from flashtriton.configs import gluon_fp8_config, make_params
        from flashtriton.kernels import fwd_gluon

        cfg = shape.config or gluon_fp8_config(shape.head_dim, shape.causal,
                                               1 if persistent else None)
        fwd_gluon.attn_fwd_gluon(*_qkv(shape.dtype, shape.head_dim),
                                 make_params(shape.head_dim, causal=shape.causal),
                                 shape.block_m or cfg.block_m, shape.block_n or cfg.block_n,
                                 cfg.num_warps, cfg.num_stages, cfg.pingpong, persistent,
                                 descale=torch.ones(3), regs=shape.regs)
    return launch


def _gluon_bwd(shape: Shape):
    import torch

    from flashtriton.configs import _BWD_GLUON, make_params
    from flashtriton.kernels import bwd_gluon

    cfg = shape.config or _BWD_GLUON[(shape.head_dim, shape.causal)]
    q, k, v = _qkv(shape.dtype, shape.head_dim)
    lse = torch.empty((1, 2, q.shape[1]), dtype=torch.float32)
    bwd_gluon.attn_bwd_gluon(torch.empty_like(q), q, k, v, lse, lse,
                             make_params(shape.head_dim, causal=shape.causal),
                             shape.block_m or cfg.block_m,
                             shape.block_n or cfg.block_n, cfg.num_warps, cfg.num_stages,
                             split_dq=cfg.split_dq, persistent=cfg.persistent,
                             defer_dq=cfg.defer_dq, dq_on_empty=cfg.dq_on_empty,
                             dq_alternate=cfg.dq_alternate,
                             tile_order=cfg.tile_order if cfg.persistent else None)


def _gluon_bwd_d256(kernel: str):
    """The head-dim-256 Gluon backward's ``kernel`` ("dkdv" or "dq") launched as configured
    (configs._BWD_GLUON, or the shape's config), block sizes overridable."""
    def run(shape: Shape):
        import torch

        from flashtriton.configs import _BWD_GLUON, make_params
        from flashtriton.kernels import bwd_gluon_d256, bwd_gluon_d256_dq

        cfg = shape.config or _BWD_GLUON[(256, shape.causal)]
        launcher = (bwd_gluon_d256.attn_bwd_dkdv_gluon_d256 if kernel == "dkdv"
                    else bwd_gluon_d256_dq.attn_bwd_dq_gluon_d256)
        q, k, v = _qkv(shape.dtype, shape.head_dim)
        lse = torch.empty((1, 2, q.shape[1]), dtype=torch.float32)
        launcher(torch.empty_like(q), q, k, v, lse, lse,
                 make_params(shape.head_dim, causal=shape.causal), shape.block_m or cfg.block_m,
                 shape.block_n or cfg.block_n, cfg.num_warps, cfg.num_stages,
                 persistent=cfg.persistent,
                 tile_order=cfg.tile_order if cfg.persistent else None)
    return run


def _production_bwd(deterministic: bool):
    def launch(shape: Shape):
        import torch

        from flashtriton.configs import make_params
        from flashtriton.kernels.bwd import attn_bwd

        if shape.block_m or shape.block_n:
            raise ValueError("block_m, block_n: the backward entries use the launcher's own blocks")
        q, k, v = _qkv(shape.dtype, shape.head_dim)
        lse = torch.empty((1, 2, q.shape[1]), dtype=torch.float32)
        attn_bwd(torch.empty_like(q), q, k, v, torch.empty_like(q), lse,
                 make_params(shape.head_dim, causal=shape.causal, allow_tf32=shape.allow_tf32,
                             deterministic=deterministic), config=shape.config)
    return launch


# name -> entry. The production entries call the library's launchers (kernels/fwd.py, bwd.py);
# if a launcher's signature changes, only its entry here changes.
KERNELS: dict[str, SassEntry] = {
    "production_fwd": SassEntry("the library's forward (kernels/fwd.py)", _production_fwd, "_attn_fwd"),
    "gluon_fwd": SassEntry("the Gluon forward sm_90 runs for 16-bit d64/d128 (kernels/fwd_gluon.py)",
                           _gluon_fwd(False), "_attn_fwd_ws", takes_regs=True),
    "gluon_fwd_fp8": SassEntry("the Gluon forward on float8_e4m3fn inputs (kernels/fwd_gluon.py)",
                               _gluon_fwd_fp8(False), "_attn_fwd_ws", dtype="float8_e4m3fn",
                               takes_regs=True),
    "gluon_fwd_fp8_persistent": SassEntry(
        "the persistent Gluon forward on float8_e4m3fn inputs (kernels/fwd_gluon_persistent.py)",
        _gluon_fwd_fp8(True), "_attn_fwd_persistent", dtype="float8_e4m3fn", takes_regs=True),
    "gluon_fwd_persistent": SassEntry("the persistent Gluon forward, 16-bit "
                                      "(kernels/fwd_gluon_persistent.py)",
                                      _gluon_fwd(True), "_attn_fwd_persistent", takes_regs=True),
    "gluon_bwd": SassEntry("the Gluon dK/dV kernel, dQ by TMA reductions (kernels/bwd_gluon.py)",
                           _gluon_bwd, "_attn_bwd_ws"),
    "gluon_bwd_d256": SassEntry("the Gluon dK/dV kernel at head dim 256, dQ left to a kernel "
                                "of its own (kernels/bwd_gluon_d256.py)", _gluon_bwd_d256("dkdv"),
                                "_attn_bwd_dkdv_hs", head_dim=256),
    "gluon_bwd_d256_dq": SassEntry("the Gluon dQ kernel at head dim 256 "
                                   "(kernels/bwd_gluon_d256_dq.py)", _gluon_bwd_d256("dq"),
                                   "_attn_bwd_dq_hs", head_dim=256),
    "production_bwd_dkdv": SassEntry("backward dK/dV kernel with atomic dQ (kernels/bwd.py)",
                                     _production_bwd(False), "_attn_bwd_dkdv"),
    "production_bwd_dkdv_det": SassEntry("deterministic backward's dK/dV kernel (kernels/bwd.py)",
                                         _production_bwd(True), "_attn_bwd_dkdv"),
    "production_bwd_dq": SassEntry("deterministic backward's dQ kernel (kernels/bwd.py)",
                                   _production_bwd(True), "_attn_bwd_dq"),
    "v1": SassEntry("ladder v1", _ladder_launch("v1"), "_ladder_v1_fwd", takes_causal=False),
    "v2": SassEntry("ladder v2", _ladder_launch("v2"), "_ladder_v2_fwd", takes_causal=False),
    "v2_kt": SassEntry("ladder v2_kt", _ladder_launch("v2_kt"), "_ladder_v2_kt_fwd",
                       takes_causal=False),
    "v2_pad": SassEntry("ladder v2_pad", _ladder_launch("v2_pad"), "_ladder_v2_fwd",
                        takes_causal=False),
}


def tool(name: str) -> str:
    """Path of a CUDA tool bundled with Triton's wheel. For ptxas, the one Triton itself compiles
    with (``TRITON_PTXAS_PATH`` can point it at a newer CUDA's ptxas, whose PTX the bundled one
    may refuse)."""
    import triton

    if name == "ptxas":
        try:
            from triton import knobs

            return knobs.nvidia.ptxas.path
        except (ImportError, AttributeError):
            pass

    path = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", name)
    if not os.path.exists(path):
        raise FileNotFoundError(f"{name}: not found at {path} (Triton's wheel ships it)")
    return path


# a SASS line: address, guard predicate, opcode with its modifiers, operands
_SASS_LINE = re.compile(r"\s*/\*([0-9a-f]{4,})\*/\s+(?:(@!?U?P\w+)\s+)?([A-Z][A-Za-z0-9_.]*)(.*)")


def guarded_instructions(sass: str) -> list[tuple[int, str | None, str, str]]:
    """(address, guard predicate such as ``@!P0`` or None, opcode with its modifiers, operands)
    for each instruction of a SASS listing. The operands run to the end of the line (with
    ``cuobjdump``'s encoding comment, if any, after the ``;``)."""
    return [(int(m.group(1), 16), m.group(2), m.group(3), m.group(4))
            for m in map(_SASS_LINE.match, sass.splitlines()) if m]


def sass_instructions(sass: str) -> list[tuple[int, str, str]]:
    """(address, opcode with its modifiers, operands) for each instruction of a SASS listing."""
    return [(addr, op, rest) for addr, _, op, rest in guarded_instructions(sass)]


def count_instructions(sass: str, names=COUNTED) -> dict[str, int]:
    """Count SASS instructions by opcode (the part before the first dot; predicates ignored)."""
    counts = Counter(op.split(".")[0] for _, op, _ in sass_instructions(sass))
    return {n: counts.get(n, 0) for n in names}


def local_by_region(sass: str) -> list[dict]:
    """Spill traffic (local-memory stores ``STL*`` and loads ``LDL*``, counted in the SASS text)
    per region of a warp-specialized kernel. Gluon's ``warp_specialize`` gives each partition
    its register count with ``setmaxnreg`` (``USETMAXREG``), so a region runs from one
    ``USETMAXREG`` to the next and is named by it: ``"240 alloc"`` (a partition that takes 240
    registers a thread: here, a consumer warpgroup), ``"24 dealloc"`` (one that gives back
    down to 24: the producer). The first region, before any, is ``"start"``. A kernel without
    ``setmaxnreg`` is one region."""
    regions = [{"region": "start", "local_stores": 0, "local_loads": 0}]
    for _, op, rest in sass_instructions(sass):
        if op.startswith("USETMAXREG"):
            regs = re.search(r"0x([0-9a-f]+)", rest)
            kind = "dealloc" if ".DEALLOC" in op else "alloc"
            regions.append({"region": f"{int(regs.group(1), 16) if regs else '?'} {kind}",
                            "local_stores": 0, "local_loads": 0})
        elif op.startswith("STL"):
            regions[-1]["local_stores"] += 1
        elif op.startswith("LDL"):
            regions[-1]["local_loads"] += 1
    return regions


MMA_OPS = ("HGMMA", "QGMMA", "HMMA")

# bytes an element of a warpgroup MMA's input type takes (the opcode's last modifier)
_MMA_INPUT_BYTES = {"BF16": 2, "F16": 2, "TF32": 4, "E4M3": 1, "E5M2": 1}


# An H100/H200 SM's dense 16-bit tensor rate (4 tensor cores x 1,024 FLOP a cycle; 989 TFLOP/s
# at 1,830 MHz on 132 SMs) and its shared memory's bandwidth (32 banks of 4 bytes a cycle):
# the published figures, not measured here.
TENSOR_FLOP_PER_CYCLE = 4096
SHARED_BYTES_PER_CYCLE = 128


def operand_load(loop: dict) -> float:
    """For a step loop of ``mma_loops``: the cycles its MMAs' shared-memory reads take at
    ``SHARED_BYTES_PER_CYCLE`` over the cycles its FLOPs take at ``TENSOR_FLOP_PER_CYCLE``.
    Above 1, shared memory cannot feed the tensor pipe at its rate, whatever else the step
    does (the ratio holds for any number of warpgroups running the loop at once)."""
    if not loop["mma_flops"]:
        return 0.0
    return (loop["mma_shared_bytes"] / SHARED_BYTES_PER_CYCLE) / (
        loop["mma_flops"] / TENSOR_FLOP_PER_CYCLE)


def wgmma_work(op: str, operands: str) -> tuple[int, int]:
    """One warpgroup MMA instruction's (``HGMMA`` / ``QGMMA``, shape MxNxK) FLOPs, 2·M·N·K,
    and the bytes it reads from shared memory: its B tile (N x K elements) always, its A tile
    (M x K) unless A comes from registers, i.e. unless a register operand stands before the
    ``gdesc`` one (``R24, R88, gdesc[UR4]`` rather than ``R24, gdesc[UR4]``). (0, 0) for
    anything else, ``HMMA`` included (not a warpgroup MMA; it reads registers only). cuobjdump
    names no input type for float16 inputs (``HGMMA.64x128x16.F32``: the accumulator's only)."""
    parts = op.split(".")
    shape = re.fullmatch(r"(\d+)x(\d+)x(\d+)", parts[1]) if len(parts) > 1 else None
    if parts[0] not in ("HGMMA", "QGMMA") or shape is None:
        return 0, 0
    m, n, k = map(int, shape.groups())
    size = _MMA_INPUT_BYTES.get(parts[-1] if len(parts) > 3 or parts[0] != "HGMMA" else "F16")
    if size is None:
        raise ValueError(f"wgmma_work: unknown input type in {op}")
    a_in_registers = not operands.split(",")[1].strip().startswith("gdesc")
    return 2 * m * n * k, (n * k + (0 if a_in_registers else m * k)) * size


def _branch_target(op: str, operands: str) -> int | None:
    """A ``BRA``'s target address, None for any other instruction."""
    target = re.search(r"0x([0-9a-f]+)", operands) if op.startswith("BRA") else None
    return None if target is None else int(target.group(1), 16)


def _every_path(body: list[tuple[int, str | None, str, str]]) -> list[str]:
    """The opcodes of a loop body's (``guarded_instructions``, the loop's back branch last)
    instructions that run on every path through one iteration: not predicated, and not between
    a forward branch and its target where both lie inside the body (code some paths jump
    over: the branch's own skipped block, or an ``else`` block that the other side's jump
    passes). A branch out of the body (a wait's retry code, an exit) skips nothing here."""
    last = body[-1][0]
    skipped = []
    for addr, _, op, rest in body[:-1]:
        to = _branch_target(op, rest)
        if to is not None and addr < to <= last:
            skipped.append((addr, to))
    return [op for addr, guard, op, _ in body
            if guard is None and not any(lo < addr < hi for lo, hi in skipped)]


def _step_paths(body: list[tuple[int, str | None, str, str]]) -> tuple[int, int]:
    """The fewest and the most instructions issued on a path through a loop body
    (``guarded_instructions``, the back branch last) from its first instruction to its back
    branch: a branch to a later place in the body is taken or not (an unguarded one always);
    a branch out of the body (a wait's retry code, which comes back) is not followed.
    Predicated instructions count: they issue either way."""
    index = {addr: i for i, (addr, _, _, _) in enumerate(body)}
    inf = float("inf")
    fewest, most = [inf] * len(body), [-inf] * len(body)
    fewest[0] = most[0] = 1
    for i, (addr, guard, op, rest) in enumerate(body[:-1]):
        if fewest[i] == inf:
            continue  # not reached from the top
        to = _branch_target(op, rest)
        inside = to is not None and to > addr and to in index
        nexts = [index[to]] if inside else []
        if not (inside and guard is None):  # falls through unless it always jumps
            nexts.append(i + 1)
        for j in nexts:
            fewest[j] = min(fewest[j], fewest[i] + 1)
            most[j] = max(most[j], most[i] + 1)
    return int(fewest[-1]), int(most[-1])


def mma_loops(sass: str) -> list[dict]:
    """The innermost loops that hold matrix instructions: for each backward branch (a ``BRA``
    to a lower address) the instructions from its target to itself, kept when they hold a
    warpgroup MMA (or ``HMMA``), no ``EXIT`` and no smaller such loop. For a kernel's main
    loop this is one step's code (in a warp-specialized kernel, one loop per consumer
    partition). Each: first and last address, instructions (and the fewest and the most that
    one step issues, ``step_fewest`` / ``step_most``, along the paths of the loop's forward
    branches: a step skips the code of the branches it does not take), matrix instructions,
    local loads and stores (spills inside the loop) and how many of those are on every path
    through a step (``every_step_local_loads`` / ``_stores``: neither predicated nor in code
    that a forward branch to another place in the loop jumps over, such as a masked tile's
    branch: the others run only on some steps), shared-memory stores, ``BAR`` barriers, ``MEMBAR``
    fences (a ``fence.proxy.async`` before a TMA or MMA reads what the threads stored brings
    one), ``R2UR`` moves to uniform registers (a wgmma descriptor kept in ordinary
    registers takes two at each use), and its warpgroup MMAs' FLOPs and the bytes they read
    from shared memory (``wgmma_work``: a step's tensor work and the operand traffic that
    shared memory must carry for it), and ``opcodes``: how many of each opcode (its name up to
    the first dot) the loop holds, most first (what a step's instructions are spent on)."""
    guarded = guarded_instructions(sass)
    lines = [(addr, op, rest) for addr, _, op, rest in guarded]
    loops = []
    for i, (addr, op, rest) in enumerate(lines):
        start = _branch_target(op, rest)
        if start is None or start >= addr:
            continue
        body = [x for x in lines[:i + 1] if x[0] >= start]
        guarded_body = [x for x in guarded[:i + 1] if x[0] >= start]
        ops = Counter(o.split(".")[0] for _, o, _ in body)
        mma = sum(ops[n] for n in MMA_OPS)
        # (a wait's retry code sits after the kernel's exits and branches back up to the
        # wait: its span holds an EXIT, a loop's body does not)
        if mma and not any(o == "EXIT" for _, o, _ in body):
            work = [wgmma_work(o, r) for _, o, r in body]  # (FLOPs, bytes) of each
            fewest, most = _step_paths(guarded_body)
            always = _every_path(guarded_body)
            loops.append({"start": start, "end": addr, "instructions": len(body),
                          "step_fewest": fewest, "step_most": most, "mma": mma,
                          "local_loads": sum(o.startswith("LDL") for _, o, _ in body),
                          "local_stores": sum(o.startswith("STL") for _, o, _ in body),
                          "every_step_local_loads": sum(o.startswith("LDL") for o in always),
                          "every_step_local_stores": sum(o.startswith("STL") for o in always),
                          "shared_stores": sum(o.startswith("STS") for _, o, _ in body),
                          "barriers": sum(o.startswith("BAR") for _, o, _ in body),
                          "fences": sum(o.startswith("MEMBAR") for _, o, _ in body),
                          "uniform_moves": sum(o.startswith("R2UR") for _, o, _ in body),
                          "mma_flops": sum(f for f, _ in work),
                          "mma_shared_bytes": sum(b for _, b in work),
                          "opcodes": dict(ops.most_common())})
    inner = [x for x in loops if not any(y is not x and x["start"] <= y["start"]
                                         and y["end"] <= x["end"] for y in loops)]
    return sorted(inner, key=lambda x: x["start"])


def shared_layouts(ttgir: str) -> list[str]:
    """The shared-memory encodings in a kernel's TTGIR (``#ttg.swizzled_shared<...>``,
    ``#ttg.nvmma_shared<...>``): ``maxPhase = 1`` means rows are not swizzled."""
    return sorted(set(re.findall(r"#ttg\.\w*shared<\{[^}]*\}>", ttgir)))


def parse_res_usage(text: str) -> dict[str, int]:
    """``cuobjdump -res-usage`` line ``REG:128 STACK:0 SHARED:0 LOCAL:0 ...`` as a dict."""
    return {k: int(v) for k, v in re.findall(r"\b(REG|STACK|SHARED|LOCAL):(\d+)", text)}


def parse_ptxas_spills(text: str) -> int:
    """Spill bytes (stores + loads) from ``ptxas -v``; 0 when it reports none."""
    return sum(int(a) + int(b) for a, b in
               re.findall(r"(\d+) bytes spill stores, (\d+) bytes spill loads", text))


class _TargetOnlyDriver:
    """A stand-in for Triton's active driver: an sm_90 target, no device behind it."""

    def get_current_device(self):
        return 0

    def get_current_stream(self, device=None):
        return 0

    def get_current_target(self):
        from triton.backends.compiler import GPUTarget

        return GPUTarget("cuda", 90, 32)


def _tma_ready_on_sm90(*tensors) -> bool:
    """What ``kernels.common.tma_ready`` answers on an sm_90 GPU for tensors of this layout:
    last stride 1, 16-byte-aligned base, every other stride a multiple of 16 bytes."""
    return all(t.stride(-1) == 1 and t.data_ptr() % 16 == 0
               and all((s * t.element_size()) % 16 == 0 for s in t.stride()[:-1]) for t in tensors)


def _no_tma(*tensors) -> bool:
    return False


@contextmanager
def _loads_as(loads: str):
    """Answer the launchers' ``tma_ready`` as an sm_90 GPU would (``"tma"``) or never (``"pointer"``)."""
    import importlib

    if loads not in LOADS:
        raise ValueError(f"loads: expected one of {', '.join(LOADS)}, got {loads!r}")
    answer = _tma_ready_on_sm90 if loads == "tma" else _no_tma
    saved = {}
    try:
        for name in TMA_LAUNCHERS:
            module = importlib.import_module(name)
            if not hasattr(module, "tma_ready"):
                raise RuntimeError(f"sass: {name} no longer calls tma_ready; update TMA_LAUNCHERS in analysis/sass.py")
            saved[module] = module.tma_ready
            module.tma_ready = answer
        yield
    finally:
        for module, fn in saved.items():
            module.tma_ready = fn


def capture_launches(call: Callable, loads: str = "tma") -> list[dict]:
    """Run ``call`` with launches recorded, not compiled or run: kernel, signature, constexprs, attrs,
    options. ``loads``: see :func:`_loads_as`. Nothing is launched, so no allocator is needed for
    the descriptors' scratch memory."""
    from triton import knobs
    from triton.runtime import driver

    launches = []

    def hook(*args, **kwargs):
        c = kwargs["compile"]
        launches.append({"fn": kwargs["fn"].jit_function, "name": kwargs["fn"].name, "signature": c["signature"],
                         "constants": c["constants"], "attrs": c["configs"][0],
                         "options": {k: c[k] for k in ("num_warps", "num_ctas", "num_stages",
                                                       "enable_fp_fusion", "maxnreg") if k in c}})
        return True  # skip compile and launch

    saved_hook = knobs.runtime.jit_cache_hook
    saved_driver = driver._active  # None when no driver was made yet (reset_active needs a GPU)
    driver.set_active(_TargetOnlyDriver())
    knobs.runtime.jit_cache_hook = hook
    try:
        with _loads_as(loads):
            call()
    finally:
        knobs.runtime.jit_cache_hook = saved_hook
        driver.set_active(saved_driver)
    return launches


def _is_gluon(launch: dict) -> bool:
    return type(launch["fn"]).__name__.startswith("Gluon")


def compile_sm90a(launch: dict):
    """Compile one recorded launch (``capture_launches``) for sm_90a, as the H200 runs it;
    returns Triton's compiled kernel (``.asm`` holds its ttgir, ptx and cubin)."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    source = ASTSource
    if _is_gluon(launch):  # Gluon kernels set their layouts' context
        from triton.experimental.gluon._runtime import GluonASTSource as source
    src = source(launch["fn"], launch["signature"], launch["constants"], launch["attrs"])
    return triton.compile(src, target=GPUTarget("cuda", 90, 32), options=launch["options"])


def cubin_sass(cubin: bytes) -> str:
    """``cuobjdump -sass`` of a compiled kernel's cubin."""
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "k.cubin")
        with open(path, "wb") as f:
            f.write(cubin)
        return subprocess.run([tool("cuobjdump"), "-sass", path], capture_output=True, text=True,
                              check=True).stdout


def compile_launch(launch: dict) -> dict:
    """Compile one recorded launch for sm_90a and report resources and instruction counts."""
    # (here, not at the top: sass_flow reads the listing with this module's parser)
    from flashtriton.analysis.sass_flow import (register_operand_writes, stale_descriptor_reads,
                                                unset_descriptor_reads)

    compiled = compile_sm90a(launch)
    with tempfile.TemporaryDirectory() as d:
        cubin, ptx = os.path.join(d, "k.cubin"), os.path.join(d, "k.ptx")
        with open(cubin, "wb") as f:
            f.write(compiled.asm["cubin"])
        with open(ptx, "w") as f:
            f.write(compiled.asm["ptx"])
        run = lambda *cmd: subprocess.run(cmd, capture_output=True, text=True, check=True)  # noqa: E731
        res = parse_res_usage(run(tool("cuobjdump"), "-res-usage", cubin).stdout)
        sass = run(tool("cuobjdump"), "-sass", cubin).stdout
        ptxas = run(tool("ptxas"), "-v", "--gpu-name=sm_90a", ptx, "-o", os.path.join(d, "v.o"))
    constexprs = {launch["fn"].arg_names[p[0]]: v for p, v in launch["constants"].items()
                  if isinstance(v, (int, float, bool, str))}
    a_mmas, a_writes = register_operand_writes(sass)
    return {
        "kernel": launch["name"], "arch": "sm_90a",
        # the Gluon kernels load by TMA only; their ring depth is the STAGES constexpr
        "loads": "tma" if constexprs.get("USE_TMA") or _is_gluon(launch) else "pointer",
        "num_warps": launch["options"]["num_warps"],
        "num_stages": constexprs.get("STAGES", launch["options"]["num_stages"]),
        "constexprs": constexprs,
        "registers": res.get("REG", 0),
        "shared_bytes": int(compiled.metadata.shared) + res.get("SHARED", 0),
        "spill_bytes": parse_ptxas_spills(ptxas.stderr + ptxas.stdout),
        # ptxas's C7512/C7514 notes: every warpgroup MMA waited for before the next is issued
        "wgmma_serialized": "wgmma.mma_async instructions are serialized" in ptxas.stderr + ptxas.stdout,
        "local_bytes": res.get("LOCAL", 0),
        "stack_bytes": res.get("STACK", 0),
        "instructions": count_instructions(sass),
        # where the spills are: per setmaxnreg region (a warp-specialized kernel's partitions)
        "local_by_region": local_by_region(sass),
        # the innermost loops holding matrix instructions (one step's code in a main loop)
        "mma_loops": mma_loops(sass),
        # warpgroup MMAs reading a descriptor register some path leaves unwritten (sass_flow)
        "unset_descriptors": unset_descriptor_reads(sass),
        # ... or one that some paths through a loop's iteration leave holding an earlier
        # iteration's value (sass_flow.stale_descriptor_reads)
        "stale_descriptors": stale_descriptor_reads(sass),
        # warpgroup MMAs reading A from registers, and writes to those registers before the
        # wait for the product (sass_flow.register_operand_writes)
        "register_a_mmas": a_mmas, "register_a_writes": a_writes,
        "shared_layouts": shared_layouts(compiled.asm["ttgir"]),
    }


def sass_report(name: str = "production_fwd", dtype: str = "bfloat16", head_dim: int = 128,
                block_m: int | None = None, block_n: int | None = None, loads: str = "tma",
                allow_tf32: bool = False, causal: bool = False, regs: int | None = None) -> dict:
    """Compile registry entry ``name`` in this process (needs TRITON_INTERPRET unset).
    ``loads="tma"``: the kernel as the H200 runs it; ``"pointer"``: the pointer-load fallback.
    ``allow_tf32``: float32 dots in tf32 (the default is true fp32, as the library's).
    ``causal``: the causal kernel; ``regs``: the Gluon forward's registers a consumer thread
    (None: the launcher's ``CONSUMER_REGS``)."""
    import torch

    from flashtriton.kernels.common import is_interpreting

    if is_interpreting():
        raise RuntimeError("sass: cannot compile under TRITON_INTERPRET=1; use report_in_child()")
    if name not in KERNELS:
        raise ValueError(f"kernel: unknown {name!r}; known: {', '.join(KERNELS)}")
    entry = KERNELS[name]
    if causal and not entry.takes_causal:
        raise ValueError(f"sass: {name} has no causal mask")
    if regs is not None and not entry.takes_regs:
        raise ValueError(f"sass: regs applies to the Gluon forward entries, not {name}")
    dtype = entry.dtype or dtype
    shape = Shape(getattr(torch, dtype), head_dim, block_m, block_n, allow_tf32, causal,
                  regs=regs)
    launches = capture_launches(lambda: entry.launch(shape), loads)
    launches = [x for x in launches if x["name"] == entry.kernel]
    if len(launches) <= entry.index:
        raise RuntimeError(f"sass: {name}'s launcher did not launch {entry.kernel} "
                           f"(the registry entry needs updating)")
    report = compile_launch(launches[entry.index])
    report.update(entry=name, dtype=dtype, head_dim=head_dim, allow_tf32=allow_tf32,
                  causal=causal, regs=regs)
    return report


def report_in_child(name="production_fwd", dtype="bfloat16", head_dim=128, block_m=None, block_n=None,
                    loads="tma", allow_tf32=False, causal=False, regs=None) -> dict:
    """:func:`sass_report` in a fresh Python with TRITON_INTERPRET=0 (safe from tests and the interpreter)."""
    cmd = [sys.executable, "-m", "flashtriton.cli", "sass", "--kernel", name, "--dtype", dtype,
           "--headdim", str(head_dim), "--loads", loads, "--json", "--in-process"]
    if block_m:
        cmd += ["--block-m", str(block_m)]
    if block_n:
        cmd += ["--block-n", str(block_n)]
    if allow_tf32:
        cmd += ["--allow-tf32"]
    if causal:
        cmd += ["--causal"]
    if regs is not None:
        cmd += ["--regs", str(regs)]
    env = dict(os.environ, TRITON_INTERPRET="0")
    out = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if out.returncode != 0:
        raise RuntimeError(f"sass child failed ({out.returncode}):\n{out.stderr[-4000:]}")
    return json.loads(out.stdout)


def add_cli_arguments(parser) -> None:
    parser.add_argument("--kernel", default="production_fwd", help=f"registry entry: {', '.join(KERNELS)}")
    parser.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float16", "float32"])
    parser.add_argument("--headdim", type=int, default=None,
                        help="default: the entry's own (256 for the d256 kernels, else 128)")
    parser.add_argument("--block-m", type=int, default=None, help="default: the launcher's own")
    parser.add_argument("--block-n", type=int, default=None, help="default: the launcher's own")
    parser.add_argument("--loads", default="tma", choices=LOADS,
                        help="tma: tensor-descriptor loads where the launcher uses them on an sm_90 GPU "
                             "(what the H200 runs); pointer: the pointer-load fallback")
    parser.add_argument("--allow-tf32", action="store_true", help="float32 dots in tf32 (default: true fp32)")
    parser.add_argument("--causal", action="store_true", help="the causal kernel (default: no mask)")
    parser.add_argument("--regs", type=int, default=None, metavar="N",
                        help="the Gluon forward entries: N registers a consumer thread "
                             "(default: the launcher's own, 240 on two consumers, 160 on three)")
    parser.add_argument("--opcodes", type=int, default=0, metavar="N",
                        help="also list each innermost MMA loop's N most frequent opcodes "
                             "(with --json every loop's opcodes are in the object anyway)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--list", action="store_true", help="list the registry and exit")
    parser.add_argument("--in-process", action="store_true", help="compile here (TRITON_INTERPRET must be unset)")


def run_cli(args) -> int:
    if args.list:
        for name, e in KERNELS.items():
            print(f"{name:22s} {e.kernel:18s} {e.description}")
        return 0
    if args.opcodes < 0:
        print(f"flashtriton sass: --opcodes takes a count of 0 or more, not {args.opcodes}",
              file=sys.stderr)
        return 2
    if args.kernel not in KERNELS:
        print(f"flashtriton sass: unknown kernel {args.kernel!r}; known: {', '.join(KERNELS)}",
              file=sys.stderr)
        return 2
    head_dim = KERNELS[args.kernel].head_dim if args.headdim is None else args.headdim
    call = (args.kernel, args.dtype, head_dim, args.block_m, args.block_n, args.loads,
            args.allow_tf32, args.causal, args.regs)
    if args.in_process:
        r = sass_report(*call)
    else:
        try:
            r = report_in_child(*call)
        except RuntimeError as err:
            # the child's own error (e.g. a launcher refusing the head dim), not two tracebacks
            lines = [x for x in str(err).splitlines() if x.strip()]
            print(f"flashtriton sass: {lines[-1].strip() if lines else err} (the whole error: "
                  f"the same command with --in-process)", file=sys.stderr)
            return 1
    if args.json:
        print(json.dumps(r, indent=2))
        return 0
    print(f"{r['entry']} ({r['kernel']}, {r['dtype']}, head dim {r['head_dim']}, {r['num_warps']} warps, "
          f"{r['num_stages']} stages, {r['loads']} loads) for {r['arch']}")
    print(f"  registers {r['registers']}, shared {r['shared_bytes']:,} bytes, spills {r['spill_bytes']} bytes, "
          f"local {r['local_bytes']} bytes")
    print("  " + ", ".join(f"{k} {v}" for k, v in r["instructions"].items()))
    spilling = [x for x in r["local_by_region"] if x["local_stores"] or x["local_loads"]]
    if spilling:
        print("  local-memory instructions by setmaxnreg region (registers a thread): "
              + "; ".join(f"{x['region']}: {x['local_stores']} stores, {x['local_loads']} loads"
                          for x in spilling))
    for x in r["mma_loops"]:
        print(f"  innermost MMA loop {x['start']:#x}-{x['end']:#x}: {x['instructions']} "
              f"instructions ({x['step_fewest']} to {x['step_most']} a step), {x['mma']} matrix, "
              f"{x['local_loads']} local loads and {x['local_stores']} local stores ({x['every_step_local_loads']} and "
              f"{x['every_step_local_stores']} on every path), "
              f"{x['shared_stores']} shared stores, "
              f"{x['barriers']} barriers, {x['fences']} fences, "
              f"{x['uniform_moves']} moves to uniform registers, "
              f"warpgroup MMAs of {x['mma_flops']:,} FLOP reading {x['mma_shared_bytes']:,} "
              f"bytes of shared memory ({operand_load(x):.2f}x the tensor pipe's cycles for "
              "them)")
        if args.opcodes > 0:
            top = list(x["opcodes"].items())[:args.opcodes]
            print("    opcodes: " + ", ".join(f"{op} {n}" for op, n in top))
    unset = r["unset_descriptors"]
    print(f"  warpgroup MMAs reading a descriptor unwritten on some path: {len(unset)}"
          + "".join(f"; {x['address']:#x} {', '.join(x['registers'])}" for x in unset))
    stale = r["stale_descriptors"]
    print(f"  warpgroup MMAs whose descriptor some paths of a loop's iteration leave stale: "
          f"{len({x['address'] for x in stale})}"
          + "".join(f"; {x['address']:#x} {x['register']} (read at {x['read_at']:#x})"
                    for x in stale[:4]))
    writes = r["register_a_writes"]
    print(f"  warpgroup MMAs reading A from registers: {r['register_a_mmas']}, with one of those "
          f"registers written before the wait: {len({x['address'] for x in writes})}"
          + "".join(f"; {x['address']:#x} {x['register']} (by {x['opcode']} at "
                    f"{x['write_at']:#x})" for x in writes[:4]))
    if r["wgmma_serialized"]:
        print("  ptxas serialized the warpgroup MMAs (a wait after each): see its C7512/C7514 note")
    print("  shared layouts: " + ("; ".join(r["shared_layouts"]) or "none"))
    return 0
