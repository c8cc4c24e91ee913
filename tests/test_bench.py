"""`flashtriton bench` on CPU: the registry, the FLOP count, the grid and --quick, the results file,
the correctness gate, the timing path (naive provider, tiny shapes, wall-clock timer) and the plots.

The GPU figures themselves come from scripts/gpu_bench.sh on the H200; nothing here needs a GPU.
"""

from __future__ import annotations

import argparse
import io
import json
import re
import subprocess
import sys

import pytest
import torch
from helpers import DEVICE

from flashtriton.bench import check, harness, plots, report, results
from flashtriton.bench.providers import (PROVIDERS, Problem, Provider, Unsupported, configure_dynamo,
                                         is_dynamo_fallback, make_inputs, setup_naive)

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
# batch 2 x seqlen 32 = 64 tokens, heads 2 x headdim 16 = 32: milliseconds per call on CPU.
TINY = ("--device", "cpu", "--tokens", "64", "--hidden", "32", "--headdims", "16", "--seqlens", "32",
        "--dtypes", "bf16", "--warmup-ms", "1", "--rep-ms", "3", "--plain")
TINY_SPEC = harness.GridSpec(headdims=(16,), seqlens=(32,), dtypes=("bf16",), causal=(False, True),
                             passes=("fwd", "bwd", "fwd_bwd"), tokens=64, hidden=32)
CPU_TIMING = harness.Timing(device="cpu", warmup_ms=1, rep_ms=3)


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    harness.add_cli_arguments(parser)
    return parser.parse_args(list(argv))


def test_registry_holds_the_six_providers():
    assert list(PROVIDERS) == ["flashtriton", "sdpa_flash", "sdpa_cudnn", "sdpa_efficient", "flex", "naive"]
    assert {n for n, p in PROVIDERS.items() if p.needs_cuda} == {"sdpa_flash", "sdpa_cudnn",
                                                                  "sdpa_efficient", "flex"}
    assert all(callable(p.setup) and p.label for p in PROVIDERS.values())


@pytest.mark.parametrize("causal, pass_name, factor", [
    (False, "fwd", 1.0), (True, "fwd", 0.5), (False, "bwd", 2.5), (True, "bwd", 1.25),
    (False, "fwd_bwd", 3.5), (True, "fwd_bwd", 1.75)])
def test_flops_follow_the_papers(causal, pass_name, factor):
    b, h, s, d = 1, 16, 16384, 128
    expected = 4 * b * h * s * s * d * factor
    assert results.attention_flops(b, h, s, d, causal, pass_name) == expected
    row = results.make_row("x", pass_name, dtype="bf16", batch=b, heads=h, seqlen=s, headdim=d,
                           causal=causal, ms=2.0)
    assert row["tflops"] == pytest.approx(expected / 2e-3 / 1e12)


def test_full_grid_is_the_papers_grid():
    problems = harness.FULL.problems("cpu")
    assert len(problems) == 6 * 3 * 2 * 2  # seqlens x headdims x causal x dtypes
    assert all(p.batch * p.seqlen == 16384 and p.heads * p.headdim == 2048 for p in problems)
    assert {p.headdim for p in problems} == {64, 128, 256}
    assert sorted({p.seqlen for p in problems}) == [512, 1024, 2048, 4096, 8192, 16384]
    assert {p.dtype for p in problems} == {torch.bfloat16, torch.float16}
    assert {p.causal for p in problems} == {False, True}
    assert harness.FULL.passes == ("fwd", "bwd", "fwd_bwd")
    assert len(set(problems)) == len(problems)


def test_quick_subset_and_overrides():
    assert harness.spec_from_args(parse()) == harness.FULL
    quick = harness.spec_from_args(parse("--quick"))
    assert quick == harness.QUICK
    assert (set(quick.headdims), quick.seqlens, quick.dtypes, quick.passes, set(quick.causal)) == (
        {64, 128}, (1024, 4096, 16384), ("bf16",), ("fwd", "bwd"), {False, True})
    assert len(quick.problems("cpu")) == 12
    spec = harness.spec_from_args(parse("--quick", "--headdims", "64", "--seqlens", "512,1024", "2048",
                                        "--causal", "yes"))
    assert (spec.headdims, spec.seqlens, spec.causal, spec.dtypes) == ((64,), (512, 1024, 2048),
                                                                       (True,), ("bf16",))


