"""Warpgroup MMAs that read a shared-memory descriptor some path leaves unwritten
(:func:`unset_descriptor_reads`), or one that some paths through a loop's iteration leave
holding an earlier iteration's value (:func:`stale_descriptor_reads`, below), found in SASS.

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


# --- descriptors computed on one path of a loop's iteration and read on another ---------------
#
# The second form of the same ptxas behaviour (docs/perf-log.md, session 43): with two Q buffers
# a consumer, the persistent forward's Q descriptor changes from tile to tile, and ptxas, finding
# a descriptor (or a register it is computed from) already computed in a block of the tile's
# iteration that some paths skip (the block that issues the tile's own first S; a loop's
# preheader that a zero-trip branch skips), reused that register on every path. On the paths
# that skipped the block it still held an earlier tile's value: the warpgroup MMAs read another
# buffer's Q, and the tiles came out wrong. The register is written on every path from the
# kernel's entry, so :func:`unset_descriptor_reads` cannot see this; what shows it is a register
# that, at the instruction reading it, is written by some but not all paths through the current
# iteration of the innermost loop around that instruction (the others bringing an earlier
# iteration's value). A loop-carried value (a ring position, written once an iteration after
# its reads) has no such write, nor has one computed before the loop, nor one computed on every
# path of the iteration.

_REG = re.compile(r"(U?R)(\d+)(\.64)?$")
_REG_IN = re.compile(r"\b(U?R)(\d+)\b(\.64)?")
# opcodes whose first operand is not a register they write
_NO_DEST = ("ST", "RED", "ATOM", "BRA", "EXIT", "RET", "BAR", "SYNCS", "WARPGROUP", "UTMA",
            "MEMBAR", "FENCE", "ARRIVES", "NOP", "DEPBAR", "ELECT", "WARPSYNC", "CCTL",
            "ERRBAR", "USETMAXREG", "PLOP3", "ISETP", "FSETP", "UISETP", "DSETP", "HSETP2",
            "R2P", "BSSY", "BSYNC", "CALL", "UCGABAR", "UPLOP3", "VOTE") + WARPGROUP_MMA


def _dests(op: str, operands: list[str]) -> list[str]:
    """The registers an instruction writes, by name (``R12``, ``UR36``; two for a 64-bit
    result): its first operand, unless the opcode writes none there."""
    if not operands or op.split(".")[0].startswith(_NO_DEST):
        return []
    m = _REG.match(operands[0].split()[0]) if operands[0] else None
    if m is None or m.group(2) == "255":  # RZ / URZ spelled out
        return []
    modifiers = op.split(".")[1:]
    wide = m.group(3) or "64" in modifiers or "WIDE" in modifiers
    return [f"{m.group(1)}{int(m.group(2)) + j}" for j in range(2 if wide else 1)]


def _sources(op: str, operands: list[str]) -> list[str]:
    """The registers an instruction reads (every register operand after its destination)."""
    out = []
    for x in operands[0 if not _dests(op, operands) else 1:]:
        for m in _REG_IN.finditer(x):
            n = int(m.group(2))
            out += [f"{m.group(1)}{n + j}" for j in range(2 if m.group(3) else 1)]
    return out


def _regions(insts: list[tuple]) -> list[range]:
    """A warp-specialized kernel's partitions, as ``local_by_region`` splits them: from one
    ``USETMAXREG`` to the next (the whole listing where there is none)."""
    cuts = [i for i, (_, _, op, _) in enumerate(insts) if op.startswith("USETMAXREG")]
    edges = [0] + cuts + [len(insts)]
    return [range(a, b) for a, b in zip(edges, edges[1:]) if b > a]


_BEFORE = -1  # stands for "not written since the loop's header" in an iteration's analysis


def _reaching(blocks, preds, dests, members, start, seed=False):
    """Reaching definitions over the blocks ``members`` (a set of block indices; ``dests``: each
    instruction's ``_dests``): for each block, a dict register -> frozenset of the instruction
    indices whose write may reach its start. A write under a guard counts as a write (its guard usually goes with the branch
    around it: the backward's ring position is written under ``@!UP0`` before a branch on the
    same predicate, and on the other arm unguarded; :func:`unset_descriptor_reads` counts it
    as none, the safe side there). Only edges between members count. ``start``'s entry holds
    nothing, or, with ``seed``, every register's ``_BEFORE``: with ``start`` a loop's header
    and ``members`` its body, a register whose set holds ``_BEFORE`` at an instruction is one
    that some path through the iteration so far has not written (its value is an earlier
    iteration's)."""
    every = frozenset({_BEFORE}) if seed else frozenset()

    def get(table, r):
        return table.get(r, table.get("*", frozenset()))

    on_entry = {k: None for k in members}
    on_exit = {k: None for k in members}
    order = sorted(members)
    changed = True
    while changed:
        changed = False
        for k in order:
            if k == start:
                new = {"*": every}
            else:
                ins = [on_exit[p] for p in preds[k] if p in members and on_exit[p] is not None]
                if not ins:
                    continue
                names = set().union(*ins)
                new = {r: frozenset().union(*(get(t, r) for t in ins)) for r in names}
            if new == on_entry[k]:
                continue
            on_entry[k] = new
            out = dict(new)
            for i in blocks[k]:
                for r in dests[i]:
                    out[r] = frozenset({i})
            if out != on_exit[k]:
                on_exit[k] = out
                changed = True
    return {k: (v or {}) for k, v in on_entry.items()}


def stale_descriptor_reads(sass: str) -> list[dict]:
    """The warpgroup MMAs of a listing whose descriptors depend on a register that some, but not
    all, paths through the current iteration of the innermost loop around its read write (see
    above): for each, the MMA's address and opcode, the register (``UR36``), the address of the
    instruction reading it, and the addresses of the writes within the iteration. Registers
    are followed back from the descriptors through the instructions that compute them (within
    a partition, at most 8 steps). Empty for a sound kernel."""
    insts = [(addr, guard, op, [x.strip() for x in rest.split(";")[0].split(",") if x.strip()])
             for addr, guard, op, rest in guarded_instructions(sass)]
    if not insts:
        return []
    blocks, successors = _blocks(insts)
    block_of = {i: k for k, b in enumerate(blocks) for i in b}
    dests = [_dests(op, operands) for _, _, op, operands in insts]
    found = []
    for region in _regions(insts):
        members = {block_of[i] for i in region}
        preds = {k: [] for k in members}
        for k in members:
            for s in successors[k]:
                if s in members:
                    preds[s].append(k)
        first = block_of[region.start]
        whole = _reaching(blocks, preds, dests, members, first)
        # natural loops: a back edge p -> h (h not after p); the body, what reaches p without
        # h; the back edges to one header make one loop
        bodies = {}
        for p in members:
            for h in successors[p]:
                if h in members and h <= p:
                    body, todo = bodies.setdefault(h, {h}), [p]
                    body.add(p)
                    while todo:
                        for q in preds[todo.pop()]:
                            if q not in body:
                                body.add(q)
                                todo.append(q)
        loops = list(bodies.items())
        iteration = {}

        def defs_at(i, r, table):
            k = block_of[i]
            t = table.get(k, {})
            cur = set(t.get(r, t.get("*", frozenset())))
            for j in range(blocks[k].start, i):
                if r in dests[j]:
                    cur = {j}
            return cur

        def innermost(k):
            around = [(len(b), h, b) for h, b in loops if k in b]
            return min(around, key=lambda x: x[0])[1:] if around else None

        for i in region:
            addr, _, op, operands = insts[i]
            mask = _descriptors_read(op, operands)
            if not mask:
                continue
            todo = [(i, f"UR{n}", 0) for n in range(mask.bit_length()) if mask >> n & 1]
            seen = set()
            while todo:
                j, r, depth = todo.pop()
                if (j, r) in seen or depth > 8:
                    continue
                seen.add((j, r))
                every = defs_at(j, r, whole)
                loop = innermost(block_of[j])
                if loop is not None:
                    h, body = loop
                    if h not in iteration:
                        iteration[h] = _reaching(blocks, {k: [p for p in preds[k] if p in body]
                                                          for k in body}, dests, body, h, True)
                    mine = defs_at(j, r, iteration[h])
                    if _BEFORE in mine and len(mine) > 1:  # written on some paths, not all
                        found.append({"address": addr, "opcode": op, "register": r,
                                      "read_at": insts[j][0],
                                      "written_at": sorted(insts[d][0] for d in mine
                                                           if d != _BEFORE)})
                for d in every:
                    _, _, dop, doperands = insts[d]
                    for s in _sources(dop, doperands):
                        todo.append((d, s, depth + 1))
    unique = {(x["address"], x["register"], x["read_at"]): x for x in found}
    return [unique[k] for k in sorted(unique)]


# A warpgroup MMA with A in registers (``QGMMA R88, R152, gdesc[UR16]...``: the operand after
# the accumulator) reads them while it runs, until a ``WARPGROUP.DEPBAR`` waits for it. Triton's
# wait names the values it must keep (its ``deps``), and the Gluon float8 forward leaves P's
# operand out of them (a float8 value is not a type the wait takes: ``fwd_gluon_tile
# ._retire_pv``), so nothing but ptxas's register allocation keeps P's registers from being
# reused under the product. :func:`register_operand_writes` checks that in the listing.
A_REGISTERS = 4  # a 64-row A tile's registers a thread: 64×16 16-bit or 64×32 8-bit values


def register_operand_writes(sass: str) -> tuple[int, list[dict]]:
    """(the number of warpgroup MMAs reading A from registers, and the writes to those
    registers found after one of them before the next ``WARPGROUP.DEPBAR``, in listing order):
    each write as the MMA's address, the writing instruction's address and opcode, and the
    register. The scan is straight down the listing from the MMA, through branches (both
    arms of a branch before the wait are read, a jump past the wait is not followed). Empty
    for a kernel whose register operands are left alone while their products run."""
    insts = [(addr, op, [x.strip() for x in rest.split(";")[0].split(",") if x.strip()])
             for addr, _, op, rest in guarded_instructions(sass)]
    count, found = 0, []
    for i, (addr, op, operands) in enumerate(insts):
        if op.split(".")[0] not in WARPGROUP_MMA or len(operands) < 3:
            continue
        m = _REG.match(operands[1])
        if m is None or m.group(1) != "R" or not _GDESC.match(operands[2]):
            continue  # A from shared memory
        count += 1
        a_regs = {f"R{int(m.group(2)) + j}" for j in range(A_REGISTERS)}
        for addr2, op2, operands2 in insts[i + 1:]:
            if op2.startswith("WARPGROUP.DEPBAR"):
                break
            for reg in _dests(op2, operands2):
                if reg in a_regs:
                    found.append({"address": addr, "write_at": addr2, "opcode": op2,
                                  "register": reg})
    return count, found
