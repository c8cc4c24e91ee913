"""scripts/ab_compare.py on two committed sweep files (session 8's prefetch A/B): every config
row of both files appears once, with the figures read from the JSON here independently."""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OLD = ROOT / "bench/results/2026-11-29-s8-ab-prefetch-before.json"
NEW = ROOT / "bench/results/2026-11-29-s8-ab-prefetch-after.json"


def configs(path):
    rows = json.loads(path.read_text())["results"]
    return [r for r in rows if "provider" not in r]


def test_side_by_side_rows_match_the_files():
    out = subprocess.run([sys.executable, str(ROOT / "scripts/ab_compare.py"), str(OLD), str(NEW)],
                         capture_output=True, text=True, check=True).stdout.splitlines()
    assert out[0].split()[:4] == ["pass", "d", "seqlen", "causal"]
    old, new = configs(OLD), configs(NEW)
    assert len(out) - 1 == len(old) == len(new)
    for a, b in zip(old, new):
        shape = (a["pass_"], str(a["headdim"]), str(a["seqlen"]), str(a["causal"]))
        matching = [line for line in out[1:] if tuple(line.split()[:4]) == shape
                    and f"{a['block_m']}x{a['block_n']}" in line
                    and ("pingpong" in line) == a["pingpong"]]
        assert len(matching) == 1, (shape, a["block_m"], a["pingpong"])
        fields = matching[0].split()
        assert f"{a['tflops']:.1f}" in fields
        if b["status"] == "ok":
            assert f"{b['tflops']:.1f}" in fields and f"{b['tflops'] / a['tflops']:.3f}" in fields
        else:
            assert b["status"] in fields


def test_usage_on_wrong_arguments():
    run = subprocess.run([sys.executable, str(ROOT / "scripts/ab_compare.py"), str(OLD)],
                         capture_output=True, text=True)
    assert run.returncode == 2 and "ab_compare.py OLD.json NEW.json" in run.stderr