def test_quick_times_the_target_peers_unless_told_otherwise(tmp_path, capsys):
    """--quick alone runs QUICK_PROVIDERS (the CUDA-only ones skip on CPU, saying why);
    --providers still chooses; an A/B's baseline joins the quick default. The registry's
    entries are the naive provider under the real names: what is tested is the choice."""
    registry = {name: Provider(name, name, setup_naive, needs_cuda=PROVIDERS[name].needs_cuda)
                for name in PROVIDERS}
    out = tmp_path / "q.json"
    assert harness.run_cli(parse(*TINY, "--quick", "--causal", "no", "--passes", "fwd",
                                 "--out", str(out)), registry=registry) == 0
    assert "--quick: providers flashtriton, sdpa_cudnn, sdpa_flash" in capsys.readouterr().out
    rows = results.read_results(out)["results"]
    assert [r["provider"] for r in rows] == list(harness.QUICK_PROVIDERS)
    assert results.row_status(rows[0]) == "ok"
    assert all(r["note"] == "needs a CUDA device" for r in rows[1:])
    assert harness.run_cli(parse(*TINY, "--quick", "--causal", "no", "--passes", "fwd",
                                 "--providers", "naive", "--out", str(out)),
                           registry=registry) == 0
    assert "--quick: providers" not in capsys.readouterr().out
    assert [r["provider"] for r in results.read_results(out)["results"]] == ["naive"]
    with_base = {**registry, "flashtriton_base": Provider("flashtriton_base", "base", setup_naive)}
    default = harness.QUICK_PROVIDERS + ("flashtriton_base", "not_registered")
    chosen = harness.select_providers(None, with_base, default=default)
    assert [p.name for p in chosen] == ["flashtriton", "sdpa_cudnn", "sdpa_flash",
                                        "flashtriton_base"]
    assert len(harness.select_providers(None, with_base)) == len(with_base)


def test_bad_options_are_refused():
    with pytest.raises(ValueError, match="fp8"):
        harness.spec_from_args(parse("--dtypes", "fp8"))
    with pytest.raises(ValueError, match="nope"):
        harness.select_providers([["naive", "nope"]])
    assert harness.run_cli(parse(*TINY, "--providers", "nope")) == 2


def test_results_file_schema_round_trip(tmp_path):
    meta = dict.fromkeys(results.META_KEYS, "x")
    ok = results.make_row("naive", "fwd", dtype="bf16", batch=2, heads=2, seqlen=32, headdim=16,
                          causal=True, ms=0.5, peak_mib=1.5)
    skipped = results.make_row("flex", "bwd", dtype="bf16", batch=2, heads=2, seqlen=32, headdim=16,
                               causal=True, status="skipped", note="needs a CUDA device")
    path = results.write_results(tmp_path / "sub" / "r.json", meta, [ok, skipped])
    data = json.loads(path.read_text())
    assert set(data) == {"meta", "results"} and set(data["meta"]) == set(results.META_KEYS)
    assert list(data["results"][0]) == list(results.RESULT_KEYS)
    assert data["results"][1]["status"] == "skipped" and data["results"][1]["ms"] is None
    assert results.read_results(path) == data
    with pytest.raises(ValueError, match="unexpected"):
        results.validate({"meta": meta, "results": [dict(ok, extra=1)]})
    with pytest.raises(ValueError, match="meta"):
        results.validate({"meta": {"gpu": "x"}, "results": []})
    merged = results.merge_results([data, {"meta": meta, "results": [dict(ok, ms=0.25)]}])
    assert len(merged["results"]) == 2 and merged["results"][0]["ms"] == 0.25


def test_cli_times_naive_on_cpu_and_says_so(tmp_path, capsys):
    out = tmp_path / "r.json"
    assert harness.run_cli(parse(*TINY, "--providers", "naive", "--causal", "both",
                                 "--passes", "fwd,bwd,fwd_bwd", "--out", str(out))) == 0
    printed = capsys.readouterr().out
    assert "timing on CPU" in printed and "not GPU figures" in printed
    data = results.read_results(out)
    assert data["meta"]["gpu"].startswith("none: CPU")
    rows = data["results"]
    assert len(rows) == 2 * 3  # causal x passes
    for row in rows:
        assert "status" not in row, row
        assert row["ms"] > 0 and row["tflops"] > 0 and row["peak_mib"] is None
        assert (row["batch"], row["heads"], row["seqlen"], row["headdim"]) == (2, 2, 32, 16)


