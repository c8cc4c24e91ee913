"""`flashtriton sass`: compile for sm_90a without a GPU and read resources and instruction counts.

The compile runs in a child process without TRITON_INTERPRET (see analysis/sass.py), so these
tests run the same on CPU and on the GPU machine. A few seconds per kernel. The readers of a
listing (counts, step loops, parsers) are tested on plain text in test_sass_parse.py.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from flashtriton.analysis.sass import KERNELS, operand_load
from helpers import compile_child

def _sass(*args):
    out = subprocess.run([sys.executable, "-m", "flashtriton.cli", "sass", "--json", *args],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout)


def test_default_is_the_production_forward_as_the_h200_runs_it():
    """bf16 d128: tensor-descriptor (TMA) loads and warpgroup MMAs, as on the GPU, although the
    launcher's tma_ready() says False for the CPU tensors of the capture."""
    r = _sass()
    assert set(r) >= {"registers", "shared_bytes", "spill_bytes", "instructions"}
    assert r["kernel"] == "_attn_fwd" and r["dtype"] == "bfloat16" and r["head_dim"] == 128
    assert r["arch"] == "sm_90a"
    assert r["loads"] == "tma" and r["constexprs"]["USE_TMA"] is True
    assert 0 < r["registers"] <= 255 and r["shared_bytes"] > 0
    assert r["instructions"]["UTMALDG"] > 0, r["instructions"]  # TMA loads
    assert r["instructions"]["HGMMA"] > 0, r["instructions"]  # bf16 dots become warpgroup MMAs
    assert set(r["instructions"]) == {"HGMMA", "QGMMA", "HMMA", "LDS", "LDSM", "STS", "LDGSTS",
                                      "UTMALDG", "UTMAREDG", "MUFU", "I2F"}


def test_pointer_loads_variant():
    r = _sass("--loads", "pointer")
    assert r["loads"] == "pointer" and r["constexprs"]["USE_TMA"] is False
    assert r["instructions"]["UTMALDG"] == 0 and r["instructions"]["LDGSTS"] > 0, r["instructions"]
    assert r["instructions"]["HGMMA"] > 0


def test_tma_answer_is_the_layout_rule_and_is_restored():
    import torch

    import flashtriton.kernels.fwd as fwd
    from flashtriton.analysis.sass import _loads_as, _tma_ready_on_sm90

    t = torch.empty(2, 64, 4, 32, dtype=torch.bfloat16)
    assert _tma_ready_on_sm90(t, t.transpose(1, 2))  # contiguous, and a head-major view
    assert not _tma_ready_on_sm90(t[..., 1:])  # base 2 bytes past alignment
    assert not _tma_ready_on_sm90(t.transpose(2, 3))  # last stride not 1
    original = fwd.tma_ready
    with _loads_as("pointer"):
        assert fwd.tma_ready(t) is False
    assert fwd.tma_ready is original
    with pytest.raises(ValueError, match="loads"):
        with _loads_as("cp.async"):
            pass


def test_ladder_v2_fp32_ieee_uses_no_tensor_cores():
    """True fp32 ("ieee") dots cannot use HGMMA: the ladder's fp32 kernels are FFMA loops, and
    their operands sit in shared memory unswizzled (maxPhase = 1); v2 reads K transposed
    (order [0, 1]), the spec's bank-conflict pattern (docs/ladder.md)."""
    r = _sass("--kernel", "v2", "--dtype", "float32", "--headdim", "32")
    assert r["kernel"] == "_ladder_v2_fwd" and r["instructions"]["HGMMA"] == 0
    assert r["constexprs"]["BLOCK_M"] == 32 and r["constexprs"]["BLOCK_D"] == 32
    transposed = [x for x in r["shared_layouts"] if "order = [0, 1]" in x]
    assert transposed and all("maxPhase = 1," in x for x in transposed), r["shared_layouts"]


def test_gluon_forward_entry_compiles_the_warp_specialized_kernel():
    """The Gluon forward the shipped configs select: warpgroup MMAs that ptxas does not
    serialize (no wait after every step), TMA loads, no spills."""
    r = _sass("--kernel", "gluon_fwd")
    assert r["kernel"] == "_attn_fwd_ws" and r["spill_bytes"] == 0
    assert r["instructions"]["HGMMA"] > 0 and r["instructions"]["UTMALDG"] > 0
    assert not r["wgmma_serialized"], "ptxas serialized the warpgroup MMAs"
    assert r["unset_descriptors"] == [], r["unset_descriptors"]  # (analysis/sass_flow.py)
    assert r["stale_descriptors"] == [], r["stale_descriptors"]


def test_gluon_forward_d256_fits_an_sm():
    """Head dim 256 as shipped (64-key tiles, two slots, one program per tile): within the
    232,448 bytes of shared memory an H200 block may use, no spills, MMAs not serialized."""
    r = _sass("--kernel", "gluon_fwd", "--headdim", "256")
    assert r["kernel"] == "_attn_fwd_ws" and r["constexprs"]["BLOCK_N"] == 64
    assert r["shared_bytes"] <= 232_448 and r["spill_bytes"] == 0
    assert not r["wgmma_serialized"] and r["instructions"]["HGMMA"] > 0
    assert r["unset_descriptors"] == [], r["unset_descriptors"]
    assert r["stale_descriptors"] == [], r["stale_descriptors"]


