"""scripts/ncu_details_table.py on a details page Nsight Compute wrote on the H200 (session 13's
d128 1k backward) and on a page of two launches: each launch's rows, the tensor pipe's share
from ncu's note, and the table's columns."""

from pathlib import Path

import pytest

from helpers import load_script

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "bench/results/2026-11-30-s13-ncu-bwd-d128-1k-details.txt"


@pytest.fixture(scope="module")
def details():
    return load_script("ncu_details_table")


def test_recorded_page(details):
    (launch,) = details.read_details(PAGE.read_text())
    assert launch["kernel"] == "_attn_bwd_ws" and launch["grid"] == (132, 1, 1)
    m = launch["metrics"]
    assert m["Duration"] == ("us", 708.83)
    assert m["SM Frequency"] == ("Ghz", 1.77)
    assert m["Elapsed Cycles"] == ("cycle", 1272738.0)
    assert m["Registers Per Thread"] == ("register/thread", 168.0)
    assert m["Tensor pipe"] == ("%", 51.3)


TWO = """[1] python3@host
  delta_kernel (64, 16, 1)x(128, 1, 1), Context 1, Stream 7, Device 0, CC 9.0
    Section: GPU Speed Of Light Throughput
    Duration                         us        12.50
    SM Frequency                    Ghz         1.98
  main_kernel (132, 1, 1)x(384, 1, 1), Context 1, Stream 7, Device 0, CC 9.0
    Section: GPU Speed Of Light Throughput
    Duration                         ms         1.25
    Issue Slots Busy               %        30.10
    Duration                         ms         9.99
"""


def test_two_launches_and_table(details, tmp_path):
    launches = details.read_details(TWO)
    assert [x["kernel"] for x in launches] == ["delta_kernel", "main_kernel"]
    assert launches[0]["metrics"] == {"Duration": ("us", 12.5), "SM Frequency": ("Ghz", 1.98)}
    assert launches[1]["metrics"]["Duration"] == ("ms", 1.25)  # the first of a repeated name
    page = tmp_path / "ours.txt"
    page.write_text(TWO)
    header, first, second = details.table([str(page)], ["Duration", "Issue Slots Busy"])
    assert header.split() == ["file", "kernel", "Duration", "Issue", "Slots", "Busy"]
    assert first.split() == ["ours.txt", "delta_kernel", "12.5", "us", "—"]
    assert second.split() == ["ours.txt", "main_kernel", "1.25", "ms", "30.1", "%"]
