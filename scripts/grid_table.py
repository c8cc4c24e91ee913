"""The speed issue's verdict on one `flashtriton bench` JSON (e.g. `scripts/gpu_bench.sh target`):
a markdown table of flashtriton against sdpa_cudnn per (pass, headdim, causal, seqlen) with the
ratio and each row's sampled SM clock, then the two targets checked on that one run: every row
with seqlen >= 1024 at or above cuDNN, and (bf16 only, as the issue sets them) the 16k
throughput floors. Where the run has `--clock`'s board power, each floor's line adds the
row's board energy a FLOP (watts over TFLOP/s, in pJ) and what the floor needs at that power
(under the power cap the clock is what the power allows, so TFLOP/s = watts / pJ a FLOP), and
a line gives ours over cuDNN's energy a FLOP across the rows.

    python3 scripts/grid_table.py RESULTS.json [--dtype bf16]
    python3 scripts/grid_table.py BF16.json --fp16 FP16.json
    python3 scripts/grid_table.py RESULTS.json --providers [--dtype bf16]
    python3 scripts/grid_table.py RESULTS.json --against OTHER.json [--dtype bf16]

The second form checks the fp16 target (fp16 within 3% of bf16) on two runs of the same grid:
per provider, how many rows' fp16 TFLOP/s are within 3% of bf16's, the median change, and the
rows furthest below with each dtype's sampled clock and board power.

The third form is the README's table of every provider a run holds (e.g. `scripts/gpu_bench.sh
quick-all`): each provider's TFLOP/s per row, then ours over each other provider, and per
provider the range of that ratio over the rows both have (a provider with an error, a wrong
output or no timing in a row shows `-` there).

The fourth form sets a run against another run of the same grid (another machine, another
commit) to tell a board from a kernel: per provider, over the rows both runs timed, the median
and range of this run over the other in TFLOP/s, cycles a call (`--clock`'s kcycles), sampled
SM clock and board power. When both providers' TFLOP/s move with the clock and their cycles
stay, the board moved; when ours' cycles move and cuDNN's do not, the kernels did. Only the
medians tell: a row's cycles come from a few sampled clock readings, and an unchanged
kernel's row moved by up to 13% between session 57's and session 64's H200 grids.

In the first form a row whose provider was not timed (a wrong output, out of memory) counts as
below cuDNN; the fp16 report leaves out rows not timed in both types. Exit status 0 whatever
the verdict (the report is the output); 2 when a file holds no flashtriton and sdpa_cudnn rows
in the type asked for.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys

OURS, PEER = "flashtriton", "sdpa_cudnn"
# the issue's 16k floors in bf16, TFLOP/s, (pass, headdim, causal) -> floor. Headdim 64's name
# no mask; they are held for both, as docs/performance.md's targets table has tracked them
FLOORS = {("fwd", 128, False): 650.0, ("fwd", 128, True): 620.0,
          ("bwd", 128, False): 580.0, ("bwd", 128, True): 580.0,
          ("fwd", 64, False): 520.0, ("fwd", 64, True): 520.0,
          ("bwd", 64, False): 500.0, ("bwd", 64, True): 500.0}
FLOOR_DTYPE = "bf16"
FP16_WITHIN = 0.03
FLOOR_SEQLEN = 16384
# flashtriton.bench.report.TARGET_FROM_SEQLEN (the bench's own target line), kept here so that
# the script runs without torch; tests/test_grid_table.py checks the two agree
RATIO_FROM_SEQLEN = 1024
PASS_ORDER = {"fwd": 0, "bwd": 1, "fwd_bwd": 2}


def ordered(table: dict[tuple, dict[str, dict]]) -> list[tuple]:
    """The table's keys as the docs list them: forward first, then headdim, mask, seqlen."""
    return sorted(table, key=lambda k: (PASS_ORDER.get(k[0], 3), k[0], k[1], k[2], k[3]))


def pairs(rows: list[dict], dtype: str) -> dict[tuple, dict[str, dict]]:
    """(pass, headdim, causal, seqlen) -> {provider: row} for ours and the peer in ``dtype``."""
    table, _ = by_provider([r for r in rows if r.get("provider") in (OURS, PEER)], dtype)
    return table


