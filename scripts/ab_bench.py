"""An A/B of `flashtriton bench` runs: runs of the old tree and of the new one, alternated
(old / new / new / old, see scripts/gpu_ab.sh bench), one line per row (pass, dtype, head dim,
seqlen, causal): each run's TFLOP/s for flashtriton, the change of the means, and the ratio to
cuDNN (the mean of each run's ratio) before → after, when the runs timed sdpa_cudnn.

    python3 scripts/ab_bench.py --old OLD1.json OLD2.json --new NEW1.json NEW2.json
"""

from __future__ import annotations

import argparse

from flashtriton.bench.results import read_results


def load(path: str) -> dict:
    """{(provider, pass, dtype, head dim, seqlen, causal): TFLOP/s} of a bench results file
    (checked by ``read_results``); rows that were not timed are left out."""
    return {(r["provider"], r["pass"], r["dtype"], r["headdim"], r["seqlen"], r["causal"]):
            r["tflops"] for r in read_results(path)["results"] if r.get("tflops") is not None}


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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--old", nargs="+", required=True, help="bench JSON of the old tree's runs")
    ap.add_argument("--new", nargs="+", required=True, help="bench JSON of the new tree's runs")
    args = ap.parse_args()
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
