"""Do the shipped Gluon kernels compile to the same SASS in fp16 as in bf16? Offline (no GPU):
each case's launches are captured in both types and compiled for sm_90a, and the two listings
(addresses dropped, kernel arguments masked, as scripts/sass_diff.py lists them) are aligned
and compared with the types taken out: the opcodes' names (``HGMMA….F32.BF16`` against
``HGMMA….F32``, ``F2FP.BF16.F32.PACK_AB`` against ``F2FP.F16.F32.PACK_AB``), a pair of ones
packed in a register and the element type written into the device-side TMA descriptors.

    python3 scripts/dtype_sass.py [--cases fwd-d128,bwd-d128] [--causal]

Cases: scripts/sass_diff.py's (the persistent Gluon launches of the shipped configs) and
fwd-d256. Per kernel: its length in each type, how many lines differ by the type alone, and
the opcodes of the lines that differ beyond it (branch targets masked, lines aligned by
difflib, moved lines cancelling out). Where there are none the kernel issues the same
instructions in the same order in both types: a difference in time between them is then not
the code's (the speed issue's fp16 target, docs/perf-log.md session 57). Exits 1 if any
kernel differs beyond the type.
"""

from __future__ import annotations

import argparse
import difflib
import os
import re
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from sass_diff import CASES as DIFF_CASES, _launch, normalize  # noqa: E402

CASES = (*DIFF_CASES, "fwd-d256")
_TYPED = ((".F32.BF16", ".F32"), ("F2FP.BF16.", "F2FP.F16."),
          ("0x3f803f80", "0x3c003c00"))  # a pair of ones packed in one register
# a device-side TMA descriptor built in shared memory: its element-type field (bits 7..10 of
# the word under the 0x780 mask) is CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 = 10 (0x500) or
# FLOAT16 = 6 (0x300)
_DESCRIPTOR_TYPE = re.compile(r"^(LOP3\.LUT (R\d+), \2), 0x(?:500|300), (R\d+, 0xd8, !PT)$")
_BRANCH = re.compile(r"BRA 0x[0-9a-f]+")


def untyped(line: str) -> str:
    """``line`` with the element type taken out of its opcode or descriptor constant."""
    for bf16, fp16 in _TYPED:
        line = line.replace(bf16, fp16)
    return _DESCRIPTOR_TYPE.sub(r"\1, <element type>, \3", line)


def listings(case: str, causal: bool, dtype) -> dict[str, list[str]]:
    """Kernel name -> normalized SASS for each Gluon launch of ``case`` in ``dtype``."""
    from flashtriton.analysis.sass import _is_gluon, capture_launches, compile_sm90a, cubin_sass

    fn, shape = _launch(case, causal, dtype)
    out = {}
    for i, launch in enumerate(capture_launches(lambda: fn(shape))):
        if _is_gluon(launch):
            sass = cubin_sass(compile_sm90a(launch).asm["cubin"])
            out[f"{case}-{i}-{launch['name']}"] = normalize(sass)
    return out


def _opcode(line: str) -> str:
    """The opcode of an (untyped) instruction, its guard dropped."""
    return re.sub(r"^@!?U?P\w+\s+", "", untyped(line)).split()[0]


def compare(bf16: list[str], fp16: list[str]) -> dict:
    """The two listings aligned (difflib, branch targets masked, as an added instruction moves
    every later address): lines equal but for the type, and the lines outside the aligned
    blocks, counted and as the opcodes one type has more of than the other (moved lines
    cancel out)."""
    a = [_BRANCH.sub("BRA <target>", untyped(x)) for x in bf16]
    b = [_BRANCH.sub("BRA <target>", untyped(x)) for x in fp16]
    renamed = descriptor = 0
    only_bf16, only_fp16 = Counter(), Counter()
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag == "equal":
            for x, y in zip(bf16[i1:i2], fp16[j1:j2]):
                if x != y and _DESCRIPTOR_TYPE.match(x):
                    descriptor += 1
                elif x != y and untyped(x) == untyped(y):
                    renamed += 1
        else:
            only_bf16.update(_opcode(x) for x in bf16[i1:i2])
            only_fp16.update(_opcode(y) for y in fp16[j1:j2])
    return {"lengths": (len(bf16), len(fp16)), "renamed": renamed, "descriptor": descriptor,
            "unaligned": (sum(only_bf16.values()), sum(only_fp16.values())),
            "more_bf16": only_bf16 - only_fp16, "more_fp16": only_fp16 - only_bf16,
            "same": not only_bf16 and not only_fp16}


def counts(c: Counter) -> str:
    return ", ".join(f"{n} {op}" for op, n in c.most_common()) or "none"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--causal", action="store_true")
    args = ap.parse_args(argv)
    os.environ.pop("TRITON_INTERPRET", None)  # capture the GPU launches, not the interpreter's
    cases = [c for c in args.cases.split(",") if c]
    unknown = sorted(set(cases) - set(CASES))
    if unknown:
        ap.error(f"unknown cases {unknown}; choose from {', '.join(CASES)}")
    import torch

    ok = True
    for case in cases:
        bf16 = listings(case, args.causal, torch.bfloat16)
        fp16 = listings(case, args.causal, torch.float16)
        for name in sorted(bf16):
            if name not in fp16:
                print(f"{name}: no fp16 launch")
                ok = False
                continue
            c = compare(bf16[name], fp16[name])
            ok &= c["same"]
            n_a, n_b = c["lengths"]
            print(f"{name}: {n_a} / {n_b} instructions (bf16 / fp16); "
                  f"{c['renamed']} differ by the type's name or constant, {c['descriptor']} by "
                  f"a descriptor's element type; "
                  + ("the rest the same" if c["same"] else
                     f"{c['unaligned'][0]} / {c['unaligned'][1]} lines outside the aligned "
                     f"blocks:\n    more in bf16: {counts(c['more_bf16'])}"
                     f"\n    more in fp16: {counts(c['more_fp16'])}"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