def tflops(row: dict | None) -> float | None:
    value = (row or {}).get("tflops")
    return float(value) if isinstance(value, (int, float)) else None


def verdict(table: dict[tuple, dict[str, dict]]) -> dict:
    """The rows below cuDNN (or untimed) and the floors missed, with counts."""
    below, counted = [], 0
    for key in ordered(table):
        by = table[key]
        if key[3] < RATIO_FROM_SEQLEN:
            continue
        counted += 1
        ours, peer = tflops(by.get(OURS)), tflops(by.get(PEER))
        if ours is None or peer is None or ours < peer:
            below.append((key, ours, peer))
    floors = []
    for (pass_, headdim, causal), floor in sorted(FLOORS.items()):
        ours = tflops(table.get((pass_, headdim, causal, FLOOR_SEQLEN), {}).get(OURS))
        floors.append(((pass_, headdim, causal), floor, ours,
                       ours is not None and ours >= floor))
    return {"counted": counted, "below": below, "floors": floors}


def fmt(x: float | None, spec: str = ".1f") -> str:
    return "-" if x is None else format(x, spec)


def _number(row: dict | None, key: str) -> str:
    value = (row or {}).get(key)
    return f"{value:,.0f}" if isinstance(value, (int, float)) else "-"


def mhz(row: dict | None) -> str:
    return _number(row, "sm_mhz")


def watts(row: dict | None) -> str:
    return _number(row, "watts")


def pj_per_flop(row: dict | None) -> float | None:
    """Board energy a FLOP in picojoules: the row's median board power over its TFLOP/s
    (W / 10^12 FLOP/s = pJ / FLOP); None without ``--clock``'s watts. At a power-capped clock
    a kernel's TFLOP/s is the board's power over this: a floor F at W watts needs W / F."""
    power, rate = (row or {}).get("watts"), tflops(row)
    return power / rate if isinstance(power, (int, float)) and rate else None


def energy_ratios(table: dict[tuple, dict[str, dict]]) -> list[float]:
    """Ours over cuDNN's board energy a FLOP, per row (seqlen >= 1024) where both have it."""
    out = []
    for key in ordered(table):
        if key[3] < RATIO_FROM_SEQLEN:
            continue
        ours, peer = (pj_per_flop(table[key].get(p)) for p in (OURS, PEER))
        if ours is not None and peer:
            out.append(ours / peer)
    return out


def render(table: dict[tuple, dict[str, dict]], dtype: str = FLOOR_DTYPE) -> str:
    lines = ["| pass | d | causal | seqlen | flashtriton TFLOP/s | cuDNN TFLOP/s | ours / cuDNN "
             "| MHz ours / cuDNN |", "|---|---|---|---|---|---|---|---|"]
    for pass_, headdim, causal, seqlen in ordered(table):
        by = table[(pass_, headdim, causal, seqlen)]
        ours, peer = tflops(by.get(OURS)), tflops(by.get(PEER))
        ratio = ours / peer if ours is not None and peer else None
        cell = fmt(ratio, ".3f")
        if ratio is not None and ratio < 1.0 and seqlen >= RATIO_FROM_SEQLEN:
            cell = f"**{cell}**"
        lines.append(f"| {pass_} | {headdim} | {'yes' if causal else 'no'} | {seqlen} | "
                     f"{fmt(ours)} | {fmt(peer)} | {cell} | "
                     f"{mhz(by.get(OURS))} / {mhz(by.get(PEER))} |")
    v = verdict(table)
    lines.append("")
    lines.append(f"at or above cuDNN (seqlen >= {RATIO_FROM_SEQLEN}): "
                 f"{v['counted'] - len(v['below'])} of {v['counted']}")
    for (pass_, headdim, causal, seqlen), ours, peer in v["below"]:
        ratio = fmt(ours / peer, ".3f") if ours is not None and peer else "untimed"
        lines.append(f"  below: {pass_} d{headdim} {'causal' if causal else 'no mask'} "
                     f"{seqlen}: {fmt(ours)} against {fmt(peer)} ({ratio})")
    ratios = energy_ratios(table)
    if ratios:
        lines.append(f"board energy a FLOP, ours / cuDNN: median {statistics.median(ratios):.3f}, "
                     f"{min(ratios):.3f}-{max(ratios):.3f} over {len(ratios)} rows")
    if dtype != FLOOR_DTYPE:
        lines.append(f"16k floors: set for {FLOOR_DTYPE} only, none checked in {dtype}")
        return "\n".join(lines)
    for (pass_, headdim, causal), floor, ours, met in v["floors"]:
        row = table.get((pass_, headdim, causal, FLOOR_SEQLEN), {}).get(OURS)
        energy = pj_per_flop(row)
        power = "" if energy is None else (
            f" ({energy:.3f} pJ/FLOP at {row['watts']:.0f} W; {floor:.0f} at that power "
            f"needs {row['watts'] / floor:.3f})")
        lines.append(f"16k floor {pass_} d{headdim} {'causal' if causal else 'no mask'}: "
                     f"{fmt(ours)} against {floor:.0f}: {'met' if met else 'MISSED'}{power}")
    return "\n".join(lines)


