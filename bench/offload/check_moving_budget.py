#!/usr/bin/env python3
"""check_moving_budget.py: when what the plan may keep moves (scratch that
comes and goes beside the weights), no eviction copies a clean allocation
back to the host.

usage: check_moving_budget.py OFFLOAD_CYCLE SHIM WORK_DIR

Runs the `churn` cell at 50%, ratio 0.5 (`OFFLOAD_CYCLE SHIM sweep --cell
churn 50 0.5 LOG --warmup 8`, on the virtual clock): sixteen read-only
layers of 36 MiB, each of which may keep a head, beside eight 1 MiB
allocations made every other pass and freed halfway through it. The plan's
head then moves between layers and grows and shrinks. A layer's host copy
keeps the hash of its whole beside its tail's (shim/offload_evict.c), so
the evictions that move only the tail while the layer keeps a head leave
the whole's in place: an eviction that then moves the whole layer (the
head went to another) is judged by it, and drops the layer clean. When the
tail's hash replaced the whole's, each such eviction found no hash of the
whole to judge by and copied the layer out: 18 MiB a pass.

Checks: the child exits 0, every word it reads back is as loaded (the
program's own check), and nothing was copied back in the measured passes
("out MiB" 0). The cell's time and bytes in are printed, not judged (the
moving plan streams more: the sweep's goals are not this check's).
Exit 0 when all of it holds, 1 otherwise.
"""
import sys

from cell_check import check_main


def judge(row):
    out = row["out_mib"]
    print(f"check_moving_budget: in {row['in_f']:.3f} x F, {row['over_bound']:.3f} x the bound, "
          f"copied back {out} MiB a pass")
    if out != 0.0:
        print(f"check_moving_budget: FAILED: {out} MiB a pass of read-only layers copied back")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(check_main("check_moving_budget", __doc__, "churn", 50, 0.5, 8, judge))
