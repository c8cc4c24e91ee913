"""The budget advisor: footprints, limits and the spec's rule of thumb."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from flashtriton.analysis.budget import budget, smem_bytes, spec_rule
from flashtriton.analysis.gpus import GPUS, get_gpu


def test_shared_memory_counts_q_once_and_kv_per_stage():
    # bf16 d128: Q 128x128x2 = 32 KB; each stage K and V 64x128x2 = 16 KB each
    assert smem_bytes(128, 64, 128, 128, "bfloat16", 2) == 32768 + 2 * 32768


def test_h200_limit_flags_what_triton_refused():
    """SPEC.md §4: BLOCK_N 128 at 4 warps and 3+ stages runs out of shared memory (d128 bf16).
    Our lower bound must be within a few KB of the limit there and over it at 4 stages."""
    b3 = budget("h200", 128, 128, 128, "bfloat16", stages=3)
    assert b3.smem_limit - b3.smem_bytes < 4096
    b4 = budget("h200", 128, 128, 128, "bfloat16", stages=4)
    assert not b4.smem_ok and b4.programs_per_sm == 0
    ok = budget("h200", 128, 64, 128, "bfloat16", stages=2)  # the tuned config fits
    assert ok.smem_ok and ok.programs_per_sm >= 1 and not ok.spills_expected


def test_spills_predicted_for_huge_tiles():
    b = budget("h200", 256, 128, 256, "bfloat16", stages=1, warps=4)
    assert b.spills_expected and b.regs_per_thread > 255


def test_spec_rule_fixed_point():
    # M = 232448 / 2 elements, D = 128: sqrt(4*128^2 + M) - 256 = 170.3 -> 128; Br = min(128, 128)
    assert spec_rule(get_gpu("h200"), 128, "bfloat16") == (128, 128)
    # the spec's GPU, fp32, D = 32: M = 16384 -> sqrt(4096 + 16384) - 64 = 79.1 -> 64; Br = 32
    assert spec_rule(get_gpu("rtx2070"), 32, "float32") == (64, 32)


def test_every_gpu_has_provenance():
    for g in GPUS.values():
        assert len(g.source) > 40 and g.sms > 0 and g.l2_bytes > 0
    with pytest.raises(ValueError, match="known"):
        get_gpu("mi300")


def test_cli_json():
    out = subprocess.run([sys.executable, "-m", "flashtriton.cli", "budget", "--gpu", "rtx2070", "--block-m", "32",
                          "--block-n", "32", "--headdim", "32", "--dtype", "float32", "--json"],
                         capture_output=True, text=True, check=True)
    d = json.loads(out.stdout)
    assert d["smem_bytes"] == 4 * (32 * 32 + 2 * 32 * 64) and d["spec_bc"] == 64 and d["spec_br"] == 32


def test_python_m_flashtriton_runs_the_same_commands():
    """`python -m flashtriton <command>` (no `__main__` module made it fail, session 20) gives
    what the `flashtriton` script's entry point gives; a bad command exits 2 with usage."""
    args = ["budget", "--gpu", "h200", "--block-m", "64", "--block-n", "96", "--headdim", "72",
            "--dtype", "bfloat16", "--json"]
    by_module = subprocess.run([sys.executable, "-m", "flashtriton", *args],
                               capture_output=True, text=True, check=True)
    by_cli = subprocess.run([sys.executable, "-m", "flashtriton.cli", *args],
                            capture_output=True, text=True, check=True)
    assert json.loads(by_module.stdout) == json.loads(by_cli.stdout)
    bad = subprocess.run([sys.executable, "-m", "flashtriton", "no-such-command"],
                         capture_output=True, text=True)
    assert bad.returncode == 2 and "invalid choice" in bad.stderr
