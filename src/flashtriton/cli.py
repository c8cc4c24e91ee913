"""`flashtriton <command>`: each command lives in its own module, imported only when it runs,
so that `flashtriton --help` stays fast and `import flashtriton` never pulls in plotting or
profiling code. A command module defines ``add_cli_arguments(parser)`` and ``run_cli(args) -> int``.
"""

from __future__ import annotations

import argparse
import importlib
import sys

# name -> (module, one-line help)
COMMANDS = {
    "demo": ("flashtriton.demo", "check correctness on a few shapes and, on a GPU, time against torch SDPA"),
    "bench": ("flashtriton.bench.harness", "benchmark flashtriton against its peers (TFLOP/s, memory)"),
    "ladder": ("flashtriton.ladder.report", "run the optimization ladder and write a report"),
    "traffic": ("flashtriton.analysis.traffic", "HBM traffic model for a kernel and problem"),
    "profile": ("flashtriton.analysis.profile", "Nsight Compute profile of kernels (GPU)"),
    "stalls": ("flashtriton.analysis.stalls", "where a kernel's warps wait, per partition, from an ncu source-page CSV"),
    "sass": ("flashtriton.analysis.sass", "compile a kernel for sm_90a and report its resources"),
    "budget": ("flashtriton.analysis.budget", "shared-memory and register budget of a block choice"),
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="flashtriton", description="FlashAttention in Triton.")
    sub = parser.add_subparsers(dest="command", metavar="command")
    sub.required = True
    for name, (module, help_text) in COMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        p.set_defaults(_module=module)
        try:
            mod = importlib.import_module(module)
        except ModuleNotFoundError as exc:  # a command whose module is not installed
            if exc.name is None or not module.startswith(exc.name):
                raise
            p.set_defaults(_missing=str(exc))
            continue
        mod.add_cli_arguments(p)
    return parser


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    if getattr(args, "_missing", None):
        print(f"flashtriton {args.command}: not available ({args._missing})", file=sys.stderr)
        return 2
    return int(importlib.import_module(args._module).run_cli(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
