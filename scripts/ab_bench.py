"""An A/B of `flashtriton bench` runs: runs of the old tree and of the new one, alternated
(old / new / new / old, see scripts/gpu_ab.sh bench), one line per row (pass, dtype, head dim,
seqlen, causal): each run's TFLOP/s for flashtriton, the change of the means, and the ratio to
cuDNN (the mean of each run's ratio) before → after, when the runs timed sdpa_cudnn.

    python3 scripts/ab_bench.py --old OLD1.json OLD2.json --new NEW1.json NEW2.json

Or runs that timed both trees in one process (`flashtriton bench --baseline-src OLD --rounds
N`, providers flashtriton_base and flashtriton; scripts/gpu_ab.sh inproc runs two, one in each
order): per row, the change is the median over all rounds of the paired change (the baseline's
time over ours in the same round, minus 1), with the smallest and largest paired change beside
it, since the two versions met the same clock round by round. Runs made with `--clock` add
each side's SM clock (the median over the runs of its rows' ``sm_mhz``) as a last column.

    python3 scripts/ab_bench.py --inproc RUN1.json RUN2.json
"""

from __future__ import annotations

import argparse
import statistics

from flashtriton.bench.results import read_results


def timed_rows(path: str) -> dict:
    """{(provider, pass, dtype, head dim, seqlen, causal): row} of a bench results file
    (checked by ``read_results``); rows that were not timed are left out."""
    return {(r["provider"], r["pass"], r["dtype"], r["headdim"], r["seqlen"], r["causal"]): r
            for r in read_results(path)["results"] if r.get("tflops") is not None}


def load(path: str) -> dict:
    """``timed_rows``' keys, each with its row's TFLOP/s."""
    return {key: row["tflops"] for key, row in timed_rows(path).items()}


def compare(old: list[dict], new: list[dict]) -> list[dict]:
    """One dict per flashtriton row present in every run: old and new TFLOP/s (a list each),
    change (new mean / old mean - 1), and ratio_old / ratio_new to sdpa_cudnn (None without
    it)."""
    rows = []
    runs = old + new
    keys = sorted({k[1:] for k in runs[0] if k[0] == "flashtriton"},
                  key=lambda k: (k[0], k[1], -k[2], k[4], k[3]))
    for key in keys:
        if not all(("flashtriton",) + key in run for run in runs):
            continue
        ours = lambda run: run[("flashtriton",) + key]  # noqa: E731
        a, b = [ours(run) for run in old], [ours(run) for run in new]

        def ratio(side):
            if not all(("sdpa_cudnn",) + key in run for run in side):
                return None
            return sum(ours(run) / run[("sdpa_cudnn",) + key] for run in side) / len(side)

        rows.append({"pass": key[0], "dtype": key[1], "headdim": key[2], "seqlen": key[3],
                     "causal": key[4], "old": a, "new": b,
                     "change": (sum(b) / len(b)) / (sum(a) / len(a)) - 1,
                     "ratio_old": ratio(old), "ratio_new": ratio(new)})
    return rows


BASE = "flashtriton_base"


