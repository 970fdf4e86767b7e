#!/usr/bin/env python3
"""check_arrival_thread.py: a restore ahead of need makes its grant, copies
in and hash on the engine's arrival thread (shim/offload_arrive.c), not on
the thread that launches.

usage: check_arrival_thread.py OFFLOAD_CYCLE SHIM WORK_DIR

Runs the sweep's LLM at 25%, ratio 1 (`OFFLOAD_CYCLE SHIM sweep --cell llm
25 1 LOG`, 48 warm-up passes, on the virtual clock, with the default host
costs): twelve blocks of 6, 2, 8 and 8 MiB weights and a written 4 MiB KV
cache, then a 16 MiB LM head, with compute equal to F / B. Every restore
needs a grant (42 us on an H100): made on the launching thread, the 46
grants a pass of the balanced plan are half of that thread's own work,
the launches come late, and the cell takes 1.080 x the bound. On the
arrival thread it takes 1.026 to 1.037 x, under the sweep's goal of 1.05,
with the coarse plan the regime meter keeps there (seven KV caches
streamed instead of three and eight 2 MiB weights, each swapped with
another KV cache's memory). The hand-offs are events, so the thread is
timed on its own host clock.

Exit 0 when the child read every word back as loaded and the cell takes at
most 1.065 x the bound (1.080 on the launching thread), brings in at most
1.02 x F and copies back at most the 28 MiB a pass of the seven KV caches
it streams, each written every pass (the balanced plan's three copy back
12 MiB; `cell_check.ceiling_judge`), 1 otherwise.
"""
import sys

from cell_check import ceiling_judge, check_main

if __name__ == "__main__":
    sys.exit(check_main("check_arrival_thread", __doc__, "llm", 25, 1.0, 48,
                        ceiling_judge("check_arrival_thread", 1.065, max_out_mib=28.0)))
