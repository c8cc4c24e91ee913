"""What `flashtriton bench` prints: a progress bar, one line per result, and the summary tables.

Uses rich when it is installed and plain text otherwise (the GPU machine may lack it); rich is
imported only when a console is made, never when flashtriton.bench is imported.
"""

from __future__ import annotations

import contextlib
import sys
import time
from typing import Callable, Iterator

from flashtriton.bench.results import row_status

SHORT_STATUS = {"skipped": "skip", "wrong": "WRONG", "error": "error"}


def stamp(start: float) -> str:
    """Seconds since ``start`` (``time.perf_counter``), as a progress line's prefix: the gaps
    between lines show where a long run's time goes (setup, compiles, checks, timing)."""
    return f"{time.perf_counter() - start:.1f} s"


class PlainConsole:
    """Plain-text output: every line is printed, progress as ``[i/total, elapsed]``
    prefixes."""
    rich = False

    def __init__(self, file=None):
        self.file = file or sys.stdout

    def print(self, text: str = "") -> None:
        print(text, file=self.file, flush=True)

    @contextlib.contextmanager
    def progress(self, total: int) -> Iterator[Callable[[int, str], None]]:
        done = [0]
        start = time.perf_counter()

        def advance(steps: int, text: str) -> None:
            done[0] += steps
            self.print(f"[{done[0]}/{total}, {stamp(start)}] {text}")

        yield advance

    def table(self, title: str, headers: list[str], rows: list[list[str]]) -> None:
        widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h)
                  for i, h in enumerate(headers)]
        self.print(title)
        self.print("  ".join(h.rjust(w) for h, w in zip(headers, widths)))
        self.print("  ".join("-" * w for w in widths))
        for r in rows:
            self.print("  ".join(c.rjust(w) for c, w in zip(r, widths)))
        self.print()


