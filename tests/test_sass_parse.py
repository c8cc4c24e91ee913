"""`flashtriton sass`'s readers of a SASS listing and of the tools' text (analysis/sass.py):
instruction counts, spills by register region, a kernel's step loops (their instructions,
paths, spills and MMA work) and the resource and spill lines. Plain text in, no compile; the
compile tests are in test_sass.py.
"""

from __future__ import annotations

import pytest

from flashtriton.analysis.sass import (count_instructions, local_by_region, mma_loops,
                                       operand_load, parse_ptxas_spills, parse_res_usage,
                                       wgmma_work)

SASS_SAMPLE = """
        /*0a40*/                   HGMMA.64x64x16.F32.BF16 R24, gdesc[UR4], RZ, !UPT ;
        /*0a50*/              @!P0 LDS.128 R4, [R2+0x100] ;
        /*0a60*/                   HFMA2.MMA R2, -RZ, RZ, 0, 0 ;
        /*0a70*/                   LDGSTS.E.BYPASS.128 [R5], desc[UR6][R8.64] ;
        /*0a80*/               @P1 STS.64 [R3], R10 ;
        /*0a90*/                   LDSM.16.M88.4 R12, [R7] ;
"""


def test_instruction_counter_matches_whole_opcodes():
    c = count_instructions(SASS_SAMPLE)
    assert c == {"HGMMA": 1, "QGMMA": 0, "HMMA": 0, "LDS": 1, "LDSM": 1, "STS": 1, "LDGSTS": 1,
                 "UTMALDG": 0, "UTMAREDG": 0, "MUFU": 0, "I2F": 0}


def test_local_memory_counted_per_setmaxnreg_region():
    sass = """
        /*0010*/                   STL [R1+0x8], R2 ;
        /*0020*/                   USETMAXREG.DEALLOC.CTAPOOL 0x78 ;
        /*0030*/                   USETMAXREG.TRY_ALLOC.CTAPOOL UP0, 0xf0 ;
        /*0040*/                   LDL.64 R18, [R1+0xd0] ;
        /*0050*/               @P0 STL.64 [R1+0x10], R4 ;
        /*0060*/                   LDL.LU R3, [R1+0x4] ;
        /*0070*/                   USETMAXREG.DEALLOC.CTAPOOL 0x18 ;
        /*0080*/                   LDS.128 R4, [R2+0x100] ;
        /*0090*/                   LDL R6, [R1+0xe8] ;
"""
    assert local_by_region(sass) == [
        {"region": "start", "local_stores": 1, "local_loads": 0},
        {"region": "120 dealloc", "local_stores": 0, "local_loads": 0},
        {"region": "240 alloc", "local_stores": 1, "local_loads": 2},
        {"region": "24 dealloc", "local_stores": 0, "local_loads": 1}]
    # no setmaxnreg: one region; shared-memory loads and stores are not local memory
    assert local_by_region(SASS_SAMPLE) == [
        {"region": "start", "local_stores": 0, "local_loads": 0}]


def test_innermost_mma_loops():
    """A tile loop (0x0010-0x00c0) around a step loop (0x0030-0x0090) with warpgroup MMAs, a
    loop without MMAs (0x00d0-0x00e0), and a wait's retry code after the exit that branches
    back up into the step loop: only the step loop is reported, with its counts."""
    sass = """
        /*0010*/                   MOV R2, RZ ;
        /*0020*/                   STL [R1], R2 ;
        /*0030*/                   SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [UR4], R0 ;
        /*0040*/              @!P0 BRA 0x100 ;
        /*0050*/                   HGMMA.64x64x16.F32.BF16 R24, gdesc[UR4], RZ, !UPT ;
        /*0060*/                   HGMMA.64x64x16.F32.BF16 R24, gdesc[UR8], R24, gsb0 ;
        /*0070*/                   LDL R6, [R1+0x8] ;
        /*0080*/                   STS.64 [R3], R10 ;
        /*0083*/                   MEMBAR.ALL.CTA ;
        /*0084*/                   R2UR UR6, R12 ;
        /*0085*/                   BAR.SYNC.DEFER_BLOCKING 0x2, 0x80 ;
        /*0090*/               @P1 BRA 0x30 ;
        /*00a0*/                   IADD3 R2, R2, 0x1, RZ ;
        /*00b0*/                   LDL R7, [R1] ;
        /*00c0*/               @P2 BRA 0x10 ;
        /*00d0*/                   IADD3 R4, R4, 0x1, RZ ;
        /*00e0*/               @P3 BRA 0xd0 ;
        /*00f0*/                   EXIT ;
        /*0100*/                   SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [UR4], R0 ;
        /*0110*/                   BRA 0x40 ;
"""
    assert mma_loops(sass) == [{"start": 0x30, "end": 0x90, "instructions": 10,
                                "step_fewest": 10, "step_most": 10, "mma": 2,
                                "local_loads": 1, "local_stores": 0,
                                "every_step_local_loads": 1, "every_step_local_stores": 0,
                                "shared_stores": 1,
                                "barriers": 1, "fences": 1, "uniform_moves": 1,
                                # two 64x64x16 bf16 MMAs, A and B from shared memory
                                "mma_flops": 2 * 2 * 64 * 64 * 16,
                                "mma_shared_bytes": 2 * (64 * 16 + 64 * 16) * 2,
                                "opcodes": {"HGMMA": 2, "SYNCS": 1, "BRA": 2, "LDL": 1,
                                            "STS": 1, "MEMBAR": 1, "R2UR": 1, "BAR": 1}}]
    # most frequent first, ties in the order met
    assert list(mma_loops(sass)[0]["opcodes"]) == ["BRA", "HGMMA", "SYNCS", "LDL", "STS",
                                                    "MEMBAR", "R2UR", "BAR"]
    assert mma_loops(SASS_SAMPLE) == []  # no backward branch


