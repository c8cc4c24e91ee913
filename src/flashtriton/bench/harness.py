"""`flashtriton bench`: time flashtriton against its peers on the FlashAttention papers' grid.

The grid holds batch·seqlen = 16384 tokens and heads·headdim = 2048 fixed, and sweeps head dim
(64/128/256), sequence length (512…16384), causal or not, dtype (bf16, fp16) and pass (fwd, bwd,
fwd+bwd). For every configuration the shared inputs are made once (`providers.make_inputs`); each
provider in the registry is then set up, checked against the reference (check.py), its peak CUDA
memory measured (one call of each pass) and only then timed: the median of
`triton.testing.do_bench`. With ``--rounds`` all of a problem's providers are set up first and
then timed in turn, round by round.
A provider that cannot run a configuration is recorded as skipped with the reason; one that gives
wrong results is recorded as wrong and not timed. Results go to a JSON file (results.py) and, when
asked, to PNG plots (plots.py).

Without a GPU the same path runs on CPU tensors with a wall-clock timer (for tests and dry runs);
the run says so, and those numbers mean nothing for a GPU.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import gc
import platform
import statistics
import time
import warnings
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable, Iterator

import torch

from flashtriton.bench import check
from flashtriton.bench.providers import (DTYPES, PROVIDERS, Inputs, Problem, Provider,
                                         Unsupported, is_dynamo_fallback, make_inputs)
from flashtriton.bench.results import (META_KEYS, PASS_FACTOR, attach_run_clock, find_commit,
                                       make_row, row_status)

TOKENS = 16384  # batch * seqlen
HIDDEN = 2048   # heads * headdim
PASSES = tuple(PASS_FACTOR)


@dataclass(frozen=True)
class GridSpec:
    """Which configurations to run; ``problems()`` expands them (dtype, causal, headdim, seqlen)."""
    headdims: tuple[int, ...] = (64, 128, 256)
    seqlens: tuple[int, ...] = (512, 1024, 2048, 4096, 8192, 16384)
    dtypes: tuple[str, ...] = ("bf16", "fp16")
    causal: tuple[bool, ...] = (False, True)
    passes: tuple[str, ...] = PASSES
    tokens: int = TOKENS
    hidden: int = HIDDEN

    def problems(self, device: str) -> list[Problem]:
        return [bench_problem(headdim, seqlen, causal, dtype, device, self.tokens, self.hidden)
                for dtype in self.dtypes for causal in self.causal
                for headdim in self.headdims for seqlen in self.seqlens]


def bench_problem(headdim: int, seqlen: int, causal: bool, dtype: str = "bf16",
                  device: str = "cuda", tokens: int = TOKENS, hidden: int = HIDDEN) -> Problem:
    """The grid's problem at (headdim, seqlen): batch·seqlen = ``tokens``, heads·headdim =
    ``hidden``; ``dtype`` by name (``DTYPES``). The scripts that time or profile one problem
    as the bench does take it from here."""
    return Problem(batch=max(1, tokens // seqlen), heads=max(1, hidden // headdim),
                   seqlen=seqlen, headdim=headdim, causal=causal, dtype=DTYPES[dtype],
                   device=device)


def parse_problems(text: str) -> list[tuple[str, int, bool]]:
    """A script's ``--problems``: ``fwd:128:0,bwd:64:1`` as [("fwd", 128, False), ("bwd", 64,
    True)] (pass, head dim, causal 0 or 1)."""
    problems = []
    for item in text.split(","):
        parts = item.split(":")
        if (len(parts) != 3 or parts[0] not in ("fwd", "bwd") or not parts[1].isdigit()
                or parts[2] not in ("0", "1")):
            raise ValueError(f"--problems: expected pass:headdim:causal (causal 0 or 1), got "
                             f"{item!r}")
        problems.append((parts[0], int(parts[1]), parts[2] == "1"))
    return problems


FULL = GridSpec()
# The configurations of SPEC.md §4's peer table, and by default (no --providers) the providers
# its targets compare: ours, cuDNN (the speed target) and FlashAttention-2. Where a --quick run's
# time goes on an H200 (session 25, the rows' setup_s; bench/results/2026-11-30-s25-quick-*):
# per configuration 3.5-10 s of our kernels compiling on a cold cache (0.2-2.8 s warm), 3-12 s
# of FlexAttention compiling (one recompile per shape), 0.3-2.3 s of cuDNN building its plans,
# under 2 s for each other provider, and 1 s of warm-up per measurement. With the three default
# providers 154 s cold, 95 s warm; with all six 323 s cold (those three with every provider of a
# configuration set up before the first was timed); session 26, each provider set up right
# before its own timing, as now: three providers 174 s cold; session 27, 181 s cold.
QUICK = GridSpec(headdims=(128, 64), seqlens=(1024, 4096, 16384), dtypes=("bf16",),
                 causal=(False, True), passes=("fwd", "bwd"))
QUICK_PROVIDERS = ("flashtriton", "sdpa_cudnn", "sdpa_flash")


# do_bench's warm-up on the GPU. The H200 holds its boost clock for the first ~0.1-0.2 s of a
# load, then its power cap pulls it down (1980 -> 1650-1965 MHz, nvidia-smi, session 9); a
# provider timed right after an idle gap (a check, a compile) ran up to 10% faster than the same
# kernel timed right after another: bench/results/2026-11-29-s9-order-*.json, docs/perf-log.md.
# One second of the same calls before timing puts every provider in the capped steady state.
GPU_WARMUP_MS = 1000
CPU_WARMUP_MS = 25


# Rounds after the first (--rounds): every provider has just been timed once and follows another
# provider's timing, so all of them start from a loaded GPU and a short warm-up is the same for
# each. The first round cannot be shortened so: a pass timed right after another load runs 0-4%
# faster than at its own steady state for its first ~0.75 s (scripts/warmup_probe.py, session
# 25: bench/results/2026-11-30-s25-warmup-probe.json), which would favour every provider timed
# after the first.
ROUND_WARMUP_MS = 25
# --clock: nvidia-smi's sampling interval (the one scripts/dtype_clock.py used on the H200 in
# session 27); a 100 ms timing holds about two samples, --rounds' longer budgets more
CLOCK_SAMPLE_MS = 50


@dataclass(frozen=True)
class Timing:
    """How each pass is timed: ``warmup_ms`` and ``rep_ms`` for ``do_bench`` (the wall clock on
    CPU). ``rounds`` > 1: a problem's providers are set up together and timed in turn, round by
    round, each round with ``rep_ms / rounds``; a row's time is the median of its rounds. The
    H200's clock moves in bursts under its power cap (docs/performance.md), and interleaving
    exposes every provider to the same bursts. ``clock``: each timing's window is kept
    (``clock_windows``, for ``--clock``)."""
    device: str
    warmup_ms: int = CPU_WARMUP_MS
    rep_ms: float = 100
    rounds: int = 1
    clock: bool = False

    def for_round(self, index: int) -> "Timing":
        """The warm-up and repetition budget of one measurement in round ``index``: the full
        warm-up in the first round, ROUND_WARMUP_MS (or less when ``warmup_ms`` is less) in
        later ones; ``rep_ms / rounds`` each."""
        if self.rounds == 1:
            return self
        warmup = self.warmup_ms if index == 0 else min(self.warmup_ms, ROUND_WARMUP_MS)
        return replace(self, warmup_ms=warmup, rep_ms=self.rep_ms / self.rounds)


def make_timing(device: str, warmup_ms: int | None, rep_ms: int, rounds: int = 1,
                clock: bool = False) -> Timing:
    """Timing for ``device``; ``warmup_ms`` None takes the device's default (GPU_WARMUP_MS on
    cuda, CPU_WARMUP_MS otherwise)."""
    if warmup_ms is None:
        warmup_ms = GPU_WARMUP_MS if device == "cuda" else CPU_WARMUP_MS
    if warmup_ms < 0 or rep_ms <= 0:
        raise ValueError(f"--warmup-ms must be >= 0 and --rep-ms > 0, got {warmup_ms} and "
                         f"{rep_ms}")
    if rounds < 1:
        raise ValueError(f"--rounds must be >= 1, got {rounds}")
    return Timing(device=device, warmup_ms=warmup_ms, rep_ms=rep_ms, rounds=rounds, clock=clock)


def wall_clock_ms(fn: Callable[[], object], *, warmup_ms: float, rep_ms: float,
                  grad_to_none=None) -> float:
    """Median wall-clock time of ``fn`` in ms: the CPU stand-in for ``do_bench`` (same budget rule)."""
    def clear():
        for t in grad_to_none or ():
            t.grad = None

    start = time.perf_counter()
    fn()
    estimate = max((time.perf_counter() - start) * 1e3, 1e-3)
    for _ in range(max(1, int(warmup_ms / estimate))):
        clear()
        fn()
    times = []
    for _ in range(max(1, int(rep_ms / estimate))):
        clear()
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def bench_ms(fn: Callable[[], object], timing: Timing, grad_to_none=None) -> float:
    if timing.device == "cuda":
        import triton.testing

        return float(triton.testing.do_bench(fn, warmup=timing.warmup_ms, rep=timing.rep_ms,
                                             grad_to_none=grad_to_none, return_mode="median"))
    return wall_clock_ms(fn, warmup_ms=timing.warmup_ms, rep_ms=timing.rep_ms,
                         grad_to_none=grad_to_none)


def peak_mib(runner, pass_name: str, device: str) -> float | None:
    """Peak CUDA memory of one call of the pass, in MiB: the inputs (q, k, v, plus dout when there
    is a backward) and everything the provider allocates (output, saved tensors, gradients,
    workspace). A backward cannot run without its forward, so bwd is measured as fwd+bwd.
    None on CPU."""
    if device != "cuda":
        return None
    runner.clear_grads()
    gc.collect()
    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    if pass_name == "fwd":
        out = runner.fwd()
        torch.cuda.synchronize()
        del out
    else:
        runner.fwd_bwd()
    torch.cuda.synchronize()
    peak = torch.cuda.max_memory_allocated()
    runner.clear_grads()
    resident = list(runner.leaves) + ([] if pass_name == "fwd" else [runner.dout])
    inputs = sum(t.numel() * t.element_size() for t in resident)
    return (peak - base + inputs) / 2**20


def classify(exc: BaseException, caught: list | None = None) -> tuple[str, str]:
    """(status, note) for a provider that raised: "skipped" when it does not support the
    configuration (refusal, missing feature, out of memory or resources, dynamo refusing to
    recompile), "error" for anything else. Warnings caught during the call join the note (SDPA
    explains its refusals in warnings)."""
    text = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"
    reasons = "; ".join(dict.fromkeys(str(w.message).strip().splitlines()[0] for w in caught or ()
                                      if str(w.message).strip()))
    name = type(exc).__name__
    if isinstance(exc, torch.cuda.OutOfMemoryError) or "out of memory" in str(exc).lower():
        status, text = "skipped", f"out of memory ({text})"
    elif is_dynamo_fallback(exc):
        status, text = "skipped", f"dynamo recompile limit hit; eager fallback refused ({text})"
    elif (isinstance(exc, (Unsupported, NotImplementedError)) or name == "OutOfResources"
          or "out of resource" in str(exc).lower()):
        status = "skipped"
    elif any(m in str(exc).lower() for m in ("no available kernel", "no viable backend")):
        status = "skipped"  # SDPA refusing the configuration under a forced backend
    else:
        status = "error"
    note = f"{text} [{reasons}]" if reasons else text
    return status, note[:400]


def free_memory(device: str) -> None:
    gc.collect()
    if device == "cuda":
        torch.cuda.empty_cache()


class ProviderRun:
    """Rows of one provider on one problem: setup, the correctness gate and peak memory
    (``open``), each pass timed once per round (``time_round``), then the rows (``close``);
    ``interleave`` drives these for one provider or for several in turn."""

    def __init__(self, provider: Provider, problem: Problem, inputs: Inputs,
                 reference: Callable[[], check.Reference], passes: tuple[str, ...],
                 timing: Timing):
        self.provider, self.problem, self.inputs = provider, problem, inputs
        self.reference, self.passes, self.timing = reference, passes, timing
        self.outcome: dict[str, tuple[str, str]] = {}  # pass -> (status, note): not timed
        self.note: str | None = None
        self.runner = None
        self.calls: dict[str, Callable[[], object]] = {}  # pass -> its timed call, between rounds
        self.peaks: dict[str, float | None] = {}
        self.samples: dict[str, list[float]] = {p: [] for p in passes}
        self.windows: dict[str, list[tuple[float, float]]] = {p: [] for p in passes}
        self.setup_s: float | None = None  # seconds in ``open``: setup, compiles, gate, peaks

    def row(self, pass_name, **kw) -> dict:
        p = self.problem
        kw.setdefault("note", self.note)
        kw.setdefault("setup_s", self.setup_s)
        return make_row(self.provider.name, pass_name, dtype=p.dtype_name, batch=p.batch,
                        heads=p.heads, seqlen=p.seqlen, headdim=p.headdim, causal=p.causal, **kw)

    def untimed(self, passes, status: str, note: str) -> None:
        for pass_name in passes:
            self.outcome.setdefault(pass_name, (status, note))

    def open(self) -> None:
        """Set up the provider, run the gate (the first calls: compiles happen here) and
        measure each pass's peak memory; what fails marks its passes untimed. The seconds this
        takes are the rows' ``setup_s``."""
        start = time.perf_counter()
        try:
            if self.provider.needs_cuda and self.problem.device != "cuda":
                self.untimed(self.passes, "skipped", "needs a CUDA device")
                return
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                try:
                    self.runner = self.provider.setup(self.problem, self.inputs)
                except Exception as exc:  # noqa: BLE001  (recorded in the row)
                    self.untimed(self.passes, *classify(exc, caught))
            if self.runner is not None:
                self.note = self.runner.note
                with self.runner.context():
                    self.gate(self.runner)
                    self.measure_peaks(self.runner)
        finally:
            self.setup_s = time.perf_counter() - start

    def measure_peaks(self, runner) -> None:
        """Peak memory of each pass that passed the gate, before its timing."""
        for pass_name in self.passes:
            if pass_name in self.outcome:
                continue
            try:
                self.peaks[pass_name] = peak_mib(runner, pass_name, self.problem.device)
            except Exception as exc:  # noqa: BLE001
                self.untimed([pass_name], *classify(exc))

    def time_round(self, index: int) -> None:
        """Time every pass that passed the gate once more (``Timing.for_round``). A pass's call
        is made before its first timing, kept for the next round and dropped after the last."""
        if self.runner is None:
            return
        timing = self.timing.for_round(index)
        last = index == self.timing.rounds - 1
        with self.runner.context():
            for pass_name in self.passes:
                if pass_name in self.outcome:
                    continue
                try:
                    if pass_name not in self.calls:
                        self.calls[pass_name] = self.runner.callable_for(pass_name)
                    grads = None if pass_name == "fwd" else list(self.runner.leaves)
                    self.samples[pass_name].append(
                        bench_ms(self.calls[pass_name], timing, grad_to_none=grads))
                    # the timed calls are the measurement's last rep_ms (after its warm-up)
                    end = time.time()
                    self.windows[pass_name].append((end - timing.rep_ms / 1e3, end))
                except Exception as exc:  # noqa: BLE001
                    self.untimed([pass_name], *classify(exc))
                finally:
                    if last or pass_name in self.outcome:
                        self.calls.pop(pass_name, None)
                    self.runner.clear_grads()

    def close(self) -> list[dict]:
        """One row per pass: the median of its rounds (each round's time listed as
        ``rounds_ms`` when there are several), or why it was not timed."""
        rows = []
        for pass_name in self.passes:
            if pass_name in self.outcome:
                status, note = self.outcome[pass_name]
                rows.append(self.row(pass_name, status=status, note=note))
                continue
            samples = self.samples[pass_name]
            rows.append(self.row(pass_name, ms=statistics.median(samples),
                                 peak_mib=self.peaks[pass_name],
                                 rounds_ms=samples if len(samples) > 1 else None,
                                 clock_windows=self.windows[pass_name] if self.timing.clock
                                 else None))
        return rows

    def release(self) -> None:
        self.calls.clear()
        self.runner = None
        free_memory(self.problem.device)

    def gate(self, runner) -> None:
        """Check the output, and the gradients when a backward pass is to be timed."""
        backward = [p for p in self.passes if p != "fwd"]
        out = None
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                runner.clear_grads()
                out = runner.fwd()
                failure = self.check_output(runner, out)
                if failure:
                    self.untimed(self.passes, "wrong", failure)
            except Exception as exc:  # noqa: BLE001
                self.untimed(self.passes, *classify(exc, caught))
            if backward and out is not None and not self.outcome:
                try:
                    out.backward(runner.dout)
                    failure = self.check_grads(runner)
                    if failure:
                        self.untimed(backward, "wrong", failure)
                except Exception as exc:  # noqa: BLE001
                    self.untimed(backward, *classify(exc, caught))
        del out
        runner.clear_grads()

    def check_output(self, runner, out) -> str | None:
        """The gate's output check (a feature benchmark brings its own reference)."""
        return check.check_output(runner, out, self.problem, self.reference())

    def check_grads(self, runner) -> str | None:
        return check.check_grads(runner, self.problem, self.reference())


