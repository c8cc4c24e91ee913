"""`flashtriton bench`: flashtriton timed against its peers on the FlashAttention papers' grid.

- providers.py: the registry of providers and the shared problem setup (`make_inputs`)
- check.py:     the correctness gate every provider passes before it is timed
- harness.py:   the grid, timing, peak memory and the `flashtriton bench` command
- results.py:   the results JSON (schema, FLOP count, read/write/merge)
- report.py:    progress and tables (rich when installed, plain text otherwise)
- plots.py:     PNG plots from a results JSON (matplotlib, imported only when plotting)
- features.py, feature_providers.py: `flashtriton bench --feature ...`, each attention feature
  (varlen, window, softcap, ALiBi, dropout, float8) against the peers that have it
- decode.py:    `flashtriton bench --decode`: flash_attn_with_kvcache against SDPA and
  FlexAttention decoding, latency and HBM bandwidth

Nothing here imports matplotlib or rich at import time.
"""
