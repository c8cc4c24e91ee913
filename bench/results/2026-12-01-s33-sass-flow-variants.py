"""Session 33: compile the Gluon backward (kernels/bwd_gluon.py) for several specializations
(shapes, causal, persistent, ring slots, dQ flags) offline for sm_90a and run
flashtriton.analysis.sass_flow on each SASS. usage: PYTHONPATH=<tree>/src DS="64 128"
FLAGS="1111" [SHAPES="1,300,2,2 2,1000,8,2"] [PERS="1 0"] [STAGES="2 3"] [J=2] python3 THIS OUTDIR
(FLAGS: split_dq, defer_dq, dq_on_empty, dq_alternate as 0/1; dq_alternate only at d64)."""
import os
import subprocess
import sys
from concurrent.futures import ProcessPoolExecutor

OUT = sys.argv[1]
os.makedirs(OUT, exist_ok=True)
FLAGS = [tuple(c == "1" for c in f) for f in os.environ.get("FLAGS", "1111").split()]
SHAPES = [tuple(map(int, x.split(","))) for x in os.environ.get("SHAPES", "1,300,2,2 2,1000,8,2").split()]
PERS = [p == "1" for p in os.environ.get("PERS", "1 0").split()]
STAGES = [int(x) for x in os.environ.get("STAGES", "2 3").split()]
VARIANTS = []
for d in tuple(int(x) for x in os.environ.get("DS", "64 128").split()):
    for causal in (False, True):
        for b, s, h, hk in SHAPES:
            for pers in PERS:
                for stages in STAGES:
                    for fl in FLAGS:
                        VARIANTS.append((d, causal, b, s, h, hk, pers, stages, fl))

def one(v):
    import torch, triton
    from triton.backends.compiler import GPUTarget
    from triton.experimental.gluon._runtime import GluonASTSource
    from flashtriton.analysis import sass
    from flashtriton.configs import make_params
    from flashtriton.analysis.sass_flow import unset_descriptor_reads
    from flashtriton.kernels import bwd_gluon
    d, causal, b, s, h, hk, pers, stages, (split, defer, empty, alt) = v
    def call():
        q = torch.randn(b, s, h, d, dtype=torch.bfloat16)
        k, vv = (torch.randn(b, s, hk, d, dtype=torch.bfloat16) for _ in range(2))
        lse = torch.empty((b, h, s), dtype=torch.float32)
        bwd_gluon.attn_bwd_gluon(torch.empty_like(q), q, k, vv, lse, lse,
                                 make_params(d, causal=causal), 64, 128, 4, stages,
                                 split_dq=split, persistent=pers, defer_dq=defer,
                                 dq_on_empty=empty, dq_alternate=alt and d == 64)
    l = [x for x in sass.capture_launches(call) if x["name"] == "_attn_bwd_ws"][0]
    src = GluonASTSource(l["fn"], l["signature"], l["constants"], l["attrs"])
    c = triton.compile(src, target=GPUTarget("cuda", 90, 32), options=l["options"])
    name = "_".join(map(str, v[:-1])) + "_" + "".join(str(int(x)) for x in v[-1])
    p = os.path.join(OUT, name)
    open(p + ".cubin", "wb").write(c.asm["cubin"])
    txt = subprocess.run([sass.tool("cuobjdump"), "-sass", p + ".cubin"], capture_output=True,
                         text=True, check=True).stdout
    open(p + ".sass", "w").write(txt)
    bad = [(hex(x["address"]), x["registers"]) for x in unset_descriptor_reads(txt)]
    return name, len(bad), bad[:3]

with ProcessPoolExecutor(int(os.environ.get("J", "8"))) as ex:
    for name, n, bad in ex.map(one, VARIANTS):
        print(f"{name:32s} {n} {bad}", flush=True)
