"""scripts/gpu_branches.sh, run here with a stand-in for a branch's scripts/gpu_ab.sh (the GPU
A/B itself is not what is tested): whatever ran is packed into branches.tgz, both when the
script ends and when a `timeout` around it stops it mid-A/B. The device tool returns no file
nested as deep as branches/BRANCH/ab/, so an unpacked result is a lost one (perf-log session
30)."""

import subprocess
import tarfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = str(ROOT / "scripts/gpu_branches.sh")


def _tree(tmp_path, ab_body):
    """trees/x, a branch copy whose gpu_ab.sh runs ``ab_body``."""
    tree = tmp_path / "trees" / "x"
    (tree / "src").mkdir(parents=True)
    (tree / "scripts").mkdir()
    (tree / "scripts" / "gpu_ab.sh").write_text(ab_body)
    return tmp_path / "trees"


def _run(tmp_path, trees, limit=None):
    out = tmp_path / "out"
    cmd = ["bash", SCRIPT, str(trees), "x|-|--passes bwd"]
    if limit is not None:
        cmd = ["timeout", str(limit), *cmd]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=60,
                         env={"PATH": "/usr/bin:/bin", "AB_MODE": "inproc", "OUT": str(out)})
    with tarfile.open(out / "branches.tgz") as tgz:
        names = set(tgz.getnames())
        steps = tgz.extractfile("steps.txt").read().decode()
    return run, names, steps, out


def test_results_packed_when_the_ab_ends(tmp_path):
    trees = _tree(tmp_path, 'mkdir -p "$OUT"; echo "$@" > "$OUT/args.txt"; echo "row 1"\n')
    run, names, steps, out = _run(tmp_path, trees)
    assert run.returncode == 0, run.stderr
    assert {"branches/x/ab/args.txt", "branches/x/ab-table.txt"} <= names
    assert "== x tests skipped (-)" in steps
    assert not (out / "branches").exists(), "the unpacked folder is removed once packed"


def test_results_packed_when_a_limit_stops_the_script(tmp_path):
    trees = _tree(tmp_path, 'mkdir -p "$OUT"; echo started > "$OUT/partial.txt"; echo "row 1"\n'
                            'sleep 30; echo done > "$OUT/never.txt"\n')
    run, names, steps, _ = _run(tmp_path, trees, limit=2)
    assert run.returncode == 124, (run.returncode, run.stderr)
    assert {"branches/x/ab/partial.txt", "branches/x/ab-table.txt"} <= names
    assert "branches/x/ab/never.txt" not in names
    assert "stopped by a signal" in steps