@pytest.mark.parametrize("head_dim", [64, 128, 256])
def test_gluon_float8_forward_entry_compiles(head_dim):
    """The Gluon forward on float8 inputs as shipped: float8 warpgroup MMAs only (QGMMA), within
    an H200 block's shared memory, MMAs not serialized (P's operand registers are left out of
    the wait's dependencies, fwd_gluon_tile._retire_pv, so no instruction may write them
    between a product and its wait: ``sass_flow.register_operand_writes``), and P reaching
    its product without passing through shared memory (the relabelling of _fp8_operand: a
    layout conversion that moved values between threads would go through it). No spills at
    d128. P's conversion at the product leaves 16 bytes of spill at d256 (session 66): two
    output addresses stored once before a consumer's loop and loaded once after it, none in
    the loops. d64 runs three
    consumers of 160 registers a thread, P carried across the step loop as float16 pairs
    (``fwd_gluon_tile._to_operand``'s ``HALF``): 144 bytes of spill, 3 local loads and 3
    stores a step (with P in float32, session 70: 3,120 bytes, 44 loads and 74 stores)."""
    r = _sass("--kernel", "gluon_fwd_fp8", "--headdim", str(head_dim))
    assert r["kernel"] == "_attn_fwd_ws" and r["dtype"] == "float8_e4m3fn"
    assert r["constexprs"]["CONSUMERS"] == (3 if head_dim == 64 else 2)
    assert r["instructions"]["QGMMA"] > 0 and r["instructions"]["HGMMA"] == 0
    assert r["shared_bytes"] <= 232_448
    assert r["spill_bytes"] <= {64: 256, 128: 0, 256: 16}[head_dim], r["spill_bytes"]
    assert not r["wgmma_serialized"], "ptxas serialized the warpgroup MMAs"
    # P's operand registers are not in the wait's deps: nothing may write them before it
    assert r["register_a_mmas"] > 0 and r["register_a_writes"] == [], r["register_a_writes"]
    assert len(r["mma_loops"]) == r["constexprs"]["CONSUMERS"], "one step loop a consumer"
    for loop in r["mma_loops"]:
        assert loop["shared_stores"] == 0, loop
        assert loop["local_stores"] + loop["local_loads"] <= (8 if head_dim == 64 else 0), loop
        assert sum(loop["opcodes"].values()) == loop["instructions"], loop
        assert loop["opcodes"]["QGMMA"] == loop["mma"], loop


@pytest.mark.parametrize("head_dim", [64, 128, 256])
def test_gluon_float8_persistent_forward_compiles(head_dim):
    """The persistent Gluon forward on float8 inputs (two consumers of 64 rows; 128-key tiles,
    64 at d256, where O has buffers of its own, unlike 16-bit d256's; session 72): float8
    MMAs only, within an H100's shared memory, no spills, MMAs not serialized, no write to a
    register-A product's operand registers before its wait, and no shared or local stores in
    the step loops (P as float16 pairs across the loop, as on three consumers: ``LATE_CVT``)."""
    r = _sass("--kernel", "gluon_fwd_fp8_persistent", "--headdim", str(head_dim))
    assert r["kernel"] == "_attn_fwd_persistent" and r["dtype"] == "float8_e4m3fn"
    assert r["constexprs"]["CONSUMERS"] == 2
    assert r["instructions"]["QGMMA"] > 0 and r["instructions"]["HGMMA"] == 0
    assert r["shared_bytes"] <= 232_448 and r["spill_bytes"] == 0, r["spill_bytes"]
    assert not r["wgmma_serialized"], "ptxas serialized the warpgroup MMAs"
    assert r["register_a_mmas"] > 0 and r["register_a_writes"] == [], r["register_a_writes"]
    assert len(r["mma_loops"]) == 2, "one step loop a consumer"
    for loop in r["mma_loops"]:
        assert loop["shared_stores"] == loop["local_stores"] == loop["local_loads"] == 0, loop
        assert loop["opcodes"]["QGMMA"] == loop["mma"], loop


def test_gluon_float8_three_consumer_persistent_forward_compiles():
    """The d64 float8 forward from 2k keys (causal 4k; ``configs.FP8_BY_KEYS``, session 75):
    three consumers persistent on 192 x 128 tiles. float8 MMAs only, MMAs not serialized, no
    write to a register-A product's operand registers before its wait, one step loop a
    consumer with no shared stores; it spills, and the spill is bounded where session 75 timed
    it (488 bytes, 9 local loads and 9 local stores a step: kernel only +2.3 to +5.1% over
    two consumers all the same, docs/perf-log.md), so that more spill shows here first."""
    from flashtriton import configs

    cfg = configs._FWD_GLUON_FP8_PERSISTENT3[(64, False)]
    assert configs.gluon_fp8_config(64, False, 4096) is cfg
    r = _sass("--kernel", "gluon_fwd_fp8_persistent", "--headdim", "64", "--block-m",
              str(cfg.block_m), "--block-n", str(cfg.block_n))
    assert r["kernel"] == "_attn_fwd_persistent" and r["constexprs"]["CONSUMERS"] == 3
    assert r["instructions"]["QGMMA"] > 0 and r["instructions"]["HGMMA"] == 0
    assert r["shared_bytes"] <= 232_448 and r["spill_bytes"] <= 488, r["spill_bytes"]
    assert not r["wgmma_serialized"], "ptxas serialized the warpgroup MMAs"
    assert r["register_a_mmas"] > 0 and r["register_a_writes"] == [], r["register_a_writes"]
    assert len(r["mma_loops"]) == 3, "one step loop a consumer"
    for loop in r["mma_loops"]:
        assert loop["shared_stores"] == 0 and loop["opcodes"]["QGMMA"] == loop["mma"], loop
        assert loop["local_loads"] <= 9 and loop["local_stores"] <= 9, loop
        # all on every path through a step (P's float16 pairs across the back edge)
        assert loop["every_step_local_loads"] <= 9 and loop["every_step_local_stores"] <= 9


