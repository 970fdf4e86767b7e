#!/usr/bin/env python3
"""check_equal_heads.py: where the plan keeps no layer whole, every streamed
layer keeps a head of one size and its tail is mapped ahead onto a departing
layer's tail, so the link never waits a compute slot for room.

usage: check_equal_heads.py OFFLOAD_CYCLE SHIM WORK_DIR

Runs the sweep's cycle at 25%, ratio 1 (`OFFLOAD_CYCLE SHIM sweep --cell
cycle 25 1 LOG --warmup 8`, on the virtual clock): twelve 32 MiB layers
under a 96 MiB limit, compute equal to F / B. The budget holds two whole
layers and 30 MiB. With that 30 MiB as one layer's head the link waited for
room once a pass after the head's 2 MiB tail, for most of a layer's compute
(1.071 x the bound); with 2 MiB on each layer (shim/offload_device.c,
`vs_engine_keep_equal`) every copy is one 30 MiB tail, about a layer's
compute.

Checks: the child exits 0 with every word read back as loaded, and the
sweep's verdict on the cell, from its unrounded figures: a pass in at most
1.05 x the bound, at most 1.02 x F brought in, nothing clean copied back.
Exit 0 when all of it holds, 1 otherwise.
"""
import sys

from cell_check import check_main, goals_judge

if __name__ == "__main__":
    sys.exit(check_main("check_equal_heads", __doc__, "cycle", 25, 1.0, 8, goals_judge("check_equal_heads")))
