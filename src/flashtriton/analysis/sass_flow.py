"""Warpgroup MMAs that read a shared-memory descriptor some path leaves unwritten, found in SASS.

Why this exists: a warpgroup MMA (``HGMMA``) finds its operands in shared memory through 64-bit
descriptors held in uniform registers (``gdesc[URn]``). In a variant of the Gluon backward,
ptxas computed a descriptor's registers (UR26, UR27) only in the preheader of a loop that runs
zero times for some inputs, and an HGMMA after the loop read them anyway: on the path that
skipped the loop they were never written, and on the H200 the kernel faulted at that HGMMA
("Invalid __shared__ read of size 2048 bytes"). The PTX was correct (the value was defined in a block
that dominates the MMA); ptxas moved the definition, so only the SASS shows it, and only for
the inputs that take the short path. :func:`unset_descriptor_reads` finds such reads in the
SASS text, without a GPU; ``analysis/sass.py`` reports them for each kernel it compiles.

How: a must-define dataflow over the listing's basic blocks. The registers written on entry to
a block are those written on every path to it from the kernel's entry (the intersection over
its predecessors). An instruction under a guard predicate (``@P1``, ``@!UP0``) may not run, so
it writes nothing for certain. A block starts at a branch target and after a ``BRA``, ``EXIT``
or ``RET``; a guarded ``BRA`` or ``EXIT`` (or a ``BRA`` with a condition operand) also falls
through. Only direct branches are followed (the kernels checked here have no others); code no
branch reaches (a subroutine after the exit) starts with nothing written.

Only the descriptors' reads are checked. ``HGMMA ..., gdesc[URn]...`` with A in shared memory
reads URn to URn+3 (A's descriptor in URn, URn+1, B's in URn+2, URn+3); with A in registers
(``HGMMA R120, R72, gdesc[UR16].tnspB, ...``) only B's, URn+2 and URn+3. The same holds for its
float8 form ``QGMMA``. Other uniform operands (a barrier's ``SYNCS.EXCH.64``, a ``UTMALDG``'s
addresses) are often written and read under two guards that hold together, which the analysis
cannot see: they would be false alarms.
"""

from __future__ import annotations

import re

from flashtriton.analysis.sass import guarded_instructions

WARPGROUP_MMA = ("HGMMA", "QGMMA")
# the instructions that write uniform registers: the uniform datapath's (``UIADD3``, ``ULDC``,
# ...) and the moves into it; each writes its first operand when that is a uniform register
UNIFORM_WRITERS = ("U", "R2UR", "S2UR", "VOTEU")
_UR = re.compile(r"UR(\d+)$")
_GDESC = re.compile(r"gdesc\[UR(\d+)\]")
_EVERY = -1  # every bit set: all uniform registers (the start of a block not yet reached)


def _mask(first: int, count: int) -> int:
    return ((1 << count) - 1) << first


def _written(op: str, operands: list[str]) -> int:
    """The uniform registers an instruction writes (a bit mask): the destination of a
    ``UNIFORM_WRITERS`` instruction (``UIADD3 UR4, ...``, ``R2UR UR5, R0``), two registers for
    a 64-bit result (``ULDC.64``, ``UIMAD.WIDE.U32``), four for a 128-bit one. (An instruction
    missed here can only make a false alarm, not hide a fault.)"""
    if not op.startswith(UNIFORM_WRITERS) or not operands:
        return 0
    m = _UR.match(operands[0])
    if m is None:
        return 0
    modifiers = op.split(".")[1:]
    width = 4 if "128" in modifiers else 2 if "64" in modifiers or "WIDE" in modifiers else 1
    return _mask(int(m.group(1)), width)


def _descriptors_read(op: str, operands: list[str]) -> int:
    """The uniform registers a warpgroup MMA reads as descriptors (a bit mask; 0 for any other
    instruction): B's descriptor only when A comes from registers (the operand after the
    accumulator is a register), A's and B's otherwise."""
    if op.split(".")[0] not in WARPGROUP_MMA:
        return 0
    at = next((i for i, x in enumerate(operands) if _GDESC.match(x)), None)
    if at is None:
        return 0
    n = int(_GDESC.match(operands[at]).group(1))
    return _mask(n + 2, 2) if at == 2 else _mask(n, 4)


def _blocks(insts: list[tuple]) -> tuple[list[range], list[list[int]]]:
    """The basic blocks (ranges of instruction indices) and each block's successors."""
    index = {addr: i for i, (addr, *_) in enumerate(insts)}

    def target(operands):  # a BRA's, its last operand
        addr = int(operands[-1], 16)
        if addr not in index:
            raise ValueError(f"sass_flow: a branch to {addr:#x}, not in the listing")
        return index[addr]

    starts = {0}
    for i, (_, _, op, operands) in enumerate(insts):
        if op.split(".")[0] in ("BRA", "EXIT", "RET"):
            starts.add(i + 1)
        if op.startswith("BRA"):
            starts.add(target(operands))
    starts = sorted(s for s in starts if s < len(insts))
    blocks = [range(a, b) for a, b in zip(starts, starts[1:] + [len(insts)])]
    first = {b.start: k for k, b in enumerate(blocks)}
    successors = []
    for b in blocks:
        _, guard, op, operands = insts[b.stop - 1]
        branch = op.startswith("BRA")
        out = [first[target(operands)]] if branch else []
        # on to the next instruction unless the block ends in an unconditional BRA, EXIT or RET
        ends = op.split(".")[0] in ("BRA", "EXIT", "RET")
        conditional = guard is not None or (branch and len(operands) > 1)
        if b.stop < len(insts) and (not ends or conditional):
            out.append(first[b.stop])
        successors.append(out)
    return blocks, successors


def unset_descriptor_reads(sass: str) -> list[dict]:
    """The warpgroup MMAs of a ``cuobjdump -sass`` listing (one kernel) that read a descriptor
    register some path from the kernel's entry leaves unwritten: for each, its address, opcode
    and the registers (``["UR26", "UR27"]``). Empty for a sound kernel."""
    insts = [(addr, guard, op, [x.strip() for x in rest.split(";")[0].split(",") if x.strip()])
             for addr, guard, op, rest in guarded_instructions(sass)]
    if not insts:
        return []
    blocks, successors = _blocks(insts)
    # the registers each block writes for certain (under no guard)
    writes = [0] * len(blocks)
    for k, b in enumerate(blocks):
        for _, guard, op, operands in (insts[i] for i in b):
            if guard is None:
                writes[k] |= _written(op, operands)
    predecessors = [[] for _ in blocks]
    for k, out in enumerate(successors):
        for s in out:
            predecessors[s].append(k)
    # written on every path into each block; the kernel's entry holds nothing, and a block no
    # branch reaches is taken to hold nothing either
    on_entry = [0 if k == 0 or not predecessors[k] else _EVERY for k in range(len(blocks))]
    changed = True
    while changed:
        changed = False
        for k in range(1, len(blocks)):
            if not predecessors[k]:
                continue
            new = _EVERY
            for p in predecessors[k]:
                new &= on_entry[p] | writes[p]
            if new != on_entry[k]:
                on_entry[k], changed = new, True
    found = []
    for k, b in enumerate(blocks):
        have = on_entry[k]
        for addr, guard, op, operands in (insts[i] for i in b):
            unset = _descriptors_read(op, operands) & ~have
            if unset:
                found.append({"address": addr, "opcode": op,
                              "registers": [f"UR{n}" for n in range(unset.bit_length())
                                            if unset >> n & 1]})
            if guard is None:
                have |= _written(op, operands)
    return found