def fp16_report(bf16: dict[tuple, dict[str, dict]], fp16: dict[tuple, dict[str, dict]],
                worst: int = 5) -> str:
    """fp16 against bf16 per provider over the rows (seqlen >= 1024) both runs timed."""
    lines = []
    for provider in (OURS, PEER):
        changes = []
        for key in ordered(bf16):
            if key[3] < RATIO_FROM_SEQLEN:
                continue
            b, f = bf16[key].get(provider), fp16.get(key, {}).get(provider)
            before, after = tflops(b), tflops(f)
            if before and after is not None:
                changes.append((after / before - 1.0, key, b, f))
        if not changes:
            lines.append(f"{provider}: no rows timed in both dtypes")
            continue
        within = sum(c >= -FP16_WITHIN for c, *_ in changes)
        lines.append(f"{provider}: fp16 within {FP16_WITHIN:.0%} of bf16 on {within} of "
                     f"{len(changes)} rows; median change "
                     f"{statistics.median(c for c, *_ in changes):+.1%}")
        for change, (pass_, headdim, causal, seqlen), b, f in sorted(changes)[:worst]:
            lines.append(f"  {pass_} d{headdim} {'causal' if causal else 'no mask'} {seqlen}: "
                         f"{change:+.1%} (MHz {mhz(b)} -> {mhz(f)}, W {watts(b)} -> {watts(f)})")
    return "\n".join(lines)


# the bench's provider names in the order the README's tables list them; others follow by name
PROVIDER_ORDER = (OURS, PEER, "sdpa_flash", "flex", "sdpa_efficient", "naive")


def by_provider(rows: list[dict], dtype: str) -> tuple[dict[tuple, dict[str, dict]], list[str]]:
    """(pass, headdim, causal, seqlen) -> {provider: row} for every provider in ``dtype``, and
    the providers in ``PROVIDER_ORDER`` (then any other, by name)."""
    out: dict[tuple, dict[str, dict]] = {}
    for r in rows:
        if r.get("dtype") == dtype:
            key = (r["pass"], r["headdim"], r["causal"], r["seqlen"])
            out.setdefault(key, {})[r["provider"]] = r
    seen = {p for by in out.values() for p in by}
    names = [p for p in PROVIDER_ORDER if p in seen] + sorted(seen - set(PROVIDER_ORDER))
    return out, names


def providers_table(rows: list[dict], dtype: str = FLOOR_DTYPE) -> str:
    """Every provider's TFLOP/s per row and ours over each of the others, then per provider
    the ratio's range over the rows both timed."""
    table, names = by_provider(rows, dtype)
    if OURS not in names or len(names) < 2:
        raise ValueError(f"grid_table: no {OURS} rows and another provider's in {dtype}")
    peers = [p for p in names if p != OURS]
    lines = ["| pass | d | causal | seqlen | " + " | ".join(names) + " | "
             + " | ".join(f"ours / {p}" for p in peers) + " |",
             "|---" * (4 + len(names) + len(peers)) + "|"]
    spans: dict[str, list[float]] = {p: [] for p in peers}
    for key in ordered(table):
        by = table[key]
        ours = tflops(by.get(OURS))
        cells = []
        for p in peers:
            peer = tflops(by.get(p))
            ratio = ours / peer if ours is not None and peer else None
            if ratio is not None:
                spans[p].append(ratio)
            cells.append(fmt(ratio, ".2f"))
        pass_, headdim, causal, seqlen = key
        lines.append(f"| {pass_} | {headdim} | {'yes' if causal else 'no'} | {seqlen} | "
                     + " | ".join(fmt(tflops(by.get(p))) for p in names) + " | "
                     + " | ".join(cells) + " |")
    lines.append("")
    for p in peers:
        r = spans[p]
        lines.append(f"ours / {p}: " + (f"{min(r):.2f}-{max(r):.2f} over {len(r)} rows"
                                         if r else "no row timed by both"))
    return "\n".join(lines)


