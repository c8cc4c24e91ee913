"""Side by side: a few Nsight Compute details-page metrics of every kernel in one or more files.

    python3 scripts/ncu_details_table.py ours.txt cudnn.txt [--metrics "Duration,SM Frequency"]

Each file is ncu's text details page (``ncu --import rep.ncu-rep --page details``): a header line
per kernel launch (``  name (grid)x(block), Context …``), then its sections' ``name unit value``
rows. One table row per (file, kernel launch), one column per metric; the tensor pipe's share
comes from the Compute Workload Analysis note ("Tensor is the highest-utilized pipeline
(51.3%)"), when ncu writes it.
"""

import argparse
import re
from pathlib import Path

DEFAULT_METRICS = ("Duration", "SM Frequency", "Elapsed Cycles", "Compute (SM) Throughput",
                   "Issue Slots Busy", "Executed Ipc Active", "Registers Per Thread",
                   "Achieved Occupancy")
LAUNCH = re.compile(r"^\s{2}(\S.*?) \((\d+), (\d+), (\d+)\)x\((\d+), (\d+), (\d+)\), Context")
ROW = re.compile(r"^\s{4}(\S.*?)\s{2,}(\S+)\s+([\d,.]+)\s*$")
TENSOR = re.compile(r"Tensor is the highest-utilized pipeline \(([\d.]+)%\)")


def read_details(text: str) -> list[dict]:
    """One dict per kernel launch: its name, grid, and every ``name -> (unit, value)`` row (the
    first of a name, as the page lists some twice)."""
    launches = []
    for line in text.splitlines():
        head = LAUNCH.match(line)
        if head:
            launches.append({"kernel": head.group(1), "grid": tuple(map(int, head.groups()[1:4])),
                             "metrics": {}})
            continue
        if not launches:
            continue
        row = ROW.match(line)
        if row:
            name, unit, value = row.groups()
            launches[-1]["metrics"].setdefault(name, (unit, float(value.replace(",", ""))))
        tensor = TENSOR.search(line)
        if tensor:
            launches[-1]["metrics"].setdefault("Tensor pipe", ("%", float(tensor.group(1))))
    return launches


def table(files: list[str], metrics: list[str]) -> list[str]:
    rows = []
    for path in files:
        for launch in read_details(Path(path).read_text()):
            cells = []
            for name in metrics:
                unit_value = launch["metrics"].get(name)
                cells.append("—" if unit_value is None else
                             f"{unit_value[1]:,.0f} {unit_value[0]}" if unit_value[1] >= 1e5 else
                             f"{unit_value[1]:g} {unit_value[0]}")
            rows.append([Path(path).name, launch["kernel"][:40], *cells])
    header = ["file", "kernel", *metrics]
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    return ["  ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip() for r in [header, *rows]]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="+")
    ap.add_argument("--metrics", default=",".join(DEFAULT_METRICS + ("Tensor pipe",)),
                    help="comma-separated metric names as the details page spells them")
    args = ap.parse_args()
    print("\n".join(table(args.files, [m.strip() for m in args.metrics.split(",") if m.strip()])))


if __name__ == "__main__":
    main()
