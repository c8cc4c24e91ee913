"""scripts/racecheck_summary.py on a real racecheck log (tests/data/README.md), and
scripts/gpu_tune.sh's racecheck step with a stand-in compute-sanitizer that prints it; its
tests step (time limit, TESTS_FILES, TESTS_PART) with a stand-in python3."""
import gzip
import shutil
import subprocess
import sys
import time
from pathlib import Path

from helpers import load_script, stub_tool_env

ROOT = Path(__file__).resolve().parents[1]
rs = load_script("racecheck_summary")

EXCERPT = Path(__file__).parent / "data" / "racecheck_d256_excerpt.log"


def test_parse_real_excerpt():
    hazards, summary = rs.parse(EXCERPT.read_text().splitlines())
    assert summary == "RACECHECK SUMMARY: 3087 hazards displayed (3087 errors, 0 warnings)"
    assert len(hazards) == 9
    first = hazards[0]
    assert (first.severity, first.kind, first.address) == ("Error", "RAW", 0x38798)
    assert first.kernel == "_attn_bwd_dq_hs"
    assert first.writer == (31, "0x62b0") and first.reader == (128, "0x140")
    assert first.value == "0"
    assert [h.kernel for h in hazards].count("_attn_fwd_ws") == 3


def test_groups_split_at_address_gaps():
    rows = rs.group(rs.parse(EXCERPT.read_text().splitlines())[0])
    dq = [r for r in rows if r["kernel"] == "_attn_bwd_dq_hs"]
    # 0x38798 and 0x38799 are one run, 0x3879f another
    assert [(r["first"], r["last"], r["hazards"]) for r in dq] == [
        (0x38798, 0x38799, 2), (0x3879f, 0x3879f, 1)]
    assert dq[0]["readers"] == [128, 160] and dq[0]["writers"] == [31]
    assert sum(r["hazards"] for r in rows) == 9
    assert rows[0]["hazards"] >= rows[-1]["hazards"]


def test_address_runs_and_threads():
    assert rs.address_runs([5, 3, 4, 9, 9, 11, 10]) == [(3, 5), (9, 11)]
    assert rs.threads([128 + 32 * w for w in range(8)]) == "warps 4-11, lane 0"
    assert rs.threads([31]) == "warp 0, lane 31"
    assert rs.threads([31, 95, 127]) == "warps 0,2-3, lane 31"
    assert rs.threads([0, 1, 2, 40]) == "warps 0-1, lanes 0-2,8"


