"""The ladder kernels against the float64 reference (STYLE.md's tolerance rule).

Under the interpreter (CPU) the shapes are small and the tiles 16x16, so that several Q and K/V
blocks, partial last blocks and a single-row problem are all exercised. FLASHTRITON_LARGE=1 (on
the GPU) adds the spec's head dim at a longer sequence with the variants' own default blocks.
"""

from __future__ import annotations

import pytest
import torch

from flashtriton.ladder import VARIANTS, LadderConfig, compute_padded_headdim
from flashtriton.ladder import v1 as ladder_v1
from flashtriton.reference import attention_ref
from helpers import DEVICE, LARGE, assert_close, poison_like, randn

LADDER = ["v1", "v2", "v2_kt", "v2_pad"]
DTYPES = [pytest.param(torch.float32, id="fp32"), pytest.param(torch.bfloat16, id="bf16")]
TILES = LadderConfig(block_m=16, block_n=16, num_warps=4, num_stages=1)

# (batch, seqlen_q, seqlen_k, heads, headdim)
SHAPES = [
    pytest.param(2, 65, 47, 2, 32, id="b2-sq65-sk47-h2-d32"),
    pytest.param(1, 1, 17, 2, 64, id="b1-sq1-sk17-h2-d64"),
    pytest.param(1, 17, 63, 1, 40, id="b1-sq17-sk63-h1-d40"),
    pytest.param(1, 33, 1, 3, 16, id="b1-sq33-sk1-h3-d16"),
]
if LARGE:
    SHAPES += [pytest.param(2, 1025, 2048, 4, 32, id="b2-sq1025-sk2048-h4-d32"),
               pytest.param(1, 1024, 1029, 2, 128, id="b1-sq1024-sk1029-h2-d128")]


def _inputs(batch, seqlen_q, seqlen_k, heads, head_dim, dtype):
    q = randn(batch, seqlen_q, heads, head_dim, dtype=dtype)
    k = randn(batch, seqlen_k, heads, head_dim, dtype=dtype)
    v = randn(batch, seqlen_k, heads, head_dim, dtype=dtype)
    return q, k, v


def _check(name, q, k, v, out, softmax_scale=None):
    ref64, _ = attention_ref(q, k, v, softmax_scale=softmax_scale, upcast=True)
    lowp, _ = attention_ref(q, k, v, softmax_scale=softmax_scale, upcast=False)
    assert out.dtype == q.dtype, f"{name}: dtype {out.dtype} != {q.dtype}"
    assert_close(out, ref64.to(torch.float64), lowp, name=name)


def _config(name, dtype, head_dim):
    return TILES if DEVICE == "cpu" else VARIANTS[name].default_config(dtype, head_dim)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("batch, seqlen_q, seqlen_k, heads, head_dim", SHAPES)
@pytest.mark.parametrize("name", LADDER)
def test_ladder_matches_reference(name, batch, seqlen_q, seqlen_k, heads, head_dim, dtype):
    torch.manual_seed(seqlen_q * 7 + seqlen_k)
    q, k, v = _inputs(batch, seqlen_q, seqlen_k, heads, head_dim, dtype)
    cfg = _config(name, dtype, head_dim)
    out = VARIANTS[name].forward(q, k, v, config=cfg)
    _check(name, q, k, v, out)


@pytest.mark.parametrize("name", ["v2", "v2_kt", "v2_pad"])
def test_every_output_element_written(name):
    """A NaN-filled output must come back fully overwritten."""
    q, k, v = _inputs(1, 37, 29, 2, 24, torch.float32)
    out = poison_like(q)
    VARIANTS[name].forward(q, k, v, config=_config(name, q.dtype, 24), out=out)
    _check(name, q, k, v, out)


