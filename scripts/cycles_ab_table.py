"""Per kernel, two versions' Nsight Compute counters side by side, from the csv files of
scripts/gpu_cycles_ab.sh given in pairs (old, new):

    python3 scripts/cycles_ab_table.py out/cycles-old-bwd-d256-s8192-causal.csv \\
        out/cycles-new-bwd-d256-s8192-causal.csv ...

A pair's kernel launches are matched in order (both versions launch the same kernels); each
metric both files hold gets a row: old, new and the change. The file name's tag
(PASS-dD-sS-MASK) labels the rows.
"""

import argparse
from pathlib import Path

from flashtriton.analysis.profile import ncu_csv_file


def compare(old: Path, new: Path) -> list[dict]:
    """One row per kernel launch and metric held by both files: kernel, metric, old, new and
    the change as a fraction of old (None where old is 0)."""
    a, b = ncu_csv_file(old), ncu_csv_file(new)
    if [x.kernel for x in a] != [x.kernel for x in b]:
        raise SystemExit(f"{old} and {new} launch different kernels: "
                         f"{[x.kernel for x in a]} against {[x.kernel for x in b]}")
    rows = []
    for x, y in zip(a, b):
        for name in x.metrics:
            if name not in y.metrics:
                continue
            u, v = x.metrics[name], y.metrics[name]
            rows.append({"kernel": x.kernel, "metric": name, "old": u, "new": v,
                         "change": (v - u) / u if u else None})
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("csv", nargs="+", type=Path, help="old and new csv files, in pairs")
    args = ap.parse_args()
    if len(args.csv) % 2:
        ap.error("give the csv files in pairs: old, new")
    print(f"{'run':<24} {'kernel':<22} {'metric':<38} {'old':>14} {'new':>14} {'change':>8}")
    for old, new in zip(args.csv[::2], args.csv[1::2]):
        tag = old.stem.removeprefix("cycles-old-")
        for r in compare(old, new):
            change = "-" if r["change"] is None else f"{100 * r['change']:+.2f}%"
            print(f"{tag:<24} {r['kernel'][:22]:<22} {r['metric'][:38]:<38} "
                  f"{r['old']:>14,.0f} {r['new']:>14,.0f} {change:>8}")


if __name__ == "__main__":
    main()
