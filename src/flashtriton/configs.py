"""Launch parameters: the attention options as one frozen dataclass, and the tuned block configs.

Every tuned entry says which benchmark run chose it. Users override a config through the
``config=`` argument of the launchers, never by editing these tables at run time.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, replace

import torch

LOG2E = 1.4426950408889634


def is_interpreting() -> bool:
    """True when Triton kernels run under the CPU interpreter (``TRITON_INTERPRET=1``)."""
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


@dataclass(frozen=True)
class AttnParams:
    """What the kernels need to know besides the tensors.

    Query i sees key j iff ``i + shift - window_left <= j <= i + shift + window_right`` (a side
    is unlimited when its window is -1), where ``shift = seqlen_k - seqlen_q`` when
    ``bottom_right`` (flash-attn's alignment, per sequence for varlen) else 0 (torch SDPA's).
    Causal is ``window_right = 0``.
    """

    softmax_scale: float
    window_left: int = -1
    window_right: int = -1
    bottom_right: bool = True
    softcap: float = 0.0
    allow_tf32: bool = False
    shift_extra: int = 0
    dropout_p: float = 0.0
    deterministic: bool = False  # backward: dQ by its own kernel instead of atomic adds

    @property
    def has_left(self) -> bool:
        return self.window_left >= 0

    @property
    def has_right(self) -> bool:
        return self.window_right >= 0

    @property
    def qk_scale_log2(self) -> float:
        """Multiplier from raw q·k to the kernels' score: log2 units, or tanh's argument."""
        if self.softcap > 0:
            return self.softmax_scale / self.softcap
        return self.softmax_scale * LOG2E

    @property
    def softcap_log2(self) -> float:
        return self.softcap * LOG2E

    @property
    def scale_ds(self) -> float:
        """dS (natural units) to dQ/dK multiplier."""
        return self.softmax_scale


def make_params(head_dim: int, softmax_scale=None, causal=False, window_size=(-1, -1),
                bottom_right=True, softcap=0.0, allow_tf32=False, dropout_p=0.0,
                deterministic=False) -> AttnParams:
    left, right = (int(window_size[0]), int(window_size[1]))
    if causal:
        right = 0 if right < 0 else min(right, 0)
    scale = 1.0 / math.sqrt(head_dim) if softmax_scale is None else float(softmax_scale)
    return AttnParams(softmax_scale=scale, window_left=left, window_right=right,
                      bottom_right=bottom_right, softcap=float(softcap), allow_tf32=allow_tf32,
                      dropout_p=float(dropout_p), deterministic=bool(deterministic))


@dataclass(frozen=True)
class KernelConfig:
    block_m: int
    block_n: int
    num_warps: int
    num_stages: int
    tma: bool = True  # tensor-descriptor loads where the layout allows
    warp_specialize: bool = False  # tl forward: tl.range(..., warp_specialize=True), unmasked loop
    dq_tma: bool = False  # backward, atomic dQ: tensor-descriptor reduce-add instead of red.add
    fused_dq: bool = True  # backward: dQ added atomically by the dK/dV kernel (else its own kernel)
    # the Gluon kernel where it applies: fwd_gluon.py / bwd_gluon.py (with fused_dq=False at head
    # dim 256: bwd_gluon_d256.py's dK/dV kernel, then bwd_gluon_d256_dq.py's dQ kernel)
    gluon: bool = False
    pingpong: bool = False  # Gluon forward: its two consumer warpgroups take turns to issue
    split_dq: bool = False  # Gluon backward: the two consumer warpgroups share dS, each computing
    #                         half of dQ's columns (one dQ reduction per step, not two)
    defer_dq: bool = False  # Gluon backward, split dQ: a step's dQ product runs in the next step
    dq_on_empty: bool = False  # Gluon backward, deferred dQ: that product waits on the Q/dO
    #                            ring's `empty` barriers, not on dS barriers of its own
    dq_alternate: bool = False  # Gluon backward, dQ on `empty`: the warpgroups take turns at a
    #                             step's whole dQ product instead of half its columns each
    persistent: bool = False  # Gluon forward: one program per SM walks the tiles
    tile_order: str | None = None  # Gluon persistent causal forward: "head" / "row" major tile
    #                               list; both directions at head dim 64/128, persistent:
    #                               "greedy[N]", a host-made table of each program's tiles
    #                               (kernels/schedule.py); None: the launcher's default
    regs: int | None = None  # Gluon forward: a thread's registers on each consumer warpgroup;
    #                          None: fwd_gluon.CONSUMER_REGS's (240 on two, 160 on three)


# Every sweep named below was timed with do_bench's 25 ms warm-up, before session 9 found that
# the first timing after an idle gap runs partly at the boost clock (docs/perf-log.md, session
# 9); scripts/tune.py now warms up for 1 s. Close calls between entries deserve a re-run.
# Tuned on the H200 (bf16, batch*seqlen 16k tokens, heads*headdim 2048, seqlen 16384; d256 at
# 4096), keyed by (head-dim bucket, causal); TFLOP/s as measured by scripts/tune.py.
# Forward d64/d128: bench/results/2026-11-29-tune-tma.json (tensor descriptors beat pointer
# loads: 531 vs 486 at d128). Forward d256: 2026-11-29-tune-fwd-d256.json (two runs: 495 / 416
# in the first, 498 / 419 in the second).
_FWD = {
    (64, False): KernelConfig(128, 128, 4, 3),   # 424 TFLOP/s
    (64, True): KernelConfig(128, 128, 4, 3),    # 404
    (128, False): KernelConfig(128, 64, 4, 2),   # 531
    (128, True): KernelConfig(128, 128, 8, 3),   # 485
    (256, False): KernelConfig(128, 64, 8, 2),   # 495 (was 128x32: 337)
    (256, True): KernelConfig(128, 64, 8, 2),    # 416 (was 128x32: 290)
}
# The Gluon forward on sm_90 (kernels/fwd_gluon.py, warp-specialized: block_m rows split between
# two consumer warpgroups of num_warps warps, num_stages-deep K/V rings), for the calls it covers
# (gluon_eligible); everything else uses _FWD. bench/results/2026-11-29-tune-fwd-pp.json (16k,
# bf16, cuDNN 600.3 / 562.2 at d128 and 449.4 / 442.1 at d64 in the same run):
# d128 ping-pong 612.9 / 592.9 (without it 610.3 / 594.5), d64 without 436.2 / 420.1 (with it
# 427.2 / 414.3); the tl kernel 521.6 / 489.3 and 405.5 / 366.2.
# The persistent variant (KernelConfig.persistent; one program per SM walks the tiles, causal
# tiles head by head, each head's longest first, in a snake) below LONG_FWD_FROM keys:
# 2026-11-29-s5-tune-fwd-pers-rowmajor.json / -d64.json (bf16; one-program-per-tile /
# persistent with causal tiles row-block-major / cuDNN): d128 1k 443.3 / 560.3 / 574.8, 4k
# 592.8 / 611.6 / 615.3, 16k 628.4 / 626.6 / 623.4; causal 1k 281.2 / 342.1 / 435.3, 4k 507.9 /
# 513.3 / 534.6, 16k 617.7 / 602.7 / 577.1; d64 1k 279.8 / 397.7 / 423.5, 4k 400.4 / 437.9 /
# 449.5, 16k 440.6 / 435.9 / 457.2; causal 1k 171.4 / 265.7 / 332.9, 4k 335.9 / 371.0 / 412.9,
# 16k 426.9 / 425.9 / 444.1. With causal tiles head by head (the order shipped),
# 2026-11-29-s5-tune-fwd-pers.json / -d64.json: d128 causal 1k 391 (cuDNN 428), 4k 591 (528);
# d64 causal 1k 268 (333), 4k 395 (413). At 16k one program per tile is as good or better.
# Re-measured at the power-capped clock (1 s warm-up), session 10:
# 2026-11-30-s10-tune-fwd-prefetch-d128.json (d128, ping-pong, one-program-per-tile /
# persistent / cuDNN): 8k 595.4 / 600.9 / 597.3, causal 544.2 / 565.7 / 552.0; 16k 611.8 /
# 592.6 / 604.2, causal 594.1 / 572.1 / 557.0; a second 8k run (…-s10-tune-d128-8k-repeat.json)
# 596.7 / 601.0 / 602.9, causal 540.9 / 559.3 / 538.2. So 8k moved to the persistent side.
# Since session 59 only the d256 forward launches one program per tile from here; d64 and d128
# are persistent at every length (below). LONG_FWD_FROM: from this many keys a forward takes
# its config from _FWD_GLUON_LONG (named PERSISTENT_FWD_BELOW up to session 59).
LONG_FWD_FROM = 16384
_FWD_GLUON = {
    (64, False): KernelConfig(128, 128, 4, 2, gluon=True, pingpong=True, persistent=True),
    (64, True): KernelConfig(128, 128, 4, 2, gluon=True, pingpong=True, persistent=True,
                             tile_order="greedy"),
    (128, False): KernelConfig(128, 128, 4, 2, gluon=True, pingpong=True, persistent=True),
    (128, True): KernelConfig(128, 128, 4, 2, gluon=True, pingpong=True, persistent=True,
                              tile_order="greedy"),
    # head dim 256: two consumers of 64 rows against 64-key tiles (Q, K and V take 196,608
    # bytes of shared memory); one program per tile: no spills, no serialized warpgroup MMAs.
    # Session 17:
    # 2026-11-30-s17-tune-fwd-gluon-d256.json (bf16; with ping-pong / without / the tl kernel
    # 128x64 w8 / cuDNN): 1k 511 / 503 / 396 / 562, causal 376 / 381 / 277 / 413; 4k 632 / 637 /
    # 477 / 624, causal 538 / 544 / 413 / 542; 16k 678 / 673 / 513 / 634, causal 657 / 660 /
    # 499 / 576 (ping-pong or not within 1.2% everywhere; 32-key tiles 20-25% slower).
    # Persistent below LONG_FWD_FROM keys (written in session 17, run in session 18), O
    # leaving through Q's buffers (197,112 bytes of shared memory, 68 / 28 bytes of spills, no
    # serialized MMAs). Its A/B against one program per tile (2026-11-30-s18-ab-fwd-gluon-d256-
    # pers-*.json; TFLOP/s, two runs each side): 1k 496.6 499.5 -> 539.3 521.0, causal 359.6
    # 363.2 -> 415.3 417.6; 4k 647.9 641.5 -> 651.6 654.1, causal 533.5 537.1 -> 586.4 574.2.
    (256, False): KernelConfig(128, 64, 4, 2, gluon=True, pingpong=True, persistent=True),
    (256, True): KernelConfig(128, 64, 4, 2, gluon=True, pingpong=True, persistent=True),
}
# From LONG_FWD_FROM keys the d256 forward launches one program per tile; every other
# entry stays persistent (d64 runs _FWD_GLUON_THREE's from THREE_CONSUMERS_FWD_FROM keys).
_FWD_GLUON_LONG = {**_FWD_GLUON, **{(256, causal): replace(_FWD_GLUON[(256, causal)],
                                                         persistent=False, tile_order=None)
                                    for causal in (False, True)}}
# d128 persistent at every length since session 59: at 16k, four interleaved rounds on an
# H100 (2026-12-06-s58-h100-tune-fwd-d128-16k-persistent.json; one program per tile /
# persistent / cuDNN) 632.3 / 645.4 / 595.6, causal 633.8 / 652.7 / 559.5 (paired +1.5%,
# +2.6%): the persistent kernel gained since session 10's 611.8 / 592.6 (see above). Session
# 59's in-process A/Bs against 1636a37 on an H100 (2026-12-06-s59-h100-ab-fwd-d128-persistent-
# *.json, two runs of 6 paired rounds; …-16k-rounds12-*.json, two of 12): 16k +1.8% / +1.2%,
# causal +4.0% / +3.7%; 8k, persistent on both sides, +0.0%, causal +0.1%.
# d64 causal stays persistent up to LONG_FWD_FROM (two consumers persistent 424.3
# against one program per tile 393.1 at 8k, 441.9 against 427.8 at 16k:
# 2026-11-29-s8-tune-fwd-c3-8k.json, …-c3-causal.json); it takes three consumers, persistent
# (_FWD_GLUON_THREE), from THREE_CONSUMERS_FWD_FROM keys, so its _FWD_GLUON_LONG entry is never
# used.
# Three consumer warpgroups (block_m 192, 64 rows each) for d64, from the key count
# THREE_CONSUMERS_FWD_FROM gives per mask, persistent at every length: more independent MMA and
# exp chains per SM where the exps hold back the products (docs/perf-log.md, sessions 7 and 8).
# 2026-11-29-s7-tune-fwd-c3-skip.json (bf16; two consumers persistent / three persistent /
# three one-program-per-tile / cuDNN): 1k 397.7 / 367.9 / 280.1 / 409.6 (a 192-row block
# leaves 1152 - 1024 rows idle), 4k 420.9 / 450.1 / 418.9 / 436.9, 16k 435.4 / 469.9 / 462.7 /
# 449.0; 2k was not measured. Causal, three consumers were slower at 1k and 4k (168.5 / 268.9,
# 388.6 / 391.3 persistent) and level at 16k (424.3 one-program-per-tile / 430.5).
# Causal, session 8, once the persistent launch lists the tiles row block by row block where
# the head-by-head list balances badly (kernels/schedule.py): 2026-11-29-s8-tune-fwd-c3-causal.json
# (two consumers one-program-per-tile / persistent, three one-program-per-tile / persistent
# head-major / row-major, cuDNN): 16k 427.8 / 441.9, 430.3 / 386.4 / 467.1, 447.5; 4k 334.4 /
# 403.5, 282.0 / 391.1 / 366.4, 417.0; 8k (…-s8-tune-fwd-c3-8k.json) 393.1 / 424.3, — / 391.2
# / 410.6, 423.9. So causal took three from 16384 keys, and two stayed persistent up to there.
# Session 24, ping-pong among the three (2026-11-30-s24-tune-fwd-c3-pp.txt, -fwd-pp-d64.json;
# one timing each, three without / with ping-pong / two consumers / cuDNN): 4k 441.6 / 468.0 /
# 425.9 / 424.2; 8k 478.3 / 499.1 / 435.4 / 436.2, causal 418.1 / 437.7 / 415.1 / 406.1; 16k
# 485.0 / 499.3, causal 441.8 / 462.8. So three take ping-pong, and causal three from 8k. The
# A/B of that (2026-11-30-s24-ab-fwd-d64-pp-inproc-*.json, 12 paired rounds a row, against
# three without ping-pong, and two consumers at 8k causal): 4k +4.2%, 8k +4.1%, 16k +4.0%,
# causal 8k +2.3%, 16k +3.1%. Ping-pong on two causal consumers, in the same A/B: 1k +1.8%
# (paired rounds -8.0..+14.6%), 4k -1.3%: not taken then. Session 26, after the turns moved to
# named barriers (fwd_gluon_tile._turn), ping-pong on the two d64 consumers (_FWD_GLUON above,
# the rows below THREE_CONSUMERS_FWD_FROM), A/B 2026-11-30-s26-ab-fwd-d64-pp2-inproc-*.json (12
# paired rounds a row): causal 1k +3.4% (paired -0.2..+5.9%), 2k -0.1%, 4k -0.1%; without a mask
# 1k +0.6%, 2k -0.4%. Taken.
# Session 43's full grid (2026-12-02-s43-grid-d64-d128-382e0b7.json) put the d64 forward at 2k
# without a mask at 0.952x cuDNN (408.1 against 428.7), below 1k's 1.132x and 4k's 1.116x: two
# consumers there since session 7, which measured three only at 1k, 4k and 16k. Three
# consumers from 2048 keys without a mask, in-process A/B against two
# (2026-12-02-s43-ab-fwd-c3-2k-*.json, two runs of six paired rounds): 434.2 -> 475.2 TFLOP/s,
# +10.0% (paired +0.7..+16.9%), 1.018x -> 1.114x cuDNN. So without a mask three from 2048.
# Causal, session 55: three consumers had lost at 4k causal in session 8 (before ping-pong
# among the three, the greedy tile tables and the row blocks ending at the last row). Again
# with all of those, in-process A/B against two (2026-12-03-s55-ab-fwd-d64c-three-*.json):
# from 1024 keys 1k -0.5% (paired -2.0..+1.9%), 2k +6.3%, 4k +7.8%; from 2048 keys (two runs of
# ten paired rounds) 2k 390.2 384.5 -> 406.4 408.9 (+5.7%, paired +1.9..+9.4%), 4k +8.5%, 8k
# (three on both sides) -0.8%. Sweep 2026-12-03-s55-tune-fwd-d64c.json (four rounds; 128 /
# 192 rows, two slots; cuDNN): 1k 319.9 / 321.9, 315; 2k 381.6 / 398.5, 363; 4k 421.5 / 462.0,
# 402 (three slots within 1.3% of two; 64-key tiles 8-17% slower). So causal three from 2048.
THREE_CONSUMERS_FWD_FROM = {False: 2048, True: 2048}  # by causal
_FWD_GLUON_THREE = {(64, causal): KernelConfig(192, 128, 4, 2, gluon=True, pingpong=True,
                                                persistent=True,
                                                tile_order="greedy" if causal else None)
                    for causal in (False, True)}
# float8_e4m3fn forward, d128 (V read keys-contiguous): 2026-11-29-tune-fwd-fp8.json (666 / 595
# again in a second run). Other head dims use the 16-bit table.
_FWD_FP8 = {
    (128, False): KernelConfig(128, 64, 4, 2),   # 666
    (128, True): KernelConfig(128, 128, 8, 4),   # 596
    # d256 (the tl kernel off sm_90 or off the Gluon path): 2026-12-06-s65-tune-fwd-fp8-gluon.json
    # (H100) 881.6 / 849.8 causal, against 86.2 / 79.8 with the 16-bit table's 128x64 w4 s2
    (256, False): KernelConfig(128, 128, 8, 2),
    (256, True): KernelConfig(128, 128, 8, 2),
}
# float8_e4m3fn forward in Gluon (kernels/fwd_gluon.py, one program per tile; V copied keys-minor
# by kernels/keys_minor.py): every head dim it builds, where it beats the tl kernel (d128 has
# run persistent at every length since session 73: below). d256:
# session 65 on an H100, 16k, TFLOP/s (2026-12-06-s65-tune-fwd-fp8-gluon-2.json and
# -probe-2.json, the running max without slack as shipped): this entry 944.2 / 891.9 causal
# (three slots 955.4 / 922.8) against the tl kernel's 881.0 / 851.1; interleaved, 941.8 / 900.7
# against 877.7 / 845.2 (bf16: 804.1 / 762.7). d64 and d128 since session 66, when P's
# conversion moved to the product (fwd_gluon_tile._fp8_operand): interleaved on an H100
# (2026-12-07-s66-fp8-probe.json, two rounds; Gluon with V's copy / tl / our bf16), d128
# 870.2 / 630.4 / 701.2, causal 828.2 / 643.3 / 694.9; d64 549.4 / 532.9 / 558.3, causal
# 517.3 / 513.6 / 543.4; d256 then 1072.0 / 796.3 / 790.0, causal 979.3 / 827.0 / 758.2.
# d64 three consumers (192 rows) since session 71, P carried as float16 pairs so that they fit
# 160 registers (fwd_gluon_tile._to_operand's HALF): kernel only, three interleaved rounds on an
# H100 at 16k (2026-12-07-s71-h100-fp8-three-ab.json; three / two consumers / our bf16) 628.8
# / 575.0 / 563.4, causal 575.7 / 524.2 / 540.1. d128 keeps two (three spill 1,596 bytes with
# 128-key tiles; with 64-key tiles, session 72, 864.8 / 867.9 and causal 805.0 / 847.5 against
# two: 2026-12-07-s72-h100-fp8-three-d128.json).
_FWD_GLUON_FP8 = {  # one program per tile, long calls (FP8_BY_KEYS)
    (64, False): KernelConfig(192, 128, 4, 2, gluon=True, pingpong=True),
    (64, True): KernelConfig(192, 128, 4, 2, gluon=True, pingpong=True),
    (256, False): KernelConfig(128, 64, 4, 2, gluon=True, pingpong=True),
    (256, True): KernelConfig(128, 64, 4, 2, gluon=True, pingpong=True),
}
# The persistent float8 forward (_FWD_GLUON_FP8_PERSISTENT: two consumers, one program per SM
# walks the tiles, causal on the greedy tile table as our bf16 forward) runs short calls and
# _FWD_GLUON_FP8 long ones, by length (FP8_BY_KEYS below). Session 72 on an H100, kernel
# only, two interleaved rounds (2026-12-07-s72-h100-fp8-persistent-2628af9.json; persistent /
# our bf16): d64 1k 455.5 / 423.2, causal 378.5 / 346.2; 2k 493.9 / 500.7, causal 462.3 /
# 420.4; d128 1k 737.1 / 605.4, causal 562.2 / 465.3; 2k 809.2 / 623.9, causal 705.6 / 580.0.
# One program per tile as shipped then, d64, kernel only, in an earlier call on another H100
# (2026-12-07-s72-h100-fp8-two-three-d64.json): 1k 330.5, causal 202.4; 2k 447.4, causal
# 298.3. One program per tile pays each tile's start (in-kernel descriptors, Q's load, the
# epilogue) with nothing to hide it: our bf16 forward run that way measured 291.1 / 193.0 at
# d64 1k (causal second) against 420.7 / 314.2 persistent
# (2026-12-07-s72-h100-persistence-probe.log). Session 73 on an H100, kernel only, two
# interleaved rounds (2026-12-07-s73-h100-fp8-long.json, -fp8-d64-8k.json, -fp8-d256.json;
# one program per tile as shipped / persistent / our bf16):
#   d64   4k 521.8 / 531.8 / 523.3, causal 403.6 / 495.9 / 477.0;
#         8k 575.4 / 553.6 / 565.1, causal 507.3 / 531.3 / 528.0;
#        16k 607.7 / 567.5 / 566.3, causal 577.4 / 567.7 / 549.2;
#   d128  4k 748.5 / 845.9 / 668.7, causal 646.5 / 772.3 / 642.9;
#        16k 868.8 / 906.1 / 705.3, causal 836.4 / 885.9 / 698.1;
#   d256  1k 667.8 / 815.7 / 602.4, causal 451.1 / 619.8 / 467.9;
#         4k 873.3 / 934.8 / 713.1, causal 772.5 / 898.2 / 668.1;
#        16k 1063.4 / 1042.7 / 794.2, causal 1012.2 / 1024.1 / 761.7.
# So d64 switched at 8k without a mask and at 16k causal (session 75: three consumers
# persistent from 2k, below); d128 stays persistent (ahead at every length measured, 1k to
# 16k); d256 switches at 16k (causal there is level, +1.2%, within two rounds' spread, so it
# keeps one program per tile with the unmasked call). These are kernel timings. The public
# float8 call at 1k keys causal was bound by the host, not the kernel, while float8 calls had no
# call plan (136-219 TFLOP/s in session 73's bench); with plans (session 74,
# 2026-12-07-s74-h100-fp8-bench-1k-224ac4d.json) it gives 326.4 / 460.0 / 497.2 at d64 / d128 /
# d256, within 3% of the launcher called directly.
_FWD_GLUON_FP8_PERSISTENT = {
    (d, causal): KernelConfig(128, 64 if d == 256 else 128, 4, 2, gluon=True, pingpong=True,
                              persistent=True, tile_order="greedy" if causal else None)
    for d in (64, 128, 256) for causal in (False, True)}
# d64 three consumers persistent (192 x 128, two slots; on 128-key tiles it spills 488 bytes,
# with 64-key tiles and three slots it does not, session 74's SASS): session 75 on an H100,
# kernel only, three interleaved rounds (2026-12-07-s75-h100-fp8-pers3.json; one program per
# tile as shipped / two consumers persistent / three persistent / three persistent on 64-key
# tiles): 4k 513.9 / 532.3 / 552.7 / 533.1, causal 402.5 / 488.1 / 499.4 / 501.0; 8k 598.0 /
# 557.4 / 605.0 / 578.5, causal 507.3 / 532.9 / 559.9 / 546.1; 16k 621.5 / 569.0 / 605.3 /
# 581.7, causal 568.5 / 565.1 / 586.6 / 566.5. The spill costs less than the smaller tiles.
_FWD_GLUON_FP8_PERSISTENT3 = {
    (64, causal): KernelConfig(192, 128, 4, 2, gluon=True, pingpong=True, persistent=True,
                               tile_order="greedy" if causal else None)
    for causal in (False, True)}
# The float8 forward's config by length: FP8_BY_KEYS[(head_dim, causal)] lists (below, config)
# from short calls to long, a call of seqlen_k keys taking the first whose ``below`` is None or
# more than seqlen_k. So d64 takes two consumers persistent below 2048 keys (causal 4096),
# three persistent from there (without a mask below 16384, one program per tile from there). At
# 1k and 2k (2026-12-07-s75-h100-fp8-pers3-short.json, two consumers / three persistent / three
# on 64-key tiles): 1k 455.9 / 440.5 / 426.5, causal 378.5 / 333.2 / 370.9; 2k 498.9 / 513.6 /
# 503.5, causal 464.4 / 442.7 / 456.9 (at 1k, 192-row tiles compute 1,152 rows for 1,024).
# d128 two persistent at every length; d256 two persistent below 16384, one program per tile
# from there.
FP8_BY_KEYS = {
    (64, False): ((2048, _FWD_GLUON_FP8_PERSISTENT[(64, False)]),
                  (16384, _FWD_GLUON_FP8_PERSISTENT3[(64, False)]),
                  (None, _FWD_GLUON_FP8[(64, False)])),
    (64, True): ((4096, _FWD_GLUON_FP8_PERSISTENT[(64, True)]),
                 (None, _FWD_GLUON_FP8_PERSISTENT3[(64, True)])),
    **{(128, causal): ((None, _FWD_GLUON_FP8_PERSISTENT[(128, causal)]),)
       for causal in (False, True)},
    **{(256, causal): ((16384, _FWD_GLUON_FP8_PERSISTENT[(256, causal)]),
                       (None, _FWD_GLUON_FP8[(256, causal)]))
       for causal in (False, True)},
}


def gluon_fp8_config(head_dim: int, causal: bool, seqlen_k: int | None = None) -> KernelConfig:
    """The Gluon float8 forward's config for ``seqlen_k`` keys (None: a long call, 16k and up):
    the first of ``FP8_BY_KEYS[(head_dim, causal)]`` whose bound is None or above
    ``seqlen_k``; a ValueError at a head dim it is not built for."""
    key = (head_dim, bool(causal))
    if key not in FP8_BY_KEYS:
        raise ValueError(f"gluon_fp8_config: the Gluon float8 forward is built for head dims "
                         f"{sorted({d for d, _ in FP8_BY_KEYS})}, not {head_dim}")
    for below, cfg in FP8_BY_KEYS[key]:
        if below is None or (seqlen_k is not None and seqlen_k < below):
            return cfg
    raise AssertionError(f"FP8_BY_KEYS[{key}] does not end with a bound of None")


# Dropout's forward (Philox in the loop): 2026-11-29-tune-dropout.json, p = 0.1, lanes grouped
# like the MMA accumulator: 128x128 w8 s3 308, s2 285, 128x64 w4 s2 280.
_FWD_DROPOUT = {
    (128, False): KernelConfig(128, 128, 8, 3),  # 308
    (128, True): KernelConfig(128, 128, 8, 3),   # not timed causal; the same tile
}
_FWD_FP32 = KernelConfig(64, 32, 4, 2, tma=False)  # fp32 tiles are twice the bytes; untuned
# The deterministic backward (dK/dV kernel + dQ kernel): 2026-11-29-tune-tma.json (d64),
# 2026-11-29-tune-d128-initial.json (d128: pointer loads 385 vs 362 with descriptors);
# d256: 2026-11-30-s17-tune-bwd-d256-spills.json (4096 keys, bf16; the configs that spill least,
# scripts/sass_space.py): two kernels 64x64 w8 s2 with pointer loads 199 / 184 TFLOP/s, against
# the atomic-dQ kernel 64x64 w8 s1 163 / 165 (then the default) and cuDNN 367 / 337. Its dK/dV
# kernel spills 528 / 1,192 bytes, the atomic one 2,392 / 4,076 (…-s16-sass-space-bwd-d256*).
# It replaced 32x32 w4 s1 (bench: 110 TFLOP/s), and is the default backward at d256 too.
_BWD_DETERMINISTIC = {
    (64, False): KernelConfig(64, 64, 4, 3, fused_dq=False),              # 359 (descriptors)
    (64, True): KernelConfig(64, 64, 4, 3, fused_dq=False),               # 357
    (128, False): KernelConfig(64, 64, 4, 2, tma=False, fused_dq=False),  # 385 (pointer loads)
    (128, True): KernelConfig(64, 64, 4, 2, tma=False, fused_dq=False),   # 373
    (256, False): KernelConfig(64, 64, 8, 2, tma=False, fused_dq=False),  # 199
    (256, True): KernelConfig(64, 64, 8, 2, tma=False, fused_dq=False),   # 184
}
# The default backward: the faster of the two algorithms per head dim. Atomic dQ (one dK/dV
# kernel) at d128 (2026-11-29-tune-bwd-atomic-d128.json: 393 / 395 vs 390 / 370 for the
# two-kernel path measured in the same run, tune-bwd-det-d128.json); at d256 the two-kernel path
# since session 17 (above; atomic dQ had been 163 / 165 vs 110, tune-bwd-atomic-d256.json); at
# d64 the two-kernel path stays ahead (atomic best 288 / 301 and 290 / 301 in two runs,
# 2026-11-29-tune-bwd-d64.json, vs 359 / 357). With dropout (tune-dropout.json) the d128 entry
# gives 261 (266 with dq_tma).
_BWD = {
    (64, False): _BWD_DETERMINISTIC[(64, False)],
    (64, True): _BWD_DETERMINISTIC[(64, True)],
    (128, False): KernelConfig(64, 128, 8, 3, tma=False),  # 393
    (128, True): KernelConfig(64, 128, 8, 3, tma=False),   # 395
    (256, False): _BWD_DETERMINISTIC[(256, False)],
    (256, True): _BWD_DETERMINISTIC[(256, True)],
}
# Small tiles under the interpreter: each program is simulated element by element on the CPU.
# The Gluon backward on sm_90 (kernels/bwd_gluon.py: a TMA producer, two consumer warpgroups of
# block_n / 2 keys each, block_m queries per step, dQ by TMA reductions), for the calls it covers
# (gluon_bwd_eligible, not deterministic); everything else uses _BWD / _BWD_DETERMINISTIC.
# 16k, bf16: 2026-11-29-s4-tune-bwd-gluon-lse-smem.json, d128 with split dQ 538.3 / 526.0
# against the tl kernel's 392.5 / 396.1 (cuDNN 539.7 / 522.0 in the same run; three-slot rings
# 518.7 / 523.0 in 2026-11-29-s4-tune-bwd-gluon-stages.json); d64:
# 2026-11-29-s4-tune-bwd-gluon-d64-split.json, split dQ with two-slot rings 420.7 / 421.6
# (unsplit 413.0 / 405.3, three slots 418.5 / 408.7; split with three 421.8 / 400.0; the tl
# kernel 250.0 / 249.5; cuDNN 449.5 / 430.4). Unsplit at d128 serializes the warpgroup MMAs
# (ptxas C7512: a [64, 128] dQ accumulator leaves too few registers), as do 128-query steps at
# d64.
# Persistent (one program per SM walks the tiles; causal: each head's longest first, in a snake)
# below 8192 keys, one program per tile from there (session 5; persistent at every length since
# session 59, below):
# 2026-11-29-s5-tune-bwd-pers.json / -d64.json (one-program-per-tile / persistent / cuDNN): d128
# 1k 385.1 / 399.4 / 436.0, causal 262.8 / 292.8 / 313.3; 4k 501.9 / 505.9 / 530.2, causal
# 436.3 / 452.5 / 451.3; 16k 536.6 / 538.4 / 544.7, causal 529.3 / 402.7 / 527.1 (the snake
# balances 16k causal badly); d64 1k 286.7 / 333.6 / 365.1, causal 201.1 / 250.8 / 251.1; 4k
# 378.6 / 397.5 / 428.5, causal 332.9 / 362.1 / 373.9; 16k 414.1 / 418.0, causal 407.1 / 404.5.
# Deferred dQ (each step's dQ product in the next step, so neither consumer waits for the
# other's dS of the step it has just computed), session 8: 2026-11-29-s8-tune-bwd-defer.json
# (one-program-per-tile without / with, persistent without / with, cuDNN): d64 16k 413.9 /
# 449.5, 411.7 / 451.0, 458.0, causal 404.1 / 422.8, 405.8 / 414.5, 437.9; 4k 377.9 / 399.8,
# 392.6 / 416.1, 430.0, causal 333.0 / 344.3, 360.1 / 373.9, 375.0; 1k 287.2 / 285.4, 329.5 /
# 344.3, causal 201.7 / 203.8, 249.0 / 251.2; d128 16k 526.0 / 546.7, 533.2 / 548.7, 549.7,
# causal 526.6 / 525.9, 392.0 / 393.6, 531.3; 4k 490.7 / 504.3, 502.1 / 517.3, causal 414.4 /
# 445.5, 454.1 / 425.7; 1k 377.7 / 374.0, 394.5 / 403.2, causal 257.3 / 259.5, 286.0 / 290.3.
# Shipped where it won (d128 causal kept without: level at 16k, 6% slower persistent at 4k;
# since session 18 deferred there too from FEW_KEYS_BWD_BELOW keys, below).
# Ring depth at d64 again after sessions 8-13 (persistent, deferred dQ, dK/dV by TMA), session
# 15: 2026-11-30-s15-tune-bwd-d64-stages.json / -16k.json (bf16, two slots / three, each timed
# twice in alternation): causal 16k 417.7 418.8 / 424.4 430.1, 4k 378.4 382.7 / 381.8 382.8,
# 1k 230.0 262.6 / 249.5 258.9; without a mask three slots lose (16k 435.0 432.8 / 429.7
# 427.8, 4k -1.5%, 1k -6.3%). So d64 causal takes three slots (166,904 bytes of shared
# memory against 149,984 with two).
# The deferred dQ product waiting on the Q/dO ring's `empty` barriers instead of dS barriers
# of its own (dq_on_empty: one arrival, and its warpgroup barrier, fewer per step), session
# 16: 2026-11-30-s16-ab-bwd-ds-via-empty-*.json (scripts/gpu_ab.sh bench, old / new / new /
# old): d128 without a mask 4k 510.4 498.5 / 521.9 521.4 (+3.4%), 16k 544.8 548.1 / 544.3
# 550.8 (+0.2%), 1k 354.5 357.8 / 432.3 378.3; d64 slower (without a mask -1.6% to -2.9%,
# causal +0.8% to -0.9%). So only d128 without a mask takes it. Its A/B as shipped
# (2026-11-30-s16-ab-bwd-d128-dq-on-empty-*.json): 1k +1.1%, 4k 511.4 509.5 / 517.3 515.9
# (+1.2%), 16k +0.2%.
# These choices (ring slots, dq_on_empty) were measured before session 21 moved the deferred
# path's dS fence after the step's products (7de1754: d64 +1.8-2.4% from 4k,
# 2026-11-30-s21-ab-bwd-late-ds-fence-*.json). Swept again after it in session 22
# (2026-11-30-s22-tune-bwd-after-fence-d64.json / -d128.json, one timing each, 4k and 16k):
# no alternative beat a shipped launch by more than 1.2% (d128 4k without dq_on_empty 516.7
# against 510.4, the opposite sign of session 16's A/B), so they stay.
# Since session 59 every Gluon backward is persistent at every length, and since session 60
# each takes its entry here at every length, but d128 causal below FEW_KEYS_BWD_BELOW keys
# (_BWD_GLUON_FEW_KEYS); the d64 causal backward took three ring slots from 8192 keys
# (PERSISTENT_BWD_BELOW) until then (the two comments below).
_BWD_GLUON = {
    (64, False): KernelConfig(64, 128, 4, 2, gluon=True, split_dq=True, defer_dq=True,
                              dq_on_empty=True, dq_alternate=True, persistent=True),
    (64, True): KernelConfig(64, 128, 4, 2, gluon=True, split_dq=True, defer_dq=True,
                             dq_on_empty=True, dq_alternate=True, persistent=True,
                             tile_order="greedy"),
    (128, False): KernelConfig(64, 128, 4, 2, gluon=True, split_dq=True, defer_dq=True,
                               dq_on_empty=True, persistent=True),
    (128, True): KernelConfig(64, 128, 4, 2, gluon=True, split_dq=True, defer_dq=True,
                              dq_on_empty=True, persistent=True, tile_order="greedy"),
    # head dim 256 (written in session 17, first run in session 18): kernels/bwd_gluon_d256.py's
    # dK/dV kernel, the two consumers splitting the head dim over one 64-key tile, 64-query
    # steps in two-slot rings (231,912 bytes of shared memory since session 51, when its score
    # products became one consumer's each; spills: 140 bytes when written, 104 by session 49,
    # none since session 50's ``_each_step``); then the dQ kernel of
    # kernels/bwd_gluon_d256_dq.py (214,880 bytes when written; 231,328 since session 53, when
    # its score products became one consumer's each with Q or dO in registers; no spills).
    # Its A/B against the
    # tl two-kernel path (2026-11-30-s18-ab-bwd-gluon-d256-dq-*.json, one program per tile):
    # +38% to +96%. Sweep bwd-gluon-d256 (2026-11-30-s18-tune-bwd-gluon-d256.json; TFLOP/s, one
    # slot / two / two persistent; no mask, causal): 1k 236.8 256.9 270.3, 183.7 191.6 212.6;
    # 4k 305.2 340.5 348.7, 283.4 312.8 325.8; 16k 314.3 370.1 367.4, 327.5 371.0 298.4. So
    # two slots, persistent below 8192 keys. The dQ kernel follows the same flag
    # since session 19 (A/B, 2026-11-30-s19-ab-bwd-d256-dq-pers-*.json: 1k +2.6%, causal +13.1%
    # with its two new runs 15% apart; 4k +0.5% / -0.8%). Waiting for a step's last products in
    # the next step (branch bwd-d256-defer-wait) was slower in 11 of 12 rows
    # (2026-11-30-s19-tune-bwd-gluon-d256-defer.json: -1.1% to -9.6%). A dQ kernel whose
    # warpgroups split the rows instead of the head dim (branch bwd-d256-dq-rows) was 1.4-5.7%
    # slower in 10 of 12 launches, 0.8% faster in two unshipped ones (one program per tile at
    # 1k) (2026-11-30-s20-tune-bwd-gluon-d256-dqrows.json; persistent 1k 306.9 against 322.8,
    # 16k one program per tile 361.4 against 376.0).
    # Session 44: both kernels persistent at every length, causal on greedy tile tables (the
    # dQ kernel's from the forward's tile costs), sweep 2026-12-03-s44-tune-bwd-d256.json (one
    # timing each, TFLOP/s; one program per tile / persistent / persistent greedy / cuDNN): no
    # mask 2k 336.4 / 358.9 / 351.7 / 342, 4k 361.7 / 366.1 / 372.9 / 369, 8k 376.2 / 382.1 /
    # 383.6 / 358, 16k 382.5 / 385.6 / 385.1 / 358; causal 2k 271.0 / 313.9 / 315.7 / 291, 4k
    # 325.6 / 344.3 / 353.0 / 340, 8k 360.8 / 310.5 / 372.5 / 376, 16k 382.3 / 292.4 / 386.8 /
    # 382 (the plain persistent order balances long causal calls badly, as at d128 in session
    # 5; the table does not). In-process A/B against 3cc7f7d: docs/perf-log.md, session 44.
    (256, False): KernelConfig(64, 64, 4, 2, gluon=True, fused_dq=False, persistent=True),
    (256, True): KernelConfig(64, 64, 4, 2, gluon=True, fused_dq=False, persistent=True,
                              tile_order="greedy"),
}
# Every backward entry is persistent at every length (d256 since session 44, the rest as the
# comments below say).
# Causal d64/d128 (and the d128 causal entry below FEW_KEYS_BWD_BELOW): persistent at every
# length on a greedy tile table (tile_order "greedy", kernels/schedule.py), the forward's d64/
# d128 causal entries too (sessions 36-37). In-process A/B against feb15ce (the snake below
# 8192 / 16384 keys, one program per tile from there;
# 2026-12-01-s37-ab-greedy-causal-*.json, two runs of 6 paired rounds): backward d128 1k / 4k /
# 16k +2.1% / +2.9% / +2.4% (16k 567.5 571.5 -> 578.6 585.0), d64 +0.2% / +0.0% / +0.7%;
# forward d64 +2.2% / +1.0% / +3.4%, d128 -0.1% / -0.5% / -0.2% (+0.5-0.6% in session 36's
# run of the first candidate). No row lost beyond its spread, so every one takes it.
# d128 without a mask persistent at every length since session 59: scripts/tune.py, six
# interleaved rounds on an H100 (2026-12-06-s59-h100-tune-bwd-d128-pers.json; one program per
# tile / persistent / cuDNN, TFLOP/s): 8k 553.8 / 565.8 / 513.3, 16k 572.6 / 585.0 / 525.4
# (paired +2.4% and +1.8%); session 5 had them level (16k 536.6 / 538.4), before the deferred
# dQ, the dS staging buffers, TMA dK/dV stores and the ring bits of sessions 8-35. In-process
# A/B against 4dfac1d (2026-12-06-s59-h100-ab-bwd-d128-persistent-*.json, two runs of 8 paired
# rounds): 8k +1.8% (566.6 572.7 -> 585.2 577.3), 16k +0.7% (578.5 578.8 -> 594.5 589.9).
# d64, session 28's sweep bwd-d64-m128 (2026-11-30-s28-tune-bwd-d64-m128.json, one timing
# each): without a mask the persistent launch at 16k 455.7 against one program per tile's
# 447.3, so d64 stays persistent at every length; causal, two ring slots against three 260.6 /
# 254.0 at 1k and 384.8 / 379.9 at 4k, so two below 8192 keys (the d64 causal entry
# above) and three, one program per tile, from there (session 15's A/B, not re-measured).
# Session 29's in-process A/B of both (2026-11-30-s29-ab-bwd-d64-launches-*): 16k without a mask
# +1.4%; the causal rows at 1k-16k -0.9..+0.4%, within their spread.
# d64 with dq_on_empty (prepared in session 30, measured in session 31): with the barrier on a
# tile's first step, a d64 step has 4 warpgroup barriers instead of 6 (the arrival on ds_ready
# and the one on empty each brought one of Triton's); 483 instructions against 487. Session
# 31's in-process A/B of it with that barrier against c3652c6 (2026-12-01-s31-ab-bwd-d64-on-
# empty-*.json): +0.1% to +0.9% in all six d64 rows, 16k 471.2 468.8 -> 472.7 478.5; with the
# dQ cast changes as well (2026-12-01-s31-ab-bwd-s31-merged-*.json) +0.6% to +3.0%. Sweep
# bwd-d64-kv-regs (2026-12-01-s30-tune-bwd-d64-kv-regs.json, one timing each, before that
# barrier change): with on-empty against without, 4k 452.1 / 451.2, causal 412.7 / 410.1; 16k
# (three slots) 477.3 / 471.3, causal 466.7 / 462.9; 1k causal (two slots) 261.6 / 263.0.
# d64 with dq_alternate (prepared in session 31, measured in session 32): the warpgroups take
# turns at a step's whole dQ product (64 columns over both warpgroups' keys) instead of each
# taking 32 columns every step. Per step the products then read 160 KB of shared memory
# instead of 176 KB (dSᵀ once, not twice; computed from the operand tiles), which the d64 step
# nearly fills; the step loop, unrolled by two, has 813 and 835 instructions (the two
# warpgroups) for two steps against 466 and 467 for one, 40 warpgroup MMAs, 6 and 7 barriers;
# 166,328 bytes of shared memory, 132 bytes of spills, read once a tile
# (flashtriton.analysis.sass.compile_launch).
# Session 32's in-process A/B against 4deb5e6 (2026-12-01-s32-ab-bwd-d64-dq-alternate-*.json,
# two runs of 6 paired rounds): +2.0%, +2.4%, +5.0% at 1k, 4k, 16k (16k 479.3 477.3 -> 500.9
# 503.1; the 4k and 16k paired ranges wholly above zero), causal +0.8%, +2.3%, +1.7%. Its sweep
# bwd-d64-alt (2026-12-01-s32-tune-bwd-d64-alt.json, one timing each; with / without it) chose
# the shipped launches again: persistent, two slots, 1k 385.9 / 366.1, 4k 463.7 / 451.0, 16k
# 514.9 / 482.3, causal 1k 279.4 / 276.3, 4k 431.2 / 414.4; causal 16k within 1.2% of one
# another (one program per tile, three slots 482.7 / 470.9; two slots 488.6). Two slots there,
# in session 33's in-process A/B against 79043a6 (2026-12-01-s33-ab-bwd-d64c-long-s2-*.json):
# 8k causal 441.1 438.5 -> 441.5 444.9, 16k 490.0 489.7 -> 487.7 491.4 (-0.1% each, the paired
# ranges across zero), so three stay (d64 causal persistent on its greedy table since sessions
# 36-37, above; one program per tile before).
# Two slots at every length since session 60 (the kernel changed under the configs in sessions
# 34-59): at Nsight Compute's base clock on an H100 (2026-12-06-s60-h100-cycles-ab-bwd-d64c-
# s2.txt) the kernel's SM active cycles -2.5% at 8k causal, -2.8% at 16k, with the same
# instructions (+0.01%); in-process A/B against 1c263f9 (2026-12-06-s60-h100-ab-bwd-d64c-s2-
# *.json, two runs of 6 paired rounds): 8k +2.2% (486.3 474.4 -> 488.5 490.0), 16k +2.1% (504.4
# 505.6 -> 515.4 513.2).
# Session 35 changed the kernel under the d64 and d128 configs above, not the configs: a step
# finds its rows without an integer division, and from d128 the rings' slots and phases come
# from bit operations. Its in-process A/B against 3c40471 (2026-12-01-s35-ab-bwd-ring-bits-
# *.json, two runs of 6 paired rounds): +0.6% to +4.6% in all twelve d64/d128 rows, d128 16k
# 555.5 562.1 -> 577.8 573.2, d64 16k causal 480.9 483.1 -> 487.4 494.7. Not re-swept since.
# d128 causal below FEW_KEYS_BWD_BELOW keys: dQ not deferred. Session 17's three runs of the
# sweep bwd-d128c-empty (2026-11-30-s17-tune-bwd-d128c-empty-run{1,2,3}.json; bf16, TFLOP/s;
# not deferred / deferred / deferred on `empty`; cuDNN): persistent 1k 314.5 317.6 318.1 /
# 291.6 293.0 318.7 / 290.3 280.3 317.9, cuDNN 302.3 299.4 296.7; 4k 437.4 463.0 438.0 /
# 461.2 458.9 474.4 / 472.5 469.7 475.8, cuDNN 453.8 453.5 437.1; one program per tile 16k
# 511.3 516.4 523.7 / 528.0 525.4 524.2 / 521.4 531.4 527.0, cuDNN 506.9 516.5 516.7. Session 8
# had found deferring 2-6% slower persistent at 4k (above), before the dS staging buffers and
# the TMA dK/dV stores of sessions 9-13. Session 18's A/B of this split (2026-11-30-s18-ab-bwd-
# d128c-defer-*.json; TFLOP/s, two runs each side): 4k 441.4 436.9 -> 458.7 452.5, 16k 513.4
# 519.7 -> 532.3 536.0, 2k 349.8 363.9 -> 349.3 378.8 (too noisy to say; 1k, the same config
# on both sides, 264.5 278.6 -> 295.4 295.5: the A/B's spread at 1k).
FEW_KEYS_BWD_BELOW = 2048
_BWD_GLUON_FEW_KEYS = {
    (128, True): KernelConfig(64, 128, 4, 2, gluon=True, split_dq=True, persistent=True,
                              tile_order="greedy"),
}
_INTERPRET = KernelConfig(16, 16, 4, 1)
# Dropout's mask is drawn for 32 keys at a time: key blocks of 32 or more.
_INTERPRET_DROPOUT = KernelConfig(16, 32, 4, 1)


def _bucket(head_dim: int) -> int:
    return 64 if head_dim <= 64 else (128 if head_dim <= 128 else 256)


def tuned_fwd_config(dtype: torch.dtype, head_dim: int, causal: bool,
                     dropout: bool = False) -> KernelConfig:
    """The GPU forward config, whatever the process runs on (the analysis tools model the GPU)."""
    if dtype == torch.float32:
        return _FWD_FP32
    key = (_bucket(head_dim), bool(causal))
    if dtype == torch.float8_e4m3fn and key in _FWD_FP8:
        return _FWD_FP8[key]
    if dropout and key in _FWD_DROPOUT:
        return _FWD_DROPOUT[key]
    return _FWD[key]


def _gluon_config(table: dict, dtype: torch.dtype, head_dim: int,
                  causal: bool) -> KernelConfig | None:
    """A Gluon table's entry for 16-bit inputs (None otherwise, and under the interpreter)."""
    if is_interpreting() or dtype not in (torch.float16, torch.bfloat16):
        return None
    return table.get((head_dim, bool(causal)))


