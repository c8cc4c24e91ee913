"""`flashtriton profile`: the spec's hardware-counter table, from Nsight Compute.

On a GPU: each variant runs in its own child process under ``ncu --clock-control none
--profile-from-start off``; the child warms the kernel up (compile, autotune) outside the
profiled window, then runs it once between ``cudaProfilerStart`` and ``cudaProfilerStop``, so every
row of the CSV belongs to that variant (for the backward: the preprocess, dK/dV and dQ kernels).
The CSV (``--csv --page raw --print-units base``) is parsed into one row per kernel launch and
shown beside the traffic model. ``--from-csv FILE`` parses a recorded CSV instead (how CI tests
the parser). Metric names are the ones checked on our H200 (issue 4).
"""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
import subprocess
import sys
from dataclasses import asdict, dataclass

METRICS = (
    "gpu__time_duration.sum",
    "dram__bytes_read.sum",
    "dram__bytes_write.sum",
    "lts__t_bytes.sum",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum",
    "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum",
    "sm__warps_active.avg.pct_of_peak_sustained_active",
    "smsp__average_warps_issue_stalled_mio_throttle_per_issue_active.ratio",
    "launch__registers_per_thread",
)

# ncu's units (SI multiples for bytes) -> factor to the base unit (bytes, nanoseconds, ...)
_UNIT_SCALE = {
    "": 1.0, "byte": 1.0, "kbyte": 1e3, "mbyte": 1e6, "gbyte": 1e9, "tbyte": 1e12,
    "kibyte": 1024.0, "mibyte": 1024.0 ** 2, "gibyte": 1024.0 ** 3,
    "nsecond": 1.0, "usecond": 1e3, "msecond": 1e6, "second": 1e9,
    "ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9,  # the H200's ncu: "ns" (tests/data/ncu_spec_v2.csv)
    "%": 1.0, "register/thread": 1.0, "inst": 1.0, "cycle": 1.0, "ratio": 1.0,
}


@dataclass(frozen=True)
class KernelRow:
    """One profiled kernel launch: its metrics in base units (None where ncu printed n/a)."""

    id: int
    kernel: str
    metrics: dict

    def get(self, name):
        return self.metrics.get(name)