@pytest.mark.parametrize("entry, causal, regs, per_step", [
    ("gluon_fwd_fp8_persistent", False, 152, 4),
    ("gluon_fwd_fp8_persistent", True, 160, 9), ("gluon_fwd_fp8_persistent", True, 152, 4),
    ("gluon_fwd_persistent", True, 160, 13), ("gluon_fwd_persistent", False, 160, 5),
])
def test_three_consumers_spill_by_registers(entry, causal, regs, per_step):
    """The d64 three-consumer persistent forwards at 160 registers a consumer thread (what
    ships, ``fwd_gluon.CONSUMER_REGS``; float8 without a mask: the test above), and float8's
    at 152 (``--regs``, the candidate of session 76): MMAs not serialized, and local loads and
    stores a step no more than ptxas gave then, both masks. At 152 float8 spills less a step;
    bf16 is not a candidate there: ptxas serializes its warpgroup MMAs at 152 (both masks,
    session 76). bf16's spills at 160 are all in the masked tiles' branch; float8's are on
    every path."""
    args = ["--kernel", entry, "--headdim", "64", "--block-m", "192", "--regs", str(regs)]
    r = _sass(*args, *(["--causal"] if causal else []))
    assert r["constexprs"]["CONSUMERS"] == 3 and r["constexprs"]["CAUSAL"] is causal
    assert r["constexprs"]["CONSUMER_REGS"] == regs and r["regs"] == regs
    assert not r["wgmma_serialized"] and r["register_a_writes"] == []
    assert len(r["mma_loops"]) == 3, "one step loop a consumer"
    for loop in r["mma_loops"]:
        assert loop["local_loads"] <= per_step and loop["local_stores"] <= per_step, loop
        # float8's on every path through a step (P's float16 pairs across the back edge),
        # bf16's only in the masked tiles' branch
        every = per_step if entry.startswith("gluon_fwd_fp8") else 0
        assert loop["every_step_local_loads"] <= every, loop
        assert loop["every_step_local_stores"] <= every, loop


def test_cli_lists_each_loops_opcodes():
    """``flashtriton sass --opcodes N``: under each innermost MMA loop, its N most frequent
    opcodes with their counts, most first."""
    out = subprocess.run([sys.executable, "-m", "flashtriton.cli", "sass", "--kernel",
                          "gluon_fwd_fp8", "--headdim", "64", "--opcodes", "4"],
                         capture_output=True, text=True, check=True).stdout
    loops = [x for x in out.splitlines() if "innermost MMA loop" in x]
    lists = [x.strip() for x in out.splitlines() if x.strip().startswith("opcodes: ")]
    assert len(loops) == len(lists) >= 2, out
    for line in lists:
        counts = [int(item.rsplit(" ", 1)[1]) for item in line[len("opcodes: "):].split(", ")]
        assert len(counts) == 4 and counts == sorted(counts, reverse=True), line


def _consumer_loops(loops, mma, spread):
    """The two consumer warpgroups' step loops of a head-dim-256 backward kernel: ``mma``
    warpgroup MMAs each, no wgmma descriptor moved from ordinary to uniform registers at each
    use, within ``spread`` instructions of each other, no local memory. Before session 50 the
    second consumer kept the 32 descriptors of the tile's fixed operands in ordinary registers:
    408 instructions a step (70 R2UR) against the first's 348 in the dK/dV kernel, 347 (64)
    against 292 in the dQ kernel (kernels/bwd_gluon_d256.py's ``_each_step``)."""
    assert [x["mma"] for x in loops] == mma, loops
    assert all(x["uniform_moves"] <= 4 for x in loops), loops
    assert abs(loops[0]["instructions"] - loops[1]["instructions"]) <= spread, loops
    assert all(x["local_loads"] == x["local_stores"] == 0 for x in loops), loops


