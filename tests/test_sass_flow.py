"""analysis/sass_flow.py: warpgroup MMAs that read a descriptor register some path from the
kernel's entry leaves unwritten, or one that some paths through a loop's iteration leave
holding an earlier iteration's value, and register A operands written while their product
runs, on small listings written here in ``cuobjdump -sass``'s format.
The shipped kernels' own listings are checked in test_sass.py, where they are compiled."""

from __future__ import annotations

from flashtriton.analysis.sass_flow import (register_operand_writes, stale_descriptor_reads,
                                            unset_descriptor_reads)

MMA = "HGMMA.64x64x16.F32.BF16"


def _cuobjdump(body: str) -> str:
    """``body``'s instructions as ``cuobjdump -sass`` prints them: a header, and after each
    instruction its encoding, two 64-bit words in comments (the second on a line of its own)."""
    lines = ["\tcode for sm_90a", "\t\tFunction : _kernel"]
    for line in body.strip().splitlines():
        lines += [f"        {line.strip():72s}/* 0x000fe20008000000 */",
                  f"{'':80s}/* 0x000fc40000000a00 */"]
    return "\n".join(lines) + "\n"


def _found(body: str) -> list[tuple[int, list[str]]]:
    return [(x["address"], x["registers"]) for x in unset_descriptor_reads(_cuobjdump(body))]


# A's descriptor in UR4, UR5 and B's in UR6, UR7, as an HGMMA with A in shared memory reads them
_WRITE_DESCRIPTORS = """
    /*{0:04x}*/                   UMOV UR4, 0x400 ;
    /*{1:04x}*/                   UMOV UR5, 0x40000040 ;
    /*{2:04x}*/                   ULDC.64 UR6, c[0x0][0x210] ;
"""


def test_written_before_a_branch_is_set_on_both_arms():
    body = _WRITE_DESCRIPTORS.format(0x00, 0x10, 0x20) + f"""
    /*0030*/                   ISETP.NE.AND P0, PT, R0, RZ, PT ;
    /*0040*/               @P0 BRA 0x70 ;
    /*0050*/                   {MMA} R24, gdesc[UR4].tnspA.tnspB, RZ, !UPT, gsb0 ;
    /*0060*/                   BRA 0x80 ;
    /*0070*/                   NOP ;
    /*0080*/                   {MMA} R24, gdesc[UR4].tnspA.tnspB, R24, gsb0 ;
    /*0090*/                   EXIT ;
    /*00a0*/                   BRA 0xa0 ;
"""
    assert _found(body) == []


def _diamond(other_arm: str) -> str:
    """One arm (0x20 to 0x60) writes the descriptors and issues an HGMMA; the branch at 0x10
    takes the other arm (0x70, 0x80); an HGMMA after the join (0x90) reads all four."""
    return f"""
    /*0000*/                   ISETP.NE.AND P0, PT, R0, RZ, PT ;
    /*0010*/               @P0 BRA 0x70 ;
""" + _WRITE_DESCRIPTORS.format(0x20, 0x30, 0x40) + f"""
    /*0050*/                   {MMA} R24, gdesc[UR4].tnspA.tnspB, RZ, !UPT, gsb0 ;
    /*0060*/                   BRA 0x90 ;
{other_arm}
    /*0090*/                   {MMA} R24, gdesc[UR4].tnspA.tnspB, R24, gsb0 ;
    /*00a0*/                   EXIT ;
"""


def test_written_on_one_arm_only_is_unset_after_the_join():
    body = _diamond("""
    /*0070*/                   NOP ;
    /*0080*/                   NOP ;
""")
    assert _found(body) == [(0x90, ["UR4", "UR5", "UR6", "UR7"])]
    # written on the other arm as well: set on every path
    assert _found(_diamond("""
    /*0070*/                   ULDC.64 UR4, c[0x0][0x220] ;
    /*0080*/                   ULDC.64 UR6, c[0x0][0x228] ;
""")) == []


def test_a_guarded_write_may_not_happen():
    """In the block of the guarded writes and in the blocks after it."""
    body = f"""
    /*0000*/                   UMOV UR4, 0x400 ;
    /*0010*/                   UMOV UR5, 0x40000040 ;
    /*0020*/                   VOTEU.ALL UP0, P1 ;
    /*0030*/             @!UP0 UIADD3 UR6, UR4, 0x80, URZ ;
    /*0040*/               @P1 UMOV UR7, 0x40000040 ;
    /*0050*/                   {MMA} R24, gdesc[UR4].tnspA.tnspB, RZ, !UPT, gsb0 ;
    /*0060*/               @P2 BRA 0x80 ;
    /*0070*/                   NOP ;
    /*0080*/                   {MMA} R24, gdesc[UR4].tnspA.tnspB, R24, gsb0 ;
    /*0090*/                   EXIT ;
"""
    assert _found(body) == [(0x50, ["UR6", "UR7"]), (0x80, ["UR6", "UR7"])]


