"""Parsing Nsight Compute's CSV (format samples in tests/data; see tests/data/README.md)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from flashtriton.analysis.profile import METRICS, ncu_command, parse_ncu_csv, summarize, table

DATA = os.path.join(os.path.dirname(__file__), "data")


def _read(name):
    with open(os.path.join(DATA, name)) as f:
        return f.read()


@pytest.mark.parametrize("name", ["ncu_raw_base_units.csv", "ncu_details.csv"])
def test_v2_row_in_base_units(name):
    rows = parse_ncu_csv(_read(name))
    assert [r.kernel for r in rows] == ["_ladder_v2_fwd"]
    s = summarize("v2", rows[0])
    assert s.dram_read_bytes == pytest.approx(251.7e6)
    assert s.dram_write_bytes == pytest.approx(76.9e6)
    assert s.time_ms == pytest.approx(4.03)
    assert s.bank_conflict_ld_pct == pytest.approx(0.03)
    assert s.occupancy_pct == pytest.approx(25.0) and s.registers == 106


def test_scaled_units_thousands_separators_and_na():
    rows = parse_ncu_csv(_read("ncu_raw_scaled_units.csv"))
    assert [r.id for r in rows] == [0, 1]
    fill, v1 = rows
    assert fill.kernel.startswith("void at::native::vectorized_elementwise_kernel<4")
    assert fill.get("smsp__average_warps_issue_stalled_mio_throttle_per_issue_active.ratio") is None
    assert v1.get("dram__bytes_read.sum") == pytest.approx(11.23e9)  # "11,230.00" Mbyte
    assert v1.get("gpu__time_duration.sum") == pytest.approx(10.2e6)  # usecond -> ns
    assert v1.get("lts__t_bytes.sum") == pytest.approx(17.05e9)
    s = summarize("v1", v1, model_read=11_240_000_000, model_write=5_700_000_000)
    assert s.bank_conflict_ld_pct == pytest.approx(0.25)
    md = table([s])
    assert "| v1 | `_ladder_v1_fwd` | 10.200 | 11.23 GB | 5.68 GB | 11.24 GB | 5.70 GB |" in md


def test_garbage_is_refused():
    with pytest.raises(ValueError, match="header"):
        parse_ncu_csv("==PROF== nothing was profiled\n")


def test_ncu_command_profiles_only_the_window():
    cmd = ncu_command(["--variants", "v2"])
    assert cmd[cmd.index("--page") + 1] == "raw" and "--csv" in cmd
    assert cmd[cmd.index("--clock-control") + 1] == "none"
    assert cmd[cmd.index("--profile-from-start") + 1] == "off"
    assert cmd[cmd.index("--metrics") + 1].split(",") == list(METRICS)


def test_cli_from_csv_attaches_the_model():
    out = subprocess.run([sys.executable, "-m", "flashtriton.cli", "profile", "--from-csv",
                          os.path.join(DATA, "ncu_raw_base_units.csv"), "--variants", "v2", "--json"],
                         capture_output=True, text=True, check=True)
    (row,) = json.loads(out.stdout)
    assert row["model_read_bytes"] == 3 * 320 * 2048 * 32 * 4  # the spec's problem, H200 model
