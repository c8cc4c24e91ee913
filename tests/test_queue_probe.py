"""scripts/queue_probe.py's option parsing (its probes run on the H200 only)."""

import pytest
from helpers import load_script


@pytest.fixture(scope="module")
def probe():
    return load_script("queue_probe")


def test_problems_are_parsed_and_bad_ones_refused(probe):
    assert probe.parse_problems("fwd:128:0,bwd:64:1") == [("fwd", 128, False), ("bwd", 64, True)]
    for bad in ("fwd:128", "fwd_bwd:64:0", "fwd:64:yes"):
        with pytest.raises(ValueError, match="pass:headdim:causal"):
            probe.parse_problems(bad)
    problem = probe.bench_problem(64, True, 1024)
    assert (problem.batch, problem.heads, problem.seqlen, problem.causal) == (16, 32, 1024, True)