def test_warmup_defaults_per_device_and_bad_budgets_are_refused(capsys):
    assert harness.make_timing("cuda", None, 100) == harness.Timing("cuda", 1000, 100)
    assert harness.make_timing("cpu", None, 100) == harness.Timing("cpu", 25, 100)
    assert harness.make_timing("cuda", 0, 7) == harness.Timing("cuda", 0, 7)
    with pytest.raises(ValueError, match="warmup"):
        harness.make_timing("cpu", -1, 100)
    with pytest.raises(ValueError, match="rep"):
        harness.make_timing("cpu", 5, 0)
    assert harness.run_cli(parse("--device", "cpu", "--providers", "naive",
                                 "--warmup-ms", "-3")) == 2
    assert "--warmup-ms must be >= 0" in capsys.readouterr().out


def test_rounds_budget_and_bad_values(capsys):
    timing = harness.make_timing("cuda", None, 100, 4)
    assert timing == harness.Timing("cuda", 1000, 100, 4)
    assert (timing.for_round(0).warmup_ms, timing.for_round(0).rep_ms) == (1000, 25)
    assert (timing.for_round(3).warmup_ms, timing.for_round(3).rep_ms) == (harness.ROUND_WARMUP_MS, 25)
    one = harness.make_timing("cpu", 5, 10)
    assert one.rounds == 1 and one.for_round(0) is one
    assert harness.make_timing("cpu", 5, 10, 2).for_round(1).warmup_ms == 5  # never more
    with pytest.raises(ValueError, match="--rounds"):
        harness.make_timing("cpu", 5, 10, 0)
    assert harness.run_cli(parse(*TINY, "--providers", "naive", "--rounds", "0")) == 2
    assert "--rounds must be >= 1" in capsys.readouterr().out
    assert harness.run_cli(parse("--decode", "--rounds", "2", "--device", "cpu", "--plain")) == 2
    assert "not to --decode" in capsys.readouterr().out


def _logged(name: str, log: list):
    """The naive provider, logging each forward call under ``name``."""
    def setup(problem, inputs):
        runner = setup_naive(problem, inputs)
        forward = runner.forward

        def logged_forward():
            log.append(name)
            return forward()

        runner.forward = logged_forward
        return runner
    return Provider(name, name, setup)


