"""Session 34: executed instructions by opcode, from two Nsight Compute source pages (CSV, as
written by `ncu --import R --page source --print-source sass --csv | gzip`), side by side.
usage: python3 THIS A-source.csv.gz B-source.csv.gz"""
import collections
import csv
import gzip
import re
import sys


def by_opcode(path):
    rows = list(csv.reader(gzip.open(path, "rt")))
    head = rows[1]
    n_col, src_col = head.index("Instructions Executed"), head.index("Source")
    count = collections.Counter()
    for r in rows[2:]:
        if len(r) > n_col:
            m = re.match(r"(@!?U?P\w+\s+)?([A-Z0-9_]+)", r[src_col].strip())
            count[m.group(2) if m else r[src_col]] += int(r[n_col] or 0)
    return count


a, b = by_opcode(sys.argv[1]), by_opcode(sys.argv[2])
ta, tb = sum(a.values()), sum(b.values())
print(f"{'all':12s} {ta:>14,} {tb:>14,} {100 * (tb / ta - 1):+.2f}%")
for op in sorted(set(a) | set(b), key=lambda o: -max(a[o], b[o]))[:40]:
    print(f"{op:12s} {a[op]:>14,} {100 * a[op] / ta:5.1f}%  {b[op]:>14,} {100 * b[op] / tb:5.1f}%"
          f"  {b[op] - a[op]:>+13,}")
