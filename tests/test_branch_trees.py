"""scripts/branch_trees.sh: a branch's code copied out of git into a folder, with its commit,
as the GPU machine's A/B of several branches (scripts/gpu_branches.sh) reads it; an unknown
branch refused."""

import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = str(ROOT / "scripts/branch_trees.sh")


def _git(*args):
    return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True)


pytestmark = pytest.mark.skipif(_git("rev-parse", "HEAD").returncode != 0,
                                reason="needs the repository's git history (a git checkout)")


def test_head_copied_from_git(tmp_path):
    out = subprocess.run(["bash", SCRIPT, str(tmp_path), "HEAD"], capture_output=True,
                         text=True, check=True).stdout
    tree = tmp_path / "HEAD"
    assert out.startswith(f"{tree}: ")
    for path in ("src/flashtriton/kernels/bwd_gluon.py", "tests/helpers.py",
                 "scripts/gpu_ab.sh", "pyproject.toml"):
        committed = _git("show", f"HEAD:{path}").stdout
        assert (tree / path).read_text() == committed, f"{path} differs from HEAD's"
    assert not (tree / "docs").exists(), "only src, tests, scripts and pyproject.toml"
    # the branch's hash, for the bench JSON's meta (scripts/gpu_ab.sh)
    head = _git("rev-parse", "--short", "HEAD").stdout.strip()
    assert (tree / "COMMIT").read_text().strip() == head


def test_unknown_branch_refused(tmp_path):
    run = subprocess.run(["bash", SCRIPT, str(tmp_path), "no-such-branch-xyz"],
                         capture_output=True, text=True)
    assert run.returncode == 2 and "no branch or commit no-such-branch-xyz" in run.stderr
