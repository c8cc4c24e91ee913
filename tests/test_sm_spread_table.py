"""scripts/sm_spread_table.py on csv files Nsight Compute wrote on the H200: session 49's
per-metric rows of the d256 backward's two kernels (with the driver's step line after them)
and session 48's raw page (one row per kernel, a units row first)."""

from pathlib import Path

import pytest

from helpers import load_script, stub_tool_env

ROOT = Path(__file__).resolve().parents[1]
DETAILS = ROOT / "bench/results/2026-12-03-s49-bwd-d256-s8192-causal-sm-spread.csv"
RAW = ROOT / "bench/results/2026-12-03-s48-ncu-mask-cost-d64-16k-causal-raw.csv"


@pytest.fixture(scope="module")
def table():
    return load_script("sm_spread_table")


def test_per_metric_rows(table):
    dkdv, dq = table.spread_rows(DETAILS)
    assert dkdv["kernel"] == "_attn_bwd_dkdv_hs" and dq["kernel"] == "_attn_bwd_dq_hs"
    assert (dkdv["min"], dkdv["avg"], dkdv["max"], dkdv["elapsed"]) == (
        3374147.0, 3393034.5, 3416924.0, 3427145.0)
    assert dkdv["idle"] == pytest.approx((3427145 - 3393034.5) / 3427145)
    assert dkdv["tail"] == pytest.approx((3416924 - 3393034.5) / 3427145)
    assert dq["spread"] == pytest.approx((2501666 - 2472055) / dq["avg"])


def test_raw_page(table):
    (fwd,) = table.spread_rows(RAW)
    assert fwd["kernel"] == "_attn_fwd_persistent"
    assert fwd["elapsed"] == 3387878.0 and fwd["min"] == 3327450.0
    assert 0 < fwd["tail"] < fwd["idle"] < 0.02


def test_no_csv(table, tmp_path):
    log = tmp_path / "sm-spread-x.csv"
    log.write_text("==PROF== Connected\n==ERROR== failed\n")
    with pytest.raises(SystemExit, match="no ncu csv header"):
        table.spread_rows(log)


def test_main_prints_a_row_per_kernel(table, capsys, monkeypatch):
    monkeypatch.setattr("sys.argv", ["sm_spread_table.py", str(DETAILS)])
    table.main()
    out = capsys.readouterr().out.splitlines()
    assert out[0].split()[:2] == ["run", "kernel"] and len(out) == 3
    assert "_attn_bwd_dq_hs" in out[2] and out[1].endswith("1.3%")


def test_driver_with_a_stub_ncu(tmp_path):
    """scripts/gpu_sm_spread.sh with an ``ncu`` on PATH that records its arguments and prints
    session 49's csv: one ncu run per length and mask, with the four metrics at the base
    clock on profile_pass.py's call, and the table over their csv files."""
    import subprocess

    calls = tmp_path / "calls.txt"
    out = tmp_path / "out"
    env = stub_tool_env(tmp_path, "ncu", f'echo "$*" >> {calls}\ngrep -v "^==" {DETAILS}',
                        OUT=str(out))
    run = subprocess.run(["bash", str(ROOT / "scripts/gpu_sm_spread.sh"), "bwd", "256", "4096",
                          "8192"], capture_output=True, text=True, env=env, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    args = calls.read_text().splitlines()
    assert len(args) == 4 and all("--clock-control base" in a and "regex:_attn_bwd" in a
                                  and "--pass bwd --headdim 256" in a for a in args)
    assert [a.endswith("--causal") for a in args] == [False, True, False, True]
    assert "--seqlen 4096" in args[0] and "--seqlen 8192" in args[3]
    table = (out / "sm-spread-bwd-d256.txt").read_text().splitlines()
    assert len(table) == 1 + 4 * 2, table
    assert table[1].split()[:2] == ["bwd-d256-s4096-full", "_attn_bwd_dkdv_hs"]
    assert table[-1].split()[:2] == ["bwd-d256-s8192-causal", "_attn_bwd_dq_hs"]