def interleave(runs: list[ProviderRun], rounds: int) -> Iterator[list[dict]]:
    """Each run's rows, as soon as they are final: all runs opened (set up, checked, peak
    memory), then ``rounds`` rounds in which each run times its passes in turn. With one run,
    a provider is set up, checked and timed before the next one is set up."""
    try:
        for run in runs:
            run.open()
        for index in range(rounds):
            for run in runs:
                run.time_round(index)
                if index == rounds - 1:
                    yield run.close()
    finally:
        for run in runs:
            run.release()


def run_problem(problem, inputs, providers, make_reference, run_type, passes, timing: Timing,
                progress: Callable[[int, str], None] | None, describe: Callable[[dict], str]):
    """Every (provider, pass) of one problem as result rows. The reference is computed once per
    problem, and only if some provider gets to its correctness check."""
    cache: list = []

    def reference():
        if not cache:
            cache.append(make_reference(problem, inputs))
        return cache[0]

    rows = []
    # one round: each provider on its own, its own set-up (compiles, checks) right before its
    # timing, as for every other provider; several: all of the problem's providers together,
    # so that each round times every one of them. (Session 25 set all six providers up first
    # with one round too: our 1k forwards then measured 456 and 342 TFLOP/s at d128 and d64,
    # against 527 and 388 timed right after their own set-up in session 24 and 512 and 393 with
    # three providers set up first; not explained, so not kept: docs/perf-log.md.)
    groups = [[p] for p in providers] if timing.rounds == 1 else [list(providers)]
    for group in groups:
        runs = [run_type(provider, problem, inputs, reference, passes, timing)
                for provider in group]
        for new in interleave(runs, timing.rounds):
            rows.extend(new)
            if progress is not None:
                for row in new:
                    progress(1, describe(row))
    return rows


