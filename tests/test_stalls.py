"""`flashtriton stalls`: Nsight Compute source-page CSV split into warp-specialized partitions.

The data is a real capture (tests/data/README.md): the Gluon backward, d64, seqlen 16384, on the
H200. The expected values were read off the same CSV by summing its columns directly (per
``USETMAXREG`` region) while the capture was analysed, independently of this module.
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys

import pytest

from flashtriton.analysis.stalls import analyse, parse_source_csv, read_text, render

DATA = os.path.join(os.path.dirname(__file__), "data", "ncu_source_bwd_d64.csv.gz")


@pytest.fixture(scope="module")
def result():
    kernels = parse_source_csv(read_text(DATA))
    assert list(kernels) == ["_attn_bwd_ws"]
    return analyse("_attn_bwd_ws", kernels["_attn_bwd_ws"], top=5)


def test_partitions_and_roles(result):
    big = [p for p in result.partitions if p.share >= 0.02]
    assert [(p.index, p.role) for p in big] == [(2, "mma"), (4, "mma"), (7, "loads")]
    assert [round(p.share * 100, 1) for p in big] == [33.3, 33.2, 33.3]
    assert sum(p.samples for p in result.partitions) == result.samples == 1493202


def test_stall_reasons_and_top_instructions(result):
    parts = {p.index: p for p in result.partitions}
    producer = parts[7]
    assert next(iter(producer.reasons)) == "long_sb"
    assert round(producer.reasons["long_sb"] * 100, 1) == 85.3
    share, sass, reason = producer.top[0]
    assert round(share * 100, 1) == 72.5 and sass.startswith("@!P0  BRA") and reason == "long_sb"
    # the second consumer waits on an mbarrier (the first consumer's dS) a fifth of its time
    share, sass, reason = parts[4].top[0]
    assert round(share * 100, 1) == 20.5 and "BRA" in sass and reason == "long_sb"
    assert parts[2].top[0][1].startswith("HGMMA.64x64x16")


def test_shared_memory_excess(result):
    assert result.shared_wavefronts == 1888468992
    assert result.shared_excess == 134217728
    assert all(sass.startswith("STS.64") for _, _, sass in result.excess_top)
    assert all(excess == ideal == 8388608 for excess, ideal, _ in result.excess_top)


def test_render_mentions_every_big_partition(result):
    text = render(result)
    assert "partition 2 (mma): 33.3% of samples" in text
    assert "partition 7 (loads): 33.3% of samples" in text
    assert "134,217,728 (7.1%) above ncu's ideal" in text


def test_cli_json_and_plain_csv(tmp_path):
    plain = tmp_path / "src.csv"
    plain.write_bytes(gzip.decompress(open(DATA, "rb").read()))
    out = subprocess.run([sys.executable, "-m", "flashtriton.cli", "stalls", str(plain), "--json",
                          "--top", "2"], capture_output=True, text=True, check=True)
    (kernel,) = json.loads(out.stdout)
    assert kernel["kernel"] == "_attn_bwd_ws" and kernel["shared_excess"] == 134217728
    assert all(len(p["top"]) <= 2 for p in kernel["partitions"])


def test_rejects_other_csv(tmp_path):
    other = tmp_path / "raw.csv"
    other.write_text(open(os.path.join(os.path.dirname(DATA), "ncu_spec_v2.csv")).read())
    out = subprocess.run([sys.executable, "-m", "flashtriton.cli", "stalls", str(other)],
                         capture_output=True, text=True)
    assert out.returncode == 2 and "not an ncu source-page CSV" in out.stderr
    with pytest.raises(ValueError, match="Address, Source"):
        parse_source_csv('"Kernel Name","k",\n"Address","Other"\n')


FWD = os.path.join(os.path.dirname(__file__), "data", "ncu_source_fwd_d64_causal_1k.csv.gz")


@pytest.fixture(scope="module")
def forward():
    (instrs,) = parse_source_csv(read_text(FWD)).values()
    return analyse("_attn_fwd_persistent", instrs)


def test_loops_split_step_work_from_tile_work(forward):
    """The d64 causal forward at 1k: in each consumer the tile loop (one pass a tile and warp:
    4096 tiles x 4 warps) holds the step loop (20 warpgroup MMAs); the first consumer, whose
    last key tile is a half step outside the loop, runs 2.625 steps a tile, the second 3.5, so
    the step loop is 46.3% and 64.3% of their executed instructions. The producer's loop over
    the tiles holds almost all of its work."""
    parts = {p.index: p for p in forward.partitions}
    assert [(p.index, p.role) for p in forward.partitions if p.share > 0.02] == [
        (2, "mma"), (4, "mma"), (7, "loads")]
    for index, step_passes, step_share in [(2, 43008, 46.3), (4, 57344, 64.3)]:
        tile, step = parts[index].loops[:2]
        assert tile.first < step.first and step.last < tile.last
        assert (tile.passes, tile.hgmma) == (16384, 64)
        assert (step.passes, step.hgmma, step.instructions) == (step_passes, 20,
                                                                512 if index == 2 else 511)
        assert round(step.executed_share * 100, 1) == step_share
    assert parts[2].executed == 33392284 and parts[4].executed == 34750236
    producer = parts[7].loops[0]
    assert producer.passes == 16384 and producer.hgmma == 0 and producer.executed_share > 0.95


def test_render_lists_the_big_loops_only(forward):
    text = render(forward)
    assert ("loop 805-1316: 512 instructions (20 HGMMA), 43,008 warp passes of 359 executed, "
            "46.3% of executed") in text
    assert "33,392,284 warp instructions executed" in text
    assert "loop 2000-2027" not in text  # a loop that never ran
    assert "loop 2000-2027" in render(forward, min_loop=0.0)


def test_loop_work_per_pass(forward):
    """Instructions a pass, and a tile's work outside its step loop: the first consumer 2,032
    a tile and warp, 1,090 of them outside the step loop (359 a step); the second 752 (390 a
    step)."""
    parts = {p.index: p for p in forward.partitions}
    (tile0, step0), (tile1, step1) = parts[2].loops[:2], parts[4].loops[:2]
    assert [round(x.per_pass) for x in (tile0, step0, tile1, step1)] == [2032, 359, 2115, 390]
    assert [round(x.outside_inner) for x in (tile0, tile1)] == [1090, 752]
    assert step0.outside_inner == step0.per_pass  # nothing nested in a step
    assert "16,384 warp passes of 2,032 executed (1,090 outside its inner loops)" in render(forward)


def test_cli_min_loop():
    """``--min-loop`` reaches the report: 0 lists the loop that never ran, the default does not."""
    run = lambda *extra: subprocess.run(  # noqa: E731
        [sys.executable, "-m", "flashtriton.cli", "stalls", FWD, *extra], capture_output=True,
        text=True, check=True).stdout
    assert "loop 2000-2027" in run("--min-loop", "0") and "loop 2000-2027" not in run()


def test_samples_by_place(forward):
    """Each consumer's samples around its step loop (d64 causal forward at 1k). The sums were
    read off the CSV directly, split at ``USETMAXREG`` and at the loops' indices above: the
    first consumer 7,887 samples, 1,928 in a tile before its step loop, 4,028 in it, 1,925 after
    it, 6 after the tile loop; the second 7,690: 1,508 / 5,076 / 1,085 / 21. The producer has
    no places (no warpgroup MMA)."""
    parts = {p.index: p for p in forward.partitions}
    first, second = parts[2].places, parts[4].places
    assert (first.before_tiles, first.tile_before_step, first.step, first.tile_after_step,
            first.after_tiles) == pytest.approx((0, 1928 / 7887, 4028 / 7887, 1925 / 7887,
                                                 6 / 7887))
    assert (second.before_tiles, second.tile_before_step, second.step, second.tile_after_step,
            second.after_tiles) == pytest.approx((0, 1508 / 7690, 5076 / 7690, 1085 / 7690,
                                                  21 / 7690))
    # the instruction outside the step loop with the most samples: a wait's spin branch
    assert first.top[1].startswith("@!P1  BRA") and first.top[2] == "long_sb"
    assert second.top[1] == "WARPGROUP.DEPBAR.LE gsb0, 0x0" and second.top[2] == "barrier"
    assert parts[7].places is None
    text = render(forward, regions=True)
    assert ("samples by place: before the tiles 0.0%, a tile before its step loop 24.4%, the "
            "step loop 51.1%, a tile after it 24.4%, after the tiles 0.1%") in text
    assert "samples by place" not in render(forward)


def test_cli_regions():
    """``--regions`` reaches the report and the JSON carries the places either way."""
    run = lambda *extra: subprocess.run(  # noqa: E731
        [sys.executable, "-m", "flashtriton.cli", "stalls", FWD, *extra], capture_output=True,
        text=True, check=True).stdout
    assert "samples by place" in run("--regions") and "samples by place" not in run()
    (kernel,) = json.loads(run("--json"))
    places = [p["places"] for p in kernel["partitions"] if p["places"] is not None]
    assert len(places) == 2 and round(places[0]["step"], 4) == round(4028 / 7887, 4)


def test_places_without_a_tile_loop():
    """A kernel that runs one tile a program has a step loop and no loop around it: the places
    before and after it are then the partition's start and end, and nothing is "before the
    tiles" or "after" them. Five hand-made instructions, the step loop the middle three."""
    from flashtriton.analysis.stalls import Instruction, find_loops, places

    def ins(n, sass, samples):
        return Instruction(address=f"0x{0x100 + 16 * n:x}", sass=sass, samples=samples,
                           reasons={"wait": samples}, executed=1.0, shared_wavefronts=0.0,
                           shared_ideal=0.0, shared_excess=0.0)
    group = [ins(0, "S2R R0, SR_TID.X", 2),
             ins(1, "HGMMA.64x128x16.F32.BF16 R24, gdesc[UR4], RZ", 5),
             ins(2, "MUFU.EX2 R3, R3", 10), ins(3, "BRA 0x110", 1), ins(4, "EXIT", 2)]
    where = places(group, find_loops(group))
    assert (where.before_tiles, where.tile_before_step, where.step, where.tile_after_step,
            where.after_tiles) == pytest.approx((0, 2 / 20, 16 / 20, 2 / 20, 0))
    assert where.top[1] in ("S2R R0, SR_TID.X", "EXIT") and where.top[0] == pytest.approx(0.1)
    assert places(group[:1], []) is None  # no loop with warpgroup MMAs
