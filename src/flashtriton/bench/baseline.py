"""Another tree's flashtriton beside this one, as the bench provider ``flashtriton_base``, so that
an A/B of two versions of the kernels times both in one process, round by round
(``flashtriton bench --baseline-src DIR --rounds N``).

Timed in two processes, one per tree, the two versions meet the GPU's clock at different
moments: on the H200 the d128 backward at 1k keys took 0.946, 0.858 and 0.800 ms in the three
rounds of one run (docs/perf-log.md, session 21), a wider spread than the changes an A/B looks
for. In one process with interleaved rounds both versions see the same swings.

``DIR`` holds the other tree's package (its ``src/``, or a copy of it: ``DIR/flashtriton``).
It is copied to a temporary folder under the package name ``flashtriton_base``: its imports of
``flashtriton`` and the namespace of its torch custom ops (``flashtriton::``) are renamed, so
that the two copies share no module, op or cache. The copy's Triton kernels compile on their own
(Triton keys its cache on a kernel's source, so unchanged kernels reuse the same binaries).
"""

from __future__ import annotations

import atexit
import importlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from flashtriton.bench.providers import Inputs, Problem, Provider, Runner, flash_attn_runner

NAME = "flashtriton_base"
_IMPORT = re.compile(r"^(\s*)(from|import)\s+flashtriton(?=[\s.]|$)", re.MULTILINE)
_PLAIN_IMPORT = re.compile(r"^(\s*)import\s+flashtriton\s*$", re.MULTILINE)
_OPS = re.compile(r"([\"'])flashtriton::")
_loaded: dict[str, tuple[object, str]] = {}  # NAME -> (module, description), one per process


def rename(source: str, name: str = NAME) -> str:
    """A module's source with its imports of ``flashtriton`` and its custom ops' namespace moved
    to ``name``. ``import flashtriton`` becomes ``import NAME as flashtriton``, so the code below
    it reads the same; ``import flashtriton.x`` without ``as`` is refused (it would bind the name
    ``flashtriton`` to this tree's package)."""
    source = _PLAIN_IMPORT.sub(rf"\1import {name} as flashtriton", source)
    bare = re.search(r"^\s*import\s+flashtriton\.[\w.]+\s*$", source, re.MULTILINE)
    if bare:
        raise ValueError(f"baseline: cannot rename {bare.group(0).strip()!r} (write it with 'as')")
    source = _IMPORT.sub(rf"\1\2 {name}", source)
    return _OPS.sub(rf"\1{name}::", source)


def describe(src: Path) -> str:
    """The tree's path and commit where something says it: $FLASHTRITON_BASELINE_COMMIT (set by
    scripts/gpu_ab.sh), a COMMIT file beside or above the package (scripts/branch_trees.sh
    writes one), or git."""
    if os.environ.get("FLASHTRITON_BASELINE_COMMIT"):
        return f"{src} at {os.environ['FLASHTRITON_BASELINE_COMMIT']}"
    for folder in (src, src.parent):
        if (folder / "COMMIT").is_file():
            return f"{src} at {(folder / 'COMMIT').read_text().strip()}"
    try:
        commit = subprocess.run(["git", "-C", str(src), "rev-parse", "--short", "HEAD"],
                                capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return str(src)
    return f"{src} at {commit.stdout.strip()}" if commit.returncode == 0 else str(src)


def load(src: str | Path):
    """Import the package in ``src`` (a folder holding ``flashtriton/``) as ``flashtriton_base``;
    returns (module, description). One baseline per process: loading another folder raises."""
    src = Path(src).resolve()
    package = src / "flashtriton"
    if not (package / "__init__.py").is_file():
        raise ValueError(f"--baseline-src: {src} has no flashtriton/__init__.py (give a tree's "
                         f"src/ folder)")
    description = describe(src)
    if NAME in _loaded:
        module, loaded_from = _loaded[NAME]
        if loaded_from != description:
            raise ValueError(f"--baseline-src: {loaded_from} is already loaded in this process")
        return module, description
    root = Path(tempfile.mkdtemp(prefix="flashtriton-baseline-"))
    atexit.register(shutil.rmtree, root, ignore_errors=True)  # the copy lives as long as the process
    for path in package.rglob("*.py"):
        if "__pycache__" in path.parts:
            continue
        dest = root / NAME / path.relative_to(package)
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text(rename(path.read_text()))
    sys.path.insert(0, str(root))
    try:
        module = importlib.import_module(NAME)
    finally:
        sys.path.remove(str(root))
    _loaded[NAME] = (module, description)
    return module, description


def provider(src: str | Path) -> Provider:
    """The bench provider ``flashtriton_base``: the baseline's ``flash_attn_func`` on the same
    leaves as ``flashtriton``'s, each row noting which tree it ran."""
    module, description = load(src)

    def setup(problem: Problem, inputs: Inputs) -> Runner:
        return flash_attn_runner(module.flash_attn_func, problem, inputs,
                                 note=f"baseline {description}")

    return Provider(name=NAME, label=f"flashtriton baseline ({description})", setup=setup)
