"""HBM traffic model: the bytes a kernel moves, from shapes, dtype, blocks and the GPU.

Three numbers per kernel and pass:

- **compulsory**: every input read once, every output written once (the floor);
- **requested**: the bytes the kernel's loads and stores ask of global memory, counting every
  re-read (the no-reuse upper bound; what L2 sees);
- **DRAM estimate**: requested bytes minus the re-reads that L2 serves.

The L2 assumption, stated once: programs run in launch order (grid axis 0 fastest), ``P =
min(programs, SMs x programs_per_sm)`` of them at a time. A tile that several programs share
(v2: a head's K/V, read by each of its Q-block programs) comes from DRAM once per head when the
tiles of all heads in flight fit in L2 (``ceil(P / sharers) + 1`` heads), else once per wave of
co-resident sharers. A tile that one program re-reads itself (v1: its head's Q, O, l, m, once
per K/V block) hits L2 only when every in-flight program's re-read set fits at once; L2 acts
as LRU, so a cyclic sweep larger than the cache misses every time. Writes reach DRAM once per
store unless the whole re-written set fits in L2. Dirty lines still in L2 when the kernel ends
are counted as written (Nsight Compute may not see them: the model's writes are an upper bound).
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field

from flashtriton.analysis.gpus import GPU, GPUS, get_gpu

DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2}
STAT_BYTES = 4  # row statistics (l, m, LSE, delta) are float32
O_WORKSPACE_BYTES = 4  # v1 keeps O in float32 between K/V blocks


@dataclass(frozen=True)
class Problem:
    """Attention shapes, folded over batch and heads (the ladder has no GQA)."""

    batch_heads: int
    seqlen_q: int
    seqlen_k: int
    head_dim: int
    dtype: str = "float32"
    head_dim_v: int | None = None

    def __post_init__(self):
        if self.dtype not in DTYPE_BYTES:
            raise ValueError(f"dtype: expected one of {sorted(DTYPE_BYTES)}, got {self.dtype!r}")
        for name in ("batch_heads", "seqlen_q", "seqlen_k", "head_dim"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name}: expected >= 1, got {getattr(self, name)}")

    @property
    def elem(self) -> int:
        return DTYPE_BYTES[self.dtype]

    @property
    def dv(self) -> int:
        return self.head_dim if self.head_dim_v is None else self.head_dim_v

    # bytes of each whole tensor (all heads)
    @property
    def q(self) -> int:
        return self.batch_heads * self.seqlen_q * self.head_dim * self.elem

    @property
    def k(self) -> int:
        return self.batch_heads * self.seqlen_k * self.head_dim * self.elem

    @property
    def v(self) -> int:
        return self.batch_heads * self.seqlen_k * self.dv * self.elem

    @property
    def o(self) -> int:
        return self.batch_heads * self.seqlen_q * self.dv * self.elem

    @property
    def row_stat(self) -> int:
        return self.batch_heads * self.seqlen_q * STAT_BYTES


@dataclass(frozen=True)
class Blocks:
    block_m: int
    block_n: int
    programs_per_sm: int = 2  # ncu measured 15-25% occupancy at 4 warps for v1/v2 on the H200 (SPEC.md §2)


@dataclass(frozen=True)
class KernelTraffic:
    """One kernel launch."""

    kernel: str
    programs: int
    programs_in_flight: int
    requested_read_bytes: int
    requested_write_bytes: int
    read_bytes: int  # DRAM estimate
    write_bytes: int
    l2_working_set_bytes: int
    l2_reuse: bool  # did the re-read set fit in L2


@dataclass(frozen=True)
class Traffic:
    """One pass (fwd or bwd) of one variant: the sum of its kernels."""

    variant: str
    pass_: str
    gpu: str
    compulsory_read_bytes: int
    compulsory_write_bytes: int
    kernels: tuple[KernelTraffic, ...] = field(default_factory=tuple)

    @property
    def requested_read_bytes(self) -> int:
        return sum(k.requested_read_bytes for k in self.kernels)

    @property
    def requested_write_bytes(self) -> int:
        return sum(k.requested_write_bytes for k in self.kernels)

    @property
    def read_bytes(self) -> int:
        return sum(k.read_bytes for k in self.kernels)

    @property
    def write_bytes(self) -> int:
        return sum(k.write_bytes for k in self.kernels)

    def as_dict(self) -> dict:
        return {
            "variant": self.variant, "pass": self.pass_, "gpu": self.gpu,
            "read_bytes": self.read_bytes, "write_bytes": self.write_bytes,
            "compulsory_read_bytes": self.compulsory_read_bytes,
            "compulsory_write_bytes": self.compulsory_write_bytes,
            "requested_read_bytes": self.requested_read_bytes,
            "requested_write_bytes": self.requested_write_bytes,
            "kernels": [asdict(k) for k in self.kernels],
        }


def _in_flight(programs: int, gpu: GPU, blocks: Blocks) -> int:
    return min(programs, gpu.sms * blocks.programs_per_sm)


def _shared(per_head: int, heads: int, sharers: int, in_flight: int, gpu: GPU):
    """A per-head tile set read by ``sharers`` programs of each head (sharer axis fastest).
    Returns (requested, dram, working_set, fits)."""
    requested = heads * sharers * per_head
    heads_in_flight = min(heads, math.ceil(in_flight / sharers) + 1)
    working_set = heads_in_flight * per_head
    fits = working_set <= gpu.l2_bytes
    waves = 1 if fits else math.ceil(sharers / in_flight)
    return requested, heads * per_head * waves, working_set, fits


def _v1_fwd(p: Problem, b: Blocks, gpu: GPU) -> list[KernelTraffic]:
    heads, n_kv = p.batch_heads, math.ceil(p.seqlen_k / b.block_n)
    in_flight = _in_flight(heads, gpu, b)
    o32 = p.batch_heads * p.seqlen_q * p.dv * O_WORKSPACE_BYTES
    state = o32 + 2 * p.row_stat  # O, l, m: read and written once per K/V block
    swept = p.q + state  # what each program re-reads once per K/V block
    working_set = in_flight * (swept // heads)
    fits = working_set <= gpu.l2_bytes
    req_read = p.k + p.v + n_kv * swept
    req_write = n_kv * state
    read = p.k + p.v + swept if fits else req_read
    write = state if fits else req_write
    return [KernelTraffic("_ladder_v1_fwd", heads, in_flight, req_read, req_write, read, write,
                          working_set, fits)]


def _v2_fwd(p: Problem, b: Blocks, gpu: GPU, *, lse: bool = False, kernel="_ladder_v2_fwd"):
    n_q = math.ceil(p.seqlen_q / b.block_m)
    programs = n_q * p.batch_heads
    in_flight = _in_flight(programs, gpu, b)
    kv_req, kv_dram, ws, fits = _shared((p.k + p.v) // p.batch_heads, p.batch_heads, n_q, in_flight, gpu)
    write = p.o + (p.row_stat if lse else 0)
    return [KernelTraffic(kernel, programs, in_flight, p.q + kv_req, write, p.q + kv_dram, write, ws, fits)]


def _production_fwd(p: Problem, b: Blocks, gpu: GPU):
    return _v2_fwd(p, b, gpu, lse=True, kernel="_attn_fwd")


def _production_bwd(p: Problem, b: Blocks, gpu: GPU):
    """FA2-style backward as in kernels/bwd.py: delta = rowsum(dO * O); a dK/dV kernel (one program
    per K/V block, streaming Q, dO, LSE, delta); then either a dQ kernel (one per Q block,
    streaming K, V) or, where the config fuses dQ (``KernelConfig.fused_dq``), atomic float32
    adds of every program's dQ share (requested: one float32 dQ per K/V block column; DRAM: the
    zeroed buffer written, then read once by the cast) and the cast to the input dtype."""
    import torch

    from flashtriton.configs import tuned_bwd_config

    heads = p.batch_heads
    n_q, n_kv = math.ceil(p.seqlen_q / b.block_m), math.ceil(p.seqlen_k / b.block_n)
    do = p.o
    pre_prog = n_q * heads
    pre = KernelTraffic("_bwd_preprocess", pre_prog, _in_flight(pre_prog, gpu, b), p.o + do,
                        p.row_stat, p.o + do, p.row_stat, 0, True)
    kv_prog = n_kv * heads
    kv_fl = _in_flight(kv_prog, gpu, b)
    rows = p.q + do + 2 * p.row_stat
    r_req, r_dram, ws1, fit1 = _shared(rows // heads, heads, n_kv, kv_fl, gpu)
    fused = tuned_bwd_config(getattr(torch, p.dtype), p.head_dim, False).fused_dq
    if fused:
        dq32 = p.q * 4 // p.elem
        dkdv = KernelTraffic("_attn_bwd_dkdv", kv_prog, kv_fl, p.k + p.v + r_req,
                             p.k + p.v + n_kv * dq32, p.k + p.v + r_dram, p.k + p.v + dq32,
                             ws1 + dq32, fit1)
        cast = KernelTraffic("dq_cast", 1, 1, dq32, p.q, dq32, p.q, 0, True)
        return [pre, dkdv, cast]
    dkdv = KernelTraffic("_attn_bwd_dkdv", kv_prog, kv_fl, p.k + p.v + r_req, p.k + p.v,
                         p.k + p.v + r_dram, p.k + p.v, ws1, fit1)
    q_prog = n_q * heads
    q_fl = _in_flight(q_prog, gpu, b)
    c_req, c_dram, ws2, fit2 = _shared((p.k + p.v) // heads, heads, n_q, q_fl, gpu)
    dq = KernelTraffic("_attn_bwd_dq", q_prog, q_fl, rows + c_req, p.q, rows + c_dram, p.q, ws2, fit2)
    return [pre, dkdv, dq]


# (model, pass) -> kernels. The ladder's Variant.traffic_model names the model.
MODELS = {
    ("v1", "fwd"): _v1_fwd,
    ("v2", "fwd"): _v2_fwd,
    ("production", "fwd"): _production_fwd,
    ("production", "bwd"): _production_bwd,
}


def model(model_name: str, problem: Problem, blocks: Blocks, gpu: GPU | str, pass_: str = "fwd",
          variant: str | None = None) -> Traffic:
    """Traffic of one pass. ``model_name`` is a ladder variant's ``traffic_model``."""
    gpu = get_gpu(gpu) if isinstance(gpu, str) else gpu
    try:
        fn = MODELS[(model_name, pass_)]
    except KeyError:
        known = ", ".join(f"{m}/{s}" for m, s in MODELS)
        raise ValueError(f"model/pass: no traffic model for {model_name}/{pass_}; known: {known}") from None
    if pass_ == "fwd":
        c_read, c_write = problem.q + problem.k + problem.v, problem.o
        if model_name == "production":
            c_write += problem.row_stat
    else:  # reads Q, K, V, O, dO, LSE; writes dQ, dK, dV
        c_read = problem.q + problem.k + problem.v + 2 * problem.o + problem.row_stat
        c_write = problem.q + problem.k + problem.v
    return Traffic(variant or model_name, pass_, gpu.name, c_read, c_write, tuple(fn(problem, blocks, gpu)))


