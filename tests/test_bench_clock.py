"""`flashtriton bench --clock` on CPU: each timing's window is kept, the clock of nvidia-smi's
samples inside a row's windows is attached to it (MHz, watts, cycles per call), the summary adds
a clock table, and the option is refused where it cannot work. The sampler itself
(``analysis.clock.sample_clock``) needs nvidia-smi: tests/test_clock.py reads its lines back."""

from __future__ import annotations

import argparse
import time

import pytest

from flashtriton.analysis import clock
from flashtriton.bench import harness, report, results
from flashtriton.bench.providers import PROVIDERS

SPEC = harness.GridSpec(headdims=(16,), seqlens=(32,), dtypes=("bf16",), causal=(True,),
                        passes=("fwd", "bwd"), tokens=64, hidden=32)
META = dict.fromkeys(results.META_KEYS, "x")


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    harness.add_cli_arguments(parser)
    return parser.parse_args(list(argv))


@pytest.mark.parametrize("rounds", [1, 3])
def test_each_round_keeps_its_window(rounds):
    timing = harness.Timing("cpu", warmup_ms=1, rep_ms=4, rounds=rounds, clock=True)
    before = time.time()
    rows = harness.run_benchmark(SPEC, [PROVIDERS["naive"]], timing)
    after = time.time()
    assert [r["pass"] for r in rows] == ["fwd", "bwd"]
    ends = []
    for row in rows:
        windows = row["clock_windows"]
        assert len(windows) == rounds, row
        for t0, t1 in windows:  # the measurement's last rep_ms (per round), inside the run
            assert before <= t0 < t1 <= after + 1e-3
            assert t1 - t0 == pytest.approx(timing.for_round(0).rep_ms / 1e3, abs=1e-3)
        ends.append([t1 for _, t1 in windows])
    # round by round: a round's fwd ends before its bwd, and both before the next round's fwd
    order = sorted((t, p, i) for p, e in zip("fb", ends) for i, t in enumerate(e))
    assert [(p, i) for _, p, i in order] == [(p, i) for i in range(rounds) for p in "fb"]
    results.validate({"meta": META, "results": rows})
    plain = harness.run_benchmark(SPEC, [PROVIDERS["naive"]],
                                  harness.Timing("cpu", warmup_ms=1, rep_ms=4))
    assert all("clock_windows" not in r for r in plain)


def test_a_rows_clock_is_the_median_of_the_samples_in_its_windows():
    # samples every 50 ms from t = 100.0: (time, MHz, W)
    samples = [(100.0 + 0.05 * i, 1500.0 + 10 * i, 600.0 + i) for i in range(20)]
    row = results.make_row("flashtriton", "fwd", dtype="bf16", batch=1, heads=2, seqlen=32,
                           headdim=16, causal=False, ms=2.0,
                           clock_windows=[(100.02, 100.12), (100.52, 100.61)])
    untimed = results.make_row("flex", "fwd", dtype="bf16", batch=1, heads=2, seqlen=32,
                               headdim=16, causal=False, status="skipped", note="needs CUDA")
    empty = dict(row, clock_windows=[[90.0, 90.1]])  # no sample inside: no clock
    results.attach_run_clock([row, untimed, empty], samples)
    # inside: t = 100.05, 100.10 (MHz 1510, 1520) and 100.55, 100.60 (1610, 1620)
    assert (row["clock_samples"], row["sm_mhz"], row["watts"]) == (4, 1565.0, 606.5)
    assert row["kcycles"] == pytest.approx(2.0 * 1565.0)  # ms x MHz: thousands of cycles
    assert "sm_mhz" not in untimed
    assert (empty["clock_samples"], empty["sm_mhz"], empty["kcycles"]) == (0, None, None)
    results.validate({"meta": META, "results": [row, untimed, empty]})
    assert clock.clock_within(samples, [(100.02, 100.12)]) == clock.clock_between(
        samples, 100.02, 100.12)


def test_summary_adds_a_clock_table_when_rows_have_one():
    def row(provider, mhz):
        r = results.make_row(provider, "bwd", dtype="bf16", batch=1, heads=2, seqlen=32,
                             headdim=16, causal=True, ms=1.0, clock_windows=[(0.0, 1.0)])
        r["sm_mhz"] = mhz
        return r

    rows = [row("flashtriton", 1755.0), row("sdpa_cudnn", 1701.0)]
    tables = report.summary_tables(rows, list(PROVIDERS))
    title, headers, body = tables[-1]
    assert title.startswith("SM clock while timed")
    assert body == [["bwd", "bf16", "yes", "16", "32", "1755", "1701"]], (headers, body)
    for r in rows:
        del r["sm_mhz"]
    assert not any(t[0].startswith("SM clock") for t in report.summary_tables(rows,
                                                                                 list(PROVIDERS)))


