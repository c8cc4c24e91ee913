"""Do two trees' Gluon kernels compile to the same SASS? Offline (no GPU): each tree's shipped
launches are captured and compiled for sm_90a in a child process with that tree's package on
PYTHONPATH, their SASS listed without addresses and with the constant bank's offsets masked (a
kernel argument added ahead of others moves every later one), then compared line by line.

    python3 scripts/sass_diff.py OLD_SRC [--new NEW_SRC] [--cases fwd-d64,bwd-d128] [--causal]

OLD_SRC / NEW_SRC: folders holding a ``flashtriton`` package (a tree's src/; NEW_SRC defaults
to this tree's, e.g. ``scripts/branch_trees.sh trees main`` makes ``trees/main/src``). Cases
(default: all): the persistent Gluon launches of the shipped configs, fwd-d64 (two consumers),
fwd-d64-c3 (three), fwd-d128, fwd-d256 (below 16k keys; O through Q's buffers), fwd-d128-ws
and fwd-d256-ws (the one-program-per-tile forward, d256's from 16k keys), bwd-d64, bwd-d128,
bwd-d256 (its two kernels); ``--causal`` takes the causal configs instead.
Prints one line per compiled kernel (``same`` or how many lines differ); exits 1 if any
differs. Used in session 37 to show that a launch without a greedy tile table compiles as it
did before the tables (docs/perf-log.md).
"""

from __future__ import annotations

import argparse
import difflib
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CASES = ("fwd-d64", "fwd-d64-c3", "fwd-d128", "fwd-d256", "fwd-d128-ws", "fwd-d256-ws", "bwd-d64",
         "bwd-d128", "bwd-d256")
_INSTRUCTION = re.compile(r"\s*/\*[0-9a-f]{4,}\*/\s*(.*?)\s*;")
_CONSTANT = re.compile(r"c\[0x0\]\[0x[0-9a-f]+\]")


def normalize(sass: str) -> list[str]:
    """cuobjdump -sass text -> its instructions, one a line, without addresses or encodings,
    every constant-bank-0 operand (the kernel's arguments) as ``c[PARAM]``."""
    out = []
    for line in sass.splitlines():
        m = _INSTRUCTION.match(line)
        if m:
            out.append(_CONSTANT.sub("c[PARAM]", m.group(1)))
    return out


def _launch(case: str, causal: bool, dtype=None):
    """(registry launcher, Shape) of ``case`` in the tree on sys.path, in ``dtype`` (default
    bfloat16)."""
    import torch

    from flashtriton.analysis.sass import Shape, _gluon_bwd, _gluon_fwd
    from flashtriton.configs import KernelConfig

    d = int(case.split("-d")[1].split("-")[0])
    config = None
    if case == "fwd-d64-c3":
        config = KernelConfig(192, 128, 4, 2, gluon=True, pingpong=True, persistent=True)
    shape = Shape(dtype=dtype or torch.bfloat16, head_dim=d, causal=causal, config=config)
    if case == "bwd-d256":  # the shipped two kernels, dK/dV then dQ
        from flashtriton.analysis.sass import _gluon_bwd_d256

        dkdv, dq = _gluon_bwd_d256("dkdv"), _gluon_bwd_d256("dq")
        return (lambda s: (dkdv(s), dq(s))), shape
    if case.startswith("fwd"):
        return _gluon_fwd(not case.endswith("-ws")), shape
    return _gluon_bwd, shape


def dump(out: Path, cases: list[str], causal: bool) -> None:
    """Child mode: compile each case's Gluon launches, one normalized listing per kernel.
    (Compiled here, not by ``analysis.sass.compile_sm90a``: the child imports the other
    tree's package, which may be older than that helper.)"""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.experimental.gluon._runtime import GluonASTSource

    from flashtriton.analysis.sass import capture_launches, tool

    out.mkdir(parents=True, exist_ok=True)
    for case in cases:
        fn, shape = _launch(case, causal)
        for i, launch in enumerate(capture_launches(lambda: fn(shape))):
            if not type(launch["fn"]).__name__.startswith("Gluon"):
                continue  # the tl helper kernels beside the Gluon ones
            src = GluonASTSource(launch["fn"], launch["signature"], launch["constants"],
                                 launch["attrs"])
            compiled = triton.compile(src, target=GPUTarget("cuda", 90, 32),
                                      options=launch["options"])
            with tempfile.TemporaryDirectory() as d:
                cubin = Path(d) / "k.cubin"
                cubin.write_bytes(compiled.asm["cubin"])
                sass = subprocess.run([tool("cuobjdump"), "-sass", str(cubin)], check=True,
                                      capture_output=True, text=True).stdout
            (out / f"{case}-{i}-{launch['name']}.sass").write_text("\n".join(normalize(sass)))


def _dump_tree(src: Path, out: Path, cases: list[str], causal: bool) -> None:
    env = {**os.environ, "PYTHONPATH": str(src)}
    env.pop("TRITON_INTERPRET", None)
    args = [sys.executable, __file__, "--dump", str(out), "--cases", ",".join(cases)]
    run = subprocess.run(args + (["--causal"] if causal else []), env=env, capture_output=True,
                         text=True)
    if run.returncode != 0:
        raise SystemExit(f"sass_diff: compiling {src} failed:\n{run.stderr[-3000:]}")


def compare(old: Path, new: Path) -> list[tuple[str, int]]:
    """(listing name, differing lines: 0 same, -1 missing on one side) over both folders."""
    rows = []
    for name in sorted({p.name for p in old.iterdir()} | {p.name for p in new.iterdir()}):
        a, b = old / name, new / name
        if not (a.exists() and b.exists()):
            rows.append((name, -1))
            continue
        diff = difflib.unified_diff(a.read_text().splitlines(), b.read_text().splitlines(),
                                    n=0, lineterm="")
        rows.append((name, sum(1 for line in diff if line[:1] in "+-"
                               and not line.startswith(("+++", "---")))))
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("old", nargs="?", type=Path, help="the other tree's src/ folder")
    ap.add_argument("--new", type=Path, default=ROOT / "src")
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--causal", action="store_true")
    ap.add_argument("--dump", type=Path, help=argparse.SUPPRESS)  # the child's mode
    args = ap.parse_args(argv)
    cases = [c for c in args.cases.split(",") if c]
    unknown = sorted(set(cases) - set(CASES))
    if unknown:
        ap.error(f"unknown cases {unknown}; choose from {', '.join(CASES)}")
    if args.dump:
        dump(args.dump, cases, args.causal)
        return 0
    if args.old is None:
        ap.error("give the other tree's src/ folder")
    for src in (args.old, args.new):
        if not (src / "flashtriton" / "__init__.py").is_file():
            ap.error(f"{src}: no flashtriton package there")
    with tempfile.TemporaryDirectory() as d:
        old_out, new_out = Path(d) / "old", Path(d) / "new"
        _dump_tree(args.old.resolve(), old_out, cases, args.causal)
        _dump_tree(args.new.resolve(), new_out, cases, args.causal)
        rows = compare(old_out, new_out)
    for name, n in rows:
        print(f"{name}: " + ("same" if n == 0 else "missing on one side" if n < 0
                             else f"{n} lines differ"))
    return 0 if rows and all(n == 0 for _, n in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
