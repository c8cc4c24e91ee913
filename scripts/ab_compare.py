"""Side by side: two scripts/tune.py results files (the same sweep on two trees, see
scripts/gpu_ab.sh), one line per (pass, head dim, seqlen, causal, config) with both TFLOP/s,
new / old, and each run's cuDNN figure for the shape (the runs are separate processes, so the
peer shows how far the clock moved between them).

    python3 scripts/ab_compare.py OLD.json NEW.json
"""

from __future__ import annotations

import json
import sys

# the configs' on/off flags a label names, and every field that tells two configs apart
FLAGS = ("pingpong", "split_dq", "defer_dq", "dq_on_empty", "dq_alternate", "persistent")
CONFIG_FIELDS = ("block_m", "block_n", "num_warps", "num_stages", "gluon", *FLAGS, "tile_order")


def load(path: str) -> tuple[dict, dict]:
    """(config rows, cuDNN rows) keyed by shape (and config)."""
    with open(path) as f:
        rows = json.load(f)["results"]
    configs, peers = {}, {}
    for r in rows:
        shape = (r.get("pass_"), r.get("headdim"), r.get("seqlen"), r.get("causal"))
        if "provider" in r:
            peers[shape] = r.get("tflops")
        else:
            cfg = tuple((k, r.get(k)) for k in CONFIG_FIELDS)
            configs[shape + (cfg,)] = r.get("tflops") if r.get("status") == "ok" else r.get("status")
    return configs, peers


def label(cfg: tuple) -> str:
    d = dict(cfg)
    flags = [k for k in FLAGS if d.get(k)]
    order = [d["tile_order"]] if d.get("tile_order") else []
    return f"{d['block_m']}x{d['block_n']} w{d['num_warps']} s{d['num_stages']} " + \
        " ".join(flags + order)


def fmt(x) -> str:
    return f"{x:8.1f}" if isinstance(x, (int, float)) else f"{str(x):>8}"


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    (old, old_peer), (new, new_peer) = load(argv[0]), load(argv[1])
    print(f"{'pass':4} {'d':>3} {'seqlen':>6} {'causal':6} {'config':34} {'old':>8} {'new':>8} "
          f"{'new/old':>7} {'cuDNN old / new':>17}")
    for key in sorted(set(old) | set(new), key=lambda k: (str(k[0]), k[1], k[2], str(k[3]),
                                                          str(k[4]))):
        p, d, s, c, cfg = key
        a, b = old.get(key, "-"), new.get(key, "-")
        ratio = f"{b / a:7.3f}" if isinstance(a, float) and isinstance(b, float) else f"{'':7}"
        peers = f"{fmt(old_peer.get(key[:4], '-'))} / {fmt(new_peer.get(key[:4], '-')).strip()}"
        print(f"{p:4} {d:3} {s:6} {str(c):6} {label(cfg):34} {fmt(a)} {fmt(b)} {ratio} {peers:>17}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