def compare_inproc(keyed: list[dict]) -> list[dict]:
    """One dict per row that every run (``timed_rows`` of each file) timed for both flashtriton
    and flashtriton_base: each run's TFLOP/s of either (old: the baseline, new: ours), the
    paired changes (per round, the baseline's ms / ours - 1; the row's ms when it has no
    rounds), their median (``change``), and the ratio to cuDNN of each side when the runs timed
    it."""
    keys = sorted({k[1:] for k in keyed[0] if k[0] == "flashtriton"},
                  key=lambda k: (k[0], k[1], -k[2], k[4], k[3]))
    out = []
    for key in keys:
        if not all(("flashtriton",) + key in run and (BASE,) + key in run for run in keyed):
            continue
        paired = []
        for run in keyed:
            ours, base = run[("flashtriton",) + key], run[(BASE,) + key]
            ours_ms = ours.get("rounds_ms") or [ours["ms"]]
            base_ms = base.get("rounds_ms") or [base["ms"]]
            if len(ours_ms) != len(base_ms):
                raise ValueError(f"{key}: {len(ours_ms)} rounds of flashtriton against "
                                 f"{len(base_ms)} of {BASE}")
            paired += [b / o - 1 for o, b in zip(ours_ms, base_ms)]

        def ratio(provider):
            if not all(("sdpa_cudnn",) + key in run for run in keyed):
                return None
            return statistics.mean(run[(provider,) + key]["tflops"]
                                   / run[("sdpa_cudnn",) + key]["tflops"] for run in keyed)

        def mhz(provider):
            clocks = [run[(provider,) + key].get("sm_mhz") for run in keyed]
            return None if None in clocks else statistics.median(clocks)

        out.append({"pass": key[0], "dtype": key[1], "headdim": key[2], "seqlen": key[3],
                    "causal": key[4], "mhz_old": mhz(BASE), "mhz_new": mhz("flashtriton"),
                    "old": [run[(BASE,) + key]["tflops"] for run in keyed],
                    "new": [run[("flashtriton",) + key]["tflops"] for run in keyed],
                    "change": statistics.median(paired), "low": min(paired),
                    "high": max(paired), "ratio_old": ratio(BASE),
                    "ratio_new": ratio("flashtriton")})
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--old", nargs="+", help="bench JSON of the old tree's runs")
    ap.add_argument("--new", nargs="+", help="bench JSON of the new tree's runs")
    ap.add_argument("--inproc", nargs="+", metavar="RUN",
                    help="bench JSON of runs that timed both trees (--baseline-src)")
    args = ap.parse_args()
    if args.inproc:
        if args.old or args.new:
            ap.error("--inproc compares within its runs: no --old or --new")
        rows = compare_inproc([timed_rows(p) for p in args.inproc])
        clocked = any(r["mhz_old"] is not None and r["mhz_new"] is not None for r in rows)
        print(f"{'pass':4} {'dtype':5} {'d':>4} {'seqlen':>6} {'causal':6} {'old TFLOP/s':>17} "
              f"{'new TFLOP/s':>17} {'change':>7} {'paired range':>15}  ours/cuDNN old -> new"
              + ("  MHz old/new" if clocked else ""))
        for r in rows:
            ratio = ("" if r["ratio_old"] is None
                     else f"{r['ratio_old']:.3f} -> {r['ratio_new']:.3f}")
            span = f"{r['low'] * 100:+.1f}..{r['high'] * 100:+.1f}%"
            clock = ""
            if clocked:
                clock = ("  -" if r["mhz_old"] is None or r["mhz_new"] is None
                         else f"  {r['mhz_old']:.0f}/{r['mhz_new']:.0f}")
            print(f"{r['pass']:4} {r['dtype']:5} {r['headdim']:>4} {r['seqlen']:>6} "
                  f"{str(r['causal']):6} "
                  f"{' '.join(f'{x:.1f}' for x in r['old']):>17} "
                  f"{' '.join(f'{x:.1f}' for x in r['new']):>17} {r['change'] * 100:+6.1f}% "
                  f"{span:>15}  {ratio}{clock}")
        return
    if not (args.old and args.new):
        ap.error("give --old and --new runs, or --inproc runs")
    rows = compare([load(p) for p in args.old], [load(p) for p in args.new])
    print(f"{'pass':4} {'dtype':5} {'d':>4} {'seqlen':>6} {'causal':6} {'old TFLOP/s':>17} "
          f"{'new TFLOP/s':>17} {'change':>7}  ours/cuDNN old -> new")
    for r in rows:
        ratio = ("" if r["ratio_old"] is None
                 else f"{r['ratio_old']:.3f} -> {r['ratio_new']:.3f}")
        print(f"{r['pass']:4} {r['dtype']:5} {r['headdim']:>4} {r['seqlen']:>6} "
              f"{str(r['causal']):6} "
              f"{' '.join(f'{x:.1f}' for x in r['old']):>17} "
              f"{' '.join(f'{x:.1f}' for x in r['new']):>17} {r['change'] * 100:+6.1f}%  {ratio}")


if __name__ == "__main__":
    main()
