"""Session 43: correlate the S0-prefetch branch's wrong (tile, consumer) blocks with the codes
its debug build writes into lse (FT_S0_DEBUG=1; 2026-12-02-s43-s0-debug.patch): pre (the
tile's first S came from the previous tile), its Q buffer, its first K slot, n_half, n_own, the
tile's ordinal in its program, and (modes 3 and 6) whether a second S from the same buffers
differed. Usage on the GPU machine: FT_S0_DEBUG=1 FT_S0_MODE=N OUT=out python3 this.py TREE"""
import json, os, runpy, sys
from collections import Counter, defaultdict
tree = sys.argv[1]
sys.path.insert(0, os.path.join(tree, "src"))
import torch
from flashtriton.configs import make_params
from flashtriton.kernels.fwd_gluon import attn_fwd_gluon

# the float64 reference of 2026-12-02-s43-s0-diag.py (its own runs only under __main__)
ref = runpy.run_path(os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                  "2026-12-02-s43-s0-diag.py"))["ref"]


torch.manual_seed(0)
out_all = {}
for name, (b, s, h), blocks in [("S2pers", (4, 1000, 32), (128, 128, 4, 2, False, True)),
                                 ("S2pers-head", (2, 2049, 24), (128, 128, 4, 2, False, True, "head"))]:
    q, k, v = (torch.randn(b, s, h, 64, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    o64, _ = ref(q, k, v)
    out, lse = attn_fwd_gluon(q, k, v, make_params(64, causal=True), *blocks, half_tail=True)
    torch.cuda.synchronize()
    err = (out.double() - o64).abs().amax(-1).cpu()  # (b, s, h)
    lse = lse.float().cpu()  # (b, h, s): the codes
    stats = defaultdict(Counter)
    rows = []
    for bb in range(b):
        for hh in range(h):
            for r0 in range(0, s, 64):
                code = int(lse[bb, hh, r0].item())
                bad = bool((err[bb, r0:r0 + 64, hh] > 0.1).any())
                f = {"pre": code & 1, "qbuf": (code >> 1) & 1, "kslot": (code >> 2) & 1,
                     "n_half": (code >> 3) & 1, "n_own": (code >> 4) & 63,
                     "local": (code >> 10) & 1023, "chk": code >> 20, "cons": (r0 % 128) // 64}
                for key, val in f.items():
                    stats[key][(val, bad)] += 1
                rows.append([bb, hh, r0, code, bad])
    out_all[name] = rows
    print(f"== mode {os.environ.get('FT_S0_MODE')} {name}: bad blocks "
          f"{sum(r[4] for r in rows)} of {len(rows)}")
    for key in ("pre", "qbuf", "kslot", "n_half", "n_own", "local", "chk", "cons"):
        vals = sorted({v for v, _ in stats[key]})
        print(f"  {key:6s} " + "  ".join(
            f"{v}:{stats[key][(v, True)]}/{stats[key][(v, True)] + stats[key][(v, False)]}"
            for v in vals[:20]))
json.dump(out_all, open(os.path.join(os.environ["OUT"],
                                     f"s0diag2-mode{os.environ.get('FT_S0_MODE')}.json"), "w"))
