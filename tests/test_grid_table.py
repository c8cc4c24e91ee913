"""scripts/grid_table.py on the bf16 target grid that session 55 measured on the H200
(bench/results/2026-12-03-s55-grid-target-210e6f5.json) and copies of it with rows changed."""

import json
import statistics
from pathlib import Path

import pytest

from helpers import load_script

ROOT = Path(__file__).resolve().parents[1]

GRID = ROOT / "bench/results/2026-12-03-s55-grid-target-210e6f5.json"


@pytest.fixture(scope="module")
def grid_table():
    return load_script("grid_table")


def _rows() -> list[dict]:
    return json.loads(GRID.read_text())["results"]


def _write(tmp_path, rows: list[dict]):
    path = tmp_path / "grid.json"
    path.write_text(json.dumps({"meta": {}, "results": rows}))
    return path


def _find(rows, provider, pass_, headdim, causal, seqlen) -> dict:
    (row,) = [r for r in rows if (r["provider"], r["pass"], r["headdim"], r["causal"],
                                   r["seqlen"]) == (provider, pass_, headdim, causal, seqlen)]
    return row


def test_session55_grid(grid_table, capsys):
    assert grid_table.main([str(GRID)]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    # 60 rows: fwd first, and the one row below cuDNN in bold
    assert lines[2] == "| fwd | 64 | no | 1024 | 416.1 | 375.9 | 1.107 | 1,890 / 1,778 |"
    assert "| fwd | 256 | no | 2048 | 615.4 | 618.0 | **0.996** | 1,395 / 1,545 |" in lines
    assert sum(line.startswith("| ") for line in lines) == 61
    assert "at or above cuDNN (seqlen >= 1024): 59 of 60" in out
    assert "below: fwd d256 no mask 2048: 615.4 against 618.0 (0.996)" in out
    assert "16k floor fwd d128 no mask: 651.7 against 650: met" in out
    assert "MISSED" not in out


def test_floor_missed_and_untimed_row(grid_table, tmp_path):
    rows = _rows()
    _find(rows, "flashtriton", "bwd", 64, True, 16384)["tflops"] = 499.9
    untimed = _find(rows, "flashtriton", "fwd", 128, True, 4096)
    untimed.pop("tflops")
    untimed["error"] = "output differs from the reference"
    table = grid_table.pairs(rows, "bf16")
    v = grid_table.verdict(table)
    assert v["counted"] == 60
    below = {key: (ours, peer) for key, ours, peer in v["below"]}
    assert below[("fwd", 128, True, 4096)] == (None, pytest.approx(511.0, abs=0.05))
    assert ("fwd", 256, False, 2048) in below and len(below) == 2
    missed = [f for f in v["floors"] if not f[3]]
    assert missed == [(("bwd", 64, True), 500.0, 499.9, False)]
    assert len(v["floors"]) == 8
    text = grid_table.render(table)
    assert "fwd d128 causal 4096: - against 511.0 (untimed)" in text
    assert "16k floor bwd d64 causal: 499.9 against 500: MISSED" in text


def test_board_energy_a_flop(grid_table, tmp_path, capsys):
    """Session 62's grid on an H100 (with --clock's watts): each floor's line gives the row's
    board energy a FLOP and what the floor needs at that power, and one line ours over
    cuDNN's energy a FLOP; without watts both are left out."""
    s62 = ROOT / "bench/results/2026-12-06-s62-h100-grid-target-6664c33.json"
    assert grid_table.main([str(s62)]) == 0
    out = capsys.readouterr().out
    assert ("16k floor fwd d64 causal: 514.1 against 520: MISSED (1.367 pJ/FLOP at 703 W; "
            "520 at that power needs 1.351)") in out
    assert "board energy a FLOP, ours / cuDNN: median 0.899, 0.817-0.990 over 60 rows" in out
    rows = json.loads(s62.read_text())["results"]
    for r in rows:
        r.pop("watts")
    assert grid_table.main([str(_write(tmp_path, rows))]) == 0
    out = capsys.readouterr().out
    assert "16k floor fwd d64 causal: 514.1 against 520: MISSED\n" in out
    assert "pJ/FLOP" not in out and "board energy" not in out


def test_rows_below_1024_not_counted(grid_table, tmp_path):
    rows = [dict(r, seqlen=512) for r in _rows()
            if (r["pass"], r["headdim"], r["causal"], r["seqlen"]) == ("fwd", 64, False, 1024)]
    rows[0]["tflops"] = 1.0  # ours far below cuDNN, at a seqlen the target leaves out
    v = grid_table.verdict(grid_table.pairs(rows, "bf16"))
    assert v["counted"] == 0 and v["below"] == []


def test_floors_only_in_bf16(grid_table, tmp_path, capsys):
    rows = [dict(r, dtype="fp16") for r in _rows()]
    assert grid_table.main([str(_write(tmp_path, rows)), "--dtype", "fp16"]) == 0
    out = capsys.readouterr().out
    assert "at or above cuDNN (seqlen >= 1024): 59 of 60" in out
    assert "16k floors: set for bf16 only, none checked in fp16" in out
    assert "16k floor fwd" not in out


def test_other_dtype_refused(grid_table, tmp_path, capsys):
    path = _write(tmp_path, _rows())
    assert grid_table.main([str(path), "--dtype", "fp16"]) == 2
    assert "holds no flashtriton and sdpa_cudnn rows in fp16" in capsys.readouterr().err


def test_fp16_against_bf16_session57(grid_table, capsys):
    """Session 57's grids in both types (three interleaved rounds each, one H200)."""
    s57 = ROOT / "bench/results/2026-12-06-s57-grid-target"
    bf16, fp16 = f"{s57}-rounds3-fcf57b4.json", f"{s57}-fp16-rounds3-fcf57b4.json"
    assert grid_table.main([bf16, "--fp16", fp16]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "flashtriton: fp16 within 3% of bf16 on 19 of 60 rows; median change -3.8%"
    assert lines[1] == "  fwd d256 no mask 2048: -7.0% (MHz 1,650 -> 1,710, W 690 -> 694)"
    assert "sdpa_cudnn: fp16 within 3% of bf16 on 35 of 60 rows; median change -2.8%" in lines
    assert len(lines) == 12  # a headline and the five rows furthest below, per provider
    # the types swapped: no fp16 rows in the bf16 file
    assert grid_table.main([fp16, "--fp16", bf16]) == 2
    assert "holds no flashtriton and sdpa_cudnn rows in bf16" in capsys.readouterr().err


def test_every_provider_session32(grid_table, capsys):
    """Session 32's --quick run with all six providers (one H200): values read off its JSON."""
    quick_all = ROOT / "bench/results/2026-12-01-s32-quick-all-a81fac4.json"
    assert grid_table.main([str(quick_all), "--providers"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == ("| pass | d | causal | seqlen | flashtriton | sdpa_cudnn | sdpa_flash | "
                        "flex | sdpa_efficient | naive | ours / sdpa_cudnn | ours / sdpa_flash | "
                        "ours / flex | ours / sdpa_efficient | ours / naive |")
    assert lines[2] == ("| fwd | 64 | no | 1024 | 357.1 | 347.9 | 254.2 | 355.0 | 129.0 | 67.6 | "
                        "1.03 | 1.40 | 1.01 | 2.77 | 5.28 |")
    assert sum(line.startswith("| fwd") or line.startswith("| bwd") for line in lines) == 24
    assert "ours / sdpa_cudnn: 0.94-1.20 over 24 rows" in lines
    assert "ours / flex: 1.01-1.65 over 24 rows" in lines


def test_every_provider_with_a_missing_row(grid_table, tmp_path, capsys):
    rows = [r for r in _rows() if r["seqlen"] == 16384]
    flex = [dict(r, provider="flex", tflops=r["tflops"] / 2) for r in rows
            if r["provider"] == "sdpa_cudnn"]
    # the table's first row (forward, d64, no mask) failed for flex
    failed = _find(flex, "flex", "fwd", 64, False, 16384)
    failed.pop("tflops")
    failed["error"] = "out of memory"
    assert grid_table.main([str(_write(tmp_path, rows + flex)), "--providers"]) == 0
    lines = capsys.readouterr().out.splitlines()
    first = lines[2].split(" | ")
    assert first[:4] == ["| fwd", "64", "no", "16384"]
    assert first[6] == "-" and first[-1] == "- |"  # flex's value and ours / flex
    assert "ours / flex: " in lines[-1] and f"over {len(flex) - 1} rows" in lines[-1]
    # ours over cuDNN's halved rate is twice ours over cuDNN's
    assert float(lines[3].split(" | ")[-1].rstrip(" |")) == pytest.approx(
        2 * float(lines[3].split(" | ")[-2]), abs=0.011)


def test_every_provider_needs_ours_and_a_peer(grid_table, tmp_path, capsys):
    rows = [r for r in _rows() if r["provider"] == "flashtriton"]
    assert grid_table.main([str(_write(tmp_path, rows)), "--providers"]) == 2
    assert "no flashtriton rows and another provider's in bf16" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        grid_table.main([str(GRID), "--providers", "--fp16", str(GRID)])


def _median_ratio(new: list[dict], old: list[dict], provider: str, field: str) -> float:
    """The median over rows from 1k keys of new[field] / old[field] for one provider, computed
    here apart from the script."""
    def index(rows):
        return {(r["pass"], r["headdim"], r["causal"], r["seqlen"]): r[field] for r in rows
                if r["provider"] == provider and r["seqlen"] >= 1024 and r.get(field)}
    n, o = index(new), index(old)
    return statistics.median(n[k] / o[k] for k in n if k in o)


def test_against_session57_and_session64(grid_table, capsys):
    """Session 64's H200 grid against session 57's (another H200) and against its own second
    run: the board's clock moved between the sessions, not between the two runs."""
    s64 = ROOT / "bench/results/2026-12-06-s64-grid-target-11d1bcf"
    s57 = ROOT / "bench/results/2026-12-06-s57-grid-target-rounds3-fcf57b4.json"
    run1, run2 = f"{s64}.json", f"{s64}-2.json"
    new = json.loads(Path(run1).read_text())["results"]
    assert grid_table.main([run1, "--against", str(s57)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2
    old = json.loads(s57.read_text())["results"]
    for line, provider in zip(lines, ("flashtriton", "sdpa_cudnn")):
        assert line.startswith(f"{provider}, this run / the other: ")
        for field, label in (("tflops", "TFLOP/s"), ("kcycles", "cycles a call"),
                             ("sm_mhz", "SM clock"), ("watts", "board power")):
            median = _median_ratio(new, old, provider, field)
            assert f"{label} {median:.3f} (" in line, (label, median, line)
            assert ", 60 rows)" in line
    # both providers about 4% lower clock, and the same cycles within 2%
    assert _median_ratio(new, old, "sdpa_cudnn", "sm_mhz") < 0.97
    assert abs(_median_ratio(new, old, "sdpa_cudnn", "kcycles") - 1) < 0.02
    # the same board twice: the clock within 1%
    assert grid_table.main([run1, "--against", run2]) == 0
    out = capsys.readouterr().out
    second = json.loads(Path(run2).read_text())["results"]
    assert abs(_median_ratio(new, second, "flashtriton", "sm_mhz") - 1) < 0.01
    assert f"SM clock {_median_ratio(new, second, 'flashtriton', 'sm_mhz'):.3f}" in out


def test_against_without_clock_and_refusals(grid_table, tmp_path, capsys):
    rows = _rows()
    bare = [{k: v for k, v in r.items() if k not in ("kcycles", "sm_mhz", "watts")} for r in rows]
    scaled = [dict(r, tflops=r["tflops"] * 1.1) if r.get("tflops") else r for r in bare]
    new, old = tmp_path / "new.json", tmp_path / "old.json"
    new.write_text(json.dumps({"meta": {}, "results": scaled}))
    old.write_text(json.dumps({"meta": {}, "results": bare}))
    assert grid_table.main([str(new), "--against", str(old)]) == 0
    out = capsys.readouterr().out
    assert "TFLOP/s 1.100 (1.100-1.100, 60 rows); cycles a call -; SM clock -; board power -" in out
    with pytest.raises(SystemExit):
        grid_table.main([str(new), "--against", str(old), "--providers"])
    assert grid_table.main([str(new), "--against", str(old), "--dtype", "fp16"]) == 2
    assert "holds no flashtriton and sdpa_cudnn rows in fp16" in capsys.readouterr().err


def test_seqlen_threshold_is_the_bench_reports():
    from flashtriton.bench.report import TARGET_FROM_SEQLEN

    assert load_script("grid_table").RATIO_FROM_SEQLEN == TARGET_FROM_SEQLEN
