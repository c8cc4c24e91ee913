"""scripts/sass_space.py: every config of a tune.py space compiled for sm_90a on this machine
(no GPU), one row per attention kernel the library's call launches (two for the head-dim-256
backward), and a config the launcher refuses reported as an error, not dropped."""

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _run(tmp_path, *args):
    """The script's rows (from its --json file) and its printed table."""
    out = tmp_path / "rows.json"
    env = {**os.environ, "TRITON_INTERPRET": "0",
           "PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    run = subprocess.run([sys.executable, str(ROOT / "scripts/sass_space.py"), *args,
                          "--json", str(out)], capture_output=True, text=True, env=env,
                         timeout=900)
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(out.read_text())["rows"], run.stdout


def test_space_rows(tmp_path):
    rows, table = _run(tmp_path, "--pass", "bwd", "--headdim", "64",
                       "--space", "64:64;4;3;tma|64:128;4;2;gluonsplit")
    # tune.py's tl configs add dQ atomically in the dK/dV kernel: one kernel
    (tl,) = [r for r in rows if not r["gluon"]]
    assert tl["kernel"] == "_attn_bwd_dkdv" and tl["status"] == "ok", rows
    assert tl["fits"] and tl["registers"] > 0 and (tl["block_m"], tl["num_stages"]) == (64, 3)
    (gluon,) = [r for r in rows if r["gluon"]]
    assert gluon["kernel"] == "_attn_bwd_ws" and gluon["split_dq"] and gluon["hgmma"] > 0
    assert tl["unset_descriptors"] == gluon["unset_descriptors"] == 0, rows
    assert "_attn_bwd_dkdv" in table and "_attn_bwd_ws" in table


def test_refused_config_is_an_error_row(tmp_path):
    rows, table = _run(tmp_path, "--pass", "bwd", "--headdim", "256",
                       "--space", "64:128;4;2;gluonsplit")
    (row,) = rows
    # head dim 256 goes to its own dK/dV kernel, which takes 64-key tiles only
    assert row["status"] == "error" and "64-key tiles" in row["note"], row
    assert "error:" in table


def test_d256_backward_is_two_kernels(tmp_path):
    """At head dim 256 the Gluon backward is the dK/dV kernel, then the dQ kernel: a row each
    (here persistent on greedy tile tables, as shipped for causal calls)."""
    rows, table = _run(tmp_path, "--pass", "bwd", "--headdim", "256", "--causal",
                       "--space", "64:64;4;2;gluonseppers@greedy")
    assert "persistent,@greedy" in table, table
    assert [r["kernel"] for r in rows] == ["_attn_bwd_dkdv_hs", "_attn_bwd_dq_hs"], rows
    assert all(r["status"] == "ok" and r["tile_order"] == "greedy" and r["hgmma"] > 0
               and r["fits"] and r["unset_descriptors"] == 0 for r in rows), rows