def test_a_from_registers_reads_only_b_descriptor():
    """``HGMMA R24, R56, gdesc[UR4]``: A in registers R56..., B's descriptor in UR6, UR7; UR4 and
    UR5 are not read (here never written). With A from shared memory all four are read."""
    body = f"""
    /*0000*/                   ULDC.64 UR6, c[0x0][0x210] ;
    /*0010*/                   {MMA} R24, R56, gdesc[UR4].tnspB, RZ, !UPT ;
    /*0020*/                   {MMA} R24, gdesc[UR4].tnspB, R24, gsb0 ;
    /*0030*/                   EXIT ;
"""
    assert _found(body) == [(0x20, ["UR4", "UR5"])]


# The fault found on the H200 ("Invalid __shared__ read"): B's descriptor (UR26, UR27) is
# computed in the preheader of a loop that a zero-trip branch skips, and an HGMMA after the loop
# reads it. The loop's own HGMMA is fine: the preheader is on every path into the loop.
_ZERO_TRIP = f"""
    /*0000*/                   S2UR UR4, SR_CgaCtaId ;
    /*0010*/                   UMOV UR24, 0x400 ;
    /*0020*/                   UMOV UR25, 0x40000040 ;
    /*0030*/                   ISETP.GE.AND P0, PT, R2, 0x1, PT ;
    /*0040*/              @!P0 BRA 0xc0 ;
    /*0050*/                   UIADD3 UR26, UP0, UR4, 0x80, URZ ;
    /*0060*/                   UIADD3.X UR27, UR4, 0x40000040, URZ, UP0, !UPT ;
    /*0070*/                   WARPGROUP.ARRIVE ;
    /*0080*/                   {MMA} R24, gdesc[UR24].tnspA.tnspB, R24, gsb0 ;
    /*0090*/                   IADD3 R2, R2, -0x1, RZ ;
    /*00a0*/                   ISETP.NE.AND P1, PT, R2, RZ, PT ;
    /*00b0*/               @P1 BRA 0x70 ;
    /*00c0*/                   {MMA} R24, gdesc[UR24].tnspA.tnspB, R24, gsb0 ;
    /*00d0*/                   EXIT ;
    /*00e0*/                   BRA 0xe0 ;
"""


def test_loop_preheader_skipped_by_a_zero_trip_branch():
    (found,) = unset_descriptor_reads(_cuobjdump(_ZERO_TRIP))
    assert found == {"address": 0xc0, "opcode": MMA, "registers": ["UR26", "UR27"]}
    # without the zero-trip branch the preheader is on every path
    assert _found(_ZERO_TRIP.replace("@!P0 BRA 0xc0", "NOP")) == []


def test_text_without_instructions():
    assert unset_descriptor_reads("") == []
    assert unset_descriptor_reads("\tcode for sm_90a\n\t\tFunction : _kernel\n") == []


# The wrong tiles of session 43 (two Q buffers in the persistent forward): a loop over tiles
# whose Q address (UR8) changes every tile; a block that only some tiles run (here: when R3 is
# not zero) computes the second K-chunk's descriptor, UR36 = UR8 + 2, and ptxas let the step's
# HGMMA read UR36 on every path, so on the other path it holds an earlier tile's descriptor.
_STALE = f"""
    /*0000*/                   UMOV UR8, 0x400 ;
    /*0010*/                   UMOV UR9, 0x40000040 ;
    /*0020*/                   UMOV UR10, 0x800 ;
    /*0030*/                   UMOV UR11, 0x40000040 ;
    /*0040*/                   UIADD3 UR36, UR8, 0x2, URZ ;
    /*0050*/                   UMOV UR37, 0x40000040 ;
    /*0060*/                   UIADD3 UR8, UR8, 0x400, URZ ;
    /*0070*/                   ISETP.NE.AND P0, PT, R3, RZ, PT ;
    /*0080*/              @!P0 BRA 0xb0 ;
    /*0090*/                   UIADD3 UR36, UR8, 0x2, URZ ;
    /*00a0*/                   {MMA} R24, gdesc[UR8].tnspA.tnspB, RZ, !UPT, gsb0 ;
    /*00b0*/                   UIADD3 UR12, UR36, 0x2, URZ ;
    /*00c0*/                   UMOV UR13, UR37 ;
    /*00d0*/                   UMOV UR14, UR10 ;
    /*00e0*/                   UMOV UR15, UR11 ;
    /*00f0*/                   {MMA} R24, gdesc[UR12].tnspA.tnspB, R24, gsb0 ;
    /*0100*/                   IADD3 R2, R2, -0x1, RZ ;
    /*0110*/                   ISETP.NE.AND P1, PT, R2, RZ, PT ;
    /*0120*/               @P1 BRA 0x60 ;
    /*0130*/                   EXIT ;
    /*0140*/                   BRA 0x140 ;
"""