class RichConsole:
    """rich output: a live progress bar with result lines logged above it, and rich tables."""
    rich = True

    def __init__(self, file=None):
        from rich.console import Console

        self.console = Console(file=file, highlight=False)
        if not self.console.is_terminal:  # piped to a log: wide enough for the provider columns
            self.console.width = max(self.console.width, 160)

    def print(self, text: str = "") -> None:
        self.console.print(text, markup=False)

    @contextlib.contextmanager
    def progress(self, total: int) -> Iterator[Callable[[int, str], None]]:
        from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn,
                                   TimeElapsedColumn, TimeRemainingColumn)

        columns = (TextColumn("bench"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                   TimeRemainingColumn())
        with Progress(*columns, console=self.console, transient=False) as bar:
            task = bar.add_task("bench", total=total)
            start = time.perf_counter()

            def advance(steps: int, text: str) -> None:
                bar.console.print(f"{stamp(start):>8}  {text}", markup=False, highlight=False)
                bar.advance(task, steps)

            yield advance

    def table(self, title: str, headers: list[str], rows: list[list[str]]) -> None:
        from rich.table import Table

        table = Table(title=title)
        for i, h in enumerate(headers):
            table.add_column(h, justify="left" if i < 5 else "right")
        for r in rows:
            table.add_row(*r)
        self.console.print(table)


def make_console(prefer_rich: bool = True, file=None):
    """A rich console when rich can be imported (and wanted), else a plain one."""
    if prefer_rich:
        try:
            import rich  # noqa: F401
        except ImportError:
            pass
        else:
            return RichConsole(file=file)
    return PlainConsole(file=file)


def describe_row(row: dict) -> str:
    """One line for the progress log."""
    config = (f"{row['provider']:<14} {row['pass']:<7} {row['dtype']} b{row['batch']} h{row['heads']}"
              f" s{row['seqlen']} d{row['headdim']} {'causal' if row['causal'] else 'full'}")
    status = row_status(row)
    setup = "" if row.get("setup_s") is None else f" [set-up {row['setup_s']:.1f} s]"
    if status != "ok":
        return f"{config}: {status.upper()} ({row.get('note', '')}){setup}"
    mem = "" if row["peak_mib"] is None else f", {row['peak_mib']:.0f} MiB"
    speed = format(row["tflops"], ".1f" if row["tflops"] >= 1 else ".3g")
    return f"{config}: {row['ms']:.3f} ms, {speed} TFLOP/s{mem}{setup}"


def setup_line(results: list[dict]) -> str | None:
    """Each provider's set-up time summed over the configurations (a configuration's rows
    share their provider's ``setup_s``): where a run's time went besides the timing. None when
    no row carries it."""
    seen: dict[tuple, float] = {}
    for row in results:
        if row.get("setup_s") is not None:
            key = tuple(row[k] for k in ("provider", "dtype", "batch", "heads", "seqlen",
                                         "headdim", "causal"))
            seen[key] = row["setup_s"]
    totals: dict[str, float] = {}
    for key, seconds in seen.items():
        totals[key[0]] = totals.get(key[0], 0.0) + seconds
    if not totals:
        return None
    return ("set-up (compiles, checks, peak memory): "
            + ", ".join(f"{name} {seconds:.1f} s" for name, seconds in totals.items()))


def _cell(row: dict | None, key: str, fmt: str) -> str:
    if row is None:
        return ""
    status = row_status(row)
    if status != "ok":
        return SHORT_STATUS[status]
    if row.get(key) is None:
        return "n/a"
    return format(row[key], fmt if abs(row[key]) >= 1 else ".3g")


def _grouped(results: list[dict]):
    """Rows keyed by configuration (pass, dtype, causal, headdim, seqlen), then provider."""
    groups: dict[tuple, dict[str, dict]] = {}
    for row in results:
        key = (row["pass"], row["dtype"], row["causal"], row["headdim"], row["seqlen"])
        groups.setdefault(key, {})[row["provider"]] = row
    return groups


# The speed target (issue 3): every configuration from this many keys, forward and backward,
# at or above SDPA's cuDNN backend, measured in the same run
TARGET_FROM_SEQLEN = 1024


def target_line(results: list[dict]) -> str | None:
    """One line on the speed target: how many of the run's configurations from
    ``TARGET_FROM_SEQLEN`` keys (where both flashtriton and sdpa_cudnn were timed) have
    flashtriton at or above cuDNN, and which are below, least first, with their ratios. None
    when the run has no such configuration."""
    below, counted = [], 0
    for key, by_provider in _grouped(results).items():
        ours, peer = by_provider.get("flashtriton"), by_provider.get("sdpa_cudnn")
        if key[4] < TARGET_FROM_SEQLEN or not all(r is not None and r.get("tflops")
                                                  for r in (ours, peer)):
            continue
        counted += 1
        ratio = ours["tflops"] / peer["tflops"]
        if ratio < 1.0:
            below.append((ratio, key))
    if not counted:
        return None
    line = (f"against cuDNN, from {TARGET_FROM_SEQLEN} keys: {counted - len(below)} of {counted} "
            f"configurations at or above 1.00x")
    if below:
        line += "; below: " + ", ".join(
            f"{p} {dtype} d{d} {s} {'causal' if causal else 'full'} {ratio:.3f}x"
            for ratio, (p, dtype, causal, d, s) in sorted(below))
    return line


def _energy_cell(row: dict | None) -> str:
    """Board energy a FLOP in pJ (the row's median board watts over its TFLOP/s: W / 10^12
    FLOP/s = pJ / FLOP), as ``_cell`` shows a row that was not timed."""
    if row is None or row_status(row) != "ok":
        return _cell(row, "tflops", ".1f")
    if row.get("watts") is None or not row.get("tflops"):
        return "n/a"
    return f"{row['watts'] / row['tflops']:.3f}"


def summary_tables(results: list[dict], providers: list[str], *,
                   timer: str = "median of do_bench") -> list[tuple[str, list, list]]:
    """(title, headers, rows) for the TFLOP/s table and, when measured, the peak-memory table
    and the SM clock table (``--clock``); columns follow the provider registry's order. The
    TFLOP/s table adds flashtriton / sdpa_cudnn (the speed target) and, in an A/B, flashtriton /
    flashtriton_base (``--baseline-src``). With ``--clock``'s board power, a table of board
    energy a FLOP: under a power cap the clock is what the power allows, so TFLOP/s is the
    board's watts over it."""
    present = [p for p in providers if any(r["provider"] == p for r in results)]
    present += sorted({r["provider"] for r in results} - set(present))
    groups = _grouped(results)
    keys = list(groups)  # in run order
    config_headers = ["pass", "dtype", "causal", "d", "seqlen"]
    # (peer, header, digits): the cuDNN target, and an A/B's baseline (changes of a percent)
    ratios = [r for r in (("sdpa_cudnn", "ours/cuDNN", 2), ("flashtriton_base", "ours/base", 3))
              if "flashtriton" in present and r[0] in present]
    speed_rows, mem_rows, clock_rows, energy_rows = [], [], [], []
    for key in keys:
        by_provider = groups[key]
        config = [key[0], key[1], "yes" if key[2] else "no", str(key[3]), str(key[4])]
        speed = [_cell(by_provider.get(p), "tflops", ".1f") for p in present]
        for other, _, digits in ratios:
            ours, peer = by_provider.get("flashtriton"), by_provider.get(other)
            ok = all(r is not None and r.get("tflops") for r in (ours, peer))
            speed.append(f"{ours['tflops'] / peer['tflops']:.{digits}f}x" if ok else "")
        speed_rows.append(config + speed)
        mem_rows.append(config + [_cell(by_provider.get(p), "peak_mib", ".0f") for p in present])
        clock_rows.append(config + [_cell(by_provider.get(p), "sm_mhz", ".0f") for p in present])
        energy_rows.append(config + [_energy_cell(by_provider.get(p)) for p in present])
    speed_headers = config_headers + present + [header for _, header, _ in ratios]
    tables = [(f"TFLOP/s ({timer})", speed_headers, speed_rows)]
    if any(r.get("peak_mib") is not None for r in results):
        tables.append(("peak memory (MiB, inputs included)", config_headers + present, mem_rows))
    if any(r.get("sm_mhz") is not None for r in results):
        tables.append(("SM clock while timed (MHz, median of nvidia-smi's samples)",
                       config_headers + present, clock_rows))
    if any(r.get("watts") is not None for r in results):
        tables.append(("board energy a FLOP (pJ: board watts over TFLOP/s; lower is better)",
                       config_headers + present, energy_rows))
    return tables