def gluon_fwd_config(dtype: torch.dtype, head_dim: int, causal: bool, dropout: bool = False,
                     seqlen_k: int = 0) -> KernelConfig | None:
    """The Gluon forward's config for 16-bit inputs at head dim 64, 128 or 256 (None otherwise,
    and under the interpreter): persistent at every length but at d256, which launches one
    program per tile from LONG_FWD_FROM keys;
    where ``_FWD_GLUON_THREE`` has an entry (d64), that entry from
    THREE_CONSUMERS_FWD_FROM[causal] keys. float8_e4m3fn inputs: ``gluon_fp8_config``'s at
    the head dims it builds (64, 128, 256). The launcher still checks that the call is one the
    kernel covers."""
    if dropout:
        return None
    if dtype == torch.float8_e4m3fn:
        if is_interpreting() or (head_dim, bool(causal)) not in FP8_BY_KEYS:
            return None
        return gluon_fp8_config(head_dim, causal, seqlen_k)
    cfg = _gluon_config(_FWD_GLUON if seqlen_k < LONG_FWD_FROM else _FWD_GLUON_LONG, dtype,
                        head_dim, causal)
    if cfg is not None and seqlen_k >= THREE_CONSUMERS_FWD_FROM[bool(causal)]:
        cfg = _FWD_GLUON_THREE.get((head_dim, bool(causal)), cfg)
    return cfg


