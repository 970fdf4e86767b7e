#!/usr/bin/env python3
"""check_fine_pieces_busy.py: where a busy GPU's host costs make the fine
pieces slower than the balanced plan, the pieces of the second largest size
take their place before the regime meter gives the lean plan up.

usage: check_fine_pieces_busy.py OFFLOAD_CYCLE SHIM WORK_DIR

Runs the sweep's DiT at 75%, ratio 1.33 (`OFFLOAD_CYCLE SHIM sweep --cell
dit 75 1.33 LOG --warmup 24`, on the virtual clock: near the balance point)
with simcuda's host costs from tests/simcuda/costs/h200-busy.txt (a grant
110 us, against a 4 MiB piece's 84 us copy). The lean plan is tried in 4 MiB
pieces first (shim/offload_prefetch.c, `vs_prefetch_fine_piece`) and timed
slower (about 42.8 against 40.6 us an operation). Going back to whole
allocations then brought in 1.123 x F and missed; in 6 MiB pieces
(`vs_prefetch_fine_piece_slower`) the cell takes 1.019 x the bound, bringing
in F.

Checks: the child exits 0 with every word read back as loaded; the shim's
log says the fine pieces gave way to the second largest's; the sweep's
verdict on the cell is "met" (`cell_check.goals_judge`). Exit 0 when all of
it holds, 1 otherwise.
"""
import os
import sys

from cell_check import check_main, goals_judge, read_cell_log

NAME = "check_fine_pieces_busy"
WORKLOAD, PERCENT, RATIO = "dit", 75, 1.33
GAVE_WAY = "in fine pieces, the cycle takes"


def judge(row):
    failures = goals_judge(NAME)(row)
    log = read_cell_log(NAME, sys.argv[3], WORKLOAD, PERCENT, RATIO)
    if log is None:
        return 1
    lines = [line for line in log.splitlines() if GAVE_WAY in line]
    for line in lines:
        print(f"{NAME}: {line.strip()}")
    if not any("pieces of the second largest size instead" in line for line in lines):
        print(f"{NAME}: FAILED: the log never says that the fine pieces gave way to the second largest's")
        failures = 1
    return failures


if __name__ == "__main__":
    costs = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "simcuda", "costs",
                         "h200-busy.txt")
    os.environ["SIMCUDA_HOST_COSTS"] = os.path.normpath(costs)
    sys.exit(check_main(NAME, __doc__, WORKLOAD, PERCENT, RATIO, 24, judge))