def test_gluon_backward_d256_fits_an_sm():
    """The head-dim-256 dK/dV kernel as configured (64-key tiles, 64-query steps, two slots):
    within an H200 block's 232,448 bytes of shared memory, MMAs not serialized, no spills (140
    bytes until session 50). A step's MMAs per consumer: Sᵀ (warpgroup 0) or dPᵀ (warpgroup 1)
    over the head dim (16), dV and dK over the 64 queries (4 each). The consumers' loops differ
    (exp2 and the mask in one, the loads of Pᵀ in the other): 335 and 295 instructions when
    written (session 51), 332 and 287 with half of K or V in registers (session 52)."""
    r = _sass("--kernel", "gluon_bwd_d256", "--headdim", "256")
    assert r["kernel"] == "_attn_bwd_dkdv_hs" and r["constexprs"]["BLOCK_N"] == 64
    assert r["shared_bytes"] <= 232_448 and r["spill_bytes"] == 0
    assert not r["wgmma_serialized"] and r["instructions"]["HGMMA"] > 0
    assert r["unset_descriptors"] == [], r["unset_descriptors"]
    assert r["stale_descriptors"] == [], r["stale_descriptors"]
    _consumer_loops(r["mma_loops"], [256 // 16 + 2 * 64 // 16] * 2, 60)
    # a step's MMAs read 96 KB of shared memory a consumer for 4.2 MFLOP: 0.75x the cycles
    # of the tensor pipe's work at 128 bytes a cycle (0.88x with all of K and V read from
    # shared memory, before session 52; 1.12x when each consumer computed both score products
    # at N = 32, before session 51)
    assert all(operand_load(x) < 0.8 for x in r["mma_loops"]), r["mma_loops"]


def test_gluon_backward_d256_dq_fits_an_sm():
    """The head-dim-256 dQ kernel (64-row blocks, 64-key tiles in two slots): within an H200
    block's shared memory, no spills, MMAs not serialized. Without --headdim the CLI compiles
    the entry's own head dim, 256."""
    r = _sass("--kernel", "gluon_bwd_d256_dq")
    assert r["head_dim"] == 256
    assert r["kernel"] == "_attn_bwd_dq_hs" and r["constexprs"]["BLOCK_N"] == 64
    assert r["shared_bytes"] <= 232_448 and r["spill_bytes"] == 0
    # no local memory in any partition; the two consumers take 240 registers a thread
    assert not any(x["local_stores"] or x["local_loads"] for x in r["local_by_region"])
    assert [x["region"] for x in r["local_by_region"]].count("240 alloc") == 2
    # a step's MMAs: S (warpgroup 0) or dP (warpgroup 1) over the head dim (16), dQ over the
    # 64 keys (4); 264 and 235 instructions a step (exp2 and the mask in the first; session 53)
    _consumer_loops(r["mma_loops"], [256 // 16 + 64 // 16] * 2, 35)
    # with Q or dO in registers, a step's MMAs read 56 KB of shared memory a consumer for 3.1
    # MFLOP: 0.58x the tensor pipe's cycles (1.25x when each consumer computed both score
    # products for half of the keys from shared memory, before session 53)
    assert all(operand_load(x) < 0.7 for x in r["mma_loops"]), r["mma_loops"]
    assert not r["wgmma_serialized"] and r["instructions"]["HGMMA"] > 0
    assert r["unset_descriptors"] == [], r["unset_descriptors"]
    assert r["stale_descriptors"] == [], r["stale_descriptors"]


@pytest.mark.parametrize("args, code, message", [
    (["--kernel", "no_such_kernel"], 2, "unknown kernel 'no_such_kernel'; known: production_fwd"),
    (["--kernel", "gluon_bwd_d256", "--headdim", "128"], 1, "covers 256, not 128"),
    (["--opcodes", "-1"], 2, "--opcodes takes a count of 0 or more, not -1"),
    (["--kernel", "v1", "--causal"], 1, "v1 has no causal mask"),
    (["--kernel", "gluon_bwd", "--regs", "152"], 1, "regs applies to the Gluon forward"),
    (["--kernel", "gluon_fwd_fp8_persistent", "--headdim", "64", "--block-m", "192", "--regs",
      "168"], 1, "regs=168 on 3 consumers of 4 warps"),
])
def test_cli_errors_are_one_line(args, code, message):
    """A wrong registry name or a head dim the entry's launcher refuses: a one-line error and
    a non-zero exit, not the compile child's traceback inside the parent's."""
    out = subprocess.run([sys.executable, "-m", "flashtriton.cli", "sass", *args],
                         capture_output=True, text=True)
    assert out.returncode == code, out.stderr
    assert message in out.stderr and "Traceback" not in out.stderr, out.stderr
    assert len(out.stderr.strip().splitlines()) == 1, out.stderr


def test_gluon_persistent_forward_d256_fits_an_sm():
    """Head dim 256, persistent, O through Q's buffers: within an H200 block's shared memory,
    MMAs not serialized, spills no more than when it was written (68 bytes, session 17)."""
    r = _sass("--kernel", "gluon_fwd_persistent", "--headdim", "256")
    assert r["kernel"] == "_attn_fwd_persistent" and r["constexprs"]["BLOCK_N"] == 64
    assert r["shared_bytes"] <= 232_448 and r["spill_bytes"] <= 68
    assert not r["wgmma_serialized"] and r["instructions"]["HGMMA"] > 0
    assert r["unset_descriptors"] == [], r["unset_descriptors"]
    assert r["stale_descriptors"] == [], r["stale_descriptors"]


@pytest.mark.parametrize("head_dim", [64, 128])
def test_gluon_persistent_forward_entry_compiles(head_dim):
    """The persistent Gluon forward (16-bit): no serialized warpgroup MMAs, no spills, TMA loads
    through its rank-4 descriptors."""
    r = _sass("--kernel", "gluon_fwd_persistent", "--headdim", str(head_dim))
    assert r["kernel"] == "_attn_fwd_persistent" and not r["wgmma_serialized"]
    assert r["spill_bytes"] == 0
    assert r["instructions"]["HGMMA"] > 0 and r["instructions"]["UTMALDG"] > 0
    assert r["unset_descriptors"] == [], r["unset_descriptors"]
    assert r["stale_descriptors"] == [], r["stale_descriptors"]


_STALE_CHILD = """
import json, torch
from flashtriton.analysis.sass import capture_launches, compile_launch
from flashtriton.configs import make_params
from flashtriton.kernels.fwd_gluon import attn_fwd_gluon
out = []
for d, block_m, causal, s, order in [(64, 128, True, 1000, "greedy"), (64, 128, False, 1000, None),
                                     (64, 192, True, 8192, "greedy"), (128, 128, True, 1000,
                                     "greedy"), (128, 128, False, 4096, None)]:
    q = torch.empty(1, s, 4, d, dtype=torch.bfloat16)
    (la,) = [x for x in capture_launches(lambda: attn_fwd_gluon(
        q, q, q, make_params(d, causal=causal), block_m, 128, 4, 2, True, True,
        tile_order=order)) if x["name"] == "_attn_fwd_persistent"]
    r = compile_launch(la)
    out.append([r["unset_descriptors"], r["stale_descriptors"]])
print(json.dumps(out))
"""


def test_persistent_forward_descriptors_fresh_on_every_path():
    """The shipped persistent forward launches (d64 causal on two consumers with the half-width
    last key step and a greedy table, d64 without a mask, d64 causal on three consumers, d128
    causal and not): no warpgroup MMA reads a descriptor that some path leaves unwritten, or
    one that some paths through a tile's iteration leave holding an earlier tile's value
    (``sass_flow.stale_descriptor_reads``; with two Q buffers a consumer, ptxas reused a Q
    descriptor computed only in a skipped block, and the tiles in the other buffer came out
    wrong: docs/perf-log.md, session 43)."""
    assert compile_child(_STALE_CHILD) == [[[], []]] * 5


_SOFTMAX_PATHS_CHILD = """
import json, torch
from flashtriton.analysis.sass import capture_launches, compile_launch
from flashtriton.configs import make_params
from flashtriton.kernels.fwd_gluon import attn_fwd_gluon
out = []
for d, causal, seqlen, block_m in [(64, True, 1000, 128), (64, True, 2048, 128),
                                   (128, True, 1024, 128), (128, True, 4096, 128),
                                   (64, False, 1024, 128), (128, False, 4096, 128),
                                   (64, False, 4096, 192), (64, True, 16384, 192),
                                   (256, True, 1024, 128)]:
    q = torch.empty(1, seqlen, 2, d, dtype=torch.bfloat16)
    block_n = 64 if d == 256 else 128
    launches = capture_launches(lambda: attn_fwd_gluon(q, q, q, make_params(d, causal=causal),
                                                       block_m, block_n, 4, 2, d != 64, True))
    (launch,) = [x for x in launches if x["name"] == "_attn_fwd_persistent"]
    names = launch["fn"].arg_names
    consts = {names[p[0]]: v for p, v in launch["constants"].items()}
    report = compile_launch(launch) if (d, seqlen) in ((64, 1000), (64, 2048)) else None
    out.append([d, causal, seqlen, consts["CONSUMERS"], consts["ONE_PATH"],
                report and [report["spill_bytes"], report["wgmma_serialized"],
                            report["instructions"]["MUFU"]]])
q = torch.empty(1, 1000, 2, 64, dtype=torch.bfloat16)
(launch,) = capture_launches(lambda: attn_fwd_gluon(q, q, q, make_params(64, causal=True), 128,
                                                    128, 4, 2, False, False))
out.append(["one program per tile", compile_launch(launch)["instructions"]["MUFU"]])
print(json.dumps(out))
"""


def test_persistent_forward_softmax_paths_per_call():
    """The launcher's ``ONE_PATH`` for the persistent forward (``one_softmax_path``): one softmax
    after the mask with three consumers and for causal calls below 2048 keys, both mask branches
    elsewhere (head dim 256: both). The one-path kernel compiles without spills or serialized
    MMAs. And the softmax copies, counted by their special-function (MUFU) instructions: with
    one path each consumer's code holds two softmax copies (before the loop and in it, 64 exp2
    a copy at d64, and two for the rows' alpha); with both branches, and in the
    one-program-per-tile kernel, four. LLVM can merge the branches' copies into one after the
    join (an exp2 choice inside the softmax did, in session 22), which would undo the
    both-branches form without a sign."""
    *rows, (_, ws_mufu) = compile_child(_SOFTMAX_PATHS_CHILD)
    assert [(d, c, n, cons, one) for d, c, n, cons, one, _ in rows] == [
        (64, True, 1000, 2, True), (64, True, 2048, 2, False),
        (128, True, 1024, 2, True), (128, True, 4096, 2, False),
        (64, False, 1024, 2, False), (128, False, 4096, 2, False),
        (64, False, 4096, 3, True), (64, True, 16384, 3, True),
        (256, True, 1024, 2, False)]
    (spills, serialized, one_mufu), (_, _, two_mufu) = rows[0][5], rows[1][5]
    assert spills == 0 and not serialized
    copy = 2 * (64 + 2)  # one softmax copy in each of the two consumers; the other MUFU
    #                      instructions (the epilogue's log2 and reciprocal) are fewer
    assert [n // copy for n in (one_mufu, two_mufu, ws_mufu)] == [2, 4, 4], (one_mufu, two_mufu,
                                                                           ws_mufu)


_ROWSUM_CHILD = """
import json, torch
from flashtriton.analysis.sass import capture_launches, compile_launch
from flashtriton.configs import make_params
from flashtriton.kernels.fwd_gluon import attn_fwd_gluon
out = []
for d, rowsum in [(64, None), (64, False), (128, None)]:
    q = torch.empty(1, 1024, 2, d, dtype=torch.bfloat16)
    (launch,) = capture_launches(lambda: attn_fwd_gluon(q, q, q, make_params(d), 128, 128, 4, 2,
                                                        d == 128, True, rowsum_mma=rowsum))
    consts = {launch["fn"].arg_names[p[0]]: v for p, v in launch["constants"].items()}
    r = compile_launch(launch) if d == 64 else None
    out.append([consts["ROWSUM_MMA"], r and [r["spill_bytes"], r["wgmma_serialized"],
                                             r["instructions"]["HGMMA"]]])
print(json.dumps(out))
"""


def test_forward_row_sums_on_the_tensor_cores():
    """``rowsum_mma`` by default at d64 only (``ROWSUM_MMA_HEAD_DIMS``). At d64 the persistent
    kernel then issues ``P · ones`` after each ``P V``: 8 more warpgroup MMA instructions (one
    per 16 keys of a 128-key tile) at each of the two places P V is issued (in the loop and
    after it), in each of the two consumers, without spills or serialized MMAs."""
    (on, (spills, serialized, hgmma_on)), (off, (_, _, hgmma_off)), (d128, _) = compile_child(
        _ROWSUM_CHILD)
    assert (on, off, d128) == (True, False, False)
    assert spills == 0 and not serialized
    assert hgmma_on - hgmma_off == 2 * 2 * 128 // 16, (hgmma_on, hgmma_off)


_FP8_ROWSUM_CHILD = """
import json, re, torch
from flashtriton.analysis.sass import capture_launches, compile_launch, compile_sm90a, cubin_sass
from flashtriton.configs import gluon_fp8_config, make_params
from flashtriton.kernels.fwd_gluon import attn_fwd_gluon
out = []
for d, rowsum in ((64, False), (64, True), (64, None), (128, None)):
    cfg = gluon_fp8_config(d, False)
    q = torch.empty(1, 1024, 2, d, dtype=torch.float8_e4m3fn)
    launches = capture_launches(lambda: attn_fwd_gluon(
        q, q, q, make_params(d), cfg.block_m, cfg.block_n, cfg.num_warps, cfg.num_stages,
        cfg.pingpong, descale=torch.ones(3), rowsum_mma=rowsum))
    (launch,) = [la for la in launches if la["name"] == "_attn_fwd_ws"]  # (not V's copy)
    r = compile_launch(launch)
    sass = cubin_sass(compile_sm90a(launch).asm["cubin"])
    fresh = len(re.findall(r"QGMMA[.]64x8x32[^ ]* R[0-9]+, R[0-9]+, gdesc[[]UR[0-9]+[]], RZ, !UPT",
                           sass))
    shifts = len(re.findall(r"FADD R[0-9]+, -?R[0-9]+(?:[.]reuse)?, -8 ;", sass))
    out.append([r["spill_bytes"], r["wgmma_serialized"], r["instructions"]["QGMMA"],
                "0x38383838" in sass, fresh, shifts, r["constexprs"]["CONSUMERS"]])
print(json.dumps(out))
"""


def test_float8_forward_row_sums_on_the_tensor_cores():
    """The float8 forward with ``rowsum_mma`` (d64): ``P · ones`` after each ``P V``, 4 more
    float8 MMA instructions (one per 32 keys of a 128-key tile) at each of the two places P V is
    issued, in each consumer (three at d64, as shipped: ``_FWD_GLUON_FP8``); no more spill
    than the kernel has without them, MMAs not serialized. Each step's chain of four starts
    from zero (``RZ, !UPT``: the float8 tensor cores' accumulation keeps about 14
    bits, so the sums across steps are added in float32, ``_sum_rows_async``). The tile of ones
    is stored as e4m3's bits, 0x38 in each byte (a constant): converted from 1.0 in the kernel,
    two bytes of each four a thread stored came from a stale register (docs/perf-log.md,
    session 68). With the row sums, and only there, P is taken against the max less 8
    (``fwd_gluon_tile.FP8_P_SHIFT``: an ``FADD …, -8`` of the max), so that e4m3 does not round
    a long row's small terms to zero (session 69). By default (``FP8_ROWSUM_MMA_HEAD_DIMS``)
    the row sums are on the tensor cores at d64 and d128 (session 70)."""
    off, on, default64, default128 = compile_child(_FP8_ROWSUM_CHILD)
    (s_off, ser_off, q_off, _, _, shift_off, n), (s_on, ser_on, q_on, ones, fresh, shift_on, _) = (
        off, on)
    assert n == 3 and s_on <= max(s_off, 256) and not ser_off and not ser_on, (off, on)
    assert q_on - q_off == n * 2 * 128 // 32, (q_on, q_off)
    assert fresh == n * 2, f"{fresh} row-sum chains start from zero, not one per place and consumer"
    assert ones, "the tile of ones is not stored as the constant 0x38383838"
    assert shift_on > 0 and shift_off == 0, (shift_on, shift_off)
    assert default64 == on, (default64, on)
    *_, ones128, fresh128, shift128, n128 = default128
    assert default128[0] == 0 and ones128 and fresh128 == 2 * 2 and shift128 > 0, default128
    assert n128 == 2, default128


# A child's prelude: ``forward_ptx`` compiles the Gluon forward's launch for 4096 keys (two
# heads, bf16, no mask) for sm_90a and returns its PTX.
_FORWARD_PTX = """
import json, re, torch
from flashtriton.analysis.sass import capture_launches, compile_sm90a
from flashtriton.configs import make_params
from flashtriton.kernels.fwd_gluon import attn_fwd_gluon


def forward_ptx(d, block_m, block_n, pingpong, persistent):
    q = torch.empty(1, 4096, 2, d, dtype=torch.bfloat16)
    (la,) = capture_launches(lambda: attn_fwd_gluon(q, q, q, make_params(d), block_m, block_n,
                                                    4, 2, pingpong, persistent))
    return compile_sm90a(la).asm["ptx"]
"""

_TURNS_CHILD = _FORWARD_PTX + """
out = []
for d, block_m, pingpong, persistent in [(128, 128, True, False), (64, 192, True, True),
                                         (64, 128, False, True)]:
    ptx = forward_ptx(d, block_m, 128, pingpong, persistent)
    out.append([len(re.findall(r"bar\\.arrive %r", ptx)), len(re.findall(r"bar\\.sync %r", ptx))])
print(json.dumps(out))
"""


def test_forward_turns_on_named_barriers():
    """Ping-pong hands the turn on through hardware named barriers (``fwd_gluon_tile._turn``):
    each consumer waits for its turn (``bar.sync``) and hands it on (``bar.arrive``) in its step
    loop and in the loop over the tiles past its own (LLVM may merge some of those places), and
    the last consumer hands over the first turn; no named barrier without ping-pong."""
    (two_arrive, two_sync), (three_arrive, three_sync), (off_arrive, off_sync) = compile_child(
        _TURNS_CHILD)
    assert two_arrive >= 2 + 1 and two_sync >= 2, (two_arrive, two_sync)
    assert three_arrive >= 3 + 1 and three_sync >= 3, (three_arrive, three_sync)
    assert (off_arrive, off_sync) == (0, 0)


_RELEASES_CHILD = _FORWARD_PTX + """
out = []
for d, block_m, persistent in [(64, 128, True), (64, 192, True), (128, 128, False)]:
    ptx = forward_ptx(d, block_m, 128, True, persistent)
    out.append([len(re.findall(r"cp\\.async\\.mbarrier\\.arrive\\.noinc", ptx)),
                len(re.findall(r"mbarrier\\.arrive\\.shared::cta\\.b64 _,", ptx)),
                sorted({int(n) for n in re.findall(
                    r"mbarrier\\.init\\.shared::cta\\.b64 \\[%r\\d+\\], (\\d+);", ptx)})])
print(json.dumps(out))
"""


def test_forward_ring_releases_per_kernel():
    """How the consumers release their K/V ring slots (``fwd_gluon_tile._release``): in the
    persistent kernel on two consumers, every thread arrives by itself on K's and V's empty
    barriers (which count 2 x 128 arrivals) and no consumer arrives by one thread (the two
    one-thread arrivals there are the producer's, on the Q barrier of a consumer of rows
    before row 0, ``fwd_gluon_persistent._load_q``); on three consumers K by every thread (3 x 128), V by
    one thread per consumer (3); the one program per tile kernel by one thread for both (2),
    with no per-thread arrival."""
    (c2_own, c2_one, c2_counts), (c3_own, c3_one, c3_counts), (ws_own, ws_one, ws_counts) = (
        compile_child(_RELEASES_CHILD))
    assert c2_own >= 2 * 2 and c2_one == 2 and 256 in c2_counts, (c2_own, c2_one, c2_counts)
    assert c3_own >= 3 and c3_one >= 3 and {384, 3} <= set(c3_counts), (c3_own, c3_one,
                                                                          c3_counts)
    assert ws_own == 0 and ws_one >= 2 * 2 and 256 not in ws_counts and 2 in ws_counts, (
        ws_own, ws_one, ws_counts)


_RESCALE_CHILD = _FORWARD_PTX + """
out = []
for d, block_m, block_n, persistent in [(128, 128, 128, False), (64, 192, 128, True),
                                        (256, 128, 64, True)]:
    ptx = forward_ptx(d, block_m, block_n, True, persistent)
    blocks = re.findall(r"vote\\.sync\\.any\\.pred p, p, 0xffffffff;(.*?)RESCALE_DONE_\\d+:", ptx,
                        re.S)
    alphas = [re.findall(r"mul\\.f32 %r\\d+, %r\\d+, (%r\\d+);", b) for b in blocks]
    pairs = all(len(a) == d // 2 and len(set(a)) == 2 and a[0] == a[1] != a[2] == a[3]
                and a[:4] * (len(a) // 4) == a for a in alphas)
    out.append([len(blocks), pairs, len(re.findall(r"div\\.[a-z.]*f32", ptx)),
                len(re.findall(r"lg2\\.approx\\.ftz\\.f32", ptx)),
                len(re.findall(r"rcp\\.approx\\.ftz\\.f32", ptx))])
print(json.dumps(out))
"""


def test_forward_rescale_skipped_by_a_warp_vote():
    """O's rescale (``fwd_gluon_tile._rescale``): at least one voted block per consumer, each
    multiplying a thread's d/2 accumulator values by its two rows' alphas in pairs (r, r, r+8,
    r+8: the accumulator's register order, which the vote's two alphas assume); and the final
    normalization (``fwd_gluon_tile._normalize``) takes one approximate reciprocal and log2 per
    row, a thread's two rows in each consumer, and divides nowhere (d/2 divisions a consumer
    before session 22, one exact division per row until session 41)."""
    rows = compile_child(_RESCALE_CHILD)
    for (blocks, pairs, divs, lg2, rcp), consumers, d in zip(rows, (2, 3, 2), (128, 64, 256)):
        assert blocks >= consumers and pairs, (d, blocks, pairs)
        assert divs == 0 and lg2 == rcp == 2 * consumers, (d, divs, lg2, rcp)


def test_pinned_triton_has_the_tma_reduction():
    """The Gluon backward adds dQ by TMA reductions; without the builder call the public
    backward would fall back to the tl kernels on sm_90 (gluon_bwd_eligible)."""
    from flashtriton.kernels.bwd_gluon import HAS_TMA_REDUCE

    assert HAS_TMA_REDUCE


@pytest.mark.parametrize("head_dim", [64, 128])
def test_gluon_backward_entry_compiles(head_dim):
    """The Gluon backward as shipped (configs._BWD_GLUON, split dQ): warpgroup MMAs not
    serialized by ptxas, TMA loads, dQ added by TMA reductions, and no warpgroup MMA reading a
    shared-memory descriptor that some path leaves unwritten (analysis/sass_flow.py: a variant
    of this kernel faulted on the H200 so, ptxas having computed the descriptor only in a loop's
    preheader that a zero-trip branch skipped)."""
    r = _sass("--kernel", "gluon_bwd", "--headdim", str(head_dim))
    assert r["kernel"] == "_attn_bwd_ws" and not r["wgmma_serialized"]
    assert r["unset_descriptors"] == [], r["unset_descriptors"]
    assert r["stale_descriptors"] == [], r["stale_descriptors"]
    assert r["constexprs"]["SPLIT_DQ"]
    assert r["instructions"]["HGMMA"] > 0 and r["instructions"]["UTMALDG"] > 0
    assert r["instructions"]["UTMAREDG"] > 0
    # head dim 64: K and V reach Sᵀ and dPᵀ from registers, loaded once a tile by ldmatrix
    # (the kernel has no other LDSM)
    assert (r["instructions"]["LDSM"] > 0) == (head_dim == 64), r["instructions"]
    # each consumer's step loop, the two of the same shape, with a step's warpgroup MMAs, one
    # per 16 of the reduced dimension: Sᵀ and dPᵀ over the head dim, dV and dK over the 64
    # queries, the split dQ over the tile's 128 keys; at head dim 64 (dq_alternate) two steps
    # an iteration, one dQ product of all the columns over the 128 keys
    loops = r["mma_loops"]
    per_step = 2 * head_dim // 16 + 2 * 64 // 16
    mma = 2 * per_step + 128 // 16 if head_dim == 64 else per_step + 128 // 16
    assert [x["mma"] for x in loops] == [mma, mma], loops
    # nothing in the step loops goes to local memory (the few spilled values are read once a
    # tile)
    assert all(x["local_loads"] == x["local_stores"] == 0 for x in loops), loops
    # (the two warpgroups' loops differ by a few integer instructions; at head dim 64 they take
    # the dQ turn in opposite halves of the iteration: 799 against 834)
    assert abs(loops[0]["instructions"] - loops[1]["instructions"]) <= (
        40 if head_dim == 64 else 8), loops
    # dQ is staged in 8-column blocks of 32-byte rows, unswizzled, and reduced as rows of 256
    # float32 values (_dq_add)
    layouts = r["shared_layouts"]
    assert any("swizzlingByteWidth = 0" in x and "elementBitWidth = 32, rank = 4" in x
               for x in layouts), layouts
    assert any("swizzlingByteWidth = 0" in x and "elementBitWidth = 32}" in x
               for x in layouts), layouts
    # ptxas's spill bytes and the local-memory instructions agree: both or neither
    local = sum(x["local_stores"] + x["local_loads"] for x in r["local_by_region"])
    assert (local > 0) == (r["spill_bytes"] > 0), (r["spill_bytes"], r["local_by_region"])


def test_registry_covers_the_ladder_and_the_backward():
    expected = {"production_fwd", "production_bwd_dkdv", "production_bwd_dq", "v1", "v2", "v2_kt", "v2_pad"}
    assert expected <= set(KERNELS)


_DECODE_CHILD = """
import json, torch
from flashtriton.analysis.sass import capture_launches, compile_launch
from flashtriton.configs import make_params
from flashtriton.kernels.fwd_gluon import attn_fwd_gluon
out = []
for d, block_m, h, hk in [(64, 128, 8, 2), (64, 192, 4, 4), (128, 128, 6, 3)]:
    q = torch.empty(1, 4096, h, d, dtype=torch.bfloat16)
    k = torch.empty(1, 4096, hk, d, dtype=torch.bfloat16)
    (la,) = [x for x in capture_launches(lambda: attn_fwd_gluon(
        q, k, k, make_params(d, causal=True), block_m, 128, 4, 2, True, True,
        tile_order="greedy")) if x["name"] == "_attn_fwd_persistent"]
    out.append(compile_launch(la)["instructions"]["I2F"])
print(json.dumps(out))
"""


_MAX_CHAIN_CHILD = """
import json, re, torch
from flashtriton.analysis.sass import capture_launches, compile_sm90a, cubin_sass, sass_instructions
from flashtriton.configs import make_params
from flashtriton.kernels.fwd_gluon import attn_fwd_gluon
out = []
for d in (64, 128):
    q = torch.empty(1, 1024, 2, d, dtype=torch.bfloat16)
    (la,) = [x for x in capture_launches(lambda: attn_fwd_gluon(
        q, q, q, make_params(d, causal=True), 128, 128, 4, 2, True, True))
        if x["name"] == "_attn_fwd_persistent"]
    sass = cubin_sass(compile_sm90a(la).asm["cubin"])
    # the longest run of FMNMX each reading the one before (a register's depth resets when
    # anything else writes it; shuffles in between count as a break)
    depth, longest = {}, 0
    for _, op, rest in sass_instructions(sass):
        regs = re.findall(r"\\bR(\\d+)\\b", rest)
        if op.startswith("FMNMX") and len(regs) >= 3:
            dst, a, b = regs[:3]
            depth[dst] = max(depth.get(a, 0), depth.get(b, 0)) + 1
            longest = max(longest, depth[dst])
        elif regs:
            depth.pop(regs[0], None)
    out.append(longest)
print(json.dumps(out))
"""


def test_persistent_forward_tiles_decoded_without_integer_division():
    """The persistent forward's partitions find a tile's batch, head and key head by a multiply
    and a shift (``tile_walk._divide`` with the launcher's ``fast_divisor``), not by a division
    by a runtime integer (which ptxas expands to an I2F.RP reciprocal and ~15 instructions): no
    I2F in the kernels that walk a table of tiles (the shipped causal launches at d64 on two
    and three consumers and at d128, with grouped-query heads). (A walk without a table keeps
    one division in ``_snake``'s round, by the program count; its kernels compile it in.)"""
    assert compile_child(_DECODE_CHILD) == [0, 0, 0]


def test_row_max_is_a_tree():
    """``fwd_gluon_tile._row_max`` halves a thread's columns level by level, so the exp2s wait
    for at most 7 dependent max instructions (5 levels over a thread's 32 values of a row, the
    two after the shuffles), not a chain of groups (12 in the persistent kernels before)."""
    assert compile_child(_MAX_CHAIN_CHILD) == [7, 7]