def test_summary_adds_an_energy_table_when_rows_have_watts():
    """Board energy a FLOP (watts over TFLOP/s, pJ) per provider; a row without watts reads
    n/a, a wrong one its status; no table when no row has watts."""
    def row(provider, watts, tflops):
        r = results.make_row(provider, "fwd", dtype="bf16", batch=1, heads=2, seqlen=32,
                             headdim=16, causal=False, ms=1.0, clock_windows=[(0.0, 1.0)])
        r.update(sm_mhz=1600.0, watts=watts, tflops=tflops)
        return r

    rows = [row("flashtriton", 700.0, 500.0), row("sdpa_cudnn", 690.0, 400.0),
            row("sdpa_flash", None, 300.0)]
    title, headers, body = report.summary_tables(rows, list(PROVIDERS))[-1]
    assert title.startswith("board energy a FLOP")
    assert headers[5:] == ["flashtriton", "sdpa_flash", "sdpa_cudnn"]
    assert body == [["fwd", "bf16", "no", "16", "32", "1.400", "n/a", "1.725"]]
    rows[1]["status"] = "wrong"  # its output differed from the reference: not timed
    assert report.summary_tables(rows, list(PROVIDERS))[-1][2][0][7] == "WRONG"
    for r in rows:
        r["watts"] = None
    assert not any(t[0].startswith("board energy")
                   for t in report.summary_tables(rows, list(PROVIDERS)))


def test_clock_is_refused_where_it_cannot_work(capsys):
    tiny = ("--tokens", "64", "--hidden", "32", "--headdims", "16", "--seqlens", "32",
            "--dtypes", "bf16", "--providers", "naive", "--plain", "--clock")
    assert harness.run_cli(parse("--device", "cpu", *tiny)) == 2
    assert "--clock samples the GPU's SM clock with nvidia-smi: it needs a CUDA device" in \
        capsys.readouterr().out
    assert harness.run_cli(parse("--device", "cpu", "--feature", "window", *tiny)) == 2
    assert "--clock applies to the attention grid" in capsys.readouterr().out


def test_a_run_saved_as_it_goes_keeps_the_clock_written_so_far(tmp_path):
    # what nvidia-smi has written by the time the first configuration is saved: two samples
    # inside the row's window and one partly written line (the sampler still running)
    log = tmp_path / "smi.csv"
    log.write_text("2026/12/03 20:23:45.100, 1650 MHz, 690.50 W\n"
                   "2026/12/03 20:23:45.150, 1680 MHz, 695.50 W\n"
                   "2026/12/03 20:23:45.2")
    t0 = clock.read_samples(str(log))[0][0]
    samples = clock.ClockSamples(str(log))
    row = results.make_row("flashtriton", "fwd", dtype="bf16", batch=1, heads=16,
                           seqlen=16384, headdim=128, causal=False, ms=3.4,
                           clock_windows=[(t0 - 0.01, t0 + 0.06)])
    later = dict(row, clock_windows=[(t0 + 0.14, t0 + 0.21)])  # the next configuration's
    out = tmp_path / "run.json"
    results.save_partial(out, META, [row, later], samples)
    saved, pending = results.read_results(out)["results"]
    assert (saved["clock_samples"], saved["sm_mhz"], saved["watts"]) == (2, 1665.0, 693.0)
    assert saved["kcycles"] == pytest.approx(3.4 * 1665.0)
    assert (pending["clock_samples"], pending["sm_mhz"]) == (0, None)  # not written yet
    # the next save: the line is complete and more have come; the row without a clock gets
    # one, the row that has one keeps it
    with log.open("a") as f:
        f.write("50, 1700 MHz, 699.00 W\n"
                "2026/12/03 20:23:45.300, 1720 MHz, 698.00 W\n"
                "2026/12/03 20:23:45.350, 1500 MHz, 600.00 W\n")
    results.save_partial(out, META, [row, later], samples)
    saved, pending = results.read_results(out)["results"]
    assert (saved["clock_samples"], saved["sm_mhz"]) == (2, 1665.0)
    assert (pending["clock_samples"], pending["sm_mhz"], pending["watts"]) == (2, 1710.0, 698.5)
    # without a sampler (no --clock) the rows are saved as they are
    plain = results.make_row("flashtriton", "fwd", dtype="bf16", batch=1, heads=16,
                             seqlen=16384, headdim=128, causal=False, ms=3.4)
    results.save_partial(out, META, [plain])
    assert "sm_mhz" not in results.read_results(out)["results"][0]
