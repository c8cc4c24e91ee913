"""The results file of `flashtriton bench`: its schema, the FLOP count, and writing, reading and merging.

Schema (fixed by the speed issue; plots and docs are regenerated from committed files)::

    {"meta": {"gpu", "torch", "triton", "cuda", "date", "commit"},
     "results": [{"provider", "pass", "dtype", "batch", "heads", "seqlen", "headdim", "causal",
                  "ms", "tflops", "peak_mib"}, ...]}

A row that was not timed has ``ms``/``tflops``/``peak_mib`` null and a ``status`` ("skipped": the
provider does not support the configuration; "wrong": it failed the correctness gate; "error": it
raised something unexpected) with a ``note`` saying why. Timed rows carry no ``status`` and may carry
a ``note``. Optional: ``rounds_ms`` (each round's time, ``--rounds``), ``setup_s`` (the seconds
the provider spent on the configuration before its timing: setup, compiles, check, peak memory)
and, with ``--clock``, ``clock_windows`` (each round's [start, end], unix seconds), ``sm_mhz`` and
``watts`` (the median of nvidia-smi's samples inside them), ``clock_samples`` (how many) and
``kcycles`` (thousands of SM cycles per call: ms × MHz; at the power cap nvidia-smi's samples
read 6–11% above the clock the kernels get, docs/performance.md session 34).
This module needs neither torch nor a GPU.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

META_KEYS = ("gpu", "torch", "triton", "cuda", "date", "commit")
RESULT_KEYS = ("provider", "pass", "dtype", "batch", "heads", "seqlen", "headdim", "causal",
               "ms", "tflops", "peak_mib")
OPTIONAL_KEYS = ("status", "note", "feature", "feature_params", "rounds_ms", "setup_s",
                 "clock_windows", "sm_mhz", "watts", "clock_samples", "kcycles")
STATUSES = ("ok", "skipped", "wrong", "error")

# FLOPs of each pass relative to the forward (the FlashAttention papers' convention).
PASS_FACTOR = {"fwd": 1.0, "bwd": 2.5, "fwd_bwd": 3.5}


def attention_flops(batch: int, heads: int, seqlen: int, headdim: int, causal: bool,
                    pass_name: str) -> float:
    """4·b·h·s²·d for the forward (two matmuls of 2·s²·d each per head), halved when causal,
    ×2.5 for the backward and ×3.5 for forward + backward."""
    flops = 4.0 * batch * heads * seqlen * seqlen * headdim
    if causal:
        flops /= 2
    return flops * PASS_FACTOR[pass_name]


def make_row(provider: str, pass_name: str, *, dtype: str, batch: int, heads: int, seqlen: int,
             headdim: int, causal: bool, ms: float | None = None, peak_mib: float | None = None,
             status: str = "ok", note: str | None = None,
             rounds_ms: list[float] | None = None, setup_s: float | None = None,
             clock_windows: list | None = None) -> dict:
    """One result row; ``tflops`` follows from ``ms`` and the FLOP count. ``rounds_ms``: each
    round's time when ``ms`` is the median of several (``flashtriton bench --rounds``).
    ``clock_windows``: each round's [start, end] in unix seconds (``--clock``).
    ``setup_s``: the seconds the provider took on this configuration before its timing (setup,
    first calls and their compiles, the correctness check, peak memory), shared by its rows."""
    if status not in STATUSES:
        raise ValueError(f"status: expected one of {STATUSES}, got {status!r}")
    tflops = None
    if ms is not None and ms > 0:
        tflops = attention_flops(batch, heads, seqlen, headdim, causal, pass_name) / (ms * 1e-3) / 1e12
    row = {"provider": provider, "pass": pass_name, "dtype": dtype, "batch": batch, "heads": heads,
           "seqlen": seqlen, "headdim": headdim, "causal": bool(causal),
           "ms": ms, "tflops": tflops, "peak_mib": peak_mib}
    if status != "ok":
        row["status"] = status
    if note:
        row["note"] = note
    if rounds_ms:
        row["rounds_ms"] = [float(x) for x in rounds_ms]
    if setup_s is not None:
        row["setup_s"] = round(float(setup_s), 3)
    if clock_windows:
        row["clock_windows"] = [[round(float(t0), 3), round(float(t1), 3)]
                                for t0, t1 in clock_windows]
    return row


def attach_run_clock(rows: list[dict], samples) -> None:
    """``flashtriton bench --clock``: each timed row's clock from nvidia-smi's ``samples``
    ((unix time, MHz, W), ``analysis.clock.sample_clock``) inside its ``clock_windows``: the
    median ``sm_mhz`` and ``watts``, ``clock_samples``, and ``kcycles`` per call (None without
    samples)."""
    from flashtriton.analysis.clock import clock_within

    for row in rows:
        if not row.get("clock_windows"):
            continue
        c = clock_within(samples, row["clock_windows"])
        row["clock_samples"], row["sm_mhz"], row["watts"] = c["samples"], c["sm_mhz"], c["watts"]
        row["kcycles"] = (round(row["ms"] * c["sm_mhz"], 1)
                          if c["samples"] and row.get("ms") else None)


def row_status(row: dict) -> str:
    return row.get("status", "ok")


def validate(data: dict) -> dict:
    """Raise ``ValueError`` naming the first field that breaks the schema; return ``data``."""
    if not isinstance(data, dict) or set(data) != {"meta", "results"}:
        raise ValueError("results file: expected exactly the keys 'meta' and 'results'")
    meta = data["meta"]
    if not isinstance(meta, dict) or set(meta) != set(META_KEYS):
        raise ValueError(f"meta: expected exactly the keys {META_KEYS}, got {sorted(meta)}")
    for i, row in enumerate(data["results"]):
        missing = [k for k in RESULT_KEYS if k not in row]
        extra = [k for k in row if k not in RESULT_KEYS + OPTIONAL_KEYS]
        if missing or extra:
            raise ValueError(f"results[{i}]: missing {missing}, unexpected {extra}")
        if row_status(row) not in STATUSES:
            raise ValueError(f"results[{i}].status: expected one of {STATUSES}, got {row['status']!r}")
        if row_status(row) == "ok" and row["ms"] is None:
            raise ValueError(f"results[{i}]: a row without a status must carry ms")
        rounds = row.get("rounds_ms")
        if rounds is not None and (not isinstance(rounds, list) or len(rounds) < 2
                                   or not all(isinstance(x, (int, float)) and x > 0
                                              for x in rounds)):
            raise ValueError(f"results[{i}].rounds_ms: expected two or more positive times")
        setup = row.get("setup_s")
        if setup is not None and (not isinstance(setup, (int, float)) or setup < 0):
            raise ValueError(f"results[{i}].setup_s: expected a time >= 0, got {setup!r}")
    return data


def write_results(path: str | os.PathLike, meta: dict, results: list[dict]) -> Path:
    path = Path(path)
    data = validate({"meta": dict(meta), "results": list(results)})
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    partial.write_text(json.dumps(data, indent=1) + "\n")
    partial.replace(path)  # a reader never sees a half-written file
    return path


def save_partial(path: str | os.PathLike, meta: dict, rows: list[dict],
                 clock_samples=None) -> Path:
    """The JSON of a run in progress, written after each configuration. With
    ``clock_samples`` (``--clock``: ``analysis.clock.ClockSamples``) each timed row that has
    no clock yet gets one from the samples written so far, so that a run cut short keeps its
    clock too. Rows that have one keep it (each save would otherwise match every row against
    every sample again); the newest rows may miss samples nvidia-smi has not flushed yet, and
    the run's end attaches every row's clock again, from all of them."""
    if clock_samples is not None:
        attach_run_clock([r for r in rows if r.get("sm_mhz") is None], clock_samples.so_far())
    return write_results(path, meta, rows)


def read_results(path: str | os.PathLike) -> dict:
    return validate(json.loads(Path(path).read_text()))


def merge_results(datasets: list[dict]) -> dict:
    """Several runs (e.g. the grid split over several commands) as one: the first file's meta, all
    rows, a later row replacing an earlier one of the same provider, pass and configuration."""
    if not datasets:
        raise ValueError("merge_results: no results to merge")
    rows = {}
    for data in datasets:
        for row in data["results"]:
            rows[tuple(row[k] for k in RESULT_KEYS[:8])] = row
    return {"meta": dict(datasets[0]["meta"]), "results": list(rows.values())}


def find_commit(start: str | os.PathLike | None = None) -> str:
    """The commit being benchmarked, read from ``FLASHTRITON_COMMIT`` or from the .git directory's
    files (no git process is run); "unknown" when neither is there (e.g. a copied working tree)."""
    env = os.environ.get("FLASHTRITON_COMMIT")
    if env:
        return env
    here = Path(start or __file__).resolve()
    for parent in [here, *here.parents]:
        git = parent / ".git"
        if git.is_dir():
            return _read_head(git)
    return "unknown"


def _read_head(git: Path) -> str:
    try:
        head = (git / "HEAD").read_text().strip()
        if not head.startswith("ref: "):
            return head
        ref = head[5:]
        loose = git / ref
        if loose.is_file():
            return loose.read_text().strip()
        packed = git / "packed-refs"
        if packed.is_file():
            for line in packed.read_text().splitlines():
                if line.endswith(" " + ref):
                    return line.split()[0]
    except OSError:
        pass
    return "unknown"
