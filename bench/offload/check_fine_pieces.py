#!/usr/bin/env python3
"""check_fine_pieces.py: near the balance point the plan streams pieces of
half the largest size, finer than the second largest, where they carry the
stream, and their restores map ahead onto the departure under way.

usage: check_fine_pieces.py OFFLOAD_CYCLE SHIM WORK_DIR

Runs the sweep's DiT at 50%, ratio 1 (`OFFLOAD_CYCLE SHIM sweep --cell dit
50 1 LOG --warmup 24`, on the virtual clock): sixteen blocks of 6, 2, 8 and
8 MiB tensors under half their bytes, compute equal to F / B. In 6 MiB
pieces (the second largest size) the plan's room comes in 6 MiB steps: 35
pieces with two in the room took 1.082 x the bound, the link waiting for
the kernels whose pieces' memory the next restores map, and one piece more
brings in 1.029 x F, over the goal. In 4 MiB pieces (the 8 MiB tensors keep
4 MiB heads, the 6 MiB ones 2 MiB) with whole 2 MiB tensors filling the
stream, their restores mapped and granted ahead onto the departing piece
(shim/offload_prefetch.c, `vs_prefetch_fine_piece`): 1.025 x, in 1.019 x F.

Checks: the child exits 0 with every word read back as loaded; the shim's
exit summary's details name 4 MiB pieces with 2 MiB fillers as its last plan in
pieces, and counts restores mapped ahead; the sweep's verdict on the cell,
from its unrounded figures: a pass in at most 1.05 x the bound, at most
1.02 x F brought in, nothing clean copied back. Exit 0 when all of it
holds, 1 otherwise.
"""
import re
import sys

from cell_check import check_main, goals_judge, read_cell_log

NAME = "check_fine_pieces"
WORKLOAD, PERCENT, RATIO = "dit", 50, 1.0
MIB = 1 << 20
PIECES = re.compile(r"; the last plan in pieces: pieces of (?P<pieces>\d+) bytes, fillers of (?P<fillers>\d+) bytes")
MAPPED_AHEAD = re.compile(r", restores mapped ahead (?P<n>\d+)")


def judge(row):
    failures = goals_judge(NAME)(row)
    text = read_cell_log(NAME, sys.argv[3], WORKLOAD, PERCENT, RATIO)
    if text is None:
        return 1
    pieces, ahead = PIECES.search(text), MAPPED_AHEAD.search(text)
    sizes = (int(pieces.group("pieces")), int(pieces.group("fillers"))) if pieces else None
    mapped = int(ahead.group("n")) if ahead else 0
    print(f"{NAME}: the last plan in pieces (pieces, fillers): {sizes}; restores mapped ahead: {mapped}")
    if sizes != (4 * MIB, 2 * MIB):
        print(f"{NAME}: FAILED: the last plan in pieces was not of 4 MiB pieces with 2 MiB fillers")
        failures = 1
    if mapped == 0:
        print(f"{NAME}: FAILED: no restore was mapped ahead")
        failures = 1
    return failures


if __name__ == "__main__":
    sys.exit(check_main(NAME, __doc__, WORKLOAD, PERCENT, RATIO, 24, judge, details=True))
