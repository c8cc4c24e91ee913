"""scripts/cycles_ab_table.py and its driver scripts/gpu_cycles_ab.sh, on a csv file Nsight
Compute wrote on the H200 (session 49's per-metric rows of the d256 backward's two kernels)
and copies of it with values changed."""

import os
import subprocess
from pathlib import Path

import pytest

from helpers import load_script, stub_tool_env

ROOT = Path(__file__).resolve().parents[1]
DETAILS = ROOT / "bench/results/2026-12-03-s49-bwd-d256-s8192-causal-sm-spread.csv"


@pytest.fixture(scope="module")
def table():
    return load_script("cycles_ab_table")


def _changed(tmp_path, old: str, new: str, name: str = "new.csv") -> Path:
    text = DETAILS.read_text()
    assert text.count(old) == 1
    path = tmp_path / name
    path.write_text(text.replace(old, new))
    return path


def test_same_file_no_change(table):
    rows = table.compare(DETAILS, DETAILS)
    # two kernels, four metrics each
    assert [r["kernel"] for r in rows] == ["_attn_bwd_dkdv_hs"] * 4 + ["_attn_bwd_dq_hs"] * 4
    assert all(r["change"] == 0 and r["old"] == r["new"] for r in rows)


def test_change_per_metric(table, tmp_path):
    # the dK/dV kernel's mean active cycles 3,393,034.5 -> 3,223,382.775 (-5%)
    new = _changed(tmp_path, '"3,393,034.50"', '"3,223,382.775"')
    rows = table.compare(DETAILS, new)
    (row,) = [r for r in rows if r["kernel"] == "_attn_bwd_dkdv_hs"
              and r["metric"] == "sm__cycles_active.avg"]
    assert row["old"] == 3393034.5 and row["new"] == pytest.approx(3223382.775)
    assert row["change"] == pytest.approx((3223382.775 - 3393034.5) / 3393034.5)
    assert sum(r["change"] != 0 for r in rows) == 1


def test_different_kernels_refused(table, tmp_path):
    text = DETAILS.read_text().replace("_attn_bwd_dq_hs", "_attn_bwd_other")
    other = tmp_path / "other.csv"
    other.write_text(text)
    with pytest.raises(SystemExit, match="launch different kernels"):
        table.compare(DETAILS, other)


def test_no_csv(table, tmp_path):
    log = tmp_path / "cycles-old-x.csv"
    log.write_text("==PROF== Connected\n==ERROR== failed\n")
    with pytest.raises(SystemExit, match="no ncu csv header"):
        table.compare(log, DETAILS)


def test_main_pairs(table, capsys, monkeypatch, tmp_path):
    new = _changed(tmp_path, '"3,393,034.50"', '"3,223,382.775"', "cycles-new-x.csv")
    monkeypatch.setattr("sys.argv", ["cycles_ab_table.py", str(DETAILS), str(new)])
    table.main()
    out = capsys.readouterr().out.splitlines()
    assert out[0].split()[:3] == ["run", "kernel", "metric"] and len(out) == 9
    assert out[1].split()[2] == "sm__cycles_active.avg" and out[1].endswith("-5.00%")
    assert out[2].endswith("+0.00%")
    monkeypatch.setattr("sys.argv", ["cycles_ab_table.py", str(DETAILS)])
    with pytest.raises(SystemExit):  # an odd count: not in pairs
        table.main()


def test_driver_with_a_stub_ncu(tmp_path):
    """scripts/gpu_cycles_ab.sh with an ``ncu`` on PATH that records its arguments and
    PYTHONPATH and prints session 49's csv: per length and mask one run of the old tree's src
    and one of this tree's, at the base clock on profile_pass.py's call, and the table."""
    calls = tmp_path / "calls.txt"
    out = tmp_path / "out"
    env = stub_tool_env(tmp_path, "ncu", f'echo "$PYTHONPATH | $*" >> {calls}\ncat {DETAILS}',
                        OUT=str(out), MASKS="causal")
    old = tmp_path / "old"
    (old / "src" / "flashtriton").mkdir(parents=True)
    run = subprocess.run(["bash", str(ROOT / "scripts/gpu_cycles_ab.sh"), str(old), "bwd",
                          "256", "4096", "8192"], capture_output=True, text=True, env=env,
                         timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    lines = calls.read_text().splitlines()
    assert len(lines) == 4
    paths = [x.split(" | ")[0] for x in lines]
    assert paths[0] == paths[2] == str(old / "src") and paths[1] == paths[3] == str(ROOT / "src")
    args = [x.split(" | ")[1] for x in lines]
    assert all("--clock-control base" in a and "regex:_attn_bwd" in a and a.endswith("--causal")
               and "--pass bwd --headdim 256" in a for a in args)
    assert "--seqlen 4096" in args[0] and "--seqlen 8192" in args[3]
    table = (out / "cycles-ab-bwd-d256.txt").read_text().splitlines()
    assert len(table) == 1 + 2 * 8 and table[1].startswith("bwd-d256-s4096-causal")
    steps = (out / "steps.txt").read_text()
    assert "cycles-old-bwd-d256-s4096-causal rc=0" in steps


def test_driver_at_the_held_clock(tmp_path):
    """NCU_CLOCK=none: ncu profiles at the clock the GPU holds, not the base clock."""
    calls = tmp_path / "calls.txt"
    env = stub_tool_env(tmp_path, "ncu", f'echo "$*" >> {calls}\ncat {DETAILS}',
                        OUT=str(tmp_path / "out"), MASKS="full", NCU_CLOCK="none")
    old = tmp_path / "old"
    (old / "src" / "flashtriton").mkdir(parents=True)
    run = subprocess.run(["bash", str(ROOT / "scripts/gpu_cycles_ab.sh"), str(old), "bwd",
                          "256", "8192"], capture_output=True, text=True, env=env, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    args = calls.read_text().splitlines()
    assert len(args) == 2 and all("--clock-control none" in a and "--causal" not in a
                                  for a in args)


def test_driver_refuses_a_tree_without_src(tmp_path):
    run = subprocess.run(["bash", str(ROOT / "scripts/gpu_cycles_ab.sh"), str(tmp_path), "bwd",
                          "256", "4096"], capture_output=True, text=True,
                         env={**os.environ, "OUT": str(tmp_path / "out")}, timeout=60)
    assert run.returncode == 2 and "no " in run.stderr