def run_benchmark(spec: GridSpec, providers: list[Provider], timing: Timing,
                  progress: Callable[[int, str], None] | None = None,
                  checkpoint: Callable[[list[dict]], None] | None = None) -> list[dict]:
    """Every (problem, provider, pass) of the grid, in run order, as result rows.
    ``checkpoint(rows)`` is called after each problem (the CLI rewrites its JSON file there, so a
    run cut short by a time limit keeps what it measured)."""
    from flashtriton.bench.report import describe_row

    results = []
    need_grads = any(p != "fwd" for p in spec.passes)
    for problem in spec.problems(timing.device):
        inputs = make_inputs(problem)
        results.extend(run_problem(
            problem, inputs, providers,
            lambda problem, inputs: check.reference_slices(problem, inputs, grads=need_grads),
            ProviderRun, spec.passes, timing, progress, describe_row))
        del inputs
        free_memory(timing.device)
        if checkpoint is not None:
            checkpoint(results)
    return results


def collect_meta(device: str) -> dict:
    import triton

    if device == "cuda":
        gpu = torch.cuda.get_device_name()
    else:
        gpu = f"none: CPU wall-clock timing ({platform.processor() or platform.machine()})"
    meta = {"gpu": gpu, "torch": torch.__version__, "triton": triton.__version__,
            "cuda": torch.version.cuda,
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "commit": find_commit()}
    assert tuple(meta) == META_KEYS
    return meta


