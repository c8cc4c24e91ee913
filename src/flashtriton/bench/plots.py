"""PNG plots of `flashtriton bench` results, built from the results JSON alone, so that the plots in
the docs can be regenerated from committed files (`flashtriton bench --plot-only FILE --plots DIR`).

- ``tflops-<dtype>-<pass>.png``: TFLOP/s against seqlen, one panel per (headdim, causal), one line
  per provider (registry order and labels).
- ``memory-<dtype>.png``: peak memory against seqlen, flashtriton against naive, one panel per
  (pass, headdim), solid lines non-causal, dashed causal.

Each figure has one legend, below its panels. Rows that were skipped or wrong have no value
and leave a gap. matplotlib (Agg backend) is imported only when plotting; without it
:class:`PlottingUnavailable` says so.
"""

from __future__ import annotations

import os
from pathlib import Path

from flashtriton.bench.results import merge_results, read_results, row_status

MEMORY_PROVIDERS = ("flashtriton", "naive")
LEGEND_ROW_INCHES = 0.22  # the figure legend's height per row of labels
LABEL_INCHES = 1.7  # a legend label's width, marker included
PASS_TITLES = {"fwd": "forward", "bwd": "backward", "fwd_bwd": "forward + backward"}


class PlottingUnavailable(RuntimeError):
    """matplotlib is not installed."""


def _pyplot():
    try:
        import matplotlib
    except ImportError as exc:
        raise PlottingUnavailable("matplotlib is not installed (pip install matplotlib)") from exc
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _provider_styles(names: list[str]) -> dict[str, tuple[str, str]]:
    """(label, colour) per provider: registry order first, so colours are stable between plots."""
    try:
        from flashtriton.bench.providers import PROVIDERS
        labels = {name: p.label for name, p in PROVIDERS.items()}
    except ImportError:  # plotting committed results without torch
        labels = {}
    order = list(labels) + sorted(set(names) - set(labels))
    return {n: (labels.get(n, n), f"C{i % 10}") for i, n in enumerate(order) if n in names}


def _values(rows, key):
    """(seqlen, value) pairs sorted by seqlen, for rows that were measured."""
    pts = sorted((r["seqlen"], r[key]) for r in rows
                 if row_status(r) == "ok" and r.get(key) is not None)
    return [p[0] for p in pts], [p[1] for p in pts]


def _grid(plt, nrows, ncols):
    fig, axes = plt.subplots(nrows, ncols, figsize=(5.2 * ncols, 3.8 * nrows), squeeze=False)
    return fig, axes


