#!/usr/bin/env python3
"""check_pieces.py: among small allocations of mixed sizes, the plan streams
pieces of one size, so every restore maps ahead onto a departing piece's
memory and the window holds two pieces.

usage: check_pieces.py OFFLOAD_CYCLE SHIM WORK_DIR

Runs the sweep's DiT at 75%, ratio 1 (`OFFLOAD_CYCLE SHIM sweep --cell dit
75 1 LOG --warmup 16`, on the virtual clock): sixteen blocks of 6, 2, 8 and
8 MiB tensors under a 288 MiB limit, compute equal to F / B. Planned whole,
one tensor kept a head and its tail swapped with whole 8 MiB tensors, a
restore of unlike size that waited for its departure, then released,
created, mapped and granted before its copy: 1.050 x the bound. In pieces
of 6 MiB (shim/offload_prefetch.c, `vs_prefetch_piece`; the 8 MiB tensors
the plan streams keep 2 MiB heads) every restore is mapped ahead onto a
departing piece: 1.025 x, bringing in F exactly.

Checks: the child exits 0 with every word read back as loaded, and the
sweep's verdict on the cell, from its unrounded figures: a pass in at most
1.05 x the bound, at most 1.02 x F brought in, nothing clean copied back.
Exit 0 when all of it holds, 1 otherwise.
"""
import sys

from cell_check import check_main, goals_judge

if __name__ == "__main__":
    sys.exit(check_main("check_pieces", __doc__, "dit", 75, 1.0, 16, goals_judge("check_pieces")))