def variant_traffic(variant: str, problem: Problem, gpu: GPU | str, pass_: str = "fwd",
                    block_m: int | None = None, block_n: int | None = None,
                    programs_per_sm: int = 2) -> Traffic:
    """Traffic of a ladder variant; blocks default to what the variant launches with."""
    import torch

    from flashtriton.ladder import VARIANTS

    if variant not in VARIANTS:
        raise ValueError(f"variant: unknown {variant!r}; known: {', '.join(VARIANTS)}")
    v = VARIANTS[variant]
    if block_m is None or block_n is None:
        dtype = getattr(torch, problem.dtype)
        if pass_ == "bwd":
            from flashtriton.configs import tuned_bwd_config

            cfg = tuned_bwd_config(dtype, problem.head_dim, False)
        else:
            cfg = v.default_config(dtype, problem.head_dim)
        block_m = cfg.block_m if block_m is None else block_m
        block_n = cfg.block_n if block_n is None else block_n
    return model(v.traffic_model, problem, Blocks(block_m, block_n, programs_per_sm), gpu, pass_, variant)


def _fmt(n: float) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if n >= scale:
            return f"{n / scale:.2f} {unit}"
    return f"{n:.0f} B"


def add_cli_arguments(parser) -> None:
    parser.add_argument("--variant", default="v2", help="ladder variant (v1, v2, v2_kt, v2_pad, production)")
    parser.add_argument("--pass", dest="pass_", default="fwd", choices=["fwd", "bwd"])
    parser.add_argument("--gpu", default="h200", choices=sorted(GPUS))
    parser.add_argument("--batch-heads", type=int, default=320)
    parser.add_argument("--seqlen", type=int, default=2048, help="query length (and key length unless --seqlen-k)")
    parser.add_argument("--seqlen-k", type=int, default=None)
    parser.add_argument("--headdim", type=int, default=32)
    parser.add_argument("--headdim-v", type=int, default=None)
    parser.add_argument("--dtype", default="float32", choices=sorted(DTYPE_BYTES))
    parser.add_argument("--block-m", type=int, default=None, help="default: the variant's own")
    parser.add_argument("--block-n", type=int, default=None, help="default: the variant's own")
    parser.add_argument("--programs-per-sm", type=int, default=2,
                        help="co-resident programs per SM, for the L2 reuse estimate")
    parser.add_argument("--json", action="store_true", help="print one JSON object")


def run_cli(args) -> int:
    problem = Problem(args.batch_heads, args.seqlen, args.seqlen_k or args.seqlen, args.headdim,
                      args.dtype, args.headdim_v)
    t = variant_traffic(args.variant, problem, args.gpu, args.pass_, args.block_m, args.block_n,
                        args.programs_per_sm)
    d = t.as_dict()
    d["problem"] = asdict(problem)
    if args.json:
        print(json.dumps(d, indent=2))
        return 0
    print(f"{t.variant} {t.pass_} on {t.gpu}: {problem}")
    print(f"  compulsory  read {_fmt(t.compulsory_read_bytes):>10}  write {_fmt(t.compulsory_write_bytes):>10}")
    print(f"  requested   read {_fmt(t.requested_read_bytes):>10}  write {_fmt(t.requested_write_bytes):>10}")
    print(f"  DRAM (est.) read {_fmt(t.read_bytes):>10}  write {_fmt(t.write_bytes):>10}")
    for k in t.kernels:
        print(f"  {k.kernel}: {k.programs} programs, {k.programs_in_flight} in flight, re-read set "
              f"{_fmt(k.l2_working_set_bytes)} {'fits' if k.l2_reuse else 'does not fit'} in L2")
    return 0