def _number(text: str, unit: str):
    text = text.strip().replace(",", "")
    if text in ("", "n/a", "N/A", "nan"):
        return None
    try:
        value = float(text)
    except ValueError:
        return None
    scale = _UNIT_SCALE.get(unit.strip().lower())
    if scale is None:  # an unknown multiple, e.g. "Kinst": fall back on the SI prefix
        prefix = unit.strip()[:1]
        scale = {"K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}.get(prefix, 1.0)
    return value * scale


def ncu_csv_file(path) -> list[KernelRow]:
    """``parse_ncu_csv`` of a csv file that a scripts/gpu_*.sh driver wrote. A file without
    ncu's header (the profiled run failed) stops the caller with one line naming it and the
    log the driver keeps beside it."""
    try:
        with open(path) as f:
            return parse_ncu_csv(f.read())
    except ValueError:
        raise SystemExit(f"{path}: no ncu csv header (see the .log beside it)") from None


def parse_ncu_csv(text: str) -> list[KernelRow]:
    """Parse ``ncu --csv`` output: the raw page (one column per metric, then a units row unless
    ``--print-units base``) or the details page (one row per metric). ncu's own log lines
    (``==PROF==``, ``==WARNING==``) and the program's output before the header are skipped."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith('"ID"') and "Kernel Name" in line), None)
    if start is None:
        raise ValueError("ncu csv: no header line starting with \"ID\" and naming \"Kernel Name\"")
    body = [line for line in lines[start:] if line.startswith('"')]
    reader = csv.reader(io.StringIO("\n".join(body)))
    header = next(reader)
    rows = list(reader)
    col = {name: i for i, name in enumerate(header)}
    if "Metric Name" in col and "Metric Value" in col:  # details page: long format
        launches: dict[int, KernelRow] = {}
        for r in rows:
            rid = int(r[col["ID"]])
            row = launches.setdefault(rid, KernelRow(rid, r[col["Kernel Name"]], {}))
            unit = r[col["Metric Unit"]] if "Metric Unit" in col else ""
            row.metrics[r[col["Metric Name"]]] = _number(r[col["Metric Value"]], unit)
        return [launches[k] for k in sorted(launches)]
    units = {}
    if rows and rows[0][col["ID"]].strip() == "":  # the units row
        units = {name: rows[0][i] for name, i in col.items()}
        rows = rows[1:]
    metric_cols = [name for name in header if "__" in name]
    out = []
    for r in rows:
        if len(r) < len(header):
            continue
        metrics = {name: _number(r[col[name]], units.get(name, "")) for name in metric_cols}
        out.append(KernelRow(int(r[col["ID"]]), r[col["Kernel Name"]], metrics))
    return out


@dataclass(frozen=True)
class ProfileRow:
    """The spec's table, one kernel launch."""

    variant: str
    kernel: str
    time_ms: float | None
    dram_read_bytes: float | None
    dram_write_bytes: float | None
    l2_bytes: float | None
    bank_conflict_ld_pct: float | None  # conflicts / wavefronts of shared loads
    bank_conflicts_st: float | None
    mio_stall_ratio: float | None
    occupancy_pct: float | None
    registers: float | None
    model_read_bytes: int | None = None
    model_write_bytes: int | None = None


def summarize(variant: str, row: KernelRow, model_read=None, model_write=None) -> ProfileRow:
    g = row.get
    t = g("gpu__time_duration.sum")
    conf, waves = g("l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum"), \
        g("l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum")
    pct = 100.0 * conf / waves if conf is not None and waves else (0.0 if waves == 0 else None)
    return ProfileRow(variant, row.kernel, None if t is None else t / 1e6, g("dram__bytes_read.sum"),
                      g("dram__bytes_write.sum"), g("lts__t_bytes.sum"), pct,
                      g("l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum"),
                      g("smsp__average_warps_issue_stalled_mio_throttle_per_issue_active.ratio"),
                      g("sm__warps_active.avg.pct_of_peak_sustained_active"),
                      g("launch__registers_per_thread"), model_read, model_write)


def _fmt_bytes(n):
    if n is None:
        return "-"
    return f"{n / 1e9:.2f} GB" if n >= 1e9 else f"{n / 1e6:.1f} MB"


def _fmt(x, spec):
    return "-" if x is None else format(x, spec)


def table(rows: list[ProfileRow]) -> str:
    """Markdown table: variant, time, DRAM read/write, modelled read/write, bank conflicts, MIO,
    occupancy, registers."""
    out = ["| variant | kernel | time (ms) | DRAM read | DRAM write | model read | model write | "
           "L2 bytes | smem ld conflicts (% wavefronts) | MIO stall (per issue) | occupancy (%) | registers |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        out.append(f"| {r.variant} | `{r.kernel[:40]}` | {_fmt(r.time_ms, '.3f')} | "
                   f"{_fmt_bytes(r.dram_read_bytes)} | "
                   f"{_fmt_bytes(r.dram_write_bytes)} | {_fmt_bytes(r.model_read_bytes)} | "
                   f"{_fmt_bytes(r.model_write_bytes)} | {_fmt_bytes(r.l2_bytes)} | "
                   f"{_fmt(r.bank_conflict_ld_pct, '.2f')} | {_fmt(r.mio_stall_ratio, '.2f')} | "
                   f"{_fmt(r.occupancy_pct, '.1f')} | {_fmt(r.registers, '.0f')} |")
    return "\n".join(out)


# ---------------------------------------------------------------- running under ncu (GPU only)

def ncu_path() -> str | None:
    return os.environ.get("NCU") or shutil.which("ncu")


def ncu_command(child_args: list[str], metrics=METRICS) -> list[str]:
    return [ncu_path() or "ncu", "--csv", "--page", "raw", "--print-units", "base", "--clock-control", "none",
            "--profile-from-start", "off", "--metrics", ",".join(metrics),
            sys.executable, "-m", "flashtriton.cli", "profile", "--target", *child_args]


def profile_variant(variant: str, batch: int, heads: int, seqlen: int, head_dim: int, dtype: str,
                    pass_: str = "fwd", timeout: float = 240.0, save_csv: str | None = None) -> list[KernelRow]:
    """Run one variant under ncu in a child process and parse its CSV (needs a GPU and ncu).
    ``save_csv``: also write ncu's raw output there (a real capture for tests/data)."""
    if ncu_path() is None:
        raise RuntimeError("profile: ncu not found (put it on PATH or set NCU=/path/to/ncu)")
    args = ["--variants", variant, "--batch", str(batch), "--heads", str(heads), "--seqlen", str(seqlen),
            "--headdim", str(head_dim), "--dtype", dtype, "--pass", pass_]
    out = subprocess.run(ncu_command(args), capture_output=True, text=True, timeout=timeout)
    if save_csv:
        with open(save_csv, "w") as f:
            f.write(out.stdout)
    if out.returncode != 0:
        raise RuntimeError(f"ncu failed ({out.returncode}) for {variant}:\n{(out.stdout + out.stderr)[-3000:]}")
    return parse_ncu_csv(out.stdout)


def _target(args) -> int:
    """Child side: run the variant once inside the profiled window."""
    import torch

    from flashtriton.ladder import VARIANTS
    from flashtriton.ladder.v2_kt import transpose_k

    dtype = getattr(torch, args.dtype)
    shape = (args.batch, args.seqlen, args.heads, args.headdim)
    q, k, v = (torch.randn(shape, device="cuda", dtype=dtype) for _ in range(3))
    name = args.variants
    extra = {"kt": transpose_k(k)} if name == "v2_kt" else {}
    if args.pass_ == "bwd":
        if name != "production":
            raise ValueError(f"variants: only production has a backward, got {name!r}")
        for t in (q, k, v):
            t.requires_grad_(True)
        do = torch.randn(shape, device="cuda", dtype=dtype)
        torch.autograd.grad(VARIANTS[name].forward(q, k, v), (q, k, v), do)  # compile outside the window
        out = VARIANTS[name].forward(q, k, v)
        torch.cuda.synchronize()
        torch.cuda.profiler.start()
        torch.autograd.grad(out, (q, k, v), do)
    else:
        VARIANTS[name].forward(q, k, v, **extra)  # compile outside the window
        torch.cuda.synchronize()
        torch.cuda.profiler.start()
        VARIANTS[name].forward(q, k, v, **extra)
    torch.cuda.synchronize()
    torch.cuda.profiler.stop()
    return 0


def add_cli_arguments(parser) -> None:
    parser.add_argument("--variants", default="v1,v2,v2_kt,v2_pad,production",
                        help="comma-separated ladder variants")
    parser.add_argument("--pass", dest="pass_", default="fwd", choices=["fwd", "bwd"])
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--heads", type=int, default=10)
    parser.add_argument("--seqlen", type=int, default=2048)
    parser.add_argument("--headdim", type=int, default=32)
    parser.add_argument("--dtype", default="float32", choices=["float32", "float16", "bfloat16"])
    parser.add_argument("--gpu", default="h200", help="GPU of the traffic model shown beside the counters")
    parser.add_argument("--from-csv", default=None, help="parse a recorded ncu CSV instead of running ncu")
    parser.add_argument("--json", action="store_true", help="print JSON rows instead of the table")
    parser.add_argument("--target", action="store_true", help="internal: the process ncu profiles")


def _model(variant, args):
    from flashtriton.analysis.traffic import Problem, variant_traffic

    try:
        p = Problem(args.batch * args.heads, args.seqlen, args.seqlen, args.headdim, args.dtype)
        t = variant_traffic(variant, p, args.gpu, args.pass_)
    except ValueError:  # no model for this variant and pass
        return {}
    return {k.kernel: (k.read_bytes, k.write_bytes) for k in t.kernels}


def run_cli(args) -> int:
    if args.target:
        return _target(args)
    names = [n for n in args.variants.split(",") if n]
    rows: list[ProfileRow] = []
    if args.from_csv:
        with open(args.from_csv) as f:
            parsed = parse_ncu_csv(f.read())
        label = names[0] if len(names) == 1 else "?"
        model = _model(label, args) if len(names) == 1 else {}
        rows = [summarize(label, r, *model.get(r.kernel, (None, None))) for r in parsed]
    else:
        for name in names:
            model = _model(name, args)
            kernels = profile_variant(name, args.batch, args.heads, args.seqlen, args.headdim, args.dtype,
                                      args.pass_)
            for r in kernels:
                rows.append(summarize(name, r, *model.get(r.kernel, (None, None))))
    if args.json:
        print(json.dumps([asdict(r) for r in rows], indent=2))
    else:
        print(table(rows))
    return 0
