"""`flashtriton ladder --report DIR`: run the ladder, the traffic model and (on a GPU) the
Nsight Compute profiles, and write ``report.md``, ``report.json`` and PNG charts to DIR.

Two problems: the spec's (fp32, batch·heads 320, seqlen 2048, headdim 32) and bf16 headdim 128
(batch 4, heads 16, seqlen 4096: 16k tokens, heads·headdim 2048, as in SPEC.md §4). Without a
GPU the kernels run under the Triton interpreter on a tiny problem: correctness and the model
only, no times, no counters.
"""

from __future__ import annotations

import json
import os
import platform
import time
from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class LadderProblem:
    label: str
    batch: int
    heads: int
    seqlen: int
    head_dim: int
    dtype: str

    @property
    def flops(self) -> float:
        """Forward FLOPs, as in the FlashAttention papers: 4·b·h·s²·d."""
        return 4.0 * self.batch * self.heads * self.seqlen ** 2 * self.head_dim


PROBLEMS = {
    "spec": LadderProblem("spec: fp32, B·H 320, seqlen 2048, d 32", 32, 10, 2048, 32, "float32"),
    "bf16": LadderProblem("bf16, B 4, H 16, seqlen 4096, d 128", 4, 16, 4096, 128, "bfloat16"),
}
# Under the interpreter (no GPU): small enough to simulate, still several blocks each way.
CPU_PROBLEMS = {
    "spec": LadderProblem("spec dtype/headdim, tiny (interpreter)", 1, 2, 40, 32, "float32"),
    "bf16": LadderProblem("bf16 d128, tiny (interpreter)", 1, 1, 24, 128, "bfloat16"),
}
FLOOR = {"float32": 2e-5, "float16": 2e-3, "bfloat16": 1.6e-2}  # as tests/helpers.py


def _check(variant, q, k, v, heads_checked=2) -> dict:
    """Error of the variant against float64 on the first batch entry and heads (STYLE.md's rule)."""
    import torch

    from flashtriton.ladder import VARIANTS
    from flashtriton.reference import attention_ref

    out = VARIANTS[variant].forward(q, k, v)
    sl = (slice(0, 1), slice(None), slice(0, heads_checked))
    qs, ks, vs = q[sl], k[sl], v[sl]
    ref, _ = attention_ref(qs, ks, vs, upcast=True)
    low, _ = attention_ref(qs, ks, vs, upcast=False)
    ref = ref.to(torch.float64)
    err = (out[sl].double() - ref).abs().max().item()
    torch_err = (low.double() - ref).abs().max().item()
    bound = 2 * torch_err + FLOOR[str(q.dtype).removeprefix("torch.")] * max(1.0, ref.abs().max().item())
    return {"max_err": err, "torch_lowp_err": torch_err, "bound": bound, "ok": bool(err <= bound)}


def run_problem(key: str, p: LadderProblem, variants, gpu: str, profile: bool, out_dir: str) -> dict:
    import torch

    from flashtriton.analysis.traffic import Problem, variant_traffic
    from flashtriton.ladder import VARIANTS
    from flashtriton.ladder.v2_kt import transpose_k

    on_gpu = torch.cuda.is_available()
    device = "cuda" if on_gpu else "cpu"
    dtype = getattr(torch, p.dtype)
    torch.manual_seed(0)
    shape = (p.batch, p.seqlen, p.heads, p.head_dim)
    q, k, v = (torch.randn(shape, device=device, dtype=dtype) for _ in range(3))
    results = []
    for name in variants:
        var = VARIANTS[name]
        cfg = var.default_config(dtype, p.head_dim)
        row = {"variant": name, "summary": var.summary, "kernel": var.kernel_name,
               "block_m": cfg.block_m, "block_n": cfg.block_n, "num_warps": cfg.num_warps,
               "num_stages": cfg.num_stages, "head_dim_tile": var.head_dim_tile(p.head_dim)}
        try:
            row["check"] = _check(name, q, k, v)
        except Exception as exc:  # a variant that fails is reported, not fatal to the report
            row["error"] = f"{type(exc).__name__}: {exc}"
            results.append(row)
            continue
        t = variant_traffic(name, Problem(p.batch * p.heads, p.seqlen, p.seqlen, p.head_dim, p.dtype), gpu)
        row["model"] = t.as_dict()
        if on_gpu:
            import triton.testing

            extra = {"kt": transpose_k(k)} if name == "v2_kt" else {}
            ms = triton.testing.do_bench(lambda: var.forward(q, k, v, **extra), return_mode="median")
            row["time_ms"] = ms
            row["tflops"] = p.flops / (ms * 1e-3) / 1e12
        if profile:
            from flashtriton.analysis.profile import profile_variant, summarize

            try:
                kernels = profile_variant(name, p.batch, p.heads, p.seqlen, p.head_dim, p.dtype, timeout=90,
                                          save_csv=os.path.join(out_dir, f"ncu_{key}_{name}.csv"))
                main = [r for r in kernels if r.kernel == var.kernel_name]
                row["ncu"] = [asdict(summarize(name, r)) for r in kernels]
                row["ncu_main"] = asdict(summarize(name, main[0], t.read_bytes, t.write_bytes)) if main else None
            except Exception as exc:
                row["ncu_error"] = f"{type(exc).__name__}: {exc}"
        results.append(row)
    return {"key": key, "problem": asdict(p), "results": results}


