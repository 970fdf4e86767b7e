#!/usr/bin/env python3
"""check_fillers.py: where pieces of one size cannot carry the stream, the
next size below a piece fills it, streamed whole, and the memory of the
filler that left last is held for the next one's restore.

usage: check_fillers.py OFFLOAD_CYCLE SHIM WORK_DIR

Runs the sweep's DiT at 25%, ratio 1 (`OFFLOAD_CYCLE SHIM sweep --cell dit
25 1 LOG --warmup 32`, on the virtual clock): sixteen blocks of 6, 2, 8 and
8 MiB tensors under a 96 MiB limit, compute equal to F / B. The 6 MiB
pieces (the 8 MiB tensors keep 2 MiB heads) carry 288 MiB, short of the
stream: planned whole, the cell brought in 1.039 x F (the whole tensors
round the room up) and missed. In pieces filled with whole 2 MiB tensors,
with an engine that swapped them with the pieces' memory, each block's 2 MiB
restore took its room from a 6 MiB departure and the next 6 MiB tail
created its memory: 1.24 x the bound. With the fillers' memory held
between their uses (shim/offload_device.c, `vs_engine_filler_hold`) every
swap is of one size: 1.037 x, in 1.020 x F. Near the balance point the
engine asks first for pieces of half the largest (4 MiB,
`vs_prefetch_fine_piece`), which carry only 224 MiB here: the policy
refuses them and the 6 MiB pieces follow, so the cell checks that too.

Checks: the child exits 0 with every word read back as loaded; the shim's
exit summary's details count restores onto held filler memory; the sweep's verdict
on the cell, from its unrounded figures: a pass in at most 1.05 x the bound,
at most 1.02 x F brought in, nothing clean copied back. Exit 0 when all of
it holds, 1 otherwise.
"""
import re
import sys

from cell_check import check_main, goals_judge, read_cell_log

NAME = "check_fillers"
WORKLOAD, PERCENT, RATIO = "dit", 25, 1.0
FILLER_MAPS = re.compile(r", restores onto held filler memory (?P<n>\d+)")


def judge(row):
    failures = goals_judge(NAME)(row)
    log = read_cell_log(NAME, sys.argv[3], WORKLOAD, PERCENT, RATIO)
    if log is None:
        return 1
    found = FILLER_MAPS.search(log)
    maps = int(found.group("n")) if found else 0
    print(f"{NAME}: restores onto held filler memory: {maps}")
    if maps == 0:
        print(f"{NAME}: FAILED: no restore mapped the memory held since a filler's departure")
        failures = 1
    return failures


if __name__ == "__main__":
    sys.exit(check_main(NAME, __doc__, WORKLOAD, PERCENT, RATIO, 32, judge, details=True))
