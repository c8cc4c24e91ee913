"""scripts/sass_diff.py: two trees' Gluon kernels compiled for sm_90a (no GPU) and their SASS
compared without addresses and with the kernel arguments' constant-bank offsets masked."""

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts/sass_diff.py"
_spec = importlib.util.spec_from_file_location("sass_diff", SCRIPT)
sass_diff = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(sass_diff)

LISTING = """
        code for sm_90a
                Function : _attn_fwd_persistent
        /*0000*/                   LDC R1, c[0x0][0x28] ;                 /* 0x00000a00ff017b82 */
        /*0010*/                   S2R R0, SR_CTAID.X ;                   /* 0x0000000000007919 */
        /*0020*/                   IMAD R3, R0, c[0x0][0x1a4], RZ ;       /* 0x0000690000037a24 */
        /*0030*/                   EXIT ;                                 /* 0x000000000000794d */
"""


def test_normalize_drops_addresses_and_masks_argument_offsets():
    assert sass_diff.normalize(LISTING) == ["LDC R1, c[PARAM]", "S2R R0, SR_CTAID.X",
                                            "IMAD R3, R0, c[PARAM], RZ", "EXIT"]
    moved = LISTING.replace("c[0x0][0x1a4]", "c[0x0][0x1ac]")
    assert sass_diff.normalize(moved) == sass_diff.normalize(LISTING)
    other = LISTING.replace("IMAD R3, R0", "IMAD R4, R0")
    assert sass_diff.normalize(other) != sass_diff.normalize(LISTING)


def test_compare_counts_differing_and_missing_listings(tmp_path):
    old, new = tmp_path / "old", tmp_path / "new"
    old.mkdir()
    new.mkdir()
    (old / "a.sass").write_text("X\nY\nZ")
    (new / "a.sass").write_text("X\nY\nZ")
    (old / "b.sass").write_text("X\nY\nZ")
    (new / "b.sass").write_text("X\nQ\nZ\nW")
    (old / "c.sass").write_text("X")
    assert sass_diff.compare(old, new) == [("a.sass", 0), ("b.sass", 3), ("c.sass", -1)]


def _run(*args):
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True,
                          env=env, timeout=900)


def test_a_tree_against_itself_is_the_same_and_an_edit_is_seen(tmp_path):
    """Real compiles of the d128 backward: this tree against a copy of itself (same), then
    against a copy whose kernel scales its scores once more (different, exit 1)."""
    copy = tmp_path / "src"
    shutil.copytree(ROOT / "src" / "flashtriton", copy / "flashtriton",
                    ignore=shutil.ignore_patterns("__pycache__"))
    run = _run(str(copy), "--cases", "bwd-d128")
    assert run.returncode == 0, run.stdout + run.stderr[-3000:]
    assert run.stdout.strip() == "bwd-d128-0-_attn_bwd_ws.sass: same"
    kernel = copy / "flashtriton" / "kernels" / "bwd_gluon.py"
    text = kernel.read_text()
    needle = "pt = gl.exp2(st * qk_scale - "
    if needle not in text:
        pytest.fail(f"the edit's anchor {needle!r} is gone from bwd_gluon.py; choose another")
    kernel.write_text(text.replace(needle, "pt = gl.exp2(st * (qk_scale * 1.0001) - ", 1))
    run = _run(str(copy), "--cases", "bwd-d128")
    assert run.returncode == 1, run.stdout + run.stderr[-3000:]
    assert "lines differ" in run.stdout


def test_refuses_a_folder_without_the_package_and_unknown_cases(tmp_path):
    run = _run(str(tmp_path))
    assert run.returncode == 2 and "no flashtriton package" in run.stderr
    run = _run(str(ROOT / "src"), "--cases", "fwd-d32")
    assert run.returncode == 2 and "unknown cases" in run.stderr