def _csv(kind):
    """argparse type: a comma-separated list (``--seqlens 1024,4096``; spaces work too)."""
    def parse(text: str):
        try:
            return [kind(x) for x in text.split(",") if x.strip()]
        except ValueError as exc:
            raise argparse.ArgumentTypeError(f"expected comma-separated {kind.__name__}s: {text!r}") from exc
    return parse


def add_cli_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--quick", action="store_true",
                        help="a subset: headdim 128,64; seqlen 1024,4096,16384; bf16; fwd,bwd; "
                             "causal both; providers flashtriton, sdpa_cudnn, sdpa_flash unless "
                             "--providers names others (options given explicitly still apply)")
    parser.add_argument("--providers", nargs="+", type=_csv(str), metavar="NAME",
                        help=f"providers to run (default: all): {', '.join(PROVIDERS)}")
    parser.add_argument("--headdims", nargs="+", type=_csv(int), metavar="D",
                        help="head dims (default 64,128,256)")
    parser.add_argument("--seqlens", nargs="+", type=_csv(int), metavar="S",
                        help="sequence lengths (default 512,1024,2048,4096,8192,16384)")
    parser.add_argument("--dtypes", nargs="+", type=_csv(str), metavar="DTYPE",
                        help=f"any of {', '.join(DTYPES)} (default bf16,fp16)")
    parser.add_argument("--passes", nargs="+", type=_csv(str), metavar="PASS",
                        help=f"any of {', '.join(PASSES)} (default all)")
    parser.add_argument("--causal", choices=("both", "yes", "no"), default=None,
                        help="causal masking: both (default), yes or no")
    parser.add_argument("--tokens", type=int, default=None, help=f"batch*seqlen (default {TOKENS})")
    parser.add_argument("--hidden", type=int, default=None, help=f"heads*headdim (default {HIDDEN})")
    parser.add_argument("--device", choices=("auto", "cuda", "cpu"), default="auto",
                        help="auto: cuda when available; cpu times with a wall clock (dry runs)")
    parser.add_argument("--warmup-ms", type=int, default=None,
                        help=f"do_bench warm-up of each measurement (ms; default "
                             f"{GPU_WARMUP_MS} on the GPU, so that every provider is timed at "
                             f"its own power-capped clock, {CPU_WARMUP_MS} on CPU; with "
                             f"--rounds, rounds after the first get {ROUND_WARMUP_MS})")
    parser.add_argument("--rep-ms", type=int, default=100, help="do_bench repetition time (ms)")
    parser.add_argument("--rounds", type=int, default=1, metavar="N",
                        help="set a configuration's providers up together and time them in "
                             "turn N times, rep-ms/N each; a row is the median of its rounds, "
                             "listed as rounds_ms in the JSON. Default 1: each provider set up "
                             "and timed once, on its own")
    parser.add_argument("--clock", action="store_true",
                        help="sample the SM clock and board power with nvidia-smi while timing "
                             "(every 50 ms): each row gets sm_mhz, watts and kcycles (cycles per "
                             "call: ms x the samples' MHz, which at the power cap read above the "
                             "clock the kernels get; compare within a run) in the JSON, and a "
                             "clock table is printed; needs a CUDA device")
    parser.add_argument("--out", type=Path, default=None,
                        help="write results JSON here (e.g. bench/results/<date>-<what>.json)")
    parser.add_argument("--plots", type=Path, default=None, help="write PNG plots into this directory")
    parser.add_argument("--plot-only", nargs="+", type=Path, default=None, metavar="JSON",
                        help="do not benchmark: plot existing results file(s) into --plots")
    parser.add_argument("--plain", action="store_true", help="plain-text output even if rich is installed")
    parser.add_argument("--list", action="store_true", help="list the providers and exit")
    parser.add_argument("--baseline-src", type=Path, default=None, metavar="DIR",
                        help="add the provider flashtriton_base: the flashtriton package in DIR "
                             "(another tree's src/), loaded beside this one, so that an A/B of "
                             "two versions times both in one process (with --rounds, round by "
                             "round)")
    parser.add_argument("--feature", nargs="+", type=_csv(str), metavar="NAME",
                        help="benchmark features instead of the plain grid: varlen, window, softcap, "
                             "alibi, dropout, float8 or all (bench/features.py; with --quick: 8 "
                             "configurations, 2 min 4 s on the H200 with a 25 ms warm-up)")
    parser.add_argument("--decode", action="store_true",
                        help="benchmark decoding instead (flash_attn_with_kvcache against SDPA and "
                             "FlexAttention, batch 1..64, context 1k..128k; --quick: 4 shapes; "
                             "bench/decode.py)")
    parser.add_argument("--decode-shapes", default=None, metavar="BxC,...",
                        help="--decode: shapes as batch x context, e.g. 1x16384,64x4096")
    parser.add_argument("--no-split-sweep", action="store_true",
                        help="--decode: skip the fixed-num_splits sweep")
    parser.add_argument("--windows", nargs="+", type=_csv(int), metavar="W",
                        help="--feature window: left window sizes (default 1024,4096)")


