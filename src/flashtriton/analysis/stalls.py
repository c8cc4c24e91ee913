"""Where a kernel's warps wait, per warp-specialized partition, from Nsight Compute's source page.

The flashtriton Gluon kernels run a producer partition (TMA loads) and consumer warpgroups
(warpgroup MMAs and the softmax) in one program; ncu's summary pages mix their stalls, and a
producer spinning on a full ring looks like a slow kernel. The SASS of each partition is one
contiguous region that starts with its ``setmaxnreg`` (``USETMAXREG``), so the source page's
per-instruction warp-state samples can be split there. Record and read:

    ncu --clock-control none --set full --import-source no --profile-from-start off \\
        -k regex:_attn_bwd_ws -o rep \\
        python3 scripts/profile_pass.py --pass bwd --headdim 64 --seqlen 16384
    ncu --import rep.ncu-rep --page source --print-source sass --csv > src.csv
    flashtriton stalls src.csv          # a .csv.gz works too

Per partition: its share of the samples, the samples by opcode, the stall reasons (ncu's ``stall_*`` columns: e.g.
``long_sb`` a long-scoreboard dependency, which is how an mbarrier wait's spin loop shows up,
``wait`` a fixed-latency dependency, ``selected`` issuing), and the instructions with the most
samples; and the partition's loops (a backward branch and the instructions it jumps back
over) with their share of the partition's executed instructions and samples, the instructions
a warp executes per pass and how many of those lie outside the loops nested in it, so that a
step loop's work can be told from the work each tile pays once (the code around it); for a
partition with warpgroup MMAs, its samples by place: before its tile loop, in a tile before
the step loop, in the step loop, in a tile after it, after the tile loop, with the instruction
outside the step loop that holds the most (``--regions``). Then the
instructions whose shared-memory accesses took more wavefronts than ncu's ideal (bank
conflicts).
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import re
import sys
from dataclasses import asdict, dataclass, field
from itertools import accumulate

SAMPLES = "Warp Stall Sampling (All Samples)"
EXCESS = "L1 Wavefronts Shared Excessive"
WAVEFRONTS = "L1 Wavefronts Shared"
IDEAL = "L1 Wavefronts Shared Ideal"


@dataclass
class Instruction:
    address: str
    sass: str
    samples: float
    reasons: dict[str, float]
    executed: float
    shared_wavefronts: float
    shared_ideal: float
    shared_excess: float

    @property
    def opcode(self) -> str:
        words = self.sass.split()
        if not words:
            return ""
        return words[1] if words[0].startswith("@") and len(words) > 1 else words[0]


@dataclass
class Loop:
    first: int  # the loop's first instruction (the branch's target), index in its partition
    last: int  # the backward branch
    instructions: int  # static instructions, first..last
    hgmma: int  # warpgroup MMA instructions among them
    passes: float  # executions of the first instruction (warp-level, summed over the warps)
    executed_share: float  # of the partition's executed (warp-level) instructions
    samples_share: float  # of the partition's samples
    per_pass: float  # executed instructions a pass (a warp's trip through the body)
    outside_inner: float  # of those, the ones outside the loops nested in it


@dataclass
class Places:
    """A partition's samples by place around its step loop (the loop with warpgroup MMAs and
    no such loop inside it that runs the most instructions) and its tile loop (the smallest
    loop around the step loop; none in a kernel that runs one tile a program: then the
    partition's start and end), each a share of the partition's samples."""
    before_tiles: float
    tile_before_step: float
    step: float
    tile_after_step: float
    after_tiles: float
    top: tuple[float, str, str]  # outside the step loop: (share, sass, main stall reason)


@dataclass
class Partition:
    index: int  # 0: the code before the first setmaxnreg
    role: str  # "mma" (warpgroup MMAs), "loads" (TMA loads, no MMA) or "other"
    samples: float
    share: float  # of the kernel's samples
    reasons: dict[str, float]  # stall reason -> share of this partition's samples
    opcodes: dict[str, float]  # opcode (first word, e.g. MUFU) -> share of this partition's samples
    top: list[tuple[float, str, str]] = field(default_factory=list)  # (share, sass, reason)
    executed: float = 0.0  # warp-level instructions executed
    loops: list[Loop] = field(default_factory=list)  # largest share of executed first
    places: Places | None = None  # partitions with warpgroup MMAs in a loop


@dataclass
class KernelStalls:
    kernel: str
    samples: float
    partitions: list[Partition]
    shared_wavefronts: float
    shared_excess: float
    excess_top: list[tuple[float, float, str]]  # (excess, ideal, sass)


def _number(text: str) -> float:
    text = text.strip().replace(",", "")
    if not text or text in ("-", "n/a"):
        return 0.0
    return float(text)


def read_text(path: str) -> str:
    """A CSV file, gzip-compressed or not."""
    with open(path, "rb") as f:
        raw = f.read()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    return raw.decode("utf-8", errors="replace")


def parse_source_csv(text: str) -> dict[str, list[Instruction]]:
    """ncu's ``--page source --print-source sass --csv`` output: for each profiled kernel a
    ``"Kernel Name",NAME`` row, a header row, then one row per SASS instruction. Returns the
    instructions per kernel name, in address order (a second launch of one name is appended
    under ``NAME#2``)."""
    kernels: dict[str, list[Instruction]] = {}
    header = None
    name = None
    reasons: list[str] = []
    for row in csv.reader(io.StringIO(text)):
        if not row:
            continue
        if row[0] == "Kernel Name":
            base = row[1] if len(row) > 1 else "?"
            name, n = base, 1
            while name in kernels:
                n += 1
                name = f"{base}#{n}"
            kernels[name] = []
            header = None
            continue
        if name is None:
            continue  # ncu's own lines before the first kernel
        if header is None:
            if "Address" not in row or "Source" not in row or SAMPLES not in row:
                raise ValueError("stalls: not an ncu source-page CSV (expected Address, Source and "
                                 f"'{SAMPLES}' columns; export with --page source --print-source "
                                 "sass --csv from a --set full report)")
            header = {h: i for i, h in enumerate(row)}
            reasons = [h for h in row if h.startswith("stall_") and "Not Issued" not in h]
            continue
        if len(row) < len(header):
            continue

        def get(col):
            return _number(row[header[col]]) if col in header else 0.0
        kernels[name].append(Instruction(
            address=row[header["Address"]], sass=row[header["Source"]].strip(),
            samples=get(SAMPLES), reasons={r[len("stall_"):]: get(r) for r in reasons},
            executed=get("Instructions Executed"), shared_wavefronts=get(WAVEFRONTS),
            shared_ideal=get(IDEAL), shared_excess=get(EXCESS)))
    if not kernels:
        raise ValueError("stalls: no 'Kernel Name' row: not an ncu source-page CSV")
    return kernels


def _shares(pairs, total: float) -> dict[str, float]:
    """Sum (name, samples) pairs per name; each name's share of ``total``, largest first."""
    sums: dict[str, float] = {}
    for name, value in pairs:
        sums[name] = sums.get(name, 0.0) + value
    ordered = sorted(sums.items(), key=lambda kv: -kv[1])
    return {name: v / total for name, v in ordered if v > 0} if total else {}


_BRANCH_TARGET = re.compile(r"\bBRA\b.*?\b0x([0-9a-fA-F]+)")


def find_loops(group: list[Instruction]) -> list[Loop]:
    """The loops of one partition's instructions (in address order): each ``BRA`` whose
    target is at or before it closes a loop from that target to itself. Largest share of the
    partition's executed instructions first."""
    index = {}
    for n, ins in enumerate(group):
        try:
            index[int(ins.address, 16)] = n
        except ValueError:
            continue
    # running sums, so that a span's totals are one subtraction
    run_executed = [0.0, *accumulate(i.executed for i in group)]
    run_samples = [0.0, *accumulate(i.samples for i in group)]
    executed, samples = run_executed[-1], run_samples[-1]
    spans = []
    for n, ins in enumerate(group):
        if ins.opcode != "BRA":
            continue
        m = _BRANCH_TARGET.search(ins.sass)
        first = index.get(int(m.group(1), 16)) if m else None
        if first is not None and first <= n:
            spans.append((first, n))

    def body_executed(a, b):
        return run_executed[b + 1] - run_executed[a]

    loops = []
    for a, b in spans:
        inner = [(c, d) for c, d in spans if a <= c and d <= b and (c, d) != (a, b)]
        outermost = [(c, d) for c, d in inner
                     if not any(e <= c and d <= f and (e, f) != (c, d) for e, f in inner)]
        total = body_executed(a, b)
        passes = group[a].executed
        loops.append(Loop(
            first=a, last=b, instructions=b - a + 1,
            hgmma=sum(1 for i in group[a:b + 1] if i.opcode.startswith("HGMMA")),
            passes=passes,
            executed_share=total / executed if executed else 0.0,
            samples_share=(run_samples[b + 1] - run_samples[a]) / samples if samples else 0.0,
            per_pass=total / passes if passes else 0.0,
            outside_inner=((total - sum(body_executed(c, d) for c, d in outermost)) / passes
                           if passes else 0.0)))
    return sorted(loops, key=lambda x: -x.executed_share)


def places(group: list[Instruction], loops: list[Loop]) -> Places | None:
    """``group``'s samples by place around its step loop and tile loop (see ``Places``);
    None without a loop that holds warpgroup MMAs."""
    mma = [x for x in loops if x.hgmma]
    innermost = [x for x in mma if not any(y is not x and x.first <= y.first and y.last <= x.last
                                           for y in mma)]
    if not innermost:
        return None
    step = max(innermost, key=lambda x: x.executed_share)
    around = [x for x in loops if x is not step and x.first <= step.first
              and step.last <= x.last]
    tile = min(around, key=lambda x: x.instructions) if around else None
    first, last = (tile.first, tile.last) if tile else (0, len(group) - 1)
    run = [0.0, *accumulate(i.samples for i in group)]

    def share(lo, hi):  # instructions lo .. hi - 1
        return (run[hi] - run[lo]) / run[-1] if run[-1] else 0.0
    outside = group[:step.first] + group[step.last + 1:]
    top = (_entry(max(outside, key=lambda i: i.samples), run[-1]) if outside
           else (0.0, "", ""))
    return Places(before_tiles=share(0, first), tile_before_step=share(first, step.first),
                  step=step.samples_share, tile_after_step=share(step.last + 1, last + 1),
                  after_tiles=share(last + 1, len(group)), top=top)


def _entry(ins: Instruction, total: float) -> tuple[float, str, str]:
    """(share of ``total`` samples, sass, main stall reason) of one instruction."""
    return (ins.samples / total if total else 0.0, ins.sass,
            max(ins.reasons, key=ins.reasons.get) if ins.reasons else "")


def analyse(kernel: str, instrs: list[Instruction], top: int = 5) -> KernelStalls:
    """Split the kernel's instructions into partitions at each ``USETMAXREG`` and summarise."""
    groups: list[list[Instruction]] = [[]]
    for ins in instrs:
        if ins.opcode.startswith("USETMAXREG"):
            groups.append([])
        groups[-1].append(ins)
    total = sum(i.samples for i in instrs)
    parts = []
    for k, group in enumerate(groups):
        samples = sum(i.samples for i in group)
        ops = {i.opcode.split(".")[0] for i in group}
        role = "mma" if "HGMMA" in ops else "loads" if "UTMALDG" in ops else "other"
        best = sorted(group, key=lambda i: -i.samples)[:top]
        loops = find_loops(group)
        parts.append(Partition(
            index=k, role=role, samples=samples, share=samples / total if total else 0.0,
            reasons=_shares(((r, v) for i in group for r, v in i.reasons.items()), samples),
            opcodes=_shares(((i.opcode.split(".")[0], i.samples) for i in group), samples),
            top=[_entry(i, samples) for i in best],
            executed=sum(i.executed for i in group), loops=loops,
            places=places(group, loops) if role == "mma" else None))
    conflicted = sorted((i for i in instrs if i.shared_excess > 0), key=lambda i: -i.shared_excess)
    return KernelStalls(
        kernel=kernel, samples=total, partitions=parts,
        shared_wavefronts=sum(i.shared_wavefronts for i in instrs),
        shared_excess=sum(i.shared_excess for i in instrs),
        excess_top=[(i.shared_excess, i.shared_ideal, i.sass) for i in conflicted[:top]])


def render(result: KernelStalls, min_share: float = 0.01, min_loop: float = 0.05,
           regions: bool = False) -> str:
    """The text report; partitions below ``min_share`` of the samples and loops below
    ``min_loop`` of their partition's executed instructions are left out. ``regions``: each
    MMA partition's samples by place (``Places``) too."""
    lines = [f"{result.kernel}: {result.samples:,.0f} warp-state samples"]
    for p in result.partitions:
        if p.share < min_share:
            continue
        reasons = ", ".join(f"{r} {v:.0%}" for r, v in list(p.reasons.items())[:5])
        opcodes = ", ".join(f"{op} {v:.0%}" for op, v in list(p.opcodes.items())[:6])
        lines.append(f"  partition {p.index} ({p.role}): {p.share:.1%} of samples, "
                     f"{p.executed:,.0f} warp instructions executed")
        lines.append(f"    stalls: {reasons}")
        lines.append(f"    by opcode: {opcodes}")
        for share, sass, reason in p.top:
            lines.append(f"    {share:6.1%}  {sass[:70]:70s} {reason}")
        for loop in p.loops:
            if loop.executed_share < min_loop:
                continue
            inner = (f" ({loop.outside_inner:,.0f} outside its inner loops)"
                     if loop.outside_inner < loop.per_pass - 0.5 else "")
            lines.append(f"    loop {loop.first}-{loop.last}: {loop.instructions} instructions "
                         f"({loop.hgmma} HGMMA), {loop.passes:,.0f} warp passes of "
                         f"{loop.per_pass:,.0f} executed{inner}, {loop.executed_share:.1%} of "
                         f"executed, {loop.samples_share:.1%} of samples")
        if regions and p.places is not None:
            w = p.places
            share, sass, reason = w.top
            lines.append(f"    samples by place: before the tiles {w.before_tiles:.1%}, a tile "
                         f"before its step loop {w.tile_before_step:.1%}, the step loop "
                         f"{w.step:.1%}, a tile after it {w.tile_after_step:.1%}, after the "
                         f"tiles {w.after_tiles:.1%}")
            lines.append(f"    most outside the step loop: {share:.2%}  {sass[:60]} {reason}")
    if result.shared_wavefronts:
        lines.append(f"  shared-memory wavefronts {result.shared_wavefronts:,.0f}, of which "
                     f"{result.shared_excess:,.0f} ({result.shared_excess / result.shared_wavefronts:.1%})"
                     " above ncu's ideal (bank conflicts)")
        for excess, ideal, sass in result.excess_top:
            lines.append(f"    {excess:14,.0f} excess (ideal {ideal:,.0f})  {sass[:60]}")
    return "\n".join(lines)


def add_cli_arguments(parser) -> None:
    parser.add_argument("csv", help="ncu --page source --print-source sass --csv output (.csv or .csv.gz)")
    parser.add_argument("--top", type=int, default=5, help="instructions listed per partition")
    parser.add_argument("--min-share", type=float, default=0.01,
                        help="hide partitions with less than this share of the samples")
    parser.add_argument("--min-loop", type=float, default=0.05,
                        help="hide loops with less than this share of their partition's executed "
                             "instructions")
    parser.add_argument("--regions", action="store_true",
                        help="each MMA partition's samples by place: before its tile loop, in "
                             "a tile before and after the step loop, the step loop, after the "
                             "tile loop")
    parser.add_argument("--json", action="store_true", help="print JSON instead of text")


def run_cli(args) -> int:
    try:
        kernels = parse_source_csv(read_text(args.csv))
    except (OSError, ValueError) as exc:
        print(f"flashtriton stalls: {exc}", file=sys.stderr)
        return 2
    results = [analyse(name, instrs, args.top) for name, instrs in kernels.items()]
    if args.json:
        print(json.dumps([asdict(r) for r in results], indent=2))
    else:
        print("\n\n".join(render(r, args.min_share, args.min_loop, args.regions)
                            for r in results))
    return 0
