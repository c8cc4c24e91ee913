"""Per kernel launch, how evenly it loads the SMs, from Nsight Compute's csv rows of
sm__cycles_active.{min,avg,max} and sm__cycles_elapsed.max (scripts/gpu_sm_spread.sh):

    python3 scripts/sm_spread_table.py out/sm-spread-bwd-d256-s8192-causal.csv ...

"idle" is the share of the launch's SM-cycles with no program resident, (elapsed − avg) /
elapsed: what a launch that overlaps the next kernel could fill at most. "tail" is how far
the busiest SM runs past the mean, (max − avg) / elapsed; "spread" is (max − min) / avg.
The file name's tag (PASS-dD-sS-MASK) labels the rows.
"""

import argparse
from pathlib import Path

from flashtriton.analysis.profile import ncu_csv_file

NAMES = ("sm__cycles_active.min", "sm__cycles_active.avg", "sm__cycles_active.max",
         "sm__cycles_elapsed.max")


def spread_rows(path: Path) -> list[dict]:
    """Each kernel launch of a csv: its name, the four metrics, and idle / tail / spread (as
    fractions, see the module docstring)."""
    out = []
    for r in ncu_csv_file(path):
        lo, avg, hi, elapsed = (r.get(n) for n in NAMES)
        out.append({"kernel": r.kernel, "elapsed": elapsed, "avg": avg, "min": lo,
                     "max": hi, "idle": (elapsed - avg) / elapsed, "tail": (hi - avg) / elapsed,
                     "spread": (hi - lo) / avg})
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("csv", nargs="+", type=Path)
    args = ap.parse_args()
    print(f"{'run':<28} {'kernel':<28} {'elapsed':>10} {'active avg':>10} "
          f"{'min':>10} {'max':>10} {'idle':>6} {'tail':>6} {'spread':>6}")
    for path in args.csv:
        tag = path.stem.removeprefix("sm-spread-")
        for r in spread_rows(path):
            print(f"{tag:<28} {r['kernel'][:28]:<28} {r['elapsed']:>10.0f} {r['avg']:>10.0f} "
                  f"{r['min']:>10.0f} {r['max']:>10.0f} {100 * r['idle']:>5.1f}% "
                  f"{100 * r['tail']:>5.1f}% {100 * r['spread']:>5.1f}%")


if __name__ == "__main__":
    main()