def test_mma_loop_spills_on_every_path():
    """A step loop's local loads and stores, and those on every path through a step: not the
    ones a forward branch inside the loop jumps over (an if block, and the else block that
    the if side's jump passes), nor a predicated one; a branch out of the loop (a wait's
    retry code) skips nothing."""
    sass = """
        /*0010*/                   SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [UR4], R0 ;
        /*0020*/              @!P0 BRA 0x200 ;
        /*0030*/                   HGMMA.64x64x16.F32.BF16 R24, gdesc[UR4], RZ, !UPT, gsb0 ;
        /*0040*/                   STL [R1], R2 ;
        /*0050*/              @!P1 BRA 0x80 ;
        /*0060*/                   STL [R1+0x4], R3 ;
        /*0070*/                   BRA 0x90 ;
        /*0080*/                   LDL R3, [R1+0x4] ;
        /*0090*/                   LDL R2, [R1] ;
        /*00a0*/              @P2 LDL R4, [R1+0x8] ;
        /*00b0*/               @P3 BRA 0x10 ;
        /*00c0*/                   EXIT ;
        /*0200*/                   SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [UR4], R0 ;
        /*0210*/                   BRA 0x20 ;
"""
    (loop,) = mma_loops(sass)
    assert (loop["start"], loop["end"]) == (0x10, 0xb0)
    assert (loop["local_loads"], loop["local_stores"]) == (3, 2)
    assert (loop["every_step_local_loads"], loop["every_step_local_stores"]) == (1, 1)
    # 11 instructions; a step runs 0x60-0x70 (the branch not taken) or 0x80 (taken)
    assert (loop["instructions"], loop["step_fewest"], loop["step_most"]) == (11, 9, 10)


@pytest.mark.parametrize("op, operands, work", [
    # A and B from shared memory: 2·M·N·K FLOPs, (M·K + N·K) elements read
    ("HGMMA.64x128x16.F32.BF16", " R88, gdesc[UR28].tnspB, R88 ;", (2 * 64 * 128 * 16,
                                                                    (64 + 128) * 16 * 2)),
    # A from registers: only B is read from shared memory
    ("HGMMA.64x64x16.F32.F16", " R24, R120, gdesc[UR4], R24, gsb0 ;", (2 * 64 * 64 * 16,
                                                                       64 * 16 * 2)),
    # float16 inputs: cuobjdump names only the accumulator's type
    ("HGMMA.64x128x16.F32", " R88, gdesc[UR28], R88 ;", (2 * 64 * 128 * 16,
                                                         (64 + 128) * 16 * 2)),
    ("QGMMA.64x128x32.F32.E4M3.E4M3", " R24, gdesc[UR8], R24 ;", (2 * 64 * 128 * 32,
                                                                 (64 + 128) * 32)),
    ("HGMMA.64x32x8.F32.TF32", " R24, gdesc[UR8], RZ, !UPT ;", (2 * 64 * 32 * 8,
                                                               (64 + 32) * 8 * 4)),
    ("HMMA.16816.F32.BF16", " R4, R8, R12, R4 ;", (0, 0)),  # not a warpgroup MMA
    ("FFMA", " R1, R2, R3, R4 ;", (0, 0)),
])
def test_wgmma_work(op, operands, work):
    """A warpgroup MMA's FLOPs and shared-memory reads, from its SASS opcode and operands."""
    assert wgmma_work(op, operands) == work


def test_operand_load():
    """Shared-memory cycles over tensor cycles: 4,096 FLOP and 128 bytes are one cycle each."""
    assert operand_load({"mma_flops": 4096 * 10, "mma_shared_bytes": 128 * 5}) == 0.5
    assert operand_load({"mma_flops": 0, "mma_shared_bytes": 0}) == 0.0


def test_wgmma_work_refuses_an_unknown_input_type():
    with pytest.raises(ValueError, match="unknown input type in HGMMA.64x64x16.F32.XYZ"):
        wgmma_work("HGMMA.64x64x16.F32.XYZ", " R24, gdesc[UR4], R24 ;")


def test_resource_and_spill_parsers():
    assert parse_res_usage(" Function k:\n  REG:168 STACK:16 SHARED:0 LOCAL:8 CONSTANT[0]:568") == \
        {"REG": 168, "STACK": 16, "SHARED": 0, "LOCAL": 8}
    log = ("ptxas info    : Used 255 registers\n"
           "    264 bytes stack frame, 264 bytes spill stores, 264 bytes spill loads")
    assert parse_ptxas_spills(log) == 528
    assert parse_ptxas_spills("0 bytes spill stores, 0 bytes spill loads") == 0
