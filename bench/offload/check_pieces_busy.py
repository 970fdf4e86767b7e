#!/usr/bin/env python3
"""check_pieces_busy.py: under a busy GPU's host costs, where the host falls
behind the GPU, pieces of one size still map every restore ahead onto a
departing piece's memory, and the regime meter keeps them.

usage: check_pieces_busy.py OFFLOAD_CYCLE SHIM WORK_DIR

Runs the sweep's DiT at 75%, ratio 0.75 (`OFFLOAD_CYCLE SHIM sweep --cell
dit 75 0.75 LOG --warmup 16`, on the virtual clock: a link-bound cycle) with
simcuda's host costs from tests/simcuda/costs/h200-busy.txt (an H200 with a
kernel and a copy running: a grant 110 us, an unmap 59). The departure
before a step had always ended by then, and a step that found only the one
it had just started left its restore to the next step, which unmapped the
ended victim, then mapped and granted the restore's memory with the link
idle: 1.48 x the bound in pieces, which the regime meter gave up for the
balanced plan (1.123 x the bound, 1.123 x F brought in). With the restore
mapped ahead onto the departure under way (shim/offload_prefetch.c,
`vs_prefetch_lend_single`), the pieces take 1.000 x, bringing in F.

Exit 0 when the child read every word back as loaded and the sweep's
verdict on the cell is "met" (`cell_check.goals_judge`), 1 otherwise.
"""
import os
import sys

from cell_check import check_main, goals_judge

if __name__ == "__main__":
    costs = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "simcuda", "costs",
                         "h200-busy.txt")
    os.environ["SIMCUDA_HOST_COSTS"] = os.path.normpath(costs)
    sys.exit(check_main("check_pieces_busy", __doc__, "dit", 75, 0.75, 16, goals_judge("check_pieces_busy")))