def _finish(fig, axes, title: str) -> None:
    """Title the figure and give it one legend below the panels (the providers are the same in
    every panel; a legend inside a panel covered its lines), in the order the lines were drawn."""
    entries: dict[str, object] = {}
    for ax in (a for row in axes for a in row):
        for handle, label in zip(*ax.get_legend_handles_labels()):
            entries.setdefault(label, handle)
    fig.suptitle(title, fontsize=10)
    ncol = min(len(entries), max(2, int(fig.get_figwidth() / LABEL_INCHES)))
    rows = -(-len(entries) // ncol) if entries else 0
    if entries:
        fig.legend(list(entries.values()), list(entries), loc="lower center", ncol=ncol,
                   fontsize=8, frameon=False)
    # the panels above the legend's rows
    fig.tight_layout(rect=(0, min(0.3, rows * LEGEND_ROW_INCHES / fig.get_figheight()), 1, 1))


def _seqlen_axis(ax, seqlens):
    ax.set_xscale("log", base=2)
    ax.set_xticks(seqlens)
    ax.set_xticklabels([f"{s // 1024}k" if s >= 1024 else str(s) for s in seqlens])
    ax.set_xlabel("sequence length")
    ax.grid(True, alpha=0.3)


def _subtitle(meta: dict) -> str:
    date = str(meta.get("date", ""))[:10]
    return f"{meta.get('gpu', '?')} · torch {meta.get('torch', '?')} · triton {meta.get('triton', '?')} · {date}"


def plot_tflops(data: dict, out_dir: Path, plt) -> list[Path]:
    rows = data["results"]
    styles = _provider_styles(sorted({r["provider"] for r in rows}))
    written = []
    for dtype in dict.fromkeys(r["dtype"] for r in rows):
        for pass_name in dict.fromkeys(r["pass"] for r in rows if r["dtype"] == dtype):
            sel = [r for r in rows if r["dtype"] == dtype and r["pass"] == pass_name]
            headdims = sorted({r["headdim"] for r in sel})
            causals = sorted({r["causal"] for r in sel})
            seqlens = sorted({r["seqlen"] for r in sel})
            fig, axes = _grid(plt, len(headdims), len(causals))
            for i, d in enumerate(headdims):
                for j, causal in enumerate(causals):
                    ax = axes[i][j]
                    for name, (label, colour) in styles.items():
                        xs, ys = _values([r for r in sel if r["provider"] == name
                                          and r["headdim"] == d and r["causal"] == causal], "tflops")
                        if xs:
                            ax.plot(xs, ys, marker="o", label=label, color=colour)
                    _seqlen_axis(ax, seqlens)
                    ax.set_ylabel("TFLOP/s")
                    ax.set_ylim(bottom=0)
                    ax.set_title(f"headdim {d}, {'causal' if causal else 'non-causal'}")
            _finish(fig, axes,
                    f"{PASS_TITLES.get(pass_name, pass_name)}, {dtype}\n{_subtitle(data['meta'])}")
            path = out_dir / f"tflops-{dtype}-{pass_name}.png"
            fig.savefig(path, dpi=110)
            plt.close(fig)
            written.append(path)
    return written


def plot_memory(data: dict, out_dir: Path, plt) -> list[Path]:
    rows = [r for r in data["results"] if r["provider"] in MEMORY_PROVIDERS]
    styles = _provider_styles(sorted({r["provider"] for r in rows}))
    written = []
    for dtype in dict.fromkeys(r["dtype"] for r in rows):
        sel = [r for r in rows if r["dtype"] == dtype]
        if not any(r.get("peak_mib") is not None for r in sel):
            continue  # CPU runs measure no memory
        passes = list(dict.fromkeys(r["pass"] for r in sel))
        headdims = sorted({r["headdim"] for r in sel})
        seqlens = sorted({r["seqlen"] for r in sel})
        fig, axes = _grid(plt, len(passes), len(headdims))
        for i, pass_name in enumerate(passes):
            for j, d in enumerate(headdims):
                ax = axes[i][j]
                for name, (label, colour) in styles.items():
                    for causal, style in ((False, "-"), (True, "--")):
                        xs, ys = _values([r for r in sel if r["provider"] == name and r["pass"] == pass_name
                                          and r["headdim"] == d and r["causal"] == causal], "peak_mib")
                        if xs:
                            ax.plot(xs, ys, style, marker="o", color=colour,
                                    label=f"{label}{', causal' if causal else ''}")
                _seqlen_axis(ax, seqlens)
                ax.set_yscale("log")
                ax.set_ylabel("peak memory (MiB)")
                ax.set_title(f"{PASS_TITLES.get(pass_name, pass_name)}, headdim {d}")
        _finish(fig, axes, f"peak memory, {dtype} (inputs included)\n{_subtitle(data['meta'])}")
        path = out_dir / f"memory-{dtype}.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)
    return written


def plot_results(data: dict, out_dir: str | os.PathLike) -> list[Path]:
    """Write every plot for ``data`` (a results dict) into ``out_dir``; returns the PNG paths."""
    plt = _pyplot()
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    return plot_tflops(data, out_dir, plt) + plot_memory(data, out_dir, plt)


def plot_files(paths: list[str | os.PathLike], out_dir: str | os.PathLike) -> list[Path]:
    """Plots from results files (several files, e.g. a grid split over runs, are merged)."""
    return plot_results(merge_results([read_results(p) for p in paths]), out_dir)
