"""scripts/profile_pass.py's call, under the interpreter on the CPU or compiled on a GPU: the
bench's problem and provider setup, the pass it names (a backward without accumulating
gradients across calls), and a clear refusal of an unknown provider."""

import pytest
import torch

from flashtriton.bench.providers import Problem
from flashtriton.reference import attention_ref
from helpers import DEVICE, assert_close, load_script


@pytest.fixture(scope="module")
def profile_pass():
    return load_script("profile_pass")


PROBLEM = Problem(batch=1, heads=2, seqlen=33, headdim=16, causal=True, dtype=torch.float32,
                  device=DEVICE)


def test_forward_is_the_providers_call(profile_pass):
    step, runner = profile_pass.build_pass("flashtriton", "fwd", PROBLEM)
    out = step()
    q, k, v = (t.detach() for t in runner.leaves)
    assert_close(out, attention_ref(q, k, v, causal=True)[0],
                 attention_ref(q, k, v, causal=True, upcast=False)[0])


def test_backward_does_not_accumulate(profile_pass):
    step, runner = profile_pass.build_pass("flashtriton", "bwd", PROBLEM)
    step()
    first = [t.grad.clone() for t in runner.leaves]
    step()
    for a, b in zip(first, (t.grad for t in runner.leaves)):
        # not bit-equal on the GPU, where dQ is summed by atomics in any order; an accumulated
        # gradient would be twice the first
        assert torch.allclose(a, b, rtol=1e-5, atol=1e-6), \
            "a second call added to the first call's gradients"


def test_unknown_provider_refused(profile_pass):
    with pytest.raises(SystemExit, match="unknown 'cudnn'"):
        profile_pass.build_pass("cudnn", "fwd", PROBLEM)
