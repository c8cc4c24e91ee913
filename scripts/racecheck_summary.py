"""compute-sanitizer racecheck's hazards, grouped, so that a log of thousands reads in a few rows:
one row per kernel, hazard kind and run of consecutive shared-memory addresses, with how many
hazards, which threads wrote and read (as warps and lanes), at which program counters, and
the values racecheck saw.

    python3 scripts/racecheck_summary.py sanitizer-racecheck.log[.gz]

The log is racecheck's hazard report with every hazard printed (``compute-sanitizer --tool
racecheck --racecheck-report hazard --print-limit 0``; ``scripts/gpu_tune.sh sanitize`` runs it
so and writes this summary beside the log). Written in session 53, where every one of 3,087
hazards on the Gluon kernels was on the bytes through which Triton's ``warp_specialize`` code
starts the worker warps: which partition each runs, and values handed to them
(docs/perf-log.md).
"""
from __future__ import annotations

import argparse
import gzip
import re
import sys
from collections import Counter, defaultdict
from dataclasses import dataclass

HAZARD = re.compile(r"(Error|Warning): Potential (\w+) hazard detected at __shared__ "
                    r"(0x[0-9a-f]+) in block \(([\d,]+)\)")
ACCESS = re.compile(r"(Write|Read) Thread \((\d+),(\d+),(\d+)\) at (\w+)\+(0x[0-9a-f]+)")
VALUE = re.compile(r"Current Value : (\S+)")
SUMMARY = re.compile(r"RACECHECK SUMMARY: .*")


@dataclass
class Hazard:
    severity: str
    kind: str  # RAW, WAR or WAW
    address: int
    kernel: str = ""
    writer: tuple[int, str] | None = None  # (thread, pc)
    reader: tuple[int, str] | None = None
    value: str | None = None


def parse(lines) -> tuple[list[Hazard], str | None]:
    """The hazards of a racecheck log (its lines, with or without the ``=========`` prefix) and
    its summary line, if any. A thread id is its x index (the kernels launch 1-D blocks)."""
    hazards, summary, current = [], None, None
    for line in lines:
        if m := HAZARD.search(line):
            current = Hazard(m.group(1), m.group(2), int(m.group(3), 16))
            hazards.append(current)
        elif current is not None and (m := ACCESS.search(line)):
            access = (int(m.group(2)), m.group(6))
            current.kernel = m.group(5)
            if m.group(1) == "Write":
                current.writer = access
            else:
                current.reader = access
        elif current is not None and (m := VALUE.search(line)):
            current.value = m.group(1)
        elif m := SUMMARY.search(line):
            summary = m.group(0)
    return hazards, summary


def address_runs(addresses) -> list[tuple[int, int]]:
    """Sorted runs of consecutive addresses, as (first, last)."""
    runs = []
    for a in sorted(set(addresses)):
        if runs and a == runs[-1][1] + 1:
            runs[-1] = (runs[-1][0], a)
        else:
            runs.append((a, a))
    return runs


def threads(ids) -> str:
    """Thread ids as their warps and lanes: ``warps 4-11, lane 0``."""
    warps = sorted({t // 32 for t in ids})
    lanes = sorted({t % 32 for t in ids})
    return (f"warp{'s' if len(warps) > 1 else ''} {_span(warps)}, "
            f"lane{'s' if len(lanes) > 1 else ''} {_span(lanes)}")


def _span(values: list[int]) -> str:
    parts, start = [], values[0]
    for prev, v in zip(values, values[1:] + [None]):
        if v != prev + 1:
            parts.append(str(start) if start == prev else f"{start}-{prev}")
            start = v
    return ",".join(parts)


def group(hazards: list[Hazard]) -> list[dict]:
    """One row per (kernel, kind, run of consecutive addresses), largest first."""
    by_kind = defaultdict(list)
    for h in hazards:
        by_kind[(h.kernel, h.kind)].append(h)
    rows = []
    for (kernel, kind), hs in by_kind.items():
        for first, last in address_runs(h.address for h in hs):
            mine = [h for h in hs if first <= h.address <= last]
            rows.append({
                "kernel": kernel, "kind": kind, "first": first, "last": last,
                "hazards": len(mine),
                "errors": sum(h.severity == "Error" for h in mine),
                "writers": sorted({h.writer[0] for h in mine if h.writer}),
                "readers": sorted({h.reader[0] for h in mine if h.reader}),
                "write_pcs": Counter(h.writer[1] for h in mine if h.writer),
                "read_pcs": Counter(h.reader[1] for h in mine if h.reader),
                "values": Counter(h.value for h in mine if h.value is not None),
            })
    return sorted(rows, key=lambda r: (-r["hazards"], r["kernel"], r["first"]))


def _counts(counter: Counter, limit: int = 4) -> str:
    items = sorted(counter.items(), key=lambda kv: (-kv[1], kv[0]))
    shown = " ".join(f"{k} ({n})" for k, n in items[:limit])
    return shown + (f" and {len(items) - limit} more" if len(items) > limit else "")


def report(rows: list[dict], summary: str | None, total: int) -> str:
    out = [summary or "(no RACECHECK SUMMARY line)",
           f"{total} hazards parsed, in {len(rows)} groups (kernel, kind, consecutive addresses)"]
    for r in rows:
        size = r["last"] - r["first"] + 1
        out += [f"{r['kernel']}: {r['hazards']} {r['kind']} ({r['errors']} of them errors) on "
                f"{size} byte{'s' if size > 1 else ''} at {r['first']:#x}..{r['last']:#x}",
                f"  written by {threads(r['writers']) if r['writers'] else '-'} at "
                f"{_counts(r['write_pcs'])}",
                f"  read by {threads(r['readers']) if r['readers'] else '-'} at "
                f"{_counts(r['read_pcs'])}",
                f"  values: {_counts(r['values'], 8) or '-'}"]
    return "\n".join(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("log", help="racecheck's output (plain or .gz)")
    args = ap.parse_args(argv)
    opener = gzip.open if args.log.endswith(".gz") else open
    try:
        with opener(args.log, "rt", errors="replace") as f:
            hazards, summary = parse(f)
    except OSError as e:
        print(f"racecheck_summary.py: {e}", file=sys.stderr)
        return 2
    if summary is None and not hazards:
        print(f"racecheck_summary.py: {args.log} has no racecheck hazard or summary line",
              file=sys.stderr)
        return 2
    print(report(group(hazards), summary, len(hazards)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