def _flat(values):
    return None if values is None else tuple(x for group in values for x in group)


def grid_overrides(args: argparse.Namespace, lists=("headdims", "seqlens", "dtypes", "passes")) -> dict:
    """The grid fields the command line sets explicitly (``lists``, --causal, --tokens,
    --hidden), for ``dataclasses.replace`` on a grid spec (this one's or bench/features.py's)."""
    changes = {}
    for name in lists:
        values = _flat(getattr(args, name, None))
        if values:
            changes[name] = values
    if args.causal is not None:
        changes["causal"] = {"both": (False, True), "yes": (True,), "no": (False,)}[args.causal]
    for name in ("tokens", "hidden"):
        if getattr(args, name) is not None:
            changes[name] = getattr(args, name)
    return changes


def spec_from_args(args: argparse.Namespace) -> GridSpec:
    """The grid the options ask for: --quick (or the full grid), then each explicit option."""
    spec = replace(QUICK if args.quick else FULL, **grid_overrides(args))
    bad = ([d for d in spec.dtypes if d not in DTYPES] + [p for p in spec.passes if p not in PASSES]
           + [str(x) for x in spec.headdims + spec.seqlens if x <= 0])
    if bad:
        raise ValueError(f"bench: unknown or invalid values {bad} (dtypes: {list(DTYPES)}, "
                         f"passes: {list(PASSES)}, head dims and seqlens positive)")
    return spec