def fwd_config(dtype: torch.dtype, head_dim: int, causal: bool,
               dropout: bool = False) -> KernelConfig:
    """The config a forward launch uses: the tuned one, or small tiles under the interpreter."""
    if is_interpreting():
        return _INTERPRET_DROPOUT if dropout else _INTERPRET
    return tuned_fwd_config(dtype, head_dim, causal, dropout)


def tuned_bwd_config(dtype: torch.dtype, head_dim: int, causal: bool,
                     deterministic: bool = False) -> KernelConfig:
    """The GPU backward config: ``deterministic`` selects the two-kernel (dK/dV + dQ) table."""
    if dtype == torch.float32:
        return KernelConfig(32, 32, 4, 1, tma=False, fused_dq=not deterministic)
    table = _BWD_DETERMINISTIC if deterministic else _BWD
    return table[(_bucket(head_dim), bool(causal))]


def gluon_bwd_config(dtype: torch.dtype, head_dim: int, causal: bool, deterministic: bool = False,
                     dropout: bool = False, seqlen_k: int = 0) -> KernelConfig | None:
    """The Gluon backward's config for 16-bit inputs at head dim 64, 128 or 256 (None otherwise, in
    deterministic mode, and under the interpreter): persistent at every length (since session
    59; causal on a greedy tile table), the same config at every length but where
    ``_BWD_GLUON_FEW_KEYS`` has an entry (d128 causal), that entry below FEW_KEYS_BWD_BELOW
    keys. The launcher still checks that the call is one the kernel covers."""
    if deterministic or dropout:
        return None
    cfg = _gluon_config(_BWD_GLUON, dtype, head_dim, causal)
    if cfg is not None and seqlen_k < FEW_KEYS_BWD_BELOW:
        cfg = _BWD_GLUON_FEW_KEYS.get((head_dim, bool(causal)), cfg)
    return cfg


def bwd_config(dtype: torch.dtype, head_dim: int, causal: bool,
               deterministic: bool = False, dropout: bool = False) -> KernelConfig:
    """The config a backward launch uses: the tuned one, or small tiles under the interpreter."""
    if is_interpreting():
        return _INTERPRET_DROPOUT if dropout else _INTERPRET
    return tuned_bwd_config(dtype, head_dim, causal, deterministic)