@pytest.mark.parametrize("rounds", [1, 3])
def test_rounds_interleave_the_providers(rounds, monkeypatch):
    """One round: each provider checked, measured for memory and timed before the next is set
    up (two runs of calls). Several: both set up first, then timed in turn every round; a row
    is the median of its rounds, each listed. Every measurement of the first round gets the
    full warm-up, later rounds a short one."""
    log: list = []
    warmups: list = []
    timer = harness.bench_ms

    def logged_timer(fn, timing, grad_to_none=None):
        warmups.append(timing.warmup_ms)
        return timer(fn, timing, grad_to_none=grad_to_none)

    monkeypatch.setattr(harness, "bench_ms", logged_timer)
    spec = harness.GridSpec(**{**TINY_SPEC.__dict__, "causal": (False,), "passes": ("fwd", "bwd")})
    timing = harness.Timing("cpu", warmup_ms=40, rep_ms=3, rounds=rounds)
    rows = harness.run_benchmark(spec, [_logged("a", log), _logged("b", log)], timing)
    assert [(r["provider"], r["pass"]) for r in rows] == [("a", "fwd"), ("a", "bwd"),
                                                          ("b", "fwd"), ("b", "bwd")]
    segments = [name for i, name in enumerate(log) if i == 0 or log[i - 1] != name]
    assert segments == (["a", "b"] if rounds == 1 else ["a", "b"] * (rounds + 1))
    assert warmups == [40] * 4 + [harness.ROUND_WARMUP_MS] * (4 * (rounds - 1))
    for row in rows:
        assert results.row_status(row) == "ok", row
        assert row["setup_s"] > 0
        if rounds == 1:
            assert "rounds_ms" not in row
        else:
            assert len(row["rounds_ms"]) == rounds and all(t > 0 for t in row["rounds_ms"])
            assert row["ms"] == sorted(row["rounds_ms"])[rounds // 2]
    results.validate({"meta": dict.fromkeys(results.META_KEYS, "x"), "results": rows})


def test_cli_rounds_end_to_end(tmp_path, capsys):
    out = tmp_path / "r.json"
    assert harness.run_cli(parse(*TINY, "--providers", "naive", "--causal", "yes", "--passes", "fwd",
                                 "--rounds", "2", "--out", str(out))) == 0
    printed = capsys.readouterr().out
    assert "each the median of 2 interleaved rounds" in printed
    assert "median of 2 interleaved rounds)" in printed  # the table's title
    (row,) = results.read_results(out)["results"]
    assert len(row["rounds_ms"]) == 2
    with pytest.raises(ValueError, match="rounds_ms"):
        results.validate({"meta": dict.fromkeys(results.META_KEYS, "x"),
                          "results": [dict(row, rounds_ms=[1.0])]})


class _ScaleGrad(torch.autograd.Function):
    """Identity forward, a backward that scales the gradient: right output, wrong gradients."""

    @staticmethod
    def forward(ctx, x):
        return x.clone()

    @staticmethod
    def backward(ctx, grad):
        return grad * 1.5


def _wrong_output(problem, inputs):
    runner = setup_naive(problem, inputs)
    forward = runner.forward
    runner.forward = lambda: forward() * 1.1
    return runner


def _wrong_grads(problem, inputs):
    runner = setup_naive(problem, inputs)
    forward = runner.forward
    runner.forward = lambda: _ScaleGrad.apply(forward())
    return runner


def _unsupported(problem, inputs):
    raise Unsupported(f"headdim {problem.headdim} is not built")


def _broken(problem, inputs):
    runner = setup_naive(problem, inputs)

    def forward():
        raise RuntimeError("boom")

    runner.forward = forward
    return runner


@pytest.mark.parametrize("rounds", [1, 2])
def test_gate_marks_wrong_providers_and_does_not_time_them(rounds):
    registry = {
        "naive": PROVIDERS["naive"],
        "wrong_out": Provider("wrong_out", "wrong output", _wrong_output),
        "wrong_grads": Provider("wrong_grads", "wrong gradients", _wrong_grads),
        "unsupported": Provider("unsupported", "unsupported", _unsupported),
        "broken": Provider("broken", "broken", _broken),
        "gpu_only": Provider("gpu_only", "gpu only", setup_naive, needs_cuda=True),
    }
    spec = harness.GridSpec(**{**TINY_SPEC.__dict__, "causal": (True,)})
    rows = harness.run_benchmark(spec, list(registry.values()),
                                 harness.Timing("cpu", warmup_ms=1, rep_ms=3, rounds=rounds))
    by = {(r["provider"], r["pass"]): r for r in rows}
    assert len(rows) == len(registry) * 3
    for pass_name in ("fwd", "bwd", "fwd_bwd"):
        assert results.row_status(by["naive", pass_name]) == "ok"
        wrong = by["wrong_out", pass_name]
        assert wrong["status"] == "wrong" and wrong["ms"] is None and wrong["tflops"] is None
        assert "max|ours-ref64|" in wrong["note"] and "torch_lowp" in wrong["note"]
        assert by["unsupported", pass_name]["status"] == "skipped"
        assert "not built" in by["unsupported", pass_name]["note"]
        assert by["broken", pass_name]["status"] == "error" and "boom" in by["broken", pass_name]["note"]
        assert by["gpu_only", pass_name]["status"] == "skipped"
    # right output, wrong gradients: the forward is timed, the passes with a backward are not
    assert results.row_status(by["wrong_grads", "fwd"]) == "ok" and by["wrong_grads", "fwd"]["ms"] > 0
    for pass_name in ("bwd", "fwd_bwd"):
        row = by["wrong_grads", pass_name]
        assert row["status"] == "wrong" and row["ms"] is None and row["note"].startswith("dq")


def test_a_refusing_backend_is_skipped_with_its_reason():
    # SDPA's efficient backend has no CPU kernel: a real refusal, recorded the way a GPU refusal is
    # (e.g. a head dim a backend was not built for).
    provider = Provider("efficient_on_cpu", "SDPA efficient", PROVIDERS["sdpa_efficient"].setup)
    spec = harness.GridSpec(**{**TINY_SPEC.__dict__, "causal": (False,), "passes": ("fwd",)})
    (row,) = harness.run_benchmark(spec, [provider], CPU_TIMING)
    assert row["status"] == "skipped" and row["ms"] is None
    assert "backend" in row["note"] or "kernel" in row["note"], row["note"]


def test_flashtriton_provider_passes_the_gate():
    """The real flashtriton API through its provider (interpreted on CPU, native on a GPU):
    output and gradients."""
    problem = TINY_SPEC.problems(DEVICE)[1]  # causal
    inputs = make_inputs(problem)
    ref = check.reference_slices(problem, inputs, grads=True)
    run = harness.ProviderRun(PROVIDERS["flashtriton"], problem, inputs, lambda: ref,
                              ("fwd", "bwd"), CPU_TIMING)
    runner = PROVIDERS["flashtriton"].setup(problem, inputs)
    run.gate(runner)
    assert run.outcome == {}, run.outcome


def test_classify_unsupported_and_fallback():
    assert harness.classify(torch.cuda.OutOfMemoryError("CUDA out of memory"))[0] == "skipped"
    assert harness.classify(RuntimeError("No available kernel. Aborting execution."))[0] == "skipped"
    assert harness.classify(NotImplementedError("backward"))[0] == "skipped"
    status, note = harness.classify(RuntimeError("FailOnRecompileLimitHit: recompile limit hit"))
    assert status == "skipped" and "eager fallback refused" in note
    assert is_dynamo_fallback(RuntimeError("Hard failure due to fail_on_recompile_limit_hit"))
    assert harness.classify(ValueError("something else"))[0] == "error"


def test_flex_cannot_fall_back_to_eager_silently():
    import torch._dynamo.config as dyn

    made = configure_dynamo()
    assert dyn.recompile_limit >= 2 * len(harness.FULL.problems("cpu"))  # every shape, mask or not
    assert made["suppress_errors"] is False
    # the timing loop's repeated backward (retain_graph=True) needs donated buffers off; with
    # them on, compiled flex's backward raised on the H200 (2026-11-29 quick run)
    import torch._functorch.config as functorch_config
    assert made["donated_buffer"] is False and functorch_config.donated_buffer is False


def _recorded_results() -> dict:
    """A small results file as a GPU run writes it (made-up numbers, for plotting only)."""
    rows = []
    for provider, speed, mem in (("flashtriton", 400.0, 1.0), ("sdpa_cudnn", 380.0, 1.1),
                                 ("naive", 60.0, 8.0)):
        for pass_name in ("fwd", "bwd"):
            for d in (64, 128):
                for causal in (False, True):
                    for s in (1024, 4096, 16384):
                        b, h = 16384 // s, 2048 // d
                        if provider == "naive" and s == 16384:
                            rows.append(results.make_row(provider, pass_name, dtype="bf16", batch=b,
                                                         heads=h, seqlen=s, headdim=d, causal=causal,
                                                         status="skipped", note="out of memory"))
                            continue
                        flops = results.attention_flops(b, h, s, d, causal, pass_name)
                        rows.append(results.make_row(provider, pass_name, dtype="bf16", batch=b,
                                                     heads=h, seqlen=s, headdim=d, causal=causal,
                                                     ms=flops / (speed * 1e12) * 1e3,
                                                     peak_mib=mem * s))
    meta = {"gpu": "NVIDIA H200", "torch": "2.11.0", "triton": "3.6.0", "cuda": "13.0",
            "date": "2026-11-29T00:00:00+00:00", "commit": "0" * 40}
    return {"meta": meta, "results": rows}


def _assert_pngs(paths, names):
    assert sorted(p.name for p in paths) == sorted(names)
    for p in paths:
        data = p.read_bytes()
        assert data.startswith(PNG_SIGNATURE) and len(data) > 1000, p


def test_plots_from_a_recorded_results_file(tmp_path):
    data = _recorded_results()
    path = results.write_results(tmp_path / "r.json", data["meta"], data["results"])
    expected = ["tflops-bf16-fwd.png", "tflops-bf16-bwd.png", "memory-bf16.png"]
    _assert_pngs(plots.plot_files([path], tmp_path / "plots"), expected)
    import matplotlib.image

    assert matplotlib.image.imread(tmp_path / "plots" / "memory-bf16.png").ndim == 3
    # the CLI's plot-only entry regenerates them from the committed file
    assert harness.run_cli(parse("--plot-only", str(path), "--plots", str(tmp_path / "again"),
                                 "--plain")) == 0
    _assert_pngs(list((tmp_path / "again").glob("*.png")), expected)


def test_plots_share_one_legend_below_the_panels():
    """Each figure gets one legend for all its panels, each label once, and no panel a legend
    of its own (a legend inside a panel covered its lines)."""
    plt = plots._pyplot()
    fig, axes = plots._grid(plt, 1, 2)
    for ax in axes[0]:
        ax.plot([1, 2], [3, 4], label="flashtriton (ours)")
        ax.plot([1, 2], [2, 1], label="SDPA cuDNN")
    axes[0][1].plot([1, 2], [1, 1], label="naive PyTorch")
    plots._finish(fig, axes, "title")
    assert len(fig.legends) == 1
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert labels == ["flashtriton (ours)", "SDPA cuDNN", "naive PyTorch"]
    assert all(ax.get_legend() is None for ax in axes[0])
    plt.close(fig)


def test_summary_table_shows_the_cudnn_ratio(capsys):
    data = _recorded_results()
    tables = report.summary_tables(data["results"], list(PROVIDERS))
    title, headers, rows = tables[0]
    assert headers[-1] == "ours/cuDNN" and rows[0][-1] == "1.05x"
    mem_rows = tables[1][2]
    assert mem_rows[2][4] == "16384" and mem_rows[2][-1] == "skip"  # naive at 16k: out of memory
    console = report.PlainConsole()
    console.table(title, headers, rows[:2])
    assert "ours/cuDNN" in capsys.readouterr().out


def test_target_line_counts_the_configurations_below_cudnn():
    """``report.target_line``: of the configurations from 1024 keys timed for both flashtriton
    and sdpa_cudnn, how many are at or above cuDNN, and the ones below, least first."""
    data = _recorded_results()  # ours 400 TFLOP/s, cuDNN 380 everywhere: 24 configurations
    assert report.target_line(data["results"]) == (
        "against cuDNN, from 1024 keys: 24 of 24 configurations at or above 1.00x")
    rows = [dict(r) for r in data["results"]]
    for r in rows:  # ours slower in two configurations, one of them below 1024 keys
        if r["provider"] == "flashtriton" and r["headdim"] == 64 and not r["causal"] \
                and r["pass"] == "bwd" and r["seqlen"] == 4096:
            r["tflops"] = 361.0  # 0.95x
        if r["provider"] == "flashtriton" and r["headdim"] == 128 and r["causal"] \
                and r["pass"] == "fwd" and r["seqlen"] == 16384:
            r["tflops"] = 376.2  # 0.99x
    rows.append({**rows[0], "seqlen": 512, "tflops": 1.0})  # below 1024 keys: not counted
    rows.append({**rows[0], "provider": "sdpa_cudnn", "seqlen": 512, "tflops": 380.0})
    assert report.target_line(rows) == (
        "against cuDNN, from 1024 keys: 22 of 24 configurations at or above 1.00x; below: "
        "bwd bf16 d64 4096 full 0.950x, fwd bf16 d128 16384 causal 0.990x")
    assert report.target_line([r for r in rows if r["provider"] != "sdpa_cudnn"]) is None


def test_progress_lines_and_the_summary_say_how_long_the_run_took(capsys):
    """Each progress line carries the seconds since the run began (the gaps show where a long
    run's time goes), and the last line the whole run's time."""
    assert harness.run_cli(parse(*TINY, "--providers", "naive", "--causal", "no",
                                 "--passes", "fwd", "bwd")) == 0
    lines = capsys.readouterr().out.splitlines()
    stamped = [re.match(r"\[(\d+)/2, (\d+\.\d) s\] naive ", line) for line in lines]
    stamped = [m for m in stamped if m]
    assert [m.group(1) for m in stamped] == ["1", "2"]
    assert float(stamped[0].group(2)) <= float(stamped[1].group(2))
    # and how long the provider took before its timing (set-up, compiles, check, memory),
    # summed per provider before the last line
    assert all(re.search(r"\[set-up \d+\.\d s\]$", m.string) for m in stamped), lines
    assert re.fullmatch(r"set-up \(compiles, checks, peak memory\): naive \d+\.\d s",
                        lines[-2]), lines[-2]
    assert re.fullmatch(r"rows: 2 ok, 0 skipped, 0 wrong, 0 error; \d+ s in all", lines[-1]), lines[-1]


def test_setup_line_sums_each_provider_once_per_configuration():
    def row(provider, pass_name, seqlen, setup_s):
        return results.make_row(provider, pass_name, dtype="bf16", batch=1, heads=2,
                                seqlen=seqlen, headdim=64, causal=False, ms=1.0, setup_s=setup_s)

    rows = [row("a", "fwd", 128, 2.0), row("a", "bwd", 128, 2.0), row("b", "fwd", 128, 0.25),
            row("a", "fwd", 256, 1.5), row("b", "fwd", 256, None)]
    assert report.setup_line(rows) == ("set-up (compiles, checks, peak memory): a 3.5 s, "
                                       "b 0.2 s")
    assert report.setup_line([row("a", "fwd", 128, None)]) is None


def test_rich_progress_lines_carry_the_elapsed_time():
    pytest.importorskip("rich")
    buf = io.StringIO()
    console = report.make_console(file=buf)
    with console.progress(2) as advance:
        advance(1, "first")
        advance(1, "second")
    printed = [line for line in buf.getvalue().splitlines() if "first" in line or "second" in line]
    assert len(printed) == 2
    assert all(re.match(r"\s*\d+\.\d s  (first|second)$", line) for line in printed), printed


def test_degrades_without_rich_and_matplotlib(monkeypatch, tmp_path, capsys):
    monkeypatch.setitem(sys.modules, "rich", None)
    console = report.make_console()
    assert isinstance(console, report.PlainConsole)
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    assert harness.make_plots(_recorded_results(), tmp_path, console) == []
    assert "plots skipped: matplotlib is not installed" in capsys.readouterr().out


def test_importing_the_bench_pulls_in_no_rich_or_matplotlib():
    code = ("import sys, flashtriton.bench.harness, flashtriton.bench.plots, flashtriton.bench.report;"
            "bad = [m for m in ('matplotlib', 'rich') if m in sys.modules];"
            "assert not bad, bad")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]