# what --against compares, as (row key, label): this run over the other, per provider
AGAINST_FIELDS = (("tflops", "TFLOP/s"), ("kcycles", "cycles a call"), ("sm_mhz", "SM clock"),
                  ("watts", "board power"))


def _positive(row: dict | None, key: str) -> float | None:
    value = (row or {}).get(key)
    return float(value) if isinstance(value, (int, float)) and value > 0 else None


def against_report(new_rows: list[dict], old_rows: list[dict], dtype: str = FLOOR_DTYPE) -> str:
    """This run over another run of the same grid, per provider (ours and cuDNN): for each of
    ``AGAINST_FIELDS`` the median and range of the ratio over the rows (seqlen >= 1024) both
    runs have it for."""
    new, _ = by_provider(new_rows, dtype)
    old, _ = by_provider(old_rows, dtype)
    keys = [k for k in ordered(new) if k in old and k[3] >= RATIO_FROM_SEQLEN]
    lines = []
    for provider in (OURS, PEER):
        parts = []
        for field, label in AGAINST_FIELDS:
            ratios = [n / o for k in keys
                      if (n := _positive(new[k].get(provider), field)) is not None
                      and (o := _positive(old[k].get(provider), field)) is not None]
            parts.append(f"{label} {statistics.median(ratios):.3f} "
                         f"({min(ratios):.3f}-{max(ratios):.3f}, {len(ratios)} rows)"
                         if ratios else f"{label} -")
        lines.append(f"{provider}, this run / the other: " + "; ".join(parts))
    return "\n".join(lines)


def checked_rows(path: str, dtype: str) -> list[dict]:
    """A bench JSON's result rows, refused (ValueError) without ours and cuDNN's in ``dtype``."""
    with open(path) as f:
        rows = json.load(f)["results"]
    if not any(OURS in by and PEER in by for by in pairs(rows, dtype).values()):
        raise ValueError(f"grid_table: {path} holds no {OURS} and {PEER} rows in {dtype}")
    return rows


def load(path: str, dtype: str) -> dict[tuple, dict[str, dict]]:
    return pairs(checked_rows(path, dtype), dtype)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", help="a flashtriton bench JSON file")
    parser.add_argument("--dtype", default="bf16", help="the dtype whose rows to compare")
    parser.add_argument("--fp16", metavar="FP16_JSON",
                        help="a run of the same grid in fp16: report fp16 against RESULTS' bf16")
    parser.add_argument("--providers", action="store_true",
                        help="a table of every provider in RESULTS and ours over each")
    parser.add_argument("--against", metavar="OTHER_JSON",
                        help="another run of the same grid: RESULTS over it per provider in "
                             "TFLOP/s, cycles a call, SM clock and board power")
    args = parser.parse_args(argv)
    if sum(map(bool, (args.providers, args.fp16, args.against))) > 1:
        parser.error("--providers, --fp16 and --against are separate reports: give one")
    try:
        if args.against:
            new, old = (checked_rows(path, args.dtype) for path in (args.results, args.against))
            print(against_report(new, old, args.dtype))
        elif args.providers:
            with open(args.results) as f:
                print(providers_table(json.load(f)["results"], args.dtype))
        elif args.fp16:
            print(fp16_report(load(args.results, "bf16"), load(args.fp16, "fp16")))
        else:
            print(render(load(args.results, args.dtype), args.dtype))
    except ValueError as e:
        print(e, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
