"""scripts/ab_bench.py on session 14's committed A/B of the backward (four bench runs, old /
new / new / old): one line per row of the runs, its change and its ratio to cuDNN computed
here from the JSON independently."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RUN = str(ROOT / "bench/results/2026-11-30-s14-ab-bwd-dq-producer-{}.json")
OLD, NEW = [RUN.format("1-old"), RUN.format("4-old")], [RUN.format("2-new"), RUN.format("3-new")]


def tflops(path, provider, headdim, seqlen, causal):
    rows = json.loads(Path(path).read_text())["results"]
    (r,) = [r for r in rows if (r["provider"], r["headdim"], r["seqlen"], r["causal"])
            == (provider, headdim, seqlen, causal)]
    return r["tflops"]


def run(*args):
    return subprocess.run([sys.executable, str(ROOT / "scripts/ab_bench.py"), *args],
                          capture_output=True, text=True, check=True).stdout.splitlines()


@pytest.mark.parametrize("headdim,seqlen,causal", [(128, 1024, False), (64, 16384, True)])
def test_a_row_matches_the_files(headdim, seqlen, causal):
    out = run("--old", *OLD, "--new", *NEW)
    assert out[0].split()[:5] == ["pass", "dtype", "d", "seqlen", "causal"]
    assert len(out) - 1 == 12  # 2 head dims x 3 lengths x causal or not, backward only
    (line,) = [ln for ln in out[1:]
               if ln.split()[:5] == ["bwd", "bf16", str(headdim), str(seqlen), str(causal)]]
    old = [tflops(p, "flashtriton", headdim, seqlen, causal) for p in OLD]
    new = [tflops(p, "flashtriton", headdim, seqlen, causal) for p in NEW]
    change = (sum(new) / sum(old) - 1) * 100
    ratio_new = sum(tflops(p, "flashtriton", headdim, seqlen, causal)
                    / tflops(p, "sdpa_cudnn", headdim, seqlen, causal) for p in NEW) / 2
    fields = line.split()
    assert fields[5:7] == [f"{x:.1f}" for x in old] and fields[7:9] == [f"{x:.1f}" for x in new]
    assert fields[9] == f"{change:+.1f}%", (line, change)
    assert fields[-1] == f"{ratio_new:.3f}", (line, ratio_new)


def test_runs_of_one_side_may_be_swapped():
    """The change is of the means, so the order of a side's runs does not matter."""
    a = [ln.split()[9] for ln in run("--old", *OLD, "--new", *NEW)[1:]]
    b = [ln.split()[9] for ln in run("--old", *OLD[::-1], "--new", *NEW[::-1])[1:]]
    assert a == b


def test_rows_of_two_dtypes_stay_apart(tmp_path):
    """The same row in bf16 and fp16 is two lines, each with its own figures (a key without
    the dtype would keep one of them for both)."""
    def both_dtypes(path, fp16_factor):
        data = json.loads(Path(path).read_text())
        extra = [{**r, "dtype": "fp16", "ms": r["ms"] / fp16_factor,
                  "tflops": r["tflops"] * fp16_factor} for r in data["results"]]
        out = tmp_path / f"{Path(path).stem}-{fp16_factor}.json"
        out.write_text(json.dumps({**data, "results": data["results"] + extra}))
        return str(out)

    old = [both_dtypes(p, 1.0) for p in OLD]
    new = [both_dtypes(p, 2.0) for p in NEW]  # new fp16 twice new bf16's speed
    lines = run("--old", *old, "--new", *new)[1:]
    assert len(lines) == 24
    key = ["bwd", "{}", "128", "1024", "False"]
    (bf16,) = [ln for ln in lines if ln.split()[:5] == [k.format("bf16") for k in key]]
    (fp16,) = [ln for ln in lines if ln.split()[:5] == [k.format("fp16") for k in key]]
    change = (2 * sum(tflops(p, "flashtriton", 128, 1024, False) for p in NEW)
              / sum(tflops(p, "flashtriton", 128, 1024, False) for p in OLD) - 1) * 100
    assert fp16.split()[9] == f"{change:+.1f}%", fp16
    assert bf16.split()[9] != fp16.split()[9]


@pytest.mark.parametrize("clocked", [False, True], ids=["plain", "clock"])
def test_inproc_pairs_each_round(tmp_path, clocked):
    """--inproc: both trees timed in each run; the change is the median of the per-round
    changes (the baseline's ms over ours, minus 1), with their range. Runs made with --clock
    add each side's median SM clock as the last column."""
    def row(provider, rounds):
        ms = sorted(rounds)[1]
        r = {"provider": provider, "pass": "bwd", "dtype": "bf16", "batch": 4, "heads": 32,
             "seqlen": 4096, "headdim": 64, "causal": False, "ms": ms,
             "tflops": 1.0 / ms, "peak_mib": None, "rounds_ms": rounds}
        if clocked:
            r["sm_mhz"] = {"flashtriton_base": 1701.0, "flashtriton": 1689.0}.get(provider,
                                                                                   1750.0)
        return r

    meta = dict.fromkeys(("gpu", "torch", "triton", "cuda", "date", "commit"), "x")
    timings = [([1.0, 0.9, 1.1], [1.02, 0.95, 1.1]), ([0.8, 1.0, 1.0], [0.81, 1.03, 0.99])]
    runs, paired = [], []
    for i, (ours, base) in enumerate(timings):
        path = tmp_path / f"inproc-{i}.json"
        path.write_text(json.dumps({"meta": meta, "results": [
            row("flashtriton_base", base), row("flashtriton", ours),
            row("sdpa_cudnn", [0.5, 0.5, 0.5])]}))
        runs.append(str(path))
        paired += [b / o - 1 for o, b in zip(ours, base)]
    out = run("--inproc", *runs)
    assert out[0].split()[:5] == ["pass", "dtype", "d", "seqlen", "causal"]
    (line,) = out[1:]
    fields = line.split()
    paired.sort()  # six changes: the median is the mean of the middle two
    assert fields[9] == f"{(paired[2] + paired[3]) * 50:+.1f}%"
    assert fields[10] == f"{paired[0] * 100:+.1f}..{paired[-1] * 100:+.1f}%"
    # ours / cuDNN in both runs: 1.0 against 2.0 TFLOP/s; then the clocks, if recorded
    assert fields[13:] == (["0.500", "1701/1689"] if clocked else ["0.500"])
    assert out[0].endswith("MHz old/new") == clocked


def test_inproc_refuses_old_and_new():
    with pytest.raises(subprocess.CalledProcessError):
        run("--inproc", OLD[0], "--old", OLD[0])