def test_problem_describes_itself():
    p = Problem(batch=2, heads=2, seqlen=32, headdim=16, causal=True, dtype=torch.bfloat16, device="cpu")
    assert p.describe() == "bf16 b2 h2 s32 d16 causal"


def test_one_problem_as_the_grid_makes_it_and_problems_parsed():
    """``harness.bench_problem`` (the scripts' one problem) is the grid's own problem, and
    ``harness.parse_problems`` (their ``--problems``) reads pass:headdim:causal and refuses
    anything else."""
    problem = harness.bench_problem(64, 1024, True)
    assert (problem.batch, problem.heads, problem.seqlen, problem.causal) == (16, 32, 1024, True)
    assert problem.dtype == torch.bfloat16 and problem.device == "cuda"
    grid = harness.GridSpec(headdims=(128,), seqlens=(4096,), dtypes=("fp16",), causal=(False,))
    assert grid.problems("cpu") == [harness.bench_problem(128, 4096, False, "fp16", "cpu")]
    assert harness.parse_problems("fwd:128:0,bwd:64:1") == [("fwd", 128, False),
                                                            ("bwd", 64, True)]
    for bad in ("fwd:128", "fwd_bwd:64:0", "fwd:64:yes", "fwd:d64:0"):
        with pytest.raises(ValueError, match="pass:headdim:causal"):
            harness.parse_problems(bad)