def select_providers(names, registry: dict[str, Provider] | None = None, *,
                     default: tuple[str, ...] | None = None) -> list[Provider]:
    """The providers ``names`` asks for; without names, ``default`` (those of them in the
    registry) or else every provider in the registry."""
    registry = PROVIDERS if registry is None else registry
    if default is not None:
        default = tuple(n for n in default if n in registry)
    names = _flat(names) or default or tuple(registry)
    unknown = [n for n in names if n not in registry]
    if unknown:
        raise ValueError(f"--providers: unknown {unknown}; known: {list(registry)}")
    return [registry[n] for n in dict.fromkeys(names)]


def resolve_device(choice: str) -> str:
    if choice == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if choice == "cuda" and not torch.cuda.is_available():
        raise ValueError("--device cuda: no CUDA device is available")
    return choice


def make_plots(data: dict, out_dir: Path, console) -> list[Path]:
    """Plots, or a message saying why there are none (matplotlib missing)."""
    from flashtriton.bench import plots

    try:
        written = plots.plot_results(data, out_dir)
    except plots.PlottingUnavailable as exc:
        console.print(f"plots skipped: {exc}")
        return []
    console.print(f"plots: {len(written)} PNG files in {out_dir}")
    return written


def timer_description(device: str, rounds: int) -> str:
    """What a table's times are, for its title."""
    timer = "median of do_bench" if device == "cuda" else "median wall clock, CPU: not GPU figures"
    return f"{timer}; median of {rounds} interleaved rounds" if rounds > 1 else timer


