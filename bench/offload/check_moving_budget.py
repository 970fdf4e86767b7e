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
import os
import re
import subprocess
import sys

ROW = re.compile(r"^churn\s+50%\s+0\.50\s+[\d.]+\s+(?P<in_mib>[\d.]+)\s+(?P<in_f>[\d.]+)\s+(?P<out_mib>[\d.]+)"
                 r"\s+[\d.]+\s+[\d.]+\s+(?P<bound>[\d.]+)\s", re.M)


def main():
    if len(sys.argv) != 4:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    program, shim, work = sys.argv[1:4]
    os.makedirs(work, exist_ok=True)
    log = os.path.join(work, "churn_50_0.5.log")
    run = subprocess.run([program, shim, "sweep", "--cell", "churn", "50", "0.5", log, "--warmup", "8"],
                         capture_output=True, text=True)
    sys.stdout.write(run.stdout)
    if run.returncode != 0:
        print(f"check_moving_budget: FAILED: exit status {run.returncode}: {run.stderr.strip()}")
        return 1
    row = ROW.search(run.stdout)
    if row is None:
        print("check_moving_budget: FAILED: no churn row in the output above")
        return 1
    out = float(row.group("out_mib"))
    print(f"check_moving_budget: in {row.group('in_f')} x F, {row.group('bound')} x the bound, "
          f"copied back {out} MiB a pass")
    if out != 0.0:
        print(f"check_moving_budget: FAILED: {out} MiB a pass of read-only layers copied back")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
