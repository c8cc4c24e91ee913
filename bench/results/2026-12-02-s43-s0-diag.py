"""Session 43: which rows the S0-prefetch branch gets wrong (debugging; the kernel tree's
fwd_gluon reads FT_S0_MODE, see 2026-12-02-s43-s0-debug.patch). Usage on the GPU machine:
FT_S0_MODE=0 OUT=out python3 this.py TREE"""
import json, os, sys
from collections import Counter
tree = sys.argv[1]
sys.path.insert(0, os.path.join(tree, "src"))
import torch
from flashtriton.configs import make_params
from flashtriton.kernels.fwd_gluon import attn_fwd_gluon


def ref(q, k, v):
    b, s, h, d = q.shape
    qd, kd, vd = (x.double().transpose(1, 2) for x in (q, k, v))
    sc = qd @ kd.transpose(-1, -2) / d ** 0.5
    mask = torch.ones(s, k.shape[1], dtype=torch.bool, device=q.device).tril(k.shape[1] - s)
    sc = sc.masked_fill(~mask, float("-inf"))
    lse = torch.logsumexp(sc, -1)
    return (sc.softmax(-1) @ vd).transpose(1, 2), lse


CASES = {
    "b4-1000-h32-S2pers": ((4, 1000, 32), (128, 128, 4, 2, False, True)),
    "b2-2049-h24-S2pers-head": ((2, 2049, 24), (128, 128, 4, 2, False, True, "head")),
    "b4-1000-h32-PPpers-greedy": ((4, 1000, 32), (128, 128, 4, 2, True, True, "greedy")),
}
if __name__ == "__main__":
    res = {}
    torch.manual_seed(0)
    for name, ((b, s, h), blocks) in CASES.items():
        q, k, v = (torch.randn(b, s, h, 64, device="cuda", dtype=torch.bfloat16)
                   for _ in range(3))
        o64, lse64 = ref(q, k, v)
        for half in (False, True):
            runs = []
            for rep in range(3):
                out, lse = attn_fwd_gluon(q, k, v, make_params(64, causal=True), *blocks,
                                          half_tail=half)
                torch.cuda.synchronize()
                err = (out.double() - o64).abs().amax(-1)  # (b, s, h)
                bad = (err > 0.1).nonzero().tolist()
                pat = Counter((r // 128, (r % 128) // 64) for _, r, _ in bad)
                cons = Counter((r % 128) // 64 for _, r, _ in bad)
                runs.append({"max_err": float(err.max()), "bad_rows": len(bad),
                             "bad_tiles": len({(bb, r // 128, hh) for bb, r, hh in bad}),
                             "by_consumer": dict(cons),
                             "by_tile_consumer": {f"{t}/{c}": n for (t, c), n in sorted(pat.items())},
                             "first_bad": bad[:5]})
            res[f"{name}-{'half' if half else 'whole'}"] = runs
            r0 = runs[0]
            print(f"mode {os.environ.get('FT_S0_MODE')} {name} half={half}: max_err "
                  f"{[round(r['max_err'], 3) for r in runs]} bad rows "
                  f"{[r['bad_rows'] for r in runs]} tiles {[r['bad_tiles'] for r in runs]} "
                  f"consumers {r0['by_consumer']}", flush=True)
    json.dump(res, open(os.path.join(os.environ["OUT"],
                                     f"s0diag-mode{os.environ.get('FT_S0_MODE')}.json"), "w"),
              indent=1)
