"""scripts/dtype_sass.py: the shipped Gluon kernels compiled for sm_90a (no GPU) in bf16 and in
fp16, their SASS compared with the element type taken out."""

import os
import subprocess
import sys
from pathlib import Path

from helpers import load_script

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts/dtype_sass.py"
dtype_sass = load_script("dtype_sass")

# lines as cuobjdump writes them for the two types (session 57's d256 forward and d64 causal
# forward), normalized
BF16 = ["HGMMA.64x256x16.F32.BF16 R24, gdesc[UR4], RZ, !UPT",
        "F2FP.BF16.F32.PACK_AB R4, R5, R4",
        "IMAD.MOV.U32 R8, RZ, RZ, 0x3f803f80",
        "LOP3.LUT R4, R4, 0x500, R5, 0xd8, !PT",
        "@!P0 BRA 0x8e20",
        "IMAD.U32 R6, R7, 0x10000, RZ",
        "PRMT R9, R7, 0x7632, R9",
        "EXIT"]
FP16 = ["HGMMA.64x256x16.F32 R24, gdesc[UR4], RZ, !UPT",
        "F2FP.F16.F32.PACK_AB R4, R5, R4",
        "IMAD.MOV.U32 R8, RZ, RZ, 0x3c003c00",
        "LOP3.LUT R4, R4, 0x300, R5, 0xd8, !PT",
        "@!P0 BRA 0x8d20",
        "HADD2.F32 R6, -RZ, R7.H0_H0",
        "EXIT"]


def test_untyped_takes_out_names_constants_and_descriptor_types():
    for a, b in zip(BF16[:4], FP16[:4]):
        assert dtype_sass.untyped(a) == dtype_sass.untyped(b)
    # another constant in the same place is a real difference
    assert dtype_sass.untyped("LOP3.LUT R4, R4, 0x700, R5, 0xd8, !PT") != \
        dtype_sass.untyped(BF16[3])
    assert dtype_sass.untyped("IMAD.MOV.U32 R8, RZ, RZ, 0x3f803f81") != \
        dtype_sass.untyped(FP16[2])


def test_compare_same_but_for_the_type():
    c = dtype_sass.compare(BF16[:5] + ["EXIT"], FP16[:5] + ["EXIT"])
    assert c["same"] and c["lengths"] == (6, 6)
    assert (c["renamed"], c["descriptor"]) == (3, 1)


def test_compare_counts_the_widening_each_type_needs():
    c = dtype_sass.compare(BF16, FP16)
    assert not c["same"] and c["lengths"] == (8, 7)
    assert c["unaligned"] == (2, 1)
    assert dict(c["more_bf16"]) == {"IMAD.U32": 1, "PRMT": 1}
    assert dict(c["more_fp16"]) == {"HADD2.F32": 1}
    # a block that moved cancels out of the counts
    moved = dtype_sass.compare(["A R1", "B R2", "EXIT"], ["B R2", "A R1", "EXIT"])
    assert not moved["same"] and not moved["more_bf16"] and not moved["more_fp16"]


def _run(*args):
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = str(ROOT / "src")
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True,
                          env=env, timeout=900)


def test_the_d256_forward_is_the_same_in_both_types():
    """Real compiles: the shipped d256 forward (no mask) issues the same instructions in bf16
    and fp16 but for the type (session 57); the d64 causal forward widens 16-bit values to
    fp32 with two instructions in bf16 where fp16 takes one (exit 1, counted)."""
    run = _run("--cases", "fwd-d256")
    assert run.returncode == 0, run.stdout + run.stderr[-3000:]
    assert run.stdout.startswith("fwd-d256-0-_attn_fwd_persistent: ")
    assert run.stdout.rstrip().endswith("the rest the same")
    run = _run("--cases", "fwd-d64", "--causal")
    assert run.returncode == 1, run.stdout + run.stderr[-3000:]
    assert "more in bf16: 64 PRMT, 64 IMAD.U32" in run.stdout
    assert "more in fp16: 64 HADD2.F32" in run.stdout


def test_unknown_case_refused():
    run = _run("--cases", "fwd-d32")
    assert run.returncode == 2 and "unknown cases" in run.stderr