def run_cli(args: argparse.Namespace, registry: dict[str, Provider] | None = None) -> int:
    from flashtriton.bench.report import make_console, setup_line, summary_tables, target_line
    from flashtriton.bench.results import (merge_results, read_results, save_partial,
                                           write_results)

    if getattr(args, "baseline_src", None) is not None and (getattr(args, "feature", None)
                                                            or getattr(args, "decode", False)):
        make_console(prefer_rich=not args.plain).print(
            "flashtriton bench: --baseline-src applies to the attention grid, not to --feature "
            "or --decode")
        return 2
    if getattr(args, "clock", False) and (getattr(args, "feature", None)
                                          or getattr(args, "decode", False)):
        make_console(prefer_rich=not args.plain).print(
            "flashtriton bench: --clock applies to the attention grid, not to --feature or "
            "--decode")
        return 2
    if getattr(args, "feature", None):
        from flashtriton.bench import features

        return features.run_cli(args)
    if getattr(args, "decode", False):
        from flashtriton.bench import decode

        if getattr(args, "rounds", 1) != 1:
            make_console(prefer_rich=not args.plain).print(
                "flashtriton bench: --rounds applies to the attention grid and --feature runs, "
                "not to --decode")
            return 2
        return decode.run_cli(args)
    console = make_console(prefer_rich=not args.plain)
    registry = PROVIDERS if registry is None else registry
    if getattr(args, "baseline_src", None) is not None:
        from flashtriton.bench import baseline

        try:
            registry = {**registry, baseline.NAME: baseline.provider(args.baseline_src)}
        except ValueError as exc:
            console.print(f"flashtriton bench: {exc}")
            return 2
    if args.list:
        for p in registry.values():
            console.print(f"{p.name:<16} {p.label}{'  (CUDA only)' if p.needs_cuda else ''}")
        return 0
    if args.plot_only:
        data = merge_results([read_results(p) for p in args.plot_only])
        out_dir = args.plots or args.plot_only[0].parent / (args.plot_only[0].stem + "-plots")
        make_plots(data, out_dir, console)
        return 0
    try:
        spec = spec_from_args(args)
        quick_default = None
        if args.quick:  # with --baseline-src, the A/B's other tree joins them
            quick_default = QUICK_PROVIDERS + tuple(n for n in registry if n not in PROVIDERS)
        providers = select_providers(args.providers, registry, default=quick_default)
        device = resolve_device(args.device)
        if args.clock and device != "cuda":
            raise ValueError("--clock samples the GPU's SM clock with nvidia-smi: it needs a "
                             "CUDA device")
        timing = make_timing(device, args.warmup_ms, args.rep_ms, args.rounds, args.clock)
    except ValueError as exc:
        console.print(f"flashtriton bench: {exc}")
        return 2
    problems = spec.problems(device)
    total = len(problems) * len(providers) * len(spec.passes)
    if device == "cpu":
        console.print("NOTE: timing on CPU with a wall-clock timer (no CUDA device): the numbers "
                      "below are not GPU figures and peak memory is not measured.")
    console.print(f"{len(problems)} configurations x {len(providers)} providers x "
                  f"{len(spec.passes)} passes = {total} measurements on {device}"
                  + (f", each the median of {timing.rounds} interleaved rounds"
                     if timing.rounds > 1 else ""))
    if args.quick and not args.providers:
        console.print(f"--quick: providers {', '.join(p.name for p in providers)} (add others "
                      f"with --providers; all: {', '.join(registry)})")
    meta = collect_meta(device)

    clock_samples = None

    def checkpoint(rows: list[dict]) -> None:
        if args.out:
            save_partial(args.out, meta, rows, clock_samples)

    start = time.perf_counter()
    with contextlib.ExitStack() as stack:
        if timing.clock:  # (the rows get their clock once the sampler has stopped; the JSON
            #              saved after each configuration, from the samples written so far)
            from flashtriton.analysis.clock import sample_clock

            try:
                clock_samples = stack.enter_context(sample_clock(CLOCK_SAMPLE_MS))
            except RuntimeError as exc:
                console.print(f"flashtriton bench: {exc}")
                return 2
        with console.progress(total) as advance:
            results = run_benchmark(spec, providers, timing, progress=advance,
                                    checkpoint=checkpoint)
    if timing.clock:
        attach_run_clock(results, clock_samples)
    elapsed = time.perf_counter() - start
    timer = timer_description(device, timing.rounds)
    for title, headers, rows in summary_tables(results, list(registry), timer=timer):
        console.table(title, headers, rows)
    counts = {s: sum(row_status(r) == s for r in results) for s in ("ok", "skipped", "wrong", "error")}
    setup = setup_line(results)
    if setup:
        console.print(setup)
    target = target_line(results)
    if target:
        console.print(target)
    console.print("rows: " + ", ".join(f"{n} {s}" for s, n in counts.items())
                  + f"; {elapsed:.0f} s in all")
    data = {"meta": meta, "results": results}
    if args.out:
        console.print(f"results: {write_results(args.out, meta, results)}")
    if args.plots:
        make_plots(data, args.plots, console)
    return 0