def test_descriptor_written_on_one_path_of_an_iteration_is_stale():
    """Every descriptor is written before it is read (nothing unwritten), but the HGMMA at 0xf0
    reads UR12 = UR36 + 2, and UR36 is written at 0x90 only on the path through that block: on
    the other, it holds the previous tile's (or the loop's first) value."""
    assert unset_descriptor_reads(_cuobjdump(_STALE)) == []
    found = stale_descriptor_reads(_cuobjdump(_STALE))
    assert {(x["address"], x["register"], x["read_at"]) for x in found} == {(0xf0, "UR36", 0xb0)}
    assert all(x["written_at"] == [0x90] and x["opcode"] == MMA for x in found)
    # computed on every path of the iteration (the block's write moved before the branch):
    # the value is this tile's on both
    assert stale_descriptor_reads(_cuobjdump(_STALE.replace(
        "/*0090*/                   UIADD3 UR36, UR8, 0x2, URZ ;",
        "/*0090*/                   NOP ;").replace(
        "/*0070*/                   ISETP.NE.AND P0, PT, R3, RZ, PT ;",
        "/*0070*/                   UIADD3 UR36, UR8, 0x2, URZ ;"))) == []


def test_loop_carried_and_loop_invariant_values_are_not_stale():
    """A ring position written once an iteration after its reads (UR4, the slot's descriptor
    derived from it), and a descriptor computed once before the loop (UR10, UR11): neither is
    written on only some paths of an iteration."""
    body = f"""
    /*0000*/                   UMOV UR4, 0x400 ;
    /*0010*/                   UMOV UR10, 0x800 ;
    /*0020*/                   UMOV UR11, 0x40000040 ;
    /*0030*/                   UMOV UR9, 0x40000040 ;
    /*0040*/                   UIADD3 UR8, UR4, 0x2, URZ ;
    /*0050*/                   ISETP.NE.AND P0, PT, R3, RZ, PT ;
    /*0060*/              @!P0 BRA 0x80 ;
    /*0070*/                   NOP ;
    /*0080*/                   {MMA} R24, gdesc[UR8].tnspA.tnspB, RZ, !UPT, gsb0 ;
    /*0090*/                   UIADD3 UR4, UR4, 0x400, URZ ;
    /*00a0*/                   IADD3 R2, R2, -0x1, RZ ;
    /*00b0*/                   ISETP.NE.AND P1, PT, R2, RZ, PT ;
    /*00c0*/               @P1 BRA 0x40 ;
    /*00d0*/                   EXIT ;
    /*00e0*/                   BRA 0xe0 ;
"""
    assert stale_descriptor_reads(_cuobjdump(body)) == []
    assert stale_descriptor_reads("") == []


QMMA = "QGMMA.64x64x32.F32.E4M3.E4M3"


def test_register_a_written_before_the_wait_is_found():
    """A float8 product with A in R152..R155: a write to R154 before its ``WARPGROUP.DEPBAR``
    is found (on either arm of a branch), one after it is not; the product with A from shared
    memory is not counted, nor is the accumulator's own register."""
    body = f"""
    /*0000*/                   WARPGROUP.ARRIVE ;
    /*0010*/                   {QMMA} R88, R152, gdesc[UR16].tnspB, R88, gsb0 ;
    /*0020*/                   {QMMA} R24, gdesc[UR20], RZ, !UPT, gsb0 ;
    /*0030*/                   FMUL R88, R88, R2 ;
    /*0040*/              @!P0 BRA 0x60 ;
    /*0050*/                   F2FP.F16.F32.PACK_AB R154, R3, R4 ;
    /*0060*/                   WARPGROUP.DEPBAR.LE gsb0, 0x0 ;
    /*0070*/                   MOV R152, R5 ;
    /*0080*/                   EXIT ;
"""
    count, writes = register_operand_writes(_cuobjdump(body))
    assert count == 1
    assert [(x["address"], x["write_at"], x["register"]) for x in writes] == [(0x10, 0x50, "R154")]
    clean = body.replace("F2FP.F16.F32.PACK_AB R154", "F2FP.F16.F32.PACK_AB R156")
    assert register_operand_writes(_cuobjdump(clean)) == (1, [])