def _gb(x):
    if x is None:
        return "-"
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if x >= scale:
            return f"{x / scale:.2f} {unit}"
    return f"{x:.0f} B"


def _f(x, spec):
    return "-" if x is None else format(x, spec)


def markdown(report: dict) -> str:
    env = report["environment"]
    lines = ["# flashtriton ladder report", "",
             f"Generated {env['date']} on {env['device']} (torch {env['torch']}, triton {env['triton']}); "
             f"traffic model for GPU `{env['model_gpu']}`. "
             "Model columns: compulsory / requested (no reuse) / DRAM estimate (L2 reuse), see "
             "`flashtriton.analysis.traffic`.", ""]
    for prob in report["problems"]:
        p = prob["problem"]
        lines += [f"## {p['label']}", "",
                  "| variant | blocks | correct (max err / bound) | time (ms) | TFLOP/s | DRAM read (ncu) | "
                  "DRAM write (ncu) | model read | model write | compulsory read | requested read | "
                  "smem ld conflicts (%) | MIO stall | occupancy (%) | registers |",
                  "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for r in prob["results"]:
            if "error" in r:
                lines.append(f"| {r['variant']} | - | FAILED: {r['error'][:80]} |" + " - |" * 12)
                continue
            c, m, n = r["check"], r["model"], r.get("ncu_main") or {}
            lines.append(
                f"| {r['variant']} | {r['block_m']}x{r['block_n']} (d tile {r['head_dim_tile']}) | "
                f"{'ok' if c['ok'] else 'WRONG'} ({c['max_err']:.1e} / {c['bound']:.1e}) | "
                f"{_f(r.get('time_ms'), '.3f')} | {_f(r.get('tflops'), '.1f')} | "
                f"{_gb(n.get('dram_read_bytes'))} | {_gb(n.get('dram_write_bytes'))} | "
                f"{_gb(m['read_bytes'])} | {_gb(m['write_bytes'])} | {_gb(m['compulsory_read_bytes'])} | "
                f"{_gb(m['requested_read_bytes'])} | {_f(n.get('bank_conflict_ld_pct'), '.2f')} | "
                f"{_f(n.get('mio_stall_ratio'), '.2f')} | {_f(n.get('occupancy_pct'), '.1f')} | "
                f"{_f(n.get('registers'), '.0f')} |")
        errs = [f"- {r['variant']}: {r['ncu_error'][:300]}" for r in prob["results"] if "ncu_error" in r]
        if errs:
            lines += ["", "Profiles that failed:", *errs]
        lines += ["", f"![time]({prob['key']}_time.png) ![bytes]({prob['key']}_bytes.png)", ""]
    return "\n".join(lines) + "\n"


def charts(report: dict, out_dir: str) -> list[str]:
    """Time and bytes per variant, one pair of PNGs per problem."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = []
    for prob in report["problems"]:
        rows = [r for r in prob["results"] if "model" in r]
        names = [r["variant"] for r in rows]
        fig, ax = plt.subplots(figsize=(6, 3.5))
        times = [r.get("time_ms") or 0.0 for r in rows]
        ax.bar(names, times, color="tab:blue")
        ax.set_ylabel("time (ms, median)" if any(times) else "time (no GPU: not measured)")
        ax.set_title(prob["problem"]["label"], fontsize=9)
        path = os.path.join(out_dir, f"{prob['key']}_time.png")
        fig.tight_layout()
        fig.savefig(path, dpi=120)
        plt.close(fig)
        written.append(path)

        fig, ax = plt.subplots(figsize=(7, 3.8))
        series = [("compulsory read", lambda r: r["model"]["compulsory_read_bytes"]),
                  ("model DRAM read", lambda r: r["model"]["read_bytes"]),
                  ("requested read", lambda r: r["model"]["requested_read_bytes"]),
                  ("ncu DRAM read", lambda r: (r.get("ncu_main") or {}).get("dram_read_bytes") or 0),
                  ("ncu DRAM write", lambda r: (r.get("ncu_main") or {}).get("dram_write_bytes") or 0)]
        width = 0.16
        for i, (label, get) in enumerate(series):
            xs = [j + (i - 2) * width for j in range(len(rows))]
            ax.bar(xs, [max(get(r), 1) / 1e6 for r in rows], width, label=label)
        ax.set_xticks(range(len(rows)), names)
        ax.set_yscale("log")
        ax.set_ylabel("MB (log)")
        ax.legend(fontsize=7)
        ax.set_title(prob["problem"]["label"], fontsize=9)
        path = os.path.join(out_dir, f"{prob['key']}_bytes.png")
        fig.tight_layout()
        fig.savefig(path, dpi=120)
        plt.close(fig)
        written.append(path)
    return written


def build_report(out_dir: str, problems=("spec", "bf16"), variants=None, gpu="h200", profile=True) -> dict:
    import torch
    import triton

    from flashtriton.analysis.profile import ncu_path
    from flashtriton.ladder import VARIANTS

    os.makedirs(out_dir, exist_ok=True)
    on_gpu = torch.cuda.is_available()
    table = PROBLEMS if on_gpu else CPU_PROBLEMS
    variants = list(variants or VARIANTS)
    profile = profile and on_gpu and ncu_path() is not None
    report = {"environment": {
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "host": platform.node(),
        "device": torch.cuda.get_device_name(0) if on_gpu else "CPU (Triton interpreter)",
        "torch": torch.__version__, "triton": triton.__version__, "model_gpu": gpu, "profiled": profile},
        "problems": []}
    for key in problems:  # written after each problem, so that a run cut short keeps what it measured
        report["problems"].append(run_problem(key, table[key], variants, gpu, profile, out_dir))
        with open(os.path.join(out_dir, "report.json"), "w") as f:
            json.dump(report, f, indent=2)
        charts(report, out_dir)
        with open(os.path.join(out_dir, "report.md"), "w") as f:
            f.write(markdown(report))
    return report


def add_cli_arguments(parser) -> None:
    parser.add_argument("--report", required=True, metavar="DIR",
                        help="directory for report.md, report.json and the PNG charts")
    parser.add_argument("--problems", default="spec,bf16", help="comma-separated: spec, bf16")
    parser.add_argument("--variants", default=None, help="comma-separated ladder variants (default: all)")
    parser.add_argument("--gpu", default="h200", help="GPU for the traffic model (h200, rtx2070)")
    parser.add_argument("--no-profile", action="store_true", help="skip Nsight Compute even on a GPU")


def run_cli(args) -> int:
    variants = args.variants.split(",") if args.variants else None
    report = build_report(args.report, tuple(args.problems.split(",")), variants, args.gpu, not args.no_profile)
    bad = [r["variant"] for p in report["problems"] for r in p["results"]
           if "error" in r or not r["check"]["ok"]]
    print(f"wrote {os.path.join(args.report, 'report.md')}" + (f"; FAILED: {', '.join(bad)}" if bad else ""))
    return 1 if bad else 0
