"""Decode latency of ``flash_attn_with_kvcache`` against torch SDPA and FlexAttention, on a GPU:
the command the earlier results were made with, now a thin wrapper over
``flashtriton bench --decode`` (src/flashtriton/bench/decode.py, which documents the method).

    PYTHONPATH=src python3 scripts/gpu_decode_bench.py [--quick] [--no-flex] [--no-sweep] [--out F]

Writes ``$OUT/decode.json`` by default.
"""

from __future__ import annotations

import argparse
import os
import sys

from flashtriton.bench import decode


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help=f"only {decode.QUICK_SHAPES}")
    parser.add_argument("--no-flex", action="store_true", help="skip FlexAttention")
    parser.add_argument("--no-sweep", action="store_true", help="skip the num_splits sweep")
    parser.add_argument("--out", default=os.path.join(os.environ.get("OUT", "."), "decode.json"))
    args = parser.parse_args(argv)
    import torch

    if not torch.cuda.is_available():
        raise SystemExit("gpu_decode_bench: needs a CUDA GPU (flashtriton bench --decode "
                         "--device cpu makes a dry run)")
    providers = [p for p in decode.PROVIDERS if not (args.no_flex and p == "flex")]
    decode.run(decode.QUICK_SHAPES if args.quick else decode.SHAPES, providers, "cuda",
               out=args.out, sweep_shapes=() if args.no_sweep else decode.SWEEP_SHAPES,
               print_fn=lambda s: print(s, flush=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