def test_cli_reads_gzip_and_refuses_other_logs(tmp_path):
    gz = tmp_path / "racecheck.log.gz"
    with gzip.open(gz, "wt") as f:
        f.write(EXCERPT.read_text())
    out = subprocess.run([sys.executable, str(ROOT / "scripts" / "racecheck_summary.py"),
                          str(gz)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "9 hazards parsed, in 6 groups" in out.stdout
    assert "_attn_fwd_ws: 2 RAW (2 of them errors) on 2 bytes at 0x30400..0x30401" in out.stdout
    other = tmp_path / "memcheck.log"
    other.write_text("========= ERROR SUMMARY: 0 errors\n")
    out = subprocess.run([sys.executable, str(ROOT / "scripts" / "racecheck_summary.py"),
                          str(other)], capture_output=True, text=True)
    assert out.returncode == 2 and "no racecheck hazard or summary line" in out.stderr


# gpu_tune.sh's settings: a test gives the ones it means, none is inherited (the GPU suite runs
# under `TESTS_PART=rest scripts/gpu_tune.sh tests`, whose variables pytest's workers inherit)
GPU_TUNE_VARS = ("TESTS_PART", "TESTS_FILES", "TESTS_WORKERS", "TESTS_LIMIT", "SWEEPS",
                 "SANITIZE_TOOLS", "SANITIZE_ARGS")


def _gpu_tune_env(tmp_path, tool, body, **extra):
    """``stub_tool_env`` for a gpu_tune.sh run: only ``extra``'s settings of GPU_TUNE_VARS."""
    env = stub_tool_env(tmp_path, tool, body, **extra)
    return {k: v for k, v in env.items() if k not in GPU_TUNE_VARS or k in extra}


def test_gpu_tune_racecheck_step(tmp_path):
    """The sanitize step with racecheck: every hazard printed, the log gzipped, the summary
    beside it (compute-sanitizer replaced by a script that prints the real excerpt)."""
    shutil.copy(EXCERPT, tmp_path / "excerpt.log")
    env = _gpu_tune_env(tmp_path, "compute-sanitizer",
                        f'echo "$@" > {tmp_path}/args.txt; cat {tmp_path}/excerpt.log',
                        OUT=str(tmp_path / "out"), SANITIZE_TOOLS="racecheck",
                        SANITIZE_ARGS="--d256-only")
    run = subprocess.run(["bash", str(ROOT / "scripts" / "gpu_tune.sh"), "sanitize"], env=env,
                         capture_output=True, text=True, cwd=ROOT)
    assert run.returncode == 0, run.stderr
    args = (tmp_path / "args.txt").read_text().split()
    assert args[:2] == ["--tool", "racecheck"] and "--print-limit" in args
    assert args[args.index("--print-limit") + 1] == "0"
    assert args[-3:] == ["python3", "scripts/sanitize.py", "--d256-only"]
    out = tmp_path / "out"
    assert not (out / "sanitizer-racecheck.log").exists()
    assert gzip.open(out / "sanitizer-racecheck.log.gz", "rt").read() == EXCERPT.read_text()
    summary = (out / "sanitizer-racecheck-summary.txt").read_text()
    assert summary.startswith("RACECHECK SUMMARY: 3087 hazards displayed")
    assert "9 hazards parsed, in 6 groups" in summary


def _tests_step(tmp_path, body, **env_extra):
    """gpu_tune.sh's tests step with python3 replaced by the bash lines ``body``, which find
    the file ``args.txt`` (removed first) in $ARGS_DIR; returns the finished run and
    args.txt's words (None when python3 never ran)."""
    args_file = tmp_path / "args.txt"
    args_file.unlink(missing_ok=True)
    env = _gpu_tune_env(tmp_path, "python3", body, OUT=str(tmp_path / "out"),
                        ARGS_DIR=str(tmp_path), **env_extra)
    run = subprocess.run(["bash", str(ROOT / "scripts" / "gpu_tune.sh"), "tests"], env=env,
                         capture_output=True, text=True, cwd=ROOT)
    return run, args_file.read_text().split() if args_file.exists() else None


def test_gpu_tune_tests_step_interrupts_pytest_before_its_limit(tmp_path):
    """The tests step: eight workers on an 80 GB GPU, the files of TESTS_FILES, and pytest
    sent SIGINT 30 s before TESTS_LIMIT, so that it can still print its summary (python3 and
    nvidia-smi replaced by scripts: the first records its arguments and what it was sent)."""
    body = ('echo "$@" > $ARGS_DIR/args.txt; trap \'echo "3 failed, 9 passed (interrupted)"; '
            'exit 2\' INT; for i in $(seq 100); do sleep 0.1; done; echo "not interrupted"')
    smi = tmp_path / "bin" / "nvidia-smi"
    smi.parent.mkdir()
    smi.write_text("#!/usr/bin/env bash\necho 81559\n")
    smi.chmod(0o755)
    start = time.monotonic()
    run, args = _tests_step(tmp_path, body, TESTS_LIMIT="32",
                            TESTS_FILES="tests/test_configs.py tests/test_sdpa.py")
    assert run.returncode == 0, run.stderr
    assert time.monotonic() - start < 9  # interrupted after 2 s, not run out to 10 s
    assert "tests: 8 workers (81559 MiB GPU memory)" in run.stdout
    assert args[:5] == ["-m", "pytest", "-v", "-n", "8"]
    assert "tests/test_configs.py" in args and "tests/test_sdpa.py" in args and "tests" not in args
    log = (tmp_path / "out" / "gpu-tests.log").read_text()
    assert "3 failed, 9 passed (interrupted)" in log and "not interrupted" not in log
    assert "3 failed, 9 passed (interrupted)" in run.stdout  # the step's grep of the log


RECORD = 'echo "$@" > $ARGS_DIR/args.txt; echo "1 passed"'  # a python3 that records its words


def test_gpu_tune_tests_parts_split_the_suite_in_two(tmp_path):
    """TESTS_PART=bwd and rest: two disjoint lists of existing test files that together are
    every tests/test_*.py; TESTS_FILES given across lines reaches pytest as one list; a wrong
    part, or a part with TESTS_FILES, stops before pytest runs."""
    everything = {str(p.relative_to(ROOT)) for p in (ROOT / "tests").glob("test_*.py")}
    parts = {}
    for part in ("bwd", "rest"):
        run, args = _tests_step(tmp_path, RECORD, TESTS_LIMIT="40", TESTS_PART=part)
        assert run.returncode == 0, run.stderr
        parts[part] = {a for a in args if a.startswith("tests/")}
        assert parts[part] and parts[part] <= everything, parts[part] - everything
    assert "tests/test_gluon_bwd.py" in parts["bwd"] and len(parts["bwd"]) == 6
    assert not parts["bwd"] & parts["rest"] and parts["bwd"] | parts["rest"] == everything

    run, args = _tests_step(tmp_path, RECORD, TESTS_LIMIT="40",
                            TESTS_FILES="tests/test_configs.py\ntests/test_sdpa.py\n")
    assert run.returncode == 0, run.stderr
    assert args[args.index("no:cacheprovider") + 1:][:2] == ["tests/test_configs.py",
                                                             "tests/test_sdpa.py"]

    for extra, message in (({"TESTS_PART": "half"}, "TESTS_PART must be all, bwd or rest"),
                           ({"TESTS_PART": "bwd", "TESTS_FILES": "tests/test_sdpa.py"},
                            "not both")):
        run, args = _tests_step(tmp_path, RECORD, TESTS_LIMIT="40", **extra)
        assert run.returncode == 2 and message in run.stderr and args is None
