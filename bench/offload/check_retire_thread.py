#!/usr/bin/env python3
"""check_retire_thread.py: a departed range whose memory a restore mapped
ahead now owns is unmapped on the engine's own thread (shim/offload_retire.c),
not between the application's wait for a departure and its next launch.

usage: check_retire_thread.py OFFLOAD_CYCLE SHIM WORK_DIR

Runs the sweep's LLM at 50%, ratio 1 (`OFFLOAD_CYCLE SHIM sweep --cell llm
50 1 LOG`, 48 warm-up passes, on the virtual clock, with the default host
costs): twelve blocks of 6, 2, 8 and 8 MiB weights and a written 4 MiB KV
cache, then a 16 MiB LM head, with compute equal to F / B. With those
unmaps (25 us each on an H100) on the launching thread the cell took 1.046
x the bound; on the engine's thread, 1.029 x. The hand-offs are events, so
the engine's thread is timed on its own host clock and the figure repeats
run to run.

Exit 0 when the child read every word back as loaded, the sweep's verdict on
the cell is "met" (`cell_check.goals_judge`) and it takes at most 1.035 x
the bound, 1 otherwise.
"""
import sys

from cell_check import check_main, goals_judge

# Between the two figures above: the thread's gain, with room for a small
# change elsewhere.
MOST = 1.035


def judge(row):
    if goals_judge("check_retire_thread")(row) != 0:
        return 1
    if row["over_bound"] > MOST:
        print(f"check_retire_thread: FAILED: {row['over_bound']:.3f} x the bound, more than {MOST}: "
              "the departed ranges' unmaps are back on the launching thread")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(check_main("check_retire_thread", __doc__, "llm", 50, 1.0, 48, judge))