@pytest.mark.parametrize("name", LADDER)
def test_strided_views_and_scale(name):
    """Non-contiguous q/k/v (head-major storage seen through a transpose, every other head) and a
    non-default softmax scale."""
    torch.manual_seed(3)
    base_q = randn(1, 4, 21, 32, dtype=torch.bfloat16)  # (batch, heads, seq, dim) storage
    base_k = randn(1, 4, 35, 32, dtype=torch.bfloat16)
    base_v = randn(1, 4, 35, 32, dtype=torch.bfloat16)
    q, k, v = (t.transpose(1, 2)[:, :, ::2] for t in (base_q, base_k, base_v))
    assert not q.is_contiguous()
    out = VARIANTS[name].forward(q, k, v, softmax_scale=0.3, config=_config(name, q.dtype, 32))
    _check(name, q, k, v, out, softmax_scale=0.3)


@pytest.mark.parametrize("name", LADDER)
def test_deterministic(name):
    q, k, v = _inputs(1, 19, 40, 1, 16, torch.bfloat16)
    cfg = _config(name, q.dtype, 16)
    assert torch.equal(VARIANTS[name].forward(q, k, v, config=cfg), VARIANTS[name].forward(q, k, v, config=cfg))


@pytest.mark.parametrize("dtype", DTYPES)
def test_production_matches_reference(dtype):
    """The ladder's top rung is the public forward; its blocks come from flashtriton.configs."""
    torch.manual_seed(5)
    q, k, v = _inputs(2, 65, 47, 2, 32, dtype)
    out = VARIANTS["production"].forward(q, k, v)
    _check("production", q, k, v, out)


def test_production_refuses_a_config():
    q, k, v = _inputs(1, 16, 16, 1, 16, torch.float32)
    with pytest.raises(ValueError, match="config"):
        VARIANTS["production"].forward(q, k, v, config=TILES)


def test_bad_inputs_name_the_argument():
    q, k, v = _inputs(1, 16, 16, 2, 16, torch.float32)
    with pytest.raises(ValueError, match="^k:"):
        VARIANTS["v2"].forward(q, k[:, :, :1], v[:, :, :1])
    with pytest.raises(TypeError, match="dtypes differ"):
        VARIANTS["v1"].forward(q, k.half(), v.half())
    with pytest.raises(ValueError, match="^kt:"):
        VARIANTS["v2_kt"].forward(q, k, v, kt=k)


def test_compute_padded_headdim_is_the_spec_rule():
    assert [compute_padded_headdim(d) for d in (1, 16, 32, 40, 64, 80, 96, 128, 129)] == \
        [2, 32, 64, 64, 128, 128, 128, 256, 256]
    assert compute_padded_headdim(0) == 1


def test_registry_names_the_kernels_that_run():
    """Each variant's kernel_name is the @triton.jit function its launcher calls (ncu and SASS
    are matched by this name)."""
    import flashtriton.ladder.v2 as m2
    import flashtriton.ladder.v2_kt as m2kt

    assert set(VARIANTS) == {"v1", "v2", "v2_kt", "v2_pad", "production"}
    modules = {"v1": ladder_v1, "v2": m2, "v2_kt": m2kt, "v2_pad": m2}
    for name, mod in modules.items():
        assert hasattr(mod, VARIANTS[name].kernel_name), name
        assert VARIANTS[name].name == name
    assert VARIANTS["v2_pad"].head_dim_tile(32) == 64 and VARIANTS["v2"].head_dim_tile(32) == 32


def test_report_writes_markdown_json_and_charts(tmp_path):
    """`flashtriton ladder --report DIR` on whatever machine runs the tests (on CPU: the tiny
    interpreter problem, correctness and model columns only)."""
    pytest.importorskip("matplotlib", reason="the report's charts need matplotlib (the bench extra)")
    from flashtriton.ladder.report import build_report

    report = build_report(str(tmp_path), problems=("spec",), variants=["v1", "v2"], profile=False)
    rows = report["problems"][0]["results"]
    assert [r["variant"] for r in rows] == ["v1", "v2"] and all(r["check"]["ok"] for r in rows)
    text = (tmp_path / "report.md").read_text()
    assert "| v1 |" in text and "| v2 |" in text
    assert (tmp_path / "spec_time.png").stat().st_size > 0 and (tmp_path / "spec_bytes.png").stat().st_size > 0
