"""`flashtriton bench --baseline-src`: another tree's package loaded beside this one as the
provider flashtriton_base (bench/baseline.py), so that an A/B times both in one process. Here
the "other tree" is a copy of this one: its kernels run (under the interpreter on CPU) and
must give the same results as this package's, from modules and custom ops of its own."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest
import torch
from helpers import DEVICE, randn

import flashtriton
from flashtriton.bench import baseline, harness, results

ROOT = Path(__file__).resolve().parents[1]
TINY = ("--device", DEVICE, "--tokens", "64", "--hidden", "32", "--headdims", "16",
        "--seqlens", "32", "--dtypes", "bf16", "--warmup-ms", "1", "--rep-ms", "2", "--plain")


@pytest.fixture(scope="module")
def other_tree(tmp_path_factory):
    """A copy of this tree's src/ with a COMMIT file, as scripts/branch_trees.sh writes."""
    src = tmp_path_factory.mktemp("other") / "src"
    shutil.copytree(ROOT / "src/flashtriton", src / "flashtriton",
                    ignore=shutil.ignore_patterns("__pycache__"))
    (src / "COMMIT").write_text("0ld5678\n")
    return src


def parse(*argv):
    import argparse

    parser = argparse.ArgumentParser()
    harness.add_cli_arguments(parser)
    return parser.parse_args(list(argv))


def test_rename_moves_imports_and_op_namespace():
    source = ("from flashtriton.kernels import fwd\n"
              "import flashtriton\n"
              "    import flashtriton.kernels.bwd as bwd\n"
              "import flashtriton_other\n"
              '@torch.library.custom_op("flashtriton::attn_fwd", mutates_args=())\n'
              "x = 'flashtriton is named in a string'\n")
    assert baseline.rename(source) == (
        "from flashtriton_base.kernels import fwd\n"
        "import flashtriton_base as flashtriton\n"
        "    import flashtriton_base.kernels.bwd as bwd\n"
        "import flashtriton_other\n"
        '@torch.library.custom_op("flashtriton_base::attn_fwd", mutates_args=())\n'
        "x = 'flashtriton is named in a string'\n")
    with pytest.raises(ValueError, match="with 'as'"):
        baseline.rename("import flashtriton.kernels\n")


def test_the_baseline_runs_beside_this_package(other_tree):
    module, description = baseline.load(other_tree)
    assert description == f"{other_tree.resolve()} at 0ld5678"
    assert baseline.load(other_tree)[0] is module  # loaded once
    assert module.flash_attn_func is not flashtriton.flash_attn_func
    ours = {name for name in sys.modules if name.startswith("flashtriton_base")}
    assert "flashtriton_base.kernels.fwd" in ours and "flashtriton_base.ops" in ours
    for name in ours:  # every module of the copy is the copy's, none is this tree's
        file = getattr(sys.modules[name], "__file__", None)
        assert file is None or Path(file).resolve().is_relative_to(
            Path(module.__file__).resolve().parent), (name, file)
    assert hasattr(torch.ops.flashtriton_base, "attn_fwd")
    q, k, v = (randn(1, 37, 2, 16, dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    grads = []
    for fn in (flashtriton.flash_attn_func, module.flash_attn_func):
        out = fn(q, k, v, causal=True)
        out.backward(torch.ones_like(out))
        grads.append((out.detach(), *(t.grad for t in (q, k, v))))
        for t in (q, k, v):
            t.grad = None
    # the same kernels on the same data: the same output bits; the gradients within a rounding
    # of their 16-bit type (on a GPU, dQ's atomic additions may come in another order)
    assert torch.equal(grads[0][0], grads[1][0])
    for a, b in zip(grads[0][1:], grads[1][1:]):
        torch.testing.assert_close(a, b)


def test_cli_times_both_round_by_round(other_tree, tmp_path, capsys):
    out = tmp_path / "ab.json"
    assert harness.run_cli(parse(*TINY, "--causal", "no", "--passes", "fwd", "--rounds", "2",
                                 "--providers", "flashtriton_base", "flashtriton",
                                 "--baseline-src", str(other_tree), "--out", str(out))) == 0
    printed = capsys.readouterr().out
    assert "ours/base" in printed
    rows = results.read_results(out)["results"]
    assert [r["provider"] for r in rows] == ["flashtriton_base", "flashtriton"]
    assert rows[0]["note"] == f"baseline {other_tree.resolve()} at 0ld5678"
    assert all(len(r["rounds_ms"]) == 2 for r in rows)


def test_cli_refuses_what_it_cannot_use(tmp_path, capsys):
    assert harness.run_cli(parse(*TINY, "--baseline-src", str(tmp_path))) == 2
    assert "has no flashtriton/__init__.py" in capsys.readouterr().out
    assert harness.run_cli(parse("--feature", "softcap", "--baseline-src", str(tmp_path),
                                 "--plain")) == 2
    assert "applies to the attention grid" in capsys.readouterr().out
