"""Parsing Nsight Compute's CSV: real H200 captures and two synthetic format samples (tests/data/README.md).

The expected values are the ones `bench/results/2026-11-29-ladder/report.md` prints for the same
runs, to the digits printed there; ncu's kernel times are report.json's ``ncu_main.time_ms``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from flashtriton.analysis.profile import METRICS, _number, ncu_command, parse_ncu_csv, summarize, table

DATA = os.path.join(os.path.dirname(__file__), "data")


def _read(name):
    with open(os.path.join(DATA, name)) as f:
        return f.read()


def _printed(nbytes):
    """Bytes as report.md prints them (flashtriton.ladder.report._gb)."""
    return f"{nbytes / 1e9:.2f} GB" if nbytes >= 1e9 else f"{nbytes / 1e6:.2f} MB"


# (file, kernel, index of its launch, then report.md's row: DRAM read, DRAM write, smem ld
# conflicts %, MIO stall, occupancy %, registers; then report.json's ncu time in ms)
REAL = [
    pytest.param("ncu_spec_v2.csv", "_ladder_v2_fwd", 0,
                 "252.04 MB", "76.25 MB", "63.64", "6.36", "43.4", 72, 15.626144, id="spec-v2"),
    pytest.param("ncu_spec_v1.csv", "_ladder_v1_fwd", 3,
                 "11.24 GB", "5.69 GB", "63.46", "0.06", "15.6", 85, 23.581664, id="spec-v1"),
    pytest.param("ncu_bf16_production.csv", "_attn_fwd", 0,
                 "208.22 MB", "62.33 MB", "0.89", "0.40", "12.2", 255, 1.070656, id="bf16-production"),
]


@pytest.mark.parametrize("name, kernel, index, read, write, conflicts, mio, occupancy, registers, ncu_ms", REAL)
def test_real_capture_matches_the_report(name, kernel, index, read, write, conflicts, mio, occupancy,
                                         registers, ncu_ms):
    rows = parse_ncu_csv(_read(name))
    assert [r.id for r in rows] == list(range(len(rows)))
    assert rows[index].kernel == kernel
    s = summarize("x", rows[index])
    got = (_printed(s.dram_read_bytes), _printed(s.dram_write_bytes), f"{s.bank_conflict_ld_pct:.2f}",
           f"{s.mio_stall_ratio:.2f}", f"{s.occupancy_pct:.1f}", s.registers)
    assert got == (read, write, conflicts, mio, occupancy, registers), f"{name}: parsed {got}"
    assert s.time_ms == pytest.approx(ncu_ms, rel=1e-9)  # "ns" unit, thousands separators


def test_real_v1_capture_separates_the_fill_kernels():
    rows = parse_ncu_csv(_read("ncu_spec_v1.csv"))
    assert [r.kernel for r in rows[:3]] == [rows[0].kernel] * 3
    assert "FillFunctor<float>" in rows[0].kernel  # v1's launcher fills O, l, m before the kernel
    assert rows[3].kernel == "_ladder_v1_fwd"
    # raw counters as ncu wrote them (base units: bytes, ns)
    v1 = rows[3]
    assert v1.get("dram__bytes_read.sum") == 11_241_065_472
    assert v1.get("dram__bytes_write.sum") == 5_686_185_728
    assert v1.get("gpu__time_duration.sum") == 23_581_664


def test_units():
    assert _number("15,626,144", "ns") == 15_626_144
    assert _number("1.5", "ms") == 1.5e6 and _number("1.5", "msecond") == 1.5e6
    assert _number("2", "us") == 2e3 and _number("11,230.00", "Mbyte") == 11.23e9
    assert _number("n/a", "byte") is None


def test_details_page_format_sample():
    """Synthetic: the details page, one row per metric (tests/data/README.md)."""
    rows = parse_ncu_csv(_read("ncu_details.csv"))
    assert [r.kernel for r in rows] == ["_ladder_v2_fwd"]
    s = summarize("v2", rows[0])
    assert s.dram_read_bytes == pytest.approx(251.7e6)
    assert s.dram_write_bytes == pytest.approx(76.9e6)
    assert s.time_ms == pytest.approx(4.03)
    assert s.bank_conflict_ld_pct == pytest.approx(0.03)
    assert s.occupancy_pct == pytest.approx(25.0) and s.registers == 106


def test_scaled_units_thousands_separators_and_na():
    """Synthetic: ncu's auto-scaled units and n/a (tests/data/README.md)."""
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
    assert cmd[cmd.index("--print-units") + 1] == "base"
    assert cmd[cmd.index("--clock-control") + 1] == "none"
    assert cmd[cmd.index("--profile-from-start") + 1] == "off"
    assert cmd[cmd.index("--metrics") + 1].split(",") == list(METRICS)


def _from_csv(name, variant):
    # TRITON_INTERPRET=0: the capture is a GPU run, and the model takes the variant's launch blocks,
    # which under the interpreter are its tiny CPU blocks (16x16), not the GPU's (32x32 here).
    out = subprocess.run([sys.executable, "-m", "flashtriton.cli", "profile", "--from-csv",
                          os.path.join(DATA, name), "--variants", variant, "--json"],
                         capture_output=True, text=True, env=dict(os.environ, TRITON_INTERPRET="0"))
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout)


def test_cli_from_csv_attaches_the_model():
    """The CLI's defaults are the spec's problem; the model columns are report.md's for v1 and v2."""
    (v2,) = _from_csv("ncu_spec_v2.csv", "v2")
    assert v2["model_read_bytes"] == 3 * 320 * 2048 * 32 * 4  # Q + K + V: compulsory
    assert (_printed(v2["model_read_bytes"]), _printed(v2["model_write_bytes"])) == ("251.66 MB", "83.89 MB")
    rows = _from_csv("ncu_spec_v1.csv", "v1")
    v1 = rows[3]
    assert v1["kernel"] == "_ladder_v1_fwd" and all(r["model_read_bytes"] is None for r in rows[:3])
    # v1's DRAM bytes: measured 11.24 GB / 5.69 GB, modelled 11.24 GB / 5.70 GB (report.md)
    assert [_printed(v1[k]) for k in ("dram_read_bytes", "dram_write_bytes", "model_read_bytes",
                                      "model_write_bytes")] == ["11.24 GB", "5.69 GB", "11.24 GB", "5.70 GB"]
