"""`flashtriton bench --feature ...` on small shapes: the FLOP count of each feature against a
brute-force count from the mask, the document lengths, the correctness gate (wrong providers,
registered here only, are marked wrong and not timed), the FlexAttention mask/score mods against the
reference, end-to-end runs of `--feature window`, `--feature varlen` and `--feature float8`, and
the float8 gate (against the reference on the dequantized inputs; dropped descales are caught).

Runs on CPU under the Triton interpreter (flashtriton) and natively on a GPU. FlexAttention has no
backward on CPU (torch raises "FlexAttention does not support backward on CPU"), so on CPU its rows
are recorded as skipped ("needs a CUDA device") and its mods are checked here with eager
flex_attention, forward only. On a GPU these tests leave flex out of the timed runs: it compiles per
configuration, which belongs to the benchmark run, not the test suite.
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import warnings

import pytest
import torch
from helpers import DEVICE

from flashtriton.bench import feature_providers, features, harness, results
from flashtriton.bench.feature_providers import FEATURE_PROVIDERS
from flashtriton.bench.features import (FEATURE_FULL, FEATURE_QUICK, FEATURES, FeatureProblem,
                                        FeatureSpec, document_lengths, visible_pairs)
from flashtriton.bench.providers import Provider
from flashtriton.reference import attention_ref, visible_mask

TIMING = harness.Timing(device=DEVICE, warmup_ms=1, rep_ms=1)
# batch 1 x seqlen 32, heads 2 x headdim 16: a few interpreted kernel calls per configuration.
TINY = FeatureSpec(quick=True, headdims=(16,), passes=("fwd", "bwd"), causal=(True,), seqlens=(32,),
                   windows=(8,), distributions=("uniform",), tokens=32, hidden=32)
FLEX = ("flex",) if DEVICE == "cpu" else ()  # on CPU: recorded as skipped; on a GPU: not compiled here


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    harness.add_cli_arguments(parser)
    return parser.parse_args(list(argv))


def brute_pairs(seqlen_q, seqlen_k, causal, window_size=(-1, -1)) -> int:
    mask = visible_mask(seqlen_q, seqlen_k, causal=causal, window_size=window_size)
    return seqlen_q * seqlen_k if mask is None else int(mask.sum())


# ----------------------------------------------------------------------------- FLOPs
@pytest.mark.parametrize("sq, sk, causal, window", [
    pytest.param(1, 1, True, (-1, -1), id="s1-causal"),
    pytest.param(17, 17, False, (-1, -1), id="s17-full"),
    pytest.param(65, 65, True, (-1, -1), id="s65-causal"),
    pytest.param(65, 65, True, (7, -1), id="s65-causal-w7"),
    pytest.param(129, 129, True, (0, 0), id="s129-causal-w0"),
    pytest.param(63, 63, True, (200, 0), id="s63-causal-w200-wider-than-seq"),
    pytest.param(127, 127, False, (5, 3), id="s127-w5/3"),
    pytest.param(17, 65, True, (9, -1), id="sq17-sk65-causal-w9"),
    pytest.param(65, 17, True, (-1, -1), id="sq65-sk17-causal-empty-rows"),
    pytest.param(65, 17, False, (4, 2), id="sq65-sk17-w4/2"),
])
def test_visible_pairs_match_the_mask(sq, sk, causal, window):
    assert visible_pairs(sq, sk, causal=causal, window_size=window) == brute_pairs(sq, sk, causal, window)


def _brute_flops(p: FeatureProblem, pass_name: str) -> float:
    """4·h·d·(visible entries of each sequence's mask, summed) × the pass factor."""
    if p.doc_lengths:
        pairs = sum(brute_pairs(n, n, p.causal) for n in p.doc_lengths)
    else:
        pairs = p.batch * brute_pairs(p.seqlen, p.seqlen, p.causal, p.window_size)
    return 4.0 * p.heads * p.headdim * pairs * results.PASS_FACTOR[pass_name]


@pytest.mark.parametrize("feature", list(FEATURES))
def test_feature_flops_count_visible_entries_only(feature):
    spec = FeatureSpec(headdims=(16,), seqlens=(33, 64), windows=(1, 8, 40), tokens=128, hidden=32,
                       causal=(False, True))
    problems = FEATURES[feature].expand(spec, "cpu")
    assert problems and all(p.feature == feature for p in problems)
    for p in problems:
        for pass_name in results.PASS_FACTOR:
            assert p.flops(pass_name) == _brute_flops(p, pass_name), (p.describe(), pass_name)
        assert p.params()["visible_pairs"] * 4 * p.heads * p.headdim == p.flops("fwd")
    if feature == "window":  # causal only, windows narrower than the sequence only
        assert {(p.seqlen, p.window) for p in problems} == {(33, 1), (33, 8), (64, 1), (64, 8),
                                                            (64, 40)}
        assert all(p.causal and p.window_size == (p.window, 0) for p in problems)


def test_window_flops_are_far_below_causal_at_16k():
    s, w = 16384, 1024
    assert visible_pairs(s, s, causal=True, window_size=(w, 0)) == (w + 1) * s - w * (w + 1) // 2
    assert visible_pairs(s, s, causal=True) == s * (s + 1) // 2


# ----------------------------------------------------------------------------- documents
def test_document_lengths_are_deterministic_and_sum_to_the_total():
    for name in features.DOC_DISTRIBUTIONS:
        for total in (16384, 128, 7):
            lengths = document_lengths(name, total)
            assert lengths == document_lengths(name, total), name
            assert sum(lengths) == total and min(lengths) >= 1, (name, total, lengths)
    uniform = document_lengths("uniform", 16384)
    assert all(512 <= n <= 4096 for n in uniform[:-1]), uniform
    longtail = document_lengths("longtail", 16384)
    assert all(32 <= n <= 8192 for n in longtail[:-1]), longtail
    assert len(longtail) > len(uniform) and min(longtail[:-1]) < 512 < max(longtail)
    assert document_lengths("equal", 16384) == (2048,) * 8
    assert document_lengths("uniform", 16384, seed=1) != uniform


def test_every_feature_has_flashtriton_and_a_peer():
    assert list(FEATURE_PROVIDERS) == list(FEATURES)
    for feature, providers in FEATURE_PROVIDERS.items():
        assert list(providers)[0] == "flashtriton" and len(providers) >= 2, feature
        assert all(p.label for p in providers.values())


def test_quick_subset_is_small():
    problems = {f: FEATURES[f].expand(FEATURE_QUICK, "cuda") for f in FEATURES}
    assert {f: len(p) for f, p in problems.items()} == {"varlen": 2, "window": 2, "softcap": 1,
                                                         "alibi": 1, "dropout": 1, "float8": 1}
    assert all(p.headdim == 128 and p.causal and p.dtype == torch.bfloat16
               for ps in problems.values() for p in ps)
    assert all(sum(p.doc_lengths) == 16384 and p.seqlen == max(p.doc_lengths)
               for p in problems["varlen"])
    assert FEATURES["dropout"].passes_for(FEATURE_QUICK) == ("fwd_bwd",)
    assert FEATURES["window"].passes_for(FEATURE_QUICK) == ("fwd", "bwd")
    spec = features.spec_from_args(parse("--feature", "all", "--quick"))
    assert spec == FEATURE_QUICK
    spec = features.spec_from_args(parse("--feature", "window", "--windows", "256", "--seqlens", "512"))
    assert (spec.features, spec.windows, spec.seqlens, spec.quick) == (("window",), (256,), (512,), False)
    # the flex configurations (one compile each) stay few
    assert sum(len(p) for f, p in problems.items() if "flex" in FEATURE_PROVIDERS[f]) == 6


def test_bad_feature_options_are_refused(capsys):
    assert harness.run_cli(parse("--feature", "nope", "--plain")) == 2
    assert "unknown ['nope']" in capsys.readouterr().out
    assert harness.run_cli(parse("--feature", "window", "--providers", "sdpa_cudnn", "--plain")) == 2
    assert "belong to none" in capsys.readouterr().out


# ----------------------------------------------------------------------------- gate
def _wrong_window(problem, inputs):
    """The window mask shifted by one key: a classic off-by-one."""
    wrong = FeatureProblem(**{**problem.__dict__, "window": problem.window - 1})
    return FEATURE_PROVIDERS["window"]["sdpa_mask"].setup(wrong, inputs)


def _cross_document(problem, inputs):
    """Plain causal attention over the packed sequence: documents see each other."""
    return feature_providers._sdpa(inputs, is_causal=problem.causal, note="no document mask")


def _sdpa_dropout(p_used=None, corrupt=False):
    def setup(problem, inputs):
        p = problem.dropout_p if p_used is None else p_used
        runner = feature_providers._sdpa(inputs, is_causal=problem.causal, dropout_p=problem.dropout_p,
                                note="test")
        sdpa = torch.nn.functional.scaled_dot_product_attention
        q, k, v = runner.leaves

        def forward():
            out = sdpa(q, k, v, is_causal=problem.causal, dropout_p=p)
            return out * float("nan") if corrupt else out

        runner.forward = forward
        return runner
    return setup


def _registry(**extra):
    registry = {f: dict(providers) for f, providers in FEATURE_PROVIDERS.items()}
    for feature, provider in extra.items():
        registry[feature.split("__")[0]][provider.name] = provider
    return registry


@pytest.mark.parametrize("rounds", [1, 2])
def test_gate_marks_wrong_providers_and_does_not_time_them(rounds):
    registry = _registry(
        window__off=Provider("off_by_one", "window - 1", _wrong_window),
        varlen__cross=Provider("cross_doc", "no document mask", _cross_document),
        dropout__sdpa=Provider("sdpa_default", "SDPA dropout", _sdpa_dropout()),
        dropout__ignored=Provider("no_dropout", "ignores dropout_p", _sdpa_dropout(p_used=0.0)),
        dropout__nan=Provider("nan_dropout", "NaN with dropout", _sdpa_dropout(corrupt=True)))
    spec = FeatureSpec(**{**TINY.__dict__, "features": ("window", "varlen", "dropout")})
    names = ["sdpa_mask", "off_by_one", "sdpa_padded", "cross_doc", "sdpa_default", "no_dropout",
             "nan_dropout"]
    timing = harness.Timing(device=DEVICE, warmup_ms=1, rep_ms=1, rounds=rounds)
    rows = features.run_features(spec, timing, names=names, registry=registry)
    by = {(r["provider"], r["pass"]): r for r in rows}
    assert len(rows) == 2 * 2 + 2 * 2 + 3 * 1
    for name, pass_name in (("sdpa_mask", "fwd"), ("sdpa_mask", "bwd"), ("sdpa_padded", "fwd"),
                            ("sdpa_padded", "bwd"), ("sdpa_default", "fwd_bwd")):
        row = by[name, pass_name]
        assert results.row_status(row) == "ok" and row["ms"] > 0, row
        assert len(row.get("rounds_ms", [row["ms"]])) == rounds, row
    for name, pass_name in (("off_by_one", "fwd"), ("off_by_one", "bwd"), ("cross_doc", "fwd"),
                            ("cross_doc", "bwd")):
        row = by[name, pass_name]
        assert row["status"] == "wrong" and row["ms"] is None and row["tflops"] is None, row
        assert "max|ours-ref64|" in row["note"] and "torch_lowp" in row["note"], row["note"]
    assert "dropout not applied" in by["no_dropout", "fwd_bwd"]["note"]
    assert by["no_dropout", "fwd_bwd"]["status"] == "wrong"
    assert by["nan_dropout", "fwd_bwd"]["status"] == "wrong"  # its dropout_p=0 path is right
    assert "non-finite" in by["nan_dropout", "fwd_bwd"]["note"]


def _float8_without(*dropped: str):
    """flashtriton's float8 provider calling the kernel without some of its descales."""
    def setup(problem, inputs):
        import flashtriton

        runner = FEATURE_PROVIDERS["float8"]["flashtriton"].setup(problem, inputs)
        x = runner.quantized
        kept = {name: d for name, d in zip(("q_descale", "k_descale", "v_descale"), x.descales)
                if name not in dropped}
        runner.forward = lambda: flashtriton.flash_attn_func(x.q, x.k, x.v, causal=problem.causal,
                                                              **kept)
        return runner
    return setup


def test_float8_rows_pass_the_gate_and_dropped_descales_fail_it():
    """The float8 row is checked against the reference on its dequantized inputs (on the bf16
    inputs' reference the quantization error alone would fail it), so a kernel that ignored the
    descales, all of them or only V's, is marked wrong and not timed."""
    registry = _registry(
        float8__none=Provider("no_descales", "descales dropped",
                              _float8_without("q_descale", "k_descale", "v_descale")),
        float8__v=Provider("no_v_descale", "v_descale dropped", _float8_without("v_descale")))
    spec = FeatureSpec(**{**TINY.__dict__, "features": ("float8",)})
    rows = features.run_features(spec, TIMING, registry=registry)
    by = {r["provider"]: r for r in rows}
    assert [(r["provider"], r["pass"]) for r in rows] == [
        (name, "fwd") for name in ("flashtriton", "flashtriton_bf16", "sdpa_cudnn", "no_descales",
                                   "no_v_descale")]
    for name in ("flashtriton", "flashtriton_bf16"):
        assert results.row_status(by[name]) == "ok" and by[name]["ms"] > 0, by[name]
    assert by["flashtriton"]["note"] == feature_providers.FLOAT8_NOTE
    assert results.row_status(by["sdpa_cudnn"]) == ("skipped" if DEVICE == "cpu" else "ok"), by["sdpa_cudnn"]
    for name in ("no_descales", "no_v_descale"):
        row = by[name]
        assert row["status"] == "wrong" and row["ms"] is None and row["tflops"] is None, row
        assert "max|ours-ref64|" in row["note"] and "torch_lowp" in row["note"], row["note"]


def test_float8_problems_are_forward_bf16_with_per_tensor_descales():
    problems = FEATURES["float8"].expand(FEATURE_FULL, "cuda")
    assert sorted((p.headdim, p.seqlen, p.causal) for p in problems) == sorted(
        (d, s, c) for d in (128, 64) for s in (4096, 16384) for c in (False, True))
    assert all(p.float8 and p.dtype == torch.bfloat16 and p.batch * p.seqlen == 16384
               and p.heads * p.headdim == 2048 for p in problems)
    assert problems[0].params() == {"format": "e4m3fn", "descale": "per-tensor amax/448",
                                    "visible_pairs": 4 * 4096 * 4096}
    assert FEATURES["float8"].passes_for(FEATURE_FULL) == ("fwd",)
    # the dtype is the bf16 path it is compared with, whatever --dtypes says
    spec = features.spec_from_args(parse("--feature", "float8", "--dtypes", "fp16"))
    assert {p.dtype for p in FEATURES["float8"].expand(spec, "cuda")} == {torch.bfloat16}
    assert list(FEATURE_PROVIDERS["float8"]) == ["flashtriton", "flashtriton_bf16", "sdpa_cudnn"]


def test_float8_quantization_is_per_tensor_amax_over_448():
    gen = torch.Generator().manual_seed(0)
    x = (torch.randn(2, 33, 3, 16, generator=gen) * 3).to(torch.bfloat16)
    x8, descale = feature_providers.quantize_float8(x)
    assert x8.dtype == torch.float8_e4m3fn and x8.shape == x.shape
    assert descale.dtype == torch.float32 and descale.shape == (1,)
    assert descale.item() == pytest.approx(x.abs().max().item() / 448, rel=1e-6)
    assert x8.to(torch.float64).abs().max().item() == 448.0
    # e4m3: 3 mantissa bits (half a step: 2^-4 relative), subnormal step 2^-9 (times the descale)
    err = (x8.to(torch.float64) * descale.item() - x.double()).abs()
    bound = x.double().abs() * 2.0 ** -4 * (1 + 1e-6) + descale.item() * 2.0 ** -10
    assert (err <= bound).all(), (err - bound).max()


def test_explicit_masks_over_budget_are_skipped(monkeypatch):
    monkeypatch.setattr(feature_providers, "MASK_BUDGET_BYTES", 1000)
    spec = FeatureSpec(**{**TINY.__dict__, "features": ("alibi",), "passes": ("fwd",)})
    (row,) = features.run_features(spec, TIMING, names=["sdpa_mask"])
    assert row["status"] == "skipped" and "budget" in row["note"], row


# ----------------------------------------------------------------------------- flex mods
def _flex_eager(q, k, v, **kw):
    """Eager flex_attention, forward only (CPU has no flex backward), (b, s, h, d) layout."""
    from torch.nn.attention.flex_attention import flex_attention

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "called without torch.compile": intended here
        out = flex_attention(*(t.transpose(1, 2) for t in (q, k, v)), **kw)
    return out.transpose(1, 2)


def test_flex_mods_match_the_reference():
    """The peers' masks and score mods compute the feature flashtriton computes (forward, fp32)."""
    from torch.nn.attention.flex_attention import create_block_mask

    gen = torch.Generator().manual_seed(0)
    s, h, d = 48, 2, 16
    q, k, v = (torch.randn(1, s, h, d, generator=gen) * 2 for _ in range(3))

    def block_mask(mod):
        return create_block_mask(mod, B=None, H=None, Q_LEN=s, KV_LEN=s, device="cpu")

    def check(ours, **ref_kw):
        ref, _ = attention_ref(q, k, v, **ref_kw)
        err = (ours - ref).abs().max().item()
        assert err < 1e-4, (ref_kw, err)

    check(_flex_eager(q, k, v, block_mask=block_mask(feature_providers.window_mask_mod(5))),
          causal=True, window_size=(5, 0))
    check(_flex_eager(q, k, v, score_mod=feature_providers.softcap_score_mod(0.5),
                      block_mask=block_mask(feature_providers.causal_mask_mod)), causal=True, softcap=0.5)
    slopes = feature_providers.alibi_slopes(h)
    check(_flex_eager(q, k, v, score_mod=feature_providers.alibi_score_mod(slopes)), alibi_slopes=slopes)
    lengths = (5, 30, 13)
    problem = FeatureProblem("varlen", batch=3, heads=h, seqlen=30, headdim=d, causal=True,
                             dtype=torch.float32, device="cpu", doc_lengths=lengths)
    _, doc, _ = feature_providers.packing(problem)
    out = _flex_eager(q, k, v, block_mask=block_mask(feature_providers.document_mask_mod(doc, True)))
    start = 0
    for n in lengths:
        ref, _ = attention_ref(q[:, start:start + n], k[:, start:start + n], v[:, start:start + n],
                               causal=True)
        assert (out[:, start:start + n] - ref).abs().max().item() < 1e-4, n
        start += n


# ----------------------------------------------------------------------------- end to end
TINY_CLI = ("--device", DEVICE, "--quick", "--tokens", "32", "--hidden", "32", "--headdims", "16",
            "--warmup-ms", "1", "--rep-ms", "1", "--plain")


def _assert_feature_rows(data, feature, providers):
    rows = data["results"]
    assert {r["feature"] for r in rows} == {feature}
    assert {r["provider"] for r in rows} == set(providers)
    for row in rows:
        if row["provider"] == "flex":
            assert row["status"] == "skipped" and row["note"] == "needs a CUDA device", row
            continue
        assert results.row_status(row) == "ok", row
        flops = (4 * row["heads"] * row["headdim"] * row["feature_params"]["visible_pairs"]
                 * results.PASS_FACTOR[row["pass"]])
        assert row["tflops"] == pytest.approx(flops / (row["ms"] * 1e-3) / 1e12)


def test_cli_window_end_to_end(tmp_path, capsys):
    out = tmp_path / "window.json"
    providers = ("flashtriton", "sdpa_mask") + FLEX
    assert harness.run_cli(parse(*TINY_CLI, "--feature", "window", "--seqlens", "32", "--windows", "8",
                                 "--providers", ",".join(providers), "--out", str(out))) == 0
    printed = capsys.readouterr().out
    assert "visible (unmasked) score entries" in printed
    assert ("not GPU figures" in printed) == (DEVICE == "cpu")  # the CPU caveat, only on CPU
    assert "ours/best peer" in printed
    data = features.read_results(out)
    _assert_feature_rows(data, "window", providers)
    assert len(data["results"]) == len(providers) * 2  # fwd, bwd
    row = data["results"][0]
    assert row["feature_params"] == {"window_size": [8, 0],
                                     "visible_pairs": visible_pairs(32, 32, causal=True,
                                                                    window_size=(8, 0))}
    assert (row["batch"], row["heads"], row["seqlen"], row["headdim"], row["causal"]) == (1, 2, 32, 16, True)
    # the rows keep the plain schema: without the feature fields they pass results.validate
    stripped = [{k: v for k, v in r.items() if k not in features.FEATURE_KEYS} for r in data["results"]]
    results.validate({"meta": data["meta"], "results": stripped})


def test_cli_varlen_end_to_end(tmp_path):
    out = tmp_path / "varlen.json"
    providers = ("flashtriton", "sdpa_padded") + FLEX
    assert harness.run_cli(parse(*TINY_CLI, "--feature", "varlen", "--providers", ",".join(providers),
                                 "--hidden", "16", "--out", str(out))) == 0  # one head
    data = json.loads(out.read_text())
    _assert_feature_rows(data, "varlen", providers)
    distributions = {r["feature_params"]["distribution"] for r in data["results"]}
    assert distributions == {"uniform", "longtail"}
    for row in data["results"]:
        lengths = row["feature_params"]["doc_lengths"]
        assert lengths == list(document_lengths(row["feature_params"]["distribution"], 32))
        assert (row["batch"], row["seqlen"]) == (len(lengths), max(lengths))
        assert row["feature_params"]["visible_pairs"] == sum(n * (n + 1) // 2 for n in lengths)


def test_cli_float8_end_to_end(tmp_path, capsys):
    out = tmp_path / "float8.json"
    providers = ("flashtriton", "flashtriton_bf16")
    assert harness.run_cli(parse(*TINY_CLI, "--feature", "float8", "--seqlens", "32",
                                 "--providers", ",".join(providers), "--out", str(out))) == 0
    printed = capsys.readouterr().out
    assert "float8: float8_e4m3fn forward" in printed
    assert "x flashtriton_bf16" in printed  # ours/best peer: the float8 row against the bf16 path
    data = features.read_results(out)
    _assert_feature_rows(data, "float8", providers)
    assert [(r["provider"], r["pass"], r["dtype"]) for r in data["results"]] == [
        ("flashtriton", "fwd", "bf16"), ("flashtriton_bf16", "fwd", "bf16")]
    assert data["results"][0]["feature_params"] == {"format": "e4m3fn", "descale": "per-tensor amax/448",
                                                    "visible_pairs": 32 * 33 // 2}


def test_flashtriton_softcap_alibi_dropout_pass_the_gate():
    spec = FeatureSpec(**{**TINY.__dict__, "features": ("softcap", "alibi", "dropout"),
                          "passes": ("fwd",), "softcap": 0.5})
    rows = features.run_features(spec, TIMING, names=["flashtriton"])
    assert [(r["feature"], r["pass"]) for r in rows] == [("softcap", "fwd"), ("alibi", "fwd"),
                                                         ("dropout", "fwd_bwd")]
    for row in rows:
        assert results.row_status(row) == "ok" and row["ms"] > 0, row
    assert rows[2]["note"] == feature_providers.DROPOUT_NOTE and rows[0]["feature_params"]["softcap"] == 0.5


def test_results_schema_for_features(tmp_path):
    meta = dict.fromkeys(results.META_KEYS, "x")
    row = results.make_row("flashtriton", "fwd", dtype="bf16", batch=1, heads=2, seqlen=32,
                           headdim=16, causal=True, ms=1.0)
    good = dict(row, feature="window", feature_params={"window_size": [8, 0]})
    path = features.write_results(tmp_path / "f.json", meta, [good])
    assert features.read_results(path)["results"] == [good]
    with pytest.raises(ValueError, match="feature_params"):
        features.validate({"meta": meta, "results": [dict(row, feature="window")]})
    with pytest.raises(ValueError, match="feature"):
        features.validate({"meta": meta, "results": [dict(good, feature="fp8")]})
    with pytest.raises(ValueError, match="unexpected"):
        features.validate({"meta": meta, "results": [dict(good, extra=1)]})
    assert math.isclose(results.attention_flops(1, 2, 32, 16, False, "fwd"), 4 * 2 * 32 * 32 * 16)


def test_importing_the_feature_bench_pulls_in_no_rich_or_matplotlib():
    code = ("import sys, flashtriton.bench.features, flashtriton.bench.feature_providers;"
            "bad = [m for m in ('matplotlib', 'rich') if m in sys.modules]; assert not bad, bad")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
