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
    assert out[0].split()[:4] == ["pass", "d", "seqlen", "causal"]
    assert len(out) - 1 == 12  # 2 head dims x 3 lengths x causal or not, backward only
    (line,) = [ln for ln in out[1:]
               if ln.split()[:4] == ["bwd", str(headdim), str(seqlen), str(causal)]]
    old = [tflops(p, "flashtriton", headdim, seqlen, causal) for p in OLD]
    new = [tflops(p, "flashtriton", headdim, seqlen, causal) for p in NEW]
    change = (sum(new) / sum(old) - 1) * 100
    ratio_new = sum(tflops(p, "flashtriton", headdim, seqlen, causal)
                    / tflops(p, "sdpa_cudnn", headdim, seqlen, causal) for p in NEW) / 2
    fields = line.split()
    assert fields[4:6] == [f"{x:.1f}" for x in old] and fields[6:8] == [f"{x:.1f}" for x in new]
    assert fields[8] == f"{change:+.1f}%", (line, change)
    assert fields[-1] == f"{ratio_new:.3f}", (line, ratio_new)


def test_runs_of_one_side_may_be_swapped():
    """The change is of the means, so the order of a side's runs does not matter."""
    a = [ln.split()[8] for ln in run("--old", *OLD, "--new", *NEW)[1:]]
    b = [ln.split()[8] for ln in run("--old", *OLD[::-1], "--new", *NEW[::-1])[1:]]
    assert a == b
