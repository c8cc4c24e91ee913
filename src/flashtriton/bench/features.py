"""`flashtriton bench --feature ...`: each attention feature timed against the peers that offer it.

Features (:data:`FEATURES`) and their providers (feature_providers.py, one registry per feature):

- ``varlen``:  packed documents through ``flash_attn_varlen_func``; SDPA on the batch padded to the
  longest document with a padding (and causal) boolean mask, default backend selection; FlexAttention
  on the packed sequence with a document mask. Document lengths come from :func:`document_lengths`.
- ``window``:  causal sliding window ``window_size=(left, 0)``; FlexAttention with a sliding-window
  ``mask_mod``; SDPA with the explicit boolean mask where it fits the mask budget.
- ``softcap``: ``softcap * tanh(s / softcap)``; FlexAttention with the same ``score_mod``.
- ``alibi``:   ALiBi slopes; FlexAttention with the bias as ``score_mod``; SDPA with the float bias
  mask where it fits the budget.
- ``dropout``: ``dropout_p`` in forward + backward; SDPA's flash and efficient backends.
- ``float8``:  the forward on float8_e4m3fn inputs quantized per tensor (descale amax/448), output
  bf16; against flashtriton's bf16 path and SDPA's cuDNN backend on the bf16 inputs.

Every provider passes the correctness gate of check.py (:func:`check.compare`, float64 reference with
the feature's own options) before it is timed. Dropout outputs cannot be compared across random
streams, so a dropout provider is gated on its ``dropout_p = 0`` path, and its dropout output and
gradients must be finite and differ from that path. A float8 provider is gated on the values it
computes on: the reference is the float64 attention of the dequantized inputs (x8 · descale), and
the low-precision side is PyTorch doing what a float8 kernel does with them (:func:`float8_lowp`):
the error of rounding the inputs to e4m3 belongs to the format, not to the kernel. FLOPs count the
visible (unmasked) score entries only: 4·heads·headdim·visible_pairs for the forward (×2.5 bwd,
×3.5 fwd+bwd), where visible_pairs is counted exactly from the mask (a causal row i sees i + 1 keys;
varlen sums over documents).

Rows are the results schema of results.py plus ``feature`` and ``feature_params``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import warnings
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable

import torch

from flashtriton.bench import check, results
from flashtriton.bench.feature_providers import (FEATURE_PROVIDERS, FLOAT8_DESCALE, FP8, Float8Inputs,
                                                 alibi_slopes)
from flashtriton.bench.harness import (HIDDEN, TOKENS, ProviderRun, Timing, _flat, classify,
                                       collect_meta, free_memory, grid_overrides, make_timing,
                                       resolve_device, run_problem, timer_description)
from flashtriton.bench.providers import DTYPE_NAMES, DTYPES, Inputs, Problem, Provider, make_inputs
from flashtriton.reference import attention_ref, visible_mask

FEATURE_KEYS = ("feature", "feature_params")


# ----------------------------------------------------------------------------- documents
@dataclass(frozen=True)
class DocDistribution:
    """Document lengths as fractions of the total tokens, so that tiny test runs scale the same."""
    law: str  # "uniform" or "loguniform"
    lo: float
    hi: float

    def bounds(self, total: int) -> tuple[int, int]:
        lo = max(1, round(total * self.lo))
        return lo, max(lo, round(total * self.hi))


DOC_DISTRIBUTIONS = {
    "uniform": DocDistribution("uniform", 1 / 32, 1 / 4),       # 512..4096 at 16384 tokens
    "longtail": DocDistribution("loguniform", 1 / 512, 1 / 2),  # 32..8192: many short, a few long
    "equal": DocDistribution("uniform", 1 / 8, 1 / 8),          # eight of 2048: nothing to pad
}


def document_lengths(distribution: str, total: int, seed: int = 0) -> tuple[int, ...]:
    """Lengths drawn with a fixed seed until they reach ``total``; the last one is cut to the rest,
    so they sum to ``total`` exactly (the last may be shorter than the distribution's minimum)."""
    dist = DOC_DISTRIBUTIONS[distribution]
    lo, hi = dist.bounds(total)
    rng = random.Random(seed)
    lengths, left = [], total
    while left > 0:
        if dist.law == "uniform":
            n = rng.randint(lo, hi)
        else:
            n = min(hi, max(lo, round(math.exp(rng.uniform(math.log(lo), math.log(hi))))))
        lengths.append(min(n, left))
        left -= lengths[-1]
    return tuple(lengths)


# ----------------------------------------------------------------------------- FLOPs
def visible_pairs(seqlen_q: int, seqlen_k: int, *, causal: bool, window_size=(-1, -1)) -> int:
    """The number of (query, key) pairs a mask leaves visible, counted exactly row by row, with
    reference.visible_mask's rules (bottom-right alignment; causal sets the right window to 0)."""
    left, right = window_size
    if causal:
        right = 0 if right < 0 else min(right, 0)
    i = torch.arange(seqlen_q, dtype=torch.int64) + (seqlen_k - seqlen_q)
    hi = torch.clamp(i + right, max=seqlen_k - 1) if right >= 0 else torch.full_like(i, seqlen_k - 1)
    lo = torch.clamp(i - left, min=0) if left >= 0 else torch.zeros_like(i)
    return int((hi - lo + 1).clamp(min=0).sum())


# ----------------------------------------------------------------------------- problems
@dataclass(frozen=True)
class FeatureProblem:
    """One feature configuration. ``batch`` and ``seqlen`` are the rows' fields: for varlen the
    number of documents and the longest one (the padded length); the shared inputs are then one
    packed sequence, (1, total, heads, headdim)."""
    feature: str
    batch: int
    heads: int
    seqlen: int
    headdim: int
    causal: bool
    dtype: torch.dtype
    device: str = "cuda"
    window: int = -1
    softcap: float = 0.0
    alibi: bool = False
    dropout_p: float = 0.0
    float8: bool = False  # flashtriton's provider runs on float8_e4m3fn copies of the inputs
    distribution: str = ""
    doc_lengths: tuple[int, ...] = ()

    @property
    def dtype_name(self) -> str:
        return DTYPE_NAMES[self.dtype]

    @property
    def window_size(self) -> tuple[int, int]:
        return (self.window, 0) if self.window >= 0 else (-1, -1)

    @property
    def input_shape(self) -> tuple[int, int, int, int]:
        if self.doc_lengths:
            return (1, sum(self.doc_lengths), self.heads, self.headdim)
        return (self.batch, self.seqlen, self.heads, self.headdim)

    def segments(self) -> list[tuple[int, int, int]]:
        """(batch index, start, end) of each sequence in the shared inputs."""
        if not self.doc_lengths:
            return [(b, 0, self.seqlen) for b in range(self.batch)]
        ends = torch.tensor(self.doc_lengths).cumsum(0).tolist()
        return [(0, e - n, e) for n, e in zip(self.doc_lengths, ends)]

    def visible_pairs(self) -> int:
        """Visible score entries per head, summed over the batch (or the documents)."""
        return sum(visible_pairs(e - s, e - s, causal=self.causal, window_size=self.window_size)
                   for _, s, e in self.segments())

    def flops(self, pass_name: str) -> float:
        return 4.0 * self.heads * self.headdim * self.visible_pairs() * results.PASS_FACTOR[pass_name]

    def params(self) -> dict:
        """The ``feature_params`` of the rows."""
        p: dict = {}
        if self.doc_lengths:
            p.update(distribution=self.distribution, total_tokens=sum(self.doc_lengths),
                     doc_lengths=list(self.doc_lengths))
        if self.window >= 0:
            p["window_size"] = list(self.window_size)
        if self.softcap:
            p["softcap"] = self.softcap
        if self.alibi:
            p["alibi_slopes"] = "2^(-8(h+1)/heads)"
        if self.dropout_p:
            p["dropout_p"] = self.dropout_p
        if self.float8:
            p.update(format="e4m3fn", descale=FLOAT8_DESCALE)
        p["visible_pairs"] = self.visible_pairs()
        return p

    def describe(self) -> str:
        mask = "causal" if self.causal else "full"
        return (f"{self.feature} {config_label(self.batch, self.seqlen, self.params())} "
                f"{self.dtype_name} h{self.heads} d{self.headdim} {mask}")


def config_label(batch: int, seqlen: int, params: dict) -> str:
    """A short name for a configuration, from a row's fields (so tables rebuild from JSON)."""
    if "distribution" in params:
        return f"{params['distribution']}: {batch} docs, max {seqlen}"
    label = f"b{batch} s{seqlen}"
    if "window_size" in params:
        label += f" w{params['window_size'][0]}"
    if "softcap" in params:
        label += f" cap {params['softcap']:g}"
    if "dropout_p" in params:
        label += f" p {params['dropout_p']:g}"
    return label


@dataclass(frozen=True)
class FeatureSpec:
    """Which feature configurations to run. ``seqlens`` None: each feature's own
    (:attr:`Feature.seqlens`, or :attr:`Feature.quick_seqlens` when ``quick``)."""
    features: tuple[str, ...] = ("varlen", "window", "softcap", "alibi", "dropout", "float8")
    quick: bool = False
    headdims: tuple[int, ...] = (128, 64)
    dtypes: tuple[str, ...] = ("bf16",)
    passes: tuple[str, ...] = ("fwd", "bwd", "fwd_bwd")
    causal: tuple[bool, ...] = (False, True)
    seqlens: tuple[int, ...] | None = None
    windows: tuple[int, ...] = (1024, 4096)
    distributions: tuple[str, ...] = ("uniform", "longtail", "equal")
    tokens: int = TOKENS
    hidden: int = HIDDEN
    softcap: float = 30.0
    dropout_p: float = 0.1

    def base(self, dtype: str, headdim: int, seqlen: int, causal: bool, device: str) -> dict:
        return dict(batch=max(1, self.tokens // seqlen), heads=max(1, self.hidden // headdim),
                    seqlen=seqlen, headdim=headdim, causal=causal, dtype=DTYPES[dtype],
                    device=device)


FEATURE_FULL = FeatureSpec()
# About four minutes on an H200 (an estimate: most of it FlexAttention compiling once per
# configuration): 8 configurations, headdim 128, bf16, causal, fwd and bwd (dropout: fwd_bwd;
# float8: fwd).
FEATURE_QUICK = FeatureSpec(quick=True, headdims=(128,), passes=("fwd", "bwd"), causal=(True,),
                            distributions=("uniform", "longtail"))


def _varlen(spec: FeatureSpec, seqlens, device: str) -> list[FeatureProblem]:
    out = []
    for dtype in spec.dtypes:
        for causal in spec.causal:
            for headdim in spec.headdims:
                for dist in spec.distributions:
                    lengths = document_lengths(dist, spec.tokens)
                    base = spec.base(dtype, headdim, max(lengths), causal, device)
                    out.append(FeatureProblem("varlen", **dict(base, batch=len(lengths)),
                                              distribution=dist, doc_lengths=lengths))
    return out


def _window(spec: FeatureSpec, seqlens, device: str) -> list[FeatureProblem]:
    return [FeatureProblem("window", **spec.base(dtype, headdim, s, True, device), window=w)
            for dtype in spec.dtypes for headdim in spec.headdims for s in seqlens
            for w in spec.windows if w < s]


def _simple(feature: str, from_spec: tuple[str, ...] = (), **fixed):
    """Problems over (dtype, causal, headdim, seqlen); ``from_spec`` names the FeatureProblem fields
    taken from the spec (softcap, dropout_p), ``fixed`` sets the others (alibi=True)."""
    def problems(spec: FeatureSpec, seqlens, device: str) -> list[FeatureProblem]:
        values = {**{name: getattr(spec, name) for name in from_spec}, **fixed}
        return [FeatureProblem(feature, **spec.base(dtype, headdim, s, causal, device), **values)
                for dtype in spec.dtypes for causal in spec.causal for headdim in spec.headdims
                for s in seqlens]
    return problems


@dataclass(frozen=True)
class Feature:
    name: str
    title: str
    problems: Callable[[FeatureSpec, tuple[int, ...], str], list[FeatureProblem]]
    seqlens: tuple[int, ...] = (4096, 16384)
    quick_seqlens: tuple[int, ...] = (16384,)
    passes: tuple[str, ...] | None = None  # fixed passes (dropout: fwd_bwd only)
    dtypes: tuple[str, ...] | None = None  # fixed dtypes (float8: the bf16 path it is compared with)

    def expand(self, spec: FeatureSpec, device: str) -> list[FeatureProblem]:
        seqlens = spec.seqlens or (self.quick_seqlens if spec.quick else self.seqlens)
        return self.problems(replace(spec, dtypes=self.dtypes or spec.dtypes), seqlens, device)

    def passes_for(self, spec: FeatureSpec) -> tuple[str, ...]:
        return self.passes or spec.passes


FEATURES: dict[str, Feature] = {f.name: f for f in (
    Feature("varlen", "packed documents (flash_attn_varlen_func)", _varlen, seqlens=(),
            quick_seqlens=()),
    Feature("window", "causal sliding window", _window, seqlens=(4096, 8192, 16384)),
    Feature("softcap", "softcap (Gemma-style)", _simple("softcap", ("softcap",))),
    Feature("alibi", "ALiBi", _simple("alibi", alibi=True), quick_seqlens=(4096,)),
    Feature("dropout", "dropout (forward + backward)",
            _simple("dropout", ("dropout_p",)), passes=("fwd_bwd",)),
    Feature("float8", "float8_e4m3fn forward (per-tensor descales) against bf16",
            _simple("float8", float8=True), passes=("fwd",), dtypes=("bf16",)),
)}


def make_feature_inputs(problem: FeatureProblem, seed: int = 0) -> Inputs:
    """The shared inputs (providers.make_inputs' draw) in :attr:`FeatureProblem.input_shape`."""
    b, s, h, d = problem.input_shape
    return make_inputs(Problem(batch=b, heads=h, seqlen=s, headdim=d, causal=problem.causal,
                               dtype=problem.dtype, device=problem.device), seed=seed)


# ----------------------------------------------------------------------------- reference, gate
@dataclass
class SliceSpec:
    label: str
    batch: int
    start: int
    end: int
    head: int
    ref: check.SliceRef

    def take(self, t: torch.Tensor) -> torch.Tensor:
        """This slice of a tensor in the shared inputs' layout, (seqlen, headdim)."""
        return t[self.batch, self.start:self.end, self.head, :]


@dataclass
class FeatureReference:
    slices: list[SliceSpec]


def slice_choice(problem: FeatureProblem) -> list[tuple[str, tuple[int, int, int], int]]:
    """(label, segment, head) checked: the first sequence with the first head, the last with the
    last head, and for varlen the longest document as well."""
    segs = problem.segments()
    picks = {0: 0, len(segs) - 1: problem.heads - 1}
    if problem.doc_lengths:
        picks.setdefault(max(range(len(segs)), key=lambda i: segs[i][2] - segs[i][1]),
                         problem.heads // 2)
    name = "doc" if problem.doc_lengths else "b"
    return [(f"{name}={i},h={h}", segs[i], h) for i, h in picks.items()]


def _one_slice(problem: FeatureProblem, inputs: Inputs, seg, head: int, dtype, *, grads: bool):
    b, start, end = seg

    def take(t):
        return t[b:b + 1, start:end, head:head + 1, :].detach().to(dtype)

    q, k, v = (take(t).requires_grad_(grads) for t in (inputs.q, inputs.k, inputs.v))
    slopes = alibi_slopes(problem.heads, q.device)[head:head + 1] if problem.alibi else None
    with torch.set_grad_enabled(grads):
        out, _ = attention_ref(q, k, v, causal=problem.causal, window_size=problem.window_size,
                               softcap=problem.softcap, alibi_slopes=slopes,
                               upcast=(dtype == torch.float64))
        found = {"out": out}
        if grads:
            found.update(zip(check.GRAD_NAMES, torch.autograd.grad(out, (q, k, v), take(inputs.dout))))
    return {n: t.detach()[0, :, 0, :].to("cpu", torch.float64) for n, t in found.items()}


def reference_slices(problem: FeatureProblem, inputs: Inputs, *, grads: bool) -> FeatureReference:
    """The feature's float64 reference (and PyTorch in the input dtype) on :func:`slice_choice`.
    Dropout's reference is the dropout-free attention (its providers are gated on that path)."""
    slices = []
    for label, seg, head in slice_choice(problem):
        truth = _one_slice(problem, inputs, seg, head, torch.float64, grads=grads)
        lowp = _one_slice(problem, inputs, seg, head, problem.dtype, grads=grads)
        ref = check.SliceRef(
            out64=truth["out"], out_lowp=lowp["out"],
            grads64={n: truth[n] for n in check.GRAD_NAMES} if grads else None,
            grads_lowp={n: lowp[n] for n in check.GRAD_NAMES} if grads else None)
        slices.append(SliceSpec(label, *seg, head, ref))
    return FeatureReference(slices)


def float8_lowp(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, causal: bool) -> torch.Tensor:
    """PyTorch doing what a float8 kernel does, on dequantized (1, n, 1, d) slices: scores in
    float32, probabilities (relative to the row max) rounded to e4m3 for the P·V product, the row
    sum and the product in float32, the output rounded to bf16 (tests/test_fp8.py's low-precision
    side). Returns (n, d)."""
    q, k, v = (t[0, :, 0, :].float() for t in (q, k, v))
    s = q @ k.T / math.sqrt(q.shape[-1])
    keep = visible_mask(q.shape[0], k.shape[0], causal=causal, device=q.device)
    if keep is not None:
        s = s.masked_fill(~keep, float("-inf"))
    p = torch.exp(s - s.amax(-1, keepdim=True))
    return ((p.to(FP8).float() @ v) / p.sum(-1, keepdim=True)).to(torch.bfloat16)


def float8_reference(problem: FeatureProblem, quantized: Float8Inputs) -> FeatureReference:
    """The reference of a provider that computes on float8 copies of the inputs, on
    :func:`slice_choice`: float64 attention of the dequantized values, and :func:`float8_lowp` on
    the same values. Forward only (float8 has no backward)."""
    slices = []
    for label, (b, start, end), head in slice_choice(problem):
        q, k, v = quantized.dequantized(lambda t: t[b:b + 1, start:end, head:head + 1, :])
        truth, _ = attention_ref(q, k, v, causal=problem.causal)
        lowp = float8_lowp(q, k, v, causal=problem.causal)
        ref = check.SliceRef(out64=truth[0, :, 0, :].to("cpu"), out_lowp=lowp.to("cpu", torch.float64))
        slices.append(SliceSpec(label, b, start, end, head, ref))
    return FeatureReference(slices)


def _compare_slices(name: str, t: torch.Tensor, problem, ref: FeatureReference, grad: str | None):
    if tuple(t.shape) != problem.input_shape:
        return f"{name}: shape {tuple(t.shape)} != {problem.input_shape} (shared inputs' layout)"
    for s in ref.slices:
        ref64, lowp = ((s.ref.out64, s.ref.out_lowp) if grad is None
                       else (s.ref.grads64[grad], s.ref.grads_lowp[grad]))
        failure = check.compare(f"{name}[{s.label}]", s.take(t), ref64, lowp, dtype=problem.dtype,
                                factor=check.OUT_FACTOR if grad is None else check.GRAD_FACTOR)
        if failure:
            return failure
    return None


class FeatureRun(ProviderRun):
    """harness.ProviderRun for a feature: its own reference slices, FLOP count and row fields."""

    def row(self, pass_name, **kw) -> dict:
        row = super().row(pass_name, **kw)
        if row["ms"]:
            row["tflops"] = self.problem.flops(pass_name) / (row["ms"] * 1e-3) / 1e12
        row["feature"] = self.problem.feature
        row["feature_params"] = self.problem.params()
        return row

    def reference_for(self, runner) -> FeatureReference:
        """The problem's reference (shared by its providers), or for a runner that computes on
        float8 copies of the inputs (``runner.quantized``) the reference on those copies."""
        quantized = getattr(runner, "quantized", None)
        return self.reference() if quantized is None else float8_reference(self.problem, quantized)

    def check_output(self, runner, out) -> str | None:
        return _compare_slices("out", runner.to_bshd(out), self.problem, self.reference_for(runner),
                               None)

    def check_grads(self, runner) -> str | None:
        for name, leaf in zip(check.GRAD_NAMES, runner.leaves):
            if leaf.grad is None:
                return f"{name}: no gradient was produced"
            failure = _compare_slices(name, runner.to_bshd(leaf.grad), self.problem,
                                      self.reference(), name)
            if failure:
                return failure
        return None

    def gate(self, runner) -> None:
        twin = getattr(runner, "twin", None)
        if twin is None:
            return super().gate(runner)
        super().gate(twin)  # the dropout_p = 0 path against the reference
        if not self.outcome:
            self.check_random(runner, twin)

    def check_random(self, runner, twin) -> None:
        """A random output cannot match the reference: it must be finite (with its gradients) and
        differ from the dropout-free output (else the provider ignored dropout_p)."""
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                runner.clear_grads()
                with torch.no_grad():
                    plain = twin.fwd()
                out = runner.fwd()
                out.backward(runner.dout)
                tensors = {"out": out, **dict(zip(check.GRAD_NAMES, (t.grad for t in runner.leaves)))}
                bad = [n for n, t in tensors.items() if t is None or not torch.isfinite(t).all()]
                if bad:
                    self.untimed(self.passes, "wrong", f"dropout: non-finite or missing {bad}")
                elif torch.equal(out.detach(), plain):
                    self.untimed(self.passes, "wrong", f"dropout_p={self.problem.dropout_p}: output "
                                 "equals the dropout_p=0 output (dropout not applied)")
            except Exception as exc:  # noqa: BLE001  (recorded in the row)
                self.untimed(self.passes, *classify(exc, caught))
            finally:
                runner.clear_grads()


# ----------------------------------------------------------------------------- running
def select(names, features, registry) -> dict[str, list[Provider]]:
    """The providers of each feature, in registry order, restricted to ``names`` when given."""
    unknown = sorted(set(names or ()) - {n for f in features for n in registry[f]})
    if unknown:
        known = {f: list(registry[f]) for f in features}
        raise ValueError(f"--providers: {unknown} belong to none of the features; known: {known}")
    return {f: [p for n, p in registry[f].items() if not names or n in names] for f in features}


def run_features(spec: FeatureSpec, timing: Timing, *, names=None, registry=None,
                 progress: Callable[[int, str], None] | None = None,
                 checkpoint: Callable[[list[dict]], None] | None = None) -> list[dict]:
    """Every (feature, problem, provider, pass) of ``spec`` as result rows, in run order."""
    registry = FEATURE_PROVIDERS if registry is None else registry
    chosen = select(names, spec.features, registry)
    rows: list[dict] = []
    for feature in spec.features:
        passes = FEATURES[feature].passes_for(spec)
        need_grads = any(p != "fwd" for p in passes)
        for problem in FEATURES[feature].expand(spec, timing.device):
            inputs = make_feature_inputs(problem)
            rows.extend(run_problem(
                problem, inputs, chosen[feature],
                lambda problem, inputs: reference_slices(problem, inputs, grads=need_grads),
                FeatureRun, passes, timing, progress, describe_row))
            del inputs
            free_memory(timing.device)
            if checkpoint is not None:
                checkpoint(rows)
    return rows


def count(spec: FeatureSpec, device: str, names=None, registry=None) -> int:
    chosen = select(names, spec.features, FEATURE_PROVIDERS if registry is None else registry)
    return sum(len(FEATURES[f].expand(spec, device)) * len(chosen[f]) * len(FEATURES[f].passes_for(spec))
               for f in spec.features)


# ----------------------------------------------------------------------------- results, tables
def validate(data: dict) -> dict:
    """results.validate on the rows without the feature fields, then the feature fields."""
    rows = data.get("results") if isinstance(data, dict) else None
    if not isinstance(rows, list):
        raise ValueError("results file: expected a 'results' list")
    results.validate(data)
    for i, row in enumerate(rows):
        if row.get("feature") not in FEATURES:
            raise ValueError(f"results[{i}].feature: expected one of {list(FEATURES)}, "
                             f"got {row.get('feature')!r}")
        if not isinstance(row.get("feature_params"), dict):
            raise ValueError(f"results[{i}].feature_params: expected a dict")
    return data


def write_results(path: str | os.PathLike, meta: dict, rows: list[dict]) -> Path:
    """The feature checks, then the harness's writer (same schema, atomic replace)."""
    validate({"meta": dict(meta), "results": list(rows)})
    return results.write_results(path, meta, rows)


def read_results(path: str | os.PathLike) -> dict:
    return validate(json.loads(Path(path).read_text()))


def describe_row(row: dict) -> str:
    from flashtriton.bench.report import describe_row as plain

    label = config_label(row["batch"], row["seqlen"], row["feature_params"])
    return f"{row['feature']:<8} [{label}] {plain(row)}"


def summary_tables(rows: list[dict], *, timer: str) -> list[tuple[str, list, list]]:
    """One TFLOP/s table per feature: a column per provider (run order), and flashtriton's
    TFLOP/s over the best peer's."""
    tables = []
    for feature in dict.fromkeys(r["feature"] for r in rows):
        mine = [r for r in rows if r["feature"] == feature]
        providers = list(dict.fromkeys(r["provider"] for r in mine))
        groups: dict[tuple, dict[str, dict]] = {}
        for r in mine:
            key = (r["pass"], r["dtype"], r["causal"], r["headdim"],
                   config_label(r["batch"], r["seqlen"], r["feature_params"]))
            groups.setdefault(key, {})[r["provider"]] = r
        table = []
        for key, by in groups.items():
            cells = [report_cell(by.get(p)) for p in providers]
            ours = by.get("flashtriton")
            peers = [r for n, r in by.items() if n != "flashtriton" and r.get("tflops")]
            ratio = ""
            if ours and ours.get("tflops") and peers:
                best = max(peers, key=lambda r: r["tflops"])
                ratio = f"{ours['tflops'] / best['tflops']:.2f}x {best['provider']}"
            table.append([key[0], key[1], "yes" if key[2] else "no", str(key[3]), key[4]]
                         + cells + [ratio])
        headers = ["pass", "dtype", "causal", "d", "config"] + providers + ["ours/best peer"]
        tables.append((f"{feature}: {FEATURES[feature].title}, TFLOP/s of visible entries ({timer})",
                       headers, table))
    return tables


def report_cell(row: dict | None) -> str:
    from flashtriton.bench.report import SHORT_STATUS

    if row is None:
        return ""
    if results.row_status(row) != "ok":
        return SHORT_STATUS[results.row_status(row)]
    return format(row["tflops"], ".1f" if row["tflops"] >= 1 else ".3g")


# ----------------------------------------------------------------------------- CLI
def spec_from_args(args: argparse.Namespace) -> FeatureSpec:
    """--feature (and --quick), then each explicit option of `flashtriton bench`."""
    features = _flat(args.feature)
    features = tuple(FEATURES) if "all" in features else tuple(dict.fromkeys(features))
    unknown = [f for f in features if f not in FEATURES]
    if unknown:
        raise ValueError(f"--feature: unknown {unknown}; known: {list(FEATURES)} or all")
    spec = replace(FEATURE_QUICK if args.quick else FEATURE_FULL, features=features,
                   **grid_overrides(args, ("headdims", "seqlens", "dtypes", "passes", "windows")))
    bad = ([d for d in spec.dtypes if d not in DTYPES]
           + [p for p in spec.passes if p not in results.PASS_FACTOR]
           + [str(x) for x in spec.headdims + (spec.seqlens or ()) + spec.windows if x <= 0])
    if bad:
        raise ValueError(f"bench --feature: unknown or invalid values {bad}")
    return spec


def run_cli(args: argparse.Namespace, registry=None) -> int:
    """`flashtriton bench --feature ...`: the harness's console, progress, tables and JSON."""
    from flashtriton.bench.report import make_console

    console = make_console(prefer_rich=not args.plain)
    registry = FEATURE_PROVIDERS if registry is None else registry
    try:
        spec = spec_from_args(args)
        names = _flat(args.providers)
        if args.list:
            for f in spec.features:
                for p in registry[f].values():
                    console.print(f"{f:<8} {p.name:<16} {p.label}{'  (CUDA only)' if p.needs_cuda else ''}")
            return 0
        device = resolve_device(args.device)
        total = count(spec, device, names, registry)
        timing = make_timing(device, args.warmup_ms, args.rep_ms, getattr(args, "rounds", 1))
    except ValueError as exc:
        console.print(f"flashtriton bench: {exc}")
        return 2
    if device == "cpu":
        console.print("NOTE: timing on CPU with a wall-clock timer (no CUDA device): the numbers "
                      "below are not GPU figures and peak memory is not measured.")
    console.print(f"features {', '.join(spec.features)}: {total} measurements on {device}; "
                  "TFLOP/s count the visible (unmasked) score entries only")
    if args.plots:
        console.print("plots: none for feature benchmarks (tables and JSON only)")
    meta = collect_meta(device)

    def checkpoint(rows: list[dict]) -> None:
        if args.out:
            write_results(args.out, meta, rows)

    with console.progress(total) as advance:
        rows = run_features(spec, timing, names=names, registry=registry, progress=advance,
                            checkpoint=checkpoint)
    timer = timer_description(device, timing.rounds)
    for title, headers, table in summary_tables(rows, timer=timer):
        console.table(title, headers, table)
    counts = {s: sum(results.row_status(r) == s for r in rows) for s in results.STATUSES}
    console.print("rows: " + ", ".join(f"{n} {s}" for s, n in counts.items()))
    if args.out:
        console.print(f"results: {write_results(args.out, meta, rows)}")
    return 0
